"""The full-domain evaluator's public ways, one each: the suppression rule (the search and the
release use the same one), the level-only quality bound BFS prunes by, and the census of a
transformation's groups.  Every expectation is counted here from the raw rows of a tiny data
set (eight records), by hand and in plain Python, never from the evaluator's own tables."""

from __future__ import annotations

import csv
import inspect
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from deid_sql import Problem
from deid_sql.fulldomain import (
    KL,
    Discernibility,
    DistinctLDiversity,
    KAnonymity,
    Loss,
    NonUniformEntropy,
    TransformEvaluator,
)
from deid_sql.jobs.anonymize import Anonymization, suppressed_groups
from deid_sql.policies.lattice import Lattice
from deid_sql.search import bfs
from deid_sql.search.bfs import BFSResult

from .baselines.fulldomain import exhaustive

# age 0..3 (hierarchy 0-1 / 2-3 / *), sex without a hierarchy (kept / *), dx sensitive
ROWS = [
    (0, "Female", "a"), (0, "Female", "b"), (1, "Female", "a"), (1, "Male", "a"),
    (2, "Male", "b"), (2, "Male", "b"), (3, "Male", "b"), (3, "Female", "a"),
]
AGE_LEVELS = [lambda a: str(a), lambda a: "0-1" if a <= 1 else "2-3", lambda a: "*"]
SEX_LEVELS = [lambda s: s, lambda s: "*"]
# people per (age, sex) in the census; (0, Female) has fewer than the sample's 2 records
POPULATION = {(0, "Female"): 1, (0, "Male"): 4, (1, "Female"): 3, (1, "Male"): 2,
              (2, "Female"): 5, (2, "Male"): 6, (3, "Female"): 2, (3, "Male"): 7}
TRANSFORMATIONS = [(a, s) for a in range(3) for s in range(2)]


def write_tiny(folder: Path, population: bool) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "source.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "age", "sex", "dx"])
        w.writerows((i, *row) for i, row in enumerate(ROWS))
    (folder / "age.csv").write_text("0;0-1;*\n1;0-1;*\n2;2-3;*\n3;2-3;*\n", encoding="utf-8")
    lines = [] if population else ['population = "sample"']
    lines += ["", "[source]", 'path = "source.csv"', ""]
    if population:
        with open(folder / "population.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["age", "sex", "people"])
            w.writerows((a, s, n) for (a, s), n in POPULATION.items())
        lines += ["[population]", 'path = "population.csv"', 'count = "people"', ""]
    lines += ["[[qi]]", 'name = "age"', 'kind = "integer"', "min = 0", "max = 3", 'hierarchy = "age.csv"', "",
              "[[qi]]", 'name = "sex"', 'kind = "category"', 'values = ["Female", "Male"]', "",
              "[columns]", 'drop = ["id"]', 'sensitive = ["dx"]', ""]
    path = folder / "spec.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def label(x: tuple[int, int], age: int, sex: str) -> tuple[str, str]:
    return AGE_LEVELS[x[0]](age), SEX_LEVELS[x[1]](sex)


def hand_suppressed(x: tuple[int, int], k: int, l: int) -> dict[tuple[str, str], int]:  # noqa: E741
    """Groups (labels) with fewer than k records or fewer than l distinct dx, and their records."""
    records: Counter[tuple[str, str]] = Counter()
    values: defaultdict[tuple[str, str], set[str]] = defaultdict(set)
    for age, sex, dx in ROWS:
        g = label(x, age, sex)
        records[g] += 1
        values[g].add(dx)
    return {g: n for g, n in records.items() if n < k or len(values[g]) < l}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Problem]:
    with Problem.from_spec(write_tiny(tmp_path_factory.mktemp("tiny"), population=False)) as p:
        yield p


@pytest.fixture(scope="module")
def tiny_census(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Problem]:
    with Problem.from_spec(write_tiny(tmp_path_factory.mktemp("tiny_census"), population=True)) as p:
        yield p


def labels_of(ev: TransformEvaluator, x: tuple[int, int], mask: np.ndarray) -> set[tuple[str, ...]]:
    ids = ev.groups(x).ids(mask)
    names = [ev.space.levels[q][x[q]].labels for q in range(2)]
    return {tuple(names[q][int(ids[q][i])] for q in range(2)) for i in range(int(mask.sum()))}


# -------------------------------------------------------------------------------------------
# one suppression rule
# -------------------------------------------------------------------------------------------
def test_one_suppression_rule_matches_the_raw_rows(tiny: Problem) -> None:
    """By hand at ages 0-1 / 2-3 with sex kept: (0-1, Male) and (2-3, Female) have one record
    each (k = 2), and (2-3, Male) holds three records of the one value b (l = 2)."""
    ev = TransformEvaluator(tiny, [KAnonymity(2), DistinctLDiversity(2, "dx")], Loss(), 1.0)
    assert labels_of(ev, (1, 0), ev.suppress(ev.groups((1, 0)))) == {("0-1", "Male"), ("2-3", "Female"),
                                                                     ("2-3", "Male")}
    assert ev.apply((1, 0)).suppressed == 5
    for x in TRANSFORMATIONS:
        expected = hand_suppressed(x, 2, 2)
        stats = ev.groups(x)
        mask = ev.suppress(stats)
        assert labels_of(ev, x, mask) == set(expected), x
        out = ev.apply(x)
        assert out.suppressed == sum(expected.values()), x
        assert out.groups_kept == out.groups - len(expected), x


def test_release_suppresses_what_the_search_judged(tiny: Problem) -> None:
    """``anonymize.suppressed_groups`` lists exactly the groups ``TransformEvaluator.suppress``
    marks (the hand count), at every transformation, not only at the optimum."""
    ev = TransformEvaluator(tiny, [KAnonymity(2), DistinctLDiversity(2, "dx")], Loss(), 1.0)
    for x in TRANSFORMATIONS:
        run = Anonymization(BFSResult(ev.apply(x), 1, len(TRANSFORMATIONS), 0.0, False), ev.space, ev)
        assert sorted(suppressed_groups(run)) == sorted(hand_suppressed(x, 2, 2)), x


def test_the_release_module_has_no_suppression_loop_of_its_own() -> None:
    from deid_sql.jobs import anonymize

    source = inspect.getsource(anonymize.suppressed_groups)
    assert ".suppress(" in source and "for model in" not in source


# -------------------------------------------------------------------------------------------
# the level-only bound
# -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("x", "loss"), [((0, 0), 0.0), ((1, 0), 1 / 6), ((0, 1), 1 / 2), ((1, 1), 2 / 3),
                                         ((2, 1), 1.0)])
def test_loss_level_bound_by_hand(tiny: Problem, x: tuple[int, int], loss: float) -> None:
    """Iyengar's loss per record and QI is (leaves − 1) / (domain − 1): age 0-1 covers 2 of 4
    values (1/3), * all (1); sex * covers both (1); averaged over 8 records × 2 QIs."""
    ev = TransformEvaluator(tiny, KAnonymity(1), Loss(), 0.0)
    assert ev.quality.level_bound(x) == pytest.approx(loss)
    assert ev.quality.bound(ev.groups(x)) == pytest.approx(loss)


@pytest.mark.parametrize("quality", [Loss, NonUniformEntropy])
def test_level_bound_is_the_bound_of_the_groups(tiny: Problem, quality: type) -> None:
    ev = TransformEvaluator(tiny, KAnonymity(2), quality(), 0.5)
    assert ev.quality.bound_from_levels
    for x in TRANSFORMATIONS:
        assert ev.quality.level_bound(x) == ev.quality.bound(ev.groups(x)), x


@pytest.mark.parametrize("quality", [Discernibility, KL])
def test_group_bounds_have_no_level_bound(tiny: Problem, quality: type) -> None:
    ev = TransformEvaluator(tiny, KAnonymity(2), quality(), 0.5)
    assert not ev.quality.bound_from_levels
    with pytest.raises(NotImplementedError, match="needs the groups"):
        ev.quality.level_bound((1, 0))
    assert bfs._level_bound(ev) is None
    assert not bfs.inherits_bounds(ev)  # with suppression: bounded after the check
    assert bfs.inherits_bounds(TransformEvaluator(tiny, KAnonymity(2), quality(), 0.0))
    assert not bfs.inherits_bounds(TransformEvaluator(tiny, KAnonymity(2), Loss(), 0.0))  # a level bound


@pytest.mark.parametrize("quality", [Loss, NonUniformEntropy])
def test_level_bounds_list_the_level_bound_of_every_transformation(tiny: Problem, quality: type) -> None:
    """``level_bounds`` is ``level_bound`` over the lattice in C order, equal to the last bit
    (the same additions in the same order), so BFS may read either."""
    ev = TransformEvaluator(tiny, KAnonymity(2), quality(), 0.5)
    table = ev.quality.level_bounds()
    assert table.shape == (ev.space.size,)
    assert table.tolist() == [ev.quality.level_bound(x) for x in ev.space]


def test_bfs_bounds_by_the_level_bound(tiny: Problem, monkeypatch) -> None:
    """BFS's pre-check bound is the model's ``level_bound`` on the levels themselves: read from
    ``level_bounds`` (computed once) where the lattice is small, else computed per transformation."""
    calls: list[tuple[int, ...]] = []
    tables: list[int] = []

    class Counted(Loss):
        def level_bound(self, levels: tuple[int, ...]) -> float:
            calls.append(tuple(levels))
            return super().level_bound(levels)

        def level_bounds(self):  # type: ignore[no-untyped-def]
            tables.append(1)
            return super().level_bounds()

        def bound(self, stats):  # type: ignore[no-untyped-def]  # a check's bound: not counted
            return Loss.level_bound(self, stats.levels)

    ev = TransformEvaluator(tiny, KAnonymity(2), Counted(), 0.0)
    bound = bfs._level_bound(ev)
    assert bound is not None and bound((1, 0)) == pytest.approx(1 / 6) and calls == [(1, 0)]
    result = bfs.best_first_search(ev.space, ev)
    truth = exhaustive(ev.space, TransformEvaluator(tiny, KAnonymity(2), Loss(), 0.0))
    assert result.optimum is not None and truth is not None and result.optimum.levels == truth.levels
    assert tables == [1] and calls == [(1, 0)]
    monkeypatch.setattr(bfs, "CLOSURE_LIMIT", 1)  # a "large" lattice: no table
    ev = TransformEvaluator(tiny, KAnonymity(2), Counted(), 0.0)
    result = bfs.best_first_search(ev.space, ev)
    assert result.optimum is not None and result.optimum.levels == truth.levels
    assert tables == [1] and len(calls) > 1


# -------------------------------------------------------------------------------------------
# the census of a transformation's groups
# -------------------------------------------------------------------------------------------
def test_census_of_groups_from_the_raw_rows(tiny_census: Problem) -> None:
    """g = max(census people, sample records) per group, counted from the two files' rows."""
    ev = TransformEvaluator(tiny_census, KAnonymity(1), Loss(), 0.0)
    for x in TRANSFORMATIONS:
        m = Counter(label(x, age, sex) for age, sex, _ in ROWS)
        people: Counter[tuple[str, str]] = Counter()
        for (age, sex), n in POPULATION.items():
            people[label(x, age, sex)] += n
        stats = ev.groups(x)
        ids = stats.ids()
        names = [ev.space.levels[q][x[q]].labels for q in range(2)]
        got = {tuple(names[q][int(ids[q][i])] for q in range(2)): float(g) for i, g in enumerate(ev.census(stats))}
        assert got == {g: float(max(people[g], m[g])) for g in m}, x
        assert np.array_equal(stats.census(), ev.census(stats))
        rec = ev.space.recoding(x)
        assert np.array_equal(tiny_census.group_sizes(rec, ids, stats.m), ev.census(stats))
    assert ev.census(ev.groups((0, 0)))[0] == 2.0  # (0, Female): 1 person in the census, 2 records


def test_census_without_a_population_is_the_sample_count(tiny: Problem) -> None:
    ev = TransformEvaluator(tiny, KAnonymity(1), Loss(), 0.0)
    for x in TRANSFORMATIONS:
        stats = ev.groups(x)
        assert np.array_equal(ev.census(stats), stats.m)
        assert sorted(stats.m.tolist()) == sorted(Counter(label(x, a, s) for a, s, _ in ROWS).values())


def test_dead_methods_are_gone() -> None:
    assert not hasattr(Lattice, "comparable")
    assert not hasattr(TransformEvaluator, "apply_many")
    assert not hasattr(TransformEvaluator, "clear_cache")
