"""Engines for the backend suite: each loads the same Arrow tables where the engine keeps data
and writes the spec header that points at them (ibis-style: one suite, many engines).

PostgreSQL needs ``DEID_TEST_POSTGRES_DSN`` (``.ci/run`` starts a throwaway cluster with
``.ci/postgres.sh``); Spark needs pyspark and Java.  Outside CI an engine that is not there
is skipped; under CI (``CI=true``) it is a failure, so a green CI run means every engine ran.
"""

from __future__ import annotations

import importlib.util
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.markers import require

ENGINES = ("duckdb", "postgres", "spark")


def engine_params(*names: str) -> list[object]:
    """Fixture params for the engines ``names``: PostgreSQL and Spark marked ``engine``, so the fast
    suite (``-m "not engine ..."``, tests/markers.py) keeps the DuckDB variant only."""
    return [pytest.param(n, marks=() if n == "duckdb" else pytest.mark.engine, id=n) for n in names]


def read_duckdb(path: Path, name: str) -> pa.Table:
    """A table or view of a DuckDB file (outputs of the DuckDB engine), any name, as Arrow."""
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        quoted = '"' + name.replace('"', '""') + '"'
        return con.sql(f"SELECT * FROM {quoted}").to_arrow_table()
    finally:
        con.close()


def unavailable(reason: str) -> None:
    """Skip locally, fail under CI."""
    if os.environ.get("CI"):
        pytest.fail(f"engine not available under CI: {reason}")
    pytest.skip(reason)


def spark_package() -> None:
    """Skip locally (fail under CI) a test that needs the spark extra but no Spark: the CLI refuses a
    Spark spec without pyspark before it does what such a test is about (a refusal before the JVM)."""
    if importlib.util.find_spec("pyspark") is None:
        unavailable("pyspark is not installed (pip install '.[spark]')")


@dataclass
class Engine:
    """Where one engine keeps the test tables, and how a spec names them."""

    name: str
    folder: Path
    tables: dict[str, str] = field(default_factory=dict)  # logical name -> what [source] says

    def header(self) -> str:
        """The spec's ``[backend]`` table."""
        raise NotImplementedError

    def load(self, name: str, table: pa.Table) -> str:
        """Store ``table`` and return the TOML lines of a [source]/[population] body naming it."""
        raise NotImplementedError

    def read(self, name: str) -> pa.Table:
        """A table or view the engine holds (created by a test), as Arrow."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class DuckDBEngine(Engine):
    def header(self) -> str:
        return ""

    def load(self, name: str, table: pa.Table) -> str:
        path = self.folder / f"{name}.parquet"
        pq.write_table(table, path)
        return f'path = "{path}"'

    def read(self, name: str) -> pa.Table:
        raise NotImplementedError("DuckDB outputs are files")


class PostgresEngine(Engine):
    def __init__(self, name: str, folder: Path) -> None:
        super().__init__(name, folder)
        from deid_sql.backends import connect

        self.dsn = os.environ["DEID_TEST_POSTGRES_DSN"]
        self.schema = f"deid_test_{uuid.uuid4().hex[:8]}"
        self.backend = connect("postgres", dsn=self.dsn)
        self.backend.con.execute(f'CREATE SCHEMA "{self.schema}"')

    def header(self) -> str:
        return f'[backend]\nengine = "postgres"\ndsn = "{self.dsn}"\n'

    def load(self, name: str, table: pa.Table) -> str:
        self.backend.register_table(f"load_{name}", table)
        self.backend.con.execute(f'CREATE TABLE "{self.schema}"."{name}" AS SELECT * FROM "load_{name}"')
        return f'table = "{self.schema}.{name}"'

    def qualified(self, name: str) -> str:
        return f"{self.schema}.{name}"

    def read(self, name: str) -> pa.Table:
        from sqlglot import exp

        from deid_sql.backends.postgres import quoted_table

        return self.backend.execute(exp.select("*").from_(quoted_table(name)))

    def close(self) -> None:
        self.backend.con.execute(f'DROP SCHEMA "{self.schema}" CASCADE')
        self.backend.close()


def open_engine(name: str, folder: Path) -> Engine:
    if name == "duckdb":
        return DuckDBEngine(name, folder)
    require("engine", f"opens {name}")  # before looking for it: an unmarked test fails with or without it
    if name == "postgres":
        if importlib.util.find_spec("psycopg") is None:
            unavailable("psycopg is not installed (pip install '.[postgres]')")
        if not os.environ.get("DEID_TEST_POSTGRES_DSN"):
            unavailable("no PostgreSQL: export DEID_TEST_POSTGRES_DSN (eval \"$(bash .ci/postgres.sh start DIR)\")")
        return PostgresEngine(name, folder)
    if name == "spark":
        spark_package()
        from tests.spark_engine import SparkEngine  # written with the Spark backend

        return SparkEngine(name, folder)
    raise ValueError(name)


def opened(name: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """Engine ``name`` in a folder of its own, closed after its tests (a fixture's body)."""
    engine = open_engine(name, tmp_path_factory.mktemp(name))
    try:
        yield engine
    finally:
        engine.close()


def engine_fixture(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from opened(request.param, tmp_path_factory)


def default_spec(engine: Engine, release: str | None = None) -> Path:
    """The conftest problem (500 patients, census population) stored in ``engine``, and its spec;
    ``release`` the ``[release]`` table's body (None: the permissive ``PERMISSIVE_RELEASE``)."""
    from tests.conftest import DEFAULT_COLUMNS, DEFAULT_QIS, PERMISSIVE_RELEASE, _population_table, _source_table

    source = engine.load("patients", _source_table())
    population = engine.load("census", _population_table())
    text = (engine.header() + f"\n[source]\n{source}\n\n[population]\n{population}\ncount = \"count\"\n"
            + "".join(DEFAULT_QIS) + DEFAULT_COLUMNS + f"\n[release]\n{release or PERMISSIVE_RELEASE}\n")
    path = engine.folder / "spec.toml"
    path.write_text(text, encoding="utf-8")
    return path


def sorted_rows(table: pa.Table) -> list[tuple[object, ...]]:
    """A table's rows as tuples in column order, sorted (release rows compared whatever their order)."""
    return sorted(zip(*(c.to_pylist() for c in table.columns)), key=repr)
