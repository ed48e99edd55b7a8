"""Before/after figures of benchmarks in one run: is a change slower than the code before it?

    python bench/compare.py --before REV [--after TREE_OR_REV] [--runs N] [--same-script]
                            SCRIPT [SCRIPT ...] [-- ARGS]

    python bench/compare.py --before HEAD~1 --runs 3 bench/anonymize.py bench/frontier.py \\
        "bench/release.py --dir /tmp/release-data" -- --quick

- ``--before REV`` is checked out into a temporary ``git worktree`` (removed at the end); ``--after``
  is a folder holding a checkout (default: this repository's working tree, uncommitted changes
  included) or a revision, checked out the same way.
- Each side's deid_sql is built and installed (``pip install --no-deps --target``, no virtual
  environment touched) into a temporary folder of its own that goes first on ``PYTHONPATH``: the
  installed deid-sql (an editable install of some checkout maps ``deid_sql.sql``, ``udfs`` and
  ``fixtures`` to that checkout's folders) is never imported. Every run checks, in the child, that
  ``deid_sql`` and its SQL templates come from its side's folder, and stops if not.
- Each SCRIPT (a path inside the tree, with its own flags in one quoted argument if it needs any;
  ARGS after ``--`` go to every script) runs ``--runs`` times (default 3) under each side,
  interleaved (before, after, then after, before, ...) so a busy spell of a shared machine hits both
  sides alike. By default each side runs its own copy of the script (a change may have changed the
  API a script uses); ``--same-script`` runs the after tree's script under both.
- Each run runs from its tree's root, as ``python SCRIPT`` would, with a fresh cells cache
  (``DEID_SQL_CACHE_DIR``), and the Adult data is found from the temporary checkout as from this one
  (``../shared`` is linked beside it).
- The figures are the ``figure: NAME = VALUE UNIT`` lines the scripts print (bench/figures.py),
  plus each run's whole wall time as measured here (a script, or a revision, that prints no figure
  lines is compared by that alone). Per figure it prints the median before, the
  median after, after / before, and a verdict: "same within noise" when the ratio is inside the
  noise band, else "slower" or "faster". The noise band of a figure is the larger relative spread,
  (max - min) / median, of its before and its after runs, and at least 10 %: comparing a revision
  with itself (2 runs per side, the machine shared) put figures whose runs agreed to 1 % at 0.94 and
  1.06, so a narrower band on this machine flags noise. More runs give a truer band. Rates (units
  ending in ``/s``) are slower when they fall.

Exit status 0 when every run succeeded (whatever the verdicts); 1 when a run failed (its output's
tail is printed), a build failed or a revision or script was not found; 2 on bad flags.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from figures import parse  # noqa: E402  (bench/ is not a package)

REPO = Path(__file__).resolve().parents[1]
MIN_BAND = 0.10  # the noise band is never narrower: same-code runs differed by up to 6 % (docstring)
WALL = "whole run, wall (measured by compare.py)"
# run in the child before the script: sys.path as `python SCRIPT` has it, then the check that
# deid_sql and its SQL templates come from the side's own install folder
CHILD = r"""
import importlib, os, runpy, sys
site, script = sys.argv[1], sys.argv[2]
sys.path[0] = os.path.dirname(os.path.abspath(script))
for name in ("deid_sql", "deid_sql.sql"):
    module = importlib.import_module(name)
    where = os.path.realpath(module.__file__ or list(module.__path__)[0])
    if not where.startswith(os.path.realpath(site) + os.sep):
        sys.exit(f"compare.py: {name} was imported from {where}, not from {site}")
print(f"compare.py: deid_sql from {os.path.dirname(importlib.import_module('deid_sql').__file__)}", flush=True)
sys.argv = sys.argv[2:]
runpy.run_path(script, run_name="__main__")
"""


def git(*args: str, cwd: Path = REPO) -> str:
    done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"compare.py: git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def short(subject: str, length: int = 60) -> str:
    return subject if len(subject) <= length else subject[:length - 1].rstrip() + "…"


@dataclass
class Side:
    """One version of the code: its checkout, its installed package and its runs' figures."""

    name: str
    tree: Path  # the checkout the scripts run from
    label: str
    worktree: bool = False  # a temporary git worktree of ours (removed at the end)
    site: Path | None = None  # where its deid_sql is installed
    figures: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # script -> name -> values
    units: dict[str, str] = field(default_factory=dict)


def checkout(rev: str, folder: Path, name: str) -> Side:
    """``rev`` in a temporary worktree at ``folder``."""
    commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    git("worktree", "add", "--detach", str(folder), commit)
    subject = git("log", "-1", "--format=%h %s", commit)
    return Side(name, folder, f"{rev} = {short(subject)}", worktree=True)


def side_of(value: str, tmp: Path, name: str) -> Side:
    """``--after``: a folder holding a checkout, or a revision."""
    path = Path(value).expanduser()
    if path.is_dir():
        tree = Path(git("rev-parse", "--show-toplevel", cwd=path))
        dirty = " + uncommitted changes" if git("status", "--porcelain", cwd=tree) else ""
        return Side(name, tree, f"working tree {tree} ({short(git('log', '-1', '--format=%h %s', cwd=tree))}{dirty})")
    return checkout(value, tmp / name, name)


def install(side: Side, tmp: Path) -> None:
    """Build and install the side's deid_sql into a folder of its own (no environment is touched)."""
    source = side.tree
    if not side.worktree:  # a working tree: build from a copy of its files, leaving no build/ behind
        source = tmp / f"src-{side.name}"
        files = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=side.tree).split("\0")
        for rel in filter(None, files):
            src = side.tree / rel
            if src.is_file():
                (source / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, source / rel)
    side.site = tmp / f"site-{side.name}"
    start = time.perf_counter()
    base = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-warn-script-location",
            "--disable-pip-version-check", "--target", str(side.site)]
    done = subprocess.run([*base, "--no-build-isolation", str(source)], capture_output=True, text=True)
    if done.returncode != 0:  # this environment's setuptools cannot build it: let pip fetch the build's own
        shutil.rmtree(side.site, ignore_errors=True)
        done = subprocess.run([*base, str(source)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"compare.py: building {side.label} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    print(f"  {side.name:<6} {side.label}\n         built into {side.site} in {time.perf_counter() - start:.1f} s",
          flush=True)


def run_once(side: Side, script: list[str], extra: list[str], script_tree: Path, cache: Path) -> str:
    """One run of ``script`` under ``side``'s code; returns its output, or exits on a failure."""
    assert side.site is not None
    path = script_tree / script[0]
    if not path.is_file():
        raise SystemExit(f"compare.py: {path} does not exist ({side.label})")
    env = {**os.environ, "PYTHONPATH": str(side.site), "DEID_SQL_CACHE_DIR": str(cache)}
    env.pop("PYTHONSAFEPATH", None)
    argv = [sys.executable, "-c", CHILD, str(side.site), str(path), *script[1:], *extra]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=script_tree, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    output = done.stdout + done.stderr
    if done.returncode != 0 or f"compare.py: deid_sql from {side.site}" not in done.stdout:
        tail = "\n".join(output.splitlines()[-40:])
        print(f"compare.py: {' '.join(script)} failed under {side.name} ({side.label}), exit {done.returncode}:\n"
              f"{tail}", file=sys.stderr)
        raise SystemExit(1)
    key = " ".join(script)
    found = parse(output)
    found[WALL] = (seconds, "s")
    for name, (value, unit) in found.items():
        side.figures.setdefault(key, {}).setdefault(name, []).append(value)
        side.units[name] = unit
    return output


def spread(values: list[float]) -> float:
    """(max - min) / median: 0 for a single run."""
    middle = statistics.median(values)
    return (max(values) - min(values)) / middle if len(values) > 1 and middle > 0 else 0.0


def verdict(ratio: float, band: float, unit: str) -> str:
    if 1 / (1 + band) <= ratio <= 1 + band:
        return "same within noise"
    worse = ratio > 1 if not unit.endswith("/s") else ratio < 1
    return "slower" if worse else "faster"


def cell(values: list[float], unit: str) -> str:
    """Median and range of one side's runs."""
    median = f"{statistics.median(values):.3g} {unit}"
    return median if len(values) == 1 else f"{median} ({min(values):.3g}–{max(values):.3g})"


def report(script: str, before: Side, after: Side, runs: int) -> None:
    b, a = before.figures.get(script, {}), after.figures.get(script, {})
    names = list(dict.fromkeys([*b, *a]))
    width = max(len(n) for n in names)
    cells = {n: (cell(b[n], before.units[n]) if n in b else "", cell(a[n], after.units[n]) if n in a else "")
             for n in names}
    wb = max(len("before (median, range)"), *(len(c[0]) for c in cells.values()))
    wa = max(len("after (median, range)"), *(len(c[1]) for c in cells.values()))
    print(f"\n{script}  ({runs} run(s) per side, interleaved)")
    print(f"  {'figure':<{width}}  {'before (median, range)':>{wb}}  {'after (median, range)':>{wa}}  "
          f"{'after/before':>12}  {'noise':>5}  verdict")
    for name in names:
        unit = after.units.get(name) or before.units.get(name, "")
        if name not in b or name not in a:
            print(f"  {name:<{width}}  only {'after' if name in a else 'before'} printed it")
            continue

        mb, ma = statistics.median(b[name]), statistics.median(a[name])
        band = max(MIN_BAND, spread(b[name]), spread(a[name]))
        ratio = ma / mb if mb > 0 else float("inf")
        print(f"  {name:<{width}}  {cells[name][0]:>{wb}}  {cells[name][1]:>{wa}}  {ratio:>12.3f}  {band:>5.0%}  "
              f"{verdict(ratio, band, unit)}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="ARGS after -- go to every script; see the module's docstring")
    parser.add_argument("--before", required=True, help="the revision before the change (a commit, branch, HEAD~1)")
    parser.add_argument("--after", default=str(REPO),
                        help="a folder holding a checkout, or a revision (default: this working tree)")
    parser.add_argument("--runs", type=int, default=3, help="runs per script and side (default 3)")
    parser.add_argument("--same-script", action="store_true",
                        help="run the after tree's scripts under both sides (default: each side its own)")
    parser.add_argument("scripts", nargs="+", help="bench scripts, e.g. bench/anonymize.py or 'bench/x.py --flag'")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    scripts = [shlex.split(s) for s in args.scripts]
    tmp = Path(tempfile.mkdtemp(prefix="deid-compare-"))
    sides: list[Side] = []
    try:
        after = side_of(args.after, tmp, "after")
        sides.append(after)
        for script in scripts:
            if not (after.tree / script[0]).is_file():
                raise SystemExit(f"compare.py: no {script[0]} in {after.tree}")
        before = checkout(args.before, tmp / "before", "before")
        sides.append(before)
        # the scripts find ../shared/data from their checkout's folder: the same data beside a temporary one
        shared = next((s for s in (after.tree.parent / "shared", REPO.parent / "shared") if s.exists()), None)
        if shared is not None:
            (tmp / "shared").symlink_to(shared.resolve(), target_is_directory=True)
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"compare.py: {len(scripts)} script(s) x {args.runs} run(s) x 2 sides; load average {load:.1f} "
              f"on {os.cpu_count()} CPUs", flush=True)
        for side in (before, after):
            install(side, tmp)
        start = time.perf_counter()
        for i in range(args.runs):
            for script in scripts:
                for side in (before, after) if i % 2 == 0 else (after, before):
                    tree = after.tree if args.same_script else side.tree
                    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=tmp))
                    run_once(side, script, extra, tree, cache)
                    shutil.rmtree(cache, ignore_errors=True)
                    seconds = side.figures[" ".join(script)][WALL][-1]
                    print(f"  run {i + 1}/{args.runs} {' '.join(script)} under {side.name}: {seconds:.1f} s",
                          flush=True)
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        own = "the after tree's" if args.same_script else "each side its own"
        print(f"\nbefore: {before.label}\nafter:  {after.label}\n"
              f"runs took {time.perf_counter() - start:.0f} s; load average now {load:.1f}; args to every script: "
              f"{shlex.join(extra) or '(none)'}; scripts: {own}")
        print(f"noise band: the larger relative spread (max - min) / median of a figure's before and after runs, "
              f"at least {MIN_BAND:.0%}; a ratio inside it is 'same within noise'"
              + (" (one run per side: no spread, the band is the floor alone; use --runs 3)" if args.runs == 1 else ""))
        for script in scripts:
            report(" ".join(script), before, after, args.runs)
    finally:
        for side in sides:
            if side.worktree:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(side.tree)],
                               capture_output=True)
        subprocess.run(["git", "-C", str(REPO), "worktree", "prune"], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
