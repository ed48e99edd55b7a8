"""Chain evaluation: risk and loss along a chain, updating only what a flip changes.

Consecutive policies on a chain differ in one boundary of one QI: keeping boundary b of QI q
splits one interval [lo, hi] into [lo, b] and [b+1, hi].  Only the groups whose q-interval
is [lo, hi] change, and each of them splits in two at most: its cells at q-positions ≤ b stay,
the others move to a new group.  No other cell changes group and no two groups ever merge.

So the evaluator keeps the groups, not just their totals: a group id per sample cell, and per
group (one array row per field, so numpy's loops run over contiguous memory) its sample count m,
census count, terms m·r(g) and m ln m, and census box (a flat corner index into the prefix
cube plus the box's span on each axis).  Cells are pre-sorted by their position on each QI,
so the cells of [lo, hi] are one contiguous slice of that order and those of [b+1, hi] its
tail.  A step then:

1. reads the slice's group ids and de-duplicates them with a scatter/gather on a scratch array
   (linear, no sort): these are the groups of [lo, hi];
2. sums each group's staying and moving cells' counts (one ``bincount``): m_left, m_right;
3. takes one box sum per group for the right part (2^d corners of the prefix cube; the left
   part's census is the old census minus it, exact in integers);
4. updates the running Σ m·r(g) and Σ m ln m by the new terms minus the stored old ones, and
   KL's width term by the three intervals' marginal sums (prefix sums over positions);
5. gives the groups that really split a fresh id and relabels the cells.

Most steps touch a few dozen groups, so a step's fixed cost (some sixty numpy calls) would
dominate.  Steps whose groups are disjoint commute, so consecutive ones run as one batch: the
plan takes the next flips that split distinct intervals, the batch gathers their cells step by
step and ends before the first step that meets a group an earlier one holds (letting later
disjoint steps run ahead of it was tried: batches grew by 4 %, as a step that clashes mostly
shares its groups with the steps after it too); each step's changes of the two sums come out
of one ``bincount`` per sum, and the metrics after each step are reported in chain order
(figures and profile: ``bench/frontier.py``, against the previous, re-keying evaluator, kept
as a baseline in ``tests/baselines/chain_rekey.py``).

The two ends of a chain are evaluated in full, as ``Evaluator.evaluate`` does: the running
sums drift by rounding (the bottom came out at risk 0.9999999999999992, loss 3.5e-16), and
the ends are the policies every chain shares (RCS: top and bottom; SHS: the corners it
has evaluated already), so they must be the exact figures a frontier compares.  Being shared,
their full sums are kept (the last ``_END_CACHE`` ends).
"""

from __future__ import annotations

import math

import numpy as np

from ..policies.lattice import Chain, Lattice, Policy
from .fast import FastEvaluator
from .groups import box_people, digit_groups
from .metrics import Normalizers, RawSums, normalized

_M, _CENSUS, _RISK, _XLOGX, _BASE, _BOX = 0, 1, 2, 3, 4, 5  # columns of the group state
Step = tuple[int, int, int, int, int, int, int]  # q, b, lo, hi and the cells' slice i0, ib, i1 (see _plan)
_END_CACHE = 256  # chain ends whose full sums are kept
_PLAN_STEPS = 64  # steps planned for one batch at most
_PLAN_CELLS = 8192  # cells gathered for one batch at most (beyond its first step)


def intervals(bits: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """One QI's intervals under its boundary ``bits``: the first position of each position's
    interval (``starts``), and at each interval's first position its last (``ends``)."""
    gid = np.concatenate(([0], np.cumsum(bits, dtype=np.int64)))
    first = np.concatenate(([0], np.flatnonzero(bits) + 1))
    ends = np.zeros(size, dtype=np.int64)
    ends[first] = np.concatenate((first[1:] - 1, [size - 1]))
    return first[gid], ends


class RunningSums:
    """The figures of a chain evaluator's running sums (``risk_sum``, ``xlogx``, ``width_log``)
    and of a policy's full sums, normalized as ``Evaluator.evaluate`` normalizes them."""

    norm: Normalizers
    risk_sum: float
    xlogx: float
    width_log: float

    def _metrics(self) -> tuple[float, float]:
        """Normalized (risk, loss) of the running sums."""
        risk, loss, _ = normalized(self.risk_sum, self.xlogx - self.width_log, self.norm)
        return risk, loss

    def _exact(self, raw: RawSums) -> tuple[float, float]:
        """Normalized (risk, loss) of a policy's sums computed in full: ``Evaluator.evaluate``'s figures."""
        risk, loss, _ = normalized(raw.risk_sum, raw.kl_group_sum, self.norm)
        return risk, loss


class ChainEvaluator(RunningSums):
    """Normalized (risk, loss) of every policy of a chain."""

    def __init__(self, lattice: Lattice, fast: FastEvaluator, normalizers: Normalizers) -> None:
        self.lattice = lattice
        self.fast = fast
        self.norm = normalizers
        self.sizes = [int(s) for s in fast.sizes]
        d = len(self.sizes)
        self.pos = fast.sample.positions.astype(np.int64)
        self.counts = fast.sample.counts.astype(np.float64)
        cells = self.counts.size
        # per QI: cell indices by position (stable), their counts in that order, and for each
        # position p the index of the first cell at a position ≥ p (Python lists: read per step)
        self.order = [np.argsort(self.pos[:, q], kind="stable") for q in range(d)]
        self.sorted_counts = [self.counts[o] for o in self.order]
        self.first = [np.searchsorted(self.pos[o, q], np.arange(n + 1)).tolist()
                      for q, (o, n) in enumerate(zip(self.order, self.sizes))]
        self.prefix = [np.concatenate(([0.0], np.cumsum(m))).tolist() for m in fast.marginals]
        self.qi_of_bit = [int(q) for q in lattice.qi_of_bit]
        self.offsets = list(lattice.offsets)
        self.record_risk = fast.record_risk
        self.has_census = fast.population is not None
        self.incremental = fast.population is None or fast.cube is not None
        if self.has_census and fast.cube is not None:
            # the steps' box sums are random reads of the census's prefix cube (int32 when the
            # population fits: half the memory they miss on)
            self.cube_flat = fast.census.cube_flat
            self.cube_strides = fast.census.strides
        # group state, one column per group id and one row per field: sample count m, census
        # count, the terms m·r(g) and m ln m, and the census box (flat low corner in the prefix
        # cube, then its span on each axis; exact in float64, like the counts).  Column ``cells``
        # is a write-only sink for the half a group does not have.
        self.trash = cells
        self.arange = np.arange(cells + 1 + _PLAN_CELLS, dtype=np.int64)  # a batch's cells: one step's + the plan's
        self.mark = np.zeros(cells + 1, dtype=np.int64)
        self.sides = np.tile(np.array([0, 1], dtype=np.int64), _PLAN_STEPS)
        self.evens = 2 * self.arange
        self.cell_group = np.zeros(cells, dtype=np.int64)
        self.state = np.zeros((_BOX + d, cells + 1))
        self.groups = 0
        self.evaluations = 0
        self.batches = 0  # batches run (steps per batch: how far the steps' fixed cost is shared)
        self.end_sums: dict[Policy, RawSums] = {}

    @property
    def m(self) -> np.ndarray:
        """Sample count of each group id (the first ``groups`` are live)."""
        return self.state[_M]

    @property
    def census(self) -> np.ndarray:
        """Census count of each group id (= m without a population)."""
        return self.state[_CENSUS]

    # -- state ------------------------------------------------------------------------
    def _reset(self, policy: Policy) -> RawSums:
        """Intervals, groups and totals of ``policy``, computed from scratch."""
        d = len(self.sizes)
        self.starts, self.ends = [], []
        low_cols = []
        width_log = 0.0
        for q in range(d):
            bits = policy.qi_bits(q)
            starts, ends = intervals(bits, self.sizes[q])
            width_log += float(self.fast.marginals[q] @ np.log(ends[starts] - starts + 1.0))
            self.starts.append(starts.tolist())
            self.ends.append(ends.tolist())
            low_cols.append((starts[self.pos[:, q]], ends))
        self.width_log = width_log
        # group the cells by their intervals' starts (the group module's keys of digit tuples)
        rep, inv = digit_groups([lows for lows, _ in low_cols], self.sizes)
        groups = rep.size
        self.groups = groups
        self.cell_group[:] = inv
        state = self.state[:, :groups]
        state[_M] = m = np.bincount(self.cell_group, weights=self.counts, minlength=groups)
        if self.has_census:
            state[_BASE] = 0.0
            for q, (lows, ends) in enumerate(low_cols):
                low = lows[rep]
                stride = self.cube_strides[q]
                state[_BASE] += low * stride
                state[_BOX + q] = (ends[low] + 1 - low) * stride
            state[_CENSUS] = self._box_census(state)
        else:
            state[_CENSUS] = m
        state[_RISK] = m * self.record_risk(np.maximum(state[_CENSUS], m))
        state[_XLOGX] = m * np.log(m)
        raw = self._raw(policy)
        self.xlogx = raw.kl_group_sum + self.width_log
        self.risk_sum = raw.risk_sum
        return raw

    def _box_census(self, rows: np.ndarray) -> np.ndarray:
        """People in the census box of each group-state column of ``rows`` (flat low corner, then
        the span of each axis): ``groups.box_people`` over the prefix cube."""
        return box_people(self.cube_flat, rows[_BASE], rows[_BOX:_BOX + len(self.sizes)])

    def _raw(self, policy: Policy) -> RawSums:
        """The sums of a chain end, computed in full once: chains share their ends (every RCS
        chain runs top to bottom; SHS's chains end at corners it has evaluated), and a full
        evaluation costs as much as dozens of steps.  The oldest entries go first."""
        raw = self.end_sums.get(policy)
        if raw is None:
            raw = self.end_sums[policy] = self.fast.raw(policy.recoding())
            if len(self.end_sums) > _END_CACHE:
                del self.end_sums[next(iter(self.end_sums))]
        return raw

    def _plan(self, flips: list[int], i: int, steps: list[Step]) -> list[Step]:
        """``steps`` (planned before, not done yet: the flips from ``i`` on) extended by the flips
        after them that may join one batch, read-only: (q, b, lo, hi, and the cells' slice i0, ib,
        i1 in QI q's order) per step.  The plan stops before a step that would split an interval
        split earlier in the plan (its groups are that step's new ones) and before the cells
        gathered would pass ``_PLAN_CELLS`` (a later clash wastes them).  A planned step stays
        valid until it is done: the steps done before it split other intervals."""
        split: list[set[int]] = [set() for _ in self.sizes]
        total = 0
        for q, _, lo, _, i0, _, i1 in steps:
            split[q].add(lo)
            total += i1 - i0
        for bit in flips[i + len(steps): i + _PLAN_STEPS]:
            q = self.qi_of_bit[bit]
            b = bit - self.offsets[q]
            lo = self.starts[q][b]
            if lo in split[q]:
                break
            hi = self.ends[q][lo]
            first = self.first[q]
            i0, ib, i1 = first[lo], first[b + 1], first[hi + 1]
            total += i1 - i0
            if steps and total > _PLAN_CELLS:
                break
            split[q].add(lo)
            steps.append((q, b, lo, hi, i0, ib, i1))
        return steps

    def _narrow(self, q: int, b: int, lo: int, hi: int) -> None:
        """Keep boundary b of QI q in the intervals and KL's width term: [lo, hi] → [lo, b], [b+1, hi]."""
        prefix = self.prefix[q]
        self.width_log += ((prefix[b + 1] - prefix[lo]) * math.log(b - lo + 1.0)
                           + (prefix[hi + 1] - prefix[b + 1]) * math.log(hi - b + 0.0)
                           - (prefix[hi + 1] - prefix[lo]) * math.log(hi - lo + 1.0))
        self.starts[q][b + 1: hi + 1] = [b + 1] * (hi - b)
        ends = self.ends[q]
        ends[lo], ends[b + 1] = b, hi

    def _batch(self, steps: list[Step]) -> tuple[int, list[float], list[float]]:
        """Split the groups of the first steps of ``steps`` whose groups are pairwise disjoint (at
        least one step): the number of steps done and each one's change of Σ m·r(g) and Σ m ln m.

        Steps whose groups are disjoint commute: no group of one is a group of the other before
        or after it, so they are done at once, with one set of numpy calls for all of them.  The
        cells are gathered step by step (each step's left cells, then its right ones); a group
        first seen in an earlier step than a cell's is a clash, and the batch ends before the
        first step with one."""
        self.batches += 1
        pieces, weights, lens, runs, params = [], [], [], [], []
        for j, (q, b, lo, hi, i0, ib, i1) in enumerate(steps):
            if i0 < i1:  # a step without sample records changes no group
                pieces.append(self.order[q][i0:i1])
                weights.append(self.sorted_counts[q][i0:i1])
                lens += (ib - i0, i1 - ib)
                runs.append((j, i1 - i0))
            if self.has_census:
                stride = self.cube_strides[q]
                params.append((_BOX + q, (b + 1 - lo) * stride, (hi - b) * stride))
        if not pieces:
            return len(steps), [0.0] * len(steps), [0.0] * len(steps)
        cells = np.concatenate(pieces)
        counts = np.concatenate(weights)
        side = np.repeat(self.sides[:len(lens)], lens)  # 0: stays (left), 1: moves (right)
        ids = self.cell_group[cells]
        n = ids.size
        mark, arange = self.mark, self.arange
        mark[ids[::-1]] = arange[n - 1::-1]  # written last: the first cell of each group
        head = mark[ids]
        done = len(steps)
        if len(runs) > 1:
            step = np.repeat(np.array([j for j, _ in runs]), [k for _, k in runs])
            clash = step[head] != step
            if clash.any():
                done = int(step[clash].min())
                runs = [(j, k) for j, k in runs if j < done]
                n = sum(k for _, k in runs)
                cells, counts, side, step, ids, head = (a[:n] for a in (cells, counts, side, step, ids, head))
        is_head = head == arange[:n]
        groups = ids[is_head]
        # one step with cells (most batches): its figures are scalars, no per-group step needed
        group_step = step[is_head] if len(runs) > 1 else None
        u = groups.size
        mark[groups] = self.evens[:u]
        half = mark[ids] + side  # 2 × the cell's local group number, + 1 if it moves
        m_halves = np.bincount(half, weights=counts, minlength=2 * u)
        m_right = m_halves[1::2]
        old = self.state[:, groups]
        new = np.empty((2, *old.shape))  # the left halves, then the right halves
        new[:] = old
        new[0, _M] = m_halves[::2]
        new[1, _M] = m_right
        if self.has_census:
            # the right half's box starts at b+1 on its step's axis and spans hi − b; the left's spans b+1 − lo
            if group_step is None:
                col, shift, span = params[runs[0][0]]
                new[1, _BASE] += shift
                new[1, col] = span
                new[0, col] = shift
            else:
                col, shift, span = np.array(params)[group_step].T
                col = col.astype(np.intp)
                rows = arange[:u]
                new[1, _BASE] += shift
                new[1, col, rows] = span
                new[0, col, rows] = shift
            census_right = self._box_census(new[1])
        else:
            census_right = m_right
        new[1, _CENSUS] = census_right
        new[0, _CENSUS] -= census_right  # exact: integer counts
        m = new[:, _M]
        # g = max(census, m) ≥ 1 for a real half; an empty half (m = 0) gets g = 1 and terms 0
        one = np.maximum(m, 1.0)
        np.multiply(m, self.record_risk(np.maximum(new[:, _CENSUS], one)), out=new[:, _RISK])
        np.multiply(m, np.log(one, out=one), out=new[:, _XLOGX])
        delta = new[0, _RISK:_XLOGX + 1] + new[1, _RISK:_XLOGX + 1] - old[_RISK:_XLOGX + 1]
        if group_step is None:
            risks, xlogxs = [0.0] * done, [0.0] * done
            risks[runs[0][0]], xlogxs[runs[0][0]] = delta.sum(axis=1).tolist()
        else:
            risks = np.bincount(group_step, weights=delta[0], minlength=done).tolist()
            xlogxs = np.bincount(group_step, weights=delta[1], minlength=done).tolist()
        # ids: a group keeps its id for its left half, or for its right half if it has no left
        # one (written second, so it wins); a real split gives the right half a fresh id; a
        # group without a right half writes that half to the sink
        has_right = m_right > 0
        right_id = np.where(has_right, groups, self.trash)
        split = has_right & (new[0, _M] > 0)
        n_split = int(np.count_nonzero(split))
        if n_split:
            right_id[split] = arange[self.groups: self.groups + n_split]
            self.groups += n_split
            halves = np.empty(2 * u, dtype=np.int64)  # per local group: left id, right id
            halves[::2] = groups
            halves[1::2] = right_id
            self.cell_group[cells] = halves[half]
        self.state[:, groups] = new[0]
        self.state[:, right_id] = new[1]
        return done, risks, xlogxs

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
        flips = chain.flips.tolist()
        i = 0
        steps: list[Step] = []
        while i < len(flips):
            steps = self._plan(flips, i, steps)
            done, d_risk, d_xlogx = self._batch(steps)
            for (q, b, lo, hi, *_), dr, dx in zip(steps[:done], d_risk, d_xlogx):
                self._narrow(q, b, lo, hi)
                self.risk_sum += dr
                self.xlogx += dx
                i += 1
                risks[i], losses[i] = self._metrics()
            del steps[:done]
        if len(chain) > 1:  # the end in full, free of the steps' rounding drift
            risks[-1], losses[-1] = self._exact(self._raw(chain.end()))
        self.evaluations += len(chain)
        return risks, losses
