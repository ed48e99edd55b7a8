"""The release report's page (deid_sql/report/release_html.py) rendered from a sample report dict.

The page is parsed back with ``html.parser`` into a small tree (failing on any tag closed out
of order) and its SVG charts with ``xml.etree``, so the tests compare what a browser would
see — element ids, ``data-`` values, text — with the dict, not substrings of markup.
"""

from __future__ import annotations

import copy
import importlib.resources
import json
import re
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from fnmatch import fnmatch
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from deid_sql.release.plan import plan_of
from deid_sql.report.release_html import fraction, render_html
from deid_sql.report.svg_charts import nice_ceiling, readable_number, share_text, tick_text

from .report_sample import sample_report, sample_report_with_frontier

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
SECTIONS = ["summary", "data", "policy", "risk", "utility", "frontier", "method", "attestation"]


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)  # text directly inside, in order

    def text(self) -> str:
        return " ".join(" ".join([*self.parts, *(c.text() for c in self.children)]).split())

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()


class Tree(HTMLParser):
    """The page as nested Nodes; ``errors`` lists every end tag that does not close the open one."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.root = Node("#root", {})
        self.stack = [self.root]
        self.errors: list[str] = []
        self.feed(page)
        self.close()
        if len(self.stack) != 1:
            self.errors.append(f"unclosed: {[n.tag for n in self.stack[1:]]}")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if self.stack[-1].tag != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1].tag}> at {self.getpos()}")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.stack[-1].parts.append(data)

    def by_id(self, ident: str) -> Node:
        found = [n for n in self.root.walk() if n.attrs.get("id") == ident]
        assert len(found) == 1, f"{len(found)} elements with id={ident!r}"
        return found[0]

    def has_id(self, ident: str) -> bool:
        return any(n.attrs.get("id") == ident for n in self.root.walk())


def parsed(report: dict[str, Any]) -> tuple[str, Tree]:
    page = render_html(report)
    tree = Tree(page)
    assert tree.errors == []
    return page, tree


def number(text: str) -> float:
    return float(text)


@pytest.fixture(scope="module")
def plain() -> tuple[str, Tree]:
    return parsed(sample_report())


@pytest.fixture(scope="module")
def with_frontier() -> tuple[str, Tree]:
    return parsed(sample_report_with_frontier())


def test_sections_in_order_and_frontier_only_when_given(plain, with_frontier):
    page, tree = with_frontier
    starts = [page.index(f'<section id="{s}"') for s in SECTIONS]
    assert starts == sorted(starts)
    headings = [n.text() for n in tree.root.walk() if n.tag == "h2"]
    assert [h.split(".")[0] for h in headings] == [str(i) for i in range(1, 9)]
    page, tree = plain
    assert not tree.has_id("frontier") and 'id="frontier' not in page
    starts = [page.index(f'<section id="{s}"') for s in SECTIONS if s != "frontier"]
    assert starts == sorted(starts)
    assert [n.text().split(".")[0] for n in tree.root.walk() if n.tag == "h2"] == [str(i) for i in range(1, 8)]


def test_page_is_well_formed_and_every_svg_is_xml(with_frontier):
    page, tree = with_frontier
    svgs = re.findall(r"<svg\b.*?</svg>", page, flags=re.S)
    assert len(svgs) == 2 + 2 * len(sample_report()["utility"]["marginals"]) + 1
    for svg in svgs:
        ET.fromstring(svg)  # raises on any unbalanced or unescaped markup


def test_values_from_data_stay_text():
    report = sample_report()
    hostile = "<script>alert(1)</script>"
    quoted = 'bp "systolic" & \'diastolic\''
    report["policy"]["rules"][2]["labels"][0]["label"] = hostile
    report["utility"]["marginals"][2]["after"][0]["label"] = hostile
    report["data"]["columns"][7]["name"] = quoted
    report["policy"]["sample"]["columns"][5] = quoted
    report["summary"]["headline"].append(hostile)
    report["summary"]["spec"] = 'a"b<c>.toml'
    page, tree = parsed(report)
    assert "<script" not in page and "alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    labels = [n for n in tree.root.walk() if n.attrs.get("data-label") == hostile]
    assert {n.tag for n in labels} == {"tr", "rect"}  # the policy table's row and the bar of the marginal
    assert any(n.text() == hostile for n in tree.by_id("headline").children)
    columns = [n for n in tree.by_id("columns").walk() if "data-column" in n.attrs]
    assert columns[7].attrs["data-column"] == quoted and columns[7].children[0].text() == quoted
    assert tree.by_id("summary-spec").text() == 'a"b<c>.toml'
    for svg in re.findall(r"<svg\b.*?</svg>", page, flags=re.S):
        ET.fromstring(svg)


def test_nothing_is_fetched(with_frontier):
    page, tree = with_frontier
    assert not re.search(r"""<[^>]*\s(?:src|href|xlink:href|srcset|action|poster)\s*=""", page, flags=re.I)
    assert not re.search(r"url\s*\(|@import|https?://", page, flags=re.I)
    fetching = {"src", "href", "xlink:href", "srcset", "action", "poster", "data", "background"}
    assert not [n.attrs for n in tree.root.walk() if set(n.attrs) & fetching]
    assert not {n.tag for n in tree.root.walk()} & {"script", "link", "img", "iframe", "object", "embed", "image",
                                                     "use", "base", "form"}


def test_size_of_a_large_frontier_stays_small():
    report = sample_report_with_frontier(15_000)
    zips = [f"{z:05d}" for z in range(37000, 38000)]
    report["utility"]["marginals"][3]["before"] = [{"label": z, "share": 1 / len(zips)} for z in zips]
    page, _ = parsed(report)
    assert len(page.encode()) < 1_000_000
    assert len(render_html(sample_report()).encode()) < 200_000


def test_print_stylesheet(plain):
    page, _ = plain
    style = re.search(r"<style>(.*?)</style>", page, flags=re.S).group(1)
    assert "@page{margin:" in style
    printed = style[style.index("@media print"):]
    assert "break-inside:avoid" in printed and re.search(r"\btr\b[^{]*\{[^}]*break-inside:avoid", printed)
    assert re.search(r"section[^{]*\{[^}]*break-inside:avoid", printed)
    assert "svg.chart{max-width:100%" in printed
    assert "background:#fff" in printed


def test_summary_and_figures_equal_the_dict(plain):
    report = sample_report()
    _, tree = plain
    verdict = tree.by_id("verdict")
    assert verdict.attrs["data-verdict"] == "passed" and "verdict-passed" in verdict.attrs["class"]
    assert [li.text() for li in tree.by_id("headline").children] == report["summary"]["headline"]
    assert tree.by_id("summary-policy").text() == report["summary"]["policy"]
    assert tree.by_id("created-at").attrs["datetime"] == report["created_at"]
    for key, value in report["risk"]["figures"].items():
        row = tree.by_id(f"figure-{key}")
        assert row.attrs["data-figure"] == key and number(row.attrs["data-value"]) == value
        assert type(json.loads(row.attrs["data-value"])) is type(value)
    assert tree.by_id("figure-max_record_risk").text().endswith("0.05 (1/20)")
    assert tree.by_id("figure-records").text().endswith("20,000")
    assert tree.by_id("figure-risk").text().endswith("0.000232")


def test_risk_tables_and_charts_equal_the_dict(plain):
    report = sample_report()
    risk = report["risk"]
    _, tree = plain
    rows = [n for n in tree.by_id("comparison").walk() if n.tag == "tr" and "data-name" in n.attrs]
    assert [r.attrs["data-name"] for r in rows] == [c["name"] for c in risk["comparison"]]
    for row, expected in zip(rows, risk["comparison"]):
        cells = {n.attrs["data-key"]: number(n.attrs["data-value"]) for n in row.walk() if "data-key" in n.attrs}
        assert cells == {k: v for k, v in expected.items() if k != "name"}
    checks = [n for n in tree.by_id("gate-checks").walk() if n.tag == "tr" and "data-figure" in n.attrs]
    assert [(c.attrs["data-figure"], number(c.attrs["data-value"]), number(c.attrs["data-limit"]),
             c.attrs["data-passed"]) for c in checks] == [
        (c["figure"], c["value"], c["limit"], "true" if c["passed"] else "false") for c in risk["gate"]["checks"]]
    assert "≤" in checks[0].text() and "≥" in checks[1].text()
    hist = tree.by_id("record-risk-histogram")
    assert json.loads(hist.attrs["data-edges"]) == risk["record_risk_histogram"]["edges"]
    assert json.loads(hist.attrs["data-records"]) == risk["record_risk_histogram"]["counts"]
    bars = [n for n in hist.walk() if n.tag == "rect"]
    assert [number(b.attrs["data-count"]) for b in bars] == risk["record_risk_histogram"]["counts"]
    sizes = tree.by_id("group-size-histogram")
    assert json.loads(sizes.attrs["data-sample"]) == risk["group_sizes"]["sample"]
    assert json.loads(sizes.attrs["data-population"]) == risk["group_sizes"]["population"]
    assert all(a in tree.by_id("assumptions").text() for a in risk["model"]["assumptions"])


def test_policy_data_and_utility_equal_the_dict(plain):
    report = sample_report()
    _, tree = plain
    rules = [n for n in tree.by_id("policy-rules").children if n.attrs.get("class") == "rule"]
    assert [r.attrs["data-qi"] for r in rules] == [r["qi"] for r in report["policy"]["rules"]]
    for node, rule in zip(rules, report["policy"]["rules"]):
        assert rule["words"] in node.text()
        rows = [n for n in node.walk() if "data-label" in n.attrs]
        assert [(r.attrs["data-label"], int(r.attrs["data-records"])) for r in rows] == [
            (lab["label"], lab["records"]) for lab in rule["labels"]]
    assert tree.by_id("policy-sha256").text() == report["policy"]["sha256"]
    assert tree.by_id("sample-source").attrs["data-source"] == "synthetic" and "synthetic" in tree.by_id(
        "sample-source").text()
    assert len([n for n in tree.by_id("sample-rows").walk() if n.tag == "tr"]) == 1 + 5
    roles = [(n.attrs["data-column"], n.attrs["data-role"]) for n in tree.by_id("columns").walk()
             if "data-column" in n.attrs]
    assert roles == [(c["name"], c["role"]) for c in report["data"]["columns"]]
    assert report["data"]["source"]["sha256"] in tree.by_id("sources").text()
    utility = report["utility"]
    kept = [(n.attrs["data-qi"], number(n.attrs["data-value"])) for n in tree.by_id("information-kept").walk()
            if "data-qi" in n.attrs]
    assert kept == [(q["qi"], q["information_kept"]) for q in utility["per_qi"]]
    for i, m in enumerate(utility["marginals"]):
        for side in ("before", "after"):
            chart = tree.by_id(f"marginal-{i}-{side}")
            assert json.loads(chart.attrs["data-shares"]) == [x["share"] for x in m[side]]
            assert [b.attrs["data-label"] for b in chart.walk() if b.tag == "rect"] == [x["label"] for x in m[side]]
    assert [n.text() for n in tree.by_id("attestation").walk() if n.tag == "tr"] == report["attestation"]["fields"]
    assert tree.by_id("command-report").text() == report["method"]["commands"]["report"]
    assert all(p["title"] in tree.by_id("papers").text() for p in report["method"]["papers"])


def test_frontier_section_marks_this_policy_and_safe_harbor(with_frontier):
    report = sample_report_with_frontier()
    _, tree = with_frontier
    section = tree.by_id("frontier")
    assert int(section.attrs["data-dominated-by"]) == 0 and int(section.attrs["data-evaluations"]) == 2000
    assert tree.by_id("dominated").text().startswith("No searched policy dominates this one")
    for ident, key in (("frontier-this", "this"), ("frontier-safe-harbor", "safe_harbor")):
        point = tree.by_id(ident)
        assert [number(point.attrs["data-risk"]), number(point.attrs["data-loss"])] == report["frontier"][key]
    report["frontier"]["dominated_by"] = 3
    report["frontier"]["safe_harbor"] = None
    _, tree = parsed(report)
    assert tree.by_id("dominated").text().startswith("Dominated by 3 searched policies")
    assert not tree.has_id("frontier-safe-harbor")


@pytest.mark.parametrize("verdict", ["failed", "accepted", "no criteria"])
def test_other_verdicts_and_no_release(verdict):
    report = copy.deepcopy(sample_report())
    report["summary"]["verdict"] = report["risk"]["gate"]["verdict"] = verdict
    report["summary"]["released"] = None
    report["method"]["commands"]["release"] = None
    report["data"]["population"] = "none: the sample is its own population (g = records in the released group)"
    report["policy"]["sample"] = {"source": "release", "columns": ["age"], "rows": [["[40-49]"]]}
    if verdict == "no criteria":
        report["risk"]["gate"] = {"criteria": {}, "checks": [], "verdict": verdict}
    _, tree = parsed(report)
    node = tree.by_id("verdict")
    assert node.attrs["data-verdict"] == verdict and f"verdict-{verdict.replace(' ', '-')}" in node.attrs["class"]
    assert "not released" in tree.by_id("summary-released").text()
    assert not tree.has_id("command-release")
    assert "sample is its own population" in tree.by_id("sources").text()
    assert "from the release" in tree.by_id("sample-source").text()
    assert tree.by_id("gate-checks").attrs["data-verdict"] == verdict


def test_a_report_missing_a_contract_key_is_refused_not_rendered_blank():
    report = sample_report()
    report["risk"]["model"].pop("gamma")
    with pytest.raises(ValueError, match="contract: .*gamma"):
        render_html(report)
    with pytest.raises(ValueError, match="not a deid-sql-report version 1 dict"):
        render_html({**sample_report(), "version": 2})


def test_empty_charts_still_render():
    """No records at risk, no searched policy, a QI without released labels: the page still parses."""
    report = sample_report_with_frontier(0)
    report["risk"]["record_risk_histogram"] = {"edges": [], "counts": []}
    report["risk"]["group_sizes"] = {"edges": [1], "sample": [], "population": []}
    report["utility"]["marginals"][0]["after"] = []
    report["frontier"]["this"] = [0.0, 0.0]
    page, tree = parsed(report)
    for svg in re.findall(r"<svg\b.*?</svg>", page, flags=re.S):
        ET.fromstring(svg)
    assert tree.by_id("frontier-this").attrs["data-risk"] == "0.0"


@pytest.mark.parametrize(("value", "text"), [
    (1234, "1,234"), (20000.0, "20,000"), (0.000232, "0.000232"), (0.6112, "0.611"), (2640.3, "2,640.3"),
    (130.6324, "130.6"), (41.74, "41.7"), (0, "0"), (1.0, "1"), (3.056e-05, "0.0000306"), (None, "–"),
    (True, "yes")])
def test_readable_numbers(value, text):
    assert readable_number(value) == text


def test_number_helpers():
    assert (fraction(0.05), fraction(1.0), fraction(3.056e-05), fraction(0), fraction(7)) == ("1/20", "1/1", "", "",
                                                                                              "")
    assert (share_text(0.512), share_text(0.0005), share_text(0)) == ("51.2 %", "0.05 %", "0 %")
    assert (tick_text(1e-05), tick_text(0.05), tick_text(100000), tick_text(1e6)) == ("1e-5", "0.05", "100,000",
                                                                                      "1e6")
    assert (nice_ceiling(16200), nice_ceiling(25), nice_ceiling(0.2), nice_ceiling(0)) == (20000, 50, 0.2, 1.0)


def test_template_ships_as_package_data():
    """The page's template is read through the package, so a wheel must carry it."""
    shipped = importlib.resources.files("deid_sql.report").joinpath("templates", "release_report.html.j2")
    assert shipped.is_file()
    root = Path(__file__).resolve().parents[1]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    templates = sorted((root / "deid_sql" / "report" / "templates").iterdir())
    assert templates and all(any(fnmatch(f"templates/{t.name}", g) for g in globs["deid_sql.report"])
                             for t in templates)


def test_a_built_report_renders_with_its_exact_figures(project):
    """The renderer against the builder (not the sample): the project's report with a frontier run."""
    from deid_sql import Problem
    from deid_sql.jobs.frontier import run_frontier
    from deid_sql.report.release_report import build_report

    folder = project.dir / "frontier"
    with Problem.from_spec(project.spec_path) as problem:
        run_frontier(problem, folder, "shs", budget=20, seed=0, plots=False, k_values=())
        report = build_report(problem, plan_of(problem, "age:cuts=18,30,45,65,90|zip:top"), frontier=folder,
                              sample_rows=5)
    page, tree = parsed(json.loads(json.dumps(report)))  # what the JSON twin holds renders the same
    assert page == render_html(report)
    for key, value in report["risk"]["figures"].items():
        assert json.loads(tree.by_id(f"figure-{key}").attrs["data-value"]) == value
    assert tree.by_id("verdict").attrs["data-verdict"] == report["summary"]["verdict"]
    assert [number(v) for v in (tree.by_id("frontier-this").attrs[f"data-{k}"] for k in ("risk", "loss"))] == \
        report["frontier"]["this"]
    assert len(page.encode()) < 1_000_000
    for svg in re.findall(r"<svg\b.*?</svg>", page, flags=re.S):
        ET.fromstring(svg)


def test_the_summary_says_who_produced_the_report() -> None:
    report = sample_report()
    assert 'id="summary-operator">custodian on records-host<' in render_html(report)
    report["summary"]["operator"] = None
    assert 'id="summary-operator">(not recorded)<' in render_html(report)
