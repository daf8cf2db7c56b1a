"""What an exit code or a signal usually means, in the words a person needs at 3 a.m.

A number alone ("signal 9", "exit 139") sends everyone to a search engine; the usual cause next
to it (the OOM killer, a native crash) is most of the diagnosis. One table, read by the failure
explanation, the rank list and the CLI alike, so they never say different things.
"""

from __future__ import annotations

import signal as _signal

SIGNAL_MEANINGS: dict[int, str] = {
    int(
        _signal.SIGKILL
    ): "killed, often the OOM killer (else the launcher, the scheduler or a person)",
    int(_signal.SIGSEGV): "segmentation fault: a native crash (an extension, a library, a driver)",
    int(_signal.SIGBUS): "bus error: a bad memory access, often a failing node or a full /dev/shm",
    int(_signal.SIGABRT): "aborted: a native assert or an uncaught C++ exception (std::bad_alloc?)",
    int(_signal.SIGFPE): "floating-point exception: an integer division by zero in native code",
    int(_signal.SIGILL): "illegal instruction: a binary built for another CPU",
    int(_signal.SIGTERM): "asked to end: by the launcher, the scheduler (walltime?) or a person",
    int(_signal.SIGINT): "interrupted: Ctrl-C or the launcher's stop",
    int(_signal.SIGHUP): "hung up: its terminal or SSH session went away",
    int(_signal.SIGPIPE): "broken pipe: it wrote to a reader that had gone",
    int(_signal.SIGXCPU): "CPU time limit exceeded",
}

EXIT_MEANINGS: dict[int, str] = {
    1: "an error, usually an uncaught Python exception",
    2: "a usage error (bad command-line arguments)",
    126: "the command could not be executed (permissions?)",
    127: "command not found (is it on PATH on the compute nodes?)",
}


def signal_label(number: int) -> str:
    try:
        return _signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def meaning(exit_code: int | None, signal: int | None) -> str | None:
    """The usual meaning of an end: a signal's, or an exit code's (128+N read as signal N, as
    shells and launchers report a process a signal ended)."""
    if signal is not None:
        return SIGNAL_MEANINGS.get(signal)
    if exit_code is None or exit_code == 0:
        return None
    if exit_code in EXIT_MEANINGS:
        return EXIT_MEANINGS[exit_code]
    if 128 < exit_code < 160:
        number = exit_code - 128
        said = SIGNAL_MEANINGS.get(number)
        name = signal_label(number)
        return f"128+{number}, ended by {name}" + (f": {said}" if said else "")
    return None


def describe_end(exit_code: int | None, signal: int | None, name: str | None = None) -> str:
    """``SIGKILL (signal 9)`` or ``exit 3``; "no end recorded" when neither is known."""
    if signal is not None:
        return f"{name or signal_label(signal)} (signal {signal})"
    if exit_code is not None:
        return f"exit {exit_code}"
    return "no end recorded"
