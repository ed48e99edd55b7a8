"""Writing de-identified data: materialized files and tables, and views.

Every write is atomic — a temporary file renamed into place, or one database
transaction — and checked: the output has exactly as many rows as the source,
or nothing is written.  Outputs never replace the source or population files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from sqlglot import exp

from .. import progress
from ..backends import local
from ..backends.base import Backend
from ..errors import BackendError, DeidError, OutputError
from ..loading.load import read_problem
from ..loading.transform import transform_source
from ..problem import Problem
from ..spec.file import Spec, TableRef
from ..storage.atomic import replacing, replacing_together
from ..storage.names import check_name, check_output_name
from ..storage.tableref import engine_inputs
from .cell_figures import prejudged
from .figures import ReleaseFigures
from .gate import ReleaseGate, ReleaseSource, Verdict, build_gate
from .plan import ReleasePlan
from .sidecar import file_sha256, sidecar_path, sidecar_table, to_json
from .written import measure_written

FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".duckdb": "duckdb", ".db": "duckdb",
           ".ddb": "duckdb"}


@dataclass(frozen=True)
class Written:
    """What a write produced."""

    path: Path | None  # None: a table inside the engine
    format: str
    rows: int
    table: str | None = None
    figures: ReleaseFigures | None = None  # measured on what was written (gated releases)
    verdict: Verdict | None = None
    sidecar: str | None = None  # the sidecar file, or table inside the database


def output_format(out: Path, fmt: str | None) -> str:
    if fmt:
        if fmt not in ("parquet", "csv", "duckdb"):
            raise OutputError(f"output format {fmt!r} is not one of parquet, csv, duckdb")
        return fmt
    found = FORMATS.get(out.suffix.lower())
    if found is None:
        raise OutputError(
            f"cannot tell the output format of {out}; use .parquet, .csv or .duckdb, or pass --format"
        )
    return found


def _protected(spec: Spec) -> list[Path]:
    """Files an output must never replace: the data, the spec itself and its hierarchy files."""
    refs = [spec.source] + ([spec.population] if spec.population else []) + [t.source for t in spec.tables]
    files = [r.path for r in refs] + [spec.path] + [q.hierarchy for q in spec.qis if q.hierarchy]
    return [p.resolve() for p in files if p is not None]


def check_not_input(spec: Spec, out: Path) -> None:
    """Refuse to write over the source, the population, the spec or a hierarchy file."""
    if out.resolve() in _protected(spec):
        raise OutputError(f"output {out} is an input of the spec; write the de-identified data elsewhere")


def materialize(problem: Problem, plan: ReleasePlan, out: str | Path | None, fmt: str | None = None,
                table: str | None = None, overwrite: bool = False, accept_risk: str | None = None) -> Written:
    """Write the release ``plan`` (``release.plan.plan_of``) of the source to Parquet, CSV or a
    DuckDB table, atomically; with ``out`` None, as table ``table`` inside the engine (PostgreSQL,
    Spark), where the data is.

    The release gate runs on what is written (``deid_sql.release.gate``): a failed gate writes
    nothing unless ``accept_risk`` gives the reason; the sidecar is written with the release."""
    call = (f"deid_sql.release.output.materialize(problem, {plan.repr_call()}, {str(out)!r}"
            + (f", table={table!r}" if table else "") + (", accept_risk=..." if accept_risk else "") + ")")
    gate = build_gate(ReleaseSource.from_problem(problem), plan, call, accept_risk)
    gate.precheck()
    first = prejudged(problem, gate)  # from the cells: no pass over the source before the write
    if first is not None:
        gate.judge(first)
    return materialize_query(problem, problem.query(plan), out, fmt, table, overwrite, gate,
                             judged=first is not None)


def materialize_query(problem: Problem, query: exp.Select, out: str | Path | None, fmt: str | None = None,
                      table: str | None = None, overwrite: bool = False, gate: ReleaseGate | None = None,
                      judged: bool = False) -> Written:
    """Write any row-preserving query over the source (one output row per source row)."""
    return write_query(problem.backend, problem.spec, query, out, problem.source_rows, fmt, table, overwrite, gate,
                       judged)


def write_query(backend: Backend, spec: Spec, query: exp.Select, out: str | Path | None, expected: int,
                fmt: str | None = None, table: str | None = None, overwrite: bool = False,
                gate: ReleaseGate | None = None, judged: bool = False) -> Written:
    """Write ``query`` (``expected`` rows, or nothing) to Parquet, CSV or a DuckDB table, atomically,
    or (``out`` None) to table ``table`` of the engine itself.

    With ``gate``, the release is judged twice: first before anything is created (a refused release
    never touches the disk, not even as a temporary file) — on the source's cells when the caller did
    (``judged``: ``release.cell_figures``), else the query itself where the data is (``prejudge``) —
    then the written rows before they become visible (a source changed in between is caught there),
    and the sidecar lands with them."""
    if table is not None and out is None and backend.catalog:
        check_output_name(backend.dialect, table, "--table", inputs=engine_inputs(spec.source, spec.population),
                          sidecar=gate is not None)
    elif table is not None:
        check_name(table, "--table")
    if out is None:
        if not backend.catalog:
            raise OutputError("name the output file with --out (.parquet, .csv or .duckdb)")
        if not table:
            raise OutputError(f"name the table to create in the {spec.backend.engine} engine with --table, "
                              f"or a file with --out")
        if not judged:
            prejudge(backend, query, gate)
        return _write_table(backend, None, table, query, expected, overwrite, gate, spec.backend.engine)
    path = Path(out)
    kind = output_format(path, fmt)
    check_not_input(spec, path)
    if not judged:
        prejudge(backend, query, gate)
    if kind == "duckdb":
        name = table or "deidentified"
        try:
            return _write_table(backend, path, name, query, expected, overwrite, gate, kind)
        except BackendError as e:
            raise _unreadable(spec, e) from None
    if gate is None:
        with replacing(path, overwrite) as tmp:
            rows = write_file(backend, spec, query, tmp, kind, expected, path.name)
        return Written(path, kind, rows)
    side = sidecar_path(path)
    check_not_input(spec, side)
    with replacing_together([path, side], overwrite) as (tmp, tmp_side):
        rows = write_file(backend, spec, query, tmp, kind, expected, path.name)
        figures = measure_file(gate, tmp, kind)
        verdict = gate.judge(figures)
        record = gate.record(figures, verdict, {"kind": "file", "name": path.name, "path": str(path.resolve()),
                                                "format": kind, "rows": rows, "sha256": file_sha256(tmp)})
        tmp_side.write_text(to_json(record), encoding="utf-8")
    return Written(path, kind, rows, figures=figures, verdict=verdict, sidecar=str(side))


def prejudge(backend: Backend, query: exp.Select, gate: ReleaseGate | None) -> Verdict | None:
    """Judge the release query where the data is (one ``GROUP BY``), before any file or table is
    created: ``ReleaseRefused`` leaves the disk untouched.  The written rows are judged again, and only
    they with the recipient's earlier releases (``ReleaseGate.measure``'s ``union``): the union reads
    every released person's pseudonym, which the query would compute once more than the write does;
    a union that fails removes the written rows before they are visible."""
    if gate is None:
        return None
    with progress.watching("judging the release", backend.progress):
        return gate.judge(gate.measure(backend.execute, query, union=False))


def _write_table(backend: Backend, database: Path | None, name: str, query: exp.Select, expected: int,
                 overwrite: bool, gate: ReleaseGate | None, kind: str) -> Written:
    with progress.watching(f"writing table {name}", backend.progress):
        return _write_table_now(backend, database, name, query, expected, overwrite, gate, kind)


def _write_table_now(backend: Backend, database: Path | None, name: str, query: exp.Select, expected: int,
                     overwrite: bool, gate: ReleaseGate | None, kind: str) -> Written:
    if gate is None:
        rows = backend.create_table(database, name, query, expected, overwrite)
        return Written(database, kind, rows, name)
    done: dict[str, object] = {}

    def finish(run, target: exp.Expression) -> dict[str, object]:  # inside the writing transaction
        columns = [n for n, _ in gate.columns]  # the row hash a report checks the table against later
        figures, row_hash = measure_written(gate, run, backend, target, columns)
        verdict = gate.judge(figures)
        where = {"kind": "table", "name": name, "database": str(database.resolve()) if database else kind,
                 "rows": expected}  # checked before this runs; not figures.records, which may count persons
        where |= {"columns": columns, "row_hash": row_hash}
        done.update(figures=figures, verdict=verdict)
        return gate.record_table(name, figures, verdict, where)

    rows = backend.create_table(database, name, query, expected, overwrite, finish=finish)
    return Written(database, kind, rows, name, figures=done["figures"], verdict=done["verdict"],  # type: ignore[arg-type]
                   sidecar=sidecar_table(name))


def measure_file(gate: ReleaseGate, path: Path, kind: str) -> ReleaseFigures:
    """Read the written file back (an in-process backend) and measure its released groups."""
    reader = local()
    try:
        relation = reader.relation(TableRef(path, kind), {c: True for c in gate.qi_columns})
        return gate.measure(reader.execute, relation)
    finally:
        reader.close()


def write_file(backend: Backend, spec: Spec, query: exp.Select, tmp: Path, kind: str, expected: int,
               name: str | None = None) -> int:
    """Stream ``query`` into ``tmp`` (Parquet or CSV); the row count must be ``expected``.
    The caller owns ``tmp`` (see ``atomic.replacing``), so several files can land together;
    ``name`` is the file the user will see, for the progress line."""
    try:
        rows = _write_batches(backend, query, tmp, kind, expected, name or tmp.name)
    except BackendError as e:
        raise _unreadable(spec, e) from None
    if rows != expected:
        raise OutputError(f"the query produced {rows} rows but the source has {expected}; nothing was written")
    return rows


def _unreadable(spec: Spec, e: BackendError) -> DeidError:
    """Columns outside the QIs are first read in full here (a CSV past the rows DuckDB
    sniffed): say which file is not UTF-8 rather than echo the engine's paragraph."""
    lowered = str(e).lower()
    if "unicode" in lowered or "utf-8" in lowered or "utf8" in lowered:
        return OutputError(read_problem("source", spec.source.describe(), str(e)) + "; nothing was written")
    return e


def _write_batches(backend: Backend, query: exp.Select, tmp: Path, kind: str, expected: int, name: str) -> int:
    rows = 0
    writer: pq.ParquetWriter | pacsv.CSVWriter | None = None
    try:
        with progress.counting(f"writing {name}", expected) as written:
            for batch in backend.stream(query):
                if writer is None:
                    writer = (pq.ParquetWriter(tmp, batch.schema) if kind == "parquet"
                              else pacsv.CSVWriter(tmp, batch.schema))
                writer.write_batch(batch)
                rows += batch.num_rows
                written.advance(batch.num_rows)
        if writer is None:  # empty result still gets a valid file with the schema
            empty = backend.execute(query.limit(0))
            (pq.write_table if kind == "parquet" else pacsv.write_csv)(empty, tmp)  # type: ignore[operator]
    finally:
        if writer is not None:
            writer.close()
    return rows


def compile_release(problem: Problem, plan: ReleasePlan, dialect: str = "duckdb", table: str | None = None,
                    accept_risk: str | None = None) -> tuple[str, Written]:
    """The release as SQL text for ``dialect``, judged like any release: compiled SQL leaves the
    system too (it runs elsewhere), so its rows are measured on the spec's data now and the text is
    only given when the gate passes (or ``accept_risk`` says why).  It holds no raw value outside
    the domain (the guards) and only declared columns; a pseudonymizing spec is refused (the text
    would hold the key)."""
    call = (f"deid_sql.release.output.compile_release(problem, {plan.repr_call()}, {dialect!r}"
            + (f", table={table!r}" if table else "") + ")")
    sql, _, figures, verdict = judged_sql(problem, plan, dialect, table, call, accept_risk)
    return sql, Written(None, "sql", figures.records, None, figures=figures, verdict=verdict)


def judged_sql(problem: Problem, plan: ReleasePlan, dialect: str, table: str | None, call: str,
               accept_risk: str | None) -> tuple[str, ReleaseGate, ReleaseFigures, Verdict]:
    """The SQL of ``plan`` for ``dialect`` and the gate's verdict on the rows it gives on the spec's
    data (``ReleaseRefused`` when it fails unaccepted): printed SQL and SQL kept in a file alike."""
    gate = build_gate(ReleaseSource.from_problem(problem), plan, call, accept_risk)
    gate.precheck()
    sql = problem.compile(plan, dialect=dialect, table=table)
    figures = gate.measure(problem.backend.execute, problem.query(plan, persistent=True, measuring=True))
    return sql, gate, figures, gate.judge(figures)


def create_view(problem: Problem, plan: ReleasePlan, database: str | Path | None, name: str, replace: bool = False,
                accept_risk: str | None = None) -> Written:
    """``CREATE VIEW name`` in a DuckDB file over the source read in place, or (``database``
    None) in the engine's own catalog.  The gate judges the rows the view shows now; values
    that later fall outside the domain show as the outside label.  The sidecar is the table
    ``<name>__release`` beside the view, created with it."""
    db = Path(database) if database is not None else None
    if db is None and problem.backend.catalog:
        check_output_name(problem.backend.dialect, name, "--view",
                          inputs=engine_inputs(problem.spec.source, problem.spec.population))
    else:
        check_name(name, "--view")
    call = (f"deid_sql.release.output.create_view(problem, {plan.repr_call()}, "
            f"{str(db) if db else None!r}, {name!r})")
    gate = build_gate(ReleaseSource.from_problem(problem), plan, call, accept_risk)
    gate.precheck()
    source = view_source(problem.spec, problem.source, db, problem.columns)
    figures = gate.measure(problem.backend.execute, problem.query(plan, persistent=True, measuring=True))
    verdict = gate.judge(figures)
    rows = figures.records if problem.spec.person is None else problem.source_rows  # figures count persons
    where = {"kind": "view", "name": name, "database": str(db.resolve()) if db else problem.spec.backend.engine,
             "rows": rows}
    problem.backend.create_view(db, name, problem.query(plan, source, persistent=True), replace,
                                companions=gate.record_table(name, figures, verdict, where))
    return Written(db, "view", rows, name, figures=figures, verdict=verdict, sidecar=sidecar_table(name))


def view_source(spec: Spec, relation: exp.Expression, database: Path | None,
                columns: Mapping[str, object]) -> exp.Expression:
    """What a persistent view reads: with ``database`` None the view lives in the engine's own
    catalog and reads the source where it is (``relation``, as every path reads it); in a DuckDB file
    it reads the file in place, or the source table when the source is a table in that same file (a
    view cannot reach another file), its ``columns`` read as ``relation`` reads them (QIs transformed)."""
    ref = spec.source
    if database is None:
        return relation.copy()
    if ref.format == "table":
        raise OutputError(f"the source is {ref.describe()} in the {spec.backend.engine} engine; create the view "
                          f"there (leave out --db)")
    if ref.format != "duckdb":
        check_not_input(spec, database)
        return relation.copy()
    assert ref.path is not None
    if database.resolve() != ref.path.resolve():
        raise OutputError(
            f"the source is a table in {ref.path}; create the view in that file (--db {ref.path}) "
            f"so it can read the table"
        )
    return transform_source(spec, exp.Table(this=exp.to_identifier(str(ref.table), quoted=True)), columns)


def preview(database: str | Path, name: str, rows: int = 5) -> list[tuple[object, ...]]:
    """The first rows of a view or table in a DuckDB file, as an analyst would see them (a reader
    of its own: the file opened read-only, nothing of the session that wrote it)."""
    check_name(name, "--view")
    reader = local()
    try:
        return reader.head(Path(database), name, rows)
    finally:
        reader.close()
