"""The design documents under docs/ stay true to the code: the key table is the key table's,
every path a page names exists, every link resolves, and nothing points outside the repository;
README names every command of ``ezpz-tui --help`` with the module that runs it; and every module,
function or class of ours that a docstring, a page or README names by its dotted name exists.

Names are resolved in the source's syntax trees, not by importing: checking a name in
``runtime.dist`` must not load torch.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from ezpz_tui.cli import COMMANDS, build_parser, handler
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


# --- the commands -------------------------------------------------------------------------------

README = ROOT / "README.md"
README_CLI_ROW = re.compile(r"^\| `ezpz_tui/cli/` \|(.*)\|$", re.MULTILINE)
ARCHITECTURE_CLI_ROW = re.compile(r"^\| `ezpz_tui/cli/` \|(.*)\|$", re.MULTILINE)
MODULE_FILE = re.compile(r"`(\w+\.py)`")


def _commands() -> dict[str, str]:
    """Every command ``ezpz-tui --help`` lists, with the file of the module that runs it."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(COMMANDS) - {None}, "a command with no handler, or the reverse"
    return {
        name: Path(sys.modules[handler(name).__module__].__file__ or "").name
        for name in sub.choices
    }


def _segments(row: str) -> dict[str, str]:
    """What a folder-map row says after each ``module.py`` it names, up to the next."""
    marks = list(MODULE_FILE.finditer(row))
    ends = [m.start() for m in marks[1:]] + [len(row)]
    return {m.group(1): row[m.end() : end] for m, end in zip(marks, ends, strict=True)}


def test_readme_shows_every_command_in_use() -> None:
    text = README.read_text()
    missing = [name for name in _commands() if not re.search(rf"ezpz-tui {name}\b", text)]
    assert not missing, f"README's headless use never shows ezpz-tui {missing}"


def test_readme_s_folder_map_names_every_command_with_its_module() -> None:
    """The cli row of README's map says which module runs each command: `reading.py` `info`,
    ... A command added to the parser, or moved to another module, fails here until README
    says so."""
    found = README_CLI_ROW.search(README.read_text())
    assert found, "README's folder map has no row for `ezpz_tui/cli/`"
    segments = _segments(found.group(1))
    wrong = {
        name: module
        for name, module in _commands().items()
        if f"`{name}`" not in segments.get(module, "")
    }
    assert not wrong, f"README's cli row does not name these commands after their module: {wrong}"


def test_the_architecture_s_cli_layer_names_every_command() -> None:
    found = ARCHITECTURE_CLI_ROW.search((ROOT / "docs" / "architecture.md").read_text())
    assert found, "docs/architecture.md's layers have no row for `ezpz_tui/cli/`"
    missing = [name for name in _commands() if f"`{name}`" not in found.group(1)]
    assert not missing, f"docs/architecture.md's cli layer leaves out {missing}"


# --- dotted names -------------------------------------------------------------------------------

OURS = ("ezpz_tui", "runtime")
SOURCES = ("ezpz_tui", "runtime", "bench")
# ``runtime.efficiency.probe``, ``ezpz_tui.core.runs.store.RunStore.list_runs`` in any text (not
# a path's part: ``runtime/stage.py``, ``ezpz_tui.egg-info``), and the target of a role,
# absolute, relative to the package (``:mod:`.run_tools```) or short (``:func:`explain```).
DOTTED = re.compile(r"(?<![\w./-])((?:ezpz_tui|runtime)(?:\.[A-Za-z_]\w*)+)(?![\w-])")
ROLE = re.compile(r":(?:func|class|mod|meth|data|attr|exc|obj):`~?(\.?[\w.]+)(?:\(\))?`")
DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _module_file(parts: tuple[str, ...]) -> Path | None:
    base = ROOT.joinpath(*parts)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A body's statements, those under ``if TYPE_CHECKING:`` or a ``try`` included."""
    for node in body:
        if isinstance(node, (ast.If, ast.Try)):
            handlers = [h.body for h in getattr(node, "handlers", [])]
            for part in (node.body, node.orelse, *handlers):
                yield from _statements(part)
        else:
            yield node


_BOUND: dict[int, dict[str, ast.AST | str]] = {}  # by the id of a body of a cached tree


def _bound(body: list[ast.stmt], in_class: bool) -> dict[str, ast.AST | str]:
    """What a module's or class's body binds: a definition or an assignment, or for an import
    the dotted name it comes from; in a class, what its methods set on ``self`` too."""
    if id(body) not in _BOUND:
        _BOUND[id(body)] = _binds(body, in_class)
    return _BOUND[id(body)]


def _binds(body: list[ast.stmt], in_class: bool) -> dict[str, ast.AST | str]:
    out: dict[str, ast.AST | str] = {}
    for node in _statements(body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = node
            if in_class and not isinstance(node, ast.ClassDef):
                for sub in ast.walk(node):
                    if (
                        isinstance(sub, ast.Attribute)
                        and isinstance(sub.ctx, ast.Store)
                        and isinstance(sub.value, ast.Name)
                        and sub.value.id == "self"
                    ):
                        out.setdefault(sub.attr, sub)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        out[name.id] = node
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                out[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.partition(".")[0]
                out[alias.asname or top] = alias.name if alias.asname else top
    return out


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` is a module of ours or something one defines or imports."""
    parts = tuple(dotted.split("."))
    for k in range(len(parts), 0, -1):
        path = _module_file(parts[:k])
        if path is not None:
            return _has(path, _tree(path).body, parts[k:], in_class=False)
    return False


def _has(path: Path, body: list[ast.stmt], rest: tuple[str, ...], in_class: bool) -> bool:
    if not rest:
        return True
    found = _bound(body, in_class).get(rest[0])
    if isinstance(found, str):  # imported: from where, unless it is someone else's
        return not found.startswith(OURS) or resolves(".".join((found, *rest[1:])))
    if isinstance(found, ast.ClassDef):
        return _has(path, found.body, rest[1:], True) or _in_bases(path, found, rest[1:])
    return found is not None  # a function or a value: the syntax tree says no more


def _in_bases(path: Path, cls: ast.ClassDef, rest: tuple[str, ...]) -> bool:
    """Whether a base class of ours has ``rest`` (an inherited method)."""
    module = _bound(_tree(path).body, in_class=False)
    for base in cls.bases:
        where = module.get(base.id) if isinstance(base, ast.Name) else None
        if isinstance(where, str) and where.startswith(OURS):
            found = resolves(".".join((where, *rest)))
        elif isinstance(where, ast.ClassDef):
            found = _has(path, where.body, rest, True) or _in_bases(path, where, rest)
        else:
            found = False
        if found:
            return True
    return False


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _docstrings(path: Path) -> Iterator[tuple[str, list[str]]]:
    """Every docstring of ``path``, with the scopes its short names are relative to: the
    classes around it, innermost first, then its module."""
    module = _module_name(path)

    def walk(node: ast.AST, classes: list[str]) -> Iterator[tuple[str, list[str]]]:
        if isinstance(node, ast.ClassDef):
            classes = [*classes, node.name]
        text = ast.get_docstring(node, clean=False) if isinstance(node, DOCUMENTED) else None
        if text:
            yield text, [".".join([module, *classes[:i]]) for i in range(len(classes), -1, -1)]
        for field in ("body", "orelse", "finalbody", "handlers"):  # statements, not expressions
            for child in getattr(node, field, ()):
                yield from walk(child, classes)

    yield from walk(_tree(path), [])


def _unresolved(text: str, scopes: list[str]) -> set[str]:
    """The names of ours in ``text`` that resolve to nothing; a role's short or relative name
    is looked for in ``scopes`` (none for a page, whose roles must be absolute)."""
    bad = {name for name in DOTTED.findall(text) if not resolves(name)}
    for target in ROLE.findall(text):
        if target.startswith(OURS):
            found = resolves(target)
        elif not scopes:
            continue  # a page's short name: nothing to be relative to
        elif target.startswith("."):
            module = scopes[-1]
            is_package = (ROOT.joinpath(*module.split(".")) / "__init__.py").is_file()
            found = resolves((module if is_package else module.rpartition(".")[0]) + target)
        else:
            found = any(resolves(f"{scope}.{target}") for scope in scopes)
        if not found:
            bad.add(target)
    return bad


def test_the_resolver_tells_a_name_that_exists_from_one_that_moved() -> None:
    assert resolves("ezpz_tui.core.runs.store.RunStore.list_runs")
    assert resolves("ezpz_tui.core.launching.making.RunMaker.list_runs")  # inherited
    assert resolves("ezpz_tui.core.runs.store.RunStore.outputs")  # set in __init__
    assert resolves("runtime.setup")  # imported for type checkers, loaded lazily
    assert not resolves("ezpz_tui.core.launching.runstore.RunStore")
    assert not resolves("runtime.efficiency.probe")
    assert not resolves("ezpz_tui.core.runs.store.RunStore.make")
    assert _unresolved(":func:`explain` and :mod:`.store`", ["ezpz_tui.core.runs.record"]) == {
        "explain"
    }


def test_every_dotted_name_in_a_docstring_resolves() -> None:
    found = set()
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            for text, scopes in _docstrings(path):
                found |= {(where, name) for name in _unresolved(text, scopes)}
    assert not found, f"docstrings name what is not there: {sorted(found)}"


@pytest.mark.parametrize("page", [*PAGES, README], ids=lambda p: p.name)
def test_every_dotted_name_on_a_page_resolves(page: Path) -> None:
    missing = sorted(_unresolved(page.read_text(), []))
    assert not missing, f"{page.name} names what is not there: {missing}"
