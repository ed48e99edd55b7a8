"""Hierarchy labels that name a range their own values are outside of.

A hierarchy's labels are copied into the release as they are, so a label must say what its
group holds.  ARX's Adult age hierarchy puts 20 in ``15-19``, ``10-19`` and ``0-19`` (every
multiple of 5 one band too low): a reader of the release would believe nobody in ``0-19`` is
20.  Nothing in the data is wrong and the groups are valid, so ``validate`` warns (one line
per such label) instead of refusing.

A label is range-like when it is one of ``0-19`` (``20 - 29``, ``20–29``), ``<20``, ``<=19``,
``>89``, ``>=90``, ``90+`` or an interval ``[20, 30)`` / ``(19, 29]``; numbers may be negative
or decimal.  Any other label (``*``, ``Higher education``, a single value) says nothing checkable.
Values that are not numbers are never counted as outside.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .hierarchy import Hierarchy, shown

NUMBER = r"-?\d+(?:\.\d+)?"
_SPAN = re.compile(rf"({NUMBER})\s*[-–—]\s*({NUMBER})")
_BOUND = re.compile(rf"(<=|>=|≤|≥|<|>)\s*({NUMBER})")
_PLUS = re.compile(rf"({NUMBER})\s*\+")
_INTERVAL = re.compile(rf"([\[(])\s*({NUMBER})\s*[,;]\s*({NUMBER})\s*([\])])")


@dataclass(frozen=True)
class Range:
    """The numbers a range-like label names: ``lo`` to ``hi``, each end included or not."""

    lo: float = -math.inf
    hi: float = math.inf
    lo_closed: bool = True
    hi_closed: bool = True

    def holds(self, x: float) -> bool:
        above = x >= self.lo if self.lo_closed else x > self.lo
        below = x <= self.hi if self.hi_closed else x < self.hi
        return above and below


def label_range(label: str) -> Range | None:
    """The range ``label`` names, or None when it is not range-like."""
    text = label.strip()
    if m := _SPAN.fullmatch(text):
        lo, hi = float(m.group(1)), float(m.group(2))
        return Range(lo, hi) if lo <= hi else None  # "2020-01" is not a range of numbers
    if m := _BOUND.fullmatch(text):
        op, x = m.group(1), float(m.group(2))
        return {"<": Range(hi=x, hi_closed=False), "<=": Range(hi=x), "≤": Range(hi=x),
                ">": Range(lo=x, lo_closed=False), ">=": Range(lo=x), "≥": Range(lo=x)}[op]
    if m := _PLUS.fullmatch(text):
        return Range(lo=float(m.group(1)))
    if m := _INTERVAL.fullmatch(text):
        lo, hi = float(m.group(2)), float(m.group(3))
        return Range(lo, hi, m.group(1) == "[", m.group(4) == "]") if lo <= hi else None
    return None


def number(value: str) -> float | None:
    """``value`` as a number, None when it is not one."""
    try:
        x = float(value.strip())
    except ValueError:
        return None
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class LabelMismatch:
    """A range-like label at ``level`` holding values outside its range."""

    level: int
    label: str
    outside: tuple[str, ...]


def label_mismatches(hierarchy: Hierarchy, values: Sequence[str]) -> list[LabelMismatch]:
    """Every range-like label of ``hierarchy`` (levels 1 and up) that holds one of ``values``
    (those with a row) outside the range it names, level by level, labels in order of first use."""
    present = [v for v in values if v in hierarchy.rows]
    out: list[LabelMismatch] = []
    for level in range(1, hierarchy.height):
        outside: dict[str, list[str]] = {}
        ranges: dict[str, Range | None] = {}
        for value, label in zip(present, hierarchy.labels(present, level)):
            if label not in ranges:
                ranges[label] = label_range(label)
            span, x = ranges[label], number(value)
            if span is not None and x is not None and not span.holds(x):
                outside.setdefault(label, []).append(value)
        out += [LabelMismatch(level, label, tuple(members)) for label, members in outside.items()]
    return out


def label_warnings(name: str, hierarchy: Hierarchy, values: Sequence[str]) -> list[str]:
    """``validate``'s warning lines for QI ``name``: one per mismatched label, then their count
    and what to do (none when every range-like label holds only values inside it)."""
    found = label_mismatches(hierarchy, values)
    if not found:
        return []
    lines = [f"QI {name!r} level {m.level}: label {m.label!r} holds {shown(m.outside, quote=False)}, outside the "
             f"range it names" for m in found]
    plural = "s name ranges" if len(found) > 1 else " names a range"
    lines.append(f"QI {name!r}: {len(found)} hierarchy label{plural} that some of their values are outside; a "
                 f"release by hierarchy levels shows these labels as they are: correct them in {hierarchy.source}")
    return lines
