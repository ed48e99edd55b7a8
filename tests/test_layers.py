"""The layer table of docs/architecture.md is the import rule: a module imports only its own row
and the rows above it (the table lists the layers bottom up).  And the page names every module:
each file the package ships has a row in one of its ``| module | job |`` tables, and every such
row names a file that exists.

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
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
PYPROJECT = ROOT / "pyproject.toml"
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
    (``spec/file.py`` -> ``deid_sql.spec.file``, ``search/`` -> ``deid_sql.search``)."""
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
            if parts == ["__init__"]:
                names.append(PACKAGE)  # the package's own face: covers no other module (``row_of``)
                continue
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
    """The package modules ``name`` imports at run time (``from pkg import mod`` names the submodule)."""
    yield from imports_of_tree(name, path, ast.parse(path.read_text(encoding="utf-8"), str(path)), known)


def imports_of_tree(name: str, path: Path, tree: ast.Module, known: set[str]) -> Iterator[Import]:
    """The package modules the import statements of ``tree`` (part of ``name``'s file) name."""
    lines = path.read_text(encoding="utf-8").splitlines()
    is_package = path.name == "__init__.py"
    for node in _walk(tree):
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
            if module == entry or (entry != PACKAGE and module.startswith(entry + ".")):
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


# -- packages: no cycle, and the core names no feature ----------------------------------------------
#: the core every job runs on: it reads the registries (``registry.py``) and names no feature
CORE = ("deid_sql.domains", "deid_sql.spec", "deid_sql.policies", "deid_sql.loading", "deid_sql.problem",
        "deid_sql.evaluate")
#: the packages and modules that add capabilities on top of the core
FEATURES = ("adversary", "nocensus", "channels", "release", "search", "fulldomain", "policyfile", "dbt", "report",
            "sets", "jobs", "starter", "cli")
IMPORT_STRING = re.compile(r"^deid_sql\.([A-Za-z_]\w*)(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*)?$")


def unit(module: str) -> str | None:
    """The package-level unit of a module: ``deid_sql.evaluate.fast`` -> ``evaluate``; a top-level
    module is its own unit (``deid_sql.problem`` -> ``problem``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == PACKAGE else None


def package_graph() -> dict[str, dict[str, list[str]]]:
    """unit -> {unit it imports at run time -> the import lines}."""
    modules = dict(module_files())
    known = set(modules)
    graph: dict[str, dict[str, list[str]]] = {}
    for name, path in modules.items():
        a = unit(name)
        if a is None:
            continue
        for imp in imports(name, path, known):
            b = unit(imp.imported)
            if b is not None and b != a:
                line = f"{path.relative_to(ROOT)}:{imp.line} -> {imp.imported}"
                graph.setdefault(a, {}).setdefault(b, []).append(line)
    return graph


def cycles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """The strongly connected groups of more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def core_names_of_features() -> list[str]:
    """Imports and import strings (``"deid_sql.x.y:z"``) in the core that name a feature package."""
    modules = dict(module_files())
    known = set(modules)
    found = []
    for name, path in modules.items():
        if not any(name == c or name.startswith(c + ".") for c in CORE):
            continue
        for imp in imports(name, path, known):
            if unit(imp.imported) in FEATURES:
                found.append(f"{path.relative_to(ROOT)}:{imp.line}: imports {imp.imported}")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                match = IMPORT_STRING.match(node.value.strip())
                if match and match.group(1) in FEATURES:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: names {node.value.strip()!r}")
    return found


def cycle_lines(graph: dict[str, dict[str, list[str]]]) -> list[str]:
    """Each import that ties a cycle of ``graph``, with its first line (empty: no cycle)."""
    return [f"{a} -> {b}: {lines[0]}" for group in cycles(graph) for a in group
            for b, lines in graph.get(a, {}).items() if b in group]


def test_no_cycle_among_packages() -> None:
    found = cycle_lines(package_graph())
    assert not found, "package cycles:\n" + "\n".join(found)


def module_graph() -> dict[str, dict[str, list[str]]]:
    """module -> {module it imports, annotations included -> the import lines}: every import, also
    under ``if TYPE_CHECKING:``, since a type-only loop still ties two modules into one."""
    modules = dict(module_files())
    known = set(modules)
    graph: dict[str, dict[str, list[str]]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            wrapper = ast.Module(body=[node], type_ignores=[])
            for imp in imports_of_tree(name, path, wrapper, known):
                target = imp.imported if imp.imported in known else None
                if target is not None and target != name and modules[target].name != "__init__.py":
                    graph.setdefault(name, {}).setdefault(target, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return graph


def test_no_cycle_among_modules_annotations_included() -> None:
    found = cycle_lines(module_graph())
    assert not found, "module cycles (a small protocol or a moved type removes a type-only one):\n" + "\n".join(found)


def test_no_annotation_names_a_layer_above() -> None:
    """Annotations follow the layers too: a module names a type of a higher layer by a small
    protocol of its own (``problem.Generalization``, ``contract.keys.Pseudonymizer``), not by an
    import under ``if TYPE_CHECKING:`` that ties it to what stands on it."""
    rows = layer_table(DOC.read_text(encoding="utf-8"))
    upward = []
    for a, targets in module_graph().items():
        mine = row_of(a, rows)
        for b, lines in targets.items():
            theirs = row_of(b, rows)
            if mine is not None and theirs is not None and theirs > mine:
                upward.append(f"{lines[0]}: {a} (row {mine + 1}) names {b} (row {theirs + 1})")
    assert not upward, "imports of a higher layer, annotations included:\n" + "\n".join(upward)


def test_the_cycle_check_finds_a_cycle() -> None:
    graph = {"a": {"b": ["x"]}, "b": {"c": ["x"]}, "c": {"a": ["x"]}, "d": {"a": ["x"]}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_the_core_names_no_feature() -> None:
    found = core_names_of_features()
    assert not found, ("the core imports or names a feature (register it in the feature's plugin.py "
                       "instead):\n" + "\n".join(found))


def test_the_feature_check_sees_import_strings() -> None:
    assert IMPORT_STRING.match("deid_sql.adversary.params:parse_section").group(1) == "adversary"
    assert not IMPORT_STRING.match("see deid_sql.adversary for the model")


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
    domain = next(line for line in text.splitlines() if line.startswith("| `domains/`"))
    swapped = text.replace(errors, "\0").replace(domain, errors).replace("\0", domain)
    _, upward = violations(swapped)
    assert any("deid_sql.domains.domain" in v and "imports deid_sql.errors" in v for v in upward), upward


def test_the_package_row_places_no_other_module() -> None:
    """The row of the package's own ``__init__.py`` covers the package, not every module below it."""
    rows = layer_table(DOC.read_text(encoding="utf-8"))
    assert row_of(PACKAGE, rows) is not None
    assert row_of(f"{PACKAGE}.nowhere", rows) is None


def test_type_checking_imports_are_exempt_and_lazy_ones_count(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .problem import Problem\n"
                      "def f():\n    from .cli import cli\n    from .report import x  # layers: plugin\n",
                      encoding="utf-8")
    found = [i.imported for i in imports("deid_sql.m", module, set())]
    assert found == ["deid_sql.cli"]


# -- the packages say what they hold and what they import --------------------------------------------
#: the most modules deid_sql/ may hold at its top level (``__init__``, ``errors`` and the few every layer uses)
TOP_LEVEL_LIMIT = 12
#: a package's docstring lines that list units: what it may import, and what may import it
MAY_IMPORT, IMPORTED_BY = "May import:", "Imported by:"
#: the docstring's list of the package's modules, a line each: ``- ``name.py``: its job``
MODULES = "Modules:"


def packages() -> dict[str, Path]:
    """Every package folder shipped: its unit name (``storage``, ``udfs``) and folder."""
    found = {path.parent.name: path.parent for path in sorted((ROOT / PACKAGE).glob("*/__init__.py"))}
    found.update({name: ROOT / name for name in MAPPED})
    return found


def docstring(folder: Path) -> str:
    return ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))) or ""


def shipped(folder: Path) -> list[str]:
    """What a package's docstring must name: its modules, its data files (``templates/x.j2``,
    ``metrics.sql``, ``topics/spec.md``) and nothing of a subpackage."""
    names = []
    data = _package_data(folder)
    for path in sorted(folder.iterdir()):
        if path.name.startswith((".", "__")):
            continue
        if path.suffix == ".py":
            names.append(path.name)
        elif path.is_dir() and not (path / "__init__.py").exists():
            names += [f"{path.name}/{p.name}" for p in sorted(path.iterdir()) if p in data]
        elif path in data:
            names.append(path.name)
    return names


def _package_data(folder: Path) -> set[Path]:
    setuptools = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["setuptools"]
    dirs = {package: ROOT / d for package, d in setuptools.get("package-dir", {}).items()}
    files: set[Path] = set()
    for package, patterns in setuptools.get("package-data", {}).items():
        base = dirs.get(package, ROOT.joinpath(*package.split(".")))
        if base == folder:
            for pattern in patterns:
                files.update(p for p in base.glob(pattern) if p.is_file())
    return files


def listed_units(text: str, label: str) -> set[str] | None:
    """The units a docstring's ``May import:`` / ``Imported by:`` paragraph names (None: no such line)."""
    at = text.find(label)
    if at < 0:
        return None
    paragraph = text[at + len(label):].split("\n\n")[0].split(IMPORTED_BY if label == MAY_IMPORT else "\0")[0]
    return set(re.findall(r"``([A-Za-z_]\w*)``", paragraph))


def package_problems(changed: dict[str, str] | None = None) -> list[str]:
    """Each package's docstring against its folder and its imports, as readable lines (``changed``:
    a package's docstring as the check should read it instead, to show that it can see)."""
    graph = package_graph()
    importers: dict[str, set[str]] = {}
    for a, targets in graph.items():
        for b in targets:
            importers.setdefault(b, set()).add(a)
    problems = []
    for unit_name, folder in packages().items():
        text = (changed or {}).get(unit_name) or docstring(folder)
        where = (folder / "__init__.py").relative_to(ROOT)
        if not text.strip():
            problems.append(f"{where}: no docstring")
            continue
        for name in shipped(folder):
            if f"``{name}``" not in text:
                problems.append(f"{where}: names no ``{name}`` (add a line saying its job)")
        modules = text.split(MODULES, 1)[-1].split(MAY_IMPORT, 1)[0] if MODULES in text else ""
        for name in re.findall(r"^- ``([^`]+)``", modules, flags=re.M):
            if name not in shipped(folder):
                problems.append(f"{where}: names ``{name}``, which the package does not hold")
        imported = set(graph.get(unit_name, {}))
        for label, actual in ((MAY_IMPORT, imported), (IMPORTED_BY, importers.get(unit_name, set()))):
            listed = listed_units(text, label)
            if listed is None:
                problems.append(f"{where}: no '{label}' line")
                continue
            missing = sorted(actual - listed)
            if missing:
                problems.append(f"{where}: '{label}' leaves out {', '.join(missing)}")
    return problems


def test_the_top_level_is_small() -> None:
    modules = sorted(p.name for p in (ROOT / PACKAGE).glob("*.py"))
    assert len(modules) <= TOP_LEVEL_LIMIT, (f"{len(modules)} modules at deid_sql/'s top level (at most "
                                             f"{TOP_LEVEL_LIMIT}: put the rest in a package): {', '.join(modules)}")


def test_every_package_says_what_it_holds_and_imports() -> None:
    problems = package_problems()
    assert not problems, "package docstrings out of step with the code:\n" + "\n".join(problems)


def test_every_package_has_a_layer() -> None:
    rows = layer_table(DOC.read_text(encoding="utf-8"))
    units = [f"{PACKAGE}.{p.stem}" for p in (ROOT / PACKAGE).glob("*.py") if p.stem != "__init__"]
    units += [MAPPED.get(name, f"{PACKAGE}.{name}") for name in packages()]
    unplaced = [u for u in units if row_of(u, rows) is None]
    assert not unplaced, f"units with no row in the layer table of {DOC.name}: {', '.join(unplaced)}"
    known = set(units) | {PACKAGE}
    stale = [entry for names in rows for entry in names if entry not in known]
    assert not stale, f"rows of {DOC.name} naming no package or top-level module: {', '.join(stale)}"


def test_the_package_check_sees_a_missing_module_and_a_missing_import() -> None:
    """The same check with a module renamed in a docstring and an import left out must fail: it can see."""
    text = docstring(packages()["storage"])
    changed = text.replace("``atomic.py``", "``gone.py``").replace("``errors``", "``nothing``")
    found = [p for p in package_problems({"storage": changed}) if p.startswith("deid_sql/storage/")]
    assert any("names no ``atomic.py``" in p for p in found), found
    assert any("``gone.py``, which the package does not hold" in p for p in found), found
    assert any("'May import:' leaves out errors" in p for p in found), found


if __name__ == "__main__":
    missing, up = violations()
    print("\n".join([f"unplaced: {m}" for m in missing] + up) or "the layer table holds")
    print(f"{len(missing)} unplaced, {len(up)} upward")
    print("\n".join(core_names_of_features()) or "the core names no feature")
    print(f"package cycles: {cycles(package_graph()) or 'none'}")
    print("\n".join(package_problems()) or "every package docstring holds")
