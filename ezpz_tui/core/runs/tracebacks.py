"""A Python traceback in a rank's log, read back: for a rank that recorded no raise of its own
(no ``status/rank-NNNNN.raised``: an earlier version's rank, a rank whose ``sitecustomize`` was
off, a program that replaced ``sys.excepthook`` without calling the one before), the log is all
that says what it raised.

torch.distributed replaces ``sys.excepthook`` once a process group exists and prefixes every line
of an uncaught traceback with ``[rankN]: ``; the lines are read without it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from runtime.rundir import Raised

TRACEBACK = "Traceback (most recent call last):"
MAX_FRAMES = 24  # lines of a traceback kept, from its end: the frames nearest the raise
_RANK_PREFIX = re.compile(r"^\[rank\d+\]: ?")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # a colour a rich or IPython traceback added
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<function>.+))?')
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<message>.*))?$")


def unprefixed(lines: Iterable[str]) -> list[str]:
    """``lines`` without torch.distributed's ``[rankN]: `` in front of a traceback's lines, and
    without colour."""
    return [_RANK_PREFIX.sub("", _ANSI.sub("", line), count=1) for line in lines]


def last_traceback(lines: list[str]) -> tuple[str | None, tuple[str, ...]]:
    """The last Python traceback in ``lines``: its exception line and the traceback (header,
    frames, exception); ``(None, ())`` when there is none."""
    lines = unprefixed(lines)
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith(TRACEBACK)]
    if not starts:
        return None, ()
    block = [lines[starts[-1]].strip()]
    exception = None
    for line in lines[starts[-1] + 1 :]:
        if line.startswith((" ", "\t")):
            block.append(line.rstrip())
            continue
        if line.strip():
            exception = line.strip()
            block.append(exception)
        break
    if len(block) > MAX_FRAMES:
        block = [block[0], "  ...", *block[-(MAX_FRAMES - 2) :]]
    return exception, tuple(block)


def raised_in(exception: str, block: tuple[str, ...]) -> Raised:
    """What a traceback read from a log says was raised: the exception line's type and message,
    its innermost frame's place. No time: the log does not say when."""
    match = _EXCEPTION.match(exception)
    kind, message = (match["type"], match["message"] or "") if match else ("", exception)
    frames = [m for m in map(_FRAME.match, block) if m]
    last = frames[-1] if frames else None
    return Raised(
        type=kind or exception,
        message=message if kind else "",
        where=f"{last['file']}:{last['line']}" if last else None,
        function=last["function"] if last else None,
        traceback=block,
    )
