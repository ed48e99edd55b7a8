"""The risk–utility frontier as a PNG, drawn like seed 000 Figs. 7–8.

matplotlib is imported inside ``plot_frontier``, not at module level, so importing
deid_sql stays free of side effects and fast for users who never draw.  The figure is
built with the object API on an Agg canvas instead of ``pyplot`` + ``matplotlib.use``:
that needs no display either, but leaves the caller's pyplot backend (a notebook's, say)
and pyplot's global figure list untouched.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..storage.atomic import replacing
from .frontier_report import FrontierReport, by_risk, dominates_safe_harbor, risk_floor, stair

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from ..search.frontier import Point

FIGSIZE = (8.0, 6.0)  # inches
DPI = 120
SEARCHED_COLOUR = "#c8c8c8"
FRONTIER_COLOUR = "#1f5fa8"
DOMINATING_COLOUR = "#f28e00"
SAFE_HARBOR_COLOUR = "#c0162b"
# One (colour, marker) per k-anonymity baseline, cycled; none of them is the frontier's blue.
KANON_STYLES = (("#2e8b57", "s"), ("#7b3fa0", "^"), ("#8c564b", "D"), ("#17a2b8", "v"), ("#d6277f", "P"))


def plot_frontier(report: FrontierReport, path: Path, overwrite: bool = True, log_risk: bool = True) -> None:
    """Draw ``report`` to ``path`` as a PNG (written atomically).

    ``log_risk`` puts risk on a log axis (the default) because population risks span
    1e-5..1 and a linear axis piles the interesting low-risk policies against x = 0.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    floor = risk_floor(report) if log_risk else 0.0

    def xs(points: list[Point]) -> list[float]:
        return [max(p.risk, floor) for p in points]  # on a log axis nothing may sit left of the floor

    if report.searched:
        ax.scatter(xs(report.searched), [p.loss for p in report.searched], s=4, c=SEARCHED_COLOUR, linewidths=0,
                   rasterized=True, zorder=1, label=f"searched policies ({len(report.searched):,})")
    for i, (label, points) in enumerate(report.kanon.items()):
        colour, marker = KANON_STYLES[i % len(KANON_STYLES)]
        _staircase(ax, points, floor, colour, marker, f"{label} frontier ({len(points):,})", dashed=True)
    _staircase(ax, report.frontier, floor, FRONTIER_COLOUR, "o", f"frontier ({len(report.frontier):,})")
    better = dominates_safe_harbor(report)
    if better:
        ax.scatter(xs(better), [p.loss for p in better], s=14, c=DOMINATING_COLOUR, edgecolors="none",
                   zorder=4, label=f"frontier policies dominating Safe Harbor ({len(better):,})")
    sh = report.safe_harbor
    if sh is not None:
        ax.scatter([max(sh.risk, floor)], [sh.loss], s=140, marker="*", c=SAFE_HARBOR_COLOUR, edgecolors="black",
                   linewidths=0.6, zorder=5, label=f"Safe Harbor (risk {sh.risk:.3g}, loss {sh.loss:.3g})")
        ax.annotate("Safe Harbor", (max(sh.risk, floor), sh.loss), xytext=(8, 8), textcoords="offset points",
                    fontsize=9, color=SAFE_HARBOR_COLOUR, fontweight="bold", zorder=6)

    if log_risk:
        ax.set_xscale("log")
        ax.set_xlim(floor / 1.5, 1.5)
        ax.set_xlabel("normalized risk (log scale)")
    else:
        ax.set_xlim(-0.02, 1.02)
        ax.set_xlabel("normalized risk")
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("normalized utility loss")
    ax.set_title(f"{report.title}\nfrontier of {len(report.frontier):,} policies, area under it {report.area:.4f}",
                 fontsize=11)
    ax.grid(True, which="major", color="#e6e6e6", linewidth=0.6, zorder=0)
    ax.set_axisbelow(True)
    if ax.get_legend_handles_labels()[0]:
        # Below the axes, outside them: a legend inside would sit on the dots somewhere.
        fig.legend(loc="outside lower center", ncols=2, fontsize=8.5, frameon=False, markerscale=1.2)
    with replacing(path, overwrite) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI)


def _staircase(ax: Axes, points: list[Point], floor: float, colour: str, marker: str, label: str,
               dashed: bool = False) -> None:
    """One frontier: its stair-step line and its points, sharing one legend entry."""
    if not points:
        return
    corners = stair(points)
    ordered = by_risk(points)
    style: dict[str, Any] = {"linestyle": (0, (4, 2)) if dashed else "-", "linewidth": 1.2 if dashed else 1.6}
    ax.plot([max(r, floor) for r, _ in corners], [u for _, u in corners], drawstyle="steps-post", color=colour,
            marker=None, zorder=2 if dashed else 3, **style)
    ax.plot([max(p.risk, floor) for p in ordered], [p.loss for p in ordered], linestyle="none", marker=marker,
            markersize=3.5 if dashed else 3, color=colour, zorder=2 if dashed else 3)
    # A proxy artist carries both line and marker into the legend as one entry.
    ax.plot([], [], color=colour, marker=marker, markersize=4, label=label, **style)
