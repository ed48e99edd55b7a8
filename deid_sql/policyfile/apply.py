"""``apply_policy``: release a new batch under a saved policy, without the data it was chosen on."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import OutputError
from ..output import FORMATS, Written, view_source, write_query
from ..spec import TableRef
from .batch import Outside, batch_ref, open_batch
from .format import PolicyFile


@dataclass(frozen=True)
class Applied:
    """What ``apply_policy`` wrote: a file or table (``written``) or a view, and the fallback count."""

    policy: PolicyFile
    batch: str
    records: int
    outside: Outside
    written: Written | None = None
    view: str | None = None
    db: Path | None = None


def apply_policy(policy: str | Path | PolicyFile, source: str | Path | TableRef, table: str | None = None,
                 out: str | Path | None = None, view: str | None = None, db: str | Path | None = None,
                 out_table: str | None = None, overwrite: bool = False) -> Applied:
    """Generalize a batch with a saved policy into ``out`` (Parquet, CSV or a DuckDB table,
    atomic and row-count checked) or into view ``view`` of the DuckDB file ``db``.

    The batch must have the saved columns (same names, same kinds of type) and the spec must
    still declare the saved QIs (the spec hash); values outside the saved domains are refused,
    or given the policy's fallback label when it has one.
    """
    if (out is None) == (view is None):
        raise OutputError("give --out FILE, or --view NAME with --db FILE.duckdb (one of them)")
    if view is not None and db is None:
        raise OutputError("--view needs --db FILE.duckdb: the DuckDB file to create the view in")
    if out is None and out_table is not None:
        raise OutputError("--out-table names the table inside a .duckdb --out; it does not go with --view")
    pf = policy if isinstance(policy, PolicyFile) else PolicyFile.read(policy)
    ref = source if isinstance(source, TableRef) else batch_ref(source, table)
    target = Path(out) if out is not None else Path(str(db))
    _check_target(pf, target, out is not None, overwrite)
    with open_batch(pf, ref) as batch:
        for protected in (batch.original,):
            if protected is not None and target.resolve() == protected:
                raise OutputError(f"output {target} is the source the policy was saved on; write elsewhere")
        if out is not None:
            written = write_query(batch.backend, batch.spec, batch.release_query(), target, batch.records,
                                  None, out_table, overwrite)
            return Applied(pf, batch.describe(), batch.records, batch.outside, written=written)
        source_sql = view_source(batch.spec, batch.relation, target)
        batch.backend.create_view(target, str(view), batch.release_query(source_sql, persistent=True), overwrite)
        return Applied(pf, batch.describe(), batch.records, batch.outside, view=view, db=target)


def _check_target(pf: PolicyFile, target: Path, is_file: bool, overwrite: bool) -> None:
    """Refuse the policy file itself, and an existing output file, before reading the batch."""
    if pf.path is not None and target.resolve() == pf.path.resolve():
        raise OutputError(f"output {target} is the policy file; write the release elsewhere")
    if target.resolve() == pf.spec:
        raise OutputError(f"output {target} is the policy's spec; write the release elsewhere")
    fmt = FORMATS.get(target.suffix.lower())
    if is_file and fmt is None:
        raise OutputError(f"cannot tell the output format of {target}; use .parquet, .csv or .duckdb")
    if is_file and fmt != "duckdb" and target.exists() and not overwrite:
        raise OutputError(f"output {target} already exists; pass --overwrite to replace it")
