"""The launch plan as a form: every edit re-validates and re-draws the preview and the grid.

The form only turns text into a :class:`LaunchPlan` and shows what the core says about it; the
app computes the launcher preview in a worker (it looks programs up on PATH) and hands it back.
The command and launcher-flags fields are split into argvs with shell-style quoting rules
(``shlex.split``) but are never given to a shell.

Like vim, the form has a normal mode: while the form itself has the focus (Esc out of a field),
``j``/``k`` move a cursor over the fields, ``+``/``-`` step the size under it to the next value
that fits (:mod:`~ezpz_tui.core.launching.sizes`) and ``i`` or Enter edits the field. So trying
TP=2 is ``+`` on the TP field, with the grid and the preview following at once.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input, Label, Select, Static

from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.launcher import format_argv
from ezpz_tui.core.launching.plan import (
    LAUNCHERS,
    STAGE_MODES,
    LaunchPlan,
    Problem,
    min_nodes_value,
    validate,
)
from ezpz_tui.core.launching.sizes import STEPPED, step_size
from ezpz_tui.ui.palette import bindings_for
from runtime.trackers import KNOWN as KNOWN_TRACKERS
from runtime.trackers import TRACKERS_VAR, requested

if TYPE_CHECKING:
    from ezpz_tui.core.session import Preview

SIZE_FIELDS = ("tp", "pp", "cp")


class LaunchForm(VerticalScroll, can_focus=True):
    """Nodes, excluded hosts, ranks per node, TP/PP/CP, launcher, staging, the launcher's flags,
    command, env."""

    BINDINGS: ClassVar[list[Binding]] = [
        *bindings_for("form"),
        *bindings_for("navigation", only={"cursor_down", "cursor_up"}),
    ]

    @dataclass(eq=False)
    class Changed(Message):
        """The plan after an edit: ``plan`` is None when the text does not even parse."""

        plan: LaunchPlan | None
        problems: list[Problem]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.alloc: Allocation | None = None
        self.plan: LaunchPlan | None = None
        self.problems: list[Problem] = []
        self.cursor = "tp"  # the field normal-mode keys act on

    def compose(self) -> ComposeResult:
        with Horizontal(classes="row"):
            yield Label("nodes", classes="label")
            yield Input(id="nodes", type="integer", placeholder="all", classes="small")
            yield Label("per node", classes="label mid")
            yield Input(id="ppn", type="integer", placeholder="1 per accel", classes="small")
        with Horizontal(classes="row"):
            for name in SIZE_FIELDS:
                yield Label(name.upper(), classes="label short")
                yield Input("1", id=name, type="integer", classes="tiny")
            yield Static("", id="dp")
        with Horizontal(classes="row"):
            yield Label("exclude", classes="label")
            yield Input(id="exclude", placeholder="host names, comma separated")
        with Horizontal(classes="row"):
            yield Label("launcher", classes="label")
            yield Select(
                [(x, x) for x in LAUNCHERS], value="auto", allow_blank=False, id="launcher"
            )
        with Horizontal(classes="row"):
            yield Label("flags", classes="label")
            yield Input(id="launcher_args", placeholder="e.g. --cpu-bind=none")
        with Horizontal(classes="row"):
            # Copy the venv to each node's own disk first (off, on, keep), into this folder
            # (empty: $TMPDIR, else /tmp).
            yield Label("stage", classes="label")
            modes = [(x, x) for x in STAGE_MODES]
            yield Select(modes, value="off", allow_blank=False, id="stage", classes="small")
            yield Input(id="stage_dir", placeholder="TMPDIR")
            # Go on without nodes that cannot copy, down to this many (or a fraction: 0.9).
            yield Input(id="stage_min_nodes", placeholder="min: all", classes="small")
        with Horizontal(classes="row"):
            yield Label("command", classes="label")
            yield Input(id="command")
        with Horizontal(classes="row"):
            yield Label("env", classes="label")
            yield Input(id="env", placeholder="KEY=value KEY2=value")
        with Horizontal(classes="row"):
            yield Label("trackers", classes="label")
            yield Input(id="trackers", placeholder=",".join(KNOWN_TRACKERS))
        yield Static("", id="problems")
        yield Static("", id="preview")

    def on_mount(self) -> None:
        # The form marks bad fields itself (class -invalid, from validate()). Input's own
        # validation sets and clears that same class, so on blur or Enter it would wipe the mark.
        for field in self.query(Input):
            field.validate_on = set()
        self._show_cursor()

    @property
    def fields(self) -> list[Widget]:
        """The fields in form order: where ``j``/``k`` move the cursor."""
        return list(self.query("Input, Select"))

    def _show_cursor(self) -> None:
        for widget in self.fields:
            widget.set_class(widget.id == self.cursor, "-cursor")

    def move_cursor(self, field: str) -> None:
        """Put the normal-mode cursor on ``field`` (e.g. ``tp``) and keep it in view."""
        self.cursor = field
        self._show_cursor()
        self.scroll_to_widget(self.query_one(f"#{field}"), animate=False)

    def set_plan(self, alloc: Allocation, plan: LaunchPlan) -> None:
        """Fill every field from ``plan`` (start-up, or the plan of a run being reopened)."""
        self.alloc = alloc
        values = {
            "nodes": "" if plan.nodes is None else str(plan.nodes),
            "ppn": "" if plan.ppn is None else str(plan.ppn),
            "tp": str(plan.tp),
            "pp": str(plan.pp),
            "cp": str(plan.cp),
            "exclude": ", ".join(plan.exclude),
            "launcher_args": format_argv(plan.launcher_args),
            "command": format_argv(plan.command),
            "env": " ".join(f"{k}={v}" for k, v in plan.env if k != TRACKERS_VAR),
            "trackers": dict(plan.env).get(TRACKERS_VAR, ""),
            "stage_dir": plan.stage_dir,
            "stage_min_nodes": "" if plan.stage_min_nodes is None else f"{plan.stage_min_nodes:g}",
        }
        # One recompute for the whole plan, not one per field: each would validate, redraw the
        # grid and ask for a preview of a half-filled plan.
        with self.prevent(Input.Changed, Select.Changed):
            for name, value in values.items():
                self.query_one(f"#{name}", Input).value = value
            self.query_one("#launcher", Select).value = plan.launcher
            if plan.stage in STAGE_MODES:
                self.query_one("#stage", Select).value = plan.stage
        self.query_one("#ppn", Input).placeholder = f"{alloc.accelerators_per_host} (1/accel)"
        self.query_one("#nodes", Input).placeholder = f"all {len(alloc.hosts)}"
        self._recompute()

    def _number(self, name: str) -> int | None:
        text = self.query_one(f"#{name}", Input).value.strip()
        return int(text) if text.lstrip("-").isdigit() else None

    def _argv(self, name: str, what: str, problems: list[Problem]) -> tuple[str, ...]:
        """The field split as a shell would split it (never run by one); a parse error is a
        problem of the field."""
        try:
            return tuple(shlex.split(self.query_one(f"#{name}", Input).value))
        except ValueError as exc:
            problems.append(Problem("error", name, f"{what} cannot be split: {exc}."))
            return ()

    def read_plan(self) -> tuple[LaunchPlan | None, list[Problem]]:
        """The plan the fields describe and its problems (parse problems included)."""
        problems: list[Problem] = []
        sizes = {}
        for name in SIZE_FIELDS:
            value = self._number(name)
            if value is None:
                problems.append(Problem("error", name, f"{name.upper()} must be a whole number."))
            sizes[name] = value or 1
        command = self._argv("command", "The command", problems)
        launcher_args = self._argv("launcher_args", "The launcher flags", problems)
        env = []
        for item in self.query_one("#env", Input).value.split():
            key, sep, value = item.partition("=")
            if not sep:
                problems.append(Problem("error", "env", f"{item!r} is not KEY=value."))
            else:
                env.append((key, value))
        env = [(k, v) for k, v in env if k != TRACKERS_VAR] + self._trackers(problems)
        exclude = tuple(
            h.strip() for h in self.query_one("#exclude", Input).value.split(",") if h.strip()
        )
        launcher = self.query_one("#launcher", Select).value
        least: float | None = None
        if text := self.query_one("#stage_min_nodes", Input).value.strip():
            try:
                least = min_nodes_value(text, "The minimum of staged nodes")
            except ValueError as exc:
                problems.append(Problem("error", "stage_min_nodes", str(exc)))
        plan = LaunchPlan(
            nodes=self._number("nodes"),
            exclude=exclude,
            ppn=self._number("ppn"),
            launcher=str(launcher),
            command=command,
            env=tuple(env),
            launcher_args=launcher_args,
            stage=str(self.query_one("#stage", Select).value),
            stage_dir=self.query_one("#stage_dir", Input).value.strip(),
            stage_min_nodes=least,
            **sizes,
        )
        if self.alloc is not None:
            problems += validate(plan, self.alloc)
        return plan, problems

    def _trackers(self, problems: list[Problem]) -> list[tuple[str, str]]:
        """The trackers field as the ranks' ``EZPZ_TRACKERS`` (what History reads, so a
        relaunch switches trackers with no change to the script)."""
        names = requested(self.query_one("#trackers", Input).value)
        unknown = [n for n in names if n not in KNOWN_TRACKERS]
        if unknown:
            known = ", ".join(KNOWN_TRACKERS)
            why = f"Unknown tracker {unknown[0]!r} (known: {known})."
            problems.append(Problem("error", "trackers", why))
        return [(TRACKERS_VAR, ",".join(names))] if names else []

    def _recompute(self) -> None:
        if self.alloc is None:
            return
        self.plan, self.problems = self.read_plan()
        bad_fields = {p.field for p in self.problems if p.level == "error"}
        for widget in self.query(Input):
            field = widget.id or ""
            bad = field in bad_fields or (field in SIZE_FIELDS and "sizes" in bad_fields)
            widget.set_class(bad, "-invalid")
        text = Text()
        for problem in self.problems:
            style = "bold red" if problem.level == "error" else "yellow"
            text.append(f"{'✗' if problem.level == 'error' else '!'} {problem.message}\n", style)
        self.query_one("#problems", Static).update(text)
        if self.plan is not None:
            self._show_sizes(self.plan)
        self.post_message(self.Changed(self.plan if self.can_launch else None, self.problems))

    @property
    def can_launch(self) -> bool:
        return self.plan is not None and not any(p.level == "error" for p in self.problems)

    def _show_sizes(self, plan: LaunchPlan) -> None:
        assert self.alloc is not None, "sizes are shown once the allocation is known"
        world = plan.world_size(self.alloc)
        self.query_one("#dp", Static).update(f"DP {plan.layout(self.alloc).dp} · world {world}")

    def set_preview(self, preview: Preview | None) -> None:
        """Show the exact launcher argv, or why there is none."""
        widget = self.query_one("#preview", Static)
        if preview is None or preview.command is None:
            text = Text("launch disabled until the plan is valid", "dim italic")
            # What only this node can tell (a launcher missing from PATH) comes with the preview.
            for problem in preview.problems if preview else []:
                if problem.level == "error" and problem not in self.problems:
                    text.append(f"\n✗ {problem.message}", "bold red")
            widget.update(text)
            return
        if preview.checked is not None and self.alloc is not None:
            self._show_sizes(preview.checked.plan)  # without bad_hosts.txt's, as it would run
        text = Text("$ ", "bold")
        text.append(format_argv(preview.command.argv))
        for note in preview.command.notes:
            text.append(f"\n· {note}", "dim")
        widget.update(text)

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._recompute()

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        self._recompute()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter keeps the value and leaves the field, so single keys act again."""
        event.stop()
        self.focus()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """A field reached by Tab or the mouse takes the cursor, so Esc leaves it there."""
        if event.widget.id and event.widget in self.fields:
            self.cursor = event.widget.id
            self._show_cursor()

    def action_leave_field(self) -> None:
        self.focus()

    def _move(self, step: int) -> None:
        ids = [w.id for w in self.fields if w.id]
        at = ids.index(self.cursor) if self.cursor in ids else 0
        self.move_cursor(ids[max(0, min(len(ids) - 1, at + step))])

    def action_cursor_down(self) -> None:
        self._move(+1)

    def action_cursor_up(self) -> None:
        self._move(-1)

    def action_edit_field(self) -> None:
        self.query_one(f"#{self.cursor}").focus()

    def _step(self, direction: int) -> None:
        """The size under the cursor to its next (or previous) value that fits."""
        if self.cursor not in STEPPED:
            self.notify("+ and - step nodes, per node, TP, PP and CP: move there with j/k.")
            return
        if self.plan is None or self.alloc is None:
            return
        stepped = step_size(self.plan, self.alloc, self.cursor, direction)
        if stepped is None:
            way = "largest" if direction > 0 else "smallest"
            label = "per node" if self.cursor == "ppn" else self.cursor.upper()
            self.notify(f"{label} is already the {way} value that fits.", timeout=3)
            return
        self.query_one(f"#{self.cursor}", Input).value = str(getattr(stepped, self.cursor))

    def action_step_up(self) -> None:
        self._step(+1)

    def action_step_down(self) -> None:
        self._step(-1)
