"""Date shifts (issue 30): each person's dates move by one secret offset in [-D, +D] days.

The released dates equal the pure-Python reference (``contract.shift.offset``) on every engine,
every interval between one person's events survives exactly, a shifted date QI is generalized
after the shift (its cells read the shifted dates), and the bad inputs are one line each.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from deid_sql import Problem
from deid_sql.cli import cli
from deid_sql.contract.shift import offset, shift_key
from deid_sql.errors import SpecError
from deid_sql.release.plan import plan_of
from tests.engines import ENGINES, Engine, engine_fixture, engine_params, sorted_rows

KEY = "5de975d009fc935584739e1aad0d6d96a98fc0cf1694847a0c285408e3c1855a"  # a key that is a secret (contract/secret.py)
D = 30
SPEC = '''[source]
path = "visits.parquet"
[person]
column = "pid"
shift_days = {days}
[[qi]]
name = "age"
kind = "integer"
min = 0
max = 99
[columns]
pseudonymize = ["pid"]
shift = {shift}
secret_env = "DEID_SHIFT_KEY"
[release]
max_record_risk = 1.0
'''


def visits(persons: int = 40) -> list[dict[str, Any]]:
    return [{"pid": f"P{p:03d}", "age": 20 + p % 50,
             "admitted": dt.date(2021, 1, 1) + dt.timedelta(days=p * 5 + v * 11),
             "seen_at": dt.datetime(2021, 1, 1, 8, 15) + dt.timedelta(days=v * 3, hours=p)}
            for p in range(persons) for v in range(1 + p % 4)]


def write(folder: Path, rows: list[dict[str, Any]], shift: str = '["admitted", "seen_at"]', days: object = D) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), folder / "visits.parquet")
    spec = folder / "visits.toml"
    spec.write_text(SPEC.format(shift=shift, days=days), encoding="utf-8")
    return spec


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEID_SHIFT_KEY", KEY)


@given(person=st.text(min_size=1, max_size=12), days=st.integers(1, 400))
def test_the_offset_is_within_the_bound_and_a_function_of_the_key(person: str, days: int) -> None:
    one = offset(KEY.encode(), person, days)
    assert one is not None and -days <= one <= days
    assert offset(KEY.encode(), person, days) == one


def test_the_shift_key_is_not_the_secret_and_offsets_spread() -> None:
    assert shift_key(KEY.encode()) != KEY.encode()
    offsets = [offset(KEY.encode(), f"P{i}", D) for i in range(2000)]
    assert min(offsets) == -D and max(offsets) == D  # every day of [-D, +D] is reachable
    assert len(set(offsets)) == 2 * D + 1


def test_released_dates_move_by_the_persons_offset(tmp_path: Path) -> None:
    rows = visits()
    spec = write(tmp_path, rows)
    out = tmp_path / "out.parquet"
    with Problem.from_spec(spec, cache=False) as problem:
        written = materialize(problem, out)
    assert written == len(rows)
    key = KEY.encode()
    released = pq.read_table(out).to_pylist()
    for raw, shown in zip(rows, released):  # the release keeps the source's row order here
        days = offset(key, raw["pid"], D)
        assert days is not None
        assert shown["admitted"] == raw["admitted"] + dt.timedelta(days=days)
        assert shown["seen_at"] == raw["seen_at"] + dt.timedelta(days=days)
    by: dict[str, list[dict[str, Any]]] = {}
    for r in released:
        by.setdefault(r["pid"], []).append(r)
    raw_by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        raw_by.setdefault(r["pid"], []).append(r)
    # every interval between one person's events survives exactly
    for shown_rows, raw_rows in zip(by.values(), raw_by.values()):
        assert [b["admitted"] - a["admitted"] for a, b in zip(shown_rows, shown_rows[1:])] == \
               [b["admitted"] - a["admitted"] for a, b in zip(raw_rows, raw_rows[1:])]
    moved = sum(1 for raw, shown in zip(rows, released) if raw["admitted"] != shown["admitted"])
    assert moved > len(rows) * 0.8


def materialize(problem: Problem, out: Path, policy: str = "age:every=10") -> int:
    from deid_sql.release.output import materialize as write_release

    return write_release(problem, plan_of(problem, policy), out).rows


def test_a_shifted_date_qi_is_generalized_after_the_shift(tmp_path: Path) -> None:
    rows = visits()
    spec = write(tmp_path, rows)
    text = spec.read_text(encoding="utf-8").replace(
        '[[qi]]\nname = "age"', '[[qi]]\nname = "admitted"\nkind = "date"\nmin = 2020-10-01\nmax = 2021-12-31\n'
        'per_person = "min"\n\n[[qi]]\nname = "age"')
    spec.write_text(text, encoding="utf-8")
    with Problem.from_spec(spec, cache=False) as problem:
        m = problem.evaluate("admitted:by=month|age:top")
        out = tmp_path / "months.parquet"
        materialize(problem, out, "admitted:by=month|age:top")
    key = KEY.encode()
    first: dict[str, dt.date] = {}
    for r in rows:
        days = offset(key, r["pid"], D)
        assert days is not None
        moved = r["admitted"] + dt.timedelta(days=days)
        first[r["pid"]] = min(first.get(r["pid"], moved), moved)
    months = {d.strftime("%Y-%m") for d in first.values()}
    assert m.groups == len(months)  # the cells read the shifted dates, in persons
    assert {r["admitted"] for r in pq.read_table(out).to_pylist()} == months


def test_the_cells_cache_keys_on_the_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from deid_sql.loading.cache import CellsCache

    spec = write(tmp_path, visits(), shift='["admitted"]')
    text = spec.read_text(encoding="utf-8").replace(
        '[[qi]]\nname = "age"', '[[qi]]\nname = "admitted"\nkind = "date"\nmin = 2020-10-01\nmax = 2021-12-31\n'
        'per_person = "min"\n\n[[qi]]\nname = "age"')
    spec.write_text(text, encoding="utf-8")
    cache = CellsCache(tmp_path / "cache")
    with Problem.from_spec(spec, cache=cache) as problem:
        one = problem.sample.positions.copy()
    monkeypatch.setenv("DEID_SHIFT_KEY", KEY + " another")
    with Problem.from_spec(spec, cache=cache) as problem:
        assert not (problem.sample.positions.shape == one.shape and (problem.sample.positions == one).all())
    monkeypatch.delenv("DEID_SHIFT_KEY")
    with pytest.raises(SpecError, match="DEID_SHIFT_KEY"):
        Problem.from_spec(spec, cache=cache)  # never the cached cells without the key


@pytest.mark.parametrize(("shift", "days", "expected"), [
    ('["age"]', D, "column 'age' is BIGINT, not a date"),
    ('["nothing"]', D, "has no column 'nothing' to shift"),
    ('["admitted"]', 0, "shift_days = 0 must be a whole number of days"),
    ('["admitted"]', 2.5, "shift_days = 2.5 must be a whole number of days"),
    ('["admitted"]', '"30"', "shift_days = '30' must be a whole number of days"),
    ("[]", D, "[person] shift_days is set, but no table lists a column under shift"),
])
def test_bad_shifts_are_one_line_each(tmp_path: Path, shift: str, days: object, expected: str) -> None:
    spec = write(tmp_path, visits(3), shift=shift, days=days)
    result = CliRunner().invoke(cli, ["validate", str(spec)])
    assert result.exit_code == 2, result.output
    assert expected in result.output and "Traceback" not in result.output


def test_a_shift_needs_a_person_and_a_secret(tmp_path: Path) -> None:
    spec = write(tmp_path, visits(3))
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text.replace("shift_days = 30\n", ""), encoding="utf-8")
    result = CliRunner().invoke(cli, ["validate", str(spec)])
    assert result.exit_code == 2 and "needs [person] shift_days = <days>" in result.output
    spec.write_text(text.replace('secret_env = "DEID_SHIFT_KEY"\n', "").replace('pseudonymize = ["pid"]\n',
                                                                               'keep = ["pid"]\n'), encoding="utf-8")
    result = CliRunner().invoke(cli, ["validate", str(spec)])
    assert result.exit_code == 2 and "shift needs secret_env" in result.output
    spec.write_text(text.replace("[person]\ncolumn = \"pid\"\nshift_days = 30\n", ""), encoding="utf-8")
    result = CliRunner().invoke(cli, ["validate", str(spec)])
    assert result.exit_code == 2 and "needs [person] column" in result.output


def test_a_zoned_timestamp_keeps_elapsed_time_across_daylight_saving(tmp_path: Path) -> None:
    """A zoned timestamp moves by n x 24 hours, not n calendar days: two events an hour apart in
    UTC stay an hour apart whatever zone and daylight-saving rule the engine applies."""
    utc = dt.UTC
    rows = [{"pid": f"P{p}", "age": 30 + p % 2, "admitted": dt.date(2021, 3, 1),
             "seen_at": dt.datetime(2021, 3, 27, 12, tzinfo=utc) + dt.timedelta(hours=h)}
            for p in range(20) for h in (0, 1)]
    spec = write(tmp_path, rows)
    out = tmp_path / "zoned.parquet"
    with Problem.from_spec(spec, cache=False) as problem:
        problem.backend.execute("SET TimeZone = 'Europe/Berlin'")  # DST starts 2021-03-28 there
        materialize(problem, out, "age:top")
    key = KEY.encode()
    for raw, shown in zip(rows, pq.read_table(out).to_pylist()):
        days = offset(key, raw["pid"], D)
        assert days is not None
        assert shown["seen_at"] == raw["seen_at"] + dt.timedelta(hours=24 * days)


def test_stored_sql_of_a_shift_is_refused(tmp_path: Path) -> None:
    spec = write(tmp_path, visits(10))
    text = spec.read_text(encoding="utf-8").replace('pseudonymize = ["pid"]', 'drop = ["pid"]')
    spec.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(cli, ["view", str(spec), "--policy", "age:top", "--db", str(tmp_path / "v.duckdb"),
                                      "--view", "v"])
    assert result.exit_code == 2 and "would hold the secret key" in result.output
    assert not (tmp_path / "v.duckdb").exists()


# -- every engine -----------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=engine_params(*ENGINES))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


def test_every_engine_shifts_alike(engine: Engine, tmp_path: Path) -> None:
    """The offset (an integer pseudonym under the shift key) and the move (``Backend.shift_days``)
    run where the data is: each engine releases the DuckDB file's dates, to the day and second."""
    rows = visits(25)
    local = write(tmp_path, rows)
    source = engine.load("visits_shift", pa.Table.from_pylist(rows))
    spec = engine.folder / "visits-shift.toml"
    spec.write_text(local.read_text(encoding="utf-8").replace('[source]\npath = "visits.parquet"\n',
                                                             engine.header() + f"\n[source]\n{source}\n"),
                    encoding="utf-8")
    for path, out in ((local, tmp_path / "want.parquet"), (spec, tmp_path / "got.parquet")):
        with Problem.from_spec(path, cache=False) as problem:
            materialize(problem, out)
    # Spark keeps a timestamp loaded from Arrow as an instant (zoned, UTC): compared as UTC wall time
    assert utc_rows(pq.read_table(tmp_path / "got.parquet")) == utc_rows(pq.read_table(tmp_path / "want.parquet"))


def utc_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted_rows(pa.Table.from_pylist([
        {k: v.astimezone(dt.UTC).replace(tzinfo=None) if isinstance(v, dt.datetime) and v.tzinfo else v
         for k, v in row.items()} for row in table.to_pylist()]))


def test_a_policy_file_shifts_a_batch_as_materialize_does(tmp_path: Path) -> None:
    """policy save + apply on a batch: the dates move by the same offsets as materialize's (never raw),
    and a view of the batch, whose SQL would hold the shift key, is refused."""
    from deid_sql.policyfile.apply import apply_policy
    from deid_sql.policyfile.save import save_policy

    rows = visits()
    spec = write(tmp_path, rows)
    with Problem.from_spec(spec, cache=False) as problem:
        materialize(problem, tmp_path / "want.parquet")
    save_policy(spec, "age:every=10", tmp_path / "policy.json")
    apply_policy(tmp_path / "policy.json", tmp_path / "visits.parquet", out=tmp_path / "got.parquet")
    assert sorted_rows(pq.read_table(tmp_path / "got.parquet")) == sorted_rows(pq.read_table(tmp_path / "want.parquet"))
    batch, db = str(tmp_path / "visits.parquet"), str(tmp_path / "v.duckdb")
    result = CliRunner().invoke(cli, ["apply", str(tmp_path / "policy.json"), "--source", batch, "--view", "v",
                                      "--db", db])
    assert result.exit_code == 2 and "shifted" in result.output, result.output


# -- shifts that leave the range: refused with counts, never wrapped (issue 38) ---------------------
DAY0 = dt.date(1970, 1, 1)


def load_days(engine: Engine, name: str, rows: list[dict[str, Any]]) -> str:
    """``rows`` (``pid``, ``age``, ``d``: a day number) stored in ``engine`` with ``admitted`` the date of
    day ``d`` (days since 1970-01-01, made by the engine itself: the dates near its limits are beyond
    Python's), and the ``[source]`` body naming the table."""
    from sqlglot import exp

    table = pa.Table.from_pylist(rows)
    if engine.name == "duckdb":
        dates = table.column("d").cast(pa.int32()).cast(pa.date32())
        return engine.load(name, table.drop(["d"]).append_column("admitted", dates))
    engine.load(f"{name}_days", table)
    backend = engine.backend  # type: ignore[attr-defined]
    epoch = exp.cast(exp.Literal.string("1970-01-01"), "DATE")
    query = exp.select("pid", "age", exp.alias_(backend.shift_days(epoch, exp.column("d"), "DATE"), "admitted")).from_(
        exp.to_table(engine.qualified(f"{name}_days")))  # type: ignore[attr-defined]
    create = backend.render(exp.Create(this=exp.to_table(engine.qualified(name)), kind="TABLE",  # type: ignore[attr-defined]
                                       expression=query))
    if engine.name == "postgres":
        backend.con.execute(create)
    else:
        backend.session.sql(create)
    return f'table = "{engine.qualified(name)}"'  # type: ignore[attr-defined]


def shift_spec(engine: Engine, folder: Path, source: str, qi: str = "") -> Path:
    spec = folder / "edge.toml"
    spec.write_text(SPEC.format(shift='["admitted"]', days=D).replace('[source]\npath = "visits.parquet"\n',
                                                                      engine.header() + f"\n[source]\n{source}\n")
                    .replace('[[qi]]\nname = "age"', qi + '[[qi]]\nname = "age"'), encoding="utf-8")
    return spec


def refused(spec: Path, folder: Path) -> list[str]:
    """validate's lines (exit 2), after materialize was refused (exit 2) with nothing written."""
    out = folder / "edge-release.parquet"
    done = CliRunner().invoke(cli, ["materialize", str(spec), "--policy", "top", "--out", str(out)])
    assert done.exit_code == 2 and "Traceback" not in done.output, done.output
    assert not out.exists() and not list(folder.glob("*.release.json"))
    checked = CliRunner().invoke(cli, ["validate", str(spec)])
    assert checked.exit_code == 2, checked.output
    return [line for line in checked.output.splitlines() if "date shift" in line]


def test_a_shift_past_the_engines_dates_is_refused_with_its_counts(engine: Engine, tmp_path: Path) -> None:
    """Dates two days inside the engine's first and last day: the persons whose offset moves them out
    are counted (rows and persons) by validate, and nothing is released — Spark's date_add wrapped
    5881580-07-09 + 30 days around to -5877641, and the release was written."""
    from deid_sql.backends import engine_class

    first, last = engine_class(engine.name).date_days["DATE"]
    key = KEY.encode()
    rows = [{"pid": f"P{p:03d}", "age": 30 + p % 5, "d": 18_000 + p} for p in range(20)]
    rows += [{"pid": f"E{p:03d}", "age": 40, "d": last - 2 if p % 2 else first + 2} for p in range(30) for _ in (0, 1)]
    out = [r for r in rows if r["pid"].startswith("E")
           and not first <= r["d"] + (offset(key, r["pid"], D) or 0) <= last]
    assert out and len(out) < 60  # some move out, some stay in: the count is not the rows near the edge
    name = f"edge_{uuid_part()}"
    spec = shift_spec(engine, tmp_path, load_days(engine, name, rows))
    lines = refused(spec, tmp_path)
    assert len(lines) == 1, lines
    persons = len({r["pid"] for r in out})
    assert f"moves {len(out):,} row(s) of {persons:,} person(s)" in lines[0], lines[0]
    assert "column 'admitted'" in lines[0] and "beyond the dates" in lines[0]
    if engine.name != "duckdb":  # the shifted rows read all the same: a failure, never a wrapped date
        from sqlglot import exp

        from deid_sql.errors import BackendError
        from deid_sql.loading.shifting import shifted_select

        backend = engine.backend  # type: ignore[attr-defined]
        table = exp.to_table(engine.qualified(name))  # type: ignore[attr-defined]
        query = shifted_select(backend, table, backend.columns(engine.qualified(name)), ["admitted"], "pid", key, D)
        with pytest.raises(BackendError, match="beyond the dates Spark can hold|date out of range"):
            backend.execute(query)


def test_a_shift_out_of_a_date_qis_domain_is_refused_with_its_counts(engine: Engine, tmp_path: Path) -> None:
    """A shifted date QI declared exactly as wide as the data: the rows the shift moves outside it are
    counted, with the persons, and the line says how wide to declare it."""
    rows = [{"pid": r["pid"], "age": r["age"], "d": (r["admitted"] - DAY0).days} for r in visits(30)]
    lo, hi = min(r["d"] for r in rows), max(r["d"] for r in rows)
    key = KEY.encode()
    out = [r for r in rows if not lo <= r["d"] + (offset(key, r["pid"], D) or 0) <= hi]
    assert out
    first, last = DAY0 + dt.timedelta(days=lo), DAY0 + dt.timedelta(days=hi)
    qi = f'[[qi]]\nname = "admitted"\nkind = "date"\nmin = {first}\nmax = {last}\nper_person = "min"\n\n'
    spec = shift_spec(engine, tmp_path, load_days(engine, f"edge_{uuid_part()}", rows), qi)
    lines = refused(spec, tmp_path)
    assert len(lines) == 1, lines
    assert f"moves {len(out):,} row(s) of {len({r['pid'] for r in out}):,} person(s)" in lines[0], lines[0]
    assert f"outside the domain {first} … {last} of QI 'admitted'" in lines[0] and f"{D} days wider" in lines[0]


def uuid_part() -> str:
    import uuid

    return uuid.uuid4().hex[:6]


def near_the_end(persons: int) -> tuple[list[dict[str, Any]], int]:
    """Visits of ``persons`` persons two days before DuckDB's last date, and how many rows the shift
    moves past it (by the reference offsets)."""
    from deid_sql.backends.duckdb import DuckDBBackend

    last = DuckDBBackend.date_days["DATE"][1]
    rows = [{"pid": f"P{p:03d}", "age": 30 + p % 5, "d": last - 2} for p in range(persons)]
    return rows, sum(1 for r in rows if r["d"] + (offset(KEY.encode(), r["pid"], D) or 0) > last)


def with_dates(rows: list[dict[str, Any]]) -> pa.Table:
    table = pa.Table.from_pylist(rows)
    return table.drop(["d"]).append_column("admitted", table.column("d").cast(pa.int32()).cast(pa.date32()))


def test_a_linked_tables_shift_past_the_engines_dates_is_refused_with_its_counts(tmp_path: Path) -> None:
    rows, moved = near_the_end(24)
    assert 0 < moved < len(rows)
    people = pa.Table.from_pylist([{"pid": r["pid"], "age": r["age"]} for r in rows])
    pq.write_table(people, tmp_path / "people.parquet")
    pq.write_table(with_dates(rows).drop(["age"]), tmp_path / "stays.parquet")
    spec = tmp_path / "set.toml"
    spec.write_text(SPEC.format(shift="[]", days=D).replace("visits.parquet", "people.parquet")
                    .replace("shift = []\n", "") + '\n[[table]]\nname = "stays"\npath = "stays.parquet"\n'
                    'person = "pid"\nshift = ["admitted"]\n', encoding="utf-8")
    out = tmp_path / "released"
    done = CliRunner().invoke(cli, ["materialize", str(spec), "--policy", "top", "--out", str(out)])
    assert done.exit_code == 2 and not out.exists(), done.output
    assert f"column 'admitted': the date shift (up to {D} days either way) moves {moved:,} row(s) of {moved:,} " \
           f"person(s)" in done.output, done.output


def test_a_batchs_shift_past_the_engines_dates_is_refused_with_its_counts(tmp_path: Path) -> None:
    from deid_sql.errors import DataError
    from deid_sql.policyfile.apply import apply_policy
    from deid_sql.policyfile.save import save_policy

    spec = write(tmp_path, [{k: v for k, v in r.items() if k != "seen_at"} for r in visits()], shift='["admitted"]')
    save_policy(spec, "age:every=10", tmp_path / "policy.json")
    rows, moved = near_the_end(30)
    pq.write_table(with_dates(rows), tmp_path / "batch.parquet")
    with pytest.raises(DataError, match=rf"moves {moved} row\(s\) of {moved} person\(s\)"):
        apply_policy(tmp_path / "policy.json", tmp_path / "batch.parquet", out=tmp_path / "got.parquet",
                     accept_drift="a test batch of one edge case", accept_risk="a test batch of one edge case")
    assert not (tmp_path / "got.parquet").exists()
