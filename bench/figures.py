"""Headline figures of a benchmark in one parseable form, for ``bench/compare.py``.

A benchmark prints each headline figure on a line of its own, beside its usual report::

    figure: NAME = VALUE UNIT

``NAME`` is free text without `` = ``, ``VALUE`` a number, ``UNIT`` ``s`` (seconds: lower is better)
or a rate ending in ``/s`` (higher is better).  The same run of a script under another version of
deid_sql prints the same names, so two runs compare figure by figure.
"""

from __future__ import annotations

import math
import re

LINE = re.compile(r"^figure: (?P<name>.+?) = (?P<value>\S+) (?P<unit>\S+)\s*$")


def figure(name: str, value: float, unit: str = "s") -> None:
    """Print one headline figure (seconds unless ``unit`` says otherwise)."""
    if " = " in name or not unit or " " in unit:
        raise ValueError(f"bad figure name or unit: {name!r} {unit!r}")
    print(f"figure: {name} = {value:.6g} {unit}", flush=True)


def parse(text: str) -> dict[str, tuple[float, str]]:
    """The figures printed in ``text``: name -> (value, unit); a name printed twice keeps the last."""
    found: dict[str, tuple[float, str]] = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            try:
                value = float(m["value"])
            except ValueError:
                continue
            if math.isfinite(value):
                found[m["name"]] = (value, m["unit"])
    return found
