"""The whole command as a user runs it: ``deid-sql anonymize`` on Adult as a fresh process (issue 32).

A search of 0.02 s is a small part of a command that starts Python, imports the library, reads the
data and prints; this measures the command as a fresh process, with the cells cache (the data read
by an earlier command: no engine connected, no rows read) and without it (``--no-cache``: DuckDB
reads the CSV and groups it), on the spec ``deid-sql demo --adult`` writes (every Adult attribute
but the sensitive salary-class a QI with ARX's hierarchy; k = 5, no suppression), and says where the
time goes: a second run of each, under a driver, times the phases (interpreter start, the command
line's imports, the command's imports, the load, the search, the rest) from inside the process.

    python bench/cold_process.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from deid_sql.fixtures import ADULT_COLUMNS, adult_hierarchy_spec

ADULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult"
TARGET = 1.0  # seconds, a fresh process on a quiet machine
ARGS = ("--k", "5")

# run in the child: the phases of one command, timed from inside (printed as one JSON line on stderr)
DRIVER = r"""
import json, sys, time
start = time.perf_counter()
from deid_sql.cli import main
cli = time.perf_counter()
import deid_sql.cli.anonymize as command
imported = time.perf_counter()
phases = {"load": 0.0, "search": 0.0}

def timed(name, fn):
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            phases[name] += time.perf_counter() - t
    return wrapper

opened = command.open_problem

class Opening:
    def __init__(self, *args, **kwargs):
        self.inner = opened(*args, **kwargs)
    def __enter__(self):
        t = time.perf_counter()
        try:
            return self.inner.__enter__()
        finally:
            phases["load"] += time.perf_counter() - t
    def __exit__(self, *exc):
        return self.inner.__exit__(*exc)

command.open_problem = Opening
command.anonymize = timed("search", command.anonymize)
sys.argv = ["deid-sql", *sys.argv[1:]]
try:
    main()
except SystemExit as e:
    if e.code not in (0, None):
        raise
end = time.perf_counter()
print(json.dumps({"cli imports": cli - start, "command imports": imported - cli, "load": phases["load"],
                  "search": phases["search"], "rest": end - imported - phases["load"] - phases["search"]}),
      file=sys.stderr)
"""


def out(line: str = "") -> None:
    print(line, flush=True)


def command() -> list[str]:
    """The ``deid-sql`` console script of this interpreter's environment (else ``python -c``)."""
    script = Path(sys.executable).parent / "deid-sql"
    if script.exists():
        return [str(script)]
    found = shutil.which("deid-sql")
    return [found] if found else [sys.executable, "-c", "import sys; from deid_sql.cli import main; sys.exit(main())"]


def spec_file(folder: Path) -> Path:
    """The spec ``deid-sql demo --adult`` writes as adult-hierarchies.toml."""
    path = folder / "adult-hierarchies.toml"
    path.write_text(adult_hierarchy_spec(ADULT, [c for c in ADULT_COLUMNS if c != "salary-class"]), encoding="utf-8")
    return path


def run(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"cold_process.py: {' '.join(argv)} failed:\n{done.stderr[-2000:]}")
    return seconds, done


def measure(runs: int = 5) -> dict[str, float]:
    """Median wall seconds of a fresh ``deid-sql anonymize`` with and without the cells cache (runs
    interleaved), printed with the phases of one more run of each; returns the medians by name."""
    out(f"== Cold process: deid-sql anonymize adult-hierarchies.toml {' '.join(ARGS)} (8 QIs, 6,480 transformations), "
        f"a fresh process each, {runs} runs interleaved ==")
    medians: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="deid-cold-") as tmp:
        spec = spec_file(Path(tmp))
        env = {**os.environ, "DEID_SQL_CACHE_DIR": str(Path(tmp) / "cache"), "DEID_SQL_PROGRESS": "0"}
        run([*command(), "anonymize", str(spec), *ARGS], env)  # fills the cells cache, compiles the bytecode
        times: dict[str, list[float]] = {"cells cache": [], "no cache": []}
        for _ in range(runs):
            for name, extra in (("cells cache", []), ("no cache", ["--no-cache"])):
                seconds, _done = run([*command(), "anonymize", str(spec), *ARGS, *extra], env)
                times[name].append(seconds)
        for name, extra in (("cells cache", []), ("no cache", ["--no-cache"])):
            seconds, done = run([sys.executable, "-c", DRIVER, "anonymize", str(spec), *ARGS, *extra], env)
            phases = json.loads(done.stderr.strip().splitlines()[-1])
            medians[name] = statistics.median(times[name])
            verdict = "PASS" if medians[name] <= TARGET else "FAIL"
            out(f"  {name:<12} median {medians[name]:.3f} s, min {min(times[name]):.3f} s (runs "
                f"{', '.join(f'{t:.2f}' for t in times[name])}); target <= {TARGET} s: {verdict}")
            shown = ", ".join(f"{k} {v:.3f}" for k, v in phases.items())
            out(f"    where the time goes (one run under the driver, {seconds:.3f} s): start-up and exit "
                f"{seconds - sum(phases.values()):.3f}, {shown}")
        out("    (start-up: the interpreter and site; cli imports: click and the command table; command imports: "
            "numpy, pyarrow, sqlglot and the library; load: the spec, the cells from the cache or read and grouped "
            "by DuckDB; rest: printing)")
    return medians


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    if not (ADULT / "adult.csv").exists():
        out("the shared Adult data set is not available: benchmark skipped")
        return 0
    measure(args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
