"""Pseudonyms: HMAC-SHA-256 of a value's text under a secret key, the same on every engine.

``pseudonym(key, value)`` is the pure-Python reference (``hmac``/``hashlib``) every engine's
SQL must reproduce byte for byte.  The engines build the HMAC from their own SHA-256
(RFC 2104): ``H((K' ^ opad) || H((K' ^ ipad) || message))`` where ``K'`` is the key padded to
the 64-byte block (hashed first when longer).  ``pads(key)`` gives the two 64-byte prefixes;
each backend's ``pseudonymize`` writes them as binary literals in the query.

What is hashed: the UTF-8 bytes of the value cast to text by the engine (``CAST(v AS
VARCHAR/TEXT/STRING)``); NULL stays NULL.  Text, whole numbers, UUIDs, dates and booleans have
the same text on every engine, so they get the same pseudonym everywhere and in every batch; every
other type (floating point, DECIMAL, timestamps of any precision or zone, TIME, INTERVAL, binary,
anything new) is refused (``STABLE_TYPES`` is an allow-list; ``type_problems``).

Forms: ``hex`` is the 64 lowercase hex digits; ``integer`` the first 15 hex digits (60 bits)
as a non-negative BIGINT.

The pads are the key in another form, so the SQL holding them must never be stored: a
view, compiled SQL or a dbt model of a pseudonymizing release is refused
(``Problem.query(..., persistent=True)``); the pads reach only the engine running the query.
An engine that records statement text (PostgreSQL with ``log_statement = 'all'``, Spark's UI
and event log) records them too: treat such logs like the key.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence

BLOCK = 64  # SHA-256 block size in bytes
INTEGER_DIGITS = 15  # hex digits of the integer form: 60 bits, always a non-negative BIGINT
# The types whose text (``CAST(v AS VARCHAR/TEXT/STRING)``) is the same on every engine, in every
# engine's spelling (DuckDB's, which the backends report, and PostgreSQL's and Spark's own): whole
# numbers, text, UUIDs, dates and booleans.  An allow-list, not a deny-list: a type not named here —
# floating point and DECIMAL (trailing zeros, exponents), every timestamp, time and interval (precision,
# time zones, separators), binary (escapes), an engine's type unknown to us — is refused, so a new
# type is refused until someone has checked that its text agrees everywhere.
STABLE_TYPES = frozenset({
    # whole numbers
    "TINYINT", "SMALLINT", "INTEGER", "INT", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
    "UHUGEINT", "INT1", "INT2", "INT4", "INT8", "SHORT", "LONG", "BYTE", "SIGNED", "SMALLSERIAL", "SERIAL",
    "BIGSERIAL", "SERIAL2", "SERIAL4", "SERIAL8",
    # text
    "VARCHAR", "TEXT", "STRING", "CHAR", "BPCHAR", "CHARACTER", "CHARACTER VARYING", "NVARCHAR", "NCHAR",
    # others with one text form
    "UUID", "DATE", "BOOLEAN", "BOOL",
})


def pads(key: bytes) -> tuple[bytes, bytes]:
    """The inner and outer 64-byte HMAC-SHA-256 prefixes of ``key`` (``K' ^ ipad``, ``K' ^ opad``)."""
    if not key:
        raise ValueError("an HMAC key must not be empty")
    block = hashlib.sha256(key).digest() if len(key) > BLOCK else key
    block = block.ljust(BLOCK, b"\0")
    return bytes(b ^ 0x36 for b in block), bytes(b ^ 0x5C for b in block)


def text_of(value: object) -> str:
    """A Python value as the engines write it as text (``CAST(v AS VARCHAR)``): booleans as
    ``true``/``false``, whole numbers in decimal, text as itself."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    raise TypeError(f"no engine-independent text form for {type(value).__name__}")


def pseudonym(key: bytes, value: object, form: str = "hex") -> str | int | None:
    """The reference pseudonym of ``value`` (None stays None)."""
    if value is None:
        return None
    if not key:
        raise ValueError("an HMAC key must not be empty")
    digest = hmac.new(key, text_of(value).encode("utf-8"), hashlib.sha256).hexdigest()
    return from_hex(digest, form)


def from_hex(digest: str, form: str) -> str | int:
    """The ``form`` of a hex digest: itself, or the BIGINT of its first 15 hex digits."""
    if form == "hex":
        return digest
    if form == "integer":
        return int(digest[:INTEGER_DIGITS], 16)
    raise ValueError(f"pseudonym form {form!r} is not hex or integer")


def pads_by_hand(key: bytes, message: bytes) -> str:
    """HMAC-SHA-256 from ``pads`` and plain SHA-256 (what the engines compute), as hex: the
    construction the SQL follows, checked against ``hmac`` in the tests."""
    inner, outer = pads(key)
    return hashlib.sha256(outer + hashlib.sha256(inner + message).digest()).hexdigest()


def type_name(sql_type: str | None) -> str:
    """A column type's base name in capitals, without parameters or array brackets' contents:
    ``varchar(20)`` → ``VARCHAR``, ``character varying(8)`` → ``CHARACTER VARYING``,
    ``DECIMAL(10,2)`` → ``DECIMAL``, ``timestamp without time zone`` → ``TIMESTAMP WITHOUT TIME ZONE``."""
    return " ".join(str(sql_type or "").upper().split("(")[0].split())


def is_stable_type(sql_type: str | None) -> bool:
    """Whether values of ``sql_type`` have the same text on every engine (``STABLE_TYPES``)."""
    return type_name(sql_type) in STABLE_TYPES


def type_problems(columns: Sequence[str], types: Mapping[str, str | None], where: str = "source") -> list[str]:
    """Pseudonymized columns whose type is not known to have one text on every engine (the same
    identifier would get different pseudonyms on different engines, or in batches read by another)."""
    out = []
    for name in columns:
        t = str(types.get(name) or "unknown type")
        if not is_stable_type(t):
            out.append(f"{where} column {name!r} is {t.upper()}, whose text differs between engines (only whole "
                       f"numbers, text, UUIDs, dates and booleans have one), so its pseudonym would too; store the "
                       f"identifier as text or a whole number, or list it under drop")
    return out
