"""The attribute-disclosure models in the full-domain search (issue 40, METHODS decision 15):
entropy and recursive (c,ℓ)-diversity, t-closeness (equal, ordered, hierarchical), the confidence
bound and δ-presence judge each transformation as an independent pure-Python reading of their
definitions does; the searches' optimum equals exhaustive enumeration with and without suppression;
each model's predictive properties are the right ones (none with suppression: a generalization can
be rejected where its specialization was accepted)."""

from __future__ import annotations

import math
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deid_sql import DeidError, Problem
from deid_sql.fulldomain import (
    KL,
    Confidence,
    Discernibility,
    DistinctLDiversity,
    EntropyLDiversity,
    KAnonymity,
    Loss,
    NonUniformEntropy,
    Presence,
    PrivacyModel,
    RecursiveCLDiversity,
    TCloseness,
    TransformationSpace,
    TransformEvaluator,
)
from deid_sql.search.paths import TRAVERSALS

from .baselines.fulldomain import exhaustive
from .test_fulldomain import small_reference, small_spec

ORDER = ["J45", "E11.9", "I10"]  # a declared order unlike the codes' (sorted) order
DX_HIERARCHY = {"E11.9": ("E11.9", "EI", "*"), "I10": ("I10", "EI", "*"), "J45": ("J45", "J", "*")}

MODELS: dict[str, Callable[[], PrivacyModel]] = {
    "entropy": lambda: EntropyLDiversity(2.5, "dx"),
    "recursive": lambda: RecursiveCLDiversity(2, 2, "dx"),
    "t-equal": lambda: TCloseness(0.15, "dx", "equal"),
    "t-ordered": lambda: TCloseness(0.1, "dx", "ordered", order=ORDER),
    "t-hierarchical": lambda: TCloseness(0.1, "dx", "hierarchical", hierarchy=DX_HIERARCHY),
    "confidence": lambda: Confidence(0.6, "dx"),
    "distinct-ignoring": lambda: DistinctLDiversity(2, "dx", ignore_values=["I10"]),
    "confidence-ignoring": lambda: Confidence(0.5, "dx", ignore_values=["J45"]),
}


# -- an independent reading of decision 15 (one value per record) ---------------------------------
def _t_equal(p: dict[str, float], q: dict[str, float]) -> float:
    return 0.5 * sum(abs(p.get(v, 0.0) - q[v]) for v in q)


def _t_ordered(p: dict[str, float], q: dict[str, float], order: Sequence[str]) -> float:
    cum, total = 0.0, 0.0
    for v in order:
        cum += p.get(v, 0.0) - q[v]
        total += abs(cum)
    return total / (len(order) - 1)


def _t_hierarchical(p: dict[str, float], q: dict[str, float], rows: dict[str, tuple[str, ...]]) -> float:
    height = len(next(iter(rows.values()))) - 1
    extra = {(v,): p.get(v, 0.0) - q[v] for v in q}  # a node is its path from the leaf
    cost = 0.0
    for h in range(1, height + 1):
        up: dict[str, list[float]] = defaultdict(list)
        for node, e in extra.items():
            up[rows[node[0]][h]].append(e)
        extra = {}
        for label, es in up.items():
            pos = sum(e for e in es if e > 0)
            neg = -sum(e for e in es if e < 0)
            cost += h / height * min(pos, neg)
            leaf = next(v for v in q if rows[v][h] == label)
            extra[(leaf,)] = pos - neg
    return cost


def fails(kind: str, values: list[str], q: dict[str, float]) -> bool:
    """Does a group of records with these sensitive ``values`` fail model ``kind``?"""
    n = len(values)
    counts = Counter(values)
    if kind == "distinct-ignoring":
        return len([v for v in counts if v != "I10"]) < 2
    if kind == "confidence-ignoring":
        return max((c for v, c in counts.items() if v != "J45"), default=0) / n > 0.5 * (1 + 1e-9)
    if kind == "confidence":
        return max(counts.values()) / n > 0.6 * (1 + 1e-9)
    p = {v: c / n for v, c in counts.items()}
    if kind == "entropy":
        return math.exp(-sum(x * math.log(x) for x in p.values())) < 2.5 * (1 - 1e-9)
    if kind == "recursive":
        r = sorted(counts.values(), reverse=True)
        return not (len(r) >= 2 and r[0] < 2 * sum(r[1:]))
    if kind == "t-equal":
        return _t_equal(p, q) > 0.15 * (1 + 1e-9)
    if kind == "t-ordered":
        return _t_ordered(p, q, ORDER) > 0.1 * (1 + 1e-9)
    return _t_hierarchical(p, q, DX_HIERARCHY) > 0.1 * (1 + 1e-9)


@pytest.fixture(scope="module")
def small_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_spec(tmp_path_factory.mktemp("attribute-small"), rows=300, seed=11)


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_every_transformation_suppresses_what_the_definition_fails(small_path: Path, kind: str) -> None:
    """Over the whole lattice, the records the evaluator suppresses are those of the groups the
    pure-Python definition fails (each group's values from the raw records)."""
    ref = small_reference(small_path)
    sens = [str(v) for v in ref.sensitive or []]
    total = Counter(sens)
    q = {v: total[v] / len(sens) for v in sorted(total)}
    with Problem.from_spec(small_path) as p:
        space = TransformationSpace(p)
        ev = TransformEvaluator(p, MODELS[kind](), Loss(), 1.0, space=space)
        for x in space:
            groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
            for key, value in zip(ref.generalized(x), sens):
                groups[key].append(value)
            expected = sum(len(vs) for vs in groups.values() if fails(kind, vs, q))
            assert ev.apply(x).suppressed == expected, (kind, x)


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_values_counted_only_where_k_has_not_rejected(small_path: Path, kind: str) -> None:
    """Beside k-anonymity, an attribute model is not asked once k alone suppressed past the limit
    (the transformation is rejected whatever it says), so its value table is never built there;
    every verdict, and every accepted transformation's figures, equal the whole rule's."""
    with Problem.from_spec(small_path) as p:
        space = TransformationSpace(p)
        ev = TransformEvaluator(p, [KAnonymity(4), MODELS[kind]()], Loss(), 0.02, space=space)
        tables = ev._value_tables.get("dx")
        assert tables is not None
        skipped = 0
        for x in space:
            out = ev.apply(x)
            built = x in tables.cache.tables
            stats = ev.groups(x)
            whole = ev.suppress(stats)
            suppressed = int(stats.m[whole].sum())
            assert out.accepted == (suppressed <= ev.max_suppressed), (kind, x)
            if out.accepted:
                assert (out.suppressed, out.groups_kept) == (suppressed, int((~whole).sum())), (kind, x)
            k_alone = int(stats.m[stats.m < 4].sum())
            if k_alone > ev.max_suppressed:
                skipped += not built
        assert skipped > 0


# -- predictive properties -------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_predictive_only_without_suppression_except_distinct_l(small_path: Path, kind: str) -> None:
    with Problem.from_spec(small_path) as p:
        strict = TransformEvaluator(p, MODELS[kind](), Loss(), 0.0)
        loose = TransformEvaluator(p, MODELS[kind](), Loss(), 0.05)
        assert strict.predictive == {"up", "down"}
        assert loose.predictive == ({"up", "down"} if kind == "distinct-ignoring" else frozenset())


def _broken_pairs(ev: TransformEvaluator) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Direct generalizations y of an accepted x that are rejected (acceptance not monotone)."""
    out = []
    for x in ev.space:
        if ev.apply(x).accepted:
            out += [(x, y) for y in ev.space.generalizations(x) if not ev.apply(y).accepted]
    return out


@pytest.mark.parametrize("kind", ["confidence", "entropy", "recursive", "t-equal"])
def test_with_suppression_a_generalization_can_be_rejected(kind: str, tmp_path: Path) -> None:
    """Why these models declare nothing under suppression: on some data an accepted transformation
    has a rejected generalization (a failing group merged into a passing one fails), so a search
    that inferred "accepted ↑" would miss optima.  Without suppression acceptance is monotone."""
    found = []
    for seed in range(40):
        folder = tmp_path / str(seed)
        folder.mkdir()
        with Problem.from_spec(small_spec(folder, seed=seed, rows=60)) as p:
            for limit in (0.05, 0.1, 0.2):
                found += _broken_pairs(TransformEvaluator(p, MODELS[kind](), Loss(), limit))
            assert not _broken_pairs(TransformEvaluator(p, MODELS[kind](), Loss(), 0.0))
        if found:
            break
    assert found, f"no counterexample to monotonicity under suppression for {kind}"


def test_presence_under_suppression_is_not_monotone_either(tmp_path: Path) -> None:
    found = []
    for seed in range(30):
        folder = tmp_path / str(seed)
        folder.mkdir()
        with Problem.from_spec(small_spec(folder, population=True, seed=seed, rows=60)) as p:
            for delta, limit in ((0.05, 0.1), (0.1, 0.2), (0.2, 0.3)):
                found += _broken_pairs(TransformEvaluator(p, Presence(delta), Loss(), limit))
            assert not _broken_pairs(TransformEvaluator(p, Presence(0.1), Loss(), 0.0))
        if found:
            break
    assert found


# -- the searches equal exhaustive enumeration ----------------------------------------------------
QUALITIES = [Loss, NonUniformEntropy, Discernibility, KL]


def _same_optimum(p: Problem, privacy: Callable[[], list[PrivacyModel]], quality: type, limit: float) -> None:
    space = TransformationSpace(p)
    truth = exhaustive(space, TransformEvaluator(p, privacy(), quality(), limit, space=space))
    for name, search in TRAVERSALS.items():
        result = search(space, TransformEvaluator(p, privacy(), quality(), limit, space=space))
        assert (result.optimum is None) == (truth is None), name
        if truth is not None:
            assert result.optimum.quality == pytest.approx(truth.quality, rel=1e-12), name


@pytest.mark.parametrize("kind, seed, limit, quality", [
    ("confidence", 2, 0.1, Discernibility), ("t-equal", 6, 0.2, Loss), ("entropy", 25, 0.1, Loss),
    ("recursive", 34, 0.1, Loss)])
def test_searches_stay_exact_where_acceptance_is_not_monotone(kind: str, seed: int, limit: float, quality: type,
                                                               tmp_path: Path) -> None:
    """Problems on which a search that took these models as predictive under suppression misses the
    optimum (found by declaring them so: every traversal must still equal exhaustive enumeration)."""
    with Problem.from_spec(small_spec(tmp_path, seed=seed, rows=80)) as p:
        _same_optimum(p, lambda: [MODELS[kind]()], quality, limit)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), rows=st.integers(40, 300), k=st.integers(1, 6),
       limit=st.sampled_from([0.0, 0.02, 0.1]), quality=st.sampled_from(QUALITIES),
       kind=st.sampled_from(sorted(MODELS) + ["presence"]))
def test_searches_equal_exhaustive_on_random_problems(seed: int, rows: int, k: int, limit: float, quality: type,
                                                      kind: str) -> None:
    population = kind == "presence"
    with tempfile.TemporaryDirectory() as folder, \
            Problem.from_spec(small_spec(Path(folder), population=population, seed=seed, rows=rows)) as p:
        model = (lambda: Presence(0.2)) if population else MODELS[kind]
        _same_optimum(p, lambda: [KAnonymity(k), model()], quality, limit)


# -- bad input -------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, message", [
    (lambda: EntropyLDiversity(0.5, "dx"), "min_entropy_l = 0.5 must be a number at least 1"),
    (lambda: RecursiveCLDiversity(0, 2, "dx"), "c = 0 must be a number above 0"),
    (lambda: RecursiveCLDiversity(2, 0, "dx"), "ℓ = 0 must be a whole number at least 1"),
    (lambda: Confidence(1.5, "dx"), "max_confidence = 1.5 must be a share in (0, 1]"),
    (lambda: Confidence(0, "dx"), "max_confidence = 0 must be a share in (0, 1]"),
    (lambda: TCloseness(0.2, "dx", "manhattan"), "t_distance = 'manhattan' is not one of"),
    (lambda: TCloseness(0.2, "dx", "hierarchical"), "needs a hierarchy of the sensitive column 'dx'"),
    (lambda: Presence(2), "max_presence = 2 must be a share in (0, 1]"),
])
def test_bad_parameters(make: Callable[[], object], message: str) -> None:
    with pytest.raises(DeidError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make()


def test_bad_parameters_against_the_data(small_path: Path) -> None:
    with Problem.from_spec(small_path) as p:
        with pytest.raises(DeidError, match="whose values are not numbers and that declares no order"):
            TransformEvaluator(p, TCloseness(0.2, "dx", "ordered"), Loss(), 0.0)
        with pytest.raises(DeidError, match="lacks value 'J45'"):
            TransformEvaluator(p, TCloseness(0.2, "dx", "ordered", order=["E11.9", "I10"]), Loss(), 0.0)
        with pytest.raises(DeidError, match="has no row for value 'I10'"):
            TransformEvaluator(p, TCloseness(0.2, "dx", "hierarchical", hierarchy={"E11.9": ("E11.9", "*")}),
                               Loss(), 0.0)
        with pytest.raises(DeidError, match="max_presence needs a census"):
            TransformEvaluator(p, Presence(0.5), Loss(), 0.0)


# -- the B20 data: anonymize --out meets the attribute criteria ----------------------------
DIAGNOSES = ["B20", "E11", "I10", "J45"]


def b20_spec(folder: Path, release: str) -> Path:
    """200 persons, 40 ages of five each (age 0's five all B20, every other age four diagnoses with
    one twice); age generalizes to decades then *; sex has two values."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ages = [a for a in range(40) for _ in range(5)]
    dx = ["B20" if a == 0 else DIAGNOSES[(a + j) % 4] for a in range(40) for j in range(5)]
    sex = ["Female" if (a // 2) % 2 else "Male" for a in ages]
    pq.write_table(pa.table({"age": ages, "sex": sex, "diagnosis": dx}), folder / "source.parquet")
    (folder / "age.csv").write_text("".join(f"{a};{a // 10 * 10}-{a // 10 * 10 + 9};*\n" for a in range(40)))
    (folder / "spec.toml").write_text("\n".join([
        'population = "sample"', "", "[source]", 'path = "source.parquet"', "",
        "[[qi]]", 'name = "age"', 'kind = "integer"', "min = 0", "max = 39", 'hierarchy = "age.csv"', "",
        "[[qi]]", 'name = "sex"', 'kind = "category"', 'values = ["Female", "Male"]', "",
        "[columns]", 'sensitive = ["diagnosis"]', "", "[release]", release, ""]))
    return folder / "spec.toml"


def _released_figures(path: Path, source: Path) -> tuple[float, float, float, int]:
    """(largest share, fewest distinct values, largest equal t) over the released groups of a written
    file, by evaluate/attribute.py, and the records kept."""
    import pyarrow.parquet as pq

    from deid_sql.evaluate import attribute as figures

    out = pq.read_table(path).to_pylist()
    kept = [r for r in out if not r.get("deid_suppressed")]
    keys = sorted({(r["age"], r["sex"]) for r in kept})
    index = {key: i for i, key in enumerate(keys)}
    code = {d: i for i, d in enumerate(DIAGNOSES)}
    sizes = Counter(index[(r["age"], r["sex"])] for r in kept)
    vc = figures.ValueCounts.of([index[(r["age"], r["sex"])] for r in kept], [code[r["diagnosis"]] for r in kept],
                                [1.0] * len(kept), [sizes[g] for g in range(len(keys))], len(DIAGNOSES))
    every = Counter(pq.read_table(source).column("diagnosis").to_pylist())
    q = [every[d] / sum(every.values()) for d in DIAGNOSES]
    return (float(figures.confidence(vc).max()), float(figures.distinct_l(vc).min()),
            float(figures.t_equal(vc, q).max()), len(kept))


@pytest.mark.parametrize("suppression", ["0", "0.05"])
def test_anonymize_out_meets_the_three_criteria_on_b20_data(tmp_path: Path, run: Callable[..., object],
                                                            suppression: str) -> None:
    """The issue's case: the bottom releases an all-B20 group; with max_confidence = 0.8, min_l = 2 and
    max_t = 0.5 the release written by ``anonymize --out`` meets all three (by flags, and by the spec's
    [release] criteria with no flag).  Without suppression age is generalized; with 5 % the B20 group
    is suppressed instead."""
    spec = b20_spec(tmp_path, 'min_k = 5\nmax_confidence = 0.8\nmin_l = 2\nmax_t = 0.5\nt_distance = "equal"')
    with Problem.from_spec(spec) as p:  # the original data fails: one group is all B20
        ev = TransformEvaluator(p, [Confidence(0.8, "diagnosis")], Loss(), 0.0)
        assert not ev.apply(ev.space.bottom).holds
    flags = ["--min-k", "5", "--max-confidence", "0.8", "--min-l", "2", "--max-t", "0.5", "--t-distance", "equal",
             "--sensitive", "diagnosis"]
    for name, args in (("flags", flags), ("spec", [])):
        out = tmp_path / f"{name}-{suppression}.parquet"
        result = run("anonymize", spec, *args, "--max-suppressed-share", suppression, "--out", out)
        assert "optimum" in result.stdout  # type: ignore[attr-defined]
        share, distinct, t, kept = _released_figures(out, tmp_path / "source.parquet")
        assert share <= 0.8 and distinct >= 2 and t <= 0.5, (name, share, distinct, t)
        assert kept == (200 if suppression == "0" else 195), name


@pytest.mark.parametrize("args, message", [
    (["--max-t", "0.5"], "--max-t needs --sensitive COLUMN"),
    (["--max-t", "0.5", "--sensitive", "diagnosis"], "--max-t needs --t-distance"),
    (["--t-distance", "equal", "--min-k", "5"], "--t-distance is the distance of --max-t"),
    (["--max-confidence", "0.5"], "--max-confidence needs --sensitive COLUMN"),
    (["--max-presence", "0.5"], "max_presence needs a census"),
    (["--max-t", "0.5", "--t-distance", "ordered", "--sensitive", "diagnosis"], "not numbers and that declares no"),
    (["--recursive-cl", "3", "1.5", "--sensitive", "diagnosis"], "ℓ must be a whole number"),
    (["--max-confidence", "1.5", "--sensitive", "diagnosis"], "1.5"),
])
def test_bad_flags_one_line_exit_2_nothing_written(tmp_path: Path, run: Callable[..., object], args: list[str],
                                                   message: str) -> None:
    spec = b20_spec(tmp_path, "min_k = 5")
    out = tmp_path / "out.parquet"
    result = run("anonymize", spec, *args, "--out", out, expect=2)
    text = result.stdout + result.stderr  # type: ignore[attr-defined]
    assert message in text and "Traceback" not in text
    assert not out.exists()


# -- Adult with occupation sensitive ---------------------------------------------------------------
# the optimum (loss) of each model over the other eight attributes, recorded by this implementation
# (ARX 3.9 was not available to compare against); each equals exhaustive enumeration
ADULT_OPTIMA = {
    ("distinct-l 3", 0.0): ("sex:0|age:4|race:0|marital-status:2|education:3|native-country:2|workclass:2|"
                            "salary-class:0", 0.625),
    ("distinct-l 3", 0.04): ("sex:0|age:3|race:0|marital-status:0|education:2|native-country:1|workclass:1|"
                             "salary-class:0", 0.177799),
    ("entropy-l 3", 0.0): ("sex:0|age:4|race:0|marital-status:1|education:3|native-country:2|workclass:2|"
                           "salary-class:1", 0.679145),
    ("entropy-l 3", 0.04): ("sex:0|age:3|race:0|marital-status:1|education:2|native-country:1|workclass:1|"
                            "salary-class:0", 0.228762),
    ("recursive (4,3)", 0.0): ("sex:0|age:4|race:0|marital-status:2|education:3|native-country:2|workclass:2|"
                               "salary-class:0", 0.625),
    ("recursive (4,3)", 0.04): ("sex:0|age:2|race:0|marital-status:1|education:2|native-country:1|workclass:1|"
                                "salary-class:0", 0.215232),
    ("t equal 0.2", 0.0): ("sex:1|age:4|race:1|marital-status:1|education:3|native-country:2|workclass:2|"
                           "salary-class:1", 0.929145),
    ("t equal 0.2", 0.04): ("sex:1|age:4|race:1|marital-status:1|education:3|native-country:1|workclass:2|"
                            "salary-class:1", 0.839694),
    ("t hierarchical 0.2", 0.0): ("sex:0|age:4|race:1|marital-status:1|education:3|native-country:2|workclass:2|"
                                  "salary-class:1", 0.804145),
    ("t hierarchical 0.2", 0.04): ("sex:1|age:4|race:0|marital-status:0|education:3|native-country:2|workclass:2|"
                                   "salary-class:1", 0.759018),
    ("confidence 0.5", 0.0): ("sex:0|age:4|race:0|marital-status:2|education:3|native-country:2|workclass:2|"
                              "salary-class:0", 0.625),
    ("confidence 0.5", 0.04): ("sex:0|age:2|race:0|marital-status:0|education:3|native-country:1|workclass:1|"
                               "salary-class:0", 0.24122),
}


@pytest.mark.slow
def test_adult_with_occupation_sensitive_each_model(tmp_path: Path) -> None:
    from .test_fulldomain import ADULT, ADULT_ATTRIBUTES, adult_spec

    hierarchy = str(ADULT / "adult_hierarchy_occupation.csv")
    models: dict[str, Callable[[], PrivacyModel]] = {
        "distinct-l 3": lambda: DistinctLDiversity(3, "occupation"),
        "entropy-l 3": lambda: EntropyLDiversity(3, "occupation"),
        "recursive (4,3)": lambda: RecursiveCLDiversity(4, 3, "occupation"),
        "t equal 0.2": lambda: TCloseness(0.2, "occupation", "equal"),
        "t hierarchical 0.2": lambda: TCloseness(0.2, "occupation", "hierarchical", hierarchy_file=hierarchy),
        "confidence 0.5": lambda: Confidence(0.5, "occupation"),
    }
    attributes = [a for a in ADULT_ATTRIBUTES if a != "occupation"]
    with Problem.from_spec(adult_spec(tmp_path, attributes)) as p:
        space = TransformationSpace(p)
        for (name, limit), (levels, quality) in ADULT_OPTIMA.items():
            truth = exhaustive(space, TransformEvaluator(p, models[name](), Loss(), limit, space=space))
            result = TRAVERSALS["paths"](space, TransformEvaluator(p, models[name](), Loss(), limit, space=space))
            print(name, limit, space.text(truth.levels), f"{truth.quality:.6f}", f"checked {result.checked}")
            assert result.optimum.quality == pytest.approx(truth.quality, rel=1e-12), (name, limit)
            assert truth.quality == pytest.approx(quality, abs=1e-6), (name, limit)
            assert space.text(truth.levels) == levels, (name, limit)


def test_the_sidecar_records_the_attribute_models_and_a_rerun_repeats_them(small_path: Path) -> None:
    from deid_sql.jobs.anonymize import anonymize, model_words, privacy_models, release_suppression, rerun

    with Problem.from_spec(small_path) as p:
        models = privacy_models(2, sensitive="dx", min_entropy_l=1.5, recursive_cl=(3, 2), max_t=0.3,
                                t_distance="ordered", max_confidence=0.9, ignore_values=["I10"], order=ORDER)
        run = anonymize(p, models, 0.05)
        recorded = release_suppression(run).parameters["anonymize"]
        again = rerun(p, recorded)
        assert [repr(m) for m in again.models] == [repr(m) for m in models] and again.levels == run.levels
        assert "t-closeness (t = 0.3, ordered distance" in model_words(models)
