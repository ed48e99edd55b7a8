"""Linked tables: ``[[table]]`` entries beside ``[source]``, released together with it as one set.

A hospital warehouse links patients, encounters, diagnoses and labs by a patient key.  The spec's
``[source]`` is the *person source*: it holds the QIs and ``[person] column`` names a person in
it.  Each ``[[table]]`` is a linked table of the same persons::

    [source]
    path = "patients.parquet"
    name = "patients"                 # its release name (default: the file's stem)

    [[table]]
    name = "encounters"               # the release name: encounters.parquet, <prefix>encounters
    path = "encounters.parquet"       # or table = "warehouse.encounters" on an engine
    person = "patient_id"             # its person key column (default: [person] column)
    keep = ["encounter_type"]
    shift = ["admitted", "discharged"]
    drop = ["encounter_id"]
    orphans = "refuse"                # rows whose person is not in the person source: or "drop"

Every column of a linked table has a role, as in ``[columns]`` (keep, sensitive, drop,
pseudonymize, shift); its person key is released pseudonymized under the spec's secret, the same
HMAC as the person source's key, so a patient joins across the released tables and with later
batches.  QIs live in the person source only: a linked table may not release a column named like
a QI column (drop it).  Stdlib and the contract only: the spec parses this before any data is read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..contract.roles import LISTS, ColumnRoles
from ..errors import Problems
from ..storage.tableref import TableRef

#: keys of a ``[[table]]`` besides where it lives (``path``/``table``/``format``/``delimiter``/``glob``)
TABLE_ROLE_KEYS = {"name", "person", "orphans", "unlisted", *LISTS}
ORPHANS = ("refuse", "drop")
RELEASE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,39}")
NAME_RULE = "lower-case letters, digits and _, not starting with a digit, at most 40 characters"


@dataclass(frozen=True)
class LinkedTable:
    """One ``[[table]]``: where it lives, its release name, its person key column, its roles."""

    name: str
    source: TableRef
    person: str
    roles: ColumnRoles
    orphans: str = "refuse"

    @property
    def where(self) -> str:
        return f"[[table]] {self.name!r}"


def default_name(ref: TableRef | None) -> str:
    """The release name of a table that gives none: its file's stem or its table's last part,
    lower-cased, with anything outside ``RELEASE_NAME`` turned into ``_``."""
    if ref is None:
        return "source"
    base = ref.table if ref.table else Path(str(ref.path)).name.split(".")[0]
    base = str(base).split(".")[-1].lower()
    name = re.sub(r"[^a-z0-9_]", "_", base)[:40] or "table"
    return "_" + name[:39] if name[0].isdigit() else name


def parse_release_name(raw: Any, ref: TableRef | None, where: str, problems: Problems) -> str:
    """``name`` of ``[source]`` or a ``[[table]]`` (default ``default_name``), checked."""
    if raw is None:
        return default_name(ref)
    if not isinstance(raw, str) or not RELEASE_NAME.fullmatch(raw):
        problems.add(where, f"name = {raw!r} must be a release name: {NAME_RULE}", 'e.g. name = "encounters"')
        return default_name(ref)
    return raw


def parse_linked(raw: Mapping[str, Any], ref: TableRef | None, where: str, spec_roles: ColumnRoles,
                 person_column: str | None, problems: Problems) -> LinkedTable | None:
    """One ``[[table]]`` whose location ``ref`` the spec has parsed (None when it was wrong)."""
    name = parse_release_name(raw.get("name"), ref, where, problems)
    where = f"[[table]] {name!r}"
    person = raw.get("person", person_column)
    if not isinstance(person, str) or not person:
        problems.add(where, "person must name the table's person key column", 'e.g. person = "patient_id"')
        person = None
    orphans = raw.get("orphans", "refuse")
    if orphans not in ORPHANS:
        problems.add(where, f"orphans = {orphans!r} must be \"refuse\" (rows whose person is not in the person source "
                            f"stop the release, with a count) or \"drop\" (they are left out and counted)")
        orphans = "refuse"
    lists: dict[str, tuple[str, ...]] = {}
    seen: dict[str, str] = {}
    for role in LISTS:
        value = raw.get(role, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            problems.add(where, f"{role} must be a list of column names", f'e.g. {role} = ["col_a", "col_b"]')
            value = []
        for column in value:
            if column in seen:
                problems.add(where, f"lists {column!r} under both {seen[column]} and {role}",
                             "give each column one role")
            seen.setdefault(column, role)
        lists[role] = tuple(dict.fromkeys(value))
    unlisted = raw.get("unlisted", "error")
    if unlisted not in ("error", "drop"):
        problems.add(where, f"unlisted = {unlisted!r} must be \"error\" or \"drop\"")
        unlisted = "error"
    if person is not None:
        role = seen.get(person)
        if role is None:  # the key links the table: released pseudonymized, under the spec's secret
            lists["pseudonymize"] = (person, *lists["pseudonymize"])
        elif role != "pseudonymize":
            problems.add(where, f"the person key {person!r} is listed under {role}; a linked table's key is released "
                                f"pseudonymized (the same HMAC as the person source's key, so patients join)",
                         f"list {person!r} under pseudonymize or nowhere")
    if (lists["pseudonymize"] or lists["shift"]) and spec_roles.secret_env is None:
        problems.add(where, "pseudonymizes its person key, which needs the spec's secret",
                     '[columns] secret_env = "<environment variable holding the key>" (and the person source\'s key '
                     'under [columns] pseudonymize)')
    if ref is None or person is None:
        return None
    roles = ColumnRoles(keep=lists["keep"], sensitive=lists["sensitive"], drop=lists["drop"],
                        pseudonymize=lists["pseudonymize"], shift=lists["shift"], secret_env=spec_roles.secret_env,
                        pseudonym=spec_roles.pseudonym, unlisted=str(unlisted), outside_label=spec_roles.outside_label,
                        declared=True)
    return LinkedTable(name, ref, person, roles, str(orphans))


def check_set(source: TableRef | None, source_name: str, tables: Sequence[LinkedTable], person_column: str | None,
              roles: ColumnRoles, qi_columns: Sequence[str], problems: Problems) -> None:
    """The rules between the tables of a set, checked without data: one name per table, no linked
    table that is the person source, no QI column released from a linked table, a person key
    released pseudonymized in the person source too."""
    if not tables:
        return
    if person_column is None:
        problems.append("[[table]] links tables by a person key: declare [person] column = \"<the person source's key "
                        "column>\" (the QIs live in the person source, [source])")
    elif roles.role(person_column) != "pseudonymize":
        problems.append(f"[[table]]: the person source's key {person_column!r} must be listed under [columns] "
                        f"pseudonymize, so it gets the same pseudonym as the linked tables' keys and patients join")
    names: dict[str, str] = {source_name: "[source]"}
    for t in tables:
        if t.name in names:
            problems.append(f"{t.where} and {names[t.name]} are both released as {t.name!r}; give each table its own "
                            f"name = \"…\"")
        names.setdefault(t.name, t.where)
        if source is not None and _same_place(t.source, source):
            problems.append(f"{t.where} is the person source itself ({source.describe()}); a linked table is another "
                            f"table of the same persons (encounters, diagnoses): remove it or point it elsewhere")
        released = [c for role in ("keep", "sensitive", "pseudonymize", "shift") for c in getattr(t.roles, role)
                    if c in set(qi_columns) and c != t.person]
        if released:
            problems.append(f"{t.where} releases {', '.join(repr(c) for c in released)}, named like a QI column of the "
                            f"person source; QIs live in the person source only (a linked table's copy would leave "
                            f"ungeneralized): list it under drop")


def _same_place(a: TableRef, b: TableRef) -> bool:
    if a.path is not None and b.path is not None:
        return Path(a.path).resolve() == Path(b.path).resolve() and a.table == b.table
    return a.path is None and b.path is None and a.table == b.table


__all__ = ["LinkedTable", "ORPHANS", "TABLE_ROLE_KEYS", "check_set", "default_name", "parse_linked",
           "parse_release_name"]
