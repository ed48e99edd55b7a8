"""Seed 002 §3.6, Findings 1–3 (known group) as properties of our model, plus what the
model does where the chapter is silent (finite n_f with h1 = 0) and parameter sets
whose risk is not monotone in the group size.

X is the external group size throughout; ``thresholds`` reports k (smallest X not fully
exploited from x0), k′ (smallest X not attacked from x0) and the exploits planned per X
along the path where every attempt fails unnoticed (Fig. 3.7).

The thresholds are checked against ``tests/adversary_reference.py``, an independent plain
recursion over the chapter's model.  Numbers the chapter itself reports are marked "chapter";
the others are our model's values, derived by that reference and kept as regression pins.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from deid_sql.adversary import dp
from deid_sql.adversary.model import Belief
from deid_sql.adversary.params import AdversaryParams
from deid_sql.adversary.risk import AdversaryRisk, baseline_risk, thresholds
from deid_sql.adversary.solvers import make_solver

from . import adversary_reference as reference

CASE_STUDY_H1 = 0.18


@st.composite
def adversaries(draw, **fixed):
    values = dict(
        access_cost=draw(st.floats(0, 200)),
        link_cost=draw(st.floats(0, 200)),
        exploit_cost=draw(st.floats(0, 200)),
        gain=draw(st.floats(100, 10_000)),
        penalty=draw(st.floats(0, 20_000)),
        max_penalties=draw(st.sampled_from([None, 1, 2, 3])),
        h0=draw(st.floats(-6, -1)),
        h1=draw(st.floats(0, 0.5)),
        prior=draw(st.floats(0.05, 1, exclude_min=True)),
        discount=draw(st.sampled_from([1.0, 0.9, 0.97])),
    )
    values.update(fixed)
    params = AdversaryParams(**values)
    assume(dp.start_value(params, 400) == 0.0)  # a finite attacker: nothing pays from X = 400 on
    return params


def planned_by_x(params: AdversaryParams) -> tuple[np.ndarray, np.ndarray]:
    """(X, planned exploits after linking) for X = 1 … one past the last profitable cluster."""
    table = dp.cluster_table(params)
    x = np.arange(1, table.start_value.size + 2)
    return x, table.planned_at(x)


# ------------------------------------------------------------------------------------------
# Finding 1: the baseline risk never exceeds the FMDP's
# ------------------------------------------------------------------------------------------

@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(adversaries(discount=1.0))
def test_finding1_baseline_never_exceeds_mdp(params):
    # Why: when eq. 3.7's payoff is positive, the MDP may take exactly the baseline's plan —
    # access, link, exploit once at random, stop — whose value from x0 is that very payoff
    # (discount 1; the first exploit has P_suc = 1/((1 − prior)/prior·X + X) = prior/X and
    # P_det = σ(h0), fined since X_p = 0 < n_f).  So V(x0) ≥ payoff > 0: the optimal adversary
    # accesses, links and exploits at least once, and P_reid ≥ that first exploit's prior/X,
    # which is the baseline's risk.  When the payoff is ≤ 0 the baseline risk is 0.
    solver = make_solver("dp", params)
    x = np.arange(1, 61)
    base = baseline_risk(params, x)
    p_det0 = 1.0 / (1.0 + math.exp(-params.h0))
    for size, b in zip(x.tolist(), base.tolist()):
        payoff = (params.gain * params.prior / size - p_det0 * params.penalty - params.access_cost
                  - params.link_cost - params.exploit_cost)
        if abs(payoff) <= params.tie:
            continue  # the MDP sends ties (within 1e-9 × scale) to terminate; eq. 3.7 does not
        assert b == (params.prior / size if payoff > 0 else 0.0)
        attack = solver.attack(Belief.known(size), size)
        assert b <= attack.p_reid + 1e-12, (size, payoff, attack)
        if payoff > 0:
            assert attack.x0_value >= payoff - 1e-9 * params.scale


def test_finding1_case_study_mdp_strictly_riskier():
    """With the case study the baseline underestimates: P_reid = prior for small groups, prior/X in eq. 3.7."""
    params = AdversaryParams(h1=CASE_STUDY_H1, max_penalties=None)
    solver = make_solver("dp", params)
    for size in range(2, 14):
        mdp = solver.attack(Belief.known(size), size).p_reid
        assert mdp == pytest.approx(params.prior, abs=1e-12)
        assert baseline_risk(params, np.array([size]))[0] < mdp


# ------------------------------------------------------------------------------------------
# Finding 2: h1 = 0 and n_f = ∞ — all or nothing
# ------------------------------------------------------------------------------------------

@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(adversaries(h1=0.0, max_penalties=None))
def test_finding2_all_or_none(params):
    # Why: with constant detection and every detection fined, the exploit reward
    # −C_e + P_suc·G − σ(h0)·C_p only grows as X_r falls, and X_p does not matter; once an
    # exploit is worth taking every later one is too (for any discount).
    x, planned = planned_by_x(params)
    assert np.all((planned == 0) | (planned == x)), dict(zip(x.tolist(), planned.tolist()))
    t = thresholds(params)
    assert t.k == t.k_prime
    assert t.k_prime <= t.k_prime_sunk
    sizes = np.arange(1, t.k_prime_sunk)
    assert np.all((t.planned == 0) | (t.planned == sizes))
    # exploiting all X candidates re-identifies with probability prior (eq. 3.5)
    attacked = t.planned > 0
    np.testing.assert_allclose(t.p_reid[attacked], params.prior, rtol=0, atol=1e-12)
    assert np.all(t.p_reid[~attacked] == 0.0)


def reference_thresholds(params: AdversaryParams) -> tuple[int, int, int]:
    r = reference.thresholds(params)
    return r.k, r.k_prime, r.k_prime_sunk


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(adversaries())
def test_thresholds_and_risk_equal_the_independent_reference(params):
    assume(dp.start_value(params, 60) == 0.0)  # small groups: the reference recursion stays cheap
    t = thresholds(params)
    assert (t.k, t.k_prime, t.k_prime_sunk) == reference_thresholds(params)
    solver = make_solver("dp", params)
    for size in range(1, t.k_prime_sunk + 1):
        ours, ref = solver.attack(Belief.known(size), size), reference.attack(params, size)
        assert ours.access == ref.access and ours.p_reid == pytest.approx(ref.p_reid, abs=1e-12), size
        assert ours.x0_value == pytest.approx(ref.value, rel=1e-9, abs=1e-9 * params.scale), size
        if size < t.k_prime_sunk:
            assert t.planned[size - 1] == ref.planned, size


def test_finding2_case_study():
    params = AdversaryParams(h1=0.0, max_penalties=None)
    t = thresholds(params)
    assert (t.k, t.k_prime, t.k_prime_sunk) == reference_thresholds(params) == (65, 65, 67)  # regression pin
    assert np.array_equal(t.planned, np.arange(1, t.k_prime_sunk))


# ------------------------------------------------------------------------------------------
# Finding 3: h1 > 0 — a subset is exploited for k ≤ X < k′
# ------------------------------------------------------------------------------------------

def test_finding3_case_study():
    params = AdversaryParams(h1=CASE_STUDY_H1, max_penalties=None)
    t = thresholds(params)
    solver = make_solver("dp", params)
    # The chapter reports k = 14 and k′ = 29.  k agrees.  Our k′ is 32: the first X whose
    # x_start value does not cover C_l + C_d (C_d = $100 paid up front from x0).  The gap is
    # put down to how the chapter books the access cost, which it does not spell out; it is
    # not reproduced by obvious variants (C_d sunk gives k′ = 46; detection counted after the
    # decrement gives k = 13, k′ = 28), so we assert our own value, per METHODS.md decision 7.
    assert t.k == 14  # chapter
    assert (t.k, t.k_prime, t.k_prime_sunk) == reference_thresholds(params) == (14, 32, 46)  # 32, 46: pins
    assert t.k < t.k_prime <= t.k_prime_sunk
    for size in range(1, t.k_prime_sunk):
        attack = solver.attack(Belief.known(size), size)
        assert attack.p_reid == pytest.approx(reference.attack(params, size).p_reid, abs=1e-12), size
        if size < t.k:
            assert attack.planned_exploits == size
            assert attack.p_reid == pytest.approx(params.prior, abs=1e-12)
        elif size < t.k_prime:
            assert 0 < attack.planned_exploits < size, size
            assert 0 < attack.p_reid < params.prior, size
        else:
            assert attack.p_reid == 0.0 and not attack.access, size
            assert 0 < t.planned[size - 1] < size  # with D_e already held it would still attack
    # P_reid falls over [k, k′)
    p = np.array([solver.attack(Belief.known(s), s).p_reid for s in range(t.k - 1, t.k_prime + 1)])
    assert np.all(np.diff(p) <= 1e-12)
    assert solver.attack(Belief.known(t.k_prime), t.k_prime).p_reid == 0.0


def test_finding3_h1_matters_even_with_one_penalty():
    # The chapter's footnote says h1 "can be anything" when n_f = 1.  In our model detection
    # rises with attempts before the first fine as well, so h1 changes the attack.
    rising_params = AdversaryParams(h1=CASE_STUDY_H1, max_penalties=1)
    flat = thresholds(AdversaryParams(h1=0.0, max_penalties=1))
    rising = thresholds(rising_params)
    assert (flat.k, flat.k_prime, flat.k_prime_sunk) == reference_thresholds(AdversaryParams(h1=0.0, max_penalties=1))
    assert (flat.k, flat.k_prime) == (89, 89)  # regression pin
    # k′ = 48 is the known-group threshold the chapter quotes for n_f = 1 in its unknown-group
    # discussion (Fig. 3.8).  Once D_e is held (C_d sunk) it quotes 51; ours is 77, because
    # x_start stays worth between $0 and $100 for X = 48 … 76.
    assert (rising.k, rising.k_prime, rising.k_prime_sunk) == reference_thresholds(rising_params)
    assert (rising.k, rising.k_prime, rising.k_prime_sunk) == (14, 48, 77)  # 48: chapter; 77: regression pin
    between = dp.cluster_table(rising_params).value(np.arange(48, 77))
    assert np.all((between > 0) & (between <= rising_params.access_cost))


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(adversaries(h1=0.0))
def test_penalized_column_is_all_or_none(params):
    # Once n_f fines have been paid (or with n_f = ∞ and h1 = 0 anywhere) an exploit costs
    # only C_e (resp. C_e + σ(h0)·C_p) while P_suc rises as X_r falls: a run of exploits
    # that has started never stops before the last candidate.
    column = params.max_penalties if params.max_penalties is not None else 0
    for g in range(1, 40):
        _, go = dp.cluster_policy(params, g)
        run = go[:g, column]
        if run.any():
            assert run[int(np.argmax(run)):].all(), (g, run.astype(int))


# ------------------------------------------------------------------------------------------
# Finite n_f with h1 = 0: what the model actually does
# ------------------------------------------------------------------------------------------

def test_finite_penalties_flat_detection_case_study_is_all_or_none():
    # The chapter's numbers with n_f = 1, h1 = 0: detection is 1 %, so the fine's expected
    # cost σ(h0)·C_p ≈ $100 is small against G·P_suc and the adversary exploits everyone or
    # nobody, like Finding 2 (same k = k′ = 89, larger than Finding 2's 65 because the fine
    # is levied at most once).
    for n_f in (1, 2, 3):
        params = AdversaryParams(h1=0.0, max_penalties=n_f)
        x, planned = planned_by_x(params)
        assert np.all((planned == 0) | (planned == x)), n_f
        t = thresholds(params)
        assert t.k == t.k_prime, n_f


@pytest.mark.parametrize("kw, k, k_prime", [
    ({"h0": -1.5, "penalty": 3000.0, "exploit_cost": 100.0, "max_penalties": 1}, 20, 32),
    ({"h0": -1.0, "penalty": 2000.0, "exploit_cost": 100.0, "max_penalties": 2}, 19, 22),
    ({"h0": -1.0, "penalty": 5000.0, "exploit_cost": 10.0, "max_penalties": 1}, 9, 34),
])
def test_finite_penalties_flat_detection_can_stop_early(kw, k, k_prime):
    # With h1 = 0 but n_f finite the attack is NOT all-or-none in general (the chapter's
    # "second reason" in Finding 3).  Before the last fine, each exploit still risks
    # σ(h0)·C_p, but a detection also buys fine-free exploits of all remaining candidates.
    # That option is worth a lot while many candidates remain and little near the end, so
    # on the path where every attempt fails unnoticed the adversary may start (even at a
    # loss per step) and stop before the last candidate — here at X − 1 for X = k.
    params = AdversaryParams(h1=0.0, **kw)
    t = thresholds(params)
    assert (t.k, t.k_prime, t.k_prime_sunk) == reference_thresholds(params)
    assert (t.k, t.k_prime) == (k, k_prime)  # regression pins
    x = np.arange(1, t.k_prime_sunk)
    assert np.array_equal(t.planned[x < k], x[x < k])
    partial = (x >= k) & (x < k_prime)
    assert np.all((t.planned[partial] > 0) & (t.planned[partial] < x[partial]))
    if kw["max_penalties"] == 1:
        assert t.planned[k - 1] == k - 1
    # once fined n_f times the rest of the group is always exploited (see the property above)
    _, go = dp.cluster_policy(params, k)
    n_f = kw["max_penalties"]
    assert go[1:k, n_f].all()


# ------------------------------------------------------------------------------------------
# Risk that rises with the group size
# ------------------------------------------------------------------------------------------

def test_non_monotone_parameters_are_reported():
    params = AdversaryParams(h1=0.5, max_penalties=2, penalty=1000.0)
    problem = AdversaryRisk(params, 1e6).monotonicity_problem()
    assert problem is not None and "\n" not in problem
    for name in ("h1=0.5", "n_f=2", "C_p=1000"):
        assert name in problem
    # the report is true: P_reid does rise with X somewhere
    solver = make_solver("dp", params)
    p = np.array([solver.attack(Belief.known(s), s).p_reid for s in range(1, 40)])
    assert np.any(np.diff(p) > 1e-12)


@pytest.mark.parametrize("kw", [{}, {"h1": 0.0, "max_penalties": None}, {"scenario": "unknown"}])
def test_monotone_parameters_pass(kw):
    params = AdversaryParams(**kw)
    assert AdversaryRisk(params, 1e6).monotonicity_problem() is None
    solver = make_solver("dp", params)
    p = np.array([solver.attack(Belief.known(s), s).p_reid for s in range(1, 120)])
    assert np.all(np.diff(p) <= 1e-12)
