"""Sensitivity of the attacker's thresholds to the deterrents (seed 002 Fig. 3.9).

``sweep(base)`` varies the deterrents one at a time around ``base`` under three
detection/penalty settings.  ``BASE`` holds the chapter's fixed values (known group,
prior 1, C_p = $20,000, G = $1,000, C_e = $10, C_l = $0, C_d = $100), with which
``bench/adversary.py`` reproduces the figure; ``deid-sql adversary --sensitivity`` sweeps
around the spec's own ``[adversary]`` parameters instead.  Fig. 3.9 plots the group size from which the
adversary walks away (risk 0 at or above it) — our k′; k (every candidate exploited
below it) is reported beside it.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from ..storage.atomic import replacing
from .params import AdversaryParams
from .risk import thresholds

BASE = AdversaryParams(access_cost=100.0, link_cost=0.0, exploit_cost=10.0, gain=1000.0, penalty=20000.0,
                       prior=1.0, h0=-4.59, h1=0.0, max_penalties=None)
SETTINGS: dict[str, dict[str, object]] = {
    "h1=0, n_f=inf": {"h1": 0.0, "max_penalties": None},
    "n_f=1": {"h1": 0.0, "max_penalties": 1},
    "h1=0.18, n_f=inf": {"h1": 0.18, "max_penalties": None},
}
SWEEPS: dict[str, tuple[float, ...]] = {
    "access_cost": (0, 50, 100, 200, 300, 500, 700, 900),
    "exploit_cost": (0, 5, 10, 20, 50, 100, 200, 500),
    "penalty": (1000, 5000, 10000, 20000, 30000, 50000, 100000),
    "detection": (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2),
}
LABELS = {"access_cost": "access cost C_d ($)", "exploit_cost": "exploit cost C_e ($)",
          "penalty": "penalty C_p ($)", "detection": "first-exploit detection probability"}


@dataclass(frozen=True)
class SweepRow:
    parameter: str
    value: float
    setting: str
    k: int
    k_prime: int


def logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def vary(base: AdversaryParams, parameter: str, value: float) -> AdversaryParams:
    if parameter == "detection":
        return base.with_changes(h0=logit(value))
    return base.with_changes(**{parameter: float(value)})


def sweep(base: AdversaryParams = BASE, sweeps: dict[str, tuple[float, ...]] | None = None,
          settings: dict[str, dict[str, object]] | None = None) -> list[SweepRow]:
    """k and k′ for every (parameter value, setting), one parameter at a time."""
    rows: list[SweepRow] = []
    for parameter, values in (sweeps or SWEEPS).items():
        for name, setting in (settings or SETTINGS).items():
            for value in values:
                t = thresholds(vary(base.with_changes(**setting), parameter, value))
                rows.append(SweepRow(parameter, float(value), name, t.k, t.k_prime))
    return rows


def write_csv(rows: list[SweepRow], path: Path, overwrite: bool = True) -> None:
    with replacing(path, overwrite) as tmp, tmp.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["parameter", "value", "setting", "k", "k_prime"])
        for r in rows:
            out.writerow([r.parameter, f"{r.value:g}", r.setting, r.k, r.k_prime])


def plot(rows: list[SweepRow], path: Path, overwrite: bool = True) -> None:
    """Four panels like Fig. 3.9: the walk-away threshold k′ (solid) against each parameter,
    and k (dashed) where some groups are only partly exploited."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10.0, 7.5))
    FigureCanvasAgg(fig)
    parameters = list(dict.fromkeys(r.parameter for r in rows))
    for i, parameter in enumerate(parameters):
        ax = fig.add_subplot(2, 2, i + 1)
        for setting in dict.fromkeys(r.setting for r in rows):
            pts = [(r.value, r.k_prime, r.k) for r in rows if r.parameter == parameter and r.setting == setting]
            line = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{setting}: k′")[0]
            if any(p[2] != p[1] for p in pts):  # partial exploitation: k < k′
                ax.plot([p[0] for p in pts], [p[2] for p in pts], linestyle="--", color=line.get_color(),
                        label=f"{setting}: k")
        ax.set_xlabel(LABELS.get(parameter, parameter))
        ax.set_ylabel("external group size")
        ax.set_title(f"({'abcd'[i]}) {LABELS.get(parameter, parameter)}", fontsize=10)
        if parameter in ("penalty", "detection"):
            ax.set_xscale("log")
        ax.grid(alpha=0.3)
    labels: dict[str, object] = {}
    for ax in fig.axes:  # one legend for the figure, covering the dashed k lines of any panel
        for handle, name in zip(*ax.get_legend_handles_labels()):
            labels.setdefault(name, handle)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    if labels:
        fig.legend(list(labels.values()), list(labels.keys()), loc="lower center", ncol=3, fontsize=8)
    with replacing(path, overwrite) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
