"""Output targets, checked before any data is read.

Loading a problem reads the data (seconds on DuckDB, a minute on Spark); a command whose
output already exists, or whose folder is missing, must say so before that, not after.  A
command lists what it will write as ``Target``\\ s and ``check_targets`` refuses the first
that cannot be written, with the same words the write itself would use.  The writes keep their
own checks (another run may create the target in between): this one is only earlier.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..backends.base import Backend
from ..errors import OutputError
from ..spec.file import Spec
from ..storage.names import check_name, check_output_name
from ..storage.tableref import TableRef, engine_inputs
from .sidecar import sidecar_path, sidecar_table


@dataclass(frozen=True)
class Target:
    """One thing a command writes: a file (``path``), or a table or view ``name`` in a DuckDB
    file (``path``) or in the engine's own catalog (``path`` None).  ``replace``: the command was
    told to replace it.  ``sidecar``: the release record written beside it is a target too."""

    kind: str  # "file", "folder" (a release set), "table" or "view"
    path: Path | None = None
    name: str | None = None
    replace: bool = False
    sidecar: bool = False
    flag: str = "--overwrite"
    what: str | None = None  # the option that named it, for messages (default "table name"/"view name")

    def names(self) -> list[str]:
        """The table or view names this target creates: its own, and its sidecar table's."""
        if self.name is None:
            return []
        return [self.name, *([sidecar_table(self.name)] if self.sidecar else [])]


def file(path: Path | None, replace: bool, sidecar: bool = False, flag: str = "--overwrite") -> list[Target]:
    """A file target (none when ``path`` is None)."""
    return [] if path is None else [Target("file", Path(path), None, replace, sidecar, flag)]


def folder(path: Path | None, replace: bool, flag: str = "--overwrite") -> list[Target]:
    """A folder target: a release set's files and sidecar (none when ``path`` is None)."""
    return [] if path is None else [Target("folder", Path(path), None, replace, False, flag)]


def table_target(database: Path | None, name: str | None, replace: bool, kind: str = "table",
          sidecar: bool = True, flag: str = "--overwrite") -> list[Target]:
    """A table or view target (none when ``name`` is None)."""
    return [] if name is None else [Target(kind, None if database is None else Path(database), name, replace,
                                           sidecar, flag)]


#: the last part of the name of a release set's record table: ``PREFIX`` + ``release``
SET_RECORD = "release"


def set_names(spec: Spec, prefix: str) -> tuple[list[tuple[str, str]], str]:
    """The tables of a release set written as tables (``--tables PREFIX``): ``(release name, table
    name)`` of the person source and each linked table, in order, and the set's record table, each
    ``PREFIX`` + its release name (a schema ``release.`` or a name prefix ``deid_``; the names are
    then parsed by the engine's rules like any output name)."""
    if not prefix.strip():
        raise OutputError("--tables needs a prefix for the set's tables: a schema (--tables release.) or a name "
                          "prefix (--tables deid_), so the record table is not called just 'release'")
    released = [spec.source_name, *(t.name for t in spec.tables)]
    if SET_RECORD in released:
        raise OutputError(f"--tables {prefix}: the table released as {SET_RECORD!r} would take the name of the "
                          f"set's record table {prefix + SET_RECORD!r}; give it another name = \"…\" in the spec")
    return [(name, prefix + name) for name in released], prefix + SET_RECORD


def set_tables(spec: Spec, prefix: str, database: Path | None, replace: bool) -> list[Target]:
    """What ``materialize --tables PREFIX`` writes: one table per table of the set and the record
    table, inside the engine (``database`` None) or a DuckDB file."""
    names, record = set_names(spec, prefix)
    return [Target("table", None if database is None else Path(database), name, replace, False, what="--tables")
            for name in [*(n for _, n in names), record]]


def release_targets(*, out: Path | None = None, fmt: str | None = None, table: str | None = None,
                    view: str | None = None, db: Path | None = None, report: Path | None = None,
                    policy_file: Path | None = None, replace: bool = False,
                    flag: str = "--overwrite") -> list[Target]:
    """What a release command writes: a file (``out``; a ``.duckdb`` file's ``table``), or a table of
    the engine (``table`` without ``out``), or a ``view`` (in ``db`` or the engine); its report
    page and a policy file."""
    found = file(report, replace, flag=flag) + file(policy_file, replace, flag=flag)
    if view is not None:
        return found + table_target(db, view, replace, "view", flag=flag)
    if out is not None:
        from .output import output_format  # here: a command that writes nothing does not load the writers

        if output_format(out, fmt) == "duckdb":
            return found + table_target(out, table or "deidentified", replace, flag=flag)
        return found + file(out, replace, sidecar=True, flag=flag)
    return found + table_target(None, table, replace, flag=flag)


def check_targets(spec: Spec, backend: Backend, targets: Sequence[Target]) -> None:
    """Refuse (``OutputError``) the first target that is an input of ``spec``, exists and may not
    be replaced, or whose folder is missing.  No targets, nothing to check: a command that writes
    nothing (a search that only prints) loads neither the engine's class nor the writers."""
    if not targets:
        return
    from ..backends import engine_class
    from .output import check_not_input

    # names and existing objects the engine can judge unconnected first (Spark: before its JVM starts)
    engine_class(spec.backend.engine).check_outputs(spec.backend.options(), targets)
    for t in targets:
        if t.kind == "folder":
            assert t.path is not None
            check_not_input(spec, t.path)
            if t.path.exists() and not t.replace:
                raise OutputError(f"output {t.path} already exists; pass {t.flag} to replace it")
            if t.path.exists() and not t.path.is_dir():
                raise OutputError(f"output {t.path} is a file; a release set is written to a folder: name a new one")
            if not t.path.parent.is_dir():
                raise OutputError(f"output folder {t.path.parent} does not exist; create it first")
            continue
        if t.kind == "file":
            assert t.path is not None
            for path in [t.path, *([sidecar_path(t.path)] if t.sidecar else [])]:
                check_file(spec, path, t.replace, t.flag)
            continue
        if t.path is not None and t.kind != "view":  # a view may live in the source's DuckDB file
            check_not_input(spec, t.path)
        assert t.name is not None
        if t.path is not None and not t.path.parent.is_dir():
            raise OutputError(f"output folder {t.path.parent} does not exist; create it first")
        if t.path is None and backend.catalog:
            check_output_name(spec.backend.engine, t.name, _what(t), inputs=input_tables(spec), sidecar=t.sidecar)
        elif t.what is not None:
            check_name(t.name, t.what)
        if t.replace or (t.path is not None and not t.path.exists()):
            continue
        if t.path is None and not backend.catalog:
            continue  # the write itself says that this engine needs a file
        names = [t.name, *([sidecar_table(t.name)] if t.sidecar else [])]
        noun = "a table or view" if t.kind == "view" else "a table"
        for name in names:
            backend.refuse_taken(t.path, name, noun if name == t.name else "a table", t.flag)


def check_file(spec: Spec, path: Path, replace: bool, flag: str = "--overwrite") -> None:
    """Refuse (``OutputError``) a file output that is an input of ``spec``, exists and may not be
    replaced, is a folder, or whose folder is missing."""
    from .output import check_not_input

    check_not_input(spec, path)
    if path.exists() and not replace:
        raise OutputError(f"output {path} already exists; pass {flag} to replace it")
    if path.exists() and path.is_dir():
        raise OutputError(f"output {path} is a folder; name a file")
    if not path.parent.is_dir():
        raise OutputError(f"output folder {path.parent} does not exist; create it first")


def _what(t: Target) -> str:
    return t.what or ("view name" if t.kind == "view" else "table name")


def input_tables(spec: Spec, extra: Sequence[TableRef] = ()) -> list[str]:
    """The engine tables a job reads (the spec's source, population and linked tables, a batch):
    never outputs."""
    return engine_inputs(spec.source, spec.population, *(t.source for t in spec.tables), *extra)
