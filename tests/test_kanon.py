"""The k-anonymity frontier baseline: standard levels, exhaustive full-domain generalizations,
k checked by an independent count over the raw records, and the improvement rate IR."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from deid_sql import DeidError, Problem
from deid_sql.domains.recoding import Recoding
from deid_sql.policies.lattice import Policy
from deid_sql.search.frontier import Frontier, Point, dominates
from deid_sql.search.kanon import (
    Level,
    full_domain_generalizations,
    improvement_rate,
    kanonymity_frontier,
    standard_levels,
)
from deid_sql.starter.demo import census_spec

from .problems import write_small_problem

ADULT_CSV = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult" / "adult.csv"


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Problem]:
    with Problem.from_spec(write_small_problem(tmp_path_factory.mktemp("kanon"), seed=3)) as p:
        yield p


@pytest.fixture(scope="module")
def with_race_hierarchy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Problem]:
    """The small problem with a race hierarchy whose level 1 pairs non-adjacent values."""
    spec = write_small_problem(tmp_path_factory.mktemp("kanon_h"), seed=3)
    (spec.parent / "race.csv").write_text(
        "White;White+Asian;*\nBlack;Black+Other;*\nAsian;White+Asian;*\nOther;Black+Other;*\n", encoding="utf-8")
    text = spec.read_text(encoding="utf-8").replace('name = "race"', 'name = "race"\nhierarchy = "race.csv"')
    spec.write_text(text, encoding="utf-8")
    with Problem.from_spec(spec) as p:
        yield p


def groups(problem: Problem, qi: int, level: Level) -> list[list[object]]:
    """The level's groups as lists of domain values, in domain order."""
    domain = problem.domains[qi]
    rec = level.recoding
    return [[domain.value(int(p)) for p in rec.members(g)] for g in range(rec.n_groups)]


def raw_group_sizes(problem: Problem, item: Policy | Recoding) -> Counter[tuple[int, ...]]:
    """Records per group counted from the raw source records, independently of the evaluators' cells."""
    rec = item.recoding() if isinstance(item, Policy) else item
    rows = pq.read_table(problem.spec.source.path).to_pylist()
    return Counter(
        tuple(int(r.group_of[d.position(row[q.column])]) for q, d, r in zip(problem.spec.qis, problem.domains, rec.qis))
        for row in rows)


def smallest_group(problem: Problem, item: Policy | Recoding) -> int:
    """k counted from the raw source records."""
    return min(raw_group_sizes(problem, item).values())


# -- levels -------------------------------------------------------------------------------


def test_standard_levels_of_the_small_problem(small: Problem) -> None:
    age, sex, race, zip_ = standard_levels(small)
    assert [lv.name for lv in age] == ["age:kept", "age:5y", "age:10y", "age:20y", "age:*"]
    assert groups(small, 0, age[0]) == [[a] for a in range(31)]
    assert groups(small, 0, age[1]) == [list(range(a, a + 5)) for a in range(0, 30, 5)] + [[30]]
    assert groups(small, 0, age[2]) == [list(range(0, 10)), list(range(10, 20)), list(range(20, 30)), [30]]
    assert groups(small, 0, age[3]) == [list(range(0, 20)), list(range(20, 31))]
    assert groups(small, 0, age[4]) == [list(range(31))]
    assert [lv.name for lv in sex] == ["sex:kept", "sex:*"] and [lv.name for lv in race] == ["race:kept", "race:*"]
    assert groups(small, 2, race[0]) == [["White"], ["Black"], ["Asian"], ["Other"]]
    assert groups(small, 2, race[1]) == [["White", "Black", "Asian", "Other"]]
    # every ZIP starts with 3, so "keep 1 digit" groups like "*" and is dropped as a duplicate
    assert [lv.name for lv in zip_] == ["zip:kept", "zip:4d", "zip:3d", "zip:2d", "zip:*"]
    assert groups(small, 3, zip_[1]) == [["37201", "37203"], ["37215"], ["37301", "37302"], ["38101"]]
    assert groups(small, 3, zip_[2]) == [["37201", "37203", "37215"], ["37301", "37302"], ["38101"]]
    assert zip_[2].recoding.labels == ("372**", "373**", "381**")
    assert groups(small, 3, zip_[3]) == [["37201", "37203", "37215", "37301", "37302"], ["38101"]]
    assert groups(small, 3, zip_[4]) == [["37201", "37203", "37215", "37301", "37302", "38101"]]
    for qi, levels in enumerate((age, sex, race, zip_)):
        for lv in levels:  # all interval-shaped: the bits reproduce the groups
            assert lv.bits is not None and lv.bits.size == small.domains[qi].size - 1
            assert np.array_equal(np.concatenate(([0], np.cumsum(lv.bits))), lv.recoding.group_of)


def test_generalizations_are_the_product_of_the_levels(small: Problem) -> None:
    levels = standard_levels(small)
    items = list(full_domain_generalizations(small))
    assert len(items) == math.prod(len(lv) for lv in levels) == 5 * 2 * 2 * 5
    assert len({label for label, _ in items}) == len(items)
    assert all(isinstance(item, Policy) for _, item in items)
    assert len({item.bits for _, item in items}) == len(items)  # type: ignore[union-attr]
    by_label = dict(items)
    assert by_label["age:kept|sex:kept|race:kept|zip:kept"] == small.lattice.bottom()
    assert by_label["age:*|sex:*|race:*|zip:*"] == small.lattice.top()
    assert by_label["age:10y|sex:kept|race:*|zip:3d"] == small.lattice.parse(
        "age:cuts=10,20,30|race:top|zip:cuts=37301,38101")


def test_hierarchy_levels_and_recodings(with_race_hierarchy: Problem) -> None:
    problem = with_race_hierarchy
    race = standard_levels(problem)[2]
    assert [lv.name for lv in race] == ["race:kept", "race:level=1", "race:level=2"]  # as Lattice.parse spells levels
    assert groups(problem, 2, race[1]) == [["White", "Asian"], ["Black", "Other"]]
    assert race[1].bits is None and race[0].bits is not None and race[2].bits is not None
    assert race[1].recoding.labels == ("White+Asian", "Black+Other")
    items = list(full_domain_generalizations(problem))
    assert len(items) == 5 * 2 * 3 * 5
    for label, item in items:
        assert isinstance(item, Recoding) == ("race:level=1" in label)
        if isinstance(item, Recoding):
            assert item.name == label and not item.contiguous
    recodings = [(item, m) for _, item, m in kanonymity_frontier(problem, 3).members if isinstance(item, Recoding)]
    assert recodings  # the recoding path is evaluated, and k agrees with the raw count
    assert all(smallest_group(problem, item) == m.k >= 3 for item, m in recodings)


def test_date_levels(tmp_path: Path) -> None:
    import datetime as dt

    import pyarrow as pa

    days = [dt.date(2020, 1, 1) + dt.timedelta(days=int(d)) for d in np.random.default_rng(0).integers(0, 731, 50)]
    pq.write_table(pa.table({"visit": days}), tmp_path / "source.parquet")
    (tmp_path / "spec.toml").write_text(
        'population = "sample"\n[source]\npath = "source.parquet"\n\n[[qi]]\nname = "visit"\nkind = "date"\n'
        'min = 2020-01-01\nmax = 2021-12-31\n', encoding="utf-8")
    with Problem.from_spec(tmp_path / "spec.toml") as problem:
        (visit,) = standard_levels(problem)
        assert [lv.name for lv in visit] == ["visit:kept", "visit:month", "visit:year", "visit:*"]
        assert [lv.recoding.n_groups for lv in visit] == [731, 24, 2, 1]
        assert visit[1].recoding.labels[1] == "2020-02" and visit[2].recoding.labels == ("2020", "2021")
        assert all(isinstance(item, Policy) for _, item in full_domain_generalizations(problem))


# -- k-anonymity ----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 2, 5, 20])
def test_members_are_exactly_the_k_anonymous_generalizations(small: Problem, k: int) -> None:
    result = kanonymity_frontier(small, k)
    items = dict(full_domain_generalizations(small))
    assert result.k == k and result.generalizations == len(items)
    members = {label for label, _, _ in result.members}
    for label, item in items.items():
        assert (smallest_group(small, item) >= k) == (label in members), label
    for label, item, metrics in result.members:
        sizes = raw_group_sizes(small, item).values()
        assert item == items[label], label
        assert (metrics.k, metrics.groups, metrics.discernibility, metrics.sample_unique_records) == (
            min(sizes), len(sizes), sum(m * m for m in sizes), sum(m == 1 for m in sizes)), label
    if k == 1:
        assert len(members) == len(items)
    if k == 5:
        assert 0 < len(members) < len(items)  # a real split, so non-members are exercised


@pytest.mark.parametrize("k", [1, 5])
def test_frontier_is_the_non_dominated_members(small: Problem, k: int) -> None:
    result = kanonymity_frontier(small, k)
    points = [Point(m.risk, m.loss, label) for label, _, m in result.members]
    expected = {p.key for p in points if not any(dominates(q, p) for q in points)}
    assert {p.key for p in result.frontier} == expected
    assert all(not dominates(a, b) for a in result.frontier for b in result.frontier)


@pytest.mark.parametrize("k", [0, -3, 2.5, True, "5"])
def test_bad_k(small: Problem, k: object) -> None:
    with pytest.raises(DeidError, match="whole number k >= 1") as err:
        kanonymity_frontier(small, k)  # type: ignore[arg-type]
    assert "\n" not in str(err.value)


def test_k_above_the_record_count_gives_an_empty_result(small: Problem) -> None:
    result = kanonymity_frontier(small, small.sample.total + 1)
    assert result.members == [] and len(result.frontier) == 0 and result.generalizations == 100


# -- improvement rate ------------------------------------------------------------------------


def frontier(*points: tuple[float, float]) -> Frontier:
    f = Frontier()
    for i, (r, u) in enumerate(points):
        f.update(Point(r, u, f"p{i}"))
    return f


F_K = frontier((0.1, 0.8), (0.3, 0.5), (0.6, 0.2))  # range [0.1, 0.6]; AU = 0.8·0.2 + 0.5·0.3 = 0.31


def test_improvement_rate_by_hand() -> None:
    # F_s's point at 0.05 (before the range) sets its loss 0.7 from 0.1 on:
    # AU = 0.7·0.1 + 0.4·0.3 + 0.1·0.1 = 0.20; the point at 0.9 is outside the range
    better = frontier((0.05, 0.7), (0.2, 0.4), (0.5, 0.1), (0.9, 0.0))
    assert improvement_rate(F_K, better) == pytest.approx((0.31 - 0.20) / 0.20)
    # starts inside the range: loss 1 on [0.1, 0.2), then 0.4: AU = 0.1 + 0.16 = 0.26
    late = frontier((0.2, 0.4))
    assert improvement_rate(F_K, late) == pytest.approx((0.31 - 0.26) / 0.26)
    assert improvement_rate(F_K, F_K) == 0.0
    worse = frontier((0.1, 0.9), (0.6, 0.3))  # AU = 0.9·0.5 = 0.45
    assert improvement_rate(F_K, worse) == pytest.approx((0.31 - 0.45) / 0.45)
    assert improvement_rate(F_K, Frontier()) == pytest.approx((0.31 - 0.5) / 0.5)  # loss 1 throughout


def test_improvement_rate_degenerate_and_zero_cases() -> None:
    single = frontier((0.3, 0.5))
    # one risk: the limit over [0.3, 0.3 + ε], i.e. the stair heights at 0.3: 0.5 vs 0.25
    assert improvement_rate(single, frontier((0.1, 0.4), (0.3, 0.25), (0.8, 0.0))) == pytest.approx(1.0)
    assert improvement_rate(single, frontier((0.4, 0.1))) == pytest.approx(-0.5)  # F_s at loss 1 there
    assert improvement_rate(frontier((0.3, 0.5), (0.3, 0.5)), single) == 0.0
    assert improvement_rate(F_K, frontier((0.0, 0.0))) == math.inf
    assert improvement_rate(frontier((0.2, 0.0)), frontier((0.1, 0.0))) == 0.0
    with pytest.raises(DeidError, match="k-anonymity frontier is empty"):
        improvement_rate(Frontier(), F_K)


# -- Adult + ZIP ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def adult(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Problem]:
    if not ADULT_CSV.is_file():
        pytest.skip(f"Adult data not available at {ADULT_CSV}")
    from deid_sql.fixtures import adult_with_zip, synthetic_population

    folder = tmp_path_factory.mktemp("kanon_adult")
    population = synthetic_population(0)
    pq.write_table(population, folder / "population.parquet")
    pq.write_table(adult_with_zip(ADULT_CSV, 0, population), folder / "adult.parquet")
    spec = folder / "adult.toml"
    spec.write_text(census_spec("adult.parquet", name="kanon-adult"), encoding="utf-8")
    with Problem.from_spec(spec) as p:
        yield p


@pytest.mark.slow
def test_adult_frontiers(adult: Problem) -> None:
    five, ten = kanonymity_frontier(adult, 5), kanonymity_frontier(adult, 10)
    assert five.generalizations == ten.generalizations == math.prod(len(lv) for lv in standard_levels(adult))
    assert len(five.frontier) > 0 and len(ten.frontier) > 0
    assert {label for label, _, _ in ten.members} <= {label for label, _, _ in five.members}
    assert all(m.k >= 10 for _, _, m in ten.members)
