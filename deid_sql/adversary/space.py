"""The factored state space, enumerated for the LP solvers.

A sink cluster (§3.4) holds every descendant of x_start = [F, F, 0, F, T, T, g, g]
that has not terminated: after a ≥ 1 exploits, with or without success (X_s), with
the last exploit detected or not (X_d), and X_p penalties so far.  Its states are laid
out by attempts a (so X_r = g − a), then X_s, then X_d, then X_p, which gives every
state a closed-form index and lets the exploit rows be built with numpy.

Reachable combinations after a exploits (C = n_f, or unbounded):
  X_d = F: X_p ∈ 0 … min(a − 1, C);   X_d = T: X_p ∈ 1 … min(a, C).
States with X_t = T are absorbing with value 0 and are not LP variables.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import State, detection_probability, exploit_reward, next_penalties, success_probability
from .params import AdversaryParams


@dataclass(frozen=True)
class ExploitRows:
    """One LP row per state where exploit is offered: V(x) ≥ R + γ Σ_k P_k V(succ_k)."""

    state: np.ndarray  # (rows,) state index
    reward: np.ndarray  # (rows,)
    successors: np.ndarray  # (rows, 4) state indices: (s', d') = (T,T), (T,F), (F,T), (F,F)
    probabilities: np.ndarray  # (rows, 4)


class ClusterSpace:
    """All non-terminated states of the sink cluster with X_g = g."""

    def __init__(self, params: AdversaryParams, g: int) -> None:
        self.params = params
        self.g = int(g)
        cap = self.g if params.max_penalties is None else params.max_penalties
        a = np.arange(self.g + 1)
        self.n_false = np.where(a == 0, 1, np.minimum(a - 1, cap) + 1)  # X_d = F block per (a, X_s)
        self.n_true = np.where(a == 0, 0, np.minimum(a, cap))  # X_d = T block
        per_a = self.n_false + self.n_true
        width = np.where(a == 0, 1, 2 * per_a)  # X_s = F and X_s = T, except at a = 0
        self.per_a = per_a
        self.offset = np.concatenate(([0], np.cumsum(width)[:-1]))
        self.size = int(width.sum())
        self.cap = cap

    def index(self, s: np.ndarray | int, d: np.ndarray | int, p: np.ndarray | int,
              a: np.ndarray | int) -> np.ndarray:
        s, d, p, a = (np.asarray(x, dtype=np.int64) for x in (s, d, p, a))
        within = np.where(d == 1, self.n_false[a] + p - 1, p)
        return self.offset[a] + s * self.per_a[a] + within

    def states(self) -> list[State]:
        """Every state as a Table 3.1 vector (for tests and inspection; O(size))."""
        out = []
        for a in range(self.g + 1):
            for s in ((0,) if a == 0 else (0, 1)):
                for p in range(int(self.n_false[a])):
                    out.append(State(False, False, p, bool(s), True, True, self.g, self.g - a))
                for p in range(1, int(self.n_true[a]) + 1):
                    out.append(State(False, True, p, bool(s), True, True, self.g, self.g - a))
        return out

    def exploit_rows(self) -> ExploitRows:
        """Exploit is offered where X_s = F and X_r > 0."""
        params = self.params
        parts_state, parts_p, parts_d, parts_a = [], [], [], []
        for a in range(self.g):  # a = g has no candidate left
            pf = np.arange(int(self.n_false[a]))
            pt = np.arange(1, int(self.n_true[a]) + 1)
            parts_p += [pf, pt]
            parts_d += [np.zeros(pf.size, np.int64), np.ones(pt.size, np.int64)]
            parts_a += [np.full(pf.size + pt.size, a)]
        p = np.concatenate(parts_p) if parts_p else np.zeros(0, np.int64)
        d = np.concatenate(parts_d) if parts_d else np.zeros(0, np.int64)
        a = np.concatenate(parts_a) if parts_a else np.zeros(0, np.int64)
        parts_state.append(self.index(0, d, p, a))
        state = parts_state[0]
        r = self.g - a
        succ_prob = success_probability(self.g, r, params.prior)
        det = detection_probability(a, params.h0, params.h1)
        reward = exploit_reward(params, self.g, r, p) if a.size else np.zeros(0)
        p_det = np.minimum(next_penalties(params, p), self.cap)
        successors = np.stack([self.index(1, 1, p_det, a + 1), self.index(1, 0, p, a + 1),
                               self.index(0, 1, p_det, a + 1), self.index(0, 0, p, a + 1)], axis=1)
        probabilities = np.stack([succ_prob * det, succ_prob * (1 - det),
                                  (1 - succ_prob) * det, (1 - succ_prob) * (1 - det)], axis=1)
        return ExploitRows(state, np.asarray(reward, dtype=np.float64), successors, probabilities)

    def success_states(self) -> np.ndarray:
        """Indices of the states with X_s = T (x_suc of eq. 3.5)."""
        out = [self.offset[a] + self.per_a[a] + np.arange(int(self.per_a[a])) for a in range(1, self.g + 1)]
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)
