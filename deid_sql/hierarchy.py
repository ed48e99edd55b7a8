"""ARX-style generalization hierarchies (``value;level1;level2;…;*``).

A hierarchy gives, per level, the group every original value falls in.  Level 0 is
the value itself.  Levels become recodings of a domain; when every group is a run
of adjacent domain values the level is also a lattice policy.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .domain import Domain
from .errors import SpecError
from .recoding import QIRecoding


@dataclass(frozen=True)
class Hierarchy:
    """``rows[v]`` is the tuple of labels of value v at levels 0..height-1."""

    source: str
    rows: dict[str, tuple[str, ...]]
    height: int

    @classmethod
    def read(cls, path: str | Path, delimiter: str = ";") -> Hierarchy:
        """Read and check a hierarchy file (equal row lengths, one parent per node)."""
        p = Path(path)
        try:
            text = p.read_bytes().decode("utf-8-sig")
        except FileNotFoundError:
            raise SpecError(f"hierarchy file {p} does not exist; fix the path in the spec") from None
        except UnicodeDecodeError as e:
            raise SpecError(f"hierarchy file {p} is not UTF-8 (byte {e.start}); re-save it as UTF-8") from None
        rows: dict[str, tuple[str, ...]] = {}
        height = None
        for lineno, row in enumerate(csv.reader(text.splitlines(), delimiter=delimiter), 1):
            if not row or all(not c for c in row):
                continue
            if height is None:
                height = len(row)
            elif len(row) != height:
                raise SpecError(
                    f"hierarchy {p} line {lineno} has {len(row)} levels but line 1 has {height}; "
                    f"every row needs the same number of levels"
                )
            if row[0] in rows and rows[row[0]] != tuple(row):
                raise SpecError(
                    f"hierarchy {p} lists value {row[0]!r} twice with different groups (line "
                    f"{lineno}); a value must have one parent per level"
                )
            rows[row[0]] = tuple(row)
        if not rows or height is None:
            raise SpecError(f"hierarchy file {p} is empty; give one row per value")
        cls._check_tree(p, rows, height)
        return cls(str(p), rows, height)

    @staticmethod
    def _check_tree(path: Path, rows: dict[str, tuple[str, ...]], height: int) -> None:
        for level in range(1, height - 1):
            parent: dict[str, str] = {}
            for row in rows.values():
                node, up = row[level], row[level + 1]
                if parent.setdefault(node, up) != up:
                    raise SpecError(
                        f"hierarchy {path} is not a tree: group {node!r} at level {level} "
                        f"generalizes to both {parent[node]!r} and {up!r} at level {level + 1}"
                    )

    def recoding(self, domain: Domain, level: int) -> QIRecoding:
        """The recoding of ``domain`` at ``level`` (labels taken from the hierarchy)."""
        if not 0 <= level < self.height:
            raise SpecError(
                f"hierarchy {self.source} has levels 0..{self.height - 1}; level {level} does not exist"
            )
        missing = [domain.text(i) for i in range(domain.size) if domain.text(i) not in self.rows]
        if missing:
            shown = ", ".join(repr(m) for m in missing[:5])
            raise SpecError(
                f"hierarchy {self.source} has no row for {len(missing)} domain value(s) ({shown}); "
                f"add a row per value"
            )
        names = [self.rows[domain.text(i)][level] for i in range(domain.size)]
        labels: dict[str, int] = {}
        gid = np.array([labels.setdefault(n, len(labels)) for n in names], dtype=np.int64)
        return QIRecoding.from_groups(domain, gid, list(labels))
