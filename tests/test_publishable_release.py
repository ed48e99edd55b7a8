"""Policies a custodian publishes — ZIP3 and 10-year age bands, typed as words — go through every release
path: a view, a dbt model and a policy file (applied again), each through the release gate, with the
readable text recorded where a reviewer reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from deid_sql.problem import Problem
from tests.engines import read_duckdb, sorted_rows

POLICIES = {"zip3": "zip:digits=3", "decades": "age:every=10|race:top"}


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_a_publishable_policy_as_view_dbt_model_and_policy_file(project, run, name: str) -> None:
    policy = POLICIES[name]
    folder = project.dir
    out = folder / f"{name}.parquet"
    run("materialize", project.spec_path, "--policy", policy, "--out", out)
    released = pq.read_table(out)
    if name == "zip3":
        assert {z[3:] for z in released.column("zip").to_pylist()} == {"**"}
    else:
        bands = {f"{d}-{d + 9}" for d in range(0, 120, 10)} | {"120"}
        assert set(released.column("age").to_pylist()) <= bands
    with Problem.from_spec(project.spec_path) as problem:
        text = problem.policy(policy).text()  # the canonical text: the same words, every QI named
    assert ("digits=3" if name == "zip3" else "every=10") in text
    sidecar = json.loads(Path(f"{out}.release.json").read_text(encoding="utf-8"))
    assert sidecar["gate"]["verdict"] == "passed" and sidecar["policy"]["text"] == text
    # a view
    db = folder / "views.duckdb"
    result = run("view", project.spec_path, "--policy", policy, "--db", db, "--view", name)
    assert "gate: passed" in result.stdout
    assert sorted_rows(read_duckdb(db, name)) == sorted_rows(pq.read_table(out))
    # a dbt model, its meta naming the policy in words
    result = run("dbt", project.spec_path, "--policy", policy, "--project", folder / "warehouse", "--model", name)
    assert "gate: passed" in result.stdout
    yml = (folder / "warehouse" / "models" / f"{name}.yml").read_text(encoding="utf-8")
    assert text in yml
    # a policy file, applied to the same data: the same rows
    saved = folder / f"{name}-policy.json"
    run("policy", "save", project.spec_path, "--policy", policy, "--out", saved)
    assert json.loads(saved.read_text(encoding="utf-8"))["policy"] == text
    applied = folder / f"{name}-applied.parquet"
    result = run("apply", saved, "--source", project.source_parquet, "--out", applied)
    assert "gate: passed" in result.stdout
    assert sorted_rows(pq.read_table(applied)) == sorted_rows(pq.read_table(out))
