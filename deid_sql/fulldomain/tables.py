"""Group tables: the equivalence classes of full-domain transformations, grouped from cells,
cached and rolled up (seed 004's evaluation on cells; the roll-up ``transform.py`` describes).

A ``GroupTables`` serves one set of cells.  The evaluator keeps two: the QI cells (a row per
group, its count of records or persons: what k-anonymity, the risks and the quality models read)
and, with a sensitive column, its cells (a row per (group, sensitive value), f_G(v): what the
attribute models read).  They are separate so that the second, up to values × larger at
generalized levels, is built only for a transformation whose groups an attribute model must still
judge (bench/attribute.py).

A table is one sorted int64 array.  A row packs, from the high bits down, the group id of every QI
in a *fixed* bit field (wide enough for the QI's largest number of groups, so a field means the
same at every level), the sensitive code (no bits without codes) and the count.  Sorting rows
sorts groups, and a field is read with a shift and a mask.  When the fields and the count do not
fit ``evaluate.groups.KEY_BITS``, every transformation is grouped from the cells by ``np.unique``
(``rows_unique``), without the cache.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Protocol

import numpy as np

from ..evaluate.groups import KEY_BITS

Transformation = tuple[int, ...]


class LevelSpace(Protocol):
    """What the tables ask of a lattice (``transform.TransformationSpace``): the QIs, each
    level's group of every domain position and count of groups, the lift between levels, and
    a transformation's direct specializations."""

    names: tuple[str, ...]
    group_of: list[list[np.ndarray]]
    n_groups: list[list[int]]

    def lift(self, q: int, a: int, b: int) -> np.ndarray: ...

    def specializations(self, x: Transformation) -> list[Transformation]: ...

_LEVEL_BUDGET = 1 << 23  # cells × levels of precomputed group ids kept at most (64 MB)
_DENSE_PER_CELL = 8  # a table is grouped by a dense index when its possible groups are at most 8 per cell


class GroupTables:
    """The group tables of one set of cells: ``positions`` (cell × QI domain positions), ``codes``
    (a sensitive value code per cell, 0..``span``−1, or None) and ``counts``.

    ``cache_rows`` bounds the rows kept (LRU, 8 bytes a row); ``rollup=False`` groups every
    transformation from the cells (for checking and timing)."""

    def __init__(self, space: LevelSpace, positions: np.ndarray, codes: np.ndarray | None,
                 counts: np.ndarray, span: int, records: int, *, rollup: bool, cache_rows: int) -> None:
        self.space = space
        self.n_qis = len(space.names)
        self.span = span if codes is not None else 1
        self._pos = [np.ascontiguousarray(positions[:, q], dtype=np.int64) for q in range(self.n_qis)]
        self._codes = None if codes is None else codes.astype(np.int64)
        self._counts = np.asarray(counts, dtype=np.int64)
        widths = [(max(n) - 1).bit_length() for n in space.n_groups]
        self.sbits = (self.span - 1).bit_length() if codes is not None else 0
        self.cbits = max(1, records.bit_length())  # a count never exceeds N < 2^cbits
        self.shifts = [sum(widths[q + 1:]) for q in range(self.n_qis)]  # within a group key (every family's)
        self.masks = [(1 << w) - 1 for w in widths]
        self._qshift = [s + self.sbits + self.cbits for s in self.shifts]  # within a row
        self.fixed = sum(widths) + self.sbits + self.cbits <= KEY_BITS
        self.rollup = rollup and self.fixed
        if self.fixed:
            low = self._counts if self._codes is None else (self._codes << self.cbits) | self._counts
            self._low = np.ascontiguousarray(low, dtype=np.int64)
        self._level_rows: dict[tuple[int, int], np.ndarray] = {}
        self._level_budget = _LEVEL_BUDGET
        self._weights = self._counts.astype(np.float64)  # bincount sums float64: exact below 2^53
        self._dense_limit = _DENSE_PER_CELL * max(1, self._counts.size)
        self.cache = TableCache(self.n_qis, int(cache_rows))
        self.rollups = 0  # tables grouped from a cached specialization

    def rows(self, x: Transformation, groups: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray,
                                                                              np.ndarray | None]:
        """x's rows: ``group key << sbits | code`` (sorted), their counts, and — only when the keys
        do not fit (``rows_unique``: keys are then group ranks) — each group's ids per QI.
        ``groups``: x's group keys (sorted, every cell's among them), when known: a table that must
        be grouped from the cells is then counted per known group, with no sort (``_from_groups``)."""
        if self.fixed:
            table = self.table(x, groups)
            return table >> self.cbits, table & ((1 << self.cbits) - 1), None
        return self.rows_unique(x)

    def table(self, x: Transformation, groups: np.ndarray | None = None) -> np.ndarray:
        """x's table: sorted distinct rows ``group key << (sbits + cbits) | code << cbits | count``."""
        table = self.cache.get(x)
        if table is not None:
            return table
        base = self.cache.specialization(x, self.space.specializations(x)) if self.rollup else None
        if base is None and groups is not None and not self._dense(x) and groups.size * self.span <= self._dense_limit:
            table = self._from_groups(x, groups)  # instead of sorting the cells
        elif base is None:
            table = self._from_cells(x)
        else:
            table = self._roll_up(base, self.cache.get(base), x)  # type: ignore[arg-type]
            self.rollups += 1
        self.cache.put(x, table)
        return table

    def _level(self, q: int, level: int) -> np.ndarray:
        """Every cell's group id at ``level`` of QI q (kept while the cells × levels budget lasts,
        else recomputed)."""
        ids = self._level_rows.get((q, level))
        if ids is None:
            ids = self.space.group_of[q][level][self._pos[q]].astype(np.int64, copy=False)
            if self._level_budget >= ids.size:
                self._level_budget -= ids.size
                self._level_rows[q, level] = ids
        return ids

    def _from_cells(self, x: Transformation) -> np.ndarray:
        """x's table grouped from the cells.  When x's possible groups (the product of the QIs'
        group counts at x's levels, times the sensitive values) are few against the cells, each
        cell gets its group's mixed-radix index and one ``bincount`` sums the counts: no sort, and
        the indexes come out in the table's order.  The path search (``search/paths.py``) checks
        transformations whose specializations were never grouped, so about half its checks start
        here; on Adult the dense index took a third of the sort's time (issue 32)."""
        radix = [self.space.n_groups[q][x[q]] for q in range(self.n_qis)]
        size = math.prod(radix) * self.span
        if self._dense(x):
            index = self._level(0, x[0]).copy() if self.n_qis else np.zeros(self._counts.size, dtype=np.int64)
            for q in range(1, self.n_qis):
                index *= radix[q]
                index += self._level(q, x[q])
            if self._codes is not None:
                index *= self.span
                index += self._codes
            sums = np.bincount(index, weights=self._weights, minlength=size)
            found = np.flatnonzero(sums > 0)  # a boolean's nonzero: several times a float's speed
            rows = sums[found].astype(np.int64)
            digits = np.unravel_index(found, radix + [self.span] if self._codes is not None else radix)
            if self._codes is not None:
                rows |= digits[-1] << self.cbits
            for q in range(self.n_qis):
                rows |= digits[q] << self._qshift[q]
            return rows
        rows = self._low.copy()
        for q in range(self.n_qis):
            rows |= self._level(q, x[q]) << self._qshift[q]
        return self._merge(np.sort(rows))

    def _dense(self, x: Transformation) -> bool:
        """Are x's possible groups (times the values) few enough against the cells to group them by a
        dense index (``_from_cells``' first way)?"""
        return math.prod(self.space.n_groups[q][x[q]] for q in range(self.n_qis)) * self.span <= self._dense_limit

    def _from_groups(self, x: Transformation, groups: np.ndarray) -> np.ndarray:
        """x's table grouped from the cells when x's groups are known (the groups' own table): each
        cell's group key is found among them by ``searchsorted`` and one ``bincount`` over (group,
        code) sums the counts, in the table's order.  The value tables of a search with suppression
        start here: above the transformations k-anonymity rejected, no value table was built to roll
        up from, and sorting the cells cost about half of what a value criterion added (bench/attribute.py)."""
        key = self._level(0, x[0]) << self.shifts[0]
        for q in range(1, self.n_qis):
            key = key | (self._level(q, x[q]) << self.shifts[q])
        index = np.searchsorted(groups, key)
        if self._codes is not None:
            index = index * self.span + self._codes
        sums = np.bincount(index, weights=self._weights, minlength=groups.size * self.span)
        found = np.flatnonzero(sums > 0)
        rows = sums[found].astype(np.int64)
        if self._codes is not None:
            rows |= (found % self.span) << self.cbits
            found = found // self.span
        return rows | (groups[found] << (self.sbits + self.cbits))

    def _roll_up(self, y: Transformation, table: np.ndarray, x: Transformation) -> np.ndarray:
        rows = table.copy()
        lifted = [q for q in range(self.n_qis) if x[q] != y[q]]
        for q in lifted:
            digit = (table >> self._qshift[q]) & self.masks[q]
            rows += (self.space.lift(q, y[q], x[q])[digit] - digit) << self._qshift[q]
        return self._merge(np.sort(rows))  # numpy's default sort beat timsort on these runs

    def _merge(self, rows: np.ndarray) -> np.ndarray:
        """Sorted rows -> one row per distinct key with the summed count."""
        keys = rows >> self.cbits
        starts = run_starts(keys)
        if starts.size == rows.size:
            return rows
        counts = np.add.reduceat(rows & ((1 << self.cbits) - 1), starts)
        return (keys[starts] << self.cbits) | counts

    def rows_unique(self, x: Transformation) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fallback when fixed keys would overflow int64 (no roll-up): the distinct rows of
        (group ids…, sensitive code) by ``np.unique``, keyed by their group's rank (and code); also
        returns the group ids per QI of each group (a QI × group matrix)."""
        cols = [self.space.group_of[q][x[q]][self._pos[q]] for q in range(self.n_qis)]
        if self._codes is not None:
            cols.append(self._codes)
        matrix, inv = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
        counts = np.bincount(inv.ravel(), weights=self._counts, minlength=matrix.shape[0]).astype(np.int64)
        if self._codes is None:
            return np.arange(matrix.shape[0], dtype=np.int64), counts, np.ascontiguousarray(matrix.T)
        new_group = np.concatenate(([True], np.any(matrix[1:, :-1] != matrix[:-1, :-1], axis=1)))
        group = np.cumsum(new_group) - 1
        return (group << self.sbits) | matrix[:, -1], counts, np.ascontiguousarray(matrix[new_group, :-1].T)


def run_starts(sorted_keys: np.ndarray) -> np.ndarray:
    """The index of the first of each run of equal keys."""
    if sorted_keys.size == 0:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate(([0], np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1))


class TableCache:
    """LRU cache of group tables, bounded by their total rows.

    A matrix of the cached transformations' levels finds a cached specialization of x
    when no direct one is cached: rows ≤ x on every QI, the one with the fewest rows."""

    _FREE = np.iinfo(np.int16).max  # a free slot's levels: never ≤ a transformation

    def __init__(self, n_qis: int, max_rows: int) -> None:
        self.n_qis = n_qis
        self.max_rows = max_rows
        self.clear()

    def clear(self) -> None:
        self.tables: OrderedDict[Transformation, np.ndarray] = OrderedDict()
        self.slots: dict[Transformation, int] = {}
        self.levels = np.full((64, self.n_qis), self._FREE, dtype=np.int16)
        self.sizes = np.zeros(64, dtype=np.int64)
        self.owners: list[Transformation | None] = [None] * 64
        self.free = list(range(63, -1, -1))
        self.rows = 0

    def __len__(self) -> int:
        return len(self.tables)

    def get(self, x: Transformation) -> np.ndarray | None:
        table = self.tables.get(x)
        if table is not None:
            self.tables.move_to_end(x)
        return table

    def put(self, x: Transformation, table: np.ndarray) -> None:
        if x in self.tables:
            return
        if not self.free:
            grow = self.levels.shape[0]
            self.levels = np.vstack([self.levels, np.full((grow, self.n_qis), self._FREE, dtype=np.int16)])
            self.sizes = np.concatenate([self.sizes, np.zeros(grow, dtype=np.int64)])
            self.owners.extend([None] * grow)
            self.free = list(range(2 * grow - 1, grow - 1, -1))
        slot = self.free.pop()
        self.tables[x] = table
        self.slots[x] = slot
        self.levels[slot] = x
        self.sizes[slot] = table.size
        self.owners[slot] = x
        self.rows += table.size
        while self.rows > self.max_rows and len(self.tables) > 1:
            old, dropped = self.tables.popitem(last=False)
            self.rows -= dropped.size
            slot = self.slots.pop(old)
            self.levels[slot] = self._FREE
            self.owners[slot] = None
            self.free.append(slot)

    def specialization(self, x: Transformation, direct: list[Transformation]) -> Transformation | None:
        """The cached specialization of x with the fewest rows: a direct one if any is
        cached, else any cached y ≺ x."""
        best, rows = None, 0
        for y in direct:
            table = self.tables.get(y)
            if table is not None and (best is None or table.size < rows):
                best, rows = y, table.size
        if best is not None or not self.tables:
            return best
        below = (self.levels <= np.asarray(x, dtype=np.int16)).all(axis=1)
        if not below.any():
            return None
        slot = int(np.argmin(np.where(below, self.sizes, np.iinfo(np.int64).max)))
        return self.owners[slot]
