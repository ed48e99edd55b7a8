"""DuckDB, the default engine: in-process, reads CSV/Parquet/DuckDB files directly."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import duckdb
import duckdb.sqltypes as sqltypes
import pyarrow as pa
import sqlglot
import sqlglot.errors
from sqlglot import exp

from ..contract.pseudonym import INTEGER_DIGITS, pads
from ..errors import BackendError, OutputError
from ..interrupts import cancelling, forget, on_signal
from ..sqltext import to_sql
from ..storage.atomic import clean_stale, discard, place, private_umask, temporary_sibling
from ..storage.tableref import TableRef
from .base import Backend, Finish, SetFinish, SetTable, SetView, miscounted

_counter = itertools.count()


def render(query: exp.Expression, dialect: str = "duckdb") -> str:
    """Expression -> SQL text; a dialect that cannot express a node raises (``sqltext.to_sql``)."""
    return to_sql(query, dialect)


def _quoted(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def _target(name: str) -> exp.Table:
    """An output table or view: ``NAME`` or ``SCHEMA.NAME`` (``names.table_name``), quoted parts."""
    from ..storage.names import table_name

    return table_name(name, "table or view name")


class DuckDBBackend(Backend):
    """An in-memory DuckDB connection; source files are read in place, never copied."""

    arg_aggregates = True

    dialect = "duckdb"
    title = "DuckDB"
    file_formats = frozenset({"csv", "parquet", "duckdb"})
    catalog = False  # in memory: sources are files, outputs go into a DuckDB file
    set_views = True  # in the DuckDB file of the person source only (``sets.views``)

    def __init__(self, database: str = ":memory:", threads: int | None = None,
                 memory_limit: str | None = None) -> None:
        config: dict[str, Any] = {}
        if threads:
            config["threads"] = threads
        if memory_limit:
            config["memory_limit"] = memory_limit
        self.con = duckdb.connect(database, config=config)
        # progress of the running query is tracked (``progress``) but never printed by DuckDB itself
        self.con.execute("SET enable_progress_bar = true")
        self.con.execute("SET enable_progress_bar_print = false")
        self._udfs = False
        self._functions: set[str] = set()
        self._attached: dict[Path, str] = {}
        # a signal (Ctrl-C, SIGTERM) interrupts the running query at once; DuckDB would see it only
        # when the query ends (``interrupts``)
        self._on_signal = on_signal(self.con.interrupt)

    def close(self) -> None:
        forget(self._on_signal)
        self.con.close()

    #: the most values a category position takes by an ENUM cast (``value_position``); a longer list
    #: is joined, as its SQL text would grow with it
    ENUM_VALUES = 4096

    def value_position(self, key: exp.Expression, values: Sequence[str]) -> exp.Expression | None:
        # a cast to an ENUM of the values: a lookup per row, byte for byte, NULL for any other text
        # (TRY_CAST), cheaper than a hash join (10 M rows, three QIs of 2, 5 and 600 values: ~0.1 s
        # of CPU less)
        if not values or len(values) > self.ENUM_VALUES:
            return None
        enum = exp.DataType(this=exp.DataType.Type.ENUM, expressions=[exp.Literal.string(v) for v in values])
        code = exp.Anonymous(this="enum_code", expressions=[exp.TryCast(this=key.copy(), to=enum)])
        return exp.cast(code, "INTEGER")

    def progress(self) -> float | None:
        done = self.con.query_progress()
        return done / 100 if done >= 0 else None

    def register_udfs(self) -> None:
        from ..udfs import UDFS

        if self._udfs:
            return
        for name, fn, args, ret in UDFS:
            self.con.create_function(name, fn, [getattr(sqltypes, a) for a in args],
                                     getattr(sqltypes, ret), type="arrow")
        self._udfs = True

    def register_function(self, name: str, fn: Any, args: tuple[str, ...], returns: str) -> None:
        if name in self._functions:
            self.con.remove_function(name)
        self.con.create_function(name, fn, [getattr(sqltypes, a) for a in args], getattr(sqltypes, returns),
                                 type="arrow")
        self._functions.add(name)

    def register_table(self, name: str, table: pa.Table, copy: bool = False) -> None:
        if not copy:
            self.con.register(name, table)
            return
        staging = f"{name}_arrow"
        self.con.register(staging, table)
        target = exp.Table(this=_quoted(name))
        self._run(render(exp.Create(this=target, kind="TABLE", replace=True,
                                    properties=exp.Properties(expressions=[exp.TemporaryProperty()]),
                                    expression=exp.select("*").from_(staging))))
        self.con.unregister(staging)

    def _attach(self, path: Path, alias: str | None = None) -> str:
        path = path.resolve()
        if path not in self._attached:
            alias = alias or f"deid_src_{next(_counter)}"
            stmt = exp.Attach(this=exp.alias_(exp.Literal.string(str(path)), alias),
                              exists=False, expressions=[exp.AttachOption(this=exp.var("READ_ONLY"))])
            self._run(render(stmt))
            self._attached[path] = alias
        return self._attached[path]

    def _detach(self, path: Path) -> str | None:
        """Release our read-only attachment so another connection may write the file;
        returns the alias so the caller can attach it again under the same name."""
        alias = self._attached.pop(path.resolve(), None)
        if alias is not None:
            self._run(render(exp.Detach(this=exp.to_identifier(alias))))
        return alias

    def relation(self, ref: TableRef, text_columns: Mapping[str, bool]) -> exp.Expression:
        # DuckDB reads every file path as a glob: a literal name such as ``p*p.parquet`` would also
        # read ``pXp.parquet``, so its pattern characters are escaped as one-character classes
        # (``[*]``), unless the spec says the path is a pattern (``glob = true``)
        text = str(ref.path) if ref.glob else "".join(f"[{c}]" if c in "*?[" else c for c in str(ref.path))
        path = exp.Literal.string(text)
        if ref.format == "duckdb":
            assert ref.table is not None
            alias = self._attach(ref.path)
            return exp.Table(this=_quoted(ref.table), db=exp.to_identifier(alias))
        if ref.format == "parquet":
            return exp.Table(this=exp.Anonymous(this="read_parquet", expressions=[path]))
        options: list[exp.Expression] = [exp.EQ(this=exp.column("header"), expression=exp.true())]
        if ref.delimiter:
            options.append(exp.EQ(this=exp.column("delim"), expression=exp.Literal.string(ref.delimiter)))
        names = [c for c, text in text_columns.items() if text]
        if names:
            types = exp.Struct(expressions=[
                exp.PropertyEQ(this=exp.Literal.string(c), expression=exp.Literal.string("VARCHAR"))
                for c in names
            ])
            options.append(exp.EQ(this=exp.column("types"), expression=types))
        return exp.Table(this=exp.Anonymous(this="read_csv", expressions=[path, *options]))

    def text_collations(self, ref: TableRef, names: Sequence[str]) -> dict[str, str]:
        """DuckDB keeps a column's collation in the table's ``CREATE`` statement (its catalog columns do
        not show it): parsed here for a table of a DuckDB file; files have no collations."""
        if ref.format != "duckdb" or ref.path is None or not ref.table:
            return {}
        alias = self._attach(ref.path)
        rows = self._sql("SELECT sql FROM duckdb_tables() WHERE database_name = $db AND table_name = $t",
                         {"db": alias, "t": ref.table.split(".")[-1].strip('"')}).fetchall()
        out: dict[str, str] = {}
        for (sql,) in rows:
            try:
                create = sqlglot.parse_one(sql, read="duckdb")
            except sqlglot.errors.ParseError:
                continue
            for column in create.find_all(exp.ColumnDef):
                for constraint in column.args.get("constraints") or []:
                    kind = constraint.args.get("kind")
                    if column.name in names and isinstance(kind, exp.CollateColumnConstraint):
                        collation = kind.this.sql("duckdb")
                        if collation.lower().strip('"') not in ("binary", "c", "posix"):
                            out[column.name] = f"VARCHAR COLLATE {collation}"
        return out

    def create_temp_view(self, name: str, query: exp.Expression) -> None:
        stmt = exp.Create(this=exp.to_table(name), kind="VIEW", replace=True,
                          properties=exp.Properties(expressions=[exp.TemporaryProperty()]),
                          expression=query)
        self._run(render(stmt))

    def columns(self, name: str) -> dict[str, str]:
        q = exp.select("*").from_(exp.to_table(name)).limit(0)
        rel = self._sql(render(q))
        return {c: str(t) for c, t in zip(rel.columns, rel.types)}

    def _sql(self, sql: str, params: Mapping[str, Any] | None = None) -> duckdb.DuckDBPyRelation:
        try:
            return self.con.sql(sql, params=dict(params) if params else None)
        except duckdb.Error as e:
            raise BackendError(_one_line(e)) from None

    def _run(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        try:
            self.con.execute(sql, dict(params) if params else None)
        except duckdb.Error as e:
            raise BackendError(_one_line(e)) from None

    def render(self, query: exp.Expression) -> str:
        return render(query)

    def create_temp_table(self, name: str, query: exp.Expression) -> None:
        stmt = exp.Create(this=exp.to_table(name), kind="TABLE", replace=True,
                          properties=exp.Properties(expressions=[exp.TemporaryProperty()]), expression=query)
        self._run(render(stmt))

    def execute(self, query: exp.Expression | str, params: Mapping[str, Any] | None = None) -> pa.Table:
        # A DB-API execution: cheaper per call than building a relation, which matters
        # for the SQL evaluator's one-query-per-policy loop (it passes pre-rendered text).
        text = query if isinstance(query, str) else render(query)
        try:
            result = self.con.execute(text, dict(params) if params else None)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "extra copy" notice: results are small
                return result.to_arrow_table()
        except duckdb.Error as e:
            raise BackendError(_one_line(e)) from None

    def stream(self, query: exp.Expression, batch_rows: int = 1_000_000) -> Iterator[pa.RecordBatch]:
        rel = self._sql(render(query))
        try:
            reader = rel.to_arrow_reader(batch_rows)
            yield from reader
        except (duckdb.Error, OSError) as e:  # errors while reading batches surface as OSError
            raise BackendError(_one_line(e)) from None

    @contextmanager
    def _writing(self, database: Path | None) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-write connection to ``database``; if the source is attached from that file,
        it is detached meanwhile and attached again under the same name afterwards."""
        database = _file(database)
        alias = self._detach(database)
        try:
            con = _connect(database)
            try:
                with cancelling(con.interrupt):  # the write's query stops at a signal too
                    yield con
            except duckdb.Error as e:
                raise BackendError(_one_line(e)) from None
            finally:
                con.close()
        finally:
            if alias is not None:  # the source lives in this file: read it again as before
                self._attach(database, alias)

    def create_view(self, database: Path | None, name: str, query: exp.Expression, replace: bool,
                    companions: Mapping[str, pa.Table] | None = None) -> None:
        stmt = exp.Create(this=_target(name), kind="VIEW", replace=replace, expression=query)
        database = _file(database)
        with _building(database) as work, self._writing(work) as con:
            if not replace and _exists(con, name):
                raise OutputError(
                    f"{database} already has a table or view named {name!r}; pick another --view "
                    f"or pass --overwrite"
                )
            con.execute("BEGIN TRANSACTION")
            try:
                con.execute(render(stmt))
                _write_companions(con, database, companions or {}, replace)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

    def create_set_views(self, database: Path | None, keys: Sequence[tuple[str, exp.Expression]],
                         views: Sequence[SetView], replace: bool, finish: SetFinish) -> list[int]:
        """One transaction of the DuckDB file that holds the person source (the source is detached
        from this session meanwhile, ``_writing``): the key tables created from their queries (run
        here, not stored), the views, their rows counted, ``finish``'s companions, one ``COMMIT``.
        A file has no grants: whoever can read it can read its source table already."""
        database = _file(database)
        if not database.exists():
            raise OutputError(f"{database} does not exist; a view of a set goes into the DuckDB file that holds the "
                              f"person source")
        names = [name for name, _ in keys] + [name for name, _, _ in views]
        rows: list[int] = []
        with self._writing(database) as con:
            for name in names:
                _check_schema(con, database, name)
            taken = [] if replace else [name for name in names if _exists(con, name)]
            if taken:
                raise OutputError(f"{database} already has a table or view named {taken[0]!r}; pick another --view "
                                  f"or pass --overwrite")
            con.execute("BEGIN TRANSACTION")
            try:
                for name, _, _ in views:  # the old views first: they read the old key tables
                    _drop_any(con, name)
                for name, query in keys:
                    _drop_any(con, name)
                    con.execute(render(exp.Create(this=_target(name), kind="TABLE", expression=query)))
                for name, query, expected in views:
                    con.execute(render(exp.Create(this=_target(name), kind="VIEW", expression=query)))
                    rows.append(_row_count(con, _target(name)))
                    if rows[-1] != expected:
                        raise OutputError(f"view {name} shows {rows[-1]:,} rows, not the {expected:,} its tables "
                                          f"held when the set was judged (the data changed meanwhile?); no view of "
                                          f"the set was created")
                extra = finish(lambda q: _arrow(con.execute(render(q))), [_target(n) for n, _, _ in views])
                _write_companions(con, database, extra, replace)
            except BaseException:
                with suppress(duckdb.Error):
                    con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
        return rows

    def exists(self, database: Path | None, name: str) -> bool:
        if not _file(database).exists():
            return False
        with self._writing(database) as con:
            return _exists(con, name)

    def drop(self, database: Path | None, name: str, kind: str = "TABLE") -> None:
        with self._writing(database) as con:
            con.execute(render(exp.Drop(tables=[_target(name)], kind=kind, exists=True)))

    def create_table(self, database: Path | None, name: str, query: exp.Expression,
                     expected_rows: int, replace: bool, finish: Finish | None = None) -> int:
        one: SetFinish | None = None if finish is None else (lambda run, targets: finish(run, targets[0]))
        return self.create_tables(database, [(name, query, expected_rows)], replace, one)[0]

    def create_tables(self, database: Path | None, tables: Sequence[SetTable], replace: bool,
                      finish: SetFinish | None = None) -> list[int]:
        """One transaction of the output file: each query of this session streamed (Arrow) into its
        table and counted, ``finish`` judging them and adding companions, then one ``COMMIT``; a new
        database file is linked into place only after it (``_building``)."""
        database = _file(database)
        targets = [_target(name) for name, _, _ in tables]
        rows: list[int] = []
        with _building(database) as work:
            con = _connect(work)
            try:
                for name, _, _ in tables:
                    _check_schema(con, database, name)
                taken = [] if replace else [name for name, _, _ in tables if _exists(con, name)]
                if taken:
                    raise OutputError(f"{database} already has a table named {taken[0]!r}; pick another name or "
                                      f"pass --overwrite")
                con.execute("BEGIN TRANSACTION")
                try:
                    for (name, query, expected), target in zip(tables, targets):
                        con.register("deid_incoming", self._sql(render(query)).to_arrow_reader(1_000_000))
                        try:
                            if replace:
                                con.execute(render(exp.Drop(tables=[target.copy()], kind="TABLE", exists=True)))
                            con.execute(render(exp.Create(this=target.copy(), kind="TABLE",
                                                          expression=exp.select("*").from_("deid_incoming"))))
                        finally:  # (in an aborted transaction this fails too: the first error speaks)
                            with suppress(duckdb.Error):
                                con.unregister("deid_incoming")
                        rows.append(_row_count(con, target.copy()))
                        if rows[-1] != expected:
                            raise OutputError(miscounted(name, rows[-1], expected, len(tables)))
                    if finish is not None:
                        extra = finish(lambda q: _arrow(con.execute(render(q))), [t.copy() for t in targets])
                        _write_companions(con, database, extra, replace)
                except BaseException:
                    with suppress(duckdb.Error):
                        con.execute("ROLLBACK")
                    raise
                con.execute("COMMIT")
            except duckdb.Error as e:
                raise BackendError(_one_line(e)) from None
            finally:
                con.close()
        return rows

    def head(self, database: Path | None, name: str, rows: int) -> list[tuple[Any, ...]]:
        path = _file(database)
        query = exp.select("*").from_(_target(name)).limit(rows)
        try:
            con = duckdb.connect(str(path), read_only=True)
        except duckdb.Error as e:
            raise OutputError(f"cannot open {path} as a DuckDB database ({_one_line(e)})") from None
        try:
            return con.execute(render(query)).fetchall()
        except duckdb.Error as e:
            raise BackendError(_one_line(e)) from None
        finally:
            con.close()

    def raise_error(self, message: str, row: exp.Expression) -> exp.Expression:
        return exp.func("error", exp.Literal.string(message))

    def row_hash(self, values: Sequence[exp.Expression], types: Sequence[str | None] | None = None) -> exp.Expression:
        """DuckDB's ``hash(v1, v2, …)`` (UBIGINT; its sum is a HUGEINT)."""
        return exp.Anonymous(this="hash", expressions=list(values))

    #: DATE: 5877642-06-25 (BC) to 5881580-07-10; TIMESTAMP (and _S, _MS, WITH TIME ZONE): 290309-12-22 (BC)
    #: to 294247-01-10 04:00:54; TIMESTAMP_NS: 1677-09-21 to 2262-04-11 (``Backend.date_days``)
    date_days = {"DATE": (-2_147_483_646, 2_147_483_646), "TIMESTAMP": (-106_751_990, 106_751_989),
                 "TIMESTAMP_NS": (-106_750, 106_749)}

    def shift_days(self, value: exp.Expression, days: exp.Expression, sql_type: str) -> exp.Expression:
        """A DATE plus an integer is a date (DuckDB's whole date range: a date plus an interval would be
        a timestamp, whose range is 20 times narrower); a timestamp plus ``to_seconds(n * 86400)``: a
        duration, not calendar days, so a zoned timestamp keeps elapsed time across daylight-saving
        changes."""
        if sql_type.upper() == "DATE":
            return exp.cast(exp.Add(this=value, expression=exp.cast(days, "INTEGER")), "DATE")
        seconds = exp.Mul(this=exp.cast(days, "BIGINT"), expression=exp.Literal.number(86400))
        moved = exp.Add(this=value, expression=exp.Anonymous(this="to_seconds", expressions=[seconds]))
        return exp.cast(moved, sql_type)

    def pseudonymize(self, value: exp.Expression, key: bytes, form: str) -> exp.Expression:
        """HMAC from DuckDB's ``sha256`` (no ``hmac`` function in the core): ``unhex`` literals of
        the pads, ``encode`` for the UTF-8 bytes of the text, ``||`` on BLOBs."""
        inner, outer = pads(key)

        def fn(name: str, *args: exp.Expression) -> exp.Expression:
            return exp.Anonymous(this=name, expressions=list(args))

        def blob(data: bytes) -> exp.Expression:
            return fn("unhex", exp.Literal.string(data.hex()))

        message = fn("encode", exp.cast(value, "VARCHAR"))
        inner_hex = fn("sha256", exp.DPipe(this=blob(inner), expression=message))
        digest = fn("sha256", exp.DPipe(this=blob(outer), expression=fn("unhex", inner_hex)))
        if form == "hex":
            return digest
        prefix = fn("substr", digest, exp.Literal.number(1), exp.Literal.number(INTEGER_DIGITS))
        return exp.cast(exp.DPipe(this=exp.Literal.string("0x"), expression=prefix), "BIGINT")


@contextmanager
def _building(database: Path) -> Iterator[Path]:
    """Where a write into ``database`` goes: the file itself when it exists; a new database is built
    in the target's owner-only temporary folder (under umask 077: DuckDB creates the file and its
    ``.wal`` itself) and linked into place only when the block completes, so a killed run leaves
    no empty database at the target and a racing run cannot be replaced (``atomic.place``)."""
    if database.exists() or not database.parent.exists():  # (a missing folder: _connect says so)
        yield database
        return
    clean_stale(database)
    work = temporary_sibling(database, create=False)
    try:
        with private_umask():
            yield work
        place(work, database, overwrite=False)
    finally:
        discard(work)


def _arrow(result: duckdb.DuckDBPyConnection) -> pa.Table:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return result.to_arrow_table()


def _write_companions(con: duckdb.DuckDBPyConnection, database: Path, tables: Mapping[str, pa.Table],
                      replace: bool) -> None:
    """Create the small tables that must land with a release (its sidecar), in the open transaction."""
    for name, table in tables.items():
        if not replace and _exists(con, name):
            raise OutputError(f"{database} already has a table named {name!r}; pick another name or pass --overwrite")
        target = _target(name)
        con.register("deid_companion", table)
        try:
            con.execute(render(exp.Drop(tables=[target.copy()], kind="TABLE", exists=True)))
            select = exp.select("*").from_("deid_companion")
            con.execute(render(exp.Create(this=target, kind="TABLE", expression=select)))
        finally:
            con.unregister("deid_companion")


def _drop_any(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Drop the view or table ``name`` if there is one (a replaced set may swap kinds)."""
    for kind in ("VIEW", "TABLE"):
        kinds = "duckdb_views" if kind == "VIEW" else "duckdb_tables"
        if _exists_in(con, name, kinds):
            con.execute(render(exp.Drop(tables=[_target(name)], kind=kind, exists=True)))


def _file(database: Path | None) -> Path:
    if database is None:
        raise OutputError("the engine is DuckDB: name the database file for the view or table (--db or --out "
                          "FILE.duckdb)")
    return database


def _connect(database: Path) -> duckdb.DuckDBPyConnection:
    """Open the output database, or say in one line why it cannot be."""
    if not database.parent.exists():
        raise OutputError(f"output folder {database.parent} does not exist; create it first")
    try:
        return duckdb.connect(str(database))
    except duckdb.Error as e:
        raise OutputError(f"cannot open {database} as a DuckDB database ({_one_line(e)}); "
                          f"pick another file") from None


def _row_count(con: duckdb.DuckDBPyConnection, target: exp.Table) -> int:
    """The rows a table or view of this session holds now (-1 when the count returns nothing), to
    check a write against the count the gate judged."""
    found = con.execute(render(exp.select(exp.func("count", exp.Star())).from_(target))).fetchall()
    return int(found[0][0]) if found else -1


def _exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """A table or view ``NAME`` (in any schema of the file's own catalog) or ``SCHEMA.NAME`` exists."""
    return _exists_in(con, name, "duckdb_tables") or _exists_in(con, name, "duckdb_views")


def _exists_in(con: duckdb.DuckDBPyConnection, name: str, catalog: str) -> bool:
    """``name`` is among ``catalog``'s objects (``duckdb_tables`` or ``duckdb_views``) of the file."""
    from ..storage.names import split_name

    schema, bare = split_name(name, "table or view name")
    where = exp.column("database_name").eq(exp.func("current_database"))
    if schema is not None:
        where = exp.and_(where, exp.column("schema_name").eq(exp.Literal.string(schema)))
    column = "table_name" if catalog == "duckdb_tables" else "view_name"
    q = exp.select(exp.func("count", exp.Star())).from_(catalog).where(
        exp.and_(where, exp.column(column).eq(exp.Literal.string(bare))))
    # fetchall, not fetchone: DuckDB 2 refuses con.register() while a result is unfinished
    return bool(con.execute(render(q)).fetchall()[0][0])


def _check_schema(con: duckdb.DuckDBPyConnection, database: Path, name: str) -> None:
    """``SCHEMA.NAME`` needs the schema in the file: refused in one line that says how to make it."""
    from ..storage.names import split_name

    schema, _ = split_name(name, "table name")
    if schema is None:
        return
    q = exp.select(exp.func("count", exp.Star())).from_(exp.Table(this=exp.Anonymous(this="duckdb_schemas"))).where(
        exp.and_(
            exp.column("database_name").eq(exp.func("current_database")),
            exp.column("schema_name").eq(exp.Literal.string(schema))))
    if not con.execute(render(q)).fetchall()[0][0]:
        raise OutputError(f"{database} has no schema {schema!r} for table {name!r}; create it first (CREATE SCHEMA "
                          f"in that file) or name the table without a schema")


def _one_line(e: Exception) -> str:
    text = " ".join(str(e).split())
    return f"DuckDB: {text[:400]}"
