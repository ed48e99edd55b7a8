"""Declared value transformations in SQL: the person source read with each transformed integer QI
(``[[qi]] transform``, ``scale``: ``spec.transform``) replaced by its whole number, so the cells,
the gate, every release, view, compiled SQL and dbt model see the transformed value and nothing
else (like the date shift of ``shifting``, which this composes with: they touch other columns).

**One definition on every engine.**  The column's value is read from its text (``sqltext``'s
``NUMERAL``; any other text, NaN and infinities are no number): a DOUBLE column's text is the
shortest spelling that reads back as the same double on DuckDB, PostgreSQL and Spark, a DECIMAL's
is its digits, and a REAL's is the decimal the extract shows (0.29, not 0.28999999165…), so the
same value is read whatever type the engine gave the column.  The arithmetic is then IEEE double
on each engine, in the order of ``transformed`` (the Python reference), every
literal cast to DOUBLE (PostgreSQL reads ``0.5`` as NUMERIC); ``FLOOR`` of a value within
``LIMIT`` is exact on all three and the cast to BIGINT never overflows.  A value with no whole
number is NULL, which the load refuses with its count (``transform_problems``), as it refuses a
whole number outside the QI's domain, both with the raw value shown beside the transformed one.

The population (census) table is never transformed: it counts people by the QI's whole numbers
already.  Transforming is not idempotent (0.19 → 19 → 1900), so each path applies it exactly once,
where it reads the source as stored: the load's view, ``Problem``'s release relation, compiled SQL
and views over a table, a set's views, a dbt set's person model, a policy file's batch.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from sqlglot import exp

from ..spec.file import QISpec, Spec
from ..spec.transform import LIMIT, TOLERANCE, TRANSFORMS, describe
from ..sqltext import NUMERAL, NUMERAL_LENGTH, aliased, col, ident, text_number

if TYPE_CHECKING:
    from ..backends.base import Backend

ALIAS = "deid_untransformed"
TYPE = "BIGINT"  # the type of a transformed QI column, as every path reads it


def transformed_qis(spec: Spec) -> dict[str, QISpec]:
    """The source columns read through a transformation, each with its QI."""
    return {q.column: q for q in spec.qis if q.transform is not None and q.derived is None}


def released_types(spec: Spec, columns: Mapping[str, str]) -> dict[str, str]:
    """``columns`` (name → SQL type as the engine reads the source) with each transformed QI column
    a ``BIGINT``: the columns as every path reads them, so integer paths take it as an integer."""
    moved = transformed_qis(spec)
    return {name: (TYPE if name in moved else sql_type) for name, sql_type in columns.items()}


def transformed(value: str | float | None, how: str, scale: float) -> int | None:
    """The whole number of ``value`` under ``transform = how`` and ``scale``, in Python: the
    definition the SQL of ``whole`` equals on every engine.  A float is read from its shortest
    text (``repr``, as DuckDB and PostgreSQL spell a DOUBLE and Spark's spelling reads back alike),
    text as it is; None when it is NULL, no ``NUMERAL`` (NaN, infinities, 1e-300: three exponent
    digits) or beyond ``LIMIT`` once scaled."""
    if value is None:
        return None
    text = value if isinstance(value, str) else repr(float(value))
    if len(text) > NUMERAL_LENGTH or _NUMERAL.match(text) is None:
        return None
    v = float(text) * scale
    if not -LIMIT <= v <= LIMIT:
        return None
    offset = TRANSFORMS[how]
    return math.floor(((v + offset) if offset else v) + TOLERANCE * max(1.0, abs(v)))


_NUMERAL = re.compile(NUMERAL.replace("$", r"\Z"))  # "$" would also match before a final newline


def _double(value: float) -> exp.Expression:
    return exp.cast(exp.Literal.number(repr(float(value))), "DOUBLE")


def whole(qi: QISpec, value: exp.Expression) -> exp.Expression:
    """The QI's whole number of ``value`` as a BIGINT (NULL when it has none): ``FLOOR`` of
    ``v + offset + TOLERANCE · GREATEST(1, |v|)`` with ``v = value × scale`` read from its text."""
    assert qi.transform is not None

    def scaled() -> exp.Expression:
        return exp.Paren(this=exp.Mul(this=text_number(value.copy()), expression=_double(qi.scale)))

    offset = TRANSFORMS[qi.transform]  # x + 0.0 is x for every double: the floor's is left out
    base = exp.Add(this=scaled(), expression=_double(offset)) if offset else scaled()
    shifted = exp.Add(this=base,
                      expression=exp.Mul(this=_double(TOLERANCE),
                                         expression=exp.Greatest(this=_double(1.0),
                                                                 expressions=[exp.Abs(this=scaled())])))
    within = exp.LTE(this=exp.Abs(this=scaled()), expression=_double(LIMIT))  # NaN and NULL are not
    return exp.Case().when(within, exp.cast(exp.Floor(this=shifted), TYPE))


def transform_source(spec: Spec, relation: exp.Expression, columns: Mapping[str, object]) -> exp.Expression:
    """``relation`` (the person source as stored, with ``columns``) with every transformed QI column
    replaced by its whole number under its own name; ``relation`` itself when the spec has none."""
    moved = transformed_qis(spec)
    if not moved:
        return relation
    projections = [exp.alias_(whole(moved[name], col(name, ALIAS)), ident(name)) if name in moved
                   else col(name, ALIAS) for name in columns]
    return exp.select(*projections).from_(aliased(relation, ALIAS))


def transform_problems(backend: Backend, spec: Spec, relation: exp.Expression, columns: Mapping[str, str],
                       where: str) -> list[str]:
    """One line per transformed QI whose column holds values with no whole number (text that is no
    number, NaN, infinities, magnitudes past 2^53) or whose whole number lies outside the QI's
    domain, with the rows and an example (raw → transformed), counted in one query over
    ``relation`` as stored."""
    moved = {name: q for name, q in transformed_qis(spec).items() if name in columns}
    if not moved:
        return []
    projections: list[exp.Expression] = []
    for i, (name, q) in enumerate(moved.items()):
        raw, value = col(name, "t"), whole(q, col(name, "t"))
        none = exp.and_(exp.Not(this=exp.Is(this=raw.copy(), expression=exp.null())),
                        exp.Is(this=value.copy(), expression=exp.null()))
        outside = exp.or_(exp.LT(this=value.copy(), expression=exp.Literal.number(int(q.min))),
                          exp.GT(this=value.copy(), expression=exp.Literal.number(int(q.max))))
        for tag, test in (("n", none), ("o", outside)):
            hit = exp.Case().when(test.copy(), exp.Literal.number(1)).else_(exp.Literal.number(0))
            projections += [exp.alias_(exp.func("sum", hit), f"{tag}{i}"),
                            exp.alias_(exp.func("min", exp.Case().when(test.copy(), exp.cast(raw.copy(), "VARCHAR"))),
                                       f"{tag}e{i}")]
    row = backend.execute(exp.select(*projections).from_(aliased(relation, "t"))).to_pylist()[0]
    out = []
    for i, (name, q) in enumerate(moved.items()):
        assert q.transform is not None
        how = describe(q.transform, q.scale)
        if row[f"n{i}"]:
            out.append(f"QI {q.name!r} ({how}): {int(row[f'n{i}']):,} row(s) of column {name!r} hold no number it can "
                       f"make whole (e.g. {row[f'ne{i}']!r}); fix or remove those rows (NULLs are reported apart)")
        if row[f"o{i}"]:
            example = row[f"oe{i}"]
            out.append(f"QI {q.name!r} ({how}): {int(row[f'o{i}']):,} row(s) of column {name!r} become whole numbers "
                       f"outside the declared domain {q.min}...{q.max} (e.g. {example!r} → "
                       f"{_reference(q, example)}); widen min/max (they bound the transformed value) or fix the data")
    return out


def _reference(q: QISpec, text: object) -> str:
    """The transformed value of an example, for the message (the Python reference)."""
    assert q.transform is not None
    return str(transformed(str(text), q.transform, q.scale))


__all__ = ["ALIAS", "TYPE", "released_types", "transform_problems", "transform_source", "transformed",
           "transformed_qis", "whole"]
