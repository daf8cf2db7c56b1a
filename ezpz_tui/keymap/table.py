"""The table itself: what a binding is, the default bindings, and the layout people read.

The default table is written as text: one aligned row per action, under a `[scope]` heading that
holds until the next one. A row is `keys | action | footer | description`: keys in the notation
of `ezpz_tui.keymap.keys`, comma separated; the footer label (empty: not in the footer); the
sentence the help screen and the docs show. Text, not calls: rows of one shape read best as
a table.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from ezpz_tui.keymap.keys import key_label

SCOPES: dict[str, str] = {
    "global": "Everywhere",
    "navigation": "In lists, logs and plots",
    "ranks": "Rank list",
    "log": "Rank logs",
    "runs": "Runs",
    "plot": "Metrics",
    "form": "Launch form",
    "topology": "Topology grid",
    "heatmap": "Heatmap",
    "dialog": "Dialogs",
}
"""Where a binding applies, in the order the help screen and the docs list them, with a title."""

CONTEXTS: tuple[frozenset[str], ...] = (
    frozenset({"global", "navigation", "log"}),
    frozenset({"global", "navigation", "ranks"}),
    frozenset({"global", "navigation", "runs"}),
    frozenset({"global", "navigation", "plot"}),
    frozenset({"global", "form"}),
    frozenset({"global", "navigation", "topology"}),
    frozenset({"global", "navigation", "heatmap"}),
    frozenset({"dialog"}),
)
"""Scopes that are active at the same time. A focused log sees global + navigation + log keys;
a dialog (a modal screen) sees only its own. Two bindings conflict only when some context holds
both of their scopes."""


@dataclass(frozen=True)
class KeyBinding:
    """One row of the table: the keys that run one action in one scope.

    `keys` holds canonical keys; a chord's steps are separated by a space (`"z z"`). `footer` is
    the short label shown in the footer; an empty footer keeps the binding out of it. Every
    binding is listed on the help screen and in the docs with its `description`.
    """

    keys: tuple[str, ...]
    action: str
    description: str
    scope: str
    footer: str = ""

    @property
    def single_keys(self) -> tuple[str, ...]:
        """The keys that act on their own; these become Textual bindings."""
        return tuple(k for k in self.keys if " " not in k)

    @property
    def chords(self) -> tuple[tuple[str, ...], ...]:
        """The multi-key sequences; Textual cannot bind these, `ChordMachine` handles them."""
        return tuple(tuple(k.split(" ")) for k in self.keys if " " in k)

    @property
    def kinds(self) -> frozenset[str]:
        """The kinds of key this action takes: `single` (a Textual binding), `chord` (the chord
        machine), or both where its row holds both (`J, ctrl+j, zj`). An override keeps to
        them: a single key given to a chord-only action would have no binding to land in."""
        return frozenset("chord" if " " in k else "single" for k in self.keys)

    @property
    def label(self) -> str:
        """The keys as people read them: `j, down`."""
        return ", ".join(key_label(k) for k in self.keys)

    @property
    def first_label(self) -> str:
        """The first key alone (`esc`), for a dialog's hint line where room is short; the help
        screen lists them all."""
        return key_label(self.keys[0])

    @property
    def binding_id(self) -> str:
        """The Textual binding id, the handle `App.set_keymap` uses to rebind this action."""
        return f"ezpz.{self.action}"

    @property
    def textual_keys(self) -> str:
        """The comma-separated key string a Textual `Binding` takes (empty for chords)."""
        return ",".join(self.single_keys)


@dataclass(frozen=True)
class Keymap:
    """The whole table. Immutable: overrides make a new one."""

    bindings: tuple[KeyBinding, ...]

    def __iter__(self) -> Iterator[KeyBinding]:
        return iter(self.bindings)

    def __getitem__(self, action: str) -> KeyBinding:
        """The binding of `action` (each action has exactly one row); KeyError if unknown."""
        for binding in self.bindings:
            if binding.action == action:
                return binding
        raise KeyError(action)

    def in_scope(self, scope: str) -> tuple[KeyBinding, ...]:
        """The bindings of one scope, in table order (what a widget of that scope binds)."""
        return tuple(b for b in self.bindings if b.scope == scope)

    def chords(self) -> dict[tuple[str, ...], str]:
        """Every chord and its action: the input of `ChordMachine`."""
        return {chord: b.action for b in self.bindings for chord in b.chords}

    def textual_overrides(self) -> dict[str, str]:
        """`{binding id: "key,key"}` for the single-key bindings that differ from the defaults.

        Widgets declare their Textual `BINDINGS` from `DEFAULT_KEYMAP` at class level (with
        `binding_id` as the id); passing this to `App.set_keymap` applies the user's overrides to
        all of them at once, including screens opened later.
        """
        return {
            b.binding_id: b.textual_keys
            for b in self.bindings
            if b.single_keys and b.keys != DEFAULT_KEYMAP[b.action].keys
        }


_SCOPE_HEADING = re.compile(r"\[(\w+)\]")


def parse_table(text: str) -> Keymap:
    """The keymap written in `text` (the format of this module's docstring); `#` starts a
    comment line."""
    bindings: list[KeyBinding] = []
    scope = ""
    for line in map(str.strip, text.splitlines()):
        if not line or line.startswith("#"):
            continue
        if heading := _SCOPE_HEADING.fullmatch(line):
            scope = heading[1]
            continue
        keys, action, footer, description = (cell.strip() for cell in line.split("|"))
        bindings.append(KeyBinding(tuple(keys.split(",")), action, description, scope, footer))
    return Keymap(tuple(bindings))


DEFAULT_KEYMAP = parse_table(
    """
# docs/keymap.md, meanings kept as the author's site gives them. The order matters beyond
# the help screen's grouping: it decides which clash an override is told about first.
[navigation]
j,down     | cursor_down          |          | Next item
k,up       | cursor_up            |          | Previous item
g          | first                |          | First item in the region
G          | last                 |          | Last item in the region
z z        | center               |          | Centre the focused item
[global]
h          | region_left          |          | Move to the region on the left
l          | region_right         |          | Move to the region on the right
[navigation]
]          | next_heading         |          | Next heading (section, error, run)
[          | previous_heading     |          | Previous heading (section, error, run)
}          | next_block           |          | Next block
{          | previous_block       |          | Previous block
ctrl+d     | half_page_down       |          | Half a page down
ctrl+u     | half_page_up         |          | Half a page up
[global]
z h        | toggle_left_sidebar  |          | Show or hide the left sidebar
z l        | toggle_right_sidebar |          | Show or hide the right sidebar
# ctrl+h arrives as Backspace from most terminals (the same byte, 0x08; tmux too): both are
# bound. ctrl+j is the newline byte, which Textual reports as ctrl+j, apart from Enter (a
# carriage return). A row may hold single keys and chords together (J, ctrl+j, zj).
H,ctrl+h,backspace | focus_left |      | Focus the left region (sidebar)
J,ctrl+j,z j | focus_main         |          | Focus the main region
K,ctrl+k,z k | focus_top          |          | Focus the top region
L,ctrl+l   | focus_right          |          | Focus the right region (sidebar)
# The next document: the next rank's log in the Run tab, elsewhere the next run of the list.
ctrl+n     | next_document        |          | Next document (log or run)
ctrl+b     | previous_document    |          | Previous document (log or run)
ctrl+p,:   | command_palette      | palette  | Command palette
ctrl+x     | pick_theme           |          | Pick a theme
?          | show_help            | keys     | Show the key bindings
[dialog]
# ctrl+c closes a dialog; elsewhere it keeps Textual's meaning (copy a selection, or a hint
# that q quits), and Textual's own command palette closes on it too (EzpzApp).
escape,ctrl+c | close             |          | Close the dialog
[navigation]
ctrl+o     | history_back         |          | Back in the view history
# Terminals (and tmux) send ctrl+i as Tab; listing both makes it work everywhere, and the
# navigation scope keeps Tab free for moving between fields of the launch form.
ctrl+i,tab | history_forward      |          | Forward in the view history
/          | search               |          | Search
n          | next_match           |          | Next match
N          | previous_match       |          | Previous match
[global]
# The builders' keys: one key each for launch and relaunch, shown in the footer.
r          | launch               | launch   | Launch the plan as a new run
R          | relaunch             | relaunch | Stop the run, launch the edited plan
X          | stop_run             | stop     | Stop the run (asks first)
# While the run on screen has failed (the Run tab's failure line shows w, the footer B).
w          | show_failure         |          | Why the run failed, on one screen
B          | exclude_and_relaunch | exclude  | Exclude host and relaunch (bad_hosts.txt)
e          | edit_sizes           | sizes    | Edit the sizes (cursor on TP)
W          | sweep                |          | Sweep TP/PP/CP, then compare them
D          | rerun_doctor         |          | Run the doctor checks again
S          | show_stacks          |          | Where every rank waits: Python stacks, grouped
P          | profile_steps        |          | Profile every rank's next steps: compute, comm, idle
Y          | copy_trackers        |          | Copy the commands that open the run's trackers
# vim's gt / gT without the g, which already means "first item".
t          | next_tab             |          | Next tab of the main region (Launch … Heatmap)
T          | previous_tab         |          | Previous tab of the main region
q          | quit                 | quit     | Quit (asks first while a run is alive)
F          | toggle_fullscreen    |          | Full screen the focused view, or back
[ranks]
# Typing a rank's number in the rank list selects it (digits within a second add up).
0,1,2,3,4,5,6,7,8,9 | type_rank   |          | Go to the rank with this number
enter      | choose               |          | Read the selected rank's log (on a host: fold it)
s          | cycle_sort           | sort     | Sort by step time, CPU, RSS, util or mem, in turn
C          | collapse_all         |          | Fold every host's ranks under its heading
E          | expand_all           |          | Unfold every host
[log]
f          | toggle_follow        | follow   | Follow the log end on or off (G resumes)
a          | toggle_all_ranks     | all      | All ranks interleaved, or the selected rank
# less's & : keep only the lines that match (here: "@0,3-5 text" = ranks and text).
&          | filter               |          | Filter lines by rank (@0,3-5) and text
enter      | show_line            |          | Show the line under the cursor whole
[plot]
m          | next_metric          |          | Plot the next metric
M          | previous_metric      |          | Plot the previous metric
v          | cycle_view           |          | One rank, all ranks, or mean with min/max band
s          | cycle_smoothing      |          | Smoothing off / 0.6 / 0.9 / 0.99 (EMA)
y          | toggle_log_scale     |          | log10 y axis on or off
x          | toggle_x_axis        |          | x axis: step or time
# The step cursor. h / l move it as well: the plot takes region_left / region_right and moves
# on to the next region only from the first / last point (as the heatmap does). g / G go to the
# first / last step and ] / [ to the next / previous event (spike, NaN, gap, relaunch): the
# navigation keys, with a plot's meaning. A count before a move repeats it (10l), as in vim.
left       | point_left           |          | Cursor to the previous point (h too, until the edge)
right      | point_right          |          | Cursor to the next point (l too, until the edge)
1,2,3,4,5,6,7,8,9 | count         |          | Count for the next cursor move or zoom (10l)
0          | window_start         |          | Cursor to the first point in view (after a count: 10)
$          | window_end           |          | Cursor to the last point in view
+          | zoom_in              |          | Zoom in around the cursor (y follows the view)
-          | zoom_out             |          | Zoom out around the cursor
=          | zoom_fit             |          | Fit all the steps
<          | pan_left             |          | Pan the zoomed view left by half its width
>          | pan_right            |          | Pan the zoomed view right by half its width
enter      | open_step_log        |          | Log of the rank under the cursor, at that step
escape     | hide_cursor          |          | Hide the cursor (its readout gives way to the status)
V          | toggle_stacked       |          | Small multiples: loss, lr, grad norm, tokens/s
[runs]
c          | compare_run          |          | Overlay this run on the plots, or remove it
b          | submit_batch         |          | Submit this finished run's plan as a batch job (asks)
[topology]
o          | cycle_colour         | colour   | Colour ranks by the next group (TP, PP, CP, DP)
[heatmap]
# h / l move the cursor as well: the heatmap takes region_left / region_right and moves on to
# the next region only from the grid's edge.
left       | cell_left            |          | The cell to the left (h too, until the grid's edge)
right      | cell_right           |          | The cell to the right (l too, until the grid's edge)
o          | cycle_figure         | figure   | Colour by the next figure: step time, tokens/s, util…
enter      | choose_cell          |          | Read the log of the rank under the cursor
[form]
# In a form field letters are typed; Esc (or Enter) leaves the field so keys act again. Out of
# a field (normal mode) j/k move the field cursor, + and - step the size under it.
escape     | leave_field          |          | Leave the field (single keys act again)
i,enter    | edit_field           |          | Edit the field under the cursor
+          | step_up              | +/- size | Next size that fits
-          | step_down            |          | Previous size that fits
# vim's za: the fields most plans leave alone (hosts excluded, launcher, its flags, staging,
# env, trackers) open or fold away; the form keeps the choice for the next start.
z a        | toggle_more          |          | Show or fold away the rarely used fields
[dialog]
# The answers in a dialog (ConfirmScreen, theme picker).
y,enter    | confirm              |          | Yes / keep the choice
n          | cancel               |          | No
l          | leave_running        |          | Quitting: leave the runs running, supervised
f          | switch_resume        |          | Relaunching: resume, or start fresh
o          | override_preflight   |          | Relaunching: go ahead though the preflight failed
"""
)
"""The default bindings: every key the UI knows, exactly once."""


def grouped(keymap: Keymap) -> list[tuple[str, tuple[KeyBinding, ...]]]:
    """`(scope title, bindings)` for each scope that has bindings, in `SCOPES` order: the layout
    of the help screen and of the docs."""
    groups = ((title, keymap.in_scope(scope)) for scope, title in SCOPES.items())
    return [(title, bindings) for title, bindings in groups if bindings]


def markdown_table(keymap: Keymap) -> str:
    """The keymap as a Markdown table for the docs, grouped by scope in `SCOPES` order."""
    lines = ["| keys | action | meaning | where |", "| --- | --- | --- | --- |"]
    for title, bindings in grouped(keymap):
        for b in bindings:
            keys = " / ".join(_code(key_label(k)) for k in b.keys)
            lines.append(f"| {keys} | `{b.action}` | {b.description} | {title} |")
    return "\n".join(lines) + "\n"


def _code(text: str) -> str:
    text = text.replace("|", "\\|")
    fence = "``" if "`" in text else "`"
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}"
