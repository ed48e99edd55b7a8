"""Date shifting in SQL: a table read with its ``shift`` columns already moved by each person's
offset (``contract.shift``), so everything downstream — the cells of a shifted date QI, the
generalization, the release, every linked table — sees the shifted dates and nothing else.

The offset is ``n mod (2D + 1) − D`` with ``n`` the engine's integer pseudonym of the person key
under the shift key (``Backend.pseudonymize``), and the move is ``Backend.shift_days``: both run
where the data is, and give the reference's dates on DuckDB, PostgreSQL and Spark.  The SQL holds
the shift key (as HMAC pads), so, like a pseudonymizing release, it is run and never stored: a
view, compiled SQL or dbt model of a shifting spec is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from sqlglot import exp

from .contract.keys import KeyHolder, Pads
from .sqltext import col, ident

if TYPE_CHECKING:
    from .backends.base import Backend
    from .spec import Spec

ALIAS = "deid_unshifted"


def offset_days(backend: Backend, person: exp.Expression, secret: bytes, days: int,
                keys: KeyHolder | None = None) -> exp.Expression:
    """The person's offset in whole days, in [−days, +days], as an integer expression of ``backend``
    (``keys``: who holds the key, ``contract.keys``; default the backend's pads in the SQL)."""
    return (keys or Pads(backend)).offset(person, secret, days)


def shifted_select(backend: Backend, relation: exp.Expression, columns: Mapping[str, str | None],
                   shift: Sequence[str], person: str, secret: bytes, days: int,
                   keys: KeyHolder | None = None) -> exp.Select:
    """``SELECT`` every column of ``columns`` (name → type) from ``relation``, the ``shift`` columns
    moved by the offset of the row's person (its ``person`` key), each under its own name."""
    moved = set(shift)
    key = col(person, ALIAS)
    offset = offset_days(backend, key, secret, days, keys)
    projections: list[exp.Expression] = []
    for name, sql_type in columns.items():
        value = col(name, ALIAS)
        if name in moved:
            value = exp.alias_(backend.shift_days(value, offset.copy(), str(sql_type)), ident(name))
        projections.append(value)
    source = (exp.alias_(relation.copy(), ALIAS, table=True) if isinstance(relation, exp.Table)
              else exp.Subquery(this=relation.copy(), alias=exp.TableAlias(this=ident(ALIAS))))
    return exp.select(*projections).from_(source)


def source_shift(spec: Spec) -> tuple[str, ...]:
    """The person source's columns to shift (``[columns] shift``), empty without."""
    return spec.columns.shift if spec.person is not None and spec.person.shift_days is not None else ()


def shifts_qis(spec: Spec) -> bool:
    """Whether a QI column is shifted, so the cells (not only the release) read shifted dates."""
    shifted = set(source_shift(spec))
    return any(q.derived is None and q.column in shifted for q in spec.qis)


def shift_source(backend: Backend, spec: Spec, relation: exp.Expression,
                 columns: Mapping[str, str | None], keys: KeyHolder | None = None) -> exp.Expression:
    """``relation`` (the person source as read) with its ``shift`` columns moved; itself without."""
    shift = source_shift(spec)
    if not shift:
        return relation
    assert spec.person is not None and spec.person.shift_days is not None
    return shifted_select(backend, relation, columns, shift, spec.person.column, spec.columns.secret(),
                          spec.person.shift_days, keys)


__all__ = ["offset_days", "shift_source", "shifted_select", "shifts_qis", "source_shift"]
