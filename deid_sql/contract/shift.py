"""Date shifting: each person's dates moved by one secret offset, the same in every table, batch
and engine, so the intervals between one person's events survive and the calendar dates do not.

The offset of a person is derived, never stored: ``offset = n mod (2D + 1) − D`` days, where ``n``
is the integer pseudonym (``contract.pseudonym``, the first 15 hex digits of HMAC-SHA-256) of
the person key's text under a *shift key*, and ``D`` is ``[person] shift_days``.  The shift key
is HMAC-SHA-256(secret, ``SHIFT_CONTEXT``): a key of its own, so the released pseudonym of a
person (HMAC under the secret itself) tells nothing about their offset.  Every engine already
computes the pseudonym byte for byte (``Backend.pseudonymize``), so the offset is the same
everywhere; ``offset`` below is the pure-Python reference the engines are tested against.

The offset is uniform over the 2D + 1 whole days in [−D, +D] (the 60-bit integer's bias is below
2⁻⁵⁰).  Zero is one of them: a person may keep their dates, with probability 1/(2D + 1), and
nobody can tell which persons did.

Dates move by whole calendar days; timestamps by a duration of n × 24 hours (``Backend.shift_days``),
not by calendar days, so a zoned timestamp keeps the elapsed time between two events exactly
even across a daylight-saving change (its wall-clock hour may then differ by one).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence

from .pseudonym import pseudonym, type_name

SHIFT_CONTEXT = b"deid-sql date shift v1"
#: column types a shift moves by whole days with every interval kept (DuckDB's and the engines' spellings)
SHIFTABLE_TYPES = frozenset({"DATE", "TIMESTAMP", "TIMESTAMP WITHOUT TIME ZONE", "DATETIME", "TIMESTAMP_NTZ",
                             "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS", "TIMESTAMP WITH TIME ZONE",
                             "TIMESTAMPTZ"})


def shift_key(secret: bytes) -> bytes:
    """The key of the offsets: HMAC-SHA-256(secret, ``SHIFT_CONTEXT``), never the secret itself."""
    if not secret:
        raise ValueError("a shift needs a non-empty secret")
    return hmac.new(secret, SHIFT_CONTEXT, hashlib.sha256).digest()


def offset(secret: bytes, person: object, days: int) -> int | None:
    """The reference offset in days of ``person`` (its key's value) for ``[person] shift_days =
    days``; None for a NULL key."""
    n = pseudonym(shift_key(secret), person, "integer")
    if n is None:
        return None
    assert isinstance(n, int)
    return n % (2 * days + 1) - days


def is_shiftable(sql_type: str | None) -> bool:
    """Whether a column of ``sql_type`` is a date or timestamp, which a shift moves with every
    interval kept exactly."""
    return type_name(sql_type) in SHIFTABLE_TYPES


def shift_type_problems(columns: Sequence[str], types: Mapping[str, str | None], where: str) -> list[str]:
    """One line per ``shift`` column that is missing or not a date or timestamp."""
    out = []
    for name in columns:
        if name not in types:
            out.append(f"{where} has no column {name!r} to shift; its columns are "
                       f"{', '.join(list(types)[:12])}{'…' if len(types) > 12 else ''}")
            continue
        t = str(types.get(name) or "unknown type")
        if not is_shiftable(t):
            out.append(f"{where} column {name!r} is {t.upper()}, not a date: only dates and timestamps are shifted; "
                       f"list it under another role")
    return out


__all__ = ["SHIFTABLE_TYPES", "SHIFT_CONTEXT", "is_shiftable", "offset", "shift_key",
           "shift_type_problems"]
