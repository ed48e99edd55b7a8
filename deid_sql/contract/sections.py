"""The release's spec sections, ``[release]`` and ``[columns]``, as listed in ``spec_sections.SECTIONS``.

The core spec names no feature: it hands the raw spec to these parsers when a spec is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..errors import Problems
from ..spec_sections import SectionContext
from .criteria import parse_release
from .roles import parse_columns


def parse_release_section(data: Mapping[str, Any], context: SectionContext, problems: Problems) -> dict[str, Any]:
    """``[release]``: the acceptance criteria a release must meet (none: the gate's defaults)."""
    return {"release": parse_release(data.get("release"), problems)}


def parse_columns_section(data: Mapping[str, Any], context: SectionContext, problems: Problems) -> dict[str, Any]:
    """``[columns]``: the role of every non-QI source column (a QI column may not be given one), and
    the guard's ``outside_label`` (still read from ``[release]``, its former place)."""
    roles = parse_columns(data.get("columns"), problems, list(context.qi_columns))
    release, columns = data.get("release"), data.get("columns")
    old = release.get("outside_label") if isinstance(release, dict) else None
    if isinstance(old, str) and old.strip():
        if isinstance(columns, dict) and "outside_label" in columns and columns["outside_label"] != old:
            problems.append(f"[release] outside_label = {old!r} and [columns] outside_label = "
                            f"{columns['outside_label']!r} disagree; keep the one in [columns]")
        elif not (isinstance(columns, dict) and "outside_label" in columns):
            roles = replace(roles, outside_label=old)
    return {"columns": roles}
