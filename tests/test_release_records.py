"""A record for everything that leaves, and a report that checks it (issue 26, part 4).

``compile --out FILE.sql`` keeps the SQL with its sidecar (through the same gate as every release);
``report --from-release`` refuses a release that no longer matches its record; a pseudonymized
column whose text is not the same on every engine (timestamps, floats) is refused in one line.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import duckdb
import pytest

POLICY = "age:cuts=18,30,45,65,90|zip:top"
CRITERIA = "max_record_risk = 1.0"  # the [release] body the released specs carry


def one_line_error(result, *words: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


@pytest.fixture
def spec(project) -> Path:
    return project.spec("released.toml", release=CRITERIA)


# -- compile --out -------------------------------------------------------------------------------

@pytest.mark.slow
def test_compile_out_writes_the_sql_with_its_record(run, project, spec) -> None:
    out = project.dir / "release.sql"
    result = run("compile", spec, "-p", POLICY, "--dialect", "postgres", "--table", "patients", "--out", out)
    sql = out.read_text(encoding="utf-8")
    assert sql.rstrip().endswith(";") and "patients" in sql
    record = json.loads((project.dir / "release.sql.release.json").read_text(encoding="utf-8"))
    assert record["release"]["kind"] == "sql" and record["release"]["dialect"] == "postgres"
    assert record["release"]["sha256"] and record["gate"]["verdict"] == "passed"
    assert record["policy"]["text"].startswith("age:cuts=18,30,45,65,90")
    assert [c["name"] for c in record["columns"]] == project.released_names
    assert record["figures"]["records"] == project.source.num_rows
    assert "release.sql.release.json" in result.stdout
    # the SQL printed to stdout is the same text
    printed = run("compile", spec, "-p", POLICY, "--dialect", "postgres", "--table", "patients").stdout
    assert printed.strip() == sql.strip()


def test_compile_out_is_refused_before_reading_when_it_exists(run, project, spec, scans) -> None:
    out = project.dir / "release.sql"
    out.write_text("-- mine\n", encoding="utf-8")
    result = run("compile", spec, "-p", POLICY, "--out", out, expect=2)
    one_line_error(result, "already exists", "--overwrite")
    assert scans == [] and out.read_text() == "-- mine\n"
    assert not (project.dir / "release.sql.release.json").exists()
    run("compile", spec, "-p", POLICY, "--out", out, "--overwrite")
    assert (project.dir / "release.sql.release.json").exists()


def test_compile_out_refused_by_the_gate_writes_neither_file(run, project) -> None:
    strict = project.spec("strict.toml", release="min_k = 1000")
    out = project.dir / "release.sql"
    result = run("compile", strict, "-p", POLICY, "--out", out, expect=2)
    one_line_error(result, "refused")
    assert not out.exists() and not (project.dir / "release.sql.release.json").exists()


def test_compile_to_stdout_says_that_no_record_was_written(run, spec) -> None:
    result = run("compile", spec, "-p", POLICY)
    assert "no record written" in result.stderr and "--out" in result.stderr
    assert "no record written" not in result.stdout


# -- report --from-release checks the release against its record ---------------------------------

@pytest.mark.slow
def test_report_from_release_refuses_a_file_changed_after_it_was_released(run, project, spec) -> None:
    release = project.dir / "release.parquet"
    run("materialize", spec, "-p", POLICY, "--out", release)
    sidecar = project.dir / "release.parquet.release.json"
    run("report", spec, "--from-release", sidecar, "--out", project.dir / "ok.html")  # unchanged: reported
    shutil.copyfile(project.source_parquet, release)  # the raw cohort in place of the release
    out = project.dir / "later.html"
    result = run("report", spec, "--from-release", sidecar, "--out", out, expect=2)
    one_line_error(result, "does not match its record", "sha256", "changed after it was released")
    assert not out.exists() and not out.with_suffix(".json").exists()


def test_report_from_release_checks_compiled_sql(run, project, spec) -> None:
    out = project.dir / "release.sql"
    run("compile", spec, "-p", POLICY, "--out", out)
    out.write_text("SELECT * FROM patients;\n", encoding="utf-8")
    result = run("report", spec, "--from-release", project.dir / "release.sql.release.json",
                 "--out", project.dir / "r.html", expect=2)
    one_line_error(result, "does not match its record")


@pytest.mark.slow
def test_a_table_release_records_its_row_hash_and_report_checks_it(run, project, spec) -> None:
    db = project.dir / "out.duckdb"
    run("materialize", spec, "-p", POLICY, "--out", db, "--table", "released")
    with duckdb.connect(str(db)) as con:
        text = con.execute("SELECT sidecar FROM released__release").fetchone()[0]
    record = json.loads(text)
    assert record["release"]["row_hash"].startswith(f"{project.source.num_rows}:")
    sidecar = project.dir / "released.release.json"
    sidecar.write_text(text, encoding="utf-8")
    run("report", spec, "--from-release", sidecar, "--out", project.dir / "ok.html")
    with duckdb.connect(str(db)) as con:  # one released value changed, same row count
        con.execute("UPDATE released SET diagnosis = 'X99' WHERE rowid = 0")
    out = project.dir / "later.html"
    result = run("report", spec, "--from-release", sidecar, "--out", out, expect=2)
    one_line_error(result, "does not match its record", "row hash", "changed after it was released")
    assert not out.exists()


# -- pseudonymizing: an allow-list of types whose text is the same on every engine ----------------

SECRET_ENV = "DEID_RECORDS_TEST_SECRET"


@pytest.mark.parametrize("sql_type", [
    "TIMESTAMP_NS", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ", "TIME",
    "INTERVAL", "FLOAT", "DOUBLE", "REAL", "DECIMAL(18,3)", "BLOB",
    "timestamp without time zone", "timestamp with time zone", "double precision", "numeric", "numeric(10,2)",
    "TIMESTAMP_NTZ", "TIMESTAMP_LTZ", "float", "OID 1186", "VARCHAR[]", "SOME_NEW_TYPE", None])
def test_types_outside_the_allow_list_are_refused(sql_type: str | None) -> None:
    from deid_sql.contract.pseudonym import type_problems

    problems = type_problems(["id"], {"id": sql_type})
    assert len(problems) == 1 and "column 'id'" in problems[0] and "drop" in problems[0]


@pytest.mark.parametrize("sql_type", ["BIGINT", "integer", "INT8", "VARCHAR", "varchar(20)", "text", "STRING",
                                      "character varying(8)", "bpchar", "UUID", "DATE", "BOOLEAN", "HUGEINT"])
def test_whole_numbers_text_uuid_and_dates_are_pseudonymized(sql_type: str) -> None:
    from deid_sql.contract.pseudonym import type_problems

    assert type_problems(["id"], {"id": sql_type}) == []


def test_a_timestamp_ns_column_is_refused_for_pseudonymizing(run, project, monkeypatch) -> None:
    monkeypatch.setenv(SECRET_ENV, "a4113077da41b0c81cc1dc59e7950313c9b6a13e8818f36f29085fa6ecffdaab")
    db = project.dir / "hospital.duckdb"
    with duckdb.connect(str(db)) as con:
        con.register("src", project.source)
        con.execute("CREATE TABLE patients AS SELECT * REPLACE (TIMESTAMP_NS '2020-01-01 00:00:00' "
                    "+ patient_id * INTERVAL 1 SECOND AS patient_id) FROM src")
        assert con.execute("SELECT typeof(patient_id) FROM patients LIMIT 1").fetchone()[0] == "TIMESTAMP_NS"
    columns = f'\n[columns]\npseudonymize = ["patient_id"]\nsecret_env = "{SECRET_ENV}"\nsensitive = ["diagnosis"]\n'
    spec = project.spec(source="hospital.duckdb", source_extra='table = "patients"', columns=columns,
                        release=CRITERIA)
    out = project.dir / "out.parquet"
    result = run("materialize", spec, "-p", POLICY, "--out", out, expect=2)
    one_line_error(result, "'patient_id'", "TIMESTAMP_NS", "drop")
    assert not out.exists()


# -- channel releases: a view guards itself, and the verdict is the gate's ----------------------------

def _append_rows(csv_path: Path, rows: list[list[str]]) -> None:
    with open(csv_path, "a", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)


@pytest.mark.slow
def test_a_channel_view_withholds_rows_of_channels_the_program_never_saw(run, tmp_path) -> None:
    from deid_sql.fixtures.channels import write_table1

    study = tmp_path / "study"
    spec = write_table1(study)
    db = tmp_path / "analysts.duckdb"
    run("channels", spec, "--view", "v", "--db", db)
    with duckdb.connect(str(db)) as con:
        before = sorted(con.execute("SELECT * FROM v").fetchall())
        all_channel = con.execute("SELECT count(*) FROM v WHERE output_channel = 'all'").fetchone()[0]
    with open(study / "table1.csv", newline="", encoding="utf-8") as f:
        grown_channel = {r["name"] for r in csv.DictReader(f) if (r["crp"], r["cholesterol"], r["bp"],
                                                                   r["glucose"]) == ("N", "N", "N", "N")}
    # a new input channel (L, L, H, H) with P(Diabetes) = 0.5 > u = 0.25, and four more subjects of
    # the known channel (N, N, N, N): neither was checked by the program
    new = [[f"New {i}", "06999", "F", "L", "L", "H", "H", "Diabetes" if i % 2 else "none"] for i in range(4)]
    grown = [[f"Grown {i}", "06998", "M", "N", "N", "N", "N", "Diabetes"] for i in range(4)]
    _append_rows(study / "table1.csv", new + grown)
    with duckdb.connect(str(db)) as con:
        after = con.execute("SELECT * FROM v").fetchall()
    assert not any(r[0].startswith(("New ", "Grown ")) for r in after), after
    # the grown channel is withheld whole; every other subject is released as before
    assert all_channel == 0
    assert sorted(after) == [r for r in before if r[0] not in grown_channel] and grown_channel


@pytest.mark.slow
def test_a_channel_release_gets_the_gates_verdict_and_a_failed_check_is_refused(tmp_path, monkeypatch) -> None:
    from deid_sql.channels import write as channel_write
    from deid_sql.channels.job import solve
    from deid_sql.channels.release import ReleaseCheck
    from deid_sql.errors import ReleaseRefused
    from deid_sql.fixtures.channels import write_table1
    from deid_sql.release.gate import Verdict

    spec = write_table1(tmp_path / "study")
    out = tmp_path / "release.parquet"
    with solve(spec) as job:
        channel_write.write_release(job, out=out)
        record = json.loads((tmp_path / "release.parquet.release.json").read_text(encoding="utf-8"))
        assert record["gate"]["verdict"] == "passed"
        assert [c["criterion"] for c in record["gate"]["checks"]] == ["channels.u", "channels.b"]
        assert isinstance(channel_write.channel_verdict(job.check()), Verdict)
        failing = ReleaseCheck(rows=15, how="test", worst_u=0.25, worst_b=None, realized_excess=0.25)
        monkeypatch.setattr(type(job), "check", lambda self: failing)
        refused_out = tmp_path / "refused.parquet"
        with pytest.raises(ReleaseRefused, match="channels.u|P\\(v"):
            channel_write.write_release(job, out=refused_out)
        assert not refused_out.exists() and not (tmp_path / "refused.parquet.release.json").exists()
