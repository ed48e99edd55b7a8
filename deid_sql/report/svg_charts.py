"""Small inline SVG charts for the release report: bar chart, histogram, paired histogram, scatter.

Hand-made like the frontier page (``html.py``) and in its colours (``plot.py``), not matplotlib:
an SVG of a few kilobytes is text inside the page, prints sharp at any size, needs no network
and no image decoder, and its bars carry their exact values in ``data-`` attributes so a
browser test can read them back.  Every text that comes from data (labels, titles) goes
through ``html.escape`` here, because the template receives these charts as finished markup.
Each chart has a ``viewBox`` and no fixed size, so the page's stylesheet scales it to the
column (or, printed, to the paper's width).

No label may be cut off at the chart's edge ("50,00" for 50,000): an SVG has no layout
engine, so every chart here measures its texts (``text_width``: per-glyph advance widths of
Helvetica/Arial, the metrics the page's sans-serif fonts are close to, with a margin for the
wider system fonts) and sizes its margins to the widest tick label, or shortens a label that
cannot fit (``fit_text``, with "…"; the bar's ``<title>`` keeps it whole).  Nor may two axis labels
overlap ("200,000" on "500,000"): tick labels are short (``axis_text``: 200k, 1M) and, where neighbours
would still touch, drawn at a regular stride (``spaced``), the last always; each carries
``class="tick"``, which the browser test measures.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from html import escape

from .frontier_report import DEFAULT_RISK_FLOOR, MIN_RISK_FLOOR
from .plot import DOMINATING_COLOUR, FRONTIER_COLOUR, SAFE_HARBOR_COLOUR, SEARCHED_COLOUR

BEFORE_COLOUR = "#8c8c8c"  # the original data: a grey darker than the searched cloud's, so it prints
AFTER_COLOUR = FRONTIER_COLOUR  # the release: the frontier's blue
SAMPLE_COLOUR = FRONTIER_COLOUR
SAFE_HARBOR_MARK = SAFE_HARBOR_COLOUR
POPULATION_COLOUR = DOMINATING_COLOUR
TEXT = 'font-size="11" fill="#333"'
MAX_SCATTER = 5_000  # background dots kept after merging those on the same pixel
FONT_SIZE = 11  # the charts' text size (``TEXT``)
#: advance widths in em of Helvetica/Arial (their AFM metrics) for the printable ASCII characters
_ASCII_WIDTHS = dict(zip(
    " !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~",
    (0.278, 0.278, 0.355, 0.556, 0.556, 0.889, 0.667, 0.191, 0.333, 0.333, 0.389, 0.584, 0.278, 0.333, 0.278, 0.278,
     *(0.556,) * 10, 0.278, 0.278, 0.584, 0.584, 0.584, 0.556, 1.015,
     0.667, 0.667, 0.722, 0.722, 0.667, 0.611, 0.778, 0.722, 0.278, 0.5, 0.667, 0.556, 0.833, 0.722, 0.778, 0.667,
     0.778, 0.722, 0.667, 0.611, 0.722, 0.667, 0.944, 0.667, 0.667, 0.611, 0.278, 0.278, 0.278, 0.469, 0.556, 0.333,
     0.556, 0.556, 0.5, 0.556, 0.556, 0.278, 0.556, 0.556, 0.222, 0.222, 0.5, 0.222, 0.833, 0.556, 0.556, 0.556,
     0.556, 0.333, 0.5, 0.278, 0.556, 0.5, 0.722, 0.5, 0.5, 0.5, 0.334, 0.26, 0.334, 0.584), strict=True))
_OTHER_WIDTHS = {"…": 1.0, "–": 0.556, "—": 1.0, "′": 0.3, "≤": 0.584, "≥": 0.584, "×": 0.584, "·": 0.278,
                 "γ": 0.5, "α": 0.6, "β": 0.6, "π": 0.6, "°": 0.4, "é": 0.556, "ü": 0.556}
WIDTH_MARGIN = 1.1  # system-ui fonts (Segoe UI, Roboto, San Francisco) run up to ~8 % wider than Arial
ASCENT, DESCENT = 0.8, 0.25  # of the font size, above and below the baseline


def readable_number(value: float | int | None) -> str:
    """A number as a reviewer reads it: 1,234 · 0.612 · 0.000232 · 130.6 · 2,640.3 (never 2.32e-04).

    Integers with thousands separators; other numbers to three significant digits in fixed
    point (trailing zeros dropped), or one decimal from 100 on.  The exact value is in the
    element's ``data-`` attribute; a test reading the printed text formats with this function.
    """
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) >= 1000):
        return f"{int(value):,}"
    v = float(value)
    if not math.isfinite(v):
        return str(v)
    if v == 0:
        return "0"
    if abs(v) >= 100:  # one decimal, never rounding away a whole digit
        return f"{v:,.1f}"
    if abs(v) < 1e-9:
        return f"{v:.3g}"
    digits = max(0, 3 - 1 - math.floor(math.log10(abs(v))))  # three significant digits, fixed point
    text = f"{v:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def text_width(text: str, size: float = FONT_SIZE, bold: bool = False) -> float:
    """The width of ``text`` in SVG user units at font ``size``: its glyphs' Helvetica/Arial widths
    times ``WIDTH_MARGIN`` (a character not in the tables counts one em: CJK and symbols)."""
    em = sum(_ASCII_WIDTHS.get(c, _OTHER_WIDTHS.get(c, 1.0)) for c in text)
    return em * size * WIDTH_MARGIN * (1.07 if bold else 1.0)


def fit_text(text: str, room: float, size: float = FONT_SIZE, bold: bool = False) -> str:
    """``text`` if it fits in ``room`` units, else its longest head that fits with "…" after it."""
    if text_width(text, size, bold) <= room:
        return text
    cut = len(text)
    while cut > 0 and text_width(text[:cut] + "…", size, bold) > room:
        cut -= 1
    return text[:cut] + "…" if cut else ""


def share_text(share: float) -> str:
    """A share of records as a percentage: 51.2 % · 0.05 % · 0 %."""
    return readable_number(round(share * 100, 2) if share >= 0.001 else share * 100) + " %"


def tick_text(value: float) -> str:
    """A short axis label: 0 · 0.01 · 1e-5 · 10,000 · 1e6."""
    if value == 0:
        return "0"
    if 1 <= abs(value) < 1e6 and float(value).is_integer():
        return f"{int(value):,}"
    if abs(value) < 1e-3 or abs(value) >= 1e6:
        mantissa, exponent = f"{value:.0e}".split("e")
        return f"{mantissa}e{int(exponent)}" if mantissa != "1" else f"1e{int(exponent)}"
    return readable_number(value)


def axis_text(value: float) -> str:
    """An axis tick label, short: 0 · 0.01 · 1e-5 · 500 · 2,000 · 200k · 1.5M (``tick_text`` with
    thousands from 10,000 as k and millions as M, so neighbouring labels of a log axis fit)."""
    v = float(value)
    if v.is_integer() and abs(v) >= 10_000:
        for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(v) >= size:
                return f"{v / size:.3g}{suffix}"
    return tick_text(value)


def spaced(positions: Sequence[float], texts: Sequence[str], gap: float = 6.0, size: float = FONT_SIZE) -> list[int]:
    """The indices of the centred tick labels to draw so that no two overlap: every label, else every
    second, third … (the smallest stride whose labels keep ``gap`` apart), the last label always
    (the strided one before it dropped when the two would touch)."""
    n = len(positions)
    half = [text_width(t, size) / 2 for t in texts]

    def clear(a: int, b: int) -> bool:
        return positions[b] - half[b] >= positions[a] + half[a] + gap

    for every in range(1, n + 1):
        kept = list(range(0, n, every))
        if kept and kept[-1] != n - 1:
            while kept and not clear(kept[-1], n - 1):
                kept.pop()
            kept.append(n - 1)
        if all(clear(a, b) for a, b in zip(kept, kept[1:])):
            return kept
    return [n - 1] if n else []


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 × 10ⁿ at or above ``value`` (the top of a count axis)."""
    if value <= 0:
        return 1.0
    base = 10.0 ** math.floor(math.log10(value))
    return next(m * base for m in (1, 2, 5, 10) if m * base >= value * (1 - 1e-12))


def _data(value: object) -> str:
    """A value for a ``data-`` attribute: exact (repr of floats, JSON of lists), escaped."""
    text = json.dumps(value, separators=(",", ":")) if isinstance(value, (list, tuple, dict)) else repr(value)
    return escape(text, quote=True)


def _open(chart_id: str, width: int, height: int, label: str, extra: str = "") -> str:
    return (f'<svg id="{escape(chart_id)}" class="chart" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}"{extra}>'
            f"<title>{escape(label)}</title>")


def _count_axis(x0: float, x1: float, y0: float, y1: float, ticks: Sequence[tuple[float, float]],
                label: str) -> list[str]:
    """Left axis with its ticks ((value, height share) each) and light grid lines, and its label
    (rotated, shortened to the axis's height when it is longer)."""
    out = []
    for value, t in ticks:
        y = y1 - t * (y1 - y0)
        out.append(f'<line x1="{x0}" x2="{x1}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ececec"/>'
                   f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end" {TEXT} class="tick">'
                   f"{escape(axis_text(value))}</text>")
    out.append(f'<path d="M{x0} {y0}V{y1}H{x1}" stroke="#333" fill="none"/>')
    out.append(f'<text transform="translate(12 {(y0 + y1) / 2:.0f}) rotate(-90)" text-anchor="middle" {TEXT}>'
               f"{escape(fit_text(label, y1 - y0))}</text>")
    return out


def count_ticks(peak: float, log: bool) -> tuple[list[tuple[float, float]], Callable[[float], float]]:
    """The ticks of a count axis up to ``peak`` and the height share of a count on it.

    Linear: 0, half and the nice ceiling.  Log (``log``): the powers of ten up to the first at or
    above ``peak``, over a floor of 0.5, so a bin of one record still has a visible bar (a tail of a
    few records among thousands stays in sight); a zero count has no bar."""
    if not log:
        top = nice_ceiling(peak)
        return [(0.0, 0.0), (top / 2, 0.5), (top, 1.0)], lambda c: float(c) / top
    decades = max(1, math.ceil(math.log10(peak) - 1e-12)) if peak > 1 else 1
    span = math.log10(10.0 ** decades / 0.5)

    def share(c: float) -> float:
        return math.log10(float(c) / 0.5) / span if c > 0 else 0.0

    return [(10.0 ** d, share(10.0 ** d)) for d in range(decades + 1)], share


def histogram(chart_id: str, edges: Sequence[float], counts: Sequence[float], *, title: str, x_label: str,
              y_label: str = "records", colour: str = AFTER_COLOUR, log_counts: bool = False,
              key: str | None = None) -> str:
    """Bins as equal-width bars (edges may be on a log scale), each edge labelled below its line;
    ``log_counts``: counts on a log axis, each bar with its count written above it.  ``key``: the
    counts' ``data-`` attribute name (default ``y_label``), a format that need not follow the words."""
    return paired_histogram(chart_id, edges, [(y_label, counts, colour)], title=title, x_label=x_label,
                            y_label=y_label + (" (log scale)" if log_counts else ""), log_counts=log_counts,
                            keys=[key or y_label])


def paired_histogram(chart_id: str, edges: Sequence[float], series: Sequence[tuple[str, Sequence[float], str]], *,
                     title: str, x_label: str, y_label: str, log_counts: bool = False,
                     keys: Sequence[str] | None = None) -> str:
    """One bar per series and bin, side by side; ``series`` = (name, counts, colour) each.

    Bins are drawn equal-width whatever their edges, so log-spaced bins (group sizes 1, 2, 5,
    10 … 10⁶) stay readable; the edge values are the tick labels.  The margins follow the
    labels: the left one the widest count tick, the right one half the last edge's label.
    ``keys``: each series' ``data-`` attribute name (default: its name).
    """
    width, height, top, bottom = 560, 230, 14, 58
    bins = max(len(edges) - 1, 1)
    peak = max((float(c) for _, counts, _ in series for c in counts), default=0.0)
    ticks, share = count_ticks(peak, log_counts)
    left = 20 + max((text_width(axis_text(v)) for v, _ in ticks), default=0.0) + 8
    labels = [axis_text(e) for e in edges]
    right = max(12.0, text_width(labels[-1]) / 2 + 4) if edges else 12.0
    left = max(left, text_width(labels[0]) / 2 + 4) if edges else left
    left, right = math.ceil(left), math.ceil(right)
    x0, x1, y0, y1 = left, width - right, top, height - bottom
    step = (x1 - x0) / bins
    shown = spaced([x0 + i * step for i in range(len(edges))], labels)  # no two edge labels overlap
    bar = step * 0.8 / max(len(series), 1)
    edge_data = _data(list(edges))
    names = list(keys) if keys is not None else [name for name, _, _ in series]
    series_data = "".join(f' data-{escape(_slug(key))}="{_data(list(counts))}"'
                          for key, (_, counts, _) in zip(names, series))
    out = [_open(chart_id, width, height, title, f' data-edges="{edge_data}"{series_data}'
                 + (' data-scale="log"' if log_counts else ""))]
    out += _count_axis(x0, x1, y0, y1, ticks, y_label)
    for s, (name, counts, colour) in enumerate(series):
        for i, count in enumerate(counts):
            h = share(float(count)) * (y1 - y0)
            x = x0 + i * step + step * 0.1 + s * bar
            lo, hi = edges[i], edges[i + 1] if i + 1 < len(edges) else edges[i]
            out.append(f'<rect x="{x:.1f}" y="{y1 - h:.1f}" width="{bar:.1f}" height="{h:.1f}" fill="{colour}" '
                       f'data-series="{escape(name)}" data-lo="{_data(lo)}" data-hi="{_data(hi)}" '
                       f'data-count="{_data(count)}"><title>{escape(name)} {escape(tick_text(lo))}–'
                       f"{escape(tick_text(hi))}: {escape(readable_number(count))}</title></rect>")
            if log_counts and count:
                out.append(f'<text x="{x + bar / 2:.1f}" y="{y1 - h - 3:.1f}" text-anchor="middle" font-size="9" '
                           f'fill="#333" class="bar-count">{escape(fit_text(readable_number(count), step, 9))}</text>')
    for i in shown:
        x = x0 + i * step
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y1}" y2="{y1 + 4}" stroke="#333"/>'
                   f'<text x="{x:.1f}" y="{y1 + 17}" text-anchor="middle" {TEXT} class="tick">'
                   f"{escape(labels[i])}</text>")
    out.append(f'<text x="{(x0 + x1) / 2:.0f}" y="{height - 26}" text-anchor="middle" {TEXT}>'
               f"{escape(fit_text(x_label, width - 8))}</text>")
    if len(series) > 1:
        x = float(x0)
        for name, _, colour in series:
            label = fit_text(name, max(width - x - 18, 0))
            out.append(f'<rect x="{x:.0f}" y="{height - 12}" width="10" height="10" fill="{colour}"/>'
                       f'<text x="{x + 14:.0f}" y="{height - 3}" {TEXT}>{escape(label)}</text>')
            x += 24 + text_width(label)
    out.append("</svg>")
    return "".join(out)


def bar_chart(chart_id: str, items: Sequence[tuple[str, float]], *, title: str, colour: str = AFTER_COLOUR) -> str:
    """Shares of records per label: labelled horizontal bars for up to 12 labels, else thin
    columns with the first and last label below (each bar names itself in a ``<title>``).
    Labels longer than their room are shortened with "…"; the room for them and for the share
    after each bar is measured, so nothing runs off the chart."""
    values = [float(v) for _, v in items]
    shares = _data(values)
    heading = f'<text x="0" y="12" {TEXT} font-weight="bold">{escape(fit_text(title, 300, bold=True))}</text>'
    if len(items) <= 12:
        width, row = 300, 16
        right = math.ceil(max((text_width(share_text(v)) for v in values), default=0.0) + 8)
        left = math.ceil(min(max((text_width(label) for label, _ in items), default=0.0) + 8, width * 0.45))
        height = 20 + row * max(len(items), 1)
        peak = max(values, default=0.0) or 1.0
        out = [_open(chart_id, width, height, title, f' data-shares="{shares}"'), heading]
        for i, (label, share) in enumerate(items):
            y = 18 + i * row
            w = max(float(share) / peak * (width - left - right), 0.0)
            out.append(f'<text x="{left - 4}" y="{y + 11}" text-anchor="end" {TEXT}>'
                       f'{escape(fit_text(label, left - 6))}</text><rect x="{left}" y="{y + 2}" width="{w:.1f}" '
                       f'height="{row - 4}" fill="{colour}" data-label="{escape(label)}" data-share="{_data(share)}">'
                       f'<title>{escape(label)}: {escape(share_text(share))}</title></rect><text '
                       f'x="{left + w + 4:.1f}" y="{y + 11}" {TEXT}>{escape(share_text(share))}</text>')
        out.append("</svg>")
        return "".join(out)
    width, height, top, bottom, right = 300, 130, 18, 22, 6
    ceiling = nice_ceiling(max(values, default=0.0))
    left = math.ceil(max(36.0, text_width(share_text(ceiling), 9) + 8))
    x0, x1, y1 = left, width - right, height - bottom
    step = (x1 - x0) / len(items)
    room = (x1 - x0) / 2 - 4
    out = [_open(chart_id, width, height, title, f' data-shares="{shares}"'), heading,
           f'<path d="M{x0} {top}V{y1}H{x1}" stroke="#333" fill="none"/>',
           f'<text x="{x0 - 4}" y="{top + 8}" text-anchor="end" font-size="9" fill="#333">'
           f"{escape(share_text(ceiling))}</text>"]
    for i, (label, share) in enumerate(items):
        h = float(share) / ceiling * (y1 - top)
        out.append(f'<rect x="{x0 + i * step:.2f}" y="{y1 - h:.1f}" width="{max(step * 0.85, 0.5):.2f}" '
                   f'height="{h:.1f}" fill="{colour}" data-label="{escape(label)}" data-share="{_data(share)}">'
                   f"<title>{escape(label)}: {escape(share_text(share))}</title></rect>")
    first, last = fit_text(items[0][0], room), fit_text(items[-1][0], room)
    out.append(f'<text x="{x0}" y="{height - 6}" {TEXT}>{escape(first)}</text>'
               f'<text x="{x1}" y="{height - 6}" text-anchor="end" {TEXT}>{escape(last)}</text>')
    out.append("</svg>")
    return "".join(out)


def scatter(chart_id: str, points: Sequence[Sequence[float]], marked: Sequence[tuple[str, str, Sequence[float],
            str, str]], *, title: str, x_label: str = "normalized risk (log scale)",
            y_label: str = "normalized utility loss") -> str:
    """(risk, loss) points in grey on a log risk axis and [0, 1] loss, with ``marked`` points
    on top: (element id, label, (risk, loss), colour, "circle" or "star") each, labelled."""
    width, height, left, right, top, bottom = 640, 400, 62, 16, 14, 48
    x0, x1, y0, y1 = left, width - right, top, height - bottom
    positive = [float(p[0]) for p in [*points, *(m[2] for m in marked)] if float(p[0]) > 0]
    floor = DEFAULT_RISK_FLOOR if not positive else min(max(
        10.0 ** math.floor(math.log10(min(positive)) + 1e-12), MIN_RISK_FLOOR), 0.1)
    span = -math.log10(floor)

    def sx(risk: float) -> float:
        t = (math.log10(max(float(risk), floor)) + span) / span
        return x0 + 6 + min(max(t, 0.0), 1.0) * (x1 - x0 - 12)

    def sy(loss: float) -> float:
        return y1 - 6 - min(max(float(loss), 0.0), 1.0) * (y1 - y0 - 12)

    out = [_open(chart_id, width, height, title, f' data-points="{len(points)}"')]
    decades = list(range(round(math.log10(floor)), 1))
    texts = [tick_text(10.0 ** d) for d in decades]
    labelled = set(spaced([sx(10.0 ** d) for d in decades], texts))
    for j, d in enumerate(decades):
        x = sx(10.0 ** d)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y0}" y2="{y1}" stroke="#ececec"/>')
        if j in labelled:
            out.append(f'<text x="{x:.1f}" y="{y1 + 17}" text-anchor="middle" {TEXT} class="tick">{texts[j]}</text>')
    for t in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = sy(t)
        out.append(f'<line x1="{x0}" x2="{x1}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ececec"/>'
                   f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end" {TEXT} class="tick">{t:g}</text>')
    out.append(f'<path d="M{x0} {y0}V{y1}H{x1}" stroke="#333" fill="none"/>')
    seen: dict[tuple[int, int], tuple[float, float]] = {}
    for p in points:
        seen.setdefault((round(sx(p[0])), round(sy(p[1]))), (sx(p[0]), sy(p[1])))
    kept = list(seen.values())
    if len(kept) > MAX_SCATTER:
        kept = [kept[int(i * len(kept) / MAX_SCATTER)] for i in range(MAX_SCATTER)]
    if kept:
        dots = "".join(f"M{x:.1f} {y:.1f}h0" for x, y in kept)
        out.append(f'<path class="searched" d="{dots}" stroke="{SEARCHED_COLOUR}" stroke-width="3" '
                   'stroke-linecap="round" fill="none"/>')
    for element_id, label, (risk, loss), colour, shape in marked:
        x, y = sx(risk), sy(loss)
        data = f'id="{escape(element_id)}" fill="{colour}" stroke="#000" stroke-width=".6" ' \
               f'data-risk="{_data(risk)}" data-loss="{_data(loss)}"'
        if shape == "star":
            corners = [((8 if i % 2 == 0 else 3.6), math.pi / 2 + i * math.pi / 5) for i in range(10)]
            pts = " ".join(f"{x + r * math.cos(a):.1f},{y - r * math.sin(a):.1f}" for r, a in corners)
            out.append(f'<polygon points="{pts}" {data}><title>{escape(label)}</title></polygon>')
        else:
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="6" {data}><title>{escape(label)}</title></circle>')
        anchor = "end" if x > (x0 + x1) / 2 else "start"
        dx = -10 if anchor == "end" else 10
        out.append(f'<text x="{x + dx:.1f}" y="{y - 8:.1f}" text-anchor="{anchor}" font-size="12" '
                   f'font-weight="bold" fill="{colour}">{escape(label)}</text>')
    out.append(f'<text x="{(x0 + x1) / 2:.0f}" y="{height - 10}" text-anchor="middle" {TEXT}>{escape(x_label)}</text>'
               f'<text transform="translate(14 {(y0 + y1) / 2:.0f}) rotate(-90)" text-anchor="middle" {TEXT}>'
               f"{escape(y_label)}</text></svg>")
    return "".join(out)


def _slug(name: str) -> str:
    """A series name as a ``data-`` attribute name (lower case letters, digits and dashes)."""
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in name.lower()).strip("-") or "series"
