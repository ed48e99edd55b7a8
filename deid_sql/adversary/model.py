"""The factored MDP of seed 002 §3.3: state variables, actions, rewards, probabilities.

A state is the vector [X_t, X_d, X_p, X_s, X_a, X_l, X_g, X_r] of Table 3.1; the
actions are Table 3.2's.  METHODS.md decision 7 fixes what the chapter leaves loose:

* rewards are taken in expectation at the step that causes them: an exploit yields
  −C_e + P_suc·G − P_det·C_p·[X_p < n_f] (with discount 1 this equals eq. 3.2's
  reward-on-next-state form);
* in an exploit, success (eq. 3.3, X_r before the decrement) and detection (eq. 3.4,
  attempts so far X_g − X_r before the decrement) are independent; X_p counts the
  detections that were penalized, so it stops at n_f;
* the attack ends when the target is re-identified or when no candidate is left after
  linking (Fig. 3.3(d) read as X_l = T ∧ X_r = 0).

Actions are offered only where they change something (access before access, link
after access and before link, exploit after link with candidates left and no
success); terminate is always offered.  Once X_t = T the state is absorbing with value 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy import stats

from ..errors import DeidError, SpecError
from .params import AdversaryParams

TERMINATE, ACCESS, LINK, EXPLOIT = "terminate", "access", "link", "exploit"
TAIL = 1e-12  # belief support is cut where the Binomial's tail mass falls below this


class State(NamedTuple):
    """[X_t, X_d, X_p, X_s, X_a, X_l, X_g, X_r] (Table 3.1)."""

    t: bool
    d: bool
    p: int
    s: bool
    a: bool
    l: bool  # noqa: E741 - the chapter's X_l
    g: int
    r: int


X0 = State(False, False, 0, False, False, False, 0, 0)


def post_access(g: int) -> State:
    return State(False, False, 0, False, True, False, g, g)


def cluster_start(g: int) -> State:
    """x_start = [F, F, 0, F, T, T, g, g]: linked, nothing exploited yet (§3.4)."""
    return State(False, False, 0, False, True, True, g, g)


def success_probability(g: np.ndarray | int, r: np.ndarray | int, prior: float) -> np.ndarray:
    """Eq. 3.3: 1 / ((1 − prior)/prior · X_g + X_r), with X_r before the decrement."""
    return 1.0 / ((1.0 - prior) / prior * np.asarray(g, dtype=np.float64) + np.asarray(r, dtype=np.float64))


def detection_probability(attempts: np.ndarray | int, h0: float, h1: float) -> np.ndarray:
    """Eq. 3.4: the sigmoid of h0 + h1 · (attempts so far)."""
    z = h0 + h1 * np.asarray(attempts, dtype=np.float64)
    return 1.0 / (1.0 + np.exp(-z))


def exploit_reward(params: AdversaryParams, g: np.ndarray | int, r: np.ndarray | int,
                   p: np.ndarray | int) -> np.ndarray:
    """Expected reward of one exploit in state (X_g = g, X_r = r, X_p = p)."""
    s = success_probability(g, r, params.prior)
    d = detection_probability(np.asarray(g) - np.asarray(r), params.h0, params.h1)
    fined = np.ones_like(s) if params.max_penalties is None else (np.asarray(p) < params.max_penalties)
    return -params.exploit_cost + s * params.gain - d * params.penalty * fined


def next_penalties(params: AdversaryParams, p: np.ndarray | int) -> np.ndarray:
    """X_p after a detected exploit: one more, unless n_f penalties were already levied."""
    p = np.asarray(p)
    return p + 1 if params.max_penalties is None else np.where(p < params.max_penalties, p + 1, p)


@dataclass(frozen=True)
class Belief:
    """The adversary's distribution of X_g after access: values and probabilities."""

    sizes: np.ndarray  # int64, ascending
    probabilities: np.ndarray  # float64, sums to 1

    @classmethod
    def known(cls, g: int) -> Belief:
        """The known-group scenario: P(G = g) = 1."""
        return cls(np.array([int(g)], dtype=np.int64), np.array([1.0]))

    @classmethod
    def binomial(cls, n: int, p: float, tail: float = TAIL) -> Belief:
        """Eq. 3.6: Binomial(n, p), cut where either tail holds less than ``tail`` and
        renormalized (METHODS.md decision 7)."""
        if not 0 <= p <= 1:
            raise SpecError(f"group density {p!r} is outside [0, 1]; check the population counts")
        if int(n) * float(p) < TAIL:  # every size above 0 lies in the cut tail (and scipy overflows on tiny p)
            return cls(np.array([0], dtype=np.int64), np.array([1.0]))
        dist = stats.binom(int(n), float(p))
        lo = int(max(0, dist.ppf(tail) - 1))
        hi = int(min(n, dist.isf(tail) + 1))
        sizes = np.arange(lo, hi + 1, dtype=np.int64)
        probs = dist.pmf(sizes)
        return cls(sizes, probs / probs.sum())

    @property
    def key(self) -> tuple[bytes, bytes]:
        return self.sizes.tobytes(), self.probabilities.tobytes()


def external_group_size(params: AdversaryParams, population_size: np.ndarray) -> np.ndarray:
    """X_g of a record whose generalized group has ``population_size`` people:
    max(1, round(prior · g)) (METHODS.md decision 7)."""
    return np.maximum(1, np.rint(params.prior * np.asarray(population_size, dtype=np.float64))).astype(np.int64)


def check_external(params: AdversaryParams, external: np.ndarray, population: np.ndarray) -> None:
    """An external dataset cannot be smaller than a group it is supposed to hold."""
    if params.external_size is None or external.size == 0:
        return
    worst = int(np.argmax(external))
    if external[worst] > params.external_size:
        raise DeidError(
            f"adversary external_size = {params.external_size:,} is smaller than a group: prior {params.prior:g} × "
            f"{int(population[worst]):,} people puts {int(external[worst]):,} of them in the external dataset; "
            "omit external_size (it defaults to prior × population total) or set prior = external_size / "
            "population total")


def belief_for(params: AdversaryParams, population_size: float, population_total: float) -> Belief:
    """The belief of one record's adversary in the configured scenario."""
    if params.scenario == "known":
        return Belief.known(int(external_group_size(params, np.array([population_size]))[0]))
    n = external_size(params, population_total)
    return Belief.binomial(n, float(population_size) / float(population_total))


def external_size(params: AdversaryParams, population_total: float) -> int:
    """n: the configured external dataset size, else prior × population total."""
    if params.external_size is not None:
        return int(params.external_size)
    return max(1, int(round(params.prior * float(population_total))))
