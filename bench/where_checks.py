"""Where a full-domain search's checks go, and how few would do (issue 32): for ``bench/anonymize.py``.

Every transformation of the lattice ends a search in one of four states: checked and accepted,
checked and rejected, known rejected without a check (below a checked rejected one: acceptance is
monotone), or excluded by its quality bound without a check.  ``classify`` counts them for one
search.  ``oracle`` estimates what a search that knew every verdict in advance would still have to
check: each accepted transformation whose bound beats the optimum (only its check gives its value)
and, for the rejected ones whose bound beats it, a few rejected transformations above them whose
checks cover them all (a greedy cover by maximal rejected transformations: an estimate from above of
the fewest).  Both read the tables of an exhaustive enumeration (verdict, bound, value of each).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from deid_sql.fulldomain import Outcome, TransformEvaluator
from deid_sql.search.antichain import PropertyStore

PROTECTION = "insufficient protection ↓"


@dataclass
class Tables:
    """An exhaustive enumeration's verdict, bound and value of every transformation (C order)."""

    heights: tuple[int, ...]
    accepted: np.ndarray
    bound: np.ndarray
    value: np.ndarray

    @property
    def optimum(self) -> float:
        return float(self.value[self.accepted].min()) if self.accepted.any() else float("inf")


def enumerate_all(evaluator: TransformEvaluator) -> tuple[Outcome | None, Tables]:
    """The optimum by checking every transformation, with the tables of all of them."""
    space = evaluator.space
    outcomes = [evaluator.apply(x) for x in space]
    accepted = np.array([o.accepted for o in outcomes])
    tables = Tables(tuple(space.heights), accepted, np.array([o.bound for o in outcomes]),
                    np.array([o.quality for o in outcomes]))
    best = min((o for o in outcomes if o.accepted), key=lambda o: o.quality, default=None)
    return best, tables


class Recording:
    """Wraps an evaluator's ``apply`` to record the transformations a search checks."""

    def __init__(self, evaluator: TransformEvaluator) -> None:
        self.checked: list[tuple[int, ...]] = []
        apply = evaluator.apply

        def recorded(x: Sequence[int] | str) -> Outcome:
            out = apply(x)
            self.checked.append(out.levels)
            return out

        evaluator.apply = recorded  # type: ignore[method-assign]


@dataclass
class States:
    """How one search left the lattice."""

    checked_accepted: int
    checked_rejected: int
    known_rejected: int
    excluded: int
    checked: frozenset[tuple[int, ...]]

    def row(self) -> str:
        checked = self.checked_accepted + self.checked_rejected
        return (f"checked {checked:>5,} distinct ({self.checked_accepted:,} accepted, {self.checked_rejected:,} "
                f"rejected); unchecked: {self.known_rejected:>6,} known rejected (↓), {self.excluded:>6,} excluded "
                f"by their bound")


def classify(tables: Tables, checked: Sequence[tuple[int, ...]], stores: dict[str, PropertyStore]) -> States:
    """The four states of every transformation after a search (its ↓ store says what it knew rejected)."""
    done = set(checked)
    strides = [int(np.prod(tables.heights[q + 1:])) for q in range(len(tables.heights))]
    index = {x: sum(a * b for a, b in zip(x, strides)) for x in done}
    accepted = sum(bool(tables.accepted[index[x]]) for x in done)
    protection = stores.get(PROTECTION)
    known = 0
    for x in itertools.product(*(range(h) for h in tables.heights)):
        if x not in done and protection is not None and protection.query(x):
            known += 1
    total = int(np.prod(tables.heights))
    return States(accepted, len(done) - accepted, known, total - len(done) - known, frozenset(done))


def oracle(tables: Tables) -> tuple[int, int, int]:
    """(accepted checks, rejected checks, total) a search knowing every verdict would still make:
    every accepted transformation whose bound beats the optimum, and a greedy cover of the rejected
    ones whose bound beats it by maximal rejected transformations."""
    heights, optimum = tables.heights, tables.optimum
    points = np.array(list(itertools.product(*(range(h) for h in heights))), dtype=np.int16)
    accepted = tables.accepted
    below = tables.bound < optimum - 1e-12 * max(1.0, abs(optimum))
    need_value = int(np.count_nonzero(below & accepted))
    rejected = points[below & ~accepted]
    grid = accepted.reshape(tuple(heights))
    maximal = []
    for i in np.flatnonzero(~accepted):
        x = tuple(int(v) for v in points[i])
        ups = [x[:q] + (x[q] + 1,) + x[q + 1:] for q in range(len(x)) if x[q] + 1 < heights[q]]
        if all(grid[y] for y in ups):
            maximal.append(x)
    values = np.where(accepted, tables.value, np.inf)
    itself = 0 if below[int(np.argmin(values))] else 1  # the optimum's own check, unless counted above
    if rejected.size == 0:
        return need_value, 0, need_value + itself
    tops = np.array(maximal, dtype=np.int16)
    covers = (rejected[None, :, :] <= tops[:, None, :]).all(axis=2)  # maximal × rejected
    open_ = np.ones(rejected.shape[0], dtype=bool)
    chosen = 0
    while open_.any():
        gain = (covers & open_).sum(axis=1)
        pick = int(np.argmax(gain))
        open_ &= ~covers[pick]
        chosen += 1
    return need_value, chosen, need_value + chosen + itself
