"""The attribute-disclosure figures (``evaluate/attribute.py``, METHODS decision 15) equal their
definitions computed densely, group by group and value by value, on random counts (hypothesis)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from deid_sql.evaluate import attribute as A


@st.composite
def counts(draw: st.DrawFn) -> tuple[A.ValueCounts, np.ndarray]:
    """Random f_G(v) (dense, G × V) and its ValueCounts; n_G at least the largest f_G(v)."""
    groups, values = draw(st.integers(1, 5)), draw(st.integers(1, 6))
    rows = draw(st.lists(st.lists(st.integers(0, 4), min_size=values, max_size=values), min_size=groups,
                         max_size=groups))
    dense = np.array(rows, dtype=np.float64)
    g, v = np.nonzero(dense)
    extra = draw(st.lists(st.integers(0, 3), min_size=groups, max_size=groups))
    size = dense.max(axis=1) + np.array(extra)
    return A.ValueCounts.of(g, v, dense[g, v], size, values), dense


def _shares(dense: np.ndarray) -> np.ndarray:
    total = dense.sum(axis=1)
    return dense / np.where(total > 0, total, 1.0)[:, None]


@settings(max_examples=200, deadline=None)
@given(counts(), st.integers(1, 4), st.floats(0.1, 3.0))
def test_l_diversity_and_confidence_equal_their_definitions(case: tuple[A.ValueCounts, np.ndarray], l: int,  # noqa: E741
                                                            c: float) -> None:
    vc, dense = case
    p = _shares(dense)
    assert np.array_equal(A.distinct_l(vc), (dense > 0).sum(axis=1))
    entropy = np.array([-sum(x * math.log(x) for x in row if x > 0) for row in p])
    assert np.allclose(A.entropy_l(vc), np.exp(entropy))
    expected = []
    for row in dense:
        r = sorted((x for x in row if x > 0), reverse=True)
        expected.append(len(r) >= l and r[0] < c * sum(r[l - 1:]))
    assert list(A.recursive_cl(vc, c, l)) == expected
    size = vc.size
    assert np.allclose(A.confidence(vc), dense.max(axis=1) / np.where(size > 0, size, 1.0))


@settings(max_examples=200, deadline=None)
@given(counts(), st.integers(0, 2**32 - 1), st.sampled_from([None, True, False]))
def test_t_distances_equal_their_definitions(case: tuple[A.ValueCounts, np.ndarray], seed: int,
                                             block: bool | None) -> None:
    """Each way of computing (on the group × value block, on the entries' runs, or the choice by
    size) equals the definition."""
    vc, dense = case
    groups, values = dense.shape
    q = np.random.default_rng(seed).dirichlet(np.ones(values))
    p = _shares(dense)
    held = dense.sum(axis=1) > 0
    assert np.allclose(A.t_equal(vc, q)[held], 0.5 * np.abs(p - q).sum(axis=1)[held])
    if values > 1:
        ordered = np.abs(np.cumsum(p - q, axis=1)).sum(axis=1) / (values - 1)
        assert np.allclose(A.t_ordered(vc, q, block)[held], ordered[held])
    # a two-level hierarchy over the codes: pairs, then the root (heights 1 and 2 of 2)
    pairs = np.arange(values) // 2
    root = np.zeros(int(pairs.max()) + 1, dtype=np.int64)
    got = A.t_hierarchical(vc, q, [pairs, root], block)
    for g in np.flatnonzero(held):
        extra = p[g] - q
        cost, rolled = 0.0, []
        for node in range(len(root)):
            children = extra[pairs == node]
            cost += 0.5 * min(children[children > 0].sum(), -children[children < 0].sum())
            rolled.append(children.sum())
        top = np.array(rolled)
        cost += 1.0 * min(top[top > 0].sum(), -top[top < 0].sum())
        assert math.isclose(got[g], cost, abs_tol=1e-9)


@settings(max_examples=100, deadline=None)
@given(counts(), st.lists(st.booleans(), min_size=5, max_size=5))
def test_among_keeps_the_chosen_groups_in_order(case: tuple[A.ValueCounts, np.ndarray], chosen: list[bool]) -> None:
    """``among`` (the groups an attribute model still judges) equals the counts of those rows alone."""
    vc, dense = case
    keep = np.array(chosen[:vc.groups])
    sub = vc.among(keep)
    rows = dense[keep]
    g, v = np.nonzero(rows)
    assert sub.groups == int(keep.sum())
    assert np.array_equal(sub.group, g) and np.array_equal(sub.value, v)
    assert np.array_equal(sub.persons, rows[g, v]) and np.array_equal(sub.size, vc.size[keep])
    assert vc.among(None) is vc


def test_persons_count_once_per_group_and_value() -> None:
    """A person with the same value on two rows counts once; with two values, once under each."""
    rows = [(1, 0, 0), (1, 0, 0), (1, 0, 1), (2, 0, 0), (3, 1, None), (4, 1, 2)]
    vc = A.reference(rows, groups=2)
    assert vc.size.tolist() == [2.0, 2.0]
    assert list(zip(vc.group.tolist(), vc.value.tolist(), vc.persons.tolist())) == [(0, 0, 2.0), (0, 1, 1.0),
                                                                                    (1, 2, 1.0)]
    assert A.confidence(vc).tolist() == [1.0, 0.5]  # both persons of group 0 hold value 0
    assert A.presence(np.array([2, 5]), np.array([4, 3])).tolist() == [0.5, 1.0]  # g is at least m
