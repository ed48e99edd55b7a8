"""The written table measured once: the gate's figures and the row hash from one ``GROUP BY``.

A table release is judged on its written rows before they become visible, and its record holds the
table's row hash (``backends.base.fingerprint``: the row count and the sum of every row's hash),
which a report later recomputes to show the table is the one released.  Both read every written row;
where the gate counts rows by released group, the same query sums each group's row hashes, and the
table's hash is the sum of the groups' sums (every engine sums them exactly: DuckDB in a HUGEINT,
PostgreSQL in a NUMERIC, Spark in a DECIMAL(38, 0)).  Where an engine's row hash is a sum of one term
per value (PostgreSQL's, ``Backend.row_hash_parts``), the terms of the grouped values — the same in
every row of a group — are added once per group, times its row count, not once per row.  Where the
gate counts persons, or a derived ``rows`` QI rewrites what it counts, the figures and the hash are
two queries, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa
from sqlglot import exp

from ..backends.base import Backend, fingerprint, fingerprint_text, readable
from ..compiler.compile import col, ident
from ..sqltext import added
from .figures import FLAG, ReleaseFigures, count_groups, in_group_order
from .gate import ReleaseGate


def measure_written(gate: ReleaseGate, run: Callable[[exp.Expression], pa.Table], backend: Backend,
                    target: exp.Expression, columns: Sequence[str]) -> tuple[ReleaseFigures, str]:
    """The figures of the written rows of ``target`` and its row hash (``fingerprint``'s text) over
    ``columns``, where ``run`` executes a query (the transaction writing them)."""
    if gate.person is not None or gate.rows_counted is not None:
        return gate.measure(run, target), fingerprint(run, backend, target, columns)
    values = [col(c) for c in columns]
    types = backend.hash_types(target, columns)
    parts = backend.row_hash_parts(values, types)
    keys = [*gate.qi_columns, *([FLAG] if gate.flagged else [])]
    if parts is None or not keys:
        counted = count_groups(run, target, gate.qi_columns, gate.flagged, row_hash=backend.row_hash(values, types))
    else:
        counted = in_group_order(run(grouped_hash_query(target, columns, parts, keys, gate.flagged)),
                                 len(gate.qi_columns), gate.flagged)
    rows = sum(int(m) for m in counted.column("m").to_pylist())
    sums = [int(h) for h in counted.column("h").to_pylist() if h is not None]
    row_hash = fingerprint_text(rows, sum(sums) if sums else None)
    return gate.measure(run, target, counted=counted.drop_columns(["h"])), row_hash


def grouped_hash_query(target: exp.Expression, columns: Sequence[str], parts: Sequence[exp.Expression],
                       keys: Sequence[str], flag: bool) -> exp.Select:
    """``figures.group_query``'s groups (``q0…``, ``f``, ``m``) with each group's sum of the row hash,
    ``h``, where the hash is a sum of ``parts``, one per column of ``columns`` reading that column.  The
    rows are grouped by the key columns' own values, whose parts are added once per group, read from
    the group's key; the groups are then counted by the gate's keys (the text of each QI, the flag
    with NULL as false) and their sums added, so a key column of any type gives the groups
    ``group_query`` gives."""
    keyed = {c: f"deid_k{i}" for i, c in enumerate(keys)}

    def from_key(node: exp.Expression) -> exp.Expression:
        return col(keyed[node.name]) if isinstance(node, exp.Column) and node.name in keyed else node

    per_row = [p for c, p in zip(columns, parts, strict=True) if c not in keyed]
    per_group = [p.transform(from_key) for c, p in zip(columns, parts, strict=True) if c in keyed]
    rows_sum = exp.func("sum", added(per_row)) if per_row else exp.Literal.number(0)
    inner = (exp.select(*[exp.alias_(col(c), ident(k)) for c, k in keyed.items()],
                        exp.alias_(exp.func("count", exp.Star()), ident("deid_m")),
                        exp.alias_(rows_sum, ident("deid_s")))
             .from_(readable(target)).group_by(*[col(c) for c in keyed]))
    group_hash: exp.Expression = exp.column("deid_s")
    if per_group:
        group_hash = exp.Add(this=group_hash, expression=exp.Mul(
            this=exp.cast(exp.column("deid_m"), "DECIMAL(38, 0)"), expression=exp.paren(added(per_group))))
    labels: list[exp.Expression] = [exp.alias_(exp.cast(col(keyed[c]), "VARCHAR"), ident(f"q{i}"))
                                    for i, c in enumerate(keys[:len(keys) - int(flag)])]
    if flag:
        labels.append(exp.alias_(exp.func("coalesce", exp.cast(col(keyed[FLAG]), "BOOLEAN"), exp.false()), ident("f")))
    middle = exp.select(*labels, exp.column("deid_m"), exp.alias_(group_hash, ident("deid_h"))).from_(
        inner.subquery("deid_groups"))
    names = [f"q{i}" for i in range(len(labels) - int(flag))] + (["f"] if flag else [])
    return (exp.select(*[exp.column(n) for n in names],
                       exp.alias_(exp.cast(exp.func("sum", exp.column("deid_m")), "BIGINT"), ident("m")),
                       exp.alias_(exp.cast(exp.func("sum", exp.column("deid_h")), "VARCHAR"), ident("h")))
            .from_(middle.subquery("deid_labelled")).group_by(*[exp.column(n) for n in names]))
