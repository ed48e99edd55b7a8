"""The safe-harbor and alternatives commands through the CLI."""

from __future__ import annotations

import csv
import json

import pyarrow.parquet as pq
import pytest

from deid_sql.search import boundary


def _with_roles(project) -> object:
    qis = [q.replace('name = "age"', 'name = "age"\nrole = "age"').replace('name = "zip"', 'name = "zip"\nrole = "zip"')
           for q in project.DEFAULT_QIS]
    return project.spec(name="roles.toml", qis=qis)


@pytest.mark.slow
def test_safe_harbor_prints_risk_and_writes_release(project, run):
    spec = _with_roles(project)
    out = project.dir / "sh.parquet"
    result = run("safe-harbor", spec, "--out", out, "--view", "sh_view", "--db", project.dir / "a.duckdb")
    assert "risk" in result.stdout and "90 and above become 90+" in result.stdout
    ages = set(pq.read_table(out).column("age").to_pylist())
    assert all(a == "90+" or int(a) < 90 for a in ages)
    assert "created view sh_view" in result.stdout


def test_safe_harbor_without_roles_says_which_is_missing(project, run):
    result = run("safe-harbor", project.spec_path, expect=2)
    assert "role 'zip' or 'age'" in result.stderr and "Safe Harbor cannot be built" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("method", ["bps", "directed"])
def test_alternatives_writes_boundary_policies(project, run, method):
    spec = _with_roles(project)
    out = project.dir / f"alt-{method}.csv"
    result = run("alternatives", spec, "--iterations", 8, "--seed", 3, "--method", method, "--out", out)
    assert "boundary policies found" in result.stdout and "non-dominated among them" in result.stdout
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert 1 <= len(rows) <= 8
    assert {"policy", "readable", "risk", "loss", "dominated"} <= set(rows[0])
    again = project.dir / f"again-{method}.json"
    run("alternatives", spec, "--iterations", 8, "--seed", 3, "--method", method, "--out", again)
    data = json.loads(again.read_text(encoding="utf-8"))
    assert [r["policy"] for r in data["policies"]] == [r["policy"] for r in rows]  # same seed, same output


def test_alternatives_numeric_threshold_and_bad_thresholds(project, run):
    run("alternatives", project.spec_path, "--max-risk", "0.5", "--iterations", 3)
    assert "outside (0, 1]" in run("alternatives", project.spec_path, "--max-risk", "1.5", expect=2).stderr
    assert "outside (0, 1]" in run("alternatives", project.spec_path, "--max-risk", "0", expect=2).stderr
    low = run("alternatives", project.spec_path, "--max-risk", "1e-12", expect=2).stderr
    assert "no policy can meet it" in low
    assert "neither 'safe-harbor' nor a number" in run("alternatives", project.spec_path, "--max-risk", "lots",
                                                       expect=2).stderr


def test_alternatives_refuses_existing_output_before_searching(project, run):
    out = project.dir / "taken.csv"
    out.write_text("keep me", encoding="utf-8")
    result = run("alternatives", project.spec_path, "--max-risk", "0.5", "--out", out, expect=2)
    assert "already exists" in result.stderr and out.read_text(encoding="utf-8") == "keep me"


def test_ctrl_c_keeps_results_found_so_far(project, run, monkeypatch):
    calls = {"n": 0}
    original = boundary.BoundarySearch.add

    def add_then_interrupt(self, policy, metrics, witness):
        original(self, policy, metrics, witness)
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(boundary.BoundarySearch, "add", add_then_interrupt)
    out = project.dir / "partial.json"
    result = run("alternatives", project.spec_path, "--max-risk", "0.5", "-n", 10, "--out", out, expect=130)
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["interrupted"] is True and len(data["policies"]) == 2
    assert "interrupted" in result.stderr


def test_roles_must_fit_their_qi_kind(project, run):
    qis = [q.replace('name = "sex"', 'name = "sex"\nrole = "date"')
           .replace('name = "zip"', 'name = "zip"\nrole = "age"') for q in project.DEFAULT_QIS]
    result = run("validate", project.spec(name="bad-roles.toml", qis=qis), expect=2)
    assert 'role "date" needs kind = "date"' in result.stderr
    assert 'role "age" needs kind = "integer"' in result.stderr
