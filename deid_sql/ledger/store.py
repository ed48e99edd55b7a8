"""The ledger file: every linkable release each recipient received, chained by hash (METHODS decision 16).

Pseudonyms are stable (the same HMAC in every batch, table and engine), so a recipient who keeps
last month's release links every person to this month's.  The ledger remembers, per recipient,
what each release told them: per released person (pseudonym) the label tuple, and per QI the
partition of its domain the labels stand for (so the census can count the people in the
intersection of a person's regions).  It holds pseudonyms and labels only, never a key or a raw
value.

Five tables, in a DuckDB file (owner-only; the default) or on PostgreSQL (``database.py``,
``postgres.py``): ``entries`` (one row per release: who, when, spec, policy, the record's hash, the
key's fingerprint, the QIs' partitions, the persons' hash, the previous entry's hash and its own),
``tuples`` (per entry, its distinct label tuples as group ids per QI), ``persons`` (per entry, each
person's pseudonym and tuple), and the derived ``state`` and ``combined`` (per recipient, each
person's combined label).  An entry's hash covers its fields, the previous entry's hash and the
hash of its persons and tuples, so a removed, reordered or edited entry, or an edited person,
breaks the chain (``Ledger.verify``).  An entry is appended in one transaction: all of it or nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import OutputError
from .combine import dense, dense_keys, distinct_persons, first_of, per_person, person_keys, sorted_lookup
from .content import content_sha256
from .database import STATE_SCHEMA, FileDatabase, LedgerDatabase, Location

FORMAT = 1
FINGERPRINT_LABEL = b"deid-sql ledger: the fingerprint of a pseudonymization key"
GENESIS = "0" * 64  # the previous hash of a ledger's first entry


def key_fingerprint(secret: bytes) -> str:
    """HMAC-SHA-256 of a fixed label under the key: tells keys apart, never reveals one."""
    return hmac.new(secret, FINGERPRINT_LABEL, hashlib.sha256).hexdigest()[:32]


def domain_sha256(texts: Sequence[str]) -> str:
    """A QI domain's identity: its values' texts in order."""
    return hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class LedgerQI:
    """One QI as a release generalized it: its name, its domain's identity, its labels, and the
    partition of the domain's positions they stand for (``runs``: start, stop, group)."""

    name: str
    domain: str  # domain_sha256
    labels: tuple[str, ...]
    runs: tuple[tuple[int, int, int], ...]

    @classmethod
    def of(cls, name: str, domain: str, group_of: np.ndarray, labels: Sequence[str]) -> LedgerQI:
        gid = np.asarray(group_of, dtype=np.int64)
        if not gid.size:
            return cls(name, domain, tuple(labels), ())
        starts = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
        stops = np.r_[starts[1:], gid.size]
        return cls(name, domain, tuple(labels),
                   tuple((int(a), int(b), int(gid[a])) for a, b in zip(starts, stops)))

    def group_of(self) -> np.ndarray:
        """The group id of each domain position."""
        size = self.runs[-1][1] if self.runs else 0
        out = np.empty(size, dtype=np.int64)
        for start, stop, group in self.runs:
            out[start:stop] = group
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "domain": self.domain, "labels": list(self.labels),
                "runs": [list(r) for r in self.runs]}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> LedgerQI:
        return cls(raw["name"], raw["domain"], tuple(raw["labels"]), tuple(tuple(r) for r in raw["runs"]))


@dataclass(frozen=True)
class Entry:
    """One release to one recipient, as the ledger keeps it."""

    seq: int
    recipient: str
    release: str  # the release's id
    created_at: str
    key_fingerprint: str
    spec: str  # the spec's path
    spec_sha256: str | None
    policy: str  # the policy as given
    record_sha256: str  # the hash of the release's record (its sidecar, without the ledger part)
    target: str  # where it was released (a file, a table, a view, a folder), in words
    persons: int
    rows: int  # (person, label tuple) pairs stored: one per person unless a person shows several tuples
    held: int  # the persons the recipient holds with this release (in any of their releases)
    qis: tuple[LedgerQI, ...]
    content_sha256: str  # the hash of its persons and tuples
    previous: str
    hash: str

    def body(self) -> dict[str, Any]:
        """Every field the hash covers but the chain's own."""
        out = asdict(self)
        for key in ("seq", "previous", "hash"):
            del out[key]
        out["qis"] = [q.to_dict() for q in self.qis]
        out["format"] = FORMAT
        return out

    @staticmethod
    def chain_hash(seq: int, body: dict[str, Any], previous: str) -> str:
        text = json.dumps({"seq": seq, "previous": previous, "body": body}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    @classmethod
    def from_row(cls, seq: int, body: str, previous: str, hash_: str) -> Entry:
        raw = json.loads(body)
        raw.pop("format", None)
        raw["qis"] = tuple(LedgerQI.from_dict(q) for q in raw["qis"])
        return cls(seq=int(seq), previous=previous, hash=hash_, **raw)


@dataclass(frozen=True)
class Released:
    """What one release shows a recipient: per person, the label tuple (group ids per QI, -1 for a
    label outside the policy's).  A person may show several tuples (rows that differ); each is kept."""

    pseudonyms: pa.Array | pa.ChunkedArray  # text or the integer form, one per (person, tuple)
    groups: np.ndarray  # (n, QIs) int64
    keys: np.ndarray | None = None  # the pseudonyms' integer keys (``combine.person_keys``), made when absent
    person: np.ndarray | None = None  # each row's person, numbered 0..persons−1 (``combine.dense``)

    def __post_init__(self) -> None:
        if self.keys is None:
            object.__setattr__(self, "keys", person_keys(self.pseudonyms))

    def distinct(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct persons' keys (person i's at i), and each row's index among them (numbered when
        first asked: a union judgment numbers them by their place in the state instead)."""
        assert self.keys is not None
        if self.person is None:
            object.__setattr__(self, "person", dense(self.keys))
        assert self.person is not None
        return self.keys[first_of(self.person, self.persons)], self.person

    def deduplicated(self) -> Released:
        """One row per (person, tuple): a release read without ``DISTINCT`` may repeat one."""
        _, person = self.distinct()
        if self.persons == len(person):  # one row per person: nothing repeats
            return self
        row = dense_keys(np.column_stack([person, np.asarray(self.groups, dtype=np.int64)]))
        n = int(row.max()) + 1 if row.size else 0
        if n == row.size:
            return self
        first = first_of(row, n)
        assert self.keys is not None
        return Released(self.pseudonyms.take(pa.array(first)), self.groups[first], self.keys[first], person[first])

    @property
    def persons(self) -> int:
        if self.person is None:
            self.distinct()
        assert self.person is not None
        return int(self.person.max()) + 1 if self.person.size else 0


def exists(location: Location) -> bool:
    """Whether a ledger has been written at ``location``."""
    if isinstance(location, Path):
        return location.is_file()
    from .postgres import PostgresDatabase

    return PostgresDatabase.exists(location)


def open_database(location: Location, create: bool) -> LedgerDatabase:
    """The database of the ledger at ``location``, opened to read (it must exist) or to append."""
    if isinstance(location, Path):
        return FileDatabase(location, create)
    from .postgres import PostgresDatabase

    return PostgresDatabase(location, create)


class Ledger:
    """A ledger (a file path, or ``LedgerTables`` on PostgreSQL), opened for reading (``create=False``: it
    must exist) or for appending."""

    def __init__(self, location: Location, create: bool = True) -> None:
        self.location = location
        self.db = open_database(location, create)
        self.where = self.db.where
        if create and self.db.state_by_text():
            self._rebuild_state()

    def close(self) -> None:
        self.db.close()

    def _rebuild_state(self) -> None:
        """The first layout kept the recipients' state by pseudonym text: derived data, rebuilt from the
        entries when the ledger is next opened for appending (replayed until then)."""
        with self.db.transaction():
            recipients = [r for (r,) in self.db.rows("SELECT DISTINCT recipient FROM {entries}")]
            self.db.rows("DROP TABLE {state}")
            self.db.rows(STATE_SCHEMA)
            self.db.rows("DELETE FROM {combined}")
            for recipient in recipients:
                self._store_state(recipient, *self.replayed(recipient, 1 << 62))

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading ----------------------------------------------------------------------------------
    def entries(self, recipient: str | None = None) -> list[Entry]:
        """Every entry (of ``recipient``), in order."""
        where, params = ("WHERE recipient = ?", [recipient]) if recipient is not None else ("", [])
        rows = self.db.rows(f"SELECT seq, body, previous, hash FROM {{entries}} {where} ORDER BY seq", params)
        return [Entry.from_row(*row) for row in rows]

    def tuples(self, seq: int) -> dict[int, np.ndarray]:
        """Entry ``seq``'s label tuples: label id -> group ids per QI."""
        rows = self.db.rows("SELECT label, groups FROM {tuples} WHERE seq = ?", [seq])
        return {int(label): np.asarray(groups, dtype=np.int64) for label, groups in rows}

    def state(self, recipient: str, entries: int,
              before: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``recipient``'s persons (integer keys, sorted), each one's combined label and the combined labels'
        rows (``entries`` wide): the stored state, or the state as it was before entry ``before`` (replayed
        from the entries: a report of that release, or its search run again; also a ledger of the first
        layout opened for reading)."""
        if before is None and not self.db.state_by_text():
            table = self.db.arrow("SELECT person, combined FROM {state} WHERE recipient = ?", [recipient])
            keys = np.asarray(table.column("person").to_numpy(zero_copy_only=False), dtype=np.int64)
            combined = np.asarray(table.column("combined").to_numpy(zero_copy_only=False), dtype=np.int64)
            matrix = self.combined(recipient, entries)
            if keys.size < 2 or (keys[1:] > keys[:-1]).all():  # stored in order; a scan may not keep it
                return keys, combined, matrix
        else:
            keys, combined, matrix = self.replayed(recipient, 1 << 62 if before is None else before)
        order = np.argsort(keys, kind="stable")
        return keys[order], combined[order], matrix

    def held(self, recipient: str, persons: np.ndarray, entries: int,
             before: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """What ``recipient`` holds of each of ``persons`` (integer keys): its combined label (−1: never
        released to them) and the combined labels' rows (``entries`` wide) — the stored state (one
        lookup), or the state as it was before entry ``before`` (replayed: a report of that release,
        or its search run again)."""
        _, held, matrix, _ = self.held_at(recipient, persons, entries, before)
        return held, matrix

    def held_at(self, recipient: str, persons: np.ndarray, entries: int,
                before: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """``held``, with each key's place among the persons the recipient holds (−1: none; the places
        number them 0..size−1, which the caller may use as person ids) and that size."""
        keys, combined, matrix = self.state(recipient, entries, before)
        place = sorted_lookup(keys, np.asarray(persons, dtype=np.int64))
        held = np.where(place >= 0, combined[np.maximum(place, 0)] if combined.size else -1, -1)
        return place, held, matrix, len(keys)

    def combined(self, recipient: str, entries: int) -> np.ndarray:
        """``recipient``'s combined labels: row c = its label in each of their ``entries`` entries."""
        table = self.db.arrow("SELECT combined, labels FROM {combined} WHERE recipient = ?", [recipient])
        out = np.full((table.num_rows, entries), -1, dtype=np.int64)
        if table.num_rows:
            ids = np.asarray(table.column("combined").to_numpy(zero_copy_only=False), dtype=np.int64)
            flat = pc.list_flatten(table.column("labels").combine_chunks())
            out = np.full((int(ids.max()) + 1, entries), -1, dtype=np.int64)
            out[ids] = np.asarray(flat.to_numpy(zero_copy_only=False), dtype=np.int64).reshape(len(ids), entries)
        return out

    # -- appending ----------------------------------------------------------------------------------
    def append(self, entry: Entry, released: Released) -> Entry:
        """Append ``entry`` (its seq, previous and hashes are filled in here) with its persons, in one
        transaction; returns the entry as stored."""
        released = released.deduplicated()
        pseudonyms = released.pseudonyms.cast(pa.string())
        groups = np.asarray(released.groups, dtype=np.int64).reshape(len(pseudonyms), len(entry.qis))
        label = dense_keys(groups)  # hashed, not sorted
        uniq = groups[first_of(label, int(label.max()) + 1 if label.size else 0)]
        label = label.astype(np.int32)
        with self.db.transaction():
            last = self.db.rows("SELECT seq, hash FROM {entries} ORDER BY seq DESC LIMIT 1")
            seq, previous = (int(last[0][0]) + 1, str(last[0][1])) if last else (1, GENESIS)
            tuples = pa.table({"seq": pa.array(np.full(len(uniq), seq, dtype=np.int64)),
                               "label": pa.array(np.arange(len(uniq), dtype=np.int32)),
                               "groups": pa.array([list(map(int, row)) for row in uniq], pa.list_(pa.int32()))})
            persons = pa.table({"seq": pa.array(np.full(len(pseudonyms), seq, dtype=np.int64)),
                                "pseudonym": pseudonyms, "label": pa.array(label, pa.int32())})
            self.db.insert("tuples", tuples)
            self.db.insert("persons", persons)
            content = content_sha256(pseudonyms, label, uniq) or self.db.content_hash(seq)
            held = self._update_state(entry.recipient, released.keys, label, len(uniq))
            stored = Entry(**{**asdict(entry), "qis": entry.qis, "seq": seq, "previous": previous,
                              "rows": len(pseudonyms), "held": held, "content_sha256": content, "hash": ""})
            body = stored.body()
            digest = Entry.chain_hash(seq, body, previous)
            self.db.rows("INSERT INTO {entries} VALUES (?, ?, ?, ?, ?, ?)",
                         [seq, json.dumps(body, sort_keys=True, ensure_ascii=False), stored.recipient,
                          stored.key_fingerprint, previous, digest])
        return Entry(**{**asdict(stored), "qis": stored.qis, "hash": digest})

    def _update_state(self, recipient: str, persons: np.ndarray, label: np.ndarray, tuples: int) -> int:
        """Fold a new entry's persons (one row per (person, tuple label), integer keys) into ``recipient``'s
        state; returns the persons the recipient now holds."""
        before = self.db.rows("SELECT count(*) FROM {entries} WHERE recipient = ?", [recipient])[0][0]
        keys, combined, matrix = self.state(recipient, before)
        keys, combined, rows = fold(keys, combined, matrix, persons, label, tuples)
        self._store_state(recipient, keys, combined, rows)
        return len(keys)

    def _store_state(self, recipient: str, keys: np.ndarray, combined: np.ndarray, rows: np.ndarray) -> None:
        """Replace ``recipient``'s state: their persons in key order, and the combined labels' rows."""
        order = np.argsort(keys, kind="stable")
        self.db.rows("DELETE FROM {state} WHERE recipient = ?", [recipient])
        self.db.rows("DELETE FROM {combined} WHERE recipient = ?", [recipient])
        self.db.insert("state", pa.table({"recipient": pa.array([recipient] * len(keys), pa.string()),
                                          "person": pa.array(keys[order], pa.int64()),
                                          "combined": pa.array(combined[order], pa.int64())}))
        self.db.insert("combined", pa.table({
            "recipient": pa.array([recipient] * len(rows), pa.string()),
            "combined": pa.array(np.arange(len(rows), dtype=np.int64)),
            "labels": _lists(rows)}))

    # -- checking -------------------------------------------------------------------------------
    def verify(self, content: bool = True) -> list[str]:
        """Every break of the chain, one line each (empty: the ledger is whole).  ``content=False``
        checks the entries and the number of persons' rows they hold in all (each entry's counted only
        when the total differs), not the hash of every person: the check a release makes before it is
        judged, at the cost of reading the entries; ``deid-sql ledger --verify`` makes the full one."""
        problems = []
        previous, expected_seq = GENESIS, 1
        rows = self.db.rows("SELECT seq, body, recipient, key_fingerprint, previous, hash FROM {entries} ORDER BY seq")
        counts: dict[int, int] | None = None  # per entry, its persons' rows: counted when the total differs
        if not content:
            expected = sum(_rows_of(body) for _, body, *_ in rows)
            if self.db.rows("SELECT count(*) FROM {persons}")[0][0] != expected:  # (a count a file knows)
                counts = dict(self.db.rows("SELECT seq, count(*) FROM {persons} GROUP BY seq"))
        for seq, body, recipient, fingerprint, prev, digest in rows:
            where = f"entry {seq}"
            if seq != expected_seq:
                problems.append(f"{where}: expected entry {expected_seq} here (an entry was removed)")
            try:
                raw = json.loads(body)
            except json.JSONDecodeError:
                problems.append(f"{where}: its record is not readable")
                previous, expected_seq = digest, seq + 1
                continue
            if prev != previous:
                problems.append(f"{where}: it does not follow the entry before it (removed, reordered or edited)")
            if Entry.chain_hash(seq, raw, prev) != digest:
                problems.append(f"{where}: its fields were edited after it was written")
            if raw.get("recipient") != recipient or raw.get("key_fingerprint") != fingerprint:
                problems.append(f"{where}: its recipient or key column was edited")
            if content:
                digest_now = self.db.content_hash(seq)
                if digest_now != raw.get("content_sha256"):
                    problems.append(f"{where}: its persons or labels were edited after it was written")
            elif counts is not None and counts.get(seq, 0) != raw.get("rows"):
                problems.append(f"{where}: it holds {counts.get(seq, 0)} persons' labels, not the "
                                f"{raw.get('rows')} it was written with")
            previous, expected_seq = digest, seq + 1
        if content:
            problems.extend(self._verify_state())
        orphans = self.db.rows("SELECT DISTINCT seq FROM {persons} WHERE seq NOT IN (SELECT seq FROM {entries}) "
                               "ORDER BY seq")
        problems.extend(f"persons of entry {s} are in the ledger without their entry" for (s,) in orphans)
        return problems

    def replayed(self, recipient: str, before: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``recipient``'s state as it was before entry ``before`` (their entries up to it folded in
        again): the persons held (integer keys), each one's combined label, and the combined labels'
        rows.  What a report of an earlier release judges it with; a release itself reads the stored state."""
        keys, combined = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        matrix = np.zeros((0, 0), dtype=np.int64)
        for entry in self.entries(recipient):
            if entry.seq >= before:
                break
            rows = self.db.arrow("SELECT pseudonym, label FROM {persons} WHERE seq = ?", [entry.seq])
            tuples = self.db.rows("SELECT count(*) FROM {tuples} WHERE seq = ?", [entry.seq])[0][0]
            keys, combined, matrix = fold(keys, combined, matrix, person_keys(rows.column("pseudonym")),
                                          np.asarray(rows.column("label").to_numpy(zero_copy_only=False),
                                                     dtype=np.int64), int(tuples))
        return keys, combined, matrix

    def _verify_state(self) -> list[str]:
        """The recipients' states replayed from their entries' persons and compared with what is stored."""
        problems = []
        for (recipient,) in self.db.rows("SELECT DISTINCT recipient FROM {entries}"):
            keys, combined, matrix = self.replayed(recipient, 1 << 62)
            stored_keys, ids, held = self.state(recipient, matrix.shape[1])
            mine = dict(zip(keys.tolist(), (tuple(r) for r in matrix[combined].tolist())))
            theirs = dict(zip(stored_keys.tolist(),
                              (tuple(r) for r in held[ids].tolist()) if len(ids) and len(held) else []))
            if mine != theirs:
                problems.append(f"recipient {recipient!r}: what the ledger says they hold does not follow from "
                                f"their entries (its state was edited)")
        return problems

    def check(self, content: bool = True) -> None:
        """Raise ``OutputError`` when the chain is broken: nothing is judged against a ledger that lies."""
        problems = self.verify(content)
        if problems:
            raise OutputError(f"ledger {self.where} fails its hash chain ({problems[0]}"
                              f"{f'; and {len(problems) - 1} more' if len(problems) > 1 else ''}); an earlier "
                              f"release may be missing from what its recipient holds, so nothing is released "
                              f"against it: restore the ledger from a backup, or check it with deid-sql ledger "
                              f"SPEC --verify")


@dataclass(frozen=True)
class RecipientSummary:
    """What one recipient holds: their releases, the persons in any of them, and the union's k (the
    fewest persons sharing one combined label over all of them)."""

    recipient: str
    entries: tuple[Entry, ...]
    persons: int
    k: int

    def to_dict(self) -> dict[str, Any]:
        return {"recipient": self.recipient, "persons": self.persons, "union_k": self.k,
                "releases": [{"entry": e.seq, "release": e.release, "created_at": e.created_at, "target": e.target,
                              "persons": e.persons, "policy": e.policy, "spec": e.spec, "key": e.key_fingerprint,
                              "hash": e.hash} for e in self.entries]}


def summarize(ledger: Ledger) -> list[RecipientSummary]:
    """Every recipient of ``ledger``, in name order, with the union's k over all their releases."""
    out = []
    for (recipient,) in ledger.db.rows("SELECT DISTINCT recipient FROM {entries} ORDER BY recipient"):
        entries = tuple(ledger.entries(recipient))
        # the recipient's state holds each person's combined label: the union's groups are its ids
        persons, k = ledger.db.rows(
            "SELECT coalesce(sum(n), 0), coalesce(min(n), 0) FROM (SELECT count(*) AS n FROM {state} "
            "WHERE recipient = ? GROUP BY combined) AS g", [recipient])[0]
        out.append(RecipientSummary(recipient, entries, int(persons), int(k)))
    return out


def _rows_of(body: str) -> int:
    """The persons' rows an entry's record says it was written with (0: an unreadable record, which
    ``verify`` reports by itself)."""
    try:
        return int(json.loads(body).get("rows", 0))
    except (ValueError, TypeError, AttributeError):
        return 0


def _lists(rows: np.ndarray) -> pa.Array:
    """The rows of an int64 matrix as an Arrow list array, without a Python list per row."""
    width = rows.shape[1]
    offsets = pa.array(np.arange(0, rows.shape[0] * width + 1, width, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(np.ascontiguousarray(rows, dtype=np.int64).ravel()))


def fold(keys: np.ndarray, combined: np.ndarray, matrix: np.ndarray, persons: np.ndarray, label: np.ndarray,
         tuples: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A recipient's state after one more release: every person they hold (``keys``, integer, each with
    a combined label, a row of ``matrix``) and the release's (person, tuple label) rows.  A person
    shown under several tuples gets the label of that set (``tuples`` + its rank among the sets)."""
    new_keys, row_person = distinct_persons(np.asarray(persons, dtype=np.int64))
    mine, _, sets = per_person(row_person, np.asarray(label, dtype=np.int64), len(new_keys), first_set=tuples)
    if sets:  # number the sets in a fixed order (their members), whatever the rows' order
        rank = {s: i for i, s in enumerate(sorted(sets))}
        remap = {tuples + i: tuples + rank[s] for i, s in enumerate(sets)}
        mine = np.array([remap.get(int(v), int(v)) for v in mine], dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    found = sorted_lookup(keys[order], new_keys)
    at = np.where(found >= 0, order[np.maximum(found, 0)], -1) if keys.size else found
    fresh = at < 0
    all_keys = np.concatenate([keys, new_keys[fresh]])
    old = np.concatenate([combined, np.full(int(fresh.sum()), -1, dtype=np.int64)])
    now = np.full(len(all_keys), -1, dtype=np.int64)
    now[at[~fresh]] = mine[~fresh]
    now[len(keys):] = mine[fresh]
    key = dense_keys(np.column_stack([old, now]))
    width = matrix.shape[1]
    rows = np.full((int(key.max()) + 1 if key.size else 0, width + 1), -1, dtype=np.int64)
    if key.size:
        rep = first_of(key, rows.shape[0])
        before = old[rep]
        if width:
            rows[before >= 0, :width] = matrix[before[before >= 0]]
        rows[:, width] = now[rep]
    return all_keys, key, rows

