"""One backend suite, parametrized over engines: the same spec and data on DuckDB, PostgreSQL
and Spark give the same cells, the same metrics (to 1e-9), the same released rows and the
same channel release; engine errors are one clear line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deid_sql.channels.job import solve
from deid_sql.channels.write import write_release
from deid_sql.errors import DeidError
from deid_sql.fixtures.channels import TABLE1
from deid_sql.problem import Problem
from deid_sql.release.output import create_view, materialize
from deid_sql.release.plan import plan_of
from tests.conftest import DEFAULT_COLUMNS, DEFAULT_QIS, PERMISSIVE_RELEASE, _population_table, _source_table
from tests.engines import ENGINES, Engine, default_spec, engine_fixture, engine_params

POLICIES = ("bottom", "top", "age:cuts=18,65|zip:top", "age:cuts=10,20,30,40,50,60,70,80,90|race:top",
            "sex:top|zip:cuts=37301")


@pytest.fixture(scope="module", params=engine_params(*ENGINES))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


@pytest.fixture(scope="module")
def spec_on(engine: Engine) -> Path:
    return default_spec(engine)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Problem]:
    """The same problem on DuckDB from Parquet files: what every engine must reproduce."""
    folder = tmp_path_factory.mktemp("reference")
    pq.write_table(_source_table(), folder / "patients.parquet")
    pq.write_table(_population_table(), folder / "census.parquet")
    spec = folder / "spec.toml"
    spec.write_text('[source]\npath = "patients.parquet"\n\n[population]\npath = "census.parquet"\ncount = "count"\n'
                    + "".join(DEFAULT_QIS) + DEFAULT_COLUMNS + f"\n[release]\n{PERMISSIVE_RELEASE}\n", encoding="utf-8")
    with Problem.from_spec(spec) as problem:
        yield problem


def _sorted_rows(table: pa.Table) -> list[tuple[object, ...]]:
    cols = sorted(table.column_names)
    return sorted(zip(*(table.column(c).to_pylist() for c in cols)), key=repr)


@pytest.mark.slow
def test_cells_are_the_same(spec_on: Path, reference: Problem) -> None:
    with Problem.from_spec(spec_on) as problem:
        assert problem.sample.total == reference.sample.total
        for mine, theirs in ((problem.sample, reference.sample), (problem.population, reference.population)):
            assert mine is not None and theirs is not None
            np.testing.assert_array_equal(mine.positions, theirs.positions)
            np.testing.assert_array_equal(mine.counts, theirs.counts)


@pytest.mark.slow
@pytest.mark.parametrize("path", ["fast", "sql"])
def test_metrics_agree_to_1e9(spec_on: Path, reference: Problem, path: str) -> None:
    rng = np.random.default_rng(3)
    with Problem.from_spec(spec_on) as problem:
        policies = list(POLICIES) + [problem.lattice.random_policy(rng, d).text() for d in (0.2, 0.5, 0.8, 0.95)]
        for policy in policies:
            mine = problem.evaluate(policy, path)
            theirs = reference.evaluate(policy)
            for key, value in theirs.to_dict().items():
                if isinstance(value, float):
                    assert mine.to_dict()[key] == pytest.approx(value, rel=1e-9, abs=1e-12), (policy, key)
                else:
                    assert mine.to_dict()[key] == value, (policy, key)


def test_materialized_rows_are_the_same(spec_on: Path, reference: Problem, engine: Engine, tmp_path: Path) -> None:
    policy = "age:cuts=18,65|zip:cuts=37301"
    expected_path = tmp_path / "expected.parquet"
    materialize(reference, plan_of(reference, policy), expected_path)
    expected = pq.read_table(expected_path)
    with Problem.from_spec(spec_on) as problem:
        if engine.name == "duckdb":
            out = tmp_path / "release.parquet"
            materialize(problem, plan_of(problem, policy), out)
            got = pq.read_table(out)
        else:  # inside the engine, where the data is
            name = engine.qualified("released")
            written = materialize(problem, plan_of(problem, policy), None, table=name)
            assert written.rows == 500 and written.path is None
            got = engine.read(name)
            with pytest.raises(DeidError, match="already has a table"):
                materialize(problem, plan_of(problem, policy), None, table=name)
            materialize(problem, plan_of(problem, "top"), None, table=name, overwrite=True)
            assert set(engine.read(name).column("age").to_pylist()) == {"0-120"}
            # a file output streams from the engine
            materialize(problem, plan_of(problem, policy), tmp_path / "streamed.parquet")
            assert _sorted_rows(pq.read_table(tmp_path / "streamed.parquet")) == _sorted_rows(expected)
    assert _sorted_rows(got) == _sorted_rows(expected)


def test_view_in_the_engine(spec_on: Path, reference: Problem, engine: Engine, tmp_path: Path) -> None:
    if engine.name == "duckdb":
        pytest.skip("DuckDB views live in a database file (tests/test_cli.py)")
    policy = "race:top|zip:top"
    expected_path = tmp_path / "expected.parquet"
    materialize(reference, plan_of(reference, policy), expected_path)
    with Problem.from_spec(spec_on) as problem:
        name = engine.qualified("patients_deid")
        create_view(problem, plan_of(problem, policy), None, name)
        assert _sorted_rows(engine.read(name)) == _sorted_rows(pq.read_table(expected_path))
        with pytest.raises(DeidError, match="already has"):
            create_view(problem, plan_of(problem, policy), None, name)
        create_view(problem, plan_of(problem, "bottom"), None, name, replace=True, accept_risk="test: replacing a view")
        with pytest.raises(DeidError, match="the engine is|leave out --db"):
            create_view(problem, plan_of(problem, policy), tmp_path / "x.duckdb", name)


@pytest.mark.slow
def test_channel_release_is_the_same(engine: Engine, tmp_path: Path) -> None:
    """Table 1 released on each engine: same program, same rows (md5 order is engine-independent)."""
    names = ["name", "postal_code", "gender", "crp", "cholesterol", "bp", "glucose", "diagnosis"]
    data = pa.table({n: [row[i] for row in TABLE1] for i, n in enumerate(names)})
    body = engine.load("table1", data)
    spec_text = (engine.header() + f"\n[source]\n{body}\n\n[channels]\n"
                 'related = ["crp", "cholesterol", "bp", "glucose"]\nconfidential = "diagnosis"\nnone = "none"\n'
                 'identity = ["name", "postal_code", "gender"]\nb = 0.6\ncandidates = "all"\n'
                 '[channels.thresholds]\n"Diabetes" = 0.25\n"Heart" = 0.25\n"Diabetes, Heart" = 0.30\n'
                 '"Diabetes, Heart, MRSA" = 0.18\n')
    spec = tmp_path / "channels.toml"
    spec.write_text(spec_text, encoding="utf-8")
    out = tmp_path / "release.parquet"
    with solve(spec) as job:
        assert job.whole.objective == pytest.approx(65)
        write_release(job, out=out)
        rows = _sorted_rows(pq.read_table(out))
        if engine.name != "duckdb":
            name = engine.qualified("table1_released")
            write_release(job, table=name, view=engine.qualified("table1_view"))
            assert _sorted_rows(engine.read(name)) == rows
            assert _sorted_rows(engine.read(engine.qualified("table1_view"))) == rows
            assert engine.read(engine.qualified("table1_released_channels")).num_rows == 6
            with pytest.raises(DeidError, match="the database already has a table or view named"):
                write_release(job, table=name)
    reference = tmp_path / "reference.csv"
    pa.csv.write_csv(data, reference)
    (tmp_path / "ref.toml").write_text(spec_text.replace(engine.header(), "").replace(body, f'path = "{reference}"'),
                                       encoding="utf-8")
    with solve(tmp_path / "ref.toml") as job:
        write_release(job, out=tmp_path / "ref.parquet")
    assert rows == _sorted_rows(pq.read_table(tmp_path / "ref.parquet"))


@pytest.mark.slow
def test_suppressed_groups_are_the_same_rows_on_every_engine(spec_on: Path, reference: Problem,
                                                            tmp_path: Path) -> None:
    """Suppressed label tuples (an anonymization's) compile to a joined VALUES table in every dialect and
    blank exactly the rows the group-size rule blanks when they are the groups of fewer than 5 records."""
    from deid_sql.compiler.suppression import Suppression

    policy = "age:cuts=18,65|zip:cuts=37301"
    plain = reference.backend.execute(reference.query(plan_of(reference, policy))).to_pylist()
    counts: dict[tuple[object, ...], int] = {}
    for row in plain:
        key = (row["age"], row["sex"], row["race"], row["zip"])
        counts[key] = counts.get(key, 0) + 1
    small = [tuple(str(v) for v in g) for g, m in counts.items() if m < 5]
    assert small
    expected_path = tmp_path / "expected.parquet"
    materialize(reference, plan_of(reference, policy, suppression=5), expected_path)
    with Problem.from_spec(spec_on) as problem:
        out = tmp_path / "groups.parquet"
        rule = Suppression.of_groups(small, "groups of < 5")
        written = materialize(problem, plan_of(problem, policy, suppression=rule), out)
        assert written.figures is not None and written.figures.suppressed == sum(counts[g] for g in counts
                                                                                if g in set(small))
    assert _sorted_rows(pq.read_table(out)) == _sorted_rows(pq.read_table(expected_path))
