"""Start-up benchmark: how long a command line takes before it does any work.

A command imports what it needs when it runs (``deid_sql.cli.main.COMMANDS``; the package's public
names load on first use), so the root help and the package import load no library module.  Each
figure is the median wall time of --runs fresh processes, printed beside ``python -c pass`` measured
in the same run (the interpreter's own start, the floor no command can go below), and as its
multiple:

1. ``python -c pass``                         the baseline;
2. ``python -c "import deid_sql"``            target <= 0.4 s;
3. ``deid-sql --help``                        target <= 0.3 s;
4. ``deid-sql evaluate --help``               a command's own help (imports that command's module);
5. ``deid-sql validate demo/demo.toml``       a command that reads the demo's data (written in a temp folder).

    python bench/startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS = {"import deid_sql": 0.4, "deid-sql --help": 0.3}


def out(line: str = "") -> None:
    print(line, flush=True)


def cli(*args: str) -> list[str]:
    """The installed console script, or the same entry point through this interpreter."""
    script = shutil.which("deid-sql")
    return [script, *args] if script else [sys.executable, "-c", "from deid_sql.cli import main; main()", *args]


def timed(argv: list[str], runs: int, cwd: Path) -> float:
    """Median wall time of ``runs`` fresh processes (output discarded; a failure stops the benchmark)."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per figure (median)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="deid-startup-bench-") as tmp:
        folder = Path(tmp)
        subprocess.run(cli("demo", "--dir", "demo", "--budget", "20"), cwd=folder, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cases = [("python -c pass", [sys.executable, "-c", "pass"]),
                 ("import deid_sql", [sys.executable, "-c", "import deid_sql"]),
                 ("deid-sql --help", cli("--help")),
                 ("deid-sql evaluate --help", cli("evaluate", "--help")),
                 ("deid-sql validate demo/demo.toml", cli("validate", "demo/demo.toml"))]
        base = None
        ok = True
        out(f"median of {args.runs} fresh processes each")
        for name, command in cases:
            seconds = timed(command, args.runs, folder)
            base = base if base is not None else seconds
            line = f"  {name:<34} {seconds:7.3f} s  {seconds / base:6.1f}x python -c pass"
            if name in TARGETS:
                passed = seconds <= TARGETS[name]
                ok = ok and passed
                line += f"   target <= {TARGETS[name]:g} s: {'PASS' if passed else 'FAIL'}"
            out(line)
    out(f"summary: start-up targets {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
