"""The fast path equals the SQL path equals a tiny pure-Python reference, and
risk and loss are monotone along the lattice (seed 000 Defs 3.7–3.8)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deid_sql import Problem, QIRecoding, Recoding
from deid_sql.evaluate import Evaluator
from deid_sql.evaluate.fast import FastEvaluator

from .problems import RACES, ZIPS, write_small_problem
from .reference import SEXES, reference_metrics, small_problem_cells

FIELDS = ["risk_sum", "expected_reidentifications", "max_record_risk", "k", "sample_unique_records", "groups",
          "kl", "iyengar_loss", "discernibility", "corrected_groups"]


@pytest.fixture(scope="module", params=[("census", 1.0), ("census", 0.5), ("sample", 1.0)],
                ids=["census", "census-gamma0.5", "sample"])
def problem(request, tmp_path_factory) -> Iterator[Problem]:
    kind, gamma = request.param
    spec = write_small_problem(tmp_path_factory.mktemp(kind), seed=3, population=kind == "census", gamma=gamma)
    with Problem.from_spec(spec) as p:
        _FOLDERS[id(p)] = spec.parent
        yield p


_FOLDERS: dict[int, Path] = {}  # each problem's folder, so the reference reads the files it was built from


def _reference(problem: Problem, rec: Recoding) -> dict[str, float]:
    """The naive metrics of ``rec`` over the raw rows of the problem's source and population files."""
    folder = _FOLDERS[id(problem)]
    # the recoding's group_of is indexed by domain position: the domains must be the spec's value lists
    assert [list(d.values) for d in problem.domains[1:]] == [SEXES, RACES, ZIPS] and problem.domains[0].lo == 0
    records = small_problem_cells(pq.read_table(folder / "source.parquet"))
    pop = None
    if (folder / "population.parquet").exists():
        population = pq.read_table(folder / "population.parquet")
        pop = list(zip(small_problem_cells(population), population["people"].to_pylist()))
    return reference_metrics(records, pop, [q.group_of.tolist() for q in rec.qis],
                             [d.size for d in problem.domains], problem.spec.gamma)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _random_recoding(problem: Problem, rng: np.random.Generator) -> Recoding:
    """Arbitrary value -> group maps, mostly non-contiguous (like Safe Harbor's 000 bucket)."""
    qis = []
    for d in problem.domains:
        k = int(rng.integers(1, d.size + 1))
        qis.append(QIRecoding.from_groups(d, rng.integers(0, k, d.size)))
    return Recoding(tuple(qis), "random")


settings.register_profile("evaluate", max_examples=25, deadline=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.slow
@settings(settings.get_profile("evaluate"))
@given(seed=st.integers(0, 2**32 - 1), density=st.floats(0.0, 1.0))
def test_fast_equals_sql_equals_reference_on_policies(problem, seed, density):
    policy = problem.lattice.random_policy(np.random.default_rng(seed), density)
    fast, sql = problem.evaluate(policy), problem.evaluate(policy, path="sql")
    ref = _reference(problem, policy.recoding())
    for name in FIELDS:
        assert _close(getattr(fast, name), getattr(sql, name)), name
        assert _close(getattr(fast, name), ref[name]), name
    assert _close(fast.risk, sql.risk) and _close(fast.loss, sql.loss)


@pytest.mark.slow
@settings(settings.get_profile("evaluate"))
@given(seed=st.integers(0, 2**32 - 1))
def test_fast_equals_sql_equals_reference_on_recodings(problem, seed):
    rec = _random_recoding(problem, np.random.default_rng(seed))
    fast, sql = problem.evaluate(rec), problem.evaluate(rec, path="sql")
    ref = _reference(problem, rec)
    for name in FIELDS:
        assert _close(getattr(fast, name), getattr(sql, name)), name
        assert _close(getattr(fast, name), ref[name]), name


def test_prefix_cube_equals_population_scan(problem):
    if problem.population is None:
        pytest.skip("no census")
    sizes = [d.size for d in problem.domains]
    cube = FastEvaluator(problem.sample, problem.population, sizes, problem.spec.gamma)
    scan = FastEvaluator(problem.sample, problem.population, sizes, problem.spec.gamma, cube_limit=0)
    assert cube.cube is not None and scan.cube is None
    rng = np.random.default_rng(11)
    for _ in range(30):
        rec = problem.lattice.random_policy(rng, rng.random()).recoding()
        by_cube, by_scan = vars(cube.raw(rec)), vars(scan.raw(rec))
        assert by_cube.keys() == by_scan.keys()
        for name, value in by_cube.items():
            assert _close(value, by_scan[name]), name


def test_normalization_bounds(problem):
    bottom, top = problem.evaluate("bottom"), problem.evaluate("top")
    assert _close(bottom.risk, 1.0) and abs(bottom.kl) < 1e-12 and abs(bottom.loss) < 1e-12
    assert bottom.iyengar_loss == 0
    assert _close(top.loss, 1.0) and _close(top.iyengar_loss, 1.0) and top.groups == 1
    assert top.k == problem.sample.total == top.records


@settings(settings.get_profile("evaluate"))
@given(seed=st.integers(0, 2**32 - 1), density=st.floats(0.0, 1.0))
def test_risk_and_loss_are_monotone_along_the_lattice(problem, seed, density):
    rng = np.random.default_rng(seed)
    lat = problem.lattice
    a = lat.random_policy(rng, density)
    chain = list(lat.random_chain(lat.meet(a, lat.random_policy(rng, density)), lat.bottom(), rng).policies())
    picks = sorted(rng.choice(len(chain), size=min(6, len(chain)), replace=False))
    metrics = [problem.evaluate(chain[i]) for i in picks]
    for general, specific in zip(metrics, metrics[1:]):  # general ≺ specific
        assert general.risk <= specific.risk * (1 + 1e-12)
        assert general.loss >= specific.loss - 1e-12
        assert general.iyengar_loss >= specific.iyengar_loss - 1e-12
        assert general.k >= specific.k


def test_census_correction_is_counted(tmp_path):
    spec = write_small_problem(tmp_path, seed=5, rows=2000)
    with Problem.from_spec(spec) as p:
        m = p.evaluate("bottom")
        assert m.corrected_groups > 0  # the census (Poisson 3 per cell) is thinner than the sample


def test_evaluator_counts_distinct_policies_and_caches(problem):
    ev = Evaluator(problem.fast.path, problem.sample, problem.lattice.bottom().recoding(),
                   problem.lattice.top().recoding())
    p = problem.lattice.parse("age:top")
    first = ev.evaluate(p)
    assert ev.evaluate(p) is first and ev.evaluations == 1
    ev.evaluate_many([problem.lattice.parse("sex:top"), p])
    assert ev.evaluations == 2
