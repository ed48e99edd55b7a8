"""An independent reference for seed 002's known-group attack, for tests: plain backward induction
over one target's states, in pure Python floats, written from the chapter (§3.3) and METHODS.md
decision 7 rather than from ``deid_sql.adversary`` (which sweeps every cluster size at once with numpy
and prunes).  O(X · fines) per group of X candidates.

From x0 the adversary may access D_e (−C_d), then link (−C_l), then exploit candidates one by one.
An exploit with a attempts made and r = X − a candidates left costs C_e, succeeds with
P_suc = 1 / ((1 − prior)/prior · X + r) (eq. 3.3), is detected independently with
P_det = σ(h0 + h1·a) (eq. 3.4) and is fined C_p while fewer than n_f fines were levied.  The attack
ends on success or when no candidate is left.  Every action must beat stopping by more than
1e-9 × the largest amount of money involved; ties stop.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from deid_sql.adversary.params import AdversaryParams


@dataclass(frozen=True)
class Attack:
    """The optimal known-group attack on a target whose external group holds X candidates."""

    value: float  # V(x0): the expected profit from the start, paying C_d
    access: bool  # does the adversary buy D_e from x0?
    link: bool  # would it link once D_e is held (C_d sunk)?
    after_access: float  # the value once D_e is held: link and attack, or stop (0)
    p_reid: float  # probability of re-identification from x0 under the optimal policy
    planned: int  # exploits made when every attempt fails and goes unnoticed (after linking)


@functools.cache
def attack(params: AdversaryParams, x: int) -> Attack:
    """Solve the attack on a group of ``x`` external candidates by backward induction over the
    attempts a = x, x − 1, …, 0 (one list entry per count of fines paid)."""
    c_d, c_l, c_e = params.access_cost, params.link_cost, params.exploit_cost
    gain, fine, n_f, gamma, prior = params.gain, params.penalty, params.max_penalties, params.discount, params.prior
    tie = 1e-9 * max(1.0, gain, fine, c_d, c_e, c_l)
    fines = range(n_f + 1) if n_f is not None else range(1)  # unbounded: the count never matters
    value = [0.0 for _ in fines]  # a = x: no candidate left, the attack is over
    success = [0.0 for _ in fines]
    go_unnoticed: list[bool] = []  # exploit? at a = x − 1, …, 0 with no fine paid (read backwards)
    for a in range(x - 1, -1, -1):
        r = x - a
        p_suc = 1.0 / ((1.0 - prior) / prior * x + r)
        p_det = 1.0 / (1.0 + math.exp(-(params.h0 + params.h1 * a)))
        new_value, new_success = [], []
        for p in fines:
            fined = n_f is None or p < n_f
            caught = min(p + 1, n_f) if n_f is not None else p
            q = -c_e + p_suc * gain - (p_det * fine if fined else 0.0) + gamma * (1.0 - p_suc) * (
                p_det * value[caught] + (1.0 - p_det) * value[p])
            go = q > tie
            new_value.append(q if go else 0.0)
            new_success.append(p_suc + (1.0 - p_suc) * (p_det * success[caught] + (1.0 - p_det) * success[p])
                               if go else 0.0)
            if p == 0:
                go_unnoticed.append(go)
        value, success = new_value, new_success
    link_q = -c_l + gamma * value[0]
    link = link_q > tie
    access_q = -c_d + gamma * (link_q if link else 0.0)
    access = access_q > tie
    planned = 0
    for go in reversed(go_unnoticed):  # a = 0, 1, …: exploits until the first stop
        if not go:
            break
        planned += 1
    return Attack(max(access_q, 0.0), access, link, link_q if link else 0.0,
                  success[0] if access and link else 0.0, planned if link else 0)


@dataclass(frozen=True)
class Thresholds:
    k: int  # smallest X not fully exploited from x0
    k_prime: int  # smallest X not attacked from x0
    k_prime_sunk: int  # smallest X not attacked once D_e is held


def thresholds(params: AdversaryParams, limit: int = 400) -> Thresholds:
    """k, k′ and k′ with C_d sunk by solving X = 1, 2, … until nobody links (at most ``limit``)."""
    k = k_prime = None
    for x in range(1, limit + 1):
        a = attack(params, x)
        if k is None and not (a.access and a.link and a.planned == x):
            k = x
        if k_prime is None and not (a.access and a.link):
            k_prime = x
        if not a.link:
            assert k is not None and k_prime is not None
            return Thresholds(k, k_prime, x)
    raise AssertionError(f"the adversary still links at X = {limit}")


def known_p_reid(params: AdversaryParams, population: int) -> float:
    """P_reid of a record whose group has ``population`` people, the adversary knowing its group:
    X = max(1, round(prior · population)) external candidates (METHODS.md decision 7)."""
    return attack(params, max(1, round(params.prior * population))).p_reid


def unknown_p_reid(params: AdversaryParams, population: int, total: int, external: int) -> float:
    """The unknown-group scenario (eq. 3.6): the adversary buys D_e when the expected value of holding
    it, over its belief Binomial(external, population / total) about X, beats C_d; the attack then
    meets the actual X.  Terms of the belief below 1e-16 are left out (they move the expectation by
    far less than the 1e-9 × scale tie)."""
    p = population / total
    expected = 0.0
    for k in range(1, external + 1):
        if p >= 1.0:
            mass = 1.0 if k == external else 0.0
        else:
            mass = math.exp(math.lgamma(external + 1) - math.lgamma(k + 1) - math.lgamma(external - k + 1)
                            + k * math.log(p) + (external - k) * math.log1p(-p))
        if mass > 1e-16:
            expected += mass * attack(params, k).after_access
    tie = 1e-9 * max(1.0, params.gain, params.penalty, params.access_cost, params.exploit_cost, params.link_cost)
    if -params.access_cost + params.discount * expected <= tie:
        return 0.0
    x = max(1, round(params.prior * population))
    return attack(params, x).p_reid if attack(params, x).link else 0.0
