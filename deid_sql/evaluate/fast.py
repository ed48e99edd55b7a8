"""The fast path: metrics computed in-process on the cell arrays (numpy).

Sample cells are grouped by their keys and each group's census people counted by the group
module (``groups``: a prefix-sum cube when the groups are intervals, else a scan of the
population cells).  KL and Iyengar's loss split into per-QI sums over marginals (METHODS.md
decision 3), so they cost O(domain size).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..domains.limits import require_sizes
from ..domains.recoding import Recoding
from ..loading.cells import Cells
from .groups import CUBE_LIMIT, CensusCounts, group_cells, group_sizes
from .metrics import RawSums
from .riskmodel import PopulationRisk, RecordRisk, expected_reidentifications, group_risks

__all__ = ["CUBE_LIMIT", "FastEvaluator"]


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
        self.census = CensusCounts(population, self.sizes, cube_limit)

    @property
    def cube(self) -> np.ndarray | None:
        """The census's prefix-sum cube (None: census by scans)."""
        return self.census.cube

    def groups(self, rec: Recoding) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per generalized group with sample records: m, the census count, and
        g = max(census, m) (METHODS.md decision 1)."""
        grouped = group_cells(rec, self.sample)
        m = grouped.m
        census = self.census.census(rec, grouped.ids, m, grouped.keys)
        return m, census, group_sizes(census, m)

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
