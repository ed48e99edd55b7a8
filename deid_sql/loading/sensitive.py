"""Cells that carry a sensitive column's value: one more ``GROUP BY``, counted in persons, cached.

The attribute criteria (METHODS decision 15) need, per released group G and value v, f_G(v): the
persons of G holding v on any of their rows (records without ``[person]``; NULL is a value of its
own).  Every cell lies in exactly one group of any recoding and a person in exactly one cell, so
f_G(v) is the sum of f(cell, v) over G's cells: the search rolls these cells up like the cells of
QIs.  They are counted once per load, by one query:

- without ``[person]``: the source grouped by its QI positions (``load.positions_query``) and the
  value: each record holds one value, so Σ_v f(cell, v) is the cell's records;
- with ``[person]``: each person's positions by the QIs' ``per_person`` rules (the load's
  ``person_cells.per_person_query``, so a person sits in the same cell as in ``Problem.sample``)
  joined, by the person key (byte for byte, ``sqltext.person_key``), to the distinct (person, value)
  pairs of the rows, and grouped by (positions, value) counting persons.  A person holding several
  values counts once under each, so Σ_v f(cell, v) may exceed the cell's persons
  (``Problem.sample``'s count, which ``SensitiveCells.per_person`` says to take);
- a column that is sensitive in a linked ``[[table]]`` of a set (a patient's diagnoses): the pairs
  come from every table where the column is sensitive (and the source, if it is sensitive there
  too), as the gate counts them (``release.attribute.LinkedValues.pairs``); a person without rows
  holds no value but counts in the cell, a row whose key names no person of the source counts
  nowhere.

The counts are kept in the cells cache (``cache.CellsCache.put_extra``) under the load's entry, named
by the column and, for linked tables, their fingerprints: a second command on the same spec and data
runs no query at all, and a changed source, spec or linked table counts afresh.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from sqlglot import exp

from ..backends.base import Backend
from ..domains.domain import Domain
from ..errors import BackendError, DataError, DeidError
from ..spec.file import Spec
from ..spec.linked import LinkedTable
from ..sqltext import col, ident, person_key
from .cache import CacheKey, CellsCache, extra_name, fingerprint
from .cells import Cells
from .load import SOURCE_VIEW, Table, positions_query, read_problem
from .person_cells import PERSON, per_person_query

#: 1: persons per (cell, value) with ``[person]``, linked tables' pairs
FORMAT = 1


class Loaded(Protocol):
    """What counting a sensitive column reads of a loaded problem (``problem.Problem``)."""

    spec: Spec
    backend: Backend
    domains: list[Domain]
    columns: dict[str, str]
    sample: Cells
    cells_cache: CellsCache | None
    cache_key: CacheKey | None


@dataclass(frozen=True)
class SensitiveCells:
    """``positions[i]`` (QI positions), ``codes[i]`` (the value's code: its index in ``values``) and
    ``counts[i]`` = f(cell, value): the persons (records without ``[person]``) of the cell holding it.

    ``values``: the column's values as text, sorted, NULL last.  ``per_person``: counted in persons
    (``[person]``): a cell's persons are ``Problem.sample``'s count (a person may hold several values,
    or none in a linked table), not Σ f.  Without it each record holds one value and Σ f is the
    cell's records."""

    column: str
    positions: np.ndarray  # (n_cells, n_qis) int32
    codes: np.ndarray  # (n_cells,) int32
    counts: np.ndarray  # (n_cells,) int64
    values: tuple[str | None, ...]
    per_person: bool = False

    @property
    def total(self) -> int:
        """Σ f over every cell and value (the records, without ``[person]``)."""
        return int(self.counts.sum())

    def holders(self) -> np.ndarray:
        """Per value code, the persons (records) of the source holding it: t-closeness' q(v)."""
        return np.bincount(self.codes, weights=self.counts, minlength=len(self.values)).astype(np.int64)


def sensitive_cells(problem: Loaded, column: str) -> SensitiveCells:
    """The cells of ``column`` (a source column that is not a QI, or a column sensitive in a linked
    table), from the cells cache when the load's entry holds them, else counted and stored."""
    spec = problem.spec
    qi_columns = {q.column: q.name for q in spec.qis}
    if column in qi_columns:
        raise DeidError(f"sensitive column {column!r} is also the quasi-identifier {qi_columns[column]!r}; "
                        f"a sensitive attribute must not be a QI — pick another column or drop the QI")
    linked = [t for t in spec.tables if column in t.roles.sensitive] if spec.person is not None else []
    in_source = column in problem.columns
    if not in_source and not linked:
        shown = ", ".join(list(problem.columns)[:12])
        raise DeidError(f"the source has no column {column!r} for the sensitive attribute; its columns are {shown}")
    if linked and in_source and column not in spec.columns.sensitive:
        in_source = False  # the source's column of that name is no sensitive value of the set
    cache, key = problem.cells_cache, problem.cache_key
    name = None
    if cache is not None and key is not None:
        try:
            parts = [FORMAT, column, in_source, [_linked_identity(problem.backend, t) for t in linked]]
        except (OSError, BackendError):
            parts = None  # a linked table that cannot be fingerprinted: counted, never cached
        name = extra_name(parts) if parts is not None else None
        found = cache.extra(key, name) if name is not None else None
        if found is not None:
            cells = _from_cache(column, *found)
            if cells is not None:
                return cells
    cells = _count(problem, column, in_source, linked)
    if cache is not None and key is not None and name is not None:
        cache.put_extra(key, name, {"positions": cells.positions, "codes": cells.codes, "counts": cells.counts},
                        {"values": list(cells.values), "per_person": cells.per_person, "column": column})
    return cells


def pseudonymized_positions(problem: Loaded, link: str) -> tuple[np.ndarray, Any]:
    """Each person's QI positions, as the cells place them (each row's without ``[person]``), and the
    pseudonym a release gives them: of the ``[person]`` key (``link`` is then its column), else of
    column ``link`` on each row.  One query; what a search joins with a recipient's ledger state to
    count the persons of each earlier combined label per cell (``jobs.earlier``)."""
    spec, backend = problem.spec, problem.backend
    n = len(spec.qis)
    source = Table(SOURCE_VIEW, dict(problem.columns), "source")
    rows = positions_query(backend, spec, problem.domains, source, "column")
    secret, form = spec.columns.secret(), spec.columns.pseudonym
    if spec.person is None:
        query = rows.select(exp.alias_(backend.pseudonymize(col(link, "t"), secret, form), "deid_pseudonym"))
    else:
        person = spec.person
        persons = per_person_query(rows, spec.qis, person, problem.columns.get(person.column), backend.arg_aggregates)
        query = exp.select(*[exp.column(f"p{i}", "persons") for i in range(n)],
                           exp.alias_(backend.pseudonymize(exp.column(PERSON, "persons"), secret, form),
                                      "deid_pseudonym")).from_(
            exp.Subquery(this=persons, alias=exp.TableAlias(this=ident("persons"))))
    result = backend.execute(query)
    positions = (np.stack([np.asarray(result.column(f"p{q}").to_numpy(zero_copy_only=False), dtype=np.int32)
                           for q in range(n)], axis=1) if n else np.zeros((result.num_rows, 0), dtype=np.int32))
    return positions, result.column("deid_pseudonym").combine_chunks()


def _from_cache(column: str, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> SensitiveCells | None:
    try:
        values = tuple(None if v is None else str(v) for v in meta["values"])
        return SensitiveCells(column, np.ascontiguousarray(arrays["positions"], dtype=np.int32),
                              np.asarray(arrays["codes"], dtype=np.int32),
                              np.asarray(arrays["counts"], dtype=np.int64), values, bool(meta["per_person"]))
    except (KeyError, TypeError, ValueError):
        return None


def _linked_view(index: int) -> str:
    return f"deid_sensitive_linked_{index}"


def _linked_identity(backend: Backend, table: LinkedTable) -> list[Any]:
    """What decides a linked table's pairs: where it lives, its key, and its data's fingerprint."""
    view = None
    if table.source.path is None:  # an engine's table: fingerprinted through a session view
        view = _open_linked(backend, table, 0)
    found = fingerprint(backend, table.source, view or "", [table.person, *table.roles.sensitive])
    return [repr(table.source), table.person, list(table.roles.sensitive), found]


def _open_linked(backend: Backend, table: LinkedTable, index: int) -> str:
    view = _linked_view(index)
    try:
        backend.create_temp_view(view, exp.select("*").from_(backend.relation(table.source, {table.person: True})))
    except BackendError as e:
        raise DataError(read_problem(f"linked table {table.name!r}", table.source.describe(), str(e))) from None
    return view


def _count(problem: Loaded, column: str, in_source: bool, linked: list[LinkedTable]) -> SensitiveCells:
    spec = problem.spec
    n = len(spec.qis)
    source = Table(SOURCE_VIEW, dict(problem.columns), "source")
    rows = positions_query(problem.backend, spec, problem.domains, source, "column")
    value = exp.cast(col(column, "t"), "VARCHAR")
    positions = [exp.column(f"p{i}") for i in range(n)]
    if spec.person is None:
        query = rows.select(exp.alias_(value, "s"), exp.alias_(exp.func("count", exp.Star()), "n"))
    else:
        person = spec.person
        persons = per_person_query(rows, spec.qis, person, problem.columns.get(person.column),
                                   problem.backend.arg_aggregates)
        pairs = _pairs(problem, column, in_source, linked)
        query = (exp.select(*[exp.column(f"p{i}", "persons") for i in range(n)],
                            exp.alias_(exp.column("v", "s"), "s"), exp.alias_(exp.func("count", exp.Star()), "n"))
                 .from_(exp.Subquery(this=persons, alias=exp.TableAlias(this=ident("persons"))))
                 .join(exp.Subquery(this=pairs, alias=exp.TableAlias(this=ident("s"))),
                       on=exp.EQ(this=exp.column(PERSON, "persons"), expression=exp.column("k", "s"))))
        positions = [exp.column(f"p{i}", "persons") for i in range(n)]
    query = query.group_by(*positions, exp.column("v", "s") if spec.person is not None else exp.column("s"))
    result = problem.backend.execute(query)
    pos = np.stack([np.asarray(result.column(f"p{q}").to_numpy(zero_copy_only=False), dtype=np.int32)
                    for q in range(n)], axis=1) if n else np.zeros((result.num_rows, 0), dtype=np.int32)
    raw = result.column("s").to_pylist()
    counts = np.asarray(result.column("n").to_numpy(zero_copy_only=False), dtype=np.int64)
    values = tuple(sorted({v for v in raw if v is not None})) + ((None,) if None in raw else ())
    index = {v: i for i, v in enumerate(values)}
    codes = np.array([index[v] for v in raw], dtype=np.int32)
    order = np.lexsort((codes,) + tuple(pos.T[::-1]))  # deterministic order, like Cells
    cells = SensitiveCells(column, np.ascontiguousarray(pos[order]), codes[order], counts[order], values,
                           spec.person is not None)
    if spec.person is None and cells.total != problem.sample.total:  # the QI cells were checked at load
        raise DeidError(f"sensitive cells hold {cells.total} records but the source has {problem.sample.total}")
    return cells


def _pairs(problem: Loaded, column: str, in_source: bool, linked: list[LinkedTable]) -> exp.Expression:
    """``(k, v)``: each person key with each value of ``column`` the person holds, distinct, over the
    source (when the column is sensitive there) and every linked table where it is sensitive (as text,
    so the tables' types meet; the value's text is what the cells key values by anyway)."""
    spec = problem.spec
    assert spec.person is not None
    parts: list[exp.Select] = []
    if in_source:
        key = person_key(col(spec.person.column, "t"), problem.columns.get(spec.person.column))
        parts.append(exp.select(exp.alias_(key, "k"), exp.alias_(exp.cast(col(column, "t"), "VARCHAR"), "v"))
                     .from_(exp.alias_(exp.to_table(SOURCE_VIEW), "t", table=True)))
    for i, table in enumerate(linked):
        view = _open_linked(problem.backend, table, i)
        try:
            columns = problem.backend.columns(view)
        except BackendError as e:
            raise DataError(read_problem(f"linked table {table.name!r}", table.source.describe(), str(e))) from None
        missing = [c for c in (table.person, column) if c not in columns]
        if missing:
            raise DataError(f"{table.where} ({table.source.describe()}) has no column {missing[0]!r}; its columns "
                            f"are {', '.join(list(columns)[:12])}: fix the [[table]]'s person or sensitive list")
        key = person_key(col(table.person, "t"), columns.get(table.person))
        parts.append(exp.select(exp.alias_(key, "k"), exp.alias_(exp.cast(col(column, "t"), "VARCHAR"), "v"))
                     .from_(exp.alias_(exp.to_table(view), "t", table=True)))
    union: exp.Expression = parts[0]
    for part in parts[1:]:
        union = exp.union(union, part, distinct=False)
    return exp.select("k", "v").distinct().from_(exp.Subquery(this=union, alias=exp.TableAlias(this=ident("u"))))


__all__ = ["SensitiveCells", "sensitive_cells"]
