"""``deid-sql dbt``: a policy as a dbt model with tests, written into a dbt project."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..dbt import DEFAULT_PROFILE, DEFAULT_SOURCE, MATERIALIZATIONS, write_dbt
from ..dbt.sets import DEFAULT_PREFIX, write_dbt_set
from ..errors import OutputError
from ..release.targets import release_targets
from .options import (
    accept_risk_option,
    echo_release,
    handles_errors,
    min_k_option,
    open_problem,
    policy_option,
    release_plan,
    renamed,
    spec_argument,
)
from .report import add_set, finish_release_report, prepare_release_report, report_option


@click.command(name="dbt")
@spec_argument
@policy_option
@click.option("--project", "project", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="dbt project folder (a minimal dbt_project.yml is created when it has none).")
@click.option("--model", default=None, help="Model name (default: <source table>_deid).")
@click.option("--prefix", default=None,
              help=f"For a spec with [[table]]: the prefix of each table's model (default: {DEFAULT_PREFIX}).")
@click.option("--source-name", default=DEFAULT_SOURCE, show_default=True, help="dbt source name.")
@click.option("--source-table", default=None,
              help="The source table in the warehouse (default: the spec's DuckDB table, else the file's stem).")
@click.option("--source-schema", default=None,
              help="Schema of the source table, dbt Jinja allowed (default: the profile's schema, "
                   "{{ target.schema }}).")
@click.option("--dialect", "-d", default=None,
              help="SQL dialect or dbt adapter of the warehouse (postgres, snowflake, spark, sqlserver, …; "
                   "default: the spec's engine, duckdb unless [backend] names another).")
@min_k_option("Also test that every group of equal QI values has at least K rows; a policy with a smaller group "
              "is refused (default: min_k of the spec's release criteria).")
@renamed("--k", "--min-k", "k", type=int)
@click.option("--materialized", type=click.Choice(MATERIALIZATIONS), default="table", show_default=True,
              help="dbt materialization of the model.")
@click.option("--profile", default=DEFAULT_PROFILE, show_default=True,
              help="Profile named in a dbt_project.yml this command creates.")
@click.option("--overwrite", is_flag=True, help="Replace the model's files written by an earlier run.")
@accept_risk_option
@report_option
@handles_errors
def dbt_(spec: Path, policy: str | None, levels: str | None, project: Path, model: str | None, prefix: str | None,
         source_name: str,
         source_table: str | None, source_schema: str | None, dialect: str | None, k: int | None,
         materialized: str, profile: str, overwrite: bool, accept_risk: str | None, report: Path | None) -> None:
    """Write a dbt model that applies a policy over {{ source() }}, with tests and the policy in meta.

    Writes models/<model>.sql, models/<model>.yml (row count equals the source's, every QI
    value one of the policy's labels, and with --min-k no group smaller than K), the source's yml
    and the tests' macros; all of it or nothing.

    A spec with [[table]] gets one model per table of the set (<prefix><release name>), the key's
    functions registered by the dbt-duckdb plugin deid_sql.backends.dbt_duckdb (no key in any file).

    Example: deid-sql dbt demo/demo.toml --policy 'age:cuts=18,65|zip:top' --project warehouse --min-k 5
    """
    with open_problem(spec, targets=release_targets(report=report, replace=overwrite)) as problem:
        if problem.spec.tables:
            _dbt_set(problem, policy, levels, project, model, prefix, source_name, source_table, source_schema,
                     dialect, k, materialized, profile, overwrite, accept_risk, report)
            return
        if prefix is not None:
            raise OutputError(f"--prefix names the models of a set; spec {spec} declares no [[table]]: use --model")
        plan = release_plan(problem, policy, levels)
        pending = prepare_release_report(problem, plan, report, overwrite, accept_risk,
                                         f"dbt model {model or 'of the source'} in project {project}")
        out = write_dbt(problem, plan, project, model=model, source_name=source_name,
                        source_table=source_table, source_schema=source_schema, dialect=dialect, k=k,
                        materialized=materialized, profile=profile, overwrite=overwrite, accept_risk=accept_risk)
    if out.created_project:
        click.echo(f"created dbt project {project} (dbt_project.yml, profile {profile})")
    click.echo(f"wrote model {out.model} to {project}: {', '.join(f for f in out.written if f != 'dbt_project.yml')}")
    if out.source_declared_in:
        click.echo(f"source {source_name} is declared in {out.source_declared_in}; not declared again")
    if out.unchanged:
        click.echo(f"unchanged: {', '.join(out.unchanged)}")
    echo_release(out)
    if pending is not None:
        pending.report["summary"]["released"] = f"dbt model {out.model} in project {project}"
    finish_release_report(pending, [])
    click.echo(f"next: dbt run --select {out.model} && dbt test --select {out.model}  (in {project})")


def _dbt_set(problem: Any, policy: str | None, levels: str | None, project: Path, model: str | None,
             prefix: str | None, source_name: str, source_table: str | None, source_schema: str | None,
             dialect: str | None, k: int | None, materialized: str, profile: str, overwrite: bool,
             accept_risk: str | None, report: Path | None) -> None:
    """The models of a set (``dbt.sets.write_dbt_set``)."""
    if model is not None or source_table is not None:
        raise OutputError(f"{'--model' if model is not None else '--source-table'} names one table's model; a spec "
                          f"with [[table]] gets one model per table: name them with --prefix")
    plan = release_plan(problem, policy, levels)
    pending = prepare_release_report(problem, plan, report, overwrite, accept_risk, f"dbt models of a set in {project}",
                                     whole_set=True)
    out = write_dbt_set(problem, plan, project, prefix=DEFAULT_PREFIX if prefix is None else prefix,
                        source_name=source_name, source_schema=source_schema, dialect=dialect, k=k,
                        materialized=materialized, profile=profile, overwrite=overwrite, accept_risk=accept_risk)
    if out.created_project:
        click.echo(f"created dbt project {project} (dbt_project.yml, profile {profile})")
    if out.profile_written:
        click.echo(f"wrote profiles.yml (dbt-duckdb with the plugin deid_sql.backends.dbt_duckdb; the key is read from "
                   f"${problem.spec.columns.secret_env} when dbt runs)")
    click.echo(f"wrote {len(out.models)} models of the set to {project}: {', '.join(out.models)}")
    if out.unchanged:
        click.echo(f"unchanged: {', '.join(out.unchanged)}")
    echo_release(out)
    if pending is not None:
        pending.report["summary"]["released"] = f"dbt models {', '.join(out.models)} in project {project}"
        from ..sets.release import preview

        record = preview(problem, plan)  # the rows each model holds once dbt runs, with each column's role
        for table, name in zip(record["release"]["tables"], out.models):
            table["table"] = name
        add_set(pending, record, str(out.sidecar), problem.spec)
    finish_release_report(pending, [])
    click.echo(f"next: dbt run && dbt test  (in {project}, with ${problem.spec.columns.secret_env} set: the plugin "
               f"reads the key from it)")
