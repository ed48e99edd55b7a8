"""The k-anonymity frontier baseline (seed 002 §5.6) and the improvement rate IR (§5.6.5).

The dissertation measures the SHS frontier against what k-anonymization reaches: the
full-domain generalizations (every value of a QI lifted to the same level of its standard
hierarchy, Incognito's search space) that are k-anonymous without suppression.  That space
is the product of a few levels per QI (about a hundred policies on Adult+ZIP), so it is
enumerated exhaustively instead of re-implementing Incognito's pruning: the same set of
k-anonymous nodes, exactly, with much less code to trust.

Levels come from the QI's hierarchy file when the spec gives one, else from its kind
(``standard_levels``).  Levels whose groups are intervals of the domain order are also
lattice bits, so a generalization made only of such levels is a lattice ``Policy`` (cached
by the evaluator and comparable with the searches' policies); otherwise it is a ``Recoding``.
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..domains.domain import DateDomain, Domain, IntegerDomain, ZipDomain
from ..domains.recoding import QIRecoding, Recoding
from ..errors import DeidError
from ..evaluate import Metrics
from ..policies.lattice import Policy
from ..problem import Problem
from .frontier import Frontier, Point

AGE_BANDS = (5, 10, 20)  # years; bands start at multiples of the width (20-24, 25-29, …)


@dataclass(frozen=True, eq=False)
class Level:
    """One level of a QI's standard hierarchy.

    ``bits`` holds this QI's lattice bits when every group is a run of adjacent domain
    values (a lattice policy can express it), else ``None`` (only a recoding can).
    """

    name: str  # "age:5y", "zip:3d", "race:*"
    recoding: QIRecoding
    bits: np.ndarray | None


@dataclass
class KAnonymityFrontier:
    """The k-anonymous full-domain generalizations and their R-U frontier.

    ``members`` lists (label, policy or recoding, metrics) of every generalization whose
    smallest sample group has at least ``k`` records; ``frontier`` holds their
    non-dominated points (key = label); ``generalizations`` counts all that were evaluated.
    """

    k: int
    members: list[tuple[str, Policy | Recoding, Metrics]] = field(default_factory=list)
    frontier: Frontier = field(default_factory=Frontier)
    generalizations: int = 0


def _level(qi: str, name: str, domain: Domain, keys: Sequence[Hashable],
           labels: dict[Hashable, str] | None = None) -> Level:
    """A level from one group key per domain position (equal keys share a group)."""
    index: dict[Hashable, int] = {}
    gid = np.fromiter((index.setdefault(key, len(index)) for key in keys), dtype=np.int64, count=len(keys))
    given = [labels[key] for key in index] if labels is not None else None
    return _as_level(f"{qi}:{name}", QIRecoding.from_groups(domain, gid, given))


def _as_level(name: str, rec: QIRecoding) -> Level:
    bits = (np.diff(rec.group_of) != 0).astype(np.uint8) if rec.contiguous else None
    return Level(name, rec, bits)


def _by_kind(qi: str, domain: Domain) -> list[Level]:
    """The standard hierarchy of a QI without a hierarchy file, from its domain's kind."""
    pos, size = range(domain.size), domain.size
    top = [0] * size
    if isinstance(domain, IntegerDomain):
        values = [domain.value(p) for p in pos]
        bands = [_level(qi, f"{w}y", domain, [v // w for v in values]) for w in AGE_BANDS]
        return [_level(qi, "kept", domain, values), *bands, _level(qi, "*", domain, top)]
    if isinstance(domain, DateDomain):
        days = [domain.value(p) for p in pos]
        return [_level(qi, "kept", domain, days), _level(qi, "month", domain, [(d.year, d.month) for d in days]),
                _level(qi, "year", domain, [d.year for d in days]), _level(qi, "*", domain, top)]
    if isinstance(domain, ZipDomain):
        texts = [domain.text(p) for p in pos]
        width = max((len(t) for t in texts if t.isdigit()), default=1)
        levels = [_level(qi, "kept", domain, texts)]
        for d in range(width - 1, 0, -1):
            # a ZIP keeps its first d digits ("372**"); a non-ZIP value (NULL label) stays alone
            keys = [t[:d] + "*" * (len(t) - d) if t.isdigit() else t for t in texts]
            levels.append(_level(qi, f"{d}d", domain, keys, {k: str(k) for k in keys}))
        return [*levels, _level(qi, "*", domain, top, {0: "*" * width})]
    return [_level(qi, "kept", domain, list(pos)), _level(qi, "*", domain, top)]


def _distinct(levels: list[Level]) -> list[Level]:
    """Drop levels that group exactly like the previous one (e.g. ZIP 1d and * when every
    ZIP starts with 3), so no generalization is evaluated or put on the frontier twice.
    The most general level keeps its place and name ("*" rather than "1d")."""
    out: list[Level] = []
    for i, level in enumerate(levels):
        if out and np.array_equal(out[-1].recoding.group_of, level.recoding.group_of):
            if i == len(levels) - 1 and len(out) > 1:
                out[-1] = level
            continue
        out.append(level)
    return out


def standard_levels(problem: Problem) -> list[list[Level]]:
    """Per QI, its full-domain levels from most specific (values kept) to most general.

    A hierarchy file in the spec gives the levels (named ``kept``, ``level=1``, …, as
    ``Lattice.parse`` spells them); otherwise: integer → kept, 5y, 10y, 20y, *; zip → kept,
    then 4, 3, 2, 1 leading digits, *; date → kept (day), month, year, *; category → kept, *.
    Levels identical to the one before are dropped (``_distinct``).
    """
    out: list[list[Level]] = []
    for q, domain in zip(problem.spec.qis, problem.domains):
        hierarchy = problem.lattice.hierarchies.get(q.name)
        if hierarchy is None:
            levels = _by_kind(q.name, domain)
        else:
            levels = [_as_level(f"{q.name}:{'kept' if n == 0 else f'level={n}'}", hierarchy.recoding(domain, n))
                      for n in range(hierarchy.height)]
        out.append(_distinct(levels))
    return out


def publishable_levels(problem: Problem) -> list[list[Level]]:
    """``standard_levels`` without the levels the spec's allowed cut points rule out: on a QI
    with ``cuts``/``zip_digits``/``date_cuts`` only the interval-shaped levels that cut at
    allowed boundaries remain (the top always does), so the baseline, like the searches,
    offers only publishable policies.  Unconstrained QIs keep every level."""
    lattice = problem.lattice
    out = []
    for i, levels in enumerate(standard_levels(problem)):
        allowed = lattice.qi_allowed(i)
        if not allowed.all():
            levels = [lv for lv in levels if lv.bits is not None and not np.any(lv.bits.astype(bool) & ~allowed)]
        out.append(levels)
    return out


def full_domain_generalizations(problem: Problem) -> Iterator[tuple[str, Policy | Recoding]]:
    """Every combination of one publishable level per QI, labelled ``age:5y|sex:kept|race:*|zip:3d``.

    A combination of interval-shaped levels is a lattice ``Policy``; any other is a
    ``Recoding`` named by its label."""
    lattice = problem.lattice
    for combo in itertools.product(*publishable_levels(problem)):
        label = "|".join(level.name for level in combo)
        if all(level.bits is not None for level in combo):
            bits = [level.bits for level in combo if level.bits is not None]
            yield label, lattice.policy(np.concatenate(bits) if bits else np.zeros(0, dtype=np.uint8))
        else:
            yield label, Recoding(tuple(level.recoding for level in combo), name=label)


def kanonymity_frontier(problem: Problem, k: int) -> KAnonymityFrontier:
    """The full-domain generalizations whose every sample group has ≥ k records (k-anonymity
    without suppression, seed 002 §5.6) and their frontier in normalized R-U space.

    All generalizations are evaluated on the fast path (lattice policies hit the problem's
    cache on a second call, e.g. for another k).  A ``k`` above the record count leaves the
    result empty rather than failing: no generalization qualifies, which is an answer."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise DeidError(f"k-anonymity needs a whole number k >= 1 (the smallest group size allowed), not {k!r}")
    result = KAnonymityFrontier(int(k))
    for label, item in full_domain_generalizations(problem):
        result.generalizations += 1
        metrics = problem.evaluate(item)
        if metrics.k >= k:
            result.members.append((label, item, metrics))
            result.frontier.update(Point(metrics.risk, metrics.loss, label))
    return result


def _height(frontier: Frontier, risk: float) -> float:
    """The stair-step's loss at ``risk``: the lowest loss of a point with risk ≤ ``risk``
    (1, the worst, when there is none — the convention of ``Frontier.area``)."""
    return min((p.loss for p in frontier if p.risk <= risk), default=1.0)


def improvement_rate(kanon: Frontier, searched: Frontier) -> float:
    """IR = (AU(F_k) − AU(F_s)) / AU(F_s) (seed 002 §5.6.5); positive when the searched
    frontier F_s improves on the k-anonymity frontier F_k.

    Both areas are ``Frontier.area(lo, hi)`` over F_k's risk range [lo, hi] = [min, max risk
    of F_k]: F_s is "truncated to the same range" as a curve, so an F_s point with risk < lo
    still sets F_s's loss inside the range (that policy is available at every risk ≥ its own),
    which is how ``Frontier.area`` treats points before the range start.

    Degenerate range (all F_k points at one risk r, e.g. a single point): both areas are 0,
    so IR is taken as its limit over [r, r + ε] as ε → 0, i.e. the ratio of the stair heights
    at r: (u_k − u_s(r)) / u_s(r).  Extending to [r, 1] instead would compare F_s over risks
    F_k never reaches, which the non-degenerate case deliberately does not do.
    When F_s's area (or height) is 0, IR is +inf if F_k's is positive, else 0 (equal).
    An empty F_k has no range: DeidError.
    """
    if not len(kanon):
        raise DeidError("the k-anonymity frontier is empty, so it has no risk range to compare over; "
                        "lower k or check the data")
    lo, hi = min(p.risk for p in kanon), max(p.risk for p in kanon)
    if hi > lo:
        au_k, au_s = kanon.area(lo, hi), searched.area(lo, hi)
    else:
        au_k, au_s = _height(kanon, lo), _height(searched, lo)
    if au_s == 0.0:
        return float("inf") if au_k > 0.0 else 0.0
    return (au_k - au_s) / au_s
