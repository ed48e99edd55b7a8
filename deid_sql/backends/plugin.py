"""The engines this package provides, registered by name (``registry.ENGINES``).

DuckDB is built in; PostgreSQL and Spark need their extra, named here so ``engine_class`` can
say what to install before importing anything of the engine.  ``leftovers``: what removes the
files a killed run of the engine left, without connecting (``backends.sweep_leftovers``).
"""

from __future__ import annotations

from ..registry import ENGINES

ENGINES.add("duckdb", "deid_sql.backends.duckdb:DuckDBBackend")
ENGINES.add("postgres", "deid_sql.backends.postgres:PostgresBackend", module="psycopg", extra="postgres")
ENGINES.add("spark", "deid_sql.backends.spark:SparkBackend", module="pyspark", extra="spark",
            leftovers="deid_sql.backends.spark_writes:sweep_leftovers")
