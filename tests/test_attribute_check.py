"""``deid-sql check`` judges the spec's attribute criteria on a new batch (issue 40: "a saved policy
re-checks the attribute criteria on every batch").  A policy saved on a batch whose groups are all
diverse; the next batch is the same persons with one group (age 20-29 at clinic C0) come to hold B20
only.  ``check`` fails it (exit 1) naming the column and the group, though nothing drifted; the fine
batch passes; the JSON carries the figures, equal to those ``apply``'s gate records on the rows it
writes.  On a single table, with ``[person]`` (B20 on a second row of each person: per person every
one of them holds it, per row only half) and on a set of linked tables (the diagnoses a linked table)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deid_sql.policyfile import check_policy, check_set
from deid_sql.release.sidecar import read_sidecar, sidecar_path
from tests.test_attribute_gate import OTHERS, source_table, write_problem
from tests.test_attribute_sets import b20_tables, write_set
from tests.test_linked import KEY

POLICY = "age:cuts=30,40,50|clinic:bottom"
THREE = 'max_confidence = 0.8\nmin_l = 2\nmax_t = 0.5\nt_distance = "equal"'
REFUSED = {"max_confidence": "diagnosis: group age 20-29, clinic C0 holds 'B20' for 5 of 5 records (confidence 1 > "
                             "max_confidence 0.8)",
           "min_l": "diagnosis: group age 20-29, clinic C0 holds 1 distinct value (ℓ 1 < min_l 2)",
           "max_t": "diagnosis: group age 20-29, clinic C0 is at t = 0.78 from the source's distribution"}


def diverse(table: pa.Table) -> pa.Table:
    """The B20 group's five persons given one diagnosis each of ``OTHERS``, like every other group."""
    dx = table.column("diagnosis").to_pylist()
    return table.set_column(3, "diagnosis", pa.array([OTHERS[i] if i < 5 else v for i, v in enumerate(dx)]))


def single(folder: Path, run: Any, release: str = THREE) -> tuple[Path, Path, Path]:
    """A policy saved on the diverse batch; the diverse batch and the B20 batch."""
    spec = write_problem(folder, release)
    fine, b20 = folder / "fine.parquet", folder / "b20.parquet"
    pq.write_table(diverse(source_table()), fine)
    pq.write_table(source_table(), b20)
    pq.write_table(diverse(source_table()), folder / "source.parquet")
    policy = folder / "policy.json"
    run("policy", "save", spec, "--policy", POLICY, "--out", policy)
    return policy, fine, b20


def test_check_fails_a_batch_whose_group_came_to_hold_only_b20(tmp_path: Path, run) -> None:
    policy, _, b20 = single(tmp_path, run)
    result = run("check", policy, "--source", b20, expect=1)
    out = result.stdout
    assert "ok: no QI's label shares moved" in out and "is within the limit" in out  # nothing drifted
    for key, text in REFUSED.items():
        assert f"FAIL {key}: {text}" in out, out
    assert "refused: the batch's release fails 3 attribute criteria on diagnosis" in out
    assert "pid" not in out.split("attribute criteria", 1)[1]  # a group by its labels, never a person


def test_check_passes_the_diverse_batch(tmp_path: Path, run) -> None:
    policy, fine, _ = single(tmp_path, run)
    out = run("check", policy, "--source", fine).stdout
    assert "ok: the batch's release meets every attribute criterion" in out
    assert "ok   max_confidence" in out and "FAIL" not in out


def test_check_json_carries_the_figures_the_gate_records(tmp_path: Path, run) -> None:
    policy, _, b20 = single(tmp_path, run)
    data = json.loads(run("check", policy, "--source", b20, "--json", expect=1).stdout)
    assert data["failed"] and data["attribute_failed"] and not data["drifted"]
    (column,) = data["attribute"]
    assert column["column"] == "diagnosis" and not column["passed"] and column["groups"] == 40
    assert column["max_confidence"] == 1.0 and column["min_distinct_l"] == 1.0
    assert column["max_t"] == pytest.approx(1 - 44 / 200)
    assert {c["key"]: c["passed"] for c in column["checks"]} == {"max_confidence": False, "min_l": False,
                                                                  "max_t": False}
    # apply's gate, on the rows it writes, records the same figures (the override lets them be written)
    out = tmp_path / "released.parquet"
    run("apply", policy, "--source", b20, "--out", out, "--accept-risk", "reviewed by the data board")
    (gate,) = read_sidecar(sidecar_path(out))["figures"]["attribute"]
    assert {k: v for k, v in column.items() if k != "passed"} == gate


def test_check_policy_api_and_a_spec_without_attribute_criteria(tmp_path: Path, run) -> None:
    policy, fine, b20 = single(tmp_path, run)
    report = check_policy(policy, b20)
    assert report.failed and not report.drifted
    assert [c.key for c in report.attribute_failures] == ["max_confidence", "min_l", "max_t"]
    write_problem(tmp_path, "")  # the criteria removed from the spec ([release] is not in the spec hash)
    report = check_policy(policy, b20)
    assert report.attribute == () and not report.failed
    assert "attribute criteria" not in run("check", policy, "--source", b20).stdout


@pytest.fixture
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEID_LINK_KEY", KEY)


# -- [person]: a person holds every value of their rows --------------------------------------------------
def encounters(table: pa.Table, b20: bool) -> pa.Table:
    """Each person of the diverse table on two rows: the second repeats the first's diagnosis, or (``b20``)
    in the group 20-29 at C0 is B20: per person all five hold it, per row half the rows do."""
    rows = diverse(table).to_pylist()
    second = [dict(r, diagnosis="B20" if b20 and i < 5 else r["diagnosis"]) for i, r in enumerate(rows)]
    return pa.Table.from_pylist(rows + second, schema=table.schema)


def test_check_counts_persons_with_person(tmp_path: Path, run, secret: None) -> None:
    spec = write_problem(tmp_path, "max_confidence = 0.8", header='[person]\ncolumn = "pid"\n')
    spec.write_text(spec.read_text().replace('drop = ["pid"]', 'pseudonymize = ["pid"]\nsecret_env = "DEID_LINK_KEY"'))
    pq.write_table(encounters(source_table(), False), tmp_path / "source.parquet")
    pq.write_table(encounters(source_table(), True), tmp_path / "b20.parquet")
    policy = tmp_path / "policy.json"
    run("policy", "save", spec, "--policy", POLICY, "--out", policy)
    assert "ok: the batch's release meets" in run("check", policy, "--source", tmp_path / "source.parquet").stdout
    result = run("check", policy, "--source", tmp_path / "b20.parquet", "--json", expect=1)
    (column,) = json.loads(result.stdout)["attribute"]
    # per person all 5 hold B20 (per row 6 of 10 would pass 0.8), among 5 distinct values
    assert column["max_confidence"] == 1.0 and column["min_distinct_l"] == 5.0
    (check,) = column["checks"]
    assert "holds 'B20' for 5 of 5 persons (confidence 1 > max_confidence 0.8)" in check["text"]
    out = tmp_path / "released.parquet"
    run("apply", policy, "--source", tmp_path / "b20.parquet", "--out", out, "--accept-risk", "reviewed by the board")
    assert [{k: v for k, v in column.items() if k != "passed"}] == read_sidecar(sidecar_path(out))["figures"][
        "attribute"]


# -- a set: the diagnoses in a linked table ---------------------------------------------------------------
def diverse_diagnoses(diagnoses: pa.Table) -> pa.Table:
    """The linked diagnoses with the B20 group's patients (P000-P004) holding one of ``OTHERS`` each."""
    rows = [r for r in diagnoses.to_pylist() if r["pid"] > "P004"]
    rows += [{"pid": f"P{j:03d}", "diagnosis": OTHERS[j]} for j in range(5)]
    return pa.Table.from_pylist(rows, schema=diagnoses.schema)


def test_check_of_a_set_judges_the_linked_column(tmp_path: Path, run, secret: None) -> None:
    spec = write_set(tmp_path, "max_confidence = 0.8")
    patients, diagnoses = b20_tables()
    pq.write_table(diverse_diagnoses(diagnoses), tmp_path / "diagnoses.parquet")  # the set saved on
    pq.write_table(diagnoses, tmp_path / "b20.parquet")
    policy = tmp_path / "policy.json"
    run("policy", "save", spec, "--policy", POLICY, "--out", policy)
    batch = ("--source", tmp_path / "patients.parquet")
    fine = run("check", policy, *batch, "--linked", f"diagnoses={tmp_path / 'diagnoses.parquet'}").stdout
    assert "ok: the batch's release meets every attribute criterion" in fine
    result = run("check", policy, *batch, "--linked", f"diagnoses={tmp_path / 'b20.parquet'}", expect=1)
    assert ("FAIL max_confidence: diagnosis: group age 20-29, clinic C0 holds 'B20' for 5 of 5 persons "
            "(confidence 1 > max_confidence 0.8)") in result.stdout
    assert "linked  diagnoses" in result.stdout
    checked = check_set(policy, tmp_path / "patients.parquet", {"diagnoses": tmp_path / "b20.parquet"})
    assert checked.failed and not checked.drifted
    data = json.loads(run("check", policy, *batch, "--linked", f"diagnoses={tmp_path / 'b20.parquet'}", "--json",
                          expect=1).stdout)
    (column,) = data["attribute"]
    out = tmp_path / "released"
    run("apply", policy, *batch, "--linked", f"diagnoses={tmp_path / 'b20.parquet'}", "--out", out,
        "--accept-risk", "reviewed by the data board")
    record = json.loads((out / "release.json").read_text(encoding="utf-8"))
    assert [{k: v for k, v in column.items() if k != "passed"}] == record["figures"]["attribute"]
