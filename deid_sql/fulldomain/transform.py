"""Full-domain generalization followed by record suppression (seed 004, "Preliminaries").

A transformation x = (x_1, …, x_m) picks one level of each QI's hierarchy (0 = the
original values, h_i − 1 = the top, usually ``*``).  ``x ≺ y`` when x_i ≤ y_i for
every i; x is then a *specialization* of y and y a *generalization* of x.  Applying x:

1. generalize every QI to its level,
2. suppress every record of every equivalence class that violates the privacy model,
3. x is a solution candidate (``accepted``) when at most ⌊limit · N⌋ records were
   suppressed.

Evaluation works on the sample cells (one row per distinct QI combination, built by
one ``GROUP BY`` at load), never on rows.

Roll-up
-------
Every evaluated transformation leaves its *group table* in an LRU cache bounded by
rows (``cache_rows``; ``tables.GroupTables``): a row per distinct group, its key and its
count, sorted by key.  A key packs, from the high bits down, every QI's group in a *fixed*
bit field (a field means the same at every level), read with a shift and a mask.  The field
holds the group's *rank* among the groups of its level present in the cells
(``tables.LevelRanks``), not its id over the hierarchy's whole domain: ranks keep the ids'
order, so sorting keys sorts groups QI by QI by their ids, and a field is as wide as the most
groups present at any level (a ZIP hierarchy of 100,000 leaves with 13,294 present: 14 bits,
not 17; issue 43).  Hierarchies are trees, so every group at level a lies in exactly one group
at level b > a (``TransformationSpace.lift``), and its rank in one rank (``LevelRanks.lift``).

To evaluate x, the cached *direct* specialization y of x (one QI one level lower) with
the fewest rows is looked up; when none is cached, or the smallest has more than a few
thousand rows, the cached y ≺ x with the fewest rows (a vectorized scan of the cached
levels), and only then the cells.  From y: move the field of each QI where x is higher by its
lift (one lookup per row of the rank's change, already shifted), sort, and merge equal groups
by summing their counts.  A check costs about its base's rows: on wide data, where nearly every
record is a group of its own until the ZIP is generalized away, a direct specialization often
still holds every record while an older one holds a few thousand (bench/wide.py: 0.61 → 0.26 s
for k=5 without suppression).  The result is bit-identical to grouping the cells (the tests
compare both).  This is what makes a bottom-up sweep fast: every transformation after the
bottom is rolled up from the layer below.

A sensitive column (ℓ-diversity, t-closeness, …) has tables of its own, a row per (group,
value) with f_G(v) and the value's code below the fields, cached and rolled up the same way,
keyed by the same ranks.  They are built only when an attribute model asks, and it asks only
about groups k-anonymity kept in a transformation it has not already rejected (``_suppress``).

Roll-up needs the fields (and the code) to fit in ``evaluate.groups.KEY_BITS`` = 62 bits, the
package's one key limit (Adult's 9 QIs take 32 bits; the wide table's 8, 56 of ranks, 66 of ids); otherwise every
transformation is grouped from the cells by ``np.unique`` on rows, without the cache.  The
count rides beside the key in one int64 while both fit (then one sort orders both), else the
keys are argsorted (``GroupTables._merge``).

Ranks become group ids again wherever groups leave the tables (``GroupStats.ids`` and
``id_matrix``, one gather): the census people come from the group module
(``Problem.group_sizes``), which needs the groups sorted QI by QI by their ids — the order of
the keys — and the quality models sum per-level tables indexed by ids.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Iterator, Sequence, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..domains.recoding import QIRecoding, Recoding
from ..errors import DeidError, PolicyError, SpecError
from ..evaluate.attribute import ValueCounts
from ..loading.sensitive import SensitiveCells, sensitive_cells
from ..policies.levels import check_levels, levels_text, parse_levels, qi_levels
from .tables import GroupTables, LevelRanks, TableCache, Transformation, run_starts

if TYPE_CHECKING:
    from ..problem import Problem


class PrivacyModel(Protocol):
    """What the evaluator asks of a privacy model (``models.PrivacyModel`` and its kinds): its
    stage and predictive properties, the sensitive column it reads, and which groups to suppress.
    The models name the evaluator's types, so the evaluator names only this."""

    predictive: Set[str]
    sensitive: str | None
    stage: int

    def bind(self, evaluator: TransformEvaluator) -> None: ...

    def holds(self, stats: GroupStats) -> bool: ...

    def suppress(self, stats: GroupStats, mask: np.ndarray) -> np.ndarray: ...


class QualityModel(Protocol):
    """What the evaluator and the searches over it ask of a quality model (``models.QualityModel``
    and its kinds): its value with suppression, its bound without, and — where ``bound_from_levels``
    — the bound from the levels alone."""

    name: str
    bound_from_levels: bool

    def level_bound(self, levels: Transformation) -> float: ...

    def level_bounds(self) -> np.ndarray: ...

    def bind(self, evaluator: TransformEvaluator) -> None: ...

    def value(self, stats: GroupStats) -> float: ...

    def bound(self, stats: GroupStats) -> float: ...



class TransformationSpace:
    """The generalization lattice of full-domain transformations of a problem.

    ``heights[q]`` is the number of levels of QI q (``policies.levels.qi_levels``): its hierarchy's
    height; else the bands its cut rule allows, then ``*``; else 2 (kept, ``*``).  ``levels[q][l]`` is the
    ``QIRecoding`` of QI q at level l; ``group_of[q][l]`` its group id per domain
    position; ``lift(q, a, b)`` maps group ids of level a to those of level b ≥ a.
    """

    def __init__(self, problem: Problem) -> None:
        self.names: tuple[str, ...] = tuple(problem.spec.qi_names)
        self.domains = tuple(problem.domains)
        hierarchies = problem.lattice.hierarchies
        self.levels: list[list[QIRecoding]] = []
        for q, name, domain in zip(problem.spec.qis, self.names, self.domains):
            self.levels.append(qi_levels(domain, hierarchies.get(name), q.cuts))
        self.heights: tuple[int, ...] = tuple(len(lv) for lv in self.levels)
        self.group_of = [[r.group_of for r in lv] for lv in self.levels]
        self.n_groups = [[r.n_groups for r in lv] for lv in self.levels]
        self._lifts: dict[tuple[int, int, int], np.ndarray] = {}  # built on first use
        self._index = {n: i for i, n in enumerate(self.names)}

    def _make_lift(self, q: int, a: int, b: int) -> np.ndarray:
        ga, gb = self.group_of[q][a], self.group_of[q][b]
        lift = np.zeros(self.n_groups[q][a], dtype=np.int64)
        lift[ga] = gb
        if not np.array_equal(lift[ga], gb):  # the spec loader checks trees; be sure anyway
            raise SpecError(f"the hierarchy of QI {self.names[q]!r} is not a tree: a group at level {a} "
                            f"falls into several groups at level {b}")
        return lift

    def lift(self, q: int, a: int, b: int) -> np.ndarray:
        """Group id at level b of every group id at level a (a ≤ b) of QI q (built on first use: a
        search lifts between few of the pairs of levels, and a ZIP's lifts are 100,000 entries each)."""
        lift = self._lifts.get((q, a, b))
        if lift is None:
            if not 0 <= a <= b < self.heights[q]:
                raise PolicyError(f"QI {self.names[q]!r} has levels 0..{self.heights[q] - 1}; "
                                  f"no lift from level {a} to {b}")
            lift = self._lifts[q, a, b] = self._make_lift(q, a, b)
        return lift

    # -- the lattice --------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Number of transformations: Π heights."""
        return math.prod(self.heights)

    @property
    def bottom(self) -> Transformation:
        return (0,) * len(self.heights)

    @property
    def top(self) -> Transformation:
        return tuple(h - 1 for h in self.heights)

    def check(self, x: Sequence[int] | str) -> Transformation:
        """``x`` as a tuple of levels (a text is parsed); PolicyError when out of range."""
        if isinstance(x, str):
            return self.parse(x)
        return check_levels(x, self.names, self.heights)

    @staticmethod
    def rank(x: Sequence[int]) -> int:
        """Sum of the levels (the lattice is ranked by it)."""
        return int(sum(x))

    @staticmethod
    def leq(x: Sequence[int], y: Sequence[int]) -> bool:
        """x ≺ y or x = y: every level of x ≤ the same level of y."""
        return all(a <= b for a, b in zip(x, y))

    def generalizations(self, x: Sequence[int]) -> list[Transformation]:
        """Direct generalizations: one QI one level up, where possible."""
        x = tuple(x)
        return [x[:q] + (x[q] + 1,) + x[q + 1:] for q in range(len(x)) if x[q] + 1 < self.heights[q]]

    @staticmethod
    def specializations(x: Sequence[int]) -> list[Transformation]:
        """Direct specializations: one QI one level down, where possible."""
        x = tuple(x)
        return [x[:q] + (x[q] - 1,) + x[q + 1:] for q in range(len(x)) if x[q] > 0]

    def __iter__(self) -> Iterator[Transformation]:
        """Every transformation, in lexicographic order."""
        return itertools.product(*(range(h) for h in self.heights))

    def __len__(self) -> int:
        return self.size

    def __contains__(self, x: object) -> bool:
        try:
            self.check(x)  # type: ignore[arg-type]
        except (PolicyError, TypeError, ValueError):
            return False
        return True

    # -- text and recodings --------------------------------------------------------------
    def text(self, x: Sequence[int]) -> str:
        """``"sex:0|age:2|…"``."""
        return levels_text(x, self.names)

    def parse(self, text: str) -> Transformation:
        """Inverse of ``text``; QIs left out stay at level 0; ``top`` and ``bottom`` work."""
        return parse_levels(text, self.names, self.heights)

    def recoding(self, x: Sequence[int]) -> Recoding:
        """The ``Recoding`` of x (the core compiler and evaluators take it)."""
        x = self.check(x)
        return Recoding(tuple(self.levels[q][v] for q, v in enumerate(x)), self.text(x))


@dataclass(frozen=True)
class Outcome:
    """The result of applying one transformation.

    ``quality`` is the quality model's value with suppression (lower = better) and
    ``bound`` its value with generalization only, a lower bound of ``quality`` that
    never decreases along ≺ (seed 004, "Insufficient data quality").  ``holds`` tells
    whether the privacy model holds with no suppression at all.  When x is not ``accepted``,
    the models after the one whose suppression passed the limit were not asked, so
    ``suppressed``, ``groups_kept`` and ``quality`` count what was suppressed up to it (at least
    the limit's worth): a rejected x is never released, only compared by ``bound``.
    """

    levels: Transformation
    accepted: bool
    suppressed: int
    groups: int
    groups_kept: int
    quality: float
    bound: float
    holds: bool
    records: int

    @property
    def suppressed_share(self) -> float:
        return self.suppressed / self.records if self.records else 0.0


@dataclass
class GroupStats:
    """The equivalence classes of one transformation, as privacy and quality models see them.

    ``m[i]`` is group i's record count (persons with ``[person]``), ``keys[i]`` its bit-packed key
    (groups sorted by it).  ``suppressed`` is filled in by the evaluator before quality models run.
    With a sensitive column, ``value_counts`` gives f_G(v) of every group as
    ``evaluate.attribute.ValueCounts`` and ``distinct`` each group's number of values (the
    attribute models), both read from the sensitive cells' table, built on the first ask.
    """

    levels: Transformation
    keys: np.ndarray
    m: np.ndarray
    evaluator: TransformEvaluator = field(repr=False)
    suppressed: np.ndarray | None = None
    _ids: np.ndarray | None = field(default=None, repr=False)
    _census: np.ndarray | None = field(default=None, repr=False)
    _counts: dict[str, ValueCounts] = field(default_factory=dict, repr=False)

    def value_counts(self, column: str) -> ValueCounts:
        """f_G(v) per (group, value code) of sensitive ``column``, sorted by group then code; n_G = m."""
        counts = self._counts.get(column)
        if counts is None:
            group, codes, f = self.evaluator.value_rows(self, column)
            values = len(self.evaluator.value_cells[column].values)
            counts = self._counts[column] = ValueCounts(group, codes, f.astype(np.float64), self.m, values)
        return counts

    def distinct_of(self, column: str) -> np.ndarray:
        """Distinct values of sensitive ``column`` per group (distinct ℓ-diversity)."""
        return np.bincount(self.value_counts(column).group, minlength=self.m.size)

    @property
    def distinct(self) -> np.ndarray | None:
        """``distinct_of`` the one sensitive column the models read (None without one)."""
        cells = self.evaluator.sensitive
        return None if cells is None else self.distinct_of(cells.column)

    @property
    def records(self) -> int:
        return self.evaluator.records

    def ids(self, select: np.ndarray | None = None) -> list[np.ndarray]:
        """Group ids of every group (or the selected ones), one array per QI."""
        if self._ids is not None:
            return [row if select is None else row[select] for row in self._ids]
        keys = self.keys if select is None else self.keys[select]
        return self.evaluator.decode(keys, self.levels)

    def id_matrix(self, select: np.ndarray | None = None) -> np.ndarray:
        """Group ids of every group (or the selected ones) as one QI × group matrix (a new array)."""
        if self._ids is not None:
            return np.stack([row if select is None else row[select] for row in self._ids])
        keys = self.keys if select is None else self.keys[select]
        return self.evaluator.decode_matrix(keys, self.levels)

    def census(self, select: np.ndarray | None = None) -> np.ndarray:
        """g = max(population count, m) per group, or per selected group (= m without a population);
        every group's is kept, a selection's is computed alone (δ-presence judges only the groups
        k-anonymity kept)."""
        if self._census is None and select is not None:
            return self.evaluator.census(self, select)
        if self._census is None:
            self._census = self.evaluator.census(self)
        return self._census if select is None else self._census[select]


class TransformEvaluator:
    """Applies full-domain transformations with record suppression and caches group tables.

    ``privacy`` is one privacy model or several (a group is suppressed when it violates
    any group-level model; dataset-level models such as ``AverageRisk`` then suppress
    further groups).  ``quality`` is a quality model (lower = better).
    ``suppression_limit`` is the share of records that may be suppressed, in [0, 1].
    ``cache_rows`` bounds the rows kept in the group-table cache (LRU, 16 bytes a row: key
    and count; the default 8 M rows is 128 MB: Adult's 9-QI bottom-up sweep then rolls 86 %
    of the transformations up from a direct specialization, the rest from an older one);
    ``rollup=False``
    groups every transformation from the cells (for checking and timing).
    """

    def __init__(self, problem: Problem, privacy: PrivacyModel | Sequence[PrivacyModel],
                 quality: QualityModel, suppression_limit: float = 0.0, *,
                 space: TransformationSpace | None = None, rollup: bool = True,
                 cache_rows: int = 8_000_000) -> None:
        limit = suppression_limit
        if isinstance(limit, bool) or not isinstance(limit, int | float) or not 0.0 <= float(limit) <= 1.0:
            raise DeidError(f"suppression limit {limit!r} must be a share of records in [0, 1] (e.g. 0.05 for 5 %)")
        models = [privacy] if not isinstance(privacy, Sequence) else list(privacy)
        if not models:
            raise DeidError("give at least one privacy model (e.g. KAnonymity(5))")
        self.problem = problem
        self.space = space if space is not None else TransformationSpace(problem)
        # models are bound (and precompute) per evaluator: bind copies, so one instance can serve many
        self.models: list[PrivacyModel] = sorted((copy.copy(mdl) for mdl in models), key=lambda mdl: mdl.stage)
        self.quality = copy.copy(quality)
        self.suppression_limit = float(limit)
        self.records = int(problem.sample.total)
        self.max_suppressed = math.floor(round(self.suppression_limit * self.records, 9))
        self.n_qis = len(self.space.names)
        self.marginals = [problem.sample.marginal(q, d.size).astype(np.float64)
                          for q, d in enumerate(self.space.domains)]
        sample = problem.sample
        self.value_cells: dict[str, SensitiveCells] = {}
        for mdl in self.models:
            if mdl.sensitive is not None and mdl.sensitive not in self.value_cells:
                own = getattr(mdl, "value_cells", None)  # a model that counts its own values (earlier releases)
                self.value_cells[mdl.sensitive] = own(problem) if own is not None else sensitive_cells(
                    problem, mdl.sensitive)
        # the groups present in any cells, ranked per QI and level: the group keys' fields (tables.py)
        self.ranks = LevelRanks(self.space, [sample.positions] + [c.positions for c in self.value_cells.values()])
        # the groups (a count of records, or of persons with [person]) and, apart, per sensitive column
        # the groups × its values (f_G(v): a person may hold several values, or none), built when asked
        self._tables = GroupTables(self.space, self.ranks, sample.positions, None, sample.counts, 1, self.records,
                                   rollup=rollup, cache_rows=cache_rows)
        self._value_tables = {
            column: GroupTables(self.space, self.ranks, cells.positions, cells.codes, cells.counts,
                                len(cells.values), self.records, rollup=rollup, cache_rows=cache_rows)
            for column, cells in self.value_cells.items()}
        self.shifts, self.masks = self._tables.shifts, self._tables.masks  # the group keys' fields
        self._shift_column = np.asarray(self.shifts, dtype=np.int64)[:, None]
        self._mask_column = np.asarray(self.masks, dtype=np.int64)[:, None]
        self.fixed = self._tables.fixed

        for mdl in self.models:
            mdl.bind(self)
        self.quality.bind(self)
        self._outcomes: dict[Transformation, Outcome] = {}
        self.evaluations = 0  # distinct transformations evaluated

    # -- properties ---------------------------------------------------------------------
    @property
    def rollups(self) -> int:
        """Group tables grouped from a cached specialization (the groups' and the values')."""
        return self._tables.rollups + sum(tables.rollups for tables in self._value_tables.values())

    @property
    def rollup(self) -> bool:
        """Are tables rolled up from cached specializations (False: every one from the cells)?"""
        return self._tables.rollup

    @property
    def _cache(self) -> TableCache:
        return self._tables.cache

    @property
    def predictive(self) -> frozenset[str]:
        """Predictive properties of acceptance that hold for every model together:
        "up" = accepted(x) ⇒ accepted(y) for x ≺ y; "down" = not accepted(y) ⇒ not
        accepted(x) for x ≺ y (the same statement read the other way, so both or neither)."""
        props = frozenset({"up", "down"})
        for mdl in self.models:
            props &= frozenset(mdl.predictive)
        return props

    # -- applying -------------------------------------------------------------------------
    def apply(self, x: Sequence[int] | str) -> Outcome:
        """Generalize to x, suppress violating groups, judge and measure (cached)."""
        x = self.space.check(x)
        done = self._outcomes.get(x)
        if done is not None:
            return done
        stats = self._groups(x)
        mask, holds = self._suppress(stats, until_rejected=True)
        stats.suppressed = mask
        suppressed = int(stats.m[mask].sum())
        bound = float(self.quality.bound(stats))
        # nothing suppressed: the value is the bound (QualityModel's contract), computed once
        outcome = Outcome(
            levels=x, accepted=suppressed <= self.max_suppressed, suppressed=suppressed,
            groups=int(stats.m.size), groups_kept=int(stats.m.size - np.count_nonzero(mask)),
            quality=float(self.quality.value(stats)) if suppressed else bound, bound=bound,
            holds=bool(holds), records=self.records,
        )
        self._outcomes[x] = outcome
        self.evaluations += 1
        return outcome

    def suppress(self, stats: GroupStats) -> np.ndarray:
        """Per group: is it suppressed?  Every privacy model in stage order adds the groups it
        suppresses to those already suppressed (group-level models first, then dataset-level
        ones).  The one suppression rule: ``apply`` judges by it, the release writes it."""
        return self._suppress(stats)[0]

    def _suppress(self, stats: GroupStats, until_rejected: bool = False) -> tuple[np.ndarray, bool]:
        """``suppress``, and whether every model holds with no suppression.  A group-level model
        (stage 0) holds when it suppresses nothing, so they all hold when the mask after them is
        empty; each judges only the groups the ones before it left (k-anonymity's small groups are
        not judged again by an attribute model).  Dataset-level models are asked on their own.

        ``until_rejected``: stop asking models once more records are suppressed than the limit
        allows — a later model only suppresses more, so x is rejected whatever it says (ARX stops
        there too).  An attribute model's table is then never built for a transformation that
        k-anonymity alone rejects: most of a search's checks (bench/attribute.py)."""
        mask = np.zeros(stats.m.size, dtype=bool)
        groups_hold: bool | None = None
        for i, mdl in enumerate(self.models):  # sorted by stage
            if mdl.stage > 0 and groups_hold is None:
                groups_hold = not mask.any()
            mask = mdl.suppress(stats, mask)
            if until_rejected and i + 1 < len(self.models) and stats.m[mask].sum() > self.max_suppressed:
                return mask, False
        if groups_hold is None:
            groups_hold = not mask.any()
        return mask, groups_hold and all(mdl.holds(stats) for mdl in self.models if mdl.stage > 0)

    def groups(self, x: Sequence[int] | str) -> GroupStats:
        """The equivalence classes of x (before suppression)."""
        return self._groups(self.space.check(x))

    def _groups(self, x: Transformation) -> GroupStats:
        keys, counts, ids = self._tables.rows(x)
        return GroupStats(x, keys, counts.astype(np.float64), self, _ids=ids)

    @property
    def sensitive(self) -> SensitiveCells | None:
        """The sensitive column's cells when the models read exactly one (else None)."""
        return next(iter(self.value_cells.values())) if len(self.value_cells) == 1 else None

    def value_rows(self, stats: GroupStats, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The (group index, value code, f) rows of sensitive ``column`` in ``stats``' transformation,
        sorted by group then code: its cells' table, its group keys found among the groups' (every
        sensitive cell is in a QI cell, so every group it falls in is one of ``stats``')."""
        tables = self._value_tables[column]
        keys, counts, ids = tables.rows(stats.levels, stats.keys if self._tables.fixed else None)
        gk, codes = keys >> tables.sbits, keys & ((1 << tables.sbits) - 1)
        if tables.fixed and self._tables.fixed:
            return np.searchsorted(stats.keys, gk), codes, counts
        # keys past KEY_BITS are ranks: match the groups by their ids instead
        if ids is not None:  # the sensitive cells' groups are ranks too
            ranks, own = gk, ids
        else:
            starts = run_starts(gk)
            ranks = np.repeat(np.arange(starts.size), np.diff(np.append(starts, gk.size)))
            own = self.decode_matrix(gk[starts], stats.levels)
        every = stats.id_matrix()
        _, inverse = np.unique(np.concatenate([every.T, own.T]), axis=0, return_inverse=True)
        return inverse.ravel()[every.shape[1]:][ranks], codes, counts

    # -- what models read through GroupStats ---------------------------------------------------
    def decode(self, keys: np.ndarray, levels: Transformation) -> list[np.ndarray]:
        """Group ids per QI of bit-packed group keys of transformation ``levels``, one array per QI."""
        return list(self.decode_matrix(keys, levels))

    def decode_matrix(self, keys: np.ndarray, levels: Transformation) -> np.ndarray:
        """``decode`` as one QI × group matrix: the ranks in one shift and one mask, their ids in one
        gather (``LevelRanks.decode``)."""
        return self.ranks.decode((keys[None, :] >> self._shift_column) & self._mask_column, levels)

    def census(self, stats: GroupStats, select: np.ndarray | None = None) -> np.ndarray:
        """g = max(population count, m) of every group (or the selected ones), from the problem's
        census (= m without a population).  Groups are sorted by key, i.e. by their ids QI by QI,
        as ``Problem.group_sizes`` needs; a selection keeps that order."""
        m = stats.m if select is None else stats.m[select]
        if self.problem.population is None:
            return m
        return self.problem.group_sizes(self.space.recoding(stats.levels), stats.ids(select), m)
