"""Boundary-search benchmark of deid-sql: Bisecting Policy Search (BPS) against the Directed
Policy Search it was designed to replace, with Safe Harbor as threshold and yardstick.

Seed 001 argues that BPS finds boundary policies (risk <= T, with a more specific neighbour
above T) with far fewer evaluations than a directed random walk, because each iteration
bisects the lattice instead of stepping one level at a time (Table 2 / Fig. 9: 670 vs 5,140
policies evaluated, 16.4 s vs 109.5 s per boundary policy on their Adult).  This script
checks that claim on the UCI Adult sample with synthetic ZIP codes drawn from a synthetic
6M-person state census (the setting of bench/evaluate.py), with T = the risk of HIPAA Safe
Harbor on the same data:

1. the problem: load time, cells, lattice bits, Safe Harbor's risk, loss and restricted prefixes;
2. BPS and Directed, same seed and iteration budget: boundary policies found, how many are
   non-dominated, policies evaluated, cost per boundary policy, the Directed/BPS ratios beside
   the paper's, and how many BPS policies beat Safe Harbor (risk <= its risk, lower loss);
3. non-dominated counts after each quarter of the budget (Fig. 8 style);
4. with --seed-count > 1, mean +- sd of the cost over seeds.

Targets: BPS <= 0.1 s per boundary policy; Directed evaluates >= 5x more policies than BPS
per boundary policy.  Only the report goes to stdout.

    python bench/alternatives.py [--iterations 100] [--seeds 0] [--seed-count 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from adult_zip import ADULT_CSV, DATA_SEED, build, out

from deid_sql.problem import Problem
from deid_sql.release.safe_harbor import safe_harbor
from deid_sql.search import BoundarySearch, bisecting_policy_search, directed_policy_search

BPS_TARGET_S = 0.1  # seconds per boundary policy
RATIO_TARGET = 5.0  # Directed / BPS evaluations per boundary policy
PAPER = {"BPS": (16.4, 670), "Directed": (109.5, 5140)}  # seed 001: s per boundary policy, evaluated

Search = Callable[..., BoundarySearch]
METHODS: dict[str, Search] = {"BPS": bisecting_policy_search, "Directed": directed_policy_search}


def per_boundary(r: BoundarySearch) -> tuple[float, float]:
    """Seconds and evaluations per distinct boundary policy found (inf when none)."""
    n = len(r.found)
    return (r.seconds / n, r.evaluations / n) if n else (float("inf"), float("inf"))


def non_dominated_after(problem: Problem, r: BoundarySearch, k: int) -> int:
    """Policies found in the first ``k`` iterations with no strict descendant among them."""
    prefix = [b.policy for b in r.found if b.found_at <= k]
    return sum(not any(problem.lattice.precedes(a, b) for b in prefix) for a in prefix)


def not_boundary(problem: Problem, r: BoundarySearch, threshold: float) -> int:
    """Found policies failing Def. 2.3 when re-checked on the problem's own evaluator: risk
    <= T with the stored metrics, and the witness a direct child with risk > T."""
    bad = 0
    for b in r.found:
        again = problem.evaluate(b.policy)
        ok = (again == b.metrics and again.risk <= threshold and problem.lattice.is_cover(b.policy, b.witness)
              and problem.evaluate(b.witness).risk > threshold)
        bad += not ok
    return bad


def run(problem: Problem, threshold: float, iterations: int, seed: int) -> dict[str, BoundarySearch]:
    return {name: search(problem.lattice, problem.fast, threshold, iterations, seed)
            for name, search in METHODS.items()}


def ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b else "-"


def report_run(problem: Problem, runs: dict[str, BoundarySearch], threshold: float, sh_loss: float) -> None:
    bps, dps = runs["BPS"], runs["Directed"]
    (bs, be), (ds, de) = per_boundary(bps), per_boundary(dps)
    (pbs, pbe), (pds, pde) = PAPER["BPS"], PAPER["Directed"]
    out(f"  {'':34}{'BPS':>10}{'Directed':>10}{'Dir/BPS':>9}   | paper: {'BPS':>7}{'Directed':>9}{'Dir/BPS':>8}")
    rows = [
        ("iterations", f"{bps.iterations}", f"{dps.iterations}", "", ("", "", "")),
        ("boundary policies found (distinct)", f"{len(bps.found)}", f"{len(dps.found)}", "", ("", "", "")),
        ("non-dominated among them", f"{bps.non_dominated}", f"{dps.non_dominated}", "", ("", "", "")),
        ("policies evaluated in total", f"{bps.evaluations:,}", f"{dps.evaluations:,}",
         ratio(dps.evaluations, bps.evaluations), (f"{pbe:,}", f"{pde:,}", ratio(pde, pbe))),
        ("evaluations per boundary policy", f"{be:.2f}", f"{de:.2f}", ratio(de, be), ("", "", "")),
        ("seconds per boundary policy", f"{bs:.4f}", f"{ds:.4f}", ratio(ds, bs),
         (f"{pbs}", f"{pds}", ratio(pds, pbs))),
        ("total seconds", f"{bps.seconds:.2f}", f"{dps.seconds:.2f}", ratio(dps.seconds, bps.seconds), ("", "", "")),
    ]
    for label, b, d, r, (pb, pd, pr) in rows:
        out(f"  {label:<34}{b:>10}{d:>10}{r:>9}   |        {pb:>7}{pd:>9}{pr:>8}")
    out("  (per boundary policy = per distinct policy found; the paper's ratios are Directed/BPS on its Adult)")
    for name, r in runs.items():
        repeats = r.iterations - len(r.found)
        bad = not_boundary(problem, r, threshold)
        out(f"  {name}: {repeats} iterations re-found an earlier policy; {bad} of {len(r.found)} found fail the "
            f"boundary re-check")
    out("  (re-check on the problem's evaluator: same metrics, risk <= T, witness a direct child with risk > T)")
    better = [b.metrics.loss for b in bps.found if b.metrics.risk <= threshold and b.metrics.loss < sh_loss]
    best = f"best loss {min(better):.4f}" if better else "no better loss"
    out(f"  BPS policies strictly beating Safe Harbor (risk <= SH risk, loss < SH loss): {len(better)} of "
        f"{len(bps.found)}; {best} vs Safe Harbor loss {sh_loss:.4f}")


def mean_sd(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.4g} +- {sd:.2g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--iterations", type=int, default=100, help="iterations per search (default 100)")
    parser.add_argument("--seeds", type=int, default=0, help="seed of the searches; the first one with --seed-count")
    parser.add_argument("--seed-count", type=int, default=1, help="repeat over seeds, seeds+1, ... (default 1)")
    args = parser.parse_args(argv)
    if args.iterations < 1 or args.seed_count < 1:
        parser.error("--iterations and --seed-count must be at least 1")
    out("deid-sql boundary-search benchmark: BPS vs Directed Policy Search")
    out(f"  python {sys.version.split()[0]}, iterations {args.iterations}, seeds {args.seeds}"
        f"..{args.seeds + args.seed_count - 1}, data seed {DATA_SEED}")
    out()
    out("== 1. Problem: Adult + ZIP (QIs age, sex, race, zip) ==")
    if not ADULT_CSV.exists():
        out(f"  {ADULT_CSV} not found: benchmark skipped")
        return 0
    with tempfile.TemporaryDirectory(prefix="deid-bench-") as tmp:
        spec, build_s = build(Path(tmp), "bench-alternatives")
        start = time.perf_counter()
        with Problem.from_spec(spec) as problem:
            load_s = time.perf_counter() - start
            lattice = problem.lattice
            bits = ", ".join(f"{n} {lattice.offsets[i + 1] - lattice.offsets[i]}" for i, n in enumerate(lattice.names))
            pop = len(problem.population) if problem.population is not None else 0
            out(f"  data built in {build_s:.2f} s; Problem.from_spec {load_s:.2f} s")
            out(f"  {len(problem.sample):,} sample cells ({problem.sample.total:,} records), {pop:,} population cells")
            out(f"  lattice bits {lattice.nbits} ({bits})")
            sh = safe_harbor(problem)
            shm = problem.evaluate(sh.recoding)
            threshold = shm.risk
            out(f"  Safe Harbor: risk {shm.risk:.6f} (normalized), loss {shm.loss:.4f}, restricted prefixes "
                f"{', '.join(sh.restricted_prefixes) or 'none'}")
            out()
            out(f"== 2. BPS vs Directed, T = Safe Harbor risk {threshold:.6f}, seed {args.seeds} ==")
            runs = run(problem, threshold, args.iterations, args.seeds)
            report_run(problem, runs, threshold, shm.loss)
            out()
            out("== 3. Non-dominated boundary policies by iteration (Fig. 8 style) ==")
            marks = sorted({max(1, args.iterations * q // 4) for q in (1, 2, 3, 4)})
            out(f"  {'after iteration':<18}" + "".join(f"{k:>8}" for k in marks))
            for name, r in runs.items():
                out(f"  {name:<18}" + "".join(f"{non_dominated_after(problem, r, k):>8}" for k in marks))
            out()
            every = [runs]
            if args.seed_count > 1:
                out(f"== 4. Over {args.seed_count} seeds ({args.seeds}..{args.seeds + args.seed_count - 1}) ==")
                every += [run(problem, threshold, args.iterations, s)
                          for s in range(args.seeds + 1, args.seeds + args.seed_count)]
                for name in METHODS:
                    costs = [per_boundary(r[name]) for r in every]
                    out(f"  {name:<9} seconds per boundary policy {mean_sd([c[0] for c in costs])}; policies "
                        f"evaluated {mean_sd([float(r[name].evaluations) for r in every])}; distinct found "
                        f"{mean_sd([float(len(r[name].found)) for r in every])}")
            else:
                out("== 4. Over seeds: skipped (--seed-count 1) ==")
            out()
    bps_s = max(per_boundary(r["BPS"])[0] for r in every)
    ev_ratio = min(per_boundary(r["Directed"])[1] / per_boundary(r["BPS"])[1] for r in every)
    worst = " (worst seed)" if len(every) > 1 else ""
    out("== Summary ==")
    for target, measured, ok in (
            (f"BPS <= {BPS_TARGET_S} s per boundary policy{worst}", f"{bps_s:.4f} s", bps_s <= BPS_TARGET_S),
            (f"Directed/BPS evaluations >= {RATIO_TARGET:.0f}x{worst}", f"{ev_ratio:.1f}x", ev_ratio >= RATIO_TARGET)):
        out(f"  {target:<50} {measured:>10}   {'PASS' if ok else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
