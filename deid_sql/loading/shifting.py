"""Date shifting in SQL: a table read with its ``shift`` columns already moved by each person's
offset (``contract.shift``), so everything downstream — the cells of a shifted date QI, the
generalization, the release, every linked table — sees the shifted dates and nothing else.

The offset is ``n mod (2D + 1) − D`` with ``n`` the engine's integer pseudonym of the person key
under the shift key (``Backend.pseudonymize``), and the move is ``Backend.shift_days``: both run
where the data is, and give the reference's dates on DuckDB, PostgreSQL and Spark.  The SQL holds
the shift key (as HMAC pads), so, like a pseudonymizing release, it is run and never stored: a
view, compiled SQL or dbt model of a shifting spec is refused.

**Shifts that leave the range.**  A date near the end of what the engine holds (a placeholder such
as 9999-12-31 is far from it, but a corrupt 5881580-07-05 is not) moved past it makes DuckDB and
PostgreSQL fail the query and makes Spark wrap it around silently (+30 days gave -5877641-07-17);
a shifted date QI's value may also leave the QI's declared domain.  One definition serves every
engine: ``leaves`` is true when the value's day number (``Backend.day_number``) plus the offset
falls outside a range of days — the engine's for the column's type (``Backend.date_days``), or the
QI's domain.  ``range_problems`` counts those rows and persons in one query where the data is read
(the load, a linked table, a policy file's batch), so the command is refused with the counts before
anything is written.  On an engine that wraps (Spark) every shifted value also carries the same
test as a guard (``guarded_offset``): a row that reaches the move all the same (data changed after
the count) fails the query with the reason instead of releasing a wrong date; DuckDB and
PostgreSQL fail such a query themselves.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from sqlglot import exp

from ..contract.keys import KeyHolder, Pads
from ..sqltext import aliased, col, ident

if TYPE_CHECKING:
    from ..backends.base import Backend
    from ..spec.file import Spec

ALIAS = "deid_unshifted"


def offset_days(backend: Backend, person: exp.Expression, secret: bytes, days: int,
                keys: KeyHolder | None = None) -> exp.Expression:
    """The person's offset in whole days, in [−days, +days], as an integer expression of ``backend``
    (``keys``: who holds the key, ``contract.keys``; default the backend's pads in the SQL)."""
    return (keys or Pads(backend)).offset(person, secret, days)


EPOCH = dt.date(1970, 1, 1)


def leaves(backend: Backend, value: exp.Expression, offset: exp.Expression, first: int, last: int) -> exp.Expression:
    """True when ``value`` (a date or timestamp) moved by ``offset`` days lands outside days
    ``first``..``last`` (days since 1970-01-01): the one test of a shift out of range, computed in
    64-bit integers, so it never overflows where the move itself would."""
    day = exp.Add(this=exp.cast(backend.day_number(value.copy()), "BIGINT"),
                  expression=exp.cast(offset.copy(), "BIGINT"))
    return exp.or_(exp.LT(this=day, expression=exp.Literal.number(first)),
                   exp.GT(this=day.copy(), expression=exp.Literal.number(last)))


def guarded_offset(backend: Backend, value: exp.Expression, offset: exp.Expression, sql_type: str | None,
                   name: str, row: exp.Expression) -> exp.Expression:
    """``offset``, or — for a row whose move would leave the engine's range of ``sql_type`` — a
    failure of the query naming column ``name`` (``row``: a value of the row, for
    ``Backend.raise_error``): no engine releases a wrapped-around date.  Only where the engine
    would wrap (``Backend.date_overflow_fails`` False: Spark); the others fail such a query
    themselves, and their SQL stays as it was."""
    limits = backend.day_range(sql_type)
    if limits is None or backend.date_overflow_fails:
        return offset
    message = (f"the date shift would move a value of column {name!r} beyond the dates {backend.title} can hold; "
               f"run deid-sql validate for the rows and persons")
    failed = exp.cast(backend.raise_error(message, row.copy()), "BIGINT")
    return exp.Case().when(leaves(backend, value, offset, *limits), failed).else_(offset.copy())


def shifted_select(backend: Backend, relation: exp.Expression, columns: Mapping[str, str | None],
                   shift: Sequence[str], person: str, secret: bytes, days: int,
                   keys: KeyHolder | None = None) -> exp.Select:
    """``SELECT`` every column of ``columns`` (name → type) from ``relation``, the ``shift`` columns
    moved by the offset of the row's person (its ``person`` key), each under its own name."""
    moved = set(shift)
    key = col(person, ALIAS)
    offset = offset_days(backend, key, secret, days, keys)
    projections: list[exp.Expression] = []
    for name, sql_type in columns.items():
        value = col(name, ALIAS)
        if name in moved:
            days_moved = guarded_offset(backend, value, offset, sql_type, name, key)
            value = exp.alias_(backend.shift_days(value, days_moved, str(sql_type)), ident(name))
        projections.append(value)
    return exp.select(*projections).from_(aliased(relation, ALIAS))


def range_problems(backend: Backend, relation: exp.Expression, columns: Mapping[str, str | None],
                   shift: Sequence[str], person: str, secret: bytes, days: int, where: str,
                   domains: Mapping[str, tuple[str, dt.date, dt.date]] | None = None) -> list[str]:
    """One line per ``shift`` column of ``relation`` (read unshifted) with rows whose shifted value
    would leave the engine's range of its type, and per shifted date QI (``domains``: column → (QI
    name, first, last day)) with rows it would move outside the QI's domain, each with the rows and
    persons affected and one example value, counted in one query (``leaves``)."""
    key = col(person, ALIAS)
    offset = offset_days(backend, key, secret, days)
    checks: list[tuple[str, exp.Expression, str]] = []
    for name in shift:
        if name not in columns:
            continue  # reported by shift_type_problems
        value = col(name, ALIAS)
        limits = backend.day_range(columns[name])
        if limits is not None:
            checks.append((name, leaves(backend, value, offset, *limits),
                           f"beyond the dates {backend.title} can hold for its type {str(columns[name]).upper()}; no "
                           f"such date can be released shifted: correct or remove those rows"))
        if domains and name in domains:
            qi, first, last = domains[name]
            checks.append((name, leaves(backend, value, offset, (first - EPOCH).days, (last - EPOCH).days),
                           f"outside the domain {first.isoformat()} … {last.isoformat()} of QI {qi!r}; declare the "
                           f"domain {days} days wider on each side (min and max), the most a shift moves a date"))
    if not checks:
        return []
    projections: list[exp.Expression] = []
    for i, (name, test, _) in enumerate(checks):
        hit = exp.Case().when(test, exp.Literal.number(1)).else_(exp.Literal.number(0))
        projections += [exp.alias_(exp.func("sum", hit), f"r{i}"),
                        exp.alias_(exp.Count(this=exp.Distinct(expressions=[exp.Case().when(test.copy(), key.copy())])),
                                   f"p{i}"),
                        exp.alias_(exp.func("min", exp.Case().when(test.copy(), exp.cast(col(name, ALIAS), "VARCHAR"))),
                                   f"e{i}")]
    row = backend.execute(exp.select(*projections).from_(aliased(relation, ALIAS))).to_pylist()[0]
    out = []
    for i, (name, _, what) in enumerate(checks):
        rows = int(row[f"r{i}"] or 0)
        if rows:
            out.append(f"{where} column {name!r}: the date shift (up to {days} days either way) moves {rows:,} row(s) "
                       f"of {int(row[f'p{i}'] or 0):,} person(s) (e.g. {row[f'e{i}']}) {what}")
    return out


def source_shift(spec: Spec) -> tuple[str, ...]:
    """The person source's columns to shift (``[columns] shift``), empty without."""
    return spec.columns.shift if spec.person is not None and spec.person.shift_days is not None else ()


def shifts_qis(spec: Spec) -> bool:
    """Whether a QI column is shifted, so the cells (not only the release) read shifted dates."""
    shifted = set(source_shift(spec))
    return any(q.derived is None and q.column in shifted for q in spec.qis)


def shift_source(backend: Backend, spec: Spec, relation: exp.Expression,
                 columns: Mapping[str, str | None], keys: KeyHolder | None = None) -> exp.Expression:
    """``relation`` (the person source as read) with its ``shift`` columns moved; itself without."""
    shift = source_shift(spec)
    if not shift:
        return relation
    assert spec.person is not None and spec.person.shift_days is not None
    return shifted_select(backend, relation, columns, shift, spec.person.column, spec.columns.secret(),
                          spec.person.shift_days, keys)


__all__ = ["guarded_offset", "leaves", "offset_days", "range_problems", "shift_source", "shifted_select",
           "shifts_qis", "source_shift"]
