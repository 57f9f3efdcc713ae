"""``torchleak doctor script.py``: the script's DataLoader settings and Dataset storage
against this machine, and the changes to paste, each with its saving and its reason.

These changes can alter speed or results (worker randomness, numerics), so ``--safe``
never makes them: ``doctor`` proposes, the user decides.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchleak.system.doctor_model import Check, Machine, Proposal
from torchleak.units import format_bytes as fmt
from torchleak.system.script_scan import LoaderCall, ObjectStore, ScriptFacts
from torchleak.system.workers import ASSUMED_BATCH_BYTES, MIN_WORKER_BYTES, worker_cap

# Python-object storage below this is not worth a change.
SMALL_STORE = 8 << 20
SMALL_GPU = 16 << 30


@dataclass(frozen=True)
class ShmNeed:
    bytes: int
    text: str


def _workers(loader: LoaderCall) -> int:
    value = loader.value("num_workers")
    return value if isinstance(value, int) else 0


def _prefetch(loader: LoaderCall) -> int:
    value = loader.value("prefetch_factor")
    return value if isinstance(value, int) and value > 0 else 2


def _big_stores(facts: ScriptFacts, loader: LoaderCall) -> list[ObjectStore]:
    return [s for s in facts.stores_of(loader.dataset_class)
            if s.estimated_bytes is None or s.estimated_bytes >= SMALL_STORE]


def _store_text(store: ObjectStore) -> str:
    size = f", ~{fmt(store.estimated_bytes)}" if store.estimated_bytes else ""
    items = f", {store.items:,} items" if store.items is not None else ""
    return f"{store.class_name}.{store.attr} ({store.kind}{items}{size})"


def _array_storage(store: ObjectStore) -> str:
    if store.fields:
        names = ", ".join(repr(f) for f in store.fields) + ("," if len(store.fields) == 1
                                                            else "")
        return (f"self.{store.attr} = {{key: np.asarray([row[key] for row in rows]) "
                f"for key in ({names})}}  # rows: what built the list; read "
                f"self.{store.attr}[key][index] in __getitem__")
    return (f"self.{store.attr} = np.asarray(...)  # or a pyarrow Table / torch tensors: "
            "no Python object per item")


def _cow_proposal(facts: ScriptFacts, store: ObjectStore, workers: int) -> Proposal:
    low, high = store.touched_bytes, store.estimated_bytes
    if low and high:
        saving = (f"~{fmt(workers * low)}-{fmt(workers * high)} ({workers} workers x "
                  f"~{fmt(low)}-{fmt(high)} each: from the pages of the items' own objects "
                  "to all of their data, estimated)")
    else:
        saving = f"one copy of the data per worker ({workers} workers; size unknown)"
    return Proposal(f"{facts.path}:{store.line}", _array_storage(store), saving,
                    f"{_store_text(store)} is read by {workers} DataLoader workers: "
                    "reading an item writes its reference count, so each worker ends up "
                    "with a private copy of every page it reads (copy-on-read); numpy, "
                    "arrow or tensor storage has no per-item objects and stays shared")


def _persistent_proposal(facts: ScriptFacts, loader: LoaderCall, workers: int,
                         stores: list[ObjectStore]) -> Proposal:
    known = sum(s.estimated_bytes or 0 for s in stores)
    saving = (f"up to ~{fmt(workers * known)} of worker copies released at each epoch end "
              "instead of held for the whole run" if known else
              "what the workers accumulate is released at each epoch end")
    return Proposal(f"{facts.path}:{loader.line}", "persistent_workers=False", saving,
                    "persistent workers never restart, so whatever grows in them "
                    "(copy-on-read pages, caches) adds up over the whole run; the cost is "
                    "starting the workers again each epoch")


def _cap_proposal(facts: ScriptFacts, loader: LoaderCall, workers: int,
                  stores: list[ObjectStore]) -> Proposal | None:
    per_worker = MIN_WORKER_BYTES + sum(s.estimated_bytes or 0 for s in stores)
    cap, reason = worker_cap(per_worker, _prefetch(loader))
    if workers <= cap:
        return None
    return Proposal(f"{facts.path}:{loader.line}", f"num_workers={cap}",
                    f"~{fmt((workers - cap) * per_worker)} ({workers - cap} fewer workers "
                    f"of ~{fmt(per_worker)}, estimated)",
                    f"this machine holds {cap}: {reason}; workers beyond that add memory "
                    "without speed")


def _loader_proposals(facts: ScriptFacts, loader: LoaderCall,
                      machine: Machine) -> list[Proposal]:
    workers = _workers(loader)
    stores = _big_stores(facts, loader) if workers > 0 else []
    proposals = [_cow_proposal(facts, s, workers) for s in stores]
    if workers > 0 and loader.value("persistent_workers") is True:
        proposals.append(_persistent_proposal(facts, loader, workers, stores))
    capped = _cap_proposal(facts, loader, workers, stores) if workers > 0 else None
    proposals += [capped] if capped else []
    if workers > 0 and _prefetch(loader) > 2:
        proposals.append(Proposal(
            f"{facts.path}:{loader.line}", "prefetch_factor=2",
            f"{(_prefetch(loader) - 2) * workers} fewer batches held at once",
            "each worker keeps prefetch_factor batches ready in /dev/shm and RAM"))
    if loader.value("pin_memory") is True and not machine.gpus.gpus:
        proposals.append(Proposal(
            f"{facts.path}:{loader.line}", "pin_memory=False",
            "a pinning thread and a page-locked copy of each batch where a GPU is used",
            "there is no GPU here: pinned memory only speeds up copies to CUDA"))
    return proposals


def _step_proposals(facts: ScriptFacts, machine: Machine) -> list[Proposal]:
    gpus = machine.gpus.gpus
    if not gpus:
        return []
    proposals = []
    if not facts.uses_mixed_precision:
        proposals.append(Proposal(
            "training step", 'with torch.autocast("cuda", dtype=torch.bfloat16): '
            "loss = compute_loss(model, batch)",
            "~30-50% of activation memory (estimate; activations kept in 16 bits)",
            "the step's activations dominate GPU memory; this can change results slightly"))
    sizes = [b for c in facts.loaders if isinstance(b := c.value("batch_size"), int)]
    if sizes and max(sizes) >= 16 and min(g.total for g in gpus) < SMALL_GPU:
        size = max(sizes)
        proposals.append(Proposal(
            "training step", f"batch_size={size // 4} with 4 accumulation steps "
            "(loss / 4; optimizer.step() and zero_grad() every 4 batches)",
            "~3/4 of the activation memory of a step",
            f"the same effective batch of {size} with a quarter of the activations alive "
            "at once on a GPU under 16GiB"))
    return proposals


def shm_need(facts: ScriptFacts) -> ShmNeed | None:
    loaders = [c for c in facts.loaders if _workers(c) > 0]
    if not loaders:
        return None
    worst = max(loaders, key=lambda c: _workers(c) * _prefetch(c))
    batches = _workers(worst) * _prefetch(worst)
    need = batches * ASSUMED_BATCH_BYTES
    return ShmNeed(need, f"line {worst.line}: {_workers(worst)} workers x "
                         f"{_prefetch(worst)} batches in flight, ~{fmt(need)} for "
                         f"{fmt(ASSUMED_BATCH_BYTES)} batches")


def _loader_check(facts: ScriptFacts, loader: LoaderCall, proposals: list[Proposal]) -> Check:
    shown = ", ".join(f"{k}={s.value if s.known else s.text + ' (unknown)'}"
                      for k, s in loader.settings.items()) or "all defaults"
    mine = [p for p in proposals if p.where == f"{facts.path}:{loader.line}"]
    dataset = f" of {loader.dataset_class}" if loader.dataset_class else ""
    if not mine:
        return Check(f"DataLoader{dataset} ({facts.path}:{loader.line})", "ok", shown,
                     "its settings fit this machine", "", loader.to_dict())
    return Check(f"DataLoader{dataset} ({facts.path}:{loader.line})", "warn", shown,
                 "settings this machine or this dataset does not suit (each change, its "
                 "saving and its reason are listed below)",
                 "; ".join(p.change for p in mine), loader.to_dict())


def _store_checks(facts: ScriptFacts, proposals: list[Proposal]) -> list[Check]:
    checks = []
    for store in facts.stores:
        flagged = next((p for p in proposals if p.where == f"{facts.path}:{store.line}"), None)
        if flagged is not None:
            checks.append(Check(f"Dataset storage ({facts.path}:{store.line})", "warn",
                                _store_text(store), "Python objects read by DataLoader "
                                "workers are copied into each worker (copy-on-read)",
                                flagged.change, store.to_dict()))
    return checks


def script_checks(facts: ScriptFacts, machine: Machine) -> tuple[list[Check], list[Proposal]]:
    """Checks for each DataLoader and flagged Dataset store, and the proposed changes."""
    if facts.syntax_error:
        return [Check(f"script {facts.path}", "fail", f"syntax error, {facts.syntax_error}",
                      "the script cannot run", "fix the syntax error")], []
    proposals = [p for c in facts.loaders for p in _loader_proposals(facts, c, machine)]
    unique = list(dict.fromkeys(proposals))
    unique += _step_proposals(facts, machine)
    checks = [_loader_check(facts, c, unique) for c in facts.loaders]
    return checks + _store_checks(facts, unique), unique
