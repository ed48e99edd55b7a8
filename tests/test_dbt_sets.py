"""``deid-sql dbt`` on a set of linked tables: one model per table, no key in any file, and a real
``dbt run`` / ``dbt test`` (dbt-duckdb with the key's plugin) giving ``materialize_set``'s rows.

The end-to-end test runs dbt in a subprocess and is skipped when dbt-duckdb is not installed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from deid_sql import Problem
from deid_sql.cli import cli
from deid_sql.contract.pseudonym import pads
from deid_sql.contract.shift import shift_key
from deid_sql.dbt.sets import write_dbt_set
from deid_sql.release.plan import plan_of
from deid_sql.sets.release import materialize_set
from tests.test_dbt import dbt, results
from tests.test_linked import KEY, SPEC, tables

NAMES = ("patients", "encounters", "diagnoses")
MODELS = tuple(f"deid_{n}" for n in NAMES)


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEID_LINK_KEY", KEY)


def warehouse(folder: Path) -> Path:
    """tests/test_linked.py's three tables in ``warehouse.duckdb``, and a spec over them."""
    con = duckdb.connect(str(folder / "warehouse.duckdb"))
    try:
        for name, rows in tables().items():
            con.register("rows", pa.Table.from_pylist(rows))
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM rows")
            con.unregister("rows")
    finally:
        con.close()
    text = SPEC.format(orphans="")
    for name in NAMES:
        text = text.replace(f'path = "{name}.parquet"', f'path = "warehouse.duckdb"\ntable = "{name}"')
    spec = folder / "set.toml"
    spec.write_text(text, encoding="utf-8")
    return spec


def secrets() -> list[str]:
    """The key and every form of its pads (the pseudonym's and the shift key's), as text."""
    key = KEY.encode()
    out = [KEY]
    for k in (key, shift_key(key)):
        for pad in pads(k):
            out += [pad.hex(), pad.hex().upper()]
    return out


def files_text(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_bytes().decode("utf-8", "replace")
            for p in folder.rglob("*") if p.is_file() and p.suffix != ".duckdb"}


def rows_of(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted((tuple(sorted(r.items())) for r in table.to_pylist()), key=repr)


def test_a_bad_set_request_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    spec = warehouse(tmp_path)
    out = tmp_path / "wh"
    for extra, fragment in ((["--dialect", "postgres"], "would have to hold the key"),
                            (["--model", "x"], "one model per table"),
                            (["--prefix", ""], "would replace the source table patients")):
        result = CliRunner().invoke(cli, ["dbt", str(spec), "--policy", "age:every=20", "--project", str(out),
                                          *extra])
        assert result.exit_code == 2, result.output
        assert fragment in result.output and len(result.output.strip().splitlines()) == 1, result.output
        assert not out.exists()


def test_dbt_of_a_set_with_report_lists_every_model_with_its_rows(tmp_path: Path) -> None:
    """``dbt SET --report``: the report of the set (its gate is the set's, not a single table's), with
    every model listed and the rows its sidecar records."""
    spec = warehouse(tmp_path)
    out, page = tmp_path / "wh", tmp_path / "set-report.html"
    result = CliRunner().invoke(cli, ["dbt", str(spec), "--policy", "age:every=20", "--project", str(out),
                                      "--report", str(page)])
    assert result.exit_code == 0, result.output
    sidecar = json.loads((out / "models" / "deid_patients.release.json").read_text(encoding="utf-8"))
    twin = json.loads(page.with_suffix(".json").read_text(encoding="utf-8"))
    listed = twin["data"]["set"]["tables"]
    assert [(t["written_to"], t["rows"]) for t in listed] == [(m["model"], m["rows"]) for m in
                                                             sidecar["release"]["models"]]
    assert [t["removed_with_suppressed_persons"] for t in listed[1:]] == [
        m["removed_with_suppressed_persons"] for m in sidecar["release"]["models"][1:]]
    assert twin["risk"]["figures"]["records"] == sidecar["figures"]["records"]


@pytest.mark.slow
def test_dbt_run_of_a_set_gives_materialize_sets_rows_with_no_key_in_any_file(tmp_path: Path) -> None:
    pytest.importorskip("dbt")
    pytest.importorskip("dbt.adapters.duckdb")
    spec = warehouse(tmp_path)
    project, released = tmp_path / "wh", tmp_path / "released"
    with Problem.from_spec(spec, cache=False) as problem:
        plan = plan_of(problem, "age:every=10", suppression=2)  # four persons alone in their decade: suppressed
        written = write_dbt_set(problem, plan, project)
        materialize_set(problem, plan, released)
    assert written.models == list(MODELS) and written.profile_written
    sidecar = json.loads((project / "models" / "deid_patients.release.json").read_text(encoding="utf-8"))
    assert [m["model"] for m in sidecar["release"]["models"]] == list(MODELS)
    assert sidecar["gate"]["verdict"] == "passed" and sidecar["figures"]["unit"] == "persons"
    assert "{{ ref('deid_patients') }}" in (project / "models" / "deid_encounters.sql").read_text(encoding="utf-8")

    assert os.environ["DEID_LINK_KEY"] == KEY  # the plugin reads it when dbt runs (profiles.yml in the project)
    built = dbt(project, project, "run")
    assert built.returncode == 0, built.stdout + built.stderr
    tested = dbt(project, project, "test")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert set(results(project).values()) == {"pass"}

    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True)
    try:
        for name, model in zip(NAMES, MODELS):
            got = con.sql(f"SELECT * FROM {model}").to_arrow_table()
            want = pq.read_table(released / f"{name}.parquet")
            assert got.column_names == want.column_names, name
            assert rows_of(got) == rows_of(want), name
        # the four suppressed persons: flagged, with no pseudonym; their linked rows left out (as materialize's)
        query = "SELECT count(*), count(patient_id) FROM deid_patients WHERE deid_suppressed"
        assert con.execute(query).fetchall() == [(4, 0)]
        for model in MODELS[1:]:
            assert con.execute(f"SELECT count(*) FROM {model} WHERE patient_id IS NULL").fetchall() == [(0,)]
    finally:
        con.close()
    for rel, text in files_text(project).items():  # every file written, and dbt's target/ and logs
        for secret_text in secrets():
            assert secret_text not in text, rel


def test_the_ledger_test_fails_when_the_data_changed_past_the_entry(tmp_path: Path) -> None:
    """Generating the set records it in the recipient's ledger; the person model's ledger test passes
    on the data judged and fails, naming the label tuple, once a person moves to another decade."""
    pytest.importorskip("dbt")
    pytest.importorskip("dbt.adapters.duckdb")
    spec = warehouse(tmp_path)
    project = tmp_path / "wh"
    with Problem.from_spec(spec, cache=False) as problem:
        write_dbt_set(problem, plan_of(problem, "age:every=10", suppression=2), project)
    sidecar = json.loads((project / "models" / "deid_patients.release.json").read_text(encoding="utf-8"))
    assert sidecar["ledger"]["entry"] == 1
    test = project / "macros" / "deid_sql_ledger__deid_patients.sql"
    assert "entry 1 of the ledger" in test.read_text(encoding="utf-8")
    assert "deid_sql_ledger__deid_patients" in (project / "models" / "deid_patients.yml").read_text(encoding="utf-8")
    assert dbt(project, project, "run").returncode == 0
    tested = dbt(project, project, "test")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert results(project)["deid_sql_ledger__deid_patients_deid_patients_"] == "pass"

    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    try:  # P000 (age 20) is now 31: one person fewer in the twenties, one more in the thirties
        con.execute("UPDATE patients SET age = 31 WHERE patient_id = 'P000'")
    finally:
        con.close()
    assert dbt(project, project, "run").returncode == 0
    tested = dbt(project, project, "test")
    assert tested.returncode != 0
    failed = {name for name, status in results(project).items() if status != "pass"}
    assert failed == {"deid_sql_ledger__deid_patients_deid_patients_"}, tested.stdout
    assert "2 results" in tested.stdout or "Got 2 results" in tested.stdout, tested.stdout


def test_the_plugin_refuses_a_missing_or_short_key(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("dbt.adapters.duckdb")
    from deid_sql.backends.dbt_duckdb import register, secret_of

    monkeypatch.delenv("DEID_LINK_KEY")
    with pytest.raises(Exception, match="DEID_LINK_KEY"):
        secret_of("DEID_LINK_KEY")
    monkeypatch.setenv("DEID_LINK_KEY", "short")
    with pytest.raises(Exception, match="at least 32"):
        secret_of("DEID_LINK_KEY")
    with pytest.raises(ValueError, match="secret_env"):
        secret_of(None)
    con = duckdb.connect()
    register(con, KEY.encode())
    assert con.execute("SELECT deid_pseudonym(NULL), deid_shift_offset(NULL, 3)").fetchone() == (None, None)
