"""Risk without a census on Adult: every estimator's population uniques and time, and chain speed.

Adult (ARX's adult.csv, 30,162 records, 9 QIs with ARX's hierarchies) is taken as a sample of a
population of N = 1,000,000 (f ≈ 0.03).  Printed:

1. for the original data and for random policies of the lattice: the population uniques by
   Pitman, Zayatz, SNB and Dankar's rule, Benedetti–Franconi's expected re-identifications, and
   the time each takes on the policy's histogram (target: all of them together ≤ 0.5 s per policy);
2. chain evaluation (``ChainEvaluator``) with the Benedetti–Franconi model, the one no-census model
   that is monotone and so allowed in the searches that walk chains, against the population model
   1/g measured in the same run (target: ≥ 200 policies/s), and the check that the chain's figures
   equal the per-policy evaluation.

Run: python bench/no_census.py   (needs ../shared/data/adult relative to the repository root)
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from deid_sql.evaluate.chain import ChainEvaluator
from deid_sql.fixtures import adult_hierarchy_spec
from deid_sql.nocensus.estimators import MODELS, EstimationError, Histogram, population_uniques
from deid_sql.nocensus.individual import benedetti_franconi
from deid_sql.problem import Problem

ADULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult"
ATTRIBUTES = ("age", "education", "marital-status", "native-country", "occupation", "race", "salary-class",
              "sex", "workclass")
POPULATION = 1_000_000
POLICIES = 20  # the original data and random policies
PER_POLICY_TARGET_S = 0.5
CHAIN_TARGET = 200.0
CHAINS = 6


def out(line: str = "") -> None:
    print(line, flush=True)


def spec(folder: Path) -> Path:
    text = adult_hierarchy_spec(ADULT, ATTRIBUTES).replace('population = "sample"',
                                                            f"population = {{ size = {POPULATION} }}")
    path = folder / "adult-no-census.toml"
    path.write_text(text, encoding="utf-8")
    return path


def estimates(m: np.ndarray) -> tuple[dict[str, str], dict[str, float]]:
    """Each model's figure on the histogram of ``m`` and its seconds."""
    h = Histogram.of(m)
    figures: dict[str, str] = {}
    seconds: dict[str, float] = {}
    for model in MODELS:
        t0 = time.perf_counter()
        try:
            e = population_uniques(model, h, POPULATION)
            figures[model] = f"{e.uniques:,.0f}" + (f" {e.model[0].upper()}" if model == "dankar" else "")
        except EstimationError as exc:
            figures[model] = f"failed: {exc}"
        seconds[model] = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = benedetti_franconi(m, np.full(m.shape, h.n / POPULATION))
    figures["benedetti-franconi"] = f"{float((m * r).sum()):,.1f} re-ids"
    seconds["benedetti-franconi"] = time.perf_counter() - t0
    return figures, seconds


def part_estimators(problem: Problem, rng: np.random.Generator) -> bool:
    lattice = problem.lattice
    policies = [lattice.bottom()] + [list(lattice.random_chain(lattice.top(), lattice.bottom(), rng).policies())[
        int(rng.integers(1, lattice.nbits))] for _ in range(POLICIES - 1)]
    totals = []
    out("  population uniques (Dankar's pick: P = Pitman, Z = Zayatz, S = SNB); Benedetti-Franconi: expected "
        "re-identifications")
    out(f"  {'policy':<10}{'sample uniques':>15}  " + "  ".join(f"{m:>24}" for m in (*MODELS, "benedetti-franconi")))
    for i, policy in enumerate(policies):
        m, _, _ = problem._fast_path.groups(policy.recoding())
        t0 = time.perf_counter()
        figures, seconds = estimates(m)
        totals.append(time.perf_counter() - t0)
        if i < 6:
            label = "original" if i == 0 else f"random {i}"
            cells = "  ".join(f"{figures[k][:14]:>14} {seconds[k] * 1000:6.1f} ms" for k in (*MODELS,
                                                                                               "benedetti-franconi"))
            out(f"  {label:<10}{int((m == 1).sum()):>15,}  {cells}")
    worst, mean = max(totals), sum(totals) / len(totals)
    ok = worst <= PER_POLICY_TARGET_S
    out(f"  all estimators together over {len(policies)} policies: mean {mean * 1000:.1f} ms, worst "
        f"{worst * 1000:.1f} ms per policy (target <= {PER_POLICY_TARGET_S * 1000:.0f} ms): {'PASS' if ok else 'FAIL'}")
    return ok


def chain_rate(problem: Problem, chains: list) -> tuple[float, list[tuple[np.ndarray, np.ndarray]]]:
    evaluator = ChainEvaluator(problem.lattice, problem.fast.path, problem.fast.normalizers)
    evaluator.evaluate_chain(chains[0])  # warm-up, untimed
    t0 = time.perf_counter()
    results = [evaluator.evaluate_chain(c) for c in chains]
    return sum(len(c) for c in chains) / (time.perf_counter() - t0), results


def part_chains(path: Path) -> bool:
    with Problem.from_spec(path, risk="population", cache=False) as baseline, \
            Problem.from_spec(path, risk="benedetti-franconi", cache=False) as bf:
        bf.require_monotone_risk("chain evaluation")  # it is allowed: monotone without weights
        rng = np.random.default_rng(7)
        lattice = bf.lattice
        chains = [lattice.random_chain(lattice.top(), lattice.bottom(), rng) for _ in range(CHAINS)]
        base_rate, _ = chain_rate(baseline, chains)
        rate, results = chain_rate(bf, chains)
        policies = sum(len(c) for c in chains)
        out(f"  chain evaluation, {CHAINS} maximal chains ({policies:,} policies): population 1/g "
            f"{base_rate:,.0f} policies/s (baseline), benedetti-franconi {rate:,.0f} policies/s "
            f"({rate / base_rate:.2f}x the baseline; target >= {CHAIN_TARGET:,.0f}/s): "
            f"{'PASS' if rate >= CHAIN_TARGET else 'FAIL'}")
        worst = 0.0
        fresh = bf.fast.fork()
        for chain, (risks, _) in zip(chains, results):
            for j in np.linspace(0, len(chain) - 1, 8).astype(int):
                worst = max(worst, abs(fresh.evaluate(list(chain.policies())[j]).risk - float(risks[j])))
        out(f"  check: max |chain - per-policy| risk over 48 of those policies: {worst:.1e}")
        return rate >= CHAIN_TARGET and worst < 1e-9


def main() -> int:
    if not (ADULT / "adult.csv").exists():
        out(f"the Adult data is not in {ADULT}")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        path = spec(Path(tmp))
        t0 = time.perf_counter()
        with Problem.from_spec(path, risk="benedetti-franconi", cache=False) as problem:
            out(f"Adult: {problem.sample.total:,} records, {len(problem.spec.qis)} QIs, {len(problem.sample):,} cells, "
                f"as a sample of N = {POPULATION:,} (f = {problem.sample.total / POPULATION:.4f}); loaded in "
                f"{time.perf_counter() - t0:.1f} s\n")
            out("1. population uniques by every estimator (time on the policy's histogram)")
            ok = part_estimators(problem, np.random.default_rng(3))
        out("\n2. chain evaluation with a no-census model")
        ok = part_chains(path) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
