"""ARX-style generalization hierarchies (``value;level1;level2;…;*``).

A hierarchy gives, per level, the group every original value falls in.  Level 0 is
the value itself.  Levels become recodings of a domain; when every group is a run
of adjacent domain values the level is also a lattice policy.

ARX's files list values in no particular order (Adult's education file starts ``Bachelors``,
``Some-college``, ``11th``), so a category domain read from one rarely keeps a group together.
A hierarchy is a tree (every group has one parent, checked on reading), so ordering the values
by their path from the top level down puts every group of every level in one run
(``nested_order``); ``cuts = "hierarchy"`` uses that order (``cuts.hierarchy_domain``).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import SpecError
from .domain import Domain
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
        """Refuse a group with two parents: no order of the values could keep both the group and
        its parents together, and a coarser level would not generalize a finer one."""
        for level in range(1, height - 1):
            parent: dict[str, str] = {}
            for row in rows.values():
                node, up = row[level], row[level + 1]
                if parent.setdefault(node, up) != up:
                    first = [v for v, r in rows.items() if r[level] == node and r[level + 1] == parent[node]]
                    other = [v for v, r in rows.items() if r[level] == node and r[level + 1] == up]
                    raise SpecError(
                        f"hierarchy {path} is not a tree: group {node!r} at level {level} generalizes to both "
                        f"{parent[node]!r} ({shown(first)}) and {up!r} ({shown(other)}) at level {level + 1}; "
                        f"give each group one parent"
                    )

    def labels(self, values: Sequence[str], level: int) -> list[str]:
        """The group label of each of ``values`` at ``level`` (every value must have a row)."""
        return [self.rows[v][level] for v in values]

    def nested_order(self, values: Sequence[str]) -> list[int]:
        """The indices of ``values`` in an order where every group of every level is a run.

        Values are sorted by their path from the top level down, each group ranked by where its
        first value stands in ``values``; the sort is stable, so ties keep the given order and an
        order that already keeps every group together is returned unchanged.  A hierarchy that
        is not nested (built by hand: ``read`` refuses one) is refused, naming a group it splits.
        """
        ranks: list[list[int]] = []
        for level in range(self.height - 1, 0, -1):
            labels = self.labels(values, level)
            first: dict[str, int] = {}
            for label in labels:
                first.setdefault(label, len(first))
            ranks.append([first[label] for label in labels])
        order = sorted(range(len(values)), key=lambda i: tuple(r[i] for r in ranks))
        split = self.split_group([values[i] for i in order])
        if split is not None:
            level, label, members, between = split
            raise SpecError(
                f"hierarchy {self.source} is not nested: no order of its values keeps every group together "
                f"(level {level} group {label!r} holds {shown(members)} but {shown(between)} lie between); "
                f"give each group one parent"
            )
        return order

    def split_group(self, values: Sequence[str]) -> tuple[int, str, list[str], list[str]] | None:
        """The first group (finest level first) whose members are not a run of ``values``: its
        level, label, members and the values of other groups between them; None when every group
        of every level is a run."""
        for level in range(1, self.height):
            labels = self.labels(values, level)
            start: dict[str, int] = {}
            end: dict[str, int] = {}
            for i, label in enumerate(labels):
                start.setdefault(label, i)
                end[label] = i
            for label, lo in start.items():
                inside = range(lo, end[label] + 1)
                between = [values[i] for i in inside if labels[i] != label]
                if between:
                    return level, label, [values[i] for i in inside if labels[i] == label], between
        return None

    def recoding(self, domain: Domain, level: int) -> QIRecoding:
        """The recoding of ``domain`` at ``level`` (labels taken from the hierarchy)."""
        if not 0 <= level < self.height:
            raise SpecError(
                f"hierarchy {self.source} has levels 0..{self.height - 1}; level {level} does not exist"
            )
        return self._recoding(domain, self._domain_rows(domain), level)

    def recodings(self, domain: Domain) -> list[QIRecoding]:
        """The recodings of ``domain`` at every level, bottom first: ``recoding`` of each level, with
        the domain's values looked up once for all of them (a ZIP hierarchy's 100,000 rows took a
        third of a second read level by level, issue 43)."""
        rows = self._domain_rows(domain)
        return [self._recoding(domain, rows, level) for level in range(self.height)]

    def _domain_rows(self, domain: Domain) -> list[tuple[str, ...]]:
        """The hierarchy's row of every domain value, in domain order (``SpecError`` for a value
        without one)."""
        texts = [domain.text(i) for i in range(domain.size)]
        missing = [t for t in texts if t not in self.rows]
        if missing:
            shown = ", ".join(repr(m) for m in missing[:5])
            raise SpecError(
                f"hierarchy {self.source} has no row for {len(missing)} domain value(s) ({shown}); "
                f"add a row per value"
            )
        return [self.rows[t] for t in texts]

    @staticmethod
    def _recoding(domain: Domain, rows: list[tuple[str, ...]], level: int) -> QIRecoding:
        """The recoding at ``level`` of the domain whose values' rows are ``rows``: groups numbered in
        the domain order of their first value (``QIRecoding.from_groups``' numbering, made here in one
        pass), labelled by the hierarchy."""
        names = [r[level] for r in rows]
        labels = {n: i for i, n in enumerate(dict.fromkeys(names))}
        gid = np.fromiter(map(labels.__getitem__, names), dtype=np.int64, count=len(names))
        return QIRecoding(gid, tuple(labels), domain)


def shown(values: Sequence[str], limit: int = 5, quote: bool = True) -> str:
    """Values for a message: the first ``limit`` (quoted, unless they are numbers), then how many more."""
    text = ", ".join(repr(v) if quote else v for v in values[:limit])
    return text + (f" and {len(values) - limit} more" if len(values) > limit else "")
