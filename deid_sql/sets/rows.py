"""The rows of a linked table as a set release reads them (``spec/linked.py`` declares the tables).

Each linked table is opened as a session view on the person source's engine and checked: its
person key column exists and has one text on every engine (it is pseudonymized), every column
has a role, its ``shift`` columns are dates.  Its release is then one query:

    SELECT roles(shifted(t)) FROM shifted(t) JOIN kept ON t.key = kept.key

where ``kept`` is the person keys the person source's release keeps (every person of the source,
minus the persons its suppression removed).  Keys are compared byte for byte on both sides
(``sqltext.person_key``): a key column whose collation folds case cannot join ``q1``'s rows to
``Q1``.  The inner join drops the rows of suppressed persons
and the orphans (rows whose person is not in the person source, a NULL key included); orphans are
counted first and refused unless the table says ``orphans = "drop"``.  Dates move by the same
offset as in the person source (``shifting``), and the key gets the same HMAC pseudonym
(``contract.roles.apply_roles``), so a patient joins across the released tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlglot import exp

from ..contract.pseudonym import type_problems
from ..contract.roles import FLAG, apply_roles
from ..contract.shift import shift_type_problems
from ..errors import BackendError, DataError
from ..loading.load import read_problem
from ..loading.shifting import range_problems, shifted_select
from ..spec.linked import LinkedTable
from ..sqltext import col, ident, person_key

if TYPE_CHECKING:
    from ..backends.base import Backend
    from ..spec.file import Spec

KEY = "deid_key"
KEPT = "deid_kept"


@dataclass(frozen=True)
class LinkedSource:
    """A linked table opened on the engine: its view, its columns (name → type), and its counts."""

    table: LinkedTable
    view: str
    columns: dict[str, str]
    rows: int = 0  # rows of the table
    orphans: int = 0  # rows whose person is not in the person source (NULL keys included)
    removed: int = 0  # rows of persons the person source's suppression removed

    @property
    def released(self) -> int:
        """The rows its release writes."""
        return self.rows - self.orphans - self.removed


def open_linked(backend: Backend, spec: Spec, table: LinkedTable, index: int) -> LinkedSource:
    """The session view over ``table``; raises one ``DataError`` listing every problem."""
    view = f"deid_linked_{index}"
    where = f"{table.where} ({table.source.describe()})"
    text = {table.person: True}  # a CSV key is hashed as the file's text, like the person source's
    try:
        backend.create_temp_view(view, exp.select("*").from_(backend.relation(table.source, text)))
        columns = backend.columns(view)
    except BackendError as e:
        raise DataError(read_problem(f"linked table {table.name!r}", table.source.describe(), str(e))) from None
    problems: list[str] = []
    if table.person not in columns:
        shown = ", ".join(list(columns)[:12]) + ("…" if len(columns) > 12 else "")
        problems.append(f"{where} has no person key column {table.person!r}; its columns are {shown}: set "
                        f"person = \"<its key column>\" in the [[table]]")
    else:
        problems += type_problems([table.person], columns, where)
    problems += shift_type_problems(table.roles.shift, columns, where)
    problems += table.roles.problems(list(columns), [], where)
    if table.roles.shift and (spec.person is None or spec.person.shift_days is None):
        problems.append(f"{where} shift needs [person] shift_days = <days>")
    if table.roles.shift and not problems:  # dates the shift would move out of the engine's range
        assert spec.person is not None and spec.person.shift_days is not None
        problems += range_problems(backend, exp.to_table(view), columns, table.roles.shift, table.person,
                                   spec.columns.secret(), spec.person.shift_days, where)
    if problems:
        raise DataError(problems)
    return LinkedSource(table, view, columns)


def kept_keys(person_release: exp.Select, key: str, flagged: bool, key_type: str | None) -> exp.Select:
    """``SELECT DISTINCT key`` of the persons the person source's release keeps: from its raw
    release query (every source column, the key unpseudonymized, of SQL type ``key_type``), without
    the suppressed ones; byte for byte (``sqltext.person_key``)."""
    sub = exp.Subquery(this=person_release, alias=exp.TableAlias(this=ident("deid_person_release")))
    query = exp.select(exp.alias_(person_key(col(key), key_type), KEY)).distinct().from_(sub)
    if flagged:
        query = query.where(exp.Not(this=exp.func("coalesce", col(FLAG), exp.false())))
    return query


def counted(backend: Backend, source: LinkedSource, person_keys: exp.Select, kept: exp.Select) -> LinkedSource:
    """``source`` with its rows, orphans and rows of removed persons counted in one query; an
    orphan refused by the table's rule is one ``DataError`` line."""
    t = source.table
    key = person_key(col(t.person, "t"), source.columns.get(t.person))
    everyone = exp.Subquery(this=person_keys.copy(), alias=exp.TableAlias(this=ident("deid_everyone")))
    keeping = exp.Subquery(this=kept.copy(), alias=exp.TableAlias(this=ident(KEPT)))
    orphan = exp.Is(this=exp.column(KEY, "deid_everyone"), expression=exp.null())
    removed = exp.and_(exp.Not(this=orphan.copy()), exp.Is(this=exp.column(KEY, KEPT), expression=exp.null()))
    query = (exp.select(exp.alias_(exp.func("count", exp.Star()), "n"),
                        exp.alias_(_count_if(orphan), "orphans"), exp.alias_(_count_if(removed), "removed"))
             .from_(exp.alias_(exp.to_table(source.view), "t", table=True))
             .join(everyone, on=exp.EQ(this=key.copy(), expression=exp.column(KEY, "deid_everyone")), join_type="LEFT")
             .join(keeping, on=exp.EQ(this=key.copy(), expression=exp.column(KEY, KEPT)), join_type="LEFT"))
    row = backend.execute(query).to_pylist()[0]
    out = LinkedSource(t, source.view, source.columns, int(row["n"] or 0), int(row["orphans"] or 0),
                       int(row["removed"] or 0))
    if out.orphans and t.orphans == "refuse":
        raise DataError(f"{t.where} ({t.source.describe()}) has {out.orphans:,} row(s) whose person is not in the "
                        f"person source (key {t.person!r} NULL or unknown); fix the extract, or set orphans = \"drop\" "
                        f"in the [[table]] to leave them out (they are counted in the sidecar)")
    return out


def linked_query(backend: Backend, spec: Spec, source: LinkedSource, kept: exp.Select) -> exp.Select:
    """The release of a linked table: its rows of kept persons, dates shifted, roles applied."""
    t = source.table
    relation: exp.Expression = exp.to_table(source.view)
    if t.roles.shift:
        assert spec.person is not None and spec.person.shift_days is not None
        relation = shifted_select(backend, relation, source.columns, t.roles.shift, t.person, spec.columns.secret(),
                                  spec.person.shift_days)
    rows = (exp.Subquery(this=relation, alias=exp.TableAlias(this=ident("t"))) if isinstance(relation, exp.Select)
            else exp.alias_(relation, "t", table=True))
    keeping = exp.Subquery(this=kept.copy(), alias=exp.TableAlias(this=ident(KEPT)))
    key = person_key(col(t.person, "t"), source.columns.get(t.person))
    query = (exp.select(*[exp.alias_(col(name, "t"), ident(name)) for name in source.columns]).from_(rows)
             .join(keeping, on=exp.EQ(this=key, expression=exp.column(KEY, KEPT)), join_type="INNER"))
    return apply_roles(query, t.roles, [], backend, t.where, copy=False)


def released_columns(source: LinkedSource) -> list[tuple[str, str]]:
    """``(name, role)`` of the columns a linked table releases, in order."""
    return source.table.roles.released(list(source.columns), [], source.table.where)


def _count_if(condition: exp.Expression) -> exp.Expression:
    return exp.func("sum", exp.Case().when(condition, exp.Literal.number(1)).else_(exp.Literal.number(0)))


__all__ = ["LinkedSource", "counted", "kept_keys", "linked_query", "open_linked", "released_columns"]
