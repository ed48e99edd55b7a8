"""The previous chain evaluator, kept as the benchmark's baseline and the tests' second opinion.

It re-keys the cells of the split interval at every step (``np.unique`` on mixed-radix group
keys, before and after the split) and recomputes the old groups' terms and census counts from
those keys.  ``deid_sql.evaluate.chain.ChainEvaluator`` keeps the groups themselves instead (ids,
sizes, census counts and boxes in arrays), which is what makes it faster; both must give the same
figures (``tests/test_chain_eval.py``), and ``bench/frontier.py`` measures one against the other in
the same run.  Same interface and the same exact chain ends (see ``chain``'s docstring).
"""

from __future__ import annotations

import numpy as np

from deid_sql.evaluate.chain import RunningSums, intervals
from deid_sql.evaluate.fast import FastEvaluator
from deid_sql.evaluate.groups import KEY_LIMIT
from deid_sql.evaluate.metrics import Normalizers, RawSums
from deid_sql.loading.cells import Cells
from deid_sql.policies.lattice import Chain, Lattice, Policy

_KEY_LIMIT = KEY_LIMIT


class RekeyChainEvaluator(RunningSums):
    """Normalized (risk, loss) of every policy of a chain, re-keying each step's cells."""

    def __init__(self, lattice: Lattice, fast: FastEvaluator, normalizers: Normalizers) -> None:
        self.lattice = lattice
        self.fast = fast
        self.norm = normalizers
        sample: Cells = fast.sample
        self.sizes = np.array(fast.sizes, dtype=np.int64)
        self.pos = sample.positions.astype(np.int64)
        self.counts = sample.counts.astype(np.float64)
        self.gamma = fast.gamma
        strides = np.ones(len(self.sizes), dtype=np.int64)
        for q in range(len(self.sizes) - 2, -1, -1):
            strides[q] = strides[q + 1] * self.sizes[q + 1]
        self.strides = strides
        self.order = [np.argsort(self.pos[:, q], kind="stable") for q in range(len(self.sizes))]
        self.sorted_pos = [self.pos[o, q] for q, o in enumerate(self.order)]
        self.prefix = [np.concatenate(([0.0], np.cumsum(m))) for m in fast.marginals]
        self.incremental = float(np.prod(self.sizes, dtype=np.float64)) < _KEY_LIMIT and (
            fast.population is None or fast.cube is not None)
        self.evaluations = 0

    # -- state ------------------------------------------------------------------------
    def _reset(self, policy: Policy) -> RawSums:
        """Interval starts/ends of ``policy`` and its totals, computed from scratch."""
        self.starts, self.ends = [], []
        for q in range(len(self.sizes)):
            bits = policy.qi_bits(q)
            starts, ends = intervals(bits, int(self.sizes[q]))
            self.starts.append(starts)
            self.ends.append(ends)
        raw = self.fast.raw(policy.recoding())
        self.width_log = sum(float(self.fast.marginals[q] @ np.log(self.ends[q][self.starts[q]] - self.starts[q] + 1.0))
                             for q in range(len(self.sizes)))
        self.xlogx = raw.kl_group_sum + self.width_log
        self.risk_sum = raw.risk_sum
        return raw

    def _terms(self, keys: np.ndarray, counts: np.ndarray, q: int) -> tuple[float, float]:
        """Σ m g^-γ and Σ m ln m over the groups the given cells form (current intervals)."""
        uniq, inv = np.unique(keys, return_inverse=True)
        m = np.bincount(inv.ravel(), weights=counts)
        if self.fast.population is None:
            g = m
        else:
            lows = [(uniq // self.strides[r]) % self.sizes[r] for r in range(len(self.sizes))]
            highs = [self.ends[r][lows[r]] for r in range(len(self.sizes))]
            g = np.maximum(self.fast.census.box(lows, highs), m)
        return float((m * self.fast.record_risk(g)).sum()), float((m * np.log(m)).sum())

    def _split(self, bit: int) -> None:
        """Keep boundary ``bit``: split its interval and update the totals."""
        q = int(self.lattice.qi_of_bit[bit])
        b = bit - self.lattice.offsets[q]  # boundary between positions b and b+1
        starts, ends = self.starts[q], self.ends[q]
        lo = int(starts[b])
        hi = int(ends[lo])
        i0 = np.searchsorted(self.sorted_pos[q], lo, "left")
        i1 = np.searchsorted(self.sorted_pos[q], hi, "right")
        cells = self.order[q][i0:i1]
        if cells.size:
            pos = self.pos[cells]
            keys = np.zeros(cells.size, dtype=np.int64)
            for r, start in enumerate(self.starts):
                keys += start[pos[:, r]] * self.strides[r]
            old_risk, old_xlogx = self._terms(keys, self.counts[cells], q)
        prefix = self.prefix[q]
        self.width_log -= (prefix[hi + 1] - prefix[lo]) * np.log(hi - lo + 1.0)
        starts[b + 1: hi + 1] = b + 1
        ends[lo], ends[b + 1] = b, hi
        self.width_log += (prefix[b + 1] - prefix[lo]) * np.log(b - lo + 1.0)
        self.width_log += (prefix[hi + 1] - prefix[b + 1]) * np.log(hi - b + 0.0)
        if cells.size:
            moved = pos[:, q] > b
            keys = keys + moved * (b + 1 - lo) * self.strides[q]
            new_risk, new_xlogx = self._terms(keys, self.counts[cells], q)
            self.risk_sum += new_risk - old_risk
            self.xlogx += new_xlogx - old_xlogx

    # -- API --------------------------------------------------------------------------
    def evaluate_chain(self, chain: Chain) -> tuple[np.ndarray, np.ndarray]:
        """Normalized risk and loss of each of the ``len(chain)`` policies, in chain order."""
        risks = np.empty(len(chain))
        losses = np.empty(len(chain))
        if not self.incremental:  # no cube: evaluate each policy in full
            for i, policy in enumerate(chain.policies()):
                risks[i], losses[i] = self._exact(self.fast.raw(policy.recoding()))
            self.evaluations += len(chain)
            return risks, losses
        risks[0], losses[0] = self._exact(self._reset(chain.start))
        for i, bit in enumerate(chain.flips, 1):
            self._split(int(bit))
            risks[i], losses[i] = self._metrics()
        if len(chain) > 1:  # the end in full, free of the steps' rounding drift
            risks[-1], losses[-1] = self._exact(self.fast.raw(chain.end().recoding()))
        self.evaluations += len(chain)
        return risks, losses

