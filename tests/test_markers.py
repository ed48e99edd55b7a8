"""The markers say what a test needs (tests/markers.py): a test that opens PostgreSQL or Spark, runs
chromium or runs the docs' examples without its marker fails here, so the fast suite
(``pytest -m "not engine and not browser and not docs and not slow"``) never starts one of them."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

from tests import markers
from tests.engines import engine_params, open_engine

TESTS = Path(__file__).resolve().parent
PYPROJECT = tomllib.loads((TESTS.parent / "pyproject.toml").read_text(encoding="utf-8"))
BROWSERS = {"chromium", "chromium-browser", "google-chrome", "chrome"}


def test_the_markers_are_registered_and_strict() -> None:
    options = PYPROJECT["tool"]["pytest"]["ini_options"]
    assert [line.split(":")[0] for line in options["markers"]] == list(markers.MARKERS)
    assert "--strict-markers" in options["addopts"].split()  # a misspelt marker is an error, not a new marker
    assert markers.FAST == " and ".join(f"not {m}" for m in markers.MARKERS)


@pytest.mark.parametrize("engine", ["postgres", "spark"])
def test_an_unmarked_test_cannot_open_postgres_or_spark(engine: str, tmp_path: Path) -> None:
    # refused before the engine is looked for: the same here with or without PostgreSQL and Spark
    with pytest.raises(pytest.fail.Exception, match=rf"opens {engine} but is not marked 'engine'"):
        open_engine(engine, tmp_path)


def test_a_marked_test_passes_the_guard(request: pytest.FixtureRequest) -> None:
    with pytest.raises(pytest.fail.Exception, match="not marked 'engine'"):
        markers.require("engine", "opens postgres")
    request.node.add_marker(pytest.mark.engine)
    markers.require("engine", "opens postgres")  # no failure now


def test_engine_params_mark_the_engines_other_than_duckdb() -> None:
    params = engine_params("duckdb", "postgres", "spark")
    assert [(p.id, [m.name for m in p.marks]) for p in params] == [  # type: ignore[attr-defined]
        ("duckdb", []), ("postgres", ["engine"]), ("spark", ["engine"])]


def module_marks(tree: ast.Module) -> set[str]:
    """The markers of a module's ``pytestmark`` (one mark or a list of them)."""
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                                for t in node.targets):
            found |= {n.attr for n in ast.walk(node.value) if isinstance(n, ast.Attribute)
                      and isinstance(n.value, ast.Attribute) and n.value.attr == "mark"}
    return found


def needs(tree: ast.Module) -> dict[str, str]:
    """What a module's code starts (marker -> why): a browser's name as a string of its own, the
    PostgreSQL DSN's variable, the docs runner's ``run_block``."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in BROWSERS:
                found["browser"] = f"names the browser {node.value!r}"
            if node.value == "DEID_TEST_POSTGRES_DSN":
                found["engine"] = "reads DEID_TEST_POSTGRES_DSN"
        if isinstance(node, ast.ImportFrom) and node.module and node.module.endswith("docs_runner") and any(
                a.name == "run_block" for a in node.names):
            found["docs"] = "runs the docs' examples (docs_runner.run_block)"
    return found


def test_modules_that_run_chromium_or_the_docs_examples_or_read_the_dsn_are_marked() -> None:
    unmarked = []
    for path in sorted(TESTS.glob("test_*.py")):
        if path.name == Path(__file__).name:
            continue
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        marks = module_marks(tree)
        for marker, why in needs(tree).items():
            # the engine mark may sit on the tests or the engine params; browser and docs on the module
            marked = marker in marks or (marker == "engine" and "pytest.mark.engine" in text)
            if not marked:
                unmarked.append(f"{path.name} {why}: mark it {marker} (tests/markers.py)")
    assert unmarked == []


def test_the_scan_sees_what_it_looks_for() -> None:
    tree = ast.parse('"""Runs chromium."""\nimport shutil\nfrom tests.docs_runner import run_block\n'
                     'CHROME = shutil.which("chromium")\nDSN = "DEID_TEST_POSTGRES_DSN"\n')
    assert set(needs(tree)) == {"browser", "docs", "engine"}
    assert module_marks(tree) == set()
    assert module_marks(ast.parse("import pytest\npytestmark = [pytest.mark.browser, pytest.mark.slow]\n")) == {
        "browser", "slow"}
    assert needs(ast.parse('"""A page about chromium and DEID_TEST_POSTGRES_DSN."""\n')) == {}
