"""SQL pieces every layer shares: quoted names, typed literals, a source value's key, and the
rendering of an expression in one dialect.

They sit below ``backends/`` and ``compile``: a backend renders its queries with ``to_sql``,
the domain guards and the compiler build on the same keys and literals, and nothing here
knows a recoding, a policy or an engine.  ``deid_sql.compile`` re-exports them (the names
the rest of the code uses: ``compile.ident``/``compile.col``).
"""

from __future__ import annotations

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


def to_sql(expression: exp.Expression, dialect: str = "duckdb", pretty: bool = False, copy: bool = True) -> str:
    """Render for ``dialect``; anything the dialect cannot express raises ``DialectError``.
    ``copy=False`` lets the generator's dialect transforms alter ``expression`` in place instead of
    a deep copy (seconds for a large domain's query): for a caller that built it to render once."""
    try:
        return expression.sql(dialect=dialect, copy=copy, unsupported_level=ErrorLevel.RAISE, pretty=pretty)
    except UnsupportedError as e:
        raise DialectError(f"dialect {dialect!r} cannot express this query: {e}") from None
    except ValueError as e:  # unknown dialect
        raise DialectError(f"unknown SQL dialect {dialect!r}; try one of {', '.join(DIALECTS)}") from e


def is_integer_type(sql_type: str | None) -> bool:
    return bool(sql_type) and str(sql_type).upper().split("(")[0] in _INTEGER_TYPES


def source_key(qi: QISpec, domain: Domain, column: exp.Expression, sql_type: str | None) -> exp.Expression:
    """The source value normalized to the domain's type (text for categories and ZIPs,
    zero-padded when a ZIP column was stored as a number; NULL as its category)."""
    t = (sql_type or "").upper()
    if domain.kind == "integer":
        return column if (sql_type is None or is_integer_type(t)) else exp.cast(column, "BIGINT")
    if domain.kind == "date":
        return column if (sql_type is None or t == "DATE") else exp.cast(column, "DATE")
    key: exp.Expression = column
    if sql_type is not None and t != "VARCHAR":
        key = exp.cast(column, "VARCHAR")
        if domain.kind == "zip" and is_integer_type(t):
            width = len(domain.text(0))
            key = exp.func("lpad", key, exp.Literal.number(width), exp.Literal.string("0"))
    if qi.nulls == "category":
        key = exp.func("coalesce", key, exp.Literal.string(qi.null_label))
    return key


def literal(domain: Domain, pos: int) -> exp.Expression:
    """Domain value at ``pos`` as a typed SQL literal."""
    if domain.kind == "integer":
        return exp.Literal.number(int(domain.value(pos)))  # type: ignore[call-overload]
    if domain.kind == "date":
        return exp.cast(exp.Literal.string(domain.text(pos)), "DATE")
    return exp.Literal.string(domain.text(pos))


__all__ = ["DIALECTS", "col", "ident", "is_integer_type", "literal", "source_key", "to_sql"]
