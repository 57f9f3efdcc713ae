"""One error hierarchy. Every message tells the user what to do next.

Only ``torchleak.cli.main`` prints these and turns them into exit codes, so library
callers get ordinary exceptions.
"""

from __future__ import annotations

# Exit codes of torchleak itself (``torchleak run`` otherwise returns the script's own
# code). Chosen from sysexits(3) so they do not collide with the usual 0/1/2 of scripts.
EXIT_USAGE = 64  # bad command line
EXIT_DATAERR = 65  # the input is not what it should be (syntax error, corrupt trace)
EXIT_NOINPUT = 66  # no such script, module or run
EXIT_SOFTWARE = 70  # a bug in torchleak
EXIT_CANTCREAT = 73  # cannot write the output folder
EXIT_LEAK = 3  # `run --fail-on-leak` found a leak (the script itself succeeded)
EXIT_GUARD = 75  # the guard stopped the training before the memory limit (EX_TEMPFAIL)
EXIT_UNAVAILABLE = 69  # attach: the run is gone, serves no socket, or had no step in time
EXIT_NOPERM = 77  # attach: refused (another user's run, or control off in the run)


class TorchleakError(Exception):
    """An error with a one-line message for the user and an exit code."""

    exit_code: int = EXIT_SOFTWARE

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(TorchleakError):
    exit_code = EXIT_USAGE


class InputNotFound(TorchleakError):
    exit_code = EXIT_NOINPUT


class BadInput(TorchleakError):
    exit_code = EXIT_DATAERR


class OutputNotWritable(TorchleakError):
    exit_code = EXIT_CANTCREAT


class TraceError(TorchleakError):
    """A trace file that is missing, corrupt, foreign or of a newer schema."""

    exit_code = EXIT_DATAERR


class AttachUnavailable(TorchleakError):
    """``attach``: the run cannot answer now (ended, killed, no socket, no step in time)."""

    exit_code = EXIT_UNAVAILABLE


class AttachRefused(TorchleakError):
    """``attach``: the run refused (another user's run, or control off in it)."""

    exit_code = EXIT_NOPERM
