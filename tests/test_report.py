"""The frontier report: PNG and self-contained HTML from synthetic search results."""

from __future__ import annotations

import html
import random
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from deid_sql.errors import OutputError
from deid_sql.report.frontier_report import FrontierReport, dominates_safe_harbor, stair
from deid_sql.report.html import MAX_SEARCHED, html_frontier
from deid_sql.report.plot import plot_frontier
from deid_sql.search.frontier import Frontier, Point

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TRICKY = 'age: [90-120]; note: "quoted" <b>bold</b> & Zürich — 東京 \'x\''
THINNING_NOTE = "thinned to keep this file small"


def curve(risk: float) -> float:
    """A falling loss curve over log risk: 0.9 at 1e-5, 0 at 1."""
    import math

    return 0.9 * (-math.log10(risk) / 5) ** 1.5


def policy_text(rng: random.Random) -> str:
    """A policy text as long as a real one (an age QI alone has 120 bits)."""
    return "|".join(f"{q}:" + "".join(rng.choice("01") for _ in range(n)) for q, n in
                    (("age", 120), ("sex", 1), ("race", 3), ("zip", 9)))


def synthetic(n_searched: int, n_frontier: int, seed: int = 7) -> FrontierReport:
    """Points on the curve (mostly the frontier) plus a cloud above it, through Frontier.update."""
    rng = random.Random(seed)
    on = [Point(r, curve(r), policy_text(rng)) for r in (10 ** rng.uniform(-5, 0) for _ in range(n_frontier))]
    cloud = [Point(r, min(1.0, curve(r) + abs(rng.gauss(0, 0.15)) + 0.005), policy_text(rng))
             for r in (10 ** rng.uniform(-5, 0) for _ in range(n_searched - n_frontier))]
    searched = on + cloud
    rng.shuffle(searched)
    front = Frontier()
    for p in searched:
        front.update(p)
    readable = {p.key: f"age: [{i}-120]; zip: [372**]" for i, p in enumerate(front.points)}
    if front.points:
        readable[front.points[len(front.points) // 3].key] = TRICKY
    kanon = {}
    for k, lift in (("5-anonymity", 0.08), ("10-anonymity", 0.15)):
        base = Frontier()
        for j in range(40):
            r = 10 ** rng.uniform(-4, 0)
            base.update(Point(r, min(1.0, curve(r) + lift + rng.uniform(0, 0.05)), f'age:L{j % 4}|zip:L{j % 5} "{k}"'))
        kanon[k] = base.points
    return FrontierReport(title=f"Synthetic <search> & \"{n_searched}\"", searched=searched, frontier=front.points,
                          readable=readable, safe_harbor=Point(2e-3, 0.55, "safe-harbor"), kanon=kanon,
                          area=front.area())


class _Points(HTMLParser):
    """Collects the data-attributes of every hoverable point, already unescaped by the parser."""

    def __init__(self) -> None:
        super().__init__()
        self.points: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if "pt" in (a.get("class") or "").split():
            self.points.append(a)


@pytest.fixture(scope="module")
def big() -> FrontierReport:
    return synthetic(15_000, 2_000)


@pytest.mark.slow
def test_png(big, tmp_path):
    from matplotlib.image import imread

    out = tmp_path / "frontier.png"
    plot_frontier(big, out)
    data = out.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 10_000
    assert imread(out).shape[:2] == (720, 960)  # 8 x 6 in at 120 dpi
    assert [p.name for p in tmp_path.iterdir()] == ["frontier.png"]  # no temp file left behind


@pytest.mark.slow
def test_png_linear_and_sparse(tmp_path):
    """Linear risk axis; no Safe Harbor, no baselines, even nothing at all, still draws."""
    report = synthetic(300, 20)
    report.safe_harbor, report.kanon = None, {}
    plot_frontier(report, tmp_path / "a.png", log_risk=False)
    plot_frontier(FrontierReport("empty", [], [], {}, None, {}, 1.0), tmp_path / "b.png")
    html_frontier(FrontierReport("empty", [], [], {}, None, {}, 1.0), tmp_path / "b.html", log_risk=False)
    for name in ("a.png", "b.png"):
        assert (tmp_path / name).read_bytes().startswith(PNG_SIGNATURE)
    assert "<svg" in (tmp_path / "b.html").read_text(encoding="utf-8")


def test_html(big, tmp_path):
    out = tmp_path / "frontier.html"
    html_frontier(big, out)
    text = out.read_text(encoding="utf-8")
    assert "<svg" in text and out.stat().st_size < 3_000_000
    assert "http://" not in text and "https://" not in text  # self-contained: nothing fetched
    assert "<script src" not in text and "<link" not in text
    assert THINNING_NOTE in text
    parser = _Points()
    parser.feed(text)
    frontier = [a for a in parser.points if a["data-kind"] == "frontier"]
    assert len(frontier) == len(big.frontier)
    assert [a["data-policy"] for a in frontier] == [p.key for p in sorted(big.frontier, key=lambda p: (p.risk, p.loss))]
    assert {a["data-readable"] for a in frontier} == {big.readable[p.key] for p in big.frontier}
    assert [a for a in parser.points if a["data-kind"] == "safe-harbor"][0]["data-loss"] == "0.55"
    assert len([a for a in parser.points if a["data-kind"] == "kanon"]) == sum(map(len, big.kanon.values()))
    # The tricky readable text appears only escaped: in its point's attribute and in the table.
    escaped = html.escape(TRICKY)
    assert f'data-readable="{escaped}"' in text and f"<td>{escaped}</td>" in text
    assert "<b>bold</b>" not in text and "Zürich — 東京" in text
    assert "<h1>Synthetic &lt;search&gt; &amp; &quot;15000&quot;</h1>" in text
    dominating = dominates_safe_harbor(big)
    assert dominating and f"<dt>frontier policies dominating Safe Harbor</dt><dd>{len(dominating):,}</dd>" in text
    assert text.count("<tr") == len(big.frontier) + 1


@pytest.mark.slow
def test_html_small_is_not_thinned(tmp_path):
    report = synthetic(MAX_SEARCHED, 50)
    html_frontier(report, tmp_path / "f.html")
    text = (tmp_path / "f.html").read_text(encoding="utf-8")
    dots = re.search(r'<path class="searched" stroke="[^"]*" d="([^"]*)"', text)
    assert THINNING_NOTE not in text and dots and dots.group(1).count("M") == MAX_SEARCHED


def test_dominates_safe_harbor_against_brute_force():
    rng = random.Random(3)
    for _ in range(200):
        # A coarse grid makes ties with Safe Harbor on either axis common.
        pts = [Point(rng.randint(1, 6) / 6, rng.randint(0, 6) / 6, str(i)) for i in range(rng.randint(0, 12))]
        front = Frontier()
        for p in pts:
            front.update(p)
        sh = Point(rng.randint(1, 6) / 6, rng.randint(0, 6) / 6, "sh")
        report = FrontierReport("t", pts, front.points, {}, sh, {}, front.area())
        brute = [p for p in front.points if p.risk <= sh.risk and p.loss <= sh.loss and (p.risk, p.loss) != (
            sh.risk, sh.loss)]
        assert sorted(dominates_safe_harbor(report), key=lambda p: (p.risk, p.loss)) == sorted(
            brute, key=lambda p: (p.risk, p.loss))
    equal = FrontierReport("t", [], [Point(0.5, 0.5, "a")], {}, Point(0.5, 0.5, "sh"), {}, 0.0)
    assert dominates_safe_harbor(equal) == []
    assert dominates_safe_harbor(FrontierReport("t", [], [Point(0.1, 0.1)], {}, None, {}, 0.0)) == []


def test_stair_matches_frontier_step():
    report = synthetic(2_000, 100)
    front = Frontier(sorted(report.frontier, key=lambda p: (p.risk, p.loss)))
    corners = stair(report.searched)  # dominated points in the input change nothing
    assert corners[:-1] == front.step() and corners[-1] == (1.0, front.step()[-1][1])


@pytest.mark.slow
@pytest.mark.parametrize("writer", [plot_frontier, html_frontier])
def test_no_overwrite(writer, tmp_path: Path):
    report = synthetic(200, 10)
    out = tmp_path / "existing"
    out.write_bytes(b"keep me")
    with pytest.raises(OutputError, match="already exists"):
        writer(report, out, overwrite=False)
    assert out.read_bytes() == b"keep me" and [p.name for p in tmp_path.iterdir()] == ["existing"]
    writer(report, out, overwrite=True)
    assert out.read_bytes() != b"keep me"
