"""Engines behind one ``Backend`` interface: DuckDB (built in), PostgreSQL and Spark (optional extras).

Each engine is registered in ``registry.ENGINES`` (``plugin``) and imported only when used.
Nothing here imports the compiler, and nothing above this package names an engine: a job asks
the backend (``catalog``, ``file_formats``, ``python_udfs``, ``raise_error``).

Modules:

- ``base.py``: the ``Backend`` interface: relations, temp views, execute → Arrow, streams, UDFs, views and
  tables (atomic, row-counted, ``finish`` hook; ``create_tables`` for tables that land together: a release
  set), ``head``, ``raise_error``, ``pseudonymize``, ``checksum``, ``text_collations``, ``refuse_taken``,
  capabilities; ``literal_rows``, ``fingerprint``
- ``dbt_duckdb.py``: the dbt-duckdb plugin registering ``deid_pseudonym``, ``deid_pseudonym_int`` and
  ``deid_shift_offset`` from the key in ``secret_env`` at ``dbt run`` time; the one module that imports dbt
- ``duckdb.py``: DuckDB, the default engine: reads CSV/Parquet/DuckDB files in place, registers the UDFs of
  ``udfs/``
- ``lazy.py``: ``LazyBackend``: connects on the first call that needs the engine (a load from the cells
  cache starts none); made, it sweeps the engine's leftovers
- ``plugin.py``: registers ``duckdb``, ``postgres``, ``spark`` in ``registry.ENGINES`` (with the Python
  package and pip extra each needs, and Spark's ``leftovers`` sweep)
- ``postgres.py``: PostgreSQL (psycopg 3): sources and outputs in the server, ``python_udfs = False``, HMAC
  in SQL
- ``postgres_refresh.py``: ``--overwrite`` in PostgreSQL: staged, judged and swapped in one
  transaction, keeping owner, grants, comment and dependent views, and (``Kept``) column comments and
  grants, constraints, indexes, triggers, storage parameters, row security, policies and publications
- ``spark.py``: Apache Spark (PySpark 4): one Spark context per process, a session per backend, outputs in
  the session catalog, ``python_udfs = False``
- ``spark_arrow.py``: Spark results as Arrow: types under DuckDB's names, batches one partition at a time
- ``spark_home.py``: where Spark keeps warehouse, metastore and log: a folder of deid-sql's own, never the
  working directory
- ``spark_sets.py``: Spark's all-or-none writes of several tables (a table and its record, a release set)
  without transactions: staged, judged, swapped in by renames with the record placed last, undone on
  failure; what a killed writer leaves is ``deid_staging_*``, swept later
- ``spark_writes.py``: Spark's identifier rules and output checks before the JVM starts; staging folders of
  killed writers swept (``sweep_leftovers``, without pyspark)

May import: ``contract``, ``errors``, ``interrupts``, ``registry``, ``sqltext``, ``storage``, ``udfs``.
Imported by: ``channels``, ``cli``, ``dbt``, ``evaluate``, ``ledger``, ``loading``, ``policyfile``, ``problem``,
    ``release``, ``sets``, ``starter``.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from typing import Any

from ..errors import BackendError
from ..registry import ENGINES, Entry
from .base import Backend

_engine_logs = False
#: the dbt adapters (by sqlglot dialect) whose connection a deid-sql plugin gives the key's functions at
#: ``dbt run`` time, reading the key from the environment: their models hold no key (``dbt/sets.py``)
DBT_KEY_PLUGINS = {"duckdb": "deid_sql.backends.dbt_duckdb"}


def dbt_key_plugin(dialect: str) -> str | None:
    """The module of the dbt plugin that computes pseudonyms and date offsets on ``dialect``'s
    adapter, or None where no plugin can (the models' SQL would have to hold the key)."""
    return DBT_KEY_PLUGINS.get(dialect)


def show_engine_logs(on: bool) -> None:
    """Let an engine that logs on the terminal (Spark's JVM) do so (``--verbose``); by default
    its log goes to a file of its own, so a command's stderr holds deid-sql's lines only.  Read
    when the engine starts (once per process)."""
    global _engine_logs
    _engine_logs = on


def engine_logs_shown() -> bool:
    return _engine_logs


def engine_class(engine: str) -> type[Backend]:
    """The backend class of ``engine`` (its capabilities, without connecting), from the engine
    registry (``registry.ENGINES``: each engine registers itself in ``backends/plugin.py``); an
    engine whose extra is not installed says how to install it, from PyPI and from a clone."""
    entry = check_engine(engine)
    backend: type[Backend] = entry.load()
    return backend


def check_engine(engine: str) -> Entry:
    """``engine``'s registry entry, once it is known to be registered and its extra installed
    (``BackendError`` otherwise, saying how to install it), without importing the engine."""
    if engine not in ENGINES:
        raise BackendError(ENGINES.unknown(engine))
    entry = ENGINES.entry(engine)
    module, extra = entry.get("module"), entry.get("extra")
    if module is not None and importlib.util.find_spec(module) is None:
        raise BackendError(f"engine {engine!r} needs the {module} package: pip install 'deid-sql[{extra}]' "
                           f"(from a clone of the repository: pip install '.[{extra}]')")
    return entry


def sweep_leftovers(engine: str, options: Mapping[str, Any]) -> None:
    """Remove what killed runs of ``engine`` left behind (Spark's staging folders in its warehouse),
    without connecting: the registry entry's ``leftovers`` (``"module:function"``, given the backend's
    options; it says on stderr what it removed).  Run whenever a backend is made for a spec, connected
    or not, so every command on the spec tidies up; tidying never stops the command."""
    target = ENGINES.entry(engine).get("leftovers") if engine in ENGINES else None
    if not target:
        return
    module, _, function = str(target).partition(":")
    try:
        getattr(importlib.import_module(module), function)(options)
    except Exception:  # noqa: BLE001 - tidying must never stop the command the user asked for
        pass


def connect(engine: str = "duckdb", **options: object) -> Backend:
    """Open a backend by name; an engine whose extra is not installed says which to install."""
    return engine_class(engine)(**options)


def local() -> Backend:
    """An in-process backend for files this process wrote (reading a written release back to
    measure it), whatever engine the spec runs on."""
    return connect("duckdb")


__all__ = ["Backend", "connect", "engine_class", "engine_logs_shown", "local", "show_engine_logs",
           "sweep_leftovers"]
