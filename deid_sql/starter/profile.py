"""What a data file holds, column by column, read once through the engine.

``init`` proposes roles from what it sees here: each column's type, how many rows hold a
value, how many distinct values, the range of numbers and dates, and the most common values
(which give the samples shown in the spec's comments, the category lists of proposed QIs and
the values the identifier patterns are tested on).  Every query is a sqlglot expression over
quoted identifiers, so any column name — quotes, keywords, unicode — is read as itself.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from ..backends.base import Backend
from ..sqltext import col, ident, is_integer_type

#: how many of a column's most common values are read (samples, category lists, patterns)
TOP_VALUES = 200
_VALUE = "deid_value"
_ROWS = "deid_rows"


def family(sql_type: str) -> str:
    """The kind of a column's values, from its SQL type name: integer, float, date, timestamp,
    text, boolean or other (lists, structs, blobs: profiled by their NULLs only)."""
    t = sql_type.upper().strip()
    if is_integer_type(t):
        return "integer"
    if t.startswith(("DOUBLE", "FLOAT", "REAL", "DECIMAL", "NUMERIC")):
        return "float"
    if t == "DATE":
        return "date"
    if t.startswith(("TIMESTAMP", "DATETIME")):
        return "timestamp"
    if t.startswith(("VARCHAR", "TEXT", "STRING", "CHAR")):
        return "text"
    if t.startswith("BOOL"):
        return "boolean"
    return "other"


@dataclass
class ColumnProfile:
    """One column as read: counts over the whole table, its most common values."""

    name: str
    sql_type: str
    rows: int
    values: int  # rows holding a value (not NULL)
    distinct: int | None  # None for types that cannot be compared (lists, structs)
    lo: Any = None  # smallest and largest value (numbers, dates, timestamps)
    hi: Any = None
    fractional: int = 0  # rows of a float column holding a value that is not a whole number
    top: list[tuple[Any, int]] = field(default_factory=list)  # (value, rows), most common first

    @property
    def family(self) -> str:
        return family(self.sql_type)

    @property
    def nulls(self) -> int:
        return self.rows - self.values

    @property
    def complete(self) -> bool:
        """``top`` holds every distinct value."""
        return self.distinct is not None and len(self.top) >= self.distinct

    @property
    def unique(self) -> bool:
        """Every row holds a value of its own (a record key)."""
        return self.values == self.rows and self.distinct == self.rows


def profile(backend: Backend, view: str, columns: Mapping[str, str]) -> list[ColumnProfile]:
    """Every column of ``view`` profiled: one aggregate query over the table, then one
    ``GROUP BY`` per column for its most common values."""
    comparable = [name for name, t in columns.items() if family(t) != "other"]
    select = exp.select(exp.alias_(exp.func("count", exp.Star()), "r")).from_(exp.to_table(view))
    for i, name in enumerate(columns):
        c = col(name)
        select = select.select(exp.alias_(exp.func("count", c.copy()), f"v{i}"))
        if name not in comparable:
            continue
        select = select.select(exp.alias_(exp.Count(this=exp.Distinct(expressions=[c.copy()])), f"d{i}"))
        if family(columns[name]) in ("integer", "float", "date", "timestamp"):
            select = select.select(exp.alias_(exp.func("min", c.copy()), f"lo{i}"),
                                   exp.alias_(exp.func("max", c.copy()), f"hi{i}"))
        if family(columns[name]) == "float":
            whole = exp.NEQ(this=c.copy(), expression=exp.func("floor", c.copy()))
            select = select.select(exp.alias_(exp.func("sum", exp.Case().when(whole, exp.Literal.number(1))
                                                       .else_(exp.Literal.number(0))), f"f{i}"))
    row = backend.execute(select).to_pylist()[0]
    out = []
    for i, (name, sql_type) in enumerate(columns.items()):
        p = ColumnProfile(name, sql_type, int(row["r"]), int(row[f"v{i}"]),
                          int(row[f"d{i}"]) if f"d{i}" in row else None,
                          row.get(f"lo{i}"), row.get(f"hi{i}"), int(row.get(f"f{i}") or 0))
        if name in comparable and p.values:
            p.top = top_values(backend, view, name)
        out.append(p)
    return out


def top_values(backend: Backend, view: str, name: str, limit: int = TOP_VALUES) -> list[tuple[Any, int]]:
    """The ``limit`` most common values of a column with their row counts (ties by value)."""
    inner = exp.select(exp.alias_(col(name), _VALUE)).from_(exp.to_table(view))
    query = (exp.select(exp.column(_VALUE), exp.alias_(exp.func("count", exp.Star()), _ROWS))
             .from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=ident("t"))))
             .where(exp.Not(this=exp.Is(this=exp.column(_VALUE), expression=exp.null())))
             .group_by(exp.column(_VALUE))
             .order_by(exp.Ordered(this=exp.column(_ROWS), desc=True), exp.column(_VALUE))
             .limit(limit))
    table = backend.execute(query)
    return list(zip(table.column(_VALUE).to_pylist(), (int(n) for n in table.column(_ROWS).to_pylist())))


def distinct_text(backend: Backend, view: str, name: str, width: int | None = None) -> list[str]:
    """Every distinct value of a column as text, in order; ``width``: integers zero-padded to it
    (a ZIP code stored as a number, spelled as the load spells it)."""
    value: exp.Expression = exp.cast(col(name), "VARCHAR")
    if width is not None:
        value = exp.func("lpad", value, exp.Literal.number(width), exp.Literal.string("0"))
    query = (exp.select(exp.alias_(value, _VALUE)).distinct().from_(exp.to_table(view))
             .where(exp.Not(this=exp.Is(this=col(name), expression=exp.null()))).order_by(exp.column(_VALUE)))
    return [str(v) for v in backend.execute(query).column(_VALUE).to_pylist()]


def values_outside(backend: Backend, view: str, name: str, other: str, other_name: str,
                   width: int | None = None, examples: int = 3) -> tuple[int, list[str]]:
    """How many distinct values of ``view.name`` the table ``other`` lacks in ``other_name``
    (compared as text, as the load compares category and ZIP values), and a few of them."""
    def text(table: str, column: str) -> exp.Expression:
        value: exp.Expression = exp.cast(col(column, table), "VARCHAR")
        if width is not None:
            value = exp.func("lpad", value, exp.Literal.number(width), exp.Literal.string("0"))
        return value

    theirs = (exp.select(exp.alias_(text("o", other_name), _VALUE))
              .from_(exp.alias_(exp.to_table(other), "o", table=True))
              .where(exp.Not(this=exp.Is(this=col(other_name, "o"), expression=exp.null()))))
    ours = (exp.select(exp.alias_(text("s", name), _VALUE)).distinct()
            .from_(exp.alias_(exp.to_table(view), "s", table=True))
            .where(exp.Not(this=exp.Is(this=col(name, "s"), expression=exp.null()))))
    missing = (exp.select(exp.column(_VALUE)).from_(exp.Subquery(this=ours, alias=exp.TableAlias(this=ident("a"))))
               .where(exp.Not(this=exp.column(_VALUE).isin(query=theirs))))
    values = sorted(str(v) for v in backend.execute(missing).column(_VALUE).to_pylist())
    return len(values), values[:examples]


def as_date(value: Any) -> dt.date | None:
    """A date or timestamp value as a calendar day."""
    if isinstance(value, dt.datetime):
        return value.date()
    return value if isinstance(value, dt.date) else None


def whole_numbers(p: ColumnProfile) -> bool:
    """The column holds whole numbers only (an integer type, or a float without fractions)."""
    return p.family == "integer" or (p.family == "float" and p.fractional == 0 and p.lo is not None)


def names_of(profiles: Sequence[ColumnProfile]) -> list[str]:
    return [p.name for p in profiles]


def repeated_values(backend: Backend, view: str, name: str) -> int:
    """How many distinct values of a column are held by more than one row (a key that repeats
    across rows names something several rows share: a person with several tests)."""
    inner = (exp.select(exp.alias_(exp.func("count", exp.Star()), _ROWS)).from_(exp.to_table(view))
             .where(exp.Not(this=exp.Is(this=col(name), expression=exp.null()))).group_by(col(name)))
    query = (exp.select(exp.alias_(exp.func("count", exp.Star()), _VALUE))
             .from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=ident("t"))))
             .where(exp.GT(this=exp.column(_ROWS), expression=exp.Literal.number(1))))
    return int(backend.execute(query).column(_VALUE).to_pylist()[0])


def varying_persons(backend: Backend, view: str, key: str, name: str) -> int:
    """How many persons (distinct values of ``key``) hold more than one value of ``name`` over their
    rows, NULL counting as a value of its own (as a category QI's NULL label does)."""
    has_null = exp.Case().when(exp.Is(this=col(name), expression=exp.null()), exp.Literal.number(1)).else_(
        exp.Literal.number(0))
    spread = exp.Add(this=exp.Count(this=exp.Distinct(expressions=[col(name)])), expression=exp.func("max", has_null))
    inner = (exp.select(col(key)).from_(exp.to_table(view)).group_by(col(key))
             .having(exp.GT(this=spread, expression=exp.Literal.number(1))))
    query = exp.select(exp.alias_(exp.func("count", exp.Star()), _VALUE)).from_(
        exp.Subquery(this=inner, alias=exp.TableAlias(this=ident("t"))))
    return int(backend.execute(query).column(_VALUE).to_pylist()[0])
