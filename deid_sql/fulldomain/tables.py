"""Group tables: the equivalence classes of full-domain transformations, grouped from cells,
cached and rolled up (seed 004's evaluation on cells; the roll-up ``transform.py`` describes).

A ``GroupTables`` serves one set of cells.  The evaluator keeps two: the QI cells (a row per
group, its count of records or persons: what k-anonymity, the risks and the quality models read)
and, with a sensitive column, its cells (a row per (group, sensitive value), f_G(v): what the
attribute models read).  They are separate so that the second, up to values × larger at
generalized levels, is built only for a transformation whose groups an attribute model must still
judge (bench/attribute.py).

A table is two arrays over its rows, sorted by key: ``keys`` and ``counts``.  A key packs, from
the high bits down, every QI's group in a *fixed* bit field (so a field means the same at every
level), then the sensitive code (no bits without codes).  Sorting keys sorts groups, and a field is
read with a shift and a mask.

Ranks, not ids (issue 43).  A field holds the group's *rank* among the groups of its level present
in the cells (``LevelRanks``), not its id over the hierarchy's whole domain: a ZIP hierarchy of
100,000 leaves needs 17 bits for ids, the 13,294 ZIPs present need 14.  Ranks are numbered in id
order, so sorted keys still sort groups QI by QI by their ids (``Problem.group_sizes`` relies on
it), a lift between levels is a lookup on ranks (``LevelRanks.lift``), and ranks become ids again
wherever groups leave the tables (``LevelRanks.decode``: the census, the quality models' per-group
sums, the outputs).  A field is as wide as the most groups present at any of its QI's levels.

Merging.  A table's rows are sorted with their counts riding in the low bits of one int64 when the
table's largest key and the count fit 63 bits together — always on Adult (32 + 15 bits), and on
the wide table of bench/wide.py (56 + 16 bits at most) whenever a QI high in the key is
generalized far enough to empty its field's top bits — else the keys are argsorted and the counts
gathered.  Only when even the fields do not fit ``evaluate.groups.KEY_BITS`` is every
transformation grouped from the cells by ``np.unique`` on rows (``rows_unique``), without the cache.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from ..evaluate.groups import KEY_BITS

Transformation = tuple[int, ...]
Table = tuple[np.ndarray, np.ndarray]  # (keys, counts) of distinct rows, sorted by key


class LevelSpace(Protocol):
    """What the tables ask of a lattice (``transform.TransformationSpace``): the QIs, each
    level's group of every domain position and count of groups, the lift between levels, and
    a transformation's direct specializations."""

    names: tuple[str, ...]
    group_of: list[list[np.ndarray]]
    n_groups: list[list[int]]

    def lift(self, q: int, a: int, b: int) -> np.ndarray: ...

    def specializations(self, x: Transformation) -> list[Transformation]: ...

_LEVEL_BUDGET = 1 << 23  # cells × levels of precomputed group ranks kept at most (64 MB)
_PACK_BITS = 63  # a key and its count are sorted as one int64 when they fit its non-negative values
_SCAN_ROWS = 4096  # a direct specialization with more rows than this is compared with every cached one
_DENSE_PER_CELL = 8  # a table is grouped by a dense index when its possible groups are at most 8 per cell


class LevelRanks:
    """Per QI and level, the groups present in the cells, ranked in the order of their ids.

    ``present[q][l]`` holds the ids of the groups of QI q at level l that some cell falls in,
    ascending, so rank r stands for id ``present[q][l][r]``; ``position_rank[q][l]`` is the rank of
    every domain position's group (−1 where no cell falls in it).  Since a hierarchy is a tree,
    the groups present at a level are the lifts of those present below, and ``lift`` maps ranks to
    ranks.  Group keys built from ranks are as wide as the groups present need (``widths``), and
    sort as keys of ids would."""

    def __init__(self, space: LevelSpace, positions: Sequence[np.ndarray]) -> None:
        self.space = space
        self.present: list[list[np.ndarray]] = []
        self.position_rank: list[list[np.ndarray]] = []
        self._rank_of: list[list[np.ndarray]] = []  # rank of every group id (−1 where absent)
        for q in range(len(space.names)):
            seen = np.zeros(space.group_of[q][0].size, dtype=bool)
            for cells in positions:  # every set of cells the tables group (a sensitive column's too)
                seen[cells[:, q]] = True
            at = np.flatnonzero(seen)
            present, rank_of, position_rank = [], [], []
            for gid, n in zip(space.group_of[q], space.n_groups[q]):
                mark = np.zeros(n, dtype=bool)
                mark[gid[at]] = True
                rank = np.cumsum(mark, dtype=np.int64) - 1
                rank[~mark] = -1
                present.append(np.flatnonzero(mark))
                rank_of.append(rank)
                position_rank.append(rank[gid])
            self.present.append(present)
            self._rank_of.append(rank_of)
            self.position_rank.append(position_rank)
        self.counts = [[int(p.size) for p in lv] for lv in self.present]
        self.widths = [(max(1, *c) - 1).bit_length() for c in self.counts]
        parts = [p for lv in self.present for p in lv]
        self._flat = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        starts = np.cumsum([0] + [p.size for p in parts])
        self._starts: list[list[int]] = []
        at = 0
        for lv in self.present:
            self._starts.append([int(s) for s in starts[at:at + len(lv)]])
            at += len(lv)
        self._lifts: dict[tuple[int, int, int], np.ndarray] = {}

    def lift(self, q: int, a: int, b: int) -> np.ndarray:
        """The rank at level b (≥ a) of QI q of every rank at level a (built on first use)."""
        lift = self._lifts.get((q, a, b))
        if lift is None:
            lift = self._lifts[q, a, b] = self._rank_of[q][b][self.space.lift(q, a, b)[self.present[q][a]]]
        return lift

    def decode(self, ranks: np.ndarray, levels: Transformation) -> np.ndarray:
        """Group ids of a QI × group matrix of ranks at ``levels``, in one gather."""
        at = np.array([self._starts[q][v] for q, v in enumerate(levels)], dtype=np.int64)[:, None]
        return self._flat[ranks + at]


class GroupTables:
    """The group tables of one set of cells: ``positions`` (cell × QI domain positions), ``codes``
    (a sensitive value code per cell, 0..``span``−1, or None) and ``counts``; ``ranks`` numbers the
    groups in the keys (shared by every set of cells of one evaluator, so their keys match).

    ``cache_rows`` bounds the rows kept (LRU, 16 bytes a row); ``rollup=False`` groups every
    transformation from the cells (for checking and timing)."""

    def __init__(self, space: LevelSpace, ranks: LevelRanks, positions: np.ndarray, codes: np.ndarray | None,
                 counts: np.ndarray, span: int, records: int, *, rollup: bool, cache_rows: int) -> None:
        self.space = space
        self.ranks = ranks
        self.n_qis = len(space.names)
        self.span = span if codes is not None else 1
        self._pos = [np.ascontiguousarray(positions[:, q], dtype=np.int64) for q in range(self.n_qis)]
        self._codes = None if codes is None else codes.astype(np.int64)
        self._counts = np.asarray(counts, dtype=np.int64)
        widths = ranks.widths
        self.sbits = (self.span - 1).bit_length() if codes is not None else 0
        self.cbits = max(1, records.bit_length())  # a count never exceeds N < 2^cbits
        self.shifts = [sum(widths[q + 1:]) for q in range(self.n_qis)]  # within a group key (every family's)
        self.masks = [(1 << w) - 1 for w in widths]
        self._kshift = [s + self.sbits for s in self.shifts]  # within a row's key
        key_bits = sum(widths) + self.sbits
        self.fixed = key_bits <= KEY_BITS  # keys fit: tables are cached and rolled up
        self.packed = key_bits + self.cbits <= min(KEY_BITS, _PACK_BITS)  # every table's keys fit with counts
        self.rollup = rollup and self.fixed
        self._level_rows: dict[tuple[int, int], np.ndarray] = {}
        self._steps: dict[tuple[int, int, int], np.ndarray] = {}  # ``_step``'s, built on first use
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
            keys, counts = self.table(x, groups)
            return keys, counts, None
        return self.rows_unique(x)

    def table(self, x: Transformation, groups: np.ndarray | None = None) -> Table:
        """x's table: its distinct keys ``group key << sbits | code``, sorted, and their counts."""
        table = self.cache.get(x)
        if table is not None:
            return table
        base = self.cache.specialization(x, self.space.specializations(x)) if self.rollup else None
        if base is not None and 2 * self.cache.rows_of(base) > self._counts.size and self._dense(x):
            base = None  # counting the cells by a dense index beats sorting a base nearly as large
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
        """Every cell's group rank at ``level`` of QI q (kept while the cells × levels budget lasts,
        else recomputed)."""
        ranks = self._level_rows.get((q, level))
        if ranks is None:
            ranks = self.ranks.position_rank[q][level][self._pos[q]]
            if self._level_budget >= ranks.size:
                self._level_budget -= ranks.size
                self._level_rows[q, level] = ranks
        return ranks

    def _radix(self, x: Transformation) -> list[int]:
        """The groups present of every QI at x's levels (the digits' bases of a dense index)."""
        return [self.ranks.counts[q][x[q]] for q in range(self.n_qis)]

    def _from_cells(self, x: Transformation) -> Table:
        """x's table grouped from the cells.  When x's possible groups (the product of the QIs'
        groups present at x's levels, times the sensitive values) are few against the cells, each
        cell gets its group's mixed-radix index and one ``bincount`` sums the counts: no sort, and
        the indexes come out in the table's order.  The path search (``search/paths.py``) checks
        transformations whose specializations were never grouped, so about half its checks start
        here; on Adult the dense index took a third of the sort's time (issue 32)."""
        radix = self._radix(x)
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
            counts = sums[found].astype(np.int64)
            digits = np.unravel_index(found, radix + [self.span] if self._codes is not None else radix)
            keys = digits[-1].astype(np.int64) if self._codes is not None else np.zeros(found.size, dtype=np.int64)
            for q in range(self.n_qis):
                keys |= digits[q] << self._kshift[q]
            return keys, counts
        keys = self._codes.copy() if self._codes is not None else np.zeros(self._counts.size, dtype=np.int64)
        for q in range(self.n_qis):
            keys |= self._level(q, x[q]) << self._kshift[q]
        return self._merge(keys, self._counts)

    def _dense(self, x: Transformation) -> bool:
        """Are x's possible groups (times the values) few enough against the cells to group them by a
        dense index (``_from_cells``' first way)?"""
        return math.prod(self._radix(x)) * self.span <= self._dense_limit

    def _from_groups(self, x: Transformation, groups: np.ndarray) -> Table:
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
        counts = sums[found].astype(np.int64)
        if self._codes is None:
            return groups[found], counts
        return (groups[found // self.span] << self.sbits) | (found % self.span), counts

    def _roll_up(self, y: Transformation, table: Table, x: Transformation) -> Table:
        """x's table from the table of y ≺ x: move the field of every QI where x is higher by its
        lift (one lookup of the rank's change, already shifted into place), then merge the rows that
        became equal."""
        keys, counts = table
        rows = None
        for q in (q for q in range(self.n_qis) if x[q] != y[q]):
            step = self._step(q, y[q], x[q])[(keys >> self._kshift[q]) & self.masks[q]]
            if rows is None:
                rows = keys + step
            else:
                rows += step
        return self._merge(keys.copy() if rows is None else rows, counts)

    def _step(self, q: int, a: int, b: int) -> np.ndarray:
        """Per rank of QI q at level a: (its lift to level b − itself) << the field's shift."""
        step = self._steps.get((q, a, b))
        if step is None:
            lift = self.ranks.lift(q, a, b)
            step = self._steps[q, a, b] = (lift - np.arange(lift.size)) << self._kshift[q]
        return step

    def _merge(self, keys: np.ndarray, counts: np.ndarray) -> Table:
        """Rows in any order (``keys`` a scratch array, changed) -> one row per distinct key with the
        summed count, sorted.  When this table's largest key and the count fit 63 bits together (often,
        though not always, when the fields alone would not: a QI at its top level has an empty field),
        keys and counts are sorted as one int64; else the keys are argsorted.  Both sorts are numpy's
        stable ones: the rows of a roll-up come in long sorted runs (the order of the table lifted),
        where they ran 1.5–4× faster than the default quicksort (bench/wide.py, Adult and wide)."""
        if self.packed or int(keys.max(initial=0)).bit_length() + self.cbits <= _PACK_BITS:
            keys <<= self.cbits
            keys |= counts
            keys.sort(kind="stable")
            counts = keys & ((1 << self.cbits) - 1)
            keys >>= self.cbits
        else:
            order = np.argsort(keys, kind="stable")
            keys, counts = keys[order], counts[order]
        starts = run_starts(keys)
        if starts.size == keys.size:
            return keys, counts
        return keys[starts], np.add.reduceat(counts, starts)

    def rows_unique(self, x: Transformation) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fallback when even the keys would overflow int64 (no roll-up): the distinct rows of
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
        self.tables: OrderedDict[Transformation, Table] = OrderedDict()
        self.slots: dict[Transformation, int] = {}
        self.levels = np.full((64, self.n_qis), self._FREE, dtype=np.int16)
        self.sizes = np.zeros(64, dtype=np.int64)
        self.owners: list[Transformation | None] = [None] * 64
        self.free = list(range(63, -1, -1))
        self.rows = 0

    def __len__(self) -> int:
        return len(self.tables)

    def get(self, x: Transformation) -> Table | None:
        table = self.tables.get(x)
        if table is not None:
            self.tables.move_to_end(x)
        return table

    def put(self, x: Transformation, table: Table) -> None:
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
        self.sizes[slot] = table[0].size
        self.owners[slot] = x
        self.rows += table[0].size
        while self.rows > self.max_rows and len(self.tables) > 1:
            old, dropped = self.tables.popitem(last=False)
            self.rows -= dropped[0].size
            slot = self.slots.pop(old)
            self.levels[slot] = self._FREE
            self.owners[slot] = None
            self.free.append(slot)

    def rows_of(self, x: Transformation) -> int:
        """The rows of x's cached table."""
        return int(self.tables[x][0].size)

    def specialization(self, x: Transformation, direct: list[Transformation]) -> Transformation | None:
        """The cached specialization of x with the fewest rows: a direct one if any is cached and
        has at most ``_SCAN_ROWS`` rows, else the smallest of every cached y ≺ x (one vectorized
        scan).  A check costs about its base's rows: on wide data a direct specialization often
        still holds nearly every record as a group while an older one further below holds few."""
        best, rows = None, 0
        for y in direct:
            table = self.tables.get(y)
            if table is not None and (best is None or table[0].size < rows):
                best, rows = y, table[0].size
        if (best is not None and rows <= _SCAN_ROWS) or not self.tables:
            return best
        below = (self.levels <= np.asarray(x, dtype=np.int16)).all(axis=1)
        if not below.any():
            return best
        slot = int(np.argmin(np.where(below, self.sizes, np.iinfo(np.int64).max)))
        return best if best is not None and rows <= self.sizes[slot] else self.owners[slot]
