"""Evaluation benchmark of deid-sql: how fast policies are scored, whether both paths agree,
and what the one-time load of a large cohort costs.

Searches spend their budget evaluating lattice policies, so per-policy cost decides how
much of the lattice they can explore.  This script measures, on the UCI Adult sample with
synthetic ZIP codes against a synthetic 6M-person state census (the papers' setting):

1. loading the problem (rows become cells once);
2. the fast path (numpy on cells) and the SQL path (DuckDB, the reference) on random
   policies spread over the whole lattice, the share of ``Policy.recoding()`` in the fast
   path, and agreement of the two paths on risk, loss, KL and Iyengar's loss;
3. peak resident memory of this process after part 2;
4. a large synthetic cohort (default 10M rows): the one-time load/pre-aggregation in a
   fresh process (its own wall time and peak RSS), then per-policy cost on its cells,
   which depends on the number of cells, not of rows.

Targets: fast path >= 200 evaluations/s, SQL path <= 30 ms/policy, paths agree to 1e-9
relative, 10M-row load <= 60 s and <= 2 GB peak RSS.  Only the report goes to stdout.

    python bench/evaluate.py [--policies 1000] [--rows 10000000] [--seed 0] [--skip-large]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from deid_sql.evaluate import Metrics
from deid_sql.fixtures import adult_with_zip, synthetic_population, write_cohort_parquet
from deid_sql.policies.lattice import Lattice, Policy
from deid_sql.problem import Problem
from deid_sql.starter.demo import census_spec

ADULT_CSV = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult" / "adult.csv"
FAST_TARGET = 200.0  # evaluations per second
SQL_TARGET_MS = 30.0  # per policy
AGREE_TARGET = 1e-9  # relative difference between the paths
LOAD_TARGET_S = 60.0
RSS_TARGET_MB = 2048.0
LARGE_POLICIES = 50
COMPARED = ("risk", "loss", "kl", "iyengar_loss")


Row = tuple[str, str, bool | None]  # target, measured, pass (None: not measured)


def out(line: str = "") -> None:
    print(line, flush=True)


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MB (ru_maxrss is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def own_peak_rss_mb() -> float:
    """Peak RSS of this process's own address space: VmHWM, else ru_maxrss.

    A child started by fork/vfork + exec inherits the parent's ru_maxrss (Linux keeps the
    pre-exec high-water mark), so the load subprocess would report this script's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return peak_rss_mb()


def write_spec(folder: Path, name: str, source: str) -> Path:
    path = folder / f"{name}.toml"
    path.write_text(census_spec(source, name=f"bench-{name}"), encoding="utf-8")
    return path


def draw_policies(lattice: Lattice, n: int, rng: np.random.Generator) -> list[Policy]:
    """Top, bottom, then random policies whose density of kept boundaries is itself
    uniform on [0.02, 0.98], so the sample spans the lattice from general to specific."""
    policies = [lattice.top(), lattice.bottom()][:n]
    while len(policies) < n:
        policies.append(lattice.random_policy(rng, float(rng.uniform(0.02, 0.98))))
    assert len({p.bits for p in policies}) == len(policies), "policies must be distinct (cache by bits)"
    return policies


def timed(problem: Problem, policies: list[Policy], path: str) -> tuple[float, list[Metrics]]:
    """Seconds to evaluate every policy on ``path``; asserts no evaluator cache hit."""
    evaluator = problem.sql if path == "sql" else problem.fast
    before = evaluator.evaluations
    start = time.perf_counter()
    metrics = [problem.evaluate(p, path=path) for p in policies]
    seconds = time.perf_counter() - start
    assert evaluator.evaluations - before == len(policies), f"{path} path hit its cache while timed"
    return seconds, metrics


def floors(problem: Problem) -> dict[str, float]:
    """Smallest scale each metric is compared at.  KL = (sum c ln c - sum m ln(m/W)) / N is a
    difference of two sums of size sum c ln c, so it is only defined to rounding relative to
    sum c ln c / N (the bottom's KL is 0 + rounding, e.g. 2e-13 on the SQL path); loss = KL / KL(top)."""
    norm = problem.fast.normalizers
    kl = norm.cells_xlogx / norm.records
    return {"risk": 0.0, "iyengar_loss": 0.0, "kl": kl, "loss": kl / norm.top_kl if norm.top_kl > 0 else 0.0}


def max_rel_diff(a: list[Metrics], b: list[Metrics], floor: dict[str, float]) -> dict[str, float]:
    """Per metric, max over policies of |a - b| / max(|a|, |b|, floor) (0 when all are 0)."""
    worst = dict.fromkeys(COMPARED, 0.0)
    for x, y in zip(a, b):
        for name in COMPARED:
            u, v = float(getattr(x, name)), float(getattr(y, name))
            scale = max(abs(u), abs(v), floor[name])
            worst[name] = max(worst[name], abs(u - v) / scale if scale > 0 else 0.0)
    return worst


def measure_paths(problem: Problem, n: int, seed: int) -> dict[str, float]:
    """Time recoding, fast and SQL paths on ``n`` distinct policies (+1 warm-up policy)."""
    policies = draw_policies(problem.lattice, n + 1, np.random.default_rng(seed))
    warm, policies = policies[-1], policies[:-1]
    start = time.perf_counter()
    for p in policies:
        p.recoding()
    recoding_s = time.perf_counter() - start
    problem.evaluate(warm)  # warm-up, outside the timing (a distinct policy: no later cache hit)
    fast_s, fast = timed(problem, policies, "fast")
    problem.evaluate(warm, path="sql")  # builds the SQL evaluator and registers the cells
    sql_s, sql = timed(problem, policies, "sql")
    diffs = max_rel_diff(fast, sql, floors(problem))
    return {"n": n, "fast_ms": 1e3 * fast_s / n, "sql_ms": 1e3 * sql_s / n,
            "recoding_ms": 1e3 * recoding_s / n, **{f"diff_{k}": v for k, v in diffs.items()}}


def report_paths(r: dict[str, float], rows: list[Row], label: str, targets: bool = True) -> None:
    """Print the figures of ``measure_paths`` and add summary rows (speed ones with ``targets``)."""
    fast_rate = 1e3 / r["fast_ms"]
    out(f"  policies evaluated      {int(r['n'])} per path (distinct; no cache hits)")
    out(f"  fast path               {fast_rate:9.1f} policies/s  {r['fast_ms']:8.2f} ms/policy"
        + (f"   (target >= {FAST_TARGET:.0f}/s)" if targets else ""))
    out(f"    of which recoding()   {r['recoding_ms']:30.2f} ms/policy"
        f"   ({100 * r['recoding_ms'] / r['fast_ms']:.0f}% of the fast path)")
    out(f"  SQL path                {1e3 / r['sql_ms']:9.1f} policies/s  {r['sql_ms']:8.2f} ms/policy"
        + (f"   (target <= {SQL_TARGET_MS:.0f} ms)" if targets else ""))
    out(f"  fast / SQL speed ratio  {r['sql_ms'] / r['fast_ms']:9.1f}x")
    worst = max(r[f"diff_{k}"] for k in COMPARED)
    agree = worst <= AGREE_TARGET
    out("  max relative difference fast vs SQL: "
        + ", ".join(f"{k} {r[f'diff_{k}']:.1e}" for k in COMPARED)
        + f"  -> {'PASS' if agree else 'FAIL'} (<= {AGREE_TARGET:.0e})")
    out("    (kl and loss at least at the scale of sum c ln c / N, the sums whose difference is KL)")
    if targets:
        rows.append((f"{label}: fast path >= {FAST_TARGET:.0f} policies/s", f"{fast_rate:.1f}/s",
                     fast_rate >= FAST_TARGET))
        rows.append((f"{label}: SQL path <= {SQL_TARGET_MS:.0f} ms/policy", f"{r['sql_ms']:.2f} ms",
                     r["sql_ms"] <= SQL_TARGET_MS))
    rows.append((f"{label}: paths agree <= {AGREE_TARGET:.0e} rel.", f"{worst:.1e}", agree))


def describe(problem: Problem) -> str:
    cube = problem.fast.path.cube
    census = f"prefix cube of {cube.size:,} entries" if cube is not None else "population scan"
    pop = len(problem.population) if problem.population is not None else 0
    return (f"{len(problem.sample):,} sample cells ({problem.sample.total:,} records), {pop:,} population "
            f"cells, {problem.lattice.nbits} lattice bits, census by {census}")


def part_adult(folder: Path, population: pa.Table, args: argparse.Namespace,
               rows: list[Row]) -> tuple[float, int, int] | None:
    """Parts 1-3; returns fast-path ms/policy, sample cells and records (None without Adult)."""
    out("== 1. Adult + ZIP: load ==")
    if not ADULT_CSV.exists():
        out(f"  {ADULT_CSV} not found: parts 1-3 skipped")
        rows += [(f"Adult: {t}", "skipped", None) for t in ("fast path", "SQL path", "paths agree")]
        return None
    start = time.perf_counter()
    adult = adult_with_zip(ADULT_CSV, args.seed, population)
    pq.write_table(adult, folder / "adult.parquet")
    out(f"  Adult with ZIP          {adult.num_rows:,} rows, built and written in "
        f"{time.perf_counter() - start:.2f} s; population {population.num_rows:,} rows")
    spec = write_spec(folder, "adult", "adult.parquet")
    start = time.perf_counter()
    with Problem.from_spec(spec) as problem:
        out(f"  Problem.from_spec       {time.perf_counter() - start:.2f} s")
        out(f"  {describe(problem)}")
        out()
        out(f"== 2. Adult + ZIP: evaluation speed and agreement (seed {args.seed}) ==")
        r = measure_paths(problem, args.policies, args.seed)
        report_paths(r, rows, "Adult")
        out()
        out("== 3. Memory ==")
        out(f"  peak RSS of this process after part 2: {peak_rss_mb():.0f} MB (ru_maxrss)")
        return r["fast_ms"], len(problem.sample), problem.sample.total


def load_only(spec: Path, n: int, seed: int, result: Path) -> None:
    """Child process of part 4: load (timed, peak RSS), then time ``n`` policies."""
    base = own_peak_rss_mb()
    start = time.perf_counter()
    with Problem.from_spec(spec) as problem:
        load_s = time.perf_counter() - start
        rss = own_peak_rss_mb()
        info = {"load_s": load_s, "rss_mb": rss, "base_rss_mb": base, "describe": describe(problem),
                "sample_cells": len(problem.sample), **measure_paths(problem, n, seed)}
    result.write_text(json.dumps(info), encoding="utf-8")


def part_large(folder: Path, population: pa.Table, args: argparse.Namespace, rows: list[Row],
               adult: tuple[float, int, int] | None) -> None:
    out(f"== 4. Large cohort: {args.rows:,} rows ==")
    label = f"{args.rows / 1e6:g}M rows"
    start = time.perf_counter()
    write_cohort_parquet(population, args.rows, folder / "cohort.parquet", seed=args.seed)
    size_mb = (folder / "cohort.parquet").stat().st_size / 2**20
    out(f"  cohort generated        {time.perf_counter() - start:.1f} s, {size_mb:.0f} MB Parquet (not a target)")
    spec = write_spec(folder, "cohort", "cohort.parquet")
    result = folder / "large.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_load-only", str(spec), "--_out", str(result),
           "--policies", str(LARGE_POLICIES), "--seed", str(args.seed)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        out(f"  load subprocess failed with exit code {done.returncode} (see stderr)")
        rows += [(f"{label}: load", "failed", False), (f"{label}: load peak RSS", "failed", False)]
        return
    r = json.loads(result.read_text(encoding="utf-8"))
    out(f"  Problem.from_spec       {r['load_s']:.1f} s in a fresh process   (target <= {LOAD_TARGET_S:.0f} s)")
    out(f"  peak RSS of that load   {r['rss_mb']:.0f} MB (VmHWM; interpreter and imports before it: "
        f"{r['base_rss_mb']:.0f} MB)   (target <= {RSS_TARGET_MB:.0f} MB)")
    out(f"  {r['describe']}")
    rows.append((f"{label}: load <= {LOAD_TARGET_S:.0f} s", f"{r['load_s']:.1f} s", r["load_s"] <= LOAD_TARGET_S))
    rows.append((f"{label}: load peak RSS <= {RSS_TARGET_MB / 1024:.0f} GB", f"{r['rss_mb']:.0f} MB",
                 r["rss_mb"] <= RSS_TARGET_MB))
    report_paths(r, rows, label, targets=False)
    if adult is not None:
        out(f"  per-policy cost follows cells, not rows: on Adult ({adult[1]:,} cells, {adult[2]:,} rows) "
            f"fast {adult[0]:.2f} ms; here ({r['sample_cells']:,} cells, {args.rows:,} rows) "
            f"fast {r['fast_ms']:.2f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--policies", type=int, default=1000, help="policies per path on Adult (default 1000)")
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows of the large cohort (default 10M)")
    parser.add_argument("--seed", type=int, default=0, help="seed of population, ZIPs, cohort and policies")
    parser.add_argument("--skip-large", action="store_true", help="skip part 4 (the large cohort)")
    parser.add_argument("--_load-only", dest="load_only", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--_out", dest="out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.policies < 1:
        parser.error("--policies must be at least 1")
    if args.load_only is not None:
        load_only(args.load_only, args.policies, args.seed, args.out)
        return 0
    rows: list[Row] = []
    out("deid-sql evaluation benchmark")
    out(f"  python {sys.version.split()[0]}, policies {args.policies}, rows {args.rows:,}, seed {args.seed}")
    out()
    with tempfile.TemporaryDirectory(prefix="deid-bench-") as tmp:
        folder = Path(tmp)
        population = synthetic_population(args.seed)
        pq.write_table(population, folder / "population.parquet")
        adult = part_adult(folder, population, args, rows)
        out()
        if args.skip_large:
            out("== 4. Large cohort: skipped (--skip-large) ==")
            rows += [("large: load", "skipped", None), ("large: load peak RSS", "skipped", None)]
        else:
            part_large(folder, population, args, rows, adult)
    out()
    out("== Summary ==")
    for target, measured, ok in rows:
        verdict = "-" if ok is None else ("PASS" if ok else "FAIL")
        out(f"  {target:<40} {measured:>12}   {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
