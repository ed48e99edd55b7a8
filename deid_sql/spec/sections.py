"""The spec's feature sections: the top-level tables a feature owns and parses itself.

The core (``spec/file.py``) parses what every job needs: ``[source]``, ``[population]``, ``gamma``,
``risk``, ``[[qi]]``, ``[backend]``, and the release contract's ``[release]`` and ``[columns]``
(``contract.sections``).  Every other table belongs to a feature, which registers its parser in
``registry.SECTIONS`` from its own ``plugin.py`` (``[adversary]``, ``[channels]``); the parser
reads its table from the raw spec and reports into the same ``Problems`` collector, so
``validate`` still names every problem of every section at once.  The spec keeps each section's
value under the section's name (``Spec.feature("channels")``): the core names no feature.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import Problems
from ..registry import SECTIONS


@dataclass(frozen=True)
class SectionContext:
    """What a section parser may read besides its own table."""

    data: Mapping[str, Any]  # the whole spec, as read
    qi_columns: tuple[str, ...]  # the source columns of the declared quasi-identifiers
    parsed: Mapping[str, Any]  # the core's parsed fields a section may check against (``columns``, ``release``)


#: a section's parser: the raw spec, the context and the collector → the section's value (its
#: default when the spec lacks the section; anything when it adds a problem, since the spec is
#: then refused)
SectionParser = Callable[[Mapping[str, Any], SectionContext, Problems], Any]


def section_keys() -> frozenset[str]:
    """The top-level keys the registered feature sections own."""
    return frozenset(key for entry in SECTIONS for key in entry["keys"])


def qis_required(data: Mapping[str, Any]) -> bool:
    """False when the spec holds a section that works without quasi-identifiers and no [[qi]]."""
    if "qi" in data:
        return True
    return not any(entry.get("replaces_qis", False) and any(key in data for key in entry["keys"])
                   for entry in SECTIONS)


def parse_sections(data: Mapping[str, Any], qi_columns: tuple[str, ...], core: Mapping[str, Any],
                   problems: Problems) -> dict[str, Any]:
    """Every registered feature section's value, by section name, each section's problems added
    to ``problems``; ``core`` is what the core parsed that a section may check against."""
    context = SectionContext(data, qi_columns, dict(core))
    parsed: dict[str, Any] = {}
    for entry in SECTIONS:
        parse: SectionParser = entry.load()
        parsed[entry.name] = parse(data, context, problems)
    return parsed
