"""Totally ordered quasi-identifier domains.

A domain maps every admissible value of a QI to a position ``0..n-1``; policies
cut that order into consecutive intervals.  Domains also know how to *name* a
group of positions (``20-29``, ``372**``, ``Asian|Other``), because every output
(SQL labels, readable policies, reports) must name groups the same way.

Labels are unambiguous whatever the values contain.  A group of one value shows the value
itself unless it holds a character of the label grammar (``|`` between the values of a
merged group, and for ZIPs also ``-`` of a range and ``*`` of a prefix); then, like every
value inside a merged label, it is written with ``\\`` before each such character and
before ``\\`` itself.  So ``Asian|Other`` (two values) and ``A\\|B`` (the value ``A|B``)
differ, and ``split_label`` reads a category label back into its values.
"""

from __future__ import annotations

import bisect
import datetime as dt
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import SpecError

KINDS = ("integer", "category", "zip", "date")
ESCAPE = "\\"
SEPARATOR = "|"


def escape(value: str, specials: str = SEPARATOR) -> str:
    """``value`` as written inside a label: ``\\`` before itself and each of ``specials``."""
    if not any(c in value for c in specials + ESCAPE):
        return value
    return "".join(ESCAPE + c if c in specials or c == ESCAPE else c for c in value)


def split_label(label: str) -> list[str]:
    """The values of a category label (``set_label``/``interval_label`` of a category domain):
    a label without ``|`` is one value as it is; otherwise its escaped values joined by ``|``."""
    if SEPARATOR not in label:
        return [label]
    parts: list[str] = []
    current: list[str] = []
    chars = iter(label)
    for c in chars:
        if c == ESCAPE:
            current.append(next(chars, ""))
        elif c == SEPARATOR:
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
    parts.append("".join(current))
    return parts


@dataclass(frozen=True)
class Domain:
    """Base class: an ordered list of admissible values."""

    kind: str = field(init=False, default="")

    @property
    def size(self) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def value(self, pos: int) -> object:  # pragma: no cover - overridden
        raise NotImplementedError

    def position(self, value: object) -> int | None:  # pragma: no cover - overridden
        raise NotImplementedError

    def text(self, pos: int) -> str:
        """The value at ``pos`` as the text a generalized column shows for it."""
        return str(self.value(pos))

    def label_text(self, pos: int) -> str:
        """The value at ``pos`` as written inside a merged label (escaped where it holds label syntax)."""
        return self.text(pos)

    def single_label(self, pos: int) -> str:
        """Label of the group of the one value at ``pos``: the value, escaped only if it holds label syntax."""
        return self.text(pos)

    def interval_label(self, lo: int, hi: int) -> str:
        """Label of the consecutive group of positions ``lo..hi`` (inclusive)."""
        if lo == hi:
            return self.single_label(lo)
        return f"{self.text(lo)}-{self.text(hi)}"

    def set_label(self, positions: Sequence[int]) -> str:
        """Label of an arbitrary (possibly non-consecutive) group of positions."""
        ps = sorted(positions)
        if ps[-1] - ps[0] + 1 == len(ps) == len(set(ps)):  # consecutive (no range built: quadratic)
            return self.interval_label(ps[0], ps[-1])
        return SEPARATOR.join(self.label_text(p) for p in ps)

    def readable_group(self, lo: int, hi: int) -> str:
        """Human form used by ``Policy.readable`` (seed 001 Table 3 style)."""
        return f"[{self.interval_label(lo, hi)}]"


@dataclass(frozen=True)
class IntegerDomain(Domain):
    """Integers ``lo..hi`` (e.g. age 0-120); position = value - lo."""

    lo: int
    hi: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", "integer")

    @property
    def size(self) -> int:
        return self.hi - self.lo + 1

    def value(self, pos: int) -> int:
        return self.lo + pos

    def position(self, value: object) -> int | None:
        try:
            v = int(value)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            return None
        if v != value and not (isinstance(value, str) and str(v) == value.strip()):
            return None
        return v - self.lo if self.lo <= v <= self.hi else None


@dataclass(frozen=True)
class DateDomain(Domain):
    """Calendar days ``lo..hi``; position = days since ``lo``."""

    lo: dt.date
    hi: dt.date

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", "date")

    @property
    def size(self) -> int:
        return (self.hi - self.lo).days + 1

    def value(self, pos: int) -> dt.date:
        return self.lo + dt.timedelta(days=pos)

    def position(self, value: object) -> int | None:
        if isinstance(value, str):
            try:
                value = dt.date.fromisoformat(value)
            except ValueError:
                return None
        if isinstance(value, dt.datetime):
            value = value.date()
        if not isinstance(value, dt.date):
            return None
        return (value - self.lo).days if self.lo <= value <= self.hi else None

    def text(self, pos: int) -> str:
        return self.value(pos).isoformat()

    def interval_label(self, lo: int, hi: int) -> str:
        a, b = self.value(lo), self.value(hi)
        if lo == hi:
            return a.isoformat()
        if a.month == 1 and a.day == 1 and b.month == 12 and b.day == 31:
            return str(a.year) if a.year == b.year else f"{a.year}-{b.year}"
        nxt = b + dt.timedelta(days=1)
        if a.day == 1 and nxt.day == 1 and (a.year, a.month) == (b.year, b.month):
            return f"{a.year:04d}-{a.month:02d}"
        return f"{a.isoformat()}..{b.isoformat()}"


@dataclass(frozen=True)
class CategoryDomain(Domain):
    """An explicit ordered list of distinct text categories (race, sex, ...)."""

    values: tuple[str, ...]
    _index: dict[str, int] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", "category")
        self._check_distinct()
        object.__setattr__(self, "_index", {v: i for i, v in enumerate(self.values)})

    def _check_distinct(self) -> None:
        seen: set[str] = set()
        dups = [v for v in self.values if v in seen or seen.add(v)]  # type: ignore[func-returns-value]
        if dups:
            shown = ", ".join(repr(d) for d in dups[:5])
            raise SpecError(f"duplicate categories {shown}: list every category once")
        if not self.values:
            raise SpecError("a category domain needs at least one value")

    @property
    def size(self) -> int:
        return len(self.values)

    def value(self, pos: int) -> str:
        return self.values[pos]

    def position(self, value: object) -> int | None:
        return self._index.get(value) if isinstance(value, str) else None

    specials = SEPARATOR  # characters of the label grammar (ZIPs add range and prefix marks)

    def label_text(self, pos: int) -> str:
        return escape(self.values[pos], self.specials)

    def single_label(self, pos: int) -> str:
        value = self.values[pos]
        return escape(value, self.specials) if any(c in value for c in self.specials) else value

    def interval_label(self, lo: int, hi: int) -> str:
        if lo == hi:
            return self.single_label(lo)
        return SEPARATOR.join(self.label_text(p) for p in range(lo, hi + 1))

    def readable_group(self, lo: int, hi: int) -> str:
        return "[" + ", ".join(self.values[lo : hi + 1]) + "]"


@dataclass(frozen=True)
class ZipDomain(CategoryDomain):
    """ZIP codes as ordered strings; a group that is a whole prefix reads ``372**``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "kind", "zip")

    @functools.cached_property
    def lexicographic(self) -> bool:
        """True when the order is plain string order of equal-length digit strings,
        so SQL ``BETWEEN`` on the text selects exactly an interval."""
        width = len(self.values[0])
        return all(len(v) == width and v.isdigit() for v in self.values) and list(
            self.values
        ) == sorted(self.values)

    specials = SEPARATOR + "-*"

    def interval_label(self, lo: int, hi: int) -> str:
        if lo == hi:
            return self.single_label(lo)
        first, last = self.values[lo], self.values[hi]
        common = 0
        while common < min(len(first), len(last)) and first[common] == last[common]:
            common += 1
        prefix = first[:common]
        inside = self._prefix_count(prefix)
        if common and inside == hi - lo + 1 and len(first) == len(last):
            return escape(prefix, self.specials) + "*" * (len(first) - common)
        if common == 0 and lo == 0 and hi == self.size - 1:
            return "*" * len(first)
        return f"{self.label_text(lo)}-{self.label_text(hi)}"

    def readable_group(self, lo: int, hi: int) -> str:
        return f"[{self.interval_label(lo, hi)}]"

    def _prefix_count(self, prefix: str) -> int:
        """How many domain values start with ``prefix`` (binary search when sorted)."""
        if self.lexicographic:
            lo = bisect.bisect_left(self.values, prefix)
            hi = bisect.bisect_left(self.values, prefix + "\U0010ffff")
            return hi - lo
        return sum(1 for v in self.values if v.startswith(prefix))


def parse_date(value: object, where: str) -> dt.date:
    """A spec date: a TOML date or an ISO ``YYYY-MM-DD`` string."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            pass
    raise SpecError(f"{where}: {value!r} is not a date; write it as YYYY-MM-DD")


_INTEGER_LABEL = re.compile(r"-?\d+(--?\d+)?")
_DATE_LABEL = re.compile(r"\d{4}(-\d{2}(-\d{2})?)?|\d{4}-\d{4}|\d{4}-\d{2}-\d{2}\.\.\d{4}-\d{2}-\d{2}")


def can_label(domain: Domain, text: str) -> bool:
    """Whether some generalization of ``domain`` could show ``text``: a value, an interval, a set of
    values, a ZIP prefix, a calendar period.  The outside label must be none of these, or a value
    outside the domain would be read as a group it is not in (``3****`` for a ZIP outside it).
    Generous on purpose: an integer or date look-alike out of range is refused too."""
    if domain.kind == "integer":
        return _INTEGER_LABEL.fullmatch(text.strip()) is not None
    if domain.kind == "date":
        return _DATE_LABEL.fullmatch(text.strip()) is not None
    values = set(domain.values)  # type: ignore[attr-defined]
    if text in values or all(part in values for part in split_label(text)):
        return True
    if any(text[:i] in values and text[i + 1:] in values for i, c in enumerate(text) if c == "-"):
        return True
    if domain.kind == "zip":
        width = len(domain.values[0])  # type: ignore[attr-defined]
        prefix = text.rstrip("*")
        if len(text) == width and prefix != text and (not prefix or any(v.startswith(prefix) for v in values)):
            return True
    return False
