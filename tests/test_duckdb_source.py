"""A source that is a table inside a DuckDB file: load, compile, view in that file."""

from __future__ import annotations

import duckdb
import pyarrow.parquet as pq
import pytest

from deid_sql import Problem
from deid_sql.errors import OutputError
from deid_sql.release.output import create_view, materialize
from deid_sql.release.plan import plan_of

from .problems import write_small_problem


@pytest.fixture()
def db_spec(tmp_path):
    spec = write_small_problem(tmp_path, seed=4)
    db = tmp_path / "hospital.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE \"Patients 2024\" AS SELECT * FROM read_parquet(?)", [str(tmp_path / "source.parquet")])
    con.close()
    text = spec.read_text().replace('path = "source.parquet"', 'path = "hospital.duckdb"\ntable = "Patients 2024"')
    spec.write_text(text)
    return spec, db


@pytest.mark.slow
def test_duckdb_table_source_evaluates_like_the_parquet_file(db_spec, tmp_path):
    spec, db = db_spec
    with Problem.from_spec(spec) as p:
        from_db = p.evaluate("age:cuts=10,20|zip:top")
        sql = p.compile(plan_of(p, "age:cuts=10,20"), dialect="duckdb")
    assert '"Patients 2024"' in sql and "deid_src" not in sql
    parquet_spec = write_small_problem(tmp_path / "again", seed=4)
    with Problem.from_spec(parquet_spec) as p:
        assert p.evaluate("age:cuts=10,20|zip:top") == from_db


def test_view_lives_beside_the_source_table(db_spec, tmp_path):
    spec, db = db_spec
    with Problem.from_spec(spec) as p:
        create_view(p, plan_of(p, "race:top"), db, "patients_deid")
        with pytest.raises(OutputError, match="create the view in that file"):
            create_view(p, plan_of(p, "race:top"), tmp_path / "other.duckdb", "v")
        out = materialize(p, plan_of(p, "race:top"), tmp_path / "release.parquet")
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute('SELECT DISTINCT race FROM patients_deid').fetchall()
    con.close()
    assert rows == [("White|Black|Asian|Other",)]
    assert out.rows == pq.read_table(tmp_path / "release.parquet").num_rows == 400
