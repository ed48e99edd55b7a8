"""Policies as code: ``deid-sql policy save``, ``apply`` and ``check`` on the small problem of conftest.

New batches are drawn like conftest's source (same generator, other seeds), so they share
its schema and domains; drift is provoked with a much smaller batch, whose groups shrink.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deid_sql.policyfile import PolicyFile, apply_policy, check_policy, save_policy
from deid_sql.policyfile.format import spec_sha256
from deid_sql.policyfile.saved_qi import SavedQI
from deid_sql.problem import Problem
from deid_sql.release.plan import plan_of

from .conftest import RACES, SEXES, ZIPS
from .test_cli import RACE_TOP, expected_labels, read_duckdb, read_output

POLICY = "age:cuts=18,65|race:top|zip:cuts=37301"
FINE = "age:cuts=10,20,30,40,50,60,70,80,90|zip:cuts=37215,37301"  # small groups: drift shows quickly


def batch(seed: int, n: int) -> pa.Table:
    """A new batch from conftest's generator (seed 7 is the saved source)."""
    rng = np.random.default_rng(seed)
    ages = np.clip(np.rint(rng.normal(45, 22, n)), 0, 120).astype(np.int64)
    return pa.table({
        "patient_id": pa.array(np.arange(1, n + 1, dtype=np.int64) + 10_000 * seed),
        "age": pa.array(ages),
        "sex": pa.array([SEXES[i] for i in rng.integers(0, 2, n)]),
        "race": pa.array([RACES[i] for i in rng.choice(4, n, p=[0.7, 0.18, 0.07, 0.05])]),
        "zip": pa.array([ZIPS[i] for i in rng.integers(0, len(ZIPS), n)]),
        "diagnosis": pa.array([("I10", "E11", "J45", "K21")[i] for i in rng.integers(0, 4, n)]),
    })


def save(project, run, *args: object, policy: str = POLICY, spec: Path | None = None,
         name: str = "policy.json") -> Path:
    out = project.dir / name
    run("policy", "save", spec or project.spec_path, "-p", policy, "--out", out, *args)
    return out


def with_column(table: pa.Table, name: str, values: list[object]) -> pa.Table:
    return table.set_column(table.column_names.index(name), name, pa.array(values))


def one_error_line(result) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


# -- save ----------------------------------------------------------------------------------------

@pytest.mark.slow
def test_save_writes_the_policy_file(project, run) -> None:
    path = save(project, run)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert (data["format"], data["version"]) == ("deid-sql policy", 1)
    assert data["spec"]["path"] == "spec.toml" and len(data["spec"]["sha256"]) == 64
    assert data["source"]["path"] == "source.csv" and data["source"]["records"] == 500
    assert [c["name"] for c in data["source"]["columns"]] == project.source.column_names
    age, sex, race, zip_ = data["qis"]
    assert age["domain"] == {"min": 0, "max": 120}
    assert [(i["label"], i["first"], i["last"]) for i in age["intervals"]] == [
        ("0-17", 0, 17), ("18-64", 18, 64), ("65-120", 65, 120)]
    assert sex["intervals"] == [] and sex["domain"] == {"values": list(SEXES)}
    assert race["intervals"] == [{"label": RACE_TOP, "first": "White", "last": "Other"}]
    assert zip_["domain"] == {"values": list(ZIPS)}  # read from the population at save time, frozen here
    assert [i["label"] for i in zip_["intervals"]] == ["372**", "373**"]
    evaluated = json.loads(run("evaluate", project.spec_path, "-p", POLICY).stdout)
    assert data["policy"] == evaluated["policy"] and data["readable"] == evaluated["readable"]
    for key, value in data["metrics"].items():
        if key in evaluated:
            assert value == evaluated[key], key
    figures = data["release"]["figures"]
    for key in ("risk_sum", "expected_reidentifications", "max_record_risk", "risk"):
        assert figures[key] == pytest.approx(evaluated[key], rel=1e-12), key
    for key in ("k", "groups", "sample_unique_records", "records", "corrected_groups"):
        assert figures[key] == evaluated[key], key
    assert figures["mean_record_risk"] == pytest.approx(evaluated["risk_sum"] / 500, rel=1e-12)
    assert data["drift"]["measure"] == "mean_record_risk"
    assert data["drift"]["threshold"] == figures["mean_record_risk"]
    assert data["drift"]["threshold_from"] == "saved figure"
    assert {k: data["drift"][k] for k in ("rule", "false_alarm", "permutations", "seed")} == {
        "rule": "permutation", "false_alarm": 0.001, "permutations": 999, "seed": 0}
    assert data["fallback"] is None
    rows = data["release"]["groups"]["rows"]
    assert len(rows) == figures["groups"] and sum(r[4] for r in rows) == 500
    assert min(r[4] for r in rows) == figures["k"]


@pytest.mark.parametrize("fallback", ["18-64", "Female", "372**", "White|Black|Asian|Other"])
def test_save_refuses_a_fallback_equal_to_a_label(project, run, fallback: str) -> None:
    """Out-of-domain records labelled ``18-64`` would pose as members of that group (issue 19)."""
    out = project.dir / "policy.json"
    result = run("policy", "save", project.spec_path, "-p", POLICY, "--out", out,
                 "--fallback", fallback, expect=2)
    assert "also a label of QI" in one_error_line(result) and fallback in result.output
    assert not out.exists()


@pytest.mark.slow
def test_save_threshold_and_fallback(project, run) -> None:
    path = save(project, run, "--drift-limit", "0.01", "--fallback", "other")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["drift"]["threshold"] == 0.01 and data["drift"]["threshold_from"] == "set at save"
    assert data["drift"]["rule"] == "exact" and "permutations" not in data["drift"]
    assert data["fallback"] == "other"
    result = run("policy", "save", project.spec_path, "-p", POLICY, "--out", project.dir / "low.json",
                 "--drift-limit", "1e-9", expect=2)
    assert "would fail its own check" in one_error_line(result)
    assert not (project.dir / "low.json").exists()


@pytest.mark.slow
def test_save_refuses_to_overwrite_and_to_replace_inputs(project, run) -> None:
    path = save(project, run)
    before = project.files()
    result = run("policy", "save", project.spec_path, "-p", "top", "--out", path, expect=2)
    assert "already exists" in one_error_line(result) and "--overwrite" in result.stderr
    for target in (project.spec_path, project.source_csv, project.population_path):
        result = run("policy", "save", project.spec_path, "-p", "top", "--out", target, "--overwrite", expect=2)
        assert "is an input of the spec" in one_error_line(result)
    assert project.files() == before
    run("policy", "save", project.spec_path, "-p", "top", "--out", path, "--overwrite")
    assert json.loads(path.read_text(encoding="utf-8"))["release"]["figures"]["groups"] == 1


def test_save_bad_policy_text(project, run) -> None:
    before = project.files()
    result = run("policy", "save", project.spec_path, "-p", "height:top", "--out", project.dir / "p.json", expect=2)
    assert "unknown QI 'height'" in one_error_line(result)
    assert project.files() == before


# -- apply -----------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", ["release.parquet", "release.csv", "release.duckdb"])
@pytest.mark.parametrize("fallback", [False, True])
def test_apply_on_the_same_data_equals_materialize(project, run, name: str, fallback: bool) -> None:
    policy = save(project, run, *(["--fallback", "other"] if fallback else []))
    ours, theirs = project.dir / f"applied-{name}", project.dir / f"materialized-{name}"
    result = run("apply", policy, "--source", project.source_csv, "--out", ours)
    assert "wrote 500 rows" in result.stdout and "fallback" not in result.stdout
    run("materialize", project.spec_path, "-p", POLICY, "--out", theirs)
    if name.endswith(".duckdb"):
        assert read_duckdb(ours, "deidentified").equals(read_duckdb(theirs, "deidentified"))
    else:
        assert read_output(ours).equals(read_output(theirs))


@pytest.mark.slow
def test_apply_view_equals_materialize(project, run, tmp_path: Path) -> None:
    policy = save(project, run)
    db = tmp_path / "analysts.duckdb"
    result = run("apply", policy, "--source", project.source_parquet, "--view", "released", "--db", db)
    assert "created view released" in result.stdout
    run("materialize", project.spec_path, "-p", POLICY, "--out", project.dir / "m.parquet")
    assert read_duckdb(db, "released").equals(pq.read_table(project.dir / "m.parquet"))
    run("apply", policy, "--source", project.source_parquet, "--view", "released", "--db", db, expect=2)
    run("apply", policy, "--source", project.source_parquet, "--view", "released", "--db", db, "--overwrite")


@pytest.mark.slow
def test_apply_a_new_batch_without_the_original_data(project, run) -> None:
    policy = save(project, run)
    project.source_csv.unlink()  # the data the policy was chosen on is gone
    project.source_parquet.unlink()
    new = batch(seed=8, n=700)
    source = project.write_parquet(new, "batch-8.parquet")
    out = project.dir / "release-8.csv"
    assert "wrote 700 rows" in run("apply", policy, "--source", source, "--out", out).stdout
    released = read_output(out)
    assert "patient_id" not in released.column_names  # dropped by the spec's [columns], as in materialize
    got = Counter(tuple(sorted(r.items())) for r in released.to_pylist())
    want = Counter(tuple(sorted((expected_labels(src) | {"diagnosis": src["diagnosis"]}).items()))
                   for src in new.to_pylist())
    assert got == want
    report = json.loads(run("check", policy, "--source", source, "--json", expect=None).stdout)
    assert report["new"]["records"] == 700 and report["saved"]["records"] == 500  # no original data needed


@pytest.mark.slow
def test_apply_a_duckdb_batch(project, run) -> None:
    policy = save(project, run)
    db = project.dir / "warehouse.duckdb"
    con = duckdb.connect(str(db))
    con.register("b", batch(seed=9, n=300))
    con.execute("CREATE TABLE patients AS SELECT * FROM b")
    con.close()
    run("apply", policy, "--source", db, "--out", project.dir / "r.parquet", expect=2)  # --table missing
    line = one_error_line(run("apply", policy, "--source", db, "--source-table", "patients", "--out", db, expect=2))
    assert "is an input of the spec" in line  # as materialize: never write into the source's file
    out = project.dir / "release.duckdb"
    result = run("apply", policy, "--source", db, "--source-table", "patients", "--out", out, "--table", "released")
    assert "wrote 300 rows" in result.stdout and "table released" in result.stdout
    assert read_duckdb(out, "released").num_rows == 300
    line = one_error_line(run("apply", policy, "--source", db, "--source-table", "patients", "--view", "v", "--db", out,
                              expect=2))
    assert "create the view in that file" in line  # a view cannot reach another DuckDB file
    run("apply", policy, "--source", db, "--source-table", "patients", "--view", "v", "--db", db)
    assert read_duckdb(db, "v").equals(read_duckdb(out, "released"))


@pytest.mark.slow
def test_apply_value_outside_the_domain(project, run) -> None:
    policy = save(project, run)
    zips = batch(seed=8, n=200).column("zip").to_pylist()
    zips[:7] = ["99999", "99999", "99999", "00000", "12345", None, "38000"]
    source = project.write_parquet(with_column(batch(seed=8, n=200), "zip", zips), "bad.parquet")
    before = project.files()
    out = project.dir / "release.parquet"
    line = one_error_line(run("apply", policy, "--source", source, "--out", out, expect=2))
    assert "7 record(s) in 5 distinct value(s) of column 'zip'" in line
    assert "(e.g. '99999', " in line and "NULL" in line and "'38000'" in line and ", …" not in line
    assert "no fallback label" in line and "--fallback" in line
    line = one_error_line(run("check", policy, "--source", source, expect=2))
    assert "no fallback label" in line
    assert project.files() == before


@pytest.mark.slow
def test_apply_value_outside_the_domain_gets_the_fallback_label(project, run) -> None:
    policy = save(project, run, "--fallback", "other")
    new = batch(seed=8, n=200)
    ages = new.column("age").to_pylist()
    ages[0], ages[1] = 130, -1
    zips = new.column("zip").to_pylist()
    zips[2] = "99999"
    source = project.write_parquet(with_column(with_column(new, "age", ages), "zip", zips), "bad.parquet")
    out = project.dir / "release.parquet"
    result = run("apply", policy, "--source", source, "--out", out)
    assert "3 record(s) had values outside the saved domain and were released as 'other' (age: 2, zip: 1)" \
        in result.stdout
    rows = pq.read_table(out).to_pylist()
    assert [r["age"] for r in rows[:3]] == ["other", "other", expected_labels(new.to_pylist()[2])["age"]]
    assert rows[2]["zip"] == "other" and rows[0]["zip"] != "other"
    assert sum(r["age"] == "other" for r in rows) == 2 and sum(r["zip"] == "other" for r in rows) == 1
    report = json.loads(run("check", policy, "--source", source, "--json", expect=None).stdout)
    assert report["fallback_records"] == 3


@pytest.mark.slow
def test_apply_schema_mismatch(project, run) -> None:
    policy = save(project, run)
    new = batch(seed=8, n=100)
    cases = {
        "missing.parquet": (new.drop(["diagnosis"]), "missing column 'diagnosis'"),
        "extra.parquet": (new.append_column("ssn", pa.array(["123-45-6789"] * 100)), "extra column 'ssn'"),
        "retyped.parquet": (with_column(new, "age", [str(a) for a in new.column("age").to_pylist()]),
                            "column 'age' is text, was number"),
        "noqi.parquet": (new.drop(["zip"]), "missing column 'zip'"),
    }
    for name, (table, fragment) in cases.items():
        source = project.write_parquet(table, name)
        before = project.files()
        for command in (("apply", policy, "--source", source, "--out", project.dir / "r.parquet"),
                        ("check", policy, "--source", source)):
            line = one_error_line(run(*command, expect=2))
            assert fragment in line and "does not have the columns" in line, line
        assert project.files() == before


@pytest.mark.slow
def test_apply_spec_hash_mismatch(project, run) -> None:
    policy = save(project, run)
    source = project.write_parquet(batch(seed=8, n=100), "b.parquet")
    before = project.spec_path.read_text(encoding="utf-8")
    edits = [before.replace("max = 120", "max = 110"),  # the age domain changed
             before.replace('values = ["Female", "Male"]', 'values = ["Male", "Female"]'),  # the order changed
             before.replace('name = "race"', 'name = "ethnicity"\ncolumn = "race"')]  # a QI renamed
    for text in edits:
        project.spec_path.write_text(text, encoding="utf-8")
        files = project.files()
        for command in (("apply", policy, "--source", source, "--out", project.dir / "r.parquet"),
                        ("check", policy, "--source", source)):
            line = one_error_line(run(*command, expect=2))
            assert "was saved for another spec/schema (hash" in line and "deid-sql policy save" in line, line
        assert project.files() == files
    project.spec_path.write_text(before.replace("gamma = 1.0", "gamma = 2.0"), encoding="utf-8")
    files = project.files()
    for command in (("check", policy, "--source", source),  # apply runs the check first
                    ("apply", policy, "--source", source, "--out", project.dir / "r.parquet")):
        line = one_error_line(run(*command, expect=2))
        assert "risk model" in line and "gamma 1.0 → 2.0" in line
    assert project.files() == files


@pytest.mark.slow
def test_apply_refuses_bad_targets(project, run) -> None:
    policy = save(project, run)
    source = project.write_parquet(batch(seed=8, n=100), "b.parquet")
    before = project.files()
    for args, fragment in [
        (("--out", policy, "--overwrite"), "is the policy file"),
        (("--out", source, "--overwrite"), "is an input of the spec"),
        (("--out", project.source_csv, "--overwrite"), "the source the policy was saved on"),
        (("--out", project.spec_path), "is the policy's spec"),
        (("--out", project.dir / "r.txt"), "cannot tell the output format"),
        (("--view", "v"), "--view needs --db"),
        ((), "give --out FILE, or --view NAME"),
        (("--out", project.dir / "r.parquet", "--view", "v", "--db", project.dir / "a.duckdb"), "one of them"),
    ]:
        assert fragment in one_error_line(run("apply", policy, "--source", source, *args, expect=2)), fragment
    assert project.files() == before
    (project.dir / "r.parquet").write_bytes(b"precious")
    line = one_error_line(run("apply", policy, "--source", source, "--out", project.dir / "r.parquet", expect=2))
    assert "already exists" in line
    assert (project.dir / "r.parquet").read_bytes() == b"precious"
    for args, fragment in [((project.dir / "nope.parquet",), "does not exist"),
                           ((project.dir / "b.xlsx",), "cannot tell the format")]:
        line = one_error_line(run("apply", policy, "--source", *args, "--out", project.dir / "s.parquet", expect=2))
        assert fragment in line


@pytest.mark.slow
def test_apply_failing_guard_writes_nothing(project, run, monkeypatch) -> None:
    """A value outside the domain that slips past the scan (here: the scan is blinded) fails the
    query itself, so nothing is written and no raw value is released."""
    from deid_sql.policyfile import batch as batch_module

    policy = save(project, run)
    zips = batch(seed=8, n=50).column("zip").to_pylist()
    zips[0] = "99999"
    source = project.write_parquet(with_column(batch(seed=8, n=50), "zip", zips), "bad.parquet")
    monkeypatch.setattr(batch_module.Batch, "_scan", lambda self: (50, batch_module.Outside(0, ())))
    before = project.files()
    for out in ("r.parquet", "r.csv", "r.duckdb"):
        line = one_error_line(run("apply", policy, "--source", source, "--out", project.dir / out, expect=2))
        assert "outside the domain of QI 'zip'" in line
    assert project.files() == before


# -- check -----------------------------------------------------------------------------------------

@pytest.mark.slow
def test_check_on_the_same_data_is_within_the_threshold(project, run) -> None:
    policy = save(project, run)
    result = run("check", policy, "--source", project.source_parquet)
    assert result.stdout.splitlines()[-1].startswith("ok: mean_record_risk")
    data = json.loads(run("check", policy, "--source", project.source_csv, "--json").stdout)
    assert data["exceeded"] is False and data["saved"] == data["new"]


@pytest.mark.slow
def test_check_figures_are_what_evaluate_gives_on_the_batch(project, run) -> None:
    policy = save(project, run)
    new = batch(seed=8, n=400)
    source = project.write_parquet(new, "b.parquet")
    data = json.loads(run("check", policy, "--source", source, "--json", expect=None).stdout)
    spec = project.spec(name="batch.toml", source="b.parquet")
    evaluated = json.loads(run("evaluate", spec, "-p", POLICY).stdout)
    for key in ("risk", "risk_sum", "expected_reidentifications", "max_record_risk"):
        assert data["new"][key] == pytest.approx(evaluated[key], rel=1e-9), key
    for key in ("k", "groups", "sample_unique_records", "records", "corrected_groups"):
        assert data["new"][key] == evaluated[key], key


@pytest.mark.slow
def test_check_new_batch_within_an_explicit_threshold(project, run) -> None:
    policy = save(project, run, "--drift-limit", "0.001")
    source = project.write_parquet(batch(seed=8, n=500), "b.parquet")
    result = run("check", policy, "--source", source)
    assert "limit 0.001 (set at save, exact)" in result.stdout and "ok:" in result.stdout


@pytest.mark.slow
def test_check_drift_on_a_much_smaller_batch(project, run) -> None:
    """Sample-based risk: a batch of 40 instead of 500 shrinks every group, so record risks rise.
    The default limit compares it with batches of its own size (it passes); an exact threshold at
    the saved figure flags it."""
    spec = project.spec(population=None)
    source = project.write_parquet(batch(seed=8, n=40), "small.parquet")
    default = save(project, run, spec=spec, name="default.json")
    out = run("check", default, "--source", source).stdout
    assert "batches of 40 records drawn from the saved and new records pooled: 0.25" in out
    assert out.splitlines()[-1].startswith("ok:")
    policy = save(project, run, "--drift-limit", "0.024", spec=spec)  # 12 groups / 500 records
    out = run("check", policy, "--source", source, expect=1).stdout
    assert out.splitlines()[-1].startswith("drift: mean_record_risk") and "exceeds the limit 0.024" in out
    assert "limit 0.024 (set at save, exact)" in out
    assert "groups that moved: 11 with a higher record risk, 11 smaller than the saved k = 12" in out
    lines = [line for line in out.splitlines() if line.startswith("  [age=")]
    assert len(lines) == 10 and all("records " in line and "record risk " in line for line in lines)
    data = json.loads(run("check", policy, "--source", source, "--json", expect=1).stdout)
    assert data["exceeded"] is True and data["new"]["mean_record_risk"] > data["threshold"] == 0.024
    assert data["rule"] == "exact" and data["limit"] is None
    assert data["new"]["records"] == 40 and data["saved"]["records"] == 500
    assert data["groups_rose"] == data["groups_below_saved_k"] == data["new"]["groups"] == 11
    moved = data["moved"]
    assert len(moved) == 10 and set(moved[0]["labels"]) == {"age", "sex", "race", "zip"}
    rises = [m["record_risk_after"] - m["record_risk_before"] for m in moved]
    assert rises == sorted(rises, reverse=True) and rises[-1] > 0
    assert all(m["below_saved_k"] == (m["records_after"] < data["saved"]["k"]) for m in moved)
    assert all(m["records_after"] < m["records_before"] for m in moved)


@pytest.mark.slow
def test_check_drift_when_a_batch_moves_to_thinly_populated_groups(project, run) -> None:
    """Population risk does not grow as a batch shrinks; it grows when records move to groups
    with fewer people: a batch of children only (the age band with the smallest census)."""
    policy = save(project, run)  # the default limit: a permutation test against the saved groups
    kids = batch(seed=8, n=300)
    source = project.write_parquet(with_column(kids, "age", [a % 18 for a in kids.column("age").to_pylist()]),
                                   "kids.parquet")
    data = json.loads(run("check", policy, "--source", source, "--json", expect=1).stdout)
    assert data["new"]["mean_record_risk"] > data["threshold"] > data["saved"]["mean_record_risk"]
    assert data["rule"] == "permutation" and data["limit"]["permutations"] == 999 and data["limit"]["p_value"] == 0.001
    assert data["new"]["max_record_risk"] == data["saved"]["max_record_risk"]  # no group got riskier
    assert data["groups_rose"] == 0 and data["groups_gone"] == 8  # …the mix moved to the riskiest ones
    # what moved: every record is a child
    assert data["shares"]["age"][0] == {"label": "0-17", "saved": 0.118, "new": 1.0, "change": 0.882}
    assert [c["label"] for c in data["shares"]["age"]] == ["0-17", "18-64", "65-120"]
    for seed, n in ((8, 500), (9, 300), (8, 40)):  # ordinary batches, a small one too, pass
        out = run("check", policy, "--source", project.write_parquet(batch(seed=seed, n=n), f"b{seed}-{n}.parquet"))
        assert out.stdout.splitlines()[-1].startswith("ok:"), out.stdout
    assert "(below the saved k)" in out.stdout  # the batch of 40: its groups are small, its census is not


@pytest.mark.slow
def test_check_bad_policy_files(project, run) -> None:
    policy = save(project, run)
    source = project.source_parquet
    data = json.loads(policy.read_text(encoding="utf-8"))
    cases = {
        "not-json.json": ("{ policy", "is not JSON"),
        "v2.json": (json.dumps({**data, "version": 2}), "has version 2; this deid-sql reads version 1"),
        "other.json": (json.dumps({"hello": 1}), "is not a deid-sql policy file"),
        "no-qis.json": (json.dumps({k: v for k, v in data.items() if k != "qis"}), "malformed: qis is missing"),
        "bad-threshold.json": (json.dumps({**data, "drift": {**data["drift"], "threshold": "high"}}),
                               "drift.threshold has the wrong type"),
    }
    edited = json.loads(json.dumps(data))
    edited["qis"][1]["nulls"] = "category"  # a hand edit that only the hash catches
    cases["edited.json"] = (json.dumps(edited), "do not match its spec hash")
    relabeled = json.loads(json.dumps(data))
    relabeled["qis"][0]["intervals"][0]["label"] = "kids"
    cases["relabeled.json"] = (json.dumps(relabeled), "is not the label of that interval")
    for name, (text, fragment) in cases.items():
        path = project.dir / name
        path.write_text(text, encoding="utf-8")
        before = project.files()
        for command in (("check", path, "--source", source),
                        ("apply", path, "--source", source, "--out", project.dir / "r.parquet")):
            line = one_error_line(run(*command, expect=2))
            assert fragment in line, (name, line)
        assert project.files() == before
    line = one_error_line(run("check", project.dir / "missing.json", "--source", source, expect=2))
    assert "does not exist" in line


def test_missing_spec(project, run) -> None:
    policy = save(project, run)
    project.spec_path.rename(project.dir / "moved.toml")
    line = one_error_line(run("check", policy, "--source", project.source_parquet, expect=2))
    assert "the policy's spec" in line and "does not exist" in line


# -- other kinds of QIs, awkward values --------------------------------------------------------------

@pytest.mark.slow
def test_dates_and_null_categories(tmp_path: Path, run) -> None:
    rng = np.random.default_rng(3)
    n = 300
    days = rng.integers(0, 365 * 2, n)
    table = pa.table({
        "id": pa.array(np.arange(n)),
        "admitted": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=int(d)) for d in days]),
        "site": pa.array([None if i % 13 == 0 else ("north", "south", "east")[i % 3] for i in range(n)]),
    })
    folder = tmp_path / "dates"
    folder.mkdir()
    pq.write_table(table, folder / "visits.parquet")
    (folder / "spec.toml").write_text(
        'population = "sample"\n[source]\npath = "visits.parquet"\n'
        '[[qi]]\nname = "admitted"\nkind = "date"\nmin = 2020-01-01\nmax = 2021-12-31\n'
        '[[qi]]\nname = "site"\nkind = "category"\nvalues_from = "source"\nnulls = "category"\nnull_label = "?"\n'
        '[columns]\ndrop = ["id"]\n[release]\nmax_record_risk = 1.0\n', encoding="utf-8")
    policy_text = "admitted:cuts=2020-07-01,2021-01-01,2021-07-01|site:top"
    run("policy", "save", folder / "spec.toml", "-p", policy_text, "--out", folder / "p.json")
    saved = json.loads((folder / "p.json").read_text(encoding="utf-8"))
    assert saved["qis"][1]["domain"] == {"values": ["east", "north", "south", "?"]}
    run("apply", folder / "p.json", "--source", folder / "visits.parquet", "--out", folder / "a.parquet")
    run("materialize", folder / "spec.toml", "-p", policy_text, "--out", folder / "m.parquet")
    assert pq.read_table(folder / "a.parquet").equals(pq.read_table(folder / "m.parquet"))
    assert set(pq.read_table(folder / "a.parquet").column("admitted").to_pylist()) == {
        "2020-01-01..2020-06-30", "2020-07-01..2020-12-31", "2021-01-01..2021-06-30", "2021-07-01..2021-12-31"}
    late = table.set_column(1, "admitted", pa.array([dt.date(2022, 5, 1)] + table.column("admitted").to_pylist()[1:]))
    pq.write_table(late, folder / "late.parquet")
    line = one_error_line(run("apply", folder / "p.json", "--source", folder / "late.parquet", "--out",
                              folder / "b.parquet", expect=2))
    assert "1 record(s) in 1 distinct value(s) of column 'admitted' (e.g. '2022-05-01')" in line


@pytest.mark.slow
def test_large_domains_in_files_and_views(tmp_path: Path, run) -> None:
    """A 100-value ZIP domain (tested by a join, inline in views); a view re-reads its file, so a
    value outside the domain that arrives later gets the fallback label, or fails the query."""
    folder = tmp_path / "zips"
    folder.mkdir()
    zips = [f"{37000 + 3 * i}" for i in range(100)]
    rng = np.random.default_rng(5)
    table = pa.table({"id": pa.array(np.arange(400)), "zip": pa.array([zips[i] for i in rng.integers(0, 100, 400)])})
    pq.write_table(table, folder / "source.parquet")
    (folder / "spec.toml").write_text('population = "sample"\n[source]\npath = "source.parquet"\n'
                                      '[[qi]]\nname = "zip"\nkind = "zip"\n[columns]\ndrop = ["id"]\n'
                                      '[release]\nmax_record_risk = 1.0\n', encoding="utf-8")
    for name, extra in (("strict.json", ()), ("lenient.json", ("--fallback", "other"))):
        run("policy", "save", folder / "spec.toml", "-p", "zip:cuts=37150", "--out", folder / name, *extra)
    batch_path = folder / "batch.parquet"
    pq.write_table(table, batch_path)
    db = folder / "views.duckdb"
    for name in ("strict", "lenient"):
        run("apply", folder / f"{name}.json", "--source", batch_path, "--view", name, "--db", db)
        run("apply", folder / f"{name}.json", "--source", batch_path, "--out", folder / f"{name}.parquet")
        assert set(read_duckdb(db, name).column("zip").to_pylist()) == {"37000-37147", "37150-37297"}
    later = with_column(table, "zip", ["99999"] + table.column("zip").to_pylist()[1:])
    pq.write_table(later, batch_path)  # the file behind the views changes
    assert read_duckdb(db, "lenient").column("zip").to_pylist()[0] == "other"
    with pytest.raises(duckdb.Error, match="outside the domain of QI 'zip'"):
        read_duckdb(db, "strict")
    result = run("apply", folder / "lenient.json", "--source", batch_path, "--out", folder / "l2.parquet")
    assert "1 record(s) had values outside" in result.stdout
    assert pq.read_table(folder / "l2.parquet").column("zip").to_pylist()[0] == "other"


# -- the library and the file format -------------------------------------------------------------------

@pytest.mark.slow
def test_library_round_trip(project) -> None:
    saved = save_policy(project.spec_path, POLICY, project.dir / "p.json", fallback="n/a")
    again = PolicyFile.read(project.dir / "p.json")
    assert again.policy == saved.policy and again.fallback == "n/a" and again.figures == saved.figures
    assert again.groups.labels == saved.groups.labels
    done = apply_policy(again, project.source_parquet, out=project.dir / "r.parquet")
    assert done.records == 500 and done.written is not None and done.written.rows == 500
    report = check_policy(again, project.source_parquet)
    assert not report.exceeded and report.new == saved.figures


@pytest.fixture
def loaded(project):
    saved = save_policy(project.spec_path, POLICY, project.dir / "p.json")
    with Problem.from_spec(project.spec_path) as problem:
        yield problem, saved


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), density=st.floats(0.0, 1.0))
def test_any_policy_round_trips_through_the_file(loaded, tmp_path_factory, seed: int, density: float) -> None:
    problem, saved = loaded
    policy = problem.lattice.random_policy(np.random.default_rng(seed), density)
    qis = tuple(SavedQI.from_policy(q.name, q.column, q.kind, q.nulls, d, policy, i)
                for i, (q, d) in enumerate(zip(problem.spec.qis, problem.domains)))
    digest = spec_sha256([q.declaration() for q in qis], [(c.name, c.kind) for c in saved.columns])
    variant = replace(saved, policy=policy.text(), readable=policy.readable(), qis=qis, spec_sha256=digest)
    folder = tmp_path_factory.mktemp("round")
    path = folder / "p.json"
    path.write_text(variant.to_json(folder), encoding="utf-8")
    back = PolicyFile.read(path)
    assert back.policy == policy.text()
    for mine, theirs in zip(back.recoding().qis, policy.recoding().qis, strict=True):
        assert np.array_equal(mine.group_of, theirs.group_of) and mine.labels == theirs.labels


@pytest.mark.slow
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_apply_equals_materialize_for_random_policies(loaded, project, tmp_path_factory, seed: int) -> None:
    from deid_sql.release.output import materialize

    problem, _ = loaded
    folder = tmp_path_factory.mktemp("apply")
    policy = problem.lattice.random_policy(np.random.default_rng(seed), 0.3)
    materialize(problem, plan_of(problem, policy), folder / "m.parquet")
    save_policy(project.spec_path, policy.text(), folder / "p.json")
    apply_policy(folder / "p.json", project.source_csv, out=folder / "a.parquet")
    assert pq.read_table(folder / "a.parquet").equals(pq.read_table(folder / "m.parquet"))
