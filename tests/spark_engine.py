"""Spark for the engine suite: test tables are tables of Spark's session catalog, in a database
of their own, so ``[source] table = "db.table"`` names them for every backend of the process.

One Spark runs per process (``deid_sql.backends.spark``): every backend here and every spec
written by ``header()`` uses the same master and the same warehouse folder (a static Spark
setting), so they all share it; the folder is removed when the process exits, and so is Spark's
folder for its other files (``DEID_SQL_SPARK_HOME``, unless already set).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pyarrow as pa
from sqlglot import exp

from tests.engines import Engine, unavailable

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # local[2] needs no other address
MASTER = "local[2]"
WAREHOUSE = Path(tempfile.mkdtemp(prefix="deid_spark_warehouse_"))
CONF = {"spark.sql.warehouse.dir": str(WAREHOUSE)}
atexit.register(shutil.rmtree, WAREHOUSE, ignore_errors=True)
# Spark's other files (its log, a Hive metastore) in a folder of the test run, not the user's cache
HOME = Path(tempfile.mkdtemp(prefix="deid_spark_home_"))
os.environ.setdefault("DEID_SQL_SPARK_HOME", str(HOME))
atexit.register(shutil.rmtree, HOME, ignore_errors=True)


def parquet_study(folder: Path) -> Path:
    """The conftest problem as Parquet files in ``folder`` read by Spark with the default settings (no
    conf, the in-memory catalog), and its spec ``spec.toml`` (a permissive release criterion)."""
    import pyarrow.parquet as pq

    from tests.conftest import DEFAULT_COLUMNS, DEFAULT_QIS, PERMISSIVE_RELEASE, _population_table, _source_table

    pq.write_table(_source_table(), folder / "patients.parquet")
    pq.write_table(_population_table(), folder / "census.parquet")
    spec = folder / "spec.toml"
    spec.write_text('[backend]\nengine = "spark"\nmaster = "local[1]"\n\n[source]\npath = "patients.parquet"\n\n'
                    '[population]\npath = "census.parquet"\ncount = "count"\n' + "".join(DEFAULT_QIS)
                    + DEFAULT_COLUMNS + f"\n[release]\n{PERMISSIVE_RELEASE}\n", encoding="utf-8")
    return spec


def spark_header() -> str:
    """The ``[backend]`` table every Spark test spec uses."""
    conf = ", ".join(f'"{k}" = "{v}"' for k, v in CONF.items())
    return f'[backend]\nengine = "spark"\nmaster = "{MASTER}"\nconf = {{ {conf} }}\n'


class SparkEngine(Engine):
    def __init__(self, name: str, folder: Path) -> None:
        super().__init__(name, folder)
        from deid_sql.backends.spark import SparkBackend
        from deid_sql.errors import BackendError

        try:
            self.backend = SparkBackend(master=MASTER, conf=CONF)
        except BackendError as e:  # no Java, most likely
            unavailable(str(e))
        self.database = f"deid_test_{uuid.uuid4().hex[:8]}"
        self.backend.session.sql(f"CREATE DATABASE `{self.database}`")

    def header(self) -> str:
        return spark_header()

    def load(self, name: str, table: pa.Table) -> str:
        self.backend.register_table(f"load_{name}", table)
        self.backend.session.sql(f"CREATE TABLE `{self.database}`.`{name}` AS SELECT * FROM `load_{name}`")
        return f'table = "{self.database}.{name}"'

    def qualified(self, name: str) -> str:
        return f"{self.database}.{name}"

    def read(self, name: str) -> pa.Table:
        from deid_sql.backends.spark import quoted_table

        return self.backend.execute(exp.select("*").from_(quoted_table(name)))

    def close(self) -> None:
        self.backend.session.sql(f"DROP DATABASE IF EXISTS `{self.database}` CASCADE")
        self.backend.close()
