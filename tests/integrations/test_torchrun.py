"""torchrun --nproc_per_node=2 -m torchleak run --out DIR: one run, one trace per rank,
rank 0 alone speaks for every rank, and `report` says which rank leaks."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from torchleak.errors import TraceError
from torchleak.trace.judgements import judgement

pytestmark = pytest.mark.integrations


def torchleak(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchleak", *args], text=True,
                          capture_output=True, timeout=120)


def test_one_run_folder_with_a_trace_per_rank(framework_runs) -> None:
    run = framework_runs.get("torchrun")
    assert run.proc.returncode == 0, run.output[-3000:]  # the script's own exit code
    launch = run.folder / "launch"
    assert sorted(p.parent.name for p in launch.glob("rank*/trace.sqlite")) == ["rank0", "rank1"]
    assert not (launch / "trace.sqlite").exists()


def test_rank_0_alone_prints_one_summary_for_both_ranks(framework_runs) -> None:
    err = framework_runs.get("torchrun").proc.stderr
    assert err.count("torchleak: recording") == 1 and err.count("torchleak: LEAK after") == 1
    assert re.search(r"rank 1 grows \+[\d.]+ KiB/step; rank 0 flat", err)
    assert "rank 1: LEAK after 60 steps: local kept in main()" in err
    assert "rank 0: no leak" not in err  # a flat rank is counted, not given a line
    assert "traces of 2 ranks in launch" in err


def test_report_covers_every_rank(framework_runs) -> None:
    launch = framework_runs.get("torchrun").folder / "launch"
    text = torchleak("report", str(launch))
    assert text.returncode == 0, text.stderr
    assert "2 ranks: 2 finished" in text.stdout
    assert re.search(r"^verdicts: 1 no_leak, 1 leak \(judged: 2 final\)$", text.stdout, re.M)
    assert re.search(r"^1\s+\| finished\s+\| 60\s+\| \+[\d.]+ KiB/step \| local kept in main\(\)",
                     text.stdout, re.M)
    assert not re.search(r"^0\s+\|", text.stdout, re.M)  # the flat rank has no row
    assert "rank 1: local kept in main()" in text.stdout  # rank 1's finding, with its fix
    data = json.loads(torchleak("report", str(launch), "--format", "json").stdout)
    assert data["verdict"] == "leak"
    assert [(r["rank"], r["verdict"], r["source"]) for r in data["ranks"]] == [(1, "leak", "final")]
    assert data["job"]["leaking"] == [1] and data["job"]["flat"] == "0"
    assert {s["name"] for s in data["signals"]} >= {"rank0_main_uss", "rank1_main_uss"}
    html = torchleak("report", str(launch), "-o", str(launch / "report.html"))
    assert html.returncode == 0
    page = (launch / "report.html").read_text()
    assert 'id="ranks"' in page and "main USS per rank" in page


def test_report_of_one_rank(framework_runs) -> None:
    launch = framework_runs.get("torchrun").folder / "launch"
    one = json.loads(torchleak("report", str(launch), "--rank", "1", "--format", "json").stdout)
    assert one["verdict"] == "leak" and not one["job"] and one["run"]["rank"] == 1
    assert one["findings"][0]["culprit"].startswith("local kept in main()")
    other = json.loads(torchleak("report", str(launch), "--rank", "0", "--format", "json").stdout)
    assert other["verdict"] == "no_leak" and other["run"]["rank"] == 0
    missing = torchleak("report", str(launch), "--rank", "7")
    assert missing.returncode != 0 and "no rank 7 (its ranks: 0-1)" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_top_once_shows_every_rank_and_follows_one(framework_runs) -> None:
    launch = framework_runs.get("torchrun").folder / "launch"
    frame = torchleak("top", "--once", str(launch))
    assert frame.returncode == 0, frame.stderr
    assert "2 ranks: 2 finished" in frame.stdout
    assert re.search(r"^1\s+\| finished\s+\| 60\s+\| \+[\d.]+ KiB/step \| local kept in main\(\)",
                     frame.stdout, re.M)
    assert re.search(r"^verdict: leak - rank 1 grows \+[\d.]+ KiB/step; rank 0 flat$",
                     frame.stdout, re.M)
    assert "rank 1: local kept in main()" in frame.stdout  # the worst rank's finding
    one = torchleak("top", "--once", str(launch), "--rank", "1")
    assert one.returncode == 0 and re.search(r"^verdict: leak", one.stdout, re.M)
    assert "local kept in main()" in one.stdout and "2 ranks" not in one.stdout
    flat = torchleak("top", "--once", str(launch), "--rank", "0")
    assert re.search(r"^verdict: no_leak", flat.stdout, re.M)


def test_ls_shows_one_run_with_two_ranks(framework_runs, tmp_path: Path) -> None:
    launch = framework_runs.get("torchrun").folder / "launch"
    listing = torchleak("ls", "--runs-dir", str(launch.parent), "--format", "json")
    runs = json.loads(listing.stdout)
    (ours,) = [r for r in runs if Path(r["path"]).name == "launch"]
    assert ours["ranks"] == 2 and ours["verdict"] == "leak: rank 1"
    assert ours["status"] == "2 finished"


def killed_copy(launch: Path, folder: Path, ranks: dict[int, int] | None = None) -> Path:
    """The job as a kill -9 leaves it: no rank stored its final report, and each holds the
    live detector's judgement of its last pass, here the one the run reached at its end.
    ``ranks``: rank -> the recorded rank it is a copy of (a bigger job from the same two)."""
    for rank, source in (ranks or {0: 0, 1: 1}).items():
        (folder / f"rank{rank}").mkdir(parents=True)
        for name in ("trace.sqlite", "trace.lock"):  # the lock: nobody holds it any more
            shutil.copyfile(launch / f"rank{source}" / name, folder / f"rank{rank}" / name)
    for trace in folder.glob("rank*/trace.sqlite"):
        conn = sqlite3.connect(trace)
        # The final judgement becomes the live one of the last pass (no tier: every
        # serious finding of it stands, as it does in the final report).
        conn.execute("DELETE FROM judgements WHERE phase = 'live'")
        conn.execute("UPDATE judgements SET phase = 'live' WHERE phase = 'final'")
        conn.execute("DELETE FROM meta WHERE key IN ('end_time', 'exit_code')")
        conn.execute("UPDATE meta SET value = '\"running\"' WHERE key = 'status'")
        conn.commit()
        conn.close()
    return folder


def test_a_killed_job_is_judged_from_the_stored_live_judgement(framework_runs,
                                                                 tmp_path: Path) -> None:
    job = killed_copy(framework_runs.get("torchrun").folder / "launch", tmp_path / "job")
    conn = sqlite3.connect(job / "rank1" / "trace.sqlite")  # a rate no analysis would measure
    report = json.loads(conn.execute("SELECT report FROM judgements").fetchone()[0])
    for finding in report["findings"]:
        if finding["severity"] != "low":
            finding["bytes_per_step"] = 12345.0
    conn.execute("UPDATE judgements SET report = ?", (json.dumps(report),))
    conn.commit()
    conn.close()
    data = json.loads(torchleak("report", str(job), "--format", "json").stdout)
    assert data["verdict"] == "leak" and data["job"]["status"] == {"killed": 2}
    assert data["job"]["sources"] == {"live": 2}
    (line,) = data["ranks"]
    assert (line["rank"], line["status"], line["source"], line["judged_at"]) == (1, "killed",
                                                                                 "live", 60)
    assert line["bytes_per_step"] == 12345.0  # the stored judgement, not a new analysis
    ours = [f for f in data["findings"] if f["culprit"].startswith("rank 1: local kept in main()")]
    assert [f["bytes_per_step"] for f in ours] == [12345.0]
    text = torchleak("report", str(job)).stdout
    assert "The run was killed at step 60. rank 1 grows +12.1 KiB/step; rank 0 flat" in text
    listing = json.loads(torchleak("ls", "--runs-dir", str(tmp_path), "--format", "json").stdout)
    assert [(r["status"], r["verdict"]) for r in listing] == [("2 killed", "leak (live): rank 1")]
    frame = torchleak("top", "--once", str(job)).stdout
    assert "2 ranks: 2 killed" in frame and "+12.1 KiB/step" in frame


def test_a_killed_job_without_a_live_judgement_is_analysed(framework_runs,
                                                           tmp_path: Path) -> None:
    job = killed_copy(framework_runs.get("torchrun").folder / "launch", tmp_path / "job")
    for trace in job.glob("rank*/trace.sqlite"):  # the detector never got to a pass
        conn = sqlite3.connect(trace)
        conn.execute("DELETE FROM judgements")
        conn.commit()
        conn.close()
    data = json.loads(torchleak("report", str(job), "--format", "json").stdout)
    assert data["job"]["sources"] == {"analysed now": 2}
    assert [(r["rank"], r["source"]) for r in data["ranks"]] == [(1, "analysed now")]
    assert data["ranks"][0]["top_finding"].startswith("local kept in main()")


def test_output_is_sized_by_the_leaking_ranks_not_the_job(framework_runs, tmp_path: Path) -> None:
    """The same two leaking ranks in a job of 8 and of 48 (read by a process pool)."""
    launch = framework_runs.get("torchrun").folder / "launch"
    sizes = {}
    for count in (8, 48):
        leaking = {3, count - 2}
        job = killed_copy(launch, tmp_path / str(count) / "job",
                          {rank: int(rank in leaking) for rank in range(count)})
        text = torchleak("report", str(job))
        data = json.loads(torchleak("report", str(job), "--format", "json").stdout)
        assert sorted(r["rank"] for r in data["ranks"]) == sorted(leaking)
        assert data["job"]["verdicts"] == {"no_leak": count - 2, "leak": 2}
        assert f"ranks 0-2, 4-{count - 3}, {count - 1} flat" in text.stdout
        assert torchleak("report", str(job), "-o", str(tmp_path / f"{count}.html")).returncode == 0
        sizes[count] = (len(text.stdout.splitlines()), len(json.dumps(data)),
                        (tmp_path / f"{count}.html").stat().st_size)
        frame = torchleak("top", "--once", str(job)).stdout
        assert len(frame.splitlines()) < 60 and f"{count} ranks: {count} killed" in frame
    assert sizes[48][0] == sizes[8][0] < 100  # lines of text: the same for 6x the ranks
    assert abs(sizes[48][1] - sizes[8][1]) < 200  # JSON: only the rank numbers differ
    assert abs(sizes[48][2] - sizes[8][2]) < 2000  # HTML likewise (the ranks' lines too)


def _live_verdict(trace: Path) -> str | None:
    """The live detector's verdict once it has judged past the warm-up, else None."""
    try:
        conn = sqlite3.connect(f"file:{trace}?mode=ro", uri=True, timeout=5)
        try:
            live = judgement(conn, "live", report=False)
        finally:
            conn.close()
    except (sqlite3.Error, TraceError):
        return None  # not created yet, its tables not yet made, or busy: ask again
    return live.verdict if live is not None and (live.step or 0) >= 256 else None


def _pid(trace: Path) -> int:
    conn = sqlite3.connect(f"file:{trace}?mode=ro", uri=True, timeout=5)
    try:
        return int(json.loads(conn.execute("SELECT value FROM meta WHERE key = 'pid'")
                              .fetchone()[0]))
    finally:
        conn.close()


def test_a_job_killed_for_real_is_reported_from_its_live_judgements(tmp_path: Path) -> None:
    """kill -9 every rank once the live detector has judged both: nobody stores a report."""
    script = Path(__file__).parent / "scripts" / "ddp_loop.py"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                             "-m", "torchleak", "run", "--quiet", "--out", "job", str(script),
                             "1000000"], cwd=tmp_path, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    traces = [tmp_path / "job" / f"rank{rank}" / "trace.sqlite" for rank in (0, 1)]
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 240  # a generous bound for a busy machine, not a measure
        while [_live_verdict(t) for t in traces] != ["no_leak", "leak"]:
            assert proc.poll() is None and time.monotonic() < deadline, "no live judgements"
            time.sleep(0.2)
        pids = [_pid(t) for t in traces]
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=120)
    finally:
        # The ranks run in sessions of their own: killing the agent's group leaves them
        # running (a failed wait above never learnt their pids).
        with contextlib.suppress(psutil.Error):
            pids += [child.pid for child in psutil.Process(proc.pid).children(recursive=True)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    data = json.loads(torchleak("report", str(tmp_path / "job"), "--format", "json").stdout)
    assert data["job"]["status"] == {"killed": 2} and data["job"]["flat"] == "0"
    # A leak called live stands whatever came after; the flat rank's judgement stands too
    # unless its memory grew after it (then it is analysed now).
    assert [(r["rank"], r["source"]) for r in data["ranks"]] == [(1, "live")]
    assert data["ranks"][0]["top_finding"].startswith("local kept in main()")
    frame = torchleak("top", "--once", str(tmp_path / "job")).stdout
    assert "2 ranks: 2 killed" in frame and re.search(r"^1\s+\| killed", frame, re.M)
