"""What released values reveal about the persons of a group: ℓ-diversity, t-closeness,
confidence and presence (METHODS decision 15; ARX's privacy models).

A sensitive column is counted once per released group G: ``n_G`` persons (records without
``[person]``) and, per value v, ``f_G(v)`` = the persons of G holding v on any of their rows (in any
table of a set; NULL is a value of its own).  With one value per person, Σ_v f_G(v) = n_G and these
are ARX's definitions; with several (a patient's set of diagnoses) a person counts once under each
value they hold, so the shares of a group need not sum to one (``confidence``) while the
distributions (``entropy_l``, the t-distances) are taken over p(v) = f_G(v) / Σ_v f_G(v).

Everything here is numpy over ``ValueCounts``: the (group, value, persons) triples of the groups
that are released, sorted by group then value, as one ``GROUP BY`` gives them; a group's absent
values are never materialized, so the cost follows the triples, not groups × values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ValueCounts:
    """f_G(v) of one sensitive column over G released groups and V value codes.

    ``group``, ``value``, ``persons``: one entry per (group, value) with f_G(v) > 0, sorted by group
    then value (``of`` sorts and merges).  ``size[g]`` is n_G.  Value codes are positions in the
    column's order (``ordered`` t-closeness reads them as that order), 0..V−1."""

    group: np.ndarray  # int64 (n,)
    value: np.ndarray  # int64 (n,)
    persons: np.ndarray  # float64 (n,)
    size: np.ndarray  # float64 (G,)
    values: int  # V

    @classmethod
    def of(cls, group: Sequence[int] | np.ndarray, value: Sequence[int] | np.ndarray,
           persons: Sequence[float] | np.ndarray, size: Sequence[float] | np.ndarray, values: int) -> ValueCounts:
        """From unsorted triples (repeated (group, value) pairs are summed; zero counts dropped)."""
        g = np.asarray(group, dtype=np.int64)
        v = np.asarray(value, dtype=np.int64)
        f = np.asarray(persons, dtype=np.float64)
        keep = f > 0
        g, v, f = g[keep], v[keep], f[keep]
        if len(g):
            key = g * max(values, 1) + v
            uniq, inverse = np.unique(key, return_inverse=True)
            f = np.bincount(inverse, weights=f, minlength=len(uniq))
            g, v = uniq // max(values, 1), uniq % max(values, 1)
        return cls(g, v, f, np.asarray(size, dtype=np.float64), int(values))

    @property
    def groups(self) -> int:
        return len(self.size)

    def _sum(self, weights: np.ndarray) -> np.ndarray:
        return np.bincount(self.group, weights=weights, minlength=self.groups).astype(np.float64, copy=False)

    def totals(self) -> np.ndarray:
        """Σ_v f_G(v) per group."""
        return self._sum(self.persons)

    def shares(self) -> np.ndarray:
        """p_G(v) = f_G(v) / Σ_v f_G(v) per entry."""
        total = self.totals()
        return self.persons / np.where(total > 0, total, 1.0)[self.group]

    def dense_fits(self, per_entry: int = 4) -> bool:
        """Would the groups × values block hold at most ``per_entry`` cells per entry (and a few)?
        The block needs no order of the entries; the runs over the entries do."""
        return self.groups * self.values <= per_entry * max(len(self.group), 1) + 256

    def dense_shares(self, per_entry: int = 4) -> np.ndarray | None:
        """p_G(v) as a groups × values block (a group with no value a row of zeros), or None when
        the block would hold more than ``per_entry`` cells per entry (the entries' own figures are
        then cheaper; a negative ``per_entry`` always builds it).  With few groups — the groups a
        search still judges after k-anonymity, or a generalized level — row operations on the block
        beat runs over the entries."""
        if per_entry >= 0 and not self.dense_fits(per_entry):
            return None
        cells = self.groups * self.values
        block = np.zeros(cells)
        block[self.group * self.values + self.value] = self.persons
        block = block.reshape(self.groups, self.values)
        total = block.sum(axis=1, keepdims=True)
        return block / np.where(total > 0, total, 1.0)

    def among(self, keep: np.ndarray | None) -> ValueCounts:
        """The counts of the groups where ``keep`` (a boolean per group) is true, renumbered 0..
        in their order; ``None`` keeps every group.  The full-domain models judge only the groups
        no earlier model suppressed, which at fine levels are few of many (bench/attribute.py)."""
        if keep is None:
            return self
        entries = keep[self.group]
        renumber = np.cumsum(keep) - 1
        return ValueCounts(renumber[self.group[entries]], self.value[entries], self.persons[entries],
                           self.size[keep], self.values)

    def without(self, codes: Sequence[int]) -> ValueCounts:
        """The counts with ``codes`` left out (``ignore_values``: values that reveal nothing)."""
        if not len(codes):
            return self
        keep = ~np.isin(self.value, np.asarray(codes, dtype=np.int64))
        return ValueCounts(self.group[keep], self.value[keep], self.persons[keep], self.size, self.values)


def distinct_l(vc: ValueCounts) -> np.ndarray:
    """Distinct ℓ per group: |{v : f_G(v) > 0}|."""
    return np.bincount(vc.group, minlength=vc.groups).astype(np.float64)


def entropy_l(vc: ValueCounts) -> np.ndarray:
    """Entropy ℓ per group: exp(H), H = −Σ p ln p over p(v) = f_G(v) / Σ f_G (1 for a group with no value)."""
    p = vc.shares()
    h = vc._sum(-p * np.log(np.where(p > 0, p, 1.0)))
    return np.exp(h)


def _ranked(vc: ValueCounts) -> tuple[np.ndarray, np.ndarray]:
    """Per entry, its rank within its group by f descending (0 = the largest), and the entries in
    that order (group-major)."""
    order = np.lexsort((-vc.persons, vc.group))
    starts = np.searchsorted(vc.group[order], np.arange(vc.groups))
    rank = np.arange(len(order)) - starts[vc.group[order]]
    return rank, order


def _top(vc: ValueCounts) -> np.ndarray:
    """max_v f_G(v) per group (0 for a group with no value): one ``reduceat`` over the group runs of
    the entries (sorted by group), several times the speed of ``np.maximum.at``."""
    top = np.zeros(vc.groups)
    if len(vc.group):
        starts = np.flatnonzero(np.concatenate(([True], vc.group[1:] != vc.group[:-1])))
        top[vc.group[starts]] = np.maximum.reduceat(vc.persons, starts)
    return top


def recursive_cl(vc: ValueCounts, c: float, l: int) -> np.ndarray:  # noqa: E741 - the model's name
    """Recursive (c,ℓ)-diversity per group: m ≥ ℓ and r₁ < c·(r_ℓ + … + r_m), r_i the i-th largest f_G(v).

    For ℓ ≤ 2 the tail is the total less r₁ (ties or not), so no ranking is needed: the common case
    costs a ``reduceat`` instead of a sort of the entries (bench/attribute.py)."""
    if l <= 2:
        top = _top(vc)
        tail = vc.totals() - (top if l == 2 else 0.0)
        return (distinct_l(vc) >= l) & (top < c * tail)
    rank, order = _ranked(vc)
    f = vc.persons[order]
    g = vc.group[order]
    top = np.bincount(g[rank == 0], weights=f[rank == 0], minlength=vc.groups).astype(np.float64)
    tail = np.bincount(g[rank >= l - 1], weights=f[rank >= l - 1], minlength=vc.groups).astype(np.float64)
    return (distinct_l(vc) >= l) & (top < c * tail)


def confidence(vc: ValueCounts) -> np.ndarray:
    """(α,k)-anonymity's figure per group: max_v f_G(v) / n_G, the chance that a person known to be
    in G holds its most common value (0 for a group with no value)."""
    return _top(vc) / np.where(vc.size > 0, vc.size, 1.0)


def presence(m: np.ndarray, g: np.ndarray) -> np.ndarray:
    """δ-presence per group: m(G) / g(G), the chance that a person of the population matching G is in
    the release (g the census people of G, g ≥ m by decision 1)."""
    m = np.asarray(m, dtype=np.float64)
    g = np.maximum(np.asarray(g, dtype=np.float64), m)
    return m / np.where(g > 0, g, 1.0)


def t_equal(vc: ValueCounts, q: np.ndarray) -> np.ndarray:
    """t-closeness with equal ground distance per group: ½ Σ_v |p(v) − q(v)| over every value
    (a value the group lacks adds q(v))."""
    q = np.asarray(q, dtype=np.float64)
    p = vc.shares()
    inside = vc._sum(np.abs(p - q[vc.value]) - q[vc.value])
    return 0.5 * (inside + q.sum())


def t_ordered(vc: ValueCounts, q: np.ndarray, dense: bool | None = None) -> np.ndarray:
    """t-closeness with ordered distance per group: Σ_i |Σ_{j≤i} (p_j − q_j)| / (V − 1), over the
    column's order (value codes).  With few groups (``ValueCounts.dense_shares``; ``dense`` forces
    either way) the definition row by row on the group × value block; else, as between two of a
    group's values its cumulative p is constant, each run is summed from the prefix sums of q's
    cumulative, not value by value."""
    q = np.asarray(q, dtype=np.float64)
    values = len(q)
    if values <= 1:
        return np.zeros(vc.groups)
    cq = np.cumsum(q)  # Q_i = Σ_{j≤i} q_j, non-decreasing
    block = vc.dense_shares() if dense is None else vc.dense_shares(per_entry=-1) if dense else None
    if block is not None:  # few groups: the definition itself, row by row
        return np.abs(np.cumsum(block, axis=1) - cq).sum(axis=1) / (values - 1)
    ccq = np.concatenate(([0.0], np.cumsum(cq)))  # ccq[i] = Σ_{j<i} Q_j
    p = vc.shares()
    cp = np.cumsum(p)
    held = np.bincount(vc.group, minlength=vc.groups)  # entries per group
    starts = np.cumsum(held) - held  # each group's first entry (its entries are contiguous)
    cp = cp - np.concatenate(([0.0], cp))[starts][vc.group]  # cumulative p within each group
    # runs: [value_k, value_{k+1}) with P = cp_k; before a group's first value P = 0
    nxt = np.append(vc.value[1:], values)
    last = np.append(vc.group[1:] != vc.group[:-1], True)
    nxt = np.where(last, values, nxt)
    total = vc._sum(_run_sum(cp, vc.value, nxt, cq, ccq))
    first = np.full(vc.groups, values, dtype=np.int64)  # a group's first value: before it, P = 0
    held = held > 0
    first[held] = vc.value[starts[held]]
    total += _run_sum(np.zeros(vc.groups), np.zeros(vc.groups, dtype=np.int64), first, cq, ccq)
    return total / (values - 1)


def _run_sum(level: np.ndarray, a: np.ndarray, b: np.ndarray, cq: np.ndarray, ccq: np.ndarray) -> np.ndarray:
    """Σ_{i in [a, b)} |level − Q_i| per run, Q non-decreasing (its prefix sums ``ccq``)."""
    k = np.clip(np.searchsorted(cq, level, side="right"), a, b)  # Q_i ≤ level for i < k
    below = level * (k - a) - (ccq[k] - ccq[a])
    above = (ccq[b] - ccq[k]) - level * (b - k)
    return below + above


def t_hierarchical(vc: ValueCounts, q: np.ndarray, parents: Sequence[np.ndarray],
                   dense: bool | None = None) -> np.ndarray:
    """t-closeness with hierarchical distance per group (Li et al. 2007 §4.2, as ARX): each leaf's
    extra p(v) − q(v) is rolled up the hierarchy; a node of height h costs h / H · min(its children's
    positive extra, their negative extra), and the distance is the sum over nodes.

    ``parents[h]`` maps each node of level h (level 0: the value codes) to its node at level h + 1;
    H = len(parents) (the last level is the root, one node).  A node the group holds no value under
    has only negative extra and costs nothing, so only the group's own paths are visited."""
    q = np.asarray(q, dtype=np.float64)
    height = len(parents)
    if height == 0:
        return np.zeros(vc.groups)
    groups = vc.groups
    block = vc.dense_shares() if dense is None else vc.dense_shares(per_entry=-1) if dense else None
    if block is not None:  # few groups (``dense`` forces either way): the same roll-up on the block
        return _t_hierarchical_dense(block - q, parents)
    node = vc.value.copy()
    grp = vc.group.copy()
    extra = vc.shares() - q[vc.value]  # touched nodes of level 0 with their extra
    qnode = q.copy()  # q of each node of the current level
    total = np.zeros(groups)
    for h, parent in enumerate(parents, start=1):
        parent = np.asarray(parent, dtype=np.int64)
        up = parent[node]
        width = int(parent.max()) + 1 if len(parent) else 1
        qup = np.bincount(parent, weights=qnode, minlength=width)
        key = grp * width + up
        uniq, inverse = np.unique(key, return_inverse=True)
        pos = np.bincount(inverse, weights=np.maximum(extra, 0.0), minlength=len(uniq))
        neg_touched = np.bincount(inverse, weights=np.maximum(-extra, 0.0), minlength=len(uniq))
        q_touched = np.bincount(inverse, weights=qnode[node], minlength=len(uniq))
        ug, un = uniq // width, uniq % width
        neg = neg_touched + (qup[un] - q_touched)  # children the group never reaches: extra −q each
        total += np.bincount(ug, weights=h / height * np.minimum(pos, neg), minlength=groups).astype(np.float64)
        node, grp = un, ug
        extra = pos - neg
        qnode = qup
    return total


def _t_hierarchical_dense(extra: np.ndarray, parents: Sequence[np.ndarray]) -> np.ndarray:
    """``t_hierarchical`` on a group × value block of p(v) − q(v): at each level the children's
    positive and negative extra are summed per parent (columns gathered parent by parent, one
    ``reduceat``), every node costing h / H · min(positive, negative)."""
    height = len(parents)
    total = np.zeros(extra.shape[0])
    for h, parent in enumerate(parents, start=1):
        parent = np.asarray(parent, dtype=np.int64)
        order = np.argsort(parent, kind="stable")  # a hierarchy's few nodes: cheaper than keeping them
        starts = np.searchsorted(parent[order], np.arange(int(parent.max()) + 1))
        gathered = extra[:, order]
        pos = np.add.reduceat(np.maximum(gathered, 0.0), starts, axis=1)
        neg = pos - np.add.reduceat(gathered, starts, axis=1)  # Σ max(−x, 0) = Σ max(x, 0) − Σ x
        total += h / height * np.minimum(pos, neg).sum(axis=1)
        extra = pos - neg
    return total


def reference(rows: Sequence[tuple[int, int, int | None]], groups: int) -> ValueCounts:
    """The counts from (person, group, value code) rows, persons counted once per (group, value):
    the pure-Python reading of decision 15 that the tests hold the engines' counts to.  A row whose
    value is None holds none (a person with no row of a linked table); a NULL of the column is a
    value of its own and has a code."""
    seen: dict[tuple[int, int], set[int]] = {}
    members: dict[int, set[int]] = {}
    for person, group, value in rows:
        members.setdefault(group, set()).add(person)
        if value is not None:
            seen.setdefault((group, value), set()).add(person)
    keys = sorted(seen)
    values = 1 + max((v for _, v in keys), default=0)
    return ValueCounts.of([g for g, _ in keys], [v for _, v in keys], [len(seen[k]) for k in keys],
                          [len(members.get(g, ())) for g in range(groups)], values)
