"""A release set written as tables (``materialize --tables PREFIX``) and the report of a set.

The tables form writes the same rows as the folder form (``sets.release``), in the engine or a
DuckDB file, all or none: a refused gate, a failing second table or a wrong row count leaves no
table of the set (and an earlier set as it was); ``--overwrite`` replaces the whole set; bad
prefixes and names are one line.  The report of a set lists the tables its record lists, with the
record's figures.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from sqlglot import exp

from deid_sql import Problem
from deid_sql.cli import cli
from deid_sql.errors import DeidError, OutputError
from deid_sql.release.plan import plan_of
from deid_sql.sets.release import materialize_set
from deid_sql.sets.tables import materialize_set_tables
from tests.engines import ENGINES, Engine, engine_fixture, engine_params, read_duckdb
from tests.test_linked import secret, tables, utc_rows, write

assert secret  # the fixture setting the key, used by every test here

NAMES = ("patients", "encounters", "diagnoses")
POLICY = "age:every=10"


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, [str(a) for a in args])


def one_line(result: Any, expected: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], result.output
    assert "Traceback" not in result.output


def folder_rows(folder: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {n: utc_rows(pq.read_table(folder / f"{n}.parquet")) for n in NAMES}


def duckdb_tables(path: Path) -> set[str]:
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        return {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    finally:
        con.close()


def record_of(read: Any, name: str) -> dict[str, Any]:
    """The set's record table: one row, the whole record as JSON and its table list as JSON text."""
    table = read(name).to_pylist()
    assert len(table) == 1
    record = json.loads(table[0]["sidecar"])
    assert json.loads(table[0]["tables"]) == record["release"]["tables"]
    assert table[0]["verdict"] == record["gate"]["verdict"]
    return record


def same_list(tables_form: list[dict[str, Any]], folder_form: list[dict[str, Any]]) -> None:
    """The record of the tables form lists what the folder form's does, bar where each table went."""
    where = ("file", "sha256", "table", "row_hash")
    assert [{k: v for k, v in t.items() if k not in where} for t in tables_form] == \
        [{k: v for k, v in t.items() if k not in where} for t in folder_form]


# -- a DuckDB file, from the command line ---------------------------------------------------------------
def test_a_duckdb_file_holds_the_same_set_as_the_folder(tmp_path: Path) -> None:
    spec = write(tmp_path, tables())
    folder, db = tmp_path / "release", tmp_path / "out.duckdb"
    args = ["materialize", spec, "--policy", POLICY, "--suppress-below", "2"]
    assert run(*args, "--out", folder).exit_code == 0
    result = run(*args, "--out", db, "--tables", "deid_")
    assert result.exit_code == 0, result.output
    assert "wrote 3 tables" in result.output and "deid_encounters: " in result.output
    assert duckdb_tables(db) == {"deid_patients", "deid_encounters", "deid_diagnoses", "deid_release"}
    want = folder_rows(folder)
    for name in NAMES:
        assert utc_rows(read_duckdb(db, f"deid_{name}")) == want[name], name
    record = record_of(lambda n: read_duckdb(db, n), "deid_release")
    sidecar = json.loads((folder / "release.json").read_text(encoding="utf-8"))
    same_list(record["release"]["tables"], sidecar["release"]["tables"])
    assert [t["table"] for t in record["release"]["tables"]] == [f"deid_{n}" for n in NAMES]
    # the same set released twice to one recipient: the second is also judged with the first (the same labels)
    union = record["figures"].pop("union")
    assert union["k"] == record["figures"]["k"] and "union" not in sidecar["figures"]
    assert record["figures"] == sidecar["figures"] and record["figures"]["unit"] == "persons"
    assert record["figures"]["suppressed"] == 4
    encounters = record["release"]["tables"][1]
    assert encounters["rows"] == len(want["encounters"]) < encounters["source_rows"]
    assert encounters["removed_with_suppressed_persons"] == encounters["source_rows"] - encounters["rows"]


@pytest.mark.slow
def test_a_schema_prefix_in_a_duckdb_file_and_the_record_checks_the_rows(tmp_path: Path) -> None:
    import duckdb

    spec = write(tmp_path, tables(30))
    db = tmp_path / "out.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE SCHEMA rel")
    con.close()
    result = run("materialize", spec, "--policy", POLICY, "--out", db, "--tables", "rel.")
    assert result.exit_code == 0, result.output
    record = record_of(lambda n: read_duckdb_schema(db, n), "release")
    from deid_sql.backends.base import fingerprint
    from deid_sql.backends.duckdb import DuckDBBackend, render
    from deid_sql.storage.names import table_name

    con, hashing = duckdb.connect(str(db), read_only=True), DuckDBBackend()
    try:
        for t in record["release"]["tables"]:
            columns = [c["name"] for c in t["columns"]]
            got = fingerprint(lambda q: con.sql(render(q)).to_arrow_table(), hashing, table_name(t["table"]), columns)
            assert got == t["row_hash"], t["name"]
    finally:
        con.close()
        hashing.close()


def read_duckdb_schema(path: Path, name: str) -> pa.Table:
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.sql(f'SELECT * FROM rel."{name}"').to_arrow_table()
    finally:
        con.close()


def test_a_refused_set_creates_no_table_and_no_file(tmp_path: Path) -> None:
    spec = write(tmp_path, tables())
    spec.write_text(spec.read_text(encoding="utf-8").replace("max_record_risk = 1.0", "min_k = 50"), encoding="utf-8")
    db = tmp_path / "out.duckdb"
    result = run("materialize", spec, "--policy", POLICY, "--out", db, "--tables", "deid_")
    assert result.exit_code == 2 and "release refused by the gate" in result.output
    assert not db.exists()


def test_overwrite_replaces_the_whole_set(tmp_path: Path) -> None:
    spec = write(tmp_path, tables())
    db = tmp_path / "out.duckdb"
    first = ["materialize", spec, "--policy", "age:every=20", "--out", db, "--tables", "deid_"]
    assert run(*first).exit_code == 0
    before = {n: utc_rows(read_duckdb(db, f"deid_{n}")) for n in NAMES}
    one_line(run(*first), "already has a table named 'deid_patients'; pick another name or pass --overwrite")
    again = ["materialize", spec, "--policy", POLICY, "--suppress-below", "2", "--out", db, "--tables", "deid_"]
    result = run(*again, "--overwrite")
    assert result.exit_code == 0, result.output
    record = record_of(lambda n: read_duckdb(db, n), "deid_release")
    assert record["policy"]["text"].startswith(POLICY) and record["figures"]["suppressed"] == 4
    after = {n: utc_rows(read_duckdb(db, f"deid_{n}")) for n in NAMES}
    assert all(after[n] != before[n] for n in NAMES)  # every table replaced (suppressed persons left each)
    assert [t["rows"] for t in record["release"]["tables"]] == [len(after[n]) for n in NAMES]


@pytest.mark.parametrize(("args", "expected"), [
    (["--tables", ""], "--tables needs a prefix"),
    (["--tables", "a.b."], "--tables 'a.b.patients' has 3 parts"),
    (["--tables", "deid_", "--table", "x"], "not --table"),
    (["--tables", "deid_", "--out", "{tmp}/release"], "--tables writes the set as tables"),
    (["--tables", "deid_", "--out", "{tmp}/x.parquet"], "--tables writes the set as tables"),
    (["--tables", "deid_"], "keeps no tables of its own"),
    (["--tables", "deid_", "--out", "{tmp}/patients.parquet"], "--tables writes the set as tables"),
    (["--tables", "deid_", "--out", "{tmp}/missing/x.duckdb"], "does not exist; create it first"),
    (["--table", "x", "--out", "{tmp}/x.duckdb"], "not --table"),
    (["--tables", "rel.", "--out", "{tmp}/x.duckdb"], "has no schema 'rel' for table 'rel.patients'; create it first"),
])
def test_bad_prefixes_and_names_are_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    spec = write(tmp_path, tables(6))
    result = run("materialize", spec, "--policy", "age:top|sex:top",
                 *[a.replace("{tmp}", str(tmp_path)) for a in args])
    one_line(result, expected)
    assert not list(tmp_path.glob("*.duckdb")) and not (tmp_path / "release").exists()


def test_a_table_released_as_release_and_a_spec_without_tables_are_refused(tmp_path: Path) -> None:
    spec = write(tmp_path, tables(6))
    spec.write_text(spec.read_text(encoding="utf-8").replace('name = "diagnoses"', 'name = "release"'),
                    encoding="utf-8")
    one_line(run("materialize", spec, "--policy", "age:top|sex:top", "--out", tmp_path / "x.duckdb",
                 "--tables", "deid_"), "would take the name of the set's record table 'deid_release'")
    single = tmp_path / "single.toml"
    text = spec.read_text(encoding="utf-8")
    single.write_text(text[:text.index("[[table]]")], encoding="utf-8")
    one_line(run("materialize", single, "--policy", "age:top|sex:top", "--out", tmp_path / "x.duckdb",
                 "--tables", "deid_"), "declares no [[table]]: name the one table with --table NAME")
    assert not (tmp_path / "x.duckdb").exists()


# -- every engine ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=engine_params(*ENGINES))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


class Place:
    """Where a test writes the set: a DuckDB file for DuckDB, the engine's own schema otherwise."""

    def __init__(self, engine: Engine, tmp_path: Path) -> None:
        self.engine = engine
        self.database = tmp_path / "out.duckdb" if engine.name == "duckdb" else None
        tag = uuid.uuid4().hex[:6]
        self.prefix = f"out{tag}_" if engine.name == "duckdb" else engine.qualified(f"out{tag}_")  # type: ignore[attr-defined]

    def read(self, name: str) -> pa.Table:
        if self.database is not None:
            return read_duckdb(self.database, self.prefix + name)
        return self.engine.read(self.prefix + name)

    def exists(self, name: str) -> bool:
        try:
            self.read(name)
        except Exception:  # noqa: BLE001 - any engine's "no such table"
            return False
        return True

    def catalog(self) -> list[str]:
        """The tables of the schema (or DuckDB file) the set goes to."""
        if self.database is not None:
            return sorted(duckdb_tables(self.database)) if self.database.exists() else []
        schema = self.prefix.split(".")[0]
        if self.engine.name == "spark":
            rows = self.engine.backend.session.sql(f"SHOW TABLES IN `{schema}`").collect()  # type: ignore[attr-defined]
            return sorted(r.tableName for r in rows)
        found = self.engine.backend.execute(  # type: ignore[attr-defined]
            exp.select("table_name").from_(exp.table_("tables", db="information_schema"))
            .where(exp.column("table_schema").eq(exp.Literal.string(schema))))
        return sorted(found.column(0).to_pylist())

    def args(self) -> list[str]:
        return ["--tables", self.prefix, *(["--out", str(self.database)] if self.database is not None else [])]


def engine_spec(engine: Engine, tmp_path: Path,
                data: dict[str, list[dict[str, Any]]] | None = None) -> tuple[Path, Path]:
    """The local spec (Parquet files) and the same set stored in ``engine``, with its spec."""
    data = data or tables()
    local = write(tmp_path, data)
    text = local.read_text(encoding="utf-8")
    tag = uuid.uuid4().hex[:6]
    for name, rows in data.items():
        body = engine.load(f"t{tag}_{name}", pa.Table.from_pylist(rows))
        text = text.replace(f'path = "{name}.parquet"\n', body + "\n")
    spec = tmp_path / "engine.toml"
    spec.write_text(engine.header() + "\n" + text, encoding="utf-8")
    return local, spec


def test_every_engine_writes_the_set_as_tables(engine: Engine, tmp_path: Path) -> None:
    """The same rows as the folder form, the record table listing them, figures in persons."""
    local, spec = engine_spec(engine, tmp_path)
    place = Place(engine, tmp_path)
    with Problem.from_spec(local, cache=False) as problem:
        materialize_set(problem, plan_of(problem, POLICY, suppression=2), tmp_path / "want")
    result = run("materialize", spec, "--policy", POLICY, "--suppress-below", "2", *place.args())
    assert result.exit_code == 0, result.output
    want = folder_rows(tmp_path / "want")
    for name in NAMES:
        assert utc_rows(place.read(name)) == want[name], name
    record = record_of(place.read, "release")
    sidecar = json.loads((tmp_path / "want" / "release.json").read_text(encoding="utf-8"))
    same_list(record["release"]["tables"], [t | {"source": r["source"]} for t, r in
                                            zip(sidecar["release"]["tables"], record["release"]["tables"])])
    for key in ("records", "groups", "k", "suppressed", "unit"):
        assert record["figures"][key] == sidecar["figures"][key], key


def test_a_refused_gate_creates_no_table_in_any_engine(engine: Engine, tmp_path: Path) -> None:
    _, spec = engine_spec(engine, tmp_path, tables(30))
    spec.write_text(spec.read_text(encoding="utf-8").replace("max_record_risk = 1.0", "min_k = 50"), encoding="utf-8")
    place = Place(engine, tmp_path)
    result = run("materialize", spec, "--policy", POLICY, *place.args())
    assert result.exit_code == 2 and "release refused by the gate" in result.output, result.output
    assert not [t for t in place.catalog() if t.startswith((place.prefix.split(".")[-1], "deid_"))]
    if place.database is not None:
        assert not place.database.exists()


def test_an_input_is_never_a_target(engine: Engine, tmp_path: Path) -> None:
    if engine.name == "duckdb":
        pytest.skip("DuckDB's inputs are files: test_bad_prefixes_and_names_are_one_line")
    _, spec = engine_spec(engine, tmp_path)
    source = next(line for line in spec.read_text(encoding="utf-8").splitlines() if line.startswith("table = "))
    prefix = source.split('"')[1].rsplit("_", 1)[0] + "_"  # <schema>.t<tag>_ : <prefix>patients is the source
    one_line(run("materialize", spec, "--policy", POLICY, "--tables", prefix), "is an input of the job")


def test_a_failing_second_table_leaves_no_table_of_the_set(engine: Engine, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine error while the second table is written, then a wrong row count: no table of the
    set appears, and an earlier set stays as it was."""
    import deid_sql.sets.release as release_set

    _, spec = engine_spec(engine, tmp_path)
    place = Place(engine, tmp_path)
    real = release_set.linked_query

    def failing(backend: Any, spec_: Any, source: Any, kept: Any) -> exp.Select:
        query = real(backend, spec_, source, kept)
        if source.table.name != "encounters":
            return query
        boom = exp.alias_(backend.raise_error("deid-sql test: the second table fails", exp.column("patient_id")),
                          "patient_id")
        return exp.select(boom, *[exp.column(c) for c in ("kind", "admitted", "discharged")]).from_(
            query.subquery("q"))

    with Problem.from_spec(spec, cache=False) as problem:
        plan = plan_of(problem, POLICY)
        with monkeypatch.context() as m:
            m.setattr(release_set, "linked_query", failing)
            with pytest.raises(DeidError, match="the second table fails"):
                materialize_set_tables(problem, plan, place.prefix, place.database)
        assert not any(place.exists(n) for n in [*NAMES, "release"])
        assert not [t for t in place.catalog() if t.startswith("deid_")]  # no staging table left
        if place.database is not None:
            assert not place.database.exists()  # a new DuckDB file lands only with the set
        written = materialize_set_tables(problem, plan, place.prefix, place.database)
        before = {n: utc_rows(place.read(n)) for n in [*NAMES, "release"]}
        with monkeypatch.context() as m:  # one more row expected of the second table: refused, rolled back
            m.setattr(release_set.LinkedSource, "released", property(lambda s: s.rows - s.orphans - s.removed + 1))
            with pytest.raises(OutputError, match="no table of the set was written"):
                materialize_set_tables(problem, plan_of(problem, POLICY, suppression=2), place.prefix,
                                       place.database, overwrite=True)
        assert {n: utc_rows(place.read(n)) for n in [*NAMES, "release"]} == before
    assert written.rows == sum(len(before[n]) for n in NAMES)


def test_a_spark_swap_cut_short_puts_the_old_set_back(engine: Engine, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark has no transaction: a failure while the staged tables are renamed into place (the
    second table's) drops the new tables placed so far and renames the old ones back."""
    if engine.name != "spark":
        pytest.skip("DuckDB and PostgreSQL swap inside one transaction")
    import deid_sql.backends.spark_sets as spark_sets
    from deid_sql.errors import BackendError

    _, spec = engine_spec(engine, tmp_path)
    place = Place(engine, tmp_path)
    with Problem.from_spec(spec, cache=False) as problem:
        materialize_set_tables(problem, plan_of(problem, "age:every=20"), place.prefix)
        before = {n: utc_rows(place.read(n)) for n in [*NAMES, "release"]}
        real, calls = spark_sets.rename, []

        def cut(table: exp.Table, to: exp.Table, kind: str | None) -> exp.Alter:
            calls.append(to.name)
            if to.name.endswith("encounters") and calls.count(to.name) == 1:  # placing it; putting it back works
                raise BackendError("deid-sql test: cut short")
            return real(table, to, kind)

        monkeypatch.setattr(spark_sets, "rename", cut)
        with pytest.raises(BackendError, match="cut short"):
            materialize_set_tables(problem, plan_of(problem, POLICY, suppression=2), place.prefix, overwrite=True)
        monkeypatch.undo()
    assert calls[0].startswith("deid_staging") and calls[2].endswith("patients")  # the record went aside first
    assert {n: utc_rows(place.read(n)) for n in [*NAMES, "release"]} == before
    assert not [t for t in place.catalog() if t.startswith("deid_")]


def test_engine_names_its_own_rules(engine: Engine, tmp_path: Path) -> None:
    """A prefix the engine would fold or cannot hold is refused in one line before anything runs."""
    _, spec = engine_spec(engine, tmp_path, tables(6))
    bad = {"duckdb": ("a.b.c.", "has 4 parts"), "postgres": ("Deid_", "would turn Deid_patients into deid_patients"),
           "spark": ("deid-", "not a name")}[engine.name]
    place = Place(engine, tmp_path)
    out = ["--out", str(place.database)] if place.database is not None else []
    one_line(run("materialize", spec, "--policy", "age:top|sex:top", "--tables", bad[0], *out), bad[1])


# -- the report of a set --------------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["folder", "tables"])
def test_the_report_of_a_set_lists_its_tables_with_the_records_figures(tmp_path: Path, form: str) -> None:
    spec = write(tmp_path, tables())
    report = tmp_path / "report.html"
    out = ["--out", tmp_path / "release"] if form == "folder" else ["--out", tmp_path / "o.duckdb", "--tables", "d_"]
    result = run("materialize", spec, "--policy", POLICY, "--suppress-below", "2", *out, "--report", report)
    assert result.exit_code == 0, result.output
    assert "report: " in result.output and "verdict: passed" in result.output
    if form == "folder":
        record = json.loads((tmp_path / "release" / "release.json").read_text(encoding="utf-8"))
    else:
        record = record_of(lambda n: read_duckdb(tmp_path / "o.duckdb", n), "d_release")
    twin = json.loads(report.with_suffix(".json").read_text(encoding="utf-8"))
    listed = twin["data"]["set"]["tables"]
    recorded = record["release"]["tables"]
    assert [t["name"] for t in listed] == [t["name"] for t in recorded] == list(NAMES)
    assert [t["written_to"] for t in listed] == [t.get("file") or t.get("table") for t in recorded]
    for mine, theirs in zip(listed, recorded):
        assert mine["rows"] == theirs["rows"]
        for key in ("source_rows", "orphans", "orphans_rule", "removed_with_suppressed_persons"):
            assert mine[key] == theirs.get(key, mine[key] if theirs["role"] != "linked" else None), key
        assert [(c["name"], c["role"]) for c in mine["columns"]] == [(c["name"], c["role"]) for c in theirs["columns"]]
        assert all(c["shift_days"] == (20 if c["role"] == "shift" else None) for c in mine["columns"])
    assert listed[0]["source_rows"] == record["source"]["rows"] == 60
    figures, recorded_figures = twin["risk"]["figures"], record["figures"]
    for key in ("records", "groups", "k", "suppressed", "expected_reidentifications", "max_record_risk"):
        assert figures[key] == pytest.approx(recorded_figures[key]), key
    page = report.read_text(encoding="utf-8")
    for t in recorded:
        assert f'data-table="{t["name"]}"' in page and f'data-rows="{t["rows"]}"' in page
    assert 'data-role="shift" data-shift-days="20"' in page and "shifted (by up to ±20 days)" in page


def test_deid_sql_report_of_a_set_before_and_after_its_release(tmp_path: Path) -> None:
    """``deid-sql report`` takes a set's spec: with --policy it previews every table's rows (nothing
    written), with --from-release it reports the set its release.json records, after checking every
    file of the folder against its hash; a changed file is refused in one line."""
    spec = write(tmp_path, tables())
    preview = tmp_path / "preview.html"
    result = run("report", spec, "--policy", POLICY, "--suppress-below", "2", "--out", preview)
    assert result.exit_code == 0, result.output
    assert run("materialize", spec, "--policy", POLICY, "--suppress-below", "2", "--out", tmp_path / "release",
               ).exit_code == 0
    record = json.loads((tmp_path / "release" / "release.json").read_text(encoding="utf-8"))
    after = tmp_path / "after.html"
    result = run("report", spec, "--from-release", tmp_path / "release" / "release.json", "--out", after)
    assert result.exit_code == 0, result.output
    recorded = record["release"]["tables"]
    for page, form in ((preview, "not written"), (after, "file")):
        twin = json.loads(page.with_suffix(".json").read_text(encoding="utf-8"))
        listed = twin["data"]["set"]["tables"]
        assert [t["name"] for t in listed] == [t["name"] for t in recorded] == list(NAMES)
        assert [t["rows"] for t in listed] == [t["rows"] for t in recorded]
        assert [t["removed_with_suppressed_persons"] for t in listed[1:]] == [
            t["removed_with_suppressed_persons"] for t in recorded[1:]]
        assert {t["form"] for t in listed} == {form}
        for key in ("records", "groups", "k", "suppressed"):
            assert twin["risk"]["figures"][key] == record["figures"][key], key
    assert "none: a policy, not yet released" in preview.read_text(encoding="utf-8")
    linked = tmp_path / "release" / recorded[1]["file"]
    linked.write_bytes(linked.read_bytes() + b"\0")  # changed after the release
    one_line(run("report", spec, "--from-release", tmp_path / "release" / "release.json", "--out",
                 tmp_path / "late.html"), f"{recorded[1]['file']} has sha256")
    assert not (tmp_path / "late.html").exists()


@pytest.mark.parametrize("extra", ["raw_patients.parquet", ".hidden", "notes/"])
def test_a_set_folder_holding_an_unrecorded_entry_is_not_reported(tmp_path: Path, extra: str) -> None:
    """A set's folder holds exactly what its record lists: a raw file copied in (or a hidden file,
    or a folder) is refused by name, one line, before a report is written."""
    spec = write(tmp_path, tables(30))
    out = tmp_path / "release"
    assert run("materialize", spec, "--policy", POLICY, "--out", out).exit_code == 0
    sidecar, page = out / "release.json", tmp_path / "after.html"
    assert run("report", spec, "--from-release", sidecar, "--out", page).exit_code == 0  # as written: reported
    page.unlink()
    page.with_suffix(".json").unlink()
    if extra.endswith("/"):
        (out / extra).mkdir()
    else:
        (out / extra).write_bytes((tmp_path / "patients.parquet").read_bytes())  # the raw source
    one_line(run("report", spec, "--from-release", sidecar, "--out", page),
             f"holds {extra.rstrip('/')!r}, which the record does not list")
    assert not page.exists() and not page.with_suffix(".json").exists()


def test_a_sets_report_is_not_written_into_its_folder(tmp_path: Path) -> None:
    """``report --from-release FOLDER/release.json --out FOLDER/…`` is refused: the page would be a
    file the set's record does not list."""
    spec = write(tmp_path, tables(30))
    out = tmp_path / "release"
    assert run("materialize", spec, "--policy", POLICY, "--out", out).exit_code == 0
    one_line(run("report", spec, "--from-release", out / "release.json", "--out", out / "report.html"),
             "--out")
    assert sorted(p.name for p in out.iterdir()) == sorted(["release.json", *(f"{n}.parquet" for n in NAMES)])


def test_a_sets_report_is_refused_inside_its_folder_and_a_failed_report_removes_the_set(tmp_path: Path) -> None:
    spec = write(tmp_path, tables(30))
    out = tmp_path / "release"
    assert run("materialize", spec, "--policy", POLICY, "--out", out).exit_code == 0
    one_line(run("materialize", spec, "--policy", POLICY, "--out", out, "--overwrite", "--report", out / "r.html"),
             "is inside the set's folder")
    (tmp_path / "r.json").write_text("{}", encoding="utf-8")  # the report's twin exists: refused before writing
    result = run("materialize", spec, "--policy", POLICY, "--out", tmp_path / "other", "--report", tmp_path / "r.html")
    one_line(result, "already exists")
    assert not (tmp_path / "other").exists()


# -- Spark: a kill during the swap -------------------------------------------------------------------------
@pytest.mark.engine
@pytest.mark.slow
def test_a_kill_during_the_spark_swap_leaves_no_record_and_the_next_run_cleans_up(tmp_path: Path) -> None:
    """kill -9 of ``materialize --tables --overwrite`` (a fresh process, Spark's in-memory catalog: the
    earlier set is leftover folders) while its tables are swapped in: the record table is gone, so
    the set shows as incomplete; the next command removes the staging folders, and the same command
    again places the whole set with its record."""
    import os
    import signal
    import subprocess
    import sys
    import time

    pytest.importorskip("pyspark")
    spec = write(tmp_path, tables())
    spec.write_text('[backend]\nengine = "spark"\nmaster = "local[1]"\n\n' + spec.read_text(encoding="utf-8"),
                    encoding="utf-8")
    env = {**os.environ, "DEID_SQL_SPARK_HOME": str(tmp_path / "spark-home"), "SPARK_LOCAL_IP": "127.0.0.1"}
    warehouse = tmp_path / "spark-home" / "warehouse"
    command = [sys.executable, "-c", "from deid_sql.cli.main import main; main()", "materialize", str(spec),
               "--policy", POLICY, "--tables", "deid_"]

    def cli(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*command, *extra], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)

    done = cli()
    assert done.returncode == 0, done.stderr
    assert (warehouse / "deid_release").is_dir()
    run = subprocess.Popen([*command, "--suppress-below", "2", "--overwrite"], cwd=tmp_path, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while run.poll() is None and time.monotonic() < deadline and (warehouse / "deid_release").exists():
        time.sleep(0.002)
    assert run.poll() is None, "the write ended before its swap could be cut short: nothing was tested"
    os.kill(run.pid, signal.SIGKILL)
    run.wait()
    assert not (warehouse / "deid_release").exists()  # a set without its record: incomplete
    assert list(warehouse.glob("deid_staging_*"))  # the killed run's staged tables
    refused = cli("--tables", "deid-")  # any command of a Spark spec sweeps them, before Spark starts
    assert refused.returncode == 2 and "not a name" in refused.stderr, refused.stderr
    assert not list(warehouse.glob("deid_staging_*"))
    done = cli("--suppress-below", "2", "--overwrite")
    assert done.returncode == 0, done.stderr
    record = json.loads(pq.read_table(warehouse / "deid_release").column("sidecar")[0].as_py())
    assert record["figures"]["suppressed"] == 4
    for t in record["release"]["tables"]:
        assert pq.read_table(warehouse / t["table"]).num_rows == t["rows"], t["table"]
    assert not list(warehouse.glob("deid_staging_*"))
