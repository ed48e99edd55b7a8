"""The group module (``evaluate.groups``): every way it counts the census people of a group —
prefix cube, scan of the population cells, sorted-key lookup — equals a dict over the cells,
on random small cells and recodings, with int64 keys and past the key limit (object keys)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deid_sql.domains.recoding import QIRecoding, Recoding
from deid_sql.evaluate import groups
from deid_sql.evaluate.groups import (
    CensusCounts,
    PeopleByKey,
    box_people,
    digit_groups,
    group_cells,
    group_sizes,
    keys_of,
)
from deid_sql.loading.cells import Cells
from deid_sql.release.figures import Census

Key = tuple[int, ...]


def _recoding(draw: st.DrawFn, size: int) -> QIRecoding:
    """Intervals (a lattice policy) or any value -> group map, ids renumbered 0..k-1."""
    if draw(st.booleans()):
        bits = draw(st.lists(st.booleans(), min_size=size - 1, max_size=size - 1))
        raw = np.concatenate(([0], np.cumsum(np.asarray(bits, dtype=np.int64)))).astype(np.int64)
    else:
        raw = np.asarray(draw(st.lists(st.integers(0, size - 1), min_size=size, max_size=size)), dtype=np.int64)
    _, gid = np.unique(raw, return_inverse=True)
    gid = gid.ravel().astype(np.int64)
    return QIRecoding(gid, tuple(f"g{g}" for g in range(int(gid.max()) + 1)))


def _cells(draw: st.DrawFn, sizes: Sequence[int], low: int, high: int, weights: bool = False) -> Cells:
    """Distinct cells (as a GROUP BY gives them) with counts in [low, high] (tenths with ``weights``)."""
    rows = draw(st.lists(st.tuples(*[st.integers(0, n - 1) for n in sizes]), min_size=1, max_size=30, unique=True))
    counts = draw(st.lists(st.integers(low, high), min_size=len(rows), max_size=len(rows)))
    positions = np.asarray(rows, dtype=np.int32).reshape(len(rows), len(sizes))
    return Cells(positions, np.asarray(counts, dtype=np.float64) / 10 if weights else np.asarray(counts, np.int64))


@st.composite
def problems(draw: st.DrawFn, weights: bool = False) -> tuple[Recoding, Cells, Cells, list[int]]:
    sizes = draw(st.lists(st.integers(1, 6), min_size=1, max_size=4))
    rec = Recoding(tuple(_recoding(draw, n) for n in sizes))
    return rec, _cells(draw, sizes, 1, 5), _cells(draw, sizes, 0, 40, weights), sizes


def _ids(rec: Recoding, positions: np.ndarray) -> list[Key]:
    return [tuple(int(q.group_of[p]) for q, p in zip(rec.qis, row)) for row in positions]


def _reference(rec: Recoding, sample: Cells, population: Cells) -> tuple[list[Key], list[float], list[float]]:
    """Sample groups sorted by their ids, their m, and census people: dicts over the cells, in cell order."""
    m: dict[Key, float] = defaultdict(float)
    for key, n in zip(_ids(rec, sample.positions), sample.counts.tolist()):
        m[key] += n
    people: dict[Key, float] = defaultdict(float)
    for key, n in zip(_ids(rec, population.positions), population.counts.tolist()):
        people[key] += n
    keys = sorted(m)
    return keys, [m[k] for k in keys], [people.get(k, 0.0) for k in keys]


def _check(rec: Recoding, sample: Cells, population: Cells, sizes: list[int], cube_limit: int) -> None:
    keys, m_ref, census_ref = _reference(rec, sample, population)
    grouped = group_cells(rec, sample, cell_group=True)
    assert list(zip(*[q.tolist() for q in grouped.ids])) == keys
    assert grouped.m.tolist() == m_ref
    assert grouped.cell_group is not None
    assert [keys[g] for g in grouped.cell_group.tolist()] == _ids(rec, sample.positions)
    assert list(grouped.keys) == sorted(set(grouped.keys.tolist())), "keys sorted and distinct"

    counts = CensusCounts(population, sizes, cube_limit)
    assert (counts.cube is not None) == (math.prod(n + 1 for n in sizes) <= cube_limit)
    census = counts.census(rec, grouped.ids, grouped.m, grouped.keys)
    assert census.tolist() == census_ref  # cube (intervals) or scan, with the keys at hand
    assert counts.census(rec, grouped.ids, grouped.m).tolist() == census_ref  # keys made from the ids
    g = counts.group_sizes(rec, grouped.ids, grouped.m)
    assert g.tolist() == [max(c, n) for c, n in zip(census_ref, m_ref)]
    assert np.array_equal(group_sizes(census, grouped.m), g)

    table = PeopleByKey.of_cells(rec, population)
    assert table.lookup(grouped.keys).tolist() == census_ref  # the gate's sorted-key lookup
    # the gate's Census, from the cells and from people per label tuple (a batch's census query)
    labels = [q.labels for q in rec.qis]
    gate = Census.from_cells(rec, population, int(sample.counts.sum()))
    assert gate.people(gate.key_of(grouped.ids)).tolist() == census_ref
    mapping: dict[tuple[str, ...], float] = defaultdict(float)
    for key, n in zip(_ids(rec, population.positions), population.counts.tolist()):
        mapping[tuple(labels[q][g] for q, g in enumerate(key))] += n
    batch = Census.from_mapping(labels, dict(mapping), gate.total)
    assert batch.people(batch.key_of(grouped.ids)).tolist() == census_ref


@settings(max_examples=150, deadline=None)
@given(problems(), st.sampled_from([None, 1, 5]), st.booleans())
def test_cube_scan_and_lookup_equal_a_dict(case: tuple[Recoding, Cells, Cells, list[int]], limit: int | None,
                                           cube: bool) -> None:
    """``limit``: the key limit forced down, so keys are Python integers (object arrays)."""
    rec, sample, population, sizes = case
    with pytest.MonkeyPatch.context() as mp:
        if limit is not None:
            mp.setattr(groups, "KEY_LIMIT", limit)
        wide = math.prod(q.n_groups for q in rec.qis) >= (limit or 2**62)
        assert groups.fits([q.n_groups for q in rec.qis]) == (not wide)
        assert (group_cells(rec, sample).keys.dtype == object) == wide
        _check(rec, sample, population, sizes, 16_000_000 if cube else 0)


@settings(max_examples=60, deadline=None)
@given(problems(weights=True), st.sampled_from([None, 1]))
def test_summed_weights_are_summed_in_cell_order(case: tuple[Recoding, Cells, Cells, list[int]],
                                                 limit: int | None) -> None:
    """Fractional people (``[weights]``: no cube) come out bit for bit as a sum in cell order."""
    rec, sample, population, sizes = case
    with pytest.MonkeyPatch.context() as mp:
        if limit is not None:
            mp.setattr(groups, "KEY_LIMIT", limit)
        _check(rec, sample, population, sizes, 0)


def test_many_large_domains_pass_the_key_limit() -> None:
    """Five kept QIs of 8,192 values: a key space of 2^65, keys as Python integers, no cube."""
    rng = np.random.default_rng(5)
    sizes = [8192] * 5
    rec = Recoding(tuple(QIRecoding(np.arange(n), tuple(str(v) for v in range(n))) for n in sizes))
    assert not groups.fits([q.n_groups for q in rec.qis])
    positions = rng.integers(0, 8192, size=(40, 5)).astype(np.int32)
    positions = np.unique(positions, axis=0)
    sample = Cells(positions[:25], rng.integers(1, 4, 25))
    population = Cells(np.concatenate([positions[10:], positions[:3] ^ 1]), rng.integers(0, 50, positions.shape[0] - 7))
    grouped = group_cells(rec, sample)
    assert grouped.keys.dtype == object and max(grouped.keys) >= 2**62
    _check(rec, sample, population, sizes, 16_000_000)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_box_people_is_the_sum_over_the_box(data: st.DataObject) -> None:
    sizes = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
    population = _cells(data.draw, sizes, 0, 30)
    counts = CensusCounts(population, sizes)
    dense = np.zeros(sizes, dtype=np.int64)
    np.add.at(dense, tuple(population.positions.T), population.counts)
    boxes = [[sorted(data.draw(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)))) for n in sizes]
             for _ in range(data.draw(st.integers(1, 6)))]
    lows = [np.array([b[q][0] for b in boxes]) for q in range(len(sizes))]
    highs = [np.array([b[q][1] for b in boxes]) for q in range(len(sizes))]
    expected = [float(dense[tuple(slice(lo, hi + 1) for lo, hi in b)].sum()) for b in boxes]
    assert counts.box(lows, highs).tolist() == expected
    base = sum(lo * s for lo, s in zip(lows, counts.strides))
    spans = [(hi + 1 - lo) * s for lo, hi, s in zip(lows, highs, counts.strides)]
    assert box_people(counts.cube_flat, base.astype(np.float64), spans).tolist() == expected


@settings(max_examples=100, deadline=None)
@given(st.data(), st.sampled_from([None, 2, 50]))
def test_digit_groups_renumber_before_the_limit(data: st.DataObject, limit: int | None) -> None:
    """Rows grouped by digit tuples, in the tuples' order, whether or not the keys are renumbered."""
    sizes = data.draw(st.lists(st.integers(1, 9), min_size=1, max_size=5))
    rows = data.draw(st.lists(st.tuples(*[st.integers(0, n - 1) for n in sizes]), min_size=1, max_size=40))
    digits = [np.array([r[q] for r in rows], dtype=np.int64) for q in range(len(sizes))]
    with pytest.MonkeyPatch.context() as mp:
        if limit is not None:
            mp.setattr(groups, "KEY_LIMIT", limit)
        first, group = digit_groups(digits, sizes)
    order = sorted(set(rows))
    assert [rows[i] for i in first.tolist()] == order
    assert [order[g] for g in group.tolist()] == rows


def test_keys_past_the_limit_are_python_integers() -> None:
    ids = [np.array([1, 0]), np.array([2, 3])]
    assert keys_of(ids, [2, 4]).tolist() == [6, 3] and keys_of(ids, [2, 4]).dtype == np.int64
    big = keys_of(ids, [2**40, 2**40])
    assert big.dtype == object and big.tolist() == [2**40 + 2, 3]
    assert [type(k) for k in big] == [int, int]
