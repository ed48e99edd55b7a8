"""Full-domain anonymization benchmark of deid-sql on Adult: the path search against ARX and best-first.

deid-sql finds the optimal full-domain generalization with record suppression (seed 004's problem)
with one of two traversals: ``paths`` (the default since issue 32: candidates in order of their
quality bound, each unknown one settled by a bisection along a path to the top) and ``best-first``
(seed 004's best-first branch and bound, the default before).  This script runs both on the UCI
Adult sample with ARX's hierarchies (../shared/data/adult beside the checkout, 9 QIs, 12,960 transformations) and
reports:

1. the six configurations of issue 32 (k=5/0 %/Loss, k=5/4 %/Loss, k=100/0 %/Loss, k=5/4 %/NUE,
   k=5/0 %/DM, k=5/0 %/KL): the optimum, the transformations checked by the path search, by
   best-first and by ARX (its counts as measured for the issue: ARX built from source on this
   machine), and the search times of both traversals measured in the same run, interleaved (min of
   REPEATS, wall and CPU), with their ratio; each optimum re-checked by exhaustive enumeration;
2. where the checks go, per configuration and traversal: checked (accepted, rejected), known
   rejected without a check, excluded by the bound; the best-first checks the path search skips;
   and what a search knowing every verdict in advance would still check (``where_checks.py``);
3. the store options of seed 004 Table 1: the operation logs of k=5 Loss searches of both
   traversals (with and without suppression) replayed on every store; answers, counters and final
   antichains must agree;
4. scaling over the first 3..9 attributes (Table 4 style), k = 5, 4 % suppression, both traversals;
5. for every configuration that misses a target: by how much, and where its time goes (cProfile);
6. the whole command: ``deid-sql anonymize`` on Adult as a fresh process, with and without the cells
   cache, and where its time goes (``cold_process.py``);
7. a PASS/FAIL summary, and the headline figures as ``figure: NAME = VALUE s`` lines
   (bench/figures.py) for bench/compare.py: the load, each configuration's search by the default
   traversal (``search k=…``) and by best-first (``search best-first k=…``), the cold process.

``--quick`` (about 20 s) runs sections 1 (without the exhaustive re-check) and 6 with fewer runs.

Targets (issue 32): checked <= ARX's count on every configuration; search <= 0.1 s without and
<= 0.4 s with 4 % suppression on a quiet machine; the cold process <= 1 s with and without the cache.

    python bench/anonymize.py [--quick]
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import cold_process
from baselines import exhaustive
from figures import figure
from where_checks import Recording, Tables, classify, enumerate_all, oracle

from deid_sql import Problem
from deid_sql.fixtures import adult_hierarchy_spec
from deid_sql.fulldomain import (
    KL,
    Discernibility,
    KAnonymity,
    Loss,
    NonUniformEntropy,
    Outcome,
    QualityModel,
    TransformationSpace,
    TransformEvaluator,
)
from deid_sql.search.antichain import AntichainTree, Direction, ListAntichainStore, ListStore, Node, replay
from deid_sql.search.bfs import BFSResult, StoreFactory
from deid_sql.search.paths import DEFAULT_TRAVERSAL, TRAVERSALS

ADULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult"
ADULT_ATTRIBUTES = ("sex", "age", "race", "marital-status", "education", "native-country", "workclass",
                    "occupation", "salary-class")
METRICS: dict[str, type[QualityModel]] = {"Loss": Loss, "NUE": NonUniformEntropy, "DM": Discernibility, "KL": KL}
Config = tuple[int, float, str]
CONFIGS: list[Config] = [(5, 0.0, "Loss"), (5, 0.04, "Loss"), (100, 0.0, "Loss"), (5, 0.04, "NUE"),
                         (5, 0.0, "DM"), (5, 0.0, "KL")]
# ARX's checked transformations on Adult, measured for issue 32 (ARX built from source, this machine)
ARX_CHECKED: dict[Config, int] = {(5, 0.0, "Loss"): 181, (5, 0.04, "Loss"): 1466, (100, 0.0, "Loss"): 63,
                                  (5, 0.04, "NUE"): 2766, (5, 0.0, "DM"): 181, (5, 0.0, "KL"): 181}
TIME_TARGETS = {0.0: 0.1, 0.04: 0.4}  # seconds of search
OTHER = "best-first"
REPEATS = 5
PROFILE_LINES = 12
Op = tuple[str, tuple[int, ...]]


def out(line: str = "") -> None:
    """Print a report line at once."""
    print(line, flush=True)


def adult_spec(folder: Path, attributes: Sequence[str] = ADULT_ATTRIBUTES) -> Path:
    """A spec over the shared Adult files with the ARX hierarchies (as in tests/test_fulldomain.py)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "adult.toml"
    path.write_text(adult_hierarchy_spec(ADULT, attributes), encoding="utf-8")
    return path


class RecursiveWalkTree(AntichainTree):
    """The prefix tree as it was before issue 21: the paper's range query as a recursive walk over
    every child, and the paper's removal search on inserts (an option of the Table 1 replay)."""

    def __init__(self, direction: Direction, heights: Sequence[int], *, rank_pruning: bool = True) -> None:
        super().__init__(direction, heights, rank_pruning=rank_pruning, sliced=False, closure=False)

    def _range(self, x: tuple[int, ...], rank: int) -> bool:
        return self._walk(self.root, 0, x, rank)

    def _walk(self, node: Node, depth: int, x: tuple[int, ...], rank: int) -> bool:
        if depth == self._depth:
            return True
        xi, up, prune = x[depth], self._up, self.rank_pruning
        for level, child in node.children.items():
            if up:
                if level > xi or (prune and child.bound >= rank):
                    continue
            elif level < xi or (prune and child.bound <= rank):
                continue
            if self._walk(child, depth + 1, x, rank):
                return True
        return False


class LoggingTree(AntichainTree):
    """The prefix tree, recording every public query/insert as ("query"|"insert", x)."""

    def __init__(self, direction: Direction, heights: Sequence[int]) -> None:
        super().__init__(direction, heights, closure=True)  # query_at reads the closure: logged once
        self.log: list[Op] = []

    def query(self, x: Sequence[int]) -> bool:
        self.log.append(("query", tuple(x)))
        return super().query(x)

    def query_at(self, index: int, x: tuple[int, ...]) -> bool:
        self.log.append(("query", tuple(x)))
        return super().query_at(index, x)

    def insert(self, x: Sequence[int]) -> None:
        self.log.append(("insert", tuple(x)))
        super().insert(x)


# the store options replayed (seed 004 Table 1 and what issue 21 added), by name
OPTIONS: dict[str, Callable[[Direction, tuple[int, ...]], object]] = {
    "1 list": lambda d, h: ListStore(d),
    "2 list-antichain": lambda d, h: ListAntichainStore(d),
    "3 tree, no ranks": lambda d, h: AntichainTree(d, h, rank_pruning=False, sliced=False, closure=False),
    "4 tree, recursive (old)": lambda d, h: RecursiveWalkTree(d, h),
    "4 tree, iterative walk": lambda d, h: AntichainTree(d, h, sliced=False, closure=False),
    "4 tree, bit-sliced": lambda d, h: AntichainTree(d, h, closure=False),
    "4 tree, closure": lambda d, h: AntichainTree(d, h),
}
OLD_OPTION, NEW_OPTION = "4 tree, recursive (old)", "4 tree, closure"


@dataclass
class Timed:
    """Min wall and CPU seconds of a traversal's searches, with the last search's result."""

    result: BFSResult
    wall: float
    cpu: float


@dataclass
class Row:
    """One configuration: the default traversal, best-first, and the exhaustive check (None: skipped)."""

    now: Timed
    other: Timed
    equal: bool | None
    tables: Tables | None = None


def evaluator(problem: Problem, space: TransformationSpace, k: int, limit: float, metric: str) -> TransformEvaluator:
    """A fresh evaluator: no group tables carried over from another search."""
    return TransformEvaluator(problem, KAnonymity(k), METRICS[metric](), limit, space=space)


def search(problem: Problem, space: TransformationSpace, k: int, limit: float, metric: str,
           traversal: str = DEFAULT_TRAVERSAL, store: StoreFactory = AntichainTree) -> BFSResult:
    return TRAVERSALS[traversal](space, evaluator(problem, space, k, limit, metric), store)


def timed_pair(problem: Problem, space: TransformationSpace, k: int, limit: float, metric: str) -> tuple[Timed, Timed]:
    """Both traversals, interleaved (a busy spell of the machine hits both), REPEATS runs each."""
    walls: dict[str, list[float]] = {DEFAULT_TRAVERSAL: [], OTHER: []}
    cpus: dict[str, list[float]] = {DEFAULT_TRAVERSAL: [], OTHER: []}
    last: dict[str, BFSResult] = {}
    for _ in range(REPEATS):
        for traversal in (DEFAULT_TRAVERSAL, OTHER):
            cpu = time.process_time()
            last[traversal] = r = search(problem, space, k, limit, metric, traversal)
            cpus[traversal].append(time.process_time() - cpu)
            walls[traversal].append(r.seconds)
    return tuple(Timed(last[t], min(walls[t]), min(cpus[t])) for t in (DEFAULT_TRAVERSAL, OTHER))  # type: ignore


def same(a: Outcome | None, b: Outcome | None) -> bool:
    """Same optimal quality (ties may pick different levels) and both found or both absent."""
    if a is None or b is None:
        return a is b
    return abs(a.quality - b.quality) <= 1e-9 * max(1.0, abs(b.quality))


def label(k: int, limit: float, metric: str) -> str:
    return f"k={k}/{limit:.0%}/{metric}"


def section1(problem: Problem, space: TransformationSpace, quick: bool = False) -> dict[Config, Row]:
    """Each configuration with both traversals; ``quick``: without the exhaustive re-check."""
    out(f"== 1. Adult, {len(space.names)} QIs ({', '.join(space.names)}), heights {space.heights}, "
        f"lattice {space.size:,} transformations ==")
    out(f"  {DEFAULT_TRAVERSAL} (the default) against {OTHER} (the default before issue 32) and ARX's counts; times "
        f"= min of {REPEATS} runs each, interleaved, wall (CPU)" + ("; --quick: no exhaustive check" if quick else ""))
    res: dict[Config, Row] = {}
    for config in CONFIGS:
        k, limit, metric = config
        now, other = timed_pair(problem, space, k, limit, metric)
        o, r = now.result.optimum, now.result
        equal, tables = None, None
        if not quick:
            start = time.perf_counter()
            ref, tables = enumerate_all(evaluator(problem, space, k, limit, metric))
            equal = same(o, ref) and same(other.result.optimum, ref) and same(ref, exhaustive(
                space, evaluator(problem, space, k, limit, metric)))
            check = f"; exhaustive ({time.perf_counter() - start:.1f} s) {'equal' if equal else 'DIFFERENT'}"
        else:
            check = ""
        arx = ARX_CHECKED[config]
        out(f"  {label(*config)}: optimum {space.text(o.levels) if o else 'none'}")
        if o is not None:
            out(f"    {metric} {o.quality:.6g}, suppressed {o.suppressed:,} of {o.records:,} records{check}")
        out(f"    checked {DEFAULT_TRAVERSAL} {r.checked:,} | {OTHER} {other.result.checked:,} | ARX {arx:,} -> "
            f"{DEFAULT_TRAVERSAL}/ARX {r.checked / arx:.2f}, {DEFAULT_TRAVERSAL}/{OTHER} "
            f"{r.checked / other.result.checked:.2f}; target <= ARX: {'PASS' if r.checked <= arx else 'FAIL'}")
        target = TIME_TARGETS[limit]
        out(f"    search  {DEFAULT_TRAVERSAL} {now.wall:.3f} s ({now.cpu:.3f} CPU) | {OTHER} {other.wall:.3f} s "
            f"({other.cpu:.3f}) -> {DEFAULT_TRAVERSAL}/{OTHER} {now.wall / other.wall:.2f}x; target <= {target} s: "
            f"{'PASS' if now.wall <= target else 'FAIL'}")
        res[config] = Row(now, other, equal, tables)
    return res


def section2(problem: Problem, space: TransformationSpace, res: dict[Config, Row]) -> None:
    out("== 2. Where the checks go (every transformation ends checked, known rejected below a checked rejected one, "
        "or excluded by its quality bound) ==")
    for config in CONFIGS:
        row = res[config]
        assert row.tables is not None
        out(f"  {label(*config)}  (optimum {row.tables.optimum:.6g}; ARX {ARX_CHECKED[config]:,} checked)")
        states = {}
        for traversal in (DEFAULT_TRAVERSAL, OTHER):
            ev = evaluator(problem, space, *config)
            recording = Recording(ev)
            result = TRAVERSALS[traversal](space, ev)
            states[traversal] = classify(row.tables, recording.checked, result.stores)
            counted = "" if result.checked == len(states[traversal].checked) else (
                f"  (it counts {result.checked:,}: a transformation its probe checked is counted again when reached)")
            out(f"    {traversal:<11} {states[traversal].row()}{counted}")
        skipped = states[OTHER].checked - states[DEFAULT_TRAVERSAL].checked
        extra = states[DEFAULT_TRAVERSAL].checked - states[OTHER].checked
        acc = int(sum(bool(row.tables.accepted[_index(x, space.heights)]) for x in skipped))
        out(f"    {DEFAULT_TRAVERSAL} skips {len(skipped):,} of {OTHER}'s checks ({acc:,} accepted, "
            f"{len(skipped) - acc:,} rejected: known rejected from higher checks, or bounded) and checks "
            f"{len(extra):,} it did not")
        need_value, cover, total = oracle(row.tables)
        out(f"    knowing every verdict, a search would still check about {total:,}: {need_value:,} accepted whose "
            f"bound beats the optimum, a cover of the rejected ones by {cover:,} rejected transformations"
            + ("" if METRICS[config[2]].bound_from_levels else " (and DM/KL learn a bound only by checking)"))


def _index(x: tuple[int, ...], heights: Sequence[int]) -> int:
    i = 0
    for v, h in zip(x, heights):
        i = i * h + v
    return i


def replay_row(name: str, heights: tuple[int, ...], direction: Direction, log: list[Op]) -> tuple[float, tuple]:
    """Min over REPEATS of replaying ``log`` on a fresh store; the answers, the counters and the
    final antichain (the plain list keeps every insert, so its size and set differ by design)."""
    best, facts = float("inf"), ()
    for _ in range(REPEATS):
        store = OPTIONS[name](direction, heights)
        start = time.perf_counter()
        answers = replay(store, log)  # type: ignore[arg-type]
        best = min(best, time.perf_counter() - start)
        facts = (answers, store.queries, store.hits, store.inserts,  # type: ignore[attr-defined]
                 store.max_size, sorted(set(store)))  # type: ignore[attr-defined, call-overload]
    return best, facts


def section3(problem: Problem, space: TransformationSpace) -> tuple[float, float, bool]:
    out("== 3. Store options (seed 004 Table 1): operation logs of k=5 Loss searches replayed ==")
    heights = tuple(space.heights)
    totals = dict.fromkeys(OPTIONS, 0.0)
    agree_all = True
    names = list(OPTIONS)
    out("  " + f"{'log':<48}{'ops':>7}" + "".join(f"{n.split(',')[-1].strip()[:13]:>15}" for n in names))
    out("  " + " " * 55 + "".join(f"{'opt ' + n.split()[0]:>15}" for n in names))
    for traversal in (OTHER, DEFAULT_TRAVERSAL):
        for limit in (0.0, 0.04):
            r = search(problem, space, 5, limit, "Loss", traversal, store=LoggingTree)
            for name, s in r.stores.items():
                assert isinstance(s, LoggingTree)
                times, seen = [], []
                for option in names:
                    t, facts = replay_row(option, heights, s.direction, s.log)
                    times.append(t)
                    totals[option] += t
                    seen.append(facts)
                # answers and counters agree for all; max size and antichain for all but the plain list
                agree = all(f[:4] == seen[0][:4] for f in seen) and len({repr(f[4:]) for f in seen[1:]}) == 1
                agree_all &= agree
                out(f"  {f'{traversal} {limit:.0%}: {name}':<48}{len(s.log):>7}" + "".join(f"{t:>15.4f}" for t in times)
                    + f"   agree {'yes' if agree else 'NO'}")
    old, new = totals[OLD_OPTION], totals[NEW_OPTION]
    sliced = totals["4 tree, bit-sliced"]
    out("  all logs: " + ", ".join(f"{n} {t:.4f} s" for n, t in totals.items()))
    out(f"  old recursive tree / closure {old / new:.1f}x; old / bit-sliced {old / sliced:.1f}x; plain list / closure "
        f"{totals['1 list'] / new:.1f}x  (replay min of {REPEATS} on fresh stores)")
    for name, store in (("tree, closure", AntichainTree),
                        ("tree, bit-sliced", functools.partial(AntichainTree, closure=False)),
                        ("tree, recursive (old)", RecursiveWalkTree), ("antichain list", ListAntichainStore),
                        ("plain list", ListStore)):
        cells = []
        for traversal in (DEFAULT_TRAVERSAL, OTHER):
            w = search(problem, space, 5, 0.04, "Loss", traversal, store=store)  # type: ignore[arg-type]
            cells.append(f"{traversal} {w.seconds:6.3f} s ({w.checked:,} checked, loss "
                         f"{w.optimum.quality if w.optimum else float('nan'):.6f})")
        out(f"  whole search k=5/4%/Loss with {name:<21} " + "; ".join(cells))
    return old / new, old / sliced, agree_all


def section4(folder: Path, problem9: Problem, space9: TransformationSpace) -> None:
    out("== 4. Scaling: first n attributes, k=5, 4 % suppression, Loss (seed 004 Table 4 style) ==")
    out(f"  {'n':>2}{'transf.':>9}   " + "   ".join(f"{t + ' checked':>20}{'%':>7}{'s':>8}"
                                                  for t in (DEFAULT_TRAVERSAL, OTHER)))
    for n in range(3, len(ADULT_ATTRIBUTES) + 1):
        if n == len(ADULT_ATTRIBUTES):
            p, space = problem9, space9
            rows = [search(p, space, 5, 0.04, "Loss", t) for t in (DEFAULT_TRAVERSAL, OTHER)]
        else:
            with Problem.from_spec(adult_spec(folder / f"n{n}", ADULT_ATTRIBUTES[:n])) as p:
                space = TransformationSpace(p)
                rows = [search(p, space, 5, 0.04, "Loss", t) for t in (DEFAULT_TRAVERSAL, OTHER)]
        out(f"  {n:>2}{space.size:>9,}   " + "   ".join(f"{r.checked:>20,}{r.checked_share:>7.1%}{r.seconds:>8.3f}"
                                                        for r in rows))


def section5(problem: Problem, space: TransformationSpace, res: dict[Config, Row]) -> None:
    out("== 5. Configurations that miss a target: by how much and why (cProfile by own time) ==")
    missed = [c for c in CONFIGS if res[c].now.wall > TIME_TARGETS[c[1]] or res[c].now.result.checked > ARX_CHECKED[c]]
    if not missed:
        out("  none missed")
    for config in missed:
        k, limit, metric = config
        now = res[config].now
        ev = evaluator(problem, space, k, limit, metric)
        applied = [0.0]
        apply = ev.apply

        def timed_apply(x: Sequence[int] | str, apply=apply, applied=applied) -> Outcome:  # type: ignore[no-untyped-def]
            start = time.perf_counter()
            try:
                return apply(x)
            finally:
                applied[0] += time.perf_counter() - start

        ev.apply = timed_apply  # type: ignore[method-assign]
        r = TRAVERSALS[DEFAULT_TRAVERSAL](space, ev)
        target = TIME_TARGETS[limit]
        out(f"  {label(*config)}:")
        if r.checked > ARX_CHECKED[config]:
            out(f"    checked {r.checked:,} > ARX's {ARX_CHECKED[config]:,} ({r.checked / ARX_CHECKED[config]:.2f}x)")
        if now.wall > target:
            out(f"    search {now.wall:.3f} s = {now.wall / target:.1f}x the {target} s target "
                f"({now.wall - target:.3f} s over; load average {os.getloadavg()[0]:.1f}); an unprofiled run: checks "
                f"(grouping, suppression, quality) {applied[0]:.3f} s for {r.checked:,} "
                f"({applied[0] / max(1, r.checked) * 1e3:.2f} ms each), the rest ({r.seconds - applied[0]:.3f} s of "
                f"{r.seconds:.3f} s) traversal and stores")
        prof = cProfile.Profile()
        prof.enable()
        search(problem, space, k, limit, metric)
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(PROFILE_LINES)
        lines = [ln for ln in text.getvalue().splitlines() if ln.strip()]
        start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls"))
        for ln in lines[start:]:
            out("    " + ln.replace(str(Path(__file__).resolve().parents[1]) + os.sep, ""))


def summary(res: dict[Config, Row], cold: dict[str, float], replayed: tuple[float, float, bool] | None) -> None:
    out("== Summary ==")
    out(f"  {'configuration':<16}{'checked':>8}{'ARX':>7}{'<= ARX':>8}{'search s':>10}{'CPU s':>8}{'target':>12}"
        f"{OTHER + ' s':>14}{'ratio':>7}{OTHER + ' checked':>20}  exhaustive")
    verdicts = []
    for config in CONFIGS:
        row = res[config]
        now, arx, target = row.now, ARX_CHECKED[config], TIME_TARGETS[config[1]]
        ok_checked, ok_time = now.result.checked <= arx, now.wall <= target
        shown = "skipped" if row.equal is None else ("equal" if row.equal else "DIFFERENT")
        out(f"  {label(*config):<16}{now.result.checked:>8,}{arx:>7,}{'PASS' if ok_checked else 'FAIL':>8}"
            f"{now.wall:>10.3f}{now.cpu:>8.3f}{('PASS' if ok_time else 'FAIL') + f' {target}':>12}"
            f"{row.other.wall:>14.3f}{now.wall / row.other.wall:>6.2f}x{row.other.result.checked:>20,}  {shown}")
        verdicts += [ok_checked, ok_time] + ([row.equal] if row.equal is not None else [])
    for name, seconds in cold.items():
        ok = seconds <= cold_process.TARGET
        verdicts.append(ok)
        out(f"  cold process deid-sql anonymize, {name}: median {seconds:.3f} s, target <= {cold_process.TARGET} s: "
            f"{'PASS' if ok else 'FAIL'}")
    if replayed is not None:
        ratio, sliced, agree = replayed
        verdicts.append(agree)
        out(f"  Table 1 replay: answers, counters and antichains agree: {'PASS' if agree else 'FAIL'}; "
            f"old recursive tree / closure {ratio:.1f}x, old / bit-sliced {sliced:.1f}x")
    missed = sum(not ok for ok in verdicts)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    out(f"  {missed} of {len(verdicts)} checks missed" + (" (by how much and why: section 5)" if missed else "")
        + f"; load average now {load:.2f} (the time targets are for a quiet machine)")


def figures(load_s: float, res: dict[Config, Row], cold: dict[str, float]) -> None:
    """The headline figures for bench/compare.py: the load, each search by the default traversal
    (the names it had before issue 32, so a comparison reads old against new) and by best-first,
    and the cold process."""
    figure("Problem.from_spec + space", load_s)
    for config in CONFIGS:
        figure(f"search {label(*config)}", res[config].now.wall)
        figure(f"search {OTHER} {label(*config)}", res[config].other.wall)
    for name, seconds in cold.items():
        figure(f"cold process anonymize, {name}", seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="sections 1 (no exhaustive check) and 6 (3 runs) alone, about 20 s")
    args = parser.parse_args(argv)
    out("deid-sql full-domain anonymization benchmark on Adult: the path search against ARX and best-first")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    out(f"  python {sys.version.split()[0]}, data {ADULT}; {os.cpu_count()} CPUs, load average {load:.2f} "
        f"(times are wall clock on a shared machine: CPU times are beside them)")
    if not (ADULT / "adult.csv").exists():
        out("  the shared Adult data set is not available: benchmark skipped")
        return 0
    out()
    replayed = None
    with tempfile.TemporaryDirectory(prefix="deid-anon-") as tmp:
        start = time.perf_counter()
        with Problem.from_spec(adult_spec(Path(tmp) / "n9")) as problem:
            space = TransformationSpace(problem)
            load_s = time.perf_counter() - start
            out(f"  Problem.from_spec + space {load_s:.2f} s; {problem.sample.total:,} records")
            out()
            res = section1(problem, space, args.quick)
            out()
            if not args.quick:
                section2(problem, space, res)
                out()
                replayed = section3(problem, space)
                out()
                section4(Path(tmp), problem, space)
                out()
                section5(problem, space, res)
                out()
    cold = cold_process.measure(3 if args.quick else 5)
    out()
    summary(res, cold, replayed)
    out()
    out("== Figures ==")
    figures(load_s, res, cold)
    return 0


if __name__ == "__main__":
    sys.exit(main())
