"""Demo benchmark: how long a newcomer's ``deid-sql demo`` takes, as the README promises.

Each run is a fresh process in a fresh empty folder with an empty cache folder
(``DEID_SQL_CACHE_DIR``), exactly the first command after ``pip install .``: no cells cached, the
data generated, the searches, the plots and the report written.  The figure is the median wall
time of --runs runs, printed beside a baseline measured in the same run, interleaved with the
demo's runs: a fresh process importing the libraries the demo needs (numpy, pyarrow, DuckDB,
sqlglot, scipy's optimizers, matplotlib, jinja2), the floor no demo can go below on this machine.
Their ratio is the figure to compare across machines and loads; the load average is printed too, and
the CPU seconds of each process (user + system, ``getrusage``), which a busy machine inflates far less
than the wall time: on a quiet machine the wall time is about the CPU time.

The demo prints the seconds of its stages; the last run's are listed, so a regression shows where.

    python bench/demo.py [--runs 5]          target: demo <= 10 s
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 10.0  # seconds, README: "Two commands"
IMPORTS = "import numpy, pyarrow.parquet, duckdb, sqlglot, scipy.optimize, matplotlib.figure, jinja2"
# the stages the demo times itself, by the words of its lines
STAGES = (("data and specs written", r"demo data and specs in .*? \((\d+\.\d) s\)"),
          ("problem loaded", r"^loaded .*\((\d+\.\d) s\)$"),
          ("Bisecting Policy Search", r"policies evaluated in (\d+\.\d) s"),
          ("frontier search", r"Sublattice Heuristic Search, [\d,]+ policies, (\d+\.\d) s\)"),
          ("report", r"verdict \w+, (\d+\.\d) s\)"))


def out(line: str = "") -> None:
    print(line, flush=True)


def cli(*args: str) -> list[str]:
    """The installed console script, or the same entry point through this interpreter."""
    script = shutil.which("deid-sql")
    return [script, *args] if script else [sys.executable, "-c", "from deid_sql.cli import main; main()", *args]


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """Wall time, CPU time and stdout of one fresh process (a failure stops the benchmark)."""
    cpu, t0 = cpu_of_children(), time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, check=True, capture_output=True, text=True)
    return time.perf_counter() - t0, cpu_of_children() - cpu, done.stdout


def stages(stdout: str) -> list[tuple[str, float]]:
    found = []
    for name, pattern in STAGES:
        m = re.search(pattern, stdout, re.MULTILINE)
        if m:
            found.append((name, float(m.group(1))))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh demo runs (median); as many baseline runs")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    demo_times: list[float] = []
    demo_cpu: list[float] = []
    base_times: list[float] = []
    base_cpu: list[float] = []
    last = ""
    out(f"load average at start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="deid-demo-bench-") as tmp:
        for i in range(args.runs):
            run = Path(tmp) / f"run{i}"
            (run / "cache").mkdir(parents=True)
            env = {**os.environ, "DEID_SQL_CACHE_DIR": str(run / "cache")}
            wall, cpu, _ = timed([sys.executable, "-c", IMPORTS], run, env)
            base_times.append(wall)
            base_cpu.append(cpu)
            wall, cpu, last = timed(cli("demo"), run, env)  # no arguments: ./deid-sql-demo, as the README says
            demo_times.append(wall)
            demo_cpu.append(cpu)
            out(f"  run {i + 1}: demo {wall:.2f} s (cpu {cpu:.2f} s), baseline {base_times[-1]:.2f} s "
                f"(cpu {base_cpu[-1]:.2f} s)")
    demo, base = statistics.median(demo_times), statistics.median(base_times)
    passed = demo <= TARGET
    out(f"median of {args.runs} fresh runs, empty cache folder each (wall; cpu = user + system):")
    out(f"  deid-sql demo                       {demo:6.2f} s  (min {min(demo_times):.2f}, max {max(demo_times):.2f}; "
        f"cpu {statistics.median(demo_cpu):.2f} s)")
    out(f"  baseline: the demo's imports alone  {base:6.2f} s  (cpu {statistics.median(base_cpu):.2f} s)")
    out(f"  ratio demo / baseline               {demo / base:6.1f}x  (cpu "
        f"{statistics.median(demo_cpu) / statistics.median(base_cpu):.1f}x)")
    out("  stages of the last run (the demo's own timings): "
        + "; ".join(f"{name} {s:.1f} s" for name, s in stages(last)))
    out(f"summary: demo {demo:.1f} s, target <= {TARGET:g} s: {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
