"""Cells of persons: the source's rows reduced to one tuple of QI positions per person, in the
same single pass as the cells of rows (``loading.aggregate``).

rows ─► positions p_i per row (``loading.positions_query``) ─► per person: each QI's value by its
``per_person`` rule, the derived row count, and flags (a QI that varies, a key that is NULL) ─►
``GROUP BY`` the positions, counting persons.  Everything after the cells counts persons without
knowing it: the evaluators, the searches, the full-domain search and its suppression.

A person's value of a QI (positions in the domain's order):
- no rule: the QI must be constant within the person; the person's minimum is used and a
  person whose minimum and maximum differ is counted as varying (the load refuses it);
- ``min``/``max``: the least/greatest position;
- ``first``/``last``: the position on the earliest/latest row by ``[person] order`` (NULL orders
  last), ties broken by the least/greatest source value, so the choice is the same on every
  engine and in the release query (``person_rows``);
- ``derived = "rows"``: the person's row count, as a position of the QI's integer domain.
A person with a row outside a QI's domain gets NULL for that QI, so the row is reported as for
a source without persons.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlglot import exp

from .persons import PersonSpec
from .spec import QISpec
from .sqltext import col, ident

PERSON = "deid_person"
ORDER = "deid_order"
ROWS = "deid_rows"
NULL_ROWS = "deid_null_rows"  # rows without a person key
VARYING = "deid_vary_{}"  # persons whose QI i varies
ROWS_OUT = "deid_rows_out"  # persons whose row count is outside the derived QI's domain


def person_window(value: exp.Expression, person: exp.Expression, order: exp.Expression, tie: exp.Expression,
                  last: bool) -> exp.Expression:
    """``value`` on a person's first (last) row by ``order`` (NULL orders last), ties broken by the
    least (greatest) ``tie`` — the row's own source value, so the load (which takes the row's
    position) and the release (which takes its value) pick the same row on every engine."""
    return exp.Window(
        this=exp.func("first_value", value.copy()),
        partition_by=[person.copy()],
        order=exp.Order(expressions=[exp.Ordered(this=order.copy(), desc=last, nulls_first=False),
                                     exp.Ordered(this=tie.copy(), desc=last, nulls_first=False)]),
        spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="UNBOUNDED",
                            end_side="FOLLOWING"))


def arg_extreme(position: exp.Expression, order: exp.Expression, tie: exp.Expression, last: bool) -> exp.Expression:
    """The aggregate twin of ``person_window`` where the engine has one (DuckDB's ``arg_min`` /
    ``arg_max``): the position on the row with the least (greatest) ``(order is NULL, order, tie)``
    — NULL orders last both ways, ties by the source value — without sorting every row."""
    missing = exp.Is(this=order.copy(), expression=exp.null())
    key = exp.Struct(expressions=[exp.PropertyEQ(this=exp.to_identifier("n"),
                                                 expression=exp.Not(this=missing) if last else missing),
                                  exp.PropertyEQ(this=exp.to_identifier("o"), expression=order.copy()),
                                  exp.PropertyEQ(this=exp.to_identifier("t"), expression=tie.copy())])
    return (exp.ArgMax if last else exp.ArgMin)(this=position.copy(), expression=key)


def person_cells_query(rows: exp.Select, qis: Sequence[QISpec], person: PersonSpec,
                       ties: Mapping[int, exp.Expression], aggregate_first: bool = False) -> exp.Select:
    """``SELECT p0…, n (persons), flags`` from ``rows`` (the positions query over the source, alias
    ``t``, one ``p{i}`` per QI; derived QIs' ``p{i}`` are ignored), grouped by the persons' positions;
    ``ties[i]`` is QI i's source value (its key), which breaks ties of ``first``/``last``;
    ``aggregate_first``: take first/last with ``arg_extreme`` (DuckDB) instead of a window."""
    key, order = col(person.column, "t"), col(person.order, "t") if person.order else exp.null()
    inner = rows.copy().select(exp.alias_(key, PERSON), exp.alias_(order, ORDER))
    for i, q in enumerate(qis):
        if q.per_person in ("first", "last") and aggregate_first:
            inner = inner.select(exp.alias_(ties[i].copy(), f"t{i}"))
        elif q.per_person in ("first", "last"):
            window = person_window(_pos_ref(rows, i), key, order, ties[i], q.per_person == "last")
            inner = inner.select(exp.alias_(window, f"w{i}"))
    sub = exp.Subquery(this=inner, alias=exp.TableAlias(this=ident("r")))
    p_key = exp.column(PERSON, table="r")
    count_all = exp.func("count", exp.Star())
    mid = exp.select(exp.alias_(p_key.copy(), PERSON), exp.alias_(count_all.copy(), ROWS)).from_(sub)
    for i, q in enumerate(qis):
        p = exp.column(f"p{i}", table="r")
        if q.derived == "rows":
            lo, hi = int(q.min), int(q.max)
            inside = exp.Between(this=count_all.copy(), low=exp.Literal.number(lo), high=exp.Literal.number(hi))
            value: exp.Expression = exp.Case().when(inside, exp.Sub(this=count_all.copy(),
                                                                    expression=exp.Literal.number(lo)))
            mid = mid.select(exp.alias_(exp.Case().when(inside.copy(), exp.Literal.number(0))
                                        .else_(exp.Literal.number(1)), f"o{i}"))
        else:
            if q.per_person in ("first", "last") and aggregate_first:
                agg: exp.Expression = arg_extreme(p, exp.column(ORDER, table="r"), exp.column(f"t{i}", table="r"),
                                                  q.per_person == "last")
            elif q.per_person in ("first", "last"):
                agg = exp.func("min", exp.column(f"w{i}", table="r"))
            elif q.per_person == "max":
                agg = exp.func("max", p.copy())
            else:
                agg = exp.func("min", p.copy())
            complete = exp.EQ(this=exp.func("count", p.copy()), expression=count_all.copy())
            value = exp.Case().when(complete, agg)
            if q.per_person is None:  # a QI without a rule must not vary within a person
                varies = exp.GT(this=exp.func("max", p.copy()), expression=exp.func("min", p.copy()))
                mid = mid.select(exp.alias_(exp.Case().when(varies, exp.Literal.number(1))
                                            .else_(exp.Literal.number(0)), VARYING.format(i)))
        mid = mid.select(exp.alias_(value, f"p{i}"))
    mid = mid.group_by(p_key.copy())
    per_person = exp.Subquery(this=mid, alias=exp.TableAlias(this=ident("persons")))
    positions = [exp.column(f"p{i}") for i in range(len(qis))]
    outer = exp.select(*positions, exp.alias_(exp.func("count", exp.Star()), "n")).from_(per_person)
    outer = outer.select(exp.alias_(exp.func("sum", exp.Case().when(exp.Is(this=exp.column(PERSON),
                                                                            expression=exp.null()),
                                                                    exp.column(ROWS))
                                             .else_(exp.Literal.number(0))), NULL_ROWS))
    for i, q in enumerate(qis):
        if q.derived == "rows":
            outer = outer.select(exp.alias_(exp.func("sum", exp.column(f"o{i}")), ROWS_OUT))
        elif q.per_person is None:
            outer = outer.select(exp.alias_(exp.func("sum", exp.column(VARYING.format(i))), VARYING.format(i)))
    return outer.group_by(*[p.copy() for p in positions]) if positions else outer


def _pos_ref(rows: exp.Select, i: int) -> exp.Expression:
    """The expression of ``p{i}`` in the positions query (a window cannot name a sibling alias)."""
    for projection in rows.expressions:
        if projection.alias_or_name == f"p{i}":
            return projection.this.copy() if isinstance(projection, exp.Alias) else projection.copy()
    raise KeyError(f"p{i}")


def example_query(rows: exp.Select, person: PersonSpec, i: int) -> exp.Select:
    """One person whose QI ``i`` varies, with their least and greatest value's positions (for the
    refusal's example); run only when the load found such persons."""
    p = _pos_ref(rows, i)
    key = col(person.column, "t")
    sub = exp.Subquery(this=rows.copy().select(exp.alias_(key, PERSON), exp.alias_(p, "v"), append=False),
                       alias=exp.TableAlias(this=ident("r")))
    return (exp.select(exp.alias_(exp.cast(exp.column(PERSON), "VARCHAR"), "person"),
                       exp.alias_(exp.func("min", exp.column("v")), "lo"),
                       exp.alias_(exp.func("max", exp.column("v")), "hi"))
            .from_(sub).where(exp.Not(this=exp.Is(this=exp.column(PERSON), expression=exp.null())))
            .group_by(exp.column(PERSON))
            .having(exp.GT(this=exp.func("max", exp.column("v")), expression=exp.func("min", exp.column("v"))))
            .order_by(exp.column(PERSON)).limit(1))


__all__ = ["NULL_ROWS", "ROWS_OUT", "VARYING", "example_query", "person_cells_query", "person_window"]
