"""Spark engine: bad input is one clear line, values outside a domain are found under ANSI SQL
(TRY_CAST), CSV text columns keep their leading zeros, and backends share one Spark."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from sqlglot import exp

from deid_sql.errors import BackendError, DataError, DeidError, OutputError
from deid_sql.problem import Problem
from deid_sql.release.output import create_view, materialize
from deid_sql.release.plan import plan_of
from tests.conftest import DEFAULT_QIS, PERMISSIVE_RELEASE, _source_table
from tests.engines import Engine, opened

pytestmark = pytest.mark.engine  # every test runs on Spark


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from opened("spark", tmp_path_factory)


def _spec(engine: Engine, folder: Path, body: str, name: str = "spec.toml") -> Path:
    path = folder / name
    path.write_text('population = "sample"\n' + engine.header() + f"\n[source]\n{body}\n" + "".join(DEFAULT_QIS)
                    + '\n[columns]\ndrop = ["patient_id"]\nsensitive = ["diagnosis"]\n'
                    + f"\n[release]\n{PERMISSIVE_RELEASE}\n", encoding="utf-8")
    return path


def _one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text and len(text) < 700, text
    return text


def test_missing_table_is_one_line(spark: Engine, tmp_path: Path) -> None:
    for name in ("no_such_db.patients", spark.qualified("no_such_table")):
        with pytest.raises(DataError) as info:
            Problem.from_spec(_spec(spark, tmp_path, f'table = "{name}"'))
        text = _one_line(info.value)
        assert f"cannot read source table {name!r}: Spark:" in text and "cannot be found" in text


def test_bad_query_and_task_failure_are_one_line(spark: Engine) -> None:
    spark.load("people", _source_table())
    backend = spark.backend  # type: ignore[attr-defined]
    table = spark.qualified("people")
    for query in ("SELEC 1", f"SELECT no_column FROM {table}", f"SELECT CAST(sex AS INT) FROM {table}"):
        with pytest.raises(BackendError, match=r"^Spark: \[") as info:
            backend.execute(query)
        _one_line(info.value)
    # ANSI SQL: a bad CAST fails in a task, and a stream reports it the same way
    with pytest.raises(BackendError, match="CAST_INVALID_INPUT") as info:
        list(backend.stream(exp.select(exp.cast(exp.column("sex"), "INT")).from_(table)))
    _one_line(info.value)


def test_values_outside_the_domain_are_found_under_ansi(spark: Engine, tmp_path: Path) -> None:
    """The loader's TRY_CAST must stay a TRY_CAST in Spark, where ANSI SQL (on by default) makes
    CAST('abc' AS BIGINT) fail: bad ages in a text column become one data problem."""
    source = _source_table()
    bad = ["abc", "45.5", "150"]
    ages = pa.array(bad + [str(a) for a in source.column("age").to_pylist()[len(bad):]])
    body = spark.load("bad_ages", source.set_column(1, "age", ages))
    with pytest.raises(DataError, match="3 record") as info:
        Problem.from_spec(_spec(spark, tmp_path, body))
    text = _one_line(info.value)
    assert "outside the declared domain" in text and all(repr(v) in text for v in bad)


def test_csv_and_parquet_sources(spark: Engine, tmp_path: Path) -> None:
    """Files read by Spark: a CSV's ZIP column keeps its leading zeros; a view over a CSV (read
    through a temporary view) is refused in one line, over Parquet it is created."""
    source = _source_table()
    zips = ["0" + z[1:] for z in source.column("zip").to_pylist()]  # 37301 -> 07301, values from the data
    source = source.set_column(4, "zip", pa.array(zips))
    pacsv.write_csv(source, tmp_path / "source.csv")
    pq.write_table(source, tmp_path / "source.parquet")
    for fmt in ("csv", "parquet"):
        with Problem.from_spec(_spec(spark, tmp_path, f'path = "source.{fmt}"', f"{fmt}.toml")) as problem:
            assert problem.columns["zip"] == "VARCHAR"
            materialize(problem, plan_of(problem, "bottom"), tmp_path / f"{fmt}.parquet",
                        accept_risk="test: reading both formats")
            assert sorted(pq.read_table(tmp_path / f"{fmt}.parquet").column("zip").to_pylist()) == sorted(zips)
            view = spark.qualified(f"{fmt}_view")
            if fmt == "csv":
                with pytest.raises(OutputError, match="cannot read a CSV source") as info:
                    create_view(problem, plan_of(problem, "top"), None, view)
                _one_line(info.value)
            else:
                create_view(problem, plan_of(problem, "top"), None, view)
                assert spark.read(view).num_rows == source.num_rows


def test_stream_batches_and_row_fallback(spark: Engine) -> None:
    from deid_sql.backends import spark_arrow as module

    spark.load("streamed", _source_table())
    backend = spark.backend  # type: ignore[attr-defined]
    query = exp.select("*").from_(spark.qualified("streamed"))
    batches = list(backend.stream(query, 120))
    assert [b.num_rows for b in batches] == [120, 120, 120, 120, 20]
    df = backend.session.sql(backend.render(query))
    rows = list(module.row_batches(df.toLocalIterator(), module.arrow_schema(df), 150))
    assert pa.Table.from_batches(rows).equals(pa.Table.from_batches(batches))


def test_one_spark_per_process(spark: Engine) -> None:
    """Backends share Spark: closing one leaves the others working; a backend asking for
    another master or another startup setting is refused; temporary views stay private."""
    from deid_sql.backends import connect
    from tests.spark_engine import CONF, MASTER

    first = connect("spark", master=MASTER, conf=CONF)
    second = connect("spark", master=MASTER, conf={**CONF, "spark.sql.shuffle.partitions": "3"})
    first.register_table("mine", pa.table({"x": [1, 2]}))
    with pytest.raises(BackendError, match="TABLE_OR_VIEW_NOT_FOUND"):
        second.execute("SELECT * FROM mine")
    assert first.execute("SELECT * FROM mine").num_rows == 2
    assert second.execute("SELECT 1 AS one").column("one").to_pylist() == [1]
    assert first.session.conf.get("spark.sql.shuffle.partitions") == "4"  # type: ignore[attr-defined]
    assert second.session.conf.get("spark.sql.shuffle.partitions") == "3"  # type: ignore[attr-defined]
    first.close()
    assert second.execute("SELECT 2 AS two").column("two").to_pylist() == [2]
    second.close()
    with pytest.raises(BackendError, match="already runs in this process with master") as info:
        connect("spark", master="local[1]", conf=CONF)
    _one_line(info.value)
    with pytest.raises(BackendError, match="spark.sql.warehouse.dir") as info:
        connect("spark", master=MASTER, conf={"spark.sql.warehouse.dir": "/elsewhere"})
    _one_line(info.value)


def test_outputs_in_the_catalog(spark: Engine, tmp_path: Path) -> None:
    """A DuckDB file or --db is refused; a wrong row count writes nothing; drop and exists."""
    backend = spark.backend  # type: ignore[attr-defined]
    backend.register_table("three", pa.table({"x": [1, 2, 3]}))
    name = spark.qualified("counted")
    with pytest.raises(OutputError, match="nothing was written"):
        backend.create_table(None, name, exp.select("*").from_("three"), 4, False)
    assert not backend.exists(None, name)
    database = spark.database  # type: ignore[attr-defined]
    assert backend.session.sql(f"SHOW TABLES IN `{database}` LIKE 'deid_*'").count() == 0  # no staging left
    assert backend.create_table(None, name, exp.select("*").from_("three"), 3, False) == 3
    assert backend.exists(None, name)
    with pytest.raises(OutputError, match="leave out --db"):
        backend.exists(tmp_path / "x.duckdb", name)
    # replacing: a wrong count keeps the old table; a right one swaps it; a view can be replaced too
    with pytest.raises(OutputError, match="nothing was written"):
        backend.create_table(None, name, exp.select("*").from_("three").limit(2), 3, True)
    assert sorted(spark.read(name).column("x").to_pylist()) == [1, 2, 3]
    assert backend.create_table(None, name, exp.select("*").from_("three").where("x > 1"), 2, True) == 2
    assert sorted(spark.read(name).column("x").to_pylist()) == [2, 3]
    backend.drop(None, name)
    assert not backend.exists(None, name)
    backend.create_view(None, name, exp.select(exp.alias_(exp.Literal.number(7), "x")), False)
    assert backend.create_table(None, name, exp.select("*").from_("three"), 3, True) == 3
    assert sorted(spark.read(name).column("x").to_pylist()) == [1, 2, 3]
    assert backend.session.sql(f"SHOW TABLES IN `{database}` LIKE 'deid_*'").count() == 0
    backend.drop(None, name)
    with pytest.raises(DeidError, match="DuckDB file"):
        from deid_sql.spec.file import TableRef

        backend.relation(TableRef(tmp_path / "x.duckdb", "duckdb", "t"), {})
