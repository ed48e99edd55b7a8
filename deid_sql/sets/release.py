"""One release of linked tables: the person source and every ``[[table]]``, judged once, written
together or not at all.

The gate judges the person source's release (its QIs are the release's QIs; a linked table
carries none) before anything is written, exactly as a single table's; a sensitive column of a
linked table with an attribute criterion is counted per person over the set's tables, once, by the
same gate (``release.attribute.LinkedValues``).  Then, in one staged
folder (``atomic.replacing_folder``): the person source's file, measured again as written and
judged; each linked table's file (``sets.rows``: the rows of the persons the person source
keeps, dates shifted by the same offsets, the key under the same pseudonym), its row count
checked; and one sidecar, ``release.json``, listing every table with its file, rows, hash,
columns, orphans and rows removed with suppressed persons.  The folder is renamed into place in
one step, so a reader — or a killed run — never leaves part of a set behind.  The same set can
be written as tables of an engine or a DuckDB file (``sets.tables``), from the same
``prepare_set``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from ..compiler.compile import from_relation
from ..errors import OutputError
from ..problem import Problem
from ..release.figures import ReleaseFigures
from ..release.gate import ReleaseGate, ReleaseSource, Verdict, build_gate
from ..release.output import check_not_input, measure_file, prejudge, write_file
from ..release.plan import ReleasePlan
from ..release.sidecar import FORMAT, file_sha256, to_json
from ..sqltext import col, person_key
from ..storage.atomic import replacing_folder
from .rows import KEY, LinkedSource, counted, kept_keys, linked_query, open_linked, released_columns

if TYPE_CHECKING:
    from ..backends.base import Backend
    from ..spec.file import Spec

SIDECAR = "release.json"
FILE_FORMATS = {"parquet": ".parquet", "csv": ".csv"}


@dataclass(frozen=True)
class WrittenTable:
    """One table of a written set."""

    name: str
    path: Path
    rows: int


@dataclass(frozen=True)
class WrittenSet:
    """What a set's write produced: the folder, its tables (the person source first), the gate's
    figures (in persons, on the person source as written) and verdict, and the sidecar."""

    folder: Path
    format: str
    tables: tuple[WrittenTable, ...]
    figures: ReleaseFigures
    verdict: Verdict
    sidecar: Path

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)


def set_inputs(problem: Problem) -> list[Path]:
    """Every input file of the set (the data, the spec, its hierarchies, every linked table)."""
    spec = problem.spec
    refs = [spec.source, spec.population, *[t.source for t in spec.tables]]
    files = [r.path for r in refs if r is not None] + [spec.path] + [q.hierarchy for q in spec.qis if q.hierarchy]
    return [Path(p).resolve() for p in files if p is not None]


def check_folder(problem: Problem, out: Path, overwrite: bool) -> None:
    """Refuse an output folder that holds an input or, to be replaced, is not a set's release."""
    check_set_folder(out, set_inputs(problem), overwrite)
    check_not_input(problem.spec, out)


def check_set_folder(out: Path, inputs: Sequence[Path], overwrite: bool) -> None:
    """Refuse an output folder that is or holds one of ``inputs`` (a set's folder is replaced as a
    whole) or, to be replaced, is not a set's release: shared by every path that writes a set."""
    folder = out.resolve()
    for path in inputs:
        path = path.resolve()
        if path == folder or folder in path.parents:
            raise OutputError(f"output folder {out} holds an input of the spec ({path}); write the release set "
                              f"to a new folder")
    if out.exists() and overwrite and out.is_dir():
        sidecar = out / SIDECAR
        try:
            ours = json.loads(sidecar.read_text(encoding="utf-8")).get("format") == FORMAT
        except (OSError, ValueError, AttributeError):
            ours = False
        if not ours:
            raise OutputError(f"output folder {out} exists and is not a release set of deid-sql (no {SIDECAR} in "
                              f"it); --overwrite replaces only an earlier set: remove the folder yourself, or name "
                              f"a new one")


def linked_sources(problem: Problem, kept: exp.Select | None = None) -> list[LinkedSource]:
    """Every linked table of ``problem``'s spec opened, checked and counted against the person
    source: its orphans, and the rows of persons not in ``kept`` (the persons a release keeps;
    everyone when None).  Raises one ``DataError`` for the first table with a problem."""
    assert problem.spec.person is not None
    return count_linked(problem.backend, problem.spec,
                        [open_linked(problem.backend, problem.spec, t, i) for i, t in enumerate(problem.spec.tables)],
                        problem.source, problem.columns.get(problem.spec.person.column), kept)


def count_linked(backend: Backend, spec: Spec, opened: Sequence[LinkedSource], person_source: exp.Expression,
                 key_type: str | None, kept: exp.Select | None = None) -> list[LinkedSource]:
    """The opened linked tables counted against ``person_source`` (the person source's relation, or
    a batch's; its key of SQL type ``key_type``): orphans, and rows of persons not in ``kept``
    (everyone when None); keys compared byte for byte (``sqltext.person_key``)."""
    assert spec.person is not None
    source = from_relation(person_source.copy())
    everyone = exp.select(exp.alias_(person_key(col(spec.person.column), key_type), KEY)).distinct().from_(source)
    return [counted(backend, s, everyone, kept if kept is not None else everyone) for s in opened]


@dataclass(frozen=True)
class SetTable:
    """One table for a set's staged folder: its release name, its release query and the rows it
    must write, its released columns, where it is read from, and a linked table's counts."""

    name: str
    query: exp.Select
    rows: int
    columns: list[tuple[str, str]]
    source: str
    linked: LinkedSource | None = None


def write_tables(backend: Backend, spec: Spec, stage: Path, folder: Path, kind: str,
                 tables: Sequence[SetTable]) -> list[tuple[dict[str, Any], WrittenTable]]:
    """Write each table into the staged folder ``stage`` (to land as ``folder``), its row count
    checked; returns each table's ``release.json`` entry with what was written.  Every path that
    writes a set of files (``materialize_set``, a policy file's batches) writes through here, so
    their folders and sidecars have one shape."""
    out = []
    for t in tables:
        path = stage / f"{t.name}{FILE_FORMATS[kind]}"
        n = write_file(backend, spec, t.query, path, kind, t.rows, path.name)
        out.append((entry(t.name, _file(path), n, t.columns, t.source, t.linked),
                    WrittenTable(t.name, folder / path.name, n)))
    return out


def set_release(folder: Path, kind: str, written: Sequence[tuple[dict[str, Any], WrittenTable]]) -> dict[str, Any]:
    """The ``release`` entry of a set's ``release.json``: the folder and every table's entry."""
    return {"kind": "set", "name": folder.name, "path": str(folder.resolve()), "format": kind,
            "rows": sum(w.rows for _, w in written), "tables": [e for e, _ in written]}


@dataclass(frozen=True)
class PreparedSet:
    """A set judged before anything is written: the person source's gate and release query, each
    linked table opened and counted, and its release query."""

    gate: ReleaseGate
    person: exp.Select
    linked: list[LinkedSource]
    queries: list[exp.Select]


def prepare_set(problem: Problem, plan: ReleasePlan, call: str, accept_risk: str | None) -> PreparedSet:
    """The gate of the whole set (the person source's release, judged where the data is: a refused
    set never touches the disk or the catalog), and every linked table's rows counted (orphans
    refused by their rule) and its release query: what both forms of a set write."""
    spec = problem.spec
    if spec.person is None or not spec.tables:
        raise OutputError(f"spec {spec.path} declares no [[table]]: release it as one file with "
                          f"--out FILE.parquet")
    gate = build_gate(ReleaseSource.from_problem(problem), plan, call, accept_risk, whole_set=True)
    gate.precheck()
    backend = problem.backend
    person_query = problem.query(plan)
    prejudge(backend, person_query, gate)
    kept = _kept(problem, plan)
    linked = linked_sources(problem, kept)
    return PreparedSet(gate, person_query, linked, [linked_query(backend, spec, s, kept) for s in linked])


def _kept(problem: Problem, plan: ReleasePlan) -> exp.Select:
    """The persons the person source's release keeps (``sets.rows.kept_keys``)."""
    assert problem.spec.person is not None
    column = problem.spec.person.column
    return kept_keys(problem.query(plan, roles=False), column, plan.suppression is not None,
                     problem.columns.get(column))


def preview(problem: Problem, plan: ReleasePlan) -> dict[str, Any]:
    """A set's tables as its release would write them, for the report of a policy not yet released
    (or of dbt models not yet run): each table's rows counted where the data is (orphans by their
    rule, the rows of persons the suppression removes), nothing written.  Shaped as a set's record
    (``entry``), with no file or table named."""
    spec = problem.spec
    rows = problem.source_rows
    tables = [entry(spec.source_name, {}, rows, problem.released_columns, spec.source.describe())]
    tables += [entry(s.table.name, {}, s.released, released_columns(s), s.table.source.describe(), s)
               for s in linked_sources(problem, _kept(problem, plan))]
    return {"release": {"rows": sum(t["rows"] for t in tables), "tables": tables}, "source": {"rows": rows}}


def materialize_set(problem: Problem, plan: ReleasePlan, out: str | Path, fmt: str | None = None,
                    overwrite: bool = False, accept_risk: str | None = None) -> WrittenSet:
    """Write the person source and every linked table of ``problem``'s spec to the folder ``out``
    (one file per table, named by its release name, and ``release.json``), judged once."""
    spec = problem.spec
    kind = fmt or "parquet"
    if kind not in FILE_FORMATS:
        raise OutputError(f"a release set is written as parquet or csv files, not {kind!r}; pass --format parquet")
    folder = Path(out)
    check_folder(problem, folder, overwrite)
    call = f"deid_sql.sets.release.materialize_set(problem, {plan.repr_call()}, {str(folder)!r})"
    prepared = prepare_set(problem, plan, call, accept_risk)
    gate, backend = prepared.gate, problem.backend
    with replacing_folder(folder, overwrite) as stage:
        written = write_tables(backend, spec, stage, folder, kind, [SetTable(
            spec.source_name, prepared.person, problem.source_rows, list(gate.columns), spec.source.describe())])
        figures = measure_file(gate, stage / written[0][1].path.name, kind)
        verdict = gate.judge(figures)
        written += write_tables(backend, spec, stage, folder, kind, [
            SetTable(s.table.name, q, s.released, released_columns(s), s.table.source.describe(), s)
            for s, q in zip(prepared.linked, prepared.queries)])
        release = set_release(folder, kind, written)
        (stage / SIDECAR).write_text(to_json(gate.record(figures, verdict, release)), encoding="utf-8")
    return WrittenSet(folder, kind, tuple(w for _, w in written), figures, verdict, folder / SIDECAR)


def _file(path: Path) -> dict[str, Any]:
    return {"file": path.name, "sha256": file_sha256(path)}


def entry(name: str, where: dict[str, Any], rows: int, columns: list[tuple[str, str]], source: str,
          linked: LinkedSource | None = None) -> dict[str, Any]:
    """One table of a set's record: its name and role, where it was written (``where``: its file and
    hash, or its table and row hash), rows, source, columns with their roles, and for a linked table
    its person key, source rows, orphans (and their rule) and rows removed with suppressed persons."""
    out: dict[str, Any] = {"name": name, "role": "linked" if linked is not None else "person source", **where,
                           "rows": rows, "source": source, "columns": [{"name": n, "role": r} for n, r in columns]}
    if linked is not None:
        out |= {"person": linked.table.person, "source_rows": linked.rows, "orphans": linked.orphans,
                "orphans_rule": linked.table.orphans, "removed_with_suppressed_persons": linked.removed}
    return out


__all__ = ["FILE_FORMATS", "SIDECAR", "PreparedSet", "SetTable", "WrittenSet", "WrittenTable", "check_folder",
           "check_set_folder", "count_linked", "entry", "linked_sources", "materialize_set", "prepare_set", "preview",
           "set_release", "write_tables"]
