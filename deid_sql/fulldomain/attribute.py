"""Attribute-disclosure privacy models for the full-domain search (METHODS decision 15, ARX's).

Beside ``models.DistinctLDiversity``: entropy ℓ-diversity, recursive (c,ℓ)-diversity,
t-closeness (equal, ordered and hierarchical ground distance), (α,k)-anonymity's confidence
bound and δ-presence.  Each judges one group at a time on the figures of
``evaluate/attribute.py`` (the one place their formulas live), read from the group table's
(group, sensitive value, records) rows through ``GroupStats.value_counts``; a group that fails is
suppressed, and the transformation is accepted when the records suppressed stay within the limit
(ARX's rule).  ``ignore_values`` leaves out values that reveal nothing (e.g. "none").

Predictive properties (why each model declares what it does).  Without suppression (the limit
allows no record) "accepted" means every group passes, and each figure is monotone under merging
groups — a merged group's p is a mixture of its parts' p, and distinct ℓ and exp(H) never fall,
r₁ < c·(r_ℓ+…) is kept, a convex distance to a fixed q never rises, max share and m/g never
exceed the parts' largest — so acceptance is predictive both ways (``BOTH``).  With suppression
only distinct ℓ keeps it (a merged group holds every value of each part, so it passes when any
part passes: ``models.DistinctLDiversity``).  For the others a passing group merged with a failing
one may fail — e.g. confidence α = ½: a group of 10 with 5 B20 merged with a group of 1 B20 has
6/11 > ½ — so a generalization may suppress more records than its specialization, and nothing is
declared: the search checks every candidate and stays exact.  ARX says the same of entropy ℓ,
recursive (c,ℓ), t-closeness and δ-presence; confidence is the same case as presence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..domains.hierarchy import Hierarchy
from ..errors import DeidError
from ..evaluate import attribute as figures
from ..loading.sensitive import SensitiveCells
from .models import BOTH, PrivacyModel

if TYPE_CHECKING:
    from .transform import GroupStats, TransformEvaluator

T_DISTANCES = ("equal", "ordered", "hierarchical")
_TOLERANCE = 1e-9  # relative: a group exactly at the limit passes (exp(H) of ℓ equal values is ℓ ± ulp)


def _share(value: object, name: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < float(value) <= 1:
        raise DeidError(f"{name} = {value!r} must be a share in (0, 1] ({what})")
    return float(value)


def _at_least_one(value: object, name: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not float(value) >= 1:
        raise DeidError(f"{name} = {value!r} must be a number at least 1 ({what})")
    return float(value)


class AttributeModel(PrivacyModel):
    """A per-group model on a sensitive ``column``: subclasses give ``failing`` on the group's
    value counts.  Predictive both ways when no record may be suppressed, else nothing (above)."""

    kind = ""

    def __init__(self, column: str, ignore_values: Sequence[str | None] = ()) -> None:
        if not isinstance(column, str) or not column:
            raise DeidError(f"{self.kind} needs the name of the sensitive column (--sensitive COLUMN)")
        self.sensitive = column
        self.ignore_values = tuple(ignore_values)
        self.predictive: frozenset[str] = BOTH

    def bind(self, evaluator: TransformEvaluator) -> None:
        values = evaluator.value_cells[self.sensitive].values
        self.ignored = [i for i, v in enumerate(values) if v in self.ignore_values]
        self.predictive = BOTH if evaluator.max_suppressed == 0 else frozenset()

    def counts(self, stats: GroupStats, keep: np.ndarray | None = None) -> figures.ValueCounts:
        return stats.value_counts(self.sensitive).among(keep).without(self.ignored)

    def failing(self, stats: GroupStats, keep: np.ndarray | None = None) -> np.ndarray:
        """Per group (or per group where ``keep``): does it fail the model?"""
        raise NotImplementedError

    def violating(self, stats: GroupStats) -> np.ndarray:
        return self.failing(stats)

    def suppress(self, stats: GroupStats, mask: np.ndarray) -> np.ndarray:
        return judge_released(stats, mask, self.failing)


class EntropyLDiversity(AttributeModel):
    """Entropy ℓ-diversity: exp(H) ≥ ℓ in every released group, H over p(v) = f_G(v) / Σ f_G."""

    kind = "entropy ℓ-diversity"

    def __init__(self, l: float, column: str, ignore_values: Sequence[str | None] = ()) -> None:  # noqa: E741
        self.l = _at_least_one(l, "min_entropy_l", "entropy ℓ-diversity: exp(entropy) of each group")
        super().__init__(column, ignore_values)

    def failing(self, stats: GroupStats, keep: np.ndarray | None = None) -> np.ndarray:
        return figures.entropy_l(self.counts(stats, keep)) < self.l * (1 - _TOLERANCE)

    def __repr__(self) -> str:
        return f"EntropyLDiversity({self.l:g}, {self.sensitive!r})"


class RecursiveCLDiversity(AttributeModel):
    """Recursive (c,ℓ)-diversity: r₁ < c·(r_ℓ + … + r_m) and m ≥ ℓ in every released group."""

    kind = "recursive (c,ℓ)-diversity"

    def __init__(self, c: float, l: int, column: str,  # noqa: E741 - the model's name
                 ignore_values: Sequence[str | None] = ()) -> None:
        if isinstance(c, bool) or not isinstance(c, int | float) or not float(c) > 0:
            raise DeidError(f"recursive_cl c = {c!r} must be a number above 0 (r₁ < c·(r_ℓ + … + r_m))")
        if isinstance(l, bool) or not isinstance(l, int | np.integer) or int(l) < 1:
            raise DeidError(f"recursive_cl ℓ = {l!r} must be a whole number at least 1")
        self.c, self.l = float(c), int(l)
        super().__init__(column, ignore_values)

    def failing(self, stats: GroupStats, keep: np.ndarray | None = None) -> np.ndarray:
        return ~figures.recursive_cl(self.counts(stats, keep), self.c, self.l)

    def __repr__(self) -> str:
        return f"RecursiveCLDiversity({self.c:g}, {self.l}, {self.sensitive!r})"


class Confidence(AttributeModel):
    """(α,k)-anonymity's confidence bound: max_v f_G(v) / n_G ≤ α in every released group."""

    kind = "the confidence bound"

    def __init__(self, alpha: float, column: str, ignore_values: Sequence[str | None] = ()) -> None:
        self.alpha = _share(alpha, "max_confidence", "the largest share of a group holding one value")
        super().__init__(column, ignore_values)

    def failing(self, stats: GroupStats, keep: np.ndarray | None = None) -> np.ndarray:
        return figures.confidence(self.counts(stats, keep)) > self.alpha * (1 + _TOLERANCE)

    def __repr__(self) -> str:
        return f"Confidence({self.alpha:g}, {self.sensitive!r})"


class TCloseness(AttributeModel):
    """t-closeness: the distance of each released group's p(v) to q(v), the distribution over every
    record of the source (suppressed ones included, as ARX), at most t.  ``distance``: "equal",
    "ordered" (the column's ``order``: its values first to last; without one, a column whose values
    are all numbers is ordered by number) or "hierarchical" (``hierarchy``: the column's value →
    labels per level, ``domains.hierarchy.Hierarchy.rows``, or ``hierarchy_file`` to read them from;
    a root is added when its last level has several labels)."""

    kind = "t-closeness"

    def __init__(self, t: float, column: str, distance: str, ignore_values: Sequence[str | None] = (), *,
                 order: Sequence[str | None] | None = None,
                 hierarchy: dict[str, tuple[str, ...]] | None = None, hierarchy_file: str | None = None) -> None:
        self.t = _share(t, "max_t", "the distance of a group's values to the whole source's")
        if distance not in T_DISTANCES:
            raise DeidError(f"t_distance = {distance!r} is not one of {', '.join(T_DISTANCES)}; "
                            f"give --t-distance (the spec's t_distance) with max_t")
        if hierarchy is None and hierarchy_file is not None:
            hierarchy = Hierarchy.read(hierarchy_file).rows
        if distance == "hierarchical" and hierarchy is None:
            raise DeidError(f"t_distance = \"hierarchical\" needs a hierarchy of the sensitive column {column!r}; "
                            f"give one, or use t_distance = \"equal\"")
        self.distance, self.order, self.hierarchy = distance, order, hierarchy
        self.hierarchy_file = hierarchy_file  # recorded in the sidecar, to run the search again
        super().__init__(column, ignore_values)

    def bind(self, evaluator: TransformEvaluator) -> None:
        super().bind(evaluator)
        cells = evaluator.value_cells[self.sensitive]
        values = list(cells.values)
        rank = self._ranks(values)  # code → position in the distance's order of the kept values
        self.rank = rank
        kept = rank >= 0
        # the kept codes' ranks rise with the codes: remapping keeps the entries' order (no re-sort)
        self.monotone = bool(np.all(np.diff(rank[kept]) > 0))
        q = np.bincount(cells.codes, weights=cells.counts, minlength=len(values))[kept][np.argsort(rank[kept])]
        self.q = q / q.sum() if q.sum() > 0 else q
        self.parents = self._parents([values[i] for i in np.flatnonzero(kept)[np.argsort(rank[kept])]])

    def _ranks(self, values: list[str | None]) -> np.ndarray:
        kept = [v for i, v in enumerate(values) if i not in self.ignored]
        if self.distance == "ordered":
            order = list(self.order) if self.order is not None else _numeric_order(kept)
            if order is None:
                raise DeidError(f"t_distance = \"ordered\" on {self.sensitive!r}, whose values are not numbers and "
                                f"that declares no order; declare its order, or use t_distance = \"equal\"")
            missing = [v for v in kept if v not in order]
            if missing:
                raise DeidError(f"the order of sensitive column {self.sensitive!r} lacks value {missing[0]!r} "
                                f"found in the source; add it to the order")
            position = {v: i for i, v in enumerate(order)}
            kept = sorted(kept, key=lambda v: position[v])
        at = {v: i for i, v in enumerate(kept)}
        return np.array([at.get(v, -1) if i not in self.ignored else -1 for i, v in enumerate(values)],
                        dtype=np.int64)

    def _parents(self, ordered: list[str | None]) -> list[np.ndarray]:
        if self.distance != "hierarchical":
            return []
        assert self.hierarchy is not None
        missing = [v for v in ordered if v is None or v not in self.hierarchy]
        if missing:
            raise DeidError(f"the hierarchy of sensitive column {self.sensitive!r} has no row for value "
                            f"{missing[0]!r} found in the source; add one")
        rows = [self.hierarchy[v] for v in ordered]  # type: ignore[index]
        height = len(rows[0]) if rows else 1
        levels = [[r[h] for r in rows] for h in range(height)]
        if len(set(levels[-1])) > 1:
            levels.append(["*"] * len(rows))
        levels[0] = [str(i) for i in range(len(rows))]
        parents, ids = [], list(range(len(rows)))
        for h in range(1, len(levels)):
            names = {label: i for i, label in enumerate(dict.fromkeys(levels[h]))}
            up = [names[label] for label in levels[h]]
            parent = np.zeros(max(ids) + 1 if ids else 0, dtype=np.int64)
            parent[ids] = up
            parents.append(parent)
            ids = up
        return parents

    def counts(self, stats: GroupStats, keep: np.ndarray | None = None, ordered: bool = True) -> figures.ValueCounts:
        """The counts by rank in the distance's order of values; ``ordered=False`` leaves the entries
        in the codes' order within each group (what the equal distance and the block need)."""
        vc = stats.value_counts(self.sensitive).among(keep)
        rank = self.rank[vc.value]
        keep = rank >= 0
        group, rank, persons = vc.group[keep], rank[keep], vc.persons[keep]
        if ordered and not self.monotone:  # ranks are distinct per code: one argsort restores (group, rank) order
            order = np.argsort(group * len(self.q) + rank)
            group, rank, persons = group[order], rank[order], persons[order]
        return figures.ValueCounts(group, rank, persons, vc.size, len(self.q))

    def distances(self, stats: GroupStats, keep: np.ndarray | None = None) -> np.ndarray:
        vc = self.counts(stats, keep, ordered=False)
        if self.distance == "equal":  # sums per group: any order of the entries
            return figures.t_equal(vc, self.q)
        block = vc.dense_fits()  # the block is filled by rank, in any order; the runs need them sorted
        if not block and not self.monotone:
            vc = self.counts(stats, keep)
        if self.distance == "ordered":
            return figures.t_ordered(vc, self.q, block)
        return figures.t_hierarchical(vc, self.q, self.parents, block)

    def failing(self, stats: GroupStats, keep: np.ndarray | None = None) -> np.ndarray:
        return self.distances(stats, keep) > self.t * (1 + _TOLERANCE)

    def __repr__(self) -> str:
        return f"TCloseness({self.t:g}, {self.sensitive!r}, {self.distance!r})"


class UnionKAnonymity(AttributeModel):
    """k-anonymity of what a recipient holds with this release (METHODS decision 16): every person's
    combined label — their labels in the earlier releases to the recipient, then this one — shared
    by at least k persons.  The earlier part is a value of each person, like a sensitive column's:
    ``cells`` counts the persons of each QI cell per earlier combined label ("not released before"
    is one value of its own), built by ``jobs.earlier`` from the ledger.  A group fails when one of
    its (group, earlier label) parts is non-empty and smaller than k; merging groups only adds to
    each part, so acceptance is monotone without suppression (as k-anonymity), and with it nothing
    is declared (a passing group merged with a failing one may fail: ``AttributeModel``)."""

    kind = "k-anonymity with the earlier releases"

    def __init__(self, k: int, cells: SensitiveCells, recipient: str = "", releases: Sequence[str] = (),
                 before: int | None = None) -> None:
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or int(k) < 1:
            raise DeidError(f"k = {k!r} must be a whole number at least 1")
        self.k = int(k)
        self.cells = cells
        self.recipient, self.releases, self.before = recipient, tuple(releases), before
        super().__init__(cells.column)

    def value_cells(self, problem: object) -> SensitiveCells:
        """The earlier labels' cells (the evaluator reads a model's own cells before a column's)."""
        return self.cells

    def failing(self, stats: GroupStats, keep: np.ndarray | None = None) -> np.ndarray:
        vc = self.counts(stats, keep)
        small = vc.persons < self.k
        return np.bincount(vc.group[small], minlength=vc.groups) > 0

    def __repr__(self) -> str:
        return f"UnionKAnonymity({self.k}, {self.recipient!r}, {len(self.releases)} earlier)"


def judge_released(stats: GroupStats, mask: np.ndarray,
                   failing: Callable[[GroupStats, np.ndarray | None], np.ndarray]) -> np.ndarray:
    """``mask`` with the groups that ``failing`` finds among those not yet suppressed: a group an
    earlier model (k-anonymity) suppressed is never judged again.  At fine levels most groups are
    below k, so the figures are computed on a few of the (group, value) entries (bench/attribute.py)."""
    if not mask.any():
        return failing(stats, None)
    keep = ~mask
    if not keep.any():
        return mask
    out = mask.copy()
    out[keep] = failing(stats, keep)
    return out


def _numeric_order(values: list[str | None]) -> list[str | None] | None:
    """The values sorted by number when every one (NULL aside, last) reads as a number, else None."""
    try:
        numbers = {v: float(v) for v in values if v is not None}
    except ValueError:
        return None
    return sorted(numbers, key=lambda v: numbers[v]) + ([None] if None in values else [])  # type: ignore[return-value]


class Presence(PrivacyModel):
    """δ-presence: m(G) / g(G) ≤ δ in every released group, g the census people (needs a census):
    the chance that a person of the population matching G is in the release."""

    def __init__(self, delta: float) -> None:
        self.delta = _share(delta, "max_presence", "released persons over census people per group")
        self.predictive: frozenset[str] = BOTH

    def bind(self, evaluator: TransformEvaluator) -> None:
        if evaluator.problem.population is None:
            raise DeidError("max_presence needs a census: give the spec a population (the people the release "
                            "is drawn from), or leave out max_presence")
        self.predictive = BOTH if evaluator.max_suppressed == 0 else frozenset()

    def failing(self, stats: GroupStats, keep: np.ndarray | None = None) -> np.ndarray:
        m = stats.m if keep is None else stats.m[keep]
        return figures.presence(m, stats.census(keep)) > self.delta * (1 + _TOLERANCE)

    def violating(self, stats: GroupStats) -> np.ndarray:
        return self.failing(stats)

    def suppress(self, stats: GroupStats, mask: np.ndarray) -> np.ndarray:
        return judge_released(stats, mask, self.failing)

    def __repr__(self) -> str:
        return f"Presence({self.delta:g})"
