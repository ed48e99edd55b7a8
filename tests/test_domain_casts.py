"""Domain tests no value can make fail: numbers and days held as text (issue 38).

An integer QI whose column holds text ('1e400', 'NaN', '-Infinity', '1e-400', a 5,000-digit
string) is read by one definition on every engine (``sqltext.whole_number``): a plain numeral
that is a whole number in range.  Anything else is outside the domain: ``validate`` reports it,
and a view or a table written later shows the outside label — never the engine's cast error,
and never a value that one engine rounds into the domain ('1e-400' is 0 for DuckDB's own cast,
'1_0' is 10) while another refuses it.  On PostgreSQL, which has no ``TRY_CAST``, dates written
as text are tested the same way ('2021-02-29' or '0000-01-01' stop no query), and a date or
timestamp column is read as a day whatever the session's ``DateStyle``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlglot import exp

from deid_sql import Problem, plan_of
from deid_sql.compiler.guards import in_domain
from deid_sql.domains.domain import IntegerDomain
from deid_sql.release.output import create_view, materialize
from deid_sql.spec.file import QISpec
from deid_sql.sqltext import NUMERAL, NUMERAL_LENGTH, to_sql
from tests.conftest import PERMISSIVE_RELEASE

from .engines import Engine, PostgresEngine, engine_params, opened, read_duckdb

# outside an integer domain 0..120 on every engine: no number, no whole number, none a double holds
OUTSIDE = ("1e400", "NaN", "-Infinity", "Infinity", "1e-400", "1e5", "nan", "inf", "1_0", "0x1A", "45.5",
           "123456789012345678901234567890", "9" * 5000, "4" + "0" * 120, "abc", "", "\t45", "4 5", "--5")
# inside it, however written: each is 45 or 5
INSIDE = {" 45 ": "18-64", "+5": "0-17", "45.0": "18-64", "4.5e1": "18-64", "045": "18-64", "45.": "18-64",
          "450e-1": "18-64"}
POLICY = "age:cuts=18,65|sex:top"
OUTSIDE_LABEL = "*"


def reference(text: str, low: int = 0, high: int = 120) -> int | None:
    """The value an integer domain low..high sees in ``text`` (None: outside), in Python."""
    if len(text) > NUMERAL_LENGTH or re.search(NUMERAL, text) is None:
        return None
    value = float(text)
    return int(value) if low <= value <= high and value == int(value) else None


def test_the_reference_agrees_with_the_lists() -> None:
    assert all(reference(v) is None for v in OUTSIDE)
    assert {v: reference(v) for v in INSIDE} == {v: 5 if v == "+5" else 45 for v in INSIDE}
    assert reference("1" + "0" * 96 + "e99") is None and math.isfinite(float("1" + "0" * 96 + "e99"))


def test_in_domain_reads_text_numbers_by_one_definition() -> None:
    """DuckDB's own casts put '1e-400' (0) and '1_0' (10) inside 0..120; the guard does not."""
    import duckdb

    qi, domain = QISpec("q", "q", "q", "integer", 0, 120), IntegerDomain(0, 120)
    values = [*OUTSIDE, *INSIDE, "0", "120", "121", None]
    con = duckdb.connect()
    try:
        con.register("data", pa.table({"i": pa.array(range(len(values))), "q": pa.array(values, pa.string())}))
        query = exp.select(exp.column("i"), exp.alias_(in_domain(qi, domain, exp.column("q"), "VARCHAR"), "ok"))
        got = dict(con.execute(to_sql(query.from_("data"), "duckdb")).fetchall())
    finally:
        con.close()
    assert [got[i] for i in range(len(values))] == [v is not None and reference(v) is not None for v in values]


# -- every engine: validate, a view and a table over such values ----------------------------------

@pytest.fixture(params=engine_params("duckdb", "postgres", "spark"))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from opened(request.param, tmp_path_factory)


def cohort(n: int = 80, replaced: tuple[str, ...] = ()) -> pa.Table:
    """Ages as text, in the domain; the first rows replaced by ``replaced`` (the row count kept)."""
    ages = [str(20 + i % 50) for i in range(n)]
    ages[:len(replaced)] = replaced
    return pa.table({"age": pa.array(ages, pa.string()), "sex": pa.array(["F", "M"] * (n // 2))})


def spec_for(engine: Engine, name: str, table: pa.Table) -> Path:
    body = engine.load(name, table)
    path = engine.folder / f"{name}.toml"
    path.write_text('population = "sample"\n' + engine.header() + f"\n[source]\n{body}\n"
                    '[[qi]]\nname = "age"\nkind = "integer"\nmin = 0\nmax = 120\n\n'
                    '[[qi]]\nname = "sex"\nkind = "category"\nvalues = ["F", "M"]\n'
                    f"\n[release]\n{PERMISSIVE_RELEASE}\n", encoding="utf-8")
    return path


def refill(engine: Engine, name: str, table: pa.Table) -> None:
    """The source's rows replaced by ``table``'s after a load (a file rewritten, a table refilled)."""
    if engine.name == "duckdb":
        pq.write_table(table, engine.folder / f"{name}.parquet")
        return
    backend = engine.backend  # type: ignore[attr-defined]
    backend.register_table(f"refill_{name}", table)
    if isinstance(engine, PostgresEngine):
        backend.con.execute(f'DELETE FROM "{engine.schema}"."{name}"')
        backend.con.execute(f'INSERT INTO "{engine.schema}"."{name}" SELECT * FROM "refill_{name}"')
    else:
        backend.session.sql(f"INSERT OVERWRITE TABLE `{engine.database}`.`{name}` "  # type: ignore[attr-defined]
                            f"SELECT * FROM `refill_{name}`")


def expected_ages(table: pa.Table) -> list[str]:
    """The released age of every row of ``table`` under ``POLICY``, sorted (row order is no engine's promise)."""
    def label(text: str) -> str:
        value = reference(text)
        return OUTSIDE_LABEL if value is None else "0-17" if value < 18 else "18-64" if value < 65 else "65-120"
    return sorted(label(v) for v in table.column("age").to_pylist())


def test_validate_reports_every_value_no_number_type_holds(engine: Engine, run) -> None:  # type: ignore[no-untyped-def]
    spec = spec_for(engine, "texty", cohort(replaced=(*OUTSIDE, *INSIDE)))
    result = run("validate", spec, expect=2)
    text = result.output + result.stderr
    assert f"{len(OUTSIDE)} record(s) in {len(OUTSIDE)} distinct value(s) of column 'age'" in text, text
    for word in ("out of range", "invalid input", "Traceback", "CAST", "internal error"):
        assert word not in text, text


def test_a_view_and_a_table_show_the_outside_label(engine: Engine) -> None:
    """Loaded clean, then refilled (same row count) before the view is read and the table written."""
    spec = spec_for(engine, "cohort", cohort())
    hostile = cohort(replaced=(*OUTSIDE, *INSIDE))
    assert expected_ages(hostile).count(OUTSIDE_LABEL) == len(OUTSIDE)
    database = engine.folder / "analysts.duckdb" if engine.name == "duckdb" else None
    view = "v" if database is not None else engine.qualified("v")  # type: ignore[attr-defined]
    with Problem.from_spec(spec) as problem:
        plan = plan_of(problem, POLICY)
        create_view(problem, plan, database, view)
        refill(engine, "cohort", hostile)
        if database is not None:
            shown = read_duckdb(database, view)
            out, table = engine.folder / "release.parquet", None
        else:
            shown = engine.read(view)  # a SELECT over the view
            out, table = None, engine.qualified("t")  # type: ignore[attr-defined]
        written = materialize(problem, plan, out, table=table)
    assert sorted(shown.column("age").to_pylist()) == expected_ages(hostile)
    released = pq.read_table(out) if out is not None else engine.read(str(table))
    assert sorted(released.column("age").to_pylist()) == expected_ages(hostile)
    assert written.figures is not None and written.figures.outside == len(OUTSIDE)


def test_numbers_of_a_fraction_type_are_read_as_numbers(engine: Engine, run) -> None:  # type: ignore[no-untyped-def]
    """A DOUBLE column is no text to parse: 45.0 is 45, 45.5, NaN and the infinities are outside
    (on PostgreSQL also a NUMERIC too large for a DOUBLE, which a cast would refuse)."""
    bad = [45.5, math.nan, math.inf, -math.inf, 1e300, -1.0, 121.0]
    ages = bad + [45.0, 5.0, -0.0] + [float(20 + i % 50) for i in range(70)]
    spec = spec_for(engine, "doubles", pa.table({"age": pa.array(ages, pa.float64()),
                                                  "sex": pa.array(["F", "M"] * (len(ages) // 2))}))
    result = run("validate", spec, expect=2)
    assert f"{len(bad)} record(s) in {len(bad)} distinct value(s) of column 'age'" in result.stderr, result.stderr
    if isinstance(engine, PostgresEngine):
        s = engine.schema
        engine.backend.con.execute(f'CREATE TABLE "{s}"."numerics" AS SELECT age::numeric AS age, sex '
                                   f'FROM "{s}"."doubles" WHERE abs(age) < 200')  # 45.5, -1 and 121 outside
        engine.backend.con.execute(f"INSERT INTO \"{s}\".\"numerics\" VALUES ('1e400', 'F'), ('1e-400', 'M'), "
                                   "('NaN', 'F')")
        spec.write_text(spec.read_text().replace(f"{s}.doubles", f"{s}.numerics"), encoding="utf-8")
        result = run("validate", spec, expect=2)
        assert "6 record(s) in 6 distinct value(s)" in result.stderr and "out of range" not in result.stderr, \
            result.stderr


# -- PostgreSQL: compiled SQL, days written as text, and date columns under any DateStyle ----------

@pytest.fixture(params=engine_params("postgres"))
def pg(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresEngine]:
    yield from opened(request.param, tmp_path_factory)  # type: ignore[misc]


def rows_of(pg: PostgresEngine, sql: str, *settings: str) -> list[tuple[object, ...]]:
    """Rows of ``sql`` in a session of their own (``settings``: SET statements run first)."""
    import psycopg

    with psycopg.connect(pg.dsn, autocommit=True) as con:
        for setting in settings:
            con.execute(setting)
        return sorted(con.execute(sql).fetchall(), key=repr)


def test_compiled_postgres_sql_runs_over_such_values(pg: PostgresEngine, run) -> None:  # type: ignore[no-untyped-def]
    """``compile --dialect postgres`` renders the same guard as a view: the SQL, run by hand on a table
    refilled since, shows the outside label (sqlglot's own rendering was a plain CAST)."""
    spec = spec_for(pg, "cohort", cohort())
    sql = run("compile", spec, "-p", POLICY, "--dialect", "postgres", "--accept-risk", "test: SQL run by hand").stdout
    hostile = cohort(replaced=(*OUTSIDE, *INSIDE))
    refill(pg, "cohort", hostile)
    got = rows_of(pg, f"SELECT age FROM ({sql.strip().rstrip(';')}) AS q")
    assert sorted(str(a) for (a,) in got) == expected_ages(hostile)


DAYS_OUTSIDE = ("2020-02-30", "2021-02-29", "0000-01-01", "2020-13-01", "abc", "2020-01-05 13:45:00", "infinity",
                "20200105")
DAYS_INSIDE = {"2020-02-29": "2020-01-01..2020-06-30", " 2020-3-4 ": "2020-01-01..2020-06-30",
               "2020-07-01": "2020-07-01..2020-12-31"}


def days_spec(pg: PostgresEngine, name: str, table: pa.Table) -> Path:
    body = pg.load(name, table)
    qis = "".join(f'[[qi]]\nname = "{c}"\nkind = "date"\nmin = 2020-01-01\nmax = 2020-12-31\n\n'
                  for c in table.column_names if c != "sex")
    path = pg.folder / f"{name}.toml"
    path.write_text('population = "sample"\n' + pg.header() + f"\n[source]\n{body}\n{qis}"
                    '[[qi]]\nname = "sex"\nkind = "category"\nvalues = ["F", "M"]\n'
                    f"\n[release]\n{PERMISSIVE_RELEASE}\n", encoding="utf-8")
    return path


def text_days(replaced: tuple[str, ...] = (), n: int = 60) -> pa.Table:
    days = [f"2020-{1 + i % 12:02d}-{1 + i % 28:02d}" for i in range(n)]
    days[:len(replaced)] = replaced
    return pa.table({"day": pa.array(days, pa.string()), "sex": pa.array(["F", "M"] * (n // 2))})


def test_postgres_days_written_as_text_stop_no_query(pg: PostgresEngine, run) -> None:  # type: ignore[no-untyped-def]
    spec = days_spec(pg, "bad_days", text_days((*DAYS_OUTSIDE, *DAYS_INSIDE)))
    result = run("validate", spec, expect=2)
    assert f"{len(DAYS_OUTSIDE)} record(s) in {len(DAYS_OUTSIDE)} distinct value(s) of column 'day'" in result.stderr, \
        result.stderr
    assert "out of range" not in result.stderr and "invalid input" not in result.stderr
    spec = days_spec(pg, "days", text_days())
    run("view", spec, "-p", "day:cuts=2020-07-01|sex:top", "--view", pg.qualified("v"), "--accept-risk", "test: days")
    refill(pg, "days", text_days((*DAYS_OUTSIDE, *DAYS_INSIDE)))
    shown = [d for (d,) in rows_of(pg, f'SELECT day FROM "{pg.schema}"."v"')]
    assert shown.count(OUTSIDE_LABEL) == len(DAYS_OUTSIDE)
    for text, label in DAYS_INSIDE.items():
        assert label in shown, text


def test_postgres_date_and_timestamp_columns_are_days_under_any_datestyle(pg: PostgresEngine, run) -> None:  # type: ignore[no-untyped-def]
    """A timestamp column under a date QI was tested through its text ('2020-01-05 13:45:00' is no
    day), so a view showed the outside label on every row; a date's text follows the session's
    DateStyle ('05.01.2020'), so an analyst's German session saw only the outside label."""
    import datetime as dt

    start = dt.datetime(2020, 1, 1, 13, 45)
    stamps = [start + dt.timedelta(days=6 * i) for i in range(60)]  # through 2020-12-26
    table = pa.table({"day": pa.array([s.date() for s in stamps], pa.date32()),
                      "stamp": pa.array(stamps, pa.timestamp("us")), "sex": pa.array(["F", "M"] * 30)})
    spec = days_spec(pg, "typed", table)
    policy = "day:cuts=2020-07-01|stamp:cuts=2020-07-01|sex:top"
    run("view", spec, "-p", policy, "--view", pg.qualified("tv"), "--accept-risk", "test: typed days")
    query = f'SELECT day, stamp, count(*) FROM "{pg.schema}"."tv" GROUP BY 1, 2'
    late = sum(s.month > 6 for s in stamps)
    expected = [("2020-01-01..2020-06-30", "2020-01-01..2020-06-30", 60 - late),
                ("2020-07-01..2020-12-31", "2020-07-01..2020-12-31", late)]
    assert 0 < late < 60 and rows_of(pg, query) == sorted(expected, key=repr)
    assert rows_of(pg, query, "SET DateStyle = 'German'") == rows_of(pg, query)
    assert rows_of(pg, query, "SET DateStyle = 'SQL, DMY'") == rows_of(pg, query)
