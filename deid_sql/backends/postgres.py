"""PostgreSQL (psycopg 3): the data stays in the server; only cells come back.

Sources and outputs are tables and views of the connected database; queries are the
compiler's sqlglot expressions rendered in the ``postgres`` dialect.  PostgreSQL runs no
Python functions, so ``python_udfs`` is False: the SQL reference evaluator then runs in a
local DuckDB over the cells (``Problem._sql_backend``), which moves no rows.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
from psycopg import sql as pgsql
from sqlglot import exp

from ..contract.pseudonym import INTEGER_DIGITS, pads
from ..errors import BackendError, OutputError, Unreachable
from ..interrupts import forget, on_signal
from ..sqltext import added, fits_bigint, to_sql
from ..storage.tableref import TableRef
from .base import Backend, Finish, SetFinish, SetTable, SetView, literal_rows, miscounted, readable
from .postgres_refresh import (
    ident,
    kind_of,
    lock_to_owner,
    pg_name,
    regclass_text,
    replace_table_by_view,
    replace_view,
    staging_for,
    swap_in,
    sweep_staging,
    taken,
)


def _null_hash(position: int) -> int:
    """The typed row hash of a NULL in column ``position``: a fixed 64-bit number drawn from SHA-256,
    so NULLs in different columns neither cancel nor look like small values."""
    return int.from_bytes(hashlib.sha256(f"deid-sql row hash: NULL in column {position}".encode()).digest()[:8],
                          "big", signed=True)


# type OIDs -> (our type name, Arrow type); names follow DuckDB's so loading's checks read them alike
TYPES: dict[int, tuple[str, pa.DataType]] = {
    16: ("BOOLEAN", pa.bool_()), 20: ("BIGINT", pa.int64()), 21: ("SMALLINT", pa.int16()),
    23: ("INTEGER", pa.int32()), 700: ("FLOAT", pa.float32()), 701: ("DOUBLE", pa.float64()),
    1700: ("DECIMAL", pa.float64()), 25: ("VARCHAR", pa.string()), 1042: ("VARCHAR", pa.string()),
    1043: ("VARCHAR", pa.string()), 1082: ("DATE", pa.date32()), 1114: ("TIMESTAMP", pa.timestamp("us")),
    1184: ("TIMESTAMP WITH TIME ZONE", pa.timestamp("us", tz="UTC")),
}
_ARROW_TO_SQL = {pa.int8(): "SMALLINT", pa.int16(): "SMALLINT", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
                 pa.float32(): "REAL", pa.float64(): "DOUBLE PRECISION", pa.string(): "TEXT",
                 pa.large_string(): "TEXT", pa.bool_(): "BOOLEAN", pa.date32(): "DATE",
                 **{pa.timestamp(unit): "TIMESTAMP" for unit in ("s", "ms", "us")},
                 **{pa.timestamp(unit, tz="UTC"): "TIMESTAMPTZ" for unit in ("s", "ms", "us")}}
_counter = itertools.count()
RELEASE_WORK_MEM = "64MB"  # a session's hash aggregates in memory (``PostgresBackend._plan_for_whole_tables``)


def quoted_table(name: str, what: str = "table name") -> exp.Table:
    """``schema.table`` (or ``table``) as PostgreSQL's catalog holds it (``names``' PostgreSQL rules:
    quoted parts kept as written, without their quotes; a part PostgreSQL would fold is refused)."""
    return pg_name(name, what).table()


class PostgresBackend(Backend):
    """One connection (autocommit; writes run in explicit transactions)."""

    dialect = "postgres"
    title = "PostgreSQL"
    python_udfs = False
    set_views = True  # the key table locked to its owner; views read it with the owner's privileges
    typed_row_hash = True  # integers hashed as numbers, a sum of parts (``row_hash_parts``)

    def __init__(self, dsn: str | None = None) -> None:
        if not dsn:
            raise BackendError('engine "postgres" needs dsn = "postgresql://user@host:5432/db" in [backend]')
        self.dsn = dsn
        try:
            self.con = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
        except psycopg.Error as e:
            raise Unreachable(_unreachable(dsn, e)) from None
        # JIT compiles each query's expressions to machine code when its cost estimate is high; a release's
        # wide CASE expressions (one branch per group, over thousands of literals) take it seconds to
        # minutes to compile (a 210-tuple list: 14 minutes and counting) for a query that runs in one
        # pass, so this session runs without it.  Only this connection's setting changes.
        self.con.execute("SET jit = off")
        self._plan_for_whole_tables()
        # a signal (Ctrl-C, SIGTERM) cancels the running query on the server at once (``interrupts``)
        self._on_signal = on_signal(getattr(self.con, "cancel_safe", None) or self.con.cancel)
        try:  # staging tables of writers whose server process is gone (postgres_refresh)
            sweep_staging(self.con)
        except psycopg.Error:
            pass

    def _plan_for_whole_tables(self) -> None:
        """Plan this session's queries for what deid-sql runs: each reads every row of a table (the
        cells of a load, a release's staging write, the count of its written rows per released group and
        their hash).  The server's defaults plan for short queries (a sort that spills past 4 MB of
        ``work_mem``; workers only where their start-up pays by the default costs), which made a
        release's staging write and its measurement 2-3 times slower than with the server's workers and
        memory for a hash.  Only this connection's settings change, ``work_mem`` is never lowered, and
        ``max_parallel_workers_per_gather`` (the server's) still bounds the workers."""
        self.con.execute("SELECT set_config('work_mem', %(mem)s, false) "
                         "WHERE pg_size_bytes(current_setting('work_mem')) < pg_size_bytes(%(mem)s)",
                         {"mem": RELEASE_WORK_MEM})
        self.con.execute("SET parallel_setup_cost = 0")
        self.con.execute("SET parallel_tuple_cost = 0")

    @contextmanager
    def _hashed_groups(self) -> Iterator[None]:
        """Count the written rows' groups by hashing, not sorting, while the open transaction measures
        them.  A staging table is new, so the server has no statistics of it and guesses a two-hundredth
        of its rows as groups; that plans a sort of every row (10 M rows: 20 s, against 2.4 s hashed for
        the 7,000 groups there were).  ANALYZE would fix the guess but costs a sampling pass (1.3 s).
        A hash that outgrows ``work_mem`` spills to disk (PostgreSQL 13 and later), as a sort would."""
        with self._errors():
            before = self.con.execute("SELECT current_setting('enable_sort')").fetchone()[0]  # type: ignore[index]
            self.con.execute("SELECT set_config('enable_sort', 'off', true)")
        try:
            yield
        finally:
            if self.con.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS:
                self.con.execute("SELECT set_config('enable_sort', %(v)s, true)", {"v": before})

    def close(self) -> None:
        """Drop this session's temporary tables and views, then disconnect.

        The server drops a session's temporary objects only after the client has gone, in a process
        of its own, so a ``DROP SCHEMA ... CASCADE`` run right after ``close`` (a test's teardown, a
        job's clean-up) would race that process for the same locks and could end in a deadlock.
        Dropping them here makes ``close`` return only when they are gone.
        """
        forget(self._on_signal)
        try:
            if not self.con.closed and self.con.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                self.con.execute("DISCARD TEMP")
        except psycopg.Error:
            pass  # a broken connection: the server cleans up after it as before
        finally:
            self.con.close()

    # -- functions: none in Python ------------------------------------------------------
    def register_udfs(self) -> None:
        raise BackendError("PostgreSQL runs no Python functions; the SQL reference path runs on the cells in DuckDB")

    def register_function(self, name: str, fn: Any, args: tuple[str, ...], returns: str) -> None:
        self.register_udfs()

    # -- tables ---------------------------------------------------------------------------
    def register_table(self, name: str, table: pa.Table, copy: bool = False) -> None:
        cols = []
        for field in table.schema:
            sql_type = _ARROW_TO_SQL.get(field.type)
            if sql_type is None:
                raise BackendError(f"cannot store Arrow type {field.type} of column {field.name!r} in PostgreSQL")
            cols.append(pgsql.SQL("{} {}").format(pgsql.Identifier(field.name), pgsql.SQL(sql_type)))
        ident = pgsql.Identifier(name)
        with self._errors():
            self.con.execute(pgsql.SQL("DROP TABLE IF EXISTS {}").format(ident))
            self.con.execute(pgsql.SQL("CREATE TEMP TABLE {} ({})").format(ident, pgsql.SQL(", ").join(cols)))
            with self.con.cursor() as cur, cur.copy(pgsql.SQL("COPY {} FROM STDIN").format(ident)) as copy_:
                for row in zip(*(c.to_pylist() for c in table.columns)):
                    copy_.write_row(row)

    def relation(self, ref: TableRef, text_columns: Mapping[str, bool]) -> exp.Expression:
        if ref.format != "table" or not ref.table:
            raise BackendError(f"PostgreSQL reads tables of its database; {ref.describe()} is a file — load it into "
                               f"a table (e.g. \\copy) and name it with [source] table = \"schema.table\"")
        return quoted_table(ref.table)

    def text_collations(self, ref: TableRef, names: Sequence[str]) -> dict[str, str]:
        """Columns with a nondeterministic collation (ICU collations that fold case or accents: a
        deterministic one breaks ties by bytes, so it cannot equate two spellings) or blank-padded
        ``character(n)``, from the catalog."""
        if ref.format != "table" or not ref.table:
            return {}
        query = ("SELECT a.attname, format_type(a.atttypid, a.atttypmod), c.collname, c.collisdeterministic "
                 "FROM pg_attribute a LEFT JOIN pg_collation c ON c.oid = a.attcollation "
                 "WHERE a.attrelid = to_regclass(%(t)s) AND a.attnum > 0 AND NOT a.attisdropped")
        with self._errors(), self.con.cursor() as cur:
            cur.execute(query, {"t": self.render(quoted_table(ref.table))})
            rows = cur.fetchall()
        out: dict[str, str] = {}
        for name, type_name, collation, deterministic in rows:
            if name not in names:
                continue
            if collation is not None and deterministic is False:
                out[name] = f'{type_name} COLLATE "{collation}"'
            elif str(type_name).startswith("character(") or type_name == "character":
                out[name] = f"{type_name} (blank-padded)"
        return out

    def create_temp_view(self, name: str, query: exp.Expression) -> None:
        self._run(exp.Create(this=exp.to_table(name), kind="VIEW", replace=True,
                             properties=exp.Properties(expressions=[exp.TemporaryProperty()]), expression=query))

    def columns(self, name: str) -> dict[str, str]:
        return dict(self._described(exp.select("*").from_(_table(name))))

    def _described(self, query: exp.Select) -> list[tuple[str, str]]:
        """The (name, type) of each column ``query`` gives, as the server describes them (run with
        ``LIMIT 0`` on this connection); a type not named in ``TYPES`` is ``OID n``."""
        with self._errors(), self.con.cursor() as cur:
            cur.execute(self.render(query.limit(0)))
            return [(d.name, TYPES.get(d.type_code, (f"OID {d.type_code}", None))[0]) for d in cur.description or []]

    def render(self, query: exp.Expression) -> str:
        return to_sql(query, "postgres")

    def execute(self, query: exp.Expression | str, params: Mapping[str, Any] | None = None) -> pa.Table:
        text = query if isinstance(query, str) else self.render(query)
        with self._errors(), self.con.cursor() as cur:
            cur.execute(text, dict(params) if params else None)
            return _arrow(cur.description or [], cur.fetchall())

    def create_temp_table(self, name: str, query: exp.Expression) -> None:
        self._run(exp.Create(this=exp.to_table(name), kind="TABLE", replace=False,
                             properties=exp.Properties(expressions=[exp.TemporaryProperty()]), expression=query))

    def stream(self, query: exp.Expression, batch_rows: int = 1_000_000) -> Iterator[pa.RecordBatch]:
        """A server-side cursor: rows come in batches, never all at once."""
        size = min(batch_rows, 100_000)
        with self._errors(), self.con.transaction(), self.con.cursor(name=f"deid_stream_{next(_counter)}") as cur:
            cur.itersize = size
            cur.execute(self.render(query))
            while rows := cur.fetchmany(size):
                yield from _arrow(cur.description or [], rows).to_batches()

    # -- outputs in the database --------------------------------------------------------------
    def create_view(self, database: Path | None, name: str, query: exp.Expression, replace: bool,
                    companions: Mapping[str, pa.Table] | None = None) -> None:
        _no_file(database)
        target = pg_name(name, "view name")
        with self._errors(), self.con.transaction():
            existing = kind_of(self.con, target)
            if existing is not None and not replace:
                raise taken(existing, name, "--overwrite")
            if existing == "table":
                replace_table_by_view(self.con, target)
            elif existing not in (None, "view"):
                raise OutputError(f"the database has a {existing} named {name!r}; deid-sql replaces only tables "
                                  f"and views: drop it first or pick another name")
            self._run(exp.Create(this=target.table(), kind="VIEW", replace=existing == "view", expression=query))
            self._companions(companions or {}, replace)

    def create_table(self, database: Path | None, name: str, query: exp.Expression,
                     expected_rows: int, replace: bool, finish: Finish | None = None) -> int:
        one: SetFinish | None = None if finish is None else (lambda run, targets: finish(run, targets[0]))
        return self.create_tables(database, [(name, query, expected_rows)], replace, one)[0]

    def create_tables(self, database: Path | None, tables: Sequence[SetTable], replace: bool,
                      finish: SetFinish | None = None) -> list[int]:
        _no_file(database)
        names = [pg_name(name) for name, _, _ in tables]
        # all or nothing: staged, judged and swapped in one transaction (postgres_refresh), so a failure
        # or a killed writer rolls everything back, staging tables included
        with self._errors(), self.con.transaction():
            for (name, _, _), target in zip(tables, names):
                existing = kind_of(self.con, target)
                if existing is not None and not replace:
                    raise taken(existing, name, "--overwrite")
            staged, rows = [], []
            for (name, query, expected), target in zip(tables, names):
                staging = staging_for(self.con, target)
                # the rows written, as the write reports them: no second scan to count them
                rows.append(self._run(exp.Create(this=staging.table(), kind="TABLE", expression=query)))
                if rows[-1] != expected:
                    raise OutputError(miscounted(name, rows[-1], expected, len(tables)))
                staged.append(staging)
            with self._hashed_groups():
                companions = finish(self.execute, [s.table() for s in staged]) if finish is not None else {}
            for staging, target in zip(staged, names):
                swap_in(self.con, staging, target, "--overwrite")
            self._companions(companions, replace)
        return rows

    def create_set_views(self, database: Path | None, keys: Sequence[tuple[str, exp.Expression]],
                         views: Sequence[SetView], replace: bool, finish: SetFinish) -> list[int]:
        """One transaction: each key table built from its query (run, not stored), indexed on its first
        column and locked to its owner (``lock_to_owner``); each view created, or replaced in place
        (``CREATE OR REPLACE VIEW`` keeps its grants, its owner and the views analysts built on it);
        an old key table is renamed aside first (its views follow it by OID) and dropped once the new
        views read the new one.  A failure anywhere rolls all of it back."""
        _no_file(database)
        key_names = [pg_name(name) for name, _ in keys]
        view_names = [pg_name(name, "view name") for name, _, _ in views]
        rows: list[int] = []
        with self._errors(), self.con.transaction():
            for (name, *_), target in zip([*keys, *views], [*key_names, *view_names]):
                existing = kind_of(self.con, target)
                if existing is not None and not replace:
                    raise taken(existing, name, "--overwrite")
            aside = []
            for (name, query), target in zip(keys, key_names):
                existing = kind_of(self.con, target)
                if existing == "table":
                    aside.append(staging_for(self.con, target))
                    self.con.execute(pgsql.SQL("ALTER TABLE {} RENAME TO {}").format(
                        ident(target), pgsql.Identifier(aside[-1].name)))
                elif existing is not None:
                    raise OutputError(f"the database has a {existing} named {name!r}; --overwrite replaces the key "
                                      f"table of a set only when it is a table: drop it first or pick another --view")
                self._run(exp.Create(this=target.table(), kind="TABLE", expression=query))
                described = self.con.execute(self.render(exp.select("*").from_(target.table()).limit(0)))
                first = (described.description or [])[0].name
                self.con.execute(pgsql.SQL("CREATE INDEX ON {} ({})").format(ident(target), pgsql.Identifier(first)))
                lock_to_owner(self.con, target)
            for (name, query, expected), target in zip(views, view_names):
                existing = kind_of(self.con, target)
                if existing == "table":
                    replace_table_by_view(self.con, target)
                elif existing not in (None, "view"):
                    raise OutputError(f"the database has a {existing} named {name!r}; deid-sql replaces only tables "
                                      f"and views: drop it first or pick another name")
                create = exp.Create(this=target.table(), kind="VIEW", replace=existing == "view", expression=query)
                if existing == "view":
                    replace_view(self.con, target, lambda create=create: self.con.execute(self.render(create)))
                else:
                    self._run(create)
                rows.append(int(self.execute(exp.select(exp.func("count", exp.Star())).from_(target.table()))
                                .column(0)[0].as_py()))
                if rows[-1] != expected:
                    raise OutputError(f"view {name} shows {rows[-1]:,} rows, not the {expected:,} its tables held "
                                      f"when the set was judged (the data changed meanwhile?); no view of the set "
                                      f"was created")
            for old in aside:  # no view reads it any more
                self.con.execute(pgsql.SQL("DROP TABLE {}").format(ident(old)))
            self._companions(finish(self.execute, [t.table() for t in view_names]), replace)
        return rows

    def _companions(self, tables: Mapping[str, pa.Table], replace: bool) -> None:
        """Small tables that land with a release (its sidecar), in the open transaction."""
        for name, table in tables.items():
            target = pg_name(name)
            existing = kind_of(self.con, target)
            if existing is not None and not replace:
                raise taken(existing, name, "--overwrite")
            staging = staging_for(self.con, target)
            self._run(exp.Create(this=staging.table(), kind="TABLE", expression=literal_rows(table)))
            swap_in(self.con, staging, target, "--overwrite")

    def exists(self, database: Path | None, name: str) -> bool:
        _no_file(database)
        q = exp.select(exp.Not(this=exp.Is(this=exp.func("to_regclass", exp.Literal.string(
            regclass_text(pg_name(name)))), expression=exp.null())))
        return bool(self.execute(q).column(0)[0].as_py())

    def refuse_taken(self, database: Path | None, name: str, noun: str = "a table", flag: str = "--overwrite") -> None:
        """Names what holds the name (a view is not "a table") and the flag of the asking command."""
        _no_file(database)
        with self._errors():
            existing = kind_of(self.con, pg_name(name))
        if existing is not None:
            raise taken(existing, name, flag)

    def drop(self, database: Path | None, name: str, kind: str = "TABLE") -> None:
        _no_file(database)
        self._run(exp.Drop(tables=[quoted_table(name)], kind=kind, exists=True))

    # -- helpers --------------------------------------------------------------------------
    def _run(self, stmt: exp.Expression) -> int:
        """Run a statement; the rows it wrote (``CREATE TABLE AS``'s command tag), -1 when it says none."""
        with self._errors():
            return int(self.con.execute(self.render(stmt)).rowcount)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except psycopg.OperationalError as e:
            if self.con.closed:
                raise Unreachable(_unreachable(self.dsn, e)) from None
            raise BackendError(_one_line(e)) from None
        except psycopg.Error as e:
            raise BackendError(_one_line(e)) from None


    def head(self, database: Path | None, name: str, rows: int) -> list[tuple[Any, ...]]:
        _no_file(database)
        table = self.execute(exp.select("*").from_(quoted_table(name)).limit(rows))
        return list(zip(*(c.to_pylist() for c in table.columns)))

    def raise_error(self, message: str, row: exp.Expression) -> exp.Expression:
        """PostgreSQL has no ``error()``: the message is cast to an integer, which fails naming it,
        made to depend on the row (``left(coalesce(row::text, ''), 0)``, always empty) so that the
        planner cannot fold the constant and fail a query no row of which reaches it."""
        empty = exp.func("left", exp.func("coalesce", exp.cast(row.copy(), "TEXT"), exp.Literal.string("")),
                         exp.Literal.number(0))
        return exp.cast(exp.cast(exp.DPipe(this=exp.Literal.string(message), expression=empty), "INTEGER"), "TEXT")

    def row_hash(self, values: Sequence[exp.Expression], types: Sequence[str | None] | None = None) -> exp.Expression:
        """With ``types``: the sum of ``row_hash_parts``.  Without: ``hashtextextended`` of the row's
        text, values joined by the unit separator, a NULL written as the record separator (no text
        value is either) — the form records written before the typed one hold.  Either is a
        BIGINT; its sum over a table is a NUMERIC."""
        parts = self.row_hash_parts(values, types)
        if parts is not None:
            return added(parts)

        def char(code: int) -> exp.Expression:
            return exp.Anonymous(this="chr", expressions=[exp.Literal.number(code)])

        joined = exp.Anonymous(this="concat_ws", expressions=[
            char(31), *[exp.func("coalesce", exp.cast(v, "TEXT"), char(30)) for v in values]])
        return exp.Anonymous(this="hashtextextended", expressions=[joined, exp.Literal.number(0)])

    def row_hash_parts(self, values: Sequence[exp.Expression],
                       types: Sequence[str | None] | None) -> list[exp.Expression] | None:
        """Each value hashed alone by its type, seeded by its position: an integer of at most 64 bits
        as a BIGINT (``hashint8extended``), any other value as its text (``hashtextextended``), a
        NULL as a fixed number of its position (``_null_hash``); each shifted right by as many bits
        as the sum of all of them needs to stay a BIGINT.  A third cheaper than hashing the row's
        joined text (no integer or row written out as text), and a sum, so a query that groups
        rows adds a grouped value's part once per group (``release.written``)."""
        if types is None:
            return None
        shift = exp.Literal.number(max(1, (len(values) - 1).bit_length()))  # n parts of 63 - shift bits fit
        parts: list[exp.Expression] = []
        for seed, (value, sql_type) in enumerate(zip(values, types, strict=True), start=1):
            integer = fits_bigint(sql_type)
            one = exp.Anonymous(this="hashint8extended" if integer else "hashtextextended",
                                expressions=[exp.cast(value, "BIGINT" if integer else "TEXT"),
                                             exp.Literal.number(seed)])
            one = exp.func("coalesce", one, exp.Literal.number(_null_hash(seed)))
            parts.append(exp.paren(exp.BitwiseRightShift(this=one, expression=shift.copy())))
        return parts

    def hash_types(self, relation: exp.Expression, columns: Sequence[str]) -> list[str | None]:
        """The columns' types as the server describes them (``_described``)."""
        query = exp.select(*[exp.column(c, quoted=True) for c in columns]).from_(readable(relation))
        return [sql_type for _, sql_type in self._described(query)]

    #: DATE: 4714-11-24 BC to 5874897-12-31; timestamps: 4714-11-24 BC to 294276-12-31 (``Backend.date_days``)
    date_days = {"DATE": (-2_440_588, 2_145_042_905), "TIMESTAMP": (-2_440_587, 106_762_938)}

    def day_number(self, value: exp.Expression) -> exp.Expression:
        """``date - date`` is an integer (sqlglot's date difference goes through timestamps, whose
        range ends 294276 AD, long before the dates')."""
        return exp.Sub(this=exp.cast(value, "DATE"), expression=exp.cast(exp.Literal.string("1970-01-01"), "DATE"))

    def shift_days(self, value: exp.Expression, days: exp.Expression, sql_type: str) -> exp.Expression:
        """``date + integer`` is a date; a timestamp adds ``n * INTERVAL '86400 seconds'``, a duration
        (PostgreSQL keeps seconds apart from days), so a zoned timestamp keeps elapsed time too."""
        n = exp.cast(days, "INTEGER")
        if sql_type.upper() == "DATE":
            return exp.cast(exp.Add(this=value, expression=n), "DATE")
        one_day = exp.Interval(this=exp.Literal.string("86400"), unit=exp.Var(this="SECOND"))
        return exp.Add(this=value, expression=exp.Mul(this=n, expression=one_day))

    def pseudonymize(self, value: exp.Expression, key: bytes, form: str) -> exp.Expression:
        """HMAC from the built-in ``sha256(bytea)`` (PostgreSQL 11 and later; no extension
        needed).  Older servers use pgcrypto's ``hmac()``, which must be installed there."""
        builtin = self.con.info.server_version >= 110000
        if not builtin:
            found = self.execute(exp.select(exp.func("count", exp.Star())).from_("pg_extension").where(
                exp.EQ(this=exp.column("extname"), expression=exp.Literal.string("pgcrypto"))))
            if not found.column(0)[0].as_py():
                raise BackendError("pseudonymizing on PostgreSQL before 11 needs the pgcrypto extension; run "
                                   "CREATE EXTENSION pgcrypto in the database, or upgrade PostgreSQL")
        return hmac_expression(value, key, form, pgcrypto=not builtin)

def _table(name: str) -> exp.Table:
    return exp.to_table(name)


def _no_file(database: Path | None) -> None:
    if database is not None:
        raise OutputError(f"the engine is PostgreSQL: views and tables go into its database, not into {database}; "
                          f"leave out --db")


def _arrow(description: Any, rows: list[tuple[Any, ...]]) -> pa.Table:
    names = [d.name for d in description]
    columns = list(zip(*rows)) if rows else [() for _ in names]
    arrays = []
    for d, values in zip(description, columns):
        arrow_type = TYPES.get(d.type_code, (None, None))[1]
        if d.type_code == 1700:
            values = tuple(float(v) if isinstance(v, decimal.Decimal) else v for v in values)
        if arrow_type is None:
            values = tuple(v if v is None or isinstance(v, str | int | float | dt.date) else str(v) for v in values)
        arrays.append(pa.array(values, type=arrow_type))
    return pa.table(dict(zip(names, arrays))) if names else pa.table({})


def _where(dsn: str) -> str:
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        return "the server in [backend] dsn"
    host = info.get("host") or "localhost"
    return f"{host}:{info.get('port') or 5432}" + (f" database {info['dbname']}" if info.get("dbname") else "")


_CAUSES = (  # (what the server or libpq said, the advice for it)
    (r'database "([^"]+)" does not exist',
     "create it (createdb {0}) or fix the database name in [backend] dsn"),
    (r'role "([^"]+)" does not exist|password authentication failed|no password supplied|authentication failed'
     r'|pg_hba\.conf', "fix the user or password in [backend] dsn"),
    (r"connection refused|timeout|timed out|could not translate host name|no such file or directory"
     r"|network is unreachable|no route to host",
     "is the server running? start a server (pg_ctl -D DATA start, or bash .ci/postgres.sh start DIR) or fix "
     "[backend] dsn (host, port)"),
)


def _unreachable(dsn: str, e: Exception) -> str:
    """One short line: where, the cause in PostgreSQL's words (its first line only), and the advice
    that matches it (a missing database needs no server started)."""
    text = " ".join(str(e).split())
    for pattern, advice in _CAUSES:
        m = re.search(pattern, text, re.IGNORECASE)
        if m:
            reason = m.group(0)
            return f"cannot reach PostgreSQL at {_where(dsn)}: {reason}; {advice.format(*m.groups())}"
    reason = re.split(r"(?<=[a-z\)]) (?:Is the server|HINT|DETAIL)", text)[0][:160]
    return f"cannot reach PostgreSQL at {_where(dsn)}: {reason}; check [backend] dsn"


def _one_line(e: Exception) -> str:
    text = " ".join(str(e).split())
    return f"PostgreSQL: {text[:400]}"


def hmac_expression(value: exp.Expression, key: bytes, form: str, pgcrypto: bool = False) -> exp.Expression:
    """HMAC-SHA-256 of ``value``'s text (``convert_to(CAST(v AS TEXT), 'UTF8')``) in PostgreSQL:
    built from ``sha256(bytea)`` and the key's pads, or (``pgcrypto``) pgcrypto's ``hmac()``."""
    def fn(name: str, *args: exp.Expression) -> exp.Expression:
        return exp.Anonymous(this=name, expressions=list(args))

    def bytea(data: bytes) -> exp.Expression:
        return fn("decode", exp.Literal.string(data.hex()), exp.Literal.string("hex"))

    message = fn("convert_to", exp.cast(value, "TEXT"), exp.Literal.string("UTF8"))
    if pgcrypto:
        digest = fn("hmac", message, bytea(key), exp.Literal.string("sha256"))
    else:
        inner, outer = pads(key)
        digest = fn("sha256", exp.DPipe(this=bytea(outer), expression=fn(
            "sha256", exp.DPipe(this=bytea(inner), expression=message))))
    hexed = fn("encode", digest, exp.Literal.string("hex"))
    if form == "hex":
        return hexed
    prefix = fn("substr", hexed, exp.Literal.number(1), exp.Literal.number(INTEGER_DIGITS))
    bits = exp.DataType.build(f"BIT({4 * INTEGER_DIGITS})", dialect="postgres")
    return exp.cast(exp.cast(exp.DPipe(this=exp.Literal.string("x"), expression=prefix), bits), "BIGINT")
