"""Release benchmark: what the release gate and the domain guards cost, and how well the drift
gate tells a drifted batch from a fresh one.

``--engine duckdb`` (the default) writes Parquet files in process as below; ``--engine postgres``
releases into a table of the server named by $DEID_TEST_POSTGRES_DSN against its plain
``CREATE TABLE AS SELECT *`` of the same rows, with a breakdown per stage, and ``--engine spark``
into a table of a local Spark (``local[2]``) likewise (``bench/release_engines.py``; targets <= 3x).

1. setup, not a target: the synthetic state census and a 10 M-row cohort as Parquet (cached in --dir);
2. the same policy written to Parquet three ways, alternating, in one process over one loaded problem:
   - plain: the same release query (roles, domain guards) written as ``materialize`` writes it, row
     count checked, but no gate: no judgement, no figures, no sidecar;
   - gated: ``deid_sql.release.output.materialize`` — the release query judged before anything is written
     (one GROUP BY where the data is), written, the file read back and measured again (one GROUP BY),
     the criteria judged, the sidecar hashed and written with it;
   - unguarded (information): the release as it was before the gate and the guards;
   the median of each and the ratio gated / plain (target: <= 1.3);
3. the drift gate: seeded batches drawn from the saved population (false alarms, target <= 1 in 100)
   and clearly riskier batches (detections, target >= 99 in 100), from ``deid_sql.fixtures.drift``;
4. the headline figures as ``figure: NAME = VALUE s`` lines (bench/figures.py), which
   bench/compare.py reads: the load, the medians of the three writes, the pseudonymized release and
   the drift gate's batches.

    python bench/release.py [--quick] [--dir DIR] [--rows N] [--runs N] [--engine duckdb|postgres|spark]

About 2 minutes with the data cached (10 M rows; generating it adds ~1 minute); --quick uses 1 M rows
(about 10 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
from figures import figure
from sqlglot import exp

from deid_sql.compiler.compile import col, group_condition, ident, source_key
from deid_sql.fixtures import synthetic_population, write_cohort_parquet
from deid_sql.problem import Problem
from deid_sql.release.output import materialize, write_query
from deid_sql.release.plan import plan_of
from deid_sql.starter.demo import census_spec

POLICY = "age:cuts=18,30,45,65,90|race:top"
FIGURES: dict[str, float] = {}  # headline seconds, printed last for bench/compare.py
RATIO_TARGET = 1.3
# every column kept, so the gated release writes what the baseline writes: the ratio is the cost of
# the guards and the gate alone (dropping identifiers only makes the release smaller)
ROLES = """
[columns]
keep = ["patient_id", "admitted", "systolic_bp"]
sensitive = ["diagnosis"]

[release]
max_risk = 0.05
"""


def out(line: str = "") -> None:
    print(line, flush=True)


def setup(folder: Path, rows: int, seed: int) -> Path:
    population = synthetic_population(seed)
    pop = folder / f"population-seed{seed}.parquet"
    if not pop.exists():
        pq.write_table(population, pop)
    cohort = folder / f"cohort-{rows}-seed{seed}.parquet"
    if not (cohort.exists() and pq.ParquetFile(cohort).metadata.num_rows == rows):
        start = time.perf_counter()
        write_cohort_parquet(population, rows, cohort, seed=seed)
        out(f"  cohort of {rows:,} rows generated in {time.perf_counter() - start:.1f} s")
    spec = folder / "release-bench.toml"
    spec.write_text(census_spec(cohort.name, population=pop.name, name="bench-release") + ROLES, encoding="utf-8")
    return spec


def unguarded(problem: Problem) -> exp.Select:
    """The release query as it was before this gate: per QI a CASE over its generalized groups with
    every other value passed through as text (no domain guard), and every source column as it is."""
    recoding = problem.recoding(POLICY)
    index = {q.column: i for i, q in enumerate(problem.spec.qis)}
    projections: list[exp.Expression] = []
    for name, sql_type in problem.columns.items():
        if name not in index:
            projections.append(col(name))
            continue
        i = index[name]
        domain, rec = problem.domains[i], recoding.qis[i]
        key = source_key(problem.spec.qis[i], domain, col(name), sql_type)
        if rec.n_groups == 1:
            value: exp.Expression = exp.Literal.string(rec.labels[0])
        else:
            value = exp.cast(key.copy(), "VARCHAR") if domain.kind in ("integer", "date") else key.copy()
            wide = [g for g in range(rec.n_groups)
                    if rec.widths[g] > 1 or rec.labels[g] != domain.text(int(rec.members(g)[0]))]
            if wide:
                case = exp.Case()
                for g in wide:
                    case = case.when(group_condition(domain, key, rec.members(g)), exp.Literal.string(rec.labels[g]))
                value = case.else_(value)
        projections.append(exp.alias_(value, ident(name)))
    return exp.select(*projections).from_(problem.source.copy())


def baseline(problem: Problem, target: Path) -> float:
    """The release before the gate: the unguarded query, every column, row count checked, no sidecar."""
    query = unguarded(problem)
    start = time.perf_counter()
    write_query(problem.backend, problem.spec, query, target, problem.sample.total, overwrite=True)
    return time.perf_counter() - start


def plain(problem: Problem, target: Path) -> float:
    """The same release query as ``gated`` writes, with no gate at all."""
    plan = plan_of(problem, POLICY)
    query = problem.query(plan)
    start = time.perf_counter()
    write_query(problem.backend, problem.spec, query, target, problem.sample.total, overwrite=True)
    return time.perf_counter() - start


def gated(problem: Problem, target: Path) -> float:
    start = time.perf_counter()
    written = materialize(problem, plan_of(problem, POLICY), target, overwrite=True)
    took = time.perf_counter() - start
    assert written.verdict is not None and written.verdict.passed
    return took


def part_pseudonym(spec: Path, folder: Path) -> float:
    """Information: the same release with patient_id pseudonymized (HMAC-SHA-256 in DuckDB's SQL)."""
    text = spec.read_text(encoding="utf-8").replace('keep = ["patient_id", "admitted", "systolic_bp"]',
                                                    'keep = ["admitted", "systolic_bp"]\npseudonymize = ["patient_id"]'
                                                    '\nsecret_env = "DEID_BENCH_SECRET"')
    with tempfile.TemporaryDirectory() as held:  # a fresh key each run: its ledger must be fresh too
        ledger = (Path(held) / "ledger.duckdb").as_posix()
        text = text.replace("max_risk = 0.05", f'max_risk = 0.05\nledger = "{ledger}"')
        other = spec.with_name("release-bench-pseudonym.toml")
        other.write_text(text, encoding="utf-8")
        with Problem.from_spec(other) as problem:
            return gated(problem, folder / "pseudonymized.parquet")


def part_gate(spec: Path, folder: Path, runs: int) -> tuple[float, float, float]:
    start = time.perf_counter()
    with Problem.from_spec(spec) as problem:
        FIGURES["Problem.from_spec"] = time.perf_counter() - start
        out(f"  loaded {problem.sample.total:,} rows in {FIGURES['Problem.from_spec']:.1f} s")
        base, bare, gate = [], [], []
        for _ in range(runs):  # alternate, so drift of the machine's speed hits all alike
            base.append(baseline(problem, folder / "baseline.parquet"))
            bare.append(plain(problem, folder / "plain.parquet"))
            gate.append(gated(problem, folder / "gated.parquet"))
    b, p, g = statistics.median(base), statistics.median(bare), statistics.median(gate)
    FIGURES.update({f"unguarded write, median of {runs}": b, f"plain write, median of {runs}": p,
                    f"gated materialize, median of {runs}": g})
    out(f"  unguarded (no guards, no gate)  median {b:.2f} s  (runs: {', '.join(f'{x:.2f}' for x in base)})")
    out(f"  plain (same query, no gate)     median {p:.2f} s  (runs: {', '.join(f'{x:.2f}' for x in bare)})")
    out(f"  gated (judged before writing,   median {g:.2f} s  (runs: {', '.join(f'{x:.2f}' for x in gate)})")
    out("         read back and judged again, sidecar)")
    ratios = [x / y for x, y in zip(gate, bare)]
    ratio = statistics.median(ratios)
    out(f"  ratio gated / plain             median {ratio:.2f} "
        f"(pairs: {', '.join(f'{r:.2f}' for r in ratios)}; target <= {RATIO_TARGET})")
    guards = statistics.median([x / y for x, y in zip(gate, base)])
    out(f"  information: gated / unguarded  median {guards:.2f} (the guards and roles too)")
    return p, g, ratio


def part_cache(spec: Path, gated_seconds: float) -> bool:
    """The load uncached, then from the cells cache, and the whole command (load + gated release)
    each way: whether the cached run is the faster."""
    from deid_sql.loading.cache import CellsCache

    with tempfile.TemporaryDirectory() as held:
        cache, times = CellsCache(Path(held)), []
        for _ in range(2):  # the first stores the cells, the second reads them
            start = time.perf_counter()
            with Problem.from_spec(spec, cache=cache):
                times.append(time.perf_counter() - start)
    uncached, cached = times
    FIGURES.update({"load uncached": uncached, "load cached": cached})
    out(f"  load: uncached {uncached:.2f} s, from the cells cache {cached:.2f} s; whole command (load + gated "
        f"release): uncached {uncached + gated_seconds:.2f} s, cached {cached + gated_seconds:.2f} s — "
        f"{'cached faster' if cached < uncached else 'cached NOT faster'}")
    return cached < uncached


def part_drift(quick: bool) -> tuple[int, int, int]:
    from deid_sql.fixtures.drift import drift_rates

    n = 20 if quick else 100
    start = time.perf_counter()
    rates = drift_rates(n_batches=n, seed=0)
    FIGURES[f"drift gate, {n} + {n} batches"] = time.perf_counter() - start
    out(f"  {rates.describe()}  ({FIGURES[f'drift gate, {n} + {n} batches']:.1f} s)")
    return n, rates.false_alarms, rates.detections


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 M rows, 2 runs, 20 drift batches")
    parser.add_argument("--dir", type=Path, default=None, help="keep the generated data here (reused)")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--engine", choices=["duckdb", "postgres", "spark"], default="duckdb",
                        help="postgres: the server of $DEID_TEST_POSTGRES_DSN (.ci/postgres.sh starts one)")
    args = parser.parse_args(argv)
    rows = args.rows or (1_000_000 if args.quick else 10_000_000)
    runs = args.runs or (2 if args.quick else 3)
    import secrets

    os.environ.setdefault("DEID_BENCH_SECRET", secrets.token_hex(32))  # a fresh key: the bench keeps no pseudonym
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.dir or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        out(f"release benchmark: {rows:,} rows, policy {POLICY!r}, {runs} runs each, engine {args.engine}")
        spec = setup(folder, rows, args.seed)
        if args.engine != "duckdb":
            return engine_part(args.engine, spec, folder, rows, runs, args.seed)
        b, g, ratio = part_gate(spec, folder, runs)
        faster = part_cache(spec, g)
        p = part_pseudonym(spec, folder)
        FIGURES["gated materialize, patient_id pseudonymized"] = p
        out(f"  information: with patient_id pseudonymized (HMAC-SHA-256 per row in SQL): {p:.2f} s "
            f"({p / b:.2f}x plain)")
        out("drift gate")
        n, alarms, caught = part_drift(args.quick)
    ok = (ratio <= RATIO_TARGET and faster and alarms <= max(1, n // 100)
          and caught >= n - max(1, n // 100))
    return summary(f"gate {ratio:.2f}x plain (median of pairs); drift false alarms {alarms}/{n}, "
                   f"detections {caught}/{n}", ok)


def summary(text: str, met: bool | None) -> int:
    """The summary line, then the headline figures for bench/compare.py (``met`` None: nothing measured)."""
    verdict = "nothing measured" if met is None else "all targets met" if met else "a target was missed"
    out(f"summary: {text} — {verdict}")
    out("figures")
    for name, seconds in FIGURES.items():
        figure(name, seconds)
    return 0


def engine_part(engine: str, spec: Path, folder: Path, rows: int, runs: int, seed: int) -> int:
    from release_engines import run_engine

    cohort, population = folder / f"cohort-{rows}-seed{seed}.parquet", folder / f"population-seed{seed}.parquet"
    result = run_engine(engine, spec, cohort, population, rows, runs, POLICY, FIGURES,
                        os.environ.get("DEID_TEST_POSTGRES_DSN"), folder)
    if result is None:
        return summary(f"{engine} skipped", None)
    ratio, met = result
    return summary(f"{engine} gate {ratio:.2f}x its plain CREATE TABLE AS (median of pairs)", met)


if __name__ == "__main__":
    sys.exit(main())
