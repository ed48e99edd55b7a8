"""Engines behind one interface: DuckDB (built in), PostgreSQL and Spark (optional extras)."""

from __future__ import annotations

import importlib.util

from ..errors import BackendError
from .base import Backend

EXTRAS = {"postgres": ("psycopg", "postgres"), "spark": ("pyspark", "spark")}


def connect(engine: str = "duckdb", **options: object) -> Backend:
    """Open a backend by name; an engine whose extra is not installed says which to install."""
    if engine == "duckdb":
        from .duckdb import DuckDBBackend

        return DuckDBBackend(**options)  # type: ignore[arg-type]
    if engine not in EXTRAS:
        raise BackendError(f"unknown engine {engine!r}; the engines are: duckdb, {', '.join(EXTRAS)}")
    module, extra = EXTRAS[engine]
    if importlib.util.find_spec(module) is None:
        raise BackendError(f"engine {engine!r} needs the {module} package: pip install 'deid-sql[{extra}]'")
    if engine == "postgres":
        from .postgres import PostgresBackend

        return PostgresBackend(**options)  # type: ignore[arg-type]
    from .spark import SparkBackend

    return SparkBackend(**options)  # type: ignore[arg-type]


__all__ = ["Backend", "connect"]
