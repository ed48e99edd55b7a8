"""Search Non-overlapping Lattices (seed 000 Appendix, Algorithm 3).

A sublattice(α, β) is the set of policies whose bits satisfy a conjunction of literals:
B[b] = 1 for every b with α[b] = 1, and B[a] = 0 for every a with β[a] = 0.  A new
sublattice avoids a pruned one when its literals contradict the pruned conjunction, i.e.
it satisfies the *clause* "B[b] = 0 for some b with α_P[b] = 1, or B[a] = 1 for some a with
β_P[a] = 0".  SNL finds a set of literals satisfying every clause by depth-first search,
always branching on a random literal of the shortest unsatisfied clause, backtracking when
a clause runs out of literals that do not conflict with the path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Literal = tuple[int, int]  # (bit, value)


@dataclass(frozen=True)
class Clause:
    """The clause a pruned sublattice(α_P, β_P) imposes: some literal of it must hold."""

    literals: tuple[Literal, ...]

    @classmethod
    def avoiding(cls, upper: np.ndarray, lower: np.ndarray) -> Clause:
        zeros = [(int(b), 0) for b in np.flatnonzero(upper)]  # α_P[b] = 1 -> B[b] = 0 escapes
        ones = [(int(a), 1) for a in np.flatnonzero(~lower.astype(bool))]  # β_P[a] = 0 -> B[a] = 1
        return cls(tuple(zeros + ones))


def satisfied(clause: Clause, ones: np.ndarray, zeros: np.ndarray) -> bool:
    """Does a sublattice with forced ``ones`` (α's 1s) and ``zeros`` (β's 0s) satisfy it?"""
    return any((zeros[b] if v == 0 else ones[b]) for b, v in clause.literals)


def snl(clauses: list[Clause], ones: np.ndarray, zeros: np.ndarray, rng: np.random.Generator,
        max_steps: int = 20_000) -> tuple[np.ndarray, np.ndarray] | None:
    """Extend the forced bits (``ones``: bits 1 in α, ``zeros``: bits 0 in β) with literals
    until every clause holds; None when no extension is found within ``max_steps``."""
    ones, zeros = ones.astype(bool).copy(), zeros.astype(bool).copy()
    path: list[Literal] = []

    def conflict(lit: Literal) -> bool:
        b, v = lit
        return bool(ones[b]) if v == 0 else bool(zeros[b])

    def shortest_unsatisfied() -> list[Literal] | None:
        open_ = [c for c in clauses if not satisfied(c, ones, zeros)]
        if not open_:
            return None
        return list(min(open_, key=lambda c: len(c.literals)).literals)

    first = shortest_unsatisfied()
    if first is None:
        return ones, zeros
    stack: list[list[Literal]] = [first]
    for _ in range(max_steps):
        if not stack:
            return None
        clause = stack.pop()
        if clause:
            lit = clause.pop(int(rng.integers(len(clause))))
            stack.append(clause)
            if conflict(lit):
                continue
            path.append(lit)
            (ones if lit[1] == 1 else zeros)[lit[0]] = True
            nxt = shortest_unsatisfied()
            if nxt is None:
                return ones, zeros
            stack.append(nxt)
        elif path:
            b, v = path.pop()
            (ones if v == 1 else zeros)[b] = False
    return None
