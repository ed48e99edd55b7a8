"""No label of a report chart is cut off at the chart's edge (issue 31: "50,00", "00.0 %").

An SVG has no layout engine: a ``<text>`` past the ``viewBox`` is simply not drawn.  Each test
here estimates every text's extent the way a browser would lay it out — a glyph width per
character class of the sans-serif font the page uses (Helvetica/Arial metrics: digits 0.556 em,
capitals about 0.67 em, lower case about 0.5 em …), the anchor, the font size, a rotation —
independently of ``svg_charts.text_width``, and checks that it lies inside the ``viewBox``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deid_sql.report.release_html import render_html
from deid_sql.report.svg_charts import bar_chart, histogram, paired_histogram, scatter

from .report_sample import sample_report, sample_report_with_frontier

SVG = "{http://www.w3.org/2000/svg}"
NARROW = set(" .,:;'|!ijl")
MEDIUM_NARROW = set("ftrI()[]-/")
WIDE = set("mwMW%@")


def glyph_em(c: str) -> float:
    """A character's advance width in em, by class (Helvetica/Arial metrics, rounded)."""
    if c in NARROW:
        return 0.25
    if c in MEDIUM_NARROW:
        return 0.31
    if c in WIDE:
        return 0.85
    if c.isdigit():
        return 0.556
    if c.isascii() and c.isupper():
        return 0.66
    if c.isascii():
        return 0.5
    return 1.0  # "…", symbols and letters outside ASCII: a full em


def extent(node: ET.Element) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) of a ``<text>`` in the SVG's user units."""
    size = float(node.get("font-size", "11"))
    width = sum(glyph_em(c) for c in "".join(node.itertext())) * size
    anchor = node.get("text-anchor", "start")
    transform = node.get("transform")
    if transform:  # translate(x y) rotate(-90): the text runs upwards from (x, y)
        match = re.fullmatch(r"translate\(([-\d.]+) ([-\d.]+)\) rotate\(-90\)", transform)
        assert match, transform
        x, y = float(match[1]), float(match[2])
        lo = {"start": 0.0, "middle": -width / 2, "end": -width}[anchor]
        return x - 0.8 * size, y - (lo + width), x + 0.25 * size, y - lo
    x, y = float(node.get("x", "0")), float(node.get("y", "0"))
    left = {"start": x, "middle": x - width / 2, "end": x - width}[anchor]
    return left, y - 0.8 * size, left + width, y + 0.25 * size


def assert_inside(svg: str) -> int:
    """Every ``<text>`` of ``svg`` inside its viewBox; the number of texts checked."""
    root = ET.fromstring(svg)
    _, _, w, h = (float(v) for v in root.get("viewBox", "").split())
    texts = [n for n in root.iter() if n.tag in ("text", f"{SVG}text") and "".join(n.itertext())]
    for node in texts:
        left, top, right, bottom = extent(node)
        label = f"{root.get('id')}: {''.join(node.itertext())!r}"
        assert left >= -0.5 and right <= w + 0.5, f"{label} runs from x {left:.1f} to {right:.1f} (0..{w})"
        assert top >= -0.5 and bottom <= h + 0.5, f"{label} runs from y {top:.1f} to {bottom:.1f} (0..{h})"
    return len(texts)


def svgs(page: str) -> list[str]:
    return re.findall(r"<svg\b.*?</svg>", page, flags=re.S)


def test_the_extent_check_catches_a_clipped_label() -> None:
    """The issue's "50,00": a wide tick centred on the chart's right edge fails the check."""
    clipped = ('<svg viewBox="0 0 100 40"><text x="98" y="20" text-anchor="middle" font-size="11">50,000</text></svg>')
    with pytest.raises(AssertionError, match="None: '50,000' runs from x"):
        assert_inside(clipped)
    assert assert_inside(clipped.replace('x="98"', 'x="70"')) == 1


def test_every_chart_of_the_sample_page_fits() -> None:
    page = render_html(sample_report_with_frontier())
    checked = [assert_inside(svg) for svg in svgs(page)]
    assert len(checked) == 2 + 2 * 4 + 1 and all(checked)


def test_the_issues_axes_fit() -> None:
    """Group sizes up to 50,000 and 1e6, share axes to 100 %, a long label on the left of a bar."""
    sizes = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000]
    assert_inside(paired_histogram("g", sizes, [("sample", [3] * 14, "#000"), ("population", [123456] * 14, "#111")],
                                   title="t", x_label="group size", y_label="groups"))
    assert_inside(paired_histogram("g", [1, 10, 100, 1_000_000, 5_000_000], [("sample", [1, 2, 3, 999_999], "#000")],
                                   title="t", x_label="x", y_label="groups"))
    assert_inside(histogram("r", [0.0, 1e-7, 1e-6, 1e-5, 1e-4, 0.001, 0.01, 0.1, 0.5, 1.0],
                            [0, 21571, 7102, 1328, 161, 0, 0, 0, 4], title="t", x_label="record risk",
                            log_counts=True))
    assert_inside(bar_chart("b", [("Asian-Pac-Islander", 0.05), ("Amer-Indian-Eskimo", 1.0),
                                  ("Married-civ-spouse, Married-AF-spouse, Widowed", 0.0005)], title="released"))
    zips = [(f"{z:05d}", 1.0 / 40) for z in range(40)]
    assert_inside(bar_chart("c", zips + [("WWWWWWWWWWWWWWWWWWWWWWWWWWWW", 0.999)],
                            title="a very long title that would not fit in three hundred units of width at all"))


LABELS = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF, exclude_categories=("Cs", "Cc")),
                 min_size=0, max_size=60)
COUNTS = st.one_of(st.integers(0, 10), st.integers(0, 10**9))


@settings(max_examples=60, deadline=None)
@given(items=st.lists(st.tuples(LABELS, st.floats(0, 1)), min_size=1, max_size=40), title=LABELS)
def test_bar_charts_fit_whatever_their_labels(items: list[tuple[str, float]], title: str) -> None:
    assert_inside(bar_chart("b", items, title=title))


@settings(max_examples=60, deadline=None)
@given(counts=st.lists(COUNTS, min_size=1, max_size=16), two=st.booleans(), log=st.booleans(),
       base=st.sampled_from([1, 1000, 10**6]), name=LABELS)
def test_histograms_fit_whatever_their_counts_and_edges(counts: list[int], two: bool, log: bool, base: int,
                                                        name: str) -> None:
    edges = [base * (1, 2, 5)[i % 3] * 10 ** (i // 3) for i in range(len(counts) + 1)]
    if two:
        chart = paired_histogram("h", edges, [("sample", counts, "#000"), (name or "population", counts[::-1], "#111")],
                                 title=name, x_label=name, y_label="groups")
    else:
        chart = histogram("h", edges, counts, title=name, x_label=name, log_counts=log)
    assert_inside(chart)


@settings(max_examples=30, deadline=None)
@given(points=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), max_size=20),
       this=st.tuples(st.floats(0, 1), st.floats(0, 1)), harbor=st.tuples(st.floats(0, 1), st.floats(0, 1)))
def test_the_frontier_scatter_fits(points: list[tuple[float, float]], this: tuple[float, float],
                                   harbor: tuple[float, float]) -> None:
    assert_inside(scatter("s", points, [("a", "this policy", this, "#000", "circle"),
                                        ("b", "Safe Harbor", harbor, "#111", "star")], title="t"))


def test_a_built_reports_charts_fit(project) -> None:
    from deid_sql import Problem
    from deid_sql.release.plan import plan_of
    from deid_sql.report.release_report import build_report

    with Problem.from_spec(project.spec_path) as problem:
        page = render_html(build_report(problem, plan_of(problem, "zip:top")))
    assert all(assert_inside(svg) for svg in svgs(page))
    sample = sample_report()
    assert len(svgs(page)) == 2 + 2 * len(sample["utility"]["marginals"])
