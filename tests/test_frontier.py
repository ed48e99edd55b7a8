"""Frontier, H(s, f), SNL, chain evaluation, RCS and SHS (seed 000 §3.4–3.5, Appendix)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deid_sql import Problem
from deid_sql.evaluate.chain import ChainEvaluator
from deid_sql.jobs.frontier import run_frontier
from deid_sql.search import FrontierState, RandomChainSearch, SublatticeHeuristicSearch
from deid_sql.search.frontier import Frontier, Point, dominates
from deid_sql.search.frontier_search import run
from deid_sql.search.snl import Clause, satisfied, snl

from .problems import write_small_problem

points = st.lists(st.tuples(st.sampled_from([0.1, 0.2, 0.3, 0.5, 0.8]), st.floats(0, 1)), max_size=30)


@pytest.mark.slow
@given(points)
def test_frontier_equals_brute_force(pts):
    ps = [Point(r, u, str(i)) for i, (r, u) in enumerate(pts)]
    f = Frontier()
    for p in ps:
        f.update(p)
    assert {p.key for p in f} == {p.key for p in ps if not any(dominates(q, p) for q in ps)}
    # in order: each next point is the same spot, or more risk for strictly less loss (the stair-step)
    spots = [(p.risk, p.loss) for p in f]
    assert all(a == b or (a[0] < b[0] and a[1] > b[1]) for a, b in zip(spots, spots[1:])), spots


def test_area_and_h_by_hand():
    f = Frontier()
    for p in (Point(0.0, 1.0, "top"), Point(0.2, 0.5, "a"), Point(0.6, 0.2, "b"), Point(1.0, 0.0, "bottom")):
        f.update(p)
    # stair-step: 1.0 on [0, .2), 0.5 on [.2, .6), 0.2 on [.6, 1)
    assert math.isclose(f.area(), 0.2 * 1.0 + 0.4 * 0.5 + 0.4 * 0.2)
    # rectangle [0.1, 0.7] x [0.3, 0.9]: below the step: (0.9-0.3)*0.1 + (0.5-0.3)*0.4 + 0*0.1
    assert math.isclose(f.nd(0.1, 0.9, 0.7, 0.3), 0.6 * 0.1 + 0.2 * 0.4)
    assert math.isclose(f.h(0.1, 0.9, 0.7, 0.3), (0.06 + 0.08) / (0.6 * 0.6))
    assert f.h(0.7, 0.9, 0.9, 0.5) == 0.0  # wholly dominated by b: prune
    assert f.h(0.05, 0.45, 0.15, 0.3) == 1.0  # wholly below the step
    assert math.isclose(f.area(0.2, 0.6), 0.4 * 0.5)


def test_snl_solves_the_papers_example():
    # (B[4]=1) ∧ (B[2]=0 ∨ B[4]=0) ∧ (B[1]=1 ∨ B[2]=0 ∨ B[3]=1)  (seed 000 Appendix, Fig. 10)
    clauses = [Clause(((4, 1),)), Clause(((2, 0), (4, 0))), Clause(((1, 1), (2, 0), (3, 1)))]
    for seed in range(20):
        found = snl(clauses, np.zeros(5, bool), np.zeros(5, bool), np.random.default_rng(seed))
        assert found is not None
        ones, zeros = found
        assert all(satisfied(c, ones, zeros) for c in clauses) and not (ones & zeros).any()
        assert ones[4] and zeros[2]
    assert snl([Clause(((0, 1),)), Clause(((0, 0),))], np.zeros(1, bool), np.zeros(1, bool),
               np.random.default_rng(0)) is None


@pytest.fixture(scope="module", params=["census", "sample"])
def problem(request, tmp_path_factory):
    spec = write_small_problem(tmp_path_factory.mktemp(request.param), seed=2, population=request.param == "census")
    with Problem.from_spec(spec) as p:
        yield p


def test_chain_evaluation_equals_full_evaluation(problem):
    chains = ChainEvaluator(problem.lattice, problem.fast.path, problem.fast.normalizers)
    rng = np.random.default_rng(5)
    lat = problem.lattice
    for _ in range(4):
        a, b = sorted((lat.random_policy(rng, rng.random()) for _ in range(2)), key=lambda p: p.level)
        chain = lat.random_chain(lat.meet(a, b), lat.join(a, b), rng)
        risks, losses = chains.evaluate_chain(chain)
        for policy, r, u in zip(chain.policies(), risks, losses):
            m = problem.evaluate(policy.recoding())
            assert math.isclose(r, m.risk, rel_tol=1e-9) and math.isclose(u, m.loss, rel_tol=1e-9, abs_tol=1e-12)


def _tiny(tmp_path):
    """Ages 0..5, sex, race: 9 bits, 512 policies (ZIP dropped from the spec)."""
    spec = write_small_problem(tmp_path, seed=7, max_age=5, rows=300)
    text = spec.read_text()
    spec.write_text(text[: text.index('[[qi]]\nname = "zip"')])
    return Problem.from_spec(spec)


def _search(problem, cls, budget, seed, th=0.1):
    state = FrontierState(cls.method, budget, seed, th)
    chains = ChainEvaluator(problem.lattice, problem.fast.path, problem.fast.normalizers)
    return run(cls(problem.lattice, problem.fast, chains, state, np.random.default_rng(seed)))


@pytest.mark.slow
@pytest.mark.parametrize("cls", [RandomChainSearch, SublatticeHeuristicSearch])
def test_searches_converge_to_the_exact_frontier(tmp_path, cls):
    with _tiny(tmp_path) as p:
        lat = p.lattice
        exact = Frontier()
        for bits in itertools.product((0, 1), repeat=lat.nbits):
            pol = lat.policy(bits)
            m = p.evaluate(pol)
            exact.update(Point(m.risk, m.loss, pol.text()))
        for seed in (0, 1):
            small = _search(p, cls, 60, seed)
            searched = small.searched
            assert all(not any(dominates(q, f) for q in searched) for f in small.frontier)
            big = _search(p, cls, 20_000, seed)
            assert {(round(q.risk, 12), round(q.loss, 12)) for q in big.frontier} == \
                {(round(q.risk, 12), round(q.loss, 12)) for q in exact}


@pytest.mark.slow
def test_same_seed_same_frontier_and_shs_prunes(problem):
    a = _search(problem, SublatticeHeuristicSearch, 800, 3)
    b = _search(problem, SublatticeHeuristicSearch, 800, 3)
    assert [p.key for p in a.frontier] == [p.key for p in b.frontier] and a.evaluations == b.evaluations == 800
    assert [p.key for p in _search(problem, RandomChainSearch, 300, 1).frontier] == \
        [p.key for p in _search(problem, RandomChainSearch, 300, 1).frontier]
    assert a.sublattices > 0 and a.checkpoints and a.checkpoints[0][0] == 100


def test_interrupted_run_resumes_to_the_same_result(problem, tmp_path, monkeypatch):
    whole = run_frontier(problem, tmp_path / "whole", "shs", 700, 4, plots=False, k_values=())
    calls = {"n": 0}
    original = SublatticeHeuristicSearch.step

    def step_then_stop(self):
        calls["n"] += 1
        if calls["n"] == 6:
            raise KeyboardInterrupt
        original(self)

    monkeypatch.setattr(SublatticeHeuristicSearch, "step", step_then_stop)
    part = run_frontier(problem, tmp_path / "part", "shs", 700, 4, plots=False, k_values=())
    assert part.state.interrupted and part.state.evaluations < 700
    monkeypatch.setattr(SublatticeHeuristicSearch, "step", original)
    done = run_frontier(problem, tmp_path / "part", "shs", 700, 4, resume=True, plots=False, k_values=())
    assert [p.key for p in done.state.searched] == [p.key for p in whole.state.searched]
    assert [p.key for p in done.state.frontier] == [p.key for p in whole.state.frontier]
    saved = json.loads((tmp_path / "part" / "checkpoint.json").read_text())
    assert len(saved["state"]["searched"]) == 700


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31))
def test_h_is_a_probability(seed):
    rng = np.random.default_rng(seed)
    f = Frontier()
    for _ in range(10):
        f.update(Point(float(rng.random()), float(rng.random()), str(rng.random())))
    r = np.sort(rng.random(2))
    u = np.sort(rng.random(2))
    assert 0.0 <= f.h(r[0], u[1], r[1], u[0]) <= 1.0
