"""A ledger kept as tables on PostgreSQL (``[release] ledger_table``), readable by their owner only.

The same five tables as the ledger file (``database.SCHEMA``), named ``PREFIX_entries`` … in the
schema given, reached through the spec's own ``dsn``.  They hold pseudonyms and labels, so they
follow the rule of a set view's key tables: ``REVOKE ALL`` from PUBLIC and from every role a default
privilege granted, on every open for appending.  An append takes the entries table's lock first
(``SHARE ROW EXCLUSIVE``: readers read on, a second writer waits), so two releases to one ledger
are recorded one after the other and the chain stays one line.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv

from ..backends.postgres_refresh import Name, lock_to_owner, pg_name, regclass_text
from ..errors import OutputError, SpecError
from .database import SCHEMA, TABLES, LedgerTables, postgres_content_hash_sql, schema_columns


def table_names(name: str) -> dict[str, Name]:
    """The five tables of the ledger ``name`` (``schema.prefix``)."""
    base = pg_name(name, "[release] ledger_table")
    return {t: replace(base, parts=base.parts[:-1] + (f"{base.parts[-1]}_{t}",)) for t in TABLES}


class PostgresDatabase:
    """One autocommit connection; an append runs in one transaction (all of the entry or nothing)."""

    def __init__(self, location: LedgerTables, create: bool) -> None:
        import psycopg

        self.location = location
        self.where = str(location)
        self.names = table_names(location.name)
        self._sql_names = {t: regclass_text(n) for t, n in self.names.items()}  # every part quoted
        try:
            self.con = psycopg.connect(location.dsn, autocommit=True, connect_timeout=10)
        except psycopg.Error as e:
            raise OutputError(f"the ledger {self.where} cannot be reached ({str(e).splitlines()[0]}); check "
                              f"[backend] dsn") from None
        self._refuse_foreign_tables()  # read or appended, a table of other columns is never taken for ours
        if create:
            try:
                with self.con.transaction():
                    for statement in SCHEMA:
                        self.con.execute(self._sql(statement))
                    for name in self.names.values():
                        lock_to_owner(self.con, name)
            except psycopg.Error as e:
                self.con.close()
                raise OutputError(f"the ledger {self.where} cannot be created ({str(e).splitlines()[0]}); a "
                                  f"release that can be linked is recorded before it leaves, so nothing was "
                                  f"written") from None
        elif not self.has_ledger():
            self.con.close()
            raise SpecError(f"no ledger at {self.where}: no linkable release has been recorded there yet")

    def _refuse_foreign_tables(self) -> None:
        """A name that already holds a table of other columns is not a ledger's: refused before anything is
        created or any grant revoked, so no table of the user's is touched."""
        for table, name in self.names.items():
            found = [r[0] for r in self.con.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT "
                "attisdropped ORDER BY attnum", [regclass_text(name)]).fetchall()]
            if found and found != list(schema_columns(table)):
                self.con.close()
                raise OutputError(f"the ledger {self.where} would use the table {'.'.join(name.parts)}, which already "
                                  f"holds other columns ({', '.join(found[:4])}); it is not a deid-sql ledger's, so "
                                  f"nothing was written: name another [release] ledger_table")

    @classmethod
    def exists(cls, location: LedgerTables) -> bool:
        import psycopg

        names = table_names(location.name)
        try:
            with psycopg.connect(location.dsn, autocommit=True, connect_timeout=10) as con:
                found = con.execute("SELECT to_regclass(%s)", [regclass_text(names["entries"])]).fetchall()
        except psycopg.Error as e:
            raise OutputError(f"the ledger {location} cannot be reached ({str(e).splitlines()[0]}); check "
                              f"[backend] dsn") from None
        return found[0][0] is not None

    def _sql(self, text: str) -> str:
        return text.format(**self._sql_names).replace("?", "%s")  # our SQL holds no other '?' or '%'

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = self.con.execute(self._sql(sql), list(params))
        return cursor.fetchall() if cursor.description is not None else []

    def arrow(self, sql: str, params: Sequence[Any] = ()) -> pa.Table:
        cursor = self.con.execute(self._sql(sql), list(params))
        names = [d.name for d in cursor.description or ()]
        data = cursor.fetchall()
        return pa.table({n: pa.array([row[i] for row in data]) for i, n in enumerate(names)})

    def insert(self, table: str, rows: pa.Table) -> None:
        """COPY from text: flat columns as CSV written by Arrow, a list column as PostgreSQL array text."""
        flat = {}
        for name in rows.column_names:
            column = rows.column(name)
            if pa.types.is_list(column.type):
                column = pa.array(["{" + ",".join(map(str, v)) + "}" for v in column.to_pylist()], pa.string())
            flat[name] = column
        buffer = io.BytesIO()
        pacsv.write_csv(pa.table(flat), buffer, pacsv.WriteOptions(include_header=False))
        columns = ", ".join(f'"{c}"' for c in rows.column_names)  # our own column names
        with self.con.cursor().copy(self._sql(f"COPY {{{table}}} ({columns}) FROM STDIN (FORMAT csv)")) as copy:
            copy.write(buffer.getvalue())

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.con.transaction():
            self.con.execute(self._sql("LOCK TABLE {entries} IN SHARE ROW EXCLUSIVE MODE"))
            yield

    def content_hash(self, seq: int) -> str:
        return str(self.rows(postgres_content_hash_sql(), [seq])[0][0])

    def has_ledger(self) -> bool:
        return self.con.execute("SELECT to_regclass(%s)",
                                [regclass_text(self.names["entries"])]).fetchall()[0][0] is not None

    def state_by_text(self) -> bool:
        return False  # tables on PostgreSQL were first written in the integer layout

    def close(self) -> None:
        self.con.close()
