"""Dialects without an engine here (snowflake, bigquery, trino): every SQL text deid-sql renders
parses back with sqlglot in that dialect to the same tree; a dialect that cannot express a query
is refused in one line naming it."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from deid_sql.channels.job import solve
from deid_sql.fixtures.channels import write_table1
from deid_sql.problem import Problem
from deid_sql.release.plan import plan_of

NO_ENGINE = ("snowflake", "bigquery", "trino")
POLICIES = ("age:cuts=18,65|race:top|zip:cuts=37301", "bottom", "top")


def same_tree(text: str, dialect: str) -> exp.Expression:
    """Parse, render again, parse again: text and tree must not change."""
    tree = sqlglot.parse_one(text, read=dialect)
    again = tree.sql(dialect=dialect, unsupported_level=sqlglot.ErrorLevel.RAISE)
    assert sqlglot.parse_one(again, read=dialect) == tree
    assert sqlglot.parse_one(again, read=dialect).sql(dialect=dialect) == again
    return tree


@pytest.mark.parametrize("dialect", NO_ENGINE)
@pytest.mark.parametrize("suppress", [None, 5])
def test_policy_sql_parses_back(project, dialect: str, suppress: int | None) -> None:
    with Problem.from_spec(project.spec_path) as problem:
        for policy in POLICIES:
            plan = plan_of(problem, policy, suppression=suppress)
            tree = same_tree(problem.compile(plan, dialect=dialect, table="warehouse.patients"), dialect)
            assert isinstance(tree, exp.Select)
            assert [t.name for t in tree.find_all(exp.Table)] == ["patients"]


@pytest.mark.parametrize("dialect", NO_ENGINE)
def test_channel_release_sql_parses_back(tmp_path: Path, dialect: str) -> None:
    with solve(write_table1(tmp_path)) as job:
        tree = same_tree(job.compile(dialect, "clinic.patients"), dialect)
        assert isinstance(tree, exp.Select)
        assert [e.alias_or_name for e in tree.expressions] == ["name", "postal_code", "gender", "output_channel"]
        assert any(isinstance(w, exp.Window) for w in tree.find_all(exp.Window))
        labels = {lit.this for lit in tree.find_all(exp.Literal) if lit.is_string}
        assert set(job.release.labels) <= labels


def test_a_dialect_that_cannot_express_the_release_is_named(run, tmp_path: Path) -> None:
    spec = write_table1(tmp_path / "t1")
    result = run("channels", spec, "--sql", "sqlite", expect=2)
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: dialect 'sqlite' cannot express this query: ")
    assert "Named columns are not supported in table alias" in lines[0]


def test_an_unknown_dialect_is_refused(project, run) -> None:
    result = run("compile", project.spec_path, "-p", "top", "--dialect", "klingon", expect=2)
    assert result.stderr.startswith("error: unknown SQL dialect 'klingon'") and len(result.stderr.splitlines()) == 1
