"""The staging nodes among themselves: the first node's answers and its pack, spread to the rest.

The launcher starts one staging process a node (``mpiexec -ppn 1``, ``srun
--ntasks-per-node=1``); with mpi4py they are one MPI job, and the first node's manifest of the
source and its pack reach the others by broadcast, over the job's own network in the tree the
MPI library chooses (MPICH: a binomial tree, or a scatter and a ring for large messages). The
pack goes in pieces of :data:`~runtime.stage_pack.CHUNK` bytes, two in flight: a node unpacks one
while the next arrives, so the nodes unpack in parallel with the transfer instead of after it.

A node waits for a piece by polling and sleeping, not spinning: MPICH's blocking calls spin a
core, and on one machine (the simulated nodes of the tests and the bench) the spinning nodes
take the cores the unpacking ones need.

Without mpi4py, or when MPI does not see the launcher's processes as one job (a singleton per
node), or on one node, every node is :class:`Alone`: it reads the source's manifest and the pack
itself (the pack is made once, under a lock, by whichever node comes first). Slower at scale
than a broadcast, but a sequential read of one file a node, never the source's every file.
"""

from __future__ import annotations

import errno
import io
import json
import time
from array import array
from pathlib import Path
from typing import IO, Any, Protocol

from runtime.env import rank_info
from runtime.stage_pack import CHUNK

_HEAD = 8  # a piece's first bytes: how many of the rest are the pack's (< 0: why there are none)
_SPINS = 100  # polls of a request before each wait sleeps
_NAP_S = 0.001


class Stream(Protocol):
    """The pack's bytes on one node, in order."""

    def read(self, size: int = -1, /) -> bytes: ...

    def drain(self) -> None:
        """Take the rest of the pack without using it: a node that failed still takes its part
        in every piece's broadcast, which the other nodes wait on."""

    def close(self) -> None: ...


class Peers(Protocol):
    """The staging nodes as this one sees them."""

    first: bool  # this node reads the source and the pack for the others
    spread: str  # how the pack reaches the nodes, in words for stage.json

    def share(self, value: dict[str, Any] | None) -> dict[str, Any]:
        """The first node's ``value`` (the others pass None), on every node."""

    def count(self, value: int) -> int:
        """``value`` summed over the nodes."""

    def stream(self, pack: Path, size: int) -> Stream:
        """The pack's ``size`` bytes, read by the first node, as they reach this one."""


class _File(io.FileIO):
    def drain(self) -> None:
        pass


class Alone:
    """A node that reads the source's manifest and the pack itself."""

    first = True

    def __init__(self, spread: str) -> None:
        self.spread = spread

    def share(self, value: dict[str, Any] | None) -> dict[str, Any]:
        assert value is not None
        return value

    def count(self, value: int) -> int:
        return value

    def stream(self, pack: Path, size: int) -> Stream:
        return _File(pack, "r")


def _wait(request: Any) -> None:
    """Until ``request`` is done, without spinning a core (see the module's docstring)."""
    polls = 0
    while not request.Test():
        polls += 1
        if polls > _SPINS:
            time.sleep(_NAP_S)


class Broadcast:
    """The nodes as one MPI job: the first (rank 0) reads, the others receive."""

    spread = "broadcast"

    def __init__(self, comm: Any) -> None:
        self._comm = comm
        self.first = comm.Get_rank() == 0

    def share(self, value: dict[str, Any] | None) -> dict[str, Any]:
        data = json.dumps(value).encode() if self.first else b""
        length = array("q", [len(data)])
        _wait(self._comm.Ibcast(length, root=0))
        buffer = bytearray(data) if self.first else bytearray(length[0])
        _wait(self._comm.Ibcast(buffer, root=0))
        shared: dict[str, Any] = json.loads(buffer)
        return shared

    def count(self, value: int) -> int:
        total = array("q", [0])
        _wait(self._comm.Iallreduce(array("q", [value]), total))
        return total[0]

    def stream(self, pack: Path, size: int) -> Stream:
        source: IO[bytes] | None = None
        failed = None
        if self.first:
            try:
                source = pack.open("rb", buffering=0)
            except OSError as exc:
                failed = f"cannot read the pack {pack}: {exc.strerror or exc}"
        return _Pieces(self._comm, -(-size // CHUNK), source, failed)


class _Pieces(io.RawIOBase):
    """The pack's bytes as their pieces arrive, the next piece's broadcast under way while this
    one is read; the first node reads each piece from the pack before it sends it."""

    def __init__(self, comm: Any, pieces: int, source: IO[bytes] | None, failed: str | None):
        super().__init__()
        self._comm, self._pieces, self._source, self._failed = comm, pieces, source, failed
        self._first = comm.Get_rank() == 0
        self._buffers = (bytearray(_HEAD + CHUNK), bytearray(_HEAD + CHUNK))
        self._posted = 0
        self._pending: tuple[Any, bytearray] | None = None
        self._view = memoryview(b"")
        self._post()

    def readable(self) -> bool:
        return True

    def _fill(self, buffer: bytearray) -> None:
        """The next piece of the pack into ``buffer``, or why there is none."""
        body, count = memoryview(buffer)[_HEAD:], 0
        if self._failed is None and self._source is not None:
            try:
                while count < CHUNK:
                    got = self._source.readinto(body[count:])
                    if not got:
                        break
                    count += got
            except OSError as exc:
                self._failed = f"cannot read the pack: {exc.strerror or exc}"
        if self._failed is not None:
            text = self._failed.encode()[:CHUNK]
            body[: len(text)] = text
            count = -len(text)
        buffer[:_HEAD] = count.to_bytes(_HEAD, "little", signed=True)

    def _post(self) -> None:
        if self._posted == self._pieces:
            self._pending = None
            return
        buffer = self._buffers[self._posted % 2]
        if self._first:
            self._fill(buffer)
        self._pending = (self._comm.Ibcast(buffer, root=0), buffer)
        self._posted += 1

    def _next(self) -> bool:
        """The next piece in view; False at the end of the pack."""
        if self._pending is None:
            return False
        request, buffer = self._pending
        _wait(request)
        self._post()  # into the other buffer, while this one is read
        count = int.from_bytes(buffer[:_HEAD], "little", signed=True)
        if count < 0:
            why = bytes(buffer[_HEAD : _HEAD - count]).decode(errors="replace")
            raise OSError(errno.EIO, f"the first node {why}")
        self._view = memoryview(buffer)[_HEAD : _HEAD + count]
        return True

    def readinto(self, into: Any) -> int:
        while not self._view:
            if not self._next():
                return 0
        if self._pending is not None:
            self._pending[0].Test()  # the next piece's broadcast moves on while this one is read
        count = min(len(into), len(self._view))
        into[:count] = self._view[:count]
        self._view = self._view[count:]
        return count

    def drain(self) -> None:
        self._view = memoryview(b"")
        while True:
            try:
                if not self._next():
                    return
            except OSError:
                continue

    def close(self) -> None:
        if self._source is not None:
            self._source.close()
        super().close()


def peers() -> Peers:
    """The staging nodes of this launch: one MPI job when mpi4py can make it one, else each
    node :class:`Alone` (with why, in words)."""
    info = rank_info()
    if info is None or info.world_size == 1:
        return Alone("one node")
    try:
        from mpi4py import MPI
    except ImportError:
        return Alone("each node read the pack (no mpi4py to broadcast it)")
    except Exception as exc:  # an MPI that cannot start here (mpi4py lists every path it tried)
        first = str(exc).strip().splitlines()[-1:] or [type(exc).__name__]
        return Alone(f"each node read the pack (MPI did not start: {first[0]})")
    size = MPI.COMM_WORLD.Get_size()
    if size != info.world_size:
        return Alone(
            f"each node read the pack (MPI saw {size} of the launcher's {info.world_size} "
            "processes as its job)"
        )
    return Broadcast(MPI.COMM_WORLD)
