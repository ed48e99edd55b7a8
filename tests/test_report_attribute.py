"""The report's "attribute disclosure" section (issue 40): per sensitive column the gate judged, the
gate's figures and verdicts, the worst group by its labels and the histogram of the largest share
per group, on the page and in its JSON twin alike; the cautions warn of a sensitive column no
attribute criterion judges; a spec without sensitive columns reads as before.

The problem is the gate's: 200 persons in groups of 5, the group age 20-29 at clinic C0 all B20
(``tests.test_attribute_gate``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deid_sql import Problem
from deid_sql.release.plan import plan_of
from deid_sql.release.unit import PERSONS
from deid_sql.report.cautions import cautions
from deid_sql.report.release_html import render_html
from deid_sql.report.release_report import build_report
from tests.test_attribute_gate import POLICY, write_problem
from tests.test_release_report import check_contract
from tests.test_report_persons import visible

THREE = 'max_confidence = 0.8\nmin_l = 2\nmax_t = 0.5\nt_distance = "equal"'
UNJUDGED = "Column diagnosis is released unchanged and no attribute criterion judges it"


def report_of(tmp_path: Path, run, release: str, policy: str = POLICY) -> tuple[dict, Path]:
    """The page and its JSON twin of ``policy`` (``deid-sql report``; a failing gate still reports)."""
    spec = write_problem(tmp_path, release)
    out = tmp_path / "report.html"
    run("report", spec, "--policy", policy, "--out", out)
    return json.loads(out.with_suffix(".json").read_text(encoding="utf-8")), out


def test_the_section_shows_the_gates_figures_the_worst_group_and_the_verdicts(tmp_path: Path, run) -> None:
    data, page = report_of(tmp_path, run, THREE)
    assert data["summary"]["verdict"] == "failed"
    (a,) = data["risk"]["attribute"]
    assert a["column"] == "diagnosis" and a["groups"] == 40
    assert a["max_confidence"] == 1.0 and a["min_distinct_l"] == 1.0 and a["min_entropy_l"] == pytest.approx(1.0)
    assert a["max_t"] == pytest.approx(1 - 44 / 200) and a["max_presence"] is None  # population = "sample"
    assert a["criteria"] == {"min_l": 2, "max_t": 0.5, "max_confidence": 0.8, "t_distance": "equal"}
    assert a["worst_group"] == {"labels": {"age": "20-29", "clinic": "C0"}, "share": 1.0, "value": "B20",
                                "holding": 5.0, "of": 5.0}
    # the B20 group at 1; every other group holds five diagnoses, one person each: 1/5
    counts = a["confidence_histogram"]["counts"]
    assert sum(counts) == 40 and counts[-1] == 1 and counts[2] == 39  # 0.2 falls in [0.2, 0.3)
    checks = {c["criterion"]: c for c in a["checks"]}
    assert set(checks) == {"min_l", "max_t", "max_confidence"} and not any(c["passed"] for c in checks.values())
    assert "group age 20-29, clinic C0 holds 'B20' for 5 of 5 records" in checks["max_confidence"]["text"]
    # the page says the same, in the report's words
    text = "\n".join(visible(page))
    assert "What the released values reveal (attribute disclosure)" in text
    assert "Sensitive column" in text and "diagnosis" in text
    html = page.read_text(encoding="utf-8")
    assert 'data-figure="max_confidence" data-value="1.0"' in html
    assert 'id="attribute-0-confidence"' in html  # the histogram chart
    assert html.count('data-criterion="') == 3 and 'data-passed="false"' in html
    assert "5 of its 5 records hold" in text.replace("\n", " ")
    assert UNJUDGED not in text  # judged: no caution


def test_limits_that_allow_it_pass_and_the_figures_follow_the_policy(tmp_path: Path, run) -> None:
    """Ages in two halves: the B20 group shares its group with a diverse one (10 persons, 6 B20)."""
    data, _ = report_of(tmp_path, run, THREE, policy="age:cuts=40|clinic:bottom")
    assert data["summary"]["verdict"] == "passed"
    (a,) = data["risk"]["attribute"]
    assert a["max_confidence"] == pytest.approx(6 / 10) and all(c["passed"] for c in a["checks"])
    assert a["worst_group"]["labels"] == {"age": "20-39", "clinic": "C0"} and a["worst_group"]["value"] == "B20"
    assert sum(a["confidence_histogram"]["counts"]) == 20


def test_the_report_equals_the_gate_built_in_python(tmp_path: Path) -> None:
    """``build_report`` carries the gate's own figures: the sidecar's numbers, not a second count."""
    problem = Problem.from_spec(write_problem(tmp_path, "max_confidence = 1\nmin_entropy_l = 1"))
    report = build_report(problem, plan_of(problem, POLICY))
    check_contract(report)
    (a,) = report["risk"]["attribute"]
    assert sorted(c["criterion"] for c in a["checks"]) == ["max_confidence", "min_entropy_l"]
    assert a["worst_group"]["share"] == a["max_confidence"] == 1.0
    assert "attribute disclosure" in render_html(report)


def test_a_sensitive_column_without_criteria_is_a_caution(tmp_path: Path, run) -> None:
    data, page = report_of(tmp_path, run, "")
    assert data["risk"]["attribute"] == []
    kinds = [c["kind"] for c in data["summary"]["cautions"]]
    assert kinds.count("sensitive_unjudged") == 1
    (caution,) = [c["text"] for c in data["summary"]["cautions"] if c["kind"] == "sensitive_unjudged"]
    assert caution.startswith(UNJUDGED)
    text = "\n".join(visible(page))
    assert UNJUDGED in text and "attribute disclosure" not in text


def test_the_caution_names_each_unjudged_column_in_the_units_words() -> None:
    figures = {"records": 10, "suppressed": 0, "k": 5, "sample_uniques": 0, "max_record_risk": 0.2}
    out = cautions(figures, 0, {}, None, PERSONS, ["diagnosis", "drug"])
    assert [c["kind"] for c in out] == ["sensitive_unjudged"] * 2
    assert "diagnosis" in out[0]["text"] and "drug" in out[1]["text"] and "persons all hold" in out[0]["text"]
    assert cautions(figures, 0, {}, None) == []


def test_a_spec_without_sensitive_columns_reads_as_before(tmp_path: Path, run) -> None:
    """No sensitive column: no section, no caution; the page's cautions say none, as they did."""
    spec = write_problem(tmp_path, "")
    spec.write_text(spec.read_text(encoding="utf-8").replace('drop = ["pid"]\nsensitive = ["diagnosis"]',
                                                             'drop = ["pid", "diagnosis"]'), encoding="utf-8")
    out = tmp_path / "report.html"
    run("report", spec, "--policy", POLICY, "--out", out)
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert data["risk"]["attribute"] == [] and data["summary"]["cautions"] == []
    html = out.read_text(encoding="utf-8")
    assert 'id="attribute' not in html and "None: k is above 1" in html
