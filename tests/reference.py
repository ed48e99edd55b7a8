"""A tiny pure-Python reference for the metrics: records one by one, no numpy.

Deliberately naive so it can be read against the papers' formulas: each record's
group is the tuple of its QIs' group ids; g = max(census, sample) (METHODS.md 1);
risk = Σ_records (1/g)^γ (seed 001 eq. 1); KL per seed 000 eq. 4 with Q spreading
a group's records uniformly over the cells it covers (METHODS.md 3).
"""

from __future__ import annotations

import math
from collections import Counter

import pyarrow as pa

from .problems import RACES, ZIPS

SEXES = ["Female", "Male"]


def small_problem_cells(table: pa.Table) -> list[tuple[int, int, int, int]]:
    """Each raw row of a ``write_small_problem`` source or population file as its (age, sex, race,
    zip) positions in the spec's value lists (age 0 … max_age is its own position)."""
    return [(int(a), SEXES.index(s), RACES.index(r), ZIPS.index(z))
            for a, s, r, z in zip(*(table[c].to_pylist() for c in ("age", "sex", "race", "zip")))]


def reference_metrics(records: list[tuple[int, ...]], population: list[tuple[tuple[int, ...], int]] | None,
                      group_of: list[list[int]], sizes: list[int], gamma: float = 1.0) -> dict[str, float]:
    def group(rec: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(group_of[q][v] for q, v in enumerate(rec))

    n = len(records)
    sample = Counter(group(r) for r in records)
    census: Counter[tuple[int, ...]] = Counter()
    if population is None:
        census = Counter(sample)
    else:
        for cell, count in population:
            census[group(cell)] += count
    widths = [Counter(g) for g in group_of]

    risk = expected = 0.0
    max_risk = 0.0
    for r in records:
        gid = group(r)
        g = max(census[gid], sample[gid])
        risk += (1.0 / g) ** gamma
        expected += 1.0 / g
        max_risk = max(max_risk, (1.0 / g) ** gamma)

    cells = Counter(records)
    kl = 0.0
    for cell, c in cells.items():
        gid = group(cell)
        w = 1
        for q, v in enumerate(gid):
            w *= widths[q][v]
        p = c / n
        qv = sample[gid] / n / w
        kl += p * math.log(p / qv)

    lm = 0.0
    for r in records:
        gid = group(r)
        lm += sum((widths[q][gid[q]] - 1) / (sizes[q] - 1) for q in range(len(sizes)) if sizes[q] > 1)
    return {
        "risk_sum": risk,
        "expected_reidentifications": expected,
        "max_record_risk": max_risk,
        "k": min(sample.values()),
        "sample_unique_records": sum(1 for m in sample.values() if m == 1),
        "groups": len(sample),
        "kl": kl,
        "iyengar_loss": lm / (n * len(sizes)),
        "discernibility": sum(m * m for m in sample.values()),
        "corrected_groups": sum(1 for gid, m in sample.items() if census[gid] < m),
    }
