"""Policy files of a set of linked tables: ``policy save`` on a spec with ``[[table]]`` keeps the set,
and ``apply``/``check`` take a batch of the person source and one of every linked table.

New batches applied under a saved policy give the files ``materialize_set`` gives on the same data
(the same pseudonyms, shifted dates and suppressed persons removed from every table); a missing or
unknown linked batch is one line; orphans are refused or dropped per the saved rule; a changed
linked-table declaration fails the spec hash; a drifted person batch writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deid_sql import Problem
from deid_sql.compiler.suppression import Suppression
from deid_sql.policyfile import PolicyFile, apply_set
from deid_sql.policyfile.save import save_policy_file
from deid_sql.release.plan import plan_of
from deid_sql.sets.release import materialize_set
from tests.engines import Engine, engine_fixture, engine_params

from .test_linked import KEY, tables, utc_rows, write
from .test_policy_file import one_error_line

POLICY = "age:every=10"
NAMES = ("patients", "encounters", "diagnoses")
# the four persons alone in their decade (tables(): ages 65, 75, 85, 95; sexes F, M, F, M)
ALONE = [("60-69", "F"), ("70-79", "M"), ("80-89", "F"), ("90-99", "M")]


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEID_LINK_KEY", KEY)


def batches(folder: Path, data: dict[str, list[dict[str, Any]]], orphans: str = "") -> Path:
    """``data`` written as a set (its spec too, for ``materialize_set`` on the same data)."""
    folder.mkdir(parents=True, exist_ok=True)
    return write(folder, data, orphans)


def linked(folder: Path) -> list[str]:
    return ["--linked", f"encounters={folder / 'encounters.parquet'}",
            "--linked", f"diagnoses={folder / 'diagnoses.parquet'}"]


def saved(tmp_path: Path, orphans: str = "", suppress: bool = False) -> Path:
    """The policy saved on the set of ``tables()`` (optionally suppressing the persons alone in their group)."""
    spec = batches(tmp_path / "saved", tables(), orphans)
    policy = tmp_path / "policy.json"
    with Problem.from_spec(spec, cache=False) as problem:
        plan = plan_of(problem, POLICY)
        if suppress:
            plan = replace(plan, suppression=Suppression.of_groups(ALONE, "k = 2"))
        save_policy_file(problem, plan, policy)
    return policy


def rows(folder: Path, name: str) -> list[tuple[Any, ...]]:
    return utc_rows(pq.read_table(folder / f"{name}.parquet"))


def sidecar(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "release.json").read_text(encoding="utf-8"))


def test_apply_gives_the_files_materialize_set_gives_on_the_same_data(tmp_path: Path, run) -> None:
    policy = saved(tmp_path, suppress=True)
    data = tables(72)  # new patients (and their encounters, diagnoses): the four alone again among them
    spec = batches(tmp_path / "june", data)
    got, want = tmp_path / "got", tmp_path / "want"
    result = run("apply", policy, "--source", tmp_path / "june" / "patients.parquet", *linked(tmp_path / "june"),
                 "--out", got, "--accept-drift", "a larger clinic")
    assert "wrote 3 tables" in result.stdout and "row(s) of suppressed persons removed" in result.stdout
    with Problem.from_spec(spec, cache=False) as problem:
        plan = replace(plan_of(problem, POLICY), suppression=Suppression.of_groups(ALONE, "k = 2"))
        materialize_set(problem, plan, want)
    for name in NAMES:  # the same pseudonyms, shifted dates and suppressed persons, table by table
        assert rows(got, name) == rows(want, name), name
    assert sorted(p.name for p in got.iterdir()) == sorted(p.name for p in want.iterdir())
    mine, theirs = sidecar(got), sidecar(want)
    assert mine["figures"] == theirs["figures"] and mine["figures"]["suppressed"] == 4
    assert mine["figures"]["unit"] == "persons" and mine["figures"]["records"] == 72
    for a, b in zip(mine["release"]["tables"], theirs["release"]["tables"]):
        keys = ("name", "role", "file", "rows", "sha256", "columns", "orphans", "removed_with_suppressed_persons")
        assert {k: a.get(k) for k in keys} == {k: b.get(k) for k in keys}
    enc = next(t for t in mine["release"]["tables"] if t["name"] == "encounters")
    assert enc["removed_with_suppressed_persons"] > 0 and enc["source"].endswith("june/encounters.parquet")
    assert mine["drift"]["accepted_drift"] == "a larger clinic" and "new" in mine["drift"]
    assert mine["gate"]["verdict"] == "passed"


def test_the_set_is_saved_hashed_and_round_trips(tmp_path: Path, run) -> None:
    policy = saved(tmp_path)
    pf = PolicyFile.read(policy)
    assert pf.linked is not None and pf.linked.source_name == "patients" and pf.linked.shift_days == 20
    enc = pf.linked.table("encounters")
    assert enc is not None and enc.person == "patient_id" and enc.orphans == "refuse"
    assert dict(enc.roles)["shift"] == ("admitted", "discharged") and dict(enc.roles)["drop"] == ("enc_id",)
    assert dict(enc.columns) == {"patient_id": "text", "enc_id": "number", "kind": "text", "admitted": "timestamp",
                                 "discharged": "timestamp"}
    assert enc.source == "saved/encounters.parquet"
    again = tmp_path / "again.json"
    again.write_text(pf.to_json(tmp_path), encoding="utf-8")
    assert PolicyFile.read(again).linked == pf.linked and PolicyFile.read(again).spec_sha256 == pf.spec_sha256
    edited = tmp_path / "edited.json"
    edited.write_text(policy.read_text(encoding="utf-8").replace('"orphans": "refuse"', '"orphans": "drop"', 1),
                      encoding="utf-8")
    line = one_error_line(run("check", edited, "--source", tmp_path / "saved" / "patients.parquet",
                              *linked(tmp_path / "saved"), expect=2))
    assert "do not match its spec hash (edited by hand?)" in line


def test_a_missing_unknown_or_malformed_linked_batch_is_one_line(tmp_path: Path, run) -> None:
    policy = saved(tmp_path)
    june = tmp_path / "june"
    batches(june, tables(60))
    person = ["--source", june / "patients.parquet"]
    out = tmp_path / "out"
    cases = [
        (["--linked", f"encounters={june / 'encounters.parquet'}"], "no batch for the linked table(s) diagnoses"),
        ([*linked(june), "--linked", "labs=labs.parquet"], "'labs' is not a linked table of the set"),
        ([*linked(june), "--linked", f"encounters={june / 'diagnoses.parquet'}"], "is given twice"),
        (["--linked", "encounters"], "must be NAME=FILE"),
        (["--linked", f"encounters={june / 'encounters.parquet'}", "--linked", f"diagnoses={june / 'x.parquet'}"],
         "x.parquet does not exist"),
        ([], "was saved for a set of linked tables (encounters, diagnoses): give each its batch with --linked"),
    ]
    for extra, expected in cases:
        for command in (["apply", policy, *person, *extra, "--out", out], ["check", policy, *person, *extra]):
            line = one_error_line(run(*command, expect=2))
            assert expected in line, (command, line)
    line = one_error_line(run("apply", policy, *person, *linked(june), "--out", tmp_path / "set.parquet", expect=2))
    assert "names a file" in line
    line = one_error_line(run("apply", policy, *person, *linked(june), "--view", "v", "--db", tmp_path / "v.duckdb",
                              expect=2))
    assert "into a folder: give --out FOLDER" in line
    line = one_error_line(run("apply", policy, *person, *linked(june), "--out", june, "--overwrite", expect=2))
    assert "holds an input" in line
    # a linked batch with another schema: the columns saved for its table
    pq.write_table(pa.Table.from_pylist([dict(r, ward="A") for r in tables(60)["diagnoses"]]),
                   june / "diagnoses.parquet")
    line = one_error_line(run("apply", policy, *person, *linked(june), "--out", out, expect=2))
    assert "linked batch 'diagnoses'" in line and "extra column 'ward'" in line
    assert not out.exists() and not (tmp_path / "set.parquet").exists() and not (tmp_path / "v.duckdb").exists()


def test_a_single_table_policy_takes_no_linked_batch(tmp_path: Path, run) -> None:
    spec = batches(tmp_path / "one", tables(40))
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text[:text.index("[[table]]")], encoding="utf-8")
    policy = tmp_path / "one.json"
    run("policy", "save", spec, "-p", POLICY, "--out", policy)
    assert "set" not in json.loads(policy.read_text(encoding="utf-8"))
    line = one_error_line(run("apply", policy, "--source", tmp_path / "one" / "patients.parquet",
                              *linked(tmp_path / "one"), "--out", tmp_path / "out", expect=2))
    assert "was saved for one table" in line


def test_orphans_are_refused_or_dropped_per_the_saved_rule(tmp_path: Path, run) -> None:
    june = tmp_path / "june"
    batches(june, tables(60, ghosts=3))
    person = ["--source", june / "patients.parquet"]
    refusing = saved(tmp_path / "refuse")
    for command in (["apply", refusing, *person, *linked(june), "--out", tmp_path / "out"],
                    ["check", refusing, *person, *linked(june)]):
        line = one_error_line(run(*command, expect=2))
        assert "has 3 row(s) whose person is not in the person source" in line
    assert not (tmp_path / "out").exists()
    dropping = saved(tmp_path / "drop", orphans='orphans = "drop"')
    checked = run("check", dropping, *person, *linked(june))
    assert "linked  encounters" in checked.stdout and "3 orphan row(s) (orphans = 'drop')" in checked.stdout
    counts = json.loads(run("check", dropping, *person, *linked(june), "--json").stdout)["linked"]
    assert counts[0]["name"] == "encounters" and counts[0]["orphans"] == 3
    assert counts[0]["released"] == counts[0]["rows"] - 3
    out = tmp_path / "out"
    result = run("apply", dropping, *person, *linked(june), "--out", out)
    assert "3 orphan row(s) dropped" in result.stdout
    enc = next(t for t in sidecar(out)["release"]["tables"] if t["name"] == "encounters")
    assert (enc["orphans"], enc["orphans_rule"], enc["rows"]) == (3, "drop", enc["source_rows"] - 3)


@pytest.mark.parametrize(("old", "new", "detail"), [
    ('keep = ["kind"]', 'sensitive = ["kind"]', "[[table]] 'encounters': keep"),
    ('shift = ["noted"]', 'keep = ["noted"]', "[[table]] 'diagnoses': keep"),
    ('drop = ["enc_id"]', 'drop = ["enc_id"]\norphans = "drop"', "[[table]] 'encounters': orphans 'refuse' → 'drop'"),
    ("shift_days = 20", "shift_days = 25", "[person] shift_days 20 → 25"),
    ('name = "diagnoses"', 'name = "dx"', "linked tables encounters, diagnoses are now encounters, dx"),
])
def test_a_changed_linked_table_declaration_fails_the_hash(tmp_path: Path, run, old: str, new: str,
                                                           detail: str) -> None:
    policy = saved(tmp_path)
    spec = tmp_path / "saved" / "set.toml"
    text = spec.read_text(encoding="utf-8")
    assert old in text
    spec.write_text(text.replace(old, new), encoding="utf-8")
    june = tmp_path / "june"
    batches(june, tables(60))
    line = one_error_line(run("apply", policy, "--source", june / "patients.parquet", *linked(june),
                              "--out", tmp_path / "out", expect=2))
    assert "was saved for another spec/schema" in line and detail in line, line
    assert not (tmp_path / "out").exists()


def test_a_drifted_person_batch_is_refused_and_writes_nothing(tmp_path: Path, run) -> None:
    policy = saved(tmp_path)
    data = tables(60)
    data["patients"] = [dict(p, age=90 + i % 10) for i, p in enumerate(data["patients"])]  # all of them old
    june = tmp_path / "june"
    batches(june, data)
    out = tmp_path / "out"
    args = ["apply", policy, "--source", june / "patients.parquet", *linked(june), "--out", out]
    result = run(*args, expect=1)
    assert "drift" in result.output and not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".deid-sql")]
    assert run("check", policy, "--source", june / "patients.parquet", *linked(june), expect=1)
    result = run(*args, "--accept-drift", "the geriatric ward joined")
    assert "drift accepted" in result.stdout and sorted(p.name for p in out.iterdir()) == [
        "diagnoses.parquet", "encounters.parquet", "patients.parquet", "release.json"]
    line = one_error_line(run(*args, "--accept-drift", "again, the same batch", expect=2))
    assert "already exists; pass --overwrite" in line
    run(*args, "--accept-drift", "again, the same batch", "--overwrite")
    assert sidecar(out)["drift"]["accepted_drift"] == "again, the same batch"


def test_the_api_writes_the_set(tmp_path: Path) -> None:
    policy = saved(tmp_path)
    june = tmp_path / "june"
    batches(june, tables(60))
    done = apply_set(policy, june / "patients.parquet",
                     {"encounters": june / "encounters.parquet", "diagnoses": june / "diagnoses.parquet"},
                     tmp_path / "out", fmt="csv")
    assert [t.name for t in done.written.tables] == list(NAMES)
    assert all(t.path.suffix == ".csv" and t.path.is_file() for t in done.written.tables)
    assert done.written.verdict.passed and done.records == 60


# -- every engine -----------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=engine_params("postgres", "spark"))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


def test_every_engine_applies_a_set_like_duckdb(engine: Engine, tmp_path: Path, run) -> None:
    """Saved on the engine's tables and applied to batch tables of the engine: the DuckDB files'
    saved set, check counts and released files (pseudonyms, shifted dates, suppressed persons)."""
    local = saved(tmp_path / "local", suppress=True)
    june = tmp_path / "june"
    data = tables(72, ghosts=0)
    batches(june, data)
    text = (tmp_path / "local" / "saved" / "set.toml").read_text(encoding="utf-8")
    for name, rows_ in tables().items():
        body = engine.load(f"sp_{name}", pa.Table.from_pylist(rows_))
        text = text.replace(f'path = "{name}.parquet"\n', body + "\n")
    for name, rows_ in data.items():
        engine.load(f"sp_june_{name}", pa.Table.from_pylist(rows_))
    spec = engine.folder / "set.toml"
    spec.write_text(engine.header() + "\n" + text, encoding="utf-8")
    policy = engine.folder / "set-policy.json"
    with Problem.from_spec(spec, cache=False) as problem:
        plan = replace(plan_of(problem, POLICY), suppression=Suppression.of_groups(ALONE, "k = 2"))
        save_policy_file(problem, plan, policy, overwrite=True)
    mine, theirs = PolicyFile.read(policy), PolicyFile.read(local)
    assert mine.linked is not None and theirs.linked is not None
    assert [t.declaration() for t in mine.linked.tables] == [t.declaration() for t in theirs.linked.tables]
    tables_args = ["--linked-table", f"encounters={engine.qualified('sp_june_encounters')}",
                   "--linked-table", f"diagnoses={engine.qualified('sp_june_diagnoses')}"]
    checked = json.loads(run("check", policy, "--source-table", engine.qualified("sp_june_patients"), *tables_args,
                             "--json", expect=None).stdout)
    wanted = json.loads(run("check", local, "--source", june / "patients.parquet", *linked(june), "--json",
                            expect=None).stdout)
    assert [{k: v for k, v in c.items() if k != "batch"} for c in checked["linked"]] == [
        {k: v for k, v in c.items() if k != "batch"} for c in wanted["linked"]]
    got, want = tmp_path / "got", tmp_path / "want"
    run("apply", policy, "--source-table", engine.qualified("sp_june_patients"), *tables_args, "--out", got,
        "--accept-drift", "a larger clinic")
    run("apply", local, "--source", june / "patients.parquet", *linked(june), "--out", want,
        "--accept-drift", "a larger clinic")
    for name in NAMES:
        assert rows(got, name) == rows(want, name), name
    assert sidecar(got)["figures"] == sidecar(want)["figures"]
