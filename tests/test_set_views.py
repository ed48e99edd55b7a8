"""A release set as views (``view SET_SPEC --view PREFIX``, ``sets.views``).

The views show ``materialize --out FOLDER``'s rows byte for byte (sorted), their stored SQL holds
no key (the keyed values come from the key table, computed once), suppressed persons are gone
from every linked view, a person added later shows in no view until ``--overwrite``, everything is
created all or none, and the places that could not protect the key table are refused in one
line: a DuckDB file that does not hold the person source, Spark.  On PostgreSQL an analyst granted
the views reads them and cannot read the key table, before and after ``--overwrite``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deid_sql.contract.pseudonym import pads, pseudonym
from tests.engines import Engine, engine_fixture, engine_params, read_duckdb
from tests.test_linked import KEY, secret, tables, utc_rows, write
from tests.test_linked_tables import one_line, run

assert secret  # the fixture setting the key, used by every test here

NAMES = ("patients", "encounters", "diagnoses")
POLICY = "age:every=10"
ARGS = ("--policy", POLICY, "--suppress-below", "2")


def with_enc_ids(text: str) -> str:
    """The encounters' ids released pseudonymized (a column besides the key: ``PREFIX`` + pseudonyms)."""
    return text.replace('drop = ["enc_id"]', 'pseudonymize = ["enc_id"]')


def warehouse(folder: Path, data: dict[str, list[dict[str, Any]]], orphans: str = "",
              edit: Any = with_enc_ids) -> tuple[Path, Path, Path]:
    """The set as parquet files (``files.toml``) and as tables of one DuckDB file (``set.toml``):
    the files spec, the DuckDB spec and the DuckDB file."""
    files = write(folder, data, orphans)
    files.write_text(edit(files.read_text(encoding="utf-8")), encoding="utf-8")
    files = files.rename(folder / "files.toml")
    db = folder / "warehouse.duckdb"
    con = duckdb.connect(str(db))
    for name in NAMES:
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM read_parquet('{folder / (name + '.parquet')}')")
    con.close()
    text = files.read_text(encoding="utf-8")
    for name in NAMES:
        text = text.replace(f'path = "{name}.parquet"\n', f'path = "warehouse.duckdb"\ntable = "{name}"\n')
    spec = folder / "set.toml"
    spec.write_text(text, encoding="utf-8")
    return files, spec, db


def objects(db: Path) -> dict[str, str]:
    """Every table and view of a DuckDB file, with its kind (and a view's SQL)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        found = {r[0]: "table" for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        found |= {r[0]: r[1] for r in con.execute("SELECT view_name, sql FROM duckdb_views() "
                                                  "WHERE NOT internal").fetchall()}
        return found
    finally:
        con.close()


def folder_rows(folder: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {n: utc_rows(pq.read_table(folder / f"{n}.parquet")) for n in NAMES}


def record(db: Path, name: str = "deid_release") -> dict[str, Any]:
    rows = read_duckdb(db, name).to_pylist()
    assert len(rows) == 1
    out: dict[str, Any] = json.loads(rows[0]["sidecar"])
    assert json.loads(rows[0]["tables"]) == out["release"]["tables"]
    return out


# -- DuckDB ------------------------------------------------------------------------------------------
def test_the_views_show_what_materialize_writes_and_hold_no_key(tmp_path: Path) -> None:
    files, spec, db = warehouse(tmp_path, tables())
    assert run("materialize", files, *ARGS, "--out", tmp_path / "want").exit_code == 0
    result = run("view", spec, *ARGS, "--db", db, "--view", "deid_")
    assert result.exit_code == 0, result.output
    assert "created 3 views" in result.output and "deid_keys, deid_pseudonyms" in result.output
    assert "released 60 persons" in result.output and "4 suppressed" in result.output
    want = folder_rows(tmp_path / "want")
    for name in NAMES:
        assert utc_rows(read_duckdb(db, f"deid_{name}")) == want[name], name
    found = objects(db)
    assert {n for n, k in found.items() if k != "table"} == {f"deid_{n}" for n in NAMES}
    assert {n for n, k in found.items() if k == "table"} == {*NAMES, "deid_keys", "deid_pseudonyms", "deid_release"}
    inner, outer = pads(KEY.encode())
    for name in NAMES:  # the stored SQL reads the key tables and computes no HMAC
        sql = found[f"deid_{name}"].lower()
        assert "deid_keys" in sql and "sha256" not in sql and "unhex" not in sql, name
        assert inner.hex() not in sql and outer.hex() not in sql
    keys = read_duckdb(db, "deid_keys").to_pylist()
    assert len(keys) == 60 and sum(k["suppressed"] for k in keys) == 4
    assert all(k["pseudonym"] == pseudonym(KEY.encode(), k["person_key"]) for k in keys)
    assert all(-20 <= k["offset_days"] <= 20 for k in keys)
    suppressed = {k["pseudonym"] for k in keys if k["suppressed"]}
    for name in ("encounters", "diagnoses"):  # the suppressed persons are gone from every linked view
        assert not suppressed & set(read_duckdb(db, f"deid_{name}").column("patient_id").to_pylist()), name
    sidecar = json.loads((tmp_path / "want" / "release.json").read_text(encoding="utf-8"))
    got = record(db)
    union = got["figures"].pop("union")  # the views came second to the same recipient: judged with the folder
    assert union["k"] == got["figures"]["k"] and "union" not in sidecar["figures"]
    assert got["figures"] == sidecar["figures"] and got["figures"]["unit"] == "persons"
    assert [t["table"] for t in got["release"]["tables"]] == [f"deid_{n}" for n in NAMES]
    assert [t["rows"] for t in got["release"]["tables"]] == [len(want[n]) for n in NAMES]
    assert got["release"]["format"] == "view" and got["release"]["key_tables"] == ["deid_keys", "deid_pseudonyms"]
    assert got["gate"]["verdict"] == "passed"


def test_a_person_added_later_shows_in_no_view_until_replace(tmp_path: Path) -> None:
    _, spec, db = warehouse(tmp_path, tables(), edit=lambda t: t)
    assert run("view", spec, "--policy", POLICY, "--db", db, "--view", "deid_").exit_code == 0
    assert "deid_pseudonyms" not in objects(db)  # only the key is pseudonymized: one key table
    before = {n: utc_rows(read_duckdb(db, f"deid_{n}")) for n in NAMES}
    newcomer = pseudonym(KEY.encode(), "P900")
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO patients VALUES ('P900', 31, 'F', DATE '1980-05-05')")
    con.execute("INSERT INTO encounters VALUES ('P900', 9000, 'visit', TIMESTAMP '2021-03-01 09:00', "
                "TIMESTAMP '2021-03-02 09:00')")
    con.execute("INSERT INTO diagnoses VALUES ('P900', 'C1', DATE '2021-03-01')")
    con.close()
    assert {n: utc_rows(read_duckdb(db, f"deid_{n}")) for n in NAMES} == before
    result = run("view", spec, "--policy", POLICY, "--db", db, "--view", "deid_", "--overwrite")
    assert result.exit_code == 0, result.output
    for name in NAMES:  # judged again, the newcomer shows everywhere
        assert newcomer in read_duckdb(db, f"deid_{name}").column("patient_id").to_pylist(), name
    assert len(read_duckdb(db, "deid_keys")) == 61
    # each creation is a release to the recipient: the replaced set was judged with the first
    assert "with the 1 earlier release to default" in result.output
    assert record(db)["ledger"]["entry"] == 2 and record(db)["ledger"]["earlier"] == 1


def test_orphans_are_refused_with_their_count_or_left_out_by_the_join(tmp_path: Path) -> None:
    _, spec, db = warehouse(tmp_path, tables(ghosts=3))
    one_line(run("view", spec, "--policy", POLICY, "--db", db, "--view", "deid_"), "has 3 row(s) whose person")
    assert set(objects(db)) == set(NAMES)
    spec.write_text(spec.read_text(encoding="utf-8").replace('keep = ["kind"]', 'keep = ["kind"]\norphans = "drop"'),
                    encoding="utf-8")
    assert run("view", spec, "--policy", POLICY, "--db", db, "--view", "deid_").exit_code == 0
    entry = record(db)["release"]["tables"][1]
    shown = len(read_duckdb(db, "deid_encounters"))
    assert entry["orphans"] == 3 and entry["rows"] == entry["source_rows"] - 3 == shown


def test_places_and_names_that_cannot_hold_the_set_are_one_line_with_nothing_created(tmp_path: Path) -> None:
    files, spec, db = warehouse(tmp_path, tables(12))
    other = tmp_path / "analysts.duckdb"
    one_line(run("view", files, "--policy", POLICY, "--db", other, "--view", "deid_"),
             "may live only in the DuckDB file that already holds the person source")
    assert not other.exists()
    duckdb.connect(str(other)).close()
    one_line(run("view", spec, "--policy", POLICY, "--db", other, "--view", "deid_"), "materialize")
    one_line(run("view", spec, "--policy", POLICY, "--view", "deid_"), "--db")
    spec_keys = tmp_path / "keys.toml"
    spec_keys.write_text(spec.read_text(encoding="utf-8").replace('name = "diagnoses"', 'name = "keys"'),
                         encoding="utf-8")
    one_line(run("view", spec_keys, "--policy", POLICY, "--db", db, "--view", "deid_"), "key table 'deid_keys'")
    con = duckdb.connect(str(db))
    con.execute("ALTER TABLE encounters RENAME TO deid_encounters")
    con.close()
    clash = tmp_path / "clash.toml"
    clash.write_text(spec.read_text(encoding="utf-8").replace('table = "encounters"', 'table = "deid_encounters"'),
                     encoding="utf-8")
    one_line(run("view", clash, "--policy", POLICY, "--db", db, "--view", "deid_"), "is an input of the set")
    assert set(objects(db)) == {"patients", "deid_encounters", "diagnoses"}


def test_existing_names_need_replace_and_a_refused_set_leaves_the_earlier_one(tmp_path: Path) -> None:
    _, spec, db = warehouse(tmp_path, tables(30))
    assert run("view", spec, "--policy", POLICY, "--db", db, "--view", "deid_").exit_code == 0
    before = {n: utc_rows(read_duckdb(db, f"deid_{n}")) for n in NAMES}
    one_line(run("view", spec, "--policy", "age:every=20", "--db", db, "--view", "deid_"), "--overwrite")
    strict = tmp_path / "strict.toml"
    strict.write_text(spec.read_text(encoding="utf-8").replace("max_record_risk = 1.0", "min_k = 50"),
                      encoding="utf-8")
    result = run("view", strict, "--policy", POLICY, "--db", db, "--view", "deid_", "--overwrite")
    assert result.exit_code != 0 and "refused" in result.output
    assert {n: utc_rows(read_duckdb(db, f"deid_{n}")) for n in NAMES} == before


def test_a_failing_view_creates_nothing_and_keeps_the_earlier_set(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """One more row expected of the second view than it shows: every key table, view and the
    record are rolled back, and an earlier set stays as it was."""
    import deid_sql.sets.rows as linked_rows
    from deid_sql import Problem
    from deid_sql.errors import OutputError
    from deid_sql.release.plan import plan_of
    from deid_sql.sets.views import create_set_views

    _, spec, db = warehouse(tmp_path, tables(30))
    with Problem.from_spec(spec, cache=False) as problem:
        with monkeypatch.context() as m:
            m.setattr(linked_rows.LinkedSource, "released", property(lambda s: s.rows - s.orphans - s.removed + 1))
            with pytest.raises(OutputError, match="no view of the set was created"):
                create_set_views(problem, plan_of(problem, POLICY), "deid_", db)
        assert set(objects(db)) == set(NAMES)
        written = create_set_views(problem, plan_of(problem, POLICY), "deid_", db)
        before = {n: utc_rows(read_duckdb(db, n)) for n in objects(db)}
        with monkeypatch.context() as m:
            m.setattr(linked_rows.LinkedSource, "released", property(lambda s: s.rows - s.orphans - s.removed + 1))
            with pytest.raises(OutputError, match="no view of the set was created"):
                create_set_views(problem, plan_of(problem, POLICY, suppression=2), "deid_", db, replace=True)
        assert {n: utc_rows(read_duckdb(db, n)) for n in objects(db)} == before  # (a view has no order)
    assert written.rows == sum(len(before[f"deid_{n}"]) for n in NAMES)


def test_the_report_of_a_set_of_views_lists_every_view(tmp_path: Path) -> None:
    _, spec, db = warehouse(tmp_path, tables(30))
    report = tmp_path / "views.html"
    result = run("view", spec, *ARGS, "--db", db, "--view", "deid_", "--report", report)
    assert result.exit_code == 0, result.output
    data = json.loads(report.with_suffix(".json").read_text(encoding="utf-8"))
    listed = data["data"]["set"]["tables"]
    assert [t["written_to"] for t in listed] == [f"deid_{n}" for n in NAMES]
    assert [t["rows"] for t in listed] == [len(read_duckdb(db, f"deid_{n}")) for n in NAMES]


def test_spark_refuses_a_set_of_views_before_it_starts(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    files = write(tmp_path, tables(12))
    files.write_text('[backend]\nengine = "spark"\nmaster = "local[1]"\n\n' + files.read_text(encoding="utf-8"),
                     encoding="utf-8")
    one_line(run("view", files, "--policy", POLICY, "--view", "deid_"), "cannot be created on Spark")


# -- PostgreSQL ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=engine_params("postgres"))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


@pytest.fixture
def analyst(engine: Engine) -> Iterator[str]:
    """A role of its own, granted by default SELECT on every new table of the test schema (a key
    table must be locked all the same)."""
    con = engine.backend.con  # type: ignore[attr-defined]
    role = f"deid_analyst_{uuid.uuid4().hex[:8]}"
    schema = engine.schema  # type: ignore[attr-defined]
    con.execute(f'CREATE ROLE "{role}"')
    con.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
    con.execute(f'ALTER DEFAULT PRIVILEGES IN SCHEMA "{schema}" GRANT SELECT ON TABLES TO "{role}"')
    try:
        yield role
    finally:
        con.execute(f'ALTER DEFAULT PRIVILEGES IN SCHEMA "{schema}" REVOKE SELECT ON TABLES FROM "{role}"')
        con.execute(f'DROP OWNED BY "{role}"')
        con.execute(f'DROP ROLE "{role}"')


def readable(engine: Engine, role: str, table: str) -> bool:
    import psycopg

    with psycopg.connect(engine.dsn, autocommit=True) as con:  # type: ignore[attr-defined]
        con.execute(f'SET ROLE "{role}"')
        try:
            con.execute(f'SELECT count(*) FROM "{engine.schema}"."{table}"').fetchall()  # type: ignore[attr-defined]
        except psycopg.errors.InsufficientPrivilege:
            return False
        return True


def test_postgres_views_equal_materialize_and_lock_the_key_table(engine: Engine, analyst: str,
                                                                   tmp_path: Path) -> None:
    data = tables()
    files = write(tmp_path, data)
    files.write_text(with_enc_ids(files.read_text(encoding="utf-8")), encoding="utf-8")
    text = files.read_text(encoding="utf-8")
    for name, rows in data.items():
        text = text.replace(f'path = "{name}.parquet"\n', engine.load(f"sv_{name}", pa.Table.from_pylist(rows)) + "\n")
    spec = engine.folder / "views.toml"
    spec.write_text(engine.header() + "\n" + text, encoding="utf-8")
    prefix = f"{engine.schema}.v_"  # type: ignore[attr-defined]
    assert run("materialize", files, *ARGS, "--out", tmp_path / "want").exit_code == 0
    result = run("view", spec, *ARGS, "--view", prefix)
    assert result.exit_code == 0, result.output
    want = folder_rows(tmp_path / "want")
    for name in NAMES:
        assert utc_rows(engine.read(f"{prefix}{name}")) == want[name], name
    con = engine.backend.con  # type: ignore[attr-defined]
    for name in NAMES:
        con.execute(f'GRANT SELECT ON "{engine.schema}"."v_{name}" TO "{analyst}"')  # type: ignore[attr-defined]
    views = [f"v_{n}" for n in NAMES]
    assert all(readable(engine, analyst, v) for v in views)
    for table in ("v_keys", "v_pseudonyms"):  # locked, though a default privilege granted every new table
        assert not readable(engine, analyst, table), table
    con.execute(f'REVOKE ALL ON "{engine.schema}"."sv_patients" FROM "{analyst}"')  # type: ignore[attr-defined]
    assert not readable(engine, analyst, "sv_patients") and readable(engine, analyst, "v_patients")
    result = run("view", spec, "--policy", "age:every=20", "--view", prefix, "--overwrite")
    assert result.exit_code == 0, result.output
    assert all(readable(engine, analyst, v) for v in views)  # the grants stayed on the replaced views
    again = run("view", spec, "--policy", "age:every=10", "--view", prefix, "--overwrite")  # same columns: in place
    assert again.exit_code == 0, again.output
    assert all(readable(engine, analyst, v) for v in views)
    assert not readable(engine, analyst, "v_keys") and not readable(engine, analyst, "v_pseudonyms")
    assert len(engine.read(f"{prefix}keys")) == 60
    assert record_of_engine(engine, f"{prefix}release")["policy"]["text"].startswith("age:every=10")
    one_line(run("view", spec, "--policy", POLICY, "--view", prefix), "--overwrite")


def record_of_engine(engine: Engine, name: str) -> dict[str, Any]:
    rows = engine.read(name).to_pylist()
    assert len(rows) == 1
    out: dict[str, Any] = json.loads(rows[0]["sidecar"])
    return out
