"""``write_dbt_set``: a set of linked tables as dbt models, with no key in any file.

A set (the person source and every ``[[table]]``) pseudonymizes the person key and may shift
dates, both HMACs under the spec's secret.  The single-table path refuses such SQL because it
would hold the key's pads; here every keyed expression is a call of a function that the dbt-duckdb
plugin ``deid_sql.backends.dbt_duckdb`` registers at ``dbt run`` time from the key in its
environment (``contract.keys.Udfs``), so the stored SQL holds none.  Only the duckdb adapter runs
that plugin: another dialect is refused (its SQL would have to carry the key).

One model per table, named ``<prefix><release name>``: the person source's model over its
``{{ source() }}`` (the single-table model, with its tests and label macros); each linked model
reads its own source, shifts its dates by the same offsets, and keeps the rows of the persons the
person model keeps, joining ``{{ ref('<person model>') }}`` on the pseudonymized key (rows flagged
suppressed excluded), so dbt builds the person model first.  The gate judges the set on the spec's
data before anything is written (``build_gate(..., whole_set=True)``, as ``materialize_set``), the
linked tables are opened and counted the same way (orphans refused unless dropped), and one
sidecar lists every model.  Everything is written all or nothing (``project.write_all``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlglot import exp

from ..backends import dbt_key_plugin
from ..compiler.compile import to_sql
from ..contract.keys import Udfs
from ..contract.roles import FLAG, apply_roles
from ..errors import DeidError, OutputError, ReleaseRefused
from ..loading.shifting import shift_source, shifted_select
from ..loading.transform import transform_source
from ..problem import Problem
from ..release.figures import ReleaseFigures
from ..release.gate import ReleaseSource, Verdict, build_gate
from ..release.plan import ReleasePlan
from ..release.sidecar import SUFFIX as SIDECAR
from ..release.sidecar import to_json
from ..sets.release import linked_sources
from ..sets.rows import KEPT, KEY, LinkedSource, kept_keys
from ..sqltext import col, ident
from ..storage.tableref import TableRef
from .files import (
    MATERIALIZATIONS,
    SENTINEL,
    TESTS_SQL,
    Source,
    check_name,
    dbt_dialect,
    labels_sql,
    model_head,
    model_yml,
    project_yml,
    source_of,
    spec_inputs,
    warehouse_source,
)
from .inputs import Input, refuse_replacing, table_parts
from .ledger_check import ledger_sql, ledger_test_name
from .project import check_targets, declared_source, project_paths, write_all
from .text import header, jinja_str, jinja_text, yaml_dump

DEFAULT_PREFIX = "deid_"
TESTS_MACRO = "deid_sql_tests.sql"
PERSON_SENTINEL = SENTINEL + "_persons"  # the person model in a linked model, replaced by {{ ref() }}


@dataclass
class DbtSetOutput:
    """What ``write_dbt_set`` wrote (paths relative to the project), and what it left alone."""

    project: Path
    models: list[str]
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    created_project: bool = False
    profile_written: bool = False
    figures: ReleaseFigures | None = None
    verdict: Verdict | None = None
    sidecar: str | None = None


def write_dbt_set(problem: Problem, plan: ReleasePlan, project: str | Path, prefix: str = DEFAULT_PREFIX,
                  source_name: str = "deid", source_schema: str | None = None, dialect: str | None = None,
                  k: int | None = None, materialized: str = "table", profile: str = "deid_sql",
                  overwrite: bool = False, accept_risk: str | None = None) -> DbtSetOutput:
    """Write one dbt model per table of ``problem``'s set into ``project`` (all or nothing),
    judged once by the gate on the spec's data; see the module docstring."""
    spec = problem.spec
    if spec.person is None or not spec.tables:
        raise OutputError(f"spec {spec.path} declares no [[table]]; a single table's model is written without "
                          f"a set (deid-sql dbt as usual)")
    dialect = dbt_dialect(dialect or spec.backend.engine)
    plugin = dbt_key_plugin(dialect)
    if plugin is None:
        raise OutputError(f"dbt models of a set run only on dbt-duckdb (--dialect duckdb): on {dialect} the models' "
                          f"SQL would have to hold the key (no plugin registers its functions there); release the "
                          f"set with deid-sql materialize --out FOLDER instead")
    if k is None:
        k = spec.release.min_k
    if k is not None and k < 1:
        raise DeidError(f"--min-k {k} must be at least 1 (the smallest group size the test requires)")
    if materialized not in MATERIALIZATIONS:
        raise DeidError(f"materialized {materialized!r} must be one of {', '.join(MATERIALIZATIONS)}")
    check_name(profile, "profile name", "--profile")
    person_source = source_of(problem, source_name, None, source_schema, dialect)
    sources = [person_source] + [_linked_source(source_name, t.source, t.name, source_schema, spec.backend.engine)
                                 for t in spec.tables]
    models = [f"{prefix}{spec.source_name}"] + [f"{prefix}{t.name}" for t in spec.tables]
    for model in models:
        check_name(model, "model name", "--prefix")
    inputs = spec_inputs(problem, [("the source table", person_source)] + [
        (f"the source table of [[table]] {t.name}", s) for t, s in zip(spec.tables, sources[1:])], own_table=False)
    refuse_replacing(models, inputs, "--prefix")  # every model against every table of the set: one dbt run builds all
    if len({s.table for s in sources}) < len(sources):
        raise OutputError("two tables of the set read the same source table; each [[table]] needs its own table")

    gate = build_gate(ReleaseSource.from_problem(problem), plan,
                      f"deid_sql.dbt.write_dbt_set(problem, {plan.repr_call()}, {str(project)!r})", accept_risk,
                      whole_set=True)
    gate.precheck()
    figures = gate.measure(problem.backend.execute, problem.query(plan, measuring=True))  # run, never stored
    if k is not None and figures.k < k:
        raise ReleaseRefused(f"the policy's smallest group has {figures.k:,} person(s), below --min-k {k}; the person "
                             f"model's group-size test would fail after dbt run had written the rows: choose a more "
                             f"general policy; nothing was written")
    verdict = gate.judge(figures)
    flagged = plan.suppression is not None
    linked = linked_sources(problem, kept_keys(problem.query(plan, roles=False), spec.person.column, flagged,
                                               problem.columns.get(spec.person.column)))

    shown = Path(project)
    root = shown.resolve()
    project_file = root / "dbt_project.yml"
    out = DbtSetOutput(shown, models, created_project=not project_file.exists())
    models_dir, macros_dir = ("models", "macros") if out.created_project else project_paths(project_file)
    files: dict[str, str] = {}
    if out.created_project:
        files["dbt_project.yml"] = project_yml(root, profile)
    if not (root / "profiles.yml").exists() and spec.source.format == "duckdb" and spec.source.path is not None:
        files["profiles.yml"] = profiles_yml(profile, Path(spec.source.path).resolve(), spec.columns.secret_env or "",
                                              plugin)
        out.profile_written = True
    person_model = models[0]
    entries = [{"model": person_model, "role": "person source", "source": person_source.identifier,
                "rows": problem.source_rows}]
    entries += [{"model": m, "role": "linked", "source": src.identifier, "rows": s.released, "source_rows": s.rows,
                 "orphans": s.orphans, "orphans_rule": s.table.orphans, "removed_with_suppressed_persons": s.removed}
                for m, src, s in zip(models[1:], sources[1:], linked)]
    sidecar = f"{models_dir}/{person_model}{SIDECAR}"
    record = gate.record(figures, verdict, {  # appends the set's ledger entry when its persons can be linked
        "kind": "dbt set", "name": person_model, "project": str(root), "dialect": dialect,
        "materialized": materialized, "plugin": plugin, "secret_env": spec.columns.secret_env,
        "rows": sum(int(e["rows"]) for e in entries), "min_group_test": k, "models": entries})
    files[sidecar] = to_json(record)
    recorded, extra = gate.entry_groups(), []
    if recorded and "ledger" in record:
        where = record["ledger"]
        extra.append(ledger_test_name(person_model))
        files[f"{macros_dir}/{ledger_test_name(person_model)}.sql"] = ledger_sql(
            person_model, recorded, [q.column for q in spec.qis], spec.person.column, FLAG if flagged else None,
            dialect, f"entry {where['entry']} of the ledger {where['path']} (recipient {where['recipient']!r})")
    files[f"{models_dir}/{person_model}.sql"] = _model(person_sql(problem, plan), {SENTINEL: person_source},
                                                       materialized, inputs)
    files[f"{models_dir}/{person_model}.yml"] = model_yml(problem, plan, problem.evaluate(plan.item), person_source,
                                                          person_model, root, k, extra)
    files[f"{macros_dir}/deid_sql_labels__{person_model}.sql"] = labels_sql(problem, plan, person_model, dialect)
    files[f"{macros_dir}/{TESTS_MACRO}"] = TESTS_SQL.replace("HEADER", header())
    for model, source, s in zip(models[1:], sources[1:], linked):
        sql = linked_sql(problem, s, spec.person.column, flagged)
        files[f"{models_dir}/{model}.sql"] = _model(sql, {SENTINEL: source, PERSON_SENTINEL: person_model},
                                                    materialized, inputs)
        files[f"{models_dir}/{model}.yml"] = linked_yml(s, model, person_model, spec.person.column, plugin)
    source_file = f"{models_dir}/deid_sql_source__{source_name}__{person_model}.yml"
    undeclared = [s for s in sources if declared_source(root, models_dir, s, source_file) is None]
    if undeclared:
        files[source_file] = sources_yml(undeclared)
    shared = {f"{macros_dir}/{TESTS_MACRO}", source_file}
    unchanged: set[str] = set()
    for model in models:
        unchanged |= set(check_targets(root, shown, files, shared, models_dir, model, overwrite))
    out.unchanged = sorted(unchanged)
    out.written = [rel for rel in files if rel not in unchanged]
    write_all(root, {rel: files[rel] for rel in out.written}, overwrite)
    out.figures, out.verdict, out.sidecar = figures, verdict, str(shown / sidecar)
    return out


def person_sql(problem: Problem, plan: ReleasePlan) -> exp.Select:
    """The person source's release over the sentinel table, dates shifted and the key pseudonymized
    by the plugin's functions."""
    relation = exp.Table(this=exp.to_identifier(SENTINEL, quoted=True))
    keys = Udfs()
    stored = transform_source(problem.spec, relation, problem.columns)  # QIs read as their whole numbers
    source = shift_source(problem.backend, problem.spec, stored, problem.columns, keys)
    return problem.query(plan, source, persistent=True, keys=keys)


def linked_sql(problem: Problem, source: LinkedSource, person_column: str, flagged: bool) -> exp.Select:
    """A linked table's release over the sentinel table: its dates shifted, its rows those of the
    persons the person model keeps (the person sentinel, joined on the pseudonymized key), roles
    applied; the same rows as ``sets.rows.linked_query``, with no key in the SQL."""
    spec, t, keys = problem.spec, source.table, Udfs()
    relation: exp.Expression = exp.Table(this=exp.to_identifier(SENTINEL, quoted=True))
    if t.roles.shift:
        assert spec.person is not None and spec.person.shift_days is not None
        relation = shifted_select(problem.backend, relation, source.columns, t.roles.shift, t.person,
                                  spec.columns.secret(), spec.person.shift_days, keys)
    rows = (exp.Subquery(this=relation, alias=exp.TableAlias(this=ident("t"))) if isinstance(relation, exp.Select)
            else exp.alias_(relation, "t", table=True))
    persons = exp.Table(this=exp.to_identifier(PERSON_SENTINEL, quoted=True))
    kept = exp.select(exp.alias_(col(person_column), KEY)).distinct().from_(persons)
    if flagged:
        kept = kept.where(exp.Not(this=exp.func("coalesce", col(FLAG), exp.false())))
    keeping = exp.Subquery(this=kept, alias=exp.TableAlias(this=ident(KEPT)))
    hashed = keys.pseudonym(col(t.person, "t"), b"", t.roles.pseudonym)
    query = (exp.select(*[exp.alias_(col(name, "t"), ident(name)) for name in source.columns]).from_(rows)
             .join(keeping, on=exp.EQ(this=hashed, expression=exp.column(KEY, KEPT)), join_type="INNER"))
    return apply_roles(query, t.roles, [], problem.backend, t.where, copy=False, keys=keys)


def _model(query: exp.Select, calls: dict[str, Source | str], materialized: str, inputs: list[Input]) -> str:
    """The model file: header, config, the run-time refusal to build over any table of the set
    (``inputs.guard``), and the SQL with each sentinel table replaced by its Jinja call (a
    ``Source`` by ``{{ source() }}``, a model name by ``{{ ref() }}``), the rest Jinja-safe."""
    sql = to_sql(query, "duckdb")
    pieces = [sql]
    for sentinel, target in calls.items():
        rendered = to_sql(exp.Table(this=exp.to_identifier(sentinel, quoted=True)), "duckdb")
        call = (f"{{{{ source({jinja_str(target.name)}, {jinja_str(target.table)}) }}}}" if isinstance(target, Source)
                else f"{{{{ ref({jinja_str(target)}) }}}}")
        split: list[str] = []
        for piece in pieces:
            if piece.startswith("{{ source(") or piece.startswith("{{ ref("):
                split.append(piece)
                continue
            parts = piece.split(rendered)
            for i, part in enumerate(parts):
                if i:
                    split.append(call)
                split.append(part)
        if split.count(call) != 1:
            raise DeidError(f"the compiled SQL names the placeholder table {sentinel} {split.count(call)} times, "
                            f"expected once; cannot put {call} in its place")
        pieces = split
    body = "".join(p if p.startswith("{{ source(") or p.startswith("{{ ref(") else jinja_text(p) for p in pieces)
    return f"{model_head(materialized, inputs)}{body}\n"


def _linked_source(name: str, ref: TableRef, table: str, schema: str | None, engine: str) -> Source:
    """A linked table's dbt source: its table in the warehouse (a file's stem, else the
    ``[[table]]``'s name), as ``source_of``."""
    return warehouse_source(name, table_parts(ref, engine, table), schema)


def linked_yml(source: LinkedSource, model: str, person_model: str, person_column: str, plugin: str) -> str:
    """A linked model's yml: what it is, and a test that every row's person is in the person model."""
    t = source.table
    doc = {"version": 2, "models": [{
        "name": model,
        "description": f"{t.source.describe()} de-identified by deid-sql: rows of the persons {person_model} keeps, "
                       f"dates shifted, {t.person} pseudonymized (functions of {plugin})",
        "config": {"meta": {"deid_set_person_model": person_model, "deid_source_rows": source.rows,
                            "deid_orphans": source.orphans, "deid_orphans_rule": t.orphans,
                            "deid_removed_with_suppressed_persons": source.removed}},
        "columns": [{"name": t.person, "data_tests": [{"relationships": {"arguments": {
            "to": f"ref({jinja_str(person_model)})", "field": person_column}}}]}],
    }]}
    return f"# {header()}\n" + yaml_dump(doc)


def sources_yml(sources: list[Source]) -> str:
    """The sources of the set, grouped by schema (one dbt source entry per schema)."""
    entries: dict[tuple[str | None, str | None], dict[str, Any]] = {}
    raw: set[str] = set()
    for s in sources:
        schema = s.schema if s.schema is not None else "{{ target.schema }}"
        if s.schema is None:
            raw.add(schema)
        entry = entries.setdefault((s.database, s.schema), {
            "name": s.name, **({"database": s.database} if s.database else {}), "schema": schema, "tables": []})
        table: dict[str, Any] = {"name": s.table}
        if s.identifier != s.table:
            table["identifier"] = s.identifier
        entry["tables"].append(table)
    if len(entries) > 1:
        raise OutputError("the tables of a set live in more than one schema; give them one --source-schema")
    return f"# {header()}\n" + yaml_dump({"version": 2, "sources": list(entries.values())}, raw=raw)


def profiles_yml(profile: str, warehouse: Path, secret_env: str, plugin: str) -> str:
    """A dbt-duckdb profile over the spec's warehouse file with the key's plugin; it names the
    environment variable holding the key, never the key."""
    return (f"# {header().split(';')[0]}; the key is read from ${secret_env} when dbt runs, never written here\n"
            + yaml_dump({profile: {"target": "dev", "outputs": {"dev": {
                "type": "duckdb", "path": str(warehouse), "threads": 1,
                "plugins": [{"module": plugin, "config": {"secret_env": secret_env}}]}}}}))


__all__ = ["DEFAULT_PREFIX", "DbtSetOutput", "linked_sql", "person_sql", "write_dbt_set"]
