"""Policy text a person writes and reads, one QI at a time.

Forms of a QI's part of a policy text (``QI:FORM``, QIs joined by ``|``):

- ``top`` (one group), ``bottom`` (every allowed boundary kept: the original values, or the
  finest grouping the spec's allowed cut points give);
- ``digits=3`` (ZIPs: a new group at each change of the first 3 digits; needs no ZIP that
  starts a prefix to exist), ``every=10`` (integers: bands of 10 aligned to 0, i.e.
  ``0-9, 10-19, …``; a domain starting at 18 gets ``18-19, 20-29, …``; read where the spec lets
  no group start past a point, ``cuts = { every = 5, top = 90 }``, the bands end there, and such
  bands are written back as their cut list, which means the same under any spec), ``by=month`` /
  ``by=quarter`` / ``by=year`` (dates), ``level=N`` (level N of the QI's hierarchy, when its
  groups are runs of adjacent values: a non-adjacent level is a recoding, not a lattice node);
- ``cuts=18,65``: a new group starts at each listed value;
- the bits, one ``0``/``1`` per boundary (what older outputs and checkpoints hold).

``format_qi`` writes the canonical form: ``top``/``bottom``, else the first named form that
fits the bits exactly (digits, by, every with at least two cuts), else the cut list,
and the bits only when a cut value could not be read back (a category holding ``,`` or ``|``
or surrounding spaces).  ``parse_qi(format_qi(bits)) == bits`` for every policy of the lattice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np

from ..domains.cuts import UNITS, cut_position, digits_bits, every_bits, level_bits, unit_bits
from ..domains.domain import DateDomain, Domain, IntegerDomain, ZipDomain
from ..domains.hierarchy import Hierarchy
from ..errors import PolicyError


class QIForms(Protocol):
    """What the text of one QI's part of a policy needs of the lattice: the QIs' names, domains
    and hierarchies, where each may be cut, and the forms and cut texts it caches per QI
    (``policies.lattice.Lattice`` is the one implementation; it reads and writes whole policies
    with these functions, so this module cannot name it)."""

    names: tuple[str, ...]
    domains: tuple[Domain, ...]
    hierarchies: Mapping[str, Hierarchy]

    def qi_allowed(self, i: int) -> np.ndarray: ...

    def named_forms(self, i: int) -> list[tuple[str, np.ndarray]]: ...

    def cut_texts(self, i: int) -> tuple[np.ndarray, np.ndarray]: ...

FORMS = "top, bottom, cuts=v1,v2, every=N, digits=N, by=month|quarter|year, level=N or 0/1 bits"


def segments(text: str) -> list[tuple[str, str, str]]:
    """The ``|``-separated segments of a policy text: (segment, QI name, form), stripped; a
    segment without ``:`` is refused.  The one place a policy text is split."""
    out = []
    for segment in filter(None, (s.strip() for s in text.split("|"))):
        name, sep, body = segment.partition(":")
        if not sep:
            raise PolicyError(f"policy segment {segment!r} has no ':'; write QI:FORM, e.g. age:every=10 or "
                              f"zip:digits=3")
        out.append((segment, name.strip(), body.strip()))
    return out


def parse_qi(lattice: QIForms, i: int, body: str) -> np.ndarray:
    """The bits (uint8) of QI ``i`` for the text ``body``; refuses a cut the spec does not allow."""
    bits = _parse(lattice, i, body)
    bad = np.flatnonzero(bits.astype(bool) & ~lattice.qi_allowed(i))
    if bad.size:
        domain = lattice.domains[i]
        shown = ", ".join(domain.text(int(b) + 1) for b in bad[:3]) + (", …" if bad.size > 3 else "")
        raise PolicyError(
            f"policy cuts QI {lattice.names[i]!r} at {shown}, where the spec allows no cut; its allowed cuts are "
            f"{format_qi(lattice, i, lattice.qi_allowed(i).astype(np.uint8))} (or any subset of them)")
    return bits


def _parse(lattice: QIForms, i: int, body: str) -> np.ndarray:
    name, domain = lattice.names[i], lattice.domains[i]
    n = domain.size - 1
    key, eq, value = body.partition("=")
    key, value = key.strip(), value.strip()
    if body == "top":
        return np.zeros(n, dtype=np.uint8)
    if body == "bottom":
        return lattice.qi_allowed(i).astype(np.uint8)
    if eq and key == "level":
        return _level(lattice, i, value)
    if eq and key == "cuts":
        out = np.zeros(n, dtype=np.uint8)
        for raw in filter(None, (c.strip() for c in value.split(","))):
            pos = cut_position(domain, raw)
            if pos is None or pos == 0:
                raise PolicyError(
                    f"cut {raw!r} for QI {name!r} is not a value after the first of its "
                    f"domain; cuts name the first value of each new group"
                )
            out[pos - 1] = 1
        return out
    if eq and key == "every":
        if not isinstance(domain, IntegerDomain):
            raise PolicyError(f"every= is for integer QIs; {name!r} is a {domain.kind} QI: write cuts=v1,v2"
                              + _hint(domain))
        width = _whole(value, f"every= for QI {name!r}")
        return _as_far_as_allowed(every_bits(domain, width), lattice.qi_allowed(i)).astype(np.uint8)
    if eq and key == "digits":
        if not isinstance(domain, ZipDomain):
            raise PolicyError(f"digits= is for ZIP QIs; {name!r} is a {domain.kind} QI: write cuts=v1,v2"
                              + _hint(domain))
        return digits_bits(domain, _whole(value, f"digits= for QI {name!r}")).astype(np.uint8)
    if eq and key == "by":
        if not isinstance(domain, DateDomain):
            raise PolicyError(f"by= is for date QIs; {name!r} is a {domain.kind} QI: write cuts=v1,v2"
                              + _hint(domain))
        if value not in UNITS:
            raise PolicyError(f"by={value} for QI {name!r} is not one of {', '.join(UNITS)}")
        return unit_bits(domain, value).astype(np.uint8)
    if len(body) != n or any(c not in "01" for c in body):
        raise PolicyError(
            f"QI {name!r} needs {n} bits (its domain has {domain.size} values) but the "
            f"policy gives {body[:40]!r}{'…' if len(body) > 40 else ''}; use 0/1 per boundary, "
            f"or one of {FORMS}"
        )
    return np.frombuffer(body.encode(), dtype=np.uint8) - ord("0")


def _as_far_as_allowed(bits: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """``every=N``'s bands as far as the spec lets groups start: a spec that allows no cut past a point
    (``cuts = { every = 5, top = 90 }``: 90 and above one band) ends the bands there; a band the spec
    refuses before that point is still refused (``parse_qi``)."""
    kept = np.flatnonzero(allowed)
    if not kept.size or kept[-1] + 1 >= bits.size:
        return bits
    inside = bits.copy()
    inside[kept[-1] + 1:] = False
    return inside


def _hint(domain: object) -> str:
    if isinstance(domain, IntegerDomain):
        return " or every=N"
    if isinstance(domain, ZipDomain):
        return " or digits=N"
    if isinstance(domain, DateDomain):
        return " or by=month|quarter|year"
    return ""


def _whole(raw: str, what: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise PolicyError(f"{what} must be a whole number >= 1, not {raw!r}")
    return value


def _level(lattice: QIForms, i: int, raw: str) -> np.ndarray:
    name = lattice.names[i]
    hierarchy = lattice.hierarchies.get(name)
    if hierarchy is None:
        raise PolicyError(f"QI {name!r} has no hierarchy in the spec, so level={raw} means nothing")
    try:
        level = int(raw)
    except ValueError:
        raise PolicyError(f"level for QI {name!r} must be a whole number, not {raw!r}") from None
    bits = level_bits(lattice.domains[i], hierarchy, level)
    if bits is None:
        raise PolicyError(
            f"level {raw} of the hierarchy of {name!r} groups non-adjacent values, so it is a "
            f"recoding, not a lattice policy; reorder the domain or use it as a recoding"
        )
    return bits.astype(np.uint8)


# -- the canonical form --------------------------------------------------------------------------
def named_forms(lattice: QIForms, i: int) -> list[tuple[str, np.ndarray]]:
    """The named forms of QI ``i`` that need no search to check, ``digits=d`` and ``by=unit``,
    with their bits (computed once per lattice: ``Lattice.named_forms`` caches them).  ``level=N``
    is read but never written: a written policy names its cuts itself, so it reads back the
    same without the hierarchy file (policy files, dbt models and sidecars keep no hierarchy)."""
    domain = lattice.domains[i]
    out: list[tuple[str, np.ndarray]] = []
    if isinstance(domain, ZipDomain):
        width = max(len(v) for v in domain.values)
        out += [(f"digits={d}", digits_bits(domain, d)) for d in range(1, width)]
    if isinstance(domain, DateDomain):
        out += [(f"by={u}", unit_bits(domain, u)) for u in reversed(UNITS)]  # the coarsest name that fits
    return out


def format_qi(lattice: QIForms, i: int, bits: np.ndarray) -> str:
    """The canonical text of QI ``i``'s ``bits`` (see the module docstring)."""
    kept = bits.astype(bool)
    if not kept.any():
        return "top"
    if kept.all():
        return "bottom"
    for text, candidate in lattice.named_forms(i):
        if np.array_equal(candidate, kept):
            return text
    domain = lattice.domains[i]
    starts = np.flatnonzero(kept) + 1
    if isinstance(domain, IntegerDomain) and starts.size >= 2:
        values = starts + domain.lo
        width = int(values[1] - values[0])
        if np.array_equal(every_bits(domain, width), kept):  # (a text that means the same under any spec)
            return f"every={width}"
    texts, readable = lattice.cut_texts(i)
    if readable[starts].all():
        return "cuts=" + ",".join(texts[starts].tolist())
    return bit_text(bits)


def cut_texts(domain: Domain) -> tuple[np.ndarray, np.ndarray]:
    """Every value's text as a cut list writes it, and whether ``cuts=`` reads it back as itself
    (computed once per lattice: ``Lattice.cut_texts`` caches them; a search writes many policies)."""
    texts = np.array([domain.text(p) for p in range(domain.size)], dtype=object)
    return texts, np.array([_readable_cut(t) for t in texts], dtype=bool)


def _readable_cut(text: str) -> bool:
    """A cut value that ``cuts=`` reads back as itself."""
    return bool(text) and text == text.strip() and not any(c in text for c in ",|")


def bit_text(bits: np.ndarray) -> str:
    return "".join("1" if b else "0" for b in bits)
