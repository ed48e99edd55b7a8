"""Cells of persons: the source's rows reduced to one tuple of QI positions per person, in the
same single pass as the cells of rows (``loading.aggregate``).

rows ─► positions p_i per row (``loading.positions_query``) ─► per person: each QI's value by its
``per_person`` rule, the derived row count, and checks ─► ``GROUP BY`` the persons' values,
counting persons.  Everything after the cells counts persons without knowing it: the
evaluators, the searches, the full-domain search and its suppression.

A person's value of a QI (positions in the domain's order):
- no rule: the QI must be constant within the person; the person's minimum is used and a
  person whose minimum and maximum differ is counted as varying (the load refuses it);
- ``min``/``max``: the least/greatest position;
- ``first``/``last``: the position on the earliest/latest row by ``[person] order`` (NULL orders
  last), ties broken by the least/greatest position — the domain's order, not the text's (a
  category domain ``["b", "a"]`` puts ``b`` first) — so the choice is the same on every engine
  and in the release query (``person_rows``, which ranks the values in the domain's order);
- ``derived = "rows"``: the person's row count, as a position of the QI's integer domain.
A person with a row outside a QI's domain gets NULL for that QI, so the row is reported as for
a source without persons.  Persons are told apart byte for byte (``sqltext.person_key``): a key
column whose collation folds case makes ``Q1`` and ``q1`` two persons here, as their pseudonyms
and the gate's count are.

Two queries give these cells.  The load runs the first, and the second only when the first
counts persons it cannot vouch for:

- ``fast_person_cells``: a few plain ``min``/``max`` per person.  The positions of the QIs
  without a rule are packed into one integer per row (position * the product of the sizes
  before it; -1 when a position on the row is NULL), so one ``min`` and one ``max`` tell
  whether all of them are constant within the person and present on every row.
  ``first``/``last`` of an integer or date QI ordered by an integer or date column is the
  ``min``/``max`` of rank(order) * size + position: the least (greatest) order, NULL last, then
  the least (greatest) position, which is the least (greatest) source value because an integer's
  or a date's position grows with it (a person with a row outside the domain gets NULL,
  whichever row is taken).  Other first/last (a category, a text or timestamp order) stay a
  window or ``arg_min``/``arg_max``.  A person with a NULL key, a row outside a domain, a
  varying QI, a row count outside the derived QI's domain, or an order too far from 0 to rank
  is counted as unsure (``UNSURE``), not described;
- ``person_cells_query``: per QI a ``count``, ``min`` and ``max``, a window or ``arg_min``/``arg_max``
  for first/last, and the flags the load reports (persons with a varying QI, rows without a key,
  row counts outside the domain).  The rows without a key are counted, never grouped as one
  person: a varying QI or a row count is reported of the persons that have a key.

When the fast query is sure of every person, the exact one would find nothing to report and
give the same cells (``tests/test_person_cells.py``; the engine tests compare both with the
windows PostgreSQL and Spark run).  On 10 M rows of 1 M persons, the exact query's ``count``,
``min`` and ``max`` per QI and its struct-keyed ``arg_min`` cost more than everything else in it
(docs/benchmarks.md, Persons).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from ..domains.domain import Domain
from ..domains.limits import KEY_LIMIT
from ..spec.file import QISpec
from ..spec.persons import PersonSpec
from ..sqltext import added, col, ident, is_integer_type, person_key

PERSON = "deid_person"
ORDER = "deid_order"
ROWS = "deid_rows"
NULL_ROWS = "deid_null_rows"  # rows without a person key
VARYING = "deid_vary_{}"  # persons whose QI i varies
ROWS_OUT = "deid_rows_out"  # persons whose row count is outside the derived QI's domain
UNSURE = "deid_unsure"  # persons the fast query cannot vouch for (``fast_person_cells``)
PACKED = "deid_pack_{}"  # the packed positions of the QIs without a rule


def person_window(value: exp.Expression, person: exp.Expression, order: exp.Expression,
                  ties: Sequence[exp.Expression], last: bool) -> exp.Expression:
    """``value`` on a person's first (last) row by ``order`` (NULL orders last), ties broken by the
    least (greatest) ``ties`` in turn (NULL last) — the row's position in the domain (the load),
    or the value's rank in the domain's order then the value itself (the release), so both pick
    the same row on every engine.  ``person``: the key as persons are told apart
    (``sqltext.person_key``)."""
    return exp.Window(
        this=exp.func("first_value", value.copy()),
        partition_by=[person.copy()],
        order=exp.Order(expressions=[exp.Ordered(this=order.copy(), desc=last, nulls_first=False),
                                     *[exp.Ordered(this=tie.copy(), desc=last, nulls_first=False) for tie in ties]]),
        spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="UNBOUNDED",
                            end_side="FOLLOWING"))


def arg_extreme(position: exp.Expression, order: exp.Expression, tie: exp.Expression, last: bool) -> exp.Expression:
    """The aggregate twin of ``person_window`` where the engine has one (DuckDB's ``arg_min`` /
    ``arg_max``): the position on the row with the least (greatest) ``(order is NULL, order, tie)``
    — NULL orders last both ways, ties by ``tie`` (the position: the domain's order) — without
    sorting every row."""
    missing = exp.Is(this=order.copy(), expression=exp.null())
    key = exp.Struct(expressions=[exp.PropertyEQ(this=exp.to_identifier("n"),
                                                 expression=exp.Not(this=missing) if last else missing),
                                  exp.PropertyEQ(this=exp.to_identifier("o"), expression=order.copy()),
                                  exp.PropertyEQ(this=exp.to_identifier("t"), expression=tie.copy())])
    return (exp.ArgMax if last else exp.ArgMin)(this=position.copy(), expression=key)


def person_cells_query(rows: exp.Select, qis: Sequence[QISpec], person: PersonSpec, key_type: str | None,
                       aggregate_first: bool = False) -> exp.Select:
    """``SELECT p0…, n (persons), flags`` from ``rows`` (the positions query over the source, alias
    ``t``, one ``p{i}`` per QI; derived QIs' ``p{i}`` are ignored), grouped by the persons' positions;
    ``key_type``: the SQL type of the person key (``sqltext.person_key``); ``aggregate_first``:
    take first/last with ``arg_extreme`` (DuckDB) instead of a window.  Ties of ``first``/``last``
    go to the least (greatest) position: the domain's order."""
    per_person = exp.Subquery(this=per_person_query(rows, qis, person, key_type, aggregate_first),
                              alias=exp.TableAlias(this=ident("persons")))
    positions = [exp.column(f"p{i}") for i in range(len(qis))]
    outer = exp.select(*positions, exp.alias_(exp.func("count", exp.Star()), "n")).from_(per_person)
    keyless = exp.Is(this=exp.column(PERSON), expression=exp.null())
    outer = outer.select(exp.alias_(_sum_when(keyless, exp.column(ROWS)), NULL_ROWS))
    named = exp.Not(this=keyless.copy())  # the rows without a key are no person: not one that varies
    for i, q in enumerate(qis):
        if q.derived == "rows":
            outer = outer.select(exp.alias_(_sum_when(named.copy(), exp.column(f"o{i}")), ROWS_OUT))
        elif q.per_person is None:
            outer = outer.select(exp.alias_(_sum_when(named.copy(), exp.column(VARYING.format(i))),
                                            VARYING.format(i)))
    return outer.group_by(*[p.copy() for p in positions]) if positions else outer


def per_person_query(rows: exp.Select, qis: Sequence[QISpec], person: PersonSpec, key_type: str | None,
                     aggregate_first: bool = False) -> exp.Select:
    """One row per person of ``rows`` (as for ``person_cells_query``): the key (``PERSON``), the
    row count (``ROWS``), each QI's position by its rule (``p{i}``) and the flags the load reads.
    The cells of persons group it; ``loading.sensitive`` joins it to the values the persons hold,
    so both place a person in the same cell."""
    key = person_key(col(person.column, "t"), key_type)
    order = col(person.order, "t") if person.order else exp.null()
    inner = rows.copy().select(exp.alias_(key, PERSON), exp.alias_(order, ORDER))
    for i, q in enumerate(qis):
        if q.per_person in ("first", "last") and not aggregate_first:
            position = _pos_ref(rows, i)
            window = person_window(position, key, order, [position], q.per_person == "last")
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
                agg: exp.Expression = arg_extreme(p, exp.column(ORDER, table="r"), p, q.per_person == "last")
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
    return mid.group_by(p_key.copy())


def _sum_when(condition: exp.Expression, value: exp.Expression) -> exp.Expression:
    """``sum(CASE WHEN condition THEN value ELSE 0 END)``."""
    return exp.func("sum", exp.Case().when(condition, value).else_(exp.Literal.number(0)))


#: integer types whose values, and the days of any date, lie within ±2**32: their rank needs no guard
NARROW_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "INT", "INT4", "INT2", "UTINYINT", "USMALLINT", "UINTEGER")
NARROW = 2 ** 32


def order_rank(order: exp.Expression, sql_type: str | None) -> tuple[exp.Expression, bool] | None:
    """An integer that orders rows as ``order`` does (the value of an integer column, the days
    since 1970-01-01 of a date) and whether it surely lies within ±``NARROW``; None for other
    types (text, timestamps, decimals), whose first/last stay a window or an ``arg_min``."""
    t = (sql_type or "").upper()
    if is_integer_type(t):
        return order, t.split("(")[0] in NARROW_TYPES
    if t == "DATE":
        epoch = exp.cast(exp.Literal.string("1970-01-01"), "DATE")
        return exp.DateDiff(this=order, expression=epoch, unit=exp.var("DAY")), True
    return None


def first_key(position: exp.Expression, rank: tuple[exp.Expression, bool], order: exp.Expression, size: int,
              last: bool) -> exp.Expression:
    """The integer whose ``min`` (``max`` for last) is a person's first (last) row by ``order``,
    NULL last, ties by the least (greatest) ``position``: ``rank * size + position``, the rank
    shifted to 1…2L+1 and NULL orders ranked 2L+2 (0 for last).  L keeps the key inside 64
    bits; a row whose rank is farther from 0 gets a NULL key, which the fast query counts as
    uncertain (the exact query then decides)."""
    value, narrow = rank
    bound = (2 ** 63 // size - 3) // 2
    null_rank = exp.Literal.number(0 if last else 2 * bound + 2)
    shifted = exp.Add(this=exp.cast(value.copy(), "BIGINT"), expression=exp.Literal.number(bound + 1))
    ranked: exp.Expression
    if narrow and bound >= NARROW:  # the rank is NULL exactly when the order is
        ranked = exp.func("coalesce", shifted, null_rank)
    else:
        within = exp.Between(this=value.copy(), low=exp.Literal.number(-bound), high=exp.Literal.number(bound))
        ranked = (exp.Case().when(exp.Is(this=order.copy(), expression=exp.null()), null_rank)
                  .when(within, shifted))
    return exp.Add(this=exp.Mul(this=ranked, expression=exp.Literal.number(size)),
                   expression=exp.cast(position.copy(), "BIGINT"))


@dataclass(frozen=True)
class FastCells:
    """The fast query of the cells of persons and how to read its result: ``packs[a]`` lists the
    ``(qi, multiplier, size)`` packed into the column ``PACKED.format(a)``; the other QIs come
    back as ``p{i}``."""

    query: exp.Select
    packs: tuple[tuple[tuple[int, int, int], ...], ...]
    n_qis: int

    @staticmethod
    def unsure(result: pa.Table) -> int:
        """Persons the query could not vouch for: run the exact query (``person_cells_query``)."""
        return int(pc.sum(result.column(UNSURE)).as_py() or 0)

    def cells(self, result: pa.Table) -> pa.Table:
        """``p0…`` and ``n`` (the exact query's cells) from a result without uncertain persons."""
        columns = {f"p{i}": result.column(f"p{i}") for i in range(self.n_qis) if f"p{i}" in result.column_names}
        for a, pack in enumerate(self.packs):
            packed = np.asarray(result.column(PACKED.format(a)).to_numpy(zero_copy_only=False), dtype=np.int64)
            for i, multiplier, size in pack:
                columns[f"p{i}"] = pa.array((packed // multiplier) % size)
        return pa.table({**{f"p{i}": columns[f"p{i}"] for i in range(self.n_qis)}, "n": result.column("n")})


def fast_person_cells(rows: exp.Select, qis: Sequence[QISpec], domains: Sequence[Domain], person: PersonSpec,
                      order_type: str | None, key_type: str | None, aggregate_first: bool = False) -> FastCells:
    """The cells of persons from ``rows`` (as for ``person_cells_query``) by plain aggregates, with
    the number of persons it cannot vouch for (``UNSURE``; module docstring).  ``order_type``: the
    SQL type of ``[person] order``, which decides whether first/last is a ``min``/``max``;
    ``key_type``: the person key's (``sqltext.person_key``)."""
    key = person_key(col(person.column, "t"), key_type)
    order = col(person.order, "t") if person.order else exp.null()
    rank = order_rank(order, order_type) if person.order else None
    inner = rows.copy().select(exp.alias_(key, PERSON), exp.alias_(order, ORDER))
    r = "r"
    present: list[exp.Expression] = []  # per row: the ruled QIs' values are there
    values: dict[int, exp.Expression] = {}  # per person: a ruled QI's position
    unpacked: list[tuple[int, int]] = []  # (qi, size) of the QIs without a rule
    for i, (q, d) in enumerate(zip(qis, domains)):
        p = exp.column(f"p{i}", table=r)
        if q.derived is not None:
            continue
        if q.per_person is None:
            unpacked.append((i, d.size))
        elif q.per_person in ("first", "last") and rank is not None and d.kind in ("integer", "date"):
            first = first_key(_pos_ref(rows, i), rank, order, d.size, q.per_person == "last")
            inner = inner.select(exp.alias_(first, f"k{i}"))
            k = exp.column(f"k{i}", table=r)
            present.append(k.copy())
            best = exp.func("max" if q.per_person == "last" else "min", k)
            values[i] = exp.Mod(this=best, expression=exp.Literal.number(d.size))
        else:
            present.append(p.copy())
            if q.per_person in ("first", "last") and aggregate_first:
                values[i] = arg_extreme(p, exp.column(ORDER, table=r), p, q.per_person == "last")
            elif q.per_person in ("first", "last"):
                position = _pos_ref(rows, i)
                window = person_window(position, key, order, [position], q.per_person == "last")
                inner = inner.select(exp.alias_(window, f"w{i}"))
                values[i] = exp.func("min", exp.column(f"w{i}", table=r))
            else:
                values[i] = exp.func(q.per_person, p)
    packs = _packs(unpacked)
    sub = exp.Subquery(this=inner, alias=exp.TableAlias(this=ident(r)))
    count_all = exp.func("count", exp.Star())
    mid = exp.select(exp.alias_(exp.column(PERSON, table=r), PERSON)).from_(sub)
    unsure: list[exp.Expression] = [exp.Is(this=exp.column(PERSON), expression=exp.null())]
    groups: list[str] = []
    for a, pack in enumerate(packs or ([()] if present else [])):
        packed = _packed(pack, r, present if a == 0 else [])
        least, greatest = PACKED.format(a), f"deid_hi_{a}"
        mid = mid.select(exp.alias_(exp.func("min", packed.copy()), least),
                         exp.alias_(exp.func("max", packed), greatest))
        unsure += [exp.LT(this=exp.column(least), expression=exp.Literal.number(0)),  # a row with a NULL
                   exp.GT(this=exp.column(greatest), expression=exp.column(least))]  # a QI that varies
        groups.append(least)
    for i, q in enumerate(qis):
        if q.derived == "rows":
            lo, hi = int(q.min), int(q.max)
            inside = exp.Between(this=count_all.copy(), low=exp.Literal.number(lo), high=exp.Literal.number(hi))
            values[i] = exp.Case().when(inside, exp.Sub(this=count_all.copy(), expression=exp.Literal.number(lo)))
            unsure.append(exp.Is(this=exp.column(f"p{i}"), expression=exp.null()))
        if i in values:
            mid = mid.select(exp.alias_(values[i], f"p{i}"))
            groups.append(f"p{i}")
    mid = mid.group_by(exp.column(PERSON, table=r))
    per_person = exp.Subquery(this=mid, alias=exp.TableAlias(this=ident("persons")))
    doubt = exp.Case().when(exp.or_(*unsure), exp.Literal.number(1))
    outer = exp.select(*[exp.column(g) for g in groups], exp.alias_(count_all.copy(), "n"),
                       exp.alias_(exp.func("count", doubt), UNSURE)).from_(per_person)
    outer = outer.group_by(*[exp.column(g) for g in groups]) if groups else outer
    return FastCells(outer, tuple(tuple((i, m, s) for i, m, s in pack) for pack in packs), len(qis))


def _packs(unpacked: Sequence[tuple[int, int]]) -> list[list[tuple[int, int, int]]]:
    """The QIs without a rule packed into as few integers as ``domains.limits.KEY_LIMIT`` allows
    (every sum and product that builds them stays inside a signed 64-bit integer, on every
    engine), each QI's multiplier the product of the sizes packed before it."""
    packs: list[list[tuple[int, int, int]]] = []
    multiplier = 1
    for i, size in unpacked:
        if not packs or multiplier * size > KEY_LIMIT:
            packs.append([])
            multiplier = 1
        packs[-1].append((i, multiplier, size))
        multiplier *= size
    return packs


def _packed(pack: Sequence[tuple[int, int, int]], table: str, present: Sequence[exp.Expression]) -> exp.Expression:
    """Σ position * multiplier over ``pack``, or -1 when a position is NULL or a ruled QI's value is
    missing on the row (``present``): one ``min`` then finds every such row (no ``count`` each)."""
    terms: list[exp.Expression] = []
    for i, multiplier, _ in pack:
        p = exp.cast(exp.column(f"p{i}", table=table), "BIGINT")
        terms.append(p if multiplier == 1 else exp.Mul(this=p, expression=exp.Literal.number(multiplier)))
    total = added(terms)
    if present:
        there = exp.and_(*[exp.Not(this=exp.Is(this=v.copy(), expression=exp.null())) for v in present])
        total = exp.Case().when(there, total)
    return exp.func("coalesce", total, exp.Literal.number(-1))


def _pos_ref(rows: exp.Select, i: int) -> exp.Expression:
    """The expression of ``p{i}`` in the positions query (a window cannot name a sibling alias)."""
    for projection in rows.expressions:
        if projection.alias_or_name == f"p{i}":
            return projection.this.copy() if isinstance(projection, exp.Alias) else projection.copy()
    raise KeyError(f"p{i}")


def example_query(rows: exp.Select, person: PersonSpec, i: int, key_type: str | None) -> exp.Select:
    """One person whose QI ``i`` varies, with their least and greatest value's positions (for the
    refusal's example); run only when the load found such persons."""
    p = _pos_ref(rows, i)
    key = person_key(col(person.column, "t"), key_type)
    sub = exp.Subquery(this=rows.copy().select(exp.alias_(key, PERSON), exp.alias_(p, "v"), append=False),
                       alias=exp.TableAlias(this=ident("r")))
    return (exp.select(exp.alias_(exp.cast(exp.column(PERSON), "VARCHAR"), "person"),
                       exp.alias_(exp.func("min", exp.column("v")), "lo"),
                       exp.alias_(exp.func("max", exp.column("v")), "hi"))
            .from_(sub).where(exp.Not(this=exp.Is(this=exp.column(PERSON), expression=exp.null())))
            .group_by(exp.column(PERSON))
            .having(exp.GT(this=exp.func("max", exp.column("v")), expression=exp.func("min", exp.column("v"))))
            .order_by(exp.column(PERSON)).limit(1))


__all__ = ["NULL_ROWS", "PERSON", "ROWS_OUT", "UNSURE", "VARYING", "FastCells", "example_query",
           "fast_person_cells", "order_rank", "per_person_query", "person_cells_query", "person_window"]
