"""The command line is built for the command given first (``build_parser(only=...)``): every
command is listed, only that one's options are made. A launch spent a tenth of its CLI's start
building the other eighteen commands' options; parsing must come out the same."""

from __future__ import annotations

import argparse

import pytest

from ezpz_tui.cli.parser import build_parser

GIVEN = [
    ["launch", "--quiet", "--ppn", "2", "--tp", "2", "--env", "A=1", "--", "python", "-c", "x"],
    ["launch", "--dry-run", "--stage=keep", "--stage-min-nodes", "0.9"],
    ["relaunch", "RUN", "--tp", "2", "--yes", "--", "python", "train.py", "--lr", "1"],
    ["sweep", "--tp", "1,2", "--", "python", "-c", "pass"],
    ["runs", "--json"],
    ["why", "RUN", "--json"],
    ["plot", "RUN", "--metric", "loss", "--rank", "1"],
    ["submit", "RUN", "--dry-run", "-A", "proj"],
]


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


@pytest.mark.parametrize("argv", GIVEN, ids=lambda argv: " ".join(argv[:2]))
def test_a_command_parses_alike_with_only_its_own_options_built(argv: list[str]) -> None:
    whole = build_parser().parse_args(argv)
    assert vars(build_parser(only=argv[0]).parse_args(argv)) == vars(whole)


def test_only_the_given_command_is_built() -> None:
    """Not even the others' parsers: an argparse parser each was a tenth of a launch's CLI
    before its launcher started; ``ezpz-tui --help`` still lists every command."""
    every = _commands(build_parser())
    given = _commands(build_parser(only="launch"))
    assert set(given) == {"launch"} and len(every) > 10
    assert len(given["launch"]._actions) == len(every["launch"]._actions)


def test_a_misspelt_command_is_refused_with_the_list_of_commands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser(only="lunch").parse_args(["lunch"])
    assert done.value.code == 2
    said = capsys.readouterr().err
    assert "invalid choice: 'lunch'" in said and "'launch'" in said
