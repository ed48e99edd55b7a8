"""``deid-sql frontier``: the risk–utility frontier by Random Chain or Sublattice Heuristic Search."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .. import progress
from ..jobs.frontier import DEFAULT_BUDGET, DEFAULT_THRESHOLD, SEARCHES, check_folder, run_frontier
from .options import (
    FiniteFloat,
    handles_errors,
    open_problem,
    reports_wall_time,
    risk_model_option,
    spec_argument,
)


@click.command()
@spec_argument
@click.option("--method", type=click.Choice(sorted(SEARCHES)), default="shs", show_default=True,
              help="Sublattice Heuristic Search or Random Chain Search.")
@click.option("--budget", "-n", type=int, default=DEFAULT_BUDGET, show_default=True,
              help="Policies to evaluate (chains count their length, skipped sublattices 2).")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@click.option("--th", "threshold", type=FiniteFloat(), default=DEFAULT_THRESHOLD, show_default=True,
              help="SHS: search a sublattice when its H (chance to update the frontier) exceeds this.")
@click.option("--out", "-o", "folder", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="Folder for frontier.csv, searched.csv, frontier.png, frontier.html and the checkpoint.")
@click.option("--resume", is_flag=True, help="Continue the run checkpointed in --out (same problem, method, seed).")
@click.option("--overwrite", is_flag=True, help="Start again in a folder that holds an earlier run.")
@click.option("--bits", is_flag=True, help="Also give each policy of the CSV files as its bit string (a last column).")
@risk_model_option(old_risk=True)
@handles_errors
@reports_wall_time
def frontier(spec: Path, method: str, budget: int, seed: int, threshold: float, folder: Path, resume: bool,
             overwrite: bool, bits: bool, risk_model: str | None) -> None:
    """Search the risk–utility frontier and write it with plots beside Safe Harbor and k-anonymity.

    Example: deid-sql frontier demo/demo.toml --method shs --budget 2000 --seed 0 --out frontier-run
    """
    check_folder(folder, resume, overwrite)  # before the data is read
    with open_problem(spec, risk_model) as problem:
        with progress.counting(f"{method}: evaluating up to {budget:,} policies", budget) as evaluated:
            result = run_frontier(problem, folder, method, budget, seed, threshold, resume, overwrite,
                                  progress=evaluated.advance, bits=bits)
    s = result.state
    took = result.seconds
    before = s.seconds - took["search"]
    click.echo(f"{s.method}: {s.evaluations:,} policies evaluated (seed {s.seed}); search {took['search']:.1f} s"
               + (f" in this run, {s.seconds:.1f} s with the runs it resumed" if before > 0.05 else ""))
    click.echo(f"  frontier size   {len(s.frontier):,}")
    if s.criteria is not None:
        why = ", ".join(f"{k} {n:,}" for k, n in s.why_infeasible().items())
        click.echo(f"  attribute criteria of [release] ({s.criteria}): {len(s.infeasible):,} of {s.evaluations:,} "
                   f"searched policies fail them and are not on the frontier" + (f" ({why})" if why else ""))
    click.echo(f"  area            {s.frontier.area():.5f} (under the stair-step, normalized R-U space)")
    if result.safe_harbor is not None:
        click.echo(f"  Safe Harbor     risk {result.safe_harbor.risk:.5g}, loss {result.safe_harbor.loss:.5g}; "
                   f"{len(result.dominating_safe_harbor):,} frontier policies strictly dominate it")
    for label, ir in result.improvement.items():
        click.echo(f"  {label:<15} frontier of {len(result.kanon[label])} generalizations; improvement rate "
                   f"IR = {ir:+.3f}")
    click.echo(f"wrote {', '.join(str(p) for p in result.written)}")
    click.echo(f"time: search {took['search']:.1f} s, Safe Harbor and k-anonymity frontiers {took['compare']:.1f} s, "
               f"writing the files {took['write']:.1f} s")
    if s.interrupted:
        click.echo(f"interrupted: checkpoint kept in {folder}; continue with --resume", err=True)
        sys.exit(130)
