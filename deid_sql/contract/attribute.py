"""The ``[release]`` criteria on what released values reveal (METHODS decision 15): ℓ-diversity,
t-closeness, confidence and presence, declared per sensitive column.

The identity criteria (``min_k``, ``max_risk``…) judge who a row is; these judge what a group's
rows tell about a person once found.  Each is checked on every column with the ``sensitive`` role
(in ``[columns]`` of the source or of any ``[[table]]`` of a set)::

    [release]
    min_k = 5
    max_confidence = 0.8            # every sensitive column: at most 80 % of a group hold one value
    min_l = 2                       # distinct ℓ-diversity
    max_t = 0.5                     # t-closeness …
    t_distance = "equal"            # … with this ground distance ("equal", "ordered", "hierarchical")

    [release.sensitive.diagnosis]   # one column's own limits, over the global ones
    max_confidence = 0.5
    ignore_values = ["none"]        # values that reveal nothing are left out of every figure
    hierarchy = "icd10.csv"         # ARX-style, for t_distance = "hierarchical" (relative to the spec)
    order = ["mild", "moderate", "severe"]  # for "ordered" on a text column (numbers, dates: by value)

Parsing is two steps because the sensitive columns are known only once ``[columns]`` and the
linked tables are read: ``parse_attribute`` reads the keys (``AttributeDeclared``) and
``resolve_attribute`` gives each sensitive column its ``AttributeLimits`` (global keys for every
sensitive column, a column's own table overriding them key by key).  What needs the data (an
unordered text column under ``ordered``, a hierarchy missing a value) is checked when the gate
reads it (``release.attribute``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

#: the criteria keys (each also a key of a per-column table)
ATTRIBUTE_KEYS = ("min_l", "min_entropy_l", "recursive_cl", "max_t", "max_confidence", "max_presence")
#: per-column settings besides the criteria
SETTING_KEYS = ("t_distance", "ignore_values", "hierarchy", "order")
GLOBAL_KEYS = (*ATTRIBUTE_KEYS, "t_distance", "ignore_values")  # hierarchy and order belong to one column
COLUMN_KEYS = (*ATTRIBUTE_KEYS, *SETTING_KEYS)
T_DISTANCES = ("equal", "ordered", "hierarchical")


@dataclass(frozen=True)
class AttributeLimits:
    """The attribute criteria of one sensitive column (None: not asked for).

    ``min_l``: distinct ℓ (values held in a group ≥ ℓ); ``min_entropy_l``: exp(entropy) ≥ ℓ;
    ``recursive_cl``: (c, ℓ), r₁ < c·(r_ℓ + … + r_m); ``max_t`` with ``t_distance``: the distance of a
    group's value distribution from the source's; ``max_confidence``: the largest share of a group's
    persons holding one value; ``max_presence``: m/g, released persons over census people of a group.
    ``ignore_values`` are left out of every figure; ``hierarchy`` (hierarchical t) and ``order``
    (ordered t on a text column) describe the column's values."""

    column: str
    min_l: int | None = None
    min_entropy_l: float | None = None
    recursive_cl: tuple[float, int] | None = None
    max_t: float | None = None
    t_distance: str | None = None
    max_confidence: float | None = None
    max_presence: float | None = None
    ignore_values: tuple[Any, ...] = ()
    hierarchy: Path | None = None
    order: tuple[Any, ...] | None = None

    @property
    def declared(self) -> bool:
        """Whether any criterion is asked for."""
        return any(getattr(self, key) is not None for key in ATTRIBUTE_KEYS)

    def keys(self) -> list[str]:
        """The criteria asked for, in ``ATTRIBUTE_KEYS`` order."""
        return [key for key in ATTRIBUTE_KEYS if getattr(self, key) is not None]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {key: getattr(self, key) for key in (*ATTRIBUTE_KEYS, "t_distance")}
        out["recursive_cl"] = list(self.recursive_cl) if self.recursive_cl is not None else None
        out["ignore_values"] = list(self.ignore_values)
        out["hierarchy"] = str(self.hierarchy) if self.hierarchy is not None else None
        out["order"] = list(self.order) if self.order is not None else None
        return out


@dataclass(frozen=True)
class AttributeDeclared:
    """``[release]``'s attribute keys as written, before the sensitive columns are known."""

    everywhere: dict[str, Any] = field(default_factory=dict)  # global keys, parsed
    columns: dict[str, dict[str, Any]] = field(default_factory=dict)  # [release.sensitive.COLUMN], parsed

    @property
    def given(self) -> bool:
        return bool(self.everywhere) or bool(self.columns)


def parse_attribute(raw: Mapping[str, Any], base: Path, problems: list[str]) -> AttributeDeclared:
    """The attribute keys of ``[release]`` (``raw``) and its ``sensitive`` tables; one line per problem."""
    everywhere = _values(raw, GLOBAL_KEYS, "[release]", base, problems)
    columns: dict[str, dict[str, Any]] = {}
    tables = raw.get("sensitive", {})
    if not isinstance(tables, dict):
        problems.append("[release] sensitive must hold one table per sensitive column, e.g. "
                        "[release.sensitive.diagnosis] max_confidence = 0.5")
        tables = {}
    for name, table in tables.items():
        where = f"[release.sensitive.{name}]"
        if not isinstance(table, dict):
            problems.append(f"{where} must be a table of limits, e.g. {where} max_confidence = 0.5")
            continue
        for key in table:
            if key not in COLUMN_KEYS:
                problems.append(f"unknown key {key!r} in {where}; allowed keys are {', '.join(sorted(COLUMN_KEYS))}")
        columns[str(name)] = _values(table, COLUMN_KEYS, where, base, problems)
    return AttributeDeclared(everywhere, columns)


def resolve_attribute(declared: AttributeDeclared, sensitive: Sequence[str], census: bool,
                      problems: list[str]) -> dict[str, AttributeLimits]:
    """Each sensitive column's limits (global keys, then its own table's), those with a criterion
    only; one line per problem: criteria with no sensitive column, a table naming a column that is
    not sensitive, ``max_t`` without ``t_distance``, ``hierarchical`` without a hierarchy,
    ``max_presence`` without a census."""
    if not declared.given:
        return {}
    listed = ", ".join(repr(c) for c in sensitive)
    for name in declared.columns:
        if name not in sensitive:
            problems.append(f"[release.sensitive.{name}] names {name!r}, which is not a sensitive column "
                            + (f"(the sensitive columns are {listed})" if sensitive else "(no column is sensitive)")
                            + "; list it under [columns] sensitive or fix the name")
    if not sensitive:
        keys = sorted(set(declared.everywhere) & set(ATTRIBUTE_KEYS))
        if keys:
            problems.append(f"[release] has attribute criteria ({', '.join(keys)}), which judge what sensitive "
                            'columns reveal, but no column is sensitive; list them under [columns] sensitive = '
                            '["diagnosis"] (or a [[table]]\'s sensitive), or remove the criteria')
        return {}
    out: dict[str, AttributeLimits] = {}
    for column in sensitive:
        values = {**declared.everywhere, **declared.columns.get(column, {})}
        limits = replace(AttributeLimits(column), **values)
        where = f"[release.sensitive.{column}]" if column in declared.columns else "[release]"
        if limits.max_t is not None and limits.t_distance is None:
            problems.append(f"{where} max_t needs t_distance = \"equal\", \"ordered\" or \"hierarchical\" (the "
                            f"ground distance between values of {column!r})")
        if limits.t_distance == "hierarchical" and limits.max_t is not None and limits.hierarchy is None:
            problems.append(f'{where} t_distance = "hierarchical" needs the column\'s hierarchy: '
                            f'[release.sensitive.{column}] hierarchy = "<ARX-style file>"')
        if limits.max_presence is not None and not census:
            problems.append(f"{where} max_presence needs a census ([population] table): presence is released "
                            f"persons over the population's people of each group; add one or remove max_presence")
        if limits.declared:
            out[column] = limits
    return out


def _values(raw: Mapping[str, Any], keys: Sequence[str], where: str, base: Path,
            problems: list[str]) -> dict[str, Any]:
    """The keys of ``keys`` present in ``raw``, checked and converted (a bad one is left out)."""
    out: dict[str, Any] = {}
    for key in keys:
        if key not in raw:
            continue
        value = raw[key]
        parsed = _PARSERS[key](value, f"{where} {key}", base, problems)
        if parsed is not None:
            out[key] = parsed
    return out


def _whole(value: Any, where: str, base: Path, problems: list[str]) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        problems.append(f"{where} = {value!r} must be a whole number >= 1 (ℓ values per group), e.g. 2")
        return None
    return int(value)


def _at_least_one(value: Any, where: str, base: Path, problems: list[str]) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 1:
        problems.append(f"{where} = {value!r} must be a number >= 1 (an effective number of values), e.g. 2")
        return None
    return float(value)


def _share(value: Any, where: str, base: Path, problems: list[str]) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not 0 < value <= 1:
        problems.append(f"{where} = {value!r} must be a share in (0, 1], e.g. 0.5")
        return None
    return float(value)


def _recursive(value: Any, where: str, base: Path, problems: list[str]) -> tuple[float, int] | None:
    if not isinstance(value, list) or len(value) != 2:
        problems.append(f"{where} = {value!r} must be [c, l], e.g. recursive_cl = [3, 2]")
        return None
    c, l = value  # noqa: E741 - the model's name
    if isinstance(c, bool) or not isinstance(c, int | float) or not math.isfinite(c) or c <= 0:
        problems.append(f"{where} c = {c!r} must be a number > 0, e.g. recursive_cl = [3, 2]")
        return None
    if isinstance(l, bool) or not isinstance(l, int) or l < 1:
        problems.append(f"{where} l = {l!r} must be a whole number >= 1, e.g. recursive_cl = [3, 2]")
        return None
    return float(c), int(l)


def _distance(value: Any, where: str, base: Path, problems: list[str]) -> str | None:
    if value not in T_DISTANCES:
        problems.append(f"{where} = {value!r} must be one of {', '.join(map(repr, T_DISTANCES))}")
        return None
    return str(value)


def _scalars(value: Any, where: str, base: Path, problems: list[str]) -> tuple[Any, ...] | None:
    if not isinstance(value, list) or not all(isinstance(v, str | int | float) and not isinstance(v, bool)
                                              for v in value):
        problems.append(f'{where} = {value!r} must be a list of values, e.g. ["none"]')
        return None
    dups = sorted({str(v) for v in value if value.count(v) > 1})
    if dups:
        problems.append(f"{where} lists {', '.join(map(repr, dups))} more than once; list each value once")
        return None
    return tuple(value)


def _order(value: Any, where: str, base: Path, problems: list[str]) -> tuple[Any, ...] | None:
    out = _scalars(value, where, base, problems)
    if out is not None and len(out) < 2:
        problems.append(f'{where} = {value!r} must list the column\'s values in order, e.g. ["mild", "severe"]')
        return None
    return out


def _hierarchy(value: Any, where: str, base: Path, problems: list[str]) -> Path | None:
    if not isinstance(value, str) or not value:
        problems.append(f'{where} = {value!r} must be a file path, e.g. hierarchy = "diagnosis.csv"')
        return None
    path = (base / value).resolve()
    if not path.is_file():
        problems.append(f"{where}: hierarchy file {path} does not exist; fix the path (relative to the spec)")
        return None
    return path


_PARSERS = {"min_l": _whole, "min_entropy_l": _at_least_one, "recursive_cl": _recursive, "max_t": _share,
            "max_confidence": _share, "max_presence": _share, "t_distance": _distance, "ignore_values": _scalars,
            "hierarchy": _hierarchy, "order": _order}
assert set(_PARSERS) == set(COLUMN_KEYS)
assert {f.name for f in fields(AttributeLimits)} == {"column", *COLUMN_KEYS}
