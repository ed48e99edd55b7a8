"""Where Spark keeps its files: a folder of deid-sql's own, never the working directory.

Left to itself, Spark writes ``spark-warehouse/`` (the catalog's tables) into the folder the
user runs from, and with a Hive catalog also ``metastore_db/`` and ``derby.log``; its JVM
prints log lines on the terminal.  Here all of them go into one folder, the *Spark home*:

- ``[backend] home = "DIR"`` in the spec (relative to the spec's folder), else
- the environment variable ``DEID_SQL_SPARK_HOME``, else
- ``spark`` in deid-sql's cache folder (``userdirs.cache_dir``): ``$XDG_CACHE_HOME/deid-sql/spark``
  or ``~/.cache/deid-sql/spark`` on Linux (``DEID_SQL_CACHE_DIR/spark`` when that is set).

Inside: ``warehouse/`` (``spark.sql.warehouse.dir``), ``metastore_db/`` and ``derby.log`` (the
embedded Derby metastore of a Hive catalog) and ``spark.log`` (what the JVM writes on its
stderr, unless the engine's log is shown).  Settings the spec's ``conf`` gives win over these.
The folder rules are pure Python, tested without Java; the warehouse's table folders are reached
through the JVM of a session passed in (Hadoop's file system: the warehouse may be on HDFS or an
object store), still without importing pyspark.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import BackendError
from ..storage.userdirs import cache_dir

ENV = "DEID_SQL_SPARK_HOME"
JAVA_OPTIONS = "spark.driver.extraJavaOptions"
LOG = "spark.log"


def default_home() -> Path:
    """``spark`` in deid-sql's cache folder (``userdirs.cache_dir``: ``DEID_SQL_CACHE_DIR``, else the
    platform's user cache folder), beside the cells cache."""
    return cache_dir() / "spark"


def home_folder(given: str | Path | None) -> Path:
    """The Spark home named by the spec (``given``), the environment or the default, made if
    missing (owner-only permissions); the default one must belong to the user running deid-sql,
    since another user's folder there could hold a metastore or log4j settings of theirs."""
    default = given is None and not os.environ.get(ENV)
    folder = Path(given if given is not None else os.environ.get(ENV) or default_home()).expanduser().absolute()
    _make(folder)
    if default and hasattr(os, "getuid") and folder.stat().st_uid != os.getuid():
        raise BackendError(f"Spark's folder {folder} belongs to another user; set {ENV} to a folder of yours "
                           f"(or [backend] home = \"DIR\" in the spec)")
    return folder


def _make(folder: Path) -> None:
    """Every missing level created readable by its owner only (``mkdir -p -m 700``)."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    try:
        for level in reversed(missing):
            level.mkdir(mode=stat.S_IRWXU)
            level.chmod(stat.S_IRWXU)  # mkdir's mode is masked by the umask
    except OSError as e:
        raise BackendError(f"cannot create Spark's folder {folder} ({e.strerror}); set {ENV} or [backend] home "
                           f"to a folder you can write") from None
    if not folder.is_dir():
        raise BackendError(f"Spark's folder {folder} is not a folder; set {ENV} or [backend] home to a folder")


def startup_settings(folder: Path, conf: Mapping[str, str]) -> dict[str, str]:
    """Spark's startup settings placing its files in ``folder``, under ``conf`` (which wins; its
    Java options come after these, and for the JVM the last of a repeated ``-D`` counts)."""
    derby = folder / "metastore_db"
    ours = {"spark.sql.warehouse.dir": str(folder / "warehouse"),
            "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={derby};create=true"}
    java = " ".join(_java_property(k, v) for k, v in (("derby.system.home", folder),
                                                      ("derby.stream.error.file", folder / "derby.log")))
    given = conf.get(JAVA_OPTIONS)
    return {**ours, **conf, JAVA_OPTIONS: f"{java} {given}" if given else java}


def _java_property(key: str, value: Path) -> str:
    """``-Dkey="value"``: Spark splits the Java options at spaces outside double quotes."""
    text = str(value)
    if '"' in text:
        raise BackendError(f"Spark's folder {text!r} holds a double quote, which Java options cannot carry; set "
                           f"{ENV} or [backend] home to another folder")
    return f'-D{key}="{text}"'


def open_log(folder: Path) -> int:
    """``folder/spark.log`` for the JVM's stderr: emptied when Spark starts, then appended to
    (two processes sharing the folder both write whole lines), owner-only."""
    return os.open(folder / LOG, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, stat.S_IRUSR | stat.S_IWUSR)


def table_folder(session: Any, parts: list[str]) -> str | None:
    """The folder Spark's own catalog gives a managed table named by ``parts`` (``[db,] table``
    or ``spark_catalog, db, table``) when that folder exists; None when it does not, and for
    other catalogs, which place their tables themselves.  Joined as Spark joins a database's
    location and a table name (lower case unless ``spark.sql.caseSensitive``)."""
    parts = list(parts)
    if len(parts) == 3 and parts.pop(0).lower() != "spark_catalog":
        return None
    catalog = session.catalog
    database = parts[0] if len(parts) == 2 else catalog.currentDatabase()
    if not catalog.databaseExists(database):
        return None
    name = parts[-1] if session.conf.get("spark.sql.caseSensitive") == "true" else parts[-1].lower()
    path, fs = _hadoop_path(session, catalog.getDatabase(database).locationUri, name)
    return str(path.toString()) if fs.exists(path) else None


def remove_folder(session: Any, location: str) -> bool:
    """Remove ``location`` and what it holds; True when it is gone."""
    path, fs = _hadoop_path(session, location)
    return not fs.exists(path) or bool(fs.delete(path, True))


def _hadoop_path(session: Any, location: str, child: str | None = None) -> tuple[Any, Any]:
    """A Hadoop ``Path`` (``location``, or ``child`` in it) and its file system."""
    jvm = session.sparkContext._jvm
    fs_path = jvm.org.apache.hadoop.fs.Path
    path = fs_path(jvm.java.net.URI(location))
    if child is not None:
        path = fs_path(path, child)
    return path, path.getFileSystem(session.sparkContext._jsc.hadoopConfiguration())
