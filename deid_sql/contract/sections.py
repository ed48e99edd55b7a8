"""The release contract's spec sections, ``[release]`` and ``[columns]``: parsed by the core spec
(every release is judged against them), before the features' sections, which may check their
own columns against the roles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import Problems
from .attribute import resolve_attribute
from .criteria import ReleaseCriteria, parse_release
from .roles import ColumnRoles, parse_columns


def parse_release_section(data: Mapping[str, Any], problems: Problems, base: Path | None = None) -> ReleaseCriteria:
    """``[release]``: the acceptance criteria a release must meet (none: no release)."""
    return parse_release(data.get("release"), problems, base)


def resolve_release_section(release: ReleaseCriteria, roles: Sequence[ColumnRoles], census: bool,
                            problems: Problems) -> ReleaseCriteria:
    """``[release]`` with its attribute criteria given to each sensitive column of ``roles`` (the
    source's ``[columns]``, then each linked table's), once they are known; ``census``: the spec has
    a ``[population]`` table (``max_presence`` needs it)."""
    sensitive = list(dict.fromkeys(c for r in roles for c in r.sensitive))
    attribute = resolve_attribute(release.declared_attribute, sensitive, census, problems)
    return replace(release, attribute=attribute)


def parse_columns_section(data: Mapping[str, Any], qi_columns: tuple[str, ...], problems: Problems) -> ColumnRoles:
    """``[columns]``: the role of every non-QI source column (a QI column may not be given one), and
    the guard's ``outside_label`` (still read from ``[release]``, its former place)."""
    roles = parse_columns(data.get("columns"), problems, list(qi_columns))
    release, columns = data.get("release"), data.get("columns")
    old = release.get("outside_label") if isinstance(release, dict) else None
    if isinstance(old, str) and old.strip():
        if isinstance(columns, dict) and "outside_label" in columns and columns["outside_label"] != old:
            problems.append(f"[release] outside_label = {old!r} and [columns] outside_label = "
                            f"{columns['outside_label']!r} disagree; keep the one in [columns]")
        elif not (isinstance(columns, dict) and "outside_label" in columns):
            roles = replace(roles, outside_label=old)
    return roles
