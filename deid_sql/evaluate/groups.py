"""The groups of a recoding over cells: their keys, and the census people in each.

Every path that meets a released group — the fast and chain evaluators, the full-domain
search, the release gate and its report — needs the same two things of it: a key that names
the group, so cells can be grouped and groups matched, and g = max(census people, m), the
group's population size (METHODS decision 1; g = m without a population).  Both are made
here and nowhere else, so no two paths can count one group differently.

Keys.  A group's key is the mixed-radix number of its per-QI group ids (C order: the first
QI is the most significant digit), so sorting keys sorts groups by their ids QI by QI.  Keys
are int64 while the key space — the product of the QIs' group counts — is below
``KEY_LIMIT`` (2^62: int64 with a bit to spare, so forming the next digit never wraps); past
it they are Python integers in object arrays, the same code at Python speed, for the rare
problem with many large QIs.  The full-domain search packs its own keys into ``KEY_BITS``.

Census people per group, three ways, all summing the same population cells:
- the prefix-sum cube (``CensusCounts``, built once when it has at most ``CUBE_LIMIT``
  entries) gives the people in any box of positions by inclusion–exclusion over the box's
  2^d corners: the groups of a recoding whose groups are intervals (every lattice policy), and
  the boxes the chain evaluator keeps;
- otherwise a scan: every population cell's key is located among the groups' sorted keys;
- ``PeopleByKey``: the people of every census group of one recoding, sorted by key, for
  groups not known in advance — the label tuples the release gate measures on written rows,
  or a policy-file batch's census query.
Counts are integers, so every way gives the same figures to the last digit; summed sampling
weights (fractions) never use the cube and are summed in cell order by the other two.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..domains.limits import KEY_LIMIT  # mixed-radix group keys below it are int64; past it, Python integers
from ..domains.recoding import Recoding
from ..loading.cells import Cells

KEY_BITS = KEY_LIMIT.bit_length() - 1  # the same limit for keys packed bit field by bit field
CUBE_LIMIT = 16_000_000  # prefix-sum cube entries kept in memory at most (past it: scans)
DENSE_FACTOR = 16  # keys are counted in a dense array when their space is at most 16 × the rows
_MAGIC = 6755399441055744.0  # 2^52 + 2^51: an integer below 2^51 added to it is its low mantissa bits
_MAGIC_BITS = int(np.array(_MAGIC).view(np.int64))


# -- keys -------------------------------------------------------------------------------------
def radix_of(rec: Recoding) -> list[int]:
    """The digits' bases of ``rec``'s group keys: each QI's number of groups."""
    return [q.n_groups for q in rec.qis]


def fits(radix: Sequence[int]) -> bool:
    """Whether keys of this radix are int64 (the key space is below ``KEY_LIMIT``)."""
    return math.prod(int(n) for n in radix) < KEY_LIMIT


def key_dtype(radix: Sequence[int]) -> type:
    """int64 while keys of this radix fit, else object (Python integers never overflow)."""
    return np.int64 if fits(radix) else object


def keys_of(ids: Sequence[np.ndarray], radix: Sequence[int]) -> np.ndarray:
    """Mixed-radix keys of groups given by their id per QI (one array per QI)."""
    dtype = key_dtype(radix)
    key = np.zeros(len(ids[0]) if len(ids) else 0, dtype=dtype)
    for q, n in enumerate(radix):
        key = key * n + np.asarray(ids[q]).astype(dtype)
    return key


def cell_keys(rec: Recoding, positions: np.ndarray) -> np.ndarray:
    """The key of every cell's group under ``rec`` (cells as rows of domain positions)."""
    radix = radix_of(rec)
    if not fits(radix):
        return keys_of([q.group_of[positions[:, i]] for i, q in enumerate(rec.qis)], radix)
    key = np.zeros(positions.shape[0], dtype=np.int64)
    for q, qrec in enumerate(rec.qis):  # in place: the fast path's hottest loop
        key *= qrec.n_groups
        key += qrec.group_of[positions[:, q]]
    return key


def ids_of(keys: np.ndarray, radix: Sequence[int]) -> list[np.ndarray]:
    """Per QI the group ids of keys (int64 arrays, whatever the keys' dtype)."""
    ids: list[np.ndarray] = []
    rest = keys.copy()
    for n in reversed(radix):
        ids.append((rest % n).astype(np.int64, copy=False))
        rest //= n
    return ids[::-1]


def locate(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each of ``keys`` is in ``sorted_keys`` (distinct, ascending) and whether it is there
    at all (the index is 0 where it is not)."""
    at = np.searchsorted(sorted_keys, keys)
    at[at == sorted_keys.size] = 0
    return at, sorted_keys[at] == keys


def count_by_key(keys: np.ndarray, weights: np.ndarray, space: int,
                 inverse: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The distinct ``keys`` (ascending) with their summed ``weights`` (float64, summed in row
    order), and each row's index among them when ``inverse``.  A dense count array when the key
    space is small next to the rows (no sort); else ``np.unique``.  Keys with no weight at all
    may be left out of the dense count (a lookup gives them 0 people either way)."""
    if keys.dtype != object and space <= DENSE_FACTOR * keys.size:
        full = np.bincount(keys, weights=weights, minlength=space)
        uniq = np.flatnonzero(full)
        where = None
        if inverse:
            rank = np.zeros(space, dtype=np.int64)
            rank[uniq] = np.arange(uniq.size)
            where = rank[keys]
        return uniq, full[uniq], where
    uniq, inv = np.unique(keys, return_inverse=True)
    inv = inv.ravel()
    sums = np.bincount(inv, weights=weights, minlength=uniq.size).astype(np.float64, copy=False)
    return uniq, sums, inv if inverse else None


def digit_groups(digits: Sequence[np.ndarray], radix: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Rows grouped by their tuple of digits (``digits[q][i] < radix[q]``), groups in the tuples'
    order: each group's first row and each row's group.  Mixed-radix keys, renumbered densely
    before they would reach ``KEY_LIMIT`` (the chain evaluator groups cells by their intervals'
    first positions, whose radix is the whole domain)."""
    key = np.zeros(digits[0].size if len(digits) else 0, dtype=np.int64)
    span = 1
    for column, n in zip(digits, radix):
        if span * n >= KEY_LIMIT:
            uniq, key = np.unique(key, return_inverse=True)
            key, span = key.ravel().astype(np.int64), int(uniq.size)
        key = key * n + column
        span *= n
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    return first, inv.ravel()


# -- groups of the sample -------------------------------------------------------------------------
@dataclass(frozen=True)
class CellGroups:
    """The groups a recoding makes of some cells: sorted distinct ``keys``, their summed counts
    ``m``, each group's id per QI, and (when asked) each cell's group."""

    keys: np.ndarray
    m: np.ndarray
    ids: list[np.ndarray]
    cell_group: np.ndarray | None = None


def group_cells(rec: Recoding, cells: Cells, cell_group: bool = False) -> CellGroups:
    """Group ``cells`` by their keys under ``rec`` (``cell_group``: also each cell's group)."""
    radix = radix_of(rec)
    keys = cell_keys(rec, cells.positions)
    space = math.prod(radix) if keys.dtype != object else 0
    uniq, m, where = count_by_key(keys, cells.counts, space, cell_group)
    return CellGroups(uniq, m.astype(np.float64), ids_of(uniq, radix), where)


def group_sizes(census: np.ndarray, m: np.ndarray) -> np.ndarray:
    """g = max(census people, m): a population never holds fewer people than the sample has
    records (METHODS decision 1)."""
    return np.maximum(np.asarray(census, dtype=np.float64), m)


# -- census people ----------------------------------------------------------------------------
@dataclass(frozen=True)
class PeopleByKey:
    """Census people per group of one recoding, by sorted key: the lookup for groups that are
    not known when it is built (0 people for a key the census does not have)."""

    keys: np.ndarray
    people: np.ndarray

    @classmethod
    def of(cls, keys: np.ndarray, counts: np.ndarray, radix: Sequence[int]) -> PeopleByKey:
        """From keys with people (repeated keys are summed)."""
        space = math.prod(radix) if keys.dtype != object else 0
        uniq, people, _ = count_by_key(keys, np.asarray(counts, dtype=np.float64), space)
        return cls(uniq, people)

    @classmethod
    def of_cells(cls, rec: Recoding, population: Cells) -> PeopleByKey:
        """The census groups ``rec`` makes of the population cells."""
        return cls.of(cell_keys(rec, population.positions), population.counts, radix_of(rec))

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        if not self.keys.size:
            return np.zeros(len(keys))
        at, hit = locate(self.keys, keys)
        return np.where(hit, self.people[at], 0.0)


def box_people(cube: np.ndarray, base: np.ndarray, spans: Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
    """People in boxes of a flat prefix-sum cube: each box by its low corner's flat index
    ``base`` and, per axis, its extent times the axis's stride (``spans[q]``).

    Inclusion–exclusion over the 2^d corners.  Corner c (bit q set: the high end on axis q) is
    built by doubling: the corners without axis q, then those plus the span on q; in float64
    offset by 2^52 + 2^51, where an integer below 2^51 is the low mantissa bits, so the int64
    view less the offset's bits is the index (no conversion pass, no small matrix product).
    The signed sum folds the corners in the same way: per axis, the high corners less the low
    ones.  Integer counts: exact, in any order."""
    d = len(spans)
    corners = np.empty((1 << d, len(base)))  # one row per corner: long inner loops
    np.add(base, _MAGIC, out=corners[0])
    for q in range(d):
        w = 1 << q
        np.add(corners[:w], spans[q], out=corners[w: 2 * w])
    index = corners.view(np.int64)
    index -= _MAGIC_BITS
    people = cube[index]
    for q in reversed(range(d)):
        w = 1 << q
        people = people[w: 2 * w] - people[:w]
    return people[0]


class CensusCounts:
    """Census people of the groups of any recoding, over fixed population cells.

    Holds the prefix-sum cube when the population's domain box has at most ``cube_limit``
    entries (``cube``: P[x] = people with every position_q < x_q, a zero row padding each axis;
    int32 when the population fits, halving the memory random reads miss on), so groups that
    are intervals cost 2^d reads each; other groups are counted by a scan of the cells."""

    def __init__(self, population: Cells | None, sizes: Sequence[int], cube_limit: int = CUBE_LIMIT) -> None:
        self.population = population
        self.cube: np.ndarray | None = None
        self.strides: list[int] = []  # the cube's element strides per axis
        shape = tuple(int(n) + 1 for n in sizes)
        if population is not None and 0 < int(np.prod(shape, dtype=np.float64)) <= cube_limit:
            self.cube = _prefix_cube(population, shape)
            self.strides = [s // self.cube.itemsize for s in self.cube.strides]

    @property
    def cube_flat(self) -> np.ndarray:
        assert self.cube is not None
        return self.cube.reshape(-1)

    def box(self, lows: Sequence[np.ndarray], highs: Sequence[np.ndarray]) -> np.ndarray:
        """People in each box [lows_q, highs_q] (inclusive, per QI) from the prefix cube."""
        assert self.cube is not None
        base = np.zeros(len(lows[0]) if len(lows) else 1, dtype=np.int64)
        spans = np.empty((len(lows), base.size), dtype=np.int64)
        for q, (lo, hi) in enumerate(zip(lows, highs)):
            base += lo * self.strides[q]
            spans[q] = (hi + 1 - lo) * self.strides[q]
        return box_people(self.cube_flat, base, spans).astype(np.float64)

    def census(self, rec: Recoding, ids: Sequence[np.ndarray], m: np.ndarray,
               keys: np.ndarray | None = None) -> np.ndarray:
        """Census people of the groups of ``rec`` given by their id per QI, distinct and sorted
        by their ids QI by QI (as ``group_cells`` and the full-domain search make them; their
        ``keys`` when at hand): box sums of the cube when the groups are intervals, else a scan.
        Without a population the sample is all there is: the sample counts ``m``."""
        if self.population is None:
            return m
        if self.cube is not None and rec.contiguous:
            lows, highs = [], []
            for q, qrec in enumerate(rec.qis):
                first, last = qrec.bounds()
                lows.append(first[ids[q]])
                highs.append(last[ids[q]])
            return self.box(lows, highs)
        return self._scan(rec, keys_of(ids, radix_of(rec)) if keys is None else keys)

    def group_sizes(self, rec: Recoding, ids: Sequence[np.ndarray], m: np.ndarray,
                    keys: np.ndarray | None = None) -> np.ndarray:
        """g = max(census, m) of the groups ``census`` takes (= m without a population)."""
        if self.population is None:
            return m
        return group_sizes(self.census(rec, ids, m, keys), m)

    def _scan(self, rec: Recoding, keys: np.ndarray) -> np.ndarray:
        """Every population cell located among the groups' sorted keys, its people summed in
        cell order into the group it falls in (cells of groups without sample records drop out)."""
        assert self.population is not None
        pop = self.population
        if not keys.size:
            return np.zeros(0)
        at, hit = locate(keys, cell_keys(rec, pop.positions))
        return np.bincount(at[hit], weights=pop.counts[hit], minlength=keys.size).astype(np.float64)


def _prefix_cube(population: Cells, shape: tuple[int, ...]) -> np.ndarray:
    """P[x] = people with every position_q < x_q (a zero row/column pads each axis); int32 when
    the population (its largest entry) fits."""
    flat = np.ravel_multi_index(tuple(population.positions[:, q] + 1 for q in range(len(shape))), shape) \
        if len(shape) else np.zeros(len(population), dtype=np.int64)
    cube = np.bincount(flat, weights=population.counts, minlength=int(np.prod(shape))).astype(np.int64)
    cube = cube.reshape(shape)
    for axis in range(len(shape)):
        np.cumsum(cube, axis=axis, out=cube)
    if cube.size and int(cube.max()) < 2**31:
        cube = np.ascontiguousarray(cube, dtype=np.int32)
    return cube
