"""SQL pieces every layer shares: quoted names, typed literals, a source value's key, and the
rendering of an expression in one dialect.

They sit below ``backends/`` and ``compile``: a backend renders its queries with ``to_sql``,
the domain guards and the compiler build on the same keys and literals, and nothing here
knows a recoding, a policy or an engine.  ``deid_sql.compiler.compile`` re-exports them (the names
the rest of the code uses: ``compile.ident``/``compile.col``).

Numbers in text are read by one definition on every engine (``whole_number``): a
plain decimal numeral (``NUMERAL``) of at most ``NUMERAL_LENGTH`` characters, so that every
engine's ``CAST`` to DOUBLE reads it alike and none can overflow or underflow.  Each engine's
own parser accepts more, and differently ('1e-400' is 0 for DuckDB and an error for
PostgreSQL, '1_000' is 1000 for DuckDB, '45.0' no BIGINT for PostgreSQL); a guard built on them
would put the same value inside the domain on one engine and outside on another, or stop the
query.  ``TRY_CAST`` is rendered per dialect in ``to_sql`` (``_safe_casts``): PostgreSQL has none,
so there it is a pattern test before the cast, which can never fail.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sqlglot import exp
from sqlglot.errors import ErrorLevel, UnsupportedError

from .errors import DialectError

if TYPE_CHECKING:
    from .domains.domain import Domain
    from .spec.file import QISpec

DIALECTS = ("duckdb", "postgres", "spark", "snowflake", "bigquery", "trino", "sqlite", "mysql", "tsql")
_INTEGER_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                  "UINTEGER", "UBIGINT", "INT", "INT8", "INT4", "INT2")

# A number written as text, as every engine's CAST to DOUBLE reads it alike: an optional sign, digits
# with an optional fraction, an optional exponent of at most two digits, spaces around.  With at most
# NUMERAL_LENGTH characters its magnitude lies between 1e-194 and 1e195, inside a double's range, so
# no engine's cast can fail on it nor round it to 0 or infinity.  No backslash: a dialect's string
# literal never changes it, and RE2 (DuckDB), PostgreSQL's and Java's (Spark) regexes read it alike.
NUMERAL = r"^ *[-+]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][-+]?[0-9]{1,2})? *$"
NUMERAL_LENGTH = 100
# PostgreSQL's TRY_CAST: integers of at most 18 digits (a BIGINT never overflows), days of the
# calendar written year-month-day (year 0001 to 9999; the day checked against its month below)
_PG_INTEGER = r"^ *[-+]?[0-9]{1,18} *$"
_PG_DATE = (r"^ *(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})-(0?[1-9]|1[0-2])"
            r"-(0?[1-9]|[12][0-9]|3[01]) *$")
TYPED = "deid_from"  # a TRY_CAST's meta: the SQL type its operand is known to have (``typed_cast``)


def ident(name: str) -> exp.Identifier:
    """An always-quoted identifier, so any column name round-trips."""
    return exp.to_identifier(name, quoted=True)


def col(name: str, table: str | None = None) -> exp.Column:
    return exp.Column(this=ident(name), table=ident(table) if table else None)


def aliased(relation: exp.Expression, alias: str) -> exp.Expression:
    """``relation`` as a FROM item named ``alias`` (a table aliased, a query as a subquery), so its
    columns can be named ``alias.column`` whatever the relation is."""
    return (exp.alias_(relation.copy(), alias, table=True) if isinstance(relation, exp.Table)
            else exp.Subquery(this=relation.copy(), alias=exp.TableAlias(this=ident(alias))))


class ExactText(exp.Expression):
    """Text compared byte for byte, whatever the collation of the column it comes from.

    A column declared ``VARCHAR COLLATE NOCASE`` (DuckDB), with a nondeterministic ICU collation
    (PostgreSQL) or ``STRING COLLATE UTF8_LCASE`` (Spark) makes ``col IN ('female')`` true for
    ``'FEMALE'``: a domain guard comparing under that collation lets a spelling the domain does not
    hold through.  Every text key of a guard or a group condition is wrapped in this node, which
    ``to_sql`` renders as the dialect's binary collation (``COLLATE "C"``, ``UTF8_BINARY``, …).
    It has no generic rendering: ``expression.sql()`` without ``to_sql`` fails instead of
    comparing under the column's collation."""

    arg_types = {"this": True}


def exact_text(expression: exp.Expression) -> ExactText:
    """``expression`` compared by its bytes (``ExactText``)."""
    return ExactText(this=expression)


# the binary collation of each dialect (None: its text comparisons are always binary)
_BINARY_COLLATION: dict[str, exp.Expression | None] = {
    "duckdb": exp.Identifier(this="C", quoted=True),
    "postgres": exp.Identifier(this="C", quoted=True),
    "spark": exp.Var(this="UTF8_BINARY"),
    "databricks": exp.Var(this="UTF8_BINARY"),
    "snowflake": exp.Literal.string(""),
    "bigquery": exp.Literal.string(""),
    "sqlite": exp.Var(this="BINARY"),
    "mysql": exp.Var(this="utf8mb4_bin"),
    "tsql": exp.Var(this="Latin1_General_BIN2"),
    "trino": None,
}


def _binary(dialect: str) -> Callable[[exp.Expression], exp.Expression]:
    if dialect not in _BINARY_COLLATION and dialect not in DIALECTS:
        raise DialectError(f"unknown SQL dialect {dialect!r}; try one of {', '.join(DIALECTS)}")
    if dialect not in _BINARY_COLLATION:
        raise DialectError(f"dialect {dialect!r} has no known binary collation, so a domain guard could compare "
                           f"under a column's collation; use one of {', '.join(sorted(_BINARY_COLLATION))}")
    collation = _BINARY_COLLATION[dialect]

    def rewrite(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, ExactText):
            return node
        inner = node.this
        return inner if collation is None else exp.Paren(this=exp.Collate(this=inner, expression=collation.copy()))
    return rewrite


_PG_NUMBERS = {exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT, exp.DataType.Type.DECIMAL}
_PG_WIDE = {exp.DataType.Type.BIGINT, exp.DataType.Type.DOUBLE}  # every 64-bit integer casts to them
_FIT_BIGINT = tuple(t for t in _INTEGER_TYPES if t not in ("HUGEINT", "UBIGINT"))  # integers of at most 64 bits
_PG_INTEGERS = {exp.DataType.Type.BIGINT, exp.DataType.Type.INT, exp.DataType.Type.SMALLINT,
                exp.DataType.Type.TINYINT}


def _pg_day(text: exp.Expression) -> exp.Expression:
    """The day written ``text`` (year-month-day, as ``_PG_DATE`` admits), NULL when its month has
    no such day (2021-02-29, 2020-04-31): the first of the month plus the days, kept only when
    the day of the month is still the one written."""
    def part(i: int) -> exp.Expression:
        piece = exp.func("split_part", exp.Trim(this=text.copy()), exp.Literal.string("-"), exp.Literal.number(i))
        return exp.cast(piece, "INT")
    first = exp.func("make_date", part(1), part(2), exp.Literal.number(1))
    day = exp.Add(this=first, expression=exp.Paren(this=exp.Sub(this=part(3), expression=exp.Literal.number(1))))
    same = exp.EQ(this=exp.Extract(this=exp.var("DAY"), expression=day.copy()), expression=part(3))
    return exp.Case().when(same, day)


def _pg_try_cast(node: exp.TryCast) -> exp.Expression:
    """``TRY_CAST`` for PostgreSQL, which has none: ``CASE WHEN <the text is valid input> THEN CAST
    END``, the test a pattern on the value's text (compared byte for byte: a nondeterministic
    collation refuses regular expressions), so it holds for text and numeric columns alike and the
    cast can never fail.  A date or timestamp known to be one (``typed_cast``) is cast to DATE
    directly, a floating-point number to DOUBLE, and an integer of at most 64 bits to BIGINT or
    DOUBLE: that cast cannot fail, and a pattern on every row's text made a guarded release several
    times slower than the same SELECT without it.  Should the column's type change under stored SQL
    (PostgreSQL's views pin it; printed SQL run on other data may not), text fails the plain cast
    loudly and a NUMERIC 45.5 fails the guard's DOUBLE = BIGINT test: neither is released."""
    to = node.args["to"]
    value = node.this.copy()
    source = str(node.meta.get(TYPED, ""))
    if ((to.this == exp.DataType.Type.DATE and source.startswith(("DATE", "TIMESTAMP")))
            or (to.this in _PG_NUMBERS and source.startswith(("DOUBLE", "FLOAT", "REAL")))
            or (to.this in _PG_WIDE and fits_bigint(source))):
        return exp.Cast(this=value, to=to.copy())  # a NUMERIC, which may exceed a DOUBLE, is tested below
    text = exact_text(exp.cast(value.copy(), "TEXT"))
    if to.this in _PG_INTEGERS:
        valid: exp.Expression = exp.RegexpLike(this=text, expression=exp.Literal.string(_PG_INTEGER))
    elif to.this in _PG_NUMBERS:
        valid = _is_numeral(exp.cast(value.copy(), "TEXT"))
    elif to.this == exp.DataType.Type.DATE:
        valid = exp.RegexpLike(this=text, expression=exp.Literal.string(_PG_DATE))
        return exp.Case().when(valid, _pg_day(exact_text(exp.cast(value, "TEXT"))))
    else:
        return exp.Cast(this=value, to=to.copy())
    return exp.Case().when(valid, exp.Cast(this=value, to=to.copy()))


def _spark_try_cast(node: exp.TryCast) -> exp.Expression:
    """sqlglot renders ``TryCast`` as a plain ``CAST`` for Spark (right without ANSI mode, which
    Spark 4 turns on): marked safe it renders as Spark's own ``TRY_CAST``."""
    node = node.copy()
    node.set("safe", True)
    return node


_TRY_CASTS: dict[str, Callable[[exp.TryCast], exp.Expression]] = {
    "postgres": _pg_try_cast, "spark": _spark_try_cast, "databricks": _spark_try_cast}


def _safe_casts(dialect: str) -> Callable[[exp.Expression], exp.Expression] | None:
    """The rewrite of every ``TryCast`` into what ``dialect`` runs without failing on a bad value
    (None: sqlglot's own rendering is already safe, or the dialect has nothing better)."""
    render = _TRY_CASTS.get(dialect) if isinstance(dialect, str) else None
    if render is None:
        return None

    def rewrite(node: exp.Expression) -> exp.Expression:
        return render(node) if isinstance(node, exp.TryCast) and not node.args.get("safe") else node
    return rewrite


def _broadcast_literal_joins(node: exp.Expression) -> exp.Expression:
    """Spark: a join to a table of literal rows (a QI's value → label table, ``compile.label_table``:
    two ``VALUES`` lists joined) is broadcast.  Spark sizes a join of two ``VALUES`` lists by the
    product of their sizes, too large to broadcast, and so shuffled and sorted every source row to
    join a few hundred labels (10 M rows: 11 s against 5.5 s for the plain write)."""
    if not isinstance(node, exp.Select) or node.args.get("hint") is not None:
        return node
    small = [join.this.alias for join in node.args.get("joins") or ()
             if isinstance(join.this, exp.Subquery) and join.this.alias and join.this.find(exp.Table) is None
             and join.this.find(exp.Values) is not None]
    if small:
        node.set("hint", exp.Hint(expressions=[exp.JoinHint(
            this="BROADCAST", expressions=[exp.Table(this=exp.to_identifier(name)) for name in small])]))
    return node


def to_sql(expression: exp.Expression, dialect: str = "duckdb", pretty: bool = False, copy: bool = True) -> str:
    """Render for ``dialect``; anything the dialect cannot express raises ``DialectError``.
    ``copy=False`` lets the generator's dialect transforms alter ``expression`` in place instead of
    a deep copy (seconds for a large domain's query): for a caller that built it to render once.
    ``TRY_CAST`` becomes the dialect's cast that cannot fail (``_safe_casts``) and byte-for-byte
    text comparisons (``ExactText``) the dialect's binary collation here."""
    try:
        safe = _safe_casts(dialect)
        if safe is not None and expression.find(exp.TryCast) is not None:
            expression = expression.transform(safe, copy=copy)
            copy = False
        if dialect in ("spark", "databricks") and expression.find(exp.Join) is not None:
            expression = expression.transform(_broadcast_literal_joins, copy=copy)
            copy = False
        if expression.find(ExactText) is not None:
            if not isinstance(dialect, str) or dialect not in _BINARY_COLLATION:
                _binary(str(dialect))  # raises the one-line DialectError
            expression = expression.transform(_binary(dialect), copy=copy)
            copy = False
        return expression.sql(dialect=dialect, copy=copy, unsupported_level=ErrorLevel.RAISE, pretty=pretty)
    except UnsupportedError as e:
        raise DialectError(f"dialect {dialect!r} cannot express this query: {e}") from None
    except ValueError as e:  # unknown dialect
        raise DialectError(f"unknown SQL dialect {dialect!r}; try one of {', '.join(DIALECTS)}") from e


def is_integer_type(sql_type: str | None) -> bool:
    return bool(sql_type) and str(sql_type).upper().split("(")[0] in _INTEGER_TYPES


def fits_bigint(sql_type: str | None) -> bool:
    """An integer type of at most 64 bits, every value of which casts to BIGINT without fail."""
    return bool(sql_type) and str(sql_type).upper().split("(")[0] in _FIT_BIGINT


def added(terms: Sequence[exp.Expression]) -> exp.Expression:
    """``t1 + t2 + …`` of ``terms`` (0 for none)."""
    if not terms:
        return exp.Literal.number(0)
    return functools.reduce(lambda a, b: exp.Add(this=a, expression=b), terms)


def is_fraction_type(sql_type: str | None) -> bool:
    """A number type that may hold fractions: floating point or ``DECIMAL``/``NUMERIC``."""
    return bool(sql_type) and str(sql_type).upper().startswith(("DOUBLE", "FLOAT", "REAL", "DECIMAL", "NUMERIC"))


def _is_numeral(text: exp.Expression) -> exp.Expression:
    """``text`` is a ``NUMERAL`` (compared byte for byte: a nondeterministic collation refuses a
    regular expression) of at most ``NUMERAL_LENGTH`` characters."""
    return exp.and_(exp.LTE(this=exp.Length(this=text.copy()), expression=exp.Literal.number(NUMERAL_LENGTH)),
                    exp.RegexpLike(this=exact_text(text.copy()), expression=exp.Literal.string(NUMERAL)))


def whole_number(column: exp.Expression, low: int, high: int, sql_type: str | None = None) -> exp.Expression:
    """The value as a BIGINT when it is a whole number in [low, high], else NULL; never fails.

    A column of a number type that may hold fractions (``is_fraction_type``: DOUBLE, DECIMAL, …)
    is that number (NaN and infinities are in no range).  Any other column, text above all, is
    read from its text by one definition on every engine: a ``NUMERAL`` (the module's docstring),
    cast to DOUBLE only behind the pattern test.  So '45', ' 45 ', '+45', '45.0' and '4.5e1' are
    45, and '45.5', '1e-400', '1e400', 'NaN', '-Infinity', '1_000' and '0x2D' are none.  The DOUBLE
    is cast to BIGINT only inside the range."""
    text = exp.cast(column.copy(), "VARCHAR")
    fractions = is_fraction_type(sql_type)
    value = typed_cast(column, "DOUBLE", sql_type) if fractions else exp.cast(text.copy(), "DOUBLE")
    as_int = exp.cast(value.copy(), "BIGINT")
    exact = exp.Case().when(as_int.eq(value.copy()), as_int.copy())
    in_range = exp.Case().when(exp.Between(this=value.copy(), low=exp.Literal.number(low),
                                           high=exp.Literal.number(high)), exact)
    return in_range if fractions else exp.Case().when(_is_numeral(text), in_range)


def text_number(column: exp.Expression) -> exp.Expression:
    """The value read from its text as a DOUBLE when that text is a ``NUMERAL``, else NULL; never
    fails.  A number column's text is its value as the engine spells it (a DOUBLE's shortest
    round-trip digits, a REAL's as shown), so any column type gives the same number on every engine."""
    text = exp.cast(column.copy(), "VARCHAR")
    return exp.Case().when(_is_numeral(text), exp.cast(text.copy(), "DOUBLE"))


def typed_cast(column: exp.Expression, to: str, sql_type: str | None) -> exp.TryCast:
    """``TRY_CAST(column AS to)`` that knows the column's SQL type (None: unknown).  PostgreSQL,
    which has no ``TRY_CAST``, casts a date or a timestamp to DATE directly (reading it through its
    text would depend on the session's ``DateStyle``, and a timestamp's text is no day) and a
    floating-point number to DOUBLE (no test of its text needed: the cast cannot fail)."""
    node = exp.TryCast(this=column.copy(), to=exp.DataType.build(to))
    if sql_type is not None:
        node.meta[TYPED] = sql_type.upper()
    return node


def source_key(qi: QISpec, domain: Domain, column: exp.Expression, sql_type: str | None) -> exp.Expression:
    """The source value normalized to the domain's type (text for categories and ZIPs,
    zero-padded when a ZIP column was stored as a number; NULL as its category).  Text keys are
    ``ExactText``: every comparison a guard, a group or a load makes with them is byte for byte.
    An integer held in any other type is a ``whole_number`` of the domain's range (NULL when it is
    none), a day in another type a ``typed_cast``: a key never fails on a value outside the domain."""
    t = (sql_type or "").upper()
    if domain.kind == "integer":
        if sql_type is None or is_integer_type(t):
            return column
        return whole_number(column, int(domain.value(0)), int(domain.value(domain.size - 1)), t)  # type: ignore
    if domain.kind == "date":
        return column if (sql_type is None or t == "DATE") else typed_cast(column, "DATE", sql_type)
    key: exp.Expression = column
    if sql_type is not None and t != "VARCHAR":
        key = exp.cast(column, "VARCHAR")  # CHAR(n) loses its padding here (PostgreSQL's bpchar -> text)
        if domain.kind == "zip" and is_integer_type(t):
            width = len(domain.text(0))
            key = exp.func("lpad", key, exp.Literal.number(width), exp.Literal.string("0"))
    if not (domain.kind == "zip" and is_integer_type(t)):
        key = exact_text(key)  # compared byte for byte, whatever the column's collation
    if qi.nulls == "category":
        key = exp.func("coalesce", key, exp.Literal.string(qi.null_label))
    return key


#: types whose values no collation compares: a person key of one of them is compared as it is
_UNCOLLATED = ("BOOLEAN", "DATE", "TIME", "TIMESTAMP", "DECIMAL", "NUMERIC", "DOUBLE", "FLOAT", "REAL", "UUID",
               "BLOB", "BYTEA", "BINARY")


def person_key(column: exp.Expression, sql_type: str | None = None) -> exp.Expression:
    """A person key as every path tells persons apart: byte for byte (METHODS.md decisions 12 and
    13).  A key column declared ``VARCHAR COLLATE NOCASE`` (DuckDB), with a nondeterministic ICU
    collation (PostgreSQL) or ``UTF8_LCASE`` (Spark) makes ``'Q1'`` and ``'q1'`` one person to a
    plain ``GROUP BY``, ``PARTITION BY``, ``DISTINCT`` or join, while their pseudonyms (an HMAC of
    the bytes) are two: the load counted one person where the gate counted two.  So a text key is
    ``ExactText`` wherever it is grouped, partitioned, counted or joined; a key of a type no
    collation touches (an integer, a date, a UUID) stays as it is; a key of an unknown type
    (``sql_type`` None, PostgreSQL's ``citext``) is compared as its text, byte for byte."""
    t = (sql_type or "").upper()
    if t == "VARCHAR" or t.startswith("VARCHAR("):
        return exact_text(column)
    if sql_type is not None and (is_integer_type(t) or t.split("(")[0].split(" ")[0] in _UNCOLLATED):
        return column
    return exact_text(exp.cast(column, "VARCHAR"))


def literal(domain: Domain, pos: int) -> exp.Expression:
    """Domain value at ``pos`` as a typed SQL literal."""
    if domain.kind == "integer":
        return exp.Literal.number(int(domain.value(pos)))  # type: ignore[call-overload]
    if domain.kind == "date":
        return exp.cast(exp.Literal.string(domain.text(pos)), "DATE")
    return exp.Literal.string(domain.text(pos))


__all__ = ["DIALECTS", "NUMERAL", "NUMERAL_LENGTH", "ExactText", "added", "aliased", "col", "exact_text",
           "fits_bigint", "ident", "is_fraction_type", "is_integer_type", "literal", "person_key", "source_key",
           "text_number", "to_sql", "typed_cast", "whole_number"]
