"""A new batch opened against a policy file: read, checked, and ready to be released.

``open_batch`` reads the policy's spec with its ``[source]`` replaced by the batch (so the
original data is never read), connects to the spec's ``[backend]`` engine (DuckDB reads batch
files; PostgreSQL and Spark read batches that are tables of theirs, Spark also Parquet and CSV
files), checks the batch's schema and the spec hash, and counts the values outside the saved
domains.  ``Batch.release_query`` is the compiler's generalizing
``SELECT`` with one guard per QI: a value outside the saved domain becomes the fallback
label, or — without one — fails the query, so no out-of-domain value can pass through (a
view re-reads its file on every query).  With ``[person]`` the batch is checked for persons as a
source is when it loads (``persons.check_batch``) and released as ``Problem.query`` releases one
(``person_rows``: each person's rows carry the person's labels).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
from sqlglot import exp

from .. import progress
from ..backends import Backend, connect, engine_class
from ..compiler.compile import col, from_relation, generalize, suppress
from ..compiler.guards import IN_LIST, in_domain
from ..contract.roles import apply_roles
from ..domains.cuts import hierarchy_values
from ..domains.domain import CategoryDomain
from ..domains.hierarchy import Hierarchy
from ..domains.recoding import Recoding
from ..errors import BackendError, DataError, OutputError, SpecError
from ..loading.load import read_problem, shift_problems
from ..loading.person_rows import check_person_release, derived_columns, person_rows
from ..loading.shifting import range_problems, shift_source, source_shift
from ..loading.transform import released_types, transform_problems, transform_source, transformed_qis
from ..spec.file import LOCATION_KEYS, BackendSpec, QISpec, Spec, TableRef, read_toml
from ..spec.linked import default_name
from ..spec.transform import describe
from .format import RESAVE, PolicyFile, PolicyFileError, spec_sha256, type_class
from .linkedset import set_difference, spec_set
from .persons import SavedPerson, check_batch, difference
from .saved_qi import SavedQI

BATCH_VIEW = "deid_batch"
SHOWN = 5  # out-of-domain values named in a message
_SUFFIXES = {".csv": "csv", ".tsv": "csv", ".txt": "csv", ".parquet": "parquet", ".pq": "parquet",
             ".duckdb": "duckdb", ".db": "duckdb", ".ddb": "duckdb"}


def batch_ref(source: str | Path, table: str | None = None) -> TableRef:
    """The batch as a table reference: a CSV or Parquet file, or ``table`` in a DuckDB file."""
    path = Path(source)
    fmt = _SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise DataError(f"cannot tell the format of batch {path}; use a .csv, .parquet or .duckdb file")
    if not path.is_file():
        raise DataError(f"batch {path} does not exist; pass the new data with --source")
    if fmt == "duckdb" and not table:
        raise DataError(f"batch {path} is a DuckDB file: name its table with --source-table")
    if fmt != "duckdb" and table:
        raise DataError(f"--source-table with --source is only for a DuckDB batch; {path} is a {fmt} file")
    return TableRef(path.resolve(), fmt, table)


def engine_ref(name: str) -> TableRef:
    """The batch as a table of the spec's engine (PostgreSQL ``schema.table``, a Spark catalog table)."""
    if not name or not name.strip():
        raise DataError("--source-table needs a table name, e.g. --source-table staging.batch_2025_06")
    return TableRef(None, "table", name.strip())


def spec_for_batch(spec_path: Path, ref: TableRef,
                   linked: Mapping[str, TableRef] | None = None) -> tuple[Spec, dict[str, object]]:
    """The policy's spec with ``[source]`` replaced by the batch, and the spec's raw TOML; with
    ``linked`` (release name -> batch) each ``[[table]]`` of a set is replaced by its batch too."""
    raw = read_toml(spec_path, missing=f"the policy's spec {spec_path} does not exist; restore it, or {RESAVE}")
    engine = engine_class(engine_of(raw))
    for r in [ref, *(linked or {}).values()]:
        reason = engine.unreadable(r)
        if reason is not None:
            raise SpecError(f"spec {spec_path} runs on {engine.title}, which {reason}: {_readable_hint(engine)}")
    data = dict(raw)
    # the person source keeps its release name (a set's file name, in its hash), whatever the batch is called
    name = _release_name(raw.get("source"))
    data["source"] = _located(ref, raw.get("source")) | ({"name": name} if name else {})
    if linked is not None:  # a set's batches: each linked table keeps its release name too
        tables = raw.get("table") if isinstance(raw.get("table"), list) else []
        data["table"] = [{k: v for k, v in t.items() if k not in LOCATION_KEYS}
                         | {"name": _release_name(t)} | _located(linked[_release_name(t)], t)
                         if isinstance(t, dict) and _release_name(t) in linked else t
                         for t in tables]  # type: ignore[union-attr]
    return Spec.from_dict(data, base=spec_path.resolve().parent, path=spec_path), raw


def _release_name(entry: object) -> str:
    """The release name of a spec table's raw entry: its ``name``, or the one the spec gives it
    from where it lives (``linked.default_name``)."""
    if not isinstance(entry, dict):
        return ""
    if isinstance(entry.get("name"), str):
        return str(entry["name"])
    path, table = entry.get("path"), entry.get("table")
    return default_name(TableRef(Path(str(path)) if path is not None else None, "file",
                                 str(table) if table is not None else None))


def _located(ref: TableRef, old: object) -> dict[str, object]:
    """Where a spec table reads ``ref``: a file (its format, a CSV delimiter kept from ``old``, the
    spec's entry it replaces) or a table of the engine."""
    where: dict[str, object] = {"table": ref.table} if ref.format == "table" else {"path": str(ref.path),
                                                                                   "format": ref.format}
    if ref.table and ref.format != "table":
        where["table"] = ref.table
    if ref.format == "csv" and isinstance(old, dict) and old.get("delimiter"):
        where["delimiter"] = old["delimiter"]  # a batch is read like the spec's table
    return where


def _readable_hint(engine: type[Backend]) -> str:
    """How to hand ``engine`` a batch it can read."""
    files = sorted(engine.file_formats - {"duckdb"}) + (["a .duckdb file with --source-table"]
                                                         if "duckdb" in engine.file_formats else [])
    ways = ([f"pass --source FILE ({', '.join(files)})"] if files else []) + (
        [f"load the batch into a {engine.title} table and pass --source-table NAME"] if engine.catalog else [])
    return ", or ".join(ways)


def engine_of(raw: dict[str, object]) -> str:
    """The engine a spec's raw TOML names (the spec's default unless ``[backend] engine`` says otherwise)."""
    backend = raw.get("backend")
    default = BackendSpec().engine
    return str(backend.get("engine", default)) if isinstance(backend, dict) else default


def original_source(spec_path: Path, raw: dict[str, object]) -> Path | None:
    """The file the spec's own ``[source]`` names (outputs must never replace it)."""
    old = raw.get("source")
    if isinstance(old, dict) and isinstance(old.get("path"), str):
        return (spec_path.resolve().parent / str(old["path"])).resolve()
    return None


def engine_tables(raw: dict[str, object]) -> set[str]:
    """Tables of the engine the spec's own ``[source]`` and ``[population]`` name (never written)."""
    out = set()
    for key in ("source", "population"):
        table = raw.get(key)
        if isinstance(table, dict) and table.get("path") is None and isinstance(table.get("table"), str):
            out.add(str(table["table"]))
    return out


def declarations(spec: Spec, policy: PolicyFile) -> list[dict[str, object]]:
    """The spec's QI declarations as the hash sees them.  A domain the spec reads from data
    (``values_from = "source"`` or ``"population"``) is the one frozen in the policy file."""
    saved = {q.name: q for q in policy.qis}
    out = []
    for q in spec.qis:
        decl: dict[str, object] = {"name": q.name, "column": q.column, "kind": q.kind, "nulls": q.nulls}
        frozen = saved.get(q.name)
        decl["domain"] = _declared_domain(q, frozen)
        if q.transform is not None:  # only when declared: a file saved before transforms hashes as it did
            decl["transform"] = describe(q.transform, q.scale)
        out.append(decl)
    return out


def spec_digest(spec: Spec, policy: PolicyFile, columns: Sequence[tuple[str, str]]) -> str:
    """The spec hash of ``spec`` over a source of ``columns`` (name, type class): its QI
    declarations and, with ``[person]``, its person declaration (``persons.SavedPerson``), and
    with ``[[table]]`` its set (``linkedset.spec_set``)."""
    person = SavedPerson.of_spec(spec)
    linked = spec_set(spec, policy.linked)
    return spec_sha256(declarations(spec, policy), columns, person.to_json() if person is not None else None,
                       linked.declaration() if linked is not None else None)


def _declared_domain(q: QISpec, frozen: SavedQI | None) -> object:
    if q.kind == "integer":
        return {"min": int(q.min), "max": int(q.max)}
    if q.kind == "date":
        return {"min": q.min.isoformat(), "max": q.max.isoformat()}
    extra = [q.null_label] if q.nulls == "category" else []
    if q.values is not None:
        return {"values": _load_order(q, [*q.values, *extra])}
    if q.values_from == "hierarchy" and q.hierarchy is not None:
        return {"values": _load_order(q, [*Hierarchy.read(q.hierarchy).rows, *extra])}
    if frozen is not None and frozen.kind == q.kind:
        return {"values": list(frozen.domain.values)}  # type: ignore[attr-defined]
    return {"values_from": q.values_from}


def _load_order(q: QISpec, values: list[str]) -> list[str]:
    """Declared values in the order a load gives the domain: a QI with ``cuts = "hierarchy"`` may
    take its hierarchy's (``cuts.hierarchy_values``), and the saved domain is that one."""
    if q.cuts is None or not q.cuts.hierarchy or q.hierarchy is None:
        return values
    return list(hierarchy_values(values, Hierarchy.read(q.hierarchy)))


@dataclass(frozen=True)
class Outside:
    """Values of a batch outside the saved domains (NULLs count unless kept as a category)."""

    records: int  # records with at least one such value
    per_qi: tuple[tuple[str, str, int, int, tuple[str, ...]], ...]  # QI, column, records, distinct, examples

    def describe(self) -> str:
        parts = []
        for name, column, n, distinct, shown in self.per_qi:
            examples = ", ".join(shown) + (", …" if distinct > len(shown) else "")
            where = f"column {column!r}" if column == name else f"column {column!r} (QI {name!r})"
            parts.append(f"{n:,} record(s) in {distinct:,} distinct value(s) of {where} (e.g. {examples})")
        return "; ".join(parts)

    def summary(self) -> str:
        return ", ".join(f"{name}: {n:,}" for name, _, n, _, _ in self.per_qi)


class Batch:
    """An open batch (close it, or use ``with``): the spec over it, its engine and columns."""

    def __init__(self, policy: PolicyFile, ref: TableRef, spec: Spec, raw: dict[str, object],
                 backend: Backend) -> None:
        self.policy = policy
        self.ref = ref
        self.spec = spec
        self.original = original_source(policy.spec, raw)
        self.inputs = engine_tables(raw) | ({ref.table} if ref.format == "table" and ref.table else set())
        self.backend = backend
        self.domains = policy.domains
        self.value_tables: dict[int, str] = {}  # large category domains, registered for session queries
        for i, d in enumerate(self.domains):
            if isinstance(d, CategoryDomain) and d.size > IN_LIST:  # looked up by a hash join
                self.value_tables[i] = f"deid_batch_domain_{i}"
                backend.register_table(self.value_tables[i], pa.table({"v": pa.array(d.values, pa.string())}))
        try:
            self.relation = backend.relation(ref, {q.column: q.kind in ("category", "zip") for q in spec.qis
                                                   if q.derived is None})
            backend.create_temp_view(BATCH_VIEW, exp.select("*").from_(self.relation.copy()))
            self.columns = backend.columns(BATCH_VIEW)
            if transformed_qis(spec):  # every check and the release read the QIs' whole numbers, as the load does
                problems = transform_problems(backend, spec, exp.to_table(BATCH_VIEW), self.columns,
                                              f"batch {ref.describe()}")
                if problems:
                    raise DataError(problems)
                self.relation = transform_source(spec, self.relation, self.columns)
                backend.create_temp_view(BATCH_VIEW, exp.select("*").from_(from_relation(self.relation.copy())))
                self.columns = released_types(spec, self.columns)
        except BackendError as e:
            raise DataError(read_problem("batch", ref.describe(), str(e))) from None
        self._check_schema()
        self._check_hash()
        if source_shift(spec):  # the dates of [columns] shift move by each person's offset, as in the load
            shifting = shift_problems(spec, self.columns, f"batch {ref.describe()}")
            if not shifting:  # dates the shift would move out of the engine's range
                assert spec.person is not None and spec.person.shift_days is not None
                shifting = range_problems(backend, exp.to_table(BATCH_VIEW), self.columns, source_shift(spec),
                                          spec.person.column, spec.columns.secret(), spec.person.shift_days,
                                          f"batch {ref.describe()}")
            if shifting:
                raise DataError(shifting)
            self.relation = shift_source(backend, spec, self.relation, self.columns)
        # with [person]: the persons, after the load's person checks (a batch has no cells)
        self.persons: int | None = check_batch(self, BATCH_VIEW) if spec.person is not None else None
        self.records, self.outside = self._scan()

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> Batch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def describe(self) -> str:
        return self.ref.describe()

    # -- checks ---------------------------------------------------------------------------
    def _check_schema(self) -> None:
        shown = schema_differences({c.name: c.kind for c in self.policy.columns},
                                   {name: type_class(t) for name, t in self.columns.items()})
        if shown:
            raise DataError(f"batch {self.describe()} does not have the columns the policy {self.policy.describe()} "
                            f"was saved for: {shown}; fix the batch, or {RESAVE} on a spec whose source has "
                            f"these columns")

    def _check_hash(self) -> None:
        digest = spec_digest(self.spec, self.policy, [(n, type_class(t)) for n, t in self.columns.items()])
        if digest == self.policy.spec_sha256:
            return
        saved = [q.declaration() for q in self.policy.qis]
        detail = (_difference(saved, declarations(self.spec, self.policy))
                  or difference(self.policy.person, SavedPerson.of_spec(self.spec))
                  or set_difference(self.policy.linked, spec_set(self.spec, self.policy.linked)))
        raise PolicyFileError(f"policy file {self.policy.describe()} was saved for another spec/schema (hash "
                              f"{self.policy.spec_sha256[:12]}…, now {digest[:12]}…{detail}); {RESAVE}")

    def _scan(self) -> tuple[int, Outside]:
        """One pass: the row count and, per QI, the rows outside the saved domain (a derived QI is
        computed per person: its domain is ``persons.check_batch``'s)."""
        oks = [exp.true() if q.derived is not None else self.ok(i) for i, q in enumerate(self.spec.qis)]
        flags = [exp.alias_(_count_if(exp.not_(ok.copy())), f"bad{i}") for i, ok in enumerate(oks)]
        every = exp.and_(*[ok.copy() for ok in oks]) if len(oks) > 1 else oks[0].copy()
        query = exp.select(exp.alias_(exp.func("count", exp.Star()), "records"), *flags,
                           exp.alias_(_count_if(exp.not_(every)), "bad")).from_(BATCH_VIEW)
        row = self.run(query).to_pylist()[0]
        records = int(row["records"] or 0)
        if records == 0:
            raise DataError(f"batch {self.describe()} has no rows; nothing to release")
        per_qi = []
        for i, q in enumerate(self.spec.qis):
            if not row[f"bad{i}"]:
                continue
            value = exp.cast(col(q.column), "VARCHAR")
            detail = (exp.select(exp.alias_(value, "v"), exp.alias_(exp.func("count", exp.Star()), "n"))
                      .from_(BATCH_VIEW).where(exp.not_(oks[i].copy())).group_by(exp.column("v"))
                      .order_by(exp.Ordered(this=exp.column("n"), desc=True),
                                exp.Ordered(this=exp.column("v"), nulls_first=False)))
            rows = self.run(detail).to_pylist()
            shown = tuple("NULL" if r["v"] is None else repr(r["v"]) for r in rows[:SHOWN])
            per_qi.append((q.name, q.column, int(row[f"bad{i}"]), len(rows), shown))
        outside = Outside(int(row["bad"] or 0), tuple(per_qi))
        if outside.records and self.policy.fallback is None:
            raise DataError(f"batch {self.describe()}: {outside.describe()} — outside the domain saved in "
                            f"{self.policy.describe()}, which has no fallback label; {RESAVE} on a spec whose "
                            f"domain covers them, or with --fallback LABEL to release them as LABEL")
        return records, outside

    def run(self, query: exp.Expression) -> pa.Table:
        """Run a query over the batch; an engine error is the batch's one-line ``DataError``."""
        try:
            with progress.watching(f"reading the batch {self.describe()}", self.backend.progress):
                return self.backend.execute(query)
        except BackendError as e:
            raise DataError(read_problem("batch", self.describe(), str(e))) from None

    # -- SQL ------------------------------------------------------------------------------
    def frozen_spec(self) -> Spec:
        """The spec over this batch with every category and ZIP domain pinned to the saved one (in
        its saved order), so a ``Problem`` loaded from it has the policy file's domains, not the
        batch's own values (``values_from = "source"`` would read them anew)."""
        qis = []
        for q, domain in zip(self.spec.qis, self.domains):
            if isinstance(domain, CategoryDomain):  # ZIP domains are category domains too
                values = list(domain.values)
                if q.nulls == "category" and values and values[-1] == q.null_label:
                    values.pop()  # the loader appends the NULL category again
                q = replace(q, values=tuple(values), values_from=None)
            qis.append(q)
        return replace(self.spec, qis=tuple(qis))

    def ok(self, i: int, persistent: bool = False, q: QISpec | None = None,
           sql_type: str | None = None) -> exp.Expression:
        """Is the value of QI i in its saved domain?  ``persistent``: SQL that needs nothing of this
        session (a view); ``q`` and ``sql_type``: the same test on another table (the population)."""
        if q is None:
            q = self.spec.qis[i]
            sql_type = self.columns.get(q.column)
        return in_domain(q, self.domains[i], col(q.column), sql_type,
                         None if persistent else self.value_tables.get(i))

    def release_query(self, source: exp.Expression | None = None, recoding: Recoding | None = None,
                      persistent: bool = False, roles: bool = True) -> exp.Select:
        """The release: the saved columns with the spec's column roles applied (dropped ones out,
        pseudonymized ones replaced), QIs generalized; a value outside the saved domain becomes the
        fallback label or (without one) fails the query.  ``persistent``: SQL that needs nothing
        of this session (a view: refused when a column is pseudonymized, its SQL would hold the
        key); ``roles`` False: every saved column (the drift check reads only the QIs).

        With ``[person]`` the source is first rewritten by ``person_rows``: each person's rows
        carry the person's one value per QI (a derived QI's column is added), so the saved
        suppressed groups remove whole persons and the drift check counts persons."""
        hashed = [*self.spec.columns.pseudonymize, *source_shift(self.spec)]
        if persistent and roles and hashed:
            raise OutputError(f"a view's SQL would hold the secret key of the pseudonymized or shifted column(s) "
                              f"{', '.join(map(repr, hashed))}; write the release with --out instead, or list the "
                              f"column(s) under drop")
        # the saved suppressed groups (an anonymization's) go with the saved recoding, after the guards
        suppression = self.policy.suppression if recoding is None else None
        columns: dict[str, str | None] = {c.name: self.columns[c.name] for c in self.policy.columns}
        relation = source if source is not None else self.relation.copy()
        if self.spec.person is not None:
            if roles:  # the gate counts persons by the released key
                check_person_release(self.spec)
            columns |= derived_columns(self.spec)
            relation = person_rows(self.spec, self.domains, columns, relation)
        query = generalize(recoding or self.policy.recoding(), self.spec.qis, self.domains, relation, columns)
        guards = {q.column: i for i, q in enumerate(self.spec.qis)}
        projections = []
        for p in query.expressions:
            i = guards.get(p.alias_or_name) if isinstance(p, exp.Alias) else None
            if i is not None:
                q = self.spec.qis[i]
                otherwise = (exp.Literal.string(self.policy.fallback) if self.policy.fallback is not None else
                             self.backend.raise_error(
                                 f"deid-sql: column {q.column!r} holds a value outside the domain of QI "
                                 f"{q.name!r} saved in the policy file; run deid-sql check", col(q.column)))
                p = exp.alias_(exp.Case().when(self.ok(i, persistent), p.this).else_(otherwise), p.args["alias"])
            projections.append(p)
        query = suppress(query.select(*projections, append=False), [q.column for q in self.spec.qis], list(columns),
                         suppression)
        if not roles:
            return query
        return apply_roles(query, self.spec.columns, [q.column for q in self.spec.qis], self.backend,
                           f"batch {self.describe()}")


def schema_differences(saved: Mapping[str, str], now: Mapping[str, str]) -> str:
    """How a batch's columns (name → type class) differ from those saved, shortened to ``SHOWN``
    items; empty when they agree."""
    problems = [f"missing column {c!r}" for c in saved if c not in now]
    problems += [f"column {c!r} is {now[c]}, was {saved[c]}" for c in saved if c in now and now[c] != saved[c]]
    problems += [f"extra column {c!r} (not reviewed when the policy was saved)" for c in now if c not in saved]
    return "; ".join(problems[:SHOWN]) + (f"; … {len(problems) - SHOWN} more" if len(problems) > SHOWN else "")


def open_batch(policy: PolicyFile, ref: TableRef, linked: Mapping[str, TableRef] | None = None) -> Batch:
    """Open ``ref`` as a batch of ``policy`` on the spec's engine (with ``linked``: the batches of a
    set's linked tables in its spec, opened by ``applyset``); raises one ``DeidError`` for bad input."""
    spec, raw = spec_for_batch(policy.spec, ref, linked)
    backend = connect(spec.backend.engine, **spec.backend.options())
    try:
        return Batch(policy, ref, spec, raw, backend)
    except BaseException:
        backend.close()
        raise


def _count_if(condition: exp.Expression) -> exp.Expression:
    return exp.func("sum", exp.Case().when(condition, exp.Literal.number(1)).else_(exp.Literal.number(0)))


def _difference(saved: list[dict[str, object]], now: list[dict[str, object]]) -> str:
    """The first way the spec's QIs differ from the saved ones, for the message."""
    names_saved, names_now = [d["name"] for d in saved], [d["name"] for d in now]
    if names_saved != names_now:
        return f"; QIs {', '.join(map(str, names_saved))} are now {', '.join(map(str, names_now))}"
    for a, b in zip(saved, now):
        for key in ("column", "kind", "nulls", "domain"):
            if a[key] != b[key]:
                what = "domain" if key == "domain" else f"{key} {a[key]!r} → {b[key]!r}"
                return f"; QI {a['name']!r}: {what} changed"
    return ""


__all__ = ["Batch", "Outside", "batch_ref", "engine_ref", "open_batch", "spec_for_batch"]
