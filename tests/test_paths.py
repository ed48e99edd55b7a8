"""The path search (``search/paths.py``) returns the global optimum: it equals exhaustive enumeration
on random lattices (hypothesis: random heights, monotone or arbitrary acceptance, bounds with ties),
on random small problems, and on Adult's six benchmark configurations; the traversal is recorded in
a release's sidecar and a rerun repeats it (a sidecar without one reruns best-first)."""

from __future__ import annotations

import itertools
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deid_sql import Problem
from deid_sql.fulldomain import (
    KL,
    AverageRisk,
    Discernibility,
    DistinctLDiversity,
    KAnonymity,
    Loss,
    NonUniformEntropy,
    Outcome,
    TransformationSpace,
    TransformEvaluator,
)
from deid_sql.jobs.anonymize import anonymize, privacy_models, release_suppression, rerun
from deid_sql.search import paths
from deid_sql.search.antichain import AntichainTree, ListAntichainStore, ListStore
from deid_sql.search.paths import TRAVERSALS, path_search

from .baselines.fulldomain import exhaustive
from .test_fulldomain import adult_spec, small_spec


# -- random lattices ------------------------------------------------------------------------------
class Lattice:
    """What the path search reads of a ``TransformationSpace``: the heights and the size."""

    def __init__(self, heights: tuple[int, ...]) -> None:
        self.heights = heights
        self.size = math.prod(heights)


class Quality:
    def __init__(self, exact: bool, bounds: np.ndarray) -> None:
        self.bound_from_levels = exact
        self.bounds = bounds

    def level_bounds(self) -> np.ndarray:
        return self.bounds


class Judge:
    """A ``TransformEvaluator`` over tables: acceptance, bound and value per transformation (C order)."""

    def __init__(self, heights: tuple[int, ...], accepted: np.ndarray, bounds: np.ndarray, values: np.ndarray,
                 monotone: bool, exact: bool) -> None:
        self.strides = [math.prod(heights[q + 1:]) for q in range(len(heights))]
        self.accepted, self.bounds, self.values = accepted, bounds, values
        self.predictive = frozenset({"up", "down"}) if monotone else frozenset()
        self.quality = Quality(exact, bounds)
        self.applied: list[tuple[int, ...]] = []

    def apply(self, x: tuple[int, ...]) -> Outcome:
        self.applied.append(x)
        i = sum(a * b for a, b in zip(x, self.strides))
        ok = bool(self.accepted[i])
        return Outcome(x, ok, 0, 1, 1, float(self.values[i]), float(self.bounds[i]), ok, 1)


@st.composite
def lattices(draw: st.DrawFn) -> tuple[tuple[int, ...], Judge]:
    heights = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    points = list(itertools.product(*(range(h) for h in heights)))
    monotone, exact = draw(st.booleans()), draw(st.booleans())
    if monotone:  # accepted: the generalizations of a few random transformations (none: no solution)
        bases = draw(st.lists(st.sampled_from(points), max_size=3))
        accepted = np.array([any(all(b <= v for b, v in zip(base, x)) for base in bases) for x in points])
    else:
        accepted = np.array(draw(st.lists(st.booleans(), min_size=len(points), max_size=len(points))))
    # a bound that never decreases upwards (whole numbers: ties), a value at least the bound
    steps = [np.cumsum([0] + draw(st.lists(st.integers(0, 3), min_size=h - 1, max_size=h - 1))) for h in heights]
    bounds = np.array([float(sum(s[v] for s, v in zip(steps, x))) for x in points])
    if draw(st.booleans()):  # without suppression the value is the bound
        values = bounds.copy()
    else:
        values = bounds + np.array(draw(st.lists(st.integers(0, 4), min_size=len(points), max_size=len(points))))
    return heights, Judge(heights, accepted, bounds, values, monotone, exact)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(lattices())
def test_the_optimum_equals_enumeration_on_random_lattices(drawn: tuple[tuple[int, ...], Judge]) -> None:
    heights, judge = drawn
    points = list(itertools.product(*(range(h) for h in heights)))
    solutions = [judge.values[i] for i in range(len(points)) if judge.accepted[i]]
    with pytest.MonkeyPatch.context() as m:  # the guide of a bound that needs groups: the transformation's rank
        m.setattr(paths, "guide_bounds", lambda ev: np.array([float(sum(x)) for x in points]))
        result = path_search(Lattice(heights), judge)  # type: ignore[arg-type]
    assert result.traversal == "paths" and not result.timed_out
    if not solutions:
        assert result.optimum is None
    else:
        assert result.optimum is not None and result.optimum.accepted
        assert result.optimum.quality == min(solutions)
    assert result.checked == len(judge.applied) == len(set(judge.applied)) <= len(points)


def test_past_the_closure_limit_the_best_first_search_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Problem.from_spec(small_spec(tmp_path)) as p:
        space = TransformationSpace(p)
        monkeypatch.setattr(paths, "CLOSURE_LIMIT", space.size - 1)
        result = path_search(space, TransformEvaluator(p, KAnonymity(5), Loss(), 0.05, space=space))
        assert result.traversal == "best-first"
        truth = exhaustive(space, TransformEvaluator(p, KAnonymity(5), Loss(), 0.05, space=space))
        assert result.optimum.quality == pytest.approx(truth.quality, rel=1e-12)


# -- real problems ----------------------------------------------------------------------------------
@pytest.mark.parametrize("quality", [Loss, NonUniformEntropy, Discernibility, KL])
@pytest.mark.parametrize("k,limit", [(2, 0.0), (5, 0.0), (5, 0.05), (20, 0.1)])
def test_paths_equal_exhaustive_on_a_small_lattice(tmp_path: Path, quality: type, k: int, limit: float) -> None:
    with Problem.from_spec(small_spec(tmp_path)) as p:
        space = TransformationSpace(p)
        truth = exhaustive(space, TransformEvaluator(p, KAnonymity(k), quality(), limit, space=space))
        for store in (AntichainTree, ListStore, ListAntichainStore):
            result = path_search(space, TransformEvaluator(p, KAnonymity(k), quality(), limit, space=space), store)
            assert (result.optimum is None) == (truth is None)
            if truth is not None:
                assert result.optimum.quality == pytest.approx(truth.quality, rel=1e-12)
                assert result.optimum.accepted and result.optimum.suppressed <= int(limit * p.sample.total)


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), rows=st.integers(50, 400), k=st.integers(1, 12),
       limit=st.sampled_from([0.0, 0.02, 0.1]), quality=st.sampled_from([Loss, NonUniformEntropy, Discernibility, KL]),
       model=st.sampled_from(["k", "l", "risk"]))
def test_paths_equal_exhaustive_on_random_problems(seed: int, rows: int, k: int, limit: float, quality: type,
                                                   model: str) -> None:
    """Random data over the small spec's QIs; ℓ-diversity, and average risk over a census (acceptance
    not monotone: nothing predicted, every candidate checked)."""
    with tempfile.TemporaryDirectory() as folder, \
            Problem.from_spec(small_spec(Path(folder), population=model == "risk", seed=seed, rows=rows)) as p:
        space = TransformationSpace(p)
        privacy = {"k": lambda: KAnonymity(k), "l": lambda: [KAnonymity(k), DistinctLDiversity(2, "dx")],
                   "risk": lambda: AverageRisk(0.3)}[model]
        truth = exhaustive(space, TransformEvaluator(p, privacy(), quality(), limit, space=space))
        result = path_search(space, TransformEvaluator(p, privacy(), quality(), limit, space=space))
        assert (result.optimum is None) == (truth is None)
        if truth is not None:
            assert result.optimum.quality == pytest.approx(truth.quality, rel=1e-12)


ADULT_CONFIGS = [(5, 0.0, Loss), (5, 0.04, Loss), (100, 0.0, Loss), (5, 0.04, NonUniformEntropy),
                 (5, 0.0, Discernibility), (5, 0.0, KL)]


@pytest.mark.slow
def test_paths_equal_exhaustive_on_adults_six_configurations(tmp_path: Path) -> None:
    """The benchmark's configurations (bench/anonymize.py) on all nine attributes, 12,960 transformations."""
    with Problem.from_spec(adult_spec(tmp_path)) as p:
        space = TransformationSpace(p)
        for k, limit, quality in ADULT_CONFIGS:
            evaluator = TransformEvaluator(p, KAnonymity(k), quality(), limit, space=space)
            truth = exhaustive(space, evaluator)
            result = path_search(space, TransformEvaluator(p, KAnonymity(k), quality(), limit, space=space))
            assert result.optimum.quality == pytest.approx(truth.quality, rel=1e-12), (k, limit, quality)
            best_first = TRAVERSALS["best-first"](space, TransformEvaluator(p, KAnonymity(k), quality(), limit,
                                                                             space=space))
            assert result.checked < best_first.checked, (k, limit, quality)


# -- the traversal in the sidecar -------------------------------------------------------------------
def test_the_sidecar_records_the_traversal_and_a_rerun_repeats_it(tmp_path: Path) -> None:
    with Problem.from_spec(small_spec(tmp_path)) as p:
        models = privacy_models(k=5)
        for traversal in TRAVERSALS:
            run = anonymize(p, models, 0.05, "loss", traversal=traversal)
            recorded = release_suppression(run).parameters["anonymize"]
            assert recorded["traversal"] == traversal
            again = rerun(p, recorded)
            assert again.traversal == traversal and again.levels == run.levels
        del recorded["traversal"]  # a sidecar written before traversals were a choice
        assert rerun(p, recorded).traversal == "best-first"
