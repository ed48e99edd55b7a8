"""The tables a generated dbt model must never replace, refused when it is written and when dbt runs.

dbt builds a model ``m`` by creating ``m__dbt_tmp``, renaming an existing ``m`` to
``m__dbt_backup``, renaming the new one to ``m`` and dropping the backup (it first drops any
``m__dbt_tmp`` and ``m__dbt_backup`` left over).  A model named like one of its own inputs (the
source the release was judged on, the census the risk was computed with, any table of a set)
therefore destroys that input on the first ``dbt run``: the raw rows are replaced by the release.

One rule, checked twice (``collides``: the same name ignoring case, in the same schema):

- when ``deid-sql dbt`` writes the files (``refuse_replacing``): an input that lives in the
  profile's schema, where dbt writes the models (a source without ``--source-schema`` reads
  ``{{ target.schema }}``), is compared with every model's three names; a match is refused in
  one line and nothing is written;
- when ``dbt run`` compiles the model (``guard``): where the schema is known only then (an input
  in a named schema that may be the profile's, a project's ``+schema`` or ``+alias``), the first
  line of every model calls the macro ``deid_sql_refuse_inputs`` (``GUARD_MACRO``, in the shared
  macros file) with ``this`` and every input's relation as dbt resolves it; on a match it raises
  a compilation error, so dbt never reaches the statements that would replace the input.

Case is ignored on every adapter: DuckDB's and Spark's catalogs ignore it, PostgreSQL and
Snowflake fold unquoted names, and a project's ``quoting`` config decides whether dbt quotes the
model's name; the one name refused without need is a PostgreSQL table that differs from the
model's name in case alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import OutputError
from ..storage.names import parse_name, rules_for
from ..storage.tableref import TableRef
from .text import jinja_str

TMP_SUFFIX = "__dbt_tmp"  # dbt's make_intermediate_relation
BACKUP_SUFFIX = "__dbt_backup"  # dbt's make_backup_relation
_TARGET_SCHEMA = re.compile(r"\{\{-?\s*target\.schema\s*-?\}\}")

GUARD_MACRO = """
{% macro deid_sql_refuse_inputs(relation, inputs) %}
{#- Stop dbt run before it builds `relation` when that relation, or the temporary or backup one dbt
    makes on the way, is one of the model's inputs (pairs of a relation and what it is): dbt would
    replace or drop the data the release was judged on.  Names are compared ignoring case. -#}
{%- if execute -%}
{%- set built = [relation, make_intermediate_relation(relation), make_backup_relation(relation, 'table')] -%}
{%- for input, what in inputs -%}
{%- for made in built -%}
{%- if (made.identifier or '') | lower == (input.identifier or '') | lower
      and (made.schema or '') | lower == (input.schema or '') | lower
      and (made.database is none or input.database is none or made.database | lower == input.database | lower) -%}
{{ exceptions.raise_compiler_error('deid-sql: model ' ~ relation.identifier ~ ' would '
   ~ ('replace ' if loop.first else 'drop ') ~ what ~ ' ' ~ input
   ~ (' (dbt\\'s name for the model while it builds it: ' ~ made.identifier ~ ')' if not loop.first else '')
   ~ ', the data its release was judged on; the model was not built: build it in another schema, or remove its '
   ~ 'files and rerun deid-sql dbt with another --model (--prefix for a set)') }}
{%- endif -%}
{%- endfor -%}
{%- endfor -%}
{%- endif -%}
{% endmacro %}
"""


@dataclass(frozen=True)
class Input:
    """A table the models read or the release was judged on, as the warehouse names it."""

    what: str                 # in messages: "the source table", "the population table", …
    identifier: str           # the table's name in the catalog (no quotes)
    schema: str | None        # None: the profile's schema, where dbt also writes the models
    database: str | None
    relation: str             # a Jinja expression of its relation when dbt runs


def source_input(what: str, name: str, table: str, identifier: str, schema: str | None,
                 database: str | None) -> Input:
    """A dbt source (``{{ source(name, table) }}``) as an input: at run time its relation is the
    one dbt resolves (the user's own declaration of the source included)."""
    if schema is not None and _TARGET_SCHEMA.fullmatch(schema.strip()):
        schema = None  # --source-schema '{{ target.schema }}' is the profile's schema
    return Input(what, identifier, schema, database, f"source({jinja_str(name)}, {jinja_str(table)})")


def name_parts(text: str, engine: str | None) -> tuple[str, ...]:
    """``text`` as the catalog of ``engine`` holds it (``names.parse_name``: ``schema.table``, quoted
    parts, a catalog), Spark's own catalog dropped (``spark_catalog.db.t`` is ``db.t``)."""
    rules = rules_for(engine)
    parts = parse_name(text, rules, "dbt source table", strict=False).parts
    if len(parts) == 3 and rules.own_catalog is not None and parts[0].lower() == rules.own_catalog:
        parts = parts[1:]
    return parts


def table_parts(ref: TableRef, engine: str | None, fallback: str) -> tuple[str, ...]:
    """The name of the table ``ref`` reads, as the warehouse's catalog holds it: a DuckDB file's
    table as written (the DuckDB engine reads it as one name), an engine's own table parsed by its
    rules (``name_parts``), a file's stem (the table it is loaded into), else ``fallback``."""
    if ref.table and ref.format == "duckdb":
        return (ref.table,)
    if ref.table:
        return name_parts(ref.table, engine)
    return (ref.path.stem if ref.path is not None else fallback,)


def table_input(what: str, ref: TableRef | None, engine: str | None, warehouse: TableRef) -> Input | None:
    """A table of the spec that no model reads but the release depends on (the census), when it
    lives where the models are built: an engine's own table, or a table of the source's DuckDB
    file.  A file, or a table of another DuckDB file, is out of dbt's reach (None)."""
    if ref is None or ref.table is None:
        return None
    if ref.path is not None and (ref.format != "duckdb" or warehouse.path is None
                                 or ref.path.resolve() != warehouse.path.resolve()):
        return None
    parts = table_parts(ref, engine, ref.table)
    identifier, schema = parts[-1], parts[-2] if len(parts) > 1 else None
    relation = (f"api.Relation.create(database=target.database, "
                f"schema={jinja_str(schema) if schema is not None else 'target.schema'}, "
                f"identifier={jinja_str(identifier)})")
    return Input(what, identifier, schema, None, relation)


def built_names(model: str) -> list[str]:
    """The relations dbt writes or drops while it builds ``model``: the model, its temporary and its backup."""
    return [model, model + TMP_SUFFIX, model + BACKUP_SUFFIX]


def collides(built: str, table: Input) -> bool:
    """Whether dbt writing ``built`` in the profile's schema certainly hits ``table``: the same
    name ignoring case, and ``table`` in the profile's schema (no schema or database of its own)."""
    return table.schema is None and table.database is None and built.lower() == table.identifier.lower()


def refuse_replacing(models: Sequence[str], inputs: Sequence[Input], option: str) -> None:
    """Refuse (one line) a model that ``dbt run`` would build over one of ``inputs`` in the
    profile's schema; ``option`` names the option that chose the models' names."""
    for model in models:
        for i, built in enumerate(built_names(model)):
            for table in inputs:
                if collides(built, table):
                    how = "replace" if i == 0 else "drop"
                    why = "" if i == 0 else f" (dbt's name for the model while it builds it is {built})"
                    raise OutputError(f"model {model} would {how} {table.what} {table.identifier} in the same "
                                      f"schema when dbt runs{why}; choose another {option}; nothing was written")


def guard(inputs: Sequence[Input]) -> str:
    """The model's first line after its config: the run-time refusal (``GUARD_MACRO``)."""
    pairs = ", ".join(f"({i.relation}, {jinja_str(i.what)})" for i in inputs)
    return f"{{{{ deid_sql_refuse_inputs(this, [{pairs}]) }}}}"


__all__ = ["BACKUP_SUFFIX", "GUARD_MACRO", "TMP_SUFFIX", "Input", "built_names", "collides", "guard", "name_parts",
           "refuse_replacing", "source_input", "table_input", "table_parts"]
