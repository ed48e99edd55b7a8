"""Rows of persons: the source as a release reads it when a row is not a person.

Every row of a person must carry that person's one label per QI, or a patient with a birthday
between two visits would sit in two groups of the release.  ``person_rows`` rewrites the source
before it is generalized: a QI column becomes the person's value by the QI's ``per_person`` rule
(the same rule, and the same tie-break, as the cells of persons in ``person_cells``), and a
derived QI (``derived = "rows"``) becomes a column holding the person's row count.  Window
functions only (``PARTITION BY`` the person key, byte for byte: ``sqltext.person_key``), so the
rewrite runs on DuckDB, PostgreSQL and Spark, in views and compiled SQL alike.

Ties of ``first``/``last`` (rows of one person with the same order) go to the value first (last)
in the domain's order, as the cells' positions do.  For integers, dates and a category or ZIP
domain listed in text order that is the value's own order; another category or ZIP domain
(``["b", "a"]``) ranks each value by its position: a ``CASE`` of the domain's values, or for a
large domain a joined ``VALUES`` table of (value, position), a value outside the domain ranking
last.

The gate then counts persons on the released rows by their key, which rows written with
``[person]`` must carry pseudonymized (or kept); stored SQL may drop it: ``check_person_release``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlglot import exp

from ..compiler.guards import IN_LIST
from ..domains.domain import CategoryDomain, Domain
from ..errors import PolicyError
from ..spec.file import Spec
from ..sqltext import col, ident, person_key, source_key
from .person_cells import person_window

ALIAS = "deid_rows"
ROWS_TYPE = "BIGINT"  # the type of a derived row count column


def derived_columns(spec: Spec) -> dict[str, str]:
    """The derived QIs' released columns and their SQL type."""
    return {q.column: ROWS_TYPE for q in spec.qis if q.derived is not None}


def check_person_release(spec: Spec, persistent: bool = False) -> None:
    """What a release counted in persons needs.  Rows written (a file, an engine table) carry the
    person key pseudonymized (or kept): the gate counts persons on the rows written, and a
    patient's rows stay linkable.  Stored SQL (a view, compiled SQL, a dbt model) cannot hold the
    pseudonym's key, so it may drop the key: the gate then counts persons on the same query with
    the key kept for the count only (``Problem.query(measuring=True)``), never released."""
    person = spec.person
    if person is None:
        return
    role = spec.columns.role(person.column)
    if persistent or role in ("pseudonymize", "keep"):  # stored SQL that pseudonymizes: refuse_persistent
        return
    raise PolicyError(f"[person] column {person.column!r} is released as {role or 'dropped'}; a release written "
                      f"counted in persons carries the person key so the gate counts persons on the rows "
                      f"written (and a patient's rows stay linkable): list it under [columns] pseudonymize "
                      f"(a view, compiled SQL or dbt model may drop it instead)")


def person_rows(spec: Spec, domains: Sequence[Domain], columns: Mapping[str, str | None],
                source: exp.Expression) -> exp.Select:
    """``SELECT`` every source column of ``columns`` from ``source``, each QI column as its person's
    value, and each derived QI's column (its name) as the person's row count."""
    person = spec.person
    assert person is not None
    key = person_key(col(person.column, ALIAS), columns.get(person.column))
    order = col(person.order, ALIAS) if person.order is not None else exp.null()
    by_column = {q.column: (i, q, d) for i, (q, d) in enumerate(zip(spec.qis, domains)) if q.derived is None}
    derived = derived_columns(spec)
    projections: list[exp.Expression] = []
    joins: list[tuple[exp.Expression, exp.Expression]] = []
    for name, sql_type in columns.items():
        if name in derived:
            continue
        raw = col(name, ALIAS)
        if name not in by_column:
            projections.append(exp.alias_(raw, ident(name)))
            continue
        i, q, domain = by_column[name]
        if q.per_person in ("first", "last"):
            tie = source_key(q, domain, raw.copy(), sql_type)
            ties = [tie]
            if isinstance(domain, CategoryDomain) and not _text_ordered(domain):
                rank, join = _rank(domain, tie, i)
                ties.insert(0, rank)
                if join is not None:
                    joins.append(join)
            value: exp.Expression = person_window(raw, key, order, ties, q.per_person == "last")
        else:  # max, min, or a QI that must not vary (its least value, whatever the data turned into)
            value = exp.Window(this=exp.func("max" if q.per_person == "max" else "min", raw),
                               partition_by=[key.copy()])
        projections.append(exp.alias_(value, ident(name)))
    for name in derived:
        projections.append(exp.alias_(exp.Window(this=exp.func("count", exp.Star()), partition_by=[key.copy()]),
                                      ident(name)))
    relation = (exp.alias_(source.copy(), ALIAS, table=True) if isinstance(source, exp.Table)
                else exp.Subquery(this=source.copy(), alias=exp.TableAlias(this=ident(ALIAS))))
    query = exp.select(*projections).from_(relation)
    for table, on in joins:  # the domain's values are distinct: one row per source row
        query = query.join(table, on=on, join_type="LEFT")
    return query


def _text_ordered(domain: CategoryDomain) -> bool:
    """Whether the domain lists its values in their text's order (code points: the bytes' order of
    UTF-8, which a binary collation sorts by), so a value's own text ranks it as its position does."""
    return all(a < b for a, b in zip(domain.values, domain.values[1:]))


def _rank(domain: CategoryDomain, key: exp.Expression, index: int
          ) -> tuple[exp.Expression, tuple[exp.Expression, exp.Expression] | None]:
    """The position of ``key`` (the value as the domain spells it, byte for byte) in the domain's
    order, NULL outside it: a ``CASE`` of the values, or for a domain larger than ``IN_LIST`` a
    column of a joined ``VALUES`` table (and the join)."""
    if domain.size <= IN_LIST:
        case = exp.Case(this=key.copy(), ifs=[exp.If(this=exp.Literal.string(v), true=exp.Literal.number(p))
                                              for p, v in enumerate(domain.values)])
        return case, None
    alias, value, position = f"deid_rank_{index}", f"deid_rank_value_{index}", f"deid_rank_{index}"
    rows = [exp.Tuple(expressions=[exp.Literal.string(v), exp.Literal.number(p)]) for p, v in enumerate(domain.values)]
    table = exp.Values(expressions=rows, alias=exp.TableAlias(this=ident(alias),
                                                              columns=[ident(value), ident(position)]))
    on = exp.EQ(this=key.copy(), expression=col(value, alias))
    return col(position, alias), (table, on)


__all__ = ["check_person_release", "derived_columns", "person_rows"]
