"""Pseudonyms: HMAC-SHA-256 of a value's text under a secret key, the same on every engine.

``pseudonym(key, value)`` is the pure-Python reference (``hmac``/``hashlib``) every engine's
SQL must reproduce byte for byte.  The engines build the HMAC from their own SHA-256
(RFC 2104): ``H((K' ^ opad) || H((K' ^ ipad) || message))`` where ``K'`` is the key padded to
the 64-byte block (hashed first when longer).  ``pads(key)`` gives the two 64-byte prefixes;
each backend's ``pseudonymize`` writes them as binary literals in the query.

What is hashed: the UTF-8 bytes of the value cast to text by the engine (``CAST(v AS
VARCHAR/TEXT/STRING)``); NULL stays NULL.  Text and whole numbers have the same text on
every engine, so they get the same pseudonym everywhere and in every batch; types whose text
differs between engines (floating point, timestamps) are refused (``type_problems``).

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
# type names (DuckDB's spelling, which every backend's ``columns`` reports) whose text form is not
# the same on every engine
UNSTABLE_TYPES = ("FLOAT", "DOUBLE", "REAL", "TIMESTAMP", "TIME", "INTERVAL")


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


def type_problems(columns: Sequence[str], types: Mapping[str, str | None], where: str = "source") -> list[str]:
    """Pseudonymized columns whose type has no engine-independent text (the same identifier
    would get different pseudonyms on different engines)."""
    out = []
    for name in columns:
        t = str(types.get(name) or "").upper()
        if t.split("(")[0].split(" ")[0] in UNSTABLE_TYPES:
            out.append(f"{where} column {name!r} is {t}, whose text differs between engines, so its pseudonym "
                       f"would too; store the identifier as text or a whole number, or drop it")
    return out
