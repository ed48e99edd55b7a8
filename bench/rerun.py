"""A second command on the same data, on PostgreSQL and on Spark (part 5 of bench/scale.py).

Every command loads its problem: the domain checks and one GROUP BY per table in the engine.
The cells cache (deid_sql/loading/cache.py) keeps the cells of a load under the spec's identity
and the data's fingerprint, so the second command on unchanged data skips the GROUP BY; an
output that already exists is refused before anything is read.  This part runs the CLI as a
user would, in a fresh process each time, on the demo's data (20,000 patients against a
2 M-person census) stored in the engine:

1. ``deid-sql evaluate SPEC --policy top`` with an empty cache folder (the first command);
2. the same again (the second command: its cells from the cache);
3. ``deid-sql materialize SPEC --policy top --table T`` where T exists (refused before the load).

Target: the second command <= 10 % of the first.  PostgreSQL's tables are the engine's own (the
fingerprint is a row count and a row-hash sum: one scan); Spark reads the demo's Parquet files
(the fingerprint is their size and modification time, so a cached ``evaluate`` starts no JVM at
all: the engine connects only when a query runs).  The load alone (``Problem.from_spec`` with its
imports done first) is printed beside each command: what is left of a second command is start-up.

    python bench/rerun.py [--skip-spark] [--runs N]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 0.10


def out(line: str = "") -> None:
    print(line, flush=True)


def cli(args: list[str], env: dict[str, str], expect: int = 0) -> float:
    """Wall time of one ``deid-sql`` run in a fresh process."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", "from deid_sql.cli.main import main; main()", *args], env=env,
                          capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - start
    if done.returncode != expect:
        raise RuntimeError(f"deid-sql {' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return seconds


LOAD = """
import sys, time
from deid_sql.problem import Problem
start = time.perf_counter()
problem = Problem.from_spec(sys.argv[1], cache=True)
print(time.perf_counter() - start)
problem.close()
"""


def load(spec: Path, env: dict[str, str]) -> float:
    """Seconds of ``Problem.from_spec`` alone (connect, views, domains, cells) in a fresh process,
    its imports done before the clock starts: the part of a command the cache is for."""
    done = subprocess.run([sys.executable, "-c", LOAD, str(spec)], env=env, capture_output=True, text=True,
                          timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"loading {spec} failed: {done.stderr.strip()[-400:]}")
    return float(done.stdout.strip().splitlines()[-1])


def postgres_spec(folder: Path, demo: Path) -> Path | None:
    dsn = os.environ.get("DEID_TEST_POSTGRES_DSN")
    if not dsn or importlib.util.find_spec("psycopg") is None:
        return None
    import pyarrow.parquet as pq

    from deid_sql.backends import connect

    with connect("postgres", dsn=dsn) as pg:
        for name in ("cohort", "population"):
            pg.register_table(f"load_{name}", pq.read_table(demo / f"{name}.parquet"))
            pg.con.execute(f'DROP TABLE IF EXISTS "public"."deid_rerun_{name}"')
            pg.con.execute(f'CREATE TABLE "public"."deid_rerun_{name}" AS SELECT * FROM "load_{name}"')
        pg.con.execute('DROP TABLE IF EXISTS "public"."deid_rerun_taken"')
        pg.con.execute('CREATE TABLE "public"."deid_rerun_taken" AS SELECT 1 AS x')
    text = (demo / "demo.toml").read_text(encoding="utf-8")
    text = text.replace('path = "cohort.parquet"', 'table = "public.deid_rerun_cohort"')
    text = text.replace('path = "population.parquet"', 'table = "public.deid_rerun_population"')
    spec = folder / "postgres.toml"
    spec.write_text(text + f'\n[backend]\nengine = "postgres"\ndsn = "{dsn}"\n', encoding="utf-8")
    return spec


def spark_spec(folder: Path, demo: Path) -> Path | None:
    if importlib.util.find_spec("pyspark") is None:
        return None
    text = (demo / "demo.toml").read_text(encoding="utf-8")
    text = text.replace('path = "cohort.parquet"', f'path = "{demo / "cohort.parquet"}"')
    text = text.replace('path = "population.parquet"', f'path = "{demo / "population.parquet"}"')
    spec = folder / "spark.toml"
    spec.write_text(text + '\n[backend]\nengine = "spark"\nmaster = "local[2]"\n', encoding="utf-8")
    return spec


def part_rerun(skip_spark: bool = False, runs: int = 1) -> list[tuple[str, str, bool | None]]:
    """Run the part; returns summary rows (target, measured, met)."""
    from deid_sql.starter.demo import build_demo

    rows: list[tuple[str, str, bool | None]] = []
    folder = Path(tempfile.mkdtemp(prefix="deid-rerun-"))
    try:
        demo = build_demo(folder / "demo").parent
        env = dict(os.environ, SPARK_LOCAL_IP=os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"), DEID_SQL_PROGRESS="0",
                   DEID_SQL_SPARK_HOME=str(folder / "spark-home"))  # Spark's warehouse and log: removed at the end
        floor = min(cli(["--version"], env) for _ in range(3))
        out(f"  deid-sql --version (start-up floor) {floor:.2f} s")
        engines = [("postgres", postgres_spec(folder, demo), "public.deid_rerun_taken")]
        if not skip_spark:
            engines.append(("spark", spark_spec(folder, demo), None))
        for engine, spec, taken in engines:
            if spec is None:
                out(f"  {engine:<9} skipped: " + ("set DEID_TEST_POSTGRES_DSN (.ci/postgres.sh starts a server)"
                                                   if engine == "postgres" else "pyspark is not installed"))
                continue
            firsts, seconds, cold, warm = [], [], [], []
            for _ in range(runs):
                cache = folder / f"cache-{engine}"
                shutil.rmtree(cache, ignore_errors=True)
                run_env = dict(env, DEID_SQL_CACHE_DIR=str(cache))
                evaluate = ["evaluate", str(spec), "--policy", "top", "--json"]
                firsts.append(cli(evaluate, run_env))
                seconds.append(cli(evaluate, run_env))
                shutil.rmtree(cache, ignore_errors=True)
                cold.append(load(spec, run_env))
                warm.append(load(spec, run_env))
            first, second = min(firsts), min(seconds)
            load_ratio = min(warm) / min(cold)
            if taken is None:  # Spark: a table of its catalog made by the first materialize
                taken = "deid_rerun_taken"
                cli(["materialize", str(spec), "--policy", "top", "--table", taken], run_env)
            refused = cli(["materialize", str(spec), "--policy", "top", "--table", taken], run_env, expect=2)
            ratio = second / first
            out(f"  {engine:<9} first {first:7.2f} s   second {second:6.2f} s   ratio {ratio:.3f} "
                f"(target <= {TARGET:.2f}): {'met' if ratio <= TARGET else 'MISSED'}   "
                f"existing output refused in {refused:.2f} s")
            out(f"  {engine:<9} the load alone (Problem.from_spec, imports excluded): first {min(cold):.2f} s   "
                f"second {min(warm):.2f} s   ratio {load_ratio:.3f}")
            rows.append((f"{engine}: second command / first <= {TARGET:.2f}", f"{ratio:.3f}", ratio <= TARGET))
            rows.append((f"{engine}: second load / first (imports excluded)", f"{load_ratio:.3f}", None))
            rows.append((f"{engine}: existing output refused (s)", f"{refused:.2f}", None))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-spark", action="store_true", help="PostgreSQL only")
    parser.add_argument("--runs", type=int, default=1, help="runs per figure, the best kept (default 1)")
    args = parser.parse_args(argv)
    out("deid-sql: a second command on the same data (cells cache)")
    rows = part_rerun(args.skip_spark, args.runs)
    return 0 if all(ok is not False for _, _, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
