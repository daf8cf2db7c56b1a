"""The launch plan as a form: every edit re-validates and re-draws the preview and the grid.

The form only turns text into a :class:`LaunchPlan` and shows what the core says about it; the
app computes the launcher preview in a worker (it looks programs up on PATH) and hands it back.
The command and launcher-flags fields are split into argvs with shell-style quoting rules
(``shlex.split``) but are never given to a shell.

Like vim, the form has a normal mode: while the form itself has the focus (Esc out of a field),
``j``/``k`` move a cursor over the fields, ``+``/``-`` step the size under it to the next value
that fits (:mod:`~ezpz_tui.core.launching.sizes`) and ``i`` or Enter edits the field. So trying
TP=2 is ``+`` on the TP field, with the grid and the preview following at once.

The fields most plans leave alone (:data:`FOLDED`: excluded hosts, launcher, its flags, staging,
env, trackers) sit behind a fold that ``za`` opens and closes, as vim's folds do. Folded, they
are not mounted at all: the form keeps their text, and the fold's line names those set. That is
most of the form's widgets, and the frame that first shows the plan is painted without them.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
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

FOLDED: dict[str, str] = {
    "exclude": "",
    "launcher": "auto",
    "launcher_args": "",
    "stage": "off",
    "stage_dir": "",
    "stage_min_nodes": "",
    "env": "",
    "trackers": "",
}
"""The fields behind the fold, in form order, with the text each has when unset."""

SELECTS = {"launcher": LAUNCHERS, "stage": STAGE_MODES}
"""The folded fields that are a choice, not text, and their choices."""


class LaunchForm(VerticalScroll, can_focus=True):
    """Nodes, ranks per node, TP/PP/CP, command; behind the fold excluded hosts, launcher, the
    launcher's flags, staging, env, trackers."""

    BINDINGS: ClassVar[list[Binding]] = [
        *bindings_for("form"),
        *bindings_for("navigation", only={"cursor_down", "cursor_up"}),
    ]

    @dataclass(eq=False)
    class Changed(Message):
        """The plan after an edit: ``plan`` is None when the text does not even parse."""

        plan: LaunchPlan | None
        problems: list[Problem]

    @dataclass(eq=False)
    class Folded(Message):
        """The fold was opened (``shown``) or closed with ``za``: the state to keep."""

        shown: bool

    def __init__(self, more: bool = False, **kwargs: object) -> None:
        """``more``: the folded fields start shown (the state the person left them in)."""
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.alloc: Allocation | None = None
        self.plan: LaunchPlan | None = None
        self.problems: list[Problem] = []
        self.cursor = "tp"  # the field normal-mode keys act on
        self.more = more
        self._kept = dict(FOLDED)  # the folded fields' text while they are not mounted

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
            yield Label("command", classes="label")
            yield Input(id="command")
        yield Static(id="more")
        if self.more:
            yield self._folded_fields()
        yield Static("", id="problems")
        yield Static("", id="preview")

    def _folded_fields(self) -> Vertical:
        """The folded fields' rows, holding the text the form kept for them."""
        kept = self._kept

        def text(name: str, placeholder: str = "", classes: str = "") -> Input:
            return Input(kept[name], id=name, placeholder=placeholder, classes=classes)

        def choice(name: str, classes: str = "") -> Select[str]:
            options = [(x, x) for x in SELECTS[name]]
            return Select(options, value=kept[name], allow_blank=False, id=name, classes=classes)

        def row(label: str, *fields: Widget) -> Horizontal:
            return Horizontal(Label(label, classes="label"), *fields, classes="row")

        return Vertical(
            row("exclude", text("exclude", "host names, comma separated")),
            row("launcher", choice("launcher")),
            row("flags", text("launcher_args", "e.g. --cpu-bind=none")),
            # Copy the venv to each node's own disk first (off, on, keep), into this folder
            # (empty: $TMPDIR, else /tmp); go on without nodes that cannot copy, down to this
            # many (or a fraction: 0.9).
            row(
                "stage",
                choice("stage", "small"),
                text("stage_dir", "TMPDIR"),
                text("stage_min_nodes", "min: all", "small"),
            ),
            row("env", text("env", "KEY=value KEY2=value")),
            row("trackers", text("trackers", ",".join(KNOWN_TRACKERS))),
            id="more-fields",
        )

    def on_mount(self) -> None:
        self._no_own_validation()
        self._show_cursor()
        self._show_fold()

    def _no_own_validation(self) -> None:
        """The form marks bad fields itself (class -invalid, from validate()). Input's own
        validation sets and clears that same class, so on blur or Enter it would wipe the
        mark."""
        for field in self.query(Input):
            field.validate_on = set()

    def _text(self, name: str) -> str:
        """A field's text: its widget's, or what the fold keeps while it is closed."""
        if name in FOLDED and not self.more:
            return self._kept[name]
        return str(self.query_one(f"#{name}", Select if name in SELECTS else Input).value)

    def _show_fold(self) -> None:
        """The fold's line: how to open or close it and, closed, which folded fields are set
        (in red when one of them is wrong, as the field itself would be)."""
        line = Text("▾ za  fewer fields", "dim") if self.more else self._fold_summary()
        fold = self.query_one("#more", Static)
        fold.update(line)
        bad = {p.field for p in self.problems if p.level == "error"}
        fold.set_class(not self.more and bool(bad & FOLDED.keys()), "-invalid")

    def _fold_summary(self) -> Text:
        kept = self._kept
        exclude = [h for h in kept["exclude"].split(",") if h.strip()]
        set_ = [
            f"exclude {len(exclude)}" if exclude else "",
            f"launcher {kept['launcher']}" if kept["launcher"] != FOLDED["launcher"] else "",
            "flags" if kept["launcher_args"].strip() else "",
            f"stage {kept['stage']}" if kept["stage"] != FOLDED["stage"] else "",
            f"env {len(kept['env'].split())}" if kept["env"].strip() else "",
            f"trackers {kept['trackers']}" if kept["trackers"].strip() else "",
        ]
        shown = ", ".join(x for x in set_ if x)
        line = Text("▸ za  more: ", "dim")
        if shown:
            return line.append(shown)
        return line.append("exclude, launcher, flags, stage, env, trackers", "dim")

    async def action_toggle_more(self) -> None:
        """Open or close the fold (``za``). Closing keeps the fields' text; opening mounts them
        with it, so the plan is the same either way."""
        if self.more:
            for name in FOLDED:
                self._kept[name] = self._text(name)
            self.more = False
            if self.cursor in FOLDED:
                self.cursor = "command"
            await self.query_one("#more-fields").remove()
        else:
            self.more = True
            await self.mount(self._folded_fields(), after="#more")
            self._no_own_validation()
            self._mark_fields()
        self._show_cursor()
        self._show_fold()
        self.post_message(self.Folded(self.more))

    async def on_click(self, event: events.Click) -> None:
        """A click on the fold's line opens or closes it, as ``za`` does."""
        if event.widget is not None and event.widget.id == "more":
            await self.action_toggle_more()

    @property
    def fields(self) -> list[Widget]:
        """The fields in form order: where ``j``/``k`` move the cursor."""
        return list(self.query("Input, Select"))

    def _show_cursor(self) -> None:
        for widget in self.fields:
            widget.set_class(widget.id == self.cursor, "-cursor")

    def move_cursor(self, field: str) -> None:
        """Put the normal-mode cursor on ``field`` (e.g. ``tp``, not a folded one) and keep it
        in view."""
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
        values["launcher"] = plan.launcher
        if plan.stage in STAGE_MODES:
            values["stage"] = plan.stage
        with self.prevent(Input.Changed, Select.Changed):
            for name, value in values.items():
                if name in FOLDED and not self.more:
                    self._kept[name] = value
                else:
                    self.query_one(f"#{name}", Select if name in SELECTS else Input).value = value
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
            return tuple(shlex.split(self._text(name)))
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
        for item in self._text("env").split():
            key, sep, value = item.partition("=")
            if not sep:
                problems.append(Problem("error", "env", f"{item!r} is not KEY=value."))
            else:
                env.append((key, value))
        env = [(k, v) for k, v in env if k != TRACKERS_VAR] + self._trackers(problems)
        exclude = tuple(h.strip() for h in self._text("exclude").split(",") if h.strip())
        least: float | None = None
        if text := self._text("stage_min_nodes").strip():
            try:
                least = min_nodes_value(text, "The minimum of staged nodes")
            except ValueError as exc:
                problems.append(Problem("error", "stage_min_nodes", str(exc)))
        plan = LaunchPlan(
            nodes=self._number("nodes"),
            exclude=exclude,
            ppn=self._number("ppn"),
            launcher=self._text("launcher"),
            command=command,
            env=tuple(env),
            launcher_args=launcher_args,
            stage=self._text("stage"),
            stage_dir=self._text("stage_dir").strip(),
            stage_min_nodes=least,
            **sizes,
        )
        if self.alloc is not None:
            problems += validate(plan, self.alloc)
        return plan, problems

    def _trackers(self, problems: list[Problem]) -> list[tuple[str, str]]:
        """The trackers field as the ranks' ``EZPZ_TRACKERS`` (what History reads, so a
        relaunch switches trackers with no change to the script)."""
        names = requested(self._text("trackers"))
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
        self._mark_fields()
        text = Text()
        for problem in self.problems:
            style = "bold red" if problem.level == "error" else "yellow"
            text.append(f"{'✗' if problem.level == 'error' else '!'} {problem.message}\n", style)
        self.query_one("#problems", Static).update(text)
        self._show_fold()
        if self.plan is not None:
            self._show_sizes(self.plan)
        self.post_message(self.Changed(self.plan if self.can_launch else None, self.problems))

    def _mark_fields(self) -> None:
        """Each field with an error in red (the sizes' together for a layout that does not
        fit)."""
        bad_fields = {p.field for p in self.problems if p.level == "error"}
        for widget in self.query(Input):
            field = widget.id or ""
            bad = field in bad_fields or (field in SIZE_FIELDS and "sizes" in bad_fields)
            widget.set_class(bad, "-invalid")

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
