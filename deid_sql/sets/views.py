"""A release set as views: ``view SET_SPEC --view PREFIX``.

A view's SQL is stored, so it cannot hold the HMAC pads of the spec's secret (``contract.keys``),
and a set pseudonymizes its person key and may shift dates.  The keyed values are therefore
computed once, by running (never storing) the keyed SQL, into a *key table* ``PREFIX`` + ``keys``:
one row per person of the person source at creation time, with the raw person key, its
pseudonym (the HMAC ``materialize`` gives), its date offset in days (NULL without shifting) and
whether the release suppresses the person.  Another pseudonymized column (an ``encounter_id``
that joins two linked tables) gets the same treatment in ``PREFIX`` + ``pseudonyms``: every text
of such a column at creation time and its pseudonym.  Then one view per table, ``PREFIX`` + its
release name, reads its source in place and the key tables:

- the person source's view restricts the source to the persons of the key table (an inner join
  on the raw key, *before* generalizing, so a person added later changes no group of the view:
  they show nowhere until ``view --overwrite`` judges the set again), shifts its dates by the
  key table's offset, generalizes and suppresses as ``materialize`` does, and takes the person
  key's pseudonym from the key table;
- each linked table's view inner-joins the key table on the raw key, keeping the persons the
  release did not suppress (orphans, refused with a count at creation unless ``orphans = "drop"``,
  are left out by the join), shifts its dates by the same offsets and replaces the key by the
  pseudonym.

So the stored SQL holds no key, the views show ``materialize``'s rows byte for byte, and the key
tables hold raw identifiers that must stay where they add no exposure: in PostgreSQL, locked to
their owner (views run with their owner's privileges, so an analyst granted the views reads
neither the key tables nor the sources); in DuckDB, only in the file that holds the person source
table already; Spark's local catalog has no grants and refuses (``Backend.set_views``).

One gate verdict for the set (``sets.release.prepare_set``, as every set path): the set is judged
where the data is before anything is created, then the person source's view as created, in
persons, inside the transaction that creates every key table, view and the record table
``PREFIX`` + ``release`` (``Backend.create_set_views``: all or none).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from sqlglot import exp

from .. import progress
from ..backends.base import fingerprint
from ..contract.keys import Pads
from ..contract.roles import FLAG, apply_roles
from ..errors import OutputError
from ..loading.shifting import shift_source, source_shift
from ..loading.transform import transform_source
from ..problem import Problem
from ..release.figures import ReleaseFigures
from ..release.gate import Verdict
from ..release.plan import ReleasePlan
from ..release.targets import input_tables, set_names
from ..sqltext import col, ident, person_key
from ..storage.names import check_name, check_output_name, parse_name
from .release import entry, prepare_set
from .rows import LinkedSource, released_columns
from .tables import TableOfSet, record_table

if TYPE_CHECKING:
    from ..backends.base import Backend
    from ..spec.file import Spec
    from ..storage.tableref import TableRef

KEYS = "keys"  # PREFIX + keys: the key table
PSEUDONYMS = "pseudonyms"  # PREFIX + pseudonyms: the other pseudonymized columns' values
PERSON_KEY, PSEUDONYM, OFFSET, SUPPRESSED, VALUE = "person_key", "pseudonym", "offset_days", "suppressed", "value"
K = "deid_k"  # the key table's alias in a view
SOURCE = "deid_source"


@dataclass(frozen=True)
class SetViewNames:
    """The names of a set's views (``(release name, view name)``, the person source first), its key
    table, its pseudonym table (None when no column but the person key is pseudonymized) and its
    record table."""

    views: list[tuple[str, str]]
    keys: str
    pseudonyms: str | None
    record: str

    @property
    def all(self) -> list[str]:
        return [v for _, v in self.views] + [self.keys, *([self.pseudonyms] if self.pseudonyms else []), self.record]


def other_pseudonymized(spec: Spec) -> bool:
    """Whether a column other than a person key is pseudonymized in some table of the set."""
    person = spec.person.column if spec.person is not None else None
    return (any(c != person for c in spec.columns.pseudonymize)
            or any(c != t.person for t in spec.tables for c in t.roles.pseudonymize))


def set_view_names(spec: Spec, prefix: str) -> SetViewNames:
    """``PREFIX`` + each release name, + ``keys``, + ``pseudonyms``, + ``release`` (``targets.set_names``);
    a table released as ``keys`` or ``pseudonyms`` would take a key table's name: refused."""
    names, record = set_names(spec, prefix)
    for reserved in (KEYS, PSEUDONYMS):
        if reserved in [n for n, _ in names]:
            raise OutputError(f"--view {prefix}: the table released as {reserved!r} would take the name of the set's "
                              f"key table {prefix + reserved!r}; give it another name = \"…\" in the spec")
    return SetViewNames(names, prefix + KEYS, prefix + PSEUDONYMS if other_pseudonymized(spec) else None, record)


def check_place(spec: Spec, backend: Backend | Any, database: Path | None, names: SetViewNames) -> None:
    """Refuse, in one line, a place that cannot hold the key tables without new exposure, and names
    that are not names of the engine or that name an input."""
    if not getattr(backend, "set_views", False):
        raise OutputError(f"views of a set cannot be created on {backend.title}: the key table of raw person keys "
                          f"they read would be readable by anyone who can read them (no grants protect it there); "
                          f"release the set with deid-sql materialize --tables PREFIX or --out FOLDER")
    if database is None:
        if not backend.catalog:
            raise OutputError(f"name the DuckDB file that holds the person source with --db "
                              f"({spec.source.describe()})")
        for name in names.all:
            check_output_name(backend.dialect, name, "--view", inputs=input_tables(spec), sidecar=False)
        return
    if backend.catalog:
        raise OutputError(f"the engine is {backend.title}: the views of the set go into its database; leave out --db")
    ref = spec.source
    if ref.format != "duckdb" or ref.path is None or Path(ref.path).resolve() != database.resolve():
        raise OutputError(f"a view of a set keeps the raw person keys in a key table, which may live only in the "
                          f"DuckDB file that already holds the person source, not in {database} (the person source "
                          f"is {ref.describe()}); put the person source in a DuckDB file and name it with --db, or "
                          f"write the set as files with deid-sql materialize --out FOLDER")
    inputs = {parse_name(str(r.table), "duckdb", "table").key() for r in [ref, *(t.source for t in spec.tables)]
              if r.format == "duckdb" and r.path is not None and Path(r.path).resolve() == database.resolve()}
    for name in names.all:
        check_name(name, "--view")
        if parse_name(name, "duckdb", "--view").key() in inputs:
            raise OutputError(f"--view {name!r} is an input of the set (a table of {database}); pick another prefix")


@dataclass(frozen=True)
class KeyTables:
    """The ``KeyHolder`` of a set's views (``contract.keys``): every keyed value is read from the key
    tables, so the SQL holds no key.  ``person``: the column whose pseudonym is the key table's, of
    SQL type ``person_type`` (looked up byte for byte: ``sqltext.person_key``); ``joined``: the key
    table is joined in the query as ``K`` (else each value is looked up)."""

    keys: exp.Table
    pseudonyms: exp.Table | None
    person: str
    joined: bool = False
    holds_key: bool = False
    person_type: str | None = None

    def pseudonym(self, value: exp.Expression, key: bytes, form: str) -> exp.Expression:
        if isinstance(value, exp.Column) and value.name == self.person:
            return (col(PSEUDONYM, K) if self.joined
                    else _lookup(self.keys, PERSON_KEY, person_key(value, self.person_type), PSEUDONYM))
        assert self.pseudonyms is not None  # named whenever another column is pseudonymized
        return _lookup(self.pseudonyms, VALUE, exp.cast(value, "VARCHAR"), PSEUDONYM)

    def offset(self, person: exp.Expression, secret: bytes, days: int) -> exp.Expression:
        return (col(OFFSET, K) if self.joined
                else _lookup(self.keys, PERSON_KEY, person_key(person, self.person_type), OFFSET))


def _lookup(table: exp.Table, key: str, value: exp.Expression, column: str) -> exp.Expression:
    """``(SELECT column FROM table WHERE key = value)``: NULL for a value the table does not hold."""
    alias = "deid_lookup"
    return exp.Subquery(this=exp.select(col(column, alias)).from_(_aliased(table, alias)).where(
        exp.EQ(this=col(key, alias), expression=value.copy())))


def _aliased(table: exp.Table, alias: str) -> exp.Expression:
    return exp.alias_(table.copy(), alias, table=True)


def key_tables(backend: Backend, names: SetViewNames, person: str, person_type: str | None,
               joined: bool = False) -> KeyTables:
    """The key holder of a view of the set ``names``, its tables parsed by the engine's rules;
    ``person_type``: the SQL type of the ``person`` column the views read."""
    pseudonyms = parse_name(names.pseudonyms, backend.dialect, "--view").table() if names.pseudonyms else None
    return KeyTables(parse_name(names.keys, backend.dialect, "--view").table(), pseudonyms, person, joined,
                     person_type=person_type)


def view_relation(backend: Backend, spec: Spec, ref: TableRef, database: Path | None,
                  text: dict[str, bool]) -> exp.Expression:
    """What a stored view reads ``ref`` as: the engine's table, a table of the DuckDB file the view
    lives in, or a CSV/Parquet file in place; another DuckDB file cannot be reached."""
    if database is not None and ref.format == "duckdb":
        if ref.path is None or Path(ref.path).resolve() != database.resolve():
            raise OutputError(f"{ref.describe()} is in another DuckDB file than {database}; a view cannot read it: "
                              f"put every table of the set in {database}, or use materialize --out FOLDER")
        return parse_name(str(ref.table), "duckdb", "table").table()
    return backend.relation(ref, text)


def key_query(problem: Problem, plan: ReleasePlan, source: exp.Expression) -> exp.Select:
    """The key table: one row per person of ``source`` (the person source as the view reads it),
    its raw key, pseudonym, date offset and suppression, from the release's own query: SQL with
    the key's pads, run once and never stored."""
    spec, backend = problem.spec, problem.backend
    assert spec.person is not None
    release = problem.query(plan, shift_source(backend, spec, source, problem.columns), roles=False)
    alias = "deid_person_release"
    # persons told apart byte for byte: a case-folding collation cannot make Q1 and q1 one row here
    key = person_key(col(spec.person.column, alias), problem.columns.get(spec.person.column))
    secret = spec.columns.secret()
    days = spec.person.shift_days
    offset = Pads(backend).offset(key.copy(), secret, days) if days is not None else exp.cast(exp.null(), "INTEGER")
    suppressed: exp.Expression = (exp.LogicalOr(this=exp.func("coalesce", col(FLAG, alias), exp.false()))
                                  if plan.suppression is not None else exp.false())
    return (exp.select(exp.alias_(key.copy(), PERSON_KEY),
                       exp.alias_(backend.pseudonymize(key.copy(), secret, spec.columns.pseudonym), PSEUDONYM),
                       exp.alias_(exp.cast(offset, "INTEGER"), OFFSET), exp.alias_(suppressed, SUPPRESSED))
            .from_(exp.Subquery(this=release, alias=exp.TableAlias(this=ident(alias)))).group_by(key.copy()))


def pseudonyms_query(problem: Problem, sources: Sequence[tuple[exp.Expression, Sequence[str]]]) -> exp.Select:
    """Every text of the other pseudonymized columns (``sources``: each relation and its columns)
    with its pseudonym: run once, never stored."""
    spec, backend = problem.spec, problem.backend
    parts = [exp.select(exp.alias_(exp.cast(col(c), "VARCHAR"), VALUE)).from_(relation.copy())
             .where(exp.Not(this=exp.Is(this=col(c), expression=exp.null())))
             for relation, columns in sources for c in columns]
    union: exp.Query = parts[0]
    for part in parts[1:]:
        union = exp.union(union, part, distinct=True)
    alias = "deid_values"
    value = col(VALUE, alias)
    return exp.select(exp.alias_(value.copy(), VALUE),
                      exp.alias_(backend.pseudonymize(value.copy(), spec.columns.secret(), spec.columns.pseudonym),
                                 PSEUDONYM)).distinct().from_(exp.Subquery(this=union, alias=exp.TableAlias(
                                     this=ident(alias))))


def _shifted(backend: Backend, columns: dict[str, str], shift: Sequence[str], alias: str) -> list[exp.Expression]:
    """Every column of ``alias``, the ``shift`` ones moved by the joined key table's offset."""
    return [exp.alias_(backend.shift_days(col(n, alias), col(OFFSET, K), str(t)) if n in shift else col(n, alias),
                       ident(n)) for n, t in columns.items()]


def person_view(problem: Problem, plan: ReleasePlan, source: exp.Expression, names: SetViewNames) -> exp.Select:
    """The person source's view: the persons of the key table (joined before generalizing), dates
    shifted by its offsets, generalized, suppressed and released as ``materialize`` releases them."""
    spec, backend = problem.spec, problem.backend
    assert spec.person is not None
    key = person_key(col(spec.person.column, SOURCE), problem.columns.get(spec.person.column))
    keys = key_tables(backend, names, spec.person.column, problem.columns.get(spec.person.column))
    restricted = (exp.select(*_shifted(backend, dict(problem.columns), source_shift(spec), SOURCE))
                  .from_(exp.alias_(source.copy(), SOURCE, table=True) if isinstance(source, exp.Table)
                         else exp.Subquery(this=source.copy(), alias=exp.TableAlias(this=ident(SOURCE))))
                  .join(_aliased(keys.keys, K), on=exp.NullSafeEQ(this=key, expression=col(PERSON_KEY, K)),
                        join_type="INNER"))
    return problem.query(plan, restricted, persistent=True, keys=keys)


def linked_view(backend: Backend, linked: LinkedSource, source: exp.Expression, names: SetViewNames) -> exp.Select:
    """A linked table's view: its rows of the persons the release keeps (the key table joined on
    the raw key), dates shifted by their offsets, the key replaced by its pseudonym, roles applied."""
    t = linked.table
    rows = (exp.alias_(source.copy(), "t", table=True) if isinstance(source, exp.Table)
            else exp.Subquery(this=source.copy(), alias=exp.TableAlias(this=ident("t"))))
    kept = exp.and_(exp.EQ(this=person_key(col(t.person, "t"), linked.columns.get(t.person)),
                           expression=col(PERSON_KEY, K)),
                    exp.Not(this=col(SUPPRESSED, K)))
    keys = key_tables(backend, names, t.person, linked.columns.get(t.person), joined=True)
    query = (exp.select(*_shifted(backend, linked.columns, t.roles.shift, "t")).from_(rows)
             .join(_aliased(keys.keys, K), on=kept, join_type="INNER"))
    return apply_roles(query, t.roles, [], backend, t.where, copy=False, keys=keys)


@dataclass(frozen=True)
class WrittenViews:
    """What a set's views produced: where (a DuckDB file, or None: the engine), its views (the
    person source first), its key tables, the gate's figures (in persons, on the person source's
    view as created) and verdict, and the record table."""

    database: Path | None
    tables: tuple[TableOfSet, ...]
    keys: tuple[str, ...]
    figures: ReleaseFigures
    verdict: Verdict
    sidecar: str
    record: dict[str, Any]

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)


def create_set_views(problem: Problem, plan: ReleasePlan, prefix: str, database: str | Path | None = None,
                     replace: bool = False, accept_risk: str | None = None) -> WrittenViews:
    """Create the key tables, one view per table of ``problem``'s set (``PREFIX`` + release name)
    and the record table ``PREFIX`` + ``release``, all or none, judged once (see the module)."""
    db = Path(database) if database is not None else None
    spec, backend = problem.spec, problem.backend
    if spec.person is None or not spec.tables:
        raise OutputError(f"spec {spec.path} declares no [[table]]: --view names one view")
    names = set_view_names(spec, prefix)
    check_place(spec, backend, db, names)
    call = (f"deid_sql.sets.views.create_set_views(problem, {plan.repr_call()}, {prefix!r}"
            + (f", {str(db)!r}" if db is not None else "") + ")")
    prepared = prepare_set(problem, plan, call, accept_risk)
    gate = prepared.gate
    # the person source as stored, its QIs read through their declared transformations (once, here)
    person_source = transform_source(spec, view_relation(backend, spec, spec.source, db, {}), problem.columns)
    linked_sources = [view_relation(backend, spec, s.table.source, db, {s.table.person: True})
                      for s in prepared.linked]
    keys = [(names.keys, key_query(problem, plan, person_source))]
    if names.pseudonyms is not None:
        person = spec.person.column
        others = [(person_source, [c for c in spec.columns.pseudonymize if c != person and c in problem.columns])]
        others += [(r, [c for c in s.table.roles.pseudonymize if c != s.table.person and c in s.columns])
                   for r, s in zip(linked_sources, prepared.linked)]
        keys.append((names.pseudonyms, pseudonyms_query(problem, [o for o in others if o[1]])))
    views = [(names.views[0][1], person_view(problem, plan, person_source, names), problem.source_rows)]
    views += [(names.views[i + 1][1], linked_view(backend, s, r, names), s.released)
              for i, (s, r) in enumerate(zip(prepared.linked, linked_sources))]
    columns = [list(gate.columns)] + [released_columns(s) for s in prepared.linked]
    sources = [spec.source.describe()] + [s.table.source.describe() for s in prepared.linked]
    done: dict[str, Any] = {}

    def finish(run: Callable[[exp.Expression], pa.Table],
               targets: Sequence[exp.Expression]) -> dict[str, pa.Table]:  # inside the creating transaction
        figures = gate.measure(run, targets[0])  # the person source's view as created: figures in persons
        verdict = gate.judge(figures)
        entries = []
        for i, ((name, view), (_, _, rows), target) in enumerate(zip(names.views, views, targets)):
            where = {"table": view, "kind": "view", "row_hash": fingerprint(run, backend, target,
                                                                             [n for n, _ in columns[i]])}
            entries.append(entry(name, where, rows, columns[i], sources[i], prepared.linked[i - 1] if i else None))
        release = {"kind": "set", "name": prefix, "database": str(db.resolve()) if db else spec.backend.engine,
                   "format": "view", "rows": sum(v[2] for v in views), "tables": entries,
                   "key_tables": [k for k, _ in keys]}
        record = gate.record(figures, verdict, release)
        done.update(figures=figures, verdict=verdict, record=record)
        return {names.record: record_table(record)}

    with progress.watching(f"creating {len(views)} views", backend.progress):
        rows = backend.create_set_views(db, keys, views, replace, finish)
    written = tuple(TableOfSet(name, view, n) for (name, view), n in zip(names.views, rows))
    return WrittenViews(db, written, tuple(k for k, _ in keys), done["figures"], done["verdict"], names.record,
                        done["record"])


__all__ = ["KeyTables", "SetViewNames", "WrittenViews", "check_place", "create_set_views", "key_query",
           "linked_view", "person_view", "pseudonyms_query", "set_view_names", "view_relation"]
