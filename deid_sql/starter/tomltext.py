"""TOML text for values that come from the data: column names, categories, paths, samples.

A name such as ``a"; drop table x; --`` or one holding a newline must come back from
``tomllib`` as exactly itself, and a comment must stay one line whatever a sample holds.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def string(value: str) -> str:
    """A TOML basic string holding exactly ``value``: quotes, backslashes and every control
    character escaped (TOML allows none of them raw), everything else as it is (UTF-8)."""
    out = ['"']
    for c in value:
        code = ord(c)
        if c in _SHORT:
            out.append(_SHORT[c])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        elif 0xD800 <= code <= 0xDFFF:
            raise ValueError(f"{value!r} holds a lone surrogate, which no TOML (UTF-8) text can hold")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def value(v: Any) -> str:
    """A TOML value: a string, a whole number, a date, a boolean."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, dt.date) and not isinstance(v, dt.datetime):
        return v.isoformat()
    return string(str(v))


def array(values: Sequence[Any], indent: str = "    ", width: int = 100) -> str:
    """A TOML array, on one line when short, else as many values a line as fit in ``width``."""
    items = [value(v) for v in values]
    one = "[" + ", ".join(items) + "]"
    if len(one) <= width:
        return one
    lines: list[str] = []
    line = indent
    for item in items:
        if line != indent and len(line) + len(item) + 1 > width:
            lines.append(line.rstrip())
            line = indent
        line += item + ", "
    lines.append(line.rstrip())
    return "[\n" + "\n".join(lines) + "\n]"


def comment(text: str) -> str:
    """``text`` safe inside a ``#`` comment: one line, no control character (shown escaped)."""
    return "".join(_SHORT.get(c, c) if c in "\b\t\n\f\r" else (f"\\u{ord(c):04X}" if ord(c) < 0x20 or ord(c) == 0x7F
                                                                 or 0xD800 <= ord(c) <= 0xDFFF else c) for c in text)


def sample(v: Any, limit: int = 30) -> str:
    """A sample value as a comment shows it: text quoted (and cut at ``limit`` characters)."""
    if isinstance(v, str):
        return string(v if len(v) <= limit else v[:limit] + "…")
    if isinstance(v, dt.datetime | dt.date):
        return v.isoformat()
    return str(v)
