"""A release's record as the ledger knows it: its hash, and whether the ledger still holds its entry.

The ledger keeps, per entry, the hash of the release's record (its sidecar without the ledger's own
part); the record keeps its entry's number and hash.  Each is the other's anchor: a hash chain cannot
show that its last entries were removed (the ledger as it was before them is whole), but the records
of those releases name them (``deid-sql ledger --verify --release FILE``).
"""

from __future__ import annotations

import json
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from ..ledger.store import Ledger
from .sidecar import text_sha256


def resolved(value: Any) -> Any:
    """A description with its background hashes waited for."""
    if isinstance(value, dict):
        return {k: (v.result() if isinstance(v, Future) else v) for k, v in value.items()}
    return value


def record_sha256(record: dict[str, Any]) -> str:
    """The hash of a release's record as the ledger keeps it (without the ledger's own part); the start
    of it, after the record's time, is the release's id in the ledger."""
    body = {k: v for k, v in record.items() if k != "ledger"}
    return text_sha256(json.dumps(resolved(body), sort_keys=True, default=str))


def _same_place(named: str, ledger: Ledger) -> bool:
    """Whether a record's ledger (a path, or ``postgres:NAME``) is ``ledger``."""
    if isinstance(ledger.location, Path):
        return not named.startswith("postgres:") and Path(named).resolve() == ledger.location.resolve()
    return named == ledger.where


def recorded_problems(ledger: Ledger | None, record: dict[str, Any], where: str) -> list[str]:
    """Whether ``ledger`` (None: there is none) still holds the entry a release's record (``where``: its
    sidecar) names, with the same hash and the record's own hash.  A hash chain cannot show that its
    last entries were removed; the records that name them can."""
    named = record.get("ledger") if isinstance(record.get("ledger"), dict) else None
    if named is None:
        return [f"{where}: the release was not recorded in a ledger (it carries no pseudonym)"]
    seq = named.get("entry")
    if ledger is None:
        return [f"{where}: its entry {seq} is not in the ledger (there is no ledger)"]
    if not _same_place(str(named.get("path", "")), ledger):
        return [f"{where}: the release was recorded in another ledger, {named.get('path')}"]
    found = next((e for e in ledger.entries() if e.seq == seq), None)
    if found is None:
        return [f"{where}: its entry {seq} is not in the ledger (removed: the last entries of a chain are found "
                f"missing only by the releases that name them)"]
    problems = []
    if found.hash != named.get("hash"):
        problems.append(f"{where}: entry {seq} is not the one it was recorded as (another hash)")
    if found.record_sha256 != record_sha256(record):
        problems.append(f"{where}: the record differs from the one entry {seq} was written with (edited)")
    return problems
