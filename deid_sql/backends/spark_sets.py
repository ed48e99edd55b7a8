"""Spark writes of tables that land together (one table and its ``__release`` record, or a
release set's tables and its record), with no transaction to lean on.

Spark's catalog has no transactions, so "all or none" is built from renames, in three steps:

1. **stage**: every table is created under a staging name of the writer
   (``spark_writes.staging_name``: ``deid_staging_<pid>_<start>_<random>``) in its target's
   database, counted and judged (``finish``); the companion tables (the record) are staged too.
   A failure here drops the staging tables: nothing was visible, nothing changed.
2. **swap**: the old record is renamed aside (or its leftover folder removed) first, then each
   table in turn (an old table of the name renamed aside, a leftover folder of the name removed,
   the staged table renamed into place), the new record last.  A failure here puts the old
   tables back from aside and drops the new ones (a leftover folder of an earlier process,
   which no catalog table owns, cannot be put back: it is removed only right before its
   replacement is placed).
3. **drop** what was set aside.

Whatever is renamed aside gets a staging name too, so the folders a killed writer leaves behind
are all ``deid_staging_*``: ``spark_writes.sweep_staging`` removes them when the next deid-sql
command (or Spark backend) starts and that writer is gone.  A ``kill -9`` during step 2 can leave
part of a set in place — some tables new, some old or missing — but never with a record table
beside them, since the old record goes away first and the new one is placed last: a set whose
record table is missing is incomplete.  Running the same command again with ``--overwrite`` replaces every table
and places the record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
from sqlglot import exp

from ..errors import BackendError, OutputError
from .base import SetFinish, SetTable, literal_rows, miscounted
from .spark_writes import staging_name


class SparkCatalog(Protocol):
    """What the swap asks of the Spark backend (``spark.SparkBackend``, which calls ``create_tables``
    and so cannot be named here): run a statement or a query, and its catalog's answers about a
    name (what holds it, a leftover folder, whether the name may be created or is taken)."""

    def execute(self, query: exp.Expression | str, params: Mapping[str, Any] | None = None) -> pa.Table: ...

    def _run(self, stmt: exp.Expression) -> None: ...

    def _creatable(self, name: str, what: str = "table name") -> exp.Table: ...

    def _kind(self, table: exp.Table) -> str | None: ...

    def _leftover(self, table: exp.Table) -> str | None: ...

    def _refuse_taken(self, name: str, kind: str | None, leftover: str | None, flag: str = "--overwrite") -> None: ...

    def _remove_folder(self, location: str) -> None: ...


@dataclass
class _Slot:
    """One table to place: its name, its target, what holds the name now, and its staged copy."""

    name: str
    target: exp.Table
    kind: str | None  # "TABLE" or "VIEW" in the catalog now, None when the name is free
    leftover: str | None  # a warehouse folder of the name that no catalog table owns
    staging: exp.Table | None = None
    aside: exp.Table | None = None  # the old table, renamed aside during the swap
    placed: bool = False


def create_tables(backend: SparkCatalog, tables: Sequence[SetTable], replace: bool,
                  finish: SetFinish | None = None) -> list[int]:
    """``Backend.create_tables`` on Spark (see the module docstring)."""
    slots = [_slot(backend, name, replace) for name, _, _ in tables]
    records: list[_Slot] = []
    try:
        rows = []
        for slot, (name, query, expected) in zip(slots, tables):
            slot.staging = staged(slot.target)
            backend._run(exp.Create(this=slot.staging.copy(), kind="TABLE", expression=query))
            rows.append(_count(backend, slot.staging))
            if rows[-1] != expected:
                raise OutputError(miscounted(name, rows[-1], expected, len(tables)))
        extra: Mapping[str, pa.Table] = (finish(backend.execute, [s.staging.copy() for s in slots if s.staging])
                                         if finish is not None else {})
        for name, table in extra.items():
            records.append(_slot(backend, name, replace))
            records[-1].staging = staged(records[-1].target)
            backend._run(exp.Create(this=records[-1].staging.copy(), kind="TABLE", expression=literal_rows(table)))
        for slot in records:  # the old record goes first (a leftover folder too): a set cut short by a kill has none
            _set_aside(backend, slot)
            if slot.leftover is not None:
                backend._remove_folder(slot.leftover)
                slot.leftover = None
        for slot in [*slots, *records]:
            _set_aside(backend, slot)
            if slot.leftover is not None:
                backend._remove_folder(slot.leftover)
            assert slot.staging is not None
            backend._run(rename(slot.staging, slot.target, "TABLE"))
            slot.placed = True
    except BaseException:
        _undo(backend, [*slots, *records])
        raise
    for slot in [*slots, *records]:  # everything is in place: the old tables go
        if slot.aside is not None:
            with suppress(BackendError):
                backend._run(exp.Drop(tables=[slot.aside], kind=slot.kind, exists=True))
    return rows


def _slot(backend: SparkCatalog, name: str, replace: bool) -> _Slot:
    """``name`` checked (Spark can hold it; taken without ``replace`` is refused)."""
    target = backend._creatable(name)
    kind = backend._kind(target)
    leftover = backend._leftover(target) if kind != "TABLE" else None
    if not replace:
        backend._refuse_taken(name, kind, leftover)
    return _Slot(name, target, kind, leftover)


def _set_aside(backend: SparkCatalog, slot: _Slot) -> None:
    if slot.kind is not None and slot.aside is None:
        slot.aside = staged(slot.target)
        backend._run(rename(slot.target, slot.aside, slot.kind))


def _undo(backend: SparkCatalog, slots: Sequence[_Slot]) -> None:
    """A failed write: the new tables dropped (placed or staged), the old ones renamed back; the
    first error speaks, so these steps' own errors are swallowed."""
    for slot in reversed(slots):
        with suppress(BackendError):
            if slot.placed:
                backend._run(exp.Drop(tables=[slot.target.copy()], kind="TABLE", exists=True))
            elif slot.staging is not None:
                backend._run(exp.Drop(tables=[slot.staging.copy()], kind="TABLE", exists=True))
        if slot.aside is not None:
            with suppress(BackendError):
                backend._run(rename(slot.aside, slot.target, slot.kind))


def _count(backend: SparkCatalog, table: exp.Table) -> int:
    return int(backend.execute(exp.select(exp.func("count", exp.Star())).from_(table.copy())).column(0)[0].as_py())


def staged(target: exp.Table) -> exp.Table:
    """A fresh staging name in ``target``'s database, saying whose it is (``spark_writes``)."""
    out = target.copy()
    out.set("this", exp.to_identifier(staging_name(), quoted=True))
    return out


def rename(table: exp.Table, to: exp.Table, kind: str | None) -> exp.Alter:
    """``ALTER … RENAME TO``, the new name without its catalog: a table is renamed inside its own
    catalog, and Spark's session catalog takes at most ``db.table`` there (a three-part
    ``spark_catalog.db.t`` fails with ``IDENTIFIER_TOO_MANY_NAME_PARTS``)."""
    new = to.copy()
    new.set("catalog", None)
    return exp.Alter(this=table.copy(), kind=kind, actions=[exp.AlterRename(this=new)])


__all__ = ["create_tables", "rename", "staged"]
