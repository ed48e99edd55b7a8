"""``TRY_CAST`` for PostgreSQL, which has none.

The loader tests a QI's values with ``TRY_CAST`` (``loading._position``, ``guards``): a value that
is no number or date becomes NULL and is reported as outside the domain, with an example, as on
DuckDB.  sqlglot renders ``TryCast`` for PostgreSQL as a plain ``CAST``, which fails the whole
query on the first ``'abc'`` of a text column.  Here each one becomes
``CASE WHEN <the text is valid input> THEN CAST(x AS T) END``: the test is a regular expression
for numbers (integers of at most 18 digits, so a BIGINT never overflows) and dates, evaluated on
the value's text, so it holds for text and numeric columns alike.
"""

from __future__ import annotations

from sqlglot import exp

_INTEGER = r"^\s*[-+]?[0-9]{1,18}\s*$"
_NUMBER = r"^\s*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]{1,3})?\s*$"
_DATE = r"^\s*[0-9]{4}-(0?[1-9]|1[0-2])-(0?[1-9]|[12][0-9]|3[01])\s*$"
_INTEGER_TYPES = {exp.DataType.Type.BIGINT, exp.DataType.Type.INT, exp.DataType.Type.SMALLINT,
                  exp.DataType.Type.TINYINT}
_NUMBER_TYPES = {exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT, exp.DataType.Type.DECIMAL}


def _safe(node: exp.Expression) -> exp.Expression:
    if not isinstance(node, exp.TryCast):
        return node
    to = node.args["to"]
    pattern = (_INTEGER if to.this in _INTEGER_TYPES else _NUMBER if to.this in _NUMBER_TYPES
               else _DATE if to.this == exp.DataType.Type.DATE else None)
    if pattern is None:
        return exp.Cast(this=node.this.copy(), to=to.copy())
    value = node.this.copy()
    valid = exp.RegexpLike(this=exp.cast(value.copy(), "TEXT"), expression=exp.Literal.string(pattern))
    return exp.Case().when(valid, exp.Cast(this=value, to=to.copy()))


def try_casts(query: exp.Expression) -> exp.Expression:
    """``query`` with every ``TryCast`` made safe for PostgreSQL (the module's docstring)."""
    if not any(True for _ in query.find_all(exp.TryCast)):
        return query
    return query.transform(_safe)
