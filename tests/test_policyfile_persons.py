"""Policy files count persons (``[person]``): ``policy save``, ``check`` and ``apply`` on encounters.

A batch of several rows per person is released as ``materialize`` releases it (each person's rows
carry the person's labels) and its figures are ``evaluate``'s, in persons; a batch whose person
key is NULL, whose QI varies within a person without a rule, or whose person has more rows than
the derived QI allows is refused in one line; a changed ``[person]`` is a changed spec.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deid_sql import Problem
from deid_sql.compiler.suppression import Suppression
from deid_sql.policyfile import PolicyFile
from deid_sql.policyfile.format import spec_sha256
from deid_sql.policyfile.persons import SavedPerson
from deid_sql.policyfile.save import save_policy_file
from deid_sql.release.plan import plan_of
from tests.engines import Engine, engine_fixture, engine_params

from .test_persons import KEY, releasable, released_by_person, write
from .test_policy_file import one_error_line

POLICY = "age:every=10"


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEID_PERSONS_KEY", KEY)  # the person key leaves pseudonymized


def encounters(seed: int, persons: int = 80) -> list[dict[str, Any]]:
    """Persons with 1 to 4 rows each; their age moves between visits (``per_person = "first"``)."""
    rng = random.Random(seed)
    rows = []
    for p in range(persons):
        age, sex = rng.randint(18, 90), rng.choice("FM")
        for v in range(rng.randint(1, 4)):
            rows.append({"patient_id": f"S{seed}P{p}", "age": min(age + v, 99), "sex": sex, "seen": v, "dx": "x"})
    return rows


def spec_of(folder: Path, rows: list[dict[str, Any]], **kw: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return releasable(write(folder, rows, **kw))


def batch_file(path: Path, rows: list[dict[str, Any]], like: Path) -> Path:
    """``rows`` as a Parquet batch with the schema of the source ``like``."""
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(like)), path)
    return path


def sidecar(path: Path) -> dict[str, Any]:
    return json.loads(Path(f"{path}.release.json").read_text(encoding="utf-8"))


def figures_equal(got: dict[str, Any], want: dict[str, Any], keys: tuple[str, ...]) -> None:
    for key in keys:
        assert got[key] == pytest.approx(want[key], rel=1e-12), (key, got[key], want[key])


def sorted_rows(path: Path) -> list[tuple[Any, ...]]:
    return sorted(tuple(sorted(r.items())) for r in pq.read_table(path).to_pylist())


def test_save_check_and_apply_count_persons_like_evaluate_and_materialize(tmp_path: Path, run) -> None:
    spec = spec_of(tmp_path / "saved", encounters(1))
    policy = tmp_path / "policy.json"
    run("policy", "save", spec, "-p", POLICY, "--out", policy)
    data = json.loads(policy.read_text(encoding="utf-8"))
    assert data["person"] == {"column": "patient_id", "order": "seen", "per_person": {"age": "first"},
                              "derived": {"visits": "rows"}}
    evaluated = json.loads(run("evaluate", spec, "-p", POLICY).stdout)
    assert evaluated["records"] == 80  # persons, not rows
    saved = data["release"]["figures"]
    figures_equal(saved, evaluated, ("records", "groups", "k", "sample_unique_records", "corrected_groups",
                                     "risk_sum", "expected_reidentifications", "max_record_risk", "risk"))
    assert sum(r[-3] for r in data["release"]["groups"]["rows"]) == 80

    # a new batch of other persons: check and apply give what evaluate and materialize give on it
    rows = encounters(2)
    assert len(rows) > 80
    new = spec_of(tmp_path / "new", rows)
    batch = tmp_path / "new" / "enc.parquet"
    checked = json.loads(run("check", policy, "--source", batch, "--json", expect=None).stdout)
    assert checked["unit"] == "persons"
    want = json.loads(run("evaluate", new, "-p", POLICY).stdout)
    figures_equal(checked["new"], want, ("records", "groups", "k", "sample_unique_records", "risk_sum",
                                         "expected_reidentifications", "max_record_risk", "risk"))
    applied, materialized = tmp_path / "applied.parquet", tmp_path / "materialized.parquet"
    out = run("apply", policy, "--source", batch, "--out", applied, "--accept-drift", "another clinic").stdout
    assert f"wrote {len(rows):,} rows" in out and "released 80 persons" in out
    run("materialize", new, "--policy", POLICY, "--out", materialized)
    got, expected = sidecar(applied)["figures"], sidecar(materialized)["figures"]
    assert got["unit"] == expected["unit"] == "persons"
    figures_equal(got, expected, ("records", "groups", "k", "sample_unique_records", "risk_sum", "mean_record_risk",
                                  "expected_reidentifications", "max_record_risk", "risk", "suppressed"))
    assert sidecar(applied)["release"]["rows"] == len(rows)
    assert sorted_rows(applied) == sorted_rows(materialized)  # the same rows, each person one label tuple
    assert all(len(labels) == 1 for labels in released_by_person(applied).values())


def test_a_policy_file_needs_the_person_key_released(tmp_path: Path, run) -> None:
    spec = write(tmp_path, encounters(6))  # the key dropped: a batch's gate could not count persons
    line = one_error_line(run("policy", "save", spec, "-p", POLICY, "--out", tmp_path / "p.json", expect=2))
    assert "[person] column 'patient_id' is released as drop" in line and "pseudonymize" in line
    assert not (tmp_path / "p.json").exists()


def test_a_person_with_fifty_rows_counts_once(tmp_path: Path, run) -> None:
    rows = [{"patient_id": "A", "age": 40 + v % 3, "sex": "F", "seen": v, "dx": "x"} for v in range(50)]
    rows += [{"patient_id": f"B{i}", "age": 70, "sex": "M", "seen": 0, "dx": "x"} for i in range(4)]
    spec = spec_of(tmp_path, rows, age_rule='per_person = "max"', visits=False)
    policy = tmp_path / "policy.json"
    saved = run("policy", "save", spec, "-p", POLICY, "--out", policy).stdout
    assert "5 persons in 2 groups, k = 1" in saved
    report = run("check", policy, "--source", tmp_path / "enc.parquet", expect=None).stdout
    assert "5 persons (saved on enc.parquet: 5)" in report and "sample-unique persons" in report
    checked = json.loads(run("check", policy, "--source", tmp_path / "enc.parquet", "--json", expect=None).stdout)
    new = checked["new"]
    assert (new["records"], new["groups"], new["k"], new["sample_unique_records"]) == (5, 2, 1, 1)
    assert new["expected_reidentifications"] == pytest.approx(2.0)  # A alone, B0-B3 in one group of 4
    out = tmp_path / "release.parquet"
    run("apply", policy, "--source", tmp_path / "enc.parquet", "--out", out)
    f = sidecar(out)["figures"]
    assert (f["unit"], f["records"], f["groups"], f["k"]) == ("persons", 5, 2, 1)
    assert pq.read_table(out).num_rows == 54  # every row written, the row count checked against the batch's rows
    assert {dict(next(iter(v)))["age"] for v in released_by_person(out).values()} == {"40-49", "70-79"}
    db = tmp_path / "release.duckdb"
    run("apply", policy, "--source", tmp_path / "enc.parquet", "--out", db, "--table", "r")
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM r").fetchone() == (54,)
        record = json.loads(con.execute("SELECT sidecar FROM r__release").fetchone()[0])
    assert (record["figures"]["unit"], record["figures"]["records"], record["release"]["rows"]) == ("persons", 5, 54)


CLEAN = [{"patient_id": f"P{p}", "age": 20 + 7 * p, "sex": "FM"[p % 2], "seen": v, "dx": "x"}
         for p in range(10) for v in range(1 + p % 3)]


@pytest.mark.parametrize(("bad", "expected"), [
    ([{"patient_id": None, "age": 20, "sex": "F", "seen": 0, "dx": "x"},
      {"patient_id": None, "age": 27, "sex": "M", "seen": 1, "dx": "x"}],
     "[person] column 'patient_id' is NULL in 2 row(s); every row must name its person: fill the key or filter "
     "those rows out of the batch"),
    ([{"patient_id": "A", "age": 30, "sex": "F", "seen": 0, "dx": "x"},
      {"patient_id": "A", "age": 31, "sex": "F", "seen": 1, "dx": "x"}],
     "QI 'age' varies within 1 person(s) (e.g. person 'A' has '30' and '31'); a QI must be a property of the "
     "person: add per_person"),
    ([{"patient_id": "A", "age": 30, "sex": "F", "seen": v, "dx": "x"} for v in range(25)],
     "QI 'visits': 1 person(s) have a number of rows outside 1...20; widen its min/max"),
])
def test_a_bad_batch_is_refused_in_one_line_and_nothing_is_written(tmp_path: Path, run, bad: list[dict[str, Any]],
                                                                   expected: str) -> None:
    spec = spec_of(tmp_path, CLEAN, age_rule="")  # age must not vary within a person
    policy = tmp_path / "policy.json"
    run("policy", "save", spec, "-p", POLICY, "--out", policy)
    batch = batch_file(tmp_path / "batch.parquet", CLEAN + bad, tmp_path / "enc.parquet")
    out = tmp_path / "release.parquet"
    line = one_error_line(run("apply", policy, "--source", batch, "--out", out, expect=2))
    assert line.startswith(f"error: batch {batch}: ") and expected in line
    assert not out.exists() and not Path(f"{out}.release.json").exists()
    assert expected in one_error_line(run("check", policy, "--source", batch, expect=2))


@pytest.mark.parametrize(("old", "new", "detail"), [
    ('per_person = "first"', 'per_person = "last"', "[person] per_person rules {'age': 'first'} → {'age': 'last'}"),
    ('order = "seen"', 'order = "age"', "[person] order 'seen' → 'age'"),
    ('column = "patient_id"', 'column = "dx"', "[person] column 'patient_id' → 'dx'"),
])
def test_a_changed_person_declaration_is_refused_by_the_hash(tmp_path: Path, run, old: str, new: str,
                                                            detail: str) -> None:
    spec = spec_of(tmp_path, encounters(3))
    policy = tmp_path / "policy.json"
    run("policy", "save", spec, "-p", POLICY, "--out", policy)
    spec.write_text(spec.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    out = tmp_path / "release.parquet"
    for args in (("check",), ("apply", "--out", out)):
        line = one_error_line(run(args[0], policy, "--source", tmp_path / "enc.parquet", *args[1:], expect=2))
        assert "was saved for another spec/schema" in line and detail in line, line
    assert not out.exists()


def test_the_person_declaration_round_trips_and_is_hashed(tmp_path: Path, run) -> None:
    spec = spec_of(tmp_path, encounters(4))
    path = tmp_path / "policy.json"
    run("policy", "save", spec, "-p", POLICY, "--out", path)
    assert PolicyFile.read(path).person == SavedPerson("patient_id", "seen", (("age", "first"),),
                                                       (("visits", "rows"),))
    edited = tmp_path / "edited.json"
    edited.write_text(path.read_text(encoding="utf-8").replace('"per_person": {"age": "first"}',
                                                              '"per_person": {"age": "last"}'), encoding="utf-8")
    line = one_error_line(run("check", edited, "--source", tmp_path / "enc.parquet", expect=2))
    assert "do not match its spec hash (edited by hand?)" in line


def test_a_file_without_person_hashes_as_before() -> None:
    """The hash of policy files saved before [person] (pinned): they keep loading and applying."""
    decls = [{"name": "age", "column": "age", "kind": "integer", "nulls": "refuse", "domain": {"min": 0, "max": 120}},
             {"name": "sex", "column": "sex", "kind": "category", "nulls": "refuse", "domain": {"values": ["F", "M"]}}]
    columns = [("sex", "text"), ("age", "number"), ("patient_id", "text")]
    assert spec_sha256(decls, columns) == "999d580ae5c1ee0604ac873dcc09e5f08e1c55be2100a1413c4f8ac7da1a470b"
    assert spec_sha256(decls, columns, {"column": "patient_id"}) != spec_sha256(decls, columns)


def test_the_saved_suppression_removes_whole_persons(tmp_path: Path, run) -> None:
    ages = [30] * 75 + [10, 20, 40, 50, 60]  # five persons stand out: an anonymization suppresses them
    rows = [{"patient_id": f"P{p}", "age": age, "sex": "F", "seen": v, "dx": "x"}
            for p, age in enumerate(ages) for v in range(1 + p % 3)]
    spec = spec_of(tmp_path, rows, age_rule='per_person = "max"', visits=False)
    policy = tmp_path / "policy.json"
    with Problem.from_spec(spec, cache=False) as problem:  # an anonymization's plan: the groups it suppresses
        plan = plan_of(problem, POLICY)
        stand_out = [(f"{a}-{a + 9}", "F") for a in (10, 20, 40, 50, 60)]
        save_policy_file(problem, replace(plan, suppression=Suppression.of_groups(stand_out, "k = 3")), policy)
    assert len(json.loads(policy.read_text(encoding="utf-8"))["suppression"]["groups"]) == 5
    # a new batch: the persons who stand out come back with a visit at age 5, in no suppressed group
    # (their greatest age, per_person = "max", is still theirs: the whole person stays suppressed)
    batch = batch_file(tmp_path / "batch.parquet", rows + [dict(r, seen=9, age=5) for r in rows if r["age"] != 30],
                       tmp_path / "enc.parquet")
    out = tmp_path / "release.parquet"
    run("apply", policy, "--source", batch, "--out", out, "--accept-drift", "the same persons")
    released = pq.read_table(out).to_pylist()
    # every row of the five persons is suppressed and carries no pseudonym; the others keep theirs, unflagged
    raw = pq.read_table(batch).to_pylist()
    stand_out = {r["patient_id"] for r in rows if r["age"] != 30}
    assert sum(1 for r in released if r["deid_suppressed"]) == sum(1 for r in raw if r["patient_id"] in stand_out)
    assert {r["patient_id"] for r in released if r["deid_suppressed"]} == {None}
    assert len({r["patient_id"] for r in released if not r["deid_suppressed"]}) == 75
    f = sidecar(out)["figures"]
    assert (f["unit"], f["records"], f["suppressed"]) == ("persons", 80, 5)
    checked = json.loads(run("check", policy, "--source", batch, "--json", expect=None).stdout)
    assert checked["new"]["records"] == 80 and checked["new"]["k"] >= 3


def test_views_of_a_batch_count_persons_and_cannot_pseudonymize(tmp_path: Path, run) -> None:
    rows = encounters(5, persons=40)
    spec = spec_of(tmp_path, rows)
    policy = tmp_path / "policy.json"
    run("policy", "save", spec, "-p", POLICY, "--out", policy)
    db = tmp_path / "views.duckdb"
    line = one_error_line(run("apply", policy, "--source", tmp_path / "enc.parquet", "--view", "v", "--db", db,
                              expect=2))
    assert "a view's SQL would hold the secret key" in line
    text = spec.read_text(encoding="utf-8").replace('pseudonymize = ["patient_id"]\nsecret_env = "DEID_PERSONS_KEY"',
                                                        'keep = ["patient_id"]')
    spec.write_text(text, encoding="utf-8")  # roles are not in the spec hash
    run("apply", policy, "--source", tmp_path / "enc.parquet", "--view", "v", "--db", db)
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM v").fetchone() == (len(rows),)
        assert con.execute("SELECT count(*) FROM (SELECT patient_id FROM v GROUP BY patient_id "
                       "HAVING count(DISTINCT (age, sex, visits)) > 1)").fetchone() == (0,)
        assert con.execute("SELECT count(DISTINCT patient_id) FROM v").fetchone() == (40,)
        record = json.loads(con.execute("SELECT sidecar FROM v__release").fetchone()[0])
    assert (record["figures"]["unit"], record["figures"]["records"], record["release"]["rows"]) == (
        "persons", 40, len(rows))


# -- every engine -----------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=engine_params("postgres", "spark"))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


def test_every_engine_checks_and_applies_batches_of_persons(engine: Engine, tmp_path: Path, run) -> None:
    """The batch's person scan, the person rewrite and the distinct-person counts run where the
    data is: saved on an engine table, a batch table gives the DuckDB files' figures, rows and
    refusals."""
    rows, new = encounters(7), encounters(8)
    local = spec_of(tmp_path / "local", rows)
    batch = batch_file(tmp_path / "local" / "batch.parquet", new, tmp_path / "local" / "enc.parquet")
    wrong = CLEAN + [dict(CLEAN[0], patient_id=None)] * 2 + [dict(CLEAN[0], sex="M", seen=5)]  # P0's sex varies
    bad = batch_file(tmp_path / "local" / "bad.parquet", wrong, tmp_path / "local" / "enc.parquet")
    schema = pq.read_schema(tmp_path / "local" / "enc.parquet")
    source = engine.load("enc_persons", pa.Table.from_pylist(rows, schema=schema))
    engine.load("batch_persons", pa.Table.from_pylist(new, schema=schema))
    engine.load("bad_persons", pa.Table.from_pylist(wrong, schema=schema))
    spec = engine.folder / "persons-policy.toml"
    spec.write_text(local.read_text(encoding="utf-8").replace('[source]\npath = "enc.parquet"\n',
                                                             engine.header() + f"\n[source]\n{source}\n"),
                    encoding="utf-8")
    want, got = tmp_path / "want.json", engine.folder / "persons-policy.json"
    run("policy", "save", local, "-p", POLICY, "--out", want)
    run("policy", "save", spec, "-p", POLICY, "--out", got, "--overwrite")
    saved = [json.loads(p.read_text(encoding="utf-8"))["release"] for p in (want, got)]
    figures_equal(saved[1]["figures"], saved[0]["figures"], tuple(saved[0]["figures"]))
    assert saved[1]["groups"]["rows"] == saved[0]["groups"]["rows"]
    mine = json.loads(run("check", got, "--source-table", engine.qualified("batch_persons"), "--json",
                          expect=None).stdout)
    theirs = json.loads(run("check", want, "--source", batch, "--json", expect=None).stdout)
    figures_equal(mine["new"], theirs["new"], tuple(theirs["new"]))
    for policy, where, out in ((want, ("--source", batch), tmp_path / "want.parquet"),
                               (got, ("--source-table", engine.qualified("batch_persons")), tmp_path / "got.parquet")):
        run("apply", policy, *where, "--out", out, "--accept-drift", "another clinic")
    assert sorted_rows(tmp_path / "got.parquet") == sorted_rows(tmp_path / "want.parquet")
    assert sidecar(tmp_path / "got.parquet")["figures"] == sidecar(tmp_path / "want.parquet")["figures"]
    # the refusal of a bad batch is the DuckDB file's, word for word after the batch's name
    lines = [one_error_line(run("check", p, *where, expect=2)).split(": ", 2)[2]
             for p, where in ((want, ("--source", bad)), (got, ("--source-table", engine.qualified("bad_persons"))))]
    assert lines[0] == lines[1] and "is NULL in 2 row(s)" in lines[0]
    assert "QI 'sex' varies within 1 person(s) (e.g. person 'P0' has 'F' and 'M')" in lines[0]
