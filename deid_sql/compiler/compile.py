"""Compiler: recoding -> sqlglot expression -> SQL text in any dialect.

Each QI becomes a ``CASE`` that names generalized groups (``BETWEEN`` for
intervals of ordered values, ``IN`` lists for categories and non-contiguous
groups) and passes single values through as text; a value outside the QI's domain
becomes the outside label (``guards``), whatever data the SQL later runs on.  Other
columns pass through unchanged.  Names enter as quoted identifiers and values as
literals, never by string concatenation, so quotes, semicolons, unicode and keywords
round-trip.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
from sqlglot import exp

from ..domains.domain import Domain, ZipDomain
from ..domains.recoding import QIRecoding, Recoding
from ..spec.file import QISpec, TableRef
from ..sqltext import DIALECTS as DIALECTS  # re-exported: the names the rest of the code imports from here
from ..sqltext import col as col
from ..sqltext import ident as ident
from ..sqltext import is_fraction_type
from ..sqltext import is_integer_type as is_integer_type
from ..sqltext import literal as literal
from ..sqltext import source_key as source_key
from ..sqltext import to_sql as to_sql
from ..storage.names import parse_name, rules_for, table_name
from .guards import IN_LIST, implied_by_groups, member
from .suppression import Suppression

SUPPRESSED = "*"


def _uses_between(domain: Domain) -> bool:
    if domain.kind in ("integer", "date"):
        return True
    return isinstance(domain, ZipDomain) and domain.lexicographic


def group_condition(domain: Domain, key: exp.Expression, members: np.ndarray) -> exp.Expression:
    """Condition selecting the source values of one group."""
    lo, hi = int(members[0]), int(members[-1])
    if _uses_between(domain) and hi - lo + 1 == members.size:
        return exp.Between(this=key.copy(), low=literal(domain, lo), high=literal(domain, hi))
    return exp.In(this=key.copy(), expressions=[literal(domain, int(p)) for p in members])


def label_key(qi: QISpec, domain: Domain, column: exp.Expression, sql_type: str | None) -> exp.Expression:
    """The value as a compiled query's group conditions compare it: ``source_key``, except that
    integers and dates are always cast, so that a file replaced under a view with another column
    type (a CSV with 45.5 or a time of day) shows whole numbers and days, as loaded.  An integer
    QI held as text is read as the guard read it (``sqltext.whole_number``): its text as a DOUBLE,
    then a BIGINT — which cannot fail, as it runs only behind the guard."""
    if domain.kind == "integer":
        if sql_type is not None and not (is_integer_type(sql_type) or is_fraction_type(sql_type)):
            return exp.cast(exp.cast(exp.cast(column.copy(), "VARCHAR"), "DOUBLE"), "BIGINT")
        return exp.cast(column.copy(), "BIGINT")
    if domain.kind == "date":
        return exp.cast(column.copy(), "DATE")
    return source_key(qi, domain, column, sql_type)


def label_expr(qi: QISpec, domain: Domain, recoding: QIRecoding, column: exp.Expression, sql_type: str | None,
               outside_label: str = SUPPRESSED) -> exp.Expression:
    """The generalized value of one QI: its group's label, or — for a value outside the domain
    (a file replaced under a view, SQL run on other data) — ``outside_label``, never the raw
    value nor a group it is not in.

    What leaves is always text the compiler wrote: a group's label, a category or text ZIP kept
    as itself as its domain spelling (a literal), an integer or a date as the engine prints the
    number or day (never the source's text).  Text keys compare byte for byte (``ExactText``),
    so a column whose collation folds case or accents cannot match ``'FEMALE'`` to ``'female'``.

    The guard (``guards.member``) costs one range test or hash probe per row; for categories
    it is skipped when every group is an ``IN`` list, which already implies membership.
    Otherwise it comes first: an integer, a date, or a ZIP between two domain ZIPs (which
    satisfies a ``BETWEEN`` yet is in no group).
    """
    key = label_key(qi, domain, column, sql_type)
    outside = exp.Literal.string(outside_label)
    if recoding.n_groups == 1:
        return _case([(member(qi, domain, column, sql_type), exp.Literal.string(recoding.labels[0]))], outside)
    members = _members(recoding)  # one pass: members(g) per group scans the domain k times
    labels = recoding.labels
    if implied_by_groups(domain, sql_type):  # categories and text ZIPs: every group by its label
        whens = [(group_condition(domain, key, members[g]), exp.Literal.string(labels[g]))
                 for g in range(recoding.n_groups)]
        if not any(isinstance(cond, exp.Between) for cond, _ in whens):
            return _case(whens, outside)
        return _case([(member(qi, domain, column, sql_type), _case(whens, outside))], outside)
    text = exp.cast(key.copy(), "VARCHAR")  # a number or a day printed by the engine, or a zero-padded ZIP
    wide = [g for g in range(recoding.n_groups)
            if recoding.widths[g] > 1 or labels[g] != domain.text(int(members[g][0]))]
    whens = [(group_condition(domain, key, members[g]), exp.Literal.string(labels[g])) for g in wide]
    return _case([(member(qi, domain, column, sql_type), _case(whens, text) if whens else text)], outside)


def _members(recoding: QIRecoding) -> list[np.ndarray]:
    """The domain positions of every group, ascending, in one sort (``QIRecoding.members`` per group
    scans the whole domain each time: quadratic for a random policy over a large domain)."""
    order = np.argsort(recoding.group_of, kind="stable")
    return np.split(order, np.cumsum(recoding.widths)[:-1])


def _case(whens: Sequence[tuple[exp.Expression, exp.Expression]], default: exp.Expression) -> exp.Case:
    """``CASE WHEN … THEN … ELSE default END`` without the builders' deep copies (a large
    domain's guard holds thousands of nodes)."""
    return exp.Case(ifs=[exp.If(this=cond, true=value) for cond, value in whens], default=default)


def generalize(recoding: Recoding, qis: Sequence[QISpec], domains: Sequence[Domain],
               source: exp.Expression, columns: Mapping[str, str | None],
               suppression: Suppression | int | None = None, flag: str = "deid_suppressed",
               outside_label: str = SUPPRESSED, person: exp.Expression | None = None) -> exp.Select:
    """``SELECT`` every source column in order, QIs replaced by their labels.

    A QI value outside its domain becomes ``outside_label`` (``label_expr``), so the query
    releases no raw value whatever data it later runs on.

    With a ``suppression`` every record of a suppressed group gets ``*`` in each QI and
    ``flag`` = true: for ``k`` (or ``Suppression.smaller_than(k)``) the groups of fewer than k
    records (a window count over the labels); for a set of label tuples those groups (a left
    join to a ``VALUES`` table of them: no literal list however many there are).  ``person``: the
    person key (``[person]``) as persons are told apart (``sqltext.person_key``), so k counts
    persons, not rows.
    """
    qi_by_column = {q.column: i for i, q in enumerate(qis)}
    projections: list[exp.Expression] = []
    joins: list[tuple[exp.Expression, exp.Expression]] = []
    for name, sql_type in columns.items():
        if name in qi_by_column:
            i = qi_by_column[name]
            q, domain, rec = qis[i], domains[i], recoding.qis[i]
            if uses_label_table(domain, rec, sql_type):
                table, on, label = label_table(q, domain, rec, col(name), sql_type, i, outside_label)
                joins.append((table, on))
            else:
                label = label_expr(q, domain, rec, col(name), sql_type, outside_label)
            projections.append(exp.alias_(label, ident(name), copy=False))
        else:
            projections.append(col(name))
    inner = exp.select(*projections, copy=False).from_(from_relation(source), copy=False)  # no deep copy of the CASEs
    for table, on in joins:
        inner = inner.join(table, on=on, join_type="LEFT", copy=False)
    return suppress(inner, [q.column for q in qis], list(columns), suppression, flag, person)


def uses_label_table(domain: Domain, recoding: QIRecoding, sql_type: str | None) -> bool:
    """Whether a QI's labels come from a joined table of (value, label) rather than a ``CASE``: a
    category (or text ZIP) QI whose groups would otherwise list more than ``IN_LIST`` values in
    conditions — a long literal list slows every engine (PostgreSQL's JIT most), a hash join
    does not.  Ranges (``BETWEEN``) of ordered domains stay a ``CASE`` unless more than ``IN_LIST``
    values are kept as themselves (each needs its own branch, to show the domain's spelling)."""
    if not implied_by_groups(domain, sql_type) or domain.size <= IN_LIST:
        return False
    if _uses_between(domain) and recoding.contiguous:
        return int(np.count_nonzero(recoding.widths == 1)) > IN_LIST
    return True


def label_table(qi: QISpec, domain: Domain, recoding: QIRecoding, column: exp.Expression, sql_type: str | None,
                index: int, outside_label: str = SUPPRESSED) -> tuple[exp.Expression, exp.Expression, exp.Expression]:
    """``LEFT JOIN (value → group ⋈ group → label) AS deid_labels_<i> ON key = value`` and the label it
    gives: every domain value with its group's label, so a value in no row of the table is outside the
    domain and shows ``outside_label`` (the join is the guard).  The values are distinct, so the join
    keeps one row per source row.  Each label is written once, in a second ``VALUES`` table keyed by
    group number: a category group's label lists its members, and repeating it on every member's
    row made the query quadratic in the group's size (12,000 values under one label: 1.3 GB)."""
    alias = f"deid_labels_{index}"
    value, label, group = f"deid_value_{index}", f"deid_label_{index}", f"deid_group_{index}"
    values_alias, labels_alias = f"deid_values_{index}", f"deid_group_labels_{index}"
    members = exp.Values(
        expressions=[exp.Tuple(expressions=[exp.Literal.string(domain.text(p)), exp.Literal.number(int(g))])
                     for p, g in enumerate(recoding.group_of)],
        alias=exp.TableAlias(this=ident(values_alias), columns=[ident(value), ident(group)]))
    names = exp.Values(
        expressions=[exp.Tuple(expressions=[exp.Literal.number(g), exp.Literal.string(text)])
                     for g, text in enumerate(recoding.labels)],
        alias=exp.TableAlias(this=ident(labels_alias), columns=[ident(group), ident(label)]))
    pairs = (exp.select(exp.Column(this=ident(value), table=ident(values_alias)),
                        exp.Column(this=ident(label), table=ident(labels_alias)), copy=False)
             .from_(members, copy=False)
             .join(names, on=exp.EQ(this=exp.Column(this=ident(group), table=ident(values_alias)),
                                    expression=exp.Column(this=ident(group), table=ident(labels_alias))),
                   copy=False))
    table = exp.Subquery(this=pairs, alias=exp.TableAlias(this=ident(alias)))
    key = label_key(qi, domain, column, sql_type)
    on = exp.EQ(this=key, expression=exp.Column(this=ident(value), table=ident(alias)))
    shown = exp.func("coalesce", exp.Column(this=ident(label), table=ident(alias)), exp.Literal.string(outside_label))
    return table, on, shown


def suppress(inner: exp.Select, qi_cols: Sequence[str], columns: Sequence[str],
             suppression: Suppression | int | None, flag: str = "deid_suppressed",
             person: exp.Expression | None = None) -> exp.Select:
    """``inner`` (the generalized rows: ``columns`` in order, QIs as labels) with the groups of
    ``suppression`` blanked to ``*`` and flagged in ``flag``; ``inner`` itself without one.

    With ``person`` (the person key, byte for byte: ``sqltext.person_key``; every row of a person
    carries the person's labels) a size rule counts persons: the window sums a flag set on each
    person's first row, which every engine runs (PostgreSQL and Spark have no ``COUNT(DISTINCT
    …) OVER``)."""
    rule = Suppression.of(suppression)
    if rule is None:
        return inner
    qi_set = set(qi_cols)
    counted: exp.Expression = exp.Star()
    if rule.below is not None and person is not None:
        first = exp.Window(this=exp.func("row_number"), partition_by=[person.copy()],
                           order=exp.Order(expressions=[exp.Ordered(this=person.copy())]))
        inner = inner.select(exp.alias_(exp.Case().when(exp.EQ(this=first, expression=exp.Literal.number(1)),
                                                          exp.Literal.number(1)).else_(exp.Literal.number(0)),
                                        ident(FIRST_ROW)), copy=False)
        counted = col(FIRST_ROW)
    generalized: exp.Expression = exp.Subquery(this=inner, alias=exp.TableAlias(this=ident("generalized")))
    join: tuple[exp.Expression, exp.Expression] | None = None
    if rule.below is not None:
        window = exp.Window(this=exp.func("count" if person is None else "sum", counted),
                            partition_by=[col(c) for c in qi_cols])
        small: exp.Expression = exp.LT(this=window, expression=exp.Literal.number(int(rule.below)))
        column = col
    else:
        join, small = _suppressed_groups(qi_cols, rule.ordered_groups)
        column = _generalized_column
    outer: list[exp.Expression] = []
    for name in columns:
        if name in qi_set:
            case = exp.Case().when(small.copy(), exp.Literal.string(SUPPRESSED)).else_(column(name))
            outer.append(exp.alias_(case, ident(name)))
        else:
            outer.append(col(name) if column is col else exp.alias_(column(name), ident(name)))
    outer.append(exp.alias_(small, ident(flag)))
    query = exp.select(*outer, copy=False).from_(generalized, copy=False)
    if join is not None:
        query = query.join(join[0], on=join[1], join_type="LEFT", copy=False)
    return query


SUPPRESSED_TABLE = "deid_suppressed_groups"
FIRST_ROW = "deid_first_row"  # 1 on each person's first row: a size rule's count of persons


def _generalized_column(name: str) -> exp.Column:
    return exp.Column(this=ident(name), table=ident("generalized"))


def _suppressed_groups(qi_cols: Sequence[str], groups: Sequence[tuple[str, ...]]) -> tuple[
        tuple[exp.Expression, exp.Expression] | None, exp.Expression]:
    """The ``LEFT JOIN (VALUES (labels…, TRUE), …) ON every QI equal`` of the suppressed groups and the
    test "this row's group is suppressed"; with no group, no join and FALSE.  The tuples are distinct,
    so the join keeps one row per source row."""
    if not groups:
        return None, exp.false()
    names = [f"deid_s{i}" for i in range(len(qi_cols))] + ["deid_hit"]
    rows = [exp.Tuple(expressions=[exp.Literal.string(v) for v in g] + [exp.true()]) for g in groups]
    table = exp.Values(expressions=rows, alias=exp.TableAlias(
        this=ident(SUPPRESSED_TABLE), columns=[ident(n) for n in names]))
    on = exp.and_(*[exp.EQ(this=_generalized_column(c),
                           expression=exp.Column(this=ident(names[i]), table=ident(SUPPRESSED_TABLE)))
                    for i, c in enumerate(qi_cols)], copy=False)
    hit = exp.Not(this=exp.Is(this=exp.Column(this=ident("deid_hit"), table=ident(SUPPRESSED_TABLE)),
                              expression=exp.null()))
    return (table, on), hit


def from_relation(source: exp.Expression) -> exp.Expression:
    """``source`` as a FROM item: a table as itself, a query (a shifted or rewritten source) as a
    subquery."""
    if isinstance(source, exp.Select):
        return exp.Subquery(this=source, alias=exp.TableAlias(this=ident("source")))
    return source


def compile_source(ref: TableRef, relation: exp.Expression, dialect: str, table: str | None,
                   stored: Callable[[exp.Expression], exp.Expression] | None = None) -> exp.Expression:
    """What compiled SQL reads: for DuckDB and a CSV/Parquet source, the file in place (``relation``,
    the source as every path reads it); otherwise ``table`` (default: the source's table inside its
    DuckDB file, else ``source``), parsed strictly (``names.table_name``: ``NAME`` or
    ``SCHEMA.NAME``, never by a SQL parser), read through ``stored`` (the rewriting ``relation``
    holds already: a QI's declared transformation)."""
    if dialect == "duckdb" and table is None and ref.format != "duckdb":
        return relation.copy()
    if table is not None:
        named = table_name(table, "--source-table")
    elif ref.format == "table" and ref.table:  # an engine's table: SCHEMA.NAME as that engine reads it
        named = parse_name(ref.table, rules_for(dialect), "[source] table", strict=False).table()
    else:
        named = exp.Table(this=exp.to_identifier(ref.table or "source", quoted=True))
    return stored(named) if stored is not None else named
