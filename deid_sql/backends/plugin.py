"""The engines this package provides, registered by name (``registry.ENGINES``).

DuckDB is built in; PostgreSQL and Spark need their extra, named here so ``engine_class`` can
say what to install before importing anything of the engine.
"""

from __future__ import annotations

from ..registry import ENGINES

ENGINES.add("duckdb", "deid_sql.backends.duckdb:DuckDBBackend")
ENGINES.add("postgres", "deid_sql.backends.postgres:PostgresBackend", module="psycopg", extra="postgres")
ENGINES.add("spark", "deid_sql.backends.spark:SparkBackend", module="pyspark", extra="spark")
