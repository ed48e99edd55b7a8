"""A set's batches under a saved policy: ``apply_set`` and ``check_set`` (``linkedset`` saves the set).

A warehouse extract comes as a batch of the person source and a batch of every linked table
(encounters, diagnoses), and they are released as ``materialize_set`` releases a set: the same
pseudonyms and date offsets in every table, the persons the saved policy suppresses removed from
every table, one gate verdict, one folder.  So every linked table saved with the policy needs
its batch (a set is released whole or not at all), and each batch is checked before anything is
written: the person batch as a single batch is (schema, spec hash, persons, domains, then the
drift check and the gate counting persons), each linked batch against the columns saved for it,
then opened and counted like a linked table (``sets.rows``: its key, roles and shifted dates;
orphans refused or dropped per the saved rule; rows of suppressed persons).  The files go through
``sets.release.write_tables`` into one staged folder renamed into place, with one
``release.json`` listing every table and the drift record a single batch's sidecar has.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from ..backends import connect
from ..errors import BackendError, DataError, OutputError
from ..loading.load import read_problem
from ..release.gate import override_reason
from ..release.output import FORMATS, measure_file, prejudge
from ..release.sidecar import to_json
from ..sets.release import (
    FILE_FORMATS,
    SIDECAR,
    SetTable,
    WrittenSet,
    check_set_folder,
    count_linked,
    linked_sources,
    set_release,
    write_tables,
)
from ..sets.rows import LinkedSource, kept_keys, linked_query, open_linked, released_columns
from ..spec.file import TableRef
from ..storage.atomic import replacing_folder
from .apply import batch_gate
from .batch import Batch, Outside, batch_ref, engine_ref, schema_differences, spec_for_batch
from .check import checked
from .drift import DriftRefused, DriftReport, drift_report
from .format import RESAVE, PolicyFile, relative, type_class
from .linkedset import SavedSet, SavedTable

if TYPE_CHECKING:
    from ..problem import Problem

PROBE = "deid_linked_batch_{}"


def saved_set(problem: Problem, folder: Path) -> SavedSet | None:
    """The set a policy file keeps for ``problem``'s spec (None without ``[[table]]``): every linked
    table opened and checked as ``materialize_set`` checks it (orphans refused per its rule), with
    its columns' type classes and where it was saved on (relative to the policy file's ``folder``)."""
    spec = problem.spec
    if not spec.tables:
        return None
    tables = []
    for s in linked_sources(problem):
        ref = s.table.source
        where = str(ref.table) if ref.format == "table" else relative(Path(str(ref.path)), folder)
        tables.append(SavedTable.of(s.table, [(n, type_class(t)) for n, t in s.columns.items()], where))
    assert spec.person is not None  # a spec with [[table]] declares [person]
    return SavedSet(spec.source_name, spec.person.shift_days, tuple(tables))


def linked_ref(value: str | Path | TableRef, engine_table: bool = False) -> TableRef:
    """A linked batch: a .csv or .parquet file (a .duckdb file holds several tables: export the
    table, or load it into the engine), or with ``engine_table`` a table of the spec's engine."""
    if isinstance(value, TableRef):
        return value
    if engine_table:
        return engine_ref(str(value))
    ref = batch_ref(value, None) if Path(value).suffix.lower() not in (".duckdb", ".db", ".ddb") else None
    if ref is None:
        raise DataError(f"linked batch {value} is a DuckDB file; a linked batch is a .csv or .parquet file (or, with "
                        f"--linked-table NAME=TABLE, a table of the spec's engine): export its table to Parquet")
    return ref


def linked_refs(policy: PolicyFile, given: Mapping[str, str | Path | TableRef]) -> dict[str, TableRef]:
    """The batch of every linked table of the saved set, by release name: one line when a name is
    not a linked table of the set, or a linked table has no batch."""
    assert policy.linked is not None
    names = policy.linked.names
    unknown = [n for n in given if n not in names]
    if unknown:
        raise DataError(f"--linked {unknown[0]}=…: {unknown[0]!r} is not a linked table of the set saved in "
                        f"{policy.describe()}; its linked tables are {', '.join(names)}")
    missing = [n for n in names if n not in given]
    if missing:
        raise DataError(f"no batch for the linked table(s) {', '.join(missing)} of the set saved in "
                        f"{policy.describe()}: a set is released whole; add "
                        + " ".join(f"--linked {n}=FILE" for n in missing))
    return {n: linked_ref(given[n]) for n in names}


@dataclass
class OpenSet:
    """A set's batches opened on one connection: the person batch, each linked batch counted, the
    persons the release keeps, and each linked table's release query."""

    batch: Batch
    linked: list[LinkedSource]
    queries: list[exp.Select]

    def to_dict(self) -> list[dict[str, Any]]:
        return [{"name": s.table.name, "batch": s.table.source.describe(), "rows": s.rows, "orphans": s.orphans,
                 "orphans_rule": s.table.orphans, "removed_with_suppressed_persons": s.removed,
                 "released": s.released} for s in self.linked]


@contextmanager
def open_set(policy: PolicyFile, source: TableRef, linked: Mapping[str, TableRef]) -> Iterator[OpenSet]:
    """Open the person batch ``source`` and every linked batch (``linked_refs``) of ``policy``'s set;
    raises one ``DeidError`` for the first bad input, before anything is written."""
    saved = policy.linked
    assert saved is not None
    spec, raw = spec_for_batch(policy.spec, source, linked)
    backend = connect(spec.backend.engine, **spec.backend.options())
    try:
        batch = Batch(policy, source, spec, raw, backend)  # the schema, the spec hash (the set's too), persons
        opened = []
        for i, t in enumerate(spec.tables):
            table = saved.table(t.name)
            assert table is not None  # the hash matched: the spec declares the saved tables
            _check_schema(batch, table, t.source, i, policy)
            opened.append(open_linked(backend, spec, t, i))
        assert spec.person is not None
        key_type = batch.columns.get(spec.person.column)
        kept = kept_keys(batch.release_query(roles=False), spec.person.column, policy.suppression is not None,
                         key_type)
        counted = count_linked(backend, spec, opened, batch.relation, key_type, kept)
        yield OpenSet(batch, counted, [linked_query(backend, spec, s, kept) for s in counted])
    finally:
        backend.close()


def _check_schema(batch: Batch, saved: SavedTable, ref: TableRef, index: int, policy: PolicyFile) -> None:
    """A linked batch must have the columns saved for its table (same names, same type classes),
    like the person batch: a new column was never reviewed, a missing one changes the release."""
    view = PROBE.format(index)
    try:
        batch.backend.create_temp_view(view, exp.select("*").from_(batch.backend.relation(ref, {saved.person: True})))
        now = {n: type_class(t) for n, t in batch.backend.columns(view).items()}
    except BackendError as e:
        raise DataError(read_problem(f"linked batch {saved.name!r}", ref.describe(), str(e))) from None
    shown = schema_differences(dict(saved.columns), now)
    if shown:
        raise DataError(f"linked batch {saved.name!r} ({ref.describe()}) does not have the columns the policy "
                        f"{policy.describe()} was saved for: {shown}; fix the batch, or {RESAVE} on a spec whose "
                        f"[[table]] {saved.name!r} has these columns")


@dataclass(frozen=True)
class SetCheck:
    """``check`` of a set's batches: the person batch's drift report and each linked batch's counts."""

    drift: DriftReport
    linked: list[dict[str, Any]]

    @property
    def drifted(self) -> bool:
        return self.drift.drifted

    @property
    def failed(self) -> bool:
        """``check``'s verdict on the set: drift, or an attribute criterion failed."""
        return self.drift.failed

    def to_dict(self) -> dict[str, Any]:
        return self.drift.to_dict() | {"linked": self.linked}


@dataclass(frozen=True)
class AppliedSet:
    """What ``apply_set`` wrote, with the drift report it passed (or that ``accepted_drift``
    overrode), the fallback count of the person batch and each linked batch's counts."""

    policy: PolicyFile
    batch: str
    records: int
    outside: Outside
    drift: DriftReport
    written: WrittenSet
    linked: list[dict[str, Any]]
    accepted_drift: str | None = None


def _refs(policy: str | Path | PolicyFile, source: str | Path | TableRef,
          linked: Mapping[str, str | Path | TableRef]) -> tuple[PolicyFile, TableRef, dict[str, TableRef]]:
    pf = policy if isinstance(policy, PolicyFile) else PolicyFile.read(policy)
    if pf.linked is None:
        raise DataError(f"policy file {pf.describe()} was saved for one table; --linked is for a policy saved on a "
                        f"spec with [[table]]: leave it out")
    ref = source if isinstance(source, TableRef) else batch_ref(source)
    return pf, ref, linked_refs(pf, linked)


def _inputs(pf: PolicyFile, refs: list[TableRef]) -> list[Path]:
    """The files a set's release folder must not hold: the policy file, its spec, the batches and
    the files the set was saved on."""
    saved = [] if pf.linked is None or pf.path is None else [
        pf.path.resolve().parent / t.source for t in pf.linked.tables if t.source.endswith((".csv", ".parquet"))]
    return [pf.spec, *([pf.path] if pf.path is not None else []), *saved,
            *[Path(r.path) for r in refs if r.path is not None]]


def check_set(policy: str | Path | PolicyFile, source: str | Path | TableRef,
              linked: Mapping[str, str | Path | TableRef]) -> SetCheck:
    """The person batch's drift check (``check_policy``), the attribute criteria judged on the set's
    release as ``apply_set``'s gate would (a linked table's sensitive column counted per person over
    the linked batches), and each linked batch's rows, orphans and rows of suppressed persons; a
    linked batch that ``apply_set`` would refuse is refused here."""
    pf, ref, refs = _refs(policy, source, linked)
    with open_set(pf, ref, refs) as opened:
        return SetCheck(checked(opened.batch, whole_set=True), opened.to_dict())


def apply_set(policy: str | Path | PolicyFile, source: str | Path | TableRef,
              linked: Mapping[str, str | Path | TableRef], out: str | Path, fmt: str | None = None,
              overwrite: bool = False, accept_drift: str | None = None,
              accept_risk: str | None = None) -> AppliedSet:
    """Release a set's batches under a saved policy into the folder ``out``: one file per table
    (named by its release name) and ``release.json``, all or nothing.  A drifted person batch is
    refused (``DriftRefused``, nothing written) unless ``accept_drift`` says why it may go; the
    gate judges the person batch's release in persons, before and after it is written."""
    reason = override_reason(accept_drift, "--accept-drift")
    pf, ref, refs = _refs(policy, source, linked)
    kind = fmt or "parquet"
    if kind not in FILE_FORMATS:
        raise OutputError(f"a release set is written as parquet or csv files, not {kind!r}; pass --format parquet")
    folder = Path(out)
    if folder.suffix.lower() in FORMATS:
        raise OutputError(f"--out {folder} names a file; the batches of a set are released together into a folder: "
                          f"--out FOLDER (one file per table and release.json)")
    if folder.exists() and not overwrite:
        raise OutputError(f"output {folder} already exists; pass --overwrite to replace it")
    # before a batch is read: the folder is replaced whole, so it must hold no input of the set
    check_set_folder(folder, _inputs(pf, [ref, *refs.values()]), overwrite)
    with open_set(pf, ref, refs) as opened:
        batch = opened.batch
        spec = batch.spec
        more = [batch.original, spec.population.path if spec.population is not None else None,
                *[q.hierarchy for q in spec.qis]]
        check_set_folder(folder, [Path(p) for p in more if p is not None], overwrite)
        drift = drift_report(batch)
        if drift.drifted and reason is None:
            raise DriftRefused(drift)
        call = (f"deid_sql.policyfile.apply_set({str(pf.path)!r}, {str(ref.path or ref.table)!r}, "
                f"{ {n: str(r.path or r.table) for n, r in refs.items()}!r}, {str(folder)!r})")
        gate = batch_gate(batch, drift, call, accept_risk, reason, whole_set=True)
        gate.precheck()
        backend = batch.backend
        person_query = batch.release_query()
        prejudge(backend, person_query, gate)  # a refused set never touches the disk
        with replacing_folder(folder, overwrite) as stage:
            written = write_tables(backend, spec, stage, folder, kind, [SetTable(
                spec.source_name, person_query, batch.records, list(gate.columns), batch.describe())])
            figures = measure_file(gate, stage / written[0][1].path.name, kind)
            verdict = gate.judge(figures)
            written += write_tables(backend, spec, stage, folder, kind, [
                SetTable(s.table.name, q, s.released, released_columns(s), s.table.source.describe(), s)
                for s, q in zip(opened.linked, opened.queries)])
            record = gate.record(figures, verdict, set_release(folder, kind, written))
            (stage / SIDECAR).write_text(to_json(record), encoding="utf-8")
        done = WrittenSet(folder, kind, tuple(w for _, w in written), figures, verdict, folder / SIDECAR)
        return AppliedSet(pf, batch.describe(), batch.records, batch.outside, drift, done, opened.to_dict(), reason)


__all__ = ["AppliedSet", "OpenSet", "SetCheck", "apply_set", "check_set", "linked_ref", "linked_refs", "open_set",
           "saved_set"]
