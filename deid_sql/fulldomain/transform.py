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
rows (``cache_rows``): one sorted int64 array with a row per distinct group (with an
ℓ-diversity model: per distinct (group, sensitive value) pair).  A row packs, from the
high bits down, the group id of every QI in a *fixed* bit field (wide enough for the
QI's largest number of groups, so a field means the same at every level), the
sensitive code, and the record count; sorting rows sorts groups, and a field is read
with a shift and a mask.  Hierarchies are trees, so every group at level a lies in
exactly one group at level b > a (``TransformationSpace.lift``).

To evaluate x, the cached *direct* specialization y of x (one QI one level lower) with
the fewest rows is looked up; when none is cached, any cached y ≺ x (a vectorized
scan of the cached levels), and only then the cells.  From y: read the fields of the
QIs where x is higher, lift them, add the difference back (a few vector operations
over y's rows), sort, and merge equal groups by summing their counts.  y's rows are
usually far fewer than the cells, and the result is bit-identical to grouping the
cells (the tests compare both).  This is what makes a bottom-up sweep fast: every
transformation after the bottom is rolled up from the layer below.

Roll-up needs the fields and the count to fit in ``evaluate.groups.KEY_BITS`` = 62 bits, the
package's one key limit (Adult's 9 QIs take 32 + 15 for counts up to 30,162); otherwise every
transformation is grouped from the cells by ``np.unique`` on rows, without the cache.

Census people come from the group module too (``Problem.group_sizes``): the groups' ids are
decoded from their keys, sorted QI by QI, which is the order its mixed-radix keys sort in.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections import OrderedDict
from collections.abc import Iterator, Sequence, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..domains.recoding import QIRecoding, Recoding
from ..errors import DeidError, PolicyError, SpecError
from ..evaluate.attribute import ValueCounts
from ..evaluate.groups import KEY_BITS
from ..loading.sensitive import sensitive_cells
from ..policies.levels import check_levels, levels_text, parse_levels, qi_levels

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

Transformation = tuple[int, ...]
_LEVEL_BUDGET = 1 << 23  # cells × levels of precomputed group ids kept at most (64 MB)
_DENSE_PER_CELL = 8  # a table is grouped by a dense index when its possible groups are at most 8 per cell


class TransformationSpace:
    """The generalization lattice of full-domain transformations of a problem.

    ``heights[q]`` is the number of levels of QI q: its hierarchy's height, or 2
    (kept, ``*``) for a QI without a hierarchy.  ``levels[q][l]`` is the
    ``QIRecoding`` of QI q at level l; ``group_of[q][l]`` its group id per domain
    position; ``lift(q, a, b)`` maps group ids of level a to those of level b ≥ a.
    """

    def __init__(self, problem: Problem) -> None:
        self.names: tuple[str, ...] = tuple(problem.spec.qi_names)
        self.domains = tuple(problem.domains)
        hierarchies = problem.lattice.hierarchies
        self.levels: list[list[QIRecoding]] = []
        for name, domain in zip(self.names, self.domains):
            self.levels.append(qi_levels(domain, hierarchies.get(name)))
        self.heights: tuple[int, ...] = tuple(len(lv) for lv in self.levels)
        self.group_of = [[r.group_of for r in lv] for lv in self.levels]
        self.n_groups = [[r.n_groups for r in lv] for lv in self.levels]
        self._lifts: dict[tuple[int, int, int], np.ndarray] = {}
        for q in range(len(self.names)):
            for a in range(self.heights[q]):
                for b in range(a, self.heights[q]):
                    self._lifts[q, a, b] = self._make_lift(q, a, b)
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
        """Group id at level b of every group id at level a (a ≤ b) of QI q."""
        return self._lifts[q, a, b]

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
    whether the privacy model holds with no suppression at all.
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

    ``m[i]`` is group i's record count, ``distinct[i]`` its number of distinct sensitive
    values (ℓ-diversity only), ``keys[i]`` its bit-packed key (groups sorted by it).
    ``suppressed`` is filled in by the evaluator before quality models run.  With a sensitive
    column, ``value_counts`` gives f_G(v) of every group as ``evaluate.attribute.ValueCounts``
    (the attribute models of ``fulldomain/attribute.py``), read from the group table's rows.
    """

    levels: Transformation
    keys: np.ndarray
    m: np.ndarray
    distinct: np.ndarray | None
    evaluator: TransformEvaluator = field(repr=False)
    suppressed: np.ndarray | None = None
    _ids: np.ndarray | None = field(default=None, repr=False)
    _census: np.ndarray | None = field(default=None, repr=False)
    _values: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)  # per row: code, count
    _counts: ValueCounts | None = field(default=None, repr=False)

    def value_counts(self) -> ValueCounts:
        """f_G(v) per (group, sensitive value code) of the rows, sorted by group then code, as
        the table holds them; n_G = m (one value per record, as ARX)."""
        if self._counts is None:
            assert self._values is not None and self.distinct is not None, "no sensitive column"
            codes, counts = self._values
            group = np.repeat(np.arange(self.m.size, dtype=np.int64), self.distinct)
            self._counts = ValueCounts(group, codes, counts.astype(np.float64), self.m,
                                       self.evaluator.n_values)
        return self._counts

    @property
    def records(self) -> int:
        return self.evaluator.records

    def ids(self, select: np.ndarray | None = None) -> list[np.ndarray]:
        """Group ids of every group (or the selected ones), one array per QI."""
        if self._ids is not None:
            return [row if select is None else row[select] for row in self._ids]
        keys = self.keys if select is None else self.keys[select]
        return self.evaluator.decode(keys)

    def id_matrix(self, select: np.ndarray | None = None) -> np.ndarray:
        """Group ids of every group (or the selected ones) as one QI × group matrix (a new array)."""
        if self._ids is not None:
            return np.stack([row if select is None else row[select] for row in self._ids])
        keys = self.keys if select is None else self.keys[select]
        return self.evaluator.decode_matrix(keys)

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
    ``cache_rows`` bounds the rows kept in the group-table cache (LRU, 8 bytes a row; the
    default 8 M rows is 64 MB: Adult's 9-QI bottom-up sweep then rolls 86 % of the
    transformations up from a direct specialization, the rest from an older one);
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
        self.rollup = rollup

        columns = {mdl.sensitive for mdl in self.models if mdl.sensitive is not None}
        if len(columns) > 1:
            raise DeidError(f"the privacy models name several sensitive columns ({', '.join(sorted(columns))}); "
                            f"one sensitive column per evaluator is supported")
        self.sensitive = None
        self._persons_code: int | None = None  # the code whose rows carry each group's persons
        if columns:
            self.sensitive = sensitive_cells(problem, columns.pop())
            positions, counts = self.sensitive.positions, self.sensitive.counts
            codes = self.sensitive.codes.astype(np.int64)
            self.n_values = len(self.sensitive.values)
            if self.sensitive.per_person:
                # a person may hold several values (or none): Σ f is not m, so each cell's persons ride
                # on one of its rows as a second count above f, and roll up with it
                self._persons_code = self.n_values
                self._fbits = max(1, self.records.bit_length())
                positions, codes, counts = _persons_on_rows(positions, codes, counts, problem.sample.positions,
                                                            problem.sample.counts, self._persons_code, self._fbits)
        else:
            positions, counts = problem.sample.positions, problem.sample.counts
            codes = None
            self.n_values = 1
        self._span = self.n_values + (self._persons_code is not None)  # codes a table row may hold
        self._pos = [np.ascontiguousarray(positions[:, q], dtype=np.int64) for q in range(self.n_qis)]
        self._codes = codes
        self._counts = counts.astype(np.int64)

        # a table row packs, high to low: the QIs' group ids, the sensitive code, the count
        widths = [(max(n) - 1).bit_length() for n in self.space.n_groups]
        self.sbits = (self._span - 1).bit_length()
        self.cbits = max(1, self.records.bit_length())  # a count never exceeds N < 2^cbits
        if self._persons_code is not None:
            self.cbits *= 2  # persons << fbits | f: both sums stay below N, so one sum adds both
        self.shifts = [sum(widths[q + 1:]) for q in range(self.n_qis)]  # within a group key
        self.masks = [(1 << w) - 1 for w in widths]
        self._shift_column = np.asarray(self.shifts, dtype=np.int64)[:, None]
        self._mask_column = np.asarray(self.masks, dtype=np.int64)[:, None]
        self._qshift = [s + self.sbits + self.cbits for s in self.shifts]  # within a row
        self.fixed = sum(widths) + self.sbits + self.cbits <= KEY_BITS
        self.rollup = rollup and self.fixed
        if self.fixed:
            low = self._counts if codes is None else (codes << self.cbits) | self._counts
            self._low = np.ascontiguousarray(low, dtype=np.int64)
        self._level_rows: dict[tuple[int, int], np.ndarray] = {}
        self._level_budget = _LEVEL_BUDGET
        self._weights = self._counts.astype(np.float64)  # bincount sums float64: exact below 2^53
        self._dense_limit = _DENSE_PER_CELL * max(1, self._counts.size)

        for mdl in self.models:
            mdl.bind(self)
        self.quality.bind(self)
        self._cache = _TableCache(self.n_qis, int(cache_rows))
        self._outcomes: dict[Transformation, Outcome] = {}
        self.evaluations = 0  # distinct transformations evaluated
        self.rollups = 0  # of which grouped from a cached specialization

    # -- properties ---------------------------------------------------------------------
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
        mask, holds = self._suppress(stats)
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

    def _suppress(self, stats: GroupStats) -> tuple[np.ndarray, bool]:
        """``suppress``, and whether every model holds with no suppression.  A group-level model
        (stage 0) holds when it suppresses nothing, so they all hold when the mask after them is
        empty; each judges only the groups the ones before it left (k-anonymity's small groups are
        not judged again by an attribute model).  Dataset-level models are asked on their own."""
        mask = np.zeros(stats.m.size, dtype=bool)
        groups_hold: bool | None = None
        for mdl in self.models:  # sorted by stage
            if mdl.stage > 0 and groups_hold is None:
                groups_hold = not mask.any()
            mask = mdl.suppress(stats, mask)
        if groups_hold is None:
            groups_hold = not mask.any()
        return mask, groups_hold and all(mdl.holds(stats) for mdl in self.models if mdl.stage > 0)

    def groups(self, x: Sequence[int] | str) -> GroupStats:
        """The equivalence classes of x (before suppression)."""
        return self._groups(self.space.check(x))

    def _groups(self, x: Transformation) -> GroupStats:
        if self.fixed:
            table = self._table(x)
            keys, counts = table >> self.cbits, table & ((1 << self.cbits) - 1)
            ids = None
        else:
            keys, counts, ids = self._rows_unique(x)
        if self._codes is None:
            return GroupStats(x, keys, counts.astype(np.float64), None, self, _ids=ids)
        gk = keys >> self.sbits
        starts = _run_starts(gk)
        distinct = np.diff(np.append(starts, gk.size))
        codes = keys & ((1 << self.sbits) - 1)
        if self._persons_code is not None:  # the persons ride above f on the rows (_persons_on_rows)
            f, persons = counts & ((1 << self._fbits) - 1), counts >> self._fbits
            m = np.add.reduceat(persons, starts) if starts.size else persons[:0]
            values = codes != self._persons_code
            if not values.all():  # a group's persons-only row (its persons hold no value) is no value
                distinct = np.add.reduceat(values.astype(np.int64), starts) if starts.size else distinct
            return GroupStats(x, gk[starts], m.astype(np.float64), distinct, self, _ids=ids,
                              _values=(codes[values], f[values]))
        m = np.add.reduceat(counts, starts) if starts.size else counts[:0]
        return GroupStats(x, gk[starts], m.astype(np.float64), distinct, self, _ids=ids, _values=(codes, counts))

    # -- group tables ---------------------------------------------------------------------
    def _table(self, x: Transformation) -> np.ndarray:
        """x's table: sorted distinct rows ``group key << (sbits + cbits) | code << cbits | count``."""
        table = self._cache.get(x)
        if table is not None:
            return table
        base = self._cache.specialization(x, self.space.specializations(x)) if self.rollup else None
        if base is None:
            table = self._from_cells(x)
        else:
            table = self._roll_up(base, self._cache.get(base), x)  # type: ignore[arg-type]
            self.rollups += 1
        self._cache.put(x, table)
        return table

    def _level(self, q: int, level: int) -> np.ndarray:
        """Every cell's group id at ``level`` of QI q (kept while the cells × levels budget lasts,
        else recomputed)."""
        ids = self._level_rows.get((q, level))
        if ids is None:
            ids = self.space.group_of[q][level][self._pos[q]].astype(np.int64, copy=False)
            if self._level_budget >= ids.size:
                self._level_budget -= ids.size
                self._level_rows[q, level] = ids
        return ids

    def _from_cells(self, x: Transformation) -> np.ndarray:
        """x's table grouped from the cells.  When x's possible groups (the product of the QIs'
        group counts at x's levels, times the sensitive values) are few against the cells, each
        cell gets its group's mixed-radix index and one ``bincount`` sums the counts: no sort, and
        the indexes come out in the table's order.  The path search (``search/paths.py``) checks
        transformations whose specializations were never grouped, so about half its checks start
        here; on Adult the dense index took a third of the sort's time (issue 32)."""
        radix = [self.space.n_groups[q][x[q]] for q in range(self.n_qis)]
        size = math.prod(radix) * self._span
        if size <= self._dense_limit:
            index = self._level(0, x[0]).copy()
            for q in range(1, self.n_qis):
                index *= radix[q]
                index += self._level(q, x[q])
            if self._codes is not None:
                index *= self._span
                index += self._codes
            sums = np.bincount(index, weights=self._weights, minlength=size)
            found = np.flatnonzero(sums > 0)  # a boolean's nonzero: several times a float's speed
            rows = sums[found].astype(np.int64)
            digits = np.unravel_index(found, radix + [self._span] if self._codes is not None else radix)
            if self._codes is not None:
                rows |= digits[-1] << self.cbits
            for q in range(self.n_qis):
                rows |= digits[q] << self._qshift[q]
            return rows
        rows = self._low.copy()
        for q in range(self.n_qis):
            rows |= self._level(q, x[q]) << self._qshift[q]
        return self._merge(np.sort(rows))

    def _roll_up(self, y: Transformation, table: np.ndarray, x: Transformation) -> np.ndarray:
        rows = table.copy()
        lifted = [q for q in range(self.n_qis) if x[q] != y[q]]
        for q in lifted:
            digit = (table >> self._qshift[q]) & self.masks[q]
            rows += (self.space.lift(q, y[q], x[q])[digit] - digit) << self._qshift[q]
        return self._merge(np.sort(rows))  # numpy's default sort beat timsort on these runs

    def _merge(self, rows: np.ndarray) -> np.ndarray:
        """Sorted rows -> one row per distinct key with the summed count."""
        keys = rows >> self.cbits
        starts = _run_starts(keys)
        if starts.size == rows.size:
            return rows
        counts = np.add.reduceat(rows & ((1 << self.cbits) - 1), starts)
        return (keys[starts] << self.cbits) | counts

    def _rows_unique(self, x: Transformation) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fallback when fixed keys would overflow int64 (no roll-up): the distinct rows of
        (group ids…, sensitive code) by ``np.unique``, keyed by their rank; also returns the
        group ids per QI of each group."""
        cols = [self.space.group_of[q][x[q]][self._pos[q]] for q in range(self.n_qis)]
        if self._codes is not None:
            cols.append(self._codes)
        matrix, inv = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
        counts = np.bincount(inv.ravel(), weights=self._counts, minlength=matrix.shape[0]).astype(np.int64)
        if self._codes is None:
            return np.arange(matrix.shape[0], dtype=np.int64), counts, np.ascontiguousarray(matrix.T)
        new_group = np.concatenate(([True], np.any(matrix[1:, :-1] != matrix[:-1, :-1], axis=1)))
        group = np.cumsum(new_group) - 1
        return (group << self.sbits) | matrix[:, -1], counts, np.ascontiguousarray(matrix[new_group, :-1].T)

    # -- what models read through GroupStats ---------------------------------------------------
    def decode(self, keys: np.ndarray) -> list[np.ndarray]:
        """Group ids per QI of bit-packed group keys, one array per QI."""
        return [(keys >> self.shifts[q]) & self.masks[q] for q in range(self.n_qis)]

    def decode_matrix(self, keys: np.ndarray) -> np.ndarray:
        """``decode`` as one QI × group matrix, in one shift and one mask."""
        return (keys[None, :] >> self._shift_column) & self._mask_column

    def census(self, stats: GroupStats, select: np.ndarray | None = None) -> np.ndarray:
        """g = max(population count, m) of every group (or the selected ones), from the problem's
        census (= m without a population).  Groups are sorted by key, i.e. by their ids QI by QI,
        as ``Problem.group_sizes`` needs; a selection keeps that order."""
        m = stats.m if select is None else stats.m[select]
        if self.problem.population is None:
            return m
        return self.problem.group_sizes(self.space.recoding(stats.levels), stats.ids(select), m)


def _persons_on_rows(positions: np.ndarray, codes: np.ndarray, counts: np.ndarray, cell_positions: np.ndarray,
                     cell_persons: np.ndarray, persons_code: int, fbits: int) -> tuple[np.ndarray, ...]:
    """The sensitive cells' rows with every QI cell's persons added to one of them, packed as
    ``persons << fbits | f``; a cell whose persons hold no value gets a row of its own under
    ``persons_code`` (f = 0).  Summing a group's rows then gives both f_G(v) per value and n_G, on
    about as many rows as the sensitive cells: a row per cell for the persons alone nearly doubled
    the tables the search sorts (bench/attribute.py, the EHR demo)."""
    n = len(codes)
    pos = np.concatenate([positions, cell_positions.astype(positions.dtype)])
    code = np.concatenate([codes.astype(np.int64), np.full(len(cell_persons), persons_code, dtype=np.int64)])
    f = np.concatenate([counts.astype(np.int64), np.zeros(len(cell_persons), dtype=np.int64)])
    persons = np.concatenate([np.zeros(n, dtype=np.int64), cell_persons.astype(np.int64)])
    order = np.lexsort((code,) + tuple(pos.T[::-1]))
    pos, code, f, persons = pos[order], code[order], f[order], persons[order]
    first = np.ones(len(code), dtype=bool)  # a cell's first row (its rows are contiguous, persons last)
    if len(code) > 1:
        first[1:] = np.any(pos[1:] != pos[:-1], axis=1)
    moved = np.flatnonzero((code == persons_code) & ~first)  # a cell's persons after its last value row
    persons[moved - 1] += persons[moved]
    keep = np.ones(len(code), dtype=bool)
    keep[moved] = False
    return pos[keep], code[keep], (persons[keep] << fbits) | f[keep]


def _run_starts(sorted_keys: np.ndarray) -> np.ndarray:
    if sorted_keys.size == 0:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate(([0], np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1))


class _TableCache:
    """LRU cache of group tables, bounded by their total rows.

    A matrix of the cached transformations' levels finds a cached specialization of x
    when no direct one is cached: rows ≤ x on every QI, the one with the fewest rows."""

    _FREE = np.iinfo(np.int16).max  # a free slot's levels: never ≤ a transformation

    def __init__(self, n_qis: int, max_rows: int) -> None:
        self.n_qis = n_qis
        self.max_rows = max_rows
        self.clear()

    def clear(self) -> None:
        self.tables: OrderedDict[Transformation, np.ndarray] = OrderedDict()
        self.slots: dict[Transformation, int] = {}
        self.levels = np.full((64, self.n_qis), self._FREE, dtype=np.int16)
        self.sizes = np.zeros(64, dtype=np.int64)
        self.owners: list[Transformation | None] = [None] * 64
        self.free = list(range(63, -1, -1))
        self.rows = 0

    def __len__(self) -> int:
        return len(self.tables)

    def get(self, x: Transformation) -> np.ndarray | None:
        table = self.tables.get(x)
        if table is not None:
            self.tables.move_to_end(x)
        return table

    def put(self, x: Transformation, table: np.ndarray) -> None:
        if x in self.tables:
            return
        if not self.free:
            grow = self.levels.shape[0]
            self.levels = np.vstack([self.levels, np.full((grow, self.n_qis), self._FREE, dtype=np.int16)])
            self.sizes = np.concatenate([self.sizes, np.zeros(grow, dtype=np.int64)])
            self.owners.extend([None] * grow)
            self.free = list(range(2 * grow - 1, grow - 1, -1))
        slot = self.free.pop()
        self.tables[x] = table
        self.slots[x] = slot
        self.levels[slot] = x
        self.sizes[slot] = table.size
        self.owners[slot] = x
        self.rows += table.size
        while self.rows > self.max_rows and len(self.tables) > 1:
            old, dropped = self.tables.popitem(last=False)
            self.rows -= dropped.size
            slot = self.slots.pop(old)
            self.levels[slot] = self._FREE
            self.owners[slot] = None
            self.free.append(slot)

    def specialization(self, x: Transformation, direct: list[Transformation]) -> Transformation | None:
        """The cached specialization of x with the fewest rows: a direct one if any is
        cached, else any cached y ≺ x."""
        best, rows = None, 0
        for y in direct:
            table = self.tables.get(y)
            if table is not None and (best is None or table.size < rows):
                best, rows = y, table.size
        if best is not None or not self.tables:
            return best
        below = (self.levels <= np.asarray(x, dtype=np.int16)).all(axis=1)
        if not below.any():
            return None
        slot = int(np.argmin(np.where(below, self.sizes, np.iinfo(np.int64).max)))
        return self.owners[slot]
