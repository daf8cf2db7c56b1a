"""The key binding table: the design's meanings (docs/keymap.md), no double bindings, overrides,
chords."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from ezpz_tui.keymap.chords import CHORD_TIMEOUT_S, ChordMachine
from ezpz_tui.keymap.keys import canonical_key, key_label
from ezpz_tui.keymap.overrides import apply_overrides, conflicts, load_overrides
from ezpz_tui.keymap.table import (
    DEFAULT_KEYMAP,
    SCOPES,
    KeyBinding,
    Keymap,
    grouped,
    markdown_table,
    parse_table,
)

# docs/keymap.md, row by row: keys | action | a word of the meaning that must survive.
DESIGN_ROWS = """
j,down   | cursor_down          | next
k,up     | cursor_up            | previous
g        | first                | first
G        | last                 | last
z z      | center               | centre
h        | region_left          | left
l        | region_right         | right
]        | next_heading         | next heading
[        | previous_heading     | previous heading
}        | next_block           | next block
{        | previous_block       | previous block
ctrl+d   | half_page_down       | down
ctrl+u   | half_page_up         | up
z h      | toggle_left_sidebar  | left sidebar
z l      | toggle_right_sidebar | right sidebar
H        | focus_left           | left region
J        | focus_main           | main region
K        | focus_top            | top region
L        | focus_right          | right region
ctrl+p,: | command_palette      | palette
ctrl+x   | pick_theme           | theme
?        | show_help            | key bindings
escape,ctrl+c | close           | close
ctrl+j,z j | focus_main         | main region
ctrl+k,z k | focus_top          | top region
ctrl+h,backspace | focus_left     | left region (sidebar)
ctrl+l   | focus_right          | right region (sidebar)
C        | collapse_all         | fold
E        | expand_all           | unfold
ctrl+n   | next_document        | next document
ctrl+b   | previous_document    | previous document
ctrl+o   | history_back         | back
ctrl+i   | history_forward      | forward
/        | search               | search
n        | next_match           | next match
N        | previous_match       | previous match
"""
DESIGN_TABLE = [
    (tuple(keys.strip().split(",")), action.strip(), meaning.strip())
    for keys, action, meaning in (row.split("|") for row in DESIGN_ROWS.strip().splitlines())
]


@pytest.mark.parametrize(("keys", "action", "meaning"), DESIGN_TABLE)
def test_every_design_key_has_its_meaning(keys: tuple[str, ...], action: str, meaning: str) -> None:
    binding = DEFAULT_KEYMAP[action]
    assert set(keys) <= set(binding.keys)
    assert meaning in binding.description.lower()


def test_builder_keys_are_single_keys_and_in_the_footer() -> None:
    for action in ("launch", "relaunch", "stop_run", "quit", "toggle_follow"):
        binding = DEFAULT_KEYMAP[action]
        assert len(binding.keys) == 1 and binding.single_keys == binding.keys
        assert binding.footer
    assert DEFAULT_KEYMAP["quit"].keys == ("q",)
    assert DEFAULT_KEYMAP["rerun_doctor"].keys
    assert "asks" in DEFAULT_KEYMAP["stop_run"].description


def test_table_is_well_formed() -> None:
    actions = [b.action for b in DEFAULT_KEYMAP]
    assert len(actions) == len(set(actions))
    for binding in DEFAULT_KEYMAP:
        assert binding.scope in SCOPES
        assert binding.description
        for key in binding.keys:
            assert all(canonical_key(step) == step for step in key.split(" ")), key
        if binding.single_keys and binding.chords:  # J, ctrl+j, zj: the design's synonyms
            assert binding.scope == "global", binding.action


def test_a_row_of_keys_and_chords_takes_both_in_overrides() -> None:
    keymap, problems = apply_overrides(DEFAULT_KEYMAP, {"focus_main": "U,z m", "focus_top": "z t"})
    assert keymap["focus_main"].keys == ("U", "z m")
    assert keymap.chords()[("z", "m")] == "focus_main" and ("z", "j") not in keymap.chords()
    assert keymap.textual_overrides() == {"ezpz.focus_main": "U"}
    # Chords alone would leave K bound all the same (Textual cannot unbind): said, not done.
    assert problems == [
        "[keys] focus_top: give a single key as well as chords; kept 'K, ctrl+k, zk'."
    ]


def test_ctrl_h_and_backspace_are_one_key() -> None:
    """Terminals send ctrl+h as the Backspace byte: another action on backspace clashes."""
    _, problems = apply_overrides(DEFAULT_KEYMAP, {"launch": "backspace"})
    assert problems == [
        "[keys] launch: 'backspace' is already used by focus_left (everywhere); kept 'r'."
    ]


def test_parse_table_reads_headings_rows_and_comments() -> None:
    text = """
    # a comment line
    [log]
    f        | toggle_follow | follow | Follow the end
    [        | previous_heading |    | Previous heading
    [dialog]
    y,enter  | confirm       |        | Yes
    """
    assert parse_table(text) == Keymap(
        (
            KeyBinding(("f",), "toggle_follow", "Follow the end", "log", "follow"),
            KeyBinding(("[",), "previous_heading", "Previous heading", "log"),
            KeyBinding(("y", "enter"), "confirm", "Yes", "dialog"),
        )
    )


def test_no_key_is_bound_twice_in_one_scope() -> None:
    for scope in SCOPES:
        keys = [k for b in DEFAULT_KEYMAP.in_scope(scope) for k in b.keys]
        assert [k for k, n in Counter(keys).items() if n > 1] == [], scope


def test_defaults_have_no_conflicts_across_active_scopes() -> None:
    assert conflicts(DEFAULT_KEYMAP) == []


def _map(*bindings: KeyBinding) -> Keymap:
    return Keymap(bindings)


def test_conflicts_are_found() -> None:
    a = KeyBinding(("x",), "a", "A", "global")
    same_scope = KeyBinding(("x",), "b", "B", "global")
    overlapping = KeyBinding(("x",), "b", "B", "navigation")
    in_dialog = KeyBinding(("x",), "b", "B", "dialog")
    prefix = KeyBinding(("x y",), "b", "B", "log")
    tab = KeyBinding(("tab",), "a", "A", "navigation")
    ctrl_i = KeyBinding(("ctrl+i",), "b", "B", "log")
    assert conflicts(_map(a, same_scope))[0].key == "x"
    assert conflicts(_map(a, overlapping))
    assert conflicts(_map(a, in_dialog)) == []
    assert conflicts(_map(a, prefix))[0].key == "x"
    assert conflicts(_map(tab, ctrl_i))
    regions = _map(KeyBinding(("x",), "a", "A", "log"), KeyBinding(("x",), "b", "B", "plot"))
    assert conflicts(regions) == [], "a log and a plot never have focus together"


CANONICAL = dict(
    pair.split("=")
    for pair in [
        "j=j",
        "G=G",
        "shift+g=G",
        "?=?",
        "question_mark=?",
        "colon=:",
        "right_square_bracket=]",
        "slash=/",
        "comma=,",
        "Esc=escape",
        "escape=escape",
        "ctrl+D=ctrl+d",
        "Ctrl+x=ctrl+x",
        "shift+tab=shift+tab",
        "pgdn=pagedown",
        "f5=f5",
    ]
)
NOT_KEYS = ["zz", "", " ", "foo+j", "ctrl+ctrl+j", "ctrl+nothing"]


@pytest.mark.parametrize(
    ("written", "canonical"), [*CANONICAL.items(), *((text, None) for text in NOT_KEYS)]
)
def test_canonical_key(written: str, canonical: str | None) -> None:
    assert canonical_key(written) == canonical


def test_key_labels() -> None:
    assert key_label("escape") == "esc"
    assert key_label("z z") == "zz"
    assert key_label("g ctrl+d") == "g ctrl+d"
    assert DEFAULT_KEYMAP["cursor_down"].label == "j, down"


def test_overrides_apply_and_reach_textual() -> None:
    keymap, problems = apply_overrides(
        DEFAULT_KEYMAP,
        {
            "launch": "u",
            "search": ["/", "ctrl+f"],
            "center": "z c",
            "stop_run": " ctrl+y , ctrl+y ",
        },
    )
    assert problems == []
    assert keymap["launch"].keys == ("u",)
    assert keymap["search"].keys == ("/", "ctrl+f")
    assert keymap["center"].keys == ("z c",)
    assert keymap["stop_run"].keys == ("ctrl+y",)
    assert keymap.textual_overrides() == {
        "ezpz.launch": "u",
        "ezpz.search": "/,ctrl+f",
        "ezpz.stop_run": "ctrl+y",
    }
    assert keymap.chords()[("z", "c")] == "center"
    assert DEFAULT_KEYMAP["launch"].keys == ("r",), "the defaults are not modified"


def test_override_problems_are_sentences_and_keep_defaults() -> None:
    keymap, problems = apply_overrides(
        DEFAULT_KEYMAP,
        {
            "lanch": "u",
            "quit": "r",
            "first": "g g",
            "center": "ctrl+l",
            "stop_run": 5,
            "relaunch": "zz",
            "search": "",
        },
    )
    assert keymap == DEFAULT_KEYMAP
    assert len(problems) == 7
    for sentence in problems:
        assert sentence.startswith("[keys] ") and sentence.endswith(".")
    text = "\n".join(problems)
    assert "did you mean 'launch'" in text
    assert "'r' is already used by launch" in text
    assert "takes single keys" in text
    assert "takes two-key chords" in text
    assert "'z z'" in text


def test_the_later_of_two_clashing_overrides_loses() -> None:
    keymap, problems = apply_overrides(DEFAULT_KEYMAP, {"launch": "u", "rerun_doctor": "u"})
    assert keymap["launch"].keys == ("u",)
    assert keymap["rerun_doctor"].keys == ("D",)
    assert problems == [
        "[keys] rerun_doctor: 'u' is already used by launch (everywhere); kept 'D'."
    ]
    assert conflicts(keymap) == []


def test_swapping_two_keys_is_fine() -> None:
    keymap, problems = apply_overrides(DEFAULT_KEYMAP, {"launch": "q", "quit": "r"})
    assert problems == []
    assert (keymap["launch"].keys, keymap["quit"].keys) == (("q",), ("r",))


@pytest.mark.parametrize(
    "junk",
    [{"launch": None}, {"launch": {"a": 1}}, {"launch": [1, 2]}, {"": "x"}, {"launch": ",,,"}],
)
def test_overrides_never_raise(junk: dict[str, object]) -> None:
    keymap, problems = apply_overrides(DEFAULT_KEYMAP, junk)
    assert keymap == DEFAULT_KEYMAP
    assert problems


def test_load_overrides_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[ui]\ntheme = "ezpz-nord"\n\n[keys]\nlaunch = "u"\nbogus = "x"\n')
    keymap, problems = load_overrides(path)
    assert keymap["launch"].keys == ("u",)
    assert problems == ["[keys] bogus: there is no such action; ignored."]


def test_load_overrides_survives_a_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[keys\nlaunch = ")
    keymap, problems = load_overrides(path)
    assert keymap == DEFAULT_KEYMAP
    assert len(problems) == 1 and "not valid TOML" in problems[0]


def test_load_overrides_without_a_file(tmp_path: Path) -> None:
    assert load_overrides(tmp_path / "missing.toml") == (DEFAULT_KEYMAP, [])


def test_markdown_table_lists_every_binding_once() -> None:
    table = markdown_table(DEFAULT_KEYMAP)
    lines = table.splitlines()
    assert lines[0] == "| keys | action | meaning | where |"
    assert len(lines) == 2 + len(DEFAULT_KEYMAP.bindings)
    assert "| `j` / `down` | `cursor_down` | Next item | In lists, logs and plots |" in lines
    assert "| `zz` | `center` |" in table
    pipe = Keymap((KeyBinding(("|", "`"), "a", "A", "global"),))
    assert "| `\\|` / `` ` `` | `a` | A | Everywhere |" in markdown_table(pipe)


def test_grouped_follows_scope_order() -> None:
    titles = [title for title, _ in grouped(DEFAULT_KEYMAP)]
    assert titles == [t for s, t in SCOPES.items() if DEFAULT_KEYMAP.in_scope(s)]
    assert titles[0] == "Everywhere"


def test_chords_complete() -> None:
    machine = ChordMachine(DEFAULT_KEYMAP.chords())
    assert machine.feed("z", 0.0).kind == "pending"
    assert machine.pending == ("z",)
    assert machine.feed("z", 0.3) == ("action", "center")
    assert machine.pending == ()
    assert machine.feed("z", 1.0).kind == "pending"
    assert machine.feed("h", 1.5).action == "toggle_left_sidebar"
    assert machine.feed("z", 2.0).kind == "pending"
    assert machine.feed("l", 2.2).action == "toggle_right_sidebar"


def test_other_keys_pass_through() -> None:
    machine = ChordMachine(DEFAULT_KEYMAP.chords())
    assert machine.feed("j", 0.0).kind == "passthrough"
    assert machine.feed("ctrl+d", 0.0).kind == "passthrough"
    machine.feed("z", 1.0)
    assert machine.feed("q", 1.1).kind == "passthrough", "a broken chord lets the key through"
    assert machine.pending == ()


def test_a_chord_times_out() -> None:
    machine = ChordMachine(DEFAULT_KEYMAP.chords())
    machine.feed("z", 10.0)
    late = 10.0 + CHORD_TIMEOUT_S + 0.01
    assert machine.feed("h", late).kind == "passthrough"
    machine.feed("z", 20.0)
    assert machine.feed("z", 20.0 + CHORD_TIMEOUT_S + 0.5).kind == "pending", "starts afresh"


def test_chords_accept_textual_key_names() -> None:
    machine = ChordMachine({("?", "]"): "odd", ("ctrl+i", "g"): "tabbed"})
    assert machine.feed("question_mark", 0).kind == "pending"
    assert machine.feed("right_square_bracket", 0).action == "odd"
    assert machine.feed("tab", 0).kind == "pending", "ctrl+i arrives as tab"
    assert machine.feed("g", 0).action == "tabbed"
