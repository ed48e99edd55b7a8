"""Cells that carry a sensitive value (``loading/sensitive.py``, METHODS decision 15): with ``[person]``
f(cell, v) counts the persons of the cell holding v on any of their rows (in the source, or in a
linked ``[[table]]``), each person in the cell the load put them in, equal to a pure-Python reading
on random data (hypothesis); the full-domain evaluator judges persons with them (each transformation's
suppressed persons equal the reference's, and every search's optimum equals exhaustive enumeration);
and the counts are kept in the cells cache beside the cells: a second load runs no query for them,
a changed column or source counts afresh."""

from __future__ import annotations

import math
import random
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from deid_sql import Problem
from deid_sql.fulldomain import (
    Confidence,
    DistinctLDiversity,
    EntropyLDiversity,
    KAnonymity,
    Loss,
    PrivacyModel,
    RecursiveCLDiversity,
    TCloseness,
    TransformationSpace,
    TransformEvaluator,
)
from deid_sql.loading.cache import CellsCache
from deid_sql.loading.sensitive import sensitive_cells
from deid_sql.search.paths import TRAVERSALS

from .baselines.fulldomain import exhaustive
from .engines import ENGINES, Engine, engine_fixture, engine_params

AGE_LEVELS = (1, 5, 10, 100)  # the age hierarchy: the value, 5-year bands, decades, *
AGE_H = "".join(f"{a};{a // 5 * 5}-{a // 5 * 5 + 4};{a // 10 * 10}-{a // 10 * 10 + 9};*\n" for a in range(100))
SPEC = '''population = "sample"
[source]
path = "enc.parquet"

[person]
column = "pid"
order = "seen"

[[qi]]
name = "age"
kind = "integer"
min = 0
max = 99
per_person = "first"
hierarchy = "age.csv"

[[qi]]
name = "sex"
kind = "category"
values = ["F", "M"]

[columns]
drop = ["pid", "seen"]
sensitive = ["dx", "dx2"]
'''
LINKED = '''
[[table]]
name = "diagnoses"
path = "diagnoses.parquet"
sensitive = ["code"]
'''
SCHEMA = pa.schema([("pid", pa.string()), ("age", pa.int64()), ("sex", pa.string()), ("seen", pa.int64()),
                    ("dx", pa.string()), ("dx2", pa.string())])
DIAGNOSES = pa.schema([("pid", pa.string()), ("code", pa.string())])
DX = ["A", "B", "C", "D", None]


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEID_SENSITIVE_KEY", "k" * 32)


def write(folder: Path, rows: list[dict[str, Any]], diagnoses: list[dict[str, Any]] | None = None) -> Path:
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), folder / "enc.parquet")
    (folder / "age.csv").write_text(AGE_H, encoding="utf-8")
    text = SPEC
    if diagnoses is not None:  # a set: the person key pseudonymized, so patients join
        pq.write_table(pa.Table.from_pylist(diagnoses, schema=DIAGNOSES), folder / "diagnoses.parquet")
        text = text.replace('drop = ["pid", "seen"]', 'drop = ["seen"]\npseudonymize = ["pid"]\n'
                            'secret_env = "DEID_SENSITIVE_KEY"') + LINKED
    spec = folder / "enc.toml"
    spec.write_text(text, encoding="utf-8")
    return spec


def person_cells(rows: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Each person's cell by hand: the age of their first row by ``seen`` (ties: the least age), their sex."""
    first: dict[str, dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: (r["seen"], r["age"])):
        first.setdefault(r["pid"], r)
    return {p: (r["age"], "FM".index(r["sex"])) for p, r in first.items()}


def holders(cell_of: dict[str, tuple[int, int]], pairs: list[tuple[str, str | None]]
            ) -> dict[tuple[int, int, str | None], int]:
    """f(cell, v): the persons of each cell holding each value (pairs of a key naming no person count nowhere)."""
    seen: dict[tuple[int, int, str | None], set[str]] = defaultdict(set)
    for pid, value in pairs:
        if pid in cell_of:
            seen[(*cell_of[pid], value)].add(pid)
    return {k: len(v) for k, v in seen.items()}


def counted(spec: Path, column: str, cache: CellsCache | bool = False) -> dict[tuple[int, int, str | None], int]:
    with Problem.from_spec(spec, cache=cache) as problem:
        cells = sensitive_cells(problem, column)
    assert cells.per_person and cells.column == column
    return {(int(p[0]), int(p[1]), cells.values[c]): int(n)
            for p, c, n in zip(cells.positions, cells.codes, cells.counts)}


@st.composite
def encounters(draw: st.DrawFn) -> list[dict[str, Any]]:
    rows = []
    for p in range(draw(st.integers(1, 25))):
        age, sex = draw(st.integers(0, 99)), draw(st.sampled_from("FM"))
        for seen in range(draw(st.integers(1, 4))):
            rows.append({"pid": f"P{p:02d}", "age": age if seen == 0 else draw(st.integers(0, 99)), "sex": sex,
                         "seen": draw(st.integers(0, 3)), "dx": draw(st.sampled_from(DX)),
                         "dx2": draw(st.sampled_from(DX))})
    return rows


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=encounters())
def test_persons_per_cell_and_value_equal_the_reference(tmp_path_factory: pytest.TempPathFactory,
                                                        rows: list[dict[str, Any]]) -> None:
    """A person with several rows sits in their one cell and counts once under each value they hold."""
    spec = write(tmp_path_factory.mktemp("sens"), rows)
    assert counted(spec, "dx") == holders(person_cells(rows), [(r["pid"], r["dx"]) for r in rows])


@st.composite
def patient_sets(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows, diagnoses = [], []
    for p in range(draw(st.integers(1, 25))):
        pid = f"P{p:02d}"
        rows.append({"pid": pid, "age": draw(st.integers(0, 99)), "sex": draw(st.sampled_from("FM")), "seen": 0,
                     "dx": "x", "dx2": "y"})
        for _ in range(draw(st.integers(0, 4))):  # none, one or several diagnoses, repeats included
            diagnoses.append({"pid": pid, "code": draw(st.sampled_from(DX))})
    diagnoses.append({"pid": "ORPHAN", "code": "Z99"})  # no person of the source: counted nowhere
    return rows, diagnoses


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=patient_sets())
def test_a_linked_tables_values_count_persons_like_the_reference(tmp_path_factory: pytest.TempPathFactory,
                                                                  case: tuple[list[dict[str, Any]],
                                                                              list[dict[str, Any]]]) -> None:
    rows, diagnoses = case
    spec = write(tmp_path_factory.mktemp("sensset"), rows, diagnoses)
    assert counted(spec, "code") == holders(person_cells(rows), [(d["pid"], d["code"]) for d in diagnoses])


# -- the full-domain evaluator judges persons ---------------------------------------------------------
MODELS: dict[str, Callable[[], PrivacyModel]] = {
    "confidence": lambda: Confidence(0.6, "dx"),
    "distinct": lambda: DistinctLDiversity(2, "dx"),
    "entropy": lambda: EntropyLDiversity(1.8, "dx"),
    "recursive": lambda: RecursiveCLDiversity(2, 2, "dx"),
    "t-equal": lambda: TCloseness(0.3, "dx", "equal"),
}


def fails(kind: str, f: dict[str | None, int], n: int, q: dict[str | None, float]) -> bool:
    """Does a group of ``n`` persons, ``f[v]`` of whom hold v, fail model ``kind`` (decision 15)?"""
    total = sum(f.values())
    p = {v: c / total for v, c in f.items()}
    if kind == "confidence":
        return max(f.values()) / n > 0.6 * (1 + 1e-9)
    if kind == "distinct":
        return len(f) < 2
    if kind == "entropy":
        return math.exp(-sum(x * math.log(x) for x in p.values())) < 1.8 * (1 - 1e-9)
    if kind == "recursive":
        r = sorted(f.values(), reverse=True)
        return not (len(r) >= 2 and r[0] < 2 * sum(r[1:]))
    return 0.5 * sum(abs(p.get(v, 0.0) - q[v]) for v in q) > 0.3 * (1 + 1e-9)


def expected_suppressed(rows: list[dict[str, Any]], x: tuple[int, ...], kind: str, k: int) -> int:
    cell_of = person_cells(rows)
    group_of = {pid: (age // AGE_LEVELS[x[0]], sex if x[1] == 0 else 0) for pid, (age, sex) in cell_of.items()}
    members: dict[tuple[int, int], set[str]] = defaultdict(set)
    held: dict[tuple[int, int], dict[str | None, set[str]]] = defaultdict(lambda: defaultdict(set))
    everyone: dict[str | None, set[str]] = defaultdict(set)
    for r in rows:
        members[group_of[r["pid"]]].add(r["pid"])
        held[group_of[r["pid"]]][r["dx"]].add(r["pid"])
        everyone[r["dx"]].add(r["pid"])
    total = sum(len(s) for s in everyone.values())
    q = {v: len(s) / total for v, s in everyone.items()}
    out = 0
    for g, persons in members.items():
        f = {v: len(s) for v, s in held[g].items()}
        if len(persons) < k or fails(kind, f, len(persons), q):
            out += len(persons)
    return out


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=encounters(), kind=st.sampled_from(sorted(MODELS)), k=st.integers(1, 3),
       limit=st.sampled_from([0.0, 0.1, 0.3]))
def test_full_domain_search_counts_persons_and_equals_exhaustive(rows: list[dict[str, Any]], kind: str, k: int,
                                                                 limit: float) -> None:
    """Every transformation is accepted when the persons of the groups that fail (by hand, in persons)
    are within the limit, and then suppresses exactly them; every traversal's optimum equals
    exhaustive enumeration."""
    k = min(k, len({r["pid"] for r in rows}))  # a larger k, or ℓ above the values held, is refused up front
    assume(kind != "distinct" or len({r["dx"] for r in rows}) >= 2)
    with tempfile.TemporaryDirectory() as folder, Problem.from_spec(write(Path(folder), rows)) as p:
        space = TransformationSpace(p)

        def evaluator() -> TransformEvaluator:
            return TransformEvaluator(p, [KAnonymity(k), MODELS[kind]()], Loss(), limit, space=space)

        ev = evaluator()
        assert ev.records == len({r["pid"] for r in rows})  # persons, not rows
        for x in space:  # a rejected x's suppression stops at the limit (models after it are not asked)
            out, expected = ev.apply(x), expected_suppressed(rows, x, kind, k)
            assert out.accepted == (expected <= ev.max_suppressed), (kind, x)
            assert out.suppressed == expected if out.accepted else out.suppressed <= expected, (kind, x)
        truth = exhaustive(space, evaluator())
        for name, search in TRAVERSALS.items():
            found = search(space, evaluator()).optimum
            assert (found is None) == (truth is None), name
            if truth is not None:
                assert found.quality == pytest.approx(truth.quality, rel=1e-12), name


# -- cached beside the cells ----------------------------------------------------------------------------
def fixed_rows(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [{"pid": f"P{p:03d}", "age": age, "sex": sex, "seen": v, "dx": rng.choice(DX), "dx2": rng.choice(DX)}
            for p in range(60) for age, sex in [(rng.randint(0, 99), rng.choice("FM"))]
            for v in range(rng.randint(1, 3))]


def test_a_second_load_counts_no_query_and_a_change_counts_afresh(tmp_path: Path) -> None:
    cache = CellsCache(tmp_path / "cache")
    rows = fixed_rows(1)
    spec = write(tmp_path, rows)
    first = counted(spec, "dx", cache)
    with Problem.from_spec(spec, cache=cache) as problem:
        def refuse(*_: object, **__: object) -> None:
            raise AssertionError("a query ran for cells the cache holds")

        assert not problem.backend.connected  # files from the cache: the engine is not started...
        problem.backend.execute = refuse  # type: ignore[method-assign]  # (monkeypatch would connect it)
        cells = sensitive_cells(problem, "dx")
        again = {(int(p[0]), int(p[1]), cells.values[c]): int(n)
                 for p, c, n in zip(cells.positions, cells.codes, cells.counts)}
        TransformEvaluator(problem, Confidence(0.9, "dx"), Loss(), 0.0).apply("age:1|sex:0")  # from the cache too
        assert not problem.backend.connected  # ...nor by the sensitive cells
    assert again == first
    assert list((tmp_path / "cache").rglob("extras/*.npz"))
    # another column is counted, not served from the first one's counts
    assert counted(spec, "dx2", cache) == holders(person_cells(rows), [(r["pid"], r["dx2"]) for r in rows])
    # a changed source is counted afresh
    changed = fixed_rows(2)
    write(tmp_path, changed)
    assert counted(spec, "dx", cache) == holders(person_cells(changed), [(r["pid"], r["dx"]) for r in changed])


# -- every engine counts the same persons -----------------------------------------------------------------
@pytest.fixture(scope="module", params=engine_params(*ENGINES))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


def test_every_engine_counts_the_same_persons(engine: Engine, tmp_path: Path) -> None:
    """The source's column and a linked table's, on the engine's own tables, equal the reference."""
    rows = fixed_rows(3)
    rng = random.Random(4)
    diagnoses = [{"pid": r["pid"], "code": rng.choice(DX)} for r in rows for _ in range(rng.randint(0, 2))]
    diagnoses.append({"pid": "ORPHAN", "code": "Z99"})
    local = write(tmp_path, rows, diagnoses)
    source = engine.load("sens_encounters", pa.Table.from_pylist(rows, schema=SCHEMA))
    linked = engine.load("sens_diagnoses", pa.Table.from_pylist(diagnoses, schema=DIAGNOSES))
    spec = engine.folder / "sens.toml"
    spec.write_text(local.read_text(encoding="utf-8")
                    .replace('[source]\npath = "enc.parquet"\n', engine.header() + f"\n[source]\n{source}\n")
                    .replace('path = "diagnoses.parquet"\n', f"{linked}\n")
                    .replace('hierarchy = "age.csv"', f'hierarchy = "{tmp_path / "age.csv"}"'), encoding="utf-8")
    cells = person_cells(rows)
    assert counted(spec, "dx") == holders(cells, [(r["pid"], r["dx"]) for r in rows])
    assert counted(spec, "code") == holders(cells, [(d["pid"], d["code"]) for d in diagnoses])
