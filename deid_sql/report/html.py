"""The risk–utility frontier as one self-contained HTML page.

Inline SVG and a few lines of inline script, nothing fetched: the page must open from a
file share or an air-gapped review machine exactly as it was written.  Each frontier,
Safe Harbor and k-anonymity point carries its readable rules, risk, loss and policy text
in ``data-`` attributes and the script shows them in a tooltip with ``textContent``, so
a policy text can never become markup.  Every text from the report is passed through
``html.escape`` (quotes too, since most of it lands in attribute values).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from pathlib import Path

from ..search.frontier import Point
from ..storage.atomic import write_text
from .frontier_report import FrontierReport, by_risk, dominates_safe_harbor, readable_of, risk_floor, stair
from .plot import DOMINATING_COLOUR, FRONTIER_COLOUR, KANON_STYLES, SAFE_HARBOR_COLOUR, SEARCHED_COLOUR

MAX_SEARCHED = 5_000  # searched dots kept in the page; beyond this they only add megabytes
WIDTH, HEIGHT = 880, 560
LEFT, RIGHT, TOP, BOTTOM = 70, 16, 14, 52  # margins around the plot area, px
PAD = 8  # keeps points at risk 1 or loss 0 off the axis lines
SHAPES = {"s": "square", "^": "triangle", "D": "diamond", "v": "down", "P": "diamond"}

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#222;max-width:960px}
h1{font-size:1.3em;margin:0 0 .4em}
.note{color:#555;font-size:.9em}
svg.chart{display:block;background:#fff;border:1px solid #ddd}
.axis line,.axis path{stroke:#333;fill:none}
.grid line{stroke:#ececec}
.axis text{font-size:12px;fill:#333}
.searched{fill:none;stroke-width:2.6;stroke-linecap:round}
.pt{cursor:pointer}
.pt:hover{stroke:#000;stroke-width:1.5}
.legend{list-style:none;padding:0;margin:.6em 0;display:flex;flex-wrap:wrap;gap:.3em 1.4em;font-size:.9em}
.legend svg{vertical-align:middle;margin-right:.35em}
#tip{position:fixed;pointer-events:none;background:#fffff4;border:1px solid #999;border-radius:4px;padding:6px 8px;
 max-width:460px;font-size:13px;box-shadow:0 2px 6px rgba(0,0,0,.2);z-index:10}
#tip .tl{font-weight:600}#tip .tn{color:#333;margin:2px 0}
#tip .tp{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:10px;color:#666;word-break:break-all}
dl.summary{display:grid;grid-template-columns:max-content auto;gap:.2em 1em;font-size:.95em}
dl.summary dt{color:#555}dl.summary dd{margin:0}
table{border-collapse:collapse;font-size:.88em;margin-top:.5em}
th,td{border-bottom:1px solid #e3e3e3;padding:3px 8px;text-align:left;vertical-align:top}
td.num{font-variant-numeric:tabular-nums;text-align:right;white-space:nowrap}
tr.dom td{background:#fff3e0}
"""

SCRIPT = """
(function(){
var tip=document.getElementById('tip'),svg=document.getElementById('chart');
function fmt(v){var x=Number(v);return x===0?'0':x.toPrecision(4);}
function div(c,t){var d=document.createElement('div');d.className=c;d.textContent=t;return d;}
function place(e){var x=e.clientX+14,y=e.clientY+14,w=tip.offsetWidth,h=tip.offsetHeight;
 if(x+w>window.innerWidth-4)x=Math.max(4,e.clientX-w-14);if(y+h>window.innerHeight-4)y=Math.max(4,e.clientY-h-14);
 tip.style.left=x+'px';tip.style.top=y+'px';}
svg.addEventListener('mouseover',function(e){var t=e.target;if(!t.classList.contains('pt'))return;var d=t.dataset;
 tip.replaceChildren(div('tl',d.label),div('tr',d.readable),div('tn','risk '+fmt(d.risk)+' \\u00b7 loss '+fmt(d.loss)),
 d.policy!==d.readable?div('tp',d.policy):'');tip.hidden=false;place(e);});
svg.addEventListener('mousemove',function(e){if(!tip.hidden)place(e);});
svg.addEventListener('mouseout',function(e){if(e.target.classList.contains('pt'))tip.hidden=true;});
})();
"""


@dataclass(frozen=True)
class _Scale:
    """Normalized (risk, loss) to SVG pixels; the risk axis is log10 from ``floor`` to 1 when ``log``."""

    log: bool
    floor: float

    def x(self, risk: float) -> float:
        if self.log:
            t = (math.log10(max(risk, self.floor)) - math.log10(self.floor)) / -math.log10(self.floor)
        else:
            t = min(max(risk, 0.0), 1.0)
        return LEFT + PAD + t * (WIDTH - LEFT - RIGHT - 2 * PAD)

    def y(self, loss: float) -> float:
        return HEIGHT - BOTTOM - PAD - min(max(loss, 0.0), 1.0) * (HEIGHT - TOP - BOTTOM - 2 * PAD)


def html_frontier(report: FrontierReport, path: Path, overwrite: bool = True, log_risk: bool = True) -> None:
    """Write ``report`` to ``path`` as one HTML page (atomically); see the module docstring."""
    write_text(path, frontier_page(report, log_risk), overwrite)


def frontier_page(report: FrontierReport, log_risk: bool = True) -> str:
    """The page's text, for callers that store or serve it themselves."""
    scale = _Scale(log_risk, risk_floor(report) if log_risk else 0.0)
    better = dominates_safe_harbor(report)
    shown = thin(report.searched, scale)
    thinned = len(shown) < len(report.searched)
    svg = [f'<svg id="chart" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
           f'role="img" aria-label="risk-utility frontier">', _axes(scale)]
    if shown:
        dots = "".join(f"M{scale.x(p.risk):.1f} {scale.y(p.loss):.1f}h0" for p in shown)
        svg.append(f'<path class="searched" stroke="{SEARCHED_COLOUR}" d="{dots}"/>')
    legend = [_legend_item(f"searched policies ({len(report.searched):,})", SEARCHED_COLOUR, "dot")]
    for i, (label, points) in enumerate(report.kanon.items()):
        colour, marker = KANON_STYLES[i % len(KANON_STYLES)]
        shape = SHAPES[marker]
        svg.append(_step_path(points, scale, colour, dashed=True))
        svg.extend(_point(report, p, scale, shape, colour, f"{label} baseline", "kanon", 4.0) for p in by_risk(points))
        legend.append(_legend_item(f"{label} frontier ({len(points):,})", colour, shape, dashed=True))
    svg.append(_step_path(report.frontier, scale, FRONTIER_COLOUR))
    beats = set(better)
    for p in by_risk(report.frontier):
        colour, label = (DOMINATING_COLOUR, "Frontier policy, dominates Safe Harbor") if p in beats else (
            FRONTIER_COLOUR, "Frontier policy")
        svg.append(_point(report, p, scale, "circle", colour, label, "frontier", 3.2))
    legend.append(_legend_item(f"frontier ({len(report.frontier):,})", FRONTIER_COLOUR, "circle", line=True))
    if better:
        legend.append(_legend_item(f"frontier policies dominating Safe Harbor ({len(better):,})", DOMINATING_COLOUR,
                                   "circle"))
    sh = report.safe_harbor
    if sh is not None:
        svg.append(_point(report, sh, scale, "star", SAFE_HARBOR_COLOUR, "Safe Harbor", "safe-harbor", 9.0))
        svg.append(f'<text x="{scale.x(sh.risk) + 10:.1f}" y="{scale.y(sh.loss) - 8:.1f}" font-size="12" '
                   f'font-weight="bold" fill="{SAFE_HARBOR_COLOUR}">Safe Harbor</text>')
        legend.append(_legend_item("Safe Harbor", SAFE_HARBOR_COLOUR, "star"))
    svg.append("</svg>")
    note = (f'<p class="note">The chart shows {len(shown):,} of {len(report.searched):,} searched policies, thinned '
            f"to keep this file small (dots overlapping on screen merged first, then an even subset kept); every "
            f"frontier point is shown.</p>") if thinned else ""
    return "\n".join([
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">',
        f"<title>{escape(report.title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>",
        f"<h1>{escape(report.title)}</h1>",
        '<p class="note">Hover a frontier, Safe Harbor or k-anonymity point for its rules, risk and loss.</p>',
        *svg, '<ul class="legend">' + "".join(legend) + "</ul>", note,
        '<div id="tip" hidden></div>', _summary(report, better, len(shown)), _table(report, beats),
        f"<script>{SCRIPT}</script>\n</body>\n</html>\n",
    ])


def thin(points: list[Point], scale: _Scale, limit: int = MAX_SEARCHED) -> list[Point]:
    """At most ``limit`` of ``points`` for the background cloud: first one per screen pixel
    (invisible loss), then, if still too many, an evenly spaced subset in input order."""
    if len(points) <= limit:
        return points
    seen: dict[tuple[int, int], Point] = {}
    for p in points:
        seen.setdefault((round(scale.x(p.risk)), round(scale.y(p.loss))), p)
    kept = list(seen.values())
    if len(kept) <= limit:
        return kept
    step = len(kept) / limit
    return [kept[int(i * step)] for i in range(limit)]


def _axes(scale: _Scale) -> str:
    """Grid, axis lines, ticks and labels."""
    x0, x1, y0, y1 = LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM
    if scale.log:
        decades = range(round(math.log10(scale.floor)), 1)
        xticks = [(10.0 ** d, "1" if d == 0 else "10" + _superscript(d)) for d in decades]
    else:
        xticks = [(t / 5, f"{t / 5:g}") for t in range(6)]
    yticks = [(t / 5, f"{t / 5:g}") for t in range(6)]
    out = ['<g class="grid">']
    out += [f'<line x1="{scale.x(v):.1f}" x2="{scale.x(v):.1f}" y1="{y0}" y2="{y1}"/>' for v, _ in xticks]
    out += [f'<line x1="{x0}" x2="{x1}" y1="{scale.y(v):.1f}" y2="{scale.y(v):.1f}"/>' for v, _ in yticks]
    out.append('</g><g class="axis">')
    out.append(f'<path d="M{x0} {y0}V{y1}H{x1}"/>')
    for v, text in xticks:
        x = scale.x(v)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y1}" y2="{y1 + 5}"/>'
                   f'<text x="{x:.1f}" y="{y1 + 19}" text-anchor="middle">{text}</text>')
    for v, text in yticks:
        y = scale.y(v)
        out.append(f'<line x1="{x0 - 5}" x2="{x0}" y1="{y:.1f}" y2="{y:.1f}"/>'
                   f'<text x="{x0 - 8}" y="{y + 4:.1f}" text-anchor="end">{text}</text>')
    xlabel = "normalized risk (log scale)" if scale.log else "normalized risk"
    out.append(f'<text x="{(x0 + x1) / 2:.0f}" y="{HEIGHT - 10}" text-anchor="middle">{xlabel}</text>')
    out.append(f'<text transform="translate(18 {(y0 + y1) / 2:.0f}) rotate(-90)" text-anchor="middle">'
               "normalized utility loss</text></g>")
    return "".join(out)


def _superscript(n: int) -> str:
    return str(n).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))


def _step_path(points: list[Point], scale: _Scale, colour: str, dashed: bool = False) -> str:
    """The stair-step (steps-post: across to the next point's risk, then down)."""
    corners = stair(points)
    if not corners:
        return ""
    d = f"M{scale.x(corners[0][0]):.1f} {scale.y(corners[0][1]):.1f}" + "".join(
        f"H{scale.x(r):.1f}V{scale.y(u):.1f}" for r, u in corners[1:])
    dash = ' stroke-dasharray="5 3"' if dashed else ""
    return f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="{1.3 if dashed else 1.7}"{dash}/>'


def _shape(shape: str, x: float, y: float, r: float) -> str:
    """An SVG element (open: attributes follow) drawing ``shape`` of radius ``r`` at (x, y)."""
    if shape == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:g}"'
    if shape == "star":
        corners = [(r if i % 2 == 0 else r * 0.45, math.pi / 2 + i * math.pi / 5) for i in range(10)]
    else:
        n, turn = {"square": (4, math.pi / 4), "diamond": (4, 0.0), "triangle": (3, math.pi / 2),
                   "down": (3, -math.pi / 2)}[shape]
        corners = [(r, turn + i * 2 * math.pi / n) for i in range(n)]
    pts = " ".join(f"{x + d * math.cos(a):.1f},{y - d * math.sin(a):.1f}" for d, a in corners)
    return f'<polygon points="{pts}"'


def _point(report: FrontierReport, p: Point, scale: _Scale, shape: str, colour: str, label: str, kind: str,
           r: float) -> str:
    """A hoverable marker carrying its data in attributes, every one escaped."""
    data = {"kind": kind, "label": label, "risk": repr(p.risk), "loss": repr(p.loss),
            "readable": readable_of(report, p), "policy": p.key}
    attrs = "".join(f' data-{k}="{escape(v)}"' for k, v in data.items())
    return f'{_shape(shape, scale.x(p.risk), scale.y(p.loss), r)} class="pt" fill="{colour}"{attrs}/>'


def _legend_item(label: str, colour: str, shape: str, line: bool = False, dashed: bool = False) -> str:
    """A legend entry: a small inline swatch (the same marker, and the line style) and its label."""
    stroke = ""
    if line or dashed:
        dash = ' stroke-dasharray="4 2"' if dashed else ""
        stroke = f'<line x1="1" x2="27" y1="8" y2="8" stroke="{colour}" stroke-width="1.6"{dash}/>'
    size = {"dot": 2.5, "star": 6.0}.get(shape, 4.0)
    marker = _shape("circle" if shape == "dot" else shape, 14, 8, size) + f' fill="{colour}"/>'
    return (f'<li><svg width="28" height="16" viewBox="0 0 28 16" aria-hidden="true">{stroke}{marker}</svg>'
            f"{escape(label)}</li>")


def _summary(report: FrontierReport, better: list[Point], shown: int) -> str:
    """The headline figures under the chart."""
    rows = [("searched policies", f"{len(report.searched):,}" + (f" ({shown:,} drawn)" if shown < len(
        report.searched) else "")), ("frontier size", f"{len(report.frontier):,}"),
            ("area under the frontier", f"{report.area:.6g}")]
    if report.criteria is not None:
        why = ", ".join(f"{k}: {n:,}" for k, n in report.why_infeasible.items())
        rows.append(("attribute criteria of [release]", report.criteria))
        rows.append(("searched policies failing them (never on the frontier)",
                     f"{report.infeasible:,}" + (f" ({why})" if why else "")))
    sh = report.safe_harbor
    if sh is None:
        rows.append(("Safe Harbor", "not evaluated"))
    else:
        rows.append(("Safe Harbor", f"risk {sh.risk:.4g}, loss {sh.loss:.4g}"))
        rows.append(("frontier policies dominating Safe Harbor", f"{len(better):,}"))
    rows += [(f"{label} frontier size", f"{len(points):,}") for label, points in report.kanon.items()]
    return ('<h2>Summary</h2>\n<dl class="summary">' + "".join(
        f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in rows) + "</dl>")


def _table(report: FrontierReport, beats: set[Point]) -> str:
    """The frontier, risk order, one row per policy; rows that beat Safe Harbor shaded."""
    rows = "".join(
        f'<tr{" class=dom" if p in beats else ""}><td class="num">{i}</td><td class="num">{p.risk:.4g}</td>'
        f'<td class="num">{p.loss:.4g}</td><td>{escape(readable_of(report, p))}</td>'
        f'<td>{"yes" if p in beats else ""}</td></tr>'
        for i, p in enumerate(by_risk(report.frontier), 1))
    return ("<h2>Frontier policies</h2>\n<table><thead><tr><th>#</th><th>risk</th><th>loss</th><th>readable rules</th>"
            f"<th>dominates Safe Harbor</th></tr></thead><tbody>{rows}</tbody></table>")
