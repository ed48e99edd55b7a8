"""Domain guards: the SQL test that a source value lies in its QI's declared (or saved) domain.

Loading refuses source values outside a domain, but compiled SQL outlives the load: a view
re-reads a file that may since have been replaced, compiled SQL and dbt models run by hand on
other data.  So every compiled QI tests membership and releases anything else as the outside
label (``compile.label_expr``) — never as its raw value, and never as a group it is not in (a
ZIP between two domain ZIPs satisfies a ``BETWEEN``, yet belongs to no group).

The tests are self-contained (literals only), because views and printed SQL must need nothing
of the session that wrote them.  Integers and dates are tested by range, categories and ZIPs by
membership: a short ``IN`` list, or for a large domain ``IN (SELECT v FROM (VALUES …))``, which
every engine plans as a hash lookup (DuckDB: a mark join; PostgreSQL: a hashed subplan; Spark:
a semi join), so a row costs one probe however large the domain.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sqlglot import exp

from ..domains.domain import Domain, ZipDomain
from ..spec.file import QISpec
from ..sqltext import is_integer_type, literal, source_key, typed_cast, whole_number

IN_LIST = 64  # domains up to this size are tested with a literal IN list, larger ones with a VALUES subquery


def implied_by_groups(domain: Domain, sql_type: str | None) -> bool:
    """True when a group condition over domain values (an ``IN`` list of them, as categories
    use) already implies membership, so only the values that pass through as text need the
    guard: categories, and ZIPs stored as text.  Integers and dates are guarded first, because
    a file under a view may change type (a CSV re-read with 45.5 or a time of day) and a cast
    key would then round it into a group; a ZIP stored as a number is ``lpad``-ed."""
    return domain.kind in ("category", "zip") and not (domain.kind == "zip" and is_integer_type(sql_type))


def member(qi: QISpec, domain: Domain, column: exp.Expression, sql_type: str | None,
           positions: Sequence[int] | np.ndarray | None = None, values: str | None = None) -> exp.Expression:
    """TRUE when the value is in ``domain``, FALSE or NULL otherwise (for a ``WHEN``, where NULL
    is not taken).  ``in_domain`` is the never-NULL form.  ``positions`` (categories and ZIPs
    only) tests membership of those domain values alone: ``label_expr`` guards only the values
    that pass through as text, the others being matched by their groups' ``IN`` lists.
    ``values`` names a session table (column ``v``) holding a large domain's values, looked up
    instead of the inline ``VALUES`` list (a batch's repeated checks; never for a view).

    Integers and dates are tested whatever the column's type now is (``TRY_CAST``, which each
    dialect renders so that it cannot fail: ``sqltext.to_sql``): an integer domain holds whole
    numbers only, so 45.5 or the text '45.5' is outside; a date domain holds days, so a
    timestamp is in it when its day is (as when it was loaded).  An integer QI whose column is
    not of an integer type is read by one definition on every engine, ``sqltext.whole_number``:
    a DOUBLE or DECIMAL that is a whole number in range, or text that is a plain numeral of one,
    so '1e400', 'NaN', '-Infinity' or '1e-400' are outside everywhere and stop no query."""
    low, high = literal(domain, 0), literal(domain, domain.size - 1)
    if domain.kind == "integer":
        if sql_type is not None and not is_integer_type(sql_type):
            whole = whole_number(column, int(domain.value(0)), int(domain.value(domain.size - 1)),  # type: ignore
                                 sql_type)
            return exp.Not(this=exp.Is(this=whole, expression=exp.null()))
        as_int = typed_cast(column, "BIGINT", sql_type)  # an integer column's type known: no text test
        as_dbl = typed_cast(column, "DOUBLE", sql_type)
        return exp.and_(as_dbl.eq(as_int.copy()), exp.Between(this=as_int.copy(), low=low, high=high))
    if domain.kind == "date":
        return exp.Between(this=typed_cast(column, "DATE", sql_type), low=low, high=high)
    key = source_key(qi, domain, column.copy(), sql_type)
    texts = [domain.text(int(p)) for p in (range(domain.size) if positions is None else positions)]
    if len(texts) <= IN_LIST:
        cond: exp.Expression = exp.In(this=key, expressions=[exp.Literal.string(v) for v in texts])
    elif values is not None and positions is None:  # the whole domain, held in a session table
        query = exp.Select(expressions=[exp.column("v")]).from_(exp.to_table(values), copy=False)
        cond = exp.In(this=key, query=exp.Subquery(this=query))
    else:
        # built node by node: sqlglot's builders deep-copy their arguments, seconds for 30,000 values
        rows = [exp.Tuple(expressions=[exp.Literal.string(v)]) for v in texts]
        table = exp.Values(expressions=rows, alias=exp.TableAlias(this=exp.to_identifier("deid_domain"),
                                                                  columns=[exp.to_identifier("v")]))
        query = exp.Select(expressions=[exp.column("v")]).from_(table, copy=False)
        cond = exp.In(this=key, query=exp.Subquery(this=query))
    if isinstance(domain, ZipDomain) and is_integer_type(sql_type):
        # lpad cuts 123456 to '12345': a number too wide for the ZIP is outside, as is a negative one
        width = len(domain.text(0))
        cond = exp.and_(exp.Between(this=column.copy(), low=exp.Literal.number(0),
                                    high=exp.Literal.number(10 ** width - 1)), cond)
    return cond


def in_domain(qi: QISpec, domain: Domain, column: exp.Expression, sql_type: str | None,
              values: str | None = None) -> exp.Expression:
    """TRUE exactly when the value of ``column`` (of SQL type ``sql_type``, None: the domain's
    own) lies in ``domain``; never NULL — a NULL is outside unless ``qi.nulls = "category"``
    makes it the domain's null label.  ``values``: see ``member``."""
    return exp.func("coalesce", member(qi, domain, column, sql_type, values=values), exp.false())


__all__ = ["IN_LIST", "implied_by_groups", "in_domain", "member"]
