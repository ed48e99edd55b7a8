"""Bisecting and Directed Policy Search (seed 001 §2.4): boundary policies (Def. 2.3),
dominance (Def. 2.1), seeds, evaluation counts, thresholds and Ctrl-C; and the halfway
point BPS bisects with (``Lattice.halfway(..., generalize=True)``)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deid_sql import DeidError, Lattice, Problem
from deid_sql.domains.domain import CategoryDomain, IntegerDomain, ZipDomain
from deid_sql.evaluate import Evaluator
from deid_sql.search import BoundarySearch, bisecting_policy_search, directed_policy_search

from .problems import write_small_problem

METHODS = {"bps": bisecting_policy_search, "directed": directed_policy_search}


def _tiny_spec(folder: Path) -> Path:
    """age 0..5, sex, race (5 + 1 + 3 = 9 bits, 512 policies): the small problem without its ZIP QI."""
    spec = write_small_problem(folder, seed=4, rows=150, max_age=5)
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text[: text.index('[[qi]]\nname = "zip"')], encoding="utf-8")
    return spec


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Iterator[tuple[Problem, dict[bytes, float], float]]:
    """The tiny problem, the risk of every policy of its lattice, and T = the median risk."""
    with Problem.from_spec(_tiny_spec(tmp_path_factory.mktemp("tiny"))) as p:
        assert p.lattice.nbits == 9
        risks = {}
        for bits in itertools.product((0, 1), repeat=p.lattice.nbits):
            pol = p.lattice.policy(bits)
            risks[pol.bits] = p.evaluate(pol.recoding()).risk  # a recoding: no cache involved
        threshold = float(np.median(list(risks.values())))
        top, bottom = risks[p.lattice.top().bits], risks[p.lattice.bottom().bits]
        assert top < threshold < bottom
        yield p, risks, threshold


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Iterator[Problem]:
    """age 0..30, sex, race, zip: 30 + 1 + 3 + 5 = 39 bits."""
    with Problem.from_spec(write_small_problem(tmp_path_factory.mktemp("small"), seed=2)) as p:
        yield p


def _quantile_threshold(problem: Problem, density: float, seed: int = 0) -> float:
    """Median risk of random policies keeping each boundary with probability ``density``."""
    rng = np.random.default_rng(seed)
    return float(np.median([problem.evaluate(problem.lattice.random_policy(rng, density).recoding()).risk
                            for _ in range(40)]))


def _exact_boundary(lattice: Lattice, risks: dict[bytes, float], threshold: float) -> set[bytes]:
    out = set()
    for bits, risk in risks.items():
        if risk <= threshold and any(risks[c.bits] > threshold for c in lattice.children(lattice.policy(bits))):
            out.add(bits)
    return out


# -- boundary property -----------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_result_is_a_boundary_policy(small, method, seed) -> None:
    threshold = _quantile_threshold(small, 0.3)
    result = METHODS[method](small.lattice, small.fast, threshold, 15, seed=seed)
    assert result.method == method and result.threshold == threshold and result.seed == seed
    assert result.iterations == 15 and not result.interrupted and result.found
    lattice = small.lattice
    for b in result.found:
        risk = small.evaluate(b.policy.recoding()).risk  # fresh: a recoding is never cached
        assert risk <= threshold
        assert risk == pytest.approx(b.metrics.risk, rel=1e-12)
        assert lattice.is_cover(b.policy, b.witness)  # the witness is a child of the policy
        assert small.evaluate(b.witness.recoding()).risk > threshold
        assert 1 <= b.found_at <= result.iterations
    assert len({b.policy.bits for b in result.found}) == len(result.found)


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_results_lie_in_the_exact_boundary_set(tiny, method) -> None:
    problem, risks, threshold = tiny
    exact = _exact_boundary(problem.lattice, risks, threshold)
    assert exact
    seen: set[bytes] = set()
    for seed in range(4):
        result = METHODS[method](problem.lattice, problem.fast, threshold, 40, seed=seed)
        for b in result.found:
            assert b.policy.bits in exact, b.policy.text()
            assert risks[b.witness.bits] > threshold and problem.lattice.is_cover(b.policy, b.witness)
            seen.add(b.policy.bits)
    assert len(seen) > 1  # the searches explore, they do not repeat one answer


# -- seeds ----------------------------------------------------------------------------------------


def _summary(result: BoundarySearch) -> tuple:
    return ([b.policy.text() for b in result.found], [b.witness.text() for b in result.found],
            [b.found_at for b in result.found], result.iterations, result.evaluations)


@pytest.mark.parametrize("method", METHODS)
def test_same_seed_same_result(small, method) -> None:
    threshold = _quantile_threshold(small, 0.3)
    run = METHODS[method]
    a = run(small.lattice, small.fast, threshold, 12, seed=7)
    b = run(small.lattice, small.fast, threshold, 12, seed=7)
    assert _summary(a) == _summary(b)
    others = [_summary(run(small.lattice, small.fast, threshold, 12, seed=s))[0] for s in (8, 9)]
    assert any(o != _summary(a)[0] for o in others)


# -- evaluation counts ----------------------------------------------------------------------------


class _Recorder:
    """Patches ``Evaluator.fork`` so the search's evaluator records every request and
    every computation (``path.raw``) it makes."""

    def __init__(self, monkeypatch) -> None:
        self.requested: list[bytes] = []
        self.computed = 0
        recorder, original_fork = self, Evaluator.fork

        def fork(evaluator: Evaluator) -> Evaluator:
            twin = original_fork(evaluator)
            evaluate, raw = twin.evaluate, twin.path.raw

            def recording_evaluate(item):
                recorder.requested.append(item.bits)
                return evaluate(item)

            def counting_raw(rec):
                recorder.computed += 1
                return raw(rec)

            twin.evaluate = recording_evaluate  # type: ignore[method-assign]
            twin.path = type("Counting", (), {"raw": staticmethod(counting_raw)})()
            return twin

        monkeypatch.setattr(Evaluator, "fork", fork)


@pytest.mark.parametrize("method", METHODS)
def test_evaluations_count_distinct_policies(small, method, monkeypatch) -> None:
    recorder = _Recorder(monkeypatch)
    threshold = _quantile_threshold(small, 0.2)
    result = METHODS[method](small.lattice, small.fast, threshold, 30, seed=3)
    distinct = len(set(recorder.requested))
    assert len(recorder.requested) > distinct  # some policies were asked for again (the cache served them)
    assert result.evaluations == distinct == recorder.computed


@pytest.mark.slow
@pytest.mark.parametrize("density", [0.2, 0.8])
def test_bps_needs_fewer_evaluations_per_boundary(small, density) -> None:
    threshold = _quantile_threshold(small, density)
    bps = bisecting_policy_search(small.lattice, small.fast, threshold, 100, seed=0)
    directed = directed_policy_search(small.lattice, small.fast, threshold, 100, seed=0)
    assert bps.iterations == directed.iterations == 100
    assert directed.evaluations_per_boundary / bps.evaluations_per_boundary > 1.5
    assert directed.evaluations / len(directed.found) > bps.evaluations / len(bps.found)


@pytest.mark.parametrize("method", METHODS)
def test_progress_is_called_once_per_iteration(tiny, method) -> None:
    problem, _, threshold = tiny
    calls: list[int] = []

    def progress(step: int) -> None:
        calls.append(step)
        time.sleep(0.01)  # inside the timed loop: seconds must include it

    start = time.perf_counter()
    result = METHODS[method](problem.lattice, problem.fast, threshold, 7, seed=1, progress=progress)
    elapsed = time.perf_counter() - start
    assert calls == [1] * 7 and result.iterations == 7
    assert 0.07 <= result.seconds <= elapsed
    assert result.seconds_per_boundary == pytest.approx(result.seconds / 7)


# -- dominance ----------------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_dominated_flags_exactly_policies_with_a_more_specific_result(tiny, method) -> None:
    problem, _, threshold = tiny
    result = METHODS[method](problem.lattice, problem.fast, threshold, 60, seed=5)
    arrays = [np.frombuffer(b.policy.bits, dtype=np.uint8) for b in result.found]
    expected = [any(np.all(a <= o) and np.any(a < o) for o in arrays) for a in arrays]
    assert result.dominated() == expected
    assert result.non_dominated == expected.count(False) >= 1
    assert BoundarySearch("bps", 0.5, 0).dominated() == []


# -- thresholds ----------------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("threshold", [0.0, -0.1, 1.5, float("nan")])
def test_threshold_outside_unit_interval(tiny, method, threshold) -> None:
    problem = tiny[0]
    with pytest.raises(DeidError, match=r"\(0, 1\]"):
        METHODS[method](problem.lattice, problem.fast, threshold, 3)


@pytest.mark.parametrize("method", METHODS)
def test_threshold_below_the_top(tiny, method) -> None:
    problem, risks, _ = tiny
    top = risks[problem.lattice.top().bits]
    with pytest.raises(DeidError, match="no policy can meet it"):
        METHODS[method](problem.lattice, problem.fast, top / 2, 3)


@pytest.mark.parametrize("method", METHODS)
def test_threshold_met_by_the_original_data(tiny, method) -> None:
    problem = tiny[0]
    assert problem.evaluate(problem.lattice.bottom()).risk == pytest.approx(1.0)
    with pytest.raises(DeidError, match="original data already meets"):
        METHODS[method](problem.lattice, problem.fast, 1.0, 3)


def test_threshold_at_the_top_risk_is_accepted(tiny) -> None:
    problem, risks, _ = tiny
    top = risks[problem.lattice.top().bits]
    result = bisecting_policy_search(problem.lattice, problem.fast, top, 3)
    assert all(problem.evaluate(b.policy.recoding()).risk <= top for b in result.found)


# -- Ctrl-C --------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_keyboard_interrupt_returns_what_was_found(small, method, monkeypatch) -> None:
    threshold = _quantile_threshold(small, 0.3)
    run = METHODS[method]
    full = run(small.lattice, small.fast, threshold, 20, seed=11)
    stop_after = full.evaluations // 2
    original_fork = Evaluator.fork

    def fork(evaluator: Evaluator) -> Evaluator:
        twin = original_fork(evaluator)
        evaluate = twin.evaluate

        def interrupting(item):
            if twin.evaluations >= stop_after and item.bits not in twin._cache:
                raise KeyboardInterrupt
            return evaluate(item)

        twin.evaluate = interrupting  # type: ignore[method-assign]
        return twin

    monkeypatch.setattr(Evaluator, "fork", fork)
    cut = run(small.lattice, small.fast, threshold, 20, seed=11)
    assert cut.interrupted and not full.interrupted
    assert cut.evaluations == stop_after
    assert 0 < cut.iterations < full.iterations
    assert [b.policy for b in cut.found] == [b.policy for b in full.found][: len(cut.found)]
    assert len(cut.found) >= 1 and cut.found[-1].found_at <= cut.iterations
    for b in cut.found:
        assert small.evaluate(b.policy.recoding()).risk <= threshold


# -- halfway with generalize=True ------------------------------------------------------------------

LATTICE = Lattice(
    ["age", "sex", "race", "zip"],
    [IntegerDomain(0, 9), CategoryDomain(("Female", "Male")), CategoryDomain(("White", "Black", "Asian", "Other")),
     ZipDomain(("37201", "37203", "37215", "37301", "37302"))],
)
bits = st.lists(st.integers(0, 1), min_size=LATTICE.nbits, max_size=LATTICE.nbits).map(LATTICE.policy)


@given(bits, bits, st.integers(0, 2**32 - 1), st.booleans())
def test_halfway_generalize_lies_halfway(a, b, seed, weighted) -> None:
    upper, lower = LATTICE.meet(a, b), LATTICE.join(a, b)
    rng = np.random.default_rng(seed)
    weights = rng.random(LATTICE.nbits) + 0.1 if weighted else None
    h = LATTICE.halfway(upper, lower, rng, weights, generalize=True)
    d = LATTICE.levels_between(upper, lower)
    assert LATTICE.in_sublattice(h, upper, lower)
    assert LATTICE.levels_between(upper, h) == d - d // 2
    assert LATTICE.levels_between(h, lower) == d // 2
    if d >= 2:  # what BPS relies on: strictly between its two ends
        assert h != upper and h != lower


def test_halfway_generalize_follows_the_weights() -> None:
    """A chosen bit is generalized: a bit with a huge weight is almost always left unset."""
    upper, lower = LATTICE.top(), LATTICE.bottom()
    weights = np.ones(LATTICE.nbits)
    weights[0] = 1e6
    rng = np.random.default_rng(0)
    kept = sum(LATTICE.halfway(upper, lower, rng, weights, generalize=True).array[0] for _ in range(200))
    assert kept <= 2
