"""The fast path: metrics computed in-process on the cell arrays (numpy).

Sample cells are grouped by mixed-radix keys; census counts of those groups come
from a dense prefix-sum cube by inclusion–exclusion over the 2^d box corners
when the recoding's groups are intervals and the cube fits in memory, otherwise
from a scan of the population cells.  KL and Iyengar's loss split into per-QI
sums over marginals (METHODS.md decision 3), so they cost O(domain size).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..cells import Cells
from ..limits import require_sizes
from ..recoding import Recoding
from .metrics import RawSums
from .riskmodel import PopulationRisk, RecordRisk, expected_reidentifications, group_risks

CUBE_LIMIT = 16_000_000  # prefix-sum cube entries (int64) kept in memory at most
_KEY_LIMIT = 2**62
_DENSE_FACTOR = 16  # group keys counted in a dense array when the key space ≤ 16 × cells


class FastEvaluator:
    """Evaluates recodings against fixed sample and population cells."""

    def __init__(self, sample: Cells, population: Cells | None, sizes: Sequence[int],
                 gamma: float = 1.0, cube_limit: int = CUBE_LIMIT, record_risk: RecordRisk | None = None) -> None:
        self.sample = sample
        self.record_risk: RecordRisk = record_risk or PopulationRisk(gamma)
        self.population = population
        self.sizes = tuple(int(s) for s in sizes)
        require_sizes([f"#{q + 1}" for q in range(len(self.sizes))], self.sizes)  # before the marginals
        self.gamma = float(gamma)
        self.marginals = [sample.marginal(q, n).astype(np.float64) for q, n in enumerate(self.sizes)]
        self.cube: np.ndarray | None = None
        self._strides: np.ndarray | None = None
        shape = tuple(n + 1 for n in self.sizes)
        if population is not None and 0 < int(np.prod(shape, dtype=np.float64)) <= cube_limit:
            self.cube = self._prefix_cube(population, shape)
            self._strides = np.array([s // 8 for s in self.cube.strides], dtype=np.int64)
        d = len(self.sizes)
        # corner c takes the high side on the axes of subset c; its sign is (−1)^(#low sides)
        self._subsets = np.array([[(c >> q) & 1 for q in range(d)] for c in range(1 << d)], dtype=np.int64)
        self._signs = np.where((d - self._subsets.sum(axis=1)) % 2 == 1, -1, 1).astype(np.int64)

    @staticmethod
    def _prefix_cube(population: Cells, shape: tuple[int, ...]) -> np.ndarray:
        """P[x] = people with every position_q < x_q (a zero row/column pads each axis)."""
        flat = np.ravel_multi_index(tuple(population.positions[:, q] + 1 for q in range(len(shape))), shape) \
            if len(shape) else np.zeros(len(population), dtype=np.int64)
        cube = np.bincount(flat, weights=population.counts, minlength=int(np.prod(shape))).astype(np.int64)
        cube = cube.reshape(shape)
        for axis in range(len(shape)):
            np.cumsum(cube, axis=axis, out=cube)
        return cube

    def _group_keys(self, rec: Recoding, positions: np.ndarray) -> np.ndarray:
        """Mixed-radix key of every cell's group (C order over the QIs' group counts)."""
        key = np.zeros(positions.shape[0], dtype=np.int64)
        for q, qrec in enumerate(rec.qis):
            key *= qrec.n_groups
            key += qrec.group_of[positions[:, q]]
        return key

    def _sample_groups(self, rec: Recoding) -> tuple[np.ndarray | None, np.ndarray, list[np.ndarray]]:
        """Sorted group keys (None when they would overflow int64), their sample counts m,
        and each group's id per QI."""
        counts, positions = self.sample.counts, self.sample.positions
        radix = [q.n_groups for q in rec.qis]
        space = float(np.prod(radix, dtype=np.float64))
        if space >= _KEY_LIMIT:
            gids = np.stack([q.group_of[positions[:, i]] for i, q in enumerate(rec.qis)], axis=1)
            rows, inv = np.unique(gids, axis=0, return_inverse=True)
            m = np.bincount(inv.ravel(), weights=counts)
            return None, m, [rows[:, i] for i in range(rows.shape[1])]
        key = self._group_keys(rec, positions)
        if space <= _DENSE_FACTOR * counts.size:  # a dense count array beats sorting
            full = np.bincount(key, weights=counts, minlength=int(space))
            uniq = np.flatnonzero(full)
            m = full[uniq]
        else:
            uniq, inv = np.unique(key, return_inverse=True)
            m = np.bincount(inv.ravel(), weights=counts)
        ids: list[np.ndarray] = []
        rest = uniq.copy()
        for n in reversed(radix):
            ids.append(rest % n)
            rest //= n
        return uniq, m.astype(np.float64), ids[::-1]

    def groups(self, rec: Recoding) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per generalized group with sample records: m, the census count, and
        g = max(census, m) (METHODS.md decision 1)."""
        uniq, m, ids = self._sample_groups(rec)
        census = self.census_of(rec, uniq, ids, m)
        return m, census, np.maximum(census, m)

    def raw(self, rec: Recoding) -> RawSums:
        """The group sums of ``rec`` (see ``metrics.finish`` for the metrics)."""
        m, census, g = self.groups(rec)
        record = group_risks(self.record_risk, m, g)
        w_log = 0.0
        lm = 0.0
        for q, qrec in enumerate(rec.qis):
            width = qrec.widths[qrec.group_of].astype(np.float64)
            w_log += float(self.marginals[q] @ np.log(width))
            if self.sizes[q] > 1:
                lm += float(self.marginals[q] @ ((width - 1.0) / (self.sizes[q] - 1)))
        risk_sum = float((m * record).sum())
        return RawSums(
            risk_sum=risk_sum,
            expected_reidentifications=expected_reidentifications(self.record_risk, m, g, risk_sum),
            max_record_risk=float(record.max()),
            k=int(m.min()),
            sample_unique_records=int(np.count_nonzero(m == 1)),
            groups=int(m.size),
            kl_group_sum=float((m * np.log(m)).sum()) - w_log,
            lm_sum=lm,
            discernibility=float((m * m).sum()),
            corrected_groups=int(np.count_nonzero(census < m)),
            records=int(self.sample.counts.sum()),
        )

    def census_of(self, rec: Recoding, uniq: np.ndarray | None, ids: list[np.ndarray],
                  m: np.ndarray) -> np.ndarray:
        """Census counts of the groups (sorted keys ``uniq`` or per-QI ids ``ids``) of ``rec``:
        the sample counts ``m`` without a population, else cube box sums or a cell scan.
        Shared with the full-domain evaluator, which groups cells its own way."""
        if self.population is None:
            return m
        if self.cube is not None and rec.contiguous:
            return self._census_cube(rec, ids)
        return self._census_scan(rec, uniq, ids)

    def group_sizes(self, rec: Recoding, ids: list[np.ndarray], m: np.ndarray) -> np.ndarray:
        """g = max(census, m) of groups of ``rec`` given by their group id per QI and sample
        counts ``m`` (= m without a population).  The groups must be distinct and sorted by
        their ids (lexicographically, QIs in order), as the full-domain evaluator's are: their
        mixed-radix keys are then sorted too, and the census scan matches against them."""
        if self.population is None:
            return m
        radix = [q.n_groups for q in rec.qis]
        uniq: np.ndarray | None = None
        if float(np.prod(np.array(radix, dtype=np.float64))) < _KEY_LIMIT:
            uniq = np.zeros(m.size, dtype=np.int64)
            for c, n in zip(ids, radix):
                uniq = uniq * n + c
        census = self.census_of(rec, uniq, ids, m)
        return np.maximum(np.asarray(census, dtype=np.float64), m)

    def _census_cube(self, rec: Recoding, group_ids: list[np.ndarray]) -> np.ndarray:
        lows, highs = [], []
        for q, qrec in enumerate(rec.qis):
            first, last = qrec.bounds()
            lows.append(first[group_ids[q]])
            highs.append(last[group_ids[q]])
        return self.box_census(lows, highs)

    def box_census(self, lows: list[np.ndarray], highs: list[np.ndarray]) -> np.ndarray:
        """People in each box [lows_q, highs_q] (inclusive, per QI) by inclusion–exclusion
        over the prefix cube: corner = low corner + the widths of a subset of the axes, all
        2^d corners from one small matrix product, gathered at once, signed and summed."""
        assert self.cube is not None and self._strides is not None
        low = np.zeros(lows[0].size, dtype=np.int64)
        span = np.empty((len(lows), lows[0].size), dtype=np.int64)
        for q, (lo, hi) in enumerate(zip(lows, highs)):
            low += lo * self._strides[q]
            span[q] = (hi + 1 - lo) * self._strides[q]
        idx = low + self._subsets @ span
        return (self._signs @ self.cube.reshape(-1)[idx]).astype(np.float64)

    def _census_scan(self, rec: Recoding, uniq: np.ndarray | None, ids: list[np.ndarray]) -> np.ndarray:
        assert self.population is not None
        pop = self.population
        if uniq is None:  # key space too large for int64: match rows through a dict
            index = {tuple(int(g[j]) for g in ids): j for j in range(ids[0].size)}
            pg = [q.group_of[pop.positions[:, i]] for i, q in enumerate(rec.qis)]
            census = np.zeros(ids[0].size)
            for r in range(pop.counts.size):
                j = index.get(tuple(int(g[r]) for g in pg))
                if j is not None:
                    census[j] += pop.counts[r]
            return census
        pkey = self._group_keys(rec, pop.positions)
        match = np.searchsorted(uniq, pkey)
        match[match == uniq.size] = 0
        hit = uniq[match] == pkey
        return np.bincount(match[hit], weights=pop.counts[hit], minlength=uniq.size).astype(np.float64)
