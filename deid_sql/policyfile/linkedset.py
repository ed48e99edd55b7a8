"""The set of a policy file saved on a spec with linked tables (``[[table]]``).

A set's batches are released together (``applyset.py``): a batch of the person source and one of
every linked table.  The policy file therefore keeps what each linked batch is released by — its
release name, its person key column, its column roles (a ``shift`` list included), its columns
with their type classes and its orphans rule — with the person source's release name and
``[person] shift_days``, and the spec hash covers all of it: a linked table declared otherwise
at apply (another role, another key, another orphans rule, another shift) would release other
columns, pseudonyms or dates than the ones reviewed when the policy was saved, so it is refused
like any other change of the spec.  A file saved without linked tables has no ``set`` entry and
hashes exactly as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..contract.roles import LISTS, UNLISTED
from ..errors import DeidError
from ..spec.linked import ORPHANS, RELEASE_NAME

if TYPE_CHECKING:
    from ..spec.file import Spec
    from ..spec.linked import LinkedTable

Fail = Callable[[str, str], DeidError]


@dataclass(frozen=True)
class SavedTable:
    """One linked table as saved: its declaration and the columns (name, type class) it had."""

    name: str
    person: str
    orphans: str
    unlisted: str
    roles: tuple[tuple[str, tuple[str, ...]], ...]  # (role, columns) for every role of ``LISTS``
    columns: tuple[tuple[str, str], ...]  # (name, type class), in the table's order
    source: str = ""  # where it was saved on (a path relative to the policy file, or an engine table)

    @classmethod
    def of(cls, table: LinkedTable, columns: Sequence[tuple[str, str]], source: str = "") -> SavedTable:
        r = table.roles
        return cls(table.name, table.person, table.orphans, r.unlisted,
                   tuple((role, tuple(getattr(r, role))) for role in LISTS), tuple(columns), source)

    def declaration(self) -> dict[str, Any]:
        """What the spec hash covers of this table (columns sorted: their order does not count)."""
        return {"name": self.name, "person": self.person, "orphans": self.orphans, "unlisted": self.unlisted,
                "roles": {role: list(cols) for role, cols in self.roles},
                "columns": sorted([list(c) for c in self.columns])}

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "person": self.person, "orphans": self.orphans,
                "unlisted": self.unlisted, "roles": {role: list(cols) for role, cols in self.roles},
                "columns": [{"name": n, "class": k} for n, k in self.columns]}


@dataclass(frozen=True)
class SavedSet:
    """The set: the person source's release name, ``[person] shift_days`` and every linked table."""

    source_name: str
    shift_days: int | None
    tables: tuple[SavedTable, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tables)

    def table(self, name: str) -> SavedTable | None:
        return next((t for t in self.tables if t.name == name), None)

    def declaration(self) -> dict[str, Any]:
        """The file's ``set`` entry as the spec hash sees it (where the tables were saved on is not
        part of it: batches live elsewhere)."""
        return {"source_name": self.source_name, "shift_days": self.shift_days,
                "tables": [t.declaration() for t in self.tables]}

    def to_json(self) -> dict[str, Any]:
        return {"source_name": self.source_name, "shift_days": self.shift_days,
                "tables": [t.to_json() for t in self.tables]}

    @classmethod
    def from_json(cls, raw: Any, fail: Fail) -> SavedSet | None:
        """The ``set`` entry of a file (None when absent: saved on one table); ``fail`` builds the
        reader's one-line refusal of a malformed entry."""
        if raw is None:
            return None
        if not isinstance(raw, dict) or not isinstance(raw.get("source_name"), str):
            raise fail("set", "must be an object with the person source's release name (\"source_name\")")
        days = raw.get("shift_days")
        if days is not None and (not isinstance(days, int) or isinstance(days, bool) or days < 1):
            raise fail("set.shift_days", "must be a whole number of days or null")
        tables = raw.get("tables")
        if not isinstance(tables, list) or not tables:
            raise fail("set.tables", "must list the linked tables")
        out = tuple(_table(t, f"set.tables[{i}]", fail) for i, t in enumerate(tables))
        names = [raw["source_name"], *(t.name for t in out)]
        if len(set(names)) != len(names):
            raise fail("set.tables", "names a table twice")
        return cls(raw["source_name"], days, out)


def _table(raw: Any, where: str, fail: Fail) -> SavedTable:
    if not isinstance(raw, dict):
        raise fail(where, "must be a JSON object")
    text = {k: raw.get(k) for k in ("name", "person", "orphans", "unlisted")}
    if not all(isinstance(v, str) and v for v in text.values()):
        raise fail(where, "needs name, person, orphans and unlisted (strings)")
    if not RELEASE_NAME.fullmatch(text["name"]) or text["orphans"] not in ORPHANS or text["unlisted"] not in UNLISTED:
        raise fail(where, "has a bad name, orphans or unlisted value")
    roles = raw.get("roles")
    if not isinstance(roles, dict) or set(roles) != set(LISTS) or not all(
            isinstance(v, list) and all(isinstance(c, str) for c in v) for v in roles.values()):
        raise fail(f"{where}.roles", f"must map each of {', '.join(LISTS)} to a list of columns")
    columns = raw.get("columns")
    if not isinstance(columns, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str)
                                                and isinstance(c.get("class"), str) for c in columns):
        raise fail(f"{where}.columns", "must be a list of {\"name\", \"class\"} objects")
    source = raw.get("source", "")
    return SavedTable(text["name"], text["person"], text["orphans"], text["unlisted"],
                      tuple((role, tuple(roles[role])) for role in LISTS),
                      tuple((c["name"], c["class"]) for c in columns), source if isinstance(source, str) else "")


def spec_set(spec: Spec, saved: SavedSet | None) -> SavedSet | None:
    """The spec's set as the hash sees it now: its declarations, with the saved columns of each
    linked table (a linked batch's own columns are checked against those, ``applyset``); None for
    a spec without linked tables."""
    if not spec.tables:
        return None
    tables = []
    for t in spec.tables:
        was = saved.table(t.name) if saved is not None else None
        tables.append(SavedTable.of(t, was.columns if was is not None else ()))
    return SavedSet(spec.source_name, spec.person.shift_days if spec.person is not None else None, tuple(tables))


def set_difference(saved: SavedSet | None, now: SavedSet | None) -> str:
    """How the spec's set differs from the saved one, for the hash's refusal ('' if it does not)."""
    if saved is None and now is None:
        return ""
    if saved is None or now is None:
        return "; [[table]] was " + ("added" if saved is None else "removed")
    if saved.source_name != now.source_name:
        return f"; the person source's release name {saved.source_name!r} → {now.source_name!r}"
    if saved.shift_days != now.shift_days:
        return f"; [person] shift_days {saved.shift_days!r} → {now.shift_days!r}"
    if saved.names != now.names:
        return f"; linked tables {', '.join(saved.names)} are now {', '.join(now.names)}"
    for a, b in zip(saved.tables, now.tables):
        da, db = a.declaration(), b.declaration()
        for key in ("person", "orphans", "unlisted"):
            if da[key] != db[key]:
                return f"; [[table]] {a.name!r}: {key} {da[key]!r} → {db[key]!r}"
        for role in LISTS:
            if da["roles"][role] != db["roles"][role]:
                return f"; [[table]] {a.name!r}: {role} {da['roles'][role]} → {db['roles'][role]}"
    return ""


__all__ = ["SavedSet", "SavedTable", "set_difference", "spec_set"]
