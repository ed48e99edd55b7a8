"""Lattice laws (seed 000 Defs 3.3–3.6) as properties, and the policy text forms."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deid_sql import Lattice, PolicyError
from deid_sql.domains.domain import CategoryDomain, IntegerDomain, ZipDomain
from deid_sql.domains.hierarchy import Hierarchy

LATTICE = Lattice(
    ["age", "sex", "race", "zip"],
    [IntegerDomain(0, 9), CategoryDomain(("Female", "Male")), CategoryDomain(("White", "Black", "Asian", "Other")),
     ZipDomain(("37201", "37203", "37215", "37301", "37302"))],
)
ADULT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult"

bits = st.lists(st.integers(0, 1), min_size=LATTICE.nbits, max_size=LATTICE.nbits).map(LATTICE.policy)


@pytest.mark.slow
@given(bits, bits, bits)
def test_order_is_a_partial_order(a, b, c):
    assert LATTICE.leq(a, a) and not LATTICE.precedes(a, a)
    if LATTICE.leq(a, b) and LATTICE.leq(b, a):
        assert a == b
    if LATTICE.leq(a, b) and LATTICE.leq(b, c):
        assert LATTICE.leq(a, c)
    assert LATTICE.leq(LATTICE.top(), a) and LATTICE.leq(a, LATTICE.bottom())


@pytest.mark.slow
@given(bits, bits, bits)
def test_meet_and_join_are_bounds(a, b, c):
    m, j = LATTICE.meet(a, b), LATTICE.join(a, b)
    assert LATTICE.leq(m, a) and LATTICE.leq(m, b) and LATTICE.leq(a, j) and LATTICE.leq(b, j)
    if LATTICE.leq(c, a) and LATTICE.leq(c, b):
        assert LATTICE.leq(c, m)
    if LATTICE.leq(a, c) and LATTICE.leq(b, c):
        assert LATTICE.leq(j, c)
    assert LATTICE.meet(a, LATTICE.join(a, b)) == a == LATTICE.join(a, LATTICE.meet(a, b))
    assert LATTICE.meet(a, b) == LATTICE.meet(b, a)


@given(bits)
def test_covers_differ_in_one_bit(p):
    for parent in LATTICE.parents(p):
        assert LATTICE.is_cover(parent, p) and parent < p and parent.level == p.level - 1
    for child in LATTICE.children(p):
        assert LATTICE.is_cover(p, child) and p < child
    assert len(LATTICE.parents(p)) + len(LATTICE.children(p)) == LATTICE.nbits


@given(bits)
def test_text_round_trips(p):
    assert LATTICE.parse(p.text()) == p
    assert LATTICE.parse(str(p)).bits == p.bits


@pytest.mark.slow
@given(bits, bits, st.integers(0, 2**32 - 1))
def test_halfway_lies_halfway(a, b, seed):
    upper, lower = LATTICE.meet(a, b), LATTICE.join(a, b)
    rng = np.random.default_rng(seed)
    weights = rng.random(LATTICE.nbits) + 0.1
    h = LATTICE.halfway(upper, lower, rng, weights)
    d = LATTICE.levels_between(upper, lower)
    assert LATTICE.in_sublattice(h, upper, lower)
    assert LATTICE.levels_between(upper, h) == d // 2


@pytest.mark.slow
@given(bits, bits, st.integers(0, 2**32 - 1))
def test_random_chain_is_a_maximal_chain(a, b, seed):
    upper, lower = LATTICE.meet(a, b), LATTICE.join(a, b)
    chain = list(LATTICE.random_chain(upper, lower, np.random.default_rng(seed)).policies())
    assert chain[0] == upper and chain[-1] == lower
    assert len(chain) == LATTICE.levels_between(upper, lower) + 1
    for x, y in zip(chain, chain[1:]):
        assert LATTICE.is_cover(x, y)
        assert LATTICE.in_sublattice(x, upper, lower)


def test_random_chain_is_uniform_over_maximal_chains():
    lat = Lattice(["x"], [IntegerDomain(0, 3)])
    rng = np.random.default_rng(7)
    counts = Counter(tuple(lat.random_chain(lat.top(), lat.bottom(), rng).flips) for _ in range(6000))
    assert len(counts) == 6  # 3! maximal chains in the 3-bit cube
    assert all(900 < c < 1100 for c in counts.values())


def test_sublattice_membership_matches_the_paper_example():
    lat = Lattice(["x"], [IntegerDomain(0, 4)])
    members = {p.bit_text() for p in (lat.policy([int(c) for c in f"{i:04b}"]) for i in range(16))
               if lat.in_sublattice(p, lat.parse("x:0001"), lat.parse("x:1011"))}
    assert members == {"x:0001", "x:0011", "x:1001", "x:1011"}  # seed 000 Figure 3


def test_readable_lists_only_generalized_groups():
    lat = Lattice(["age", "race"], [IntegerDomain(0, 120), CategoryDomain(("White", "Black", "Asian", "Other"))])
    p = lat.parse("age:cuts=" + ",".join(str(a) for a in range(1, 91)) + "|race:cuts=Black,Asian")
    assert p.readable() == "age: [90-120]; race: [Asian, Other]"
    assert lat.bottom().readable() == "original data"


def test_zip_labels_use_prefixes():
    z = ZipDomain(("37201", "37203", "37215", "37301", "37302", "38101"))
    assert z.interval_label(0, 2) == "372**"
    assert z.interval_label(3, 4) == "3730*"  # every ZIP starting 3730 is inside
    assert z.interval_label(2, 3) == "37215-37301"
    assert z.interval_label(0, 1) == "3720*"
    assert z.interval_label(1, 2) == "37203-37215"
    assert z.interval_label(0, 5) == "3****"


def test_policy_text_errors():
    with pytest.raises(PolicyError, match="needs 9 bits"):
        LATTICE.parse("age:0101")
    with pytest.raises(PolicyError, match="unknown QI 'height'"):
        LATTICE.parse("height:1")
    with pytest.raises(PolicyError, match="twice"):
        LATTICE.parse("sex:1|sex:0")
    with pytest.raises(PolicyError, match="has no ':'"):
        LATTICE.parse("age")
    with pytest.raises(PolicyError, match="needs"):
        LATTICE.policy([1, 0])


def test_cuts_and_top_bottom_forms():
    p = LATTICE.parse("age:cuts=3,7|sex:top|race:bottom")
    assert p.bit_text().startswith("age:001000100|sex:0|race:111|")
    assert LATTICE.parse("top") == LATTICE.top() and LATTICE.parse("bottom") == LATTICE.bottom()


@pytest.mark.skipif(not ADULT.exists(), reason="shared Adult data absent")
def test_adult_age_hierarchy_levels_are_interval_policies():
    h = Hierarchy.read(ADULT / "adult_hierarchy_age.csv")
    lat = Lattice(["age"], [IntegerDomain(17, 90)], {"age": h})
    five = lat.parse("age:level=1")
    groups = five.qi_recoding(0)
    # ARX's 5-year groups run 16-20, 21-25, …; labels come from the domain, not the file
    assert groups.labels[0] == "17-20" and groups.labels[1] == "21-25"
    assert lat.leq(lat.parse("age:level=2"), five)  # 10-year groups generalize 5-year groups
    race = Hierarchy.read(ADULT / "adult_hierarchy_race.csv")
    dom = CategoryDomain(tuple(race.rows))
    assert race.recoding(dom, 1).n_groups == 1
