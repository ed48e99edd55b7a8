"""Writing de-identified data: materialized files and tables, and views.

Every write is atomic — a temporary file renamed into place, or one database
transaction — and checked: the output has exactly as many rows as the source,
or nothing is written.  Outputs never replace the source or population files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from sqlglot import exp

from .atomic import replacing
from .backends.base import Backend
from .errors import BackendError, DeidError, OutputError
from .loading import read_problem
from .policy import Policy
from .problem import Problem
from .recoding import Recoding
from .spec import Spec

FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".duckdb": "duckdb", ".db": "duckdb",
           ".ddb": "duckdb"}


@dataclass(frozen=True)
class Written:
    """What a write produced."""

    path: Path | None  # None: a table inside the engine
    format: str
    rows: int
    table: str | None = None


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
    refs = [spec.source] + ([spec.population] if spec.population else [])
    files = [r.path for r in refs] + [spec.path] + [q.hierarchy for q in spec.qis if q.hierarchy]
    return [p.resolve() for p in files if p is not None]


def check_not_input(spec: Spec, out: Path) -> None:
    """Refuse to write over the source, the population, the spec or a hierarchy file."""
    if out.resolve() in _protected(spec):
        raise OutputError(f"output {out} is an input of the spec; write the de-identified data elsewhere")


def materialize(problem: Problem, item: Policy | Recoding | str, out: str | Path | None,
                fmt: str | None = None, table: str | None = None, overwrite: bool = False,
                suppress_below: int | None = None) -> Written:
    """Write the generalized source to Parquet, CSV or a DuckDB table, atomically; with ``out``
    None, as table ``table`` inside the engine (PostgreSQL, Spark), where the data is."""
    return materialize_query(problem, problem.query(item, suppress_below), out, fmt, table, overwrite)


def materialize_query(problem: Problem, query: exp.Select, out: str | Path | None, fmt: str | None = None,
                      table: str | None = None, overwrite: bool = False) -> Written:
    """Write any row-preserving query over the source (one output row per source row)."""
    return write_query(problem.backend, problem.spec, query, out, problem.sample.total, fmt, table, overwrite)


def write_query(backend: Backend, spec: Spec, query: exp.Select, out: str | Path | None, expected: int,
                fmt: str | None = None, table: str | None = None, overwrite: bool = False) -> Written:
    """Write ``query`` (``expected`` rows, or nothing) to Parquet, CSV or a DuckDB table, atomically,
    or (``out`` None) to table ``table`` of the engine itself."""
    if out is None:
        if spec.backend.engine == "duckdb":
            raise OutputError("name the output file with --out (.parquet, .csv or .duckdb)")
        if not table:
            raise OutputError(f"name the table to create in the {spec.backend.engine} engine with --table, "
                              f"or a file with --out")
        rows = backend.create_table(None, table, query, expected, overwrite)
        return Written(None, spec.backend.engine, rows, table)
    path = Path(out)
    kind = output_format(path, fmt)
    check_not_input(spec, path)
    if kind == "duckdb":
        name = table or "deidentified"
        try:
            rows = backend.create_table(path, name, query, expected, overwrite)
        except BackendError as e:
            raise _unreadable(spec, e) from None
        return Written(path, kind, rows, name)
    with replacing(path, overwrite) as tmp:
        rows = write_file(backend, spec, query, tmp, kind, expected)
    return Written(path, kind, rows)


def write_file(backend: Backend, spec: Spec, query: exp.Select, tmp: Path, kind: str, expected: int) -> int:
    """Stream ``query`` into ``tmp`` (Parquet or CSV); the row count must be ``expected``.
    The caller owns ``tmp`` (see ``atomic.replacing``), so several files can land together."""
    try:
        rows = _write_batches(backend, query, tmp, kind)
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


def _write_batches(backend: Backend, query: exp.Select, tmp: Path, kind: str) -> int:
    rows = 0
    writer: pq.ParquetWriter | pacsv.CSVWriter | None = None
    try:
        for batch in backend.stream(query):
            if writer is None:
                writer = (pq.ParquetWriter(tmp, batch.schema) if kind == "parquet"
                          else pacsv.CSVWriter(tmp, batch.schema))
            writer.write_batch(batch)
            rows += batch.num_rows
        if writer is None:  # empty result still gets a valid file with the schema
            empty = backend.execute(query.limit(0))
            (pq.write_table if kind == "parquet" else pacsv.write_csv)(empty, tmp)  # type: ignore[operator]
    finally:
        if writer is not None:
            writer.close()
    return rows


def create_view(problem: Problem, item: Policy | Recoding | str, database: str | Path | None, name: str,
                replace: bool = False, suppress_below: int | None = None) -> Path | None:
    """``CREATE VIEW name`` in a DuckDB file over the source read in place, or (``database``
    None) in the engine's own catalog."""
    db = Path(database) if database is not None else None
    source = view_source(problem.spec, problem.source, db)
    problem.backend.create_view(db, name, problem.query(item, suppress_below, source), replace)
    return db


def view_source(spec: Spec, relation: exp.Expression, database: Path | None) -> exp.Expression:
    """What a persistent view reads: with ``database`` None the view lives in the engine's own
    catalog and reads the source where it is; in a DuckDB file it reads the file in place, or the
    source table when the source is a table in that same file (a view cannot reach another file)."""
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
    return exp.Table(this=exp.to_identifier(str(ref.table), quoted=True))


def preview(database: str | Path, name: str, rows: int = 5) -> list[tuple[object, ...]]:
    """The first rows of a view or table in a DuckDB file, as an analyst would see them."""
    import duckdb

    con = duckdb.connect(str(database), read_only=True)
    try:
        query = exp.select("*").from_(exp.Table(this=exp.to_identifier(name, quoted=True))).limit(rows)
        return con.execute(query.sql(dialect="duckdb")).fetchall()
    finally:
        con.close()
