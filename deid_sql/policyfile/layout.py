"""The policy file's JSON layout: one key per line, but short flat objects, lists of scalars and
table rows (a release group, a domain's values) on one line each, so a policy file stays readable
and diffable whatever its number of groups.  Apart from ``format`` so the format's reader and
writer stay one module of a readable size.
"""

from __future__ import annotations

import json
from typing import Any


def pretty(value: Any, depth: int = 0) -> str:
    """JSON with one key per line, but short flat objects, lists of scalars and table rows on one
    line each (a policy file stays readable and diffable whatever its number of groups)."""
    pad, inner = " " * depth, " " * (depth + 1)
    if isinstance(value, dict) and value and not _one_line(value):
        items = [f"{inner}{_json(k)}: {pretty(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and value and not _one_line(value):
        items = [f"{inner}{pretty(v, depth + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + f"\n{pad}]"
    return _json(value)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _scalar(value: Any) -> bool:
    return not isinstance(value, dict | list)


def _one_line(value: Any) -> bool:
    if isinstance(value, list):
        return all(_scalar(v) for v in value)
    return all(_scalar(v) or (isinstance(v, list) and all(_scalar(x) for x in v)) for v in value.values()) and (
        len(value) == 1 or len(_json(value)) <= 100)


__all__ = ["pretty"]
