"""Attribute criteria over a set of linked tables (issue 40, METHODS decision 15): f_G(v) counts the
persons of G holding v on any of their rows in ANY table of the set.  A patient's diagnoses in a
``[[table]]`` are counted per person (several diagnoses, each once; a patient without any holds
none but counts in n_G), equal to ``evaluate.attribute.reference`` on random data (hypothesis on
DuckDB; a fixed random case on PostgreSQL and Spark); a set whose one group all hold B20 is refused
by ``max_confidence`` naming the column on every set path, and passes with limits that allow it."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deid_sql import Problem
from deid_sql.evaluate import attribute as fig
from deid_sql.release.gate import ReleaseSource, build_gate
from deid_sql.release.plan import plan_of
from deid_sql.release.sidecar import read_sidecar
from tests.engines import ENGINES, Engine, engine_fixture, engine_params
from tests.test_linked import KEY

# -- the B20 set: 200 patients in groups of 5, their diagnoses in a linked table -----------------------
POLICY = "age:cuts=30,40,50|clinic:bottom"
OTHERS = ("I10", "E11", "J45", "K21", "B20")
CLINICS = [f"C{i}" for i in range(10)]
AGE_H = "\n".join(f"{a};{a // 10 * 10}-{a // 10 * 10 + 9};*" for a in range(20, 60)) + "\n"
CLINIC_H = "\n".join(f"{c};*" for c in CLINICS) + "\n"
B20_SPEC = """population = "sample"
[source]
path = "patients.parquet"
name = "patients"

[person]
column = "pid"

[[qi]]
name = "age"
kind = "integer"
min = 20
max = 59
hierarchy = "age.csv"

[[qi]]
name = "clinic"
kind = "category"
values_from = "hierarchy"
hierarchy = "clinic.csv"

[columns]
pseudonymize = ["pid"]
secret_env = "DEID_LINK_KEY"

[release]
min_k = 5
{release}

[[table]]
name = "diagnoses"
path = "diagnoses.parquet"
sensitive = ["diagnosis"]
"""


def b20_tables() -> tuple[pa.Table, pa.Table]:
    """Four age decades × ten clinics, five patients each.  The group 20-29 at C0 all hold B20 (some on
    two rows), nothing else; in every other group patient j holds ``OTHERS[j]``, the odd ones also the
    next, and in C1 patient 2 holds no diagnosis at all."""
    patients, diagnoses = [], []
    for decade in range(4):
        for c, clinic in enumerate(CLINICS):
            for j in range(5):
                pid = f"P{len(patients):03d}"
                patients.append({"pid": pid, "age": 20 + decade * 10 + (j * 2 + c) % 10, "clinic": clinic})
                if decade == 0 and c == 0:
                    codes = ["B20"] * (1 + j % 2)
                elif c == 1 and j == 2:
                    codes = []
                else:
                    codes = [OTHERS[j]] + ([OTHERS[(j + 1) % 5]] if j % 2 else [])
                diagnoses += [{"pid": pid, "diagnosis": code} for code in codes]
    return pa.Table.from_pylist(patients), pa.Table.from_pylist(diagnoses)


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEID_LINK_KEY", KEY)


def write_set(folder: Path, release: str) -> Path:
    patients, diagnoses = b20_tables()
    pq.write_table(patients, folder / "patients.parquet")
    pq.write_table(diagnoses, folder / "diagnoses.parquet")
    (folder / "age.csv").write_text(AGE_H, encoding="utf-8")
    (folder / "clinic.csv").write_text(CLINIC_H, encoding="utf-8")
    spec = folder / "set.toml"
    spec.write_text(B20_SPEC.format(release=release), encoding="utf-8")
    return spec


def one_error(result: Any) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


REFUSED = "diagnosis: group age 20-29, clinic C0 holds 'B20' for 5 of 5 persons (confidence 1 > max_confidence 0.8)"


def test_the_b20_set_is_refused_naming_the_linked_column(tmp_path: Path, run) -> None:
    spec = write_set(tmp_path, "max_confidence = 0.8")
    out = tmp_path / "release"
    line = one_error(run("materialize", spec, "--policy", POLICY, "--out", out, expect=2))
    assert REFUSED in line and "nothing was written" in line, line
    assert "P0" not in line and not out.exists()


def test_limits_that_allow_it_pass_and_the_sidecar_records_the_set_figures(tmp_path: Path, run) -> None:
    spec = write_set(tmp_path, 'max_confidence = 1\nmin_l = 1\nmax_t = 0.9\nt_distance = "equal"')
    out = tmp_path / "release"
    run("materialize", spec, "--policy", POLICY, "--out", out)
    record = json.loads((out / "release.json").read_text(encoding="utf-8"))
    (column,) = record["figures"]["attribute"]
    assert column["column"] == "diagnosis" and column["groups"] == 40
    assert column["max_confidence"] == 1.0 and column["min_distinct_l"] == 1.0
    assert record["gate"]["verdict"] == "passed"
    checks = {c["criterion"] for c in record["gate"]["checks"] if c["figure"].startswith("diagnosis.")}
    assert checks == {"max_confidence", "min_l", "max_t"}


def test_a_more_general_policy_passes_the_three_over_the_set(tmp_path: Path, run) -> None:
    """Ages in two halves: the B20 group merges with C0's 30-39 group (10 patients: 5 + 2 hold B20)."""
    spec = write_set(tmp_path, 'max_confidence = 0.8\nmin_l = 2\nmax_t = 0.5\nt_distance = "equal"')
    out = tmp_path / "release"
    run("materialize", spec, "--policy", "age:cuts=40|clinic:bottom", "--out", out)
    record = json.loads((out / "release.json").read_text(encoding="utf-8"))
    assert record["gate"]["verdict"] == "passed"
    assert record["figures"]["attribute"][0]["max_confidence"] == pytest.approx(7 / 10)


def in_warehouse(folder: Path, spec: Path) -> str:
    """The set's two tables in ``warehouse.duckdb`` and ``spec`` read from there; its text."""
    con = duckdb.connect(str(folder / "warehouse.duckdb"))
    try:
        for name, table in zip(("patients", "diagnoses"), b20_tables()):
            con.register("rows", table)
            con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM rows")
            con.unregister("rows")
    finally:
        con.close()
    text = spec.read_text(encoding="utf-8")
    for name in ("patients", "diagnoses"):
        text = text.replace(f'path = "{name}.parquet"', f'path = "warehouse.duckdb"\ntable = "{name}"')
    spec.write_text(text, encoding="utf-8")
    return text


SET_PATHS = {
    "folder": lambda d: ("materialize", "--out", d / "release"),
    "tables": lambda d: ("materialize", "--out", d / "r.duckdb", "--tables", "deid_"),
    "views": lambda d: ("view", "--db", d / "warehouse.duckdb", "--view", "deid_"),
    "dbt": lambda d: ("dbt", "--project", d / "project"),
}


@pytest.mark.parametrize("path", sorted(SET_PATHS))
def test_every_set_path_judges_the_linked_values(tmp_path: Path, run, path: str) -> None:
    spec = write_set(tmp_path, "max_confidence = 0.8")
    text = in_warehouse(tmp_path, spec) if path in ("views", "dbt") else spec.read_text(encoding="utf-8")
    command, *rest = SET_PATHS[path](tmp_path)
    before = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    assert REFUSED in one_error(run(command, spec, "--policy", POLICY, *rest, expect=2))
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == before
    if path == "views":
        with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
            assert {r[0] for r in con.sql("SELECT table_name FROM information_schema.tables").fetchall()} == \
                {"patients", "diagnoses"}
    spec.write_text(text.replace("max_confidence = 0.8", "max_confidence = 1"), encoding="utf-8")
    run(command, spec, "--policy", POLICY, *rest)
    if path == "dbt":
        record = read_sidecar(tmp_path / "project" / "models" / "deid_patients.release.json")
        assert record["figures"]["attribute"][0]["column"] == "diagnosis"


def test_apply_of_a_sets_policy_file_judges_the_linked_values(tmp_path: Path, run) -> None:
    spec = write_set(tmp_path, "max_confidence = 1")
    policy = tmp_path / "policy.json"
    run("policy", "save", spec, "--policy", POLICY, "--out", policy)
    batch = ("--source", tmp_path / "patients.parquet", "--linked", f"diagnoses={tmp_path / 'diagnoses.parquet'}")
    out = tmp_path / "batch"
    run("apply", policy, *batch, "--out", out)
    record = json.loads((out / "release.json").read_text(encoding="utf-8"))
    assert record["figures"]["attribute"][0]["max_confidence"] == 1.0
    write_set(tmp_path, "max_confidence = 0.8")  # the spec's criteria tightened: the next batch is judged so
    refused = tmp_path / "refused"
    assert REFUSED in one_error(run("apply", policy, *batch, "--out", refused, expect=None))
    assert not refused.exists()


def test_the_report_of_a_set_release_checks_the_linked_column(tmp_path: Path, run) -> None:
    spec = write_set(tmp_path, "max_confidence = 1")
    out = tmp_path / "release"
    run("materialize", spec, "--policy", POLICY, "--out", out, "--report", tmp_path / "r.html")
    gate = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["risk"]["gate"]
    checks = {c["figure"]: c for c in gate["checks"]}
    assert checks["diagnosis.confidence"]["value"] == 1.0 and gate["verdict"] == "passed"


# -- per-person figures over a set equal the pure-Python reference ----------------------------------
REF_POLICY = "age:every=10"
REF_SPEC = '''population = "sample"
[source]
path = "patients.parquet"
name = "patients"

[person]
column = "pid"

[[qi]]
name = "age"
kind = "integer"
min = 0
max = 99

[[qi]]
name = "sex"
kind = "category"
values = ["F", "M"]

[columns]
pseudonymize = ["pid"]
secret_env = "DEID_LINK_KEY"

[release]
min_k = 1
max_confidence = 1
min_l = 1
min_entropy_l = 1
max_t = 1
t_distance = "equal"

[[table]]
name = "diagnoses"
path = "diagnoses.parquet"
sensitive = ["code"]
'''
PATIENTS = pa.schema([("pid", pa.string()), ("age", pa.int64()), ("sex", pa.string())])
DIAGNOSES = pa.schema([("pid", pa.string()), ("code", pa.string())])


def write_reference(folder: Path, patients: list[dict[str, Any]], diagnoses: list[dict[str, Any]]) -> Path:
    pq.write_table(pa.Table.from_pylist(patients, schema=PATIENTS), folder / "patients.parquet")
    pq.write_table(pa.Table.from_pylist(diagnoses, schema=DIAGNOSES), folder / "diagnoses.parquet")
    spec = folder / "set.toml"
    spec.write_text(REF_SPEC, encoding="utf-8")
    return spec


def expected(patients: list[dict[str, Any]], diagnoses: list[dict[str, Any]], below: int) -> dict[str, float]:
    """The worst groups' figures by ``reference``: a patient's group is their decade and sex; groups of
    fewer than ``below`` patients are suppressed (they leave nothing to judge, but count in q(v))."""
    group_of = {p["pid"]: (p["age"] // 10, p["sex"]) for p in patients}
    sizes: dict[tuple[int, str], int] = {}
    for g in group_of.values():
        sizes[g] = sizes.get(g, 0) + 1
    groups = sorted(g for g, n in sizes.items() if n >= below)
    gid = {g: i for i, g in enumerate(groups)}
    values = sorted({d["code"] for d in diagnoses}, key=lambda v: (v is None, str(v)))
    code = {v: i for i, v in enumerate(values)}
    pix = {p["pid"]: i for i, p in enumerate(patients)}
    triples: list[tuple[int, int, int | None]] = [(pix[p["pid"]], gid[group_of[p["pid"]]], None)
                                                  for p in patients if group_of[p["pid"]] in gid]
    triples += [(pix[d["pid"]], gid[group_of[d["pid"]]], code[d["code"]])
                for d in diagnoses if group_of[d["pid"]] in gid]
    vc = fig.reference(triples, len(groups))
    vc = fig.ValueCounts(vc.group, vc.value, vc.persons, vc.size, max(len(values), 1))
    holders = fig.reference([(pix[d["pid"]], 0, code[d["code"]]) for d in diagnoses], 1)  # q(v): every patient
    q = np.zeros(max(len(values), 1))
    q[holders.value] = holders.persons
    q = q / q.sum() if q.sum() else q
    held = vc.totals() > 0
    return {"groups": len(groups), "max_confidence": float(fig.confidence(vc).max()) if len(groups) else 0.0,
            "min_distinct_l": float(fig.distinct_l(vc)[held].min()) if held.any() else 0.0,
            "min_entropy_l": float(fig.entropy_l(vc)[held].min()) if held.any() else 0.0,
            "max_t": float(fig.t_equal(vc, q)[held].max()) if held.any() else 0.0}


def measured(spec: Path, below: int) -> dict[str, float]:
    with Problem.from_spec(spec, cache=False) as problem:
        plan = plan_of(problem, REF_POLICY, suppression=below if below > 1 else None)
        gate = build_gate(ReleaseSource.from_problem(problem), plan, "test", whole_set=True)
        figures = gate.measure(problem.backend.execute, problem.query(plan, measuring=True))
    (column,) = figures.attribute
    assert column.column == "code"
    return {"groups": column.groups, "max_confidence": column.max_confidence,
            "min_distinct_l": column.min_distinct_l, "min_entropy_l": column.min_entropy_l,
            "max_t": column.max_t if column.max_t is not None else 0.0}


@st.composite
def patient_sets(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    patients, diagnoses = [], []
    for p in range(draw(st.integers(1, 25))):
        pid = f"P{p:02d}"
        patients.append({"pid": pid, "age": draw(st.integers(0, 99)), "sex": draw(st.sampled_from("FM"))})
        for _ in range(draw(st.integers(0, 4))):  # none, one or several diagnoses, repeats included
            diagnoses.append({"pid": pid, "code": draw(st.sampled_from(["A", "B", "C", "D", None]))})
    if not diagnoses:
        diagnoses.append({"pid": "P00", "code": "A"})
    return patients, diagnoses, draw(st.sampled_from([1, 2]))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=patient_sets())
def test_per_person_figures_over_a_set_equal_the_reference(tmp_path_factory: pytest.TempPathFactory,
                                                           case: tuple[list[dict[str, Any]],
                                                                       list[dict[str, Any]], int]) -> None:
    patients, diagnoses, below = case
    spec = write_reference(tmp_path_factory.mktemp("attrset"), patients, diagnoses)
    assert measured(spec, below) == pytest.approx(expected(patients, diagnoses, below), rel=1e-12, abs=1e-12)


def test_a_patient_with_several_diagnoses_counts_once_under_each(tmp_path: Path) -> None:
    """One group: P0 holds A twice and B, P1 holds A, P2 holds nothing: A is 2 of 3, ℓ is 2."""
    patients = [{"pid": f"P{i}", "age": 30 + i, "sex": "F"} for i in range(3)]
    diagnoses = [{"pid": "P0", "code": "A"}, {"pid": "P0", "code": "A"}, {"pid": "P0", "code": "B"},
                 {"pid": "P1", "code": "A"}]
    got = measured(write_reference(tmp_path, patients, diagnoses), 1)
    assert got["max_confidence"] == pytest.approx(2 / 3) and got["min_distinct_l"] == 2.0 and got["groups"] == 1


def fixed_case() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rng = random.Random(4040)
    patients = [{"pid": f"P{p:03d}", "age": rng.randint(0, 99), "sex": rng.choice("FM")} for p in range(80)]
    diagnoses = [{"pid": p["pid"], "code": rng.choice(["A", "B", "C", None])}
                 for p in patients for _ in range(rng.randint(0, 3))]
    return patients, diagnoses


@pytest.fixture(scope="module", params=engine_params(*ENGINES))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


def test_every_engine_counts_the_same_figures_over_a_set(engine: Engine, tmp_path: Path) -> None:
    patients, diagnoses = fixed_case()
    local = write_reference(tmp_path, patients, diagnoses)
    person = engine.load("attr_set_patients", pa.Table.from_pylist(patients, schema=PATIENTS))
    linked = engine.load("attr_set_diagnoses", pa.Table.from_pylist(diagnoses, schema=DIAGNOSES))
    spec = engine.folder / "attr_set.toml"
    spec.write_text(local.read_text(encoding="utf-8")
                    .replace('[source]\npath = "patients.parquet"\n', engine.header() + f"\n[source]\n{person}\n")
                    .replace('path = "diagnoses.parquet"\n', f"{linked}\n"), encoding="utf-8")
    for below in (1, 2):
        want = expected(patients, diagnoses, below)
        assert measured(local, below) == pytest.approx(want, rel=1e-12, abs=1e-12)
        assert measured(spec, below) == pytest.approx(want, rel=1e-12, abs=1e-12)
