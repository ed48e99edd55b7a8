"""``deid-sql adversary``: the re-identification risk of a release under seed 002's
economic attacker, solved exactly, with its thresholds and a deterrence sweep."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import numpy as np

from ..adversary.assess import Assessment, assess
from ..adversary.params import SCENARIOS, AdversaryParams
from ..adversary.risk import Thresholds, thresholds
from ..adversary.solvers import SOLVERS
from ..domains.recoding import Recoding
from ..errors import OutputError
from ..problem import Problem
from ..release.unit import RECORDS, Unit
from .options import FiniteFloat, handles_errors, read_policy, reports_wall_time, spec_argument

# CLI option → AdversaryParams field, type, help
PARAMETERS: tuple[tuple[str, str, Any, str], ...] = (
    ("--access-cost", "access_cost", FiniteFloat(), "C_d: cost of obtaining the external dataset ($)."),
    ("--link-cost", "link_cost", FiniteFloat(), "C_l: cost of linking a record to it ($)."),
    ("--exploit-cost", "exploit_cost", FiniteFloat(), "C_e: cost of exploiting one candidate ($)."),
    ("--gain", "gain", FiniteFloat(), "G: the adversary's gain from a re-identification ($)."),
    ("--penalty", "penalty", FiniteFloat(), "C_p: the penalty when an exploit is detected ($)."),
    ("--max-penalties", "max_penalties", str, "n_f: penalties levied at most (an integer or 'unbounded')."),
    ("--h0", "h0", FiniteFloat(), "Detection: sigmoid(h0) for the first exploit (-4.59 ≈ 0.01)."),
    ("--h1", "h1", FiniteFloat(), "Detection growth per earlier exploit (0 = constant)."),
    ("--prior", "prior", FiniteFloat(), "Share of the population in the external dataset (0, 1]."),
    ("--discount", "discount", FiniteFloat(), "Discount per step (0, 1]; 1 = none."),
    ("--external-size", "external_size", int, "n: people in the external dataset (unknown-group belief)."),
    ("--loss", "loss", FiniteFloat(), "The publisher's loss per re-identification (risk = P_reid × loss)."),
)
BUCKETS = ((0.0, 0.0, "0"), (0.0, 0.01, "(0, 0.01]"), (0.01, 0.1, "(0.01, 0.1]"), (0.1, 0.5, "(0.1, 0.5]"),
           (0.5, np.inf, "> 0.5"))


def adversary_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """One option per adversary parameter; each overrides the spec's [adversary] value."""
    for flag, name, kind, text in reversed(PARAMETERS):
        fn = click.option(flag, name, type=kind, default=None, help=text)(fn)
    return fn


def parameters(spec_params: AdversaryParams, scenario: str | None, given: dict[str, Any]) -> AdversaryParams:
    raw = spec_params.to_dict()
    raw.update({k: v for k, v in given.items() if v is not None})
    if isinstance(raw.get("max_penalties"), str) and raw["max_penalties"].isdigit():
        raw["max_penalties"] = int(raw["max_penalties"])
    if scenario is not None:
        raw["scenario"] = scenario
    return AdversaryParams.from_mapping(raw, where="the adversary parameters")


def resolve(problem: Problem, text: str) -> tuple[str, Recoding]:
    if text == "safe-harbor":
        from ..release.safe_harbor import safe_harbor

        return "Safe Harbor", safe_harbor(problem).recoding
    policy = problem.policy(read_policy(text))
    label = policy.text()
    if len(label) > 160:  # long bit-strings say little: show the readable rules instead
        readable = policy.readable()
        label = readable if len(readable) <= 160 else readable[:157] + "…"
    return label, policy.recoding()


@click.command(name="adversary")
@spec_argument
@click.option("--policy", "-p", "policy_text", default="bottom", show_default=True, metavar="P",
              help="The release to assess: a policy text, 'bottom' (the data as is) or 'safe-harbor'.")
@click.option("--scenario", type=click.Choice(SCENARIOS), default=None,
              help="Known group (the attacker knows its group size) or unknown (a Binomial belief about it). "
                   "Default: the spec's [adversary] scenario, else known.")
@click.option("--solver", type=click.Choice(SOLVERS), default="dp", show_default=True,
              help="Dynamic programming (exact, fast), the Two-Level LP or the plain LP (HiGHS).")
@adversary_options
@click.option("--sensitivity", type=click.Path(path_type=Path, dir_okay=False), default=None, metavar="FILE.csv",
              help="Also sweep access cost, exploit cost, penalty and detection one at a time: "
                   "writes FILE.csv and the plot of the thresholds as FILE.png.")
@click.option("--overwrite", is_flag=True, help="Replace existing --sensitivity outputs.")
@handles_errors
@reports_wall_time
def adversary(spec: Path, policy_text: str, scenario: str | None, solver: str, sensitivity: Path | None,
              overwrite: bool, **given: Any) -> None:
    """Risk of a release under an economic attacker who stops when attacking no longer pays (a Markov decision
    process; 'deid-sql help adversary').

    Example: deid-sql adversary demo/demo.toml --policy safe-harbor --scenario unknown --external-size 500000
    """
    if sensitivity is not None:
        _check_outputs(sensitivity, overwrite)
    problem = Problem.from_spec(spec)
    try:
        params = parameters(problem.spec.feature("adversary"), scenario, given)
        label, recoding = resolve(problem, policy_text)
        m, _, g = problem.fast.path.groups(recoding)
        result = assess(params, m, g, problem.population_total, solver)
        unit = Unit.of(problem.spec.person)  # the cells count persons with [person]
    finally:
        problem.close()
    _report(label, result, unit)
    if sensitivity is not None:
        from ..adversary.sensitivity import plot, sweep, write_csv

        rows = sweep(params.with_changes(scenario="known"))
        write_csv(rows, sensitivity, overwrite=True)
        plot(rows, sensitivity.with_suffix(".png"), overwrite=True)
        click.echo(f"sensitivity: {len(rows)} settings → {sensitivity} and {sensitivity.with_suffix('.png')}")


def _check_outputs(path: Path, overwrite: bool) -> None:
    if path.suffix.lower() != ".csv":
        raise OutputError(f"--sensitivity {path} must end in .csv (the plot goes beside it as .png)")
    for target in (path, path.with_suffix(".png")):
        if target.exists() and not overwrite:
            raise OutputError(f"output {target} already exists; pass --overwrite to replace it")
    if not path.parent.exists():
        raise OutputError(f"output folder {path.parent} does not exist; create it first")


def _planned_exploits(t: Thresholds) -> str:
    """The X:exploits pairs for k ≤ X < k′ once D_e is held; the sizes from k′ on are said apart: an
    attacker who still has to buy the external data does not attack them at all (k′ is where
    buying it stops paying), so their exploits assume the data is already bought."""
    pairs = list(zip(range(t.k, t.k_prime_sunk), t.planned[t.k - 1:].tolist()))
    paying = ", ".join(f"{x}:{n}" for x, n in pairs if x < t.k_prime)
    sunk = ", ".join(f"{x}:{n}" for x, n in pairs if x >= t.k_prime)
    if not sunk:
        return paying
    return (f"{paying}; " if paying else "") + (f"at k′ = {t.k_prime} and above, assuming the external data is "
                                                 f"already bought: {sunk}")


def _report(label: str, a: Assessment, unit: Unit = RECORDS) -> None:
    p = a.params
    risk = np.repeat(a.record_risk, a.m.astype(np.int64))
    click.echo(f"policy      {label}")
    click.echo(f"adversary   {p.scenario} group; {p.describe()}"
               + (f"; external dataset {a.params.external_size:,}" if p.external_size else ""))
    click.echo(f"solver      {a.solver}: {a.distinct:,} distinct group sizes solved in {a.seconds:.3f} s"
               + (f" ({a.clusters:,} sink clusters)" if a.solver != "lp" else f" (up to {a.clusters:,} states)"))
    t = thresholds(p.with_changes(scenario="known"))
    click.echo(f"thresholds  k = {t.k} (every candidate exploited below it), k′ = {t.k_prime} (no attack at or "
               f"above it), k′ = {t.k_prime_sunk} once D_e is held — external group sizes")
    if t.k < t.k_prime_sunk:  # Fig. 3.7: partly exploited groups
        click.echo(f"exploits    planned per external group size (X:exploits, all failing unnoticed): "
                   f"{_planned_exploits(t)}")
    click.echo(f"{unit.many:<11} {a.records:,}; at risk (P_reid > 0): {a.records_at_risk:,} "
               f"({a.records_at_risk / a.records:.1%})")
    click.echo(f"{unit.risk} distribution")
    for lo, hi, name in BUCKETS:
        n = int(np.count_nonzero(risk == 0)) if hi == 0 else int(np.count_nonzero((risk > lo) & (risk <= hi)))
        click.echo(f"  {name:<12} {n:>10,}  {n / risk.size:7.2%}")
    click.echo(f"  mean {risk.mean():.5g}  median {np.median(risk):.5g}  95th percentile "
               f"{np.percentile(risk, 95):.5g}  max {risk.max():.5g}")
    base = np.repeat(a.baseline(), a.m.astype(np.int64))
    pop = np.repeat(a.population_risk(), a.m.astype(np.int64))
    click.echo(f"dataset risk (mean {unit.risk})")
    click.echo(f"  adversary MDP        {a.dataset_risk:.5g}")
    click.echo(f"  baseline (eq. 3.7)   {base.mean():.5g}  ({int(np.count_nonzero(base > 0)):,} {unit.many} attacked)")
    click.echo(f"  population 1/g       {pop.mean():.5g}")
