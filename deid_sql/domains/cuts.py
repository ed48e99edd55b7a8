"""Where a QI may be cut: the spec's allowed cut points and the named boundary sets.

A custodian publishes 5- or 10-year age bands, ZIP3, months or quarters, or the groups of a
reviewed hierarchy, never bands such as ``[8-14], [17-20]`` that a search would otherwise
propose.  A ``[[qi]]`` table may therefore restrict the boundaries a policy may keep:

- ``cuts = { every = 5 }`` (integers): a new group may start only at a multiple of 5
  (bands ``0-4, 5-9, …`` aligned to 0, whatever the domain's first value); with ``top = 90``
  (a multiple of ``every``) none starts past 90, so the last band is ``90`` and above (HIPAA's
  ages over 89);
- ``cuts = [18, 30, 45, 65, 90]`` (any kind): only at these values (each a domain value
  after the first; dates as ``2020-01-01``, categories and ZIPs as strings);
- ``cuts = "hierarchy"``: only between the groups of level 1 of the QI's hierarchy (every
  coarser level's groups are unions of those, so every level is reachable).  Every group of
  every level must be a run of the domain order: a category or ZIP domain whose declared order
  splits a group is put in the hierarchy's own order (``hierarchy_domain``, which ``validate``
  notes); an integer or date domain keeps its order, so a group it splits is refused;
- ``zip_digits = [3, 5]`` (ZIPs): only where the first 3 (or 5) digits change;
- ``date_cuts = ["month", "quarter", "year"]`` (dates): only on the first day of a month,
  quarter or year.

The same boundary sets name policies in text (``zip:digits=3``, ``age:every=10``,
``admitted:by=month``, ``race:level=1``; see ``policies.text``), so the functions that compute
them live here, below both the spec and the lattice.  Every function returns one bool per
boundary of the domain (``size - 1``; boundary ``b`` lies between positions ``b`` and ``b + 1``).
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import Problems, SpecError
from .domain import CategoryDomain, DateDomain, Domain, IntegerDomain, ZipDomain, parse_date
from .hierarchy import Hierarchy, shown

UNITS = ("month", "quarter", "year")
RULE_KEYS = ("cuts", "zip_digits", "date_cuts")


@dataclass(frozen=True)
class CutRule:
    """The allowed cut points of one QI as its ``[[qi]]`` table declares them (one form each)."""

    every: int | None = None
    top: int | None = None  # with ``every``: no group starts past it (the last band is ``top`` and above)
    values: tuple[Any, ...] | None = None  # explicit cut values (int, date or str)
    hierarchy: bool = False
    zip_digits: tuple[int, ...] = ()
    date_units: tuple[str, ...] = ()

    def describe(self) -> str:
        """The rule as the spec wrote it, for messages."""
        if self.every is not None:
            return f"cuts = {{ every = {self.every}{f', top = {self.top}' if self.top is not None else ''} }}"
        if self.values is not None:
            return "cuts = [" + ", ".join(str(v) for v in self.values) + "]"
        if self.hierarchy:
            return 'cuts = "hierarchy"'
        if self.zip_digits:
            return f"zip_digits = {list(self.zip_digits)}"
        return "date_cuts = [" + ", ".join(f'"{u}"' for u in self.date_units) + "]"


# -- named boundary sets -------------------------------------------------------------------
def every_bits(domain: IntegerDomain, n: int, top: int | None = None) -> np.ndarray:
    """Boundaries before each multiple of ``n`` (bands aligned to 0: 0-9, 10-19, …); with ``top``, none
    past it (the last band ``top`` and above)."""
    starts = np.arange(domain.lo + 1, domain.hi + 1, dtype=np.int64)
    bits = starts % n == 0
    return bits & (starts <= top) if top is not None else bits


def digits_bits(domain: ZipDomain, d: int) -> np.ndarray:
    """Boundaries where the first ``d`` characters change (ZIP prefix groups, ``372**``)."""
    values = domain.values
    return np.fromiter((a[:d] != b[:d] for a, b in zip(values, values[1:])), dtype=bool, count=len(values) - 1)


def unit_bits(domain: DateDomain, unit: str) -> np.ndarray:
    """Boundaries before the first day of each month, quarter or year."""
    days = [domain.value(p) for p in range(1, domain.size)]
    if unit == "month":
        keep = [d.day == 1 for d in days]
    elif unit == "quarter":
        keep = [d.day == 1 and d.month in (1, 4, 7, 10) for d in days]
    else:
        keep = [d.day == 1 and d.month == 1 for d in days]
    return np.array(keep, dtype=bool).reshape(-1)


def level_bits(domain: Domain, hierarchy: Hierarchy, level: int) -> np.ndarray | None:
    """Boundaries between the groups of a hierarchy level; None when a group is not a run of
    adjacent domain values (the level is then a recoding, not a set of boundaries)."""
    rec = hierarchy.recoding(domain, level)
    return np.diff(rec.group_of) != 0 if rec.contiguous else None


def hierarchy_domain(domain: Domain, hierarchy: Hierarchy, where: str) -> tuple[Domain, str | None]:
    """``domain`` in an order where every group of every level of ``hierarchy`` is a run, and a
    note saying why when that is not the declared order (None when it is).

    Only a category or ZIP domain is reordered: an integer or date domain's order is its
    values', and ``allowed_mask`` refuses a group it splits.  Every domain value needs a row
    (``Hierarchy.recoding`` checks that first).  The order is ``Hierarchy.nested_order``: groups
    in the order their first value is declared, values within a group as declared."""
    if not isinstance(domain, CategoryDomain):
        return domain, None
    split = hierarchy.split_group(domain.values)
    if split is None:
        return domain, None
    ordered = type(domain)(hierarchy_values(domain.values, hierarchy))
    level, label, _, between = split
    return ordered, (f"{where}: values ordered as the hierarchy groups them, since the declared order splits "
                     f"level {level} group {label!r} ({shown(between, 3)} between its values): "
                     f"{shown(ordered.values, 6)}")


def hierarchy_values(values: Sequence[str], hierarchy: Hierarchy) -> tuple[str, ...]:
    """Category ``values`` in the order ``cuts = "hierarchy"`` gives their domain (``hierarchy_domain``),
    as they are when a value has no row (the load refuses that).  The policy file's spec hash
    declares this order, so a saved file names the domain its load builds."""
    if any(v not in hierarchy.rows for v in values):
        return tuple(values)
    return tuple(values[i] for i in hierarchy.nested_order(values))


def cut_position(domain: Domain, raw: object) -> int | None:
    """The domain position a cut at ``raw`` starts a group at (None when it names none).

    For a ZIP domain in plain string order a cut may name any ZIP, in the domain or not: the
    group starts at the first domain ZIP at or after it (``37100`` cuts before ``37101`` when
    37100 does not exist).  Every other kind needs a domain value."""
    if isinstance(domain, IntegerDomain) and isinstance(raw, str):
        try:
            raw = int(raw.strip())
        except ValueError:
            return None
    pos = domain.position(raw)
    if pos is None and isinstance(domain, ZipDomain) and isinstance(raw, str) and domain.lexicographic \
            and raw.isdigit() and len(raw) == len(domain.values[0]):
        found = bisect.bisect_left(domain.values, raw)
        pos = found if found < domain.size else None
    return pos


# -- the spec's rule -----------------------------------------------------------------------
def parse_rule(q: dict[str, Any], kind: str, lo: Any, hi: Any, values: Any, where: str,
               problems: Problems) -> CutRule | None:
    """The ``[[qi]]`` table's allowed cut points, every static problem reported (one line each)."""
    given = [k for k in RULE_KEYS if k in q]
    if not given:
        return None
    if len(given) > 1:
        problems.add(where, f"give one of {', '.join(given)}", "they are alternative ways to say where a group may "
                     "start; list the cut values with cuts = [...] to combine them")
        return None
    key = given[0]
    raw = q[key]
    if key == "zip_digits":
        return _zip_digits(raw, kind, where, problems)
    if key == "date_cuts":
        return _date_cuts(raw, kind, where, problems)
    if raw == "hierarchy":
        if not q.get("hierarchy"):
            problems.add(where, 'cuts = "hierarchy" needs hierarchy = "<file>"',
                         "add the hierarchy file, or list the cuts")
            return None
        return CutRule(hierarchy=True)
    if isinstance(raw, dict):
        return _every(raw, kind, where, problems)
    if isinstance(raw, list):
        return _values(raw, kind, lo, hi, values, where, problems)
    problems.add(where, f"cuts = {raw!r} is not a cut list",
                 'write cuts = [18, 30, 65], cuts = { every = 5 } or cuts = "hierarchy"')
    return None


def _every(raw: dict[str, Any], kind: str, where: str, problems: Problems) -> CutRule | None:
    problems.unknown_keys(raw, {"every", "top"}, f"{where} cuts")
    n, top = raw.get("every"), raw.get("top")
    if kind != "integer":
        hint = {"zip": "use zip_digits = [3, 5]", "date": 'use date_cuts = ["month"]'}.get(kind, "list the cuts")
        problems.add(where, f"cuts = {{ every = … }} is for integer QIs, not {kind}", hint)
        return None
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        problems.add(where, f"cuts every = {n!r} must be a whole number > 0", "e.g. cuts = { every = 5 }")
        return None
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top % n):
        problems.add(where, f"cuts top = {top!r} must be a whole multiple of every = {n}",
                     "e.g. cuts = { every = 5, top = 90 }: 5-year bands, the last 90 and above")
        return None
    return CutRule(every=n, top=top)


def _values(raw: list[Any], kind: str, lo: Any, hi: Any, values: Any, where: str,
            problems: Problems) -> CutRule | None:
    if not raw:
        problems.add(where, "cuts = [] allows no cut, so the QI would always be one group",
                     "list the values a group may start at, or drop the QI")
        return None
    out: list[Any] = []
    for v in raw:
        if kind == "integer":
            if isinstance(v, bool) or not isinstance(v, int):
                problems.add(where, f"cut {v!r} is not a whole number")
                continue
            if isinstance(lo, int) and isinstance(hi, int) and not lo < v <= hi:
                problems.add(where, f"cut {v} is outside the domain {lo}..{hi} (after its first value)",
                             "a cut names the first value of a new group")
                continue
        elif kind == "date":
            try:
                v = parse_date(v, f"{where} cut")
            except SpecError as e:
                problems.extend(e.problems)
                continue
            if isinstance(lo, dt.date) and isinstance(hi, dt.date) and not lo < v <= hi:
                problems.add(where, f"cut {v} is outside the domain {lo}..{hi} (after its first day)")
                continue
        else:
            if not isinstance(v, str):
                problems.add(where, f"cut {v!r} must be a string (a {kind} value)")
                continue
            if isinstance(values, list) and kind == "category" and v not in values[1:]:
                problems.add(where, f"cut {v!r} is not a value after the first of values",
                             "a cut names the first value of a new group")
                continue
        out.append(v)
    return CutRule(values=tuple(out)) if len(out) == len(raw) else None


def _zip_digits(raw: Any, kind: str, where: str, problems: Problems) -> CutRule | None:
    if kind != "zip":
        problems.add(where, f"zip_digits is for zip QIs, not {kind}", "use cuts = [...] for this QI")
        return None
    items = raw if isinstance(raw, list) else [raw]
    if not items or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in items):
        problems.add(where, f"zip_digits = {raw!r} must list whole numbers >= 1", "e.g. zip_digits = [3, 5]")
        return None
    return CutRule(zip_digits=tuple(sorted(set(items))))


def _date_cuts(raw: Any, kind: str, where: str, problems: Problems) -> CutRule | None:
    if kind != "date":
        problems.add(where, f"date_cuts is for date QIs, not {kind}", "use cuts = [...] for this QI")
        return None
    items = raw if isinstance(raw, list) else [raw]
    bad = [u for u in items if u not in UNITS]
    if not items or bad:
        problems.add(where, f"date_cuts = {raw!r} must list units among {', '.join(UNITS)}",
                     'e.g. date_cuts = ["month", "year"]')
        return None
    return CutRule(date_units=tuple(u for u in UNITS if u in items))


def allowed_mask(rule: CutRule, domain: Domain, hierarchy: Hierarchy | None, where: str,
                 problems: list[str]) -> np.ndarray | None:
    """The boundaries ``rule`` allows on the resolved ``domain`` (None after a problem)."""
    n = domain.size - 1
    if rule.every is not None and isinstance(domain, IntegerDomain):
        mask = every_bits(domain, rule.every, rule.top)
    elif rule.values is not None:
        mask = np.zeros(n, dtype=bool)
        positions = [cut_position(domain, v) for v in rule.values]
        bad = [v for v, pos in zip(rule.values, positions) if not pos]
        for v in bad:
            problems.append(f"{where}: cut {v!r} is not a value after the first of the domain; a cut names "
                            f"the first value of a new group")
        if bad:
            return None
        mask[[int(pos) - 1 for pos in positions if pos]] = True
    elif rule.hierarchy:
        if hierarchy is None or hierarchy.height < 2:
            problems.append(f'{where}: cuts = "hierarchy" needs a hierarchy with a level above the values; '
                            f"add one, or list the cuts")
            return None
        split = hierarchy.split_group([domain.text(i) for i in range(domain.size)])
        if split is not None:
            level, label, members, between = split
            fix = (f"{domain.kind} values keep their own order: give the hierarchy groups of adjacent values, "
                   f"or list the cuts") if domain.kind in ("integer", "date") else \
                "order the domain as the hierarchy groups it (values = [...]) or list the cuts"
            problems.append(f'{where}: cuts = "hierarchy" needs every group to be a run of adjacent values, but '
                            f"level {level} group {label!r} holds {shown(members)} with {shown(between)} between "
                            f"them; {fix}")
            return None
        mask = np.diff(hierarchy.recoding(domain, 1).group_of) != 0
    elif rule.zip_digits and isinstance(domain, ZipDomain):
        mask = np.zeros(n, dtype=bool)
        for d in rule.zip_digits:
            mask |= digits_bits(domain, d)
    elif rule.date_units and isinstance(domain, DateDomain):
        mask = np.zeros(n, dtype=bool)
        for unit in rule.date_units:
            mask |= unit_bits(domain, unit)
    else:  # the spec checked kinds; a domain of another kind cannot reach here
        problems.append(f"{where}: {rule.describe()} does not fit a {domain.kind} domain")
        return None
    if n and not mask.any():
        problems.append(f"{where}: {rule.describe()} allows no cut inside the domain, so the QI would always be one "
                        f"group; allow at least one cut or drop the QI")
        return None
    return mask


def rule_ladder(rule: CutRule | None, domain: Domain) -> list[np.ndarray]:
    """The boundary sets of a QI's full-domain levels under its cut rule, finest first, the top (one
    group) left out; empty when the rule gives none (no rule, or ``cuts = "hierarchy"``: the hierarchy's
    own levels serve).  Every set is one the rule allows, so a full-domain search bands a QI the way a
    policy may (5-year bands, ZIP3, months) instead of only keeping or blanking it:

    - ``every = n``: bands of n, 2n, 4n, … while a band leaves two groups; with ``top``, each with the
      cut at ``top`` too (the band ``top`` and above throughout), down to that cut alone;
    - ``cuts = [...]``: those cuts;
    - ``zip_digits``: each width, widest first;
    - ``date_cuts``: month, quarter, year, as listed."""
    if rule is None or rule.hierarchy or domain.size < 2:
        return []
    ladder: list[np.ndarray] = []
    if rule.every is not None and isinstance(domain, IntegerDomain):
        n = rule.every
        top_cut = (np.arange(domain.lo + 1, domain.hi + 1, dtype=np.int64) == rule.top
                   if rule.top is not None else None)
        while (bits := every_bits(domain, n, rule.top)).any():
            ladder.append(bits if top_cut is None else bits | top_cut)
            n *= 2
        if top_cut is not None and top_cut.any():
            ladder.append(top_cut)  # below top, and top and above
    elif rule.values is not None:
        problems: list[str] = []
        mask = allowed_mask(rule, domain, None, "", problems)
        if mask is not None:
            ladder.append(mask)
    elif rule.zip_digits and isinstance(domain, ZipDomain):
        ladder = [digits_bits(domain, d) for d in sorted(rule.zip_digits, reverse=True)]
    elif rule.date_units and isinstance(domain, DateDomain):
        ladder = [unit_bits(domain, u) for u in UNITS if u in rule.date_units]
    out: list[np.ndarray] = []
    for bits in ladder:  # a level that cuts nothing, or no coarser than the one before, is no level
        if bits.any() and not (out and np.array_equal(bits, out[-1])):
            out.append(bits)
    return out
