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
