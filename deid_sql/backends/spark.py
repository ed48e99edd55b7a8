"""Apache Spark (PySpark 4, classic mode): the rows stay in Spark; only cells come back.

Sources are tables of Spark's session catalog (``[source] table = "db.table"``) or
Parquet/CSV files read by Spark; outputs (``--table``, views, channel releases) go into
the session catalog.  Queries are the compiler's sqlglot expressions rendered in the
``spark`` dialect and run with ``spark.sql``; results come back as Arrow.

One Spark context per process.  Starting the JVM takes seconds, so the first backend
creates the process's root ``SparkSession`` (``getOrCreate``, so a session the caller
already started is adopted) and every backend works in its own ``newSession()`` of it:
temporary views and SQL settings are private to a backend, the catalog and the executors
are shared.  ``close()`` drops the backend's temporary views and cached data but never
stops Spark, which other backends may be using; Spark stops when the process exits (or
call ``stop_spark()``).  Static settings (master, driver memory, warehouse folder, …) are
fixed by the first backend; a later backend asking for different ones is refused rather
than silently ignored.  Spark's files (warehouse, metastore, log) go into the folder of
``spark_home``, never the working directory, and the JVM's stderr into its ``spark.log``
unless ``backends.show_engine_logs`` (``--verbose``) asked for it on the terminal.

The default catalog lives in memory, so a table written by an earlier process is gone from it
while its folder stays in the warehouse, and Spark refuses to create a table over an existing
folder (``LOCATION_ALREADY_EXISTS``).  Such a *leftover* folder (no catalog table owns it)
counts as an existing table: refused without ``replace``, removed with it, once the new rows
are written and counted, right before the new table takes its place.

Spark runs no Python functions here (``python_udfs`` False): the SQL reference evaluator runs
in a local DuckDB over the cells (``Problem._sql_backend``), which moves no rows and needs no
Python workers on the executors.

Spark 4 runs with ANSI SQL on by default, where ``CAST`` of a bad value raises; the
loader's ``TRY_CAST`` (out-of-domain detection) is therefore rendered as Spark's own
``TRY_CAST`` rather than sqlglot's default plain ``CAST`` (``sqltext.to_sql``, for compiled SQL
and dbt models too), and ANSI stays as configured.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pyarrow as pa
from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql import types as T
from sqlglot import exp

from ..contract.pseudonym import INTEGER_DIGITS, pads
from ..errors import BackendError, OutputError
from ..sqltext import to_sql
from ..storage.tableref import TableRef
from . import engine_logs_shown
from .base import Backend, Finish, SetFinish, SetTable, literal_rows
from .spark_arrow import arrow_schema, partition_batches, type_name
from .spark_home import home_folder, open_log, remove_folder, startup_settings, table_folder
from .spark_sets import create_tables
from .spark_writes import check_outputs, local_warehouse, spark_output_name, spark_table, sweep_staging

# Fixed when Spark starts (the first backend of the process); a backend's conf overrides them (and so do
# spark_home's folder settings).  No web UI, no progress bars.  No relation cache: each backend is its own
# session, and a session that cached a table's file list would go on reading files that another session
# (or process) has since replaced.
STARTUP_DEFAULTS = {"spark.app.name": "deid-sql", "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                    "spark.sql.filesourceTableRelationCacheSize": "0"}
# per backend session
SESSION_DEFAULTS = {"spark.sql.shuffle.partitions": "4"}

_lock = threading.Lock()
_root: SparkSession | None = None
_root_session_keys: frozenset[str] = frozenset()  # runtime settings the first backend gave the root
_root_settings: dict[str, str] = {}  # settings Spark started with, as given (Spark normalizes some)
_root_home: Path | None = None  # spark_home's folder of the Spark we started (None: the caller's Spark)
_counter = itertools.count()

# PySpark logs every analysis error (with a JVM stack) before raising it; we raise one line instead
for _name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)


def quoted_table(name: str) -> exp.Table:
    """``db.table`` (or ``table``, ``catalog.db.table``) with every part quoted; parts in the
    double-quote syntax of ``deid_sql.storage.names`` (``"my.db"."t"``), parsed by ``spark_writes``."""
    ids = [exp.to_identifier(p, quoted=True) for p in spark_table(name)]
    return exp.Table(this=ids[-1], db=ids[-2] if len(ids) > 1 else None, catalog=ids[0] if len(ids) > 2 else None)


def _spark(master: str | None, conf: Mapping[str, str], home: str | Path | None) -> SparkSession:
    """The process's root session: started on first use, then shared."""
    global _root, _root_session_keys, _root_settings, _root_home
    with _lock:
        if _root is not None and _root.sparkContext._jsc is None:  # stopped meanwhile (e.g. by the caller)
            _root = None
        if _root is None:
            from pyspark import SparkContext

            given: dict[str, str] = {}
            folder = None
            try:
                if SparkContext._active_spark_context is None:  # start Spark with our settings
                    folder = home_folder(home)
                    given = startup_settings(folder, {**STARTUP_DEFAULTS, **conf})
                    _start(master, given, folder)
                root = SparkSession.builder.getOrCreate()
            except (PySparkException, Py4JError, OSError, RuntimeError) as e:
                raise BackendError(f"cannot start Spark with master {master or 'local[*]'!r} ({_first_line(e)}); "
                                   f"Spark needs Java 17 or later (java on PATH or JAVA_HOME) and a valid "
                                   f"[backend] master such as \"local[2]\"") from None
            _root, _root_home = root, folder
            _root_session_keys = frozenset(k for k in given if root.conf.isModifiable(k))
            _root_settings = {**dict(root.sparkContext.getConf().getAll()), **given, **conf}
        return _root


def _start(master: str | None, settings: Mapping[str, str], folder: Path) -> None:
    """Start the JVM and the process's Spark context.  The JVM's stdout and stderr (its log4j
    lines, Java's own warnings, "Setting default log level …") go to ``folder/spark.log``
    unless the engine's log is shown; Spark's errors still reach the caller as exceptions."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    spark_conf = SparkConf()
    if master:
        spark_conf.setMaster(master)
    spark_conf.setAll(list(settings.items()))
    gateway = None
    if not engine_logs_shown():
        log = open_log(folder)
        try:
            gateway = launch_gateway(spark_conf, popen_kwargs={"stdout": log, "stderr": log})
        finally:
            os.close(log)  # the JVM holds its own copy
    SparkContext(conf=spark_conf, gateway=gateway)


def running_settings() -> dict[str, str] | None:
    """The catalog settings of the Spark running in this process (None when none runs): where its
    warehouse is and how its catalog treats names, for the checks made without a backend."""
    if _root is None or _root.sparkContext._jsc is None:
        return None
    return {k: v for k in ("spark.sql.warehouse.dir", "spark.sql.catalogImplementation", "spark.sql.caseSensitive")
            if (v := _root.conf.get(k, None)) is not None}


def stop_spark() -> None:
    """Stop the process's Spark context (every backend using it stops working)."""
    global _root
    with _lock:
        if _root is not None:
            _root.stop()
            _root = None


class SparkBackend(Backend):
    """A private session (temporary views, SQL settings) of the process's shared Spark."""

    dialect = "spark"
    title = "Spark"
    file_formats = frozenset({"csv", "parquet"})
    python_udfs = False

    def __init__(self, master: str | None = None, conf: Mapping[str, str] | None = None,
                 home: str | Path | None = None) -> None:
        """``home``: the folder for Spark's files (``spark_home``; default the environment's or the
        user's cache folder), fixed when Spark starts like the master."""
        conf = {str(k): str(v) for k, v in (conf or {}).items()}
        root = _spark(master, conf, home)
        context = root.sparkContext
        if master and context.master != master:
            raise BackendError(f"Spark already runs in this process with master {context.master!r}, not "
                               f"{master!r}; a process has one Spark context: use the same [backend] master "
                               f"or another process")
        if home is not None and _root_home is not None and Path(home).expanduser().absolute() != _root_home:
            raise BackendError(f"Spark already runs in this process with its folder {str(_root_home)!r}, not "
                               f"{str(home)!r}; it is fixed when Spark starts: use the same [backend] home or "
                               f"another process")
        try:
            self.session = root.newSession()
            for key in _root_session_keys - set(conf):  # the first backend's settings are its own
                self.session.conf.unset(key)
            for key, value in {**SESSION_DEFAULTS, **conf}.items():
                if self.session.conf.isModifiable(key):
                    self.session.conf.set(key, value)
                elif _root_settings.get(key) != value:
                    raise BackendError(f"Spark already runs in this process with {key} = "
                                       f"{_root_settings.get(key, '(unset)')!r}, not {value!r}; it is fixed when Spark "
                                       f"starts: use the same [backend] conf or another process")
        except (PySparkException, Py4JError) as e:
            raise BackendError(_one_line(e)) from None
        with suppress(PySparkException, Py4JError):  # a killed writer's staging folders go
            sweep_staging(local_warehouse(self.session.conf.get("spark.sql.warehouse.dir")))
        self._views: set[str] = set()
        self._cached: dict[str, DataFrame] = {}
        self._files: dict[tuple[str, str | None, tuple[str, ...]], str] = {}  # CSV views
        self._inferred: dict[tuple[str, str | None], T.StructType] = {}  # CSV schemas
        self._closed = False

    @classmethod
    def check_outputs(cls, options: Mapping[str, Any], targets: Sequence[Any]) -> None:
        """Names Spark cannot hold, views its in-memory catalog would forget, and tables whose folder
        the local warehouse holds are refused before the JVM starts (``spark_writes``)."""
        check_outputs(options, targets, running_settings())

    def progress(self) -> float | None:
        """Finished tasks over all tasks of the stages running now (Spark's own status tracker)."""
        tracker = self.session.sparkContext.statusTracker()
        done = total = 0
        for stage in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage)
            if info is not None:
                done, total = done + info.numCompletedTasks, total + info.numTasks
        return done / total if total else None

    def close(self) -> None:
        """Drop this backend's temporary views and cached data; Spark itself keeps running."""
        if self._closed:
            return
        self._closed = True
        try:
            for df in self._cached.values():
                df.unpersist()
            for name in self._views:
                self.session.catalog.dropTempView(name)
        except (PySparkException, Py4JError):
            pass  # Spark already gone: nothing left to release
        self._cached.clear()
        self._views.clear()

    # -- functions: none in Python ------------------------------------------------------
    def register_udfs(self) -> None:
        raise BackendError("the Spark backend runs no Python functions; the SQL reference path runs on the cells "
                           "in DuckDB")

    def register_function(self, name: str, fn: Any, args: tuple[str, ...], returns: str) -> None:
        self.register_udfs()

    # -- tables ---------------------------------------------------------------------------
    def register_table(self, name: str, table: pa.Table, copy: bool = False) -> None:
        with self._errors():
            df = self.session.createDataFrame(table)
            if copy:
                self._cache(name, df)
            self._temp_view(name, df)

    def relation(self, ref: TableRef, text_columns: Mapping[str, bool]) -> exp.Expression:
        if ref.format == "table" and ref.table:
            return quoted_table(ref.table)
        if ref.format == "parquet":
            return exp.Table(this=exp.to_identifier(str(ref.path), quoted=True), db=exp.to_identifier("parquet"))
        if ref.format == "csv":
            return exp.Table(this=exp.to_identifier(self._csv(ref, text_columns), quoted=True))
        raise BackendError(f"Spark reads tables of its catalog and Parquet or CSV files; {ref.describe()} is a "
                           f"DuckDB file — export the table to Parquet (COPY … TO 'x.parquet') and use path = "
                           f"\"x.parquet\", or load it into a Spark table")

    def text_collations(self, ref: TableRef, names: Sequence[str]) -> dict[str, str]:
        """Spark 4's string collations other than ``UTF8_BINARY`` (``UTF8_LCASE``, ICU ``UNICODE_CI``…)
        of a catalog table's columns."""
        if ref.format != "table" or not ref.table:
            return {}
        with self._errors():
            schema = self.session.sql(self.render(exp.select("*").from_(quoted_table(ref.table)).limit(0))).schema
        return {f.name: f"STRING COLLATE {f.dataType.collation}" for f in schema.fields
                if f.name in names and isinstance(f.dataType, T.StringType)
                and getattr(f.dataType, "collation", "UTF8_BINARY") != "UTF8_BINARY"}

    def _csv(self, ref: TableRef, text_columns: Mapping[str, bool]) -> str:
        """A temporary view over the CSV file: header row, types inferred (one pass over the file),
        text QI columns read as strings (ZIP ``02134`` stays ``02134``)."""
        text = tuple(sorted(c for c, is_text in text_columns.items() if is_text))
        key = (str(ref.path), ref.delimiter, text)
        if key in self._files:
            return self._files[key]
        path = str(ref.path)

        def reader() -> DataFrameReader:
            return self.session.read.option("header", "true").option("sep", ref.delimiter or ",")

        with self._errors():
            inferred = self._inferred.get(key[:2])
            if inferred is None:
                inferred = self._inferred[key[:2]] = reader().option("inferSchema", "true").csv(path).schema
            schema = T.StructType([T.StructField(f.name, T.StringType()) if f.name in text else f
                                   for f in inferred.fields])
            name = f"deid_file_{next(_counter)}"
            self._temp_view(name, reader().schema(schema).csv(path))
        self._files[key] = name
        return name

    def create_temp_view(self, name: str, query: exp.Expression) -> None:
        self._run(exp.Create(this=exp.to_table(name), kind="VIEW", replace=True,
                             properties=exp.Properties(expressions=[exp.TemporaryProperty()]), expression=query))
        self._views.add(name)

    def columns(self, name: str) -> dict[str, str]:
        with self._errors():
            schema = self.session.sql(self.render(exp.select("*").from_(exp.to_table(name)).limit(0))).schema
        return {f.name: type_name(f.dataType) for f in schema.fields}

    def render(self, query: exp.Expression) -> str:
        return to_sql(query, "spark")

    def execute(self, query: exp.Expression | str, params: Mapping[str, Any] | None = None) -> pa.Table:
        text = query if isinstance(query, str) else self.render(query)
        with self._errors():
            return self.session.sql(text, args=dict(params) if params else None).toArrow()

    def create_temp_table(self, name: str, query: exp.Expression) -> None:
        """A cached temporary view (Spark has no temporary tables), computed now."""
        with self._errors():
            df = self.session.sql(self.render(query))
            self._cache(name, df)
            self._temp_view(name, df)

    def stream(self, query: exp.Expression, batch_rows: int = 1_000_000) -> Iterator[pa.RecordBatch]:
        """Partition by partition (one Spark job each), re-batched to ``batch_rows`` rows: memory
        holds about one partition and one batch, never the whole result."""
        with self._errors():
            df = self.session.sql(self.render(query))
            schema = arrow_schema(df)
            pending: list[pa.RecordBatch] = []
            rows = 0
            for batch in partition_batches(self.session, df, schema):
                pending.append(batch)
                rows += batch.num_rows
                if rows >= batch_rows:
                    table = pa.Table.from_batches(pending, schema).combine_chunks()
                    whole = rows - rows % batch_rows
                    yield from table.slice(0, whole).to_batches(max_chunksize=batch_rows)
                    pending, rows = table.slice(whole).to_batches(), rows - whole
            if rows:
                yield from pa.Table.from_batches(pending, schema).combine_chunks().to_batches()

    # -- outputs in the session catalog ---------------------------------------------------
    def create_view(self, database: Path | None, name: str, query: exp.Expression, replace: bool,
                    companions: Mapping[str, pa.Table] | None = None) -> None:
        _no_file(database)
        self._creatable(name, "view name")
        for companion in companions or {}:
            self._creatable(companion)
        if not replace and self._kind(quoted_table(name)) is not None:  # a view needs no folder
            raise OutputError(f"the database already has a table or view named {name!r}; pick another name or "
                              f"replace it")
        self._check_companions(companions or {}, replace)
        try:
            self._run(exp.Create(this=quoted_table(name), kind="VIEW", replace=replace, expression=query))
            try:
                self._companions(companions or {})
            except BaseException:
                with suppress(BackendError):
                    self._run(exp.Drop(tables=[quoted_table(name)], kind="VIEW", exists=True))
                raise
        except BackendError as e:
            if "INVALID_TEMP_OBJ_REFERENCE" in str(e):
                raise OutputError("a view in Spark's catalog cannot read a CSV source (Spark reads CSV with "
                                  "options through a temporary view); convert the CSV to Parquet or load it into "
                                  "a table ([source] table = ...), or materialize with --table") from None
            raise

    def create_table(self, database: Path | None, name: str, query: exp.Expression,
                     expected_rows: int, replace: bool, finish: Finish | None = None) -> int:
        """Written under a staging name, counted, judged, then renamed into place, its companions
        (the record) with it; a replaced table is renamed aside first and dropped only once the new
        one is in place (``spark_sets``)."""
        one: SetFinish | None = None if finish is None else (lambda run, targets: finish(run, targets[0]))
        return self.create_tables(database, [(name, query, expected_rows)], replace, one)[0]

    def create_tables(self, database: Path | None, tables: Sequence[SetTable], replace: bool,
                      finish: SetFinish | None = None) -> list[int]:
        """No transactions in Spark: staged, then swapped in by renames (``spark_sets``)."""
        _no_file(database)
        return create_tables(self, tables, replace, finish)

    def _creatable(self, name: str, what: str = "table name") -> exp.Table:
        """``name`` as a table expression, once Spark's catalog can hold it (``spark_output_name``),
        before anything is created: a name refused after ``CREATE TABLE`` has left its folder."""
        sensitive = self.session.conf.get("spark.sql.caseSensitive", "false") == "true"
        spark_output_name(name, what, sensitive and self.session.conf.get("spark.sql.catalogImplementation",
                                                                          "in-memory") != "hive")
        return quoted_table(name)

    def _check_companions(self, tables: Mapping[str, pa.Table], replace: bool) -> None:
        for name in tables:
            self._creatable(name)
            if not replace:
                kind = self._kind(quoted_table(name))
                self._refuse_taken(name, kind, self._leftover(quoted_table(name)) if kind != "TABLE" else None)

    def _refuse_taken(self, name: str, kind: str | None, leftover: str | None, flag: str = "--overwrite") -> None:
        """One line when ``name`` is taken (by a catalog object, or by a leftover folder), naming the
        flag the command has (``--overwrite``)."""
        if kind is not None:
            raise OutputError(f"the database already has a {kind.lower()} named {name!r}; pick another name or "
                              f"pass {flag}")
        if leftover is not None:
            raise OutputError(f"Spark's warehouse already holds a folder for table {name!r} ({leftover}), left by "
                              f"an earlier run; pass {flag} to replace it, or pick another name")

    def _companions(self, tables: Mapping[str, pa.Table]) -> None:
        """Small tables that land with a release (its sidecar); Spark has no transactions, so the
        caller drops them again when a later step fails.  Called once a clash was refused or
        replacing was asked for: a leftover folder of the name goes."""
        for name, table in tables.items():
            self._run(exp.Drop(tables=[quoted_table(name)], kind="TABLE", exists=True))
            leftover = self._leftover(quoted_table(name))
            if leftover is not None:
                self._remove_folder(leftover)
            self._run(exp.Create(this=quoted_table(name), kind="TABLE", expression=literal_rows(table)))

    def refuse_taken(self, database: Path | None, name: str, noun: str = "a table", flag: str = "--overwrite") -> None:
        """A catalog object, or a leftover folder of a table of that name, in the words of the write."""
        _no_file(database)
        table = quoted_table(name)
        kind = self._kind(table)
        self._refuse_taken(name, kind, self._leftover(table) if kind is None and noun == "a table" else None, flag)

    def exists(self, database: Path | None, name: str) -> bool:
        """A catalog table or view, or a leftover folder that would stop a table of that name."""
        _no_file(database)
        table = quoted_table(name)
        return self._kind(table) is not None or self._leftover(table) is not None

    def drop(self, database: Path | None, name: str, kind: str = "TABLE") -> None:
        _no_file(database)
        self._run(exp.Drop(tables=[quoted_table(name)], kind=kind, exists=True))

    # -- helpers --------------------------------------------------------------------------
    def _kind(self, table: exp.Table) -> str | None:
        """``TABLE`` or ``VIEW`` for a catalog object (never a temporary view), None if absent."""
        with self._errors():
            catalog = self.session.catalog
            parts = [p.name for p in table.parts]
            if len(parts) == 1:
                parts.insert(0, catalog.currentDatabase())
            qualified = ".".join("`" + p.replace("`", "``") + "`" for p in parts)
            if not catalog.tableExists(qualified):
                return None
            return "VIEW" if catalog.getTable(qualified).tableType == "VIEW" else "TABLE"

    def _leftover(self, table: exp.Table) -> str | None:
        """The folder a managed table of this name would get in Spark's own catalog, when it exists
        (the caller knows no catalog table owns it): what ``LOCATION_ALREADY_EXISTS`` refuses.
        None for other catalogs, which place their tables themselves."""
        with self._errors():
            return table_folder(self.session, [p.name for p in table.parts])

    def _remove_folder(self, location: str) -> None:
        with self._errors():
            if not remove_folder(self.session, location):
                raise OutputError(f"cannot remove the leftover folder {location} of Spark's warehouse; remove it "
                                  f"by hand")

    def _cache(self, name: str, df: DataFrame) -> None:
        """Keep ``df`` computed in Spark's memory (released by ``close`` or a new table of that name)."""
        df.persist()
        df.count()
        old = self._cached.pop(name, None)
        if old is not None:
            old.unpersist()
        self._cached[name] = df

    def _temp_view(self, name: str, df: DataFrame) -> None:
        df.createOrReplaceTempView(name)
        self._views.add(name)

    def _run(self, stmt: exp.Expression) -> None:
        with self._errors():
            self.session.sql(self.render(stmt))

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except (PySparkException, Py4JError) as e:
            raise BackendError(_one_line(e)) from None


    def head(self, database: Path | None, name: str, rows: int) -> list[tuple[Any, ...]]:
        _no_file(database)
        table = self.execute(exp.select("*").from_(quoted_table(name)).limit(rows))
        return list(zip(*(c.to_pylist() for c in table.columns)))

    def raise_error(self, message: str, row: exp.Expression) -> exp.Expression:
        return exp.func("raise_error", exp.Literal.string(message))

    def row_hash(self, values: Sequence[exp.Expression], types: Sequence[str | None] | None = None) -> exp.Expression:
        """Spark's ``xxhash64(v1, v2, …)`` as DECIMAL(38, 0), so its sum cannot overflow a BIGINT."""
        return exp.cast(exp.Anonymous(this="xxhash64", expressions=list(values)), "DECIMAL(38, 0)")

    #: a DATE is a 32-bit number of days, a timestamp a 64-bit number of microseconds
    #: (``Backend.date_days``); ``date_add`` past them wraps around without a word
    date_days = {"DATE": (-2**31, 2**31 - 1), "TIMESTAMP": (-106_751_990, 106_751_989)}
    date_overflow_fails = False

    def day_number(self, value: exp.Expression) -> exp.Expression:
        """``unix_date``, the date's own number (Spark's ``datediff`` of a unit goes through microseconds,
        which overflow 292,000 years from 1970)."""
        return exp.Anonymous(this="unix_date", expressions=[exp.cast(value, "DATE")])

    def shift_days(self, value: exp.Expression, days: exp.Expression, sql_type: str) -> exp.Expression:
        """``date_add(date, n)``; a timestamp adds ``make_dt_interval(n)``, a duration of n × 24 hours
        (no calendar or zone rule), so elapsed time is kept."""
        n = exp.cast(days, "INT")
        if sql_type.upper() == "DATE":
            return exp.Anonymous(this="date_add", expressions=[value, n])
        return exp.Add(this=value, expression=exp.Anonymous(this="make_dt_interval", expressions=[n]))

    def pseudonymize(self, value: exp.Expression, key: bytes, form: str) -> exp.Expression:
        """HMAC from Spark's ``sha2(…, 256)``: ``unhex`` literals of the pads, the text cast to
        BINARY (its UTF-8 bytes), ``concat`` on binaries; ``conv`` for the integer form."""
        inner, outer = pads(key)

        def fn(name: str, *args: exp.Expression) -> exp.Expression:
            return exp.Anonymous(this=name, expressions=list(args))

        def sha(data: exp.Expression) -> exp.Expression:
            return fn("sha2", data, exp.Literal.number(256))

        def binary(data: bytes) -> exp.Expression:
            return fn("unhex", exp.Literal.string(data.hex()))

        message = exp.cast(exp.cast(value, "VARCHAR"), exp.DataType.build("BINARY", dialect="spark"))
        inner_hex = sha(fn("concat", binary(inner), message))
        digest = sha(fn("concat", binary(outer), fn("unhex", inner_hex)))
        if form == "hex":
            return digest
        prefix = fn("substr", digest, exp.Literal.number(1), exp.Literal.number(INTEGER_DIGITS))
        return exp.cast(fn("conv", prefix, exp.Literal.number(16), exp.Literal.number(10)), "BIGINT")

def _no_file(database: Path | None) -> None:
    if database is not None:
        raise OutputError(f"the engine is Spark: views and tables go into its catalog, not into {database}; "
                          f"leave out --db")


def _first_line(e: BaseException) -> str:
    if isinstance(e, Py4JJavaError):  # the deepest Java cause says what went wrong
        try:
            cause = e.java_exception
            while cause.getCause() is not None:
                cause = cause.getCause()
            text = str(cause.getMessage() or cause.toString())
        except Py4JError:
            text = str(e)
    else:
        text = str(e)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return (lines[0] if lines else type(e).__name__)[:400]


def _one_line(e: BaseException) -> str:
    return f"Spark: {_first_line(e)}"
