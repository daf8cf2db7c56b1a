"""The parallel sizes of a run as one value: (pp, dp, cp, tp) over a world of ranks.

The launch form's checks, its ``+``/``-``, the topology grid and every rank's ``setup()`` must
agree on which sizes run, which rank sits where and which ranks form a group: while each kept
its own copy of the rules, one of them could accept a layout another refused. So they all ask
this one frozen value, modelled on torchtitan's ``ParallelDims``: the user picks tp, pp and cp,
dp is what the world leaves.

Every rank imports this, so it imports nothing, not even ``typing`` or ``dataclasses`` (each of
those costs a rank several milliseconds at start-up).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers; nothing is imported at run time
    from typing import Any, Literal

MESH_ORDER = ("pp", "dp", "cp", "tp")
"""Mesh dimensions outermost first, the order of the device mesh every rank builds. TP is
innermost so that the ranks of a tensor-parallel group (whose all-reduces come every layer) are
consecutive, and so on one node under block placement; PP is outermost since stages only pass
activations on, which can cross the network."""

CHOSEN = ("tp", "pp", "cp")
"""The sizes a user picks, in the launch form's order; dp is derived."""


class _Frozen:
    """A value that cannot change after it is made, compared and hashed by its slots (what a
    frozen dataclass gives, without importing dataclasses)."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()
    """The slots in the order the constructor takes them."""

    def __init__(self, *values: Any) -> None:
        for name, value in zip(self._fields, values, strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: make a new one")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: make a new one")

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={v!r}" for n, v in zip(self._fields, self._values(), strict=True))
        return f"{type(self).__name__}({fields})"


class Reason(_Frozen):
    """One thing wrong with a layout, in a sentence for the user.

    ``field`` names what to fix: ``tp``, ``pp`` or ``cp`` for one size, ``sizes`` for the three
    together, ``world`` when there are no ranks at all.
    """

    _fields = ("level", "field", "message")
    __slots__ = _fields
    level: Literal["error", "warning"]
    field: str
    message: str

    def __init__(self, level: Literal["error", "warning"], field: str, message: str) -> None:
        super().__init__(level, field, message)


class Layout(_Frozen):
    """Sizes (tp, pp, cp) on ``world`` ranks; dp is derived.

    ``ranks_per_node`` (None when unknown, as inside a rank) adds the rule that a
    tensor-parallel group should stay on one node once there are several: its all-reduces are
    the most frequent, and across nodes they go over the network.
    """

    _fields = ("world", "tp", "pp", "cp", "ranks_per_node")
    __slots__ = (*_fields, "_axes")
    world: int
    tp: int
    pp: int
    cp: int
    ranks_per_node: int | None
    _axes: dict[str, tuple[int, int]]

    def __init__(
        self, world: int, tp: int = 1, pp: int = 1, cp: int = 1, ranks_per_node: int | None = None
    ) -> None:
        super().__init__(world, tp, pp, cp, ranks_per_node)
        # (stride, size) of each dimension in mesh order, worked out once: the topology grid
        # asks coords() and group() for every rank of a plan on each keystroke. Empty when
        # the layout has no places.
        axes = {}
        if not self.errors():
            stride = world
            for dim in MESH_ORDER:
                size = self.size(dim)
                stride //= size
                axes[dim] = (stride, size)
        object.__setattr__(self, "_axes", axes)

    def replace(self, **changes: int | None) -> Layout:
        """This layout with some fields changed."""
        values = dict(zip(self._fields, self._values(), strict=True))
        unknown = set(changes) - set(values)
        if unknown:
            raise TypeError(f"Layout has no field {', '.join(sorted(unknown))}")
        return Layout(**{**values, **changes})  # type: ignore[arg-type]

    @property
    def model(self) -> int:
        """Ranks that hold one replica of the model: tp * pp * cp."""
        return self.tp * self.pp * self.cp

    @property
    def dp(self) -> int:
        """Data-parallel size; rounded down when the sizes do not divide (``reasons`` says so)."""
        return self.world // self.model if self.model > 0 else 0

    def size(self, dim: str) -> int:
        """The size of mesh dimension ``dim`` (one of :data:`MESH_ORDER`)."""
        return int(getattr(self, _mesh_dim(dim)))

    @property
    def shape(self) -> tuple[int, ...]:
        """The mesh's shape in :data:`MESH_ORDER`, what ``init_device_mesh`` is given."""
        return tuple(self.size(dim) for dim in MESH_ORDER)

    @property
    def sizes(self) -> dict[str, int]:
        """Every dimension's size by name, in :data:`MESH_ORDER`."""
        return {dim: self.size(dim) for dim in MESH_ORDER}

    def reasons(self) -> list[Reason]:
        """Everything wrong with this layout, errors and warnings, sizes first."""
        out = [
            Reason("error", name, f"{name.upper()} must be at least 1, not {value}.")
            for name in CHOSEN
            if (value := getattr(self, name)) < 1
        ]
        if self.world < 1:
            out.append(
                Reason("error", "world", f"World size must be at least 1, not {self.world}.")
            )
        if out:
            return out
        if self.world % self.model:
            out.append(
                Reason(
                    "error",
                    "sizes",
                    f"World size {self.world} is not divisible by tp*pp*cp = {self.model}.",
                )
            )
        per_node, tp = self.ranks_per_node, self.tp
        # More than one node: a TP group that does not fit a node's ranks evenly spans two.
        if per_node is not None and 1 <= per_node < self.world and per_node % tp:
            if tp > per_node:
                why = f"TP={tp} is larger than {per_node} ranks per node"
            else:
                why = f"TP={tp} does not divide {per_node} ranks per node"
            out.append(
                Reason(
                    "warning",
                    "tp",
                    f"{why}, so tensor-parallel groups span nodes and their all-reduces cross "
                    "the network.",
                )
            )
        return out

    def errors(self) -> list[Reason]:
        """The reasons this layout cannot run (warnings left out)."""
        return [r for r in self.reasons() if r.level == "error"]

    @property
    def valid(self) -> bool:
        """Whether a mesh of these sizes can be built on the world."""
        return not self.errors()

    def coords(self, rank: int) -> dict[str, int]:
        """``rank``'s coordinate on each dimension, in :data:`MESH_ORDER`: the C-order unravel
        of ``rank`` over :attr:`shape`, as ``init_device_mesh`` places ranks."""
        self._check_place(rank)
        return {dim: rank // stride % size for dim, (stride, size) in self._axes.items()}

    def group(self, rank: int, dim: str) -> int:
        """The index of ``rank``'s group along ``dim``: the ranks that differ from it only in
        ``dim``, i.e. those that meet in ``dim``'s collectives. Groups are counted in mesh order
        over the other dimensions, so group 0 holds rank 0."""
        self._check_place(rank)
        stride, size = self._axes[_mesh_dim(dim)]
        return rank // (stride * size) * stride + rank % stride

    def _check_place(self, rank: int) -> None:
        if not self._axes:
            raise ValueError(f"No rank has a place: {self.errors()[0].message}")
        if not 0 <= rank < self.world:
            raise ValueError(f"Rank {rank} is not in a world of {self.world}.")

    def values(self, name: str) -> list[int]:
        """Every value size ``name`` (tp, pp or cp) may take with the others as they are,
        smallest first; TP keeps to values that divide a node's ranks or are whole nodes of
        them, so its groups never straddle a node boundary."""
        if name not in CHOSEN:
            raise ValueError(f"{name!r} is not a size to choose; those are {', '.join(CHOSEN)}")
        others = 1
        for other in CHOSEN:
            if other != name:
                others *= max(getattr(self, other), 1)
        if self.world < 1 or self.world % others:
            return []
        values = _divisors(self.world // others)
        per_node = self.ranks_per_node
        if name == "tp" and per_node is not None and per_node >= 1:
            values = [v for v in values if per_node % v == 0 or v % per_node == 0]
        return values

    def step(self, name: str, direction: int) -> Layout | None:
        """This layout with ``name`` at its next (``direction`` > 0) or previous value of
        :meth:`values`; None when there is none that way. A value that does not fit now steps
        to its nearest neighbour that does."""
        value = neighbour(self.values(name), getattr(self, name), direction)
        return None if value is None else self.replace(**{name: value})


def neighbour(values: list[int], now: int, direction: int) -> int | None:
    """The first of ``values`` (sorted) above ``now`` when ``direction`` > 0, else the last
    below it; None when there is none that way. ``now`` need not be among ``values``."""
    if direction > 0:
        return next((v for v in values if v > now), None)
    return next((v for v in reversed(values) if v < now), None)


def _mesh_dim(dim: str) -> str:
    if dim not in MESH_ORDER:
        raise ValueError(f"{dim!r} is not a mesh dimension; those are {', '.join(MESH_ORDER)}")
    return dim


def _divisors(n: int) -> list[int]:
    """Divisors of ``n``, smallest first, in O(sqrt n): ``+`` runs this on every press."""
    small, d = [], 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
        d += 1
    return small + [n // d for d in reversed(small) if d * d != n]
