"""The generalized groups of a release, as a policy file saves them and the drift rule compares them.

A module of its own so that ``format`` (which saves them) and ``tolerance`` (which tests a batch's
groups against the saved ones) both import it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Groups:
    """The generalized groups of a release: labels per QI, records, population people, record risk."""

    names: tuple[str, ...]
    labels: tuple[tuple[str, ...], ...]
    records: np.ndarray  # int64
    population: np.ndarray | None  # float64 census people per group; None with population = "sample"
    risk: np.ndarray  # float64 record risk r(g)

    def index(self) -> dict[tuple[str, ...], int]:
        return {labels: i for i, labels in enumerate(self.labels)}

    def to_json(self) -> dict[str, Any]:
        rows = [[*labels, int(m), None if self.population is None else json_number(self.population[i]),
                 float(self.risk[i])]
                for i, (labels, m) in enumerate(zip(self.labels, self.records))]
        return {"columns": [*self.names, "records", "population", "record_risk"], "rows": rows}



def json_number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)
