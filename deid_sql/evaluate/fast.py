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
from ..recoding import Recoding
from .metrics import RawSums

CUBE_LIMIT = 16_000_000  # prefix-sum cube entries (int64) kept in memory at most
_KEY_LIMIT = 2**62


class FastEvaluator:
    """Evaluates recodings against fixed sample and population cells."""

    def __init__(self, sample: Cells, population: Cells | None, sizes: Sequence[int],
                 gamma: float = 1.0, cube_limit: int = CUBE_LIMIT) -> None:
        self.sample = sample
        self.population = population
        self.sizes = tuple(int(s) for s in sizes)
        self.gamma = float(gamma)
        self.marginals = [sample.marginal(q, n).astype(np.float64) for q, n in enumerate(self.sizes)]
        self.cube: np.ndarray | None = None
        self._strides: np.ndarray | None = None
        shape = tuple(n + 1 for n in self.sizes)
        if population is not None and 0 < int(np.prod(shape, dtype=np.float64)) <= cube_limit:
            self.cube = self._prefix_cube(population, shape)
            self._strides = np.array([s // 8 for s in self.cube.strides], dtype=np.int64)

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

    def _group_keys(self, rec: Recoding, positions: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        gids = [rec.qis[q].group_of[positions[:, q]] for q in range(len(self.sizes))]
        key = np.zeros(positions.shape[0], dtype=np.int64)
        for q, g in enumerate(gids):
            key *= rec.qis[q].n_groups
            key += g
        return key, gids

    def raw(self, rec: Recoding) -> RawSums:
        """The group sums of ``rec`` (see ``metrics.finish`` for the metrics)."""
        counts = self.sample.counts
        if float(np.prod([q.n_groups for q in rec.qis], dtype=np.float64)) >= _KEY_LIMIT:
            gids = [rec.qis[q].group_of[self.sample.positions[:, q]] for q in range(len(self.sizes))]
            _, first, inv = np.unique(np.stack(gids, axis=1), axis=0, return_index=True, return_inverse=True)
            uniq = None
        else:
            key, gids = self._group_keys(rec, self.sample.positions)
            uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
        inv = inv.ravel()
        m = np.bincount(inv, weights=counts).astype(np.float64)
        census = self._census(rec, gids, first, uniq, m)
        g = np.maximum(census, m)
        risk = m * np.power(g, -self.gamma)
        w_log = 0.0
        lm = 0.0
        for q, qrec in enumerate(rec.qis):
            width = qrec.widths[qrec.group_of].astype(np.float64)
            w_log += float(self.marginals[q] @ np.log(width))
            if self.sizes[q] > 1:
                lm += float(self.marginals[q] @ ((width - 1.0) / (self.sizes[q] - 1)))
        return RawSums(
            risk_sum=float(risk.sum()),
            expected_reidentifications=float((m / g).sum()),
            max_record_risk=float(np.power(g.min(), -self.gamma)),
            k=int(m.min()),
            sample_unique_records=int(np.count_nonzero(m == 1)),
            groups=int(m.size),
            kl_group_sum=float((m * np.log(m)).sum()) - w_log,
            lm_sum=lm,
            discernibility=float((m * m).sum()),
            corrected_groups=int(np.count_nonzero(census < m)),
            records=int(counts.sum()),
        )

    def _census(self, rec: Recoding, gids: list[np.ndarray], first: np.ndarray,
                uniq: np.ndarray | None, m: np.ndarray) -> np.ndarray:
        if self.population is None:
            return m
        if self.cube is not None and rec.contiguous:
            return self._census_cube(rec, [g[first] for g in gids])
        return self._census_scan(rec, gids, first, uniq)

    def _census_cube(self, rec: Recoding, group_ids: list[np.ndarray]) -> np.ndarray:
        assert self.cube is not None and self._strides is not None
        flat_cube = self.cube.reshape(-1)
        lows, highs = [], []
        for q, qrec in enumerate(rec.qis):
            first, last = qrec.bounds()
            lows.append(first[group_ids[q]] * self._strides[q])
            highs.append((last[group_ids[q]] + 1) * self._strides[q])
        d = len(lows)
        total = np.zeros(group_ids[0].size if d else 1, dtype=np.int64)
        for corner in range(1 << d):
            idx = np.zeros_like(total)
            lo_count = 0
            for q in range(d):
                if corner >> q & 1:
                    idx += highs[q]
                else:
                    idx += lows[q]
                    lo_count += 1
            if lo_count % 2:
                total -= flat_cube[idx]
            else:
                total += flat_cube[idx]
        return total.astype(np.float64)

    def _census_scan(self, rec: Recoding, gids: list[np.ndarray], first: np.ndarray,
                     uniq: np.ndarray | None) -> np.ndarray:
        assert self.population is not None
        pop = self.population
        if uniq is None:  # key space too large for int64: match rows through a dict
            index = {tuple(int(g[i]) for g in gids): j for j, i in enumerate(first)}
            pg = [rec.qis[q].group_of[pop.positions[:, q]] for q in range(len(self.sizes))]
            census = np.zeros(first.size)
            for r in range(pop.counts.size):
                j = index.get(tuple(int(g[r]) for g in pg))
                if j is not None:
                    census[j] += pop.counts[r]
            return census
        pkey, _ = self._group_keys(rec, pop.positions)
        match = np.searchsorted(uniq, pkey)
        match[match == uniq.size] = 0
        hit = uniq[match] == pkey
        return np.bincount(match[hit], weights=pop.counts[hit], minlength=uniq.size).astype(np.float64)
