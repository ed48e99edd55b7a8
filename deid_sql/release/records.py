"""Records of what leaves: compiled SQL kept with its sidecar, and a release checked against its record.

Compiled SQL releases data wherever it runs, so when it is kept in a file (``compile --out
FILE.sql``) it gets the record every other release gets, ``FILE.sql.release.json``, written
through the same gate and landing with the SQL (both files or neither).

A sidecar is only worth signing if the release still is what it records: ``verify_release``
recomputes a file release's SHA-256, or a table release's row count and row hash
(``backends.base.fingerprint``, ``Backend.checksum``'s), and refuses a release
that changed since it was written.  A set's folder is signed as a whole, so it must hold exactly
what its record lists: every listed file by its hash, and nothing else — a raw ``patients.parquet``
copied in, a hidden file or a folder would leave with a signature that never covered it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
from sqlglot import exp

from ..backends import local
from ..backends.base import Backend, fingerprint
from ..errors import OutputError
from ..problem import Problem
from ..storage.atomic import replacing_together
from ..storage.tableref import TableRef
from .output import Written, check_not_input, judged_sql
from .plan import ReleasePlan
from .sidecar import file_sha256, sidecar_path, to_json

#: what ``compile`` to stdout says on stderr: no record is kept of SQL that was only printed
NO_RECORD = ("no record written: compile to a file with --out FILE.sql to keep FILE.sql.release.json beside it")


class ReleaseMismatch(OutputError):
    """A release no longer matches its record (the file or table was changed after it was released)."""


def write_compiled(problem: Problem, plan: ReleasePlan, out: Path, dialect: str = "duckdb",
                   table: str | None = None, overwrite: bool = False,
                   accept_risk: str | None = None) -> tuple[str, Written]:
    """Compile ``plan`` for ``dialect``, judge the rows it gives on the spec's source, and write
    ``out`` (the SQL) with ``out.release.json`` (its record), together: the SQL is a release like a
    file of rows, so it is only kept with the record a reviewer signs.  Refused (nothing written)
    when the gate fails without ``accept_risk``."""
    out = Path(out)
    side = sidecar_path(out)
    for path in (out, side):
        check_not_input(problem.spec, path)
    call = (f"deid_sql.release.records.write_compiled(problem, {plan.repr_call()}, {str(out)!r}, {dialect!r}"
            + (f", table={table!r}" if table else "") + (", accept_risk=..." if accept_risk else "") + ")")
    sql, gate, figures, verdict = judged_sql(problem, plan, dialect, table, call, accept_risk)
    with replacing_together([out, side], overwrite) as (tmp, tmp_side):
        tmp.write_text(sql + ";\n", encoding="utf-8")
        record = gate.record(figures, verdict, {
            "kind": "sql", "name": out.name, "path": str(out.resolve()), "format": "sql", "dialect": dialect,
            "table": table, "rows": figures.records, "sha256": file_sha256(tmp),
            "note": "figures of the compiled query on the spec's source, measured when it was compiled"})
        tmp_side.write_text(to_json(record), encoding="utf-8")
    return sql, Written(out, "sql", figures.records, figures=figures, verdict=verdict, sidecar=str(side))


# -- a release checked against its record ------------------------------------------------------

def verify_release(sidecar: dict[str, Any], where: Path, backend: Backend | None = None) -> None:
    """Refuse (``ReleaseMismatch``, one line) a release that differs from what ``sidecar`` records:
    a file's (or compiled SQL's) SHA-256, or a table's row count and row hash.  ``where`` is the
    sidecar file; ``backend`` reads a table inside the engine.  A table sidecar written before row
    hashes were recorded is checked by its row count only."""
    release = sidecar.get("release") if isinstance(sidecar.get("release"), dict) else {}
    kind = release.get("kind")
    name = str(release.get("name") or "")
    if kind in ("file", "sql"):
        path = _release_file(release, where)
        if not path.is_file():
            raise ReleaseMismatch(f"release {path} does not match its record {where}: the file is gone; report "
                                  f"a release that is still there")
        recorded, now = release.get("sha256"), file_sha256(path)
        if recorded != now:
            raise ReleaseMismatch(f"release {path} does not match its record: sha256 {str(recorded)[:16]}… "
                                  f"recorded, {now[:16]}… now; the file was changed after it was released")
        return
    if kind == "table":
        _verify_table(release, name, where, backend)
    if kind == "set":
        _verify_set(release, where)


def _verify_set(release: dict[str, Any], where: Path) -> None:
    """Every file of a set's folder as its record (``release.json``, in that folder) lists it, by
    its SHA-256, and no other entry in the folder: the record and the files it lists are the set,
    anything else (a file, hidden or not, a folder, a link) is refused by name.  deid-sql writes
    nothing else there (a set's report goes beside its folder).  (A set written as engine tables
    keeps its record in a table, not a file.)"""
    listed = {where.name} | {str(t["file"]) for t in release.get("tables") or []
                             if isinstance(t, dict) and "file" in t}
    extra = sorted(entry.name for entry in where.parent.iterdir() if entry.name not in listed)
    if extra:
        more = f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""
        raise ReleaseMismatch(f"set {where.parent} does not match its record {where}: it holds {extra[0]!r}{more}, "
                              f"which the record does not list; a set's folder holds exactly the files its record "
                              f"lists: move {'them' if more else 'it'} out of the folder, or release the set again")
    for table in release.get("tables") or []:
        if not isinstance(table, dict):
            continue
        if "file" in table:
            path = where.parent / str(table["file"])
            if not path.is_file():
                raise ReleaseMismatch(f"set {where.parent} does not match its record {where}: {path.name} is gone; "
                                      f"report a release that is still there")
            now = file_sha256(path)
            if table.get("sha256") != now:
                raise ReleaseMismatch(f"set {where.parent} does not match its record: {path.name} has sha256 "
                                      f"{now[:16]}…, {str(table.get('sha256'))[:16]}… recorded; the file was "
                                      f"changed after it was released")


def _release_file(release: dict[str, Any], where: Path) -> Path:
    """The release file a sidecar describes: the file beside the sidecar (a folder may have been
    moved as a whole), else the recorded path."""
    beside = where.with_name(where.name.removesuffix(".release.json"))
    if beside.name == str(release.get("name")) and beside.exists():
        return beside
    return Path(str(release.get("path") or beside))


def _verify_table(release: dict[str, Any], name: str, where: Path, backend: Backend | None) -> None:
    database = Path(str(release.get("database") or ""))
    columns = release.get("columns")
    if database.suffix.lower() in (".duckdb", ".db", ".ddb") or database.is_file():
        if not database.is_file():
            raise ReleaseMismatch(f"release {name} does not match its record {where}: its database {database} is "
                                  f"gone; report a release that is still there")
        reader = local()
        try:
            relation = reader.relation(TableRef(database, "duckdb", table=name), {})
            now = _fingerprint(reader.execute, reader, relation, columns)
        finally:
            reader.close()
    elif backend is not None:
        now = _fingerprint(backend.execute, backend, exp.to_table(name), columns)
        if backend.typed_row_hash and release.get("row_hash") not in (None, now):
            # a record written before the engine's typed row hash holds the hash of the rows' text
            legacy = _fingerprint(backend.execute, backend, exp.to_table(name), columns, legacy=True)
            now = legacy if legacy == release.get("row_hash") else now
    else:
        return
    recorded_rows, recorded = release.get("rows"), release.get("row_hash")
    rows_now = int(now.split(":", 1)[0])
    if recorded is not None and recorded != now:
        raise ReleaseMismatch(f"release {name} does not match its record {where}: {recorded_rows} rows with row hash "
                              f"{recorded} recorded, {rows_now} rows with {now} now; the table was changed after "
                              f"it was released")
    if recorded is None and recorded_rows is not None and int(recorded_rows) != rows_now:
        raise ReleaseMismatch(f"release {name} does not match its record {where}: {recorded_rows} rows recorded, "
                              f"{rows_now} now; the table was changed after it was released")


def _fingerprint(run: Callable[[exp.Expression], pa.Table], backend: Backend, relation: exp.Expression,
                 columns: Any, legacy: bool = False) -> str:
    """The fingerprint of the recorded columns (every column when the record names none)."""
    if not isinstance(columns, list) or not columns:
        columns = list(run(exp.select("*").from_(relation.copy()).limit(0)).column_names)
    return fingerprint(run, backend, relation, [str(c) for c in columns], legacy)
