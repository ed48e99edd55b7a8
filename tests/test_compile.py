"""Compile -> execute gives each record its group's label; every dialect renders."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import numpy as np
import pyarrow.parquet as pq
import pytest
import sqlglot

from deid_sql import Problem, QIRecoding, Recoding
from deid_sql.compiler.compile import to_sql
from deid_sql.domains.domain import DateDomain
from deid_sql.errors import DialectError
from deid_sql.release.plan import plan_of

from .problems import write_small_problem

DIALECTS = ["duckdb", "postgres", "spark", "snowflake", "bigquery", "trino"]


@pytest.fixture(scope="module")
def problem(tmp_path_factory) -> Iterator[Problem]:
    spec = write_small_problem(tmp_path_factory.mktemp("compile"), seed=9)
    with Problem.from_spec(spec) as p:
        yield p


def _expected_labels(problem: Problem, rec: Recoding) -> list[tuple[str, ...]]:
    source = pq.read_table(problem.spec.source.path).to_pylist()
    out = []
    for row in source:
        labels = []
        for q, d, r in zip(problem.spec.qis, problem.domains, rec.qis):
            pos = d.position(row[q.column])
            labels.append(r.labels[r.group_of[pos]])
        out.append(tuple(labels))
    return out


def _run(problem: Problem, rec) -> list[tuple[str, ...]]:
    rows = problem.backend.execute(problem.query(plan_of(problem, rec))).to_pylist()
    return [tuple(r[q.column] for q in problem.spec.qis) for r in rows]


def test_compiled_policies_label_every_record(problem):
    rng = np.random.default_rng(1)
    for density in (0.0, 0.1, 0.5, 0.9, 1.0):
        policy = problem.lattice.random_policy(rng, density)
        assert sorted(_run(problem, policy)) == sorted(_expected_labels(problem, policy.recoding()))


def test_compiled_recodings_with_scattered_groups(problem):
    rng = np.random.default_rng(2)
    rec = Recoding(tuple(QIRecoding.from_groups(d, rng.integers(0, max(1, d.size // 2), d.size))
                         for d in problem.domains))
    assert not rec.contiguous or all(q.n_groups == 1 for q in rec.qis)
    assert sorted(_run(problem, rec)) == sorted(_expected_labels(problem, rec))


def test_passthrough_columns_are_unchanged(problem):
    rows = problem.backend.execute(problem.query(plan_of(problem, "top"))).to_pylist()
    source = pq.read_table(problem.spec.source.path).to_pylist()
    assert [r["dx"] for r in rows] == [r["dx"] for r in source]  # sensitive: released unchanged
    assert list(rows[0]) == [c for c in source[0] if c != "id"]  # id dropped by [columns]; order kept


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_dialect_renders_and_parses_back(problem, dialect):
    plan = plan_of(problem, "age:cuts=10,20|race:cuts=Black|zip:cuts=37301", suppression=3)
    sql = problem.compile(plan, dialect=dialect, table="patients")
    tree = sqlglot.parse_one(sql, read=dialect)
    assert tree.sql(dialect=dialect) == sqlglot.parse_one(tree.sql(dialect=dialect), read=dialect).sql(dialect=dialect)
    assert "'10-19'" in sql and "'Black|Asian|Other'" in sql


def test_unknown_dialect_is_a_clear_error(problem):
    with pytest.raises(DialectError, match="unknown SQL dialect 'nosuchsql'"):
        problem.compile(plan_of(problem, "top"), dialect="nosuchsql")


def test_date_domain_labels():
    d = DateDomain(dt.date(2019, 1, 1), dt.date(2021, 12, 31))
    assert d.interval_label(0, 364) == "2019"
    assert d.interval_label(0, 30) == "2019-01"
    assert d.interval_label(0, 9) == "2019-01-01..2019-01-10"
    assert d.interval_label(0, 1095) == "2019-2021"


def test_generalized_query_is_one_expression_tree(problem):
    sql = to_sql(problem.query(plan_of(problem, "age:cuts=10")), "duckdb")
    assert sql.count("SELECT") == 1 and "BETWEEN 0 AND 9" in sql
