"""Policies as code: ``policy save``, ``apply`` and ``check`` (thin wrappers over ``deid_sql.policyfile``)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..policyfile import DriftReport, MovedGroup, apply_policy, check_policy, save_policy
from ..policyfile.format import MEASURE
from .options import echo_json, handles_errors, policy_option, read_policy, spec_argument

policy_file_argument = click.argument("policy_file", type=click.Path(path_type=Path, dir_okay=False))
source_option = click.option("--source", "-s", required=True, type=click.Path(path_type=Path, dir_okay=False),
                             help="The new batch: a .csv, .parquet or .duckdb file (with --table).")
table_option = click.option("--table", default=None, help="The batch's table inside a .duckdb --source.")


@click.group(name="policy")
def policy_group() -> None:
    """Save a chosen policy to a file that 'deid-sql apply' and 'deid-sql check' re-use on new batches.

    Example: deid-sql policy save study.toml --policy 'age:cuts=18,65|zip:top' --out policy.json
    """


@policy_group.command(name="save")
@spec_argument
@policy_option
@click.option("--out", "-o", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="The policy file to write (JSON).")
@click.option("--threshold", type=float, default=None, metavar="R",
              help=f"Drift threshold on {MEASURE} (expected re-identifications per record) for 'deid-sql check'; "
                   "default: the figure of the data the policy is saved on.")
@click.option("--fallback", default=None, metavar="LABEL",
              help="Label for values of later batches outside the saved domains (default: refuse them).")
@click.option("--overwrite", is_flag=True, help="Replace an existing policy file.")
@handles_errors
def save(spec: Path, policy: str, out: Path, threshold: float | None, fallback: str | None, overwrite: bool) -> None:
    """Save a policy with its QI domains, schema, spec hash, figures and drift threshold.

    Example: deid-sql policy save study.toml --policy 'age:cuts=18,65|zip:top' --out policy.json --fallback other
    """
    saved = save_policy(spec, read_policy(policy), out, threshold, fallback, overwrite)
    f = saved.figures
    click.echo(f"saved {out}: {saved.readable}")
    click.echo(f"  {f.records:,} records in {f.groups:,} groups, k = {f.k}, risk {saved.metrics['risk']:.6g}, "
               f"loss {saved.metrics['loss']:.6g}")
    click.echo(f"  {MEASURE} {f.mean_record_risk:.6g}; drift threshold {saved.threshold:.6g} ({saved.threshold_from})"
               + (f"; fallback label {saved.fallback!r}" if saved.fallback is not None else ""))


@click.command(name="apply")
@policy_file_argument
@source_option
@table_option
@click.option("--out", "-o", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the release: .parquet, .csv or .duckdb (table --out-table).")
@click.option("--out-table", default=None, help="Table name inside a .duckdb --out (default deidentified).")
@click.option("--view", default=None, help="Create a view of the release instead (with --db).")
@click.option("--db", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="DuckDB file for --view (created if missing).")
@click.option("--overwrite", is_flag=True, help="Replace an existing output file, table or view.")
@handles_errors
def apply_(policy_file: Path, source: Path, table: str | None, out: Path | None, out_table: str | None,
           view: str | None, db: Path | None, overwrite: bool) -> None:
    """Release a new batch with a saved policy (atomic, row count checked); no original data needed.

    Example: deid-sql apply policy.json --source batch-2025-06.parquet --out release-2025-06.parquet
    """
    done = apply_policy(policy_file, source, table, out, view, db, out_table, overwrite)
    if done.written is not None:
        w = done.written
        where = f"{w.path}" + (f" table {w.table}" if w.table else "")
        click.echo(f"wrote {w.rows:,} rows to {where} ({w.format})")
    else:
        click.echo(f"created view {done.view} in {done.db} over {done.batch} ({done.records:,} rows now)")
    if done.outside.records:
        click.echo(f"fallback: {done.outside.records:,} record(s) had values outside the saved domain and were "
                   f"released as {done.policy.fallback!r} ({done.outside.summary()})")


@click.command(name="check")
@policy_file_argument
@source_option
@table_option
@click.option("--json", "as_json", is_flag=True, help="Print the figures and groups as JSON.")
@handles_errors
def check(policy_file: Path, source: Path, table: str | None, as_json: bool) -> None:
    """Recompute a saved policy's risk on a new batch; exit 1 when it exceeds the saved threshold.

    Example: deid-sql check policy.json --source batch-2025-06.parquet
    """
    report = check_policy(policy_file, source, table)
    if as_json:
        echo_json(report.to_dict())
    else:
        _print_report(report)
    if report.exceeded:
        sys.exit(1)


_FIGURES = (("risk (normalized)", "risk", ".6g"), ("expected re-identifications", "expected_reidentifications", ",.6g"),
            ("max record risk", "max_record_risk", ".6g"), ("k (smallest group)", "k", ","),
            ("groups", "groups", ","), ("sample-unique records", "sample_unique_records", ","),
            ("records", "records", ","))


def _print_report(r: DriftReport) -> None:
    pf = r.policy
    click.echo(f"policy  {pf.path}: {pf.readable}")
    click.echo(f"batch   {r.batch}: {r.new.records:,} records (saved on {pf.source}: {r.saved.records:,})")
    if r.outside.records:
        click.echo(f"fallback {r.outside.records:,} record(s) outside the saved domain, released as "
                   f"{pf.fallback!r} ({r.outside.summary()})")
    click.echo(f"{MEASURE} (expected re-identifications per record): saved {r.saved.mean_record_risk:.6g}, "
               f"new {r.new.mean_record_risk:.6g}, threshold {r.threshold:.6g} ({pf.threshold_from})")
    for label, key, fmt in _FIGURES:
        click.echo(f"  {label:<28} {format(getattr(r.saved, key), fmt):>14} → {format(getattr(r.new, key), fmt)}")
    if r.moved:
        click.echo(f"groups that moved: {r.rose:,} with a higher record risk, {r.below_k:,} smaller than the saved "
                   f"k = {r.saved.k}, {r.new_groups:,} not in the saved release, {r.gone:,} gone; "
                   f"{len(r.moved)} shown, largest rise first:")
        for g in r.moved:
            click.echo("  " + _group_line(pf.names, g))
    if r.exceeded:
        click.echo(f"drift: {MEASURE} {r.new.mean_record_risk:.6g} exceeds the threshold {r.threshold:.6g}")
    else:
        click.echo(f"ok: {MEASURE} {r.new.mean_record_risk:.6g} is within the threshold {r.threshold:.6g}")


def _group_line(names: tuple[str, ...], g: MovedGroup) -> str:
    labels = ", ".join(f"{n}={v}" for n, v in zip(names, g.labels))
    before = "new group" if g.records_before is None else f"{g.records_before:,}"
    parts = [f"records {before} → {g.records_after:,}"]
    if g.population_after is not None:
        pop = "-" if g.population_before is None else f"{g.population_before:,.0f}"
        parts.append(f"population {pop} → {g.population_after:,.0f}")
    risk = "-" if g.risk_before is None else f"{g.risk_before:.4g}"
    parts.append(f"record risk {risk} → {g.risk_after:.4g}")
    return f"[{labels}] " + ", ".join(parts) + (" (below the saved k)" if g.below_k else "")
