"""A policy as a dbt model: the compiled SELECT over ``{{ source() }}``, with tests.

``write_dbt(problem, policy, project)`` writes into a dbt project folder (creating a
minimal ``dbt_project.yml`` when there is none, never replacing one):

- ``models/<model>.sql``: ``{{ config(materialized=...) }}`` and the generalizing
  ``SELECT`` rendered for the target dialect, its source table replaced by
  ``{{ source('<source>', '<table>') }}``;
- ``models/<model>.yml``: the model with the policy, rules, risk, loss, KL and k in
  ``meta``, and its tests: same row count as the source, every QI value one of the
  policy's labels, and (with ``k``) no group of the QIs smaller than k;
- ``models/deid_sql_source__<source>__<table>.yml``: the source (shared by models over it);
- ``macros/deid_sql_tests.sql``: the generic tests (shared; identical for every model);
- ``macros/deid_sql_labels__<model>.sql``: per QI a generic test holding every label the
  policy can give that QI (its groups' labels; a value kept alone is its own label) as
  SQL literals of the dialect.  The labels live in a macro file, not in the yml, so the
  yml stays small whatever the domain (a ZIP kept at 5 digits has one label per ZIP),
  labels are never re-typed by YAML or rendered as Jinja by dbt, and no seed has to be
  loaded before ``dbt test``.

Everything is computed and checked first; then the files are written to temporary
siblings and renamed together, so a failure writes nothing.  Writing needs no dbt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DeidError, ReleaseRefused
from ..policy import Policy
from ..problem import Problem
from ..recoding import Recoding
from ..release.figures import ReleaseFigures
from ..release.gate import ReleaseGate, Verdict
from ..release.plan import ReleasePlan, plan_of
from ..release.sidecar import SUFFIX as SIDECAR
from ..release.sidecar import to_json
from .files import (
    MATERIALIZATIONS,
    SENTINEL,
    TESTS_SQL,
    check_name,
    dbt_dialect,
    labels_sql,
    model_sql,
    model_yml,
    project_yml,
    source_of,
    source_yml,
)
from .project import check_targets, declared_source, project_paths, write_all
from .text import header, jinja_text, splice_source, yaml_dump

__all__ = ["DEFAULT_PROFILE", "DEFAULT_SOURCE", "MATERIALIZATIONS", "SENTINEL", "DbtOutput", "dbt_dialect",
           "jinja_text", "splice_source", "write_dbt", "yaml_dump"]

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


def write_dbt(problem: Problem, policy: ReleasePlan | Policy | Recoding | str, project: str | Path,
              model: str | None = None,
              source_name: str = DEFAULT_SOURCE, source_table: str | None = None, source_schema: str | None = None,
              dialect: str | None = None, k: int | None = None, materialized: str = "table",
              profile: str = DEFAULT_PROFILE, overwrite: bool = False, accept_risk: str | None = None) -> DbtOutput:
    """Write the dbt model, its tests and their macros into ``project`` (all or nothing).
    ``dialect`` defaults to the spec's engine (duckdb unless ``[backend]`` names another).

    The release gate judges the model's rows on the spec's data before anything is written;
    ``k`` defaults to the spec's ``[release] min_k``, and a policy whose smallest group is below
    it is refused (the generated test would fail after ``dbt run`` had already written the rows).
    The sidecar goes to ``<models>/<model>.release.json`` with the other files."""
    dialect = dbt_dialect(dialect or problem.spec.backend.engine)
    if k is None:
        k = problem.spec.release.min_k
    if k is not None and k < 1:
        raise DeidError(f"--k {k} must be at least 1 (the smallest group size the test requires)")
    if materialized not in MATERIALIZATIONS:
        raise DeidError(f"materialized {materialized!r} must be one of {', '.join(MATERIALIZATIONS)}")
    source = source_of(problem, source_name, source_table, source_schema)
    model = model or f"{source.table}_deid"
    check_name(model, "model name", "--model")
    check_name(profile, "profile name", "--profile")
    shown = Path(project)
    root = shown.resolve()
    pol = plan_of(problem, policy)
    metrics = problem.evaluate(pol.item)
    call = f"deid_sql.dbt.write_dbt(problem, {pol.repr_call()}, {str(project)!r}" + (f", k={k}" if k else "") + ")"
    gate = ReleaseGate.for_problem(problem, pol, call, accept_risk)
    gate.precheck()
    figures = gate.measure(problem.backend.execute, problem.query(pol.item, pol.suppression, persistent=True))
    if k is not None and figures.k < k:
        raise ReleaseRefused(f"the policy's smallest group has {figures.k:,} record(s), below --k {k}"
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
    files[f"{models_dir}/{model}.sql"] = model_sql(problem, pol, source, dialect, materialized)
    files[f"{models_dir}/{model}.yml"] = model_yml(problem, pol, metrics, source, model, root, k)
    out.source_declared_in = declared_source(root, models_dir, source, source_file)
    if out.source_declared_in is None:
        files[source_file] = source_yml(source)
    files[f"{macros_dir}/deid_sql_labels__{model}.sql"] = labels_sql(problem, pol, model, dialect)
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
