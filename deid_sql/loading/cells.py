"""Cells: one row per distinct combination of QI positions, with a count.

Rows are touched once, by the backend's ``GROUP BY``; everything after that
works on these arrays, so a policy costs the same on 30 K rows or 300 M.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa


@dataclass(frozen=True)
class Cells:
    """``positions[i, q]`` is cell i's position in QI q's domain; ``counts[i]`` its size."""

    positions: np.ndarray  # (n_cells, n_qis) int32
    counts: np.ndarray  # (n_cells,) int64 (float64 for summed sampling weights)

    @property
    def total(self) -> int:
        return int(round(float(self.counts.sum())))

    def __len__(self) -> int:
        return int(self.counts.size)

    @classmethod
    def from_arrow(cls, table: pa.Table, n_qis: int, count: str = "n", exact: bool = False) -> Cells:
        """Build from a backend result with columns ``p0..p{n-1}`` and ``count``; ``exact`` keeps
        fractional counts (summed sampling weights: estimated people) instead of rounding."""
        cols = [np.asarray(table.column(f"p{q}").to_numpy(zero_copy_only=False), dtype=np.int32)
                for q in range(n_qis)]
        pos = np.stack(cols, axis=1) if cols else np.zeros((table.num_rows, 0), dtype=np.int32)
        raw = np.asarray(table.column(count).to_numpy(zero_copy_only=False), dtype=np.float64)
        counts = raw if exact else np.rint(raw).astype(np.int64)
        # GROUP BY returns cells in no fixed order: sort them so every sum over cells runs in
        # the same order and the same inputs give bit-identical metrics, run after run
        order = np.lexsort(pos.T[::-1]) if n_qis else np.arange(counts.size)
        return cls(np.ascontiguousarray(pos[order]), counts[order])

    def marginal(self, q: int, size: int) -> np.ndarray:
        """Total count at each position of QI q (length ``size``)."""
        return np.bincount(self.positions[:, q], weights=self.counts, minlength=size)

    def to_arrow(self) -> pa.Table:
        cols = {f"p{q}": pa.array(self.positions[:, q]) for q in range(self.positions.shape[1])}
        cols["n"] = pa.array(self.counts)
        return pa.table(cols)
