"""Who holds the key when a release's SQL runs: the SQL itself, or functions of the engine.

A pseudonym and a date offset are HMACs under the spec's secret (``pseudonym``, ``shift``).  By
default the SQL computes them from the engine's SHA-256 with the key's HMAC pads written in it as
literals (``Pads``: ``Backend.pseudonymize``), so it is run and never stored.  SQL that will be
stored — a dbt model of a set — calls named scalar functions instead (``Udfs``): the engine's
session registers them with the key it reads from its own environment when the SQL runs
(``backends/dbt_duckdb.py``), and no file holds the key.  Both give the reference's values
(``pseudonym.pseudonym``, ``shift.offset``), so the two releases agree byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sqlglot import exp

from .shift import shift_key


class Pseudonymizer(Protocol):
    """What a release's pseudonyms ask of an engine: its HMAC-SHA-256 expression of a value
    (``backends.base.Backend.pseudonymize``; the engines stand above these declarations)."""

    def pseudonymize(self, value: exp.Expression, key: bytes, form: str) -> exp.Expression: ...

#: the functions SQL written for ``Udfs`` calls (each takes the value's text; NULL gives NULL)
PSEUDONYM_HEX = "deid_pseudonym"  # (VARCHAR) -> VARCHAR: 64 lowercase hex digits
PSEUDONYM_INTEGER = "deid_pseudonym_int"  # (VARCHAR) -> BIGINT: the first 15 hex digits
SHIFT_OFFSET = "deid_shift_offset"  # (VARCHAR key, INTEGER days) -> INTEGER in [-days, +days]


class KeyHolder(Protocol):
    """Builds the keyed expressions of a release; ``holds_key``: the SQL it writes holds the key."""

    holds_key: bool

    def pseudonym(self, value: exp.Expression, key: bytes, form: str) -> exp.Expression: ...

    def offset(self, person: exp.Expression, secret: bytes, days: int) -> exp.Expression: ...


@dataclass(frozen=True)
class Pads:
    """The default: the engine's own SQL, the key's HMAC pads written in it (run, never stored)."""

    backend: Pseudonymizer
    holds_key: bool = True

    def pseudonym(self, value: exp.Expression, key: bytes, form: str) -> exp.Expression:
        return self.backend.pseudonymize(value, key, form)

    def offset(self, person: exp.Expression, secret: bytes, days: int) -> exp.Expression:
        """``n mod (2D + 1) − D`` with ``n`` the integer pseudonym under the shift key."""
        n = self.backend.pseudonymize(person, shift_key(secret), "integer")
        spread = exp.Literal.number(2 * days + 1)
        return exp.Sub(this=exp.Paren(this=exp.Mod(this=n, expression=spread)), expression=exp.Literal.number(days))


@dataclass(frozen=True)
class Udfs:
    """Calls of the functions named above, which the session running the SQL registers with the
    key from its environment; the SQL holds no key, so it may be stored."""

    holds_key: bool = False

    def pseudonym(self, value: exp.Expression, key: bytes, form: str) -> exp.Expression:
        name = PSEUDONYM_HEX if form == "hex" else PSEUDONYM_INTEGER
        return exp.Anonymous(this=name, expressions=[exp.cast(value, "VARCHAR")])

    def offset(self, person: exp.Expression, secret: bytes, days: int) -> exp.Expression:
        return exp.Anonymous(this=SHIFT_OFFSET, expressions=[exp.cast(person, "VARCHAR"), exp.Literal.number(days)])


__all__ = ["PSEUDONYM_HEX", "PSEUDONYM_INTEGER", "SHIFT_OFFSET", "KeyHolder", "Pads", "Udfs"]
