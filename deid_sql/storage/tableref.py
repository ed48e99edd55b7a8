"""Where a table lives (``TableRef``): below the spec and the engines, which both name it.

The spec reads ``[source]`` and ``[population]`` into one; every backend reads and writes
through one.  It sits in a module of its own so that ``backends.base`` needs nothing of the
spec's parsing (which would make spec → … → backends → spec a cycle).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TableRef:
    """Where a table lives: a CSV or Parquet file, a table inside a DuckDB file, or a table
    of the engine itself (``format = "table"``, no path: PostgreSQL, Spark's catalog)."""

    path: Path | None
    format: str
    table: str | None = None
    delimiter: str | None = None
    glob: bool = False  # ``glob = true``: path is a pattern; otherwise a literal file name, whatever it holds
    matches: tuple[Path, ...] = ()  # the files the pattern matched when the spec was read
    duplicates: str = "error"  # [population] rows repeating a cell: "error", or "sum" (declared as expected)

    def describe(self) -> str:
        if self.path is None:
            return f"table {self.table!r}"
        if self.glob:
            shown = ", ".join(m.name for m in self.matches[:3]) + (", …" if len(self.matches) > 3 else "")
            return f"{self.path} (glob = true: {len(self.matches)} file(s): {shown})"
        return f"{self.path}" + (f" table {self.table!r}" if self.table else "")


def engine_inputs(*refs: TableRef | None) -> list[str]:
    """The names of the engine's own tables among ``refs`` (inputs a write must never replace)."""
    return [r.table for r in refs if r is not None and r.format == "table" and r.path is None and r.table]
