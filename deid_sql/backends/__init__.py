"""Engines behind one interface: DuckDB (built in), PostgreSQL and Spark (optional extras)."""

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
