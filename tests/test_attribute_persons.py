"""Per-person attribute figures (METHODS decision 15): a person with several rows holding several
values counts once under each value; the gate's counts on the rows written equal the pure-Python
reading ``evaluate.attribute.reference`` on random data (hypothesis, DuckDB), and a fixed random
case gives the same figures on PostgreSQL and Spark."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deid_sql import Problem
from deid_sql.evaluate import attribute as fig
from deid_sql.release.gate import ReleaseSource, build_gate
from deid_sql.release.plan import plan_of
from tests.engines import ENGINES, Engine, engine_fixture, engine_params

POLICY = "age:every=10"
SPEC = '''[person]
column = "pid"
order = "seen"

[[qi]]
name = "age"
kind = "integer"
min = 0
max = 99
per_person = "first"

[[qi]]
name = "sex"
kind = "category"
values = ["F", "M"]

[columns]
drop = ["pid", "seen"]
sensitive = ["dx"]

[release]
min_k = 1
max_confidence = 1
min_l = 1
min_entropy_l = 1
max_t = 1
t_distance = "equal"
'''
SCHEMA = pa.schema([("pid", pa.string()), ("age", pa.int64()), ("sex", pa.string()), ("seen", pa.int64()),
                    ("dx", pa.string())])


def write(folder: Path, rows: list[dict[str, Any]]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), folder / "enc.parquet")
    spec = folder / "enc.toml"
    spec.write_text('population = "sample"\n[source]\npath = "enc.parquet"\n' + SPEC, encoding="utf-8")
    return spec


def expected(rows: list[dict[str, Any]]) -> dict[str, float]:
    """The worst groups' figures by ``reference``: a person's group is their first row's decade and sex."""
    first: dict[str, dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: (r["seen"], r["age"])):
        first.setdefault(r["pid"], r)
    groups = sorted({(first[p]["age"] // 10, first[p]["sex"]) for p in first})
    gid = {g: i for i, g in enumerate(groups)}
    values = sorted({r["dx"] for r in rows}, key=lambda v: (v is None, str(v)))
    code = {v: i for i, v in enumerate(values)}
    persons = sorted(first)
    pix = {p: i for i, p in enumerate(persons)}
    triples = [(pix[r["pid"]], gid[(first[r["pid"]]["age"] // 10, first[r["pid"]]["sex"])], code[r["dx"]])
               for r in rows]
    vc = fig.reference(triples, len(groups))
    vc = fig.ValueCounts(vc.group, vc.value, vc.persons, vc.size, len(values))
    holders = fig.reference([(p, 0, v) for p, _, v in triples], 1)  # every person of the source: q(v)
    q = np.zeros(len(values))
    q[holders.value] = holders.persons
    q /= q.sum()
    return {"groups": len(groups), "max_confidence": float(fig.confidence(vc).max()),
            "min_distinct_l": float(fig.distinct_l(vc).min()), "min_entropy_l": float(fig.entropy_l(vc).min()),
            "max_t": float(fig.t_equal(vc, q).max())}


def measured(spec: Path) -> dict[str, float]:
    with Problem.from_spec(spec, cache=False) as problem:
        plan = plan_of(problem, POLICY)
        gate = build_gate(ReleaseSource.from_problem(problem), plan, "test")
        figures = gate.measure(problem.backend.execute, problem.query(plan, measuring=True))
    (column,) = figures.attribute
    assert column.column == "dx"
    return {"groups": column.groups, "max_confidence": column.max_confidence,
            "min_distinct_l": column.min_distinct_l, "min_entropy_l": column.min_entropy_l, "max_t": column.max_t}


@st.composite
def encounters(draw: st.DrawFn) -> list[dict[str, Any]]:
    rows = []
    for p in range(draw(st.integers(1, 25))):
        age, sex = draw(st.integers(0, 99)), draw(st.sampled_from("FM"))
        for seen in range(draw(st.integers(1, 4))):
            rows.append({"pid": f"P{p:02d}", "age": age if seen == 0 else draw(st.integers(0, 99)), "sex": sex,
                         "seen": seen, "dx": draw(st.sampled_from(["A", "B", "C", "D", None]))})
    return rows


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=encounters())
def test_per_person_figures_equal_the_reference(tmp_path_factory: pytest.TempPathFactory,
                                                rows: list[dict[str, Any]]) -> None:
    spec = write(tmp_path_factory.mktemp("attr"), rows)
    assert measured(spec) == pytest.approx(expected(rows), rel=1e-12, abs=1e-12)


def test_a_person_with_two_values_counts_under_each(tmp_path: Path) -> None:
    """Two persons of one group: P0 holds A and B, P1 holds A; confidence of A is 2/2, not 2/3."""
    rows = [{"pid": "P0", "age": 30, "sex": "F", "seen": 0, "dx": "A"},
            {"pid": "P0", "age": 30, "sex": "F", "seen": 1, "dx": "B"},
            {"pid": "P1", "age": 31, "sex": "F", "seen": 0, "dx": "A"}]
    got = measured(write(tmp_path, rows))
    assert got["max_confidence"] == 1.0 and got["min_distinct_l"] == 2.0 and got["groups"] == 1


def fixed_rows() -> list[dict[str, Any]]:
    rng = random.Random(40)
    return [{"pid": f"P{p:03d}", "age": age, "sex": sex, "seen": v, "dx": rng.choice(["A", "B", "C", None])}
            for p in range(80) for age, sex in [(rng.randint(0, 99), rng.choice("FM"))]
            for v in range(rng.randint(1, 4))]


@pytest.fixture(scope="module", params=engine_params(*ENGINES))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


def test_every_engine_counts_the_same_per_person_figures(engine: Engine, tmp_path: Path) -> None:
    rows = fixed_rows()
    local = write(tmp_path, rows)
    source = engine.load("attr_encounters", pa.Table.from_pylist(rows, schema=SCHEMA))
    spec = engine.folder / "attr.toml"
    spec.write_text(local.read_text(encoding="utf-8").replace('[source]\npath = "enc.parquet"\n',
                                                             engine.header() + f"\n[source]\n{source}\n"),
                    encoding="utf-8")
    want = expected(rows)
    assert measured(local) == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert measured(spec) == pytest.approx(want, rel=1e-12, abs=1e-12)
