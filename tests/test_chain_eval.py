"""Chain evaluation (``evaluate/chain.py``) against full evaluation and against the previous,
re-keying evaluator (``tests/baselines/chain_rekey.py``).

The chain evaluator keeps groups in arrays and splits them step by step; every figure it gives
must equal ``Evaluator.evaluate``'s to 1e-12 (risk and loss are normalized to [0, 1], so this
is an absolute bound), its group state must be the policy's grouping after every chain, and
the searches built on it must make the same choices, seed for seed, as with the previous
evaluator.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deid_sql import Problem
from deid_sql.evaluate import Evaluator
from deid_sql.evaluate.chain import ChainEvaluator
from deid_sql.evaluate.fast import FastEvaluator
from deid_sql.search import FrontierState, RandomChainSearch, SublatticeHeuristicSearch
from deid_sql.search.frontier_search import run

from .baselines.chain_rekey import RekeyChainEvaluator
from .problems import write_small_problem

TOL = 1e-12


@pytest.fixture(scope="module", params=["census", "sample", "gamma"])
def problem(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    spec = write_small_problem(folder, seed=4, rows=600, population=request.param != "sample",
                               gamma=0.7 if request.param == "gamma" else 1.0)
    with Problem.from_spec(spec) as p:
        yield p


def _chains(lattice, rng, n):
    """Top-to-bottom chains and chains of random sublattices (as RCS and SHS walk them)."""
    out = [lattice.random_chain(lattice.top(), lattice.bottom(), rng) for _ in range(n)]
    for _ in range(n):
        a, b = (lattice.random_policy(rng, rng.random()) for _ in range(2))
        out.append(lattice.random_chain(lattice.meet(a, b), lattice.join(a, b), rng))
    return out


def _worst(evaluator: Evaluator, chain, risks, losses) -> float:
    """Largest |chain figure − full evaluation| over the chain's risk and loss."""
    worst = 0.0
    for policy, r, u in zip(chain.policies(), risks, losses):
        m = evaluator.evaluate(policy.recoding())
        worst = max(worst, abs(r - m.risk), abs(u - m.loss))
    return worst


def test_every_policy_of_a_chain_equals_full_evaluation(problem):
    chains = ChainEvaluator(problem.lattice, problem.fast.path, problem.fast.normalizers)
    for chain in _chains(problem.lattice, np.random.default_rng(11), 3):
        risks, losses = chains.evaluate_chain(chain)
        assert _worst(problem.fast, chain, risks, losses) <= TOL


def test_groups_after_a_chain_are_the_policys_groups(problem):
    """The state itself, not only its sums: ids, sizes and census counts of the last policy
    stepped to (the end is then taken in full, which leaves the state as it is)."""
    lattice, fast = problem.lattice, problem.fast.path
    chains = ChainEvaluator(lattice, fast, problem.fast.normalizers)
    for chain in _chains(lattice, np.random.default_rng(3), 2):
        chains.evaluate_chain(chain)
        m, _, g = fast.groups(chain.end().recoding())
        n = chains.groups
        assert n == m.size
        assert np.array_equal(np.sort(chains.m[:n]), np.sort(m))
        assert np.array_equal(np.bincount(chains.cell_group, weights=chains.counts, minlength=n), chains.m[:n])
        # each group's census count, matched through its size and population size g
        mine = sorted(zip(chains.m[:n], np.maximum(chains.census[:n], chains.m[:n])))
        assert mine == sorted(zip(m, g))


def test_same_figures_as_the_previous_evaluator(problem):
    lattice, fast, norm = problem.lattice, problem.fast.path, problem.fast.normalizers
    new, old = ChainEvaluator(lattice, fast, norm), RekeyChainEvaluator(lattice, fast, norm)
    for chain in _chains(lattice, np.random.default_rng(7), 3):
        (r1, u1), (r0, u0) = new.evaluate_chain(chain), old.evaluate_chain(chain)
        assert np.abs(r1 - r0).max() <= TOL and np.abs(u1 - u0).max() <= TOL
        assert (r1[0], u1[0], r1[-1], u1[-1]) == (r0[0], u0[0], r0[-1], u0[-1])  # the exact ends


def _search(problem, cls, chains_cls, budget, seed):
    state = FrontierState(cls.method, budget, seed, 0.3)
    chains = chains_cls(problem.lattice, problem.fast.path, problem.fast.normalizers)
    return run(cls(problem.lattice, problem.fast, chains, state, np.random.default_rng(seed)))


@pytest.mark.parametrize("cls", [RandomChainSearch, SublatticeHeuristicSearch])
def test_searches_are_unchanged_seed_for_seed(problem, cls):
    """Same seed, same policies searched in the same order, same figures, same frontier."""
    for seed in (0, 5):
        new = _search(problem, cls, ChainEvaluator, 400, seed)
        old = _search(problem, cls, RekeyChainEvaluator, 400, seed)
        assert [p.key for p in new.searched] == [p.key for p in old.searched]
        assert max(max(abs(a.risk - b.risk), abs(a.loss - b.loss)) for a, b in zip(new.searched, old.searched)) <= TOL
        assert [p.key for p in new.frontier] == [p.key for p in old.frontier]
        assert (new.chains, new.sublattices) == (old.chains, old.sublattices)


def test_without_the_cube_every_policy_is_evaluated_in_full(problem):
    """A census too large for the prefix cube: no box sums, each policy in full; same figures."""
    if problem.population is None:
        pytest.skip("no census: the steps never need the cube")
    fast = problem.fast.path
    plain = FastEvaluator(fast.sample, fast.population, fast.sizes, fast.gamma, cube_limit=0,
                          record_risk=fast.record_risk)
    chains = ChainEvaluator(problem.lattice, plain, problem.fast.normalizers)
    assert not chains.incremental
    for chain in _chains(problem.lattice, np.random.default_rng(2), 1):
        risks, losses = chains.evaluate_chain(chain)
        assert _worst(problem.fast, chain, risks, losses) <= TOL


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), density=st.floats(0.0, 1.0))
def test_chains_between_any_two_policies(problem, seed, density):
    """Chains from any start (a start with many groups exercises the reset's grouping)."""
    lattice = problem.lattice
    rng = np.random.default_rng(seed)
    start = lattice.random_policy(rng, density)
    chain = lattice.random_chain(start, lattice.join(start, lattice.random_policy(rng, density)), rng)
    risks, losses = ChainEvaluator(lattice, problem.fast.path, problem.fast.normalizers).evaluate_chain(chain)
    assert len(risks) == len(chain)
    assert _worst(problem.fast, chain, risks, losses) <= TOL
