"""The release gate on every engine, with hostile names and values: QI columns and categories with
quotes, semicolons, ``--``, newlines, unicode and SQL keywords go through the roles, the guards, the
gate and the sidecar; a refusal leaves nothing in the engine, an override is recorded there."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deid_sql import Problem
from deid_sql.errors import ReleaseRefused
from deid_sql.release.output import create_view, materialize
from deid_sql.release.plan import plan_of
from tests.engines import ENGINES, Engine, engine_fixture, engine_params, read_duckdb

CATEGORIES = ["O'Brien", 'say "hi"', "a;b", "--x", "DROP TABLE t; --", "two\nlines", "naïve ✓", "SELECT"]
AGE, CAT, NOTE, ID = "it's \"age\"; --", "select", "from", "patient id"


@pytest.fixture(scope="module", params=engine_params(*ENGINES))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


def hostile_table() -> pa.Table:
    n = 240
    return pa.table({
        ID: pa.array(range(n), pa.int64()),
        AGE: pa.array([(i * 7) % 80 for i in range(n)], pa.int64()),
        CAT: pa.array([CATEGORIES[i % len(CATEGORIES)] for i in range(n)]),
        NOTE: pa.array([CATEGORIES[(i * 3) % len(CATEGORIES)] for i in range(n)]),
    })


def write_spec(engine: Engine, folder: Path, body: str, release: str) -> Path:
    values = json.dumps(CATEGORIES, ensure_ascii=False)
    spec = folder / "hostile.toml"
    spec.write_text('population = "sample"\n' + engine.header() + f"\n[source]\n{body}\n"
                    f'[[qi]]\nname = {json.dumps(AGE)}\nkind = "integer"\nmin = 0\nmax = 120\n'
                    f'[[qi]]\nname = {json.dumps(CAT)}\nkind = "category"\nvalues = {values}\n'
                    f'[columns]\ndrop = [{json.dumps(ID)}]\nkeep = [{json.dumps(NOTE)}]\n'
                    f"[release]\n{release}\n", encoding="utf-8")
    return spec


def sidecar_of(engine: Engine, problem: Problem, name: str, database: Path | None) -> dict:
    if database is not None:
        con = duckdb.connect(str(database), read_only=True)
        try:
            (text,) = con.execute(f'SELECT sidecar FROM "{name}__release"').fetchone()
        finally:
            con.close()
    else:
        text = engine.read(f"{name}__release").column("sidecar")[0].as_py()
    return json.loads(text)


@pytest.mark.slow
def test_hostile_release_through_the_gate(engine: Engine, tmp_path: Path) -> None:
    table = hostile_table()
    body = engine.load("hostile_src", table)
    policy = f"{AGE}:cuts=20,40,60"
    in_engine = engine.name != "duckdb"
    database = None if in_engine else tmp_path / "out.duckdb"

    def qualified(name: str) -> str:
        return engine.qualified(name) if in_engine else name

    spec = write_spec(engine, tmp_path, body, "min_k = 2\nmax_record_risk = 1")
    with Problem.from_spec(spec) as problem:
        name = qualified("released")
        written = materialize(problem, plan_of(problem, policy), database, table=name)
        assert written.verdict is not None and written.verdict.status == "passed"
        record = sidecar_of(engine, problem, name, database)
        assert [c["name"] for c in record["columns"]] == [AGE, CAT, NOTE]
        assert record["figures"]["records"] == 240 and record["figures"]["outside"] == 0
        got = engine.read(name) if in_engine else read_duckdb(database, name)
        assert got.column_names == [AGE, CAT, NOTE]
        assert sorted(got.column(CAT).to_pylist()) == sorted(table.column(CAT).to_pylist())
        assert set(got.column(AGE).to_pylist()) == {"0-19", "20-39", "40-59", "60-120"}
        view = qualified("released_view")
        create_view(problem, plan_of(problem, policy), database, view)
        assert sidecar_of(engine, problem, view, database)["release"]["kind"] == "view"
    strict = write_spec(engine, tmp_path, body, "min_k = 1000")
    with Problem.from_spec(strict) as problem:
        for target in ("refused", "refused_view"):
            with pytest.raises(ReleaseRefused, match="min_k"):
                if target == "refused":
                    materialize(problem, plan_of(problem, policy), database, table=qualified(target))
                else:
                    create_view(problem, plan_of(problem, policy), database, qualified(target))
            assert not problem.backend.exists(database, qualified(target))
            assert not problem.backend.exists(database, qualified(target) + "__release")
        name = qualified("accepted")
        materialize(problem, plan_of(problem, policy), database, table=name, accept_risk="test: 'quoted'; -- reason")
        gate = sidecar_of(engine, problem, name, database)["gate"]
        assert gate["verdict"] == "accepted" and gate["accepted_risk"] == "test: 'quoted'; -- reason"


def test_hostile_file_release_round_trips(tmp_path: Path) -> None:
    """The same hostile data released to a file: the sidecar names the hostile columns exactly."""
    from deid_sql.release.sidecar import read_sidecar, sidecar_path

    pq.write_table(hostile_table(), tmp_path / "hostile.parquet")
    engine = Engine("duckdb", tmp_path)
    engine.header = lambda: ""  # type: ignore[method-assign]
    spec = write_spec(engine, tmp_path, 'path = "hostile.parquet"', "min_k = 2")
    with Problem.from_spec(spec) as problem:
        materialize(problem, plan_of(problem, f"{AGE}:cuts=20,40,60"), tmp_path / "out.csv")
    record = read_sidecar(sidecar_path(tmp_path / "out.csv"))
    assert [c["name"] for c in record["columns"]] == [AGE, CAT, NOTE]
    assert record["gate"]["verdict"] == "passed"
