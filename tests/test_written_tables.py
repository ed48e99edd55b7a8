"""A table release read once after its write: the figures and the row hash from one ``GROUP BY``
(``release.written``), the same row hash ``fingerprint`` takes alone, on every engine; and the guards
PostgreSQL runs on an integer column are casts, not a pattern on its text."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlglot import exp

from deid_sql import Problem
from deid_sql.backends.base import fingerprint
from deid_sql.compiler.compile import generalize
from deid_sql.compiler.guards import in_domain
from deid_sql.domains.domain import IntegerDomain, ZipDomain
from deid_sql.domains.recoding import QIRecoding, Recoding
from deid_sql.release.output import materialize
from deid_sql.release.plan import plan_of
from deid_sql.spec.file import QISpec
from deid_sql.sqltext import to_sql
from tests.engines import ENGINES, Engine, default_spec, engine_fixture, engine_params

POLICY = "age:cuts=18,30,45,65,90|zip:top"


@pytest.fixture(scope="module", params=engine_params(*ENGINES))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


@pytest.fixture(scope="module")
def spec(engine: Engine) -> Path:
    return default_spec(engine)  # the tables loaded once per engine


def table_hash(backend, table: str, columns: list[str]) -> tuple[str, object]:
    """The table's row hash taken alone, and its sidecar's text."""
    alone = fingerprint(backend.execute, backend, exp.to_table(table), columns)
    sidecar = backend.execute(exp.select("sidecar").from_(exp.to_table(f"{table}__release"))).column(0)[0]
    return alone, sidecar.as_py()


@pytest.mark.parametrize("suppress", [None, 40])
def test_the_row_hash_taken_with_the_figures_is_the_tables_row_hash(engine: Engine, spec: Path, tmp_path: Path,
                                                                      suppress: int | None) -> None:
    in_engine = engine.name != "duckdb"
    database = None if in_engine else tmp_path / "out.duckdb"
    name = f"hashed_{suppress or 0}"
    table = engine.qualified(name) if in_engine else name  # type: ignore[attr-defined]
    with Problem.from_spec(spec, cache=False) as problem:
        plan = plan_of(problem, POLICY).with_suppression(suppress)
        written = materialize(problem, plan, database, table=table)
        assert written.verdict is not None and written.verdict.passed
        columns = [n for n, _ in problem.released_columns] + (["deid_suppressed"] if suppress else [])
        if in_engine:
            alone, sidecar = table_hash(problem.backend, table, columns)
        else:
            from deid_sql.backends import local

            reader = local()
            try:
                reader.con.execute(f"ATTACH '{database}' AS out (READ_ONLY)")
                alone, sidecar = table_hash(reader, f"out.{table}", columns)
            finally:
                reader.close()
    recorded = json.loads(str(sidecar))["release"]["row_hash"]
    assert recorded == alone
    assert recorded.startswith(f"{written.rows}:")
    if suppress:
        assert written.figures is not None and written.figures.suppressed > 0


def test_postgres_guards_an_integer_column_by_casts_and_text_by_its_pattern() -> None:
    qi, domain = QISpec("age", "age", "age", "integer", 0, 120), IntegerDomain(0, 120)
    typed = to_sql(in_domain(qi, domain, exp.column("age"), "INTEGER"), "postgres")
    assert "~" not in typed and "AS TEXT" not in typed
    assert re.search(r"CAST\(age AS DOUBLE PRECISION\) = CAST\(age AS BIGINT\)", typed)
    text = to_sql(in_domain(qi, domain, exp.column("age"), "VARCHAR"), "postgres")
    assert "~" in text  # text is read by its pattern, so '45.5' or 'abc' is outside and stops no query
    unknown = to_sql(in_domain(qi, domain, exp.column("age"), None), "postgres")
    assert "~" in unknown  # a type not known: the cast could fail, the pattern stays


def test_postgres_compiled_sql_guards_the_integer_age_as_the_write_does(project) -> None:
    """``compile --dialect postgres`` and the release query rendered for PostgreSQL are one SELECT, and
    neither reads the integer age through its text."""
    with Problem.from_spec(project.dir / "spec.toml") as problem:
        assert problem.columns["age"].upper() in ("BIGINT", "INTEGER")
        plan = plan_of(problem, POLICY)
        compiled = problem.compile(plan, dialect="postgres", table="patients", pretty=False)
        source = exp.Table(this=exp.to_identifier("patients", quoted=True))
        written = to_sql(problem.query(plan, source, persistent=True), "postgres")
    assert compiled == written
    assert 'CAST("age" AS TEXT)' not in compiled and "CAST(age AS TEXT)" not in compiled


def test_spark_broadcasts_a_label_table_and_no_other_engine_is_hinted() -> None:
    """A QI's value → label table (two ``VALUES`` lists joined) is broadcast on Spark, which would
    otherwise shuffle every source row to join it; other engines get the same SELECT without a hint."""
    zips = tuple(f"{37000 + i:05d}" for i in range(100))
    qi, domain = QISpec("zip", "zip", "zip", "zip", values=zips), ZipDomain(zips)
    kept = QIRecoding.from_groups(domain, np.arange(domain.size))  # more than IN_LIST ZIPs as themselves
    query = generalize(Recoding((kept,)), [qi], [domain], exp.to_table("cohort"), {"zip": "VARCHAR"})
    labelled = [j.this.alias for j in query.find_all(exp.Join) if j.this.alias.startswith("deid_labels_")]
    assert labelled
    spark = to_sql(query, "spark")
    assert spark.startswith(f"SELECT /*+ BROADCAST({labelled[0]}) */")
    for dialect in ("duckdb", "postgres"):
        assert "/*+" not in to_sql(query, dialect)
    assert "/*+" not in to_sql(exp.select("*").from_("t").join(exp.to_table("u"), on="t.a = u.a"), "spark")


# -- PostgreSQL's typed row hash -------------------------------------------------------------------

@pytest.fixture(scope="module", params=engine_params("postgres"))
def pg(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


def pg_table(pg: Engine, name: str, columns: str, rows: str) -> exp.Table:
    """A table of the test schema made by ``CREATE TABLE … AS VALUES``, as a sqlglot table."""
    table = f'"{pg.schema}"."{name}"'  # type: ignore[attr-defined]
    pg.backend.con.execute(f"DROP TABLE IF EXISTS {table}")  # type: ignore[attr-defined]
    pg.backend.con.execute(f"CREATE TABLE {table} ({columns})")  # type: ignore[attr-defined]
    pg.backend.con.execute(f"INSERT INTO {table} VALUES {rows}")  # type: ignore[attr-defined]
    return exp.table_(name, db=pg.schema, quoted=True)  # type: ignore[attr-defined]


def pg_hash(pg: Engine, table: exp.Table, columns: list[str], legacy: bool = False) -> str:
    backend = pg.backend  # type: ignore[attr-defined]
    return fingerprint(backend.execute, backend, table, columns, legacy)


def test_postgres_hashes_integers_as_numbers_and_any_other_type_as_its_text(pg: Engine) -> None:
    """Integers hash by value whatever their width; a type with no hash of its own (json) is hashed as
    its text; NULLs, positions and every value count."""
    cols = ["i", "t", "d", "n", "j"]
    narrow = pg_table(pg, "narrow", "i integer, t text, d date, n numeric, j json",
                      "(1, 'a', '2020-01-02', 1.5, '{\"k\": 1}'), (NULL, NULL, NULL, NULL, NULL)")
    wide = pg_table(pg, "wide", "i bigint, t varchar(8), d date, n numeric, j json",
                    "(1, 'a', '2020-01-02', 1.5, '{\"k\": 1}'), (NULL, NULL, NULL, NULL, NULL)")
    typed = pg_hash(pg, narrow, cols)
    assert typed.startswith("2:") and typed == pg_hash(pg, wide, cols)
    assert pg.backend.hash_types(narrow, cols) == ["INTEGER", "VARCHAR", "DATE", "DECIMAL", "OID 114"]  # type: ignore
    assert typed != pg_hash(pg, narrow, cols, legacy=True)  # the form that reads no types differs
    seen = {typed}
    for rows in ("(2, 'a', '2020-01-02', 1.5, '{\"k\": 1}'), (NULL, NULL, NULL, NULL, NULL)",  # one value
                 "(1, 'a', '2020-01-02', 1.5, '{\"k\": 2}'), (NULL, NULL, NULL, NULL, NULL)",  # json by its text
                 "(1, 'a', '2020-01-02', 1.5, '{\"k\": 1}'), (NULL, '', NULL, NULL, NULL)",  # '' is not NULL
                 "(1, 'a', '2020-01-02', 1.5, '{\"k\": 1}'), (NULL, NULL, NULL, NULL, '{}')",
                 "(1, 'a', '2020-01-02', 1.5, '{\"k\": 1}'), (NULL, NULL, NULL, 0, NULL)"):
        now = pg_hash(pg, pg_table(pg, "other", "i integer, t text, d date, n numeric, j json", rows), cols)
        assert now not in seen, rows
        seen.add(now)
    nulls = pg_table(pg, "nulls", "a integer, b integer, c integer", "(NULL, NULL, 1), (1, NULL, NULL)")
    moved = pg_table(pg, "moved", "a integer, b integer, c integer", "(1, NULL, NULL), (NULL, NULL, 1)")
    assert pg_hash(pg, nulls, ["a", "b", "c"]) == pg_hash(pg, moved, ["a", "b", "c"])  # row order does not count
    other = pg_table(pg, "other", "a integer, b integer, c integer", "(NULL, 1, NULL), (1, NULL, NULL)")
    assert pg_hash(pg, nulls, ["a", "b", "c"]) != pg_hash(pg, other, ["a", "b", "c"])  # where a NULL is does
    swapped = pg_table(pg, "swapped", "a text, b text", "('x', 'y')")
    assert pg_hash(pg, swapped, ["a", "b"]) != pg_hash(pg, swapped, ["b", "a"])


def test_a_postgres_record_with_the_hash_of_the_rows_text_still_verifies(pg: Engine, tmp_path: Path) -> None:
    """A record written before the typed hash holds the hash of the rows' text: the report accepts it
    while the table is unchanged, and refuses it once a value changed."""
    from deid_sql.release.records import ReleaseMismatch, verify_release

    table = pg_table(pg, "released", "id bigint, dx text", "(1, 'A01'), (2, 'B02')")
    name = f"{pg.schema}.released"  # type: ignore[attr-defined]
    legacy = pg_hash(pg, table, ["id", "dx"], legacy=True)
    record = {"release": {"kind": "table", "name": name, "format": "table", "database": "postgres",
                          "rows": 2, "columns": ["id", "dx"], "row_hash": legacy}}
    where = tmp_path / "released.release.json"
    verify_release(record, where, pg.backend)  # type: ignore[attr-defined]
    pg.backend.con.execute(f"UPDATE {table.sql('postgres')} SET dx = 'C03' WHERE id = 2")  # type: ignore
    with pytest.raises(ReleaseMismatch, match="changed after it was released"):
        verify_release(record, where, pg.backend)  # type: ignore[attr-defined]


def test_postgres_adds_the_grouped_values_hashes_once_per_group(pg: Engine) -> None:
    """The grouped query's sums (the keys' parts once per group, times its rows) are the table's row
    hash, and its groups are ``group_query``'s: a NULL flag counted with false, NULL keys, an integer key."""
    from deid_sql.compiler.compile import col
    from deid_sql.release.figures import FLAG, count_groups, group_query
    from deid_sql.release.written import grouped_hash_query

    backend = pg.backend  # type: ignore[attr-defined]
    rows = ", ".join(f"({i % 3 if i % 5 else 'NULL'}, {'NULL' if i % 7 == 0 else repr('ab'[i % 2])}, "
                     f"{'NULL' if i % 4 == 0 else ('true' if i % 3 == 0 else 'false')}, {i}, "
                     f"{'NULL' if i % 6 == 0 else repr(f'x{i % 4}')})" for i in range(60))
    table = pg_table(pg, "grouped", f"k integer, t text, {FLAG} boolean, id bigint, v text", rows)
    columns = ["k", "t", FLAG, "id", "v"]
    parts = backend.row_hash_parts([col(n) for n in columns], backend.hash_types(table, columns))
    query = grouped_hash_query(table, columns, parts, ["k", "t", FLAG], True)
    got = backend.execute(query)
    alone = pg_hash(pg, table, columns)
    assert f"{sum(got.column('m').to_pylist())}:{sum(int(h) for h in got.column('h').to_pylist())}" == alone
    groups = count_groups(backend.execute, table, ["k", "t"], True)
    assert sorted(zip(*[got.column(c).to_pylist() for c in ("q0", "q1", "f", "m")]), key=repr) == \
        sorted(zip(*[groups.column(c).to_pylist() for c in ("q0", "q1", "f", "m")]), key=repr)
    assert backend.execute(group_query(table, ["k", "t"], True)).num_rows == got.num_rows
