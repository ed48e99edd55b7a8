"""SQL pieces every layer shares: quoted names, typed literals, a source value's key, and the
rendering of an expression in one dialect.

They sit below ``backends/`` and ``compile``: a backend renders its queries with ``to_sql``,
the domain guards and the compiler build on the same keys and literals, and nothing here
knows a recoding, a policy or an engine.  ``deid_sql.compile`` re-exports them (the names
the rest of the code uses: ``compile.ident``/``compile.col``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlglot import exp
from sqlglot.errors import ErrorLevel, UnsupportedError

from .errors import DialectError

if TYPE_CHECKING:
    from .domain import Domain
    from .spec import QISpec

DIALECTS = ("duckdb", "postgres", "spark", "snowflake", "bigquery", "trino", "sqlite", "mysql", "tsql")
_INTEGER_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                  "UINTEGER", "UBIGINT", "INT", "INT8", "INT4", "INT2")


def ident(name: str) -> exp.Identifier:
    """An always-quoted identifier, so any column name round-trips."""
    return exp.to_identifier(name, quoted=True)


def col(name: str, table: str | None = None) -> exp.Column:
    return exp.Column(this=ident(name), table=ident(table) if table else None)


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


def to_sql(expression: exp.Expression, dialect: str = "duckdb", pretty: bool = False, copy: bool = True) -> str:
    """Render for ``dialect``; anything the dialect cannot express raises ``DialectError``.
    ``copy=False`` lets the generator's dialect transforms alter ``expression`` in place instead of
    a deep copy (seconds for a large domain's query): for a caller that built it to render once.
    Byte-for-byte text comparisons (``ExactText``) become the dialect's binary collation here."""
    try:
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


def source_key(qi: QISpec, domain: Domain, column: exp.Expression, sql_type: str | None) -> exp.Expression:
    """The source value normalized to the domain's type (text for categories and ZIPs,
    zero-padded when a ZIP column was stored as a number; NULL as its category).  Text keys are
    ``ExactText``: every comparison a guard, a group or a load makes with them is byte for byte."""
    t = (sql_type or "").upper()
    if domain.kind == "integer":
        return column if (sql_type is None or is_integer_type(t)) else exp.cast(column, "BIGINT")
    if domain.kind == "date":
        return column if (sql_type is None or t == "DATE") else exp.cast(column, "DATE")
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


__all__ = ["DIALECTS", "ExactText", "col", "exact_text", "ident", "is_integer_type", "literal", "person_key",
           "source_key", "to_sql"]
