"""Persons on every output path (issue 29): ``--suppress-below`` counts persons, and stored SQL
(a view, compiled SQL, a dbt model) may drop the person key while its gate still counts persons.

A patient with five visits alone in their group is a group of one person, not of five rows:
``--suppress-below 2`` must blank all five rows.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from deid_sql import Problem
from deid_sql.cli import cli
from deid_sql.release.plan import plan_of
from tests.engines import ENGINES, Engine, engine_fixture, engine_params, read_duckdb, sorted_rows
from tests.test_persons import KEY, on_engine, releasable, write

# persons P0..P39: ages in two bands of ten with many persons each; P40 (five visits, age 75) and
# P41 (one visit, age 85) are alone in their bands
ROWS = ([{"patient_id": f"P{p}", "age": 20 + p % 20, "sex": "F", "seen": v, "dx": "x"}
         for p in range(40) for v in range(1 + p % 3)]
        + [{"patient_id": "P40", "age": 75, "sex": "F", "seen": v, "dx": "x"} for v in range(5)]
        + [{"patient_id": "P41", "age": 85, "sex": "F", "seen": 0, "dx": "x"}])
ALONE = {"P40", "P41"}


def suppressed_by_person(rows: list[dict[str, Any]]) -> dict[Any, set[bool]]:
    flagged: dict[Any, set[bool]] = collections.defaultdict(set)
    for row in rows:
        flagged[row["patient_id"]].add(bool(row["deid_suppressed"]))
    return flagged


def test_suppress_below_counts_persons_not_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEID_PERSONS_KEY", KEY)
    spec = releasable(write(tmp_path, ROWS, visits=False))
    out = tmp_path / "r.parquet"
    result = CliRunner().invoke(cli, ["materialize", str(spec), "--policy", "age:every=10", "--suppress-below", "2",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = pq.read_table(out).to_pylist()
    assert len(rows) == len(ROWS)
    # P40's five rows and P41's one: suppressed, they carry no pseudonym (nothing links them to another
    # release, and nobody counts their rows); the gate still counts two persons
    assert {r["patient_id"] for r in rows if r["deid_suppressed"]} == {None}
    flagged = suppressed_by_person([r for r in rows if not r["deid_suppressed"]])
    assert all(len(v) == 1 for v in flagged.values())
    assert all(r["age"] == "*" for r in rows if r["deid_suppressed"])
    assert sum(1 for r in rows if r["deid_suppressed"]) == 6
    sidecar = json.loads((tmp_path / "r.parquet.release.json").read_text(encoding="utf-8"))
    figures = sidecar["figures"]
    assert figures["unit"] == "persons" and figures["suppressed"] == 2 and figures["records"] == 42
    assert "fewer than 2 persons" in json.dumps(sidecar)
    with Problem.from_spec(spec, cache=False) as problem:
        unsuppressed = problem.evaluate("age:every=10")
    assert unsuppressed.sample_unique_records == 2  # what the suppression removed, counted in persons


def test_a_view_compiled_sql_and_dbt_may_drop_the_person_key(tmp_path: Path) -> None:
    """Stored SQL cannot hold the pseudonym's key, so it drops the person key; the gate counts
    persons on the same query with the key kept for the count, and the key is not released."""
    from deid_sql.dbt import write_dbt
    from deid_sql.release.output import compile_release, create_view

    spec = write(tmp_path, ROWS, visits=False)  # patient_id under drop
    spec.write_text(spec.read_text(encoding="utf-8").replace("min_k = 2", "max_record_risk = 1.0"),
                    encoding="utf-8")
    db = tmp_path / "views.duckdb"
    with Problem.from_spec(spec, cache=False) as problem:
        want = problem.evaluate("age:every=10")
        plan = plan_of(problem, "age:every=10")
        view = create_view(problem, plan, db, "enc_deid")
        sql, compiled = compile_release(problem, plan)
        dbt = write_dbt(problem, plan, tmp_path / "dbt")
    for written in (view, compiled):
        f = written.figures
        assert f is not None and f.unit == "persons" and f.records == 42
        assert (f.groups, f.k, f.sample_unique_records) == (want.groups, want.k, want.sample_unique_records)
    assert dbt.figures is not None and dbt.figures.unit == "persons" and dbt.figures.records == 42
    shown = read_duckdb(db, "enc_deid")
    assert "patient_id" not in shown.column_names and shown.num_rows == len(ROWS)
    assert '"patient_id"' not in sql.split("FROM")[0]  # not among the released columns
    ages = collections.Counter(shown.column("age").to_pylist())
    assert ages["70-79"] == 5  # P40's five rows carry their one label
    sidecar = read_duckdb(db, "enc_deid__release").to_pylist()[0]
    assert '"unit": "persons"' in json.dumps(sidecar) or "persons" in str(sidecar)


def test_a_view_with_the_key_pseudonymized_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEID_PERSONS_KEY", KEY)
    spec = releasable(write(tmp_path, ROWS, visits=False))
    db = tmp_path / "views.duckdb"
    result = CliRunner().invoke(cli, ["view", str(spec), "--policy", "age:every=10", "--db", str(db),
                                      "--view", "enc_deid"])
    assert result.exit_code == 2 and "would hold the secret key" in result.output
    assert "\n" not in result.output.strip()


# -- every engine -----------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=engine_params(*ENGINES))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


def test_every_engine_suppresses_the_same_persons(engine: Engine, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The count of persons per group (a window over each person's first row) runs where the data
    is: PostgreSQL and Spark, which have no ``COUNT(DISTINCT …) OVER``, write the DuckDB file's rows."""
    from deid_sql.release.output import materialize

    monkeypatch.setenv("DEID_PERSONS_KEY", KEY)
    local = releasable(write(tmp_path, ROWS, visits=False))
    spec = on_engine(engine, local, ROWS, "encounters_suppressed")
    figures = []
    for path, out in ((local, tmp_path / "want.parquet"), (spec, tmp_path / "got.parquet")):
        with Problem.from_spec(path, cache=False) as problem:
            figures.append(materialize(problem, plan_of(problem, "age:every=10", suppression=2), out).figures)
    got = pq.read_table(tmp_path / "got.parquet")
    assert sorted_rows(got) == sorted_rows(pq.read_table(tmp_path / "want.parquet"))
    assert sum(1 for r in got.to_pylist() if r["deid_suppressed"]) == 6
    assert figures[0] == figures[1] and figures[0] is not None and figures[0].suppressed == 2
