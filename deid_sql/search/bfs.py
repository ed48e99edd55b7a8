"""Best-first branch and bound over full-domain transformations (seed 004, "Effective pruning…").

Bottom-up: evaluate the bottom; repeatedly take the queued transformation whose
generalization-only quality bound is best, and evaluate its direct generalizations that
are neither processed nor predicted.  A transformation whose bound is no better than the
best solution found so far is inserted into the "insufficient quality" store (P↑): it and
every generalization are excluded, because with full-domain generalization the bound only
worsens upwards and suppression only worsens a transformation's quality further.
Every transformation is thus either evaluated or proven no better than the optimum, so the
result is the global optimum; with a time limit it is the best found so far (anytime).

When acceptance is monotone (k-anonymity and ℓ-diversity, with or without suppression: a
rejected transformation's specializations are all rejected) and the quality bound needs no
grouping (loss, non-uniform entropy), two more things hold: a transformation predicted
rejected by the P↓ store is expanded without being checked, and a rejected one triggers a
probe — a bisection up a path to the top — whose highest rejected node feeds P↓ and whose
first accepted node is an early solution.  On Adult (9 QIs, k = 5) this cut the share of
checked transformations from 92 % to 2 % without suppression and from 18 % to 10 % with 4 %.

Without suppression the quality itself of every model (DM and KL included) is monotone: a
generalization only merges classes.  So a model whose bound needs the groups is bounded before
its check by the bound of the transformation it was reached from — a lower bound of that
specialization's quality, hence of x's — and prediction and probes apply to it too (issue 21:
DM checked 11,072 → 302 and KL 12,492 → 418 transformations of 12,960 on Adult, k = 5).  With
suppression quality is not monotone, and DM and KL are bounded after their check, as before.
(Taking the largest bound over all direct specializations reached so far is tighter, but on
Adult it delays transformations in the queue and checked more: 305 and 452.)

Speed (issue 21): a transformation is handled by its index in the lattice, which reads the
stores' materialized closures (``AntichainTree``) and, for loss and NUE, a table of the level
bound of every transformation (``QualityModel.level_bounds``) in one step each.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..fulldomain.transform import Outcome, TransformationSpace, TransformEvaluator
from ..progress import Counter
from .antichain import CLOSURE_LIMIT, AntichainTree, Direction, ListAntichainStore, ListStore, PropertyStore

Levels = tuple[int, ...]
Heights = tuple[int, ...]
StoreFactory = type[PropertyStore] | Callable[[Direction, Heights], PropertyStore]
STORES: dict[str, type[PropertyStore]] = {
    "tree": AntichainTree, "list": ListStore, "list-antichain": ListAntichainStore,
}


def make_store(store: StoreFactory, direction: Direction, heights: tuple[int, ...]) -> PropertyStore:
    """The prefix tree needs the hierarchy heights; the list variants only the direction."""
    if isinstance(store, type) and not issubclass(store, AntichainTree):
        return store(direction)  # type: ignore[call-arg]
    return store(direction, heights)  # type: ignore[call-arg]


@dataclass
class BFSResult:
    """The optimum (None when no transformation meets the privacy model within the limit)
    and the statistics of seed 004 Tables 2 and 4."""

    optimum: Outcome | None
    checked: int
    size: int
    seconds: float
    timed_out: bool
    stores: dict[str, PropertyStore] = field(default_factory=dict)
    pruned: int = 0  # transformations excluded by the quality bound without a check
    traversal: str = "best-first"  # which search found it (``search/paths.py``'s TRAVERSALS)

    @property
    def checked_share(self) -> float:
        return self.checked / self.size if self.size else 0.0


def best_first_search(space: TransformationSpace, evaluator: TransformEvaluator,
                      store: StoreFactory = AntichainTree, time_limit: float | None = None,
                      counter: Counter | None = None) -> BFSResult:
    """The globally optimal transformation (lowest quality value) and search statistics;
    ``counter`` is advanced per checked transformation (a progress line)."""
    return branch_and_bound(space, evaluator, inherits_bounds(evaluator), store, time_limit, counter)


def inherits_bounds(evaluator: TransformEvaluator) -> bool:
    """Whether a transformation is bounded before its check by the bound of the specialization it
    was reached from: only for a model whose bound needs the groups (DM, KL; a bound from the levels
    alone is exact before the check anyway) and only without suppression, where quality is monotone
    (see the module docstring); otherwise a model is bounded after its check."""
    return _level_bound(evaluator) is None and evaluator.max_suppressed == 0


def branch_and_bound(space: TransformationSpace, evaluator: TransformEvaluator, inherit: bool,
                     store: StoreFactory = AntichainTree, time_limit: float | None = None,
                     counter: Counter | None = None) -> BFSResult:
    """``best_first_search`` with the choice of ``inherits_bounds`` made by the caller.  ``inherit``
    may be True only where ``inherits_bounds`` is (an inherited bound is unsound with suppression);
    False throughout is the search before inherited bounds (the tests' and benchmark's baseline,
    ``tests/baselines/fulldomain.py``)."""
    start = time.perf_counter()
    heights = tuple(space.heights)
    quality = make_store(store, Direction.UP, heights)  # insufficient data quality, inherited by generalizations
    protection = make_store(store, Direction.DOWN, heights)  # insufficient protection, inherited by specializations
    quality_at, protection_at = quality.query_at, protection.query_at
    best: Outcome | None = None
    checked = pruned = 0
    # a transformation is known by its mixed-radix index (the first attribute most significant, so
    # index order is tuple order and the queue breaks ties as before): an int hashes faster than a
    # tuple, the stores' closures are read by it, and a processed transformation's tuple is never built
    attributes = range(len(heights))
    strides = [math.prod(heights[q + 1:]) for q in attributes]
    processed: set[int] = set()
    queue: list[tuple[float, int, int, Levels]] = []
    timed_out = False

    level_bound = _level_bound(evaluator)
    # the level bound of every transformation at once where the lattice is small enough to list
    table = (evaluator.quality.level_bounds().tolist()
             if level_bound is not None and space.size <= CLOSURE_LIMIT else None)
    monotone = {"up", "down"} <= evaluator.predictive
    predict = monotone and (level_bound is not None or inherit)

    def check(x: Levels) -> Outcome:
        nonlocal best, checked
        out = evaluator.apply(x)
        checked += 1
        if counter is not None:
            counter.advance()
        if out.accepted and (best is None or out.quality < best.quality):
            best = out
        if not out.accepted:
            protection.insert(x)  # no specialization can meet the privacy model either
        return out

    def probe(x: Levels) -> None:
        """From a rejected x, bisect a path to the top for the first accepted transformation:
        the highest rejected one found predicts every transformation below it (P↓), and the
        accepted one is an early solution that tightens the bound (Flash-style)."""
        path = [x]
        while path[-1] != space.top:  # raise the attributes in turn, so the path crosses the lattice
            ups = space.generalizations(path[-1])
            path.append(ups[len(path) % len(ups)])
        lo, hi = 0, len(path) - 1  # path[lo] rejected; path[hi] unknown (top is usually accepted)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if protection.query(path[mid]) or not check(path[mid]).accepted:
                lo = mid
            else:
                hi = mid

    push = heapq.heappush

    def visit(x: Levels, inherited: float | None, rank: int, index: int) -> None:
        """``inherited``: the bound of the specialization x was reached from (None at the bottom);
        ``rank``: sum(x), and ``index``, x's index: the queue's tie-breaks."""
        nonlocal pruned
        if table is not None:
            bound = table[index]
        elif level_bound is not None:
            bound = level_bound(x)
        else:
            bound = inherited if inherit else None
        if bound is not None and best is not None and bound >= best.quality:
            quality.insert(x)  # a lower bound of x's quality: excluded without checking x
            pruned += 1
            return
        if bound is not None and predict and protection_at(index, x):
            push(queue, (bound, rank, index, x))  # predicted rejected: expand, no check
            return
        out = check(x)
        if predict and not out.accepted:
            probe(x)
        if best is not None and out.bound >= best.quality:
            quality.insert(x)  # no generalization can beat the optimum found so far
            return
        push(queue, (out.bound, rank, index, x))

    processed.add(0)
    visit(space.bottom, None, 0, 0)
    pop, tops = heapq.heappop, space.top
    while queue:
        if time_limit is not None and time.perf_counter() - start > time_limit:
            timed_out = True
            break
        bound, rank, index, x = pop(queue)
        if best is not None and bound >= best.quality:
            if not quality.query(x):
                quality.insert(x)
            continue
        for q in attributes:  # the direct generalizations, in space.generalizations' order
            v = x[q]
            if v == tops[q]:
                continue
            j = index + strides[q]
            if j in processed:
                continue
            processed.add(j)
            y = x[:q] + (v + 1,) + x[q + 1:]
            if quality_at(j, y):
                pruned += 1
                continue
            visit(y, bound, rank + 1, j)
    return BFSResult(best, checked, space.size, time.perf_counter() - start, timed_out,
                     {"insufficient quality ↑": quality, "insufficient protection ↓": protection}, pruned)


def _level_bound(evaluator: TransformEvaluator) -> Callable[[Levels], float] | None:
    """Loss-type bounds that depend on the levels alone (per-QI sums over marginals) can be
    computed before a transformation is checked; models whose bound needs the groups
    (discernibility, KL) return None and are bounded after the check."""
    model = evaluator.quality
    if not model.bound_from_levels:
        return None
    return model.level_bound
