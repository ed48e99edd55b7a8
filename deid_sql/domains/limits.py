"""Size limits on quasi-identifier domains, checked before anything is sized by them.

Every structure deid-sql builds per QI grows with its domain, not with the data: the
lattice keeps one bit per boundary (and a QI index per bit), a recoding one group id
per value, the fast evaluator one marginal entry per value and the SQL path one list
entry per value.  An integer QI with ``max = 1000000000`` would need tens of GB before
a single row is read, so a domain is sized from the spec (integer and date QIs, listed
categories) or from the distinct values found (categories read from data) and refused
in one line when it is too large.  The prefix-sum cube of the fast path has its own
limit (``evaluate.groups.CUBE_LIMIT``): past it the census is counted by a scan instead.

Measured on the limits (one QI of 1,000,000 values; four of 1,000,000 each), peak RSS of
``deid-sql validate`` / ``evaluate`` stays under 1 GB on either evaluation path.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import SpecError

MAX_QI_VALUES = 1_000_000  # values in one QI's domain
MAX_TOTAL_VALUES = 4_000_000  # values over all QIs' domains (≈ the lattice's bits)
#: the bound below which a combination of QI positions packed into one integer (a group key, a
#: person's packed positions) stays a signed 64-bit integer with a bit to spare, so forming the
#: next digit never wraps, on every engine and in numpy (``evaluate.groups``, ``loading.person_cells``)
KEY_LIMIT = 2**62

_FIX = {
    "integer": "declare a coarser column (e.g. ages in years, not days; incomes in thousands) "
               "with a narrower min/max",
    "date": "narrow min/max to the dates that occur, or generalize the column first (e.g. dates by month, "
            "as an integer QI of months)",
    "category": "generalize the column first (e.g. map the values to a hierarchy level, ZIP3 instead of "
                "ZIP+4) and declare the coarser values",
}


def _fix(kind: str) -> str:
    return _FIX.get(kind, _FIX["category"])


def qi_values(kind: str, lo: Any = None, hi: Any = None, values: Sequence[str] | None = None,
              extra: int = 0) -> int | None:
    """Number of values of a QI's domain as declared in the spec; None when the spec does not
    fix it (categories read from data) or when min/max are invalid (reported elsewhere)."""
    if kind == "integer":
        ok = all(isinstance(v, int) and not isinstance(v, bool) for v in (lo, hi))
        return hi - lo + 1 if ok and lo <= hi else None
    if kind == "date":
        ok = all(isinstance(v, dt.date) for v in (lo, hi))
        return (_day(hi) - _day(lo)).days + 1 if ok and lo <= hi else None
    return len(values) + extra if values else None


def _day(value: dt.date) -> dt.date:
    return value.date() if isinstance(value, dt.datetime) else value


def size_problem(name: str, kind: str, size: int, exact: bool = True) -> str | None:
    """One line when a single QI's domain is larger than ``MAX_QI_VALUES`` (``exact`` False when
    only the first ``value_cap()`` values were read, so ``size`` is a lower bound)."""
    if size <= MAX_QI_VALUES:
        return None
    count = f"{size:,} values" if exact else f"over {MAX_QI_VALUES:,} distinct values"
    kind_ = f"{kind} " if kind else ""
    return (f"QI {name!r}: its {kind_}domain has {count}, more than the {MAX_QI_VALUES:,} a QI may have "
            f"(the policy lattice and the evaluators keep one entry per value); {_fix(kind)}")


def total_problem(sizes: Iterable[tuple[str, int]]) -> str | None:
    """One line when the QIs' domains together exceed ``MAX_TOTAL_VALUES``."""
    pairs = list(sizes)
    total = sum(s for _, s in pairs)
    if total <= MAX_TOTAL_VALUES:
        return None
    largest = ", ".join(f"{n} {s:,}" for n, s in sorted(pairs, key=lambda p: -p[1])[:3])
    return (f"the QIs' domains have {total:,} values together ({largest}), more than the {MAX_TOTAL_VALUES:,} "
            f"a policy lattice may have; coarsen the largest domains or drop a QI")


def domain_problems(qis: Iterable[Any]) -> list[str]:
    """Problems with the sizes of the domains the spec fixes (``QISpec``s: integer and date
    min/max, listed categories), found before any domain or lattice is built.  QIs whose
    domain comes from data are checked by ``resolved_problems`` once their values are read."""
    problems: list[str] = []
    sizes: list[tuple[str, int]] = []
    for q in qis:
        extra = 1 if getattr(q, "nulls", "error") == "category" else 0
        size = qi_values(q.kind, q.min, q.max, q.values, extra)
        if size is None:
            continue
        problem = size_problem(q.name, q.kind, size)
        if problem:
            problems.append(problem)
        sizes.append((q.name, size))
    if not problems:  # a QI too large on its own is the fix to make first
        total = total_problem(sizes)
        if total:
            problems.append(total)
    return problems


def resolved_problems(qis: Sequence[Any], domains: Sequence[Any]) -> list[str]:
    """Problems with the sizes of resolved domains (``None`` for a QI whose domain failed):
    the categories read from data, and the total over every QI."""
    problems: list[str] = []
    sizes: list[tuple[str, int]] = []
    for q, d in zip(qis, domains):
        if d is None:
            continue
        from_data = q.values is None and getattr(q, "values_from", None) in ("source", "population")
        problem = size_problem(q.name, q.kind, d.size, exact=not from_data)
        if problem:
            problems.append(problem)
        sizes.append((q.name, d.size))
    if not problems:
        total = total_problem(sizes)
        if total:
            problems.append(total)
    return problems


def value_cap() -> int:
    """How many distinct values to fetch when building a domain from data: one more than
    the limit, so a too-large domain is seen without reading all of it."""
    return MAX_QI_VALUES + 1


def require_sizes(names: Sequence[str], sizes: Sequence[int], kinds: Sequence[str] | None = None) -> None:
    """Raise one ``SpecError`` listing every size problem of these domains: the last guard of the
    structures built from domains through the API (lattice, evaluators), which a spec never reaches
    with a domain too large because ``domain_problems``/``resolved_problems`` refused it first."""
    kinds = kinds or [""] * len(sizes)
    problems = [p for n, k, s in zip(names, kinds, sizes) if (p := size_problem(n, k, int(s)))]
    if not problems:
        total = total_problem((n, int(s)) for n, s in zip(names, sizes))
        problems = [total] if total else []
    if problems:
        raise SpecError(problems)
