"""What a risk–utility frontier report shows, independent of how it is drawn.

The PNG (``plot.py``) and the HTML page (``html.py``) draw the same picture from one
``FrontierReport``, so the geometry they share lives here: the stair-step through a set
of points, the left end of a log risk axis, and the frontier policies that beat Safe
Harbor.  Everything is plain data (``Point`` lists and dicts) so a report can be built
from a finished search or from saved results without re-running anything.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..search.frontier import Point, dominates

if TYPE_CHECKING:
    from ..problem import Problem

CHECKPOINT = "checkpoint.json"
BASELINES = "baselines.csv"  # what a frontier run plots besides its searched policies
"""The file of a frontier run's folder that holds its state and the identity of its problem."""

# A log axis must start somewhere above 0; risks below this are drawn at the axis floor.
MIN_RISK_FLOOR = 1e-9
# With no positive risk to look at, start the axis where population risks usually begin.
DEFAULT_RISK_FLOOR = 1e-5


@dataclass
class FrontierReport:
    """One search's results in normalized R-U space (risk and loss both in [0, 1])."""

    title: str
    searched: list[Point]  # every policy the search evaluated; can be ~15,000 points
    frontier: list[Point]  # the non-dominated ones; key = the policy's stable text
    readable: dict[str, str]  # policy text -> readable rules ("age: [90-120]; zip: [372**]")
    safe_harbor: Point | None  # Safe Harbor's (risk, loss), or None when it was not evaluated
    kanon: dict[str, list[Point]] = field(default_factory=dict)  # "5-anonymity" -> its frontier points
    area: float = 0.0  # area under the frontier's stair-step (smaller is better)
    criteria: str | None = None  # [release]'s attribute criteria the frontier keeps to, in words (None: none)
    infeasible: int = 0  # searched policies that fail them (searched, never on the frontier)
    why_infeasible: dict[str, int] = field(default_factory=dict)  # "column.criterion" -> policies failing it


def dominates_safe_harbor(report: FrontierReport) -> list[Point]:
    """Frontier points that strictly dominate Safe Harbor (Def. 3.9), in risk order: the
    policies a data owner could release instead of Safe Harbor and lose on neither axis."""
    sh = report.safe_harbor
    if sh is None:
        return []
    return sorted((p for p in report.frontier if dominates(p, sh)), key=lambda p: (p.risk, p.loss))


def by_risk(points: Iterable[Point]) -> list[Point]:
    """Points in (risk, loss) order: the order of the stair-step and of the report's table."""
    return sorted(points, key=lambda p: (p.risk, p.loss))


def stair(points: Iterable[Point], right: float = 1.0) -> list[tuple[float, float]]:
    """Corners (risk, loss) of the stair-step through ``points``, drawn "steps-post".

    A corner is kept only where the running minimum loss falls, so a list holding
    dominated points (a baseline given unfiltered) still draws a proper staircase; the
    last level is carried on to ``right`` so the curve spans the whole risk axis, as the
    area under it does.
    """
    corners: list[tuple[float, float]] = []
    for p in by_risk(points):
        if not corners or p.loss < corners[-1][1]:
            if corners and corners[-1][0] == p.risk:
                corners[-1] = (p.risk, p.loss)
            else:
                corners.append((p.risk, p.loss))
    if corners and corners[-1][0] < right:
        corners.append((right, corners[-1][1]))
    return corners


def risk_floor(report: FrontierReport) -> float:
    """Left end of a log risk axis: the decade at or below the smallest positive risk.

    Clamped to [1e-9, 0.1] so a stray tiny risk cannot squash the picture and at least
    one decade is always visible; points left of the floor are drawn on it.
    """
    risks = [p.risk for p in all_points(report) if p.risk > 0]
    if not risks:
        return DEFAULT_RISK_FLOOR
    floor = 10.0 ** math.floor(math.log10(min(risks)) + 1e-12)
    return min(max(floor, MIN_RISK_FLOOR), 0.1)


def all_points(report: FrontierReport) -> Iterable[Point]:
    """Every point the report draws."""
    yield from report.searched
    yield from report.frontier
    for points in report.kanon.values():
        yield from points
    if report.safe_harbor is not None:
        yield report.safe_harbor


def readable_of(report: FrontierReport, p: Point) -> str:
    """The readable rules of ``p``'s policy, or its key when none were given (baseline labels)."""
    return report.readable.get(p.key, p.key)


def problem_identity(problem: Problem) -> str:
    """What a checkpoint must match: the spec as parsed, the QI domains and the cell totals."""
    text = json.dumps({
        "spec": problem.spec.raw, "qis": problem.lattice.names,
        "risk": problem.spec.risk, "adversary": (problem.spec.feature("adversary").to_dict()
                                                     if problem.spec.risk == "adversary" else None),
        "domains": [[d.kind, d.size, d.text(0), d.text(d.size - 1)] for d in problem.domains],
        "records": problem.sample.total, "cells": len(problem.sample),
        "population": problem.population.total if problem.population is not None else None,
    }, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_baselines(folder: Path) -> list[Point] | None:
    """The baselines a frontier run plotted (``BASELINES``: Safe Harbor and the k-anonymity
    frontiers; ``Point.key`` is the baseline's name), or None for a run written before the file
    existed (the report then counts searched policies only, and says so)."""
    path = folder / BASELINES
    if not path.is_file():
        return None
    with path.open(newline="", encoding="utf-8") as f:
        return [Point(float(row["risk"]), float(row["loss"]), row["baseline"]) for row in csv.DictReader(f)]

