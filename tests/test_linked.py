"""Linked tables released as one set (issue 30): one pseudonym per person in every table, the
same date offset everywhere, suppressed persons gone from every table, orphans refused or
dropped, all tables or none written, one gate verdict and one sidecar.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from deid_sql import Problem
from deid_sql.cli import cli
from deid_sql.contract.pseudonym import pseudonym
from deid_sql.contract.shift import offset
from deid_sql.release.plan import plan_of
from deid_sql.sets.release import materialize_set
from tests.engines import ENGINES, Engine, engine_fixture, engine_params, sorted_rows

KEY = "3a5445d1cbe32cdd4684dc7d84e5ded1179bfa10f0e7980fb9b061d7d23dae7b"  # a key that is a secret (contract/secret.py)
D = 20
SPEC = '''[source]
path = "patients.parquet"
name = "patients"
[person]
column = "patient_id"
shift_days = 20
[[qi]]
name = "age"
kind = "integer"
min = 0
max = 99
[[qi]]
name = "sex"
kind = "category"
values = ["F", "M"]
[columns]
pseudonymize = ["patient_id"]
shift = ["born"]
secret_env = "DEID_LINK_KEY"
[release]
max_record_risk = 1.0

[[table]]
name = "encounters"
path = "encounters.parquet"
keep = ["kind"]
drop = ["enc_id"]
shift = ["admitted", "discharged"]
{orphans}
[[table]]
name = "diagnoses"
path = "diagnoses.parquet"
sensitive = ["code"]
shift = ["noted"]
'''


def tables(persons: int = 60, ghosts: int = 0) -> dict[str, list[dict[str, Any]]]:
    """Patients (ages 20-59, four of them alone in their decade: ages 65, 75, 85, 95), their encounters
    (1-3 each, a discharge after each admission) and diagnoses; ``ghosts`` encounters of unknown
    patients."""
    ages = [20 + p % 40 for p in range(persons - 4)] + [65, 75, 85, 95]
    patients = [{"patient_id": f"P{p:03d}", "age": a, "sex": "FM"[p % 2],
                 "born": dt.date(1960, 1, 1) + dt.timedelta(days=p * 97)} for p, a in enumerate(ages)]
    encounters = [{"patient_id": f"P{p:03d}", "enc_id": p * 10 + v, "kind": "inpatient" if v else "visit",
                   "admitted": dt.datetime(2021, 1, 1, 9) + dt.timedelta(days=p + v * 9),
                   "discharged": dt.datetime(2021, 1, 3, 15) + dt.timedelta(days=p + v * 9)}
                  for p in range(persons) for v in range(1 + p % 3)]
    encounters += [{"patient_id": f"X{g}", "enc_id": 90000 + g, "kind": "visit",
                    "admitted": dt.datetime(2021, 6, 1, 9), "discharged": dt.datetime(2021, 6, 2, 9)}
                   for g in range(ghosts)]
    diagnoses = [{"patient_id": f"P{p:03d}", "code": f"C{p % 7}", "noted": dt.date(2021, 2, 1) + dt.timedelta(days=p)}
                 for p in range(persons) for _ in range(1 + p % 2)]
    return {"patients": patients, "encounters": encounters, "diagnoses": diagnoses}


def write(folder: Path, data: dict[str, list[dict[str, Any]]], orphans: str = "") -> Path:
    for name, rows in data.items():
        pq.write_table(pa.Table.from_pylist(rows), folder / f"{name}.parquet")
    spec = folder / "set.toml"
    spec.write_text(SPEC.format(orphans=orphans), encoding="utf-8")
    return spec


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEID_LINK_KEY", KEY)


def read(folder: Path) -> dict[str, list[dict[str, Any]]]:
    return {name: pq.read_table(folder / f"{name}.parquet").to_pylist()
            for name in ("patients", "encounters", "diagnoses")}


def test_a_set_joins_by_one_pseudonym_and_shifts_every_date_of_a_person_alike(tmp_path: Path) -> None:
    data = tables()
    spec = write(tmp_path, data)
    out = tmp_path / "release"
    result = CliRunner().invoke(cli, ["materialize", str(spec), "--policy", "age:every=20", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "wrote 3 tables" in result.output and "encounters: " in result.output
    got = read(out)
    key = KEY.encode()
    name = {pseudonym(key, p["patient_id"]): p["patient_id"] for p in data["patients"]}
    assert {r["patient_id"] for r in got["patients"]} == set(name)  # the person source's pseudonyms …
    assert {r["patient_id"] for r in got["encounters"]} <= set(name)  # … are the linked tables' too
    raw_enc = collections.defaultdict(list)
    for r in data["encounters"]:
        raw_enc[r["patient_id"]].append(r)
    for r in got["encounters"]:
        person = name[r["patient_id"]]
        days = offset(key, person, D)
        assert days is not None
        originals = {(e["admitted"] + dt.timedelta(days=days), e["discharged"] + dt.timedelta(days=days))
                     for e in raw_enc[person]}
        assert (r["admitted"], r["discharged"]) in originals  # every interval kept: the same offset on both
        assert "enc_id" not in r and r["kind"] in ("visit", "inpatient")
    for r in got["diagnoses"]:
        person = name[r["patient_id"]]
        days = offset(key, person, D)
        assert days is not None
        assert r["noted"] - dt.timedelta(days=days) in {d["noted"] for d in data["diagnoses"]
                                                         if d["patient_id"] == person}
    for r in got["patients"]:  # the person source's own date moved by the same offset
        person = name[r["patient_id"]]
        days = offset(key, person, D)
        assert days is not None
        assert r["born"] - dt.timedelta(days=days) == next(p["born"] for p in data["patients"]
                                                            if p["patient_id"] == person)
    sidecar = json.loads((out / "release.json").read_text(encoding="utf-8"))
    listed = {t["name"]: t for t in sidecar["release"]["tables"]}
    assert set(listed) == {"patients", "encounters", "diagnoses"}
    assert listed["encounters"]["rows"] == len(data["encounters"]) and listed["encounters"]["orphans"] == 0
    assert sidecar["figures"]["unit"] == "persons" and sidecar["figures"]["records"] == 60
    assert sidecar["gate"]["verdict"] == "passed"


def test_suppressed_persons_leave_every_table(tmp_path: Path) -> None:
    data = tables()
    spec = write(tmp_path, data)
    out = tmp_path / "release"
    with Problem.from_spec(spec, cache=False) as problem:
        written = materialize_set(problem, plan_of(problem, "age:every=10", suppression=2), out)
    got = read(out)
    alone = {p["patient_id"] for p in data["patients"] if p["age"] >= 60}  # four persons, one per decade band
    key = KEY.encode()
    gone = {pseudonym(key, p) for p in alone}
    flagged = [r["patient_id"] for r in got["patients"] if r["deid_suppressed"]]
    assert flagged == [None] * len(gone)  # masked and flagged in the person source, with no pseudonym
    assert not gone & {r["patient_id"] for r in got["patients"]}
    assert not gone & {r["patient_id"] for r in got["encounters"]}  # and removed from every linked table
    assert not gone & {r["patient_id"] for r in got["diagnoses"]}
    removed = sum(1 for r in data["encounters"] if r["patient_id"] in alone)
    assert len(got["encounters"]) == len(data["encounters"]) - removed
    sidecar = json.loads((out / "release.json").read_text(encoding="utf-8"))
    enc = next(t for t in sidecar["release"]["tables"] if t["name"] == "encounters")
    assert enc["removed_with_suppressed_persons"] == removed
    assert written.figures.suppressed == 4


def test_orphans_are_refused_or_dropped_and_counted(tmp_path: Path) -> None:
    spec = write(tmp_path, tables(ghosts=3))
    out = tmp_path / "release"
    result = CliRunner().invoke(cli, ["materialize", str(spec), "--policy", "age:every=20", "--out", str(out)])
    assert result.exit_code == 2 and "3 row(s) whose person is not in the person source" in result.output
    assert 'orphans = "drop"' in result.output and not out.exists()
    spec = write(tmp_path, tables(ghosts=3), orphans='orphans = "drop"')
    result = CliRunner().invoke(cli, ["materialize", str(spec), "--policy", "age:every=20", "--out", str(out)])
    assert result.exit_code == 0, result.output
    enc = next(t for t in json.loads((out / "release.json").read_text(encoding="utf-8"))["release"]["tables"]
               if t["name"] == "encounters")
    assert enc["orphans"] == 3 and enc["orphans_rule"] == "drop"
    assert enc["rows"] == enc["source_rows"] - 3


def test_a_refused_set_writes_nothing_and_every_single_table_path_is_refused(tmp_path: Path) -> None:
    spec = write(tmp_path, tables())
    spec.write_text(spec.read_text(encoding="utf-8").replace("max_record_risk = 1.0", "min_k = 50"), encoding="utf-8")
    out = tmp_path / "release"
    result = CliRunner().invoke(cli, ["materialize", str(spec), "--policy", "age:every=20", "--out", str(out)])
    assert result.exit_code == 2 and "release refused by the gate" in result.output
    assert not out.exists() and not (tmp_path / ".deid-sql-tmp").exists()
    spec.write_text(spec.read_text(encoding="utf-8").replace("min_k = 50", "max_record_risk = 1.0"), encoding="utf-8")
    for args in (["materialize", str(spec), "--policy", "age:top", "--out", str(tmp_path / "one.parquet")],
                 ["view", str(spec), "--policy", "age:top", "--db", str(tmp_path / "v.duckdb"), "--view", "v"],
                 ["compile", str(spec), "--policy", "age:top"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, (args, result.output)
        assert "released together" in result.output or "--out FOLDER" in result.output, result.output
    assert not (tmp_path / "one.parquet").exists() and not (tmp_path / "v.duckdb").exists()


def test_overwrite_replaces_only_an_earlier_set(tmp_path: Path) -> None:
    spec = write(tmp_path, tables())
    out = tmp_path / "release"
    args = ["materialize", str(spec), "--policy", "age:every=20", "--out", str(out)]
    assert CliRunner().invoke(cli, args).exit_code == 0
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "already exists; pass --overwrite" in result.output
    assert CliRunner().invoke(cli, [*args, "--overwrite"]).exit_code == 0
    other = tmp_path / "notes"
    other.mkdir()
    (other / "mine.txt").write_text("keep me", encoding="utf-8")
    result = CliRunner().invoke(cli, ["materialize", str(spec), "--policy", "age:every=20", "--out", str(other),
                                      "--overwrite"])
    assert result.exit_code == 2 and "not a release set of deid-sql" in result.output
    assert (other / "mine.txt").read_text(encoding="utf-8") == "keep me"
    result = CliRunner().invoke(cli, ["materialize", str(spec), "--policy", "age:every=20", "--out", str(tmp_path),
                                      "--overwrite"])
    assert result.exit_code == 2 and "holds an input of the spec" in result.output


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda t: t.replace('name = "diagnoses"', 'name = "encounters"'), "are both released as 'encounters'"),
    (lambda t: t.replace('name = "diagnoses"', 'name = "patients"'), "are both released as 'patients'"),
    (lambda t: t.replace('path = "diagnoses.parquet"', 'path = "patients.parquet"'), "is the person source itself"),
    (lambda t: t.replace('sensitive = ["code"]', 'sensitive = ["code", "age"]'), "named like a QI column"),
    (lambda t: t.replace('shift_days = 20', 'shift_days = -3'), "shift_days = -3 must be a whole number"),
    (lambda t: t.replace('name = "diagnoses"', 'name = "Diagnoses 2"'), "must be a release name"),
    (lambda t: t.replace('keep = ["kind"]', 'keep = ["kind", "patient_id"]'), "the person key 'patient_id' is listed"),
    (lambda t: t.replace('orphans = "x"', "").replace('keep = ["kind"]', 'keep = ["kind"]\norphans = "keep"'),
     'orphans = \'keep\' must be "refuse"'),
    (lambda t: t.replace('[columns]\npseudonymize = ["patient_id"]', '[columns]\nkeep = ["patient_id"]'),
     "must be listed under [columns] pseudonymize"),
])
def test_bad_sets_are_one_line_each(tmp_path: Path, edit: Any, expected: str) -> None:
    spec = write(tmp_path, tables(6))
    spec.write_text(edit(spec.read_text(encoding="utf-8")), encoding="utf-8")
    result = CliRunner().invoke(cli, ["validate", str(spec)])
    assert result.exit_code == 2, result.output
    assert expected in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda t: t.replace('path = "diagnoses.parquet"', 'path = "diagnoses.parquet"\nperson = "pid"'),
     "has no person key column 'pid'"),
    (lambda t: t.replace('shift = ["noted"]', 'shift = ["code"]').replace('sensitive = ["code"]',
                                                                          'sensitive = ["noted"]'),
     "column 'code' is VARCHAR, not a date"),
    (lambda t: t.replace('sensitive = ["code"]\n', ''), "column 'code' has no role"),
])
def test_bad_linked_data_is_one_line_with_nothing_written(tmp_path: Path, edit: Any, expected: str) -> None:
    spec = write(tmp_path, tables(6))
    spec.write_text(edit(spec.read_text(encoding="utf-8")), encoding="utf-8")
    out = tmp_path / "release"
    result = CliRunner().invoke(cli, ["materialize", str(spec), "--policy", "age:top|sex:top", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert expected in result.output and not out.exists()


# -- every engine -----------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=engine_params(*ENGINES))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


def test_every_engine_writes_the_same_set(engine: Engine, tmp_path: Path) -> None:
    """The three tables in the engine: the same pseudonyms, shifted dates and suppressed persons
    (removed from every table) as the DuckDB files give."""
    data = tables()
    local = write(tmp_path, data)
    text = local.read_text(encoding="utf-8")
    for name, rows in data.items():
        body = engine.load(f"set_{name}", pa.Table.from_pylist(rows))
        text = text.replace(f'path = "{name}.parquet"\n', body + "\n")
    spec = engine.folder / "set.toml"
    spec.write_text(engine.header() + "\n" + text, encoding="utf-8")
    outs = []
    for path, out in ((local, tmp_path / "want"), (spec, tmp_path / "got")):
        with Problem.from_spec(path, cache=False) as problem:
            materialize_set(problem, plan_of(problem, "age:every=10", suppression=2), out)
        outs.append(out)
    for name in ("patients", "encounters", "diagnoses"):
        got, want = (utc_rows(pq.read_table(o / f"{name}.parquet")) for o in outs)
        assert got == want, name
    assert len(pq.read_table(outs[1] / "encounters.parquet")) < len(data["encounters"])  # suppressed persons left


def utc_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """Rows with timestamps as UTC wall time (Spark keeps a timestamp loaded from Arrow as an instant)."""
    return sorted_rows(pa.Table.from_pylist([
        {k: v.astimezone(dt.UTC).replace(tzinfo=None) if isinstance(v, dt.datetime) and v.tzinfo else v
         for k, v in row.items()} for row in table.to_pylist()]))


# -- a killed write ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_killed_set_write_leaves_no_table_of_the_set_after_the_next_run(tmp_path: Path) -> None:
    """kill -9 while the set's files are being written: no table of the set at the target, and the
    next deid-sql command (run anywhere) removes the staged folder."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import duckdb

    from deid_sql.storage.atomic import TMP_FOLDER
    from tests.test_interrupted_writes import RUN_CLI

    folder = tmp_path / "study"
    folder.mkdir()
    write(folder, {"patients": tables()["patients"], "diagnoses": tables()["diagnoses"]})
    con = duckdb.connect()  # two million encounters of the 60 patients, so the write lasts
    con.execute(f"""COPY (SELECT 'P' || lpad((i % 60)::VARCHAR, 3, '0') AS patient_id, i AS enc_id,
                                 md5(i::VARCHAR) AS kind,
                                 TIMESTAMP '2021-01-01 09:00:00' + to_hours(i % 5000) AS admitted,
                                 TIMESTAMP '2021-01-02 09:00:00' + to_hours(i % 5000) AS discharged
                          FROM range(2000000) t(i)) TO '{folder / "encounters.parquet"}' (FORMAT parquet)""")
    con.close()
    cache = tmp_path / "cache"
    env = {**os.environ, "DEID_SQL_CACHE_DIR": str(cache), "DEID_SQL_NO_CACHE": "1", "DEID_LINK_KEY": KEY}
    out = folder / "release"
    proc = subprocess.Popen([sys.executable, "-c", RUN_CLI, "materialize", str(folder / "set.toml"), "--policy",
                             "age:every=20", "--out", str(out)], cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    hidden = folder / TMP_FOLDER
    deadline = time.monotonic() + 300
    while True:  # the person source is written and a linked table is under way
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the write never started"
        staged = [p for p in hidden.iterdir() if p.is_dir()] if hidden.exists() else []
        if staged and any(f.name.startswith("encounters") and f.stat().st_size > 100_000
                          for f in staged[0].iterdir()):
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert not out.exists()  # no table of the set is visible
    assert [p for p in hidden.iterdir() if p.is_dir()]  # the staged folder is left behind …
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run([sys.executable, "-c", RUN_CLI, "--version"], cwd=elsewhere, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "removed" in done.stderr and "leftover temporary" in done.stderr
    assert not hidden.exists() and not out.exists()  # … and the next run removes it
    result = subprocess.run([sys.executable, "-c", RUN_CLI, "materialize", str(folder / "set.toml"), "--policy",
                             "age:every=20", "--out", str(out)], cwd=folder, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["diagnoses.parquet", "encounters.parquet", "patients.parquet",
                                                     "release.json"]
