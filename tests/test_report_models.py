"""The report says which risk model made its figures, and what to weigh beyond the gate.

Issue 31: a release judged by Benedetti–Franconi without a census was described as "(1/g)^γ"
over "population: sample", with population bars equal to the sample bars and no estimator
cited; a ``--levels`` report showed "policy text: None"; a pass with unique records showed
only a green "Passed".  Every risk model is built here on the project's data and its report
checked for the model's own description, population, group-size series and papers; the
cautions are checked against counts made independently from the groups.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deid_sql import Problem
from deid_sql.release.plan import plan_of
from deid_sql.report.release_html import render_html
from deid_sql.report.release_report import build_report

from .test_fulldomain import small_spec
from .test_nocensus_cli import skewed
from .test_release_html import Tree

POLICY = "age:cuts=18,30,45,65,90|zip:top"
SIZE = 50_000  # people; the project's source has 500 records (f = 0.01)
ROLES = {"age": 'role = "age"\n', "zip": 'role = "zip"\n'}


def no_census_spec(project, risk: str, name: str, extra: str = "") -> Path:
    text = project.spec_text(population=None).replace('population = "sample"', f"population = {{ size = {SIZE} }}")
    return project.write_spec(f'risk = "{risk}"\n' + text + extra, name)


def report_of(spec: Path, policy: str = POLICY, **kwargs: Any) -> dict[str, Any]:
    with Problem.from_spec(spec, **kwargs) as problem:
        return build_report(problem, plan_of(problem, policy))


def titles(papers: list[dict[str, Any]]) -> list[str]:
    return [f"{p['authors'].split(',')[0].split()[-1]} {p['year']}" for p in papers]


def page_tree(report: dict[str, Any]) -> Tree:
    tree = Tree(render_html(json.loads(json.dumps(report))))
    assert tree.errors == []
    return tree


# every model the spec can name: (risk, census?) → name start, papers the model must cite, γ used
MODELS = {
    "population": ("population-based record risk (1/g)^γ, g counted in the census table", ["Benitez 2010"], True),
    "adversary": ("adversary: P(re-identification) × loss", ["Xia 2017"], False),
    "benedetti-franconi": ("Benedetti–Franconi individual risk E[1/F | f = m]", ["Benedetti 1998", "Templ 2015"],
                           False),
    "pitman": ("population uniqueness by Pitman", ["Hoshino 2001"], False),
    "zayatz": ("population uniqueness by Zayatz", ["Zayatz 1991"], False),
    "snb": ("population uniqueness by SNB", ["Chen 1998", "Haas 1995"], False),
    "dankar": ("population uniqueness by Dankar", ["Dankar 2012", "Hoshino 2001", "Zayatz 1991", "Chen 1998"], False),
}


@pytest.mark.parametrize("risk", list(MODELS))
def test_every_risk_model_describes_itself_and_cites_its_papers(project, risk: str) -> None:
    census = risk in ("population", "adversary")
    if census:
        spec = project.spec_path
    elif risk == "pitman":  # Pitman fits a skewed source (on the uniform one its likelihood runs to α = 0)
        spec = skewed(project)
        spec.write_text(spec.read_text().replace('drop = ["patient_id"]', 'drop = ["patient_id", "sex", "race"]'))
    else:
        spec = no_census_spec(project, risk, f"{risk}.toml")
    report = report_of(spec, "zip:top" if risk == "pitman" else POLICY, risk=risk)
    model = report["risk"]["model"]
    name, cited, uses_gamma = MODELS[risk]
    assert model["key"] == risk and model["name"].startswith(name)
    assert titles(model["papers"]) == cited or set(cited) <= set(titles(model["papers"]))
    # the Method section cites the model's papers too, with what each is used for
    method = {f"{p['authors'].split(',')[0].split()[-1]} {p['year']}": p for p in report["method"]["papers"]}
    assert set(cited) <= set(method) and all(method[c]["title"] and method[c]["used_for"] for c in cited)
    assert (model["gamma"] is not None) == uses_gamma
    assert model["record_risk"] and model["expected_reidentifications"]
    # population lines and charts match the model: counted bars with a census only
    sizes = report["risk"]["group_sizes"]
    tree = page_tree(report)
    chart = tree.by_id("group-size-histogram")
    if census:
        assert model["population_source"] == "census" and isinstance(report["data"]["population"], dict)
        assert sizes["population"] is not None and "data-population" in chart.attrs
    else:
        assert model["population_source"] == "size" and sizes["population"] is None
        assert "data-population" not in chart.attrs and "population" not in chart.attrs["aria-label"]
        assert report["data"]["population"].startswith(f"no census: {SIZE:,} people (N)")
        assert "(1/g)" not in model["name"] and "sample only: there is no census" in model["group_sizes_note"]
        # every no-census estimator's figures are shown, and their papers cited
        assert {"Benedetti 1998", "Zayatz 1991", "Hoshino 2001", "Chen 1998", "Dankar 2012"} <= set(method)
        assert report["risk"]["no_census"]["after_suppression"] is None
        assert tree.has_id("no-census")
    text = tree.by_id("model-papers").text()
    assert all(p["title"] in text for p in model["papers"])
    assert tree.by_id("model-name").text() == model["name"]


def test_benedetti_franconi_never_claims_the_census_model(project) -> None:
    """Issue 31's page: the model, its figure, its population and its chart all Benedetti–Franconi's."""
    report = report_of(no_census_spec(project, "benedetti-franconi", "bf.toml"))
    model = report["risk"]["model"]
    assert "E[1/F | f = m]" in model["record_risk"] and "p = n/N = 0.01" in model["record_risk"]
    assert "global risk" in model["expected_reidentifications"]
    figure = report["risk"]["figures"]["expected_reidentifications"]
    listed = report["risk"]["no_census"]["before_suppression"]["benedetti_franconi"]["expected_reidentifications"]
    assert figure == pytest.approx(listed, rel=1e-12)  # the model's own figure, the one the gate judged
    assert report["method"]["parameters"]["gamma"] is None
    assert "g = m" not in report["method"]["parameters"]["population"]
    page = render_html(report)
    assert "(1/g)^γ" not in page and "population: sample" not in page


def test_weights_estimate_the_population_bars_and_say_so(project) -> None:
    text = project.spec_text(population=None).replace('drop = ["patient_id"]', 'drop = ["patient_id", "w"]')
    spec = project.write_spec(text + '\n[weights]\ncolumn = "w"\n', "weights.toml")
    import pyarrow as pa
    import pyarrow.csv as pacsv

    table = project.source.append_column("w", pa.array(np.full(project.source.num_rows, 40.0)))
    pacsv.write_csv(table, project.dir / "source.csv")
    report = report_of(spec)
    model = report["risk"]["model"]
    assert model["population_source"] == "weights" and model["group_sizes"].startswith("summed weights")
    assert "summed sampling weights" in model["name"]
    sizes = report["risk"]["group_sizes"]
    assert sizes["population"] is not None and sum(sizes["population"]) == sum(sizes["sample"])


def test_dankar_falling_back_is_a_caution(project) -> None:
    """The project's uniform source makes Pitman run to α = 0 on the original data: Dankar's rule
    takes Zayatz, and the report says so in the model, in its estimate and in the cautions."""
    report = report_of(no_census_spec(project, "dankar", "dankar.toml"), "bottom")
    estimate = report["risk"]["model"]["estimate"]
    assert estimate["estimator"] == "dankar" and estimate["model"] == "zayatz"
    assert estimate["fallback_from"] == "pitman" and "Pitman failed" in estimate["note"]
    kinds = [c["kind"] for c in report["summary"]["cautions"]]
    assert "fallback" in kinds
    caution = next(c["text"] for c in report["summary"]["cautions"] if c["kind"] == "fallback")
    assert "Dankar's rule took Zayatz because Pitman could not be fitted" in caution
    tree = page_tree(report)
    assert tree.by_id("model-estimate").attrs["data-fallback-from"] == "pitman"
    # the fit on this release is the one the gate used: π × sample uniques = the model's Σ r
    figures = report["risk"]["figures"]
    assert figures["mean_record_risk"] * figures["records"] == pytest.approx(
        min(1.0, estimate["share"]) * figures["sample_uniques"], rel=1e-9)


def test_a_pass_with_unique_records_carries_cautions(project) -> None:
    """``no_riskier_than = "safe-harbor"`` passes k = 1: the page says passed, and why to look twice."""
    qis = [q + next((r for n, r in ROLES.items() if f'"{n}"' in q), "") for q in project.DEFAULT_QIS]
    # max_confidence = 1 judges the sensitive diagnosis (and always holds): no caution of an unjudged column
    spec = project.write_spec(project.spec_text(qis=qis, release='no_riskier_than = "safe-harbor"\nmax_confidence = 1',
                                                population=None), "harbor.toml")
    policy = "age:cuts=18,30,45,65,90"
    with Problem.from_spec(spec) as problem:
        report = build_report(problem, plan_of(problem, policy))
        m, _, _ = problem.groups(policy)
    assert report["summary"]["verdict"] == "passed"
    figures = report["risk"]["figures"]
    uniques = int((m == 1).sum())
    at_risk = int(m[m <= 2].sum())  # 1/m ≥ 0.5: the sample is its own population, γ = 1
    assert figures["k"] == 1 and figures["sample_uniques"] == uniques > 0
    assert report["risk"]["at_risk"] == {"threshold": 0.5, "records": at_risk}
    assert report["risk"]["record_risk_histogram"]["counts"][-1] == at_risk  # the last bin: [0.5, 1]
    cautions = {c["kind"]: c["text"] for c in report["summary"]["cautions"]}
    assert set(cautions) == {"k1", "sample_uniques", "high_risk"}
    assert cautions["sample_uniques"].startswith(f"{uniques:,} records are unique in the release")
    assert cautions["high_risk"].startswith(f"{at_risk:,} records have a record risk of 0.5 or more")
    tree = page_tree(report)
    verdict = tree.by_id("verdict").text()
    assert verdict.startswith("Passed") and verdict.endswith("with 3 cautions below")
    box = tree.by_id("cautions")
    assert box.attrs["data-cautions"] == "3"
    assert [n.attrs["data-kind"] for n in box.walk() if n.tag == "li"] == ["k1", "sample_uniques", "high_risk"]


def test_no_caution_says_none(project) -> None:
    # the sensitive diagnosis judged by a criterion that always holds: else its caution would show
    spec = project.write_spec(project.spec_text(release="max_record_risk = 1.0\nmax_confidence = 1"), "judged.toml")
    report = report_of(spec, "top")
    assert report["summary"]["cautions"] == [] and report["risk"]["figures"]["k"] > 1
    tree = page_tree(report)
    assert tree.by_id("cautions").attrs["data-cautions"] == "0"
    assert tree.by_id("cautions").text().startswith("Cautions None:")
    assert "caution" not in tree.by_id("verdict").text()


def test_levels_and_every_kind_of_recoding_are_named(run, tmp_path: Path) -> None:
    """``--levels`` shows the level vector, never "None"; a scattered hierarchy level and Safe
    Harbor are named by the text or option that gives them again; a suppression is part of it."""
    spec = small_spec(tmp_path, release="max_record_risk = 1.0")
    out = tmp_path / "levels.html"
    run("report", spec, "--levels", "age:2|race:1|zip:1", "--out", out)
    twin = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    policy = twin["policy"]
    assert policy["kind"] == "hierarchy levels" and policy["named"] == "age:2|sex:0|race:1|zip:1"
    assert policy["arguments"] == "--levels 'age:2|sex:0|race:1|zip:1'"
    tree = Tree(out.read_text(encoding="utf-8"))
    named = tree.by_id("policy-text")
    assert named.text() == "age:2|sex:0|race:1|zip:1" and named.attrs["data-kind"] == "hierarchy levels"
    assert "None" not in tree.by_id("policy").text().split("What an analyst will see")[0]
    with Problem.from_spec(spec) as problem:
        scattered = build_report(problem, plan_of(problem, "race:level=1"))["policy"]
        suppressed = build_report(problem, plan_of(problem, levels="age:2|race:1|zip:1", suppression=3))["policy"]
    assert scattered["kind"] == "policy text" and "race:level=1" in scattered["named"]
    assert suppressed["arguments"] == "--levels 'age:2|sex:0|race:1|zip:1' --suppress-below 3"
    assert "fewer than 3 records" in suppressed["suppression"]["rule"]


def test_safe_harbor_is_named_by_its_option(project) -> None:
    qis = [q + next((r for n, r in ROLES.items() if f'"{n}"' in q), "") for q in project.DEFAULT_QIS]
    spec = project.write_spec(project.spec_text(qis=qis), "roles.toml")
    from deid_sql.release.safe_harbor import safe_harbor

    with Problem.from_spec(spec) as problem:
        report = build_report(problem, plan_of(problem, safe_harbor(problem).recoding))
    assert report["policy"]["kind"] == "recoding" and report["policy"]["arguments"] == "--policy safe-harbor"
    assert Tree(render_html(report)).by_id("policy-text").text().startswith("safe-harbor")


def test_figures_before_and_after_suppression_are_labelled(project) -> None:
    """Issue 31's three unlabelled figures: the policy's (before suppression), the release's (after),
    and the original data's, each under its own name — here without a census, where the
    no-census estimates are listed before and after suppression too."""
    spec = no_census_spec(project, "benedetti-franconi", "bf.toml")
    with Problem.from_spec(spec) as problem:
        report = build_report(problem, plan_of(problem, POLICY, suppression=3))
        policy = problem.evaluate(POLICY)
    risk = report["risk"]
    assert [r["name"] for r in risk["comparison"]] == ["this policy, before suppression",
                                                       "this release, after suppression", "original data"]
    before, after = risk["comparison"][0], risk["comparison"][1]
    assert before["expected_reidentifications"] == policy.expected_reidentifications == \
        risk["before_suppression"]["expected_reidentifications"]
    assert after["expected_reidentifications"] == risk["figures"]["expected_reidentifications"]
    assert risk["figures"]["suppressed"] > 0 and risk["before_suppression"]["suppressed"] == 0
    nc = risk["no_census"]
    assert nc["before_suppression"]["benedetti_franconi"]["expected_reidentifications"] == pytest.approx(
        before["expected_reidentifications"], rel=1e-12)
    assert nc["after_suppression"]["benedetti_franconi"]["expected_reidentifications"] == pytest.approx(
        after["expected_reidentifications"], rel=1e-12)
    tree = page_tree(report)
    row = tree.by_id("figure-expected_reidentifications")
    assert float(row.attrs["data-before"]) == before["expected_reidentifications"]
    assert float(row.attrs["data-value"]) == after["expected_reidentifications"]
    headers = [n.text() for n in tree.by_id("figures").walk() if n.tag == "th"]
    assert headers == ["figure", "before suppression", "released, after suppression"]
    assert [n.text() for n in tree.by_id("no-census").walk() if n.tag == "th"][1:] == ["before suppression",
                                                                                         "after suppression"]
    assert "benedetti franconi" not in report["method"]["parameters"]  # no unlabelled figure in Method


def test_the_record_risk_histogram_shows_the_tail_on_a_log_scale(project) -> None:
    report = report_of(project.spec(name="sampled.toml", population=None))
    tree = page_tree(report)
    chart = tree.by_id("record-risk-histogram")
    assert chart.attrs["data-scale"] == "log"
    counts = report["risk"]["record_risk_histogram"]["counts"]
    bars = [n for n in chart.walk() if n.tag == "rect"]
    for bar, count in zip(bars, counts):  # every bin holding a record has a visible bar and its count
        assert (float(bar.attrs["height"]) >= 10) == (count > 0)
    labels = [n.text() for n in chart.walk() if n.attrs.get("class") == "bar-count"]
    assert labels == [f"{c:,}" for c in counts if c]
    assert re.search(r"records at risk 0\.5 or more", tree.by_id("risk").text())
