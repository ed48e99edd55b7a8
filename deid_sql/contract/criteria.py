"""The spec's ``[release]`` table: the acceptance criteria every release must meet.

No criteria, no release: a spec without a criterion (no table, or a table holding none) is
refused on every release path, unless ``--accept-risk`` gives a reason.  Each criterion given
is checked on the figures of what is actually written (``release.figures``).  The original
data (a release that tells apart every record the source tells apart) is refused whatever the
criteria say, unless ``allow_original_data = true`` accepts it explicitly.

``outside_label`` is a guard setting, not a criterion: it belongs to ``[columns]``; checked here
for older specs, with a deprecation line (``sections.parse_columns_section`` takes its value).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import OutputError
from ..storage.names import parse_name
from .attribute import ATTRIBUTE_KEYS, GLOBAL_KEYS, AttributeDeclared, AttributeLimits, parse_attribute
from .roles import check_outside_label

CRITERIA_KEYS = ("max_risk", "max_expected_reidentifications", "max_record_risk", "min_k", "no_riskier_than")
# who receives the release and where their earlier releases are kept (METHODS decision 16): settings, not criteria
LEDGER_KEYS = ("recipient", "ledger", "ledger_table")
RELEASE_KEYS = {*CRITERIA_KEYS, *GLOBAL_KEYS, *LEDGER_KEYS, "sensitive", "allow_original_data", "outside_label"}
DEFAULT_RECIPIENT = "default"
LEDGER_FILE = "deid-sql-ledger.duckdb"  # the default ledger, in the spec's folder
# a recipient names a ledger's entries and may name a file or a table: letters, digits, '.', '_', '-'
RECIPIENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# the starting set a refusal names, to copy into the spec and tune to the data-use agreement
STARTING_SET = '[release] min_k = 5, max_record_risk = 0.2, no_riskier_than = "safe-harbor"'
REFERENCES = ("safe-harbor",)


@dataclass(frozen=True)
class Criterion:
    """One limit on one figure: ``figure <= limit`` (``max_*``) or ``figure >= limit`` (``min_k``)."""

    key: str  # the spec key, e.g. max_risk
    figure: str  # the release figure it limits, e.g. risk
    limit: float
    at_most: bool  # True: figure <= limit

    def passes(self, value: float) -> bool:
        return value <= self.limit * (1 + 1e-12) if self.at_most else value >= self.limit

    def describe(self, value: float) -> str:
        op = "<=" if self.at_most else ">="
        return f"{self.figure} {_fmt(value)} (limit {self.key} = {_fmt(self.limit)}: must be {op} {_fmt(self.limit)})"


@dataclass(frozen=True)
class ReleaseCriteria:
    """What a release must meet; ``declared`` is False when the spec has no ``[release]``."""

    max_risk: float | None = None
    max_expected_reidentifications: float | None = None
    max_record_risk: float | None = None
    min_k: int | None = None
    no_riskier_than: str | None = None  # "safe-harbor": risk <= Safe Harbor's on the same data
    allow_original_data: bool = False  # the original data may be released (when the criteria pass)
    declared: bool = False  # at least one criterion is given (an attribute criterion included)
    # per sensitive column with at least one attribute criterion, its limits (``contract.attribute``):
    # the global keys, overridden by its own [release.sensitive.COLUMN] table
    attribute: Mapping[str, AttributeLimits] = field(default_factory=dict)
    declared_attribute: AttributeDeclared = field(default_factory=AttributeDeclared)  # as written, unresolved
    recipient: str = DEFAULT_RECIPIENT  # who receives the release: its ledger entries are judged together
    ledger: Path | None = None  # the ledger file; None: LEDGER_FILE beside the spec
    ledger_table: str | None = None  # the ledger as tables on PostgreSQL (``schema.prefix``): the spec's engine

    def criteria(self, reference_risk: float | None = None) -> list[Criterion]:
        """The limits as figure checks; ``reference_risk`` is Safe Harbor's risk when asked for."""
        out = []
        if self.max_risk is not None:
            out.append(Criterion("max_risk", "risk", self.max_risk, True))
        if self.max_expected_reidentifications is not None:
            out.append(Criterion("max_expected_reidentifications", "expected_reidentifications",
                                 self.max_expected_reidentifications, True))
        if self.max_record_risk is not None:
            out.append(Criterion("max_record_risk", "max_record_risk", self.max_record_risk, True))
        if self.min_k is not None:
            out.append(Criterion("min_k", "k", float(self.min_k), False))
        if self.no_riskier_than is not None and reference_risk is not None:
            out.append(Criterion(f"no_riskier_than = {self.no_riskier_than!r}", "risk", reference_risk, True))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"declared": self.declared, "max_risk": self.max_risk,
                "max_expected_reidentifications": self.max_expected_reidentifications,
                "max_record_risk": self.max_record_risk, "min_k": self.min_k,
                "no_riskier_than": self.no_riskier_than, "allow_original_data": self.allow_original_data,
                **({"attribute": {c: a.to_dict() for c, a in self.attribute.items()}} if self.attribute else {}),
                "recipient": self.recipient}


def parse_release(raw: Any, problems: list[str], base: Path | None = None) -> ReleaseCriteria:
    """Parse ``[release]``; append one line per problem.  The attribute criteria are read here and
    resolved per sensitive column once the roles are known (``attribute.resolve_attribute``, called by
    the spec); ``base`` is the spec's folder (a sensitive column's hierarchy file is relative to it)."""
    where = "[release]"
    if raw is None:
        return ReleaseCriteria()
    if not isinstance(raw, dict):
        problems.append(f"{where} must be a table, e.g. [release] max_risk = 0.01, min_k = 5")
        return ReleaseCriteria()
    for key in raw:
        if key not in RELEASE_KEYS:
            problems.append(f"unknown key {key!r} in {where}; allowed keys are {', '.join(sorted(RELEASE_KEYS))}")
    values: dict[str, Any] = {}
    for key in ("max_risk", "max_record_risk"):
        if key in raw:
            values[key] = _number(raw[key], f"{where} {key}", problems, upper=1.0)
    if "max_expected_reidentifications" in raw:
        values["max_expected_reidentifications"] = _number(raw["max_expected_reidentifications"],
                                                           f"{where} max_expected_reidentifications", problems)
    if "min_k" in raw:
        k = raw["min_k"]
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            problems.append(f"{where} min_k = {k!r} must be a whole number >= 1 (e.g. min_k = 5)")
        else:
            values["min_k"] = int(k)
    if "no_riskier_than" in raw:
        ref = raw["no_riskier_than"]
        if ref not in REFERENCES:
            problems.append(f"{where} no_riskier_than = {ref!r} must be one of {', '.join(map(repr, REFERENCES))}")
        else:
            values["no_riskier_than"] = ref
    if "allow_original_data" in raw:
        allow = raw["allow_original_data"]
        if not isinstance(allow, bool):
            problems.append(f"{where} allow_original_data = {allow!r} must be true or false")
        else:
            values["allow_original_data"] = allow
    if "outside_label" in raw:
        label = raw["outside_label"]
        if check_outside_label(label, f"{where} outside_label", problems):  # used by [columns]' parser
            deprecated(f"{where} outside_label is a guard setting, not a criterion, and moves to [columns]: write "
                       f"[columns] outside_label = {label!r} (read from [release] for now)")
    attribute = parse_attribute(raw, base if base is not None else Path("."), problems)
    if "recipient" in raw:
        recipient = raw["recipient"]
        if not isinstance(recipient, str) or not RECIPIENT.fullmatch(recipient):
            problems.append(f"{where} recipient = {recipient!r} must be 1 to 64 letters, digits, '.', '_' or '-', "
                            f"starting with a letter or digit (it names the recipient's entries in the ledger), "
                            f"e.g. recipient = \"study-42\"")
        else:
            values["recipient"] = recipient
    if "ledger" in raw:
        ledger = raw["ledger"]
        if not isinstance(ledger, str) or not ledger.strip() or "\0" in ledger:
            problems.append(f"{where} ledger = {ledger!r} must be a file path (relative to the spec's folder), "
                            f"e.g. ledger = \"ledgers/study-42.duckdb\"")
        else:
            path = Path(ledger).expanduser()
            values["ledger"] = path if path.is_absolute() or base is None else base / path
    if "ledger_table" in raw:
        table = raw["ledger_table"]
        try:  # the name, and the longest of its tables' names, must be ones PostgreSQL keeps as written
            parse_name(table, "postgres", f"{where} ledger_table")
            parse_name(f"{table}_combined", "postgres", f"{where} ledger_table's longest table")
        except OutputError as e:
            problems.append(f"{e}; it names the ledger's tables on PostgreSQL (PREFIX_entries, …), e.g. "
                            f"ledger_table = \"audit.deid_ledger\"")
        else:
            values["ledger_table"] = table
        if "ledger" in raw:
            problems.append(f"{where} gives both ledger (a file) and ledger_table (tables on PostgreSQL); keep one")
    if not raw:
        problems.append(f"{where} is empty; give at least one of {', '.join(CRITERIA_KEYS)}, "
                        f"or remove the table")
    declared = any(key in raw for key in CRITERIA_KEYS) or any(key in raw for key in ATTRIBUTE_KEYS) or any(
        isinstance(t, dict) and any(key in t for key in ATTRIBUTE_KEYS)
        for t in (raw.get("sensitive") if isinstance(raw.get("sensitive"), dict) else {}).values())
    return ReleaseCriteria(**values, declared=declared, declared_attribute=attribute)


def deprecated(message: str) -> None:
    """One line on stderr for a spec form still read but on its way out (once per message)."""
    import sys

    if message not in _SAID:
        _SAID.add(message)
        print(f"deprecated: {message}", file=sys.stderr)


_SAID: set[str] = set()


def _number(value: Any, where: str, problems: list[str], upper: float | None = None) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        problems.append(f"{where} = {value!r} must be a finite number >= 0")
        return None
    if upper is not None and value > upper:
        problems.append(f"{where} = {value!r} is a normalized risk; it must lie in [0, {upper:g}]")
        return None
    return float(value)


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if float(x).is_integer() and abs(x) >= 1 else f"{x:.6g}"
