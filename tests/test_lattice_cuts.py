"""Allowed cut points (``domains/cuts.py``): a constrained lattice is a sublattice of the full one, every
operation stays inside it, and without a constraint nothing changes; the readable policy text
(``digits=``, ``every=``, ``by=``, cut lists) reads back to the same policy."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deid_sql import Lattice, PolicyError
from deid_sql.domains.domain import CategoryDomain, DateDomain, IntegerDomain, ZipDomain
from deid_sql.domains.hierarchy import Hierarchy

ZIPS = ("37010", "37011", "37013", "37102", "37110", "37115", "37201", "37203", "38001", "38002")
NAMES = ["age", "race", "zip", "admitted"]
DOMAINS = [IntegerDomain(18, 64), CategoryDomain(("White", "Black", "Asian", "Other, two", "a|b")),
           ZipDomain(ZIPS), DateDomain(dt.date(2020, 11, 20), dt.date(2021, 2, 10))]
FULL = Lattice(NAMES, DOMAINS)
SIZES = [d.size - 1 for d in DOMAINS]

masks = st.tuples(*(st.lists(st.booleans(), min_size=n, max_size=n) for n in SIZES)).map(
    lambda parts: dict(zip(NAMES, (np.array(p, dtype=bool) for p in parts))))


def constrained(mask: dict[str, np.ndarray]) -> Lattice:
    return Lattice(NAMES, DOMAINS, allowed=mask)


def member(lattice: Lattice, raw: list[int]):
    """A policy of ``lattice`` from free bits (disallowed ones dropped)."""
    return lattice.policy((np.array(raw, dtype=np.uint8) & lattice.allowed).astype(np.uint8))


raw_bits = st.lists(st.integers(0, 1), min_size=FULL.nbits, max_size=FULL.nbits)


def inside(lattice: Lattice, p) -> bool:
    return not np.any(p.array & ~lattice.allowed)


@pytest.mark.slow
@given(masks, raw_bits, raw_bits, raw_bits)
def test_a_constrained_lattice_is_a_sublattice(mask, ra, rb, rc):
    lat = constrained(mask)
    a, b, c = member(lat, ra), member(lat, rb), member(lat, rc)
    ua, ub = FULL.policy(a.bits), FULL.policy(b.bits)
    assert lat.leq(a, b) == FULL.leq(ua, ub)  # the order is the full lattice's, restricted
    m, j = lat.meet(a, b), lat.join(a, b)
    assert inside(lat, m) and inside(lat, j)  # closed under meet and join
    assert m.bits == FULL.meet(ua, ub).bits and j.bits == FULL.join(ua, ub).bits
    assert lat.leq(lat.top(), c) and lat.leq(c, lat.bottom())
    assert lat.bottom().bits == lat.allowed.astype(np.uint8).tobytes() and lat.bottom().level == lat.free_bits


@pytest.mark.slow
@given(masks, raw_bits)
def test_covers_stay_inside(mask, raw):
    lat = constrained(mask)
    p = member(lat, raw)
    parents, children = lat.parents(p), lat.children(p)
    assert len(parents) + len(children) == lat.free_bits
    for q in parents:
        assert inside(lat, q) and lat.is_cover(q, p)
    for q in children:
        assert inside(lat, q) and lat.is_cover(p, q)


@pytest.mark.slow
@given(masks, raw_bits, raw_bits, st.integers(0, 2**32 - 1), st.booleans())
def test_halfway_points_and_chains_stay_inside(mask, ra, rb, seed, generalize):
    lat = constrained(mask)
    a, b = member(lat, ra), member(lat, rb)
    upper, lower = lat.meet(a, b), lat.join(a, b)
    rng = np.random.default_rng(seed)
    d = lat.levels_between(upper, lower)
    h = lat.halfway(upper, lower, rng, rng.random(lat.nbits) + 0.1, generalize=generalize)
    assert inside(lat, h) and lat.in_sublattice(h, upper, lower)
    assert lat.levels_between(upper, h) == (d - d // 2 if generalize else d // 2)
    chain = list(lat.random_chain(upper, lower, rng).policies())
    assert chain[0] == upper and chain[-1] == lower and len(chain) == d + 1
    assert all(inside(lat, q) for q in chain)
    assert all(lat.is_cover(x, y) for x, y in zip(chain, chain[1:]))
    assert inside(lat, lat.random_policy(rng, rng.random()))


@pytest.mark.slow
@given(masks, raw_bits)
def test_text_round_trips_and_disallowed_cuts_are_refused(mask, raw):
    lat = constrained(mask)
    p = member(lat, raw)
    assert lat.parse(p.text()) == p and lat.parse(p.bit_text()) == p
    assert FULL.parse(p.text()).bits == p.bits  # the text means the same without the constraint
    free = FULL.policy(raw)
    if not inside(lat, free):
        with pytest.raises(PolicyError, match="allowed cuts are"):
            lat.parse(free.text())
        with pytest.raises(PolicyError, match="allows no cut"):
            lat.policy(free.bits)


@pytest.mark.slow
@given(raw_bits)
def test_unconstrained_text_round_trips(raw):
    p = FULL.policy(raw)
    assert FULL.parse(p.text()) == p and FULL.parse(p.bit_text()) == p


@pytest.mark.slow
@settings(max_examples=50)
@given(raw_bits, raw_bits, st.integers(0, 2**32 - 1))
def test_an_all_allowed_mask_is_the_unconstrained_lattice(ra, rb, seed):
    """Every allowed: the same lattice, the same random draws, as without a constraint."""
    lat = constrained({n: np.ones(s, dtype=bool) for n, s in zip(NAMES, SIZES)})
    assert not lat.constrained and lat.free_positions() == FULL.nbits
    a, b = lat.policy(ra), lat.policy(rb)
    upper, lower = lat.meet(a, b), lat.join(a, b)
    ua, ub = FULL.policy(ra), FULL.policy(rb)
    r1, r2 = np.random.default_rng(seed), np.random.default_rng(seed)
    assert lat.halfway(upper, lower, r1).bits == FULL.halfway(FULL.meet(ua, ub), FULL.join(ua, ub), r2).bits
    assert np.array_equal(lat.random_chain(upper, lower, r1).flips,
                          FULL.random_chain(FULL.meet(ua, ub), FULL.join(ua, ub), r2).flips)
    assert lat.random_policy(r1).bits == FULL.random_policy(r2).bits
    assert lat.bottom() == FULL.bottom() and lat.text(a) == FULL.text(ua)


def test_readable_forms():
    zips = ZipDomain(ZIPS)
    lat = Lattice(["age", "zip", "day"], [IntegerDomain(0, 120), zips, DOMAINS[3]])
    z3 = lat.parse("zip:digits=3")
    assert z3.readable() == "zip: [3701*], [371**], [3720*], [3800*]"  # labels name the longest common prefix
    assert z3.text() == "age:bottom|zip:digits=3|day:bottom"
    # the first ZIP of a prefix need not exist: 37100 is not a ZIP of the domain
    assert lat.parse("zip:cuts=37100,37200,38000") == z3
    ten = lat.parse("age:every=10|zip:top|day:by=month")
    assert ten.text() == "age:every=10|zip:top|day:by=month"
    assert ten.readable().startswith("age: [0-9], [10-19], ") and "[120]" not in ten.readable()
    assert "day: [2020-11-20..2020-11-30], [2020-12], [2021-01], [2021-02-01..2021-02-10]" in ten.readable()
    assert lat.parse("age:cuts=18,65").text().startswith("age:cuts=18,65|")
    assert lat.parse("age:every=100").text().startswith("age:cuts=100|")  # one cut reads better as a cut
    assert lat.parse("day:by=quarter").text().endswith("day:by=year")  # one cut, at a new year: the coarsest name
    assert lat.parse("day:by=year") == lat.parse("day:by=quarter")


def test_bands_start_at_multiples_of_the_width():
    lat = Lattice(["age"], [IntegerDomain(18, 64)])
    assert lat.parse("age:every=10").readable() == "age: [18-19], [20-29], [30-39], [40-49], [50-59], [60-64]"


def test_categories_that_a_cut_list_cannot_name_fall_back_to_bits():
    lat = Lattice(["race"], [DOMAINS[1]])
    p = lat.parse("race:1000")
    assert p.text() == "race:cuts=Black" and lat.parse(p.text()) == p
    tricky = lat.parse("race:0011")  # cuts before "Other, two" and "a|b": not nameable in a list
    assert tricky.text() == "race:0011" and lat.parse(tricky.text()) == tricky


@pytest.mark.parametrize(("text", "message"), [
    ("age:digits=3", "digits= is for ZIP QIs"),
    ("zip:every=5", "every= is for integer QIs"),
    ("age:by=month", "by= is for date QIs"),
    ("admitted:by=week", "not one of month, quarter, year"),
    ("age:every=0", "whole number >= 1"),
    ("zip:cuts=99999", "not a value after the first"),
])
def test_bad_readable_forms_are_one_line(text, message):
    with pytest.raises(PolicyError, match=message) as e:
        FULL.parse(text)
    assert "\n" not in str(e.value)


def test_constrained_parse_names_the_allowed_cuts():
    every5 = (np.arange(19, 65) % 5 == 0)
    lat = Lattice(NAMES, DOMAINS, allowed={"age": every5})
    assert lat.parse("age:every=10").text().startswith("age:every=10|")
    assert lat.parse("age:bottom") == lat.parse("age:every=5") == lat.parse("bottom")
    with pytest.raises(PolicyError, match=r"cuts QI 'age' at 37, .*allowed cuts are every=5"):
        lat.parse("age:cuts=20,37")


def test_hierarchy_levels_parse_and_non_interval_levels_are_refused():
    rows = {"White": ("White", "W", "*"), "Black": ("Black", "NW", "*"), "Asian": ("Asian", "NW", "*"),
            "Other, two": ("Other, two", "W", "*"), "a|b": ("a|b", "NW", "*")}
    lat = Lattice(NAMES, DOMAINS, {"race": Hierarchy("h.csv", rows, 3)})
    assert lat.parse("race:level=2") == lat.parse("race:top")
    with pytest.raises(PolicyError, match="use it as a recoding"):
        lat.parse("race:level=1")
