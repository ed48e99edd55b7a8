"""The two queries of the cells of persons (``deid_sql.loading.person_cells``) agree.

The load runs the fast query (packed positions, first/last as ``min``/``max`` of one integer) and
the exact one only when the fast one counts persons it cannot vouch for.  So: whenever the fast
query is sure of every person, its cells are the exact query's and the exact query has nothing
to report; whenever the exact query has something to report (a NULL key, a varying QI, a row
outside a domain, a row count outside the derived domain), the fast one is unsure.  Checked on
hand-picked tables and on random ones, for every kind of ``[person] order`` column, with first/last
by ``arg_min`` (DuckDB) and by window (PostgreSQL and Spark; their own runs are the engine test
in ``test_persons.py``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deid_sql import Problem
from deid_sql.backends import connect
from deid_sql.errors import DataError
from deid_sql.loading.load import open_table, positions_query, resolve_domains
from deid_sql.loading.person_cells import NULL_ROWS, ROWS_OUT, VARYING, fast_person_cells, person_cells_query
from deid_sql.spec.file import Spec
from tests.engines import ENGINES, Engine, engine_fixture, engine_params

ORDERS = {"int32": pa.int32(), "int64": pa.int64(), "date": pa.date32(), "text": pa.string(),
          "timestamp": pa.timestamp("us")}
SPEC = '''[source]
path = "enc.parquet"
[person]
column = "patient_id"
order = "seen"
[[qi]]
name = "age"
kind = "integer"
min = 0
max = 99
{age}
[[qi]]
name = "sex"
kind = "category"
values = ["F", "M"]
{sex}
[[qi]]
name = "race"
kind = "category"
values = ["A", "B", "C"]
[[qi]]
name = "visits"
kind = "integer"
derived = "rows"
min = 1
max = {visits}
[columns]
drop = ["patient_id", "seen"]
'''


def order_value(kind: str, v: int | None) -> Any:
    if v is None:
        return None
    if kind == "date":
        return dt.date(2020, 1, 1) + dt.timedelta(days=v)
    if kind == "timestamp":
        return dt.datetime(2020, 1, 1) + dt.timedelta(hours=v)
    return f"{v:03d}" if kind == "text" else v


def write(folder: Path, rows: list[dict[str, Any]], order: str = "int64", age: str = 'per_person = "first"',
          sex: str = "", visits: int = 9) -> Path:
    table = pa.Table.from_pylist([{**r, "seen": order_value(order, r["seen"])} for r in rows], schema=pa.schema(
        [("patient_id", pa.string()), ("age", pa.int64()), ("sex", pa.string()), ("race", pa.string()),
         ("seen", ORDERS[order])]))
    pq.write_table(table, folder / "enc.parquet")
    spec = folder / "enc.toml"
    spec.write_text(SPEC.format(age=age, sex=sex, visits=visits), encoding="utf-8")
    return spec


def both(spec_path: Path, aggregate_first: bool) -> tuple[int, list[tuple[Any, ...]], pa.Table]:
    """(persons the fast query is unsure of, its cells as sorted rows, the exact query's result)."""
    spec = Spec.read(spec_path)
    assert spec.person is not None
    with connect("duckdb") as backend:
        problems: list[str] = []
        table = open_table(backend, spec, "source", problems)
        assert table is not None and not problems, problems
        domains, _ = resolve_domains(backend, spec, table, None, problems)
        assert not problems and all(d is not None for d in domains), problems
        pos = positions_query(backend, spec, domains, table, "column")  # type: ignore[arg-type]
        order_type = table.columns.get(spec.person.order) if spec.person.order else None
        key_type = table.columns.get(spec.person.column)
        fast = fast_person_cells(pos, spec.qis, domains, spec.person, order_type, key_type,  # type: ignore[arg-type]
                                 aggregate_first)
        result = backend.execute(fast.query)
        exact = backend.execute(person_cells_query(pos, spec.qis, spec.person, key_type, aggregate_first))
    unsure = fast.unsure(result)
    return unsure, (cell_rows(fast.cells(result), len(spec.qis)) if not unsure else []), exact


def cell_rows(table: pa.Table, n: int) -> list[tuple[Any, ...]]:
    return sorted(tuple(int(r[f"p{i}"]) for i in range(n)) + (int(r["n"]),) for r in table.to_pylist())


def reports(exact: pa.Table, n: int) -> bool:
    """Whether the exact query's result leads the load to a problem."""
    flags = [NULL_ROWS, ROWS_OUT] + [VARYING.format(i) for i in range(n)]
    found = any(int(pc.sum(exact.column(f)).as_py() or 0) for f in flags if f in exact.column_names)
    return found or any(exact.column(f"p{i}").null_count for i in range(n))


def agree(spec: Path, aggregate_first: bool) -> int:
    """The property of the module docstring on one table; returns the unsure count."""
    unsure, cells, exact = both(spec, aggregate_first)
    if not reports(exact, 4):
        assert unsure == 0
        assert cells == cell_rows(exact, 4)
    else:
        assert unsure > 0
    return unsure


def person(pid: str | None, ages: list[int | None], seen: list[int | None], sex: str = "F", race: str = "A"
           ) -> list[dict[str, Any]]:
    return [{"patient_id": pid, "age": a, "sex": sex, "race": race, "seen": s} for a, s in zip(ages, seen)]


CLEAN = (person("P1", [30, 31, 29], [2, 0, 0]) + person("P2", [40], [None], "M", "C")
         + person("P3", [50, 51], [None, None], "M", "B") + person("P4", [60, 61, 62], [5, None, 5]))


@pytest.mark.parametrize("order", list(ORDERS))
@pytest.mark.parametrize("rule", ["first", "last", "min", "max", None])
def test_clean_data_needs_the_fast_query_only(tmp_path: Path, order: str, rule: str | None) -> None:
    """Every order type and rule: ties on the order go to the least (first) or greatest (last)
    age, NULL orders last; the fast query is sure of every person and gives the exact cells."""
    rows = CLEAN if rule is not None else [dict(r, age=40) for r in CLEAN]
    age = f'per_person = "{rule}"' if rule else ""
    for aggregate_first in (True, False):
        assert agree(write(tmp_path, rows, order, age), aggregate_first) == 0


def test_first_and_last_pick_the_rows_the_windows_pick(tmp_path: Path) -> None:
    """P1: the earliest order (0) twice, ages 31 and 29 → first 29; the latest (2) → last 30.  P4: a
    NULL order is last for first (5, ages 60 and 62 → 60) and least for last (5 → 62)."""
    for rule, want in (("first", {"P1": 29, "P2": 40, "P3": 50, "P4": 60}),
                       ("last", {"P1": 30, "P2": 40, "P3": 51, "P4": 62})):
        with Problem.from_spec(write(tmp_path, CLEAN, "int32", f'per_person = "{rule}"'), cache=False) as p:
            ages = sorted(int(a) for a, n in zip(p.sample.positions[:, 0], p.sample.counts) for _ in range(n))
            assert ages == sorted(want.values())


@pytest.mark.parametrize("case", ["null key", "varying race", "age outside", "sex outside", "age NULL on one row",
                                  "too many rows", "huge order"])
def test_anything_to_report_makes_the_fast_query_unsure(tmp_path: Path, case: str) -> None:
    rows = [dict(r) for r in CLEAN]
    edits = {"null key": (0, "patient_id", None), "varying race": (1, "race", "B"), "age outside": (0, "age", 150),
             "sex outside": (2, "sex", "X"), "age NULL on one row": (8, "age", None),
             "too many rows": (None, None, None), "huge order": (4, "seen", 2 ** 62)}
    at, field, value = edits[case]
    if at is not None:
        rows[at][field] = value
    visits = 2 if case == "too many rows" else 9
    for aggregate_first in (True, False):
        unsure, _, exact = both(write(tmp_path, rows, visits=visits), aggregate_first)
        assert unsure > 0
        assert reports(exact, 4) == (case != "huge order")  # an order too far from 0 only costs the exact query


def test_a_huge_order_still_loads_the_same_cells(tmp_path: Path) -> None:
    rows = [dict(r) for r in CLEAN]
    rows[4]["seen"] = -(2 ** 62)  # P2's only row: farther from 0 than the fast query ranks
    with Problem.from_spec(write(tmp_path, rows), cache=False) as huge, \
            Problem.from_spec(write(tmp_path, CLEAN), cache=False) as small:
        assert (huge.sample.positions == small.sample.positions).all()
        assert (huge.sample.counts == small.sample.counts).all()


@st.composite
def encounters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A few persons: in a tidy table each keeps their sex and race (the age may move on); in an
    untidy one a row now and then breaks a rule (a NULL key, a value outside the domain, a NULL)."""
    tidy = draw(st.booleans())
    rows = []
    for p in range(draw(st.integers(1, 6))):
        pid = f"P{p}" if tidy else draw(st.sampled_from([f"P{p}"] * 7 + [None]))
        age, sex, race = draw(st.integers(0, 97)), draw(st.sampled_from("FM")), draw(st.sampled_from("ABC"))
        for _ in range(draw(st.integers(1, 4))):
            odd = [] if tidy else [150, None]
            rows.append({"patient_id": pid, "seen": draw(st.one_of(st.none(), st.integers(0, 3))),
                         "age": draw(st.sampled_from([age] * 3 + [age + 1, age + 2] + odd)),
                         "sex": sex if tidy else draw(st.sampled_from([sex] * 8 + ["X", None, "FM".replace(sex, "")])),
                         "race": race if tidy else draw(st.sampled_from([race] * 8 + ["A", "Z"]))})
    return rows


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=encounters(), order=st.sampled_from(list(ORDERS)),
       age=st.sampled_from(["", 'per_person = "first"', 'per_person = "last"', 'per_person = "min"',
                            'per_person = "max"']),
       sex=st.sampled_from(["", 'per_person = "first"', 'per_person = "last"']), visits=st.integers(1, 4),
       aggregate_first=st.booleans())
def test_random_tables_agree(tmp_path: Path, rows: list[dict[str, Any]], order: str, age: str, sex: str,
                             visits: int, aggregate_first: bool) -> None:
    agree(write(tmp_path, rows, order, age, sex, visits), aggregate_first)


# -- every engine -----------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=engine_params(*ENGINES))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


@pytest.mark.parametrize("order", ["date", "text"])
def test_every_engine_loads_the_same_cells_by_either_query(engine: Engine, tmp_path: Path, order: str) -> None:
    """A date order (first/last as ``min``/``max``) and a text one (window or ``arg_min``), a category
    by ``last``: each engine's cells equal the DuckDB file's; a varying QI is refused alike."""
    for broken in (False, True):
        rows = [dict(r, race="B") if broken and i == 1 else r for i, r in enumerate(CLEAN)]
        local = write(tmp_path, rows, order, 'per_person = "first"', 'per_person = "last"')
        source = engine.load(f"enc_{order}_{int(broken)}", pq.read_table(tmp_path / "enc.parquet"))
        spec = engine.folder / f"enc-{order}-{int(broken)}.toml"
        spec.write_text(local.read_text(encoding="utf-8").replace('[source]\npath = "enc.parquet"\n',
                                                                  engine.header() + f"\n[source]\n{source}\n"),
                        encoding="utf-8")
        if broken:
            for path in (local, spec):
                with pytest.raises(DataError, match="QI 'race' varies within 1 person"):
                    Problem.from_spec(path, cache=False)
            continue
        with Problem.from_spec(local, cache=False) as want, Problem.from_spec(spec, cache=False) as got:
            assert (got.sample.positions == want.sample.positions).all()
            assert (got.sample.counts == want.sample.counts).all()
