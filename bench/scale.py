"""Scale benchmark of deid-sql: a 100 M-row synthetic cohort in Parquet aggregated to cells by
DuckDB (under a memory limit) and by Spark local, and per-policy evaluation time on its cells.

Rows are touched once: ``Problem.from_spec`` resolves the domains and runs one GROUP BY per
table in the engine; everything after works on cells, whose number is bounded by the census
(age x sex x race x ZIP5, ~300 K cells here), not by the rows.  This script checks both halves
on the problem of bench/evaluate.py's large cohort (the synthetic 6 M-person state census):

1. setup, not a target: the census and cohorts of 10 M and 100 M rows as Parquet (cached in --dir);
2. DuckDB: ``Problem.from_spec`` in a fresh process per size, with ``memory_limit`` set, its wall
   time, cells and peak RSS (the child's own VmHWM), beside a plain GROUP BY of the same file;
3. the fast path on the same seeded random policies on both problems: ms/policy and their ratio;
4. Spark local (``[backend] engine = "spark"``, ``master = "local[2]"``): the same load per size in
   a fresh process, peak RSS of the Python process and of the driver JVM (its child), and the
   cells compared with DuckDB's; 5. a second command on the same data on PostgreSQL and Spark, with
   the cells cache warm (bench/rerun.py; target: <= 10 % of the first); 6. a summary.

Targets: 100 M rows aggregated in DuckDB <= 60 s with peak RSS <= 4 GB; 10 M rows <= 10 s;
per-policy time unchanged from the small to the large cohort (ratio <= 1.5).

    python bench/scale.py [--quick] [--skip-spark] [--rerun-only] [--dir DIR] [--keep] [--rows-small N] [--rows-large N]

The full run takes 3-5 minutes on 2 cores (about 45 s of it generating the 100 M-row file, skipped when
--dir already holds it); --quick takes ~20 s with --skip-spark, ~2 min with Spark (two JVM starts).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from evaluate import draw_policies, timed
from rerun import part_rerun

from deid_sql.backends import connect
from deid_sql.backends.duckdb import DuckDBBackend
from deid_sql.fixtures import synthetic_population, write_cohort_parquet
from deid_sql.problem import Problem
from deid_sql.spec.file import Spec
from deid_sql.starter.demo import census_spec

SMALL_ROWS, LARGE_ROWS = 10_000_000, 100_000_000
QUICK_ROWS = (1_000_000, 5_000_000)
POLICIES = 200
SMALL_TARGET_S, LARGE_TARGET_S, RSS_TARGET_MIB = 10.0, 60.0, 4096.0
RATIO_TARGET = 1.5  # per-policy time large / small: "unchanged" (cells are bounded by the census)
MEMORY_LIMIT = "3GB"  # DuckDB's cap, below the 4 GB RSS target (its default is 80 % of RAM)
SPARK_MASTER, SPARK_DRIVER_MEMORY = "local[2]", "6g"
CHILD_TIMEOUT_S = 3600
QI_COLUMNS = ("age", "sex", "race", "zip")

Row = tuple[str, str, bool | None]  # target, measured, pass (None: information only or skipped)


def out(line: str = "") -> None:
    """Print a report line at once (the full run takes minutes)."""
    print(line, flush=True)


def size(rows: int) -> str:
    return f"{rows / 1e6:g} M" if rows >= 1_000_000 else f"{rows:,}"


# -- peak RSS of a process and of its descendants ----------------------------------------------

def vmhwm_mib(pid: int | str = "self") -> float:
    """VmHWM (peak RSS) of a process in MiB; NaN if it is gone.  Not ru_maxrss: a child's
    maxrss starts at its parent's peak (carried across fork + exec), VmHWM is its own."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def descendants(root: int) -> list[tuple[int, str, float]]:
    """(pid, command name, VmHWM MiB) of every live descendant of ``root``: for Spark, the
    driver JVM that pyspark starts (spark-submit execs java), and any Python workers under it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found: list[tuple[int, str, float]] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        found.append((pid, name, vmhwm_mib(pid)))
        todo.extend(children.get(pid, []))
    return found


# -- the child: one load in a fresh process ----------------------------------------------------

def domains_digest(problem: Problem) -> str:
    """Fingerprint of the QI domains, so equal positions mean equal values in both engines."""
    text = "\x1e".join("\x1f".join(d.text(p) for p in range(d.size)) for d in problem.domains)
    return hashlib.sha1(text.encode()).hexdigest()


def floor_group_by(source: Path, memory_limit: str | None) -> float:
    """Seconds of a plain DuckDB GROUP BY of the four QI columns of the file: one scan, no
    domains, no joins, the least any engine-side aggregation of these rows can cost here."""
    con = duckdb.connect(config={"memory_limit": memory_limit} if memory_limit else {})
    try:
        cols = ", ".join(QI_COLUMNS)
        start = time.perf_counter()
        con.execute(f"SELECT {cols}, count(*) AS n FROM read_parquet(?) GROUP BY {cols}", [str(source)])
        con.to_arrow_table()
        return time.perf_counter() - start
    finally:
        con.close()


def child(job_path: Path) -> None:
    """Load the job's spec with its engine (timed), record peak RSS, save the cells, then
    (DuckDB) time the fast path on seeded random policies and a plain GROUP BY floor."""
    job = json.loads(job_path.read_text(encoding="utf-8"))
    base = vmhwm_mib()
    spec = Spec.read(job["spec"])
    start = time.perf_counter()
    if spec.backend.engine == "duckdb":
        backend = DuckDBBackend(memory_limit=job["memory_limit"])
    else:
        backend = connect(spec.backend.engine, **spec.backend.options())
    connect_s = time.perf_counter() - start
    start = time.perf_counter()
    with Problem.from_spec(spec, backend=backend) as problem:
        load_s = time.perf_counter() - start
        info: dict[str, object] = {
            "connect_s": connect_s, "load_s": load_s, "base_mib": base, "own_mib": vmhwm_mib(),
            "tree": descendants(os.getpid()), "cells": len(problem.sample), "records": problem.sample.total,
            "population_cells": len(problem.population) if problem.population is not None else 0,
            "nbits": problem.lattice.nbits, "domains": domains_digest(problem),
        }
        np.savez(job["cells"], positions=problem.sample.positions, counts=problem.sample.counts)
        n = job["policies"]
        if n:
            policies = draw_policies(problem.lattice, n + 1, np.random.default_rng(job["seed"]))
            warm, policies = policies[-1], policies[:-1]
            problem.evaluate(warm)  # warm-up outside the timing (distinct policy: no later cache hit)
            seconds, metrics = timed(problem, policies, "fast")
            info["policy_ms"] = 1e3 * seconds / n
            info["policies_digest"] = hashlib.sha1(b"".join(p.bits for p in policies)).hexdigest()
            info["risk_sum"] = float(sum(m.risk for m in metrics))
            info["own_after_eval_mib"] = vmhwm_mib()
    if job["floor"]:
        info["floor_s"] = floor_group_by(Path(job["source"]), job["memory_limit"])
    Path(job["out"]).write_text(json.dumps(info), encoding="utf-8")


def run_child(folder: Path, name: str, job: dict[str, object], env: dict[str, str] | None = None) -> dict | str:
    """Run ``child`` in a fresh interpreter (cwd = folder, so DuckDB spills there); returns its
    result, or the tail of its output when it failed."""
    job = {**job, "out": str(folder / f"{name}.json"), "cells": str(folder / f"{name}.cells.npz")}
    job_path = folder / f"{name}.job.json"
    job_path.write_text(json.dumps(job), encoding="utf-8")
    Path(job["out"]).unlink(missing_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_child", str(job_path)]
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
                              env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        return f"timed out after {CHILD_TIMEOUT_S} s"
    if done.returncode != 0 or not Path(job["out"]).exists():
        tail = (done.stdout + done.stderr).strip().splitlines()[-12:]
        return f"exit code {done.returncode}:\n" + "\n".join(tail)
    result = json.loads(Path(job["out"]).read_text(encoding="utf-8"))
    result["wall_s"] = time.perf_counter() - start
    return result


def failed(label: str, why: str) -> None:
    lines = why.splitlines()
    out(f"  {label}: FAILED, {lines[0]}")
    for line in lines[1:]:
        out(f"    | {line}")


# -- 1. setup -------------------------------------------------------------------------------

def setup(folder: Path, sizes: tuple[int, int], seed: int) -> dict[int, Path]:
    """The census and the cohorts, reused when the folder already holds them (same seed)."""
    start = time.perf_counter()
    population = synthetic_population(seed)
    pop_path = folder / f"population-seed{seed}.parquet"
    if not pop_path.exists():
        pq.write_table(population, pop_path)
    people = int(pc.sum(population.column("count")).as_py())
    out(f"  population              {population.num_rows:,} census cells, {people:,} people, "
        f"{time.perf_counter() - start:.1f} s")
    cohorts: dict[int, Path] = {}
    for rows in sizes:
        path = folder / f"cohort-{rows}-seed{seed}.parquet"
        cached = path.exists() and pq.ParquetFile(path).metadata.num_rows == rows
        start = time.perf_counter()
        if not cached:
            write_cohort_parquet(population, rows, path, seed=seed)
        took = "cached" if cached else f"generated in {time.perf_counter() - start:.1f} s"
        out(f"  cohort {size(rows) + ' rows':<16} {took}, {path.stat().st_size / 2**20:,.0f} MiB Parquet, "
            f"{pq.ParquetFile(path).metadata.num_row_groups} row groups")
        cohorts[rows] = path
    return cohorts


def write_spec(folder: Path, name: str, source: Path, seed: int, backend: str = "") -> Path:
    """bench/evaluate.py's large-cohort problem (demo.census_spec), optionally with [backend]."""
    path = folder / f"{name}.toml"
    text = census_spec(source.name, population=f"population-seed{seed}.parquet", name=f"bench-scale-{name}")
    path.write_text(text + backend, encoding="utf-8")
    return path


# -- 2. and 3. DuckDB and per-policy time -------------------------------------------------------

def part_duckdb(folder: Path, cohorts: dict[int, Path], args: argparse.Namespace,
                rows: list[Row]) -> dict[int, dict]:
    limit = args.memory_limit or None
    out(f"  memory_limit = {limit or 'DuckDB default (80 % of RAM)'}, threads = DuckDB default "
        f"({os.cpu_count()}), one fresh process per size; spills (if any) go to the data folder")
    out(f"  {'rows':>12} {'from_spec':>10} {'target':>7} {'peak RSS':>10} {'imports':>8} {'cells':>9} "
        f"{'records':>13} {'plain GROUP BY':>15} {'process':>8}")
    results: dict[int, dict] = {}
    for n, target in zip(cohorts, (SMALL_TARGET_S, LARGE_TARGET_S)):
        spec = write_spec(folder, f"duckdb-{n}", cohorts[n], args.seed)
        r = run_child(folder, f"duckdb-{n}", {"spec": str(spec), "memory_limit": limit, "policies": args.policies,
                                              "seed": args.seed, "floor": True, "source": str(cohorts[n])})
        label = f"DuckDB {size(n)} rows"
        if isinstance(r, str):
            failed(label, r)
            rows.append((f"{label}: aggregated <= {target:.0f} s", "failed", False))
            if target == LARGE_TARGET_S:
                rows.append((f"{label}: peak RSS <= {RSS_TARGET_MIB / 1024:.0f} GB", "failed", False))
            continue
        results[n] = r
        ok = r["load_s"] <= target and r["records"] == n
        out(f"  {n:>12,} {r['load_s']:>8.1f} s {target:>5.0f} s {r['own_mib']:>6,.0f} MiB {r['base_mib']:>4.0f} MiB "
            f"{r['cells']:>9,} {r['records']:>13,} {r['floor_s']:>13.1f} s {r['wall_s']:>6.1f} s")
        rows.append((f"{label}: aggregated <= {target:.0f} s", f"{r['load_s']:.1f} s", ok))
        if target == LARGE_TARGET_S:
            rows.append((f"{label}: peak RSS <= {RSS_TARGET_MIB / 1024:.0f} GB", f"{r['own_mib']:,.0f} MiB",
                         r["own_mib"] <= RSS_TARGET_MIB))
        else:
            rows.append((f"{label}: peak RSS", f"{r['own_mib']:,.0f} MiB", None))
    out("  from_spec = Problem.from_spec in the child: domains (ZIPs read from the census), one GROUP BY of the")
    out("  cohort and one of the census; peak RSS = the child's VmHWM when loaded (imports = before the load);")
    out("  plain GROUP BY = SELECT age, sex, race, zip, count(*) of the same file, in the same child afterwards;")
    out("  process = the child's whole wall time (interpreter, imports, load, policies, plain GROUP BY)")
    return results


def part_policies(results: dict[int, dict], sizes: tuple[int, int], policies: int, quick: bool,
                  rows: list[Row]) -> None:
    small, large = (results.get(n) for n in sizes)
    if small is None or large is None:
        out("  skipped: a DuckDB load failed")
        rows.append(("per-policy time unchanged", "skipped", None))
        return
    same = small["policies_digest"] == large["policies_digest"] and small["domains"] == large["domains"]
    for n, r in ((sizes[0], small), (sizes[1], large)):
        out(f"  {size(n) + ' rows':<14} {r['cells']:>9,} cells  {r['policy_ms']:8.2f} ms/policy "
            f"({1e3 / r['policy_ms']:6.1f}/s)   peak RSS after the policies {r['own_after_eval_mib']:,.0f} MiB")
    ratio, cells = large["policy_ms"] / small["policy_ms"], large["cells"] / small["cells"]
    out(f"  ratio {size(sizes[1])} / {size(sizes[0])}: {ratio:.2f} (cells {cells:.2f}, rows {sizes[1] / sizes[0]:g}; "
        f"per cell {ratio / cells:.2f})   (target <= {RATIO_TARGET})")
    out(f"  same {policies} policies on both (same domains and bits): {'yes' if same else 'NO'}; "
        f"sum of their risks {small['risk_sum']:.4f} and {large['risk_sum']:.4f}")
    if quick:
        out("  (--quick: cohorts this small do not yet fill the census's cells, so the ratio follows the cells: info)")
    rows.append((f"per-policy time {size(sizes[1])} / {size(sizes[0])} <= {RATIO_TARGET} (unchanged)",
                 f"{ratio:.2f}", None if quick and same else same and ratio <= RATIO_TARGET))


# -- 4. Spark ------------------------------------------------------------------------------------

def spark_missing() -> str | None:
    """Why the Spark part cannot run here, or None."""
    if importlib.util.find_spec("deid_sql.backends.spark") is None:
        return "deid_sql.backends.spark does not exist yet"
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install 'deid-sql[spark]')"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime (java on PATH or JAVA_HOME)"
    return None


def same_cells(a: Path, b: Path) -> tuple[bool, str]:
    """Whether two saved cell sets are equal (both are sorted by position: Cells.from_arrow)."""
    x, y = np.load(a), np.load(b)
    if x["positions"].shape != y["positions"].shape:
        return False, f"{len(x['counts']):,} vs {len(y['counts']):,} cells"
    if not np.array_equal(x["positions"], y["positions"]):
        return False, "same number of cells, other positions"
    diff = int(np.count_nonzero(x["counts"] != y["counts"]))
    return diff == 0, "equal" if diff == 0 else f"{diff:,} counts differ"


def part_spark(folder: Path, cohorts: dict[int, Path], duck: dict[int, dict], args: argparse.Namespace,
               rows: list[Row]) -> None:
    why = "--skip-spark" if args.skip_spark else spark_missing()
    if why is not None:
        out(f"  skipped: {why}")
        for n in cohorts:
            rows.append((f"Spark {size(n)} rows: cells equal DuckDB's", "skipped", None))
        return
    import pyspark

    backend = (f'\n[backend]\nengine = "spark"\nmaster = "{SPARK_MASTER}"\n'
               f'conf = {{ "spark.driver.memory" = "{args.spark_driver_memory}" }}\n')
    out(f"  pyspark {pyspark.__version__}; [backend] engine = \"spark\", master = \"{SPARK_MASTER}\", "
        f"spark.driver.memory = {args.spark_driver_memory}; SPARK_LOCAL_IP=127.0.0.1; one fresh process per size")
    out(f"  {'rows':>12} {'session':>8} {'from_spec':>10} {'Python':>9} {'JVM':>9} {'sum':>9} "
        f"{'cells':>9}  cells vs DuckDB")
    env = {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    for n in cohorts:
        name = f"spark-{n}"
        spec = write_spec(folder, name, cohorts[n], args.seed, backend)
        r = run_child(folder, name, {"spec": str(spec), "memory_limit": None, "policies": 0, "seed": args.seed,
                                     "floor": False, "source": str(cohorts[n])}, env)
        label = f"Spark {size(n)} rows"
        if isinstance(r, str):
            failed(label, r)
            rows.append((f"{label}: cells equal DuckDB's", "failed", False))
            continue
        jvm = sum(h for _, name_, h in r["tree"] if name_ == "java")
        others = [f"{name_} {h:,.0f} MiB" for _, name_, h in r["tree"] if name_ != "java" and h == h]  # h == h: not NaN
        if n in duck:
            equal, how = same_cells(folder / f"duckdb-{n}.cells.npz", folder / f"{name}.cells.npz")
            equal = equal and r["domains"] == duck[n]["domains"]
        else:
            equal, how = False, "no DuckDB cells to compare (its load failed)"
        out(f"  {n:>12,} {r['connect_s']:>6.1f} s {r['load_s']:>8.1f} s {r['own_mib']:>5,.0f} MiB {jvm:>5,.0f} MiB "
            f"{r['own_mib'] + jvm:>5,.0f} MiB {r['cells']:>9,}  {how}")
        if others:
            out(f"  {'':>12} other descendants alive after the load: {', '.join(others)}")
        total = r["connect_s"] + r["load_s"]
        rows.append((f"{label}: session + from_spec", f"{total:.1f} s", None))
        rows.append((f"{label}: peak RSS Python + JVM", f"{r['own_mib']:,.0f} + {jvm:,.0f} MiB", None))
        rows.append((f"{label}: cells equal DuckDB's", how, equal))
    out("  session = starting the SparkSession (JVM launch); from_spec as for DuckDB; Python = the child's VmHWM;")
    out("  JVM = VmHWM of the driver JVM (a child of the Python process, read while the session is still open);")
    out("  sum = the two peaks added: an upper bound of the pair's simultaneous peak")


# -- main ------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--rows-small", type=int, default=SMALL_ROWS, help=f"small cohort (default {SMALL_ROWS:,})")
    parser.add_argument("--rows-large", type=int, default=LARGE_ROWS, help=f"large cohort (default {LARGE_ROWS:,})")
    parser.add_argument("--quick", action="store_true",
                        help=f"cohorts of {size(QUICK_ROWS[0])} and {size(QUICK_ROWS[1])} rows (a smoke run)")
    parser.add_argument("--skip-spark", action="store_true", help="skip part 4 (Spark local)")
    parser.add_argument("--dir", type=Path, help="data folder, kept and reused as a cache (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data folder (without --dir)")
    parser.add_argument("--policies", type=int, default=POLICIES, help=f"policies timed per size (default {POLICIES})")
    parser.add_argument("--seed", type=int, default=0, help="seed of census, cohorts and policies (default 0)")
    parser.add_argument("--memory-limit", default=MEMORY_LIMIT,
                        help=f"DuckDB memory_limit (default {MEMORY_LIMIT}; '' for DuckDB's default)")
    parser.add_argument("--spark-driver-memory", default=SPARK_DRIVER_MEMORY,
                        help=f"spark.driver.memory (default {SPARK_DRIVER_MEMORY})")
    parser.add_argument("--rerun-only", action="store_true", help="only part 5 (a second command, cells cache)")
    parser.add_argument("--_child", dest="child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.child)
        return 0
    sizes = QUICK_ROWS if args.quick else (args.rows_small, args.rows_large)
    if not 0 < sizes[0] < sizes[1]:
        parser.error("need 0 < --rows-small < --rows-large")
    if args.policies < 1:
        parser.error("--policies must be at least 1")
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        folder, temporary = args.dir.resolve(), False
    else:
        folder, temporary = Path(tempfile.mkdtemp(prefix="deid-scale-")), not args.keep
    started = time.perf_counter()
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    out("deid-sql scale benchmark")
    out(f"  python {sys.version.split()[0]}, duckdb {duckdb.__version__}, pyarrow {pa.__version__}, "
        f"{os.cpu_count()} CPUs, {ram:.0f} GiB RAM; cohorts of {sizes[0]:,} and {sizes[1]:,} rows"
        f"{' (--quick)' if args.quick else ''}, {args.policies} policies, seed {args.seed}")
    out(f"  load average at the start {os.getloadavg()[0]:.1f} (1 min; other work on the machine slows every figure)")
    out(f"  data folder {folder}" + (" (temporary, removed at the end)" if temporary else " (kept)"))
    if args.quick:
        out(f"  (--quick applies the {size(SMALL_ROWS)} and {size(LARGE_ROWS)} targets to "
            f"{size(sizes[0])} and {size(sizes[1])} rows)")
    out()
    rows: list[Row] = []
    if args.rerun_only:
        out("== 5. A second command on the same data (cells cache) ==")
        rows += part_rerun(args.skip_spark)
        for target, measured, ok in rows:
            out(f"  {target:<52} {measured:>20}   {'-' if ok is None else '✓' if ok else '✗'}")
        return 0
    try:
        out("== 1. Setup: synthetic census and cohorts (not a target) ==")
        cohorts = setup(folder, sizes, args.seed)
        out()
        out("== 2. DuckDB: load and aggregation to cells in a fresh process per size ==")
        duck = part_duckdb(folder, cohorts, args, rows)
        out()
        out(f"== 3. Per-policy evaluation (fast path, {args.policies} seeded random policies) ==")
        part_policies(duck, sizes, args.policies, args.quick, rows)
        out()
        out("== 4. Spark local: the same load in a fresh process per size ==")
        part_spark(folder, cohorts, duck, args, rows)
        out()
        out("== 5. A second command on the same data (cells cache) ==")
        rows += part_rerun(args.skip_spark)
        out()
    finally:
        if temporary:
            shutil.rmtree(folder, ignore_errors=True)
    out("== 6. Summary ==")
    for target, measured, ok in rows:
        out(f"  {target:<52} {measured:>20}   {'-' if ok is None else '✓' if ok else '✗'}")
    out(f"  (whole run {time.perf_counter() - started:.0f} s; load average at the end {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
