"""The layer table of docs/architecture.md is the import rule: a module imports only its own row
and the rows above it (the table lists the layers bottom up).

The imports are read from the source (``ast``), not by importing anything:
- module-level imports and imports inside functions (a lazy import is still a dependency: it
  only moves the failure to run time) count;
- imports under ``if TYPE_CHECKING:`` do not (annotations only, nothing runs);
- an import marked ``# layers: plugin`` on its line is a deliberate load of a higher layer by
  name (none today) and does not count.

Run ``python tests/test_layers.py`` for the full list of upward imports.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
PACKAGE = "deid_sql"
# packages shipped inside deid_sql from top-level folders (pyproject's package-dir)
MAPPED = {"udfs": "deid_sql.udfs", "sql": "deid_sql.sql", "fixtures": "deid_sql.fixtures"}
PLUGIN = "# layers: plugin"
HEADING = "## Layers, bottom up"


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name
    imported: str
    line: int
    path: Path


def layer_table(text: str) -> list[list[str]]:
    """The table's rows, bottom up, each as the dotted module prefixes its first cell names
    (``spec.py`` -> ``deid_sql.spec``, ``search/`` -> ``deid_sql.search``)."""
    start = text.index(HEADING)
    rows: list[list[str]] = []
    for line in text[start:].splitlines()[1:]:
        if rows and not line.startswith("|"):
            break
        if not line.startswith("|") or line.startswith("|---") or line.startswith("| module"):
            continue
        first = line.split("|")[1]
        names = []
        for token in re.findall(r"`([^`]+)`", first):
            if token.startswith(PACKAGE + "."):
                continue  # "(ships as `deid_sql.udfs`)"
            parts = token.removesuffix("/").removesuffix(".py").split("/")
            names.append(MAPPED.get(parts[0], f"{PACKAGE}.{parts[0]}") + "".join(f".{p}" for p in parts[1:]))
        if not names:
            raise AssertionError(f"{DOC}: a layer row names no module: {line}")
        rows.append(names)
    return rows


def module_files() -> Iterator[tuple[str, Path]]:
    """Every module of the package: dotted name and file."""
    folders = [(ROOT / PACKAGE, PACKAGE)] + [(ROOT / d, name) for d, name in MAPPED.items()]
    for folder, prefix in folders:
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield ".".join([prefix, *parts]), path


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Import statements below ``node``, skipping ``if TYPE_CHECKING:`` bodies (not their ``else``)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _type_checking(child):
            for other in child.orelse:
                yield from _walk_one(other)
            continue
        yield from _walk_one(child)


def _walk_one(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    else:
        yield from _walk(node)


def imports(name: str, path: Path, known: set[str]) -> Iterator[Import]:
    """The package modules ``name`` imports (``from pkg import mod`` names the submodule)."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    is_package = path.name == "__init__.py"
    for node in _walk(ast.parse(source, str(path))):
        if PLUGIN in lines[node.lineno - 1]:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names]
        for target in dict.fromkeys(targets):  # once per module a statement imports
            if target == PACKAGE and isinstance(node, ast.ImportFrom) and all(
                    a.name == "__version__" for a in node.names):
                continue  # the package itself is loaded before any of its modules: its version is no dependency
            if target == PACKAGE or target.startswith(PACKAGE + "."):
                yield Import(name, target, node.lineno, path)


def row_of(module: str, rows: list[list[str]]) -> int | None:
    """The row whose most specific entry covers ``module`` (``evaluate/chain.py`` before ``evaluate/``)."""
    best: tuple[int, int] | None = None  # (specificity, row)
    for i, names in enumerate(rows):
        for entry in names:
            if module == entry or module.startswith(entry + "."):
                depth = entry.count(".")
                if best is None or depth > best[0]:
                    best = (depth, i)
    return None if best is None else best[1]


def violations(text: str | None = None) -> tuple[list[str], list[str]]:
    """(modules the table does not place, upward imports), as readable lines."""
    rows = layer_table(DOC.read_text(encoding="utf-8") if text is None else text)
    modules = dict(module_files())
    known = set(modules)
    unplaced, upward = [], []
    for name, path in modules.items():
        if name == PACKAGE:
            continue  # the package's public face re-exports from every layer; nothing imports it
        mine = row_of(name, rows)
        if mine is None:
            unplaced.append(f"{name} ({path.relative_to(ROOT)})")
            continue
        for imp in imports(name, path, known):
            theirs = PACKAGE if imp.imported == PACKAGE else imp.imported
            row = row_of(theirs, rows) if theirs != PACKAGE else len(rows)
            if row is not None and row > mine:
                upward.append(f"{path.relative_to(ROOT)}:{imp.line}: {name} (row {mine + 1}) imports "
                              f"{imp.imported} (row {row + 1}: {', '.join(rows[row]) if row < len(rows) else '-'})")
    return unplaced, upward


@pytest.mark.slow
def test_every_module_has_a_layer() -> None:
    unplaced, _ = violations()
    assert not unplaced, f"modules missing from the layer table of {DOC.name}: {', '.join(unplaced)}"


@pytest.mark.slow
def test_no_module_imports_a_layer_above_it() -> None:
    _, upward = violations()
    assert not upward, "upward imports (move the code, or reorder the table):\n" + "\n".join(upward)


@pytest.mark.slow
def test_the_check_finds_an_upward_import() -> None:
    """The same check on the table with two rows swapped must fail: the check can see."""
    text = DOC.read_text(encoding="utf-8")
    errors = next(line for line in text.splitlines() if line.startswith("| `errors.py`"))
    domain = next(line for line in text.splitlines() if line.startswith("| `domain.py`"))
    swapped = text.replace(errors, "\0").replace(domain, errors).replace("\0", domain)
    _, upward = violations(swapped)
    assert any("deid_sql.domain" in v and "imports deid_sql.errors" in v for v in upward), upward


def test_type_checking_imports_are_exempt_and_lazy_ones_count(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .problem import Problem\n"
                      "def f():\n    from .cli import cli\n    from .report import x  # layers: plugin\n",
                      encoding="utf-8")
    found = [i.imported for i in imports("deid_sql.m", module, set())]
    assert found == ["deid_sql.cli"]


if __name__ == "__main__":
    missing, up = violations()
    print("\n".join([f"unplaced: {m}" for m in missing] + up) or "the layer table holds")
    print(f"{len(missing)} unplaced, {len(up)} upward")
