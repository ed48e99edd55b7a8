"""Best-first branch and bound (seed 004) returns the global optimum: it equals exhaustive
enumeration (``tests/baselines/fulldomain.py``), for every store variant and for the search before
inherited bounds, on small lattices and on Adult with ≤ 4 attributes."""

from __future__ import annotations

import pytest

from deid_sql import Problem
from deid_sql.fulldomain import (
    KL,
    Discernibility,
    KAnonymity,
    Loss,
    NonUniformEntropy,
    TransformationSpace,
    TransformEvaluator,
)
from deid_sql.search.antichain import AntichainTree, ListAntichainStore, ListStore
from deid_sql.search.bfs import best_first_search

from .baselines.fulldomain import exhaustive, search_without_inherited_bounds
from .test_fulldomain import adult_spec, small_spec


@pytest.mark.parametrize("quality", [Loss, NonUniformEntropy, Discernibility, KL])
@pytest.mark.parametrize("k,limit", [(2, 0.0), (5, 0.0), (5, 0.05), (20, 0.1)])
def test_bfs_equals_exhaustive_on_a_small_lattice(tmp_path, quality, k, limit):
    with Problem.from_spec(small_spec(tmp_path)) as p:
        space = TransformationSpace(p)
        truth = exhaustive(space, TransformEvaluator(p, KAnonymity(k), quality(), limit, space=space))
        searches = [(best_first_search, store) for store in (AntichainTree, ListStore, ListAntichainStore)]
        for search, store in searches + [(search_without_inherited_bounds, AntichainTree)]:
            result = search(space, TransformEvaluator(p, KAnonymity(k), quality(), limit, space=space), store)
            assert (result.optimum is None) == (truth is None)
            if truth is not None:
                assert result.optimum.quality == pytest.approx(truth.quality, rel=1e-12)
                assert result.optimum.accepted and result.optimum.suppressed <= int(limit * p.sample.total)
            assert result.checked <= space.size


@pytest.mark.parametrize("attributes", [("sex", "age", "race"), ("age", "education", "marital-status", "sex")])
def test_bfs_equals_exhaustive_on_adult(tmp_path, attributes):
    with Problem.from_spec(adult_spec(tmp_path, attributes)) as p:
        space = TransformationSpace(p)
        for k, limit in ((5, 0.0), (5, 0.04), (100, 0.04)):
            truth = exhaustive(space, TransformEvaluator(p, KAnonymity(k), Loss(), limit, space=space))
            result = best_first_search(space, TransformEvaluator(p, KAnonymity(k), Loss(), limit, space=space))
            assert result.optimum.quality == pytest.approx(truth.quality, rel=1e-12)
            stores = result.stores
            up = stores["insufficient quality ↑"]
            assert up.inserts >= len(up) and up.queries >= up.hits


def test_time_limit_returns_the_best_so_far(tmp_path):
    with Problem.from_spec(adult_spec(tmp_path, ("sex", "age", "race", "education"))) as p:
        space = TransformationSpace(p)
        result = best_first_search(space, TransformEvaluator(p, KAnonymity(5), Loss(), 0.04, space=space),
                                   time_limit=0.0)
        assert result.timed_out and result.checked >= 1
