"""Column roles: every source column is declared, so nothing leaves by accident.

A QI (``[[qi]] column``) has the role ``qi``.  Every other source column is listed once in
the spec's ``[columns]`` table::

    [columns]
    keep = ["visit_type"]            # released unchanged, a deliberate choice
    sensitive = ["diagnosis"]        # released unchanged; what ℓ-diversity and channels protect
    drop = ["name", "ssn"]           # identifiers removed
    pseudonymize = ["patient_id"]    # identifiers replaced by HMAC-SHA-256(key, value as text)
    shift = ["admitted"]             # dates moved by the person's secret offset ([person] shift_days)
    secret_env = "DEID_SQL_DEMO_KEY" # the environment variable holding the key (never the spec)
    pseudonym = "hex"                # "hex" (64 lowercase hex digits) or "integer" (first 15 as BIGINT)
    unlisted = "error"               # or "drop": every column listed nowhere is dropped

A shifted column is released shifted: the source is read with its dates already moved
(``shifting``), so a date QI listed under ``shift`` (the one list a QI may be in) is generalized
after the shift.  One list per role keeps a 40-column table readable: the reviewer sees what is released and
what is removed at a glance.  A column with no role is an error on every path that produces
rows or SQL (never silently passed through); evaluation and searches read only the QIs and
need no roles.

Released order (one rule for every path): the source's column order, dropped columns
removed, pseudonymized columns and QIs in place under their own names, and the suppression
flag ``deid_suppressed`` (when a path adds it) last.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from ..errors import SpecError
from .secret import HINT as _SECRET_HINT
from .secret import key_problem, variable_problem

if TYPE_CHECKING:
    from .keys import KeyHolder, Pseudonymizer

LISTS = ("keep", "sensitive", "drop", "pseudonymize", "shift")
COLUMNS_KEYS = set(LISTS) | {"secret_env", "pseudonym", "unlisted", "outside_label"}
OUTSIDE_LABEL = "*"  # what a QI value outside its declared domain is released as
PSEUDONYM_FORMS = ("hex", "integer")
UNLISTED = ("error", "drop")
FLAG = "deid_suppressed"  # the suppression flag column some paths append; never a source column's role


@dataclass(frozen=True)
class ColumnRoles:
    """The spec's ``[columns]``; ``declared`` is False when the spec has no such table."""

    keep: tuple[str, ...] = ()
    sensitive: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()
    pseudonymize: tuple[str, ...] = ()
    shift: tuple[str, ...] = ()  # dates moved by each person's offset (``contract.shift``); QIs may be listed
    secret_env: str | None = None
    pseudonym: str = "hex"
    unlisted: str = "error"
    outside_label: str = OUTSIDE_LABEL  # the guard's label of a QI value outside its domain
    declared: bool = False

    def role(self, name: str) -> str | None:
        """The listed role of a non-QI column (keep, sensitive, drop, pseudonymize, shift), or None."""
        for role in LISTS:
            if name in getattr(self, role):
                return role
        return None

    def listed(self) -> list[str]:
        return [c for role in LISTS for c in getattr(self, role)]

    def problems(self, source_columns: Sequence[str], qi_columns: Sequence[str], where: str = "source") -> list[str]:
        """Every disagreement between the roles and the source's columns, one line each:
        a QI listed in ``[columns]``, a listed column the source lacks, unroled columns."""
        out: list[str] = []
        source, qis = list(source_columns), set(qi_columns)
        for name in self.listed():
            if name in qis and self.role(name) != "shift":
                out.append(f"[columns] {self.role(name)} lists {name!r}, which is a QI ([[qi]] column); a QI's role "
                           f"is qi: remove it from [columns]")
        missing = [c for c in self.listed() if c not in source and c not in qis]
        if missing:
            shown = ", ".join(repr(c) for c in source[:20]) + ("…" if len(source) > 20 else "")
            out.append(f"[columns] lists {_names(missing)}, which {where} does not have; its columns are {shown}: "
                       f"fix the names or remove them")
        if self.unlisted == "error":
            unroled = [c for c in source if c not in qis and self.role(c) is None]
            if unroled:
                noun = "column" if len(unroled) == 1 else "columns"
                verb = "has" if len(unroled) == 1 else "have"
                fix = ("list each under [columns] keep, sensitive, drop or pseudonymize" if self.declared else
                       "add a [columns] table listing each under keep, sensitive, drop or pseudonymize")
                out.append(f"{where} {noun} {_names(unroled)} {verb} no role; {fix} (or set unlisted = \"drop\" "
                           f"in [columns] to drop every unlisted column)")
        return out

    def check(self, source_columns: Sequence[str], qi_columns: Sequence[str], where: str = "source") -> None:
        """Raise one ``SpecError`` with every problem of ``problems``."""
        problems = self.problems(source_columns, qi_columns, where)
        if problems:
            raise SpecError(problems)

    def released(self, source_columns: Sequence[str], qi_columns: Sequence[str],
                 where: str = "source") -> list[tuple[str, str]]:
        """``(name, role)`` of every released column, in release order (the flag is the caller's);
        raises ``SpecError`` when a column has no role."""
        self.check(source_columns, qi_columns, where)
        qis = set(qi_columns)
        out = []
        for name in source_columns:
            role = "qi" if name in qis else (self.role(name) or "drop")
            if role != "drop":
                out.append((name, role))
        return out

    def secret(self) -> bytes:
        """The pseudonymization key: the UTF-8 bytes of ``secret_env``'s value.  Missing, empty
        or no secret (``contract.secret``: a well-known variable, short, guessable) is an error,
        never a weak or empty key."""
        env = self.secret_env
        if not env:
            raise SpecError('[columns] pseudonymize needs secret_env = "<environment variable holding the key>"')
        refused = variable_problem(env)
        if refused is not None:
            raise SpecError(refused)
        value = os.environ.get(env)
        if value == "":
            raise SpecError(f"[columns] secret_env = {env!r} is set but empty, and an empty key protects nothing; "
                            f"export {env} with the key (e.g. {env}=$({_SECRET_HINT})), the same for every batch")
        if value is None:
            raise SpecError(f"[columns] secret_env = {env!r} names no set environment variable, and pseudonymizing "
                            f"needs its key; export {env} (e.g. {env}=$({_SECRET_HINT})), the same key for every "
                            f"batch")
        refused = key_problem(env, value)
        if refused is not None:
            raise SpecError(refused)
        return value.encode("utf-8")

    def describe(self) -> dict[str, Any]:
        return {"declared": self.declared, **{r: list(getattr(self, r)) for r in LISTS},
                "secret_env": self.secret_env, "pseudonym": self.pseudonym, "unlisted": self.unlisted}


def parse_columns(raw: Any, problems: list[str], qi_columns: Sequence[str] = ()) -> ColumnRoles:
    """Parse ``[columns]``; append one line per problem (``qi_columns``: the QIs' source columns,
    which must not be listed)."""
    where = "[columns]"
    if raw is None:
        return ColumnRoles()
    if not isinstance(raw, dict):
        problems.append(f'{where} must be a table, e.g. [columns] drop = ["name"], keep = ["visit_type"]')
        return ColumnRoles(declared=True)
    for key in raw:
        if key not in COLUMNS_KEYS:
            problems.append(f"unknown key {key!r} in {where}; allowed keys are {', '.join(sorted(COLUMNS_KEYS))}")
    lists: dict[str, tuple[str, ...]] = {}
    for role in LISTS:
        value = raw.get(role, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            problems.append(f'{where} {role} must be a list of column names, e.g. {role} = ["col_a", "col_b"]')
            value = []
        dups = sorted({v for v in value if value.count(v) > 1})
        if dups:
            problems.append(f"{where} {role} lists {_names(dups)} more than once; list each column once")
        lists[role] = tuple(dict.fromkeys(value))
    seen: dict[str, str] = {}
    for role in LISTS:
        for name in lists[role]:
            if name in seen:
                problems.append(f"{where} lists {name!r} under both {seen[name]} and {role}; give each column one role")
            else:
                seen[name] = role
    qis = [c for c in seen if c in set(qi_columns) and seen[c] != "shift"]  # a date QI may be shifted
    for name in qis:
        problems.append(f"{where} {seen[name]} lists {name!r}, which is a QI ([[qi]] column); a QI's role is qi: "
                        f"remove it from {where}")
    secret_env = raw.get("secret_env")
    if secret_env is not None and (not isinstance(secret_env, str) or not secret_env.strip()):
        problems.append(f'{where} secret_env must name an environment variable, e.g. secret_env = "DEID_SECRET"')
        secret_env = None
    elif secret_env is not None and (refused := variable_problem(secret_env)) is not None:
        problems.append(refused)
    for role in ("pseudonymize", "shift"):
        if lists[role] and secret_env is None and "secret_env" not in raw:
            problems.append(f'{where} {role} needs secret_env = "<environment variable holding the key>" '
                            f"(the key is never written in the spec)")
    if secret_env is not None and not lists["pseudonymize"] and not lists["shift"]:
        problems.append(f"{where} secret_env is only for pseudonymize and shift, which list no column; remove it")
    pseudonym = raw.get("pseudonym", "hex")
    if pseudonym not in PSEUDONYM_FORMS:
        problems.append(f"{where} pseudonym = {pseudonym!r} must be \"hex\" (64 hex digits) or \"integer\" "
                        f"(a BIGINT from the first 15 hex digits)")
        pseudonym = "hex"
    unlisted = raw.get("unlisted", "error")
    if unlisted not in UNLISTED:
        problems.append(f"{where} unlisted = {unlisted!r} must be \"error\" (every column needs a role) or \"drop\" "
                        f"(columns listed nowhere are dropped)")
        unlisted = "error"
    outside_label = raw.get("outside_label", OUTSIDE_LABEL)
    if not check_outside_label(outside_label, f"{where} outside_label", problems):
        outside_label = OUTSIDE_LABEL
    return ColumnRoles(keep=lists["keep"], sensitive=lists["sensitive"], drop=lists["drop"],
                       pseudonymize=lists["pseudonymize"], shift=lists["shift"], secret_env=secret_env,
                       pseudonym=str(pseudonym), unlisted=str(unlisted), outside_label=outside_label, declared=True)


def check_outside_label(label: Any, where: str, problems: list[str]) -> bool:
    """Whether ``label`` may label values outside a domain (a non-empty text); one problem if not."""
    if not isinstance(label, str) or not label.strip():
        problems.append(f"{where} = {label!r} must be a non-empty text, e.g. \"*\" or \"(outside)\"")
        return False
    return True


def apply_roles(select: exp.Select, roles: ColumnRoles, qi_columns: Sequence[str], backend: Pseudonymizer,
                where: str = "source", copy: bool = True, keys: KeyHolder | None = None,
                blank_suppressed: bool = True) -> exp.Select:
    """The outermost projections of a generalizing query with the roles applied: dropped
    columns removed, pseudonymized ones replaced by the backend's HMAC (same name), QIs and
    ``deid_suppressed`` untouched.  Raises ``SpecError`` for a column without a role.

    ``select`` projects every source column once, by name (``compile.generalize``, the
    anonymize and batch release queries); it is not changed — a new select is returned — unless
    ``copy=False`` (a caller that built it for this call: a large domain's copy costs seconds).
    ``keys``: who computes the pseudonyms (``contract.keys``; default the backend, pads in the SQL).

    A row the release suppresses (``deid_suppressed`` true) carries no pseudonym (NULL): its QIs are
    blanked, and a pseudonym would still link it to the person's earlier releases and let anyone count
    the person's rows (METHODS decision 16).  ``blank_suppressed=False`` keeps them, for the query the
    gate counts persons on and never releases (``Problem.query(measuring=True)``).
    """
    names = [p.alias_or_name for p in select.expressions]
    qis = set(qi_columns)
    roles.check([n for n in names if n != FLAG], qi_columns, where)
    out = select.copy() if copy else select
    key: bytes | None = None
    projections: list[exp.Expression] = []
    flagged = next((p.this if isinstance(p, exp.Alias) else p for n, p in zip(names, out.expressions) if n == FLAG),
                   None) if blank_suppressed else None
    for name, projection in zip(names, out.expressions):
        if name == FLAG or name in qis:
            projections.append(projection)
            continue
        role = roles.role(name)
        if role is None or role == "drop":  # unlisted with unlisted = "drop" (check passed)
            continue
        if role == "pseudonymize":
            if key is None:
                key = roles.secret()
            value = projection.this if isinstance(projection, exp.Alias) else projection
            hashed = (keys.pseudonym(value.copy(), key, roles.pseudonym) if keys is not None
                      else backend.pseudonymize(value.copy(), key, roles.pseudonym))
            if flagged is not None:
                suppressed = exp.func("coalesce", exp.cast(flagged.copy(), "BOOLEAN"), exp.false())
                hashed = exp.Case().when(suppressed, exp.null()).else_(hashed)
            projections.append(exp.alias_(hashed,
                                          exp.to_identifier(name, quoted=True)))
            continue
        projections.append(projection)
    out.set("expressions", projections)
    return out


def _names(names: Sequence[str]) -> str:
    return ", ".join(repr(n) for n in names)
