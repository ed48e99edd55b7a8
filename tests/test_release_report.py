"""The report dict of one release (``report.release_report``): the contract's keys, the figures
``deid-sql evaluate`` prints (same digits), the gate's verdict states, distributions that add up,
and one-line refusals of a sidecar, policy file or frontier folder of another problem."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest

from deid_sql import Problem
from deid_sql.errors import DeidError, ReleaseRefused
from deid_sql.jobs.frontier import run_frontier
from deid_sql.release.plan import plan_of
from deid_sql.release.safe_harbor import safe_harbor
from deid_sql.release.sidecar import read_sidecar, sidecar_path
from deid_sql.report.release_report import build_report, load_sidecar, policy_from_file
from deid_sql.starter.demo import build_demo, showcase_policies

POLICY = "age:cuts=18,30,45,65,90|zip:top"
ROLES = {"age": 'role = "age"\n', "zip": 'role = "zip"\n'}

KEYS = {
    "": {"format", "version", "created_at", "software", "summary", "data", "policy", "risk", "utility", "frontier",
         "method", "attestation", "unit"},
    "software": {"name", "version"},
    "summary": {"verdict", "headline", "cautions", "spec", "policy", "released", "operator"},
    "data": {"source", "population", "columns", "qis"},
    "policy": {"text", "levels", "readable", "sha256", "kind", "named", "arguments", "rules", "suppression",
               "sample"},
    "policy.suppression": {"suppressed_records", "suppressed_rows", "suppressed_groups", "share", "rule", "below",
                           "groups"},
    "unit": {"one", "many", "risk"},
    "policy.sample": {"source", "columns", "rows"},
    "risk": {"figures", "before_suppression", "at_risk", "record_risk_histogram", "group_sizes", "model",
             "no_census", "estimates", "attribute", "union", "comparison", "gate"},
    "risk.estimates": {"gate", "estimators", "range", "disagree", "most_pessimistic"},
    "risk.figures": {"records", "groups", "expected_reidentifications", "mean_record_risk", "max_record_risk", "k",
                     "sample_uniques", "suppressed", "risk"},
    "risk.record_risk_histogram": {"edges", "counts"},
    "risk.group_sizes": {"edges", "sample", "population"},
    "risk.model": {"key", "name", "gamma", "population", "population_source", "group_sizes", "group_sizes_note",
                   "record_risk", "expected_reidentifications", "estimate", "assumptions", "adversary", "papers"},
    "risk.gate": {"criteria", "checks", "verdict"},
    "utility": {"kl_loss", "normalized_loss", "iyengar_loss", "per_qi", "marginals"},
    "method": {"papers", "parameters", "commands"},
    "method.commands": {"release", "report", "environment"},
    "attestation": {"fields"},
}
ROW_KEYS = {"name", "expected_reidentifications", "max_record_risk", "k", "sample_uniques", "risk", "loss"}
ATTRIBUTE_KEYS = {"column", "groups", "max_confidence", "min_distinct_l", "min_entropy_l", "max_t", "max_presence",
                  "criteria", "checks", "worst_group", "confidence_histogram"}
ATTRIBUTE_CHECK_KEYS = {"criterion", "figure", "words", "value", "limit", "at_most", "passed", "text"}
FRONTIER_KEYS = {"folder", "points", "this", "safe_harbor", "dominated_by", "evaluations", "baselines",
                 "dominated_by_baselines"}


def at(report: dict[str, Any], dotted: str) -> Any:
    for part in filter(None, dotted.split(".")):
        report = report[part]
    return report


def check_contract(report: dict[str, Any]) -> None:
    """Exactly the contract's keys, JSON that round-trips, plain numbers only."""
    assert json.loads(json.dumps(report, allow_nan=False)) == report
    for where, keys in KEYS.items():
        assert set(at(report, where)) == keys, where
    assert all(set(r) == ROW_KEYS for r in report["risk"]["comparison"])
    for a in report["risk"]["attribute"]:
        assert set(a) == ATTRIBUTE_KEYS and all(set(c) == ATTRIBUTE_CHECK_KEYS for c in a["checks"])
        assert a["worst_group"] is None or set(a["worst_group"]) == {"labels", "share", "value", "holding", "of"}
        assert a["confidence_histogram"] is None or set(a["confidence_histogram"]) == {"edges", "counts"}
    assert all(set(c) == {"figure", "value", "limit", "at_most", "passed"} for c in report["risk"]["gate"]["checks"])
    assert all(set(r) == {"qi", "words", "labels", "empty"} for r in report["policy"]["rules"])
    assert all(set(lab) == {"label", "values", "records"} for r in report["policy"]["rules"] for lab in r["labels"])
    assert all(set(c) == {"name", "type", "role"} for c in report["data"]["columns"])
    assert all(set(q) == {"name", "column", "kind", "domain", "size"} for q in report["data"]["qis"])
    for paper in report["method"]["papers"] + report["risk"]["model"]["papers"]:
        assert set(paper) == {"authors", "title", "venue", "year", "used_for"} and all(paper.values())
    assert all(set(c) == {"kind", "text"} for c in report["summary"]["cautions"])
    if report["frontier"] is not None:
        assert set(report["frontier"]) == FRONTIER_KEYS
    assert report["summary"]["verdict"] in ("passed", "failed", "accepted", "no criteria")
    assert report["summary"]["verdict"] == report["risk"]["gate"]["verdict"]


def with_roles(project, release: str = "", name: str = "spec.toml") -> Path:
    """The project's spec with the Safe Harbor roles and an optional ``[release]`` body."""
    qis = [q + next((r for n, r in ROLES.items() if f'"{n}"' in q), "") for q in project.DEFAULT_QIS]
    return project.write_spec(project.spec_text(qis=qis, release=release or "max_record_risk = 1.0"), name)


def evaluated(run, spec: Path, policy: str) -> dict[str, Any]:
    return json.loads(run("evaluate", spec, "--policy", policy).stdout)


def assert_same_digits(report: dict[str, Any], printed: dict[str, Any]) -> None:
    """The report's figures are the numbers ``deid-sql evaluate`` prints, to the last digit."""
    this = report["risk"]["comparison"][0]
    assert this["name"] == "this policy"
    for key, figure in [("expected_reidentifications", "expected_reidentifications"), ("risk", "risk"),
                        ("loss", "loss"), ("max_record_risk", "max_record_risk"), ("k", "k"),
                        ("sample_uniques", "sample_unique_records")]:
        assert repr(this[key]) == repr(printed[figure]), key
    assert repr(report["utility"]["kl_loss"]) == repr(printed["kl"])
    assert repr(report["utility"]["iyengar_loss"]) == repr(printed["iyengar_loss"])
    figures = report["risk"]["figures"]  # the gate's, measured on the released rows: the same data here
    assert figures["records"] == printed["records"]
    assert figures["groups"] == printed["groups"]
    assert figures["k"] == printed["k"] and figures["sample_uniques"] == printed["sample_unique_records"]
    for key in ("expected_reidentifications", "max_record_risk", "risk"):
        assert figures[key] == pytest.approx(printed[key], rel=1e-12), key
    assert report["policy"]["text"] == printed["policy"] and report["policy"]["readable"] == printed["readable"]


# -- the figures ---------------------------------------------------------------------------------

def test_same_digits_as_evaluate_on_the_project(project, run) -> None:
    spec = with_roles(project)
    with Problem.from_spec(spec) as problem:
        report = build_report(problem, plan_of(problem, POLICY))
        harbor = problem.evaluate(safe_harbor(problem).recoding)
        bottom = problem.evaluate(problem.lattice.bottom())
    check_contract(report)
    assert_same_digits(report, evaluated(run, spec, POLICY))
    names = [r["name"] for r in report["risk"]["comparison"]]
    assert names == ["this policy", "HIPAA Safe Harbor", "original data"]
    assert report["risk"]["comparison"][1]["risk"] == harbor.risk
    assert report["risk"]["comparison"][2]["expected_reidentifications"] == bottom.expected_reidentifications
    assert report["risk"]["comparison"][2]["loss"] == 0.0
    population = report["data"]["population"]
    assert population["rows"] == project.population.num_rows
    assert population["people"] == sum(project.population.column("count").to_pylist())
    assert {c["name"]: c["role"] for c in report["data"]["columns"]} == {
        "patient_id": "dropped", "age": "QI", "sex": "QI", "race": "QI", "zip": "QI", "diagnosis": "sensitive"}


@pytest.mark.slow
def test_same_digits_as_evaluate_on_the_demo(tmp_path, run) -> None:
    spec = build_demo(tmp_path / "demo")
    with Problem.from_spec(spec) as problem:
        _, chosen = showcase_policies(problem.lattice)[3]
        report = build_report(problem, plan_of(problem, chosen))
        text = chosen.text()
    check_contract(report)
    assert_same_digits(report, evaluated(run, spec, text))
    assert report["risk"]["figures"]["records"] == 20_000
    rules = {r["qi"]: r["words"] for r in report["policy"]["rules"]}
    assert rules["zip"] == "zip: first 3 digits kept (15 prefixes)"
    assert rules["sex"] == "sex: kept as it is (2 values)"
    assert rules["age"].startswith("age in 10 bands: 0-9, 10-19, ")
    assert report["summary"]["headline"][0] == (
        f"expected re-identifications {report['risk']['figures']['expected_reidentifications']:.3g} among "
        "20,000 records (risk model: population-based (1/g)^γ, g counted in the census)")
    assert len(json.dumps(report)) < 200_000  # capped labels: the page stays small


def test_distributions_add_up(project) -> None:
    with Problem.from_spec(with_roles(project)) as problem:
        report = build_report(problem, plan_of(problem, POLICY))
    risk, figures = report["risk"], report["risk"]["figures"]
    hist = risk["record_risk_histogram"]
    assert len(hist["edges"]) == len(hist["counts"]) + 1 and sum(hist["counts"]) == figures["records"]
    assert hist["edges"] == sorted(hist["edges"]) and hist["edges"][-1] == 1.0
    assert max(e for e, c in zip(hist["edges"][1:], hist["counts"]) if c) >= figures["max_record_risk"]
    sizes = risk["group_sizes"]
    assert sum(sizes["sample"]) == sum(sizes["population"]) == figures["groups"]
    assert len(sizes["edges"]) == len(sizes["sample"]) + 1
    assert all(b / a >= 2 for a, b in zip(sizes["edges"], sizes["edges"][1:]))  # log-spaced
    for m in report["utility"]["marginals"]:
        for side in ("before", "after"):
            assert math.isclose(sum(s["share"] for s in m[side]), 1.0, rel_tol=1e-9), (m["qi"], side)
            assert len(m[side]) <= 30
    for rule in report["policy"]["rules"]:
        assert sum(lab["records"] for lab in rule["labels"]) == figures["records"]
    kept = {q["qi"]: q["information_kept"] for q in report["utility"]["per_qi"]}
    assert kept["sex"] == kept["race"] == 1.0 and kept["zip"] == 0.0 and 0 < kept["age"] < 1


def test_marginals_cap_at_30_labels(project) -> None:
    """Age has 121 values: before is 30 bands or fewer in domain order; the ZIP keeps every label (10).
    The rule lists only the ages some record carries (the others counted in ``empty``), at most 30 rows."""
    with Problem.from_spec(project.spec_path) as problem:
        report = build_report(problem, plan_of(problem, "zip:top"))
        q = problem.spec.qi_names.index("age")
        carried = len(set(problem.sample.positions[:, q].tolist()))
    age = next(m for m in report["utility"]["marginals"] if m["qi"] == "age")
    assert 20 <= len(age["before"]) <= 30 and age["before"][0]["label"].startswith("0 … ")
    age_rule = next(r for r in report["policy"]["rules"] if r["qi"] == "age")
    assert age_rule["empty"] == 121 - carried and all(lab["records"] > 0 for lab in age_rule["labels"])
    assert len(age_rule["labels"]) == 30 and age_rule["labels"][-1]["label"] == f"other ({carried - 29} labels)"


# -- verdicts --------------------------------------------------------------------------------------

@pytest.mark.slow
def test_verdict_states(project) -> None:
    with Problem.from_spec(project.spec("none.toml", release=None)) as problem:
        none = build_report(problem, plan_of(problem, POLICY))
    with Problem.from_spec(project.spec_path) as problem:  # a permissive criterion
        original = build_report(problem, plan_of(problem, problem.lattice.bottom()))
    # no criteria, no release: a spec without a [release] criterion fails the gate, with nothing checked
    assert none["summary"]["verdict"] == "failed" and none["risk"]["gate"]["checks"] == []
    assert any("declares no release criteria" in h for h in none["summary"]["headline"])
    assert original["summary"]["verdict"] == "failed"  # the original data, whatever the criteria
    assert any("allow_original_data" in h for h in original["summary"]["headline"])
    with Problem.from_spec(with_roles(project, "min_k = 1\nmax_risk = 0.5", "ok.toml")) as problem:
        passed = build_report(problem, plan_of(problem, POLICY))
    assert passed["summary"]["verdict"] == "passed"
    assert {c["figure"] for c in passed["risk"]["gate"]["checks"]} == {"k", "risk"}
    assert all(c["passed"] for c in passed["risk"]["gate"]["checks"])
    with Problem.from_spec(with_roles(project, "min_k = 5", "strict.toml")) as problem:
        failed = build_report(problem, plan_of(problem, POLICY))
        accepted = build_report(problem, plan_of(problem, POLICY), accept_risk="IRB 2026-114 approved k=1")
    for report, verdict in ((failed, "failed"), (accepted, "accepted"), (passed, "passed"), (none, "failed")):
        check_contract(report)
        assert report["summary"]["verdict"] == verdict
    check = failed["risk"]["gate"]["checks"][0]
    assert check == {"figure": "k", "value": float(failed["risk"]["figures"]["k"]), "limit": 5.0, "at_most": False,
                     "passed": False}
    assert any("fails the release gate" in h for h in failed["summary"]["headline"])
    assert any("IRB 2026-114" in h for h in accepted["summary"]["headline"])


# -- policy, rows and model --------------------------------------------------------------------------

def test_sample_rows(project) -> None:
    with Problem.from_spec(project.spec_path) as problem:
        synthetic = build_report(problem, plan_of(problem, POLICY))["policy"]["sample"]
        real = build_report(problem, plan_of(problem, POLICY), sample_rows=3)["policy"]["sample"]
    assert synthetic["source"] == "synthetic" and len(synthetic["rows"]) == 5
    assert synthetic["columns"] == real["columns"] == project.released_names
    assert real["source"] == "release" and len(real["rows"]) == 3
    ages = {r[synthetic["columns"].index("age")] for r in synthetic["rows"] + real["rows"]}
    assert ages <= {"0-17", "18-29", "30-44", "45-64", "65-89", "90-120"}
    assert all(r[synthetic["columns"].index("diagnosis")] == "(sensitive value)" for r in synthetic["rows"])


def test_without_safe_harbor_roles_the_row_is_skipped_with_a_note(project) -> None:
    with Problem.from_spec(project.spec_path) as problem:
        report = build_report(problem, plan_of(problem, POLICY),
                              command="deid-sql materialize spec.toml --out r.parquet")
    assert [r["name"] for r in report["risk"]["comparison"]] == ["this policy", "original data"]
    assert any("Safe Harbor is not compared" in a for a in report["risk"]["model"]["assumptions"])
    assert report["method"]["commands"]["release"] == "deid-sql materialize spec.toml --out r.parquet"
    assert report["method"]["commands"]["report"].startswith("deid-sql report ")
    assert [p["year"] for p in report["method"]["papers"]] == [2010, 2013]


def test_adversary_model_lists_parameters_and_thresholds(project) -> None:
    with Problem.from_spec(project.spec_path, risk="adversary") as problem:
        report = build_report(problem, plan_of(problem, POLICY))
    check_contract(report)
    model = report["risk"]["model"]
    assert model["adversary"]["parameters"]["access_cost"] == 100.0
    assert set(model["adversary"]["thresholds"]) == {"k", "k_prime", "k_prime_sunk"}
    assert any(f"k′ = {model['adversary']['thresholds']['k_prime']}" in a for a in model["assumptions"])
    assert "dissertation" in report["method"]["papers"][-1]["venue"]


# -- inputs: sidecar, policy file, frontier folder -------------------------------------------------

def one_line(e: pytest.ExceptionInfo[DeidError]) -> str:
    text = str(e.value)
    assert "\n" not in text and text
    return text


@pytest.mark.slow
def test_sidecar_of_this_spec_and_of_another(project, run) -> None:
    out = project.dir / "r.parquet"
    run("materialize", project.spec_path, "--policy", POLICY, "--out", out)
    path = sidecar_path(out)
    with Problem.from_spec(project.spec_path) as problem:
        sidecar = load_sidecar(path, problem)
        report = build_report(problem, plan_of(problem, sidecar["policy"]["text"]), sidecar=sidecar)
    check_contract(report)
    assert report["method"]["commands"]["release"] == read_sidecar(path)["reproduce"]["command"]
    assert report["method"]["commands"]["release"].startswith("deid-sql materialize ")
    assert report["summary"]["released"] is not None
    other = with_roles(project, name="other.toml")
    with Problem.from_spec(other) as problem:
        with pytest.raises(DeidError) as e:
            load_sidecar(path, problem)
    assert "another spec" in one_line(e) and str(path) in str(e.value)
    (project.dir / "junk.json").write_text("{", encoding="utf-8")
    with Problem.from_spec(project.spec_path) as problem:
        with pytest.raises(DeidError) as e:
            load_sidecar(project.dir / "junk.json", problem)
    assert "junk.json" in one_line(e)


@pytest.mark.slow
def test_policy_file_of_this_spec_and_of_another(project, run) -> None:
    out = project.dir / "policy.json"
    run("policy", "save", project.spec_path, "-p", POLICY, "--out", out)
    with Problem.from_spec(project.spec_path) as problem:
        text = policy_from_file(out, problem)
        assert text.text == problem.policy(POLICY).text() and text.suppression is None
    other = project.write_spec(project.spec_text().replace("max = 120", "max = 130"), "wide.toml")
    with Problem.from_spec(other) as problem:
        with pytest.raises(DeidError) as e:
            policy_from_file(out, problem)
    assert "another spec" in one_line(e) and "policy.json" in str(e.value)


@pytest.mark.slow
def test_frontier_placement_and_a_folder_of_another_problem(project) -> None:
    spec = with_roles(project, name="roles.toml")
    folder = project.dir / "frontier"
    with Problem.from_spec(spec) as problem:
        run_frontier(problem, folder, "shs", budget=40, seed=0, plots=False, k_values=())
        report = build_report(problem, plan_of(problem, POLICY), frontier=folder)
        metrics = problem.evaluate(POLICY)
        harbor = problem.evaluate(safe_harbor(problem).recoding)
    check_contract(report)
    place = report["frontier"]
    assert place["this"] == [metrics.risk, metrics.loss] and place["safe_harbor"] == [harbor.risk, harbor.loss]
    assert place["evaluations"] == 40 and place["points"]
    searched = json.loads((folder / "checkpoint.json").read_text())["state"]["searched"]
    assert place["dominated_by"] == sum(1 for r, u, _ in searched if r <= metrics.risk and u <= metrics.loss
                                        and (r < metrics.risk or u < metrics.loss))
    assert place["baselines"] == 1 and place["dominated_by_baselines"] == (  # k_values=(): Safe Harbor only
        ["Safe Harbor"] if harbor.risk < metrics.risk and harbor.loss < metrics.loss else [])
    with Problem.from_spec(project.spec_path) as problem:  # no roles: another spec, so another problem
        with pytest.raises(DeidError) as e:
            build_report(problem, plan_of(problem, POLICY), frontier=folder)
        assert "another problem" in one_line(e) and str(folder) in str(e.value)
        with pytest.raises(DeidError) as e:
            build_report(problem, plan_of(problem, POLICY), frontier=project.dir)
        assert "not a frontier run folder" in one_line(e)


@pytest.mark.slow
def test_sample_as_population_and_a_recoding(project) -> None:
    """``population = "sample"``: g = m, so both size histograms agree; Safe Harbor (a recoding, not a
    lattice policy) is reported like a policy, under its name."""
    with Problem.from_spec(project.spec(name="sampled.toml", population=None)) as problem:
        report = build_report(problem, plan_of(problem, POLICY))
    check_contract(report)
    sentence = "none: the sample is its own population (g = records in the released group)"
    assert report["data"]["population"] == report["risk"]["model"]["population"] == sentence
    # nothing is counted in a population: no population bars equal to the sample's, and the model says g = m
    assert report["risk"]["group_sizes"]["population"] is None and report["risk"]["model"]["group_sizes"] is None
    assert report["risk"]["model"]["name"].startswith("sample-based record risk (1/m)^γ")
    assert "number of released groups" in report["risk"]["model"]["expected_reidentifications"]
    with Problem.from_spec(with_roles(project, name="roles.toml")) as problem:
        harbor = safe_harbor(problem).recoding
        report = build_report(problem, plan_of(problem, harbor))
        metrics = problem.evaluate(harbor)
    check_contract(report)
    assert report["policy"]["text"] is None and report["policy"]["readable"] == "safe-harbor"
    assert report["risk"]["comparison"][0]["risk"] == report["risk"]["comparison"][1]["risk"] == metrics.risk


def test_the_report_names_the_account_and_machine_that_ran_it(project) -> None:
    import getpass
    import socket

    with Problem.from_spec(project.spec_path) as problem:
        report = build_report(problem, plan_of(problem, "age:cuts=18,65|zip:top"))
    assert report["summary"]["operator"] == f"{getpass.getuser()} on {socket.gethostname()}"


@pytest.mark.slow
def test_sample_rows_of_a_release_the_gate_refuses_never_leave(project) -> None:
    """Rows in a report are released rows: a release failing the gate shows none, unless accepted."""
    with Problem.from_spec(project.spec_path) as problem:
        with pytest.raises(ReleaseRefused, match="--sample-rows 3: the release fails the gate .*original data"):
            build_report(problem, plan_of(problem, problem.lattice.bottom()), sample_rows=3)
        bottom = plan_of(problem, problem.lattice.bottom())
        assert build_report(problem, bottom)["policy"]["sample"]["source"] == "synthetic"
    with Problem.from_spec(with_roles(project, "min_k = 5", "strict.toml")) as problem:
        with pytest.raises(ReleaseRefused, match="k .* must be >= 5"):
            build_report(problem, plan_of(problem, POLICY), sample_rows=3)
        accepted = build_report(problem, plan_of(problem, POLICY), sample_rows=3,
                                accept_risk="IRB 2026-114 approved k=1")
    assert accepted["policy"]["sample"]["source"] == "release" and len(accepted["policy"]["sample"]["rows"]) == 3


@pytest.mark.slow
def test_a_policy_a_baseline_dominates_is_told_so(project) -> None:
    """The issue's case: a policy the searched policies may not dominate, but a k-anonymity baseline
    does.  The frontier run records what it plots besides its search (baselines.csv), and the
    report names every baseline that has lower risk and lower loss than the release."""
    from deid_sql.report.release_html import render_html

    spec = with_roles(project, name="roles.toml")
    folder = project.dir / "frontier"
    candidates = ["sex:top|race:top|zip:digits=3", "age:top|race:top", "race:top|zip:top", POLICY]
    with Problem.from_spec(spec) as problem:
        run_frontier(problem, folder, "shs", budget=40, seed=0, plots=False, k_values=(2, 5))
        rows = list(csv.DictReader((folder / "baselines.csv").open(encoding="utf-8")))
        assert rows[0]["baseline"] == "Safe Harbor" and {r["baseline"] for r in rows[1:]} == {"2-anonymity",
                                                                                               "5-anonymity"}
        placed = {}
        for policy in candidates:
            m = problem.evaluate(policy)
            expected = sorted({r["baseline"] for r in rows if float(r["risk"]) <= m.risk and float(r["loss"]) <= m.loss
                               and (float(r["risk"]) < m.risk or float(r["loss"]) < m.loss)})
            report = build_report(problem, plan_of(problem, policy), frontier=folder)
            assert report["frontier"]["baselines"] == len(rows)
            assert report["frontier"]["dominated_by_baselines"] == expected, policy
            placed[policy] = report
    dominated = [r for r in placed.values() if r["frontier"]["dominated_by_baselines"]]
    assert dominated, "no candidate is dominated by a baseline: the test checks nothing"
    html = render_html(dominated[0])
    assert f"Dominated by {', '.join(dominated[0]['frontier']['dominated_by_baselines'])}</strong>" in html
    clean = [r for r in placed.values() if not r["frontier"]["dominated_by_baselines"]]
    if clean:
        assert "No baseline the run plots" in render_html(clean[0])
