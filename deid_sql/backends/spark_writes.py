"""Spark outputs checked before the JVM starts, and the staging folders of killed writes.

Starting Spark takes tens of seconds, and Spark's session catalog refuses most names only once
it runs — after ``CREATE TABLE … AS`` has already made the table's folder: a bad name left
``warehouse/"my tbl"__release/part-….parquet`` behind, a sidecar without its release.  So every
name a command will write is checked here, by Spark's identifier rules, before anything starts;
and with Spark's default in-memory catalog (a fresh process knows no table) an output that
exists is a folder in the warehouse, which is read on disk, so a refusal costs no JVM either.

**Spark's identifier rules** (``names.RULES["spark"]``, the table every engine's rules are in):
names come in the spec's and the command line's double-quote syntax (``deid_sql.storage.names``), enter
Spark SQL backquoted, and must be what Spark's session catalog can hold: letters, digits and
``_`` only (no space, no dot, no ``$``; ``INVALID_SCHEMA_OR_RELATION_NAME`` otherwise), folded
to lower case (``spark.sql.caseSensitive`` off, or a Hive metastore).  A double-quoted part asks
for its exact spelling, so one that Spark would fold (``"T"``) is refused rather than silently
becoming ``t``.  Catalogs other than ``spark_catalog`` place their tables themselves: their
names are parsed, not judged.

**Staging folders.**  A table is written under a staging name, counted, judged, then renamed
into place (``SparkBackend.create_table``).  The staging name carries the writer's pid and its
start time (``inflight.start_time``), so a later process can tell the folder of a killed writer
from one still being written: ``sweep_staging`` removes the former.  ``sweep_leftovers`` runs it
on the local warehouse without starting the JVM, and without importing pyspark: it is Spark's
``leftovers`` in the engine registry, which every backend made for a spec runs, connected or not
(``backends.lazy``), so a command served from the cells cache tidies up too; every new Spark
backend sweeps as well.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ..errors import OutputError
from ..storage.inflight import running, start_time
from ..storage.names import RULES, Rules, parse_name


# -- Spark's identifier rules: ``names.RULES["spark"]`` -----------------------------------------------
def spark_rules(case_sensitive: bool = False) -> Rules:
    """Spark's identifier rules (``names.RULES["spark"]``); with ``spark.sql.caseSensitive`` on, names
    keep their case."""
    rules = RULES["spark"]
    return replace(rules, fold="none", fold_quoted=False) if case_sensitive else rules


def spark_output_name(text: str, what: str = "table name", case_sensitive: bool = False) -> list[str]:
    """The parts of a name Spark's session catalog is to create; refused in one line when Spark
    cannot hold it or would fold its case (``names.parse_name`` with Spark's rules)."""
    return list(parse_name(text, spark_rules(case_sensitive), what).parts)


def spark_table(text: str) -> list[str]:
    """The parts of a name Spark is to read (a source table, a session view): its form checked, looked
    up as Spark folds it; a name without a dot or quote is one part as it is."""
    if "." not in text and not text.startswith('"'):
        return [text]
    return list(parse_name(text, RULES["spark"], "table name", strict=False).parts)


# -- staging names and their leftovers ------------------------------------------------------------
STAGING = "deid_staging"
_STAGED = re.compile(rf"{STAGING}_(\d+)_(\d+|x)_[0-9a-f]+")


def staging_name() -> str:
    """A fresh staging table name that says whose it is: ``deid_staging_<pid>_<start>_<random>``."""
    return f"{STAGING}_{os.getpid()}_{start_time(os.getpid()) or 'x'}_{uuid.uuid4().hex[:8]}"


def sweep_staging(warehouse: Path | None) -> list[Path]:
    """Remove the staging folders of writers that are gone, in ``warehouse`` and its databases'
    folders (``*.db``); a live writer's (pid running, same start time) stays.  Says so on stderr."""
    if warehouse is None:
        return []
    removed: list[Path] = []
    try:
        folders = [warehouse, *(p for p in warehouse.glob("*.db") if p.is_dir())]
    except OSError:
        return []
    for folder in folders:
        try:
            children = list(os.scandir(folder))
        except OSError:
            continue
        for child in children:
            m = _STAGED.fullmatch(child.name)
            if not m or not child.is_dir(follow_symlinks=False):
                continue
            if running(int(m.group(1)), None if m.group(2) == "x" else m.group(2)):
                continue
            shutil.rmtree(child.path, ignore_errors=True)
            if not os.path.exists(child.path):
                removed.append(Path(child.path))
    if removed:
        sys.stderr.write(f"removed {len(removed)} leftover staging folder{'s' if len(removed) > 1 else ''} of an "
                         f"interrupted deid-sql run: {', '.join(str(p) for p in removed)}\n")
    return removed


def sweep_leftovers(options: Mapping[str, Any]) -> list[Path]:
    """``sweep_staging`` of the local warehouse a Spark backend with ``options`` uses (the running
    Spark's when one runs in this process), without starting Spark or importing pyspark."""
    spark = sys.modules.get(f"{__package__}.spark")  # loaded: Spark may run here, with its own folder
    running = spark.running_settings() if spark is not None else None
    return sweep_staging(warehouse_of(options, running))


def local_warehouse(location: str | None) -> Path | None:
    """``location`` as a local folder (a path or ``file:`` URI), None for other file systems."""
    if not location:
        return None
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme else location).expanduser().absolute()
    return None


def warehouse_of(options: Mapping[str, Any], running_conf: Mapping[str, str] | None) -> Path | None:
    """The local warehouse folder a Spark backend with ``options`` uses (the running Spark's, once
    started in this process), without starting Spark."""
    from .spark_home import ENV, default_home

    if running_conf is not None:
        return local_warehouse(running_conf.get("spark.sql.warehouse.dir"))
    conf = options.get("conf") or {}
    if conf.get("spark.sql.warehouse.dir"):
        return local_warehouse(str(conf["spark.sql.warehouse.dir"]))
    home = options.get("home") or os.environ.get(ENV) or default_home()
    return Path(home).expanduser().absolute() / "warehouse"


# -- the outputs of a command, before Spark starts ------------------------------------------------
def check_outputs(options: Mapping[str, Any], targets: Sequence[Any], running_conf: Mapping[str, str] | None) -> None:
    """Refuse (one line) a catalog output Spark cannot hold, a view that the in-memory catalog
    would forget when the command ends, or a table whose folder the warehouse already holds
    (without its flag).  ``targets``: ``targets.Target``.  (Dead writers' staging folders are gone
    already: the command's backend swept them when it was made, ``sweep_leftovers``.)"""
    conf = {**(options.get("conf") or {}), **(running_conf or {})}
    persistent = str(conf.get("spark.sql.catalogImplementation", "in-memory")).lower() == "hive"
    case_sensitive = not persistent and str(conf.get("spark.sql.caseSensitive", "false")).lower() == "true"
    warehouse = warehouse_of(options, running_conf)
    for target in targets:
        if target.kind == "file" or target.path is not None or target.name is None:
            continue
        noun = getattr(target, "what", None) or ("view name" if target.kind == "view" else "table name")
        names = target.names()  # the output and its sidecar table
        parts = [spark_output_name(name, noun, case_sensitive) for name in names]
        if target.kind == "view" and not persistent:
            raise OutputError(f"view {target.name!r}: Spark's default catalog lives in memory and forgets the view "
                              f"(and would keep its {names[-1]} record) when this command ends; "
                              f"write a table with materialize --table, or give Spark a persistent catalog "
                              f"([backend] conf \"spark.sql.catalogImplementation\" = \"hive\")")
        if target.replace or warehouse is None or persistent or running_conf is not None:
            continue  # a Spark running here may hold the name in its catalog: its own check says which
        for name, found in zip(names, parts):
            folder = _table_folder(warehouse, found, case_sensitive)
            if folder is not None and folder.exists():
                raise OutputError(f"Spark's warehouse already holds a folder for table {name!r} ({folder}), left by "
                                  f"an earlier run; pass {target.flag} to replace it, or pick another name")


def _table_folder(warehouse: Path, parts: list[str], case_sensitive: bool) -> Path | None:
    """Where the in-memory catalog puts managed table ``parts`` (``[spark_catalog.][db.]table``;
    the ``default`` database is the warehouse itself)."""
    if len(parts) == 3:
        parts = parts[1:]
    fold = (lambda s: s) if case_sensitive else str.lower
    if len(parts) == 1 or fold(parts[0]) == "default":
        return warehouse / fold(parts[-1])
    return warehouse / f"{fold(parts[0])}.db" / fold(parts[-1])


__all__ = ["STAGING", "check_outputs", "local_warehouse", "spark_output_name", "spark_rules", "spark_table",
           "staging_name", "sweep_leftovers", "sweep_staging", "warehouse_of"]
