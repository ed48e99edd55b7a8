"""The gate judges what released values reveal (issue 40, METHODS decision 15): 200 persons in
groups of 5, one group all B20.  Each attribute criterion refuses the release naming ``diagnosis``
and the worst group (never a person), limits that allow it pass, on every single-table path; the
sidecar records the figures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deid_sql import Problem
from deid_sql.errors import ReleaseRefused
from deid_sql.release.output import materialize
from deid_sql.release.plan import plan_of
from deid_sql.release.sidecar import read_sidecar, sidecar_path
from tests.engines import ENGINES, Engine, engine_fixture, engine_params

POLICY = "age:cuts=30,40,50|clinic:bottom"
OTHERS = ("I10", "E11", "J45", "K21", "B20")
CLINICS = [f"C{i}" for i in range(10)]
AGE_H = "\n".join(f"{a};{a // 10 * 10}-{a // 10 * 10 + 9};*" for a in range(20, 60)) + "\n"
CLINIC_H = "\n".join(f"{c};*" for c in CLINICS) + "\n"


def source_table() -> pa.Table:
    ids, ages, clinics, dx = [], [], [], []
    for decade in range(4):
        for c, clinic in enumerate(CLINICS):
            for j in range(5):
                ids.append(len(ids) + 1)
                ages.append(20 + decade * 10 + (j * 2 + c) % 10)
                clinics.append(clinic)
                dx.append("B20" if decade == 0 and c == 0 else OTHERS[j])
    return pa.table({"pid": ids, "age": np.array(ages, dtype=np.int64), "clinic": clinics, "diagnosis": dx})


def write_problem(folder: Path, release: str, source: str = 'path = "source.parquet"', header: str = "") -> Path:
    """200 persons: 4 age decades × 10 clinics, 5 each; the group 20-29 at C0 all B20, every other group
    one person of each of ``OTHERS``.  q(B20) = (5 + 39) / 200."""
    pq.write_table(source_table(), folder / "source.parquet")
    (folder / "age.csv").write_text(AGE_H, encoding="utf-8")
    (folder / "clinic.csv").write_text(CLINIC_H, encoding="utf-8")
    spec = folder / "spec.toml"
    spec.write_text(f"""population = "sample"
{header}
[source]
{source}

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
drop = ["pid"]
sensitive = ["diagnosis"]

[release]
min_k = 5
{release}
""", encoding="utf-8")
    return spec


def one_error(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


REFUSALS = [
    ("max_confidence = 0.8", "diagnosis: group age 20-29, clinic C0 holds 'B20' for 5 of 5 records "
                             "(confidence 1 > max_confidence 0.8)"),
    ("min_l = 2", "diagnosis: group age 20-29, clinic C0 holds 1 distinct value (ℓ 1 < min_l 2)"),
    ('max_t = 0.5\nt_distance = "equal"', "diagnosis: group age 20-29, clinic C0 is at t = 0.78 from the source's "
                                          "distribution (equal distance; > max_t 0.5)"),
]
ALLOW = 'max_confidence = 1\nmin_l = 1\nmax_t = 0.8\nt_distance = "equal"'


@pytest.mark.parametrize("release, message", REFUSALS, ids=["confidence", "distinct_l", "t"])
def test_each_criterion_refuses_the_b20_group(tmp_path: Path, run, release: str, message: str) -> None:
    spec = write_problem(tmp_path, release)
    out = tmp_path / "r.parquet"
    line = one_error(run("materialize", spec, "--policy", POLICY, "--out", out, expect=2))
    assert message in line, line
    assert "nothing was written" in line and not out.exists()
    assert not (tmp_path / "r.parquet.release.json").exists()


def test_limits_that_allow_it_pass_and_the_sidecar_records_the_figures(tmp_path: Path, run) -> None:
    spec = write_problem(tmp_path, ALLOW)
    out = tmp_path / "r.parquet"
    run("materialize", spec, "--policy", POLICY, "--out", out)
    record = read_sidecar(sidecar_path(out))
    (column,) = record["figures"]["attribute"]
    assert column["column"] == "diagnosis" and column["groups"] == 40
    assert column["max_confidence"] == 1.0 and column["min_distinct_l"] == 1.0
    assert column["max_t"] == pytest.approx(1 - 44 / 200)
    checks = {c["criterion"]: c for c in record["gate"]["checks"] if c["figure"].startswith("diagnosis.")}
    assert set(checks) == {"max_confidence", "min_l", "max_t"} and all(c["passed"] for c in checks.values())
    assert record["gate"]["criteria"]["attribute"]["diagnosis"]["max_t"] == 0.8


def test_the_three_together_refuse_and_name_each(tmp_path: Path, run) -> None:
    spec = write_problem(tmp_path, "max_confidence = 0.8\nmin_l = 2\nmax_t = 0.5\nt_distance = \"equal\"")
    line = one_error(run("materialize", spec, "--policy", POLICY, "--out", tmp_path / "r.parquet", expect=2))
    for _, message in REFUSALS:
        assert message in line
    assert "pid" not in line


def test_a_more_general_policy_passes_the_three(tmp_path: Path, run) -> None:
    """Ages in two halves: the B20 group is merged with a diverse one (10 persons, 6 B20)."""
    spec = write_problem(tmp_path, "max_confidence = 0.8\nmin_l = 2\nmax_t = 0.5\nt_distance = \"equal\"")
    out = tmp_path / "r.parquet"
    run("materialize", spec, "--policy", "age:cuts=40|clinic:bottom", "--out", out)
    record = read_sidecar(sidecar_path(out))
    assert record["gate"]["verdict"] == "passed"
    assert record["figures"]["attribute"][0]["max_confidence"] == pytest.approx(6 / 10)


def test_the_accept_risk_override_records_the_attribute_failure(tmp_path: Path, run) -> None:
    spec = write_problem(tmp_path, "max_confidence = 0.8")
    out = tmp_path / "r.parquet"
    run("materialize", spec, "--policy", POLICY, "--out", out, "--accept-risk", "reviewed by the board")
    gate = read_sidecar(sidecar_path(out))["gate"]
    assert gate["verdict"] == "accepted" and any("holds 'B20' for 5 of 5" in f for f in gate["failures"])


PATHS = {
    "table": lambda d: ("materialize", "--out", d / "r.duckdb", "--table", "released"),
    "view": lambda d: ("view", "--db", d / "r.duckdb", "--view", "released"),
    "compile": lambda d: ("compile", "--dialect", "duckdb"),
    "report": lambda d: ("report", "--out", d / "r.html"),
    "dbt": lambda d: ("dbt", "--project", d / "warehouse"),
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_every_path_judges_the_values(tmp_path: Path, run, path: str) -> None:
    spec = write_problem(tmp_path, "max_confidence = 0.8")
    command, *rest = PATHS[path](tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    result = run(command, spec, "--policy", POLICY, *rest, expect=None)
    if path == "report":  # the report shows the verdict, and writes the page
        assert result.exit_code == 0, result.stderr
        assert "fails the release gate: diagnosis: group age 20-29, clinic C0 holds 'B20'" in result.stdout
        assert "holds &#39;B20&#39; for 5 of 5 records" in (tmp_path / "r.html").read_text()
        figures = json.loads((tmp_path / "r.json").read_text())
        assert "B20" in json.dumps(figures)
        return
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert "holds 'B20' for 5 of 5 records (confidence 1 > max_confidence 0.8)" in one_error(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_apply_of_a_policy_file_judges_the_values(tmp_path: Path, run) -> None:
    spec = write_problem(tmp_path, "max_confidence = 1")
    policy = tmp_path / "policy.json"
    run("policy", "save", spec, "--policy", POLICY, "--out", policy)
    out = tmp_path / "b.parquet"
    run("apply", policy, "--source", tmp_path / "source.parquet", "--out", out)
    assert read_sidecar(sidecar_path(out))["figures"]["attribute"][0]["max_confidence"] == 1.0
    write_problem(tmp_path, "max_confidence = 0.8")  # the spec's criteria tightened: the next batch is judged so
    line = one_error(run("apply", policy, "--source", tmp_path / "source.parquet", "--out", tmp_path / "c.parquet",
                         expect=None))
    assert "holds 'B20' for 5 of 5" in line and not (tmp_path / "c.parquet").exists()


def test_anonymize_out_is_judged_by_the_gate(tmp_path: Path, run) -> None:
    """Whatever the search picks, a release whose every person holds B20 cannot meet max_confidence."""
    spec = write_problem(tmp_path, "max_confidence = 0.8")
    table = pq.read_table(tmp_path / "source.parquet")
    pq.write_table(table.set_column(3, "diagnosis", pa.array(["B20"] * table.num_rows)), tmp_path / "source.parquet")
    out = tmp_path / "r.parquet"
    result = run("anonymize", spec, "--min-k", 5, "--out", out, expect=2)
    assert "diagnosis" in one_error(result) and not out.exists()
    ok = write_problem(tmp_path, ALLOW)
    run("anonymize", ok, "--min-k", 5, "--out", out)
    assert read_sidecar(sidecar_path(out))["figures"]["attribute"][0]["column"] == "diagnosis"


@pytest.fixture(scope="module", params=engine_params(*ENGINES))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


def test_every_engine_judges_the_values_it_materializes(engine: Engine, tmp_path: Path) -> None:
    """The value count runs where the data is: each engine refuses the B20 group by the same line, writes
    nothing, and passes (with the same figures) under limits that allow it."""
    body = engine.load("attr_b20", source_table())
    in_engine = engine.name != "duckdb"
    database = None if in_engine else tmp_path / "out.duckdb"

    def qualified(name: str) -> str:
        return engine.qualified(name) if in_engine else name

    strict = write_problem(tmp_path, "max_confidence = 0.8\nmin_l = 2\nmax_t = 0.5\nt_distance = \"equal\"", body,
                           engine.header())
    with Problem.from_spec(strict, cache=False) as problem:
        with pytest.raises(ReleaseRefused) as refused:
            materialize(problem, plan_of(problem, POLICY), database, table=qualified("attr_refused"))
        for _, message in REFUSALS:
            assert message in str(refused.value)
        assert not problem.backend.exists(database, qualified("attr_refused"))
    allow = write_problem(tmp_path, ALLOW, body, engine.header())
    with Problem.from_spec(allow, cache=False) as problem:
        written = materialize(problem, plan_of(problem, POLICY), database, table=qualified("attr_passed"))
    assert written.verdict is not None and written.verdict.status == "passed"
    (column,) = written.figures.attribute
    assert (column.max_confidence, column.min_distinct_l, column.groups) == (1.0, 1.0, 40)
    assert column.max_t == pytest.approx(1 - 44 / 200)
