"""The spec's structure (issue 20): the core names no feature, the features parse their own
sections into one ``Problems`` collector, and every problem of every section is reported at once."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

import deid_sql
from deid_sql.adversary.params import AdversaryParams
from deid_sql.channels.spec import ChannelSpec
from deid_sql.contract.criteria import ReleaseCriteria
from deid_sql.contract.roles import ColumnRoles
from deid_sql.errors import Problems, SpecError
from deid_sql.registry import SECTIONS
from deid_sql.spec.file import Spec, top_keys

from .conftest import Project

Run = Callable[..., Result]
PACKAGE = Path(deid_sql.__file__).parent
FEATURES = ("adversary", "channels", "release")

# A spec with problems in every section: (fragment each problem must hold) — one line per problem.
EVERY_SECTION_WRONG = {
    "colour": 1,
    "source": {"path": "source.csv", "sheet": 1},
    "backend": {"engine": "duckdb", "port": 5432},
    "qi": [{"name": "age", "kind": "integer", "min": 0, "max": 120, "colour": 1},
           {"name": "sex", "kind": "sexes"}],
    "risk": "adversary",
    "adversary": {"gian": 8000, "gain": -1.0},
    "channels": {"related": ["race"], "confidential": "diagnosis", "none": "none", "identity": ["patient_id"],
                 "colour": 1, "b": -2.0},
    "release": {"min_k": 0, "colour": 1},
    "columns": {"keep": ["diagnosis"], "colour": 1},
}
EVERY_SECTION_WRONG_TOML = """
colour = 1
risk = "adversary"
[source]
path = "source.csv"
sheet = 1
[backend]
engine = "duckdb"
port = 5432
[[qi]]
name = "age"
kind = "integer"
min = 0
max = 120
colour = 1
[[qi]]
name = "sex"
kind = "sexes"
[adversary]
gian = 8000
gain = -1.0
[channels]
related = ["race"]
confidential = "diagnosis"
none = "none"
identity = ["patient_id"]
colour = 1
b = -2.0
[release]
min_k = 0
colour = 1
[columns]
keep = ["diagnosis"]
colour = 1
"""
EXPECTED = (
    "unknown key 'colour' in the spec's top level",
    "unknown key 'sheet' in [source]",
    "unknown key 'port' in [backend]",
    "unknown key 'colour' in [[qi]] 'age'",
    "[[qi]] 'sex': kind = 'sexes' is not one of",
    "unknown key 'gian' in [adversary]",
    "[adversary]: adversary gain = -1.0 must be a number ≥ 0",
    "unknown key 'colour' in [channels]",
    "[channels]: b = -2.0 must be a positive number",
    "unknown key 'colour' in [release]",
    "[release] min_k = 0 must be a whole number >= 1",
    "unknown key 'colour' in [columns]",
)


def test_every_section_reports_all_its_problems_at_once(project: Project) -> None:
    with pytest.raises(SpecError) as info:
        Spec.from_dict(EVERY_SECTION_WRONG, base=project.dir)
    problems = info.value.problems
    for fragment in EXPECTED:
        assert sum(fragment in p for p in problems) == 1, (fragment, problems)
    assert len(problems) == len(EXPECTED), problems
    assert all("\n" not in p for p in problems)
    assert str(info.value).startswith(f"{len(EXPECTED)} problems: ")


def test_validate_prints_every_section_problem(project: Project, run: Run) -> None:
    project.write_spec(EVERY_SECTION_WRONG_TOML)
    assert tomllib.loads(EVERY_SECTION_WRONG_TOML) == EVERY_SECTION_WRONG
    err = run("validate", project.spec_path, expect=2).stderr.strip()
    lines = err.splitlines()  # validate names each problem on a line of its own
    assert len(lines) == len(EXPECTED) and all(line.startswith("error: ") for line in lines), err
    assert all(sum(fragment in line for line in lines) == 1 for fragment in EXPECTED), err


def test_adversary_unknown_keys_do_not_hide_bad_values() -> None:
    with pytest.raises(SpecError) as info:
        AdversaryParams.from_mapping({"bogus": 1, "gain": -1.0, "prior": 2.0})
    problems = info.value.problems
    assert len(problems) == 3, problems
    assert "bogus" in problems[0] and "gain = -1.0" in problems[1] and "prior = 2.0" in problems[2]


def test_adversary_parse_collects_into_the_shared_collector() -> None:
    problems = Problems(["an earlier problem"])
    params = AdversaryParams.parse({"gain": "lots", "h0": float("nan")}, problems)
    assert params == AdversaryParams()  # defaults: the caller refuses the spec anyway
    assert problems[0] == "an earlier problem" and len(problems) == 3, problems
    assert AdversaryParams.parse({"gain": 5.0}, problems).gain == 5.0 and len(problems) == 3


def test_problems_collector() -> None:
    problems = Problems()
    problems.raise_if_any()  # nothing found: nothing raised
    problems.add("[x]", "y = 1 is too small", "give y >= 2")
    problems.unknown_keys({"y": 1, "z": 2}, {"y"}, "[x]")
    assert problems == ["[x]: y = 1 is too small; give y >= 2", "unknown key 'z' in [x]; allowed keys are y"]
    with pytest.raises(SpecError) as info:
        problems.raise_if_any()
    assert info.value.problems == list(problems) and str(info.value).startswith("2 problems: ")


def test_sections_fill_the_spec(project: Project) -> None:
    assert {section.name for section in SECTIONS} >= {"adversary", "channels"}
    assert all(key in top_keys() for section in SECTIONS for key in section["keys"])
    assert all(callable(section.load()) for section in SECTIONS)
    spec = Spec.read(project.spec_path)
    assert spec.risk == "population" and spec.feature("channels") is None
    assert spec.feature("adversary") == AdversaryParams()  # the section's default
    assert isinstance(spec.release, ReleaseCriteria) and isinstance(spec.columns, ColumnRoles)
    assert spec.columns.role("patient_id") == "drop"
    raw = {"source": {"path": "source.csv"}, "channels": {"related": ["race"], "confidential": "diagnosis",
                                                           "none": "none", "identity": ["patient_id"]},
           "risk": "adversary", "adversary": {"gain": 5000}}
    spec = Spec.from_dict(raw, base=project.dir)  # a channel spec needs no [[qi]]
    assert isinstance(spec.feature("channels"), ChannelSpec) and spec.qis == ()
    assert spec.risk == "adversary" and spec.feature("adversary").gain == 5000
    assert spec.with_feature("adversary", AdversaryParams(gain=1.0)).feature("adversary").gain == 1.0
    assert spec.feature("adversary").gain == 5000  # the original is unchanged


def test_channel_identity_checked_against_column_roles(project: Project) -> None:
    raw = {"source": {"path": "source.csv"}, "columns": {"drop": ["patient_id"]},
           "channels": {"related": ["race"], "confidential": "diagnosis", "none": "none", "identity": ["patient_id"]}}
    with pytest.raises(SpecError, match="lists the identity column 'patient_id' under drop"):
        Spec.from_dict(raw, base=project.dir)


# -- the import structure --------------------------------------------------------------------------
def _imports(module: str) -> set[str]:
    """The deid_sql modules ``module`` imports anywhere in its file (TYPE_CHECKING and functions too)."""
    path = PACKAGE.parent / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = PACKAGE.parent / module.replace(".", "/") / "__init__.py"
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = ".".join(parts[:len(parts) - node.level + 1]) if node.level else ""
            target = ".".join(p for p in (base, node.module or "") if p)
            found.add(target)
            found.update(f"{target}.{a.name}" for a in node.names)
    return {m for m in found if m.startswith("deid_sql.") and _exists(m)}


def _exists(module: str) -> bool:
    stem = PACKAGE.parent / module.replace(".", "/")
    return stem.with_suffix(".py").exists() or (stem / "__init__.py").exists()


def _reach(module: str) -> set[str]:
    seen: set[str] = set()
    todo = [module]
    while todo:
        for dep in _imports(todo.pop()) - seen:
            seen.add(dep)
            todo.append(dep)
    return seen


@pytest.mark.parametrize("core", ["deid_sql.spec.file", "deid_sql.spec.sections", "deid_sql.registry",
                                  "deid_sql.backends.base"])
def test_core_imports_no_feature_and_sits_in_no_cycle(core: str) -> None:
    reached = _reach(core)
    assert not [m for m in reached if m.split(".")[1] in FEATURES], sorted(reached)
    assert core not in reached  # nothing it imports imports it back


@pytest.mark.slow
def test_a_fresh_interpreter_parsing_a_spec_sees_every_section(project: Project) -> None:
    """The section parsers are found by the table, not by a registration that only runs when a
    feature happens to be imported: importing the spec loads no channel module, yet its problems show."""
    script = textwrap.dedent(f"""
        import sys
        from deid_sql.spec.file import Spec
        from deid_sql.errors import SpecError
        print("loaded before:", sorted(m for m in sys.modules if m.startswith("deid_sql.channels")))
        raw = {{"source": {{"path": "source.csv"}}, "adversary": {{"gain": -1}}, "channels": {{"b": 1}},
               "columns": {{"colour": 1}}}}
        try:
            Spec.from_dict(raw, base=__import__("pathlib").Path({str(project.dir)!r}))
        except SpecError as err:
            print(len(err.problems))
            print("\\n".join(err.problems))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=project.dir).stdout
    assert "loaded before: []" in out
    assert "[adversary]: adversary gain = -1" in out and "[channels] needs confidential" in out
    assert "unknown key 'colour' in [columns]" in out
