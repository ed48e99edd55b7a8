"""Attribute-criteria benchmark (issue 40): what judging a sensitive column adds to evaluating a policy.

The full-domain search evaluates transformations (policies) on cells; an attribute criterion
(ℓ-diversity, t-closeness, the confidence bound, δ-presence: METHODS decision 15) is judged on cells
that also carry the sensitive value (``loading/sensitive.py``: one more ``GROUP BY`` at load, cached), so
every group table holds a row per (group, value) instead of per group, and each model then computes
its figure per group (``evaluate/attribute.py``).  This script measures that cost where it is paid:
the evaluation of one transformation (``TransformEvaluator.apply``: grouping, suppression, the
models' verdicts, quality), with k-anonymity alone as the baseline and k-anonymity plus one attribute
model, each measured in the same run, interleaved, on a fresh evaluator per run (no outcome carried
over), min of --runs:

- **Adult** (../shared/data/adult beside the checkout, ARX's hierarchies; ``occupation`` sensitive and
  so not a QI: 8 QIs), two regimes: ``sweep``, every transformation of the lattice bottom-up (each
  rolled up from a cached specialization, as a search's checks mostly are), and ``sample``, --sample
  transformations drawn with --seed and evaluated in that random order (most grouped from the cells,
  as the path search's probes are);
- **the EHR demo** (``deid-sql demo``'s cohort, 20,000 patients against a census of 2 M people,
  ``diagnosis`` sensitive: ICD-10 codes), every transformation of its lattice; δ-presence runs here
  only (it needs a census).

Each at every ``--limits`` share of suppressed records (default none and 5 %: with a limit, k-anonymity
alone rejects fewer transformations, so more of them are judged on the sensitive values).

Models (k = 5, Loss): distinct ℓ = 2, entropy ℓ = 2, recursive (c,ℓ) = (3, 2),
t-closeness 0.5 with equal, ordered and hierarchical ground distance, the confidence bound 0.8,
δ-presence 0.1.  "ordered" needs an order of the values: Adult's occupations in the order of their
hierarchy file (which lists related occupations together), the demo's ICD-10 codes in code order.
"hierarchical": Adult's occupation hierarchy; for the demo codes → category (3 characters) →
chapter (the letter) → root.  The sensitive cells' ``GROUP BY`` is a one-time cost of the load and
is printed apart.

Target (issue 40): per-transformation time with an attribute criterion <= 2x without.

    python bench/attribute.py [--runs 3] [--sample 300] [--seed 0] [--limits 0,0.05] [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from figures import figure

from deid_sql import Problem
from deid_sql.domains.hierarchy import Hierarchy
from deid_sql.fixtures import adult_hierarchy_spec
from deid_sql.fulldomain import (
    Confidence,
    DistinctLDiversity,
    EntropyLDiversity,
    KAnonymity,
    Loss,
    Presence,
    PrivacyModel,
    RecursiveCLDiversity,
    TCloseness,
    Transformation,
    TransformationSpace,
    TransformEvaluator,
)
from deid_sql.loading.sensitive import sensitive_cells
from deid_sql.starter.demo import PUBLISHABLE_FILE, build_demo

ADULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult"
ADULT_QIS = ("sex", "age", "race", "marital-status", "education", "native-country", "workclass", "salary-class")
ADULT_SENSITIVE = "occupation"
DEMO_SENSITIVE = "diagnosis"
K = 5
TARGET = 2.0  # with / without, per transformation


def out(line: str = "") -> None:
    print(line, flush=True)


@dataclass
class Setting:
    """One data set: its problem, space, sensitive column and the models to compare."""

    name: str
    problem: Problem
    space: TransformationSpace
    models: dict[str, Callable[[], PrivacyModel]]


def models(column: str, order: Sequence[str], hierarchy: dict[str, tuple[str, ...]],
           census: bool) -> dict[str, Callable[[], PrivacyModel]]:
    """The attribute models measured, by name (each beside k-anonymity)."""
    made: dict[str, Callable[[], PrivacyModel]] = {
        "distinct l=2": lambda: DistinctLDiversity(2, column),
        "entropy l=2": lambda: EntropyLDiversity(2, column),
        "recursive (c,l)=(3,2)": lambda: RecursiveCLDiversity(3, 2, column),
        "t=0.5 equal": lambda: TCloseness(0.5, column, "equal"),
        "t=0.5 ordered": lambda: TCloseness(0.5, column, "ordered", order=list(order)),
        "t=0.5 hierarchical": lambda: TCloseness(0.5, column, "hierarchical", hierarchy=hierarchy),
        "confidence 0.8": lambda: Confidence(0.8, column),
    }
    if census:
        made["presence 0.1"] = lambda: Presence(0.1)
    return made


def adult(folder: Path) -> Setting:
    """Adult with 8 QIs and ``occupation`` sensitive (its hierarchy for hierarchical t)."""
    text = adult_hierarchy_spec(ADULT, ADULT_QIS).replace('drop = ["occupation"]', f'sensitive = ["{ADULT_SENSITIVE}"]')
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "adult.toml"
    spec.write_text(text, encoding="utf-8")
    problem = Problem.from_spec(spec)
    rows = Hierarchy.read(ADULT / f"adult_hierarchy_{ADULT_SENSITIVE}.csv").rows
    order = list(rows)  # the hierarchy file's order: related occupations side by side
    return Setting("Adult", problem, TransformationSpace(problem),
                   models(ADULT_SENSITIVE, order, rows, census=problem.population is not None))


def demo(folder: Path) -> Setting:
    """The demo's cohort (publishable cut points, a census) with ``diagnosis`` sensitive."""
    build_demo(folder, 0)
    problem = Problem.from_spec(folder / PUBLISHABLE_FILE)
    values = [v for v in sensitive_cells(problem, DEMO_SENSITIVE).values if v is not None]
    hierarchy = {v: (v, v[:3], v[0]) for v in values}  # code → category → chapter (a root is added)
    return Setting("EHR demo", problem, TransformationSpace(problem),
                   models(DEMO_SENSITIVE, sorted(values), hierarchy, census=problem.population is not None))


def evaluate_all(setting: Setting, privacy: list[PrivacyModel], order: Sequence[Transformation],
                 limit: float) -> float:
    """Seconds to apply every transformation of ``order`` on a fresh evaluator (construction not timed)."""
    ev = TransformEvaluator(setting.problem, privacy, Loss(), limit, space=setting.space)
    start = time.perf_counter()
    for x in order:
        ev.apply(x)
    return time.perf_counter() - start


@dataclass
class Timing:
    model: str
    without: float  # seconds per transformation, k-anonymity alone
    with_: float  # seconds per transformation, k-anonymity and the model

    @property
    def ratio(self) -> float:
        return self.with_ / self.without

    @property
    def ok(self) -> bool:
        return self.ratio <= TARGET


def measure(setting: Setting, regime: str, order: Sequence[Transformation], runs: int, limit: float) -> list[Timing]:
    """Each model against k-anonymity alone, interleaved, min of ``runs`` (per transformation)."""
    n = len(order)
    out(f"  {setting.name}, {regime}, {limit:.0%} suppression: {n:,} transformations per run, min of {runs} runs, "
        f"per transformation")
    out(f"    {'model':<24}{'without ms':>12}{'with ms':>10}{'ratio':>8}   target <= {TARGET:g}x")
    rows = []
    for name, make in setting.models.items():
        without, with_ = [], []
        for _ in range(runs):
            without.append(evaluate_all(setting, [KAnonymity(K)], order, limit))
            with_.append(evaluate_all(setting, [KAnonymity(K), make()], order, limit))
        t = Timing(name, min(without) / n, min(with_) / n)
        rows.append(t)
        out(f"    {name:<24}{t.without * 1e3:>12.3f}{t.with_ * 1e3:>10.3f}{t.ratio:>7.2f}x   "
            f"{'PASS' if t.ok else 'MISS'}")
    return rows


def sensitive_load(setting: Setting, column: str, runs: int) -> tuple[float, float]:
    """Seconds of the sensitive cells' ``GROUP BY`` (min of ``runs``) and of the load's QI cells
    (``Problem.from_spec``, as measured once by the caller: returned 0 here, printed apart)."""
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        sensitive_cells(setting.problem, column)
        best = min(best, time.perf_counter() - start)
    return best, 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement (min taken), default 3")
    parser.add_argument("--sample", type=int, default=300, help="Adult transformations drawn for 'sample'")
    parser.add_argument("--seed", type=int, default=0, help="seed of the Adult sample")
    parser.add_argument("--quick", action="store_true", help="Adult's sample regime and the demo only, 2 runs")
    parser.add_argument("--limits", default="0,0.05",
                        help="suppression limits measured, comma-separated shares (default 0,0.05: with a limit, "
                             "k-anonymity alone rejects fewer transformations, so more are judged on values)")
    args = parser.parse_args(argv)
    runs = 2 if args.quick else max(1, args.runs)
    limits = [float(v) for v in args.limits.split(",") if v.strip()]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    out("deid-sql attribute-criteria benchmark: per-transformation evaluation with and without an attribute model")
    out(f"  python {sys.version.split()[0]}; {os.cpu_count()} CPUs, load average {load:.2f}; k = {K}, suppression "
        f"limits {', '.join(f'{v:.0%}' for v in limits)}, Loss; wall clock, min of {runs} runs, interleaved")
    results: list[tuple[str, str, Timing]] = []
    with tempfile.TemporaryDirectory(prefix="deid-attr-") as tmp:
        settings: list[tuple[Setting, str, list[tuple[str, list[Transformation]]]]] = []
        if (ADULT / "adult.csv").exists():
            start = time.perf_counter()
            a = adult(Path(tmp) / "adult")
            loaded = time.perf_counter() - start
            lattice = sorted(a.space, key=lambda x: (sum(x), x))
            rng = np.random.default_rng(args.seed)
            picked = rng.choice(len(lattice), size=min(args.sample, len(lattice)), replace=False)
            regimes = [(f"sample of {len(picked)} (seed {args.seed}), random order", [lattice[i] for i in picked])]
            if not args.quick:
                regimes.insert(0, ("sweep, bottom-up", lattice))
            settings.append((a, ADULT_SENSITIVE, regimes))
            out(f"  Adult: {a.problem.sample.total:,} records, {len(a.problem.sample):,} cells, QIs "
                f"{', '.join(a.space.names)}, heights {a.space.heights}, {a.space.size:,} transformations; "
                f"load {loaded:.2f} s")
        else:
            out(f"  the shared Adult data set is not at {ADULT}: Adult skipped")
        start = time.perf_counter()
        d = demo(Path(tmp) / "demo")
        loaded = time.perf_counter() - start
        lattice = sorted(d.space, key=lambda x: (sum(x), x))
        settings.append((d, DEMO_SENSITIVE, [("every transformation, bottom-up", lattice)]))
        out(f"  EHR demo: {d.problem.sample.total:,} patients, {len(d.problem.sample):,} cells, QIs "
            f"{', '.join(d.space.names)}, heights {d.space.heights}, {d.space.size:,} transformations; "
            f"build and load {loaded:.2f} s")
        out()
        for setting, column, regimes in settings:
            cells = sensitive_cells(setting.problem, column)
            seconds, _ = sensitive_load(setting, column, runs)
            out(f"== {setting.name}: {column!r} sensitive, {len(cells.values)} values; its cells "
                f"{len(cells.counts):,} (QI cells {len(setting.problem.sample):,}); the sensitive GROUP BY at "
                f"load {seconds:.3f} s ==")
            for limit in limits:
                for regime, order in regimes:
                    for t in measure(setting, regime, order, runs, limit):
                        results.append((setting.name, f"{regime.split(',')[0]} at {limit:.0%}", t))
            out()
            setting.problem.close()
    out("== Summary ==")
    missed = [r for r in results if not r[2].ok]
    worst = max(results, key=lambda r: r[2].ratio)
    out(f"  {len(results) - len(missed)} of {len(results)} measurements within {TARGET:g}x; worst "
        f"{worst[2].ratio:.2f}x ({worst[0]}, {worst[1].split(',')[0]}, {worst[2].model})"
        + ("" if not missed else "; MISS: " + "; ".join(f"{s} {r.split(',')[0]} {t.model} {t.ratio:.2f}x"
                                                          for s, r, t in missed)))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    out(f"  load average now {load:.2f}")
    out()
    out("== Figures ==")
    for name, regime, t in results:
        figure(f"attribute {name} {regime.split(',')[0]} {t.model} per transformation", t.with_)
    return 0


if __name__ == "__main__":
    sys.exit(main())
