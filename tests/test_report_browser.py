"""The demo's report in a real browser: headless Chromium screenshots it (not blank), its DOM holds the
verdict, the policy's rules and the figures, the page requests nothing from the network, and the PDF it
prints holds the same figures as ``deid-sql evaluate`` prints for the policy.

Issue 42: on the demo's report and on the report of a wide extract (a persons spec releasing 20
columns, without a census), Chromium's own layout is measured (``FIT``: every text's boxes from a
Range, every chart's tick labels) at 1280 and 800 px: no text reaches past the window's width, no two
tick labels of a chart overlap, and printed on A4 and Letter every word of the PDF lies inside the
page's printable area and every released column name is in it (``pdftotext -bbox``).

Needs Debian's ``chromium`` and ``pdftotext`` (poppler-utils), which ``.ci/run`` installs: skipped
locally without them, a failure under ``CI`` (like the engines).  The network is blocked for every
run (``--host-resolver-rules``: any host name fails to resolve), so a page that fetched a font or a
script would still render here; what it *tried* to fetch is read from the page's own resource list
(Resource Timing lists failed loads too), and ``test_the_request_check_sees_a_request`` proves that.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from deid_sql.report.svg_charts import readable_number

pytestmark = pytest.mark.browser  # headless chromium and pdftotext (tests/markers.py)

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)
PDFTOTEXT = shutil.which("pdftotext")
# the deid-sql of this interpreter's environment, also when it is not activated
DEID_SQL = shutil.which("deid-sql", path=str(Path(sys.executable).parent)) or "deid-sql"
NO_NETWORK = "--host-resolver-rules=MAP * ~NOTFOUND"
# appended to a copy of the page: the URLs of every resource the page loaded or tried to load
PROBE = ("<script>window.addEventListener('load', () => document.documentElement.setAttribute('data-resources', "
         "JSON.stringify(performance.getEntriesByType('resource').map(e => e.name))));</script>")
# evaluate's names for the report's figures (the report says sample_uniques for sample_unique_records)
EVALUATED = {"records": "records", "groups": "groups", "expected_reidentifications": "expected_reidentifications",
             "max_record_risk": "max_record_risk", "k": "k", "sample_uniques": "sample_unique_records",
             "risk": "risk"}


def _tools() -> None:
    missing = [name for name, found in (("chromium", CHROMIUM), ("pdftotext", PDFTOTEXT)) if found is None]
    if missing:
        reason = f"{' and '.join(missing)} not installed (apt-get install chromium poppler-utils)"
        if os.environ.get("CI"):
            pytest.fail(f"the browser test must run under CI: {reason}")
        pytest.skip(reason)


def chromium(page: Path, *args: str, profile: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """One headless Chromium run on ``page`` with the network blocked and a throwaway profile."""
    assert CHROMIUM is not None
    argv = [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
            "--disable-background-networking", NO_NETWORK, f"--user-data-dir={profile}", *args, page.as_uri()]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


class DOM(HTMLParser):
    """The dumped DOM's text (one string, entities decoded) and every element's attributes."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.elements: list[tuple[str, dict[str, str]]] = []
        self._skip = 0
        self.feed(html)
        self.text = " ".join(" ".join(self.parts).split())

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}))
        self._skip += tag in ("style", "script")

    def handle_endtag(self, tag: str) -> None:
        self._skip -= tag in ("style", "script") and self._skip > 0

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)

    def find(self, **attrs: str) -> dict[str, str]:
        found = [a for _, a in self.elements if all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())]
        assert found, f"no element with {attrs}"
        return found[0]


def resources(page: Path, tmp: Path) -> list[str]:
    """Every URL the page loaded or tried to load, from its own Resource Timing list."""
    probed = tmp / f"probe-{page.name}"
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = DOM(chromium(probed, "--dump-dom", profile=tmp / "profile-probe").stdout)
    attrs = dom.find()  # the html element comes first
    assert "data-resources" in attrs, "the probe did not run"
    return json.loads(attrs["data-resources"])


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``deid-sql demo`` once: its report of the recommended policy, and evaluate's figures of that policy."""
    _tools()
    root = tmp_path_factory.mktemp("report-browser")
    done = subprocess.run([DEID_SQL, "demo", "--dir", "demo", "--budget", "200"], cwd=root, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    page = root / "demo" / "report.html"
    assert f"report for the chosen policy: {Path('demo') / 'report.html'}" in done.stdout
    report = json.loads(page.with_suffix(".json").read_text(encoding="utf-8"))
    evaluated = subprocess.run([DEID_SQL, "evaluate", "demo/demo.toml", "--policy", report["policy"]["text"]],
                               cwd=root, capture_output=True, text=True, timeout=300, check=True)
    return {"root": root, "page": page, "report": report, "evaluate": json.loads(evaluated.stdout)}


def test_the_screenshot_is_not_blank(demo: dict[str, Any]) -> None:
    import matplotlib.image

    shot = demo["root"] / "report.png"
    chromium(demo["page"], f"--screenshot={shot}", "--window-size=1200,3000", profile=demo["root"] / "profile-shot")
    pixels = matplotlib.image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (3000, 1200)
    inked = (pixels.mean(axis=2) < 0.9).mean()  # share of pixels clearly darker than white
    assert pixels.std() > 0.05 and 0.005 < inked < 0.9, (pixels.std(), inked)
    colours = len({tuple(p) for p in (pixels[::7, ::7] * 255).astype(int).reshape(-1, 3).tolist()})
    assert colours > 20  # text, tables and charts, not one flat colour


def test_the_dom_holds_the_verdict_the_rules_and_evaluates_figures(demo: dict[str, Any]) -> None:
    report, evaluated = demo["report"], demo["evaluate"]
    dom = DOM(chromium(demo["page"], "--dump-dom", profile=demo["root"] / "profile-dom").stdout)
    verdict = report["summary"]["verdict"]
    assert dom.find(id="verdict")["data-verdict"] == verdict and verdict in dom.text.lower()
    for sentence in report["summary"]["headline"]:
        assert " ".join(sentence.split()) in dom.text
    for rule in report["policy"]["rules"]:
        assert " ".join(rule["words"].split()) in dom.text, rule["words"]
        for label in rule["labels"]:
            assert label["label"] in dom.text
    for key, name in EVALUATED.items():
        shown = float(dom.find(id=f"figure-{key}")["data-value"])
        assert shown == float(evaluated[name]), (key, shown, evaluated[name])  # the same digits, all of them
        assert readable_number(report["risk"]["figures"][key]) in dom.text
    mean = float(dom.find(id="figure-mean_record_risk")["data-value"])
    assert mean == pytest.approx(evaluated["risk_sum"] / evaluated["records"], rel=1e-12)
    assert float(dom.find(data_figure="kl_loss")["data-value"]) == evaluated["kl"]
    assert float(dom.find(data_figure="iyengar_loss")["data-value"]) == evaluated["iyengar_loss"]
    for field in ("Name", "Role", "Date", "Signature"):
        dom.find(data_field=field)
    assert dom.find(id="frontier")["data-dominated-by"] == str(report["frontier"]["dominated_by"])


def test_the_page_requests_nothing(demo: dict[str, Any]) -> None:
    html = demo["page"].read_text(encoding="utf-8")
    assert resources(demo["page"], demo["root"]) == []
    # and nothing in the file could ask for anything: no external URL in an attribute or a stylesheet
    dom = DOM(html)
    fetching = [(tag, k, v) for tag, attrs in dom.elements for k, v in attrs.items()
                if k in ("src", "href", "srcset", "action", "poster", "data", "xlink:href") and v
                and not v.startswith(("#", "data:"))]
    assert fetching == []
    assert not re.search(r"@import|url\(\s*['\"]?(?!data:|#)", html)
    assert len(html.encode("utf-8")) < 1_000_000  # the bound for the demo


def test_the_request_check_sees_a_request(tmp_path: Path) -> None:
    """A page fetching a stylesheet, an image and a script: the resource list names all three, so the
    empty list of the report means something."""
    _tools()
    page = tmp_path / "fetching.html"
    page.write_text("<!doctype html><html><head><link rel='stylesheet' href='https://fonts.example.com/f.css'>"
                    "</head><body><img src='http://example.com/a.png'><script src='https://cdn.example.org/x.js'>"
                    "</script></body></html>", encoding="utf-8")
    assert sorted(resources(page, tmp_path)) == ["http://example.com/a.png", "https://cdn.example.org/x.js",
                                                 "https://fonts.example.com/f.css"]


def test_the_printed_pdf_holds_evaluates_figures(demo: dict[str, Any]) -> None:
    evaluated, report = demo["evaluate"], demo["report"]
    pdf = demo["root"] / "report.pdf"
    chromium(demo["page"], "--no-pdf-header-footer", f"--print-to-pdf={pdf}", profile=demo["root"] / "profile-pdf")
    assert pdf.read_bytes().startswith(b"%PDF")
    assert PDFTOTEXT is not None
    text = subprocess.run([PDFTOTEXT, "-layout", str(pdf), "-"], capture_output=True, text=True, check=True,
                          timeout=60).stdout
    words = set(text.split())
    expected = {name: readable_number(evaluated[name]) for name in
                ("expected_reidentifications", "max_record_risk", "risk", "groups", "records", "kl", "iyengar_loss")}
    expected["mean_record_risk"] = readable_number(evaluated["risk_sum"] / evaluated["records"])
    assert {k: v for k, v in expected.items() if v not in words} == {}, text[:3000]
    assert report["summary"]["verdict"].split()[0] in text.lower()
    for rule in report["policy"]["rules"]:
        assert " ".join(rule["words"].split())[:40] in " ".join(text.split()), rule["words"]
    assert "Signature" in text


# appended to a copy of a page: each attribute section's boxes, measured by the browser after layout
LAYOUT = ("<script>window.addEventListener('load', () => { const out = []; const body = document.body"
          ".getBoundingClientRect(); for (const div of document.querySelectorAll('#attribute .attribute')) { "
          "const boxes = [...div.children].map(e => { const r = e.getBoundingClientRect(); return {tag: e.tagName, "
          "top: r.top, bottom: r.bottom, left: r.left, right: r.right, scroll: e.scrollWidth - e.clientWidth}; }); "
          "const texts = [...div.querySelectorAll('svg')].flatMap(svg => { const v = svg.getBoundingClientRect(); "
          "return [...svg.querySelectorAll('text')].map(t => { const b = t.getBoundingClientRect(); "
          "return {text: t.textContent, inside: b.left >= v.left - 0.5 && b.top >= v.top - 0.5 && "
          "b.right <= v.right + 0.5 && b.bottom <= v.bottom + 0.5}; }); }); "
          "out.push({boxes, texts, body: [body.left, body.right]}); } "
          "document.documentElement.setAttribute('data-layout', JSON.stringify(out)); });</script>")


@pytest.mark.parametrize("width", [1200, 700])
def test_the_attribute_section_neither_clips_nor_overlaps(tmp_path: Path, width: int) -> None:
    """The B20 report's attribute section (figures, worst group, checks, histogram) laid out by Chromium:
    every box inside the body and below the one before it, every chart text inside its chart."""
    _tools()
    from tests.test_attribute_gate import POLICY, write_problem

    spec = write_problem(tmp_path, 'max_confidence = 0.8\nmin_l = 2\nmax_t = 0.5\nt_distance = "equal"')
    page = tmp_path / "report.html"
    subprocess.run([DEID_SQL, "report", str(spec), "--policy", POLICY, "--out", str(page)], cwd=tmp_path,
                   capture_output=True, text=True, timeout=300, check=True)
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", LAYOUT + "</body>"), encoding="utf-8")
    dom = DOM(chromium(probed, "--dump-dom", f"--window-size={width},2000", profile=tmp_path / "profile").stdout)
    (section,) = json.loads(dom.find()["data-layout"])
    left, right = section["body"]
    boxes = section["boxes"]
    assert [b["tag"] for b in boxes] == ["H3", "DIV", "P", "DIV", "FIGURE"]  # each table in its box (.table-box)
    for b in boxes:
        assert left - 1 <= b["left"] and b["right"] <= right + 1 and b["scroll"] <= 0, b
    for before, after in zip(boxes, boxes[1:]):
        assert before["bottom"] <= after["top"] + 0.5, (before, after)
    assert len(section["texts"]) > 10 and [t for t in section["texts"] if not t["inside"]] == []


# appended to a copy of a page (issue 42): what Chromium's layout cuts or overlaps, measured after load.
# A text node's boxes (a Range's client rects) must lie inside the window, or inside the scrolling box
# of its table (.table-box, overflow-x: auto), which itself must lie inside the window; every chart's
# tick labels (text.tick) must not overlap each other, and every chart text must lie inside its chart.
FIT = r"""<script>window.addEventListener('load', () => {
const root = document.documentElement, vw = root.clientWidth, out = {vw, cut: [], boxes: [], overlaps: [],
  outside: [], ticks: 0, texts: 0, scrolled: 0};
const inside = (r, a) => r.left >= a.left - 0.5 && r.right <= a.right + 0.5;
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT), range = document.createRange();
for (let n = walker.nextNode(); n; n = walker.nextNode()) {
  const p = n.parentElement;
  if (!n.textContent.trim() || p.closest('svg, style, script')) continue;
  const box = p.closest('.table-box');
  const limit = box ? box.getBoundingClientRect() : {left: 0, right: vw};
  range.selectNodeContents(n);
  for (const r of range.getClientRects()) {
    if (r.width === 0) continue;
    out.texts++;
    if (!inside(r, limit)) out.cut.push({text: n.textContent.trim().slice(0, 60), left: r.left, right: r.right});
  }
}
for (const el of document.querySelectorAll('.table-box, pre, dl, figure, svg.chart, p, h2, h3, ul, ol')) {
  const r = el.getBoundingClientRect();
  if (!inside(r, {left: 0, right: vw})) out.boxes.push({tag: el.tagName, id: el.id, left: r.left, right: r.right});
  if (el.matches('.table-box') && el.scrollWidth > el.clientWidth + 1) out.scrolled++;
}
for (const svg of document.querySelectorAll('svg.chart')) {
  const v = svg.getBoundingClientRect();
  const ticks = [...svg.querySelectorAll('text.tick')].map(t => [t.textContent, t.getBoundingClientRect()]);
  out.ticks += ticks.length;
  for (let i = 0; i < ticks.length; i++) for (let j = i + 1; j < ticks.length; j++) {
    const a = ticks[i][1], b = ticks[j][1];
    const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
    const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    if (w > 0.5 && h > 0.5) out.overlaps.push([svg.id, ticks[i][0], ticks[j][0]]);
  }
  for (const t of svg.querySelectorAll('text')) {
    const b = t.getBoundingClientRect();
    if (b.width && !(inside(b, v) && b.top >= v.top - 0.5 && b.bottom <= v.bottom + 0.5))
      out.outside.push([svg.id, t.textContent]);
  }
}
root.setAttribute('data-fit', JSON.stringify(out));
});</script>"""
A4, LETTER = "210mm 297mm", "8.5in 11in"
MARGIN_PT = 14 / 25.4 * 72  # the page's @page side margin, 14 mm, in points


def fit(page: Path, width: int, tmp: Path) -> dict[str, Any]:
    """``FIT``'s measurements of ``page`` laid out by Chromium in a window ``width`` px wide."""
    probed = tmp / f"fit-{width}-{page.name}"
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", FIT + "</body>"), encoding="utf-8")
    dom = DOM(chromium(probed, "--dump-dom", f"--window-size={width},2000",
                       profile=tmp / f"profile-fit-{width}").stdout)
    attrs = dom.find()
    assert "data-fit" in attrs, "the layout probe did not run"
    return json.loads(attrs["data-fit"])


def printed_words(page: Path, size: str, tmp: Path) -> tuple[list[tuple[float, float, str]], float, str]:
    """Every word of ``page`` printed by Chromium on paper ``size`` (``@page size``): (xMin, xMax, word)
    each from ``pdftotext -bbox``, the page width in points, and the text."""
    name = size.split()[0].replace(".", "")
    sized = tmp / f"print-{name}-{page.name}"
    sized.write_text(page.read_text(encoding="utf-8").replace("</head>", f"<style>@page{{size:{size}}}</style></head>"),
                     encoding="utf-8")
    pdf = tmp / f"print-{name}-{page.stem}.pdf"
    chromium(sized, "--no-pdf-header-footer", f"--print-to-pdf={pdf}", profile=tmp / f"profile-print-{name}")
    assert PDFTOTEXT is not None
    bbox = subprocess.run([PDFTOTEXT, "-bbox", str(pdf), "-"], capture_output=True, text=True, check=True,
                          timeout=60).stdout
    widths = {float(w) for w in re.findall(r'<page width="([\d.]+)"', bbox)}
    assert len(widths) == 1, widths
    words = [(float(a), float(b), unescape(w)) for a, b, w in
             re.findall(r'<word xMin="([-\d.]+)" yMin="[-\d.]+" xMax="([-\d.]+)" yMax="[-\d.]+">([^<]*)</word>', bbox)]
    text = subprocess.run([PDFTOTEXT, "-layout", str(pdf), "-"], capture_output=True, text=True, check=True,
                          timeout=60).stdout
    return words, widths.pop(), text


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A wide extract released with its report: the encounters demo (``demo --ehr``) with 11 more
    columns, 20 in all, 18 of them released (a pseudonymized key, dates, vitals, labs, free-text
    categories), counted in persons, a population of 2,000,000 given by its size (no census) and
    Dankar's rule as the gate's model, no ZIP (so no Safe Harbor comparison)."""
    _tools()
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("report-wide")
    subprocess.run([DEID_SQL, "demo", "--ehr", "--dir", "ehr"], cwd=root, capture_output=True, text=True,
                   timeout=600, check=True)
    table = pq.read_table(root / "ehr" / "encounters.parquet")
    rng = np.random.default_rng(42)
    n = table.num_rows
    extra = {"systolic_bp": rng.integers(90, 180, n), "diastolic_bp": rng.integers(50, 110, n),
             "heart_rate": rng.integers(45, 130, n), "temperature_c": np.round(rng.normal(37, 0.6, n), 1),
             "weight_kg": np.round(rng.normal(78, 15, n), 1), "height_cm": np.round(rng.normal(170, 10, n), 1),
             "glucose_mg_dl": rng.integers(60, 300, n), "hba1c_percent": np.round(rng.normal(6, 1, n), 1),
             "ldl_cholesterol_mg_dl": rng.integers(60, 220, n),
             "attending_department": rng.choice(["Cardiology", "Internal Medicine", "Emergency Department"], n),
             "discharge_disposition": rng.choice(["home", "skilled nursing facility", "rehabilitation"], n)}
    for name, values in extra.items():
        table = table.append_column(name, pa.array(values))
    pq.write_table(table, root / "encounters.parquet")
    kept = ["admitted", "discharged", *extra]
    (root / "wide.toml").write_text(
        'name = "wide"\npopulation = { size = 2_000_000 }\nrisk = "dankar"\n\n[source]\npath = "encounters.parquet"\n'
        '\n[[qi]]\nname = "age"\nkind = "integer"\nmin = 0\nmax = 120\nrole = "age"\nper_person = "first"\n'
        '\n[[qi]]\nname = "gender"\ncolumn = "sex"\nkind = "category"\nvalues = ["Female", "Male"]\n'
        '\n[[qi]]\nname = "race"\nkind = "category"\n'
        'values = ["White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"]\n'
        '\n[columns]\ndrop = ["encounter_id", "zip"]\nsensitive = ["diagnosis"]\npseudonymize = ["patient_id"]\n'
        f'secret_env = "DEID_WIDE_KEY"\nkeep = {json.dumps(kept)}\n'
        '\n[person]\ncolumn = "patient_id"\norder = "admitted"\n\n[release]\nmin_k = 5\nmax_record_risk = 0.2\n',
        encoding="utf-8")
    env = os.environ | {"DEID_WIDE_KEY": "5f1c0e9a7b3d2c4e6f8a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e"}
    done = subprocess.run([DEID_SQL, "materialize", "wide.toml", "--policy", "age:cuts=18,30,45,65,90|race:top",
                           "--out", "release.parquet", "--report", "report.html"], cwd=root, capture_output=True,
                          text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    page = root / "report.html"
    report = json.loads(page.with_suffix(".json").read_text(encoding="utf-8"))
    released = [c["name"] for c in report["data"]["columns"] if c["role"] != "dropped"]
    assert len(released) >= 15, released
    return {"root": root, "page": page, "report": report, "released": released}


@pytest.fixture(scope="module")
def extract(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The real-shaped extract of docs/your-data.md (``tests.test_init_walkthrough``: a row per test, names,
    yes/no, infants' fractional ages, ``C1/C2``, clinics): init's spec untouched, released by ``anonymize``
    with its report (issue 42: "the report of that release")."""
    _tools()
    from tests.test_init_walkthrough import extract as write_extract

    root = tmp_path_factory.mktemp("report-extract")
    write_extract(root / "tests.csv")
    env = os.environ | {"DEID_SECRET": "0d9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c"}
    release = ["anonymize", "tests.toml", "--out", "release.parquet", "--report", "report.html"]
    for args in (["init", "tests.csv"], release):
        done = subprocess.run([DEID_SQL, *args], cwd=root, capture_output=True, text=True, timeout=600, env=env)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    page = root / "report.html"
    return {"root": root, "page": page, "report": json.loads(page.with_suffix(".json").read_text(encoding="utf-8")),
            "texts": 150, "ticks": 10, "words": 300}


@pytest.fixture(params=["demo", "wide", "extract"])
def page(request: pytest.FixtureRequest) -> dict[str, Any]:
    return request.getfixturevalue(request.param)


@pytest.mark.parametrize("width", [1280, 800])
def test_nothing_reaches_past_the_window_and_no_ticks_overlap(page: dict[str, Any], width: int) -> None:
    measured = fit(page["page"], width, page["root"])
    assert measured["texts"] > page.get("texts", 300) and measured["ticks"] > page.get("ticks", 20), measured  # seen
    assert measured["cut"] == [], measured["cut"][:10]
    assert measured["boxes"] == [], measured["boxes"][:10]
    assert measured["overlaps"] == [], measured["overlaps"]
    assert measured["outside"] == [], measured["outside"]
    if width == 1280:
        assert measured["scrolled"] == 0  # at full width every table fits without its scroll bar


@pytest.mark.parametrize("size", [A4, LETTER])
def test_the_printed_page_cuts_nothing(page: dict[str, Any], size: str) -> None:
    words, width, text = printed_words(page["page"], size, page["root"])
    assert len(words) > page.get("words", 500)
    cut = [(a, b, w) for a, b, w in words if a < MARGIN_PT - 2 or b > width - MARGIN_PT + 2]
    assert cut == [], cut[:10]
    flat = " ".join(text.split())
    report = page["report"]
    for column in [c["name"] for c in report["data"]["columns"]]:
        assert column in flat, column  # the columns table and the analyst's rows, every name whole
    for rule in report["policy"]["rules"]:
        for label in rule["labels"]:
            assert " ".join(label["label"].split())[:30] in flat.replace("- ", "-"), label["label"]
    for sentence in report["summary"]["headline"]:
        assert " ".join(sentence.split())[:50] in flat, sentence


def test_the_fit_check_sees_a_cut_and_an_overlap(tmp_path: Path) -> None:
    """A page with a line too long for any window, a table too wide without a scroll box and a chart with
    two tick labels on one spot: the probe reports all three, so its empty lists on the reports mean
    something; and printed, the long line's words run past the printable area."""
    _tools()
    bad = tmp_path / "bad.html"
    bad.write_text("<!doctype html><html><head><style>@page{margin:16mm 14mm}</style></head><body>"
                   f"<p style='white-space:nowrap'>{'overflowing ' * 200}</p>"
                   "<table><tr>" + "<td style='white-space:nowrap'>a_wide_column_name</td>" * 60 + "</tr></table>"
                   "<svg class='chart' id='c' viewBox='0 0 200 100' width='200'><text class='tick' x='50' y='50'>"
                   "200,000</text><text class='tick' x='60' y='50'>500,000</text></svg></body></html>",
                   encoding="utf-8")
    measured = fit(bad, 800, tmp_path)
    assert {c["text"].split()[0] for c in measured["cut"]} == {"overflowing", "a_wide_column_name"}
    assert measured["overlaps"] == [["c", "200,000", "500,000"]]
    words, width, _ = printed_words(bad, A4, tmp_path)
    assert any(b > width - MARGIN_PT + 2 for _, b, _ in words)
