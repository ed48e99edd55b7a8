"""Bound-ordered search with path bisection over full-domain transformations (issue 32).

Why a second traversal.  The best-first branch and bound (``search/bfs.py``) walks up from the
bottom and checks every transformation it reaches that is neither predicted rejected nor excluded
by its quality bound.  On Adult most of the lattice is rejected (k = 5 without suppression: 87 of
12,960 transformations are accepted), and the bottom-up walk learns that a region is rejected by
checking its transformations one layer at a time, so it checked more than ARX's Flash (240 against
181; 93 against 63 with k = 100).  What has to be learned is smaller than that: the optimum is
proven once every transformation is either checked, *known rejected* (a specialization of a checked
rejected one: acceptance is monotone), or *excluded* by a lower bound of its quality that is no
better than the best solution found.  On Adult 21 rejected transformations, well chosen, cover
every rejected one whose Loss bound beats the optimum without suppression; with 4 % suppression
90 cover them and only 11 accepted transformations have a bound below the optimum.

So this traversal asks, for each candidate, the one question that matters, in the order that
makes it matter least often:

1. **Candidates in a fixed order.**  A model whose bound comes from the levels alone (Loss, NUE)
   gives the exact bound of every transformation before any check (``QualityModel.level_bounds``);
   candidates are taken by that bound, ascending, and the first whose bound is no better than the
   best solution ends the search: nothing after it can win.  A model whose bound needs the groups
   (DM, KL) is bounded by the largest bound of the checked specializations of a transformation
   (the bound never decreases along the lattice and never exceeds the value, with or without
   suppression); candidates are taken bottom up by rank, so a transformation's specializations are
   settled before it, and within a rank by Loss's level bound, a guide to where small bounds lie.
2. **Known rejected** candidates are skipped: the prefix tree of rejected transformations (P↓)
   answers by its closure.  A candidate known accepted (a generalization of a checked accepted
   one) is checked for its value; without suppression that never happens, since its value is no
   better than that specialization's and its bound excludes it.
3. **An unknown candidate is settled by a bisection along a path** from it to the top (Flash,
   Kohlmayer et al. 2012, the traversal behind ARX).  The path raises at each step the attribute
   whose generalization has the smallest bound (or guide), so it stays among the candidates; along
   it acceptance switches once, from rejected to accepted, and a binary search finds the switch.
   The highest rejected node found covers the candidate and every transformation below it, the
   lowest accepted one is a solution.  The search starts at the rank where the previous path
   switched and gallops from there, since the switch lies at similar ranks across the lattice: on
   Adult a bisection then takes 1.5 checks instead of 4.

On Adult (``bench/anonymize.py``) this checks 67, 232, 45, 818 (Loss k = 5, Loss k = 5 with 4 %,
Loss k = 100, NUE k = 5 with 4 %) and about 145 transformations with DM and KL, against ARX's 181,
1,466, 63, 2,766 and 181.  Without monotone acceptance (average risk over a census) nothing is
predicted and every candidate is checked, in the same order.  The traversal lists the lattice
(its order, the closures), so past ``CLOSURE_LIMIT`` transformations the best-first search runs
instead.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from ..fulldomain.models import Loss
from ..fulldomain.transform import Outcome, TransformationSpace, TransformEvaluator
from ..progress import Counter
from .antichain import CLOSURE_LIMIT, AntichainTree, Direction
from .bfs import BFSResult, StoreFactory, best_first_search, make_store

Levels = tuple[int, ...]
_CHUNK = 4096  # candidates decoded to levels at once


def path_search(space: TransformationSpace, evaluator: TransformEvaluator, store: StoreFactory = AntichainTree,
                time_limit: float | None = None, counter: Counter | None = None) -> BFSResult:
    """The globally optimal transformation (lowest quality value) and search statistics, by
    candidates in bound order settled by bisections along paths; ``counter`` is advanced per
    checked transformation.  Past ``CLOSURE_LIMIT`` transformations: ``best_first_search``."""
    if space.size > CLOSURE_LIMIT:
        return best_first_search(space, evaluator, store, time_limit, counter)
    return _PathSearch(space, evaluator, store, counter).run(time_limit)


class _PathSearch:
    """One search's state: the stores of known rejected (↓) and accepted (↑) transformations, the
    checked ones, the bounds and the best solution."""

    def __init__(self, space: TransformationSpace, evaluator: TransformEvaluator, store: StoreFactory,
                 counter: Counter | None) -> None:
        self.space, self.evaluator, self.counter = space, evaluator, counter
        self.heights = heights = tuple(space.heights)
        self.n = len(heights)
        self.strides = [math.prod(heights[q + 1:]) for q in range(self.n)]
        self.rejected = make_store(store, Direction.DOWN, heights)  # insufficient protection, ↓
        self.accepted = make_store(store, Direction.UP, heights)  # sufficient protection, ↑
        self.monotone = {"up", "down"} <= evaluator.predictive
        self.exact = evaluator.quality.bound_from_levels
        if self.exact:
            # the exact bound of every transformation, known before any check
            self.bounds = np.asarray(evaluator.quality.level_bounds(), dtype=np.float64)
            key = self.bounds
            self.order = np.argsort(key, kind="stable")
        else:
            # the largest bound of a checked specialization, raised box by box after each check
            self.bounds = np.full(space.size, -np.inf)
            key = guide_bounds(evaluator)
            rank = _outer_sums([np.arange(h, dtype=np.float64) for h in heights])
            self.order = np.lexsort((key, rank))
        self.key = key.tolist()
        self.done = bytearray(space.size)  # checked
        self.best: Outcome | None = None
        self.checked = 0
        self.crossing: int | None = None  # the rank where the last path switched to accepted
        self._step: dict[int, int] = {}  # per index, the attribute its path raises next

    # -- checks -------------------------------------------------------------------------------
    def check(self, i: int, x: Levels) -> bool:
        """Apply x: record its verdict in the stores, its bound for its generalizations, and a
        better solution."""
        out = self.evaluator.apply(x)
        self.checked += 1
        self.done[i] = 1
        if self.counter is not None:
            self.counter.advance()
        if out.accepted and (self.best is None or out.quality < self.best.quality):
            self.best = out
        if self.monotone and out.accepted:
            self.accepted.insert(x)  # every generalization is accepted too
        elif self.monotone:
            self.rejected.insert(x)  # no specialization can meet the privacy model either
        if not self.exact:
            box = self.bounds.reshape(self.heights)[tuple(slice(v, None) for v in x)]
            np.maximum(box, out.bound, out=box)
        return out.accepted

    # -- paths ----------------------------------------------------------------------------------
    def path(self, i: int, x: Levels) -> list[tuple[int, Levels]]:
        """From x to the top, raising at each step the attribute whose generalization has the
        smallest key (the first such attribute on ties)."""
        nodes = [(i, x)]
        step, key, strides, heights = self._step, self.key, self.strides, self.heights
        while True:
            q = step.get(i)
            if q is None:
                q, low = -1, math.inf
                for a in range(self.n):
                    if x[a] + 1 < heights[a] and key[i + strides[a]] < low:
                        q, low = a, key[i + strides[a]]
                step[i] = q
            if q < 0:
                return nodes
            i, x = i + strides[q], x[:q] + (x[q] + 1,) + x[q + 1:]
            nodes.append((i, x))

    def settle(self, i: int, x: Levels) -> None:
        """Find where acceptance switches on x's path: afterwards x is checked or known rejected."""
        path = self.path(i, x)
        lo, hi = -1, len(path)  # path[lo] rejected, path[hi] accepted (virtual ends)
        for p, (j, y) in enumerate(path):
            if self.rejected.query_at(j, y):
                lo = p
            elif self.accepted.query_at(j, y):
                hi = p
                break
        if self.crossing is not None and hi - lo > 1:  # gallop from where the last path switched
            p = min(max(self.crossing - sum(x), lo + 1), hi - 1)
            if self.check(*path[p]):
                hi, step = p, 1
                while hi - lo > 1:
                    p = max(hi - step, lo + 1)
                    if not self.check(*path[p]):
                        lo = p
                        break
                    hi, step = p, step * 2
            else:
                lo, step = p, 1
                while hi - lo > 1:
                    p = min(lo + step, hi - 1)
                    if self.check(*path[p]):
                        hi = p
                        break
                    lo, step = p, step * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.check(*path[mid]):
                hi = mid
            else:
                lo = mid
        if hi < len(path):
            self.crossing = sum(path[hi][1])

    # -- the search -----------------------------------------------------------------------------
    def run(self, time_limit: float | None) -> BFSResult:
        start = time.perf_counter()
        timed_out = False
        strides = np.asarray(self.strides, dtype=np.int64)
        heights = np.asarray(self.heights, dtype=np.int64)
        bounds, done, exact, monotone = self.bounds, self.done, self.exact, self.monotone
        rejected_at, accepted_at = self.rejected.query_at, self.accepted.query_at
        excluded = 0  # never examined: their bound was no better than the best solution
        stop = None  # where an exact bound ended the scan
        for first in range(0, self.space.size, _CHUNK):
            chunk = self.order[first:first + _CHUNK]
            levels = ((chunk[:, None] // strides) % heights).tolist()
            for offset, (i, row) in enumerate(zip(chunk.tolist(), levels)):
                if time_limit is not None and self.checked and time.perf_counter() - start > time_limit:
                    timed_out = True
                    break
                best = self.best
                if best is not None and bounds.item(i) >= best.quality:
                    if exact:
                        stop = first + offset  # the bounds ascend: nothing later can beat the best
                        break
                    excluded += not done[i]
                    continue
                if done[i]:
                    continue
                x = tuple(row)
                if not monotone:
                    self.check(i, x)
                elif rejected_at(i, x):
                    continue
                elif accepted_at(i, x):
                    self.check(i, x)  # accepted: only its value is unknown
                else:
                    self.settle(i, x)
            else:
                continue
            break
        if stop is not None:
            checked = np.frombuffer(bytes(done), dtype=np.uint8)[self.order[stop:]]
            excluded += int(np.count_nonzero(checked == 0))
        return BFSResult(self.best, self.checked, self.space.size, time.perf_counter() - start, timed_out,
                         {"insufficient protection ↓": self.rejected, "sufficient protection ↑": self.accepted},
                         excluded, traversal="paths")


def guide_bounds(evaluator: TransformEvaluator) -> np.ndarray:
    """Loss's level bound of every transformation: where a model whose bound needs the groups (DM,
    KL) is likely small, so its candidates within a rank and its paths go there first.  Only an
    order: nothing is excluded by it."""
    guide = Loss()
    guide.bind(evaluator)
    return guide.level_bounds()


def _outer_sums(parts: list[np.ndarray]) -> np.ndarray:
    """Σ_q parts[q][x_q] for every x in index order (C order over the heights)."""
    acc = np.zeros(())
    for part in parts:
        acc = np.add.outer(acc, part)
    return acc.ravel()


Search = Callable[..., BFSResult]
TRAVERSALS: dict[str, Search] = {"paths": path_search, "best-first": best_first_search}
DEFAULT_TRAVERSAL = "paths"
