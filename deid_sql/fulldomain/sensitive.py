"""Sample cells that carry a sensitive attribute: one more ``GROUP BY`` in the backend.

ℓ-diversity needs, per equivalence class, the set of distinct values of a sensitive
column.  The source is aggregated once more with the same positions query as the QI
cells (``loading.positions_query``) plus the column's value, so each cell is a
(QI positions, sensitive value) combination with its record count.  Values become
codes 0..v−1 in sorted order; NULL is a value of its own (sorted last).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from sqlglot import exp

from ..compiler.compile import col
from ..errors import DeidError
from ..loading.load import SOURCE_VIEW, Table, positions_query

if TYPE_CHECKING:
    from ..problem import Problem


@dataclass(frozen=True)
class SensitiveCells:
    """``positions[i]`` (QI positions), ``codes[i]`` (sensitive value code) and ``counts[i]``."""

    column: str
    positions: np.ndarray  # (n_cells, n_qis) int32
    codes: np.ndarray  # (n_cells,) int32
    counts: np.ndarray  # (n_cells,) int64
    values: tuple[str | None, ...]

    @property
    def total(self) -> int:
        return int(self.counts.sum())


def sensitive_cells(problem: Problem, column: str) -> SensitiveCells:
    """Aggregate the source by QI positions and ``column`` (must exist and not be a QI)."""
    spec = problem.spec
    qi_columns = {q.column: q.name for q in spec.qis}
    if column in qi_columns:
        raise DeidError(f"sensitive column {column!r} is also the quasi-identifier {qi_columns[column]!r}; "
                        f"a sensitive attribute must not be a QI — pick another column or drop the QI")
    if column not in problem.columns:
        shown = ", ".join(list(problem.columns)[:12])
        raise DeidError(f"the source has no column {column!r} for the sensitive attribute; its columns are {shown}")
    n = len(spec.qis)
    table = Table(SOURCE_VIEW, dict(problem.columns), "source")
    query = positions_query(problem.backend, spec, problem.domains, table, "column")
    value = exp.cast(col(column, "t"), "VARCHAR")
    query = query.select(exp.alias_(value, "s"), exp.alias_(exp.func("count", exp.Star()), "n"))
    query = query.group_by(*[exp.column(f"p{i}") for i in range(n)], exp.column("s"))
    result = problem.backend.execute(query)
    pos = np.stack([np.asarray(result.column(f"p{q}").to_numpy(zero_copy_only=False), dtype=np.int32)
                    for q in range(n)], axis=1)
    raw = result.column("s").to_pylist()
    counts = np.asarray(result.column("n").to_numpy(zero_copy_only=False), dtype=np.int64)
    values = tuple(sorted({v for v in raw if v is not None})) + ((None,) if None in raw else ())
    index = {v: i for i, v in enumerate(values)}
    codes = np.array([index[v] for v in raw], dtype=np.int32)
    order = np.lexsort((codes,) + tuple(pos.T[::-1]))  # deterministic order, like Cells
    cells = SensitiveCells(column, np.ascontiguousarray(pos[order]), codes[order], counts[order], values)
    if cells.total != problem.sample.total:  # the QI cells were checked at load; stay consistent
        raise DeidError(f"sensitive cells hold {cells.total} records but the source has {problem.sample.total}")
    return cells
