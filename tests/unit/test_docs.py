"""The design documents under docs/ stay true to the code: the key table is the key table's,
every path a page names exists, every link resolves, and nothing points outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ezpz_tui.keymap.table import DEFAULT_KEYMAP, markdown_table

ROOT = Path(__file__).parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md"))
# A path in backticks that names a file or folder of this repository: `ezpz_tui/ui/main/host.py`.
REPO_PATH = re.compile(r"`((?:ezpz_tui|runtime|tests|bench|docs|themes|scripts)/[\w./*-]*)`")
LINK = re.compile(r"\]\(([^)#]+)(?:#[^)]*)?\)")


def test_the_pages_are_there() -> None:
    names = {page.name for page in PAGES}
    assert {"architecture.md", "run-directory.md", "keymap.md", "pitfalls.md"} <= names


def test_keymap_page_holds_the_key_table_as_it_is() -> None:
    assert markdown_table(DEFAULT_KEYMAP) in (ROOT / "docs" / "keymap.md").read_text()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_path_a_page_names_exists(page: Path) -> None:
    text = page.read_text()
    named = REPO_PATH.findall(text)
    missing = [p for p in named if not list(ROOT.glob(p.rstrip("/")))]
    assert not missing, f"{page.name} names what is not in the repository: {missing}"


@pytest.mark.parametrize("page", [*PAGES, ROOT / "README.md"], ids=lambda p: p.name)
def test_every_link_resolves_inside_the_repository(page: Path) -> None:
    for target in LINK.findall(page.read_text()):
        if "://" in target:
            continue
        resolved = (page.parent / target).resolve()
        assert resolved.is_relative_to(ROOT), f"{page.name} links outside: {target}"
        assert resolved.exists(), f"{page.name} links to nothing: {target}"


def test_nothing_refers_outside_the_repository() -> None:
    places = [ROOT / "README.md", *PAGES]
    for folder in ("ezpz_tui", "runtime", "tests", "bench"):
        places += [p for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".md", ".tcss")]
    beside = "../" + "shared"  # the folder beside a checkout, which a clone does not have
    outside = [str(p.relative_to(ROOT)) for p in places if beside in p.read_text()]
    assert not outside
