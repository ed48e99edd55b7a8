"""Stores for predictive properties: the antichain prefix tree (seed 004) and two list baselines.

A predictive property is inherited along the generalization order, so a search only
has to remember the transformations where it was *observed*; whether any other
transformation x has it follows from the order.  Transformations are tuples of
generalization levels, one per attribute; y ≼ x iff y_i ≤ x_i for every i, and the
rank of x is sum(x).

* ``Direction.UP`` (P↑, inherited by generalizations): x has the property iff some
  stored y has y ≼ x.
* ``Direction.DOWN`` (P↓, inherited by specializations): x has it iff some stored y
  has x ≼ y.

The three stores are the paper's Table 1 options, so a benchmark can replay one
recorded operation log (``replay``) through each of them:

* ``ListStore`` — Option 1, a plain list;
* ``ListAntichainStore`` — Option 2, a list kept an antichain;
* ``AntichainTree`` — Option 4, the prefix tree with rank bounds
  (``rank_pruning=False`` gives Option 3, the same tree without them).

All of them answer every query identically; they differ only in the work done.

How the prefix tree answers a query (issue 21).  The paper's range query walks the tree;
here, on a lattice of at most ``CLOSURE_LIMIT`` transformations, the tree also keeps the
*closure* of its antichain materialized — one byte per transformation of the lattice, set
for every transformation that has the property — so a query is one byte read at x's index
(``query_at`` takes the index a search already has), and an insert, which is rare (hundreds
against tens of thousands of queries in a search on Adult), sets the box of x's
generalizations (UP) / specializations (DOWN) with one numpy slice assignment.  This is
what ARX does with its materialized lattice: Adult's 12,960 transformations take 12,960
bytes per property.  On a larger lattice the query is answered bit-parallel by a
bit-sliced index over the antichain (one int per attribute and level whose bit s says
whether the s-th stored element passes the property on at that attribute and level: the
AND over the attributes, 9 big-int operations); the recursive walk of the paper, made
iterative, stays as ``sliced=False`` for the Table 1 comparison.  The tree and its
antichain are kept in every variant (iteration, sizes, the Table 2 statistics).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from enum import Enum
from functools import reduce
from operator import and_, getitem, lt, mul

import numpy as np

Transformation = tuple[int, ...]
CLOSURE_LIMIT = 1 << 22  # transformations: up to 4 MB per property store for the byte-per-transformation closure


class Direction(Enum):
    """Which way a property is inherited: UP to generalizations (P↑), DOWN to specializations (P↓)."""

    UP = "up"
    DOWN = "down"


def leq(x: Sequence[int], y: Sequence[int]) -> bool:
    """x ≼ y: x is a specialization of (or equal to) y."""
    return all(a <= b for a, b in zip(x, y))


def covers(direction: Direction, stored: Sequence[int], x: Sequence[int]) -> bool:
    """Whether ``stored`` passes the property on to ``x`` (equality included)."""
    return leq(stored, x) if direction is Direction.UP else leq(x, stored)


class PropertyStore(ABC):
    """What a search needs from a property store, plus the counters Table 2 of the paper reports.

    ``query``/``insert`` are template methods: the counters live here once, so every
    option counts the same events and a benchmark compares like with like.  Internal
    look-ups (an insert checking whether x is already associated) are not counted.
    """

    def __init__(self, direction: Direction) -> None:
        self.direction = direction
        self.queries = 0  # calls to query()
        self.hits = 0  # queries answered True
        self.inserts = 0  # calls to insert(), no-ops included
        self.max_size = 0  # largest len(self) seen after an insert

    def query(self, x: Sequence[int]) -> bool:
        """Whether x has the property, i.e. some stored element covers it in ``direction``."""
        found = self._query(tuple(x))
        self.queries += 1
        self.hits += found
        return found

    def query_at(self, index: int, x: Transformation) -> bool:
        """``query(x)`` for a caller that also knows x's index in the lattice (C order over the
        heights, the first attribute most significant); a store that materializes its closure
        answers by the index, the others by x."""
        return self.query(x)

    def insert(self, x: Sequence[int]) -> None:
        """Record that x has the property."""
        self._insert(tuple(x))
        self.inserts += 1
        self.max_size = max(self.max_size, len(self))

    @abstractmethod
    def _query(self, x: Transformation) -> bool: ...

    @abstractmethod
    def _insert(self, x: Transformation) -> None: ...

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def __iter__(self) -> Iterator[Transformation]: ...


class ListStore(PropertyStore):
    """Option 1: append every insert, scan everything on a query.

    Cheapest insert, no invariant: the list may hold comparable elements and
    duplicates, so ``len`` is the number of inserts, not an antichain size.
    """

    def __init__(self, direction: Direction) -> None:
        super().__init__(direction)
        self._items: list[Transformation] = []

    def _query(self, x: Transformation) -> bool:
        return any(covers(self.direction, y, x) for y in self._items)

    def _insert(self, x: Transformation) -> None:
        self._items.append(x)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Transformation]:
        return iter(self._items)


class ListAntichainStore(ListStore):
    """Option 2: a list kept an antichain, so queries scan only the minimal (UP) / maximal (DOWN) elements.

    An insert of an already associated x is a no-op (x adds nothing); otherwise every
    stored y that x now covers is dropped, because x answers for it and its heirs.
    """

    def _insert(self, x: Transformation) -> None:
        if self._query(x):
            return
        self._items = [y for y in self._items if not covers(self.direction, x, y)]
        self._items.append(x)


class Node:
    """A prefix-tree node: the paper's n.level, n.children and n.min (UP) / n.max (DOWN).

    ``bound`` holds n.min for an UP tree and n.max for a DOWN tree.  It is a *bound*
    on the ranks in the subtree, not always their exact extreme: as in the paper it
    is not raised (UP) / lowered (DOWN) when removals empty part of the subtree.
    That is safe — queries only need a lower (upper) bound to skip a subtree — and it
    is exact for any subtree from which nothing was removed.
    """

    __slots__ = ("level", "children", "bound", "order")

    def __init__(self, level: int, bound: int) -> None:
        self.level = level
        self.children: dict[int, Node] = {}
        self.bound = bound
        # the children again, in the order a range query visits them: ascending levels in an UP
        # tree, descending in a DOWN tree, so the scan stops at the first level past x_i
        self.order: list[Node] = []


def _ascending(node: Node) -> int:
    return node.level


def _descending(node: Node) -> int:
    return -node.level


class AntichainTree(PropertyStore):
    """Options 4 (and 3): the antichain prefix tree of Prasser, Kohlmayer and Kuhn (BMC 2016).

    Depth i of the tree holds generalization levels of attribute i, and each
    root-to-leaf path is one stored transformation.  A query is a range query that
    follows only children that can lead to a specialization of x (UP: level ≤ x_i,
    n.min < rank(x)); the rank bound skips whole subtrees that the level test would
    enter.  The stored set is kept an antichain, so the tree holds only the minimal
    (UP) / maximal (DOWN) elements ever inserted.

    Two departures from the paper, both so the store is correct for every call
    sequence rather than only the one the BFS makes:

    * the rank-pruned range query only finds strict specializations
      (rank(y) < rank(x)), so ``query`` follows a negative range query with an
      exact lookup of x — a stored x is associated with itself;
    * ``insert`` of an already associated x is a no-op (the paper omits the check
      because a search never inserts a transformation it has pruned).
    """

    def __init__(self, direction: Direction, heights: Sequence[int], *, rank_pruning: bool = True,
                 sliced: bool = True, closure: bool | None = None) -> None:
        super().__init__(direction)
        if not heights or any(h < 1 for h in heights):
            raise ValueError(f"heights must be a non-empty sequence of positive ints, got {list(heights)}")
        self.heights = tuple(heights)
        self.rank_pruning = rank_pruning
        self.sliced = sliced
        self._up = direction is Direction.UP
        self._depth = len(self.heights)
        self.root = Node(-1, 0)
        self._size = 0
        # the bit-sliced index over the stored elements (the tree's leaves): each gets a slot s,
        # and bit s of _covering[i][v] is set iff the element passes the property on at attribute i
        # to level v (UP: y_i <= v; DOWN: y_i >= v); _covered[i][v] is the reverse relation, which
        # an insert needs to find the elements it makes redundant
        self._covering = [[0] * h for h in self.heights]
        self._covered = [[0] * h for h in self.heights]
        self._slots: dict[Transformation, int] = {}
        self._elements: dict[int, Transformation] = {}
        self._free: list[int] = []
        # the closure (see the module docstring): None = materialize it when the lattice is small enough
        size = math.prod(self.heights)
        self.closure = size <= CLOSURE_LIMIT if closure is None else closure
        self._strides = tuple(math.prod(self.heights[i + 1:]) for i in range(self._depth))
        self._flags = bytearray(size if self.closure else 0)  # read per query: a bytearray read is an int
        self._box = np.frombuffer(self._flags, dtype=np.uint8).reshape(self.heights) if self.closure else None
        # per attribute and level, the slice of the levels that x_i = level passes the property on to
        self._reach = [[slice(v, None) if self._up else slice(0, v + 1) for v in range(h)] for h in self.heights]

    def _check(self, x: Transformation) -> None:
        # map over C-level comparisons: this runs on every query of a search
        if len(x) != self._depth or (x and min(x) < 0) or not all(map(lt, x, self.heights)):
            raise ValueError(f"transformation {x} does not fit heights {self.heights}")

    def range_query(self, x: Sequence[int]) -> bool:
        """The paper's range query: is some stored y a specialization (UP) / generalization (DOWN) of x?

        Not counted in the counters.  With rank pruning (Option 4) it is strict — the
        test n.min < rank(x) stops it before x itself; without it (Option 3) nothing
        does, and it also finds a stored x.
        """
        x = tuple(x)
        self._check(x)
        return self._range(x, sum(x))

    def _range(self, x: Transformation, rank: int) -> bool:
        """Depth-first over an explicit stack of (node, depth): no Python call per node.

        Children are scanned in ``Node.order``, so the level test ends the scan (``break``)
        instead of being evaluated for every child; the rank bound skips single children."""
        last = self._depth - 1
        prune = self.rank_pruning
        stack: list[tuple[Node, int]] = [(self.root, 0)]
        pop, push = stack.pop, stack.append
        if self._up:
            while stack:
                node, depth = pop()
                xi = x[depth]
                for child in node.order:
                    if child.level > xi:
                        break
                    if prune and child.bound >= rank:
                        continue
                    if depth == last:
                        return True  # a leaf: a stored y ≼ x
                    push((child, depth + 1))
        else:
            while stack:
                node, depth = pop()
                xi = x[depth]
                for child in node.order:
                    if child.level < xi:
                        break
                    if prune and child.bound <= rank:
                        continue
                    if depth == last:
                        return True  # a leaf: a stored y ≽ x
                    push((child, depth + 1))
        return False

    def contains(self, x: Sequence[int]) -> bool:
        """Exact lookup: one path with level = x_i at depth i."""
        node: Node | None = self.root
        for v in x:
            node = node.children.get(v)
            if node is None:
                return False
        return len(x) == self._depth

    def query_at(self, index: int, x: Transformation) -> bool:
        if not self.closure:
            return self.query(x)
        found = self._flags[index]
        self.queries += 1
        self.hits += found
        return found == 1

    def _query(self, x: Transformation) -> bool:
        if self.closure:
            self._check(x)
            return self._flags[sum(map(mul, x, self._strides))] == 1
        if self.sliced:  # _check inlined: a level past the top is caught by the index
            if len(x) != self._depth or min(x) < 0:
                self._check(x)
            try:
                return reduce(and_, map(getitem, self._covering, x)) != 0
            except (IndexError, TypeError):
                self._check(x)
                raise
        self._check(x)
        # Option 3's range query already finds a stored x; only Option 4 needs the lookup.
        return self._range(x, sum(x)) or (self.rank_pruning and self.contains(x))

    def _insert(self, x: Transformation) -> None:
        if self._query(x):
            return
        if self.sliced:
            # the elements x makes redundant are known from the index: remove exactly their paths
            redundant = reduce(and_, map(getitem, self._covered, x))
            while redundant:
                low = redundant & -redundant
                y = self._elements[low.bit_length() - 1]
                self._unslice(y)
                self._delete_path(y)
                redundant ^= low
        else:
            self._size -= self._remove(self.root, 0, x)
        self._slice(x)
        rank, up = sum(x), self._up
        node = self.root
        for v in x:
            child = node.children.get(v)
            if child is None:
                child = node.children[v] = Node(v, rank)
                node.order.insert(bisect_left(node.order, v if up else -v, key=_ascending if up else _descending),
                                  child)
            elif up:
                child.bound = min(child.bound, rank)
            else:
                child.bound = max(child.bound, rank)
            node = child
        self._size += 1
        if self._box is not None:  # x's generalizations (UP) / specializations (DOWN) now have the property
            self._box[tuple(map(getitem, self._reach, x))] = 1

    def _remove(self, node: Node, depth: int, x: Transformation) -> int:
        """Drop every stored y that x covers (UP: x ≼ y, a "≥" range query); return how many.

        Children emptied on the way back are pruned, so every leaf sits at full depth
        and every inner node has a child.  No rank pruning here: with only n.min (UP)
        there is no upper bound on a subtree's ranks to compare against.
        """
        if depth == self._depth:
            return 1
        xi, up, removed = x[depth], self._up, 0
        for level in [lv for lv in node.children if (lv >= xi if up else lv <= xi)]:
            child = node.children[level]
            k = self._remove(child, depth + 1, x)
            if k:
                removed += k
                if not child.children:
                    del node.children[level]
                    node.order.remove(child)
        return removed

    def _delete_path(self, y: Transformation) -> None:
        """Remove the stored y's leaf and the inner nodes it leaves empty (what ``_remove`` does
        for y, without searching the tree for it)."""
        path = [self.root]
        for v in y:
            path.append(path[-1].children[v])
        for parent, child in zip(reversed(path[:-1]), reversed(path[1:])):
            if child.children:
                break
            del parent.children[child.level]
            parent.order.remove(child)
        self._size -= 1

    def _slice(self, x: Transformation) -> None:
        """Give x a slot and set its bits."""
        slot = self._free.pop() if self._free else len(self._slots)
        self._slots[x], self._elements[slot] = slot, x
        bit = 1 << slot
        for i, (v, h) in enumerate(zip(x, self.heights)):
            more, less = (range(v, h), range(v + 1)) if self._up else (range(v + 1), range(v, h))
            covering, covered = self._covering[i], self._covered[i]
            for level in more:
                covering[level] |= bit
            for level in less:
                covered[level] |= bit

    def _unslice(self, y: Transformation) -> None:
        """Clear the bits of a stored y that an insert made redundant and free its slot."""
        slot = self._slots.pop(y)
        del self._elements[slot]
        self._free.append(slot)
        keep = ~(1 << slot)
        for covering, covered in zip(self._covering, self._covered):
            for level in range(len(covering)):
                covering[level] &= keep
                covered[level] &= keep

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Transformation]:
        def walk(node: Node, prefix: tuple[int, ...]) -> Iterator[Transformation]:
            if len(prefix) == self._depth:
                yield prefix
            for level, child in node.children.items():
                yield from walk(child, prefix + (level,))

        return walk(self.root, ())


def replay(store: PropertyStore, operations: Iterable[tuple[str, Sequence[int]]]) -> list[bool]:
    """Run a recorded log of ("insert" | "query", x) operations; return the query answers in order.

    Lets a benchmark time every option on the same log and check that they agree.
    """
    results: list[bool] = []
    for op, x in operations:
        if op == "query":
            results.append(store.query(x))
        elif op == "insert":
            store.insert(x)
        else:
            raise ValueError(f"unknown operation {op!r}; expected 'insert' or 'query'")
    return results
