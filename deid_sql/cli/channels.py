"""``deid-sql channels``: attribute disclosure control by channel expansion (seed 003)."""

from __future__ import annotations

from pathlib import Path

import click

from ..channels.job import ChannelJob, solve
from ..channels.spec import INTEGER_MODES
from ..channels.write import write_release
from ..compiler.compile import DIALECTS
from .options import format_option, handles_errors, renamed, reports_wall_time, spec_argument

SHOWN = 10  # risky input channels listed before "… and N more"


def _candidates(value: str | None) -> int | str | None:
    if value is None or value == "all":
        return value
    try:
        n = int(value)
    except ValueError:
        raise click.BadParameter("give a whole number >= 1 or 'all'", param_hint="--candidates") from None
    if n < 1:
        raise click.BadParameter("give a whole number >= 1 or 'all'", param_hint="--candidates")
    return n


@click.command()
@spec_argument
@click.option("--out", "-o", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the release: .parquet or .csv (composition beside it as NAME.channels.csv) or .duckdb "
                   "(table --table, composition table TABLE_channels).")
@format_option
@click.option("--table", default=None, metavar="NAME",
              help="Table name inside a .duckdb output (default released); without --out, the table to create "
                   "inside a PostgreSQL or Spark engine.")
@click.option("--view", default=None, metavar="NAME",
              help="Create a view of the release (with --db); composition in VIEW_channels.")
@click.option("--db", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="DuckDB file for --view (created if missing).")
@click.option("--candidates", "candidates", default=None, metavar="N|all",
              help="Output channels to consider, the all-channel one included (default: the spec's, else up to "
                   "2,048); 'all' enumerates every one with a safe input channel (small problems).")
@click.option("--seed", type=click.IntRange(min=0), default=None,
              help="Seed for candidate generation and the release's hash order (default: the spec's, else 0).")
@click.option("--integer", type=click.Choice(INTEGER_MODES), default=None,
              help="Whole subjects from HiGHS's MILP: always, never (round the LP), or auto (small instances).")
@click.option("--figures", "report", type=click.Path(path_type=Path, dir_okay=False), default=None,
              metavar="FILE.json", help="Also write the figures printed here as JSON.")
@renamed("--report", "--figures", "report", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--sql", "dialect", default=None, metavar="DIALECT",
              help=f"Also print the release SELECT in a SQL dialect ({', '.join(DIALECTS)}).")
@click.option("--source-table", default=None, help="Source table name in the --sql text (non-DuckDB dialects).")
@click.option("--overwrite", is_flag=True, help="Replace existing outputs.")
@handles_errors
@reports_wall_time
def channels(spec: Path, out: Path | None, fmt: str | None, table: str | None, view: str | None, db: Path | None,
             candidates: str | None, seed: int | None, integer: str | None, report: Path | None,
             dialect: str | None, source_table: str | None, overwrite: bool) -> None:
    """Release identities with confidentiality-related values pooled into safe output channels.

    Without --out or --view it plans and checks the release and prints the figures.

    Example: deid-sql channels table1/table1.toml --out channels.parquet --candidates all --seed 7
    """
    with solve(spec, _candidates(candidates), seed, integer) as job:
        _print_plan(job)
        if dialect is not None:
            click.echo(job.compile(dialect, source_table) + ";")
        written = write_release(job, out, fmt, table, view, db, report, overwrite)
        c = written.check
        bound = "" if c.worst_b is None else f", max Σc·P(v|w) − b = {c.worst_b:.4g}"
        click.echo(f"check: (6) and (8) hold on the released rows ({c.how}): max P(v|w) − u = {c.worst_u:.4g}{bound}; "
                   f"realized share of a value in its output channel, max − u = {c.realized_excess:.4g} (information)")
        for line in written.lines:
            click.echo(line)
        click.echo(f"time: {sum(job.seconds.values()):.2f} s solving ({_times(job)})")


def _print_plan(job: ChannelJob) -> None:
    inputs, classes, s = job.inputs, job.classes, job.settings
    m = inputs.total
    click.echo(f"source {job.spec.source.describe()}: {m:,} subjects in {len(inputs.keys):,} input channels; "
               f"{s.confidential!r} has {len(inputs.values) - 1} values beside {s.none!r}")
    risky = [int(r) for r in sorted(classes.risky.nonzero()[0], key=lambda r: -inputs.sizes[r])]
    share = inputs.sizes[classes.risky].sum() / m
    click.echo(f"risky input channels: {len(risky):,} of {len(inputs.keys):,} ({share:.1%} of subjects)")
    for r in risky[:SHOWN]:
        click.echo(f"  {inputs.describe(r)}  {int(inputs.sizes[r]):,} subjects  {_why(job, r)}")
    if len(risky) > SHOWN:
        click.echo(f"  … and {len(risky) - SHOWN:,} more")
    outputs = job.program.outputs
    click.echo(f"candidates: {len(outputs):,} output channels; program: {job.program.n_vars:,} variables, "
               f"{job.program.n_constraints:,} constraints")
    if outputs.dropped:
        click.echo("  dropped listed output channels without a safe input channel (eq. 5): "
                   + "; ".join(outputs.dropped))
    click.echo(f"LP optimum: Ψ = {job.lp.objective:,.6g}, Ω = {job.lp.objective / m ** 2:.4%} ({job.lp.seconds:.2f} s)")
    w = job.whole
    used = int(w.used.sum())
    click.echo(f"release ({job.route}): Ψ = {w.objective:,.0f}, Ω = {w.omega:.4%}; {used:,} of {len(outputs):,} "
               f"output channels used ({1 - used / len(outputs):.1%} unused); {w.all_channel_share:.2%} of subjects in "
               f"the all-channel output")
    click.echo(f"  {job.repairs.describe()}")


def _why(job: ChannelJob, r: int) -> str:
    p = job.inputs.conditional[r]
    parts = ["P({!r}) = {} > {}".format(v, *_apart(p[k], job.rule.u[k])) for k, v in enumerate(job.inputs.values)
             if k and job.classes.risky_for[r, k - 1]]
    if job.classes.heavy[r] and job.rule.b is not None:
        parts.append("Σc·P = {} > b = {}".format(*_apart(job.classes.weighted[r], job.rule.b)))
    return "; ".join(parts)


def _apart(a: float, b: float) -> tuple[str, str]:
    """Both numbers with as few digits as show them different (0.1201 > 0.12, not 0.12 > 0.12)."""
    for digits in range(3, 13):
        x, y = f"{a:.{digits}g}", f"{b:.{digits}g}"
        if x != y:
            return x, y
    return f"{a!r}", f"{b!r}"


def _times(job: ChannelJob) -> str:
    return ", ".join(f"{k} {v:.2f} s" for k, v in job.seconds.items())
