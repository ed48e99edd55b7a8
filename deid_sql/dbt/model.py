"""``write_dbt``: a release plan as a dbt model, with its tests, label macros and sidecar.

The release gate judges the model's rows on the spec's data before anything is written (the
same ``build_gate`` as every release path); then every file is computed, checked against the
project folder, and written all or nothing (``project.write_all``).  See the package docstring
for the files.
"""


from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DeidError, ReleaseRefused
from ..problem import Problem
from ..release.figures import ReleaseFigures
from ..release.gate import ReleaseSource, Verdict, build_gate
from ..release.plan import ReleasePlan
from ..release.sidecar import SUFFIX as SIDECAR
from ..release.sidecar import to_json
from .files import (
    MATERIALIZATIONS,
    TESTS_SQL,
    check_name,
    dbt_dialect,
    labels_sql,
    model_sql,
    model_yml,
    project_yml,
    source_of,
    source_yml,
    spec_inputs,
)
from .inputs import refuse_replacing
from .project import check_targets, declared_source, project_paths, write_all
from .text import header

DEFAULT_SOURCE = "deid"
DEFAULT_PROFILE = "deid_sql"
TESTS_MACRO = "deid_sql_tests.sql"


@dataclass
class DbtOutput:
    """What ``write_dbt`` wrote (paths relative to the project), and what it left alone."""

    project: Path
    model: str
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    created_project: bool = False
    source_declared_in: str | None = None  # the user's yml that already declares the source
    figures: ReleaseFigures | None = None
    verdict: Verdict | None = None
    sidecar: str | None = None


def write_dbt(problem: Problem, plan: ReleasePlan, project: str | Path,
              model: str | None = None,
              source_name: str = DEFAULT_SOURCE, source_table: str | None = None, source_schema: str | None = None,
              dialect: str | None = None, k: int | None = None, materialized: str = "table",
              profile: str = DEFAULT_PROFILE, overwrite: bool = False, accept_risk: str | None = None) -> DbtOutput:
    """Write the dbt model, its tests and their macros into ``project`` (all or nothing).
    ``dialect`` defaults to the spec's engine (duckdb unless ``[backend]`` names another).

    A model named like one of its inputs in the profile's schema (the source, the census) is
    refused, and the model refuses at ``dbt run`` time to build over one (``inputs``): dbt would
    replace the data the release was judged on.

    The release gate judges the model's rows on the spec's data before anything is written;
    ``k`` defaults to the spec's ``[release] min_k``, and a policy whose smallest group is below
    it is refused (the generated test would fail after ``dbt run`` had already written the rows).
    The sidecar goes to ``<models>/<model>.release.json`` with the other files."""
    dialect = dbt_dialect(dialect or problem.spec.backend.engine)
    if k is None:
        k = problem.spec.release.min_k
    if k is not None and k < 1:
        raise DeidError(f"--min-k {k} must be at least 1 (the smallest group size the test requires)")
    if materialized not in MATERIALIZATIONS:
        raise DeidError(f"materialized {materialized!r} must be one of {', '.join(MATERIALIZATIONS)}")
    source = source_of(problem, source_name, source_table, source_schema, dialect)
    model = model or f"{source.table}_deid"
    check_name(model, "model name", "--model")
    inputs = spec_inputs(problem, [("the source table", source)], own_table=source_table is not None)
    refuse_replacing([model], inputs, "--model")
    check_name(profile, "profile name", "--profile")
    shown = Path(project)
    root = shown.resolve()
    metrics = problem.evaluate(plan.item)
    call = f"deid_sql.dbt.write_dbt(problem, {plan.repr_call()}, {str(project)!r}" + (f", k={k}" if k else "") + ")"
    gate = build_gate(ReleaseSource.from_problem(problem), plan, call, accept_risk)
    gate.precheck()
    figures = gate.measure(problem.backend.execute, problem.query(plan, persistent=True, measuring=True))
    if k is not None and figures.k < k:
        raise ReleaseRefused(f"the policy's smallest group has {figures.k:,} record(s), below --min-k {k}"
                             + (" (the spec's [release] min_k)" if k == problem.spec.release.min_k else "")
                             + "; the model's group-size test would fail after dbt run had written the rows: "
                               "choose a more general policy; nothing was written")
    verdict = gate.judge(figures)
    project_file = root / "dbt_project.yml"
    out = DbtOutput(shown, model, created_project=not project_file.exists())
    models_dir, macros_dir = ("models", "macros") if out.created_project else project_paths(project_file)
    source_file = f"{models_dir}/deid_sql_source__{source.name}__{source.table}.yml"
    files: dict[str, str] = {}
    if out.created_project:
        files["dbt_project.yml"] = project_yml(root, profile)
    files[f"{models_dir}/{model}.sql"] = model_sql(problem, plan, source, dialect, materialized, inputs)
    files[f"{models_dir}/{model}.yml"] = model_yml(problem, plan, metrics, source, model, root, k)
    out.source_declared_in = declared_source(root, models_dir, source, source_file)
    if out.source_declared_in is None:
        files[source_file] = source_yml(source)
    files[f"{macros_dir}/deid_sql_labels__{model}.sql"] = labels_sql(problem, plan, model, dialect)
    files[f"{macros_dir}/{TESTS_MACRO}"] = TESTS_SQL.replace("HEADER", header())
    files[f"{models_dir}/{model}{SIDECAR}"] = to_json(gate.record(figures, verdict, {
        "kind": "dbt model", "name": model, "project": str(root), "dialect": dialect, "materialized": materialized,
        "rows": figures.records, "min_group_test": k}))
    out.unchanged = check_targets(root, shown, files, {f"{macros_dir}/{TESTS_MACRO}", source_file}, models_dir,
                                  model, overwrite)
    out.written = [rel for rel in files if rel not in out.unchanged]
    write_all(root, {rel: files[rel] for rel in out.written}, overwrite)
    out.figures, out.verdict, out.sidecar = figures, verdict, str(shown / f"{models_dir}/{model}{SIDECAR}")
    return out
