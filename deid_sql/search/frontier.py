"""The risk–utility frontier (seed 000 Defs 3.9–3.10) and the sublattice heuristic H (eq. 1).

Points live in normalized R-U space: x = risk in (0, 1], y = loss in [0, 1].  A point is
strictly dominated when another has risk ≤ and loss ≤ with at least one strict; the
frontier keeps every point nobody strictly dominates (equal points are all kept).
Sorted by risk, frontier losses are non-increasing, which draws the stair-step curve.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Point:
    """A policy's place in R-U space; ``key`` identifies the policy (its stable text)."""

    risk: float
    loss: float
    key: str = ""


def dominates(a: Point, b: Point) -> bool:
    """Def. 3.9: a strictly dominates b."""
    return a.risk <= b.risk and a.loss <= b.loss and (a.risk < b.risk or a.loss < b.loss)


@dataclass
class Frontier:
    """The non-dominated points seen so far, sorted by (risk, loss)."""

    points: list[Point] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.points)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.points)

    def dominated(self, p: Point) -> bool:
        """Is ``p`` strictly dominated by a frontier point?  The best candidate is the
        point with the lowest loss among those with risk ≤ p.risk: the last one of them."""
        i = bisect.bisect_right(self.points, (p.risk, float("inf")), key=lambda q: (q.risk, q.loss))
        if i == 0:
            return False
        best = self.points[i - 1]
        return dominates(best, p)

    def update(self, p: Point) -> bool:
        """Insert ``p`` unless dominated; drop the points it dominates.  True if inserted."""
        if self.dominated(p) or any(q.key == p.key and q.key for q in self._same_spot(p)):
            return False
        i = bisect.bisect_left(self.points, (p.risk, p.loss), key=lambda q: (q.risk, q.loss))
        j = i  # from i on risk ≥ p.risk, and losses fall: the points with loss ≥ p.loss are a run
        while j < len(self.points) and self.points[j].loss >= p.loss:
            j += 1
        kept = [q for q in self.points[i:j] if not dominates(p, q)]  # points equal to p stay
        self.points[i:j] = [p, *kept]
        return True

    def _same_spot(self, p: Point) -> list[Point]:
        i = bisect.bisect_left(self.points, (p.risk, p.loss), key=lambda q: (q.risk, q.loss))
        out = []
        while i < len(self.points) and (self.points[i].risk, self.points[i].loss) == (p.risk, p.loss):
            out.append(self.points[i])
            i += 1
        return out

    def step(self) -> list[tuple[float, float]]:
        """The stair-step corners: (risk, loss) of each point in risk order, equal risks merged."""
        out: list[tuple[float, float]] = []
        for q in self.points:
            if out and out[-1][0] == q.risk:
                continue  # sorted by loss within a risk: the first is the lowest
            out.append((q.risk, q.loss))
        return out

    def area(self, lo: float = 0.0, hi: float = 1.0) -> float:
        """Area under the stair-step over risk ∈ [lo, hi] (smaller is better).  Where no
        frontier point has risk ≤ r the curve stands at loss 1, the worst."""
        corners = self.step()
        total, level, x = 0.0, 1.0, lo
        for r, u in corners:
            if r >= hi:
                break
            if r > x:
                total += level * (r - x)
                x = r
            level = min(level, u)
        return total + level * max(0.0, hi - x)

    def nd(self, r_a: float, u_a: float, r_b: float, u_b: float) -> float:
        """ND(s, f): the part of the bounding rectangle [r_a, r_b] × [u_b, u_a] below the
        stair-step (eq. 1's numerator; the step's height is capped at u_a, the rectangle's top)."""
        total, level, x = 0.0, 1.0, r_a
        for r, u in self.step():
            if r >= r_b:
                break
            if r > x:
                total += max(0.0, min(level, u_a) - u_b) * (r - x)
                x = r
            level = min(level, u)
        return total + max(0.0, min(level, u_a) - u_b) * max(0.0, r_b - x)

    def h(self, r_a: float, u_a: float, r_b: float, u_b: float) -> float:
        """H(s, f) = ND / bounding area: the chance a policy of sublattice(α, β) updates the
        frontier, for α at (r_a, u_a) and β at (r_b, u_b) (METHODS decision 5).  A degenerate
        rectangle counts as 1 if its point is not dominated, else 0."""
        width, height = r_b - r_a, u_a - u_b
        if width <= 0 or height <= 0:
            corner = Point(max(r_a, r_b), min(u_a, u_b))
            return 0.0 if self.dominated(corner) or self._same_spot(corner) else 1.0
        return min(1.0, self.nd(r_a, u_a, r_b, u_b) / (width * height))
