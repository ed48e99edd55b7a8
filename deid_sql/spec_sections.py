"""The spec's feature sections: which top-level keys each feature owns, and where its parser lives.

The core (``spec.py``) parses what every job needs: ``[source]``, ``[population]``, ``gamma``,
``[[qi]]`` and ``[backend]``.  Every other section belongs to a feature package, which parses
its own table from the raw spec and reports into the same ``Problems`` collector, so
``validate`` still names every problem of every section at once.

``SECTIONS`` is the one place that lists the features, by module name.  Their parsers are
imported when a spec is parsed, never when this module is: the core imports no feature (no
``spec`` ↔ feature cycle), and no import order can hide a section from a spec being parsed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import Problems


@dataclass(frozen=True)
class SectionContext:
    """What a section parser may read besides its own table."""

    data: Mapping[str, Any]  # the whole spec, as read
    qi_columns: tuple[str, ...]  # the source columns of the declared quasi-identifiers
    parsed: Mapping[str, Any]  # the Spec fields the sections listed before this one filled


SectionParser = Callable[[Mapping[str, Any], SectionContext, Problems], dict[str, Any]]


@dataclass(frozen=True)
class Section:
    """One feature's part of a spec.

    ``parser`` is ``"module:function"``; the function takes the raw spec, a ``SectionContext``
    and the collector, and returns a value for each of ``fields`` (defaults when the spec
    lacks the section; anything when it adds a problem, since the spec is then refused)."""

    keys: tuple[str, ...]  # the top-level keys it owns
    fields: tuple[str, ...]  # the Spec attributes it fills
    parser: str
    replaces_qis: bool = False  # a spec holding one of ``keys`` needs no [[qi]]

    def load(self) -> SectionParser:
        module, _, function = self.parser.partition(":")
        parse: SectionParser = getattr(importlib.import_module(module), function)
        return parse


# Order matters only where a section reads another's result (channels checks the [columns] roles).
SECTIONS: tuple[Section, ...] = (
    Section(("risk", "adversary"), ("risk", "adversary"), "deid_sql.adversary.params:parse_section"),
    Section(("release",), ("release",), "deid_sql.contract.sections:parse_release_section"),
    Section(("columns",), ("columns",), "deid_sql.contract.sections:parse_columns_section"),
    Section(("channels",), ("channels",), "deid_sql.channels.spec:parse_section", replaces_qis=True),
)
SECTION_KEYS = frozenset(key for section in SECTIONS for key in section.keys)
SECTION_FIELDS = tuple(name for section in SECTIONS for name in section.fields)


def qis_required(data: Mapping[str, Any]) -> bool:
    """False when the spec holds a section that works without quasi-identifiers and no [[qi]]."""
    if "qi" in data:
        return True
    return not any(section.replaces_qis and any(key in data for key in section.keys) for section in SECTIONS)


def parse_sections(data: Mapping[str, Any], qi_columns: tuple[str, ...], problems: Problems) -> dict[str, Any]:
    """Every feature section's Spec fields, each section's problems added to ``problems``."""
    parsed: dict[str, Any] = {}
    for section in SECTIONS:
        values = section.load()(data, SectionContext(data, qi_columns, dict(parsed)), problems)
        if set(values) != set(section.fields):  # a parser out of step with this table is a bug
            raise TypeError(f"{section.parser} returned {sorted(values)}, not the fields {list(section.fields)}")
        parsed.update(values)
    return parsed
