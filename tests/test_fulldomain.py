"""Full-domain generalization with record suppression (seed 004): the transformation space,
the evaluator against independent counts over the raw records (read with pyarrow, levels
applied in plain Python), roll-up against grouping from the cells, quality bounds and the
predictive properties, and bad inputs."""

from __future__ import annotations

import csv
import math
import random
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deid_sql import DeidError, PolicyError, Problem, SpecError, plan_of
from deid_sql.fixtures import adult_hierarchy_spec
from deid_sql.fulldomain import (
    KL,
    AverageRisk,
    Discernibility,
    DistinctLDiversity,
    KAnonymity,
    Loss,
    NonUniformEntropy,
    TransformationSpace,
    TransformEvaluator,
)
from deid_sql.fulldomain import tables as tables_module

from .problems import RACES, ZIPS, write_small_problem

ADULT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult"
ADULT_ATTRIBUTES = ("sex", "age", "race", "marital-status", "education", "native-country", "workclass",
                    "occupation", "salary-class")
QUALITIES = (Loss, NonUniformEntropy, Discernibility, KL)


# -------------------------------------------------------------------------------------------
# problems
# -------------------------------------------------------------------------------------------
def adult_spec(folder: Path, attributes: Sequence[str] = ADULT_ATTRIBUTES, release: str | None = None) -> Path:
    """A spec over the shared Adult files (skips the test when they are absent); ``release`` the
    ``[release]`` table's body (None: none, so every release of the spec is refused)."""
    if not (ADULT / "adult.csv").exists():
        pytest.skip("the shared Adult data set is not available")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "adult.toml"
    text = adult_hierarchy_spec(ADULT, attributes)
    if release:
        text += f"\n[release]\n{release}\n"
    path.write_text(text, encoding="utf-8")
    return path


SMALL_HIERARCHIES = {
    "age": "".join(f"{a};{a // 5 * 5}-{a // 5 * 5 + 4};{a // 10 * 10}-{a // 10 * 10 + 9};*\n" for a in range(31)),
    # level 1 pairs values that are not adjacent in the domain
    "race": "White;White+Asian;*\nBlack;Black+Other;*\nAsian;White+Asian;*\nOther;Black+Other;*\n",
    "zip": "".join(f"{z};{z[:3]}**;{z[:1]}****;*\n" for z in ZIPS),
}


# a criterion that accepts any figures, for tests that release small_spec's data (no criteria, no release)
RELEASE = "max_record_risk = 1.0"


def small_spec(folder: Path, population: bool = False, seed: int = 5, rows: int = 400,
               release: str | None = None) -> Path:
    """write_small_problem's data (age 0..30, sex, race, zip; dx) with hierarchies for age,
    race and zip; sex has none (levels: kept, *).  ``release`` is the ``[release]`` table's body
    (None: none, so every release of the spec is refused; ``RELEASE`` a permissive criterion)."""
    write_small_problem(folder, seed=seed, rows=rows, population=population)
    for name, text in SMALL_HIERARCHIES.items():
        (folder / f"{name}.csv").write_text(text, encoding="utf-8")
    lines = [] if population else ['population = "sample"']
    lines += ["", "[source]", 'path = "source.parquet"', ""]
    if population:
        lines += ["[population]", 'path = "population.parquet"', 'count = "people"', ""]
    lines += ["[[qi]]", 'name = "age"', 'kind = "integer"', "min = 0", "max = 30", 'hierarchy = "age.csv"', "",
              "[[qi]]", 'name = "sex"', 'kind = "category"', 'values = ["Female", "Male"]', "",
              "[[qi]]", 'name = "race"', 'kind = "category"', 'values_from = "hierarchy"', 'hierarchy = "race.csv"', "",
              "[[qi]]", 'name = "zip"', 'kind = "zip"', 'values_from = "hierarchy"', 'hierarchy = "zip.csv"', "",
              "[columns]", 'drop = ["id"]', 'sensitive = ["dx"]', ""]
    if release:
        lines += ["[release]", release, ""]
    path = folder / "spec.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


# -------------------------------------------------------------------------------------------
# the independent reference: raw records, hierarchies read with csv, levels applied in Python
# -------------------------------------------------------------------------------------------
@dataclass
class Reference:
    columns: list[list[str]]  # per QI, every record's value as text
    labels: list[list[dict[str, str]]]  # per QI and level: value -> label
    domains: list[list[str]]  # per QI, the domain's values as text
    sensitive: list[str | None] | None = None
    _leaves: dict[tuple[int, int], Counter[str]] = field(default_factory=dict)

    @property
    def records(self) -> int:
        return len(self.columns[0])

    def generalized(self, levels: Sequence[int]) -> list[tuple[str, ...]]:
        maps = [self.labels[q][lvl] for q, lvl in enumerate(levels)]
        return [tuple(maps[q][col[i]] for q, col in enumerate(self.columns)) for i in range(self.records)]

    def leaves(self, q: int, level: int, label: str) -> int:
        """Domain values under ``label`` at ``level`` of QI q."""
        if (q, level) not in self._leaves:
            self._leaves[q, level] = Counter(self.labels[q][level][v] for v in self.domains[q])
        return self._leaves[q, level][label]


def read_hierarchy(path: Path) -> dict[str, list[str]]:
    with open(path, encoding="utf-8-sig", newline="") as f:
        return {row[0]: row for row in csv.reader(f, delimiter=";") if row}


def reference(table: pa.Table, qis: Sequence[tuple[str, Path | None, list[str]]],
              sensitive: str | None = None) -> Reference:
    columns, labels, domains = [], [], []
    for column, hierarchy, domain in qis:
        columns.append([str(v) for v in table.column(column).to_pylist()])
        if hierarchy is None:
            labels.append([{v: v for v in domain}, {v: "*" for v in domain}])
        else:
            rows = read_hierarchy(hierarchy)
            labels.append([{v: rows[v][lvl] for v in domain} for lvl in range(len(next(iter(rows.values()))))])
        domains.append(domain)
    sens = table.column(sensitive).to_pylist() if sensitive else None
    return Reference(columns, labels, domains, sens)


def small_reference(spec: Path) -> Reference:
    table = pq.read_table(spec.parent / "source.parquet")
    folder = spec.parent
    return reference(table, [("age", folder / "age.csv", [str(a) for a in range(31)]),
                             ("sex", None, ["Female", "Male"]),
                             ("race", folder / "race.csv", list(RACES)),
                             ("zip", folder / "zip.csv", list(ZIPS))], sensitive="dx")


def adult_reference(attributes: Sequence[str]) -> Reference:
    table = pacsv.read_csv(ADULT / "adult.csv", parse_options=pacsv.ParseOptions(delimiter=";"))
    qis = []
    for a in attributes:
        path = ADULT / f"adult_hierarchy_{a}.csv"
        domain = [str(v) for v in range(17, 91)] if a == "age" else list(read_hierarchy(path))
        qis.append((a, path, domain))
    return reference(table, qis)


def expected_kanon(ref: Reference, levels: Sequence[int], k: int, limit: float) -> dict[str, object]:
    """Suppressed records, kept groups, acceptance and Iyengar's loss counted from the records."""
    rows = ref.generalized(levels)
    sizes = Counter(rows)
    small = {g for g, n in sizes.items() if n < k}
    suppressed = sum(sizes[g] for g in small)
    kept = [g for g in sizes if g not in small]
    assert all(sizes[g] >= k for g in kept)  # what remains is k-anonymous
    loss = 0.0
    for row in rows:
        for q, label in enumerate(row):
            n = len(ref.domains[q])
            loss += 1.0 if row in small else (ref.leaves(q, levels[q], label) - 1) / (n - 1)
    return {"suppressed": suppressed, "groups": len(sizes), "groups_kept": len(kept),
            "accepted": suppressed <= math.floor(limit * ref.records + 1e-9),
            "loss": loss / (ref.records * len(ref.columns))}


# -------------------------------------------------------------------------------------------
# fixtures
# -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_spec(tmp_path_factory.mktemp("fd_small"))


@pytest.fixture(scope="module")
def small(small_path: Path) -> Iterator[Problem]:
    with Problem.from_spec(small_path) as p:
        yield p


@pytest.fixture(scope="module")
def small_ref(small_path: Path) -> Reference:
    return small_reference(small_path)


@pytest.fixture(scope="module")
def census(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Problem]:
    with Problem.from_spec(small_spec(tmp_path_factory.mktemp("fd_census"), population=True)) as p:
        yield p


ADULT4 = ("age", "race", "marital-status", "education")


@pytest.fixture(scope="module")
def adult4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Problem]:
    with Problem.from_spec(adult_spec(tmp_path_factory.mktemp("fd_adult4"), ADULT4)) as p:
        yield p


@pytest.fixture(scope="module")
def adult9(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Problem]:
    with Problem.from_spec(adult_spec(tmp_path_factory.mktemp("fd_adult9"))) as p:
        yield p


# -------------------------------------------------------------------------------------------
# the space
# -------------------------------------------------------------------------------------------
def test_space_of_adult(adult9: Problem) -> None:
    space = TransformationSpace(adult9)
    assert space.heights == (2, 5, 2, 3, 4, 3, 3, 3, 2)
    assert space.size == len(space) == 12_960 == len(set(space))
    assert space.bottom == (0,) * 9 and space.top == (1, 4, 1, 2, 3, 2, 2, 2, 1)
    assert space.rank(space.top) == 18 and space.rank(space.bottom) == 0
    x = (0, 2, 1, 0, 3, 1, 0, 2, 1)
    assert space.text(x) == ("sex:0|age:2|race:1|marital-status:0|education:3|native-country:1|"
                             "workclass:0|occupation:2|salary-class:1")
    assert space.parse(space.text(x)) == x and space.parse("age:2") == (0, 2) + (0,) * 7
    assert space.parse("top") == space.top and space.check(space.text(x)) == x
    ups, downs = space.generalizations(x), space.specializations(x)
    assert len(ups) == 5 and len(downs) == 6
    assert all(space.leq(x, y) and space.rank(y) == space.rank(x) + 1 for y in ups)
    assert all(space.leq(y, x) and space.rank(y) == space.rank(x) - 1 for y in downs)
    assert not space.leq(ups[0], downs[0]) and space.generalizations(space.top) == []
    assert space.specializations(space.bottom) == []
    rec = space.recoding(x)
    assert rec.name == space.text(x) and [q.n_groups for q in rec.qis][:3] == [2, 8, 1]
    assert space.recoding(space.bottom).qis[1].n_groups == 74


def test_space_bad_transformations(small: Problem) -> None:
    space = TransformationSpace(small)
    assert space.heights == (4, 2, 3, 4)  # sex has no hierarchy: kept and *
    for bad, message in [((0, 0, 0), "needs 4 levels"), ((0, 2, 0, 0), "level 2 of QI 'sex' does not exist"),
                         ("age:x", "not a whole number"), ("height:1", "not QI:LEVEL"),
                         ("age:1|age:2", "twice")]:
        with pytest.raises(PolicyError, match=message):
            space.check(bad)
    assert (0, 2, 0, 0) not in space and (3, 1, 2, 3) in space


def test_recoding_compiles_to_the_reference_labels(small: Problem, small_ref: Reference) -> None:
    """The core compiler writes the transformation; its output equals the labels in Python."""
    space = TransformationSpace(small)
    for x in [(0, 0, 0, 0), (1, 1, 1, 2), (2, 0, 1, 1), (3, 1, 2, 3)]:
        out = small.backend.execute(small.query(plan_of(small, space.recoding(x))))
        got = Counter(zip(*(map(str, out.column(c).to_pylist()) for c in ("age", "sex", "race", "zip"))))
        assert got == Counter(small_ref.generalized(x)), x


# -------------------------------------------------------------------------------------------
# k-anonymity and quality against the independent count
# -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k, limit", [(2, 0.0), (5, 0.05), (10, 0.2)])
def test_kanonymity_small_every_transformation(small: Problem, small_ref: Reference, k: int, limit: float) -> None:
    ev = TransformEvaluator(small, KAnonymity(k), Loss(), limit)
    accepted = 0
    for x in ev.space:
        out = ev.apply(x)
        want = expected_kanon(small_ref, x, k, limit)
        assert (out.suppressed, out.groups, out.groups_kept, out.accepted) == (
            want["suppressed"], want["groups"], want["groups_kept"], want["accepted"]), x
        assert out.quality == pytest.approx(want["loss"], abs=1e-12)
        assert out.holds == (out.suppressed == 0)
        if out.accepted:
            accepted += 1
            assert out.suppressed <= limit * small.sample.total
    assert 0 < accepted < ev.space.size
    assert ev.evaluations == ev.space.size


@pytest.mark.slow
def test_kanonymity_adult_four_attributes(adult4: Problem) -> None:
    ref = adult_reference(ADULT4)
    ev = TransformEvaluator(adult4, KAnonymity(5), Loss(), 0.05)
    xs = random.Random(4).sample(list(ev.space), 25) + [ev.space.bottom, ev.space.top]
    for x in xs:
        out = ev.apply(x)
        want = expected_kanon(ref, x, 5, 0.05)
        assert (out.suppressed, out.groups, out.groups_kept, out.accepted) == (
            want["suppressed"], want["groups"], want["groups_kept"], want["accepted"]), x
        assert out.quality == pytest.approx(want["loss"], abs=1e-12)
    assert ev.apply(ev.space.top).accepted and ev.apply(ev.space.top).quality == pytest.approx(1.0)


def test_other_qualities_small(small: Problem, small_ref: Reference) -> None:
    """Non-uniform entropy, discernibility and KL recomputed from the records."""
    n = small_ref.records
    marginal = [Counter(col) for col in small_ref.columns]
    top = sum(c * math.log2(n / c) for m in marginal for c in m.values())
    cells = Counter(zip(*small_ref.columns))
    cells_xlogx = sum(c * math.log(c) for c in cells.values())
    evs = {cls: TransformEvaluator(small, KAnonymity(4), cls(), 0.1) for cls in (NonUniformEntropy, Discernibility, KL)}
    for x in random.Random(2).sample(list(evs[KL].space), 30):
        rows = small_ref.generalized(x)
        sizes = Counter(rows)
        gen_count = [Counter(r[q] for r in rows) for q in range(4)]
        supp = {g for g, c in sizes.items() if c < 4}
        s = sum(sizes[g] for g in supp)
        nue = 0.0
        for i, row in enumerate(rows):
            for q in range(4):
                orig = marginal[q][small_ref.columns[q][i]]
                nue += math.log2((n if row in supp else gen_count[q][row[q]]) / orig)
        assert evs[NonUniformEntropy].apply(x).quality == pytest.approx(nue / top, abs=1e-12)
        disc = sum(c * c for g, c in sizes.items() if g not in supp) + n * s
        assert evs[Discernibility].apply(x).quality == pytest.approx(disc)
        width = {g: math.prod(small_ref.leaves(q, x[q], g[q]) for q in range(4)) for g in sizes}
        kept = sum(c * math.log(c / width[g]) for g, c in sizes.items() if g not in supp)
        all_w = math.prod(len(d) for d in small_ref.domains)
        kl = (cells_xlogx - kept - (s * math.log(s / all_w) if s else 0.0)) / n
        assert evs[KL].apply(x).quality == pytest.approx(kl, abs=1e-10)


def test_bounds_equal_the_core_metrics(adult4: Problem) -> None:
    """With no suppression, Loss, KL and discernibility are the core's metrics of the recoding."""
    evs = {cls: TransformEvaluator(adult4, KAnonymity(1), cls(), 0.0) for cls in (Loss, KL, Discernibility)}
    space = evs[Loss].space
    for x in random.Random(1).sample(list(space), 15):
        core = adult4.evaluate(space.recoding(x))
        outs = {cls: ev.apply(x) for cls, ev in evs.items()}
        assert all(o.suppressed == 0 and o.quality == o.bound for o in outs.values())
        assert outs[Loss].bound == pytest.approx(core.iyengar_loss, abs=1e-12)
        assert outs[KL].bound == pytest.approx(core.kl, abs=1e-12)
        assert outs[Discernibility].bound == core.discernibility


# -------------------------------------------------------------------------------------------
# roll-up
# -------------------------------------------------------------------------------------------
def _same_groups(a: TransformEvaluator, b: TransformEvaluator, x: tuple[int, ...]) -> None:
    ga, gb = a.groups(x), b.groups(x)
    np.testing.assert_array_equal(ga.keys, gb.keys)
    np.testing.assert_array_equal(ga.m, gb.m)
    if ga.distinct is not None:
        np.testing.assert_array_equal(ga.distinct, gb.distinct)
    assert a.apply(x) == b.apply(x)


@pytest.mark.slow
def test_rollup_equals_grouping_from_cells_adult(adult9: Problem) -> None:
    rolled = TransformEvaluator(adult9, KAnonymity(5), Loss(), 0.05)
    scratch = TransformEvaluator(adult9, KAnonymity(5), Loss(), 0.05, rollup=False)
    space = rolled.space
    rng = random.Random(9)
    xs = rng.sample(list(space), 60)
    for x in xs:  # then walk up from some of them, so direct specializations are cached
        chain = [x]
        while space.generalizations(chain[-1]) and len(chain) < 4:
            chain.append(rng.choice(space.generalizations(chain[-1])))
        for y in chain:
            _same_groups(rolled, scratch, y)
    assert rolled.rollups > 100 and scratch.rollups == 0


def test_value_tables_from_the_known_groups_equal_grouping_the_cells(small: Problem) -> None:
    """A sensitive column's table counted per known group (no sort) is bit-identical to grouping
    its cells, at every transformation."""
    ev = TransformEvaluator(small, [KAnonymity(2), DistinctLDiversity(2, "dx")], Loss(), 0.1)
    tables = ev._value_tables["dx"]
    for x in ev.space:
        groups = ev.groups(x).keys
        np.testing.assert_array_equal(tables._from_groups(x, groups), tables._from_cells(x))


@pytest.mark.parametrize("cache_rows, rollups", [(600, 20), (1500, 90)])
def test_rollup_with_sensitive_values_and_small_cache(small: Problem, cache_rows: int, rollups: int) -> None:
    """Pair tables (group, dx) roll up too; a small cache evicts and still finds bases."""
    model = DistinctLDiversity(2, "dx")
    rolled = TransformEvaluator(small, model, KL(), 0.1, cache_rows=cache_rows)
    scratch = TransformEvaluator(small, model, KL(), 0.1, rollup=False)
    for x in sorted(rolled.space, key=sum):
        _same_groups(rolled, scratch, x)
    assert rolled.rollups >= rollups and len(rolled._cache) < rolled.space.size
    assert rolled._cache.rows <= cache_rows


@pytest.mark.parametrize("fits", ["neither", "the groups' keys alone", "keys without counts"])
def test_wide_keys_fall_back_to_row_grouping(small: Problem, monkeypatch: pytest.MonkeyPatch, fits: str) -> None:
    """When the bit-packed keys would not fit, groups come from np.unique on rows; when only the
    groups' keys fit (the sensitive code's bits do not), the values' groups are matched by their ids;
    when keys fit but not beside their counts, tables are merged by argsort and still rolled up."""
    normal = TransformEvaluator(small, [KAnonymity(3), DistinctLDiversity(2, "dx")], NonUniformEntropy(), 0.1)
    assert normal._tables.packed and normal._value_tables["dx"].packed
    group_bits = sum(m.bit_length() for m in normal.masks)
    bits = {"neither": 3, "the groups' keys alone": group_bits,
            "keys without counts": group_bits + normal._value_tables["dx"].sbits}[fits]
    monkeypatch.setattr(tables_module, "KEY_BITS", bits)
    wide = TransformEvaluator(small, [KAnonymity(3), DistinctLDiversity(2, "dx")], NonUniformEntropy(), 0.1)
    assert wide._value_tables["dx"].fixed == (fits == "keys without counts")
    assert wide.fixed == (fits != "neither") and wide.rollup == wide.fixed
    assert not wide._tables.packed and not wide._value_tables["dx"].packed
    for x in sorted(random.Random(3).sample(list(wide.space), 30), key=sum):
        a, b = normal.apply(x), wide.apply(x)
        assert (a.suppressed, a.groups, a.groups_kept, a.accepted, a.holds) == (
            b.suppressed, b.groups, b.groups_kept, b.accepted, b.holds)
        assert a.quality == pytest.approx(b.quality) and a.bound == pytest.approx(b.bound)
        if wide.fixed:
            np.testing.assert_array_equal(normal.groups(x).keys, wide.groups(x).keys)
    assert (wide.rollups > 0) == wide.fixed


# -------------------------------------------------------------------------------------------
# bounds and predictive properties (hypothesis over random pairs x ≺ y)
# -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pair_evaluators(adult4: Problem, small: Problem) -> dict[str, list[TransformEvaluator]]:
    return {
        "adult": [TransformEvaluator(adult4, KAnonymity(5), cls(), 0.05) for cls in QUALITIES]
        + [TransformEvaluator(adult4, AverageRisk(0.05), Loss(), 0.05)],
        "small": [TransformEvaluator(small, [KAnonymity(2), DistinctLDiversity(2, "dx")], cls(), 0.1)
                  for cls in QUALITIES]
        + [TransformEvaluator(small, AverageRisk(0.2), KL(), 0.1)],
    }


@st.composite
def ordered_pairs(draw: st.DrawFn, heights: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    x = tuple(draw(st.integers(0, h - 1)) for h in heights)
    y = tuple(draw(st.integers(v, h - 1)) for v, h in zip(x, heights))
    return x, y


@pytest.mark.parametrize("which", ["adult", "small"])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_bounds_and_suppression_monotone(pair_evaluators: dict[str, list[TransformEvaluator]], which: str,
                                         data: st.DataObject) -> None:
    evs = pair_evaluators[which]
    x, y = data.draw(ordered_pairs(evs[0].space.heights))
    assert evs[0].space.leq(x, y)
    for ev in evs:
        ox, oy = ev.apply(x), ev.apply(y)
        assert ox.bound <= ox.quality + 1e-12 and oy.bound <= oy.quality + 1e-12
        assert ox.bound <= oy.bound + 1e-9 * max(1.0, abs(oy.bound))  # insufficient quality is predictive ↑
        assert ev.predictive == {"up", "down"}
        assert oy.suppressed <= ox.suppressed  # hence accepted ↑ and not accepted ↓
        assert (not ox.accepted) or oy.accepted
        assert (not ox.holds) or oy.holds


# -------------------------------------------------------------------------------------------
# ℓ-diversity and average risk
# -------------------------------------------------------------------------------------------
def test_distinct_l_diversity_independent(small: Problem, small_ref: Reference) -> None:
    ev = TransformEvaluator(small, DistinctLDiversity(3, "dx"), Loss(), 0.1)
    assert ev.sensitive is not None and ev.sensitive.values == ("E11.9", "I10", "J45")
    seen_both = set()
    for x in ev.space:
        rows = small_ref.generalized(x)
        sizes, values = Counter(rows), defaultdict(set)
        for row, v in zip(rows, small_ref.sensitive or []):
            values[row].add(v)
        bad = {g for g in sizes if len(values[g]) < 3}
        out = ev.apply(x)
        assert out.suppressed == sum(sizes[g] for g in bad) and out.groups_kept == len(sizes) - len(bad), x
        assert out.accepted == (out.suppressed <= math.floor(0.1 * small_ref.records))
        seen_both.add(out.accepted)
    assert seen_both == {True, False}


def test_ldiversity_with_kanonymity(small: Problem, small_ref: Reference) -> None:
    ev = TransformEvaluator(small, [KAnonymity(6), DistinctLDiversity(2, "dx")], Discernibility(), 0.2)
    for x in random.Random(6).sample(list(ev.space), 20):
        rows = small_ref.generalized(x)
        sizes, values = Counter(rows), defaultdict(set)
        for row, v in zip(rows, small_ref.sensitive or []):
            values[row].add(v)
        bad = {g for g in sizes if sizes[g] < 6 or len(values[g]) < 2}
        assert ev.apply(x).suppressed == sum(sizes[g] for g in bad)


def test_average_risk_sample(small: Problem, small_ref: Reference) -> None:
    """Σ_kept m/g / kept records ≤ t, suppressing the smallest classes first (g = m)."""
    t = 0.15
    ev = TransformEvaluator(small, AverageRisk(t), Loss(), 0.3)
    assert ev.predictive == {"up", "down"}
    for x in ev.space:
        sizes = sorted(Counter(small_ref.generalized(x)).values())
        groups, records, suppressed = len(sizes), sum(sizes), 0
        holds = groups <= t * records
        for m in sizes:
            if groups <= t * records:
                break
            groups, records, suppressed = groups - 1, records - m, suppressed + m
        out = ev.apply(x)
        assert (out.suppressed, out.holds) == (suppressed, holds), x


def test_average_risk_with_census(census: Problem) -> None:
    ev = TransformEvaluator(census, AverageRisk(0.3), Loss(), 0.5)
    assert ev.predictive == frozenset()  # not proven with a census: nothing declared
    model = ev.models[0]
    for x in random.Random(8).sample(list(ev.space), 25):
        core = census.evaluate(ev.space.recoding(x))
        out = ev.apply(x)
        assert out.holds == (core.expected_reidentifications <= 0.3 * core.records)
        stats = ev.groups(x)
        g = stats.census()
        assert (g >= stats.m).all()
        assert float((stats.m / g).sum()) == pytest.approx(core.expected_reidentifications)
        mask = model.suppress(stats, np.zeros(stats.m.size, dtype=bool))
        kept = ~mask
        assert int(stats.m[mask].sum()) == out.suppressed
        if kept.any():
            assert float((stats.m[kept] / g[kept]).sum()) <= 0.3 * float(stats.m[kept].sum()) + 1e-9
            if mask.any():  # the riskiest classes went first
                assert g[mask].max() <= g[kept].min()


# -------------------------------------------------------------------------------------------
# bad inputs
# -------------------------------------------------------------------------------------------
def test_bad_model_parameters(small: Problem) -> None:
    cases = [
        (lambda: KAnonymity(0), "k = 0 must be at least 1"),
        (lambda: KAnonymity(2.5), "must be a whole number"),
        (lambda: TransformEvaluator(small, KAnonymity(401), Loss(), 0.1), "k = 401 exceeds the 400 records"),
        (lambda: TransformEvaluator(small, KAnonymity(2), Loss(), 1.5), r"suppression limit 1.5 .* \[0, 1\]"),
        (lambda: TransformEvaluator(small, KAnonymity(2), Loss(), -0.1), r"suppression limit -0.1"),
        (lambda: TransformEvaluator(small, DistinctLDiversity(2, "race"), Loss(), 0.1),
         "sensitive column 'race' is also the quasi-identifier 'race'"),
        (lambda: TransformEvaluator(small, DistinctLDiversity(2, "diagnosis"), Loss(), 0.1),
         "no column 'diagnosis'"),
        (lambda: TransformEvaluator(small, DistinctLDiversity(4, "dx"), Loss(), 0.1),
         "l = 4 but sensitive column 'dx' has only 3"),
        (lambda: DistinctLDiversity(0, "dx"), "l = 0 must be at least 1"),
        (lambda: AverageRisk(0), "must be in"),
        (lambda: TransformEvaluator(small, [], Loss(), 0.1), "at least one privacy model"),
    ]
    for make, message in cases:
        with pytest.raises(DeidError, match=message) as info:
            make()
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("text, message", [
    ("White;W;*\nBlack;B\nAsian;A;*\nOther;O;*\n", "line 2 has 2 levels but line 1 has 3"),
    ("White;W;*\nBlack;B;*\nAsian;A;*\n", r"no row for 1 domain value\(s\) \('Other'\)"),
    ("White;W;x\nBlack;W;y\nAsian;A;*\nOther;A;*\n", "is not a tree"),
])
def test_bad_hierarchies_are_reported_by_the_spec_loader(tmp_path: Path, text: str, message: str) -> None:
    spec = small_spec(tmp_path)
    (tmp_path / "race.csv").write_text(text, encoding="utf-8")
    spec.write_text(spec.read_text(encoding="utf-8").replace('values_from = "hierarchy"\nhierarchy = "race.csv"',
                                                              f'values = {list(RACES)!r}\nhierarchy = "race.csv"'
                                                              .replace("'", '"')), encoding="utf-8")
    with pytest.raises(SpecError, match=message):
        Problem.from_spec(spec)
