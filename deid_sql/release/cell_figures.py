"""A release's figures counted on the source's cells instead of its rows: the judgment before a write.

Loading turns the rows into cells once (``loading``: the domain check and the counts in one pass,
none on a cache hit).  The groups a policy releases are the cells rolled up under its recoding, so
the gate's figures before the write need no second pass over the source: ``prejudged`` builds the
table the gate's ``GROUP BY`` would return (label tuples, rows, the suppression flag) from the
cells, and the gate measures it as it measures a query's.  The written rows are still measured
where they were written, before they become visible: a source that changed since it was loaded
is caught there.

Only what cells hold can be counted from them: records, not persons (``[person]`` counts distinct
keys), no per-person row counts (a ``derived = "rows"`` QI), no sensitive values (attribute
criteria), no summed sampling weights.  For anything else ``prejudged`` returns None and the
release query is measured where the data is, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..compiler.compile import SUPPRESSED
from ..evaluate.groups import group_cells
from .figures import ReleaseFigures, counted_figures, in_group_order

if TYPE_CHECKING:
    from ..problem import Problem
    from .gate import ReleaseGate


def countable(problem: Problem, gate: ReleaseGate) -> bool:
    """Whether the gate's figures of ``problem``'s release can be counted on its cells."""
    return (gate.person is None and gate.rows_counted is None and not gate.spec.release.attribute
            and gate.linked is None and problem.sample.counts.dtype.kind in "iu"
            and len(gate.qi_columns) == problem.sample.positions.shape[1])


def counted_groups(problem: Problem, gate: ReleaseGate) -> pa.Table:
    """What ``figures.count_groups`` returns for the release query, from the cells: per released
    label tuple (``q0``…, as text) its rows ``m``, and ``f`` (suppressed) when the release carries the
    suppression flag; the suppressed groups are one row of ``*`` labels, as the query blanks them."""
    recoding, flagged = gate.recoding, gate.flagged
    grouped = group_cells(recoding, problem.sample)
    m = np.rint(grouped.m).astype(np.int64)
    names = [q.labels for q in recoding.qis]
    labels = [pa.array(n, pa.string()) for n in names]
    suppressed = (gate.suppression.mask(names, grouped.ids, m)
                  if gate.suppression is not None else np.zeros(m.size, dtype=bool))
    kept = ~suppressed
    columns: dict[str, pa.Array] = {
        f"q{i}": labels[i].take(pa.array(ids[kept], pa.int64())) for i, ids in enumerate(grouped.ids)}
    counts = m[kept]
    flags = np.zeros(counts.size, dtype=bool)
    if suppressed.any():
        columns = {k: pa.concat_arrays([v, pa.array([SUPPRESSED], pa.string())]) for k, v in columns.items()}
        counts = np.append(counts, m[suppressed].sum())
        flags = np.append(flags, True)
    table = pa.table({**columns, "m": pa.array(counts, pa.int64())}
                     | ({"f": pa.array(flags, pa.bool_())} if flagged else {}))
    return in_group_order(table, len(labels), flagged)


def prejudged(problem: Problem, gate: ReleaseGate) -> ReleaseFigures | None:
    """The figures of the release judged before its write, from ``problem``'s cells (None: not
    countable there, measure the query)."""
    if not countable(problem, gate):
        return None
    return counted_figures(counted_groups(problem, gate), len(gate.qi_columns), gate.census, gate.record_risk,
                           gate.original_risk_sum, gate.flagged)
