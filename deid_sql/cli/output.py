"""Commands that produce SQL or data: ``compile``, ``materialize`` and ``view``."""

from __future__ import annotations

from pathlib import Path

import click

from ..compiler.compile import DIALECTS
from ..errors import OutputError
from ..release.output import FORMATS, compile_release, create_view, materialize, output_format
from ..release.records import NO_RECORD, write_compiled
from ..release.sidecar import read_sidecar, sidecar_path
from ..release.targets import file, folder, release_targets, set_tables
from ..spec.file import Spec
from .options import (
    accept_risk_option,
    echo_release,
    format_option,
    handles_errors,
    open_problem,
    policy_option,
    release_plan,
    renamed,
    spec_argument,
    suppress_option,
)
from .report import (
    add_set,
    check_report_outside,
    finish_release_report,
    prepare_release_report,
    report_option,
    written_files,
)


@click.command(name="compile")
@spec_argument
@policy_option
@click.option("--dialect", "-d", default="duckdb", show_default=True,
              help=f"Target SQL dialect ({', '.join(DIALECTS)}, or any sqlglot dialect).")
@click.option("--source-table", "table", default=None, metavar="NAME",
              help="The source table's name in the SQL (default: the file in place for DuckDB, else the spec's "
                   "table or 'source').")
@renamed("--table", "--source-table", "table", type=str)
@click.option("--out", "-o", type=click.Path(path_type=Path, dir_okay=False), default=None, metavar="FILE.sql",
              help="Write the SQL to FILE.sql with its record FILE.sql.release.json (both or neither) instead "
                   "of printing it.")
@click.option("--overwrite", is_flag=True, help="Replace an existing --out file and its record (and --report).")
@suppress_option
@accept_risk_option
@report_option
@handles_errors
def compile_(spec: Path, policy: str | None, levels: str | None, dialect: str, table: str | None, out: Path | None,
             overwrite: bool, suppress_below: int | None, accept_risk: str | None, report: Path | None) -> None:
    """Print the SELECT that applies a policy, in any SQL dialect (or write it with --out).

    The SQL releases data wherever it runs, so it is judged like a release first: only declared
    columns, values outside a QI's domain as *, and the rows it gives on the spec's data checked
    against the spec's release criteria (what was checked goes to stderr; stdout is only the SQL).
    With --out FILE.sql the SQL is kept with its record, FILE.sql.release.json (what was compiled,
    the policy, the columns, the figures on the spec's source, the verdict), as every release is;
    printed SQL has no record unless --report writes one.

    Example: deid-sql compile demo/demo.toml --policy 'age:cuts=18,65|race:top' -d postgres --source-table patients
    """
    early = release_targets(report=report, replace=overwrite) + file(out, overwrite, sidecar=True)
    with open_problem(spec, targets=early) as problem:
        plan = release_plan(problem, policy, levels, suppress_below)
        released = f"SQL for {dialect} " + (f"in {out}" if out is not None else "(printed by compile)")
        pending = prepare_release_report(problem, plan, report, overwrite, accept_risk, released, out)
        if out is not None:
            _, judged = write_compiled(problem, plan, out, dialect, table, overwrite, accept_risk=accept_risk)
            click.echo(f"wrote the SQL for {dialect} to {out}")
            echo_release(judged)
            finish_release_report(pending, [out, sidecar_path(out)], figures=judged.figures)
            return
        sql, judged = compile_release(problem, plan, dialect, table, accept_risk=accept_risk)
        click.echo(sql + ";")
        echo_release(judged, err=True)
        finish_release_report(pending, [], err=True)
        click.echo(f"record: the report {report} (no sidecar: compile to a file with --out FILE.sql to keep "
                   f"FILE.sql.release.json beside it)" if report is not None else NO_RECORD, err=True)


@click.command(name="materialize")
@spec_argument
@policy_option
@click.option("--out", "-o", type=click.Path(path_type=Path), default=None,
              help="Output file: .parquet, .csv or .duckdb (leave out with --table to write inside a "
                   "PostgreSQL or Spark engine); a folder when the spec links tables ([[table]]): one file per "
                   "table and one release.json.")
@format_option
@click.option("--table", default=None, metavar="NAME",
              help="Table name inside a .duckdb output (default deidentified), or the table to create in the engine "
                   "when --out is left out.")
@click.option("--tables", "tables", default=None, metavar="PREFIX",
              help="A spec that links tables ([[table]]): write the set as tables PREFIX + each release name "
                   "and the record table PREFIX + release, all or none, inside the engine (or with --out "
                   "FILE.duckdb inside that file); PREFIX is a schema (release.) or a name prefix (deid_).")
@click.option("--overwrite", is_flag=True, help="Replace an existing output file or table (and --report).")
@suppress_option
@accept_risk_option
@report_option
@handles_errors
def materialize_(spec: Path, policy: str | None, levels: str | None, out: Path | None, fmt: str | None,
                 table: str | None, tables: str | None, overwrite: bool, suppress_below: int | None,
                 accept_risk: str | None, report: Path | None) -> None:
    """Write the de-identified table (atomic; row count checked against the source).

    Only the columns the spec declares leave, and the rows written are checked against the spec's
    release criteria before anyone can see them (without criteria, the original data is refused).
    A record of the release, OUT.release.json (or table TABLE__release), is written with it, and
    with --report FILE.html the report a reviewer signs (written after the release; if it cannot be,
    the release file and its record are removed again).

    A spec that links tables to its source ([[table]]) is released as one set, judged once: --out
    FOLDER writes one file per table and one record, release.json; --tables PREFIX writes one table
    per table and the record table PREFIX + release, all or none, in the engine or a .duckdb --out.

    Example: deid-sql materialize demo/demo.toml --policy 'age:cuts=18,65|race:top' --out release.parquet
    """
    parsed = Spec.read(spec)
    if parsed.tables:
        _materialize_set(parsed, policy, levels, out, fmt, table, tables, overwrite, suppress_below, accept_risk,
                         report)
        return
    if tables is not None:
        raise OutputError(f"--tables writes a set of linked tables, and {spec} declares no [[table]]: name the one "
                          f"table with --table NAME")
    early = release_targets(out=out, fmt=fmt, table=table, report=report, replace=overwrite)
    with open_problem(spec, targets=early) as problem:
        plan = release_plan(problem, policy, levels, suppress_below)
        pending = None
        if report is not None:
            kind = output_format(out, fmt) if out is not None else None
            where = (f"table {table} in the {problem.spec.backend.engine} engine" if out is None else
                     f"table {table or 'deidentified'} in {out}" if kind == "duckdb" else f"{out} ({kind})")
            pending = prepare_release_report(problem, plan, report, overwrite, accept_risk, where, out)
        written = materialize(problem, plan, out, fmt, table, overwrite, accept_risk=accept_risk)
        where = (f"{written.path}" if written.path else "the database") + (
            f" table {written.table}" if written.table else "")
        click.echo(f"wrote {written.rows:,} rows to {where} ({written.format})")
        echo_release(written)
        finish_release_report(pending, written_files(written), figures=written.figures)


def _materialize_set(spec: Spec, policy: str | None, levels: str | None, out: Path | None, fmt: str | None,
                     table: str | None, tables: str | None, overwrite: bool, suppress_below: int | None,
                     accept_risk: str | None, report: Path | None) -> None:
    """``materialize`` of a spec with linked tables: the whole set into the folder ``out``, or as
    tables (``--tables PREFIX``) in the engine or the DuckDB file ``out``."""
    if table is not None:
        raise OutputError("this spec links tables ([[table]]), which are released together, as one set: name them "
                          "with --tables PREFIX (one table per table), not --table")
    if tables is not None:
        _materialize_set_tables(spec, policy, levels, out, fmt, tables, overwrite, suppress_below, accept_risk,
                                report)
        return
    from ..sets.release import SIDECAR, materialize_set

    if out is None or out.suffix.lower() in FORMATS:
        raise OutputError("this spec links tables ([[table]]), which are released together, as one set: write it to "
                          "a folder with --out FOLDER (one file per table and release.json), or as tables with "
                          "--tables PREFIX")
    check_report_outside(report, out)
    with open_problem(spec.path, targets=folder(out, overwrite) + file(report, overwrite)) as problem:
        plan = release_plan(problem, policy, levels, suppress_below)
        pending = prepare_release_report(problem, plan, report, overwrite, accept_risk,
                                         f"{out}/ (a set of {len(spec.tables) + 1} tables)", whole_set=True)
        written = materialize_set(problem, plan, out, fmt, overwrite, accept_risk=accept_risk)
        click.echo(f"wrote {len(written.tables)} tables ({written.rows:,} rows) to {written.folder}/ "
                   f"({written.format})")
        for t in written.tables:
            click.echo(f"  {t.name}: {t.rows:,} rows")
        echo_release(written)
        if pending is not None:
            add_set(pending, read_sidecar(written.sidecar), f"{written.folder}/{SIDECAR}", spec)
        finish_release_report(pending, [written.folder], figures=written.figures)


def _materialize_set_tables(spec: Spec, policy: str | None, levels: str | None, out: Path | None,
                            fmt: str | None, prefix: str, overwrite: bool, suppress_below: int | None,
                            accept_risk: str | None, report: Path | None) -> None:
    """``materialize --tables PREFIX`` of a set: inside the engine, or the DuckDB file ``out``."""
    from ..sets.tables import materialize_set_tables

    if out is not None and (fmt or FORMATS.get(out.suffix.lower())) != "duckdb":
        raise OutputError(f"--tables writes the set as tables, inside the spec's engine (leave out --out) or inside "
                          f"a DuckDB file (--out FILE.duckdb), not {out}; --out FOLDER alone writes it as files")
    if out is None and fmt is not None:
        raise OutputError(f"--format {fmt} names a file format, and --tables without --out writes tables of the "
                          f"engine: leave out --format")
    with open_problem(spec.path, targets=set_tables(spec, prefix, out, overwrite) + file(report, overwrite)) \
            as problem:
        plan = release_plan(problem, policy, levels, suppress_below)
        where = f"in {out}" if out is not None else f"in the {spec.backend.engine} engine"
        pending = prepare_release_report(problem, plan, report, overwrite, accept_risk,
                                         f"tables {prefix}… {where} (a set of {len(spec.tables) + 1} tables)",
                                         whole_set=True)
        written = materialize_set_tables(problem, plan, prefix, out, overwrite, accept_risk=accept_risk)
        click.echo(f"wrote {len(written.tables)} tables ({written.rows:,} rows) {where}")
        for t in written.tables:
            click.echo(f"  {t.table}: {t.rows:,} rows")
        echo_release(written)
        if pending is not None:
            add_set(pending, written.record, f"table {written.sidecar}", spec)
        finish_release_report(pending, [], figures=written.figures)


@click.command()
@spec_argument
@policy_option
@click.option("--db", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="DuckDB database file to create the view in (created if missing); leave it out when the "
                   "spec's [backend] is PostgreSQL or Spark: the view goes into that engine.")
@click.option("--view", "name", default=None, metavar="NAME",
              help="The view's name (required); with linked tables ([[table]]) the prefix of each view's name.")
@renamed("--name", "--view", "name", type=str)
@click.option("--overwrite", "replace", is_flag=True, help="Replace an existing view of that name (and --report).")
@renamed("--replace", "--overwrite", "replace", is_flag=True)
@suppress_option
@accept_risk_option
@report_option
@handles_errors
def view(spec: Path, policy: str | None, levels: str | None, db: Path | None, name: str | None, replace: bool,
         suppress_below: int | None, accept_risk: str | None, report: Path | None) -> None:
    """Create a DuckDB view that analysts can SELECT from; it reads the source in place.

    The rows the view shows now are checked against the spec's release criteria; a record of the
    release is written beside it as the table NAME__release. Values that later fall outside a
    QI's declared domain show as * (or the spec's outside_label), never as themselves. With
    --report FILE.html the report a reviewer signs is written after the view (refused before
    the view is created when FILE exists).

    A spec that links tables ([[table]]) gets one view per table, named NAME + its release name
    (NAME is a prefix: deid_ or a schema such as release.), all or none, judged once. Their keyed
    values (pseudonyms, date offsets) are computed once into the key table NAME + keys, which holds
    raw person keys: allowed in PostgreSQL (readable by its owner only) or in the DuckDB file that
    holds the person source. The views show the persons of that moment: a person added later
    shows in no view until view --overwrite judges the set again.

    Example: deid-sql view demo/demo.toml --policy 'age:cuts=18,65|race:top' --db analysts.duckdb --view patients_deid
    """
    if name is None:  # not click's required=True: the old spelling --name gives it too
        raise click.MissingParameter(param_hint="'--view'", param_type="option")
    parsed = Spec.read(spec)
    if parsed.tables:
        from .output_sets import view_set

        view_set(parsed, policy, levels, db, name, replace, suppress_below, accept_risk, report)
        return
    early = release_targets(view=name, db=db, report=report, replace=replace)
    with open_problem(spec, targets=early) as problem:
        plan = release_plan(problem, policy, levels, suppress_below)
        pending = prepare_release_report(problem, plan, report, replace, accept_risk,
                                         f"view {name} in {db if db is not None else 'the database'}")
        written = create_view(problem, plan, db, name, replace, accept_risk=accept_risk)
        click.echo(f"created view {name} in {db if db is not None else 'the database'}")
        echo_release(written)
        finish_release_report(pending, [], figures=written.figures)
