"""Antichain prefix tree and list stores (seed 004) against a brute-force set of every insert."""

from __future__ import annotations

import random
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deid_sql.search.antichain import (
    AntichainTree,
    Direction,
    ListAntichainStore,
    ListStore,
    Node,
    PropertyStore,
    covers,
    leq,
    replay,
)

DIRECTIONS = [Direction.UP, Direction.DOWN]


def make_stores(direction: Direction, heights: list[int]) -> list[PropertyStore]:
    """The options of seed 004 Table 1; the tree answers by its closure (the default on a small
    lattice), by the bit-sliced index, or by the walk of the paper."""
    return [ListStore(direction), ListAntichainStore(direction), AntichainTree(direction, heights),
            AntichainTree(direction, heights, rank_pruning=False),
            AntichainTree(direction, heights, closure=False),
            AntichainTree(direction, heights, sliced=False, closure=False)]


def lattice_index(x: tuple[int, ...], heights: list[int]) -> int:
    """x's index in C order over the heights, written independently of the store's strides."""
    index = 0
    for v, h in zip(x, heights):
        index = index * h + v
    return index


class BruteForce:
    """Every inserted element kept; query = some stored y covers x, equality included."""

    def __init__(self, direction: Direction) -> None:
        self.direction = direction
        self.items: set[tuple[int, ...]] = set()

    def query(self, x: tuple[int, ...]) -> bool:
        return any(covers(self.direction, y, x) for y in self.items)

    def strict(self, x: tuple[int, ...]) -> bool:
        return any(covers(self.direction, y, x) and y != x for y in self.items)

    def extremes(self) -> set[tuple[int, ...]]:
        """Minimal (UP) / maximal (DOWN) inserted elements: what an antichain store must hold."""
        return {y for y in self.items if not any(z != y and covers(self.direction, z, y) for z in self.items)}


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[int], list[tuple[str, tuple[int, ...]]]]:
    heights = draw(st.lists(st.integers(1, 4), min_size=2, max_size=6))
    point = st.tuples(*[st.integers(0, h - 1) for h in heights])
    ops = draw(st.lists(st.tuples(st.sampled_from(["insert", "query", "query"]), point), max_size=60))
    return heights, ops


def assert_antichain(store: PropertyStore) -> None:
    items = list(store)
    assert len(items) == len(set(items)) == len(store)
    for a, b in combinations(items, 2):
        assert not leq(a, b) and not leq(b, a), (a, b)


def subtree_ranks(node: Node) -> list[int]:
    if not node.children:
        return [0]
    return [child.level + r for child in node.children.values() for r in subtree_ranks(child)]


def assert_tree_shape(tree: AntichainTree) -> None:
    """Every leaf at full depth, no empty inner node, each bound a valid min (UP) / max (DOWN) bound."""

    def check(node: Node, depth: int, prefix_rank: int) -> None:
        if depth == len(tree.heights):
            assert not node.children
            return
        assert node.children or depth == 0
        for level, child in node.children.items():
            assert child.level == level and 0 <= level < tree.heights[depth]
            ranks = [prefix_rank + level + r for r in subtree_ranks(child)]
            if tree.direction is Direction.UP:
                assert child.bound <= min(ranks)
            else:
                assert child.bound >= max(ranks)
            check(child, depth + 1, prefix_rank + level)

    check(tree.root, 0, 0)


@pytest.mark.slow
@pytest.mark.parametrize("direction", DIRECTIONS)
@settings(max_examples=150, deadline=None)
@given(scenario=scenarios())
def test_stores_match_brute_force(direction: Direction, scenario) -> None:
    heights, ops = scenario
    stores, brute = make_stores(direction, heights), BruteForce(direction)
    expected_queries = expected_hits = inserts = 0
    for op, x in ops:
        if op == "insert":
            brute.items.add(x)
            inserts += 1
            for store in stores:
                store.insert(x)
            for store in stores[1:]:
                assert_antichain(store)
                assert set(store) == brute.extremes()
            for tree in stores[2:]:
                assert_tree_shape(tree)
            # x is now stored or covered by a stored element, never strictly covered by one it is minimal to
            assert stores[2].range_query(x) == brute.strict(x)
            assert stores[3].range_query(x) is True  # Option 3 has no rank test to stop at x itself
        else:
            want = brute.query(x)
            expected_queries += 1
            expected_hits += want
            assert [store.query(x) for store in stores] == [want] * len(stores)
            assert stores[2].range_query(x) == brute.strict(x)
            assert stores[3].range_query(x) == want
    for store in stores:
        assert (store.queries, store.hits, store.inserts) == (expected_queries, expected_hits, inserts)
        assert store.max_size >= len(store)
    assert len(stores[0]) == inserts  # Option 1 keeps everything


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(scenario=scenarios())
def test_down_is_up_on_the_mirrored_lattice(scenario) -> None:
    """x ↦ (h_i − 1 − x_i) reverses the order, so a DOWN tree must answer as an UP tree on mirrored input."""
    heights, ops = scenario
    mirrored = [(op, tuple(h - 1 - v for v, h in zip(x, heights))) for op, x in ops]
    up, down = AntichainTree(Direction.UP, heights), AntichainTree(Direction.DOWN, heights)
    assert replay(up, ops) == replay(down, mirrored)
    assert {tuple(h - 1 - v for v, h in zip(x, heights)) for x in up} == set(down)


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_replay_agrees_on_a_long_log(direction: Direction) -> None:
    """A larger lattice and log than hypothesis draws, as the benchmark will replay."""
    rng = random.Random(4)
    heights = [5, 3, 6, 2, 4, 5]
    ops = [("insert" if rng.random() < 0.3 else "query", tuple(rng.randrange(h) for h in heights))
           for _ in range(1500)]
    brute = BruteForce(direction)
    want = []
    for op, x in ops:
        if op == "insert":
            brute.items.add(x)
        else:
            want.append(brute.query(x))
    stores = make_stores(direction, heights)
    for store in stores:
        assert replay(store, ops) == want
    for store in stores[1:]:
        assert set(store) == brute.extremes() and store.max_size == stores[1].max_size
    for tree in stores[2:]:
        assert_tree_shape(tree)


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_query_at_is_query(direction: Direction) -> None:
    """A search that knows x's lattice index asks ``query_at``: the same answers and counters as
    ``query`` for every store, whether it reads its closure or not."""
    rng = random.Random(21)
    heights = [5, 3, 6, 2, 4, 5]
    ops = [("insert" if rng.random() < 0.2 else "query", tuple(rng.randrange(h) for h in heights))
           for _ in range(1500)]
    for by_tuple, by_index in zip(make_stores(direction, heights), make_stores(direction, heights)):
        want = replay(by_tuple, ops)
        got = []
        for op, x in ops:
            if op == "insert":
                by_index.insert(x)
            else:
                got.append(by_index.query_at(lattice_index(x, heights), x))
        assert got == want
        assert (by_index.queries, by_index.hits, by_index.inserts) == (by_tuple.queries, by_tuple.hits,
                                                                       by_tuple.inserts)


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_closure_is_materialized_on_small_lattices_only(direction: Direction, monkeypatch) -> None:
    """The byte-per-transformation closure is kept up to CLOSURE_LIMIT transformations; above it
    the tree answers by its bit-sliced index, with the same answers."""
    from deid_sql.search import antichain

    heights = [4, 4, 4]
    assert AntichainTree(direction, heights).closure
    monkeypatch.setattr(antichain, "CLOSURE_LIMIT", 63)
    big = AntichainTree(direction, heights)
    assert not big.closure and len(big._flags) == 0
    small = AntichainTree(direction, heights, closure=True)
    for x in [(1, 2, 0), (3, 0, 1), (0, 0, 3)]:
        big.insert(x)
        small.insert(x)
    points = [(a, b, c) for a in range(4) for b in range(4) for c in range(4)]
    assert [big.query(x) for x in points] == [small.query(x) for x in points]


def test_paper_worked_example() -> None:
    """Fig. 3: (1,1,1), (1,3,0), (3,2,0) for P↑; (1,2,2) is associated via (1,1,1)."""
    tree = AntichainTree(Direction.UP, [4, 4, 4])
    for x in [(1, 1, 1), (1, 3, 0), (3, 2, 0)]:
        tree.insert(x)
    assert set(tree) == {(1, 1, 1), (1, 3, 0), (3, 2, 0)} and len(tree) == 3
    assert sorted(tree.root.children) == [1, 3]
    assert tree.root.children[1].bound == 3  # n.min: min(rank(1,1,1), rank(1,3,0))
    assert tree.root.children[3].bound == 5  # pruned by the query below: 5 ≥ rank(1,2,2)
    assert tree.root.children[1].children[1].bound == 3
    assert tree.root.children[1].children[3].bound == 4
    assert tree.range_query((1, 2, 2)) is True
    assert tree.query((1, 2, 2)) is True
    assert tree.query((1, 2, 0)) is False and tree.query((0, 3, 3)) is False
    assert (tree.queries, tree.hits, tree.inserts, tree.max_size) == (3, 1, 3, 3)


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_stored_element_is_associated_with_itself(direction: Direction) -> None:
    """The paper's range query misses x itself; query adds the exact lookup."""
    for store in make_stores(direction, [3, 3]):
        store.insert((1, 2))
        assert store.query((1, 2)) is True
    tree, plain_tree = AntichainTree(direction, [3, 3]), AntichainTree(direction, [3, 3], rank_pruning=False)
    tree.insert((1, 2))
    plain_tree.insert((1, 2))
    assert tree.range_query((1, 2)) is False and tree.contains((1, 2))
    assert plain_tree.range_query((1, 2)) is True


def test_counters_and_antichain_size() -> None:
    for store in [ListAntichainStore(Direction.UP), AntichainTree(Direction.UP, [4, 4])]:
        store.insert((2, 2))
        store.insert((3, 3))  # associated via (2,2): no-op, still counted
        assert list(store) == [(2, 2)] and store.inserts == 2
        store.insert((0, 3))
        store.insert((3, 0))
        assert len(store) == store.max_size == 3
        store.insert((1, 1))  # makes (2,2) redundant
        assert set(store) == {(0, 3), (3, 0), (1, 1)} and len(store) == 3
        store.insert((0, 0))  # covers everything
        assert list(store) == [(0, 0)] and len(store) == 1 and store.max_size == 3
        assert [store.query(x) for x in [(0, 0), (3, 3), (2, 1)]] == [True] * 3
        assert (store.queries, store.hits, store.inserts) == (3, 3, 6)
    plain = ListStore(Direction.UP)
    replay(plain, [("insert", (2, 2)), ("insert", (2, 2)), ("insert", (0, 0)), ("query", (1, 0)), ("query", (5, 5))])
    assert len(plain) == plain.max_size == 3 and (plain.queries, plain.hits, plain.inserts) == (2, 2, 3)


def test_down_tree_removes_specializations() -> None:
    tree = AntichainTree(Direction.DOWN, [4, 4, 4])
    for x in [(0, 1, 2), (1, 0, 0), (2, 2, 0)]:
        tree.insert(x)
    assert set(tree) == {(0, 1, 2), (2, 2, 0)}  # (1,0,0) ≺ (2,2,0)
    tree.insert((3, 3, 3))
    assert list(tree) == [(3, 3, 3)] and tree.root.children[3].bound == 9
    assert tree.query((0, 0, 0)) and tree.query((3, 3, 3))


def test_emptied_tree_and_iteration() -> None:
    tree = AntichainTree(Direction.UP, [2, 2])
    assert list(tree) == [] and len(tree) == 0 and tree.query((1, 1)) is False
    assert tree.range_query((0, 0)) is False


def test_bad_input() -> None:
    tree = AntichainTree(Direction.UP, [2, 3])
    with pytest.raises(ValueError):
        tree.insert((0, 3))
    with pytest.raises(ValueError):
        tree.query((0, 0, 0))
    with pytest.raises(ValueError):
        tree.query((-1, 0))
    assert tree.queries == tree.inserts == 0
    with pytest.raises(ValueError):
        AntichainTree(Direction.UP, [])
    with pytest.raises(ValueError):
        AntichainTree(Direction.UP, [2, 0])
    with pytest.raises(ValueError):
        replay(tree, [("delete", (0, 0))])
