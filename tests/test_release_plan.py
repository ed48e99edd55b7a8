"""One release path for any recoding: a scattered hierarchy level, a level vector (``--levels``) and an
``anonymize`` optimum with its suppressed groups each become a file, a view, a dbt model and a policy file,
through the release gate, with the same rows everywhere."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from sqlglot import exp

from deid_sql.compiler.compile import SUPPRESSED_TABLE
from deid_sql.compiler.suppression import Suppression
from deid_sql.domains.recoding import Recoding
from deid_sql.problem import Problem
from deid_sql.release.plan import plan_of
from tests.engines import read_duckdb, sorted_rows

from .test_fulldomain import RELEASE, small_spec

QIS = ("age", "sex", "race", "zip")


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    return small_spec(tmp_path, release=RELEASE)


# -- a hierarchy level that groups values that are not adjacent ------------------------------------------

@pytest.mark.slow
def test_a_scattered_level_is_a_recoding_every_release_path_takes(run, spec: Path, tmp_path: Path) -> None:
    policy = "race:level=1|age:cuts=10,20"
    with Problem.from_spec(spec) as problem:
        item = problem.item(policy)
        assert isinstance(item, Recoding) and not item.qis[2].contiguous
        assert set(item.qis[2].labels) == {"White+Asian", "Black+Other"}
        with pytest.raises(Exception, match="recoding"):  # still no lattice node
            problem.policy(policy)
    out = tmp_path / "scattered.parquet"
    run("materialize", spec, "--policy", policy, "--out", out)
    released = pq.read_table(out)
    assert set(released.column("race").to_pylist()) <= {"White+Asian", "Black+Other"}
    assert set(released.column("age").to_pylist()) <= {"0-9", "10-19", "20-30"}
    sidecar = json.loads(Path(f"{out}.release.json").read_text(encoding="utf-8"))
    assert sidecar["policy"]["text"] == policy and sidecar["gate"]["verdict"] == "passed"
    # the same rows as a view, from a policy file applied to the source, and in a dbt model's SQL
    db = tmp_path / "views.duckdb"
    run("view", spec, "--policy", policy, "--db", db, "--view", "scattered")
    assert sorted_rows(read_duckdb(db, "scattered")) == sorted_rows(pq.read_table(out))
    saved = tmp_path / "scattered.json"
    run("policy", "save", spec, "--policy", policy, "--out", saved)
    groups = next(q for q in json.loads(saved.read_text(encoding="utf-8"))["qis"] if q["name"] == "race")["groups"]
    assert {g["label"]: sorted(g["values"]) for g in groups} == {"White+Asian": ["Asian", "White"],
                                                                 "Black+Other": ["Black", "Other"]}
    applied = tmp_path / "applied.parquet"
    run("apply", saved, "--source", tmp_path / "source.parquet", "--out", applied)
    assert sorted_rows(pq.read_table(applied)) == sorted_rows(pq.read_table(out))
    run("dbt", spec, "--policy", policy, "--project", tmp_path / "warehouse")
    model = (tmp_path / "warehouse" / "models" / "source_deid.sql").read_text(encoding="utf-8")
    assert "White+Asian" in model and "Black+Other" in model
    run("report", spec, "--from-policy", saved, "--out", tmp_path / "scattered-report.html")
    twin = json.loads((tmp_path / "scattered-report.html").with_suffix(".json").read_text(encoding="utf-8"))
    assert twin["risk"]["figures"]["records"] == released.num_rows


# -- --levels -------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_levels_release_the_hierarchies_labels_everywhere(run, spec: Path, tmp_path: Path) -> None:
    levels = "age:2|race:1|zip:1"
    out = tmp_path / "levels.parquet"
    run("materialize", spec, "--levels", levels, "--out", out)
    released = pq.read_table(out)
    assert set(released.column("age").to_pylist()) <= {"0-9", "10-19", "20-29", "30-39"}
    assert {z[3:] for z in released.column("zip").to_pylist()} == {"**"}
    assert set(released.column("sex").to_pylist()) <= {"Female", "Male"}
    sidecar = json.loads(Path(f"{out}.release.json").read_text(encoding="utf-8"))
    assert sidecar["policy"]["levels"] == "age:2|sex:0|race:1|zip:1" and sidecar["policy"]["text"] is None
    # anonymize's optimum with no suppression is exactly this release
    result = run("anonymize", spec, "--min-k", "2", "--out", tmp_path / "anon.parquet")
    optimum = result.stdout.split("optimum", 1)[1].split()[0]
    run("materialize", spec, "--levels", optimum, "--out", tmp_path / "same.parquet")
    anonymized = pq.read_table(tmp_path / "anon.parquet")
    assert not any(anonymized.column("deid_suppressed").to_pylist())  # no suppression allowed
    assert sorted_rows(pq.read_table(tmp_path / "same.parquet")) == sorted(
        zip(*(anonymized.column(c).to_pylist() for c in anonymized.column_names if c != "deid_suppressed")), key=repr)
    db = tmp_path / "views.duckdb"
    run("view", spec, "--levels", levels, "--db", db, "--view", "by_levels")
    assert sorted_rows(read_duckdb(db, "by_levels")) == sorted_rows(pq.read_table(out))
    saved = tmp_path / "levels.json"
    run("policy", "save", spec, "--levels", levels, "--out", saved)
    assert json.loads(saved.read_text(encoding="utf-8"))["levels"] == "age:2|sex:0|race:1|zip:1"
    run("apply", saved, "--source", tmp_path / "source.parquet", "--out", tmp_path / "applied.parquet")
    assert sorted_rows(pq.read_table(tmp_path / "applied.parquet")) == sorted_rows(pq.read_table(out))
    run("dbt", spec, "--levels", levels, "--project", tmp_path / "warehouse")
    yml = (tmp_path / "warehouse" / "models" / "source_deid.yml").read_text(encoding="utf-8")
    assert "deid_levels" in yml and "age:2|sex:0|race:1|zip:1" in yml
    result = run("report", spec, "--levels", levels, "--out", tmp_path / "levels-report.html")
    twin = json.loads(tmp_path.joinpath("levels-report.html").with_suffix(".json").read_text(encoding="utf-8"))
    assert twin["policy"]["levels"] == "age:2|sex:0|race:1|zip:1"
    assert "--levels" in twin["method"]["commands"]["report"]


def test_policy_and_levels_are_one_or_the_other(run, spec: Path, tmp_path: Path) -> None:
    for args, words in ((("--policy", "top", "--levels", "age:1"), "not both"), ((), "--levels")):
        result = run("materialize", spec, *args, "--out", tmp_path / "x.parquet", expect=2)
        assert words in result.stderr and result.stderr.count("\n") == 1
    result = run("materialize", spec, "--levels", "age:9", "--out", tmp_path / "x.parquet", expect=2)
    assert "level 9 of QI 'age' does not exist" in result.stderr
    assert not (tmp_path / "x.parquet").exists()


# -- anonymize's optimum through every path ---------------------------------------------------------------

@pytest.mark.slow
def test_anonymize_releases_as_file_view_and_policy_file_with_the_same_rows(run, spec: Path, tmp_path: Path) -> None:
    args = ("anonymize", spec, "--min-k", "10", "--max-suppressed-share", "0.05")
    out, db, saved = tmp_path / "anon.parquet", tmp_path / "views.duckdb", tmp_path / "anon-policy.json"
    run(*args, "--out", out, "--save-policy", saved)
    rows = sorted_rows(pq.read_table(out))
    flagged = [r for r in rows if r[-1]]
    assert flagged and all(r[:4] == ("*",) * 4 or "*" in r for r in flagged)
    run(*args, "--view", "anon", "--db", db)
    assert sorted_rows(read_duckdb(db, "anon")) == rows
    con = duckdb.connect(str(db), read_only=True)
    try:
        sql = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = 'anon'").fetchone()[0]
    finally:
        con.close()
    assert SUPPRESSED_TABLE in sql and "VALUES" in sql.upper()
    # the policy file keeps the levels and the suppressed groups: applied to the same data, the same rows
    data = json.loads(saved.read_text(encoding="utf-8"))
    assert data["levels"] and len(data["suppression"]["groups"]) > 0
    applied = tmp_path / "applied.parquet"
    result = run("apply", saved, "--source", tmp_path / "source.parquet", "--out", applied)
    assert "drift check ok" in result.stdout
    assert sorted_rows(pq.read_table(applied)) == rows
    applied_sidecar = json.loads(Path(f"{applied}.release.json").read_text(encoding="utf-8"))
    anon_sidecar = json.loads(Path(f"{out}.release.json").read_text(encoding="utf-8"))
    for key in ("records", "groups", "k", "suppressed", "expected_reidentifications", "max_record_risk"):
        assert applied_sidecar["figures"][key] == pytest.approx(anon_sidecar["figures"][key], rel=1e-12), key
    assert run("check", saved, "--source", tmp_path / "source.parquet").exit_code == 0
    # and its report, from the policy file alone
    run("report", spec, "--from-policy", saved, "--out", tmp_path / "anon.html")
    twin = json.loads(tmp_path.joinpath("anon.html").with_suffix(".json").read_text(encoding="utf-8"))
    assert twin["risk"]["figures"]["suppressed"] == len(flagged)


def test_anonymize_refuses_two_targets_and_a_lone_db(run, spec: Path, tmp_path: Path) -> None:
    for extra, words in ((("--out", tmp_path / "a.parquet", "--view", "v"), "not both"),
                         (("--db", tmp_path / "v.duckdb"), "--view")):
        result = run("anonymize", spec, "--min-k", "3", *extra, expect=2)
        assert words in result.stderr and result.stderr.count("\n") == 1
    assert list(tmp_path.glob("a.parquet*")) == [] and not (tmp_path / "v.duckdb").exists()


# -- suppressed groups compile to a joined VALUES table -----------------------------------------------------

@pytest.mark.slow
def test_ten_thousand_suppressed_groups_are_a_values_join_not_a_literal_list(tmp_path: Path) -> None:
    """Scattered label tuples (most of them never released) flag exactly the rows of the listed groups."""
    spec = small_spec(tmp_path, rows=2000)
    with Problem.from_spec(spec) as problem:
        policy = "age:cuts=10,20"
        plain = problem.backend.execute(problem.query(plan_of(problem, policy)))
        counts = collections.Counter(tuple(r[q] for q in QIS) for r in plain.to_pylist())
        real = sorted(g for g, m in counts.items() if m < 3)
        fake = [(f"{i}", "x", "y", "z") for i in range(10_000 - len(real))]
        rule = Suppression.of_groups(real + fake, "test")
        query = problem.query(plan_of(problem, policy, suppression=rule))
        sql = problem.compile(plan_of(problem, policy, suppression=rule))
        assert "VALUES" in sql.upper() and "'4242'" in sql
        assert len(list(query.find_all(exp.Values))) == 1
        assert all(len(node.expressions) <= 10 for node in query.find_all(exp.In))  # the domain guards only
        released = problem.backend.execute(query).to_pylist()
        flagged = [r for r in released if r["deid_suppressed"]]
        assert len(released) == 2000 and len(flagged) == sum(counts[g] for g in real)
        assert all(r[q] == "*" for r in flagged for q in QIS)
        plan = plan_of(problem, policy, rule)
        assert plan.suppression is rule and plan.text is not None


# -- an Adult hierarchy-level result through the gate -------------------------------------------------------

@pytest.mark.slow
def test_an_adult_anonymization_becomes_a_view_a_dbt_model_and_a_policy_file(run, tmp_path: Path) -> None:
    from .test_fulldomain import adult_spec

    spec = adult_spec(tmp_path / "adult", release=RELEASE)
    args = ("anonymize", spec, "--min-k", "5", "--max-suppressed-share", "0.04")
    db, saved = tmp_path / "adult.duckdb", tmp_path / "adult-policy.json"
    result = run(*args, "--view", "adult_5anon", "--db", db, "--save-policy", saved)
    optimum = result.stdout.split("optimum", 1)[1].split()[0]
    assert "created view adult_5anon" in result.stdout and "gate: passed" in result.stdout
    rows = sorted_rows(read_duckdb(db, "adult_5anon"))
    assert len(rows) == 30_162
    suppressed = sum(1 for r in rows if r[-1])
    assert 0 < suppressed <= 0.04 * len(rows)
    data = json.loads(saved.read_text(encoding="utf-8"))
    assert data["levels"] == optimum and data["release"]["figures"]["k"] >= 5
    # the same levels, without the suppression, as a dbt model
    result = run("dbt", spec, "--levels", optimum, "--project", tmp_path / "warehouse")
    assert "gate: passed" in result.stdout
    model = next((tmp_path / "warehouse" / "models").glob("*_deid.sql")).read_text(encoding="utf-8")
    assert "CASE" in model.upper()
