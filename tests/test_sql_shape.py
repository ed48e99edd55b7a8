"""No long literal list in generated SQL: a large category QI's labels come from a joined VALUES table.

A recoding that groups 12,000 category values in scattered groups (the shape of a hierarchy level
over an alphabetical domain) compiles to one ``LEFT JOIN (VALUES (value, label), …)`` per such QI:
no ``IN`` list longer than the guard's limit, on DuckDB and on PostgreSQL, with the labels a
record-by-record Python reference gives, values outside the domain shown as the outside label, and
one output row per source row.  (Its speed against a plain range query is in bench/compile.py.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlglot import exp

from deid_sql.compiler.guards import IN_LIST
from deid_sql.domains.recoding import QIRecoding, Recoding
from deid_sql.problem import Problem
from deid_sql.release.plan import plan_of
from tests.engines import Engine, engine_fixture, engine_params

SIZE = 12_000
GROUPS = 40


def _source() -> pa.Table:
    rng = np.random.default_rng(11)
    codes = [f"dx-{i:05d}" for i in rng.integers(0, SIZE, 3_000)] + ["not-a-code"]
    return pa.table({"code": codes, "id": np.arange(len(codes), dtype=np.int64)})


@pytest.fixture(scope="module", params=engine_params("duckdb", "postgres"))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


@pytest.fixture(scope="module")
def problem(engine: Engine) -> Iterator[Problem]:
    source = engine.load("codes", _source().slice(0, 3_000))  # the domain check refuses the outside value
    values = ", ".join(f'"dx-{i:05d}"' for i in range(SIZE))
    text = ('population = "sample"\n' + engine.header() + f'\n[source]\n{source}\n\n'
            f'[[qi]]\nname = "code"\nkind = "category"\nvalues = [{values}]\n\n[columns]\ndrop = ["id"]\n')
    spec = engine.folder / "codes.toml"
    spec.write_text(text, encoding="utf-8")
    with Problem.from_spec(spec) as loaded:
        yield loaded


def _scattered(problem: Problem) -> Recoding:
    domain = problem.domains[0]
    group_of = np.arange(domain.size) % GROUPS  # every group's values are spread over the whole domain
    return Recoding((QIRecoding.from_groups(domain, group_of, [f"chapter {g}" for g in range(GROUPS)]),),
                    name="scattered")


def _longest_in(query: exp.Expression) -> int:
    return max((len(node.expressions) for node in query.find_all(exp.In)), default=0)


def test_scattered_groups_are_a_joined_values_table_with_the_reference_labels(problem: Problem) -> None:
    recoding = _scattered(problem)
    query = problem.query(plan_of(problem, recoding))
    assert _longest_in(query) <= IN_LIST
    # value -> group and group -> label: two VALUES tables joined once, then joined to the source
    assert len(list(query.find_all(exp.Values))) == 2 and len(list(query.find_all(exp.Join))) == 2
    released = problem.backend.execute(query).column("code").to_pylist()
    codes = _source().slice(0, 3_000).column("code").to_pylist()
    assert len(released) == len(codes)
    expected = sorted(f"chapter {int(c[3:]) % GROUPS}" for c in codes)
    assert sorted(released) == expected


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["top", "random"])
def test_lattice_policies_over_a_large_category_list_no_long_literal_list(problem: Problem, policy: str) -> None:
    text = (problem.lattice.random_policy(np.random.default_rng(4), 0.5).text() if policy == "random" else policy)
    query = problem.query(plan_of(problem, text))
    assert _longest_in(query) <= IN_LIST
    # each label is written once: the query grows with the domain, not with group size x label length
    assert len(problem.backend.render(query)) < 40 * SIZE
    released = problem.backend.execute(query).num_rows
    assert released == 3_000


@pytest.mark.slow
def test_a_value_outside_the_domain_shows_the_outside_label(problem: Problem, engine: Engine) -> None:
    """The join is the guard: a value no row of the table holds is '*', never itself."""
    if engine.name != "duckdb":
        pytest.skip("the DuckDB file source is swapped in place; the engines' tables are checked above")
    recoding = _scattered(problem)
    path = Path(str(problem.spec.source.path))
    pq.write_table(_source(), path)  # the file under the view changed: one code outside the domain
    released = problem.backend.execute(problem.query(plan_of(problem, recoding))).column("code").to_pylist()
    assert released.count("*") == 1 and "not-a-code" not in released
