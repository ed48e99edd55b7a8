"""A frontier run as a job: search, checkpoint and resume in a folder, write the reports.

The folder holds ``checkpoint.json`` (the search state and the identity of the problem it
belongs to), ``frontier.csv``, ``searched.csv``, ``frontier.png`` and ``frontier.html``.
Every file is written atomically; a checkpoint of another problem is never resumed.

When the spec's ``[release]`` has attribute criteria, the frontier holds only the policies that
meet them (``release.constraint.AttributeConstraint``, judged on cells as the gate judges rows):
``searched.csv`` says of each policy whether it does and which criteria it fails, and the page and
the command's summary how many failed and why.
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DeidError, OutputError
from ..evaluate.chain import ChainEvaluator
from ..policies.lattice import Lattice
from ..problem import Problem
from ..release.constraint import AttributeConstraint
from ..release.safe_harbor import safe_harbor_metrics
from ..report.frontier_report import BASELINES, CHECKPOINT, FrontierReport, problem_identity
from ..report.html import html_frontier
from ..report.plot import plot_frontier
from ..search.frontier import Frontier, Point, dominates
from ..search.frontier_search import FrontierState, run
from ..search.kanon import improvement_rate, kanonymity_frontier
from ..search.rcs import RandomChainSearch
from ..search.shs import SublatticeHeuristicSearch
from ..storage.atomic import write_text

SEARCHES = {"rcs": RandomChainSearch, "shs": SublatticeHeuristicSearch}
OUTPUTS = ("frontier.csv", "searched.csv", "frontier.png", "frontier.html")
DEFAULT_BUDGET = 14_780  # seed 000 §4.2.1: 20 maximal chains of its 739-level lattice
DEFAULT_THRESHOLD = 0.3  # TH of SHS; the paper gives no value (the benchmarks page says how it was chosen)
K_VALUES = (5, 10)


@dataclass
class FrontierRun:
    """A finished (or interrupted) run and what it was compared with; ``seconds`` is how long each
    step of this run took (``search``: this run's part of ``state.seconds``, which also counts the
    runs it resumed; ``compare``: Safe Harbor and the k-anonymity frontiers; ``write``: the files)."""

    state: FrontierState
    safe_harbor: Point | None
    dominating_safe_harbor: list[Point]
    kanon: dict[str, Frontier] = field(default_factory=dict)
    improvement: dict[str, float] = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


def _load_checkpoint(folder: Path, identity: str, method: str, seed: int, lattice: Lattice) -> FrontierState:
    path = folder / CHECKPOINT
    if not path.exists():
        raise OutputError(f"{folder} holds no {CHECKPOINT} to resume; run without --resume first")
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("problem") != identity:
        raise OutputError(f"{path} belongs to a different problem (spec, domains or data changed); "
                          f"refusing to resume — use another --out folder")
    state = FrontierState.from_json(_canonical_keys(data["state"], lattice))
    if (state.method, state.seed) != (method, seed):
        raise OutputError(f"{path} is a {state.method} run with seed {state.seed}; resume it with "
                          f"--method {state.method} --seed {state.seed}")
    return state


def _canonical_keys(state: dict[str, Any], lattice: Lattice) -> dict[str, Any]:
    """The checkpoint's policy keys in today's text form: checkpoints written before policies
    had a readable text hold bit strings, and a resumed run must recognize the policies they name
    (``seen``) under the key it now gives them."""
    known: dict[str, str] = {}

    def key(text: str) -> str:
        if text not in known:
            known[text] = lattice.parse(text).text()
        return known[text]

    out = dict(state)
    for name in ("frontier", "searched"):
        out[name] = [[r, u, key(k)] for r, u, k in state[name]]
    out["pruned"] = [[key(a), key(b)] for a, b in state["pruned"]]
    return out


def check_folder(folder: Path, resume: bool, overwrite: bool) -> None:
    """What can be said of the run's folder before the problem is loaded: a folder holding an earlier
    run needs --resume or --overwrite, and --resume needs its checkpoint (``OutputError``)."""
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"{folder} is a file; name a folder for the frontier run")
    if resume:
        if not (folder / CHECKPOINT).exists():
            raise OutputError(f"{folder} holds no {CHECKPOINT} to resume; run without --resume first")
        return
    taken = [n for n in (CHECKPOINT, *OUTPUTS) if (folder / n).exists()]
    if taken and not overwrite:
        raise OutputError(f"{folder} already holds a frontier run ({', '.join(taken)}); pass --resume to "
                          f"continue it or --overwrite to start again")


def run_frontier(problem: Problem, folder: Path, method: str = "shs", budget: int = DEFAULT_BUDGET, seed: int = 0,
                 threshold: float = DEFAULT_THRESHOLD, resume: bool = False, overwrite: bool = False,
                 progress: Callable[[int], None] | None = None, plots: bool = True,
                 k_values: tuple[int, ...] = K_VALUES, bits: bool = False) -> FrontierRun:
    """Search the frontier, checkpointing into ``folder``, then write its reports."""
    if method not in SEARCHES:
        raise DeidError(f"unknown frontier method {method!r}; use rcs or shs")
    if budget < 2:
        raise DeidError(f"budget {budget} is below 2: the frontier starts from the top and the bottom")
    if not 0 <= threshold <= 1:
        raise DeidError(f"TH {threshold!r} is outside [0, 1]: it is a probability of updating the frontier")
    problem.require_monotone_risk(f"the {method} frontier search (its bounding regions)")
    folder.mkdir(parents=True, exist_ok=True)
    identity = problem_identity(problem)
    if resume:
        state = _load_checkpoint(folder, identity, method, seed, problem.lattice)
        state.budget, state.threshold, state.interrupted = max(budget, state.evaluations), threshold, False
    else:
        check_folder(folder, resume, overwrite)
        state = FrontierState(method, budget, seed, threshold)
    rng = np.random.default_rng(seed)
    if state.rng_state is not None:
        rng.bit_generator.state = state.rng_state
    chains = ChainEvaluator(problem.lattice, problem.fast.path, problem.fast.normalizers)
    constraint = AttributeConstraint.of(problem)  # a policy failing [release]'s attribute criteria: never on it
    state.criteria = constraint.describe() if constraint is not None else None
    searcher = SEARCHES[method](problem.lattice, problem.fast, chains, state, rng, constraint)

    def save(s: FrontierState) -> None:
        payload = {"problem": identity, "state": s.to_json()}
        write_text(folder / CHECKPOINT, json.dumps(payload), overwrite=True)

    earlier = state.seconds  # search time of the runs this one resumes
    run(searcher, progress, save)
    save(state)
    started = time.perf_counter()
    result = _compare(problem, state, k_values)
    compared = time.perf_counter()
    result.written = write_reports(problem, folder, result, plots, bits)
    result.seconds = {"search": state.seconds - earlier, "compare": compared - started,
                      "write": time.perf_counter() - compared}
    return result


def _compare(problem: Problem, state: FrontierState, k_values: tuple[int, ...]) -> FrontierRun:
    sh_point = None
    roles = {q.role for q in problem.spec.qis}
    if {"zip", "age"} <= roles:
        m = safe_harbor_metrics(problem)
        sh_point = Point(m.risk, m.loss, "Safe Harbor")
    out = FrontierRun(state, sh_point, [])
    if sh_point is not None:
        out.dominating_safe_harbor = [p for p in state.frontier if dominates(p, sh_point)]
    for k in k_values:
        kf = kanonymity_frontier(problem, k).frontier
        if len(kf):
            out.kanon[f"{k}-anonymity"] = kf
            out.improvement[f"{k}-anonymity"] = improvement_rate(kf, state.frontier)
    return out


def write_reports(problem: Problem, folder: Path, result: FrontierRun, plots: bool = True,
                  bits: bool = False) -> list[Path]:
    """frontier.csv, searched.csv, baselines.csv (Safe Harbor and the k-anonymity frontiers) and
    (with ``plots``) frontier.png and frontier.html; policies are
    given by their readable text, and with ``bits`` also by their bit string (a last column)."""
    extra = ["bits"] if bits else []

    def bit_column(key: str) -> list[str]:
        return [problem.lattice.parse(key).bit_text()] if bits else []

    state = result.state
    readable = {p.key: problem.lattice.parse(p.key).readable() for p in state.frontier}
    rows = io.StringIO()
    w = csv.writer(rows, lineterminator="\n")
    w.writerow(["risk", "loss", "policy", "readable", "dominates_safe_harbor", *extra])
    dominating = {p.key for p in result.dominating_safe_harbor}
    for p in state.frontier:
        w.writerow([p.risk, p.loss, p.key, readable[p.key], p.key in dominating, *bit_column(p.key)])
    write_text(folder / "frontier.csv", rows.getvalue(), overwrite=True)
    rows = io.StringIO()
    w = csv.writer(rows, lineterminator="\n")
    judged = ["meets_criteria", "fails"] if state.criteria is not None else []  # the attribute criteria
    w.writerow(["evaluation", "risk", "loss", "policy", *judged, *extra])
    for i, p in enumerate(state.searched, 1):
        failed = state.infeasible.get(p.key, [])
        verdict = [not failed, " ".join(failed)] if judged else []
        w.writerow([i, p.risk, p.loss, p.key, *verdict, *bit_column(p.key)])
    write_text(folder / "searched.csv", rows.getvalue(), overwrite=True)
    # what the plots draw besides the searched policies, so a report placing a release on this run
    # can say whether anything plotted dominates it (``report.release_report.place_on_frontier``)
    rows = io.StringIO()
    w = csv.writer(rows, lineterminator="\n")
    w.writerow(["baseline", "risk", "loss", "policy"])
    if result.safe_harbor is not None:
        w.writerow(["Safe Harbor", result.safe_harbor.risk, result.safe_harbor.loss, "safe-harbor"])
    for name, points in result.kanon.items():
        for p in points:
            w.writerow([name, p.risk, p.loss, p.key])
    write_text(folder / BASELINES, rows.getvalue(), overwrite=True)
    written = [folder / "frontier.csv", folder / "searched.csv", folder / BASELINES]
    if plots:
        report = FrontierReport(
            title=f"{state.method.upper()} frontier, {state.evaluations:,} policies, seed {state.seed}",
            searched=state.searched, frontier=list(state.frontier), readable=readable,
            safe_harbor=result.safe_harbor, kanon={k: list(f) for k, f in result.kanon.items()},
            area=state.frontier.area(), criteria=state.criteria, infeasible=len(state.infeasible),
            why_infeasible=state.why_infeasible())
        plot_frontier(report, folder / "frontier.png")
        html_frontier(report, folder / "frontier.html")
        written += [folder / "frontier.png", folder / "frontier.html"]
    return written
