"""Domain guards: no compiled query releases a QI value outside its domain.

Loading refuses such values, so the data is changed after the SQL was written: the file under
a DuckDB view is overwritten, the table under a PostgreSQL view is refilled, compiled SQL runs
by hand on an altered file.  Every row must come back as the pure-Python reference says — the
label of the value's group when the value is in the domain, else the outside label — for every
QI kind (integer, date, category, ZIP with a large domain, a category keeping NULL as a value).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from deid_sql import Problem
from deid_sql.compiler.compile import SUPPRESSED, generalize, to_sql
from deid_sql.compiler.guards import IN_LIST, in_domain
from deid_sql.domains.domain import CategoryDomain, DateDomain, Domain, IntegerDomain, ZipDomain
from deid_sql.domains.recoding import QIRecoding, Recoding
from deid_sql.spec.file import QISpec
from deid_sql.sqltext import NUMERAL, NUMERAL_LENGTH
from tests.engines import read_duckdb

from .conftest import Project
from .engines import PostgresEngine, engine_params, open_engine
from .test_dialects import same_tree

# -- the problem: one QI of every kind, a ZIP domain large enough for the VALUES form ----------

RACES = ("White", "Black", "Asian", "Other")
PAYERS = ("Medicare", "Medicaid", "Private")
ZIPS = tuple(f"37{p}{s:02d}" for p in (2, 3) for s in range(0, 80, 2))  # 80 ZIPs with gaps: 37203 is none
FIRST, LAST = dt.date(2020, 1, 1), dt.date(2020, 12, 31)
assert len(ZIPS) > IN_LIST

QIS_TOML = f"""
[[qi]]
name = "age"
kind = "integer"
min = 0
max = 120

[[qi]]
name = "admitted"
kind = "date"
min = {FIRST.isoformat()}
max = {LAST.isoformat()}

[[qi]]
name = "race"
kind = "category"
values = {list(RACES)!r}

[[qi]]
name = "zip"
kind = "zip"
values = {list(ZIPS)!r}

[[qi]]
name = "payer"
kind = "category"
values = {list(PAYERS)!r}
nulls = "category"
""".replace("'", '"')
COLUMNS = ("age", "admitted", "race", "zip", "payer")
SCHEMA = pa.schema([("age", pa.int64()), ("admitted", pa.date32()), ("race", pa.string()), ("zip", pa.string()),
                    ("payer", pa.string())])
POLICIES = ("bottom", "age:cuts=18,65|admitted:cuts=2020-04-01,2020-07-01|race:cuts=Black|zip:cuts=37300|"
            "payer:cuts=Medicaid", "age:top|admitted:bottom|race:bottom|zip:top|payer:bottom", "top")
GOOD = {"age": 44, "admitted": dt.date(2020, 5, 17), "race": "Asian", "zip": "37212", "payer": "Private"}
# one bad value per row, every other value good: a new category, age 150, an unknown ZIP (and one
# lexicographically between two domain ZIPs), dates out of range, NULL
BAD = [("age", 150), ("age", -1), ("age", None), ("admitted", dt.date(2019, 12, 31)),
       ("admitted", dt.date(2021, 1, 1)), ("admitted", None), ("race", "Martian"), ("race", ""), ("race", None),
       ("zip", "37203"), ("zip", "99999"), ("zip", "3720"), ("zip", None), ("payer", "Unknown"),
       ("payer", None)]
RAW_BAD = {"150", "-1", "2019-12-31", "2021-01-01", "Martian", "37203", "99999", "3720", "Unknown"}


def source_table(n: int = 120, seed: int = 3) -> pa.Table:
    """In-domain rows (the payer NULL now and then: a value of its domain)."""
    rng = np.random.default_rng(seed)
    return pa.table({
        "age": pa.array(rng.integers(0, 121, n), pa.int64()),
        "admitted": pa.array([FIRST + dt.timedelta(days=int(d)) for d in rng.integers(0, 366, n)], pa.date32()),
        "race": pa.array([RACES[i] for i in rng.integers(0, len(RACES), n)]),
        "zip": pa.array([ZIPS[i] for i in rng.integers(0, len(ZIPS), n)]),
        "payer": pa.array([None if i == 3 else PAYERS[i] for i in rng.integers(0, 4, n)], pa.string()),
    }, schema=SCHEMA)


def altered_table() -> pa.Table:
    """The source replaced: good rows, then one row per out-of-domain value."""
    rows = source_table(20, seed=5).to_pylist() + [{**GOOD, column: value} for column, value in BAD]
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def spec_text(source: str, outside_label: str | None = None, backend: str = "") -> str:
    release = f'\n[release]\noutside_label = "{outside_label}"\n' if outside_label is not None else ""
    return f'gamma = 1.0\npopulation = "sample"\n\n{backend}\n[source]\n{source}\n{QIS_TOML}{release}'


# -- the reference ---------------------------------------------------------------------------

def position(qi: QISpec, domain: Domain, value: object, stored_as_int: bool = False) -> int | None:
    """The value's domain position as the guard must see it, None when outside the domain."""
    if value is None:
        return domain.position(qi.null_label) if qi.nulls == "category" else None
    if isinstance(domain, IntegerDomain):
        if isinstance(value, str) and (len(value) > NUMERAL_LENGTH or re.search(NUMERAL, value) is None):
            return None  # text is read by one definition on every engine (sqltext.whole_number)
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None
        if not math.isfinite(number) or number != int(number):
            return None
        return domain.position(int(number))
    if isinstance(domain, DateDomain):
        if isinstance(value, dt.datetime):
            value = value.date()
        return domain.position(value) if isinstance(value, dt.date) else None
    if stored_as_int:
        width = len(domain.text(0))
        return domain.position(f"{value:0{width}d}") if 0 <= int(value) < 10 ** width else None  # type: ignore
    return domain.position(value)


def reference(qi: QISpec, domain: Domain, rec: QIRecoding, value: object, outside: str,
              stored_as_int: bool = False) -> str:
    pos = position(qi, domain, value, stored_as_int)
    return outside if pos is None else rec.labels[int(rec.group_of[pos])]


def expected_rows(problem: Problem, policy: str, table: pa.Table, outside: str) -> list[tuple[str, ...]]:
    rec = problem.recoding(policy)
    return sorted(tuple(reference(q, d, r, row[q.column], outside)
                        for q, d, r in zip(problem.spec.qis, problem.domains, rec.qis))
                  for row in table.to_pylist())


def released(table: pa.Table) -> list[tuple[str, ...]]:
    return sorted(tuple(row[c] for c in COLUMNS) for row in table.to_pylist())


def assert_guarded(got: list[tuple[str, ...]], expected: list[tuple[str, ...]], outside: str) -> None:
    shown = {v for row in got for v in row}
    assert not shown & RAW_BAD, f"raw out-of-domain values released: {shown & RAW_BAD}"
    assert None not in shown
    assert got == expected
    assert sum(outside in row for row in got) >= len([b for b in BAD if b[0] != "payer" or b[1] is not None])


# -- DuckDB views over a file replaced later ------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("outside", [None, "other"])
def test_a_view_over_a_replaced_parquet_file_shows_no_raw_value(project: Project, run, tmp_path: Path,
                                                                 outside: str | None) -> None:
    source = project.write_parquet(source_table(), "cohort.parquet")
    spec = project.write_spec(spec_text(f'path = "{source.name}"', outside), "guards.toml")
    label = outside or SUPPRESSED
    db = tmp_path / "analysts.duckdb"
    with Problem.from_spec(spec) as problem:
        expected = {p: expected_rows(problem, p, altered_table(), label) for p in POLICIES}
        before = {p: expected_rows(problem, p, source_table(), label) for p in POLICIES}
    for i, policy in enumerate(POLICIES):
        run("view", spec, "-p", policy, "--db", db, "--view", f"v{i}", "--accept-risk", "guard test")
        assert released(read_duckdb(db, f"v{i}")) == before[policy]
    pq.write_table(altered_table(), source)  # the data changes after the views were reviewed
    for i, policy in enumerate(POLICIES):
        assert_guarded(released(read_duckdb(db, f"v{i}")), expected[policy], label)


def test_a_view_over_a_csv_that_changes_type(project: Project, run, tmp_path: Path) -> None:
    """A CSV is re-read on every query: ages with a fraction make the column DOUBLE, a time of day
    makes the dates TIMESTAMPs.  45.5 is no age; a timestamp is in the domain by its day."""
    source = project.dir / "cohort.csv"
    pacsv.write_csv(source_table(), source)
    spec = project.write_spec(spec_text(f'path = "{source.name}"'), "guards.toml")
    db = tmp_path / "analysts.duckdb"
    run("view", spec, "-p", "bottom", "--db", db, "--view", "v", "--accept-risk", "guard test")
    source.write_text("age,admitted,race,zip,payer\n"
                      "45.5,2020-03-04 13:45:00,Black,37202,Medicare\n"
                      "45.0,2020-03-05 00:00:00,White,37204,\n"
                      "150,2021-03-05 08:00:00,Asian,37206,Private\n", encoding="utf-8")
    rows = read_duckdb(db, "v").to_pylist()
    assert [tuple(r[c] for c in COLUMNS) for r in rows] == [
        ("*", "2020-03-04", "Black", "37202", "Medicare"),
        ("45", "2020-03-05", "White", "37204", "NULL"),
        ("*", "*", "Asian", "37206", "Private"),
    ]


@pytest.mark.slow
def test_compiled_sql_run_by_hand_on_an_altered_file(project: Project, run) -> None:
    source = project.write_parquet(source_table(), "cohort.parquet")
    spec = project.write_spec(spec_text(f'path = "{source.name}"'), "guards.toml")
    with Problem.from_spec(spec) as problem:
        expected = {p: expected_rows(problem, p, altered_table(), SUPPRESSED) for p in POLICIES}
    sql = {p: run("compile", spec, "-p", p, "--accept-risk", "test: SQL run by hand").stdout for p in POLICIES}
    pq.write_table(altered_table(), source)
    con = duckdb.connect()
    try:
        for policy in POLICIES:
            assert_guarded(released(con.sql(sql[policy]).to_arrow_table()), expected[policy], SUPPRESSED)
    finally:
        con.close()


# -- PostgreSQL: a view over a table refilled later ------------------------------------------------

@pytest.fixture(params=engine_params("postgres"))  # its tests are marked engine
def postgres(request: pytest.FixtureRequest, tmp_path: Path):
    engine = open_engine(request.param, tmp_path / "pg")
    assert isinstance(engine, PostgresEngine)
    try:
        yield engine
    finally:
        engine.close()


def test_a_postgres_view_over_a_refilled_table_shows_no_raw_value(postgres: PostgresEngine, project: Project,
                                                                   run) -> None:
    source = postgres.load("cohort", source_table())
    spec = project.write_spec(spec_text(source, "other", postgres.header()), "guards.toml")
    with Problem.from_spec(spec) as problem:
        expected = {p: expected_rows(problem, p, altered_table(), "other") for p in POLICIES}
    for i, policy in enumerate(POLICIES):
        run("view", spec, "-p", policy, "--view", postgres.qualified(f"v{i}"), "--accept-risk", "guard test")
    cohort = postgres.qualified("cohort")
    postgres.backend.register_table("altered", altered_table())
    postgres.backend.con.execute(f'DELETE FROM "{postgres.schema}"."cohort"')
    postgres.backend.con.execute(f'INSERT INTO "{postgres.schema}"."cohort" SELECT * FROM "altered"')
    assert postgres.read(cohort).num_rows == altered_table().num_rows
    for i, policy in enumerate(POLICIES):
        assert_guarded(released(postgres.read(postgres.qualified(f"v{i}"))), expected[policy], "other")


# -- the property: compiled output == the reference, for random recodings and values --------------

SMALL_ZIPS = ("02134", "02139", "10001", "10003", "60601")
CASES: dict[str, tuple[QISpec, Domain, str, str]] = {  # kind -> QI, domain, type compiled for, type of the data
    "integer": (QISpec("q", "q", "q", "integer", 0, 30), IntegerDomain(0, 30), "BIGINT", "BIGINT"),
    "integer-now-double": (QISpec("q", "q", "q", "integer", 0, 30), IntegerDomain(0, 30), "BIGINT", "DOUBLE"),
    "integer-text": (QISpec("q", "q", "q", "integer", 0, 30), IntegerDomain(0, 30), "VARCHAR", "VARCHAR"),
    "integer-double": (QISpec("q", "q", "q", "integer", 0, 30), IntegerDomain(0, 30), "DOUBLE", "DOUBLE"),
    "date": (QISpec("q", "q", "q", "date", FIRST, dt.date(2020, 2, 9)), DateDomain(FIRST, dt.date(2020, 2, 9)),
             "DATE", "DATE"),
    "date-now-timestamp": (QISpec("q", "q", "q", "date", FIRST, dt.date(2020, 2, 9)),
                           DateDomain(FIRST, dt.date(2020, 2, 9)), "DATE", "TIMESTAMP"),
    "category": (QISpec("q", "q", "q", "category", values=RACES), CategoryDomain(RACES), "VARCHAR", "VARCHAR"),
    "category-nulls": (QISpec("q", "q", "q", "category", values=PAYERS, nulls="category"),
                       CategoryDomain((*PAYERS, "NULL")), "VARCHAR", "VARCHAR"),
    "zip": (QISpec("q", "q", "q", "zip", values=SMALL_ZIPS), ZipDomain(SMALL_ZIPS), "VARCHAR", "VARCHAR"),
    "zip-large": (QISpec("q", "q", "q", "zip", values=ZIPS), ZipDomain(ZIPS), "VARCHAR", "VARCHAR"),
    "zip-unordered": (QISpec("q", "q", "q", "zip", values=("9", "10", "100")), ZipDomain(("9", "10", "100")),
                      "VARCHAR", "VARCHAR"),
    "zip-as-number": (QISpec("q", "q", "q", "zip", values=SMALL_ZIPS), ZipDomain(SMALL_ZIPS), "BIGINT", "BIGINT"),
}
ARROW = {"BIGINT": pa.int64(), "DOUBLE": pa.float64(), "VARCHAR": pa.string(), "DATE": pa.date32(),
         "TIMESTAMP": pa.timestamp("us")}
TEXT_INTEGERS = ("0", "30", "31", "-1", "7.0", "7.5", " 12", "1e1", "abc", "", "0x10", "nan", "inf", "1e-400", "1e400",
                 "1_0", "\t12", "+7", "7.", "-Infinity")


def values_for(kind: str, domain: Domain) -> st.SearchStrategy[object]:
    """Values in the domain, next to it and far outside it, and NULL."""
    if kind == "integer":
        return st.none() | st.integers(-3, 33) | st.integers(-10**12, 10**12)
    if kind in ("integer-now-double", "integer-double"):
        return st.none() | st.integers(-3, 33).map(float) | st.floats(-5, 35) | st.sampled_from([math.inf, math.nan])
    if kind == "integer-text":
        return st.none() | st.sampled_from(TEXT_INTEGERS) | st.integers(-3, 33).map(str)
    if kind.startswith("date"):
        day = st.dates(dt.date(2019, 12, 25), dt.date(2020, 2, 15))
        if kind == "date":
            return st.none() | day
        return st.none() | st.builds(lambda d, s: dt.datetime.combine(d, dt.time()) + dt.timedelta(seconds=s),
                                     day, st.integers(0, 86_399))
    if kind == "zip-as-number":
        return st.none() | st.sampled_from([int(z) for z in SMALL_ZIPS]) | st.integers(-5, 2_000_000)
    texts = [domain.text(p) for p in range(domain.size)]
    near = [t + "x" for t in texts[:3]] + [t[:-1] for t in texts[:3]] + ["", "NULL", "white", "*", "37203", "2"]
    return st.none() | st.sampled_from(texts) | st.sampled_from(near) | st.text(max_size=6)


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, QIRecoding, list[object]]:
    kind = draw(st.sampled_from(sorted(CASES)))
    _, domain, _, _ = CASES[kind]
    # scattered date groups are left out: naming them fails in Domain.set_label (numpy ints), not in the guard
    if kind.startswith("date") or draw(st.booleans()):  # a lattice policy: consecutive intervals
        cuts = draw(st.lists(st.booleans(), min_size=domain.size - 1, max_size=domain.size - 1))
        group_of = np.concatenate([[0], np.cumsum(cuts)])
    else:  # a recoding with scattered groups
        group_of = np.array(draw(st.lists(st.integers(0, 3), min_size=domain.size, max_size=domain.size)))
    values = draw(st.lists(values_for(kind, domain), min_size=1, max_size=25))
    return kind, QIRecoding.from_groups(domain, group_of), values


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(case=cases(), outside=st.sampled_from([SUPPRESSED, "other"]))
def test_compiled_labels_equal_the_reference(case: tuple[str, QIRecoding, list[object]], outside: str) -> None:
    kind, rec, values = case
    qi, domain, compiled_as, data_type = CASES[kind]
    table = pa.table({"rid": pa.array(range(len(values)), pa.int64()),
                      "q": pa.array(values, ARROW[data_type])})
    query = generalize(Recoding((rec,)), [qi], [domain], exp.to_table("data"), {"rid": "BIGINT", "q": compiled_as},
                       outside_label=outside)
    con = duckdb.connect()
    try:
        con.register("data", table)
        rows = con.execute(to_sql(query, "duckdb")).fetchall()
    finally:
        con.close()
    got = [label for _, label in sorted(rows)]
    stored_as_int = kind == "zip-as-number"
    assert got == [reference(qi, domain, rec, v, outside, stored_as_int) for v in table.column("q").to_pylist()]


# -- the guard itself --------------------------------------------------------------------------

def _evaluate(condition: Callable[[exp.Expression], exp.Expression], values: Sequence[object],
              arrow_type: pa.DataType) -> list[object]:
    con = duckdb.connect()
    try:
        con.register("data", pa.table({"rid": pa.array(range(len(values))), "q": pa.array(values, arrow_type)}))
        query = exp.select(exp.column("rid"), exp.alias_(condition(exp.column("q")), "ok")).from_("data")
        return [ok for _, ok in sorted(con.execute(to_sql(query, "duckdb")).fetchall())]
    finally:
        con.close()


@pytest.mark.parametrize("kind", ["integer", "integer-text", "date", "category", "category-nulls", "zip",
                                  "zip-large"])
def test_in_domain_is_true_or_false_never_null(kind: str) -> None:
    qi, domain, compiled_as, data_type = CASES[kind]
    inside = [domain.value(0), domain.value(domain.size - 1)]
    if kind == "integer-text":
        inside = [str(v) for v in inside]
    outside: list[object] = {"integer": [-1, 31], "integer-text": ["31", "7.5", "x"],
                             "date": [dt.date(2019, 12, 31), dt.date(2021, 1, 1)]}.get(kind, ["nope", "37203"])
    got = _evaluate(lambda c: in_domain(qi, domain, c, compiled_as), [*inside, *outside, None], ARROW[data_type])
    assert got == [True] * len(inside) + [False] * len(outside) + [qi.nulls == "category"]


@pytest.mark.parametrize("dialect", ["duckdb", "postgres", "spark", "snowflake", "bigquery", "trino"])
@pytest.mark.parametrize("kind", sorted(CASES))
def test_guards_render_and_parse_back_in_every_dialect(kind: str, dialect: str) -> None:
    qi, domain, compiled_as, _ = CASES[kind]
    scattered = [] if domain.kind == "date" else [np.arange(domain.size) % 2]  # see cases(): set_label of dates
    for group_of in (np.zeros(domain.size, dtype=int), np.arange(domain.size), np.arange(domain.size) // 3,
                     *scattered):
        rec = Recoding((QIRecoding.from_groups(domain, group_of),))
        query = generalize(rec, [qi], [domain], exp.to_table("patients"), {"q": compiled_as})
        tree = same_tree(to_sql(query, dialect), dialect)
        assert isinstance(tree, exp.Select) and [t.name for t in tree.find_all(exp.Table)][0] == "patients"


def test_a_large_domain_is_one_values_subquery_not_a_literal_list() -> None:
    qi, domain, _, _ = CASES["zip-large"]
    sql = to_sql(in_domain(qi, domain, exp.column("zip"), "VARCHAR"), "duckdb")
    assert sql.count("37278") == 1 and "IN (SELECT v FROM (VALUES" in sql and "AS deid_domain(v)" in sql
    small = to_sql(in_domain(*CASES["zip"][:2], exp.column("zip"), "VARCHAR"), "duckdb")
    assert "SELECT" not in small and "'02134'" in small
    assert sqlglot.parse_one(sql, read="duckdb") is not None
