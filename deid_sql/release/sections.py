"""The release's spec sections, ``[release]`` and ``[columns]``, as listed in ``spec_sections.SECTIONS``.

The core spec names no feature: it hands the raw spec to these parsers when a spec is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import Problems
from ..spec_sections import SectionContext
from .criteria import parse_release
from .roles import parse_columns


def parse_release_section(data: Mapping[str, Any], context: SectionContext, problems: Problems) -> dict[str, Any]:
    """``[release]``: the acceptance criteria a release must meet (none: the gate's defaults)."""
    return {"release": parse_release(data.get("release"), problems)}


def parse_columns_section(data: Mapping[str, Any], context: SectionContext, problems: Problems) -> dict[str, Any]:
    """``[columns]``: the role of every non-QI source column (a QI column may not be given one)."""
    return {"columns": parse_columns(data.get("columns"), problems, list(context.qi_columns))}
