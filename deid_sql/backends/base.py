"""The narrow interface every engine implements (ibis-style).

Nothing above ``backends/`` knows which engine runs: the problem asks a backend
to expose the source, aggregate it to cells, run queries built as sqlglot
expressions, and write views or tables.  Results come back as Arrow.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from sqlglot import exp

from ..contract.pseudonym import type_name
from ..errors import OutputError
from ..storage.tableref import TableRef

#: called inside the transaction that writes a table, before it commits: given a function that
#: runs a query there and the new table, it inspects what was written (raising aborts the write)
#: and returns companion tables (name -> rows) to create in the same transaction
Finish = Callable[[Callable[[exp.Expression], pa.Table], exp.Expression], Mapping[str, pa.Table]]
#: ``Finish`` of a set of tables written together (``Backend.create_tables``): given the same query
#: function and the new tables, in order, it judges them and returns the companion tables
SetFinish = Callable[[Callable[[exp.Expression], pa.Table], Sequence[exp.Expression]], Mapping[str, pa.Table]]
#: one table of a set: its name, the query that fills it, and the rows it must have
SetTable = tuple[str, exp.Expression, int]
#: one view of a set (``Backend.create_set_views``): its name, its stored query, the rows it must show
SetView = tuple[str, exp.Expression, int]


class Backend(ABC):
    """One connection to one engine."""

    dialect: str = ""
    title: str = ""  # the engine's name as people write it, for messages ("PostgreSQL")
    python_udfs: bool = True  # can register Python (Arrow) functions callable in SQL
    # aggregates that take the value on the row with the least / greatest ordering key (DuckDB's
    # arg_min / arg_max over a struct): a person's first and last row without a window's sort
    arg_aggregates: bool = False
    #: ``TableRef`` formats the engine reads in place ("csv", "parquet", "duckdb": a table in a DuckDB file)
    file_formats: frozenset[str] = frozenset()
    #: whether the engine has its own persistent catalog: sources may be its tables
    #: (``TableRef.format == "table"``) and outputs go there when ``database`` is None;
    #: without one (DuckDB in memory) sources are files and outputs need a DuckDB file
    catalog: bool = True
    #: whether ``row_hash`` reads the values' types (``hash_types``); a report then also accepts a record
    #: whose row hash is the form that reads none, which releases written before the typed form hold
    typed_row_hash: bool = False
    #: whether the engine can hold a view of a set of linked tables (``create_set_views``): its key
    #: table of raw person keys must be protected where it lives (PostgreSQL's grants, a DuckDB file
    #: that already holds the person source); an engine without grants (a local Spark catalog) cannot
    set_views: bool = False

    @classmethod
    def unreadable(cls, ref: TableRef) -> str | None:
        """Why this engine cannot read ``ref``, to follow "runs on <title>, which" (None: it can);
        a class method, so a job can refuse a source before connecting."""
        if ref.format == "table":
            return None if cls.catalog else f"reads batch files, not the table {ref.table} of an engine"
        if ref.format in cls.file_formats:
            return None
        if not cls.file_formats:
            return f"reads tables of its database, not the file {ref.path}"
        return f"cannot read the {'DuckDB' if ref.format == 'duckdb' else ref.format} file {ref.path}"

    @classmethod
    def check_outputs(cls, options: Mapping[str, Any], targets: Sequence[Any]) -> None:
        """Refuse (``OutputError``, one line) outputs this engine cannot write, by what is known
        without connecting (``options``: ``connect``'s keyword arguments; ``targets``:
        ``targets.Target``); an engine slow to start (Spark) checks names and existing objects here,
        so that a refusal costs no start.  Nothing by default: the connected checks follow."""
        return None

    @abstractmethod
    def close(self) -> None:
        """Release the connection (always call it, or use ``with``)."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def register_udfs(self) -> None:
        """Make the risk and KL term functions of ``deid_sql.udfs`` callable in SQL."""

    @abstractmethod
    def register_function(self, name: str, fn: Any, args: tuple[str, ...], returns: str) -> None:
        """Make a vectorized (Arrow in, Arrow out) Python function callable in SQL as
        ``name``; argument and return types are SQL type names such as ``DOUBLE``."""

    @abstractmethod
    def register_table(self, name: str, table: pa.Table, copy: bool = False) -> None:
        """Expose an Arrow table under ``name``; ``copy`` loads it into an engine-native
        temporary table (faster to scan repeatedly, e.g. cells queried per policy)."""

    @abstractmethod
    def relation(self, ref: TableRef, text_columns: Mapping[str, bool]) -> exp.Expression:
        """A FROM-able expression reading ``ref``; columns named in ``text_columns`` are
        read as text (CSV sniffing must not turn ZIP ``02134`` into 2134)."""

    @abstractmethod
    def create_temp_view(self, name: str, query: exp.Expression) -> None:
        """A session-local view, so later queries can say ``FROM name``."""

    @abstractmethod
    def columns(self, name: str) -> dict[str, str]:
        """Column name -> SQL type name of a table or view, in order."""

    def value_position(self, key: exp.Expression, values: Sequence[str]) -> exp.Expression | None:
        """The position of the text ``key`` among ``values`` (byte for byte; NULL when it is none of
        them) as one expression, where the engine has one cheaper than the load's join of every row
        to a table of the values; None (the default): the load joins."""
        return None

    def text_collations(self, ref: TableRef, names: Sequence[str]) -> dict[str, str]:
        """The columns among ``names`` of the source ``ref`` whose text the engine compares under a rule
        other than its bytes — a case- or accent-folding collation, blank-padded ``CHAR(n)`` — each with
        its declaration (``VARCHAR COLLATE nocase``).  Files have none; engines override this.  The
        guards compare byte for byte whatever this says (``sqltext.ExactText``); ``validate`` names
        these columns and counts the rows that differ from their domain spelling."""
        return {}

    @abstractmethod
    def render(self, query: exp.Expression) -> str:
        """SQL text of ``query`` in this engine's dialect (raises on what it cannot express)."""

    @abstractmethod
    def execute(self, query: exp.Expression | str, params: Mapping[str, Any] | None = None) -> pa.Table:
        """Run a query (an expression, or text from ``render``) and return the result as Arrow."""

    @abstractmethod
    def create_temp_table(self, name: str, query: exp.Expression) -> None:
        """A session-local table holding the result of ``query``."""

    @abstractmethod
    def stream(self, query: exp.Expression, batch_rows: int = 1_000_000) -> Iterator[pa.RecordBatch]:
        """Run a query and yield its result batch by batch (bounded memory)."""

    @abstractmethod
    def create_view(self, database: Path | None, name: str, query: exp.Expression, replace: bool,
                    companions: Mapping[str, pa.Table] | None = None) -> None:
        """Create a persistent view ``name`` in ``database`` (a DuckDB file), or in the engine's
        own catalog when ``database`` is None (PostgreSQL, Spark); ``companions`` (small tables,
        e.g. the release sidecar) are created with it: all of them, or none."""

    @abstractmethod
    def create_table(self, database: Path | None, name: str, query: exp.Expression,
                     expected_rows: int, replace: bool, finish: Finish | None = None) -> int:
        """Materialize ``query`` as table ``name`` in ``database`` (or the engine's catalog when
        None) atomically; the row count must equal ``expected_rows`` or nothing is written.
        ``finish`` (see ``Finish``) inspects the written table before it becomes visible and
        adds companion tables; if it raises, nothing is written.  Returns the row count."""

    @abstractmethod
    def create_tables(self, database: Path | None, tables: Sequence[SetTable], replace: bool,
                      finish: SetFinish | None = None) -> list[int]:
        """``create_table`` for several tables that land together or not at all (a release set of
        linked tables): every table is written and its row count checked, ``finish`` judges them
        all and adds companion tables, and only then does any of them become visible; any failure
        (a wrong row count, a refused gate, an engine error) leaves none of them, and a table of
        the same name that existed before stays as it was.  Returns the row counts, in order."""

    def create_set_views(self, database: Path | None, keys: Sequence[tuple[str, exp.Expression]],
                         views: Sequence[SetView], replace: bool, finish: SetFinish) -> list[int]:
        """The views of a set of linked tables and their key tables, all or none (``sets.views``):
        each key table created from its query (run once, never stored: it may hold the key's pads) and
        locked to its owner, each view created from its stored query (which names the key tables) and
        its rows counted, ``finish`` judging the views and returning companion tables (the record),
        then one commit.  ``replace`` replaces every existing object of those names (a view keeps its
        grants); without it an existing name is refused.  Returns each view's rows, in order.  Only
        engines with ``set_views`` implement it."""
        raise OutputError(f"{self.title} cannot hold views of a set of linked tables: their key table of raw person "
                          f"keys would be readable by anyone who can read the views; release the set with deid-sql "
                          f"materialize --tables PREFIX")

    @abstractmethod
    def exists(self, database: Path | None, name: str) -> bool:
        """Whether ``database`` already holds a table or view called ``name`` (checked before a
        job writes several objects, so a clash stops it before anything is written)."""

    def refuse_taken(self, database: Path | None, name: str, noun: str = "a table", flag: str = "--overwrite") -> None:
        """``OutputError`` when ``name`` is taken in ``database`` (what ``exists`` says), in the words
        the engine's own write would use: a command checks its outputs with it before reading data."""
        if self.exists(database, name):
            where = str(database) if database is not None else "the database"
            raise OutputError(f"{where} already has {noun} named {name!r}; pick another name or pass {flag} to "
                              f"replace it")

    @abstractmethod
    def drop(self, database: Path | None, name: str, kind: str = "TABLE") -> None:
        """Drop table or view ``name`` from ``database`` if it exists (undoing a write that a
        later step of the same job could not complete)."""

    @abstractmethod
    def head(self, database: Path | None, name: str, rows: int) -> list[tuple[Any, ...]]:
        """The first ``rows`` rows of table or view ``name`` in ``database`` (a DuckDB file), or in
        the engine's own catalog when ``database`` is None: what an analyst sees first.  A DuckDB
        file is opened read-only, so a view is read as any other reader of the file would."""

    @abstractmethod
    def raise_error(self, message: str, row: exp.Expression) -> exp.Expression:
        """An expression that fails the query with ``message`` when a row reaches it (text, for a
        ``CASE`` branch no row should reach); ``row`` is a value of the row, for an engine that must
        make the failure depend on the row so its planner cannot fold it into failing every query."""

    def checksum(self, name: str, columns: Sequence[str]) -> str:
        """A fingerprint of table or view ``name``'s content in ``columns``: its row count and the sum
        of a 64-bit hash of each row, in one scan with no grouping or sorting (a fraction of the
        ``GROUP BY`` that makes cells).  The cells cache keys an engine table's cells by it, so any
        change to those columns' values makes a cached load stale.  Row order does not matter."""
        return fingerprint(self.execute, self, exp.to_table(name), columns)

    @abstractmethod
    def row_hash(self, values: Sequence[exp.Expression], types: Sequence[str | None] | None = None) -> exp.Expression:
        """A 64-bit integer hash of one row's ``values`` (NULLs and their positions included), as an
        expression of this engine whose sum over a table cannot overflow the engine's sum type.
        ``types``: each value's SQL type as ``hash_types`` gives it, for an engine whose hash is
        cheaper when it knows them; None: the form that reads no types (on PostgreSQL the hash of the
        row's text, which records written before the typed form hold: ``fingerprint(legacy=True)``)."""

    def row_hash_parts(self, values: Sequence[exp.Expression],
                       types: Sequence[str | None] | None) -> list[exp.Expression] | None:
        """``row_hash`` as one term per value, where this engine's hash is their sum (PostgreSQL's
        typed hash): a query that groups rows by some values adds those values' terms once per
        group instead of once per row (``release.written``).  None where the hash is one call
        (DuckDB's ``hash``, Spark's ``xxhash64``)."""
        return None

    def hash_types(self, relation: exp.Expression, columns: Sequence[str]) -> list[str | None] | None:
        """The SQL types of ``columns`` of ``relation`` that ``row_hash`` reads, or None where this
        engine's hash reads none (DuckDB's ``hash`` and Spark's ``xxhash64`` hash each value by its
        type themselves).  Asked on the connection that will run the hash, so a table of the
        writing transaction is seen."""
        return None

    def progress(self) -> float | None:
        """How far the query running now has come (0..1), or None when the engine cannot tell.

        Called from another thread while a job waits on the engine (``deid_sql.progress`` draws
        it on a terminal); it must be cheap, never block on the running query, and never raise
        for want of a running query."""
        return None

    @abstractmethod
    def shift_days(self, value: exp.Expression, days: exp.Expression, sql_type: str) -> exp.Expression:
        """``value`` (a date, or a timestamp without time zone: ``sql_type`` as ``columns`` names
        it) moved by ``days`` whole days (an integer expression), keeping its type: the date shift
        of ``[columns] shift`` (``contract.shift``).  NULL stays NULL.  A move past the engine's
        range (``day_range``) may fail or wrap around: ``shifting`` guards against it."""

    #: the days a value of each date type may reach on this engine: the first and last whole day, as
    #: days since 1970-01-01, by the type's name as ``columns`` gives it in capitals (``TIMESTAMP``
    #: stands for every timestamp not listed), a day inside the true limits for a zoned timestamp,
    #: whose date depends on the session's time zone.  A date shift that would move a value past them
    #: is refused with a count (``shifting.range_problems``) and never run: past its limits an
    #: engine fails the query (DuckDB, PostgreSQL) or silently wraps the date around (Spark's
    #: ``date_add``: 5881580-07-01 + 30 days was -5877641-07-17).  Empty: no limits known, no check.
    date_days: Mapping[str, tuple[int, int]] = {}
    #: whether a move past ``date_days`` fails the query on this engine (DuckDB, PostgreSQL); where it
    #: wraps around instead (Spark), every shifted value carries a guard (``shifting.guarded_offset``)
    date_overflow_fails: bool = True

    def day_range(self, sql_type: str | None) -> tuple[int, int] | None:
        """``date_days`` of a column of ``sql_type`` (None when the engine gives none)."""
        name = type_name(sql_type)
        found = self.date_days.get(name)
        if found is None and name != "DATE":
            found = self.date_days.get("TIMESTAMP")
        return found

    def day_number(self, value: exp.Expression) -> exp.Expression:
        """The day of a date or timestamp ``value`` as whole days since 1970-01-01 (an integer
        expression that holds every day of ``date_days`` without failing)."""
        return exp.DateDiff(this=exp.cast(value, "DATE"), expression=exp.cast(exp.Literal.string("1970-01-01"), "DATE"),
                            unit=exp.var("DAY"))

    @abstractmethod
    def pseudonymize(self, value: exp.Expression, key: bytes, form: str) -> exp.Expression:
        """HMAC-SHA-256 of ``value``'s text under ``key``, as an expression of this engine.

        Contract (``deid_sql.contract.pseudonym`` is the reference): the message is the UTF-8
        bytes of ``value`` cast to the engine's text type; NULL gives NULL; ``form`` "hex" gives
        the 64 lowercase hex digits, "integer" the first 15 hex digits as a BIGINT.  Every engine
        returns the same pseudonym for the same text, so releases join across engines and
        batches.  The key is in the expression (as HMAC pads): run it, never store it (no view,
        no printed SQL)."""


def miscounted(name: str, rows: int, expected: int, tables: int = 1) -> str:
    """The one line of a write whose table got another row count than its source gives."""
    if tables == 1:
        return f"materialized {rows} rows but the source has {expected}; nothing was written"
    return (f"materialized {rows} rows into {name}, not the {expected} its source gives; no table of the set "
            f"was written")


def literal_rows(table: pa.Table) -> exp.Select:
    """``SELECT * FROM (VALUES …)`` holding a small Arrow table as literals (text, numbers, NULL):
    how a companion table (a release sidecar) is created by ``CREATE TABLE … AS`` on any engine."""
    names = table.column_names
    rows = []
    for row in zip(*(c.to_pylist() for c in table.columns)):
        rows.append(exp.Tuple(expressions=[
            exp.null() if v is None else exp.Literal.number(v) if isinstance(v, int | float) and not isinstance(v, bool)
            else exp.Literal.string(str(v)) for v in row]))
    values = exp.Values(expressions=rows, alias=exp.TableAlias(
        this=exp.to_identifier("deid_rows"), columns=[exp.to_identifier(n, quoted=True) for n in names]))
    text = {n for n in names if pa.types.is_string(table.schema.field(n).type)}
    return exp.select(*[exp.cast(exp.column(n, quoted=True), "VARCHAR") if n in text else exp.column(n, quoted=True)
                        for n in names]).from_(values)


def readable(relation: exp.Expression) -> exp.Expression:
    """``relation`` as a ``FROM`` item: a table as itself, a query as a subquery."""
    return relation if isinstance(relation, exp.Table) else exp.select("*").from_(relation.copy()).subquery("r")


def hashed_row(backend: Backend, relation: exp.Expression, columns: Sequence[str],
               legacy: bool = False) -> exp.Expression:
    """``Backend.row_hash`` of ``columns`` of ``relation``, in the one form every fingerprint of it
    takes (the types read from the relation itself), so the hash taken while writing a table and
    the one a report takes later agree.  ``legacy``: the form that reads no types."""
    values = [exp.column(c, quoted=True) for c in columns]
    return backend.row_hash(values, None if legacy else backend.hash_types(relation, columns))


def fingerprint(run: Callable[[exp.Expression], pa.Table], backend: Backend, relation: exp.Expression,
                columns: Sequence[str], legacy: bool = False) -> str:
    """``Backend.checksum``'s fingerprint (row count and row-hash sum, ``"n:h"``) of ``columns`` of
    any relation, run by ``run`` (the backend's ``execute``, or the transaction writing a table): the
    cells cache's key of an engine table, and the row hash a table release's record holds and a
    report recomputes, are the same sum.  ``legacy``: ``hashed_row``'s form that reads no types."""
    query = exp.select(
        exp.alias_(exp.cast(exp.func("count", exp.Star()), "VARCHAR"), "n"),
        exp.alias_(exp.cast(exp.func("sum", hashed_row(backend, relation, columns, legacy)), "VARCHAR"), "h"),
    ).from_(readable(relation))
    row = run(query).to_pylist()[0]
    return fingerprint_text(row["n"], row["h"])


def fingerprint_text(rows: object, hash_sum: object) -> str:
    """A fingerprint as records keep it, ``"n:h"``: the row count and the sum of the row hashes (None
    for an empty table, whose SUM is NULL), whichever query summed them (``release.written``)."""
    return f"{rows}:{hash_sum}"
