"""Where a ledger's tables live: a DuckDB file (the default) or tables on PostgreSQL, behind one narrow interface.

``Ledger`` (``store.py``) writes its SQL once, with the tables as ``{entries}``, ``{tuples}``,
``{persons}``, ``{state}`` and ``{combined}`` and parameters as ``?``; a database fills in its own
quoted names and parameter markers, runs it, inserts Arrow tables, and hashes an entry's persons
in the same canonical text on every engine (so a chain verifies the same wherever it is kept).
The names are ours (fixed suffixes on a name parsed by the engine's rules), never spliced user text.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import duckdb
import pyarrow as pa
from sqlglot import exp

from ..errors import OutputError, SpecError

TABLES = ("entries", "tuples", "persons", "state", "combined")
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS {entries} (seq BIGINT PRIMARY KEY, body VARCHAR NOT NULL, "
    "recipient VARCHAR NOT NULL, key_fingerprint VARCHAR NOT NULL, previous VARCHAR NOT NULL, "
    "hash VARCHAR NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {tuples} (seq BIGINT NOT NULL, label INTEGER NOT NULL, groups INTEGER[] NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {persons} (seq BIGINT NOT NULL, pseudonym VARCHAR NOT NULL, label INTEGER NOT NULL)",
    # derived, rewritten with each entry: per recipient, each person's combined label (their label in each of
    # the recipient's entries), so a release is judged with one lookup however many releases came before;
    # persons by their pseudonym's integer form (``combine.person_keys``), stored in key order
    "CREATE TABLE IF NOT EXISTS {state} (recipient VARCHAR NOT NULL, person BIGINT NOT NULL, "
    "combined BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {combined} (recipient VARCHAR NOT NULL, combined BIGINT NOT NULL, "
    "labels BIGINT[] NOT NULL)",
)
STATE_SCHEMA = SCHEMA[3]


def schema_columns(table: str) -> tuple[str, ...]:
    """The columns of one of the ledger's tables, in order, as ``SCHEMA`` creates them."""
    statement = SCHEMA[TABLES.index(table)]
    body = statement[statement.index("(") + 1:statement.rindex(")")]
    return tuple(part.split()[0] for part in body.split(", "))
# the persons and tuples of one entry as one canonical text (pseudonyms in byte order), hashed where the data is
_TEXT = ("coalesce(string_agg(p.pseudonym || ' ' || array_to_string(t.groups, ','), chr(10) "
         "ORDER BY p.pseudonym{collate}, p.label), '')")
_FROM = " FROM {persons} p JOIN {tuples} t ON t.seq = p.seq AND t.label = p.label WHERE p.seq = ?"


class LedgerDatabase(Protocol):
    """What ``Ledger`` asks of the place its tables are kept."""

    where: str  # the ledger in words, for messages and records: a path, or ``postgres:NAME``

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def arrow(self, sql: str, params: Sequence[Any] = ()) -> pa.Table: ...

    def insert(self, table: str, rows: pa.Table) -> None: ...

    def transaction(self) -> Any: ...

    def content_hash(self, seq: int) -> str: ...

    def has_ledger(self) -> bool: ...

    def state_by_text(self) -> bool: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class LedgerTables:
    """A ledger kept as tables on PostgreSQL: ``name`` (``schema.prefix``, PostgreSQL's name rules) gives
    ``prefix_entries``, ``prefix_tuples``, ``prefix_persons``, ``prefix_state`` and ``prefix_combined``,
    reached through the spec's ``dsn``."""

    dsn: str
    name: str

    def __str__(self) -> str:
        return f"postgres:{self.name}"


Location = Path | LedgerTables


class FileDatabase:
    """A DuckDB file (owner-only), attached to an in-memory session as ``L``: read-only for a reader (no
    lock held against a writer, nothing checkpointed on close), read-write for appending."""

    def __init__(self, path: Path, create: bool) -> None:
        self.path = Path(path)
        self.where = str(self.path)
        if not create and not self.path.is_file():
            raise SpecError(f"no ledger at {self.path}: no linkable release has been recorded there yet")
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # owner-only from the first byte (the file and its write-ahead log): pseudonyms and labels of
        # every person released.  The mask is the process's, set only while DuckDB creates the files.
        mask = os.umask(0o077)
        try:
            self.con = duckdb.connect()
            path = exp.Literal.string(str(self.path)).sql("duckdb")  # a quoted literal, never spliced text
            self.con.execute(f"ATTACH {path} AS L{' (READ_ONLY)' if not create else ''}")
        except duckdb.Error as e:
            first = str(e).splitlines()[0]
            if "lock" in first.lower():  # another process has the file open for writing
                raise OutputError(f"ledger {self.path} is in use by another run (another release to a recipient "
                                  f"of this ledger is being recorded); run again when it has finished") from None
            raise SpecError(f"ledger {self.path} cannot be opened ({first}); is it a deid-sql "
                            f"ledger? Point [release] ledger at another file") from None
        finally:
            os.umask(mask)
        if create:
            for statement in SCHEMA:  # (a no-op on a ledger)
                self.con.execute(self._sql(statement))
        elif not self.has_ledger():
            self.con.close()
            raise SpecError(f"{self.path} is not a deid-sql ledger (it holds no ledger_entries table); point "
                            f"[release] ledger at the ledger file, or at a new file")

    @staticmethod
    def _sql(text: str) -> str:
        return text.format(**{t: f"L.ledger_{t}" for t in TABLES})

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.con.execute(self._sql(sql), list(params)).fetchall()

    def arrow(self, sql: str, params: Sequence[Any] = ()) -> pa.Table:
        return self.con.sql(self._sql(sql), params=list(params)).to_arrow_table()

    def insert(self, table: str, rows: pa.Table) -> None:
        name = f"deid_rows_{secrets.token_hex(4)}"
        self.con.register(name, rows)
        try:
            self.con.execute(self._sql(f"INSERT INTO {{{table}}} SELECT * FROM {name}"))  # both names are ours
        finally:
            self.con.unregister(name)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    def content_hash(self, seq: int) -> str:
        return str(self.rows("SELECT sha256(" + _TEXT.format(collate="") + ")" + _FROM, [seq])[0][0])

    def has_ledger(self) -> bool:
        return bool(self.con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'L' AND "
                                     "table_name = 'ledger_entries'").fetchall()[0][0])

    def state_by_text(self) -> bool:
        """Whether the recipients' state is the first layout's (persons by pseudonym text)."""
        return bool(self.con.execute("SELECT count(*) FROM duckdb_columns() WHERE database_name = 'L' AND "
                                     "table_name = 'ledger_state' AND column_name = 'pseudonym'").fetchall()[0][0])

    def close(self) -> None:
        self.con.close()


def postgres_content_hash_sql() -> str:
    """The content hash on PostgreSQL: the same text (pseudonyms in byte order: ``COLLATE "C"``), its
    UTF-8 bytes hashed, as lowercase hex (what DuckDB's ``sha256`` of the text gives)."""
    return ("SELECT encode(sha256(convert_to(" + _TEXT.format(collate=' COLLATE "C"') + ", 'UTF8')), 'hex')"
            + _FROM)
