"""Adversary benchmark of deid-sql: the economic re-identification attacker of seed 002 Chapter 3.

Seed 002 models the attacker as a factored MDP (access an external dataset, link, exploit
candidates one at a time) and solves it per record; §3.6 times the plain LP against the
Two-Level LP on 5,000 Adult records in the unknown-group scenario (Fig. 3.4: 616 s vs
13,444 s at an external dataset of 500K, CPLEX on 24 cores), studies the known-group
thresholds k and k′ (Fig. 3.5-3.8) and their sensitivity to the deterrents (Fig. 3.9).
This script checks deid-sql's implementation (deid_sql/adversary, METHODS.md decision 7)
on the UCI Adult sample with synthetic ZIP codes drawn from a synthetic 6M-person census:

1. the problem and the 5,000 records: their groups under Safe Harbor and the raw QIs;
2. §3.6 performance: unknown group, n = 5K, 50K, 500K, solvers dp, two-level and the plain
   LP (within a time budget, extrapolated when it does not finish), identical P_reid;
3. a frontier search (SHS) with the adversary's risk against the same search with 1/g;
4. the sensitivity sweep of Fig. 3.9 (CSV and PNG in bench/out/);
5. the known-group thresholds k, k′ and k′ with C_d sunk beside the chapter's;
6. a summary.

Targets: Two-Level LP at 500K <= 60 s; DP <= 1 s; every finished solver gives the same
per-group P_reid (<= 1e-9); the adversary frontier search <= 2x the 1/g search.

    python bench/adversary.py [--quick] [--lp-budget SECONDS] [--frontier-budget POLICIES]
"""

from __future__ import annotations

import argparse
import math
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from adult_zip import ADULT_CSV, DATA_SEED, build, out

from deid_sql.adversary import sensitivity
from deid_sql.adversary.assess import Assessment, assess
from deid_sql.adversary.params import AdversaryParams
from deid_sql.adversary.risk import thresholds
from deid_sql.domains.recoding import Recoding
from deid_sql.jobs.frontier import run_frontier
from deid_sql.problem import Problem
from deid_sql.release.safe_harbor import safe_harbor

OUT = Path(__file__).resolve().parent / "out"
RECORDS = 5_000  # §3.6: "5000 randomly selected Adult records"
RECORD_SEED = 0
SIZES = (5_000, 50_000, 500_000)  # external dataset sizes n of Fig. 3.4
SOLVERS = ("dp", "two-level", "lp")
LP_BUDGET = {False: 600.0, True: 30.0}  # seconds of plain LP over the three n (full, --quick)
FRONTIER_BUDGET = {False: 3_000, True: 500}  # policies per frontier search (full, --quick)
FRONTIER_REPEATS = 2  # each search run this often, alternating; the fastest run counts
PROBE_SHARE, PROBE_MAX = 0.2, 60.0  # of an n's LP budget kept to time single MDPs for the extrapolation
TWO_LEVEL_TARGET = 60.0  # seconds at n = 500K
DP_TARGET = 1.0  # seconds
SAME_TOL = 1e-9  # max |P_reid difference| between solvers
FRONTIER_TARGET = 2.0  # adversary / population run_frontier time
PAPER_TIMES = {"two-level": 616.0, "lp": 13_444.0}  # seconds at n = 500K (Fig. 3.4, CPLEX, 24 cores)
PAPER_POPULATION = 9_553_967  # NC census (§3.5)
PAPER_ADULT = 32_561

Row = tuple[str, str, bool | None]  # target, measured, pass (None: information only)


def rss_mb() -> float:
    """Peak resident set size of this process so far (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# -- 1. the records and their groups ---------------------------------------------------------
@dataclass(frozen=True)
class Groups:
    """The generalized groups the sampled records fall into under one policy."""

    name: str
    m: np.ndarray  # sampled records per group
    g: np.ndarray  # population size of the group (g = max(census, m) over the whole sample)
    groups_all: int  # groups of the whole sample


def pick_records(problem: Problem) -> np.ndarray:
    """RECORDS sample records, drawn without replacement, as the index of their cell.

    The sample is stored as cells (distinct QI combinations with counts); record j of the
    expanded sample lies in cell ``np.repeat(arange(cells), counts)[j]``, so drawing record
    indices uniformly draws records uniformly.  The same records serve every policy."""
    cell_of = np.repeat(np.arange(len(problem.sample)), problem.sample.counts)
    rng = np.random.default_rng(RECORD_SEED)
    return cell_of[rng.choice(cell_of.size, size=RECORDS, replace=False)]


def record_groups(problem: Problem, name: str, recoding: Recoding, cells: np.ndarray) -> Groups:
    """m and g of the groups of the records in ``cells`` under ``recoding``.

    ``problem.fast.path.groups`` gives (m, census, g) per generalized group of the whole
    sample, the groups in ascending order of their mixed-radix key (QI 0 most significant,
    each QI's digit its group id — FastEvaluator._group_keys).  We build the same key for
    every sample cell, so a binary search in the sorted distinct keys gives each cell's
    group; a record's population size g is its group's, whichever records were drawn.
    The mapping is checked: the whole sample's counts per group must equal groups()'s m."""
    m_all, _, g_all = problem.fast.path.groups(recoding)
    positions = problem.sample.positions
    key = np.zeros(positions.shape[0], dtype=np.int64)
    for q, qrec in enumerate(recoding.qis):
        key = key * qrec.n_groups + qrec.group_of[positions[:, q]]
    keys = np.unique(key)
    group_of_cell = np.searchsorted(keys, key)
    assert keys.size == m_all.size and np.array_equal(
        np.bincount(group_of_cell, weights=problem.sample.counts, minlength=keys.size), m_all), \
        "cell -> group mapping disagrees with FastEvaluator.groups"
    groups, m = np.unique(group_of_cell[cells], return_counts=True)
    return Groups(name, m.astype(np.float64), g_all[groups], int(m_all.size))


def describe_groups(gr: Groups) -> None:
    g = gr.g
    out(f"  {gr.name:<12} {gr.groups_all:>6,} groups in the sample; the {RECORDS:,} records fall into {g.size:,} "
        f"groups with {np.unique(g).size:,} distinct population sizes g (min {g.min():,.0f}, median "
        f"{np.median(g):,.0f}, max {g.max():,.0f}); 1/g dataset risk {(gr.m / g).sum() / gr.m.sum():.4f}")


# -- 2. performance --------------------------------------------------------------------------
@dataclass(frozen=True)
class LPRun:
    """The plain LP within a budget, and its extrapolated total when it did not finish."""

    assessment: Assessment
    wall: float  # main run and probes
    probes: int = 0
    estimate: float | None = None  # extrapolated seconds for every MDP (None: finished)
    bound: bool = False  # the estimate is a lower bound (too few probes to see the growth)


def loglog(x: np.ndarray, xp: np.ndarray, yp: np.ndarray) -> np.ndarray:
    """Piecewise-linear interpolation of log y over log x; the end segments extend outside."""
    order = np.argsort(xp)
    lx, ly, q = np.log(xp[order]), np.log(yp[order]), np.log(x)
    if lx.size == 1:
        return np.full(x.shape, float(yp[0]))
    y = np.interp(q, lx, ly)
    low = ly[0] + (ly[1] - ly[0]) / (lx[1] - lx[0]) * (q - lx[0])
    high = ly[-1] + (ly[-1] - ly[-2]) / (lx[-1] - lx[-2]) * (q - lx[-1])
    return np.exp(np.where(q < lx[0], low, np.where(q > lx[-1], high, y)))


def probe_ranks(n: int) -> list[int]:
    """Ranks to probe among n unsolved MDPs: the next one, the largest, then ever finer."""
    fractions = (0.0, 1.0, 0.5, 0.25, 0.75, 0.125, 0.375, 0.625, 0.875)
    return list(dict.fromkeys(round(f * (n - 1)) for f in fractions))


def run_lp(params: AdversaryParams, gr: Groups, total: int, budget: float) -> LPRun:
    """The plain LP with ``time_limit``; if it stops early, time single MDPs of the unsolved
    population sizes and extrapolate.  ``assess`` solves the distinct g in ascending order
    and the LP grows with g (its belief widens), so a linear extrapolation of the solved
    share would underestimate: the unsolved MDPs are estimated one by one from the probes,
    interpolating log time over log g."""
    start = time.perf_counter()
    reserve = min(PROBE_SHARE * budget, PROBE_MAX)
    a = assess(params, gr.m, gr.g, total, "lp", time_limit=budget - reserve)
    if a.complete:
        return LPRun(a, time.perf_counter() - start)
    rest = np.unique(gr.g)[a.solved:]
    deadline = time.perf_counter() + reserve
    xs, ts = [], []
    for r in probe_ranks(rest.size):
        if xs and time.perf_counter() > deadline:
            break
        probe = assess(params, np.ones(1), rest[r:r + 1], total, "lp")
        xs.append(float(rest[r]))
        ts.append(probe.seconds)
    estimate = a.seconds + float(loglog(rest, np.array(xs), np.array(ts)).sum())
    return LPRun(a, time.perf_counter() - start, len(xs), estimate, bound=len(xs) < 2)


def work(a: Assessment) -> str:
    if a.solver == "dp":
        return f"table {a.clusters:,}"
    if a.solver == "two-level":
        return f"{a.clusters:,} clusters"
    return f"{a.clusters:,} states"


def line(n: int, a: Assessment) -> None:
    risk = f"{a.dataset_risk:.6f}" if a.complete else "(partial)"
    out(f"  {n:>7,}  {a.solver:<9} {a.seconds:>9.3f}  {a.distinct:>6,}  {a.solved:>6,}  {work(a):>16}  {risk:>12}  "
        f"{a.records_at_risk:>7,}  {rss_mb():>7.0f}")


def header() -> None:
    out(f"  {'n':>7}  {'solver':<9} {'seconds':>9}  {'MDPs':>6}  {'solved':>6}  {'work':>16}  {'dataset risk':>12}  "
        f"{'at risk':>7}  {'RSS MB':>7}")


def max_diff(a: Assessment, b: Assessment) -> tuple[float, int]:
    """Max |P_reid difference| over the groups both solved, and how many groups that is."""
    both = ~(np.isnan(a.p_reid) | np.isnan(b.p_reid))
    return (float(np.abs(a.p_reid[both] - b.p_reid[both]).max()) if both.any() else 0.0), int(both.sum())


def part_performance(gr: Groups, total: int, lp_budget: float, rows: list[Row]) -> None:
    """Fig. 3.4 on Safe Harbor groups: every solver per n, the plain LP within its budget."""
    out("  work: dp = sizes in its cluster table; two-level = sink clusters solved by LP; lp = states of the")
    out("  largest plain LP.  MDPs = distinct population sizes g (records of one g share their MDP).")
    out("  'at risk' = sampled records with P_reid > 0 (for a partial LP: among the solved groups).")
    out("  RSS MB = the process's peak resident set size so far, read after the solver.")
    header()
    left = lp_budget
    worst_same, results = 0.0, {}
    for i, n in enumerate(SIZES):
        params = AdversaryParams(scenario="unknown", external_size=n)
        runs = {"dp": assess(params, gr.m, gr.g, total, "dp")}
        line(n, runs["dp"])
        runs["two-level"] = assess(params, gr.m, gr.g, total, "two-level")
        line(n, runs["two-level"])
        lp = None
        if left > 0:
            share = left / (len(SIZES) - i)
            lp = run_lp(params, gr, total, share)
            left -= lp.wall
            runs["lp"] = lp.assessment
            line(n, lp.assessment)
            if lp.estimate is not None:
                kind = "lower bound" if lp.bound else "estimate"
                out(f"           plain LP stopped by its budget of {share:.0f} s: {lp.assessment.solved:,} of "
                    f"{lp.assessment.distinct:,} MDPs solved in {lp.assessment.seconds:.1f} s (ascending g); "
                    f"EXTRAPOLATED total {lp.estimate:,.0f} s ({kind}: the other MDPs timed from {lp.probes} "
                    f"single-MDP probes, log-log interpolation over g; {lp.wall:.0f} s spent, probes included)")
        else:
            out(f"  {n:>7,}  lp        plain LP budget spent: not run")
        dp = runs["dp"]
        for name in ("two-level", "lp"):
            if name not in runs:
                continue
            diff, count = max_diff(dp, runs[name])
            worst_same = max(worst_same, diff)
            what = "every group" if runs[name].complete else f"the {count:,} groups it solved"
            out(f"           max |P_reid {name} - dp| over {what}: {diff:.1e}")
            assert diff <= SAME_TOL, f"{name} and dp disagree on P_reid at n = {n}: {diff:.3e}"
        tl = runs["two-level"].seconds
        ratios = f"two-level / dp {tl / max(dp.seconds, 1e-9):,.0f}x"
        if lp is not None:
            lp_s = lp.assessment.seconds if lp.estimate is None else lp.estimate
            label = "" if lp.estimate is None else " (extrapolated)"
            ratios += f"; plain LP / two-level {lp_s / tl:.1f}x{label}"
        out(f"           {ratios}")
        results[n] = (runs, lp)
    out()
    runs, lp = results[SIZES[-1]]
    tl, dp = runs["two-level"].seconds, runs["dp"].seconds
    out(f"  chapter, n = 500K (Python + CPLEX, 24 cores): Two-Level LP {PAPER_TIMES['two-level']:,.0f} s, plain LP "
        f"{PAPER_TIMES['lp']:,.0f} s ({PAPER_TIMES['lp'] / PAPER_TIMES['two-level']:.1f}x)")
    if lp is None:
        lp_text = "not run"
    elif lp.estimate is None:
        lp_text = f"{lp.assessment.seconds:,.1f} s ({lp.assessment.seconds / tl:.1f}x)"
    else:
        lp_text = f"EXTRAPOLATED {lp.estimate:,.0f} s ({lp.estimate / tl:.1f}x; measured {lp.assessment.solved:,} " \
                  f"of {lp.assessment.distinct:,} MDPs)"
    out(f"  ours,    n = 500K (HiGHS via scipy, 1 core used): Two-Level LP {tl:,.1f} s, plain LP {lp_text}; "
        f"DP {dp:.3f} s")
    out(f"  (the chapter solves one MDP per record with caching; deid-sql one per distinct g: "
        f"{runs['dp'].distinct:,} MDPs for {RECORDS:,} records)")
    rows.append((f"Two-Level LP at n = 500K <= {TWO_LEVEL_TARGET:.0f} s (chapter 616 s)", f"{tl:.1f} s",
                 tl <= TWO_LEVEL_TARGET))
    dp_max = max(r[0]["dp"].seconds for r in results.values())
    rows.append((f"DP <= {DP_TARGET:.0f} s (slowest n)", f"{dp_max:.3f} s", dp_max <= DP_TARGET))
    rows.append((f"same P_reid across finished solvers (<= {SAME_TOL:.0e})", f"{worst_same:.1e}",
                 worst_same <= SAME_TOL))
    if lp is not None:
        lp_s = lp.assessment.seconds if lp.estimate is None else lp.estimate
        label = "plain LP / Two-Level at 500K" + (" (extrapolated)" if lp.estimate is not None else "")
        rows.append((f"{label} (chapter 21.8x)", f"{lp_s / tl:.1f}x", None))


def part_bottom(gr: Groups, total: int, rows: list[Row]) -> None:
    """The raw QIs for comparison: dp and two-level only (the LP budget goes to Safe Harbor)."""
    header()
    worst = 0.0
    for n in SIZES:
        params = AdversaryParams(scenario="unknown", external_size=n)
        dp = assess(params, gr.m, gr.g, total, "dp")
        line(n, dp)
        tl = assess(params, gr.m, gr.g, total, "two-level")
        line(n, tl)
        diff, _ = max_diff(dp, tl)
        worst = max(worst, diff)
        out(f"           max |P_reid two-level - dp| over every group: {diff:.1e}")
        assert diff <= SAME_TOL, f"two-level and dp disagree on P_reid at n = {n} (raw QIs): {diff:.3e}"
    rows.append((f"same P_reid, raw QIs (<= {SAME_TOL:.0e})", f"{worst:.1e}", worst <= SAME_TOL))


# -- 3. frontier -----------------------------------------------------------------------------
def part_frontier(spec: Path, folder: Path, budget: int, rows: list[Row]) -> None:
    """The same SHS run_frontier (seed 0, no plots) with the 1/g risk and the adversary's."""
    best: dict[str, float] = {}
    for rep in range(FRONTIER_REPEATS):
        for risk in ("population", "adversary"):
            start = time.perf_counter()
            with Problem.from_spec(spec, risk=risk) as problem:
                load = time.perf_counter() - start
                start = time.perf_counter()
                r = run_frontier(problem, folder / f"{risk}-{rep}", "shs", budget, seed=0, plots=False)
                secs = time.perf_counter() - start
                if rep == 0 and risk == "adversary":
                    a = problem.spec.feature("adversary")
                    out(f"  adversary: {a.scenario} group, {a.describe()}")
            st = r.state
            best[risk] = min(best.get(risk, math.inf), secs)
            out(f"  run {rep + 1} {risk:<10}  load {load:5.2f} s  run_frontier {secs:6.2f} s (search {st.seconds:5.2f} "
                f"s)  {st.evaluations:,} policies, frontier {len(st.frontier):,}, {st.chains} chains, "
                f"{st.sublattices} sublattices")
    ratio = best["adversary"] / best["population"]
    out(f"  fastest run_frontier: adversary {best['adversary']:.2f} s, 1/g {best['population']:.2f} s: ratio "
        f"{ratio:.2f}x (target <= {FRONTIER_TARGET:.0f}x)")
    rows.append((f"SHS frontier ({budget:,} policies) adversary / 1/g <= {FRONTIER_TARGET:.0f}x", f"{ratio:.2f}x",
                 ratio <= FRONTIER_TARGET))


# -- 4. sensitivity --------------------------------------------------------------------------
def part_sensitivity(rows: list[Row]) -> None:
    start = time.perf_counter()
    swept = sensitivity.sweep()
    secs = time.perf_counter() - start
    OUT.mkdir(parents=True, exist_ok=True)
    csv_path, png_path = OUT / "adversary_sensitivity.csv", OUT / "adversary_sensitivity.png"
    sensitivity.write_csv(swept, csv_path)
    sensitivity.plot(swept, png_path)
    base = sensitivity.BASE
    out(f"  {len(swept)} threshold computations in {secs:.2f} s; base {base.describe()}")
    out("  cells: k′ = smallest group not attacked (risk 0 from there on), with (k) when k < k′, k = smallest group")
    out("  whose candidates are not all exploited")
    settings = list(sensitivity.SETTINGS)
    by = {(r.parameter, r.value, r.setting): r for r in swept}
    for parameter, values in sensitivity.SWEEPS.items():
        out(f"  {sensitivity.LABELS[parameter]:<36}" + "".join(f"{s:>20}" for s in settings))
        for v in values:
            cells = []
            for s in settings:
                r = by[(parameter, float(v), s)]
                cells.append(f"{r.k_prime}" + (f" ({r.k})" if r.k < r.k_prime else ""))
            out(f"  {v:>36g}" + "".join(f"{c:>20}" for c in cells))
    out(f"  written: {csv_path}, {png_path}")
    out("  chapter (§3.6, Fig. 3.9): penalty $10,000 -> the adversary always attacks groups smaller than 9 "
        "(k′ = 9);")
    out("                           penalty $50,000 -> only groups of 1 (k′ = 2)")
    for penalty, paper in ((10_000.0, 9), (50_000.0, 2)):
        ours = ", ".join(f"{s}: {by[('penalty', penalty, s)].k_prime}" for s in settings)
        out(f"  ours, penalty ${penalty:,.0f}: k′ {ours}")
        rows.append((f"k′ at penalty ${penalty:,.0f} (chapter {paper}), three settings",
                     "/".join(str(by[("penalty", penalty, s)].k_prime) for s in settings), None))


# -- 5. thresholds ---------------------------------------------------------------------------
def brute_k_prime(params: AdversaryParams) -> tuple[int, int]:
    """k′ and k′ with C_d sunk by a plain backward induction over (attempts, penalties), known
    group, written from METHODS.md decision 7 independently of deid_sql.adversary."""
    nf = params.max_penalties

    def start_value(x: int) -> float:
        levels = 1 if nf is None else nf + 1  # penalties paid so far, 0..n_f
        v = [0.0] * levels
        for a in range(x - 1, -1, -1):
            s = 1.0 / ((1.0 - params.prior) / params.prior * x + x - a)
            d = 1.0 / (1.0 + math.exp(-(params.h0 + params.h1 * a)))
            new = []
            for p in range(levels):
                fined = nf is None or p < nf
                after = v[p] if nf is None else d * v[min(p + 1, nf)] + (1 - d) * v[p]
                new.append(max(0.0, -params.exploit_cost + s * params.gain - d * params.penalty * fined
                                + (1 - s) * after))
            v = new
        return v[0]

    x = 1
    values = {}
    while True:
        values[x] = start_value(x) - params.link_cost
        if values[x] <= params.tie:
            break
        x += 1
    k_prime = next(y for y in sorted(values) if values[y] - params.access_cost <= params.tie)
    return k_prime, x


def part_thresholds(rows: list[Row]) -> None:
    base = AdversaryParams()
    cases = (("n_f=1, h1=0 (defaults)", base, "k = 48, 51 once C_d is sunk (unknown-group section)"),
             ("n_f=inf, h1=0.18", base.with_changes(h1=0.18, max_penalties=None), "k = 14, k′ = 29 (Fig. 3.7)"),
             ("n_f=inf, h1=0", base.with_changes(max_penalties=None), "all or nothing (Finding 2)"))
    out(f"  known group, {base.describe()}")
    out(f"  {'setting':<24}{'k':>5}{'k′':>6}{'k′ sunk':>9}   {'check k′ / sunk':>16}   chapter")
    for name, params, paper in cases:
        t = thresholds(params)
        check = brute_k_prime(params)
        same = check == (t.k_prime, t.k_prime_sunk)
        out(f"  {name:<24}{t.k:>5}{t.k_prime:>6}{t.k_prime_sunk:>9}   {check[0]:>7} / {check[1]:<3} "
            f"{'ok' if same else 'DIFF'}   {paper}")
        rows.append((f"thresholds {name}: k / k′ / k′ sunk", f"{t.k}/{t.k_prime}/{t.k_prime_sunk}", None))
        rows.append((f"independent backward induction agrees ({name})", "yes" if same else "no", same))
    out("  k = smallest group not wholly exploited; k′ = smallest group not attacked from x0 (C_d paid);")
    out("  k′ sunk = the same once D_e is held.  'check' = a 20-line backward induction over (attempts, penalties")
    out("  paid) written here from METHODS.md decision 7, independent of deid_sql.adversary.")


# -- main ------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--quick", action="store_true", help="small budgets: the whole run takes about 2 minutes")
    parser.add_argument("--lp-budget", type=float, default=None, metavar="SECONDS",
                        help="plain-LP seconds over the three n (default 600, --quick 30; 0 skips the plain LP)")
    parser.add_argument("--frontier-budget", type=int, default=None, metavar="POLICIES",
                        help="policies per frontier search (default 3000, --quick 500)")
    args = parser.parse_args(argv)
    lp_budget = LP_BUDGET[args.quick] if args.lp_budget is None else args.lp_budget
    frontier_budget = FRONTIER_BUDGET[args.quick] if args.frontier_budget is None else args.frontier_budget
    if lp_budget < 0 or frontier_budget < 2:
        parser.error("need --lp-budget >= 0 and --frontier-budget >= 2")
    began = time.perf_counter()
    out("deid-sql adversary benchmark: seed 002 Chapter 3 (solvers, frontier risk, sensitivity, thresholds)")
    out(f"  python {sys.version.split()[0]}, {'quick' if args.quick else 'full'} run, plain-LP budget "
        f"{lp_budget:.0f} s, frontier budget {frontier_budget:,}, record seed {RECORD_SEED}, data seed {DATA_SEED}")
    out()
    out("== 1. Problem: Adult + ZIP (QIs age, sex, race, zip) and the 5,000 records ==")
    if not ADULT_CSV.exists():
        out(f"  {ADULT_CSV} not found: benchmark skipped")
        return 0
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="deid-bench-") as tmp:
        spec, build_s = build(Path(tmp), "bench-adversary")
        start = time.perf_counter()
        with Problem.from_spec(spec) as problem:
            total = problem.population_total
            out(f"  data built in {build_s:.2f} s; Problem.from_spec {time.perf_counter() - start:.2f} s")
            out(f"  {problem.sample.total:,} Adult records (chapter {PAPER_ADULT:,}: it keeps rows with missing "
                f"values), population {total:,} people (chapter: NC census {PAPER_POPULATION:,})")
            cells = pick_records(problem)
            sh = record_groups(problem, "Safe Harbor", safe_harbor(problem).recoding, cells)
            raw = record_groups(problem, "raw QIs", problem.lattice.bottom().recoding(), cells)
        out(f"  {RECORDS:,} records drawn with numpy default_rng({RECORD_SEED}), without replacement")
        describe_groups(sh)
        describe_groups(raw)
        out()
        out("== 2. Performance (seed 002 §3.6, Fig. 3.4): unknown group, Safe Harbor release ==")
        out(f"  {AdversaryParams(scenario='unknown').describe()}; belief Binomial(n, g / {total:,})")
        part_performance(sh, total, lp_budget, rows)
        out()
        out("== 2b. The same records under the raw QIs (bottom policy), dp and two-level ==")
        part_bottom(raw, total, rows)
        out()
        out(f"== 3. Frontier search with the adversary's risk vs 1/g: SHS, budget {frontier_budget:,}, seed 0 ==")
        part_frontier(spec, Path(tmp) / "frontier", frontier_budget, rows)
    out()
    out("== 4. Sensitivity of the walk-away threshold (seed 002 Fig. 3.9): known group, prior 1 ==")
    part_sensitivity(rows)
    out()
    out("== 5. Known-group thresholds of the case study (seed 002 §3.6, Fig. 3.5-3.8) ==")
    part_thresholds(rows)
    out()
    out("== 6. Summary ==")
    for target, measured, ok in rows:
        verdict = "info" if ok is None else "PASS" if ok else "FAIL"
        out(f"  {target:<66} {measured:>12}   {verdict}")
    out(f"  total runtime {time.perf_counter() - began:.1f} s; peak RSS {rss_mb():.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
