"""Report benchmark: what the expert-determination report costs beyond the evaluation it needs, and its size.

The report of one policy evaluates it (``problem.evaluate``), and then measures the release query,
evaluates HIPAA Safe Harbor and the original data for the comparison, computes the marginals and
the histograms, renders the page and writes it with its JSON twin.  The issue's target is the part
beyond the evaluation: build + render + write at most 3 s more than ``problem.evaluate`` of the same
policy, measured in the same process on the same loaded problem (the UCI Adult sample with ZIP codes
from the synthetic census, the setting of bench/frontier.py):

1. the problem: data, load;
2. per run (the first, cold, and the median of --runs): ``problem.evaluate`` of the policy (the
   baseline), then ``build_report``, ``render_html`` and the atomic write of page + twin, timed apart;
3. the same with the policy placed on a frontier run of --budget policies (``--frontier``);
4. the same release with the groups of fewer than --suppress-below records suppressed (the report's
   distributions, losses and information kept then come from the cells with the suppression);
5. the sizes of the page and the twin, in each part.

    python bench/report.py [--runs 3] [--budget 1000] [--policy P] [--suppress-below 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from adult_zip import ADULT_CSV, build, out

from deid_sql.jobs.frontier import run_frontier
from deid_sql.problem import Problem
from deid_sql.release.plan import plan_of
from deid_sql.report.release_html import render_html
from deid_sql.report.release_report import build_report
from deid_sql.report.release_write import write_report
from deid_sql.starter.demo import ADULT_COLUMNS_ROLES

POLICY = "age:cuts=18,30,45,65,90|race:top"  # bench/release.py's policy
BEYOND_TARGET_S = 3.0
DEMO_SIZE_TARGET = 1_000_000  # the bound for the demo's page; printed here for the Adult page


def once(problem: Problem, policy: str, folder: Path, name: str, frontier: Path | None,
         suppress_below: int | None = None) -> dict[str, float]:
    """One timed report: the evaluation, then build, render and write (each from a cold start of its own)."""
    t0 = time.perf_counter()
    problem.evaluate(problem.policy(policy))
    t1 = time.perf_counter()
    report = build_report(problem, plan_of(problem, policy, suppression=suppress_below), frontier=frontier,
                          command="python bench/report.py")
    t2 = time.perf_counter()
    render_html(report)  # timed alone; write_report renders again, so the write is timed as the difference
    t3 = time.perf_counter()
    html, twin = write_report(report, folder / f"{name}.html", overwrite=True)
    t4 = time.perf_counter()
    return {"evaluate": t1 - t0, "build": t2 - t1, "render": t3 - t2, "write": max(0.0, (t4 - t3) - (t3 - t2)),
            "report": (t2 - t1) + (t4 - t3), "html": html.stat().st_size, "json": twin.stat().st_size}


def part(problem: Problem, policy: str, folder: Path, name: str, runs: int,
         frontier: Path | None, suppress_below: int | None = None) -> tuple[dict[str, float], bool]:
    timings = [once(problem, policy, folder, name, frontier, suppress_below) for _ in range(runs)]
    med = {k: statistics.median(t[k] for t in timings) for k in timings[0]}
    beyond = med["report"] - med["evaluate"]
    first = timings[0]
    out(f"  first run (cold)       evaluate {first['evaluate']:.3f} s; report {first['report']:.3f} s = build "
        f"{first['build']:.3f} + render {first['render']:.3f} + write {first['write']:.3f}; beyond "
        f"{first['report'] - first['evaluate']:.3f} s")
    ok_first = first["report"] - first["evaluate"] <= BEYOND_TARGET_S
    out(f"  evaluate (baseline)    {med['evaluate']:.3f} s")
    out(f"  report                 {med['report']:.3f} s = build {med['build']:.3f} + render {med['render']:.3f} "
        f"+ write {med['write']:.3f} (median of {runs})")
    ok = beyond <= BEYOND_TARGET_S and ok_first
    out(f"  beyond the evaluation  {beyond:.3f} s (target <= {BEYOND_TARGET_S:g} s, also the cold run): "
        f"{'PASS' if ok else 'FAIL'}")
    out(f"  size                   page {med['html'] / 1e3:,.1f} kB, JSON twin {med['json'] / 1e3:,.1f} kB"
        f" ({'under' if med['html'] < DEMO_SIZE_TARGET else 'OVER'} the demo's 1 MB bound)")
    return med, ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="timed reports per part (median)")
    parser.add_argument("--budget", type=int, default=1000, help="policies of the frontier run of part 3 (0: skip)")
    parser.add_argument("--policy", default=POLICY, help="the policy reported")
    parser.add_argument("--suppress-below", type=int, default=5, help="part 4's suppression (0: skip)")
    args = parser.parse_args(argv)
    if not ADULT_CSV.exists():
        out(f"the Adult data is not in {ADULT_CSV.parent}; see ../shared/data/adult")
        return 2
    with tempfile.TemporaryDirectory(prefix="deid-report-bench-") as tmp:
        folder = Path(tmp)
        out("1. the problem: UCI Adult with ZIP5 from the synthetic census")
        spec, seconds = build(folder, "adult-zip")
        # a report describes a release, so every column needs its role (the demo's --adult roles)
        spec.write_text(spec.read_text(encoding="utf-8") + ADULT_COLUMNS_ROLES, encoding="utf-8")
        t0 = time.perf_counter()
        with Problem.from_spec(spec) as problem:
            out(f"  data {seconds:.1f} s, load {time.perf_counter() - t0:.1f} s: {problem.sample.total:,} records, "
                f"{len(problem.sample):,} cells, {problem.lattice.nbits} lattice bits; policy {args.policy}")
            out("\n2. the report of the policy")
            _, ok = part(problem, args.policy, folder, "report", args.runs, None)
            if args.budget:
                out(f"\n3. the same, placed on a frontier run of {args.budget:,} policies (SHS)")
                t0 = time.perf_counter()
                run_frontier(problem, folder / "frontier", "shs", args.budget, seed=0)
                out(f"  frontier run {time.perf_counter() - t0:.1f} s (not part of the report)")
                _, ok_frontier = part(problem, args.policy, folder, "report-frontier", args.runs, folder / "frontier")
                ok = ok and ok_frontier
            if args.suppress_below:
                out(f"\n4. the release with the groups of fewer than {args.suppress_below} records suppressed")
                _, ok_suppressed = part(problem, args.policy, folder, "report-suppressed", args.runs, None,
                                        args.suppress_below)
                ok = ok and ok_suppressed
    out(f"\nsummary: report generation within {BEYOND_TARGET_S:g} s beyond the evaluation: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
