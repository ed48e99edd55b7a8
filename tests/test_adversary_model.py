"""The adversary FMDP (seed 002 §3.3–3.4; METHODS.md decision 7): hand-solved MDPs, the
three solvers against each other, eq. 3.5, the pruning property, beliefs, record risk
and parameter checking.

Every expected number here is worked out from the chapter's formulas in this file —
eq. 3.3 success 1 / ((1 − prior)/prior · X_g + X_r), eq. 3.4 detection
sigmoid(h0 + h1 · (X_g − X_r)), the exploit reward −C_e + P_suc·G − P_det·C_p·[X_p < n_f]
— never by calling the library's own reward helpers.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats

from deid_sql.adversary import dp, lp
from deid_sql.adversary.model import X0, Belief, State, cluster_start, post_access
from deid_sql.adversary.params import AdversaryParams
from deid_sql.adversary.risk import AdversaryRisk
from deid_sql.adversary.solvers import SOLVERS, make_solver
from deid_sql.errors import DeidError, SpecError

EXACT = 1e-9


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def p_suc(g: int, r: int, prior: float) -> float:
    """Eq. 3.3 with X_r before the decrement."""
    return 1.0 / ((1.0 - prior) / prior * g + r)


def p_det(attempts: int, h0: float, h1: float) -> float:
    """Eq. 3.4 with attempts so far = X_g − X_r before the decrement."""
    return sigmoid(h0 + h1 * attempts)


def exploit_q(params: AdversaryParams, g: int, r: int, p: int) -> float:
    """Expected immediate reward of an exploit at (X_g = g, X_r = r, X_p = p)."""
    fined = params.max_penalties is None or p < params.max_penalties
    return (-params.exploit_cost + p_suc(g, r, params.prior) * params.gain
            - p_det(g - r, params.h0, params.h1) * params.penalty * fined)


def st_(g: int, r: int, p: int = 0, d: bool = False, s: bool = False) -> State:
    """A linked state of the sink cluster X_g = g (X_t = F, X_a = X_l = T)."""
    return State(False, d, p, s, True, True, g, r)


def expected_states(params: AdversaryParams, sizes) -> set[State]:
    """Every state of the record's MDP that is not terminated: x0, the post-access state per
    size, and per size g every (a = X_g − X_r attempts, X_s, X_d, X_p) reachable from x_start:
    after a exploits X_p ≤ min(a, n_f), X_d = T needs X_p ≥ 1, X_d = F needs X_p ≤ a − 1
    (the last attempt went unnoticed), X_s = T needs a ≥ 1."""
    cap = math.inf if params.max_penalties is None else params.max_penalties
    out = {X0}
    for g in sizes:
        g = int(g)
        out.add(post_access(g))
        out.add(cluster_start(g))
        for a in range(1, g + 1):
            for s in (False, True):
                out.update(st_(g, g - a, p=p, s=s) for p in range(int(min(a - 1, cap)) + 1))
                out.update(st_(g, g - a, p=p, d=True, s=s) for p in range(1, int(min(a, cap)) + 1))
    return out


def run_all(params: AdversaryParams, belief: Belief, actual: int):
    """(attack, values, actions) of every solver."""
    out = {}
    for name in SOLVERS:
        solver = make_solver(name, params)
        out[name] = (solver.attack(belief, actual), solver.values(belief, actual), solver.actions(belief, actual))
    return out


# ------------------------------------------------------------------------------------------
# 1. Hand-solved tiny MDPs
# ------------------------------------------------------------------------------------------

G1_CASES = [
    # attacks: V_start = −10 + 0.63·8000 − σ(−4.59)·10000 > C_l + C_d
    AdversaryParams(),
    # the start is worth exploiting but access costs more than it returns: x0 terminates
    AdversaryParams(access_cost=5000.0),
    # linking costs more than the start returns: post-access terminates
    AdversaryParams(link_cost=5000.0, access_cost=0.0),
    # the exploit itself loses money: nothing happens anywhere
    AdversaryParams(gain=100.0),
    # discounted: every later step is multiplied by γ
    AdversaryParams(discount=0.9, access_cost=3000.0),
    # an exact tie −C_e + prior·G − 0 = 0: ties go to terminate
    AdversaryParams(exploit_cost=10.0, gain=20.0, prior=0.5, penalty=0.0, access_cost=0.0),
]


@pytest.mark.parametrize("params", G1_CASES, ids=lambda p: p.describe())
def test_hand_solved_group_of_one(params):
    g = 1
    gamma = params.discount
    # one exploit, success = prior (eq. 3.3 with X_g = X_r = 1), detection σ(h0)
    q_start = -params.exploit_cost + params.prior * params.gain - sigmoid(params.h0) * params.penalty
    v_start = max(0.0, q_start)
    q_post = -params.link_cost + gamma * v_start
    v_post = max(0.0, q_post)
    q_x0 = -params.access_cost + gamma * v_post
    v_x0 = max(0.0, q_x0)
    attacks = q_start > 0 and q_post > 0 and q_x0 > 0
    p_reid = params.prior if attacks else 0.0

    # x0, post-access, x_start, and after the exploit X_s ∈ {F, T} × (X_d, X_p) ∈ {(F, 0), (T, 1)}
    assert len(expected_states(params, [g])) == 7
    for name, (attack, values, actions) in run_all(params, Belief.known(g), g).items():
        assert values.keys() == actions.keys() == expected_states(params, [g]), name
        assert attack.x0_value == pytest.approx(v_x0, abs=EXACT), name
        assert attack.start_value == pytest.approx(v_start, abs=EXACT), name
        assert attack.p_reid == pytest.approx(p_reid, abs=EXACT), name
        assert attack.access == (q_x0 > 0), name
        assert attack.planned_exploits == (1 if attacks else 0), name
        assert values[X0] == pytest.approx(v_x0, abs=EXACT), name
        assert values[post_access(g)] == pytest.approx(v_post, abs=EXACT), name
        assert values[cluster_start(g)] == pytest.approx(v_start, abs=EXACT), name
        assert actions[X0] == ("access" if q_x0 > 0 else "terminate"), name
        assert actions[post_access(g)] == ("link" if q_post > 0 else "terminate"), name
        assert actions[cluster_start(g)] == ("exploit" if q_start > 0 else "terminate"), name
        # after the exploit no candidate is left: every state there is worth 0 and terminates
        for x in (st_(1, 0), st_(1, 0, p=1, d=True), st_(1, 0, s=True), st_(1, 0, p=1, d=True, s=True)):
            assert values[x] == pytest.approx(0.0, abs=EXACT), (name, x)
            assert actions[x] == "terminate", (name, x)


def test_hand_solved_group_of_one_tie_terminates():
    params = G1_CASES[-1]
    assert -params.exploit_cost + params.prior * params.gain == 0.0  # the case really is a tie
    for name, (attack, _, actions) in run_all(params, Belief.known(1), 1).items():
        assert actions[cluster_start(1)] == "terminate", name
        assert attack.p_reid == 0.0 and attack.x0_value == 0.0, name


def _two(params: AdversaryParams):
    """g = 2, n_f = 1 by hand: returns (V(a=1, p=0), V(a=1, p=1), q(a=0), V(a=0), P_reid | exploit at a=0)."""
    g, prior, gamma = 2, params.prior, params.discount
    s0, s1 = prior / 2.0, prior / (2.0 - prior)  # eq. 3.3 at X_r = 2 and X_r = 1
    d0, d1 = sigmoid(params.h0), sigmoid(params.h0 + params.h1)  # eq. 3.4 after 0 and 1 attempts
    assert s0 == pytest.approx(p_suc(g, 2, prior)) and s1 == pytest.approx(p_suc(g, 1, prior))
    q10 = -params.exploit_cost + s1 * params.gain - d1 * params.penalty  # not yet penalized: may be fined
    q11 = -params.exploit_cost + s1 * params.gain  # already penalized once (n_f = 1): no fine
    v10, v11 = max(0.0, q10), max(0.0, q11)
    q0 = -params.exploit_cost + s0 * params.gain - d0 * params.penalty + gamma * (1 - s0) * (d0 * v11 + (1 - d0) * v10)
    v0 = max(0.0, q0)
    reid = s0 + (1 - s0) * (d0 * s1 * (q11 > 0) + (1 - d0) * s1 * (q10 > 0))
    return q10, q11, q0, v10, v11, v0, reid


G2_CASES = [
    # h1 = 1: the second exploit, unpenalized, risks σ(0) = 0.5 · C_p and is not worth it
    # (V(1, 0) = 0), but once fined (p = 1) it is worth 290 — so the first exploit is taken
    # partly for the chance of being fined: V(start) ≈ 4.55 > 0.
    AdversaryParams(access_cost=3.0, link_cost=1.0, exploit_cost=10.0, gain=900.0, penalty=1000.0,
                    max_penalties=1, h0=-1.0, h1=1.0, prior=0.5),
    # the same with a smaller penalty: every branch exploits, P_reid = prior
    AdversaryParams(access_cost=3.0, link_cost=1.0, exploit_cost=10.0, gain=900.0, penalty=100.0,
                    max_penalties=1, h0=-1.0, h1=1.0, prior=0.5),
    # a larger penalty: the start itself terminates
    AdversaryParams(access_cost=3.0, link_cost=1.0, exploit_cost=10.0, gain=900.0, penalty=3000.0,
                    max_penalties=1, h0=-1.0, h1=1.0, prior=0.5),
    # the case study with h1 = 0.18 and discount 0.9
    AdversaryParams(h1=0.18, discount=0.9),
]


@pytest.mark.parametrize("params", G2_CASES, ids=lambda p: p.describe())
def test_hand_solved_group_of_two(params):
    g, gamma = 2, params.discount
    q10, q11, q0, v10, v11, v0, reid = _two(params)
    v_post = max(0.0, -params.link_cost + gamma * v0)
    q_x0 = -params.access_cost + gamma * v_post
    v_x0 = max(0.0, q_x0)
    attacks = q0 > 0 and -params.link_cost + gamma * v0 > 0 and q_x0 > 0
    p_reid = reid if attacks else 0.0
    planned = (1 + (q10 > 0)) if attacks else 0

    # x0, post, start; a = 1: 2 × {(F, 0), (T, 1)}; a = 2: 2 × {(F, 0), (F, 1), (T, 1)}  (n_f = 1)
    assert len(expected_states(params, [g])) == 13
    for name, (attack, values, actions) in run_all(params, Belief.known(g), g).items():
        assert values.keys() == actions.keys() == expected_states(params, [g]), name
        assert attack.x0_value == pytest.approx(v_x0, abs=EXACT), name
        assert attack.start_value == pytest.approx(v0, abs=EXACT), name
        assert attack.p_reid == pytest.approx(p_reid, abs=EXACT), name
        assert attack.planned_exploits == planned, name
        assert values[X0] == pytest.approx(v_x0, abs=EXACT), name
        assert values[post_access(g)] == pytest.approx(v_post, abs=EXACT), name
        assert values[cluster_start(g)] == pytest.approx(v0, abs=EXACT), name
        assert values[st_(2, 1, p=0)] == pytest.approx(v10, abs=EXACT), name
        assert values[st_(2, 1, p=1, d=True)] == pytest.approx(v11, abs=EXACT), name
        assert actions[cluster_start(g)] == ("exploit" if q0 > 0 else "terminate"), name
        assert actions[st_(2, 1, p=0)] == ("exploit" if q10 > 0 else "terminate"), name
        assert actions[st_(2, 1, p=1, d=True)] == ("exploit" if q11 > 0 else "terminate"), name
        for x in (st_(2, 1, s=True), st_(2, 1, p=1, d=True, s=True), st_(2, 0), st_(2, 0, p=1, d=True),
                  st_(2, 0, p=1), st_(2, 0, s=True)):
            assert values[x] == pytest.approx(0.0, abs=EXACT), (name, x)
            assert actions[x] == "terminate", (name, x)


def test_hand_solved_near_tie_inside_cluster_terminates():
    """g = 2, prior = 1 (so P_suc = 1/2 then 1), detection jumping from σ(−6) to σ(−1): the
    penalty is set so the second exploit beats stopping by 1e-6 — less than the tie
    tolerance 1e-9 × scale — so it is a tie and every solver stops after one exploit."""
    h0, h1, gain, ce, margin = -6.0, 5.0, 1000.0, 10.0, 1e-6
    d0, d1 = sigmoid(h0), sigmoid(h0 + h1)
    params = AdversaryParams(access_cost=0.0, link_cost=0.0, exploit_cost=ce, gain=gain,
                             penalty=(gain - ce - margin) / d1, max_penalties=None, h0=h0, h1=h1, prior=1.0)
    q1 = -ce + 1.0 * gain - d1 * params.penalty
    assert 0 < q1 < params.tie
    q0 = -ce + 0.5 * gain - d0 * params.penalty  # + 0: the continuation is worth 0
    assert q0 > 1.0
    for name, (attack, values, actions) in run_all(params, Belief.known(2), 2).items():
        assert actions[st_(2, 1)] == "terminate", name
        assert values[st_(2, 1)] == pytest.approx(0.0, abs=params.tie), name
        assert actions[cluster_start(2)] == "exploit", name
        # the LPs keep V(a = 1) = q1 > 0 in the value (only the decision treats it as a tie),
        # the DP stores 0: values agree to the tie tolerance
        assert attack.start_value == pytest.approx(q0, abs=params.tie), name
        assert attack.x0_value == pytest.approx(q0, abs=params.tie), name
        assert attack.planned_exploits == 1, name
        assert attack.p_reid == pytest.approx(0.5, abs=EXACT), name


def test_hand_solved_cases_cover_the_branches():
    """The g = 2 cases above really contain a terminating branch and a partial attack."""
    q10, q11, q0, *_, reid = _two(G2_CASES[0])
    assert q10 < 0 < q11 and q0 > 0 and 0 < reid < G2_CASES[0].prior
    q10, q11, q0, *_, reid = _two(G2_CASES[1])
    assert min(q10, q11, q0) > 0 and reid == pytest.approx(G2_CASES[1].prior, abs=1e-15)
    assert _two(G2_CASES[2])[2] < 0


# ------------------------------------------------------------------------------------------
# 2. The three solvers agree
# ------------------------------------------------------------------------------------------

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
    # keep the profitable clusters small (and the DP table finite): nothing pays from 400 on
    assume(dp.start_value(params, 400) == 0.0)
    return params


# group densities g / total: 0, 1, or at least 1e-12 (scipy's binomial overflows for subnormal p)
densities = st.one_of(st.sampled_from([0.0, 1.0]), st.floats(1e-12, 1))

beliefs = st.one_of(
    st.integers(1, 12).map(lambda g: (Belief.known(g), g)),
    st.tuples(st.integers(0, 30), densities, st.integers(1, 10)).map(
        lambda t: (Belief.binomial(t[0], t[1]), t[2])),
)


def best_q(params: AdversaryParams, belief: Belief, values: dict[State, float]) -> dict[State, tuple[str, float]]:
    """Per state: the one non-terminate action offered there and its Q under ``values``."""
    gamma = params.discount
    out: dict[State, tuple[str, float]] = {}
    for x in values:
        if x == X0:
            post = sum(float(b) * values[post_access(int(k))] for k, b in zip(belief.sizes, belief.probabilities))
            out[x] = ("access", -params.access_cost + gamma * post)
        elif x.a and not x.l:
            out[x] = ("link", -params.link_cost + gamma * values[cluster_start(x.g)])
        elif not x.s and x.r > 0:
            s = p_suc(x.g, x.r, params.prior)
            d = p_det(x.g - x.r, params.h0, params.h1)
            p_next = x.p + 1 if params.max_penalties is None or x.p < params.max_penalties else x.p
            cont = d * values[st_(x.g, x.r - 1, p=p_next, d=True)] + (1 - d) * values[st_(x.g, x.r - 1, p=x.p)]
            out[x] = ("exploit", exploit_q(params, x.g, x.r, x.p) + gamma * (1 - s) * cont)
    return out


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(adversaries(), beliefs)
def test_solvers_agree(params, belief_actual):
    belief, actual = belief_actual
    scale = params.scale
    runs = run_all(params, belief, actual)
    attack, values, actions = runs["dp"]
    q = best_q(params, belief, values)
    # the DP values satisfy the Bellman equation V = max(0, Q) everywhere (terminate is worth 0)
    for x, v in values.items():
        assert v == pytest.approx(max(0.0, q[x][1]) if x in q else 0.0, abs=EXACT * scale), x
    near = {x for x, (_, qx) in q.items() if abs(qx) < 1e-6 * scale}
    for x, (action, qx) in q.items():
        if x not in near:
            assert actions[x] == (action if qx > 0 else "terminate"), x
    for x in values.keys() - q.keys():
        assert actions[x] == "terminate", x
    decisive = {X0, post_access(actual)} | {x for x in values if x.g == actual and x.l}
    sizes = np.union1d(belief.sizes, [actual])
    assert values.keys() == actions.keys() == expected_states(params, sizes)
    for name in ("two-level", "lp"):
        other, other_values, other_actions = runs[name]
        assert other_values.keys() == values.keys(), name
        assert other_actions.keys() == actions.keys(), name
        for x, v in values.items():
            assert other_values[x] == pytest.approx(v, abs=EXACT * scale), (name, x)
        for x, a in actions.items():
            if x not in near:
                assert other_actions[x] == a, (name, x)
        assert other.x0_value == pytest.approx(attack.x0_value, abs=EXACT * scale), name
        if not near & decisive:
            assert other.p_reid == pytest.approx(attack.p_reid, abs=EXACT), name
            assert other.planned_exploits == attack.planned_exploits, name
            assert (other.access, other.link) == (attack.access, attack.link), name


# ------------------------------------------------------------------------------------------
# 3. Eq. 3.5: the DP's success probability equals the LP's Markov chain
# ------------------------------------------------------------------------------------------

EQ35_CASES = [
    AdversaryParams(),
    AdversaryParams(h1=0.18, max_penalties=None),
    AdversaryParams(h1=0.18),
    AdversaryParams(h1=0.3, max_penalties=2, penalty=3000.0, discount=0.9),
    AdversaryParams(h0=-1.5, penalty=3000.0, exploit_cost=100.0, h1=0.0),
    AdversaryParams(h0=-1.0, h1=1.0, penalty=1000.0, gain=900.0, prior=0.5, access_cost=3.0, link_cost=1.0),
]


@pytest.mark.parametrize("params", EQ35_CASES, ids=lambda p: p.describe())
def test_success_probability_matches_lp_chain(params):
    table = dp.cluster_table(params)
    seen_partial = False
    for g in range(1, 16):
        p_lp, exploits_lp = lp.solve_cluster(params, g).success()
        assert float(table.success_at(g)) == pytest.approx(p_lp, abs=EXACT), g
        assert float(table.expected_at(g)) == pytest.approx(exploits_lp, abs=1e-8), g
        assert 0.0 <= p_lp <= params.prior + 1e-12
        seen_partial |= 0 < p_lp < params.prior - 1e-9
    if params.h1 > 0:
        assert seen_partial  # the comparison covers policies that stop early, not only all-or-none


# ------------------------------------------------------------------------------------------
# 4. sweep, cluster_policy and start_value agree; the start value falls with g (pruning)
# ------------------------------------------------------------------------------------------

@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(adversaries())
def test_start_values_agree_and_fall_with_group_size(params):
    largest = 60
    swept = dp.sweep(params, largest)
    assert swept.start_value[0] == 0.0
    for g in range(1, largest + 1):
        v, go = dp.cluster_policy(params, g)
        assert v[0, 0] == pytest.approx(swept.start_value[g], abs=EXACT * params.scale), g
        assert dp.start_value(params, g) == pytest.approx(swept.start_value[g], abs=EXACT * params.scale), g
        assert (swept.start_value[g] > 0) == bool(go[0, 0]), g
    # pruning property: V(x_start) is non-increasing in g ≥ 1
    assert np.all(np.diff(swept.start_value[1:]) <= 0.0), swept.start_value
    # the pruned table is the sweep up to the first zero, and zero from there on
    table = dp.cluster_table(params)
    n = min(table.start_value.size, largest + 1)
    np.testing.assert_allclose(table.start_value[:n], swept.start_value[:n], rtol=0, atol=EXACT * params.scale)
    np.testing.assert_allclose(table.success[:n], swept.success[:n], rtol=0, atol=EXACT)
    assert np.array_equal(table.planned_exploits[:n], swept.planned_exploits[:n])
    assert np.all(table.value(np.arange(table.start_value.size, largest + 1)) == 0.0)
    assert np.all(swept.start_value[table.start_value.size:] == 0.0)


# ------------------------------------------------------------------------------------------
# 5. The unknown-group belief (eq. 3.6)
# ------------------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.integers(0, 5000), densities)
def test_binomial_belief(n, p):
    belief = Belief.binomial(n, p)
    sizes, probs = belief.sizes, belief.probabilities
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(probs >= 0)
    assert sizes.min() >= 0 and sizes.max() <= n
    assert np.array_equal(sizes, np.arange(sizes[0], sizes[-1] + 1))  # contiguous, ascending
    dist = stats.binom(n, p)
    lo, hi = int(sizes[0]), int(sizes[-1])
    assert dist.cdf(lo - 1) < 1e-12  # the cut lower tail
    assert dist.sf(hi) < 1e-12  # the cut upper tail
    kept = dist.pmf(sizes)
    np.testing.assert_allclose(probs, kept / kept.sum(), rtol=1e-12, atol=1e-15)


def test_known_belief_and_bad_density():
    b = Belief.known(7)
    assert b.sizes.tolist() == [7] and b.probabilities.tolist() == [1.0]
    with pytest.raises(SpecError):
        Belief.binomial(10, 1.5)


# ------------------------------------------------------------------------------------------
# 6. AdversaryRisk against the solver, record by record
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [{}, {"h1": 0.18, "max_penalties": None}, {"h1": 0.5, "max_penalties": 2},
                                {"discount": 0.9, "h1": 0.18}])
def test_known_group_risk_matches_solver(kw):
    params = AdversaryParams(loss=2.5, **kw)
    risk = AdversaryRisk(params, 1e6)
    solver = make_solver("dp", params)
    g = np.arange(1, 200)
    got = risk.p_reid(g)
    want = []
    for size in g.tolist():
        x = max(1, round(params.prior * size))
        want.append(solver.attack(Belief.known(x), x).p_reid)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(risk.record_risk(g), 2.5 * np.asarray(want), rtol=0, atol=1e-12)
    assert np.any(got > 0) and np.any(got == 0)  # the range crosses the attacker's threshold
    # same inputs, same outputs (a fresh object, shuffled and repeated input)
    again = AdversaryRisk(params, 1e6)
    order = np.random.default_rng(0).permutation(g.size)
    assert np.array_equal(again.p_reid(g[order]), got[order])
    assert np.array_equal(risk.p_reid(np.concatenate([g, g])), np.concatenate([got, got]))


@pytest.mark.parametrize("kw, switches", [
    ({"external_size": 6300}, 1),
    ({"external_size": 3000, "h1": 0.18, "max_penalties": None}, 1),
    ({"external_size": 12_000, "h1": 0.18}, 1),
    ({}, 1),
    # a small external dataset and a dear access: tiny groups are probably absent from D_e,
    # so access pays only from some g on — and stops paying again for large g
    ({"external_size": 1000, "access_cost": 1500.0, "h1": 0.18}, 2),
    ({"external_size": 1000, "access_cost": 3000.0}, 2),
])
def test_unknown_group_risk_matches_solver(kw, switches):
    total = 10_000
    params = AdversaryParams(scenario="unknown", **kw)
    n = kw.get("external_size", round(params.prior * total))
    risk = AdversaryRisk(params, total)
    solver = make_solver("dp", params)
    scan = np.arange(1.0, 600.0)
    access_scan = risk.accesses(scan)
    flips = np.flatnonzero(np.diff(access_scan.astype(int))) + 1  # scan[flips] differs from the g before it
    assert flips.size == switches  # the access threshold(s) lie inside the range tested
    near = np.concatenate([np.arange(scan[f] - 4, scan[f] + 4) for f in flips])
    g = np.unique(np.concatenate([np.arange(1, 600, 9), near]))
    got = risk.p_reid(g)
    access = risk.accesses(g)
    for size, p_got, acc in zip(g.tolist(), got.tolist(), access.tolist()):
        attack = solver.attack(Belief.binomial(n, size / total), max(1, round(params.prior * size)))
        assert p_got == pytest.approx(attack.p_reid, abs=1e-12), size
        assert acc == attack.access, size
    assert np.any(got > 0) and np.any(got == 0)
    # same inputs, same outputs: a fresh object (empty cache), reversed and repeated input
    fresh = AdversaryRisk(params, total)
    assert np.array_equal(fresh.p_reid(g[::-1]), got[::-1])
    assert np.array_equal(risk.p_reid(np.concatenate([g, g])), np.concatenate([got, got]))
    if switches == 2:  # access switching on with g makes the risk rise: reported
        assert risk.monotonicity_problem() is not None
    else:
        assert risk.monotonicity_problem() is None


# ------------------------------------------------------------------------------------------
# 7. Bad parameters
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, value", [
    ("access_cost", -1.0), ("link_cost", -0.5), ("exploit_cost", -10.0), ("gain", -1.0), ("penalty", -100.0),
    ("loss", -1.0), ("prior", 0.0), ("prior", 1.5), ("max_penalties", 0), ("h1", -0.1), ("discount", 0.0),
    ("discount", 1.2), ("external_size", 0), ("scenario", "x"), ("h0", float("nan")), ("gain", float("inf")),
    ("max_penalties", 1.5), ("access_cost", "100"),
])
def test_bad_parameter_is_named(name, value):
    with pytest.raises(SpecError) as err:
        AdversaryParams(**{name: value})
    message = str(err.value)
    assert name in message and "\n" not in message
    with pytest.raises(SpecError) as err:
        AdversaryParams.from_mapping({name: value})
    assert name in str(err.value) and "[adversary]" in str(err.value)


def test_from_mapping_keys():
    with pytest.raises(SpecError) as err:
        AdversaryParams.from_mapping({"bogus": 1})
    assert "bogus" in str(err.value) and "\n" not in str(err.value)
    for word in ("unbounded", "inf", "infinity"):
        assert AdversaryParams.from_mapping({"max_penalties": word}).max_penalties is None
    params = AdversaryParams.from_mapping({"max_penalties": 3, "h1": 0.18})
    assert params == AdversaryParams(max_penalties=3, h1=0.18)
    assert AdversaryParams.from_mapping(AdversaryParams(max_penalties=None).to_dict()).max_penalties is None


# ------------------------------------------------------------------------------------------
# 8. No candidate at all
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", SOLVERS)
@pytest.mark.parametrize("actual", [0, -3])
def test_attack_needs_a_candidate(name, actual):
    with pytest.raises(DeidError):
        make_solver(name, AdversaryParams()).attack(Belief.known(3), actual)
