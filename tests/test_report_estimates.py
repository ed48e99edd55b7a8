"""Issue 42: the headline and the estimator table cannot contradict each other.

A reviewer read "expected re-identifications 0 … no person's risk above 0" in the summary (Dankar's
rule, the gate's model) and Benedetti–Franconi's 1.63 in the table below.  The headline now gives the
gate's figure with its model named; the estimator table has a row for the gate's model holding the
same number, and a row of expected re-identifications for each estimator; when they differ the
summary states the range and a caution names the most pessimistic estimator with its figure.  The
sidecar says the population the figures used (a given size is not "sample").
"""

from __future__ import annotations

from typing import Any

import pytest

from deid_sql import Problem
from deid_sql.release.plan import plan_of
from deid_sql.report.estimates import estimates
from deid_sql.report.release_report import build_report
from deid_sql.report.svg_charts import readable_number

from .test_report_models import POLICY, no_census_spec, page_tree, report_of


def _check_consistent(report: dict[str, Any]) -> None:
    """The headline's figure is the gate's, its model named; the table's gate row and the gate
    model's own estimator row hold it; disagreement is stated exactly when the range is non-zero."""
    figure = report["risk"]["figures"]["expected_reidentifications"]
    est = report["risk"]["estimates"]
    headline = report["summary"]["headline"]
    assert est["gate"]["expected_reidentifications"] == figure
    assert headline[0].startswith(f"expected re-identifications {readable_number(figure)} among ")
    assert f"(risk model: {est['gate']['name']})" in headline[0]
    nc = report["risk"]["no_census"]
    released = (nc["after_suppression"] or nc["before_suppression"]) if nc else None
    key = report["risk"]["model"]["key"]
    if released is not None and key in ("pitman", "zayatz", "snb", "dankar"):
        assert released[key]["expected_reidentifications"] == pytest.approx(figure, rel=1e-9, abs=1e-12)
    if released is not None and key == "benedetti-franconi":
        assert released["benedetti_franconi"]["expected_reidentifications"] == pytest.approx(figure, rel=1e-9)
    values = [figure, *(e["expected_reidentifications"] for e in est["estimators"])]
    assert est["range"] == [min(values), max(values)]
    kinds = [c["kind"] for c in report["summary"]["cautions"]]
    stated = [h for h in headline if "estimators on this page disagree" in h]
    if est["range"][1] - est["range"][0] > 1e-9 * max(1.0, est["range"][1]):
        worst = est["most_pessimistic"]
        assert worst["expected_reidentifications"] == est["range"][1]
        assert len(stated) == 1 and readable_number(est["range"][0]) in stated[0]
        assert readable_number(est["range"][1]) in stated[0]
        assert ("the gate's model the highest" if worst["gate"] else f"the highest by {worst['name']};") in stated[0]
        (caution,) = [c for c in report["summary"]["cautions"] if c["kind"] == "estimators_disagree"]
        assert worst["name"] in caution["text"] or "the gate's model is the most pessimistic" in caution["text"]
        assert readable_number(worst["expected_reidentifications"]) in caution["text"]
    else:
        assert stated == [] and "estimators_disagree" not in kinds
    # the page: the headline's figure is the table's gate row, exactly
    tree = page_tree(report)
    if nc:
        (row,) = [n for n in tree.root.walk() if n.attrs.get("data-estimate") == "gate"]
        cells = [n for n in row.walk() if n.tag == "td" and "data-value" in n.attrs]
        assert float(cells[-1].attrs["data-value"]) == figure
        assert tree.has_id("estimates-disagree") == est["disagree"]


@pytest.mark.parametrize("risk", ["dankar", "zayatz", "snb", "benedetti-franconi", "population"])
def test_the_headline_is_the_gate_models_figure(project, risk: str) -> None:
    report = report_of(no_census_spec(project, risk, f"estimates-{risk}.toml"))
    assert report["risk"]["model"]["key"] == risk
    _check_consistent(report)


def test_disagreeing_estimators_are_stated_with_the_range(project) -> None:
    """Dankar on the project's data finds fewer re-identifications than Benedetti–Franconi: the
    summary says so, with both ends, and the caution names Benedetti–Franconi."""
    report = report_of(no_census_spec(project, "dankar", "estimates-disagree.toml"))
    est = report["risk"]["estimates"]
    assert est["disagree"], est
    _check_consistent(report)
    assert report["summary"]["cautions"][0]["kind"] == "estimators_disagree"


def test_with_suppression_the_released_groups_are_compared(project) -> None:
    spec = no_census_spec(project, "dankar", "estimates-suppressed.toml")
    with Problem.from_spec(spec) as problem:
        report = build_report(problem, plan_of(problem, POLICY, suppression=5))
    assert report["risk"]["no_census"]["after_suppression"] is not None
    _check_consistent(report)


def test_a_census_has_one_estimate(project) -> None:
    report = report_of(project.write_spec(project.spec_text(), "estimates-census.toml"))
    est = report["risk"]["estimates"]
    assert est["estimators"] == [] and not est["disagree"] and est["most_pessimistic"] is None
    assert est["gate"]["name"].startswith("population-based") and "census" in est["gate"]["name"]
    _check_consistent(report)


def test_agreeing_estimators_say_nothing_more() -> None:
    model = {"key": "benedetti-franconi", "population_source": "size"}
    column = {"sampling_fraction": 0.01, "sample_uniques": 0,
              **{k: {"population_uniques": 0.0, "expected_reidentifications": 0.0}
                 for k in ("pitman", "zayatz", "snb", "dankar")},
              "benedetti_franconi": {"expected_reidentifications": 0.0}}
    est = estimates({"expected_reidentifications": 0.0}, model, {"before_suppression": column,
                                                                  "after_suppression": None})
    assert not est["disagree"] and est["range"] == [0.0, 0.0] and est["most_pessimistic"] is None


def test_the_sidecar_names_the_population_the_figures_used(project, tmp_path) -> None:
    """A given size is recorded as that size, not as "sample"."""
    from deid_sql.release.sidecar import population_kind, population_without_census

    spec = no_census_spec(project, "dankar", "estimates-sidecar.toml")
    with Problem.from_spec(spec) as problem:
        assert population_without_census(problem.spec) == {"size": 50_000, "region": None}
        assert population_kind(problem.spec) == "size"
    with Problem.from_spec(project.write_spec(project.spec_text(population=None), "sample.toml")) as problem:
        assert population_without_census(problem.spec) == "sample" and population_kind(problem.spec) == "sample"
