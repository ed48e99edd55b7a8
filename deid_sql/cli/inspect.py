"""Commands that read: ``validate`` and ``evaluate``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import DeidError, SpecError
from ..problem import Problem
from .options import echo_json, handles_errors, open_problem, read_policy, risk_model_option, spec_argument


@click.command()
@spec_argument
def validate(spec: Path) -> None:
    """Check SPEC against its data and report every problem at once.

    Example: deid-sql validate study.toml
    """
    try:
        problem = Problem.from_spec(spec)
    except SpecError as e:
        for p in e.problems:
            click.echo(f"error: {p}", err=True)
        sys.exit(2)
    except DeidError as e:  # e.g. the engine failing to read the data: still one line, exit 2
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    with problem:
        s = problem.spec
        click.echo(f"ok: {s.path}")
        click.echo(f"  source     {s.source.describe()}: {problem.sample.total:,} records in "
                   f"{len(problem.sample):,} cells")
        if problem.population is not None and s.population is not None:
            click.echo(f"  population {s.population.describe()}: {problem.population.total:,} people in "
                       f"{len(problem.population):,} cells")
        else:
            click.echo("  population sample (group sizes from the sample itself)")
        for q, d in zip(s.qis, problem.domains):
            click.echo(f"  qi {q.name:<12} {d.kind:<8} {d.size:>6} values  {d.text(0)} … {d.text(d.size - 1)}")
        click.echo(f"  lattice    {problem.lattice.nbits} bits, gamma = {s.gamma:g}")


@click.command()
@spec_argument
@click.option("--policy", "-p", "policies", multiple=True, required=True, metavar="P",
              help="Policy text (repeat for several); see 'deid-sql compile --help'.")
@click.option("--path", "path", type=click.Choice(["fast", "sql"]), default="fast", show_default=True,
              help="Evaluate on the cell arrays (fast) or with the reference SQL query.")
@risk_model_option("--risk", "--risk-model")
@handles_errors
def evaluate(spec: Path, policies: tuple[str, ...], path: str, risk_model: str | None) -> None:
    """Print the risk and utility metrics of policies as JSON.

    Example: deid-sql evaluate study.toml --policy 'age:cuts=18,30,50,70|zip:top' --risk adversary
    """
    with open_problem(spec, risk_model) as problem:
        out = []
        for text in policies:
            policy = problem.policy(read_policy(text))
            metrics = problem.evaluate(policy, path=path)
            out.append({"policy": policy.text(), "readable": policy.readable(), **metrics.to_dict()})
        echo_json(out[0] if len(out) == 1 else out)
