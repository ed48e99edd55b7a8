"""Roll-up on sparse, wide data (issue 43): group keys are the ranks of the groups present.

A QI's field in a group key holds its group's rank among the groups present in the cells at its
level, not the group's id over the whole domain, and tables are rolled up from the smallest cached
specialization, merged with their counts packed beside the keys or apart (argsort).  None of it
may change a figure.  On random problems (hypothesis) — 2 to 4 integer QIs whose domains are
mostly absent from the data, each under a random tree hierarchy whose groups need not be intervals
(so a lift need not keep the order of ranks), a sensitive column, with or without ``[person]`` —
every transformation's groups, read in the order a search reads them, are the same four ways:

- rolled up (the default: ranks, cache, counts packed when they fit);
- grouped from the cells every time (``rollup=False``);
- merged apart from their counts (argsort) — the path of keys that fill the int64;
- by ``np.unique`` on the group ids, when even the keys would not fit (``KEY_BITS`` lowered);

and equal a plain-Python count of the cells.  Every privacy model (k-anonymity, distinct and
entropy ℓ-diversity, t-closeness, average risk) with every quality model (Loss, NUE, DM, KL), with
and without suppression, gives the same outcome all four ways; without suppression the quality
bounds equal the SQL path's metrics.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deid_sql import Problem
from deid_sql.fulldomain import (
    KL,
    AverageRisk,
    Discernibility,
    DistinctLDiversity,
    KAnonymity,
    Loss,
    NonUniformEntropy,
    PrivacyModel,
    TransformationSpace,
    TransformEvaluator,
)
from deid_sql.fulldomain import tables as tables_module
from deid_sql.fulldomain.attribute import EntropyLDiversity, TCloseness

QUALITIES = (Loss, NonUniformEntropy, Discernibility, KL)
PRIVACY: dict[str, Callable[[], list[PrivacyModel]]] = {
    "k": lambda: [KAnonymity(2)],
    "k+distinct": lambda: [KAnonymity(2), DistinctLDiversity(2, "dx")],
    "entropy": lambda: [KAnonymity(1), EntropyLDiversity(1.5, "dx")],
    "t-closeness": lambda: [KAnonymity(2), TCloseness(0.3, "dx", "equal")],
    "average risk": lambda: [AverageRisk(0.4)],
}
DX = ("a", "b", "c", "d")
WAYS = ("rolled", "cells", "apart", "unique")


def hierarchy_rows(rng: random.Random, size: int, height: int, contiguous: bool) -> list[list[str]]:
    """A random tree over values 0..size-1 of ``height`` levels (the value, then coarser levels,
    then ``*``): each level's groups are unions of the groups below, drawn at random (``contiguous``:
    runs of the domain, so lifts keep order; else any sets, so they need not)."""
    parent_of = list(range(size))  # each value's group at the current level
    groups = size
    columns = [[str(v) for v in range(size)]]
    for level in range(1, height - 1):
        upper = rng.randint(1, groups)
        if contiguous:
            cuts = sorted(rng.sample(range(1, groups), upper - 1)) if upper > 1 else []
            assign = [sum(g >= c for c in cuts) for g in range(groups)]
        else:
            assign = list(range(upper)) + [rng.randrange(upper) for _ in range(groups - upper)]
            rng.shuffle(assign)
        parent_of = [assign[g] for g in parent_of]
        groups = upper
        columns.append([f"L{level}g{g}" for g in parent_of])
    columns.append(["*"] * size)
    return [list(row) for row in zip(*columns)]


@st.composite
def problems(draw: st.DrawFn) -> dict[str, object]:
    """A random problem's parameters: QIs (domain size, values present, height, contiguous), rows,
    persons or not, and the seed that draws the hierarchies and the rows from them."""
    qis = [(draw(st.integers(2, 300)), draw(st.integers(1, 12)), draw(st.integers(2, 5)), draw(st.booleans()))
           for _ in range(draw(st.integers(2, 4)))]
    return {"qis": qis, "rows": draw(st.integers(4, 90)), "persons": draw(st.booleans()),
            "seed": draw(st.integers(0, 2**31 - 1))}


def write_problem(folder: Path, params: dict[str, object]) -> Path:
    """The table, its hierarchies and the spec of ``params`` (``problems``), all drawn from its seed."""
    rng = random.Random(params["seed"])  # type: ignore[arg-type]
    qis: list[tuple[int, int, int, bool]] = params["qis"]  # type: ignore[assignment]
    n: int = params["rows"]  # type: ignore[assignment]
    columns: dict[str, list[object]] = {}
    spec = ['population = "sample"', "", "[source]", f'path = "{(folder / "t.parquet").as_posix()}"', ""]
    if params["persons"]:
        spec += ["[person]", 'column = "pid"', 'order = "seen"', ""]
    for i, (size, present, height, contiguous) in enumerate(qis):
        name = f"q{i}"
        values = rng.sample(range(size), min(size, present))
        columns[name] = [rng.choice(values) for _ in range(n)]
        path = folder / f"h_{name}.csv"
        path.write_text("".join(";".join(r) + "\n" for r in hierarchy_rows(rng, size, height, contiguous)),
                        encoding="utf-8")
        spec += ["[[qi]]", f'name = "{name}"', 'kind = "integer"', "min = 0", f"max = {size - 1}",
                 f'hierarchy = "{path.as_posix()}"']
        spec += ['per_person = "first"', ""] if params["persons"] else [""]
    columns["dx"] = list(DX[:2]) + [rng.choice(DX) for _ in range(n - 2)]  # ℓ = 2 is possible
    columns["pid"] = [f"P{i % max(2, n // 2)}" for i in range(n)]  # at least 2 persons
    columns["seen"] = [rng.randrange(5) for _ in range(n)]
    spec += ["[columns]", 'sensitive = ["dx"]', 'drop = ["pid", "seen"]', ""]
    pq.write_table(pa.table(columns), folder / "t.parquet")
    path = folder / "t.toml"
    path.write_text("\n".join(spec), encoding="utf-8")
    return path


def evaluators(problem: Problem, space: TransformationSpace, privacy: str, quality: type,
               limit: float) -> dict[str, TransformEvaluator]:
    """The four ways (``WAYS``) of one configuration."""
    def make(**options: object) -> TransformEvaluator:
        return TransformEvaluator(problem, PRIVACY[privacy](), quality(), limit, space=space,
                                  **options)  # type: ignore[arg-type]

    out = {"rolled": make(), "cells": make(rollup=False)}
    with mock.patch.object(tables_module, "_PACK_BITS", 0):  # never packed: every merge argsorts
        out["apart"] = make()
    with mock.patch.object(tables_module, "KEY_BITS", -1):  # no key fits: np.unique on ids
        out["unique"] = make()
    assert out["rolled"].fixed and out["apart"].fixed and not out["unique"].fixed
    return out


def order_of_checks(space: TransformationSpace, rng: random.Random, count: int) -> list[tuple[int, ...]]:
    """Transformations in the order a search might check them: random ones, each followed by a short
    walk up (so direct and older specializations are cached), then the top."""
    xs: list[tuple[int, ...]] = []
    every = list(space)
    for x in rng.sample(every, min(count, len(every))):
        xs.append(x)
        for _ in range(2):
            up = space.generalizations(xs[-1])
            if up:
                xs.append(rng.choice(up))
    return xs + [space.top]


def reference_groups(problem: Problem, space: TransformationSpace, x: tuple[int, ...]) -> Counter[tuple[int, ...]]:
    """x's groups counted in plain Python over the cells: (group id per QI) -> count."""
    groups: Counter[tuple[int, ...]] = Counter()
    for pos, c in zip(problem.sample.positions.tolist(), problem.sample.counts.tolist()):
        groups[tuple(int(space.group_of[q][x[q]][p]) for q, p in enumerate(pos))] += int(c)
    return groups


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(params=problems(), privacy=st.sampled_from(sorted(PRIVACY)), limit=st.sampled_from([0.0, 0.15]))
def test_rolled_up_groups_equal_regrouped_ones(tmp_path_factory: pytest.TempPathFactory,
                                               params: dict[str, object], privacy: str, limit: float) -> None:
    spec = write_problem(tmp_path_factory.mktemp("wide"), params)
    rng = random.Random(params["seed"])  # type: ignore[arg-type]
    with Problem.from_spec(spec, cache=False) as problem:
        space = TransformationSpace(problem)
        xs = order_of_checks(space, rng, 6)
        ways = {quality: evaluators(problem, space, privacy, quality, limit) for quality in QUALITIES}
        for x in xs:
            want = reference_groups(problem, space, x)
            first = ways[Loss]
            stats = {name: ev.groups(x) for name, ev in first.items()}
            for name, s in stats.items():
                ids = s.id_matrix()
                assert Counter({tuple(int(v) for v in col): int(m) for col, m in zip(ids.T, s.m)}) == want, name
                np.testing.assert_array_equal(ids, stats["unique"].id_matrix(), err_msg=name)
                np.testing.assert_array_equal(s.m, stats["unique"].m, err_msg=name)
                if name != "unique":  # the same ranks in the same fields
                    np.testing.assert_array_equal(s.keys, stats["rolled"].keys, err_msg=name)
                if "dx" in first[name].value_cells:  # a model reads the sensitive column: its tables too
                    values, want_values = s.value_counts("dx"), stats["unique"].value_counts("dx")
                    for part in ("group", "value", "persons"):
                        np.testing.assert_array_equal(getattr(values, part), getattr(want_values, part),
                                                      err_msg=name)
            for quality, evs in ways.items():
                outcomes = {name: ev.apply(x) for name, ev in evs.items()}
                for name, outcome in outcomes.items():
                    assert outcome == outcomes["unique"], (quality.__name__, name, x)
        for x in xs[:3]:  # without suppression the bounds are the SQL path's metrics
            sql = problem.evaluate(space.recoding(x), "sql")
            assert ways[Loss]["rolled"].apply(x).bound == pytest.approx(sql.iyengar_loss, abs=1e-12)
            assert ways[KL]["rolled"].apply(x).bound == pytest.approx(sql.kl, abs=1e-9)
            assert ways[Discernibility]["rolled"].apply(x).bound == sql.discernibility


def test_ranks_leave_out_absent_groups_and_keep_order(tmp_path: Path) -> None:
    """A domain of 20,000 values with 7 present needs 3 bits, not 15: the key's field counts the
    groups present at a level, in the order of their ids, and decodes back to the ids."""
    size = 20_000
    present = [3, 17, 19_999, 14_000, 5_000, 17_777, 12]
    folder = tmp_path
    rows = [[str(v), f"{v // 1000}k", "*"] for v in range(size)]
    (folder / "h.csv").write_text("".join(";".join(r) + "\n" for r in rows), encoding="utf-8")
    pq.write_table(pa.table({"z": present * 3, "s": ["F", "M", "F"] * 7}), folder / "t.parquet")
    (folder / "t.toml").write_text(
        f'population = "sample"\n[source]\npath = "{(folder / "t.parquet").as_posix()}"\n'
        f'[[qi]]\nname = "z"\nkind = "integer"\nmin = 0\nmax = {size - 1}\n'
        f'hierarchy = "{(folder / "h.csv").as_posix()}"\n[[qi]]\nname = "s"\nkind = "category"\n'
        'values = ["F", "M"]\n', encoding="utf-8")
    with Problem.from_spec(folder / "t.toml", cache=False) as problem:
        ev = TransformEvaluator(problem, KAnonymity(1), Loss(), 0.0)
        assert ev.ranks.counts[0] == [7, 5, 1]  # 3, 12 and 17 share "0k" and ev.ranks.widths == [3, 1]
        np.testing.assert_array_equal(ev.ranks.present[0][0], sorted(present))
        for x in ((0, 0), (1, 0), (1, 1), (2, 1)):
            stats = ev.groups(x)
            assert np.all(np.diff(stats.keys) > 0)
            ids = stats.id_matrix()
            want = sorted({(int(space_id), s) for space_id, s in zip(
                ev.space.group_of[0][x[0]][problem.sample.positions[:, 0]],
                ev.space.group_of[1][x[1]][problem.sample.positions[:, 1]])})
            assert [tuple(int(v) for v in col) for col in ids.T] == want


def test_a_check_starts_from_the_smallest_cached_specialization() -> None:
    """A direct specialization is taken while it is small; past ``_SCAN_ROWS`` rows, any cached y ≺ x
    with fewer rows is taken instead (a check costs about its base's rows), never one that is not ≺ x."""
    cache = tables_module.TableCache(2, 10**9)

    def table(rows: int) -> tuple[np.ndarray, np.ndarray]:
        return np.arange(rows, dtype=np.int64), np.ones(rows, dtype=np.int64)

    big = tables_module._SCAN_ROWS + 1
    cache.put((1, 2), table(big))  # x's direct specialization, large
    cache.put((0, 2), table(10))  # below x too, small
    cache.put((2, 0), table(5))  # smaller still, and below x = (2, 2)
    cache.put((3, 0), table(1))  # not below x
    x = (2, 2)
    assert cache.specialization(x, [(1, 2), (2, 1)]) == (2, 0)
    cache.put((2, 1), table(20))  # a small direct one: taken without a scan
    assert cache.specialization(x, [(1, 2), (2, 1)]) == (2, 1)
    assert cache.specialization((1, 3), [(0, 3), (1, 2)]) == (0, 2)  # (1, 2) is big: (0, 2) is smaller
    assert cache.specialization((0, 1), [(0, 0)]) is None
