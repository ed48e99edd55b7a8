"""The files of a dbt model: model SQL, label tests, model/source/project yml, generic tests."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from ..compiler.compile import DIALECTS, SUPPRESSED, to_sql
from ..domains.recoding import Recoding
from ..errors import DeidError, DialectError
from ..evaluate import Metrics
from ..problem import Problem
from ..release.figures import FLAG
from ..release.plan import ReleasePlan
from ..spec.file import QISpec
from .inputs import GUARD_MACRO, Input, guard, name_parts, source_input, table_input, table_parts
from .text import header, jinja_str, jinja_text, splice_source, yaml_dump

MATERIALIZATIONS = ("table", "view")
# dbt adapters whose SQL dialect sqlglot names differently
ADAPTER_DIALECTS = {"sqlserver": "tsql", "synapse": "tsql", "glue": "spark", "impala": "hive"}
SENTINEL = "deid_sql_source_7f3c9a1e5b2d4c6f8e0a"  # compiled as the source table, then replaced
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

TESTS_SQL = """\
{# HEADER #}
{#- Each test also takes its arguments as one `arguments` mapping: dbt before 1.10.5 passes the
    yml's `arguments:` block through as a keyword instead of unpacking it. -#}

{% macro deid_sql_outside_labels(model, column_name, labels) %}
{#- Rows whose value is NULL or not in `labels` (SQL literals); the per-model label tests call it. -#}
{%- set column = adapter.quote(column_name) -%}
select {{ column }} as value, count(*) as n_records
from {{ model }}
where {{ column }} is null or {{ column }} not in ({{ labels }})
group by {{ column }}
{% endmacro %}

{% test deid_sql_same_row_count(model, compare_model=none, arguments=none) %}
{#- One row when the model's row count differs from compare_model's. -#}
{%- set compare_model = compare_model or (arguments or {}).get('compare_model') -%}
with model_rows as (select count(*) as n from {{ model }}),
compare_rows as (select count(*) as n from {{ compare_model }})
select model_rows.n as model_rows, compare_rows.n as compare_rows
from model_rows cross join compare_rows
where model_rows.n <> compare_rows.n
{% endtest %}

{% test deid_sql_min_group_size(model, columns=none, k=none, suppressed=none, arguments=none) %}
{#- The groups of equal values in `columns` with fewer than k rows (rows flagged `suppressed` are no group). -#}
{%- set columns = columns or (arguments or {}).get('columns') -%}
{%- set k = k or (arguments or {}).get('k') -%}
{%- set suppressed = suppressed or (arguments or {}).get('suppressed') -%}
{%- set quoted = [] -%}
{%- for c in columns %}{% do quoted.append(adapter.quote(c | string)) %}{% endfor -%}
select {{ quoted | join(', ') }}, count(*) as n_records
from {{ model }}
{% if suppressed %}where not {{ adapter.quote(suppressed | string) }}
{% endif -%}
group by {{ quoted | join(', ') }}
having count(*) < {{ k | int }}
{% endtest %}
""" + GUARD_MACRO


@dataclass(frozen=True)
class Source:
    """The dbt source: its name, the dbt table name, the identifier in the warehouse, the schema
    (None: the profile's), the database (None: the profile's)."""

    name: str
    table: str
    identifier: str
    schema: str | None
    database: str | None = None

    def input(self, what: str) -> Input:
        """The source as an input the models must never replace (``inputs``)."""
        return source_input(what, self.name, self.table, self.identifier, self.schema, self.database)


# -- names -----------------------------------------------------------------------------------

def dbt_dialect(name: str) -> str:
    """The sqlglot dialect for a dialect or dbt adapter name (``dbt-postgres`` → postgres)."""
    key = name.strip().lower()
    key = key.removeprefix("dbt-")
    key = ADAPTER_DIALECTS.get(key, key)
    try:
        Dialect.get_or_raise(key)
    except ValueError:
        raise DialectError(f"unknown SQL dialect or dbt adapter {name!r}; try one of {', '.join(DIALECTS)} "
                           f"(or an adapter name such as sqlserver)") from None
    return key


def check_name(name: str, what: str, option: str) -> None:
    if not _NAME.match(name):
        raise DeidError(f"{what} {name!r} must be letters, digits and underscores, not starting with a digit; "
                        f"choose another with {option}")


def dbt_name(text: str) -> str:
    """A dbt-friendly name for a table: lowercase letters, digits and underscores."""
    name = re.sub(r"[^0-9a-z_]+", "_", text.lower()).strip("_") or "source"
    return name if not name[0].isdigit() else f"t_{name}"


def warehouse_source(name: str, parts: Sequence[str], schema: str | None) -> Source:
    """A table the models read as a dbt source, from its name's ``parts`` as the catalog holds them
    (``inputs.table_parts``); ``schema`` (``--source-schema``, Jinja allowed) replaces the name's own."""
    identifier = parts[-1]
    database = parts[-3] if len(parts) > 2 else None
    return Source(name, dbt_name(identifier), identifier,
                  schema if schema is not None else parts[-2] if len(parts) > 1 else None, database)


def source_of(problem: Problem, name: str, table: str | None, schema: str | None, dialect: str) -> Source:
    """The source the model reads: ``--source-table`` (a name of the warehouse, by ``dialect``'s
    rules), else the spec's table (by its engine's rules), else the source file's stem."""
    check_name(name, "dbt source name", "--source-name")
    if table is not None:
        return warehouse_source(name, name_parts(table, dialect), schema)
    return warehouse_source(name, table_parts(problem.spec.source, problem.spec.backend.engine, "source"), schema)


def spec_inputs(problem: Problem, sources: Sequence[tuple[str, Source]], own_table: bool) -> list[Input]:
    """Every table the models must never replace: the ``sources`` they read (with what each is),
    the census (``[population]``) where dbt can reach it, and — ``own_table``, when the model reads
    another table than the spec (``--source-table``) — the spec's own source table."""
    spec = problem.spec
    engine = spec.backend.engine
    found = [s.input(what) for what, s in sources]
    extra = [table_input("the population table", spec.population, engine, spec.source)]
    if own_table:
        extra.append(table_input("the spec's source table", spec.source, engine, spec.source))
    return found + [i for i in extra if i is not None]


def model_head(materialized: str, inputs: Sequence[Input]) -> str:
    """A model file's first lines: the header, the config, and the run-time refusal to build over
    one of its ``inputs`` (``inputs.guard``)."""
    return (f"{{# {header()} #}}\n{{{{ config(materialized={jinja_str(materialized)}) }}}}\n"
            f"{guard(inputs)}\n\n")


# -- the model -------------------------------------------------------------------------------

def model_sql(problem: Problem, plan: ReleasePlan, source: Source, dialect: str, materialized: str,
              inputs: Sequence[Input]) -> str:
    sql = problem.compile(plan, dialect=dialect, table=SENTINEL)
    call = f"{{{{ source({jinja_str(source.name)}, {jinja_str(source.table)}) }}}}"
    body = splice_source(sql, to_sql(exp.Table(this=exp.to_identifier(SENTINEL, quoted=True)), dialect), call)
    return f"{model_head(materialized, inputs)}{body}\n"


def label_tests(model: str, qis: Sequence[QISpec]) -> list[str]:
    """Per QI, the name of the model's generic test of its labels (``deid_sql_labels__<model>__<qi>``)."""
    names: list[str] = []
    for i, qi in enumerate(qis):
        name = f"deid_sql_labels__{model}__{dbt_name(qi.name)}"
        names.append(name if name not in names else f"{name}_{i}")
    return names


def labels_sql(problem: Problem, plan: ReleasePlan, model: str, dialect: str) -> str:
    recoding = plan.recoding
    parts = [f"{{# {header()} #}}",
             "{# Per QI a test that every value is one the policy can give it (the labels as SQL literals). #}"]
    for i, name in enumerate(label_tests(model, problem.spec.qis)):
        labels = list(recoding.qis[i].labels) + ([SUPPRESSED] if plan.suppression is not None else [])
        literals = [to_sql(exp.Literal.string(label), dialect) for label in dict.fromkeys(labels)]
        lines, line = [], ""
        for lit in literals:
            if line and len(line) + len(lit) > 100:
                lines.append(line + ",")
                line = ""
            line = f"{line}, {lit}" if line else lit
        lines.append(line)
        parts.append(f"\n{{% test {name}(model, column_name) -%}}\n{{%- set labels -%}}\n"
                     f"{jinja_text(chr(10).join(lines))}\n{{%- endset -%}}\n"
                     "{{ deid_sql_outside_labels(model, column_name, labels) }}\n{%- endtest %}")
    return "\n".join(parts) + "\n"


# -- yml -------------------------------------------------------------------------------------

def model_yml(problem: Problem, plan: ReleasePlan, metrics: Metrics, source: Source, model: str, root: Path,
              k: int | None, extra_tests: Sequence[str] = ()) -> str:
    spec = problem.spec.path.resolve()
    try:
        spec_text = os.path.relpath(spec, root.resolve())
    except ValueError:  # another drive
        spec_text = str(spec)
    groups = generalized_groups(problem, plan.recoding)
    tests: list[Any] = [{"deid_sql_same_row_count": {"arguments": {
        "compare_model": f"source({jinja_str(source.name)}, {jinja_str(source.table)})"}}}]
    if k is not None:
        arguments: dict[str, Any] = {"columns": [q.column for q in problem.spec.qis], "k": k}
        if plan.suppression is not None:
            arguments["suppressed"] = FLAG
        tests.append({"deid_sql_min_group_size": {"arguments": arguments}})
    tests.extend(extra_tests)
    columns = []
    tests_of = label_tests(model, problem.spec.qis)
    for i, qi in enumerate(problem.spec.qis):
        shown = groups.get(qi.name)
        rules = ("generalized: " + ", ".join(shown[:10]) + (", …" if len(shown) > 10 else "")) if shown else "kept"
        columns.append({
            "name": qi.column,
            "description": f"quasi-identifier {qi.name}, {rules}",
            "data_tests": [tests_of[i]],
        })
    doc = {"version": 2, "models": [{
        "name": model,
        "description": f"{source.identifier} de-identified by deid-sql: {plan.readable}",
        "config": {"meta": {
            "deid_policy": plan.text or plan.levels or plan.readable,
            **({"deid_levels": plan.levels} if plan.levels is not None else {}),
            **({"deid_suppression": plan.suppression.rule} if plan.suppression is not None else {}),
            "deid_rules": plan.readable,
            "deid_risk": metrics.risk,
            "deid_loss": metrics.loss,
            "deid_kl": metrics.kl,
            "deid_k": metrics.k,
            "deid_spec": spec_text,
        }},
        "data_tests": tests,
        "columns": columns,
    }]}
    return f"# {header()}\n" + yaml_dump(doc)


def source_yml(source: Source) -> str:
    table: dict[str, Any] = {"name": source.table}
    if source.identifier != source.table:
        table["identifier"] = source.identifier
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", source.identifier):
        table["quoting"] = {"identifier": True}
    entry: dict[str, Any] = {"name": source.name, **({"database": source.database} if source.database else {}),
                             "schema": source.schema if source.schema is not None else "{{ target.schema }}",
                             "tables": [table]}
    doc = {"version": 2, "sources": [entry]}
    return f"# {header()}\n" + yaml_dump(doc, raw={entry["schema"]})  # the schema may be Jinja on purpose


def project_yml(root: Path, profile: str) -> str:
    name = dbt_name(root.resolve().name)
    doc = {"name": name, "version": "1.0.0", "config-version": 2, "profile": profile,
           "model-paths": ["models"], "macro-paths": ["macros"],
           # the tests' `arguments:` blocks without a deprecation warning on dbt 1.10.5-1.10.9
           "flags": {"send_anonymous_usage_stats": False, "require_generic_test_arguments_property": True}}
    return f"# {header().split(';')[0]}; edit freely, it is never replaced\n" + yaml_dump(doc)


def generalized_groups(problem: Problem, recoding: Recoding) -> dict[str, list[str]]:
    """Per QI, the labels of the groups wider than one value, with their values when the label does
    not say them (a hierarchy's own labels, values that are not adjacent)."""
    out: dict[str, list[str]] = {}
    for name, domain, qrec in zip(problem.spec.qi_names, problem.domains, recoding.qis):
        shown = []
        for g, label in enumerate(qrec.labels):
            members = qrec.members(g)
            if members.size < 2:
                continue
            if qrec.contiguous and label == domain.interval_label(int(members[0]), int(members[-1])):
                shown.append(domain.readable_group(int(members[0]), int(members[-1])))
            else:
                values = ", ".join(domain.text(int(p)) for p in members[:5]) + (", …" if members.size > 5 else "")
                shown.append(f"{label} ({values})")
        if shown:
            out[name] = shown
    return out
