"""A release set written as tables: ``materialize SPEC --tables PREFIX``.

The folder form (``sets.release``) suits files; a warehouse wants the set where its data is, as
tables of its engine (PostgreSQL, Spark), or inside one DuckDB file.  The set is the same: the
person source judged once by the gate (``sets.release.prepare_set``: before anything is created,
then again on the table as written, in persons), each linked table the rows of kept persons with
the same pseudonyms and date offsets, every row count checked (``LinkedSource.released``).  Each
table is named ``PREFIX`` + its release name (``release.`` gives ``release.patients``, ``deid_``
gives ``deid_patients``), and the set's record, ``PREFIX`` + ``release``, is a one-row table like
a single table's ``<name>__release``, with the per-table list as JSON text as well.

All or none, through ``Backend.create_tables``: on DuckDB and PostgreSQL every table and the
record are created in one transaction, judged inside it before the commit; on Spark they are
staged and swapped in by renames (``backends/spark_sets.py`` says what a kill mid-swap leaves).
Names are checked by the engine's rules before anything runs (``targets.set_names``), the
inputs — the person source and every linked table — are never overwritten, and an existing
table is refused without ``--overwrite``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from sqlglot import exp

from .. import progress
from ..backends.base import fingerprint
from ..errors import OutputError
from ..problem import Problem
from ..release.figures import ReleaseFigures
from ..release.gate import Verdict
from ..release.output import check_not_input
from ..release.plan import ReleasePlan
from ..release.sidecar import as_table
from ..release.targets import input_tables, set_names
from ..storage.names import check_name, check_output_name
from .release import entry, prepare_set
from .rows import released_columns


@dataclass(frozen=True)
class TableOfSet:
    """One table of a set written as tables: its release name, its table name, its rows."""

    name: str
    table: str
    rows: int


@dataclass(frozen=True)
class WrittenTables:
    """What a set's write as tables produced: where (a DuckDB file, or None: the engine), its
    tables (the person source first), the gate's figures (in persons, on the person source as
    written) and verdict, and the record table."""

    database: Path | None
    tables: tuple[TableOfSet, ...]
    figures: ReleaseFigures
    verdict: Verdict
    sidecar: str
    record: dict[str, Any]  # the record the sidecar table holds

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)


def check_set_names(problem: Problem, prefix: str, database: Path | None) -> tuple[list[tuple[str, str]], str]:
    """The set's table names (``targets.set_names``) parsed by the engine's rules: inside the engine,
    refused when one names an input (the person source, a linked table, the population); inside a
    DuckDB file, which must not be an input file."""
    names, record = set_names(problem.spec, prefix)
    backend = problem.backend
    if database is None and not backend.catalog:
        raise OutputError(f"the spec's engine is {backend.title}, which keeps no tables of its own: write the set "
                          f"into a DuckDB file with --out FILE.duckdb --tables {prefix}, or as files with --out "
                          f"FOLDER")
    if database is not None:
        check_not_input(problem.spec, database)
    for table in [*(t for _, t in names), record]:
        if database is None:
            check_output_name(backend.dialect, table, "--tables", inputs=input_tables(problem.spec), sidecar=False)
        else:
            check_name(table, "--tables")
    return names, record


def materialize_set_tables(problem: Problem, plan: ReleasePlan, prefix: str, database: str | Path | None = None,
                           overwrite: bool = False, accept_risk: str | None = None) -> WrittenTables:
    """Write the person source and every linked table of ``problem``'s spec as tables ``PREFIX`` +
    release name, with the record table ``PREFIX`` + ``release``, all or none: inside the engine
    (``database`` None) or inside the DuckDB file ``database``."""
    db = Path(database) if database is not None else None
    spec, backend = problem.spec, problem.backend
    if spec.person is None or not spec.tables:
        raise OutputError(f"spec {spec.path} declares no [[table]]: --tables writes a set of linked tables; write "
                          f"one table with --table NAME")
    names, record_name = check_set_names(problem, prefix, db)
    call = (f"deid_sql.sets.tables.materialize_set_tables(problem, {plan.repr_call()}, {prefix!r}"
            + (f", {str(db)!r}" if db is not None else "") + ")")
    prepared = prepare_set(problem, plan, call, accept_risk)
    gate = prepared.gate
    tables = [(names[0][1], prepared.person, problem.source_rows)]
    tables += [(names[i + 1][1], q, s.released) for i, (s, q) in enumerate(zip(prepared.linked, prepared.queries))]
    columns = [list(gate.columns)] + [released_columns(s) for s in prepared.linked]
    sources = [spec.source.describe()] + [s.table.source.describe() for s in prepared.linked]
    done: dict[str, Any] = {}

    def finish(run: Callable[[exp.Expression], pa.Table],
               targets: Sequence[exp.Expression]) -> dict[str, pa.Table]:  # inside the writing transaction
        figures = gate.measure(run, targets[0])  # the person source as written: figures in persons
        verdict = gate.judge(figures)
        entries = []
        for i, ((name, table), (_, _, rows), target) in enumerate(zip(names, tables, targets)):
            kept = [n for n, _ in columns[i]]
            where = {"table": table, "row_hash": fingerprint(run, backend, target, kept)}
            entries.append(entry(name, where, rows, columns[i], sources[i], prepared.linked[i - 1] if i else None))
        release = {"kind": "set", "name": prefix, "database": str(db.resolve()) if db else spec.backend.engine,
                   "format": "table", "rows": sum(t[2] for t in tables), "tables": entries}
        record = gate.record(figures, verdict, release)
        done.update(figures=figures, verdict=verdict, record=record)
        return {record_name: record_table(record)}

    with progress.watching(f"writing {len(tables)} tables", backend.progress):
        rows = backend.create_tables(db, tables, overwrite, finish=finish)
    written = tuple(TableOfSet(name, table, n) for (name, table), n in zip(names, rows))
    return WrittenTables(db, written, done["figures"], done["verdict"], record_name, done["record"])


def record_table(record: dict[str, Any]) -> pa.Table:
    """The set's record as its one-row table: the columns of a single table's ``__release``
    companion (``sidecar.as_table``: release, created_at, verdict, the whole record as JSON) and
    ``tables``, the per-table list as JSON text, for a reader that wants only that."""
    base = as_table(record)
    tables = json.dumps(record["release"]["tables"], ensure_ascii=False)
    return base.append_column("tables", pa.array([tables], pa.string()))


__all__ = ["TableOfSet", "WrittenTables", "check_set_names", "materialize_set_tables", "record_table"]
