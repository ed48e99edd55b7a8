"""The written table measured once: the gate's figures and the row hash from one ``GROUP BY``.

A table release is judged on its written rows before they become visible, and its record holds the
table's row hash (``backends.base.fingerprint``: the row count and the sum of every row's hash),
which a report later recomputes to show the table is the one released.  Both read every written row;
where the gate counts rows by released group, the same query sums each group's row hashes, and the
table's hash is the sum of the groups' sums (every engine sums them exactly: DuckDB in a HUGEINT,
PostgreSQL in a NUMERIC, Spark in a DECIMAL(38, 0)).  Where the gate counts persons, or a derived
``rows`` QI rewrites what it counts, the figures and the hash are two queries, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa
from sqlglot import exp

from ..backends.base import Backend, fingerprint, fingerprint_text, hashed_row
from .figures import ReleaseFigures, count_groups
from .gate import ReleaseGate


def measure_written(gate: ReleaseGate, run: Callable[[exp.Expression], pa.Table], backend: Backend,
                    target: exp.Expression, columns: Sequence[str]) -> tuple[ReleaseFigures, str]:
    """The figures of the written rows of ``target`` and its row hash (``fingerprint``'s text) over
    ``columns``, where ``run`` executes a query (the transaction writing them)."""
    if gate.person is not None or gate.rows_counted is not None:
        return gate.measure(run, target), fingerprint(run, backend, target, columns)
    hashed = hashed_row(backend, target, columns)
    counted = count_groups(run, target, gate.qi_columns, gate.flagged, row_hash=hashed)
    rows = sum(int(m) for m in counted.column("m").to_pylist())
    sums = [int(h) for h in counted.column("h").to_pylist() if h is not None]
    row_hash = fingerprint_text(rows, sum(sums) if sums else None)
    return gate.measure(run, target, counted=counted.drop_columns(["h"])), row_hash
