"""Assignments of subjects to output channels: their metrics, their safety, and the
rounding to whole subjects that a release needs (METHODS decision 8).

Rounding is per input channel by largest remainder, so a risky channel still sends
all of its subjects and a safe one about as many as the LP chose (rounded up: an
extra safe subject only dilutes).  Rounding can break (7)/(9) by a fraction of a
subject; the repair then adds spare safe subjects to the output channel, or moves
risky ones out to the all-channel output d_0, and finally — if d_0 itself needs it —
merges whole (safe) output channels into d_0.  Every step can only lower the
violated sums, and d_0 holding everyone is safe, so the repair always ends in a safe
assignment; it never releases one that breaks (7) or (9).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import DeidError
from .inputs import TOLERANCE
from .program import Program

RELATIVE = 1e-9  # a constraint sum may exceed 0 by this share of the output channel's subjects (float noise)


@dataclass(frozen=True)
class Assignment:
    """x_rw for every variable of ``program`` (fractional from the LP, or whole subjects)."""

    program: Program
    x: np.ndarray

    @property
    def totals(self) -> np.ndarray:
        """m_w^out per output channel."""
        return np.bincount(self.program.var_w, self.x, minlength=len(self.program.outputs))

    @property
    def kept(self) -> np.ndarray:
        """Subjects of each input channel left in their own singleton output channel."""
        sent = np.bincount(self.program.var_r, self.x, minlength=len(self.program.inputs.keys))
        return self.program.inputs.sizes - sent

    @property
    def objective(self) -> float:
        """Ψ, eq. 11 (singleton outputs cost nothing)."""
        return float(self.program.cost @ self.x)

    @property
    def omega(self) -> float:
        """Ω = Ψ / m² (§7): 0 is full revelation, 1 everyone in d_0."""
        return self.objective / float(self.program.inputs.total) ** 2

    @property
    def used(self) -> np.ndarray:
        return self.totals > 1e-9

    @property
    def all_channel_share(self) -> float:
        """Share of subjects sent to d_0, the channel of all input channels (Table 5)."""
        return float(self.totals[0]) / self.program.inputs.total

    def sums(self) -> np.ndarray:
        """(W, K+1): Σ_r (P(v^k|r) - u_k) x_rw in columns k >= 1 (eq. 7), Σ_r (Σ_j c_j P(v^j|r) - b) x_rw
        in column 0 (eq. 9); safe means every entry <= 0."""
        out = np.zeros((len(self.program.outputs), self.program.coef.shape[1]))
        np.add.at(out, self.program.var_w, self.program.coef * self.x[:, None])
        return out

    def violations(self) -> list[tuple[int, int]]:
        """(output channel, column of ``sums``) pairs that break (7) or (9)."""
        limit = RELATIVE * np.maximum(1.0, self.totals)[:, None]
        w, k = np.nonzero(self.sums() > limit)
        return list(zip(w.tolist(), k.tolist()))

    def probabilities(self) -> np.ndarray:
        """P(v^k | d_w^out) by eq. 1, (W, K+1); NaN for unused output channels."""
        p = self.program.inputs.conditional[self.program.var_r]
        num = np.zeros((len(self.program.outputs), p.shape[1]))
        np.add.at(num, self.program.var_w, p * self.x[:, None])
        with np.errstate(invalid="ignore", divide="ignore"):
            return num / self.totals[:, None]


@dataclass(frozen=True)
class Repairs:
    """What the repair after rounding had to do (all zero when rounding kept (7) and (9)).

    ``Repairs()`` — ``rounded`` False — is the MILP route's: its solution is whole subjects
    already, nothing was rounded, so nothing can be said about rounding either.
    """

    safe_added: int = 0
    risky_moved: int = 0
    merged: int = 0
    channels: tuple[int, ...] = field(default_factory=tuple)
    rehomed: int = 0  # risky subjects moved to another output channel with room (not d_0)
    rounded: bool = False  # True: the whole subjects came from rounding the LP (``whole_subjects``)

    @property
    def clean(self) -> bool:
        return not (self.safe_added or self.risky_moved or self.merged or self.rehomed)

    def describe(self) -> str:
        if not self.rounded:
            return "whole subjects from the MILP; no rounding"
        if self.clean:
            return "rounding kept (7) and (9); no repair"
        return (f"repaired {len(self.channels)} output channel(s) after rounding: {self.safe_added:,} spare safe "
                f"subjects added, {self.rehomed:,} risky subjects moved to other output channels with room, "
                f"{self.risky_moved:,} to the all-channel output, {self.merged} output channel(s) merged into it")


def whole_subjects(program: Program, x: np.ndarray) -> tuple[Assignment, Repairs]:
    """Round ``x`` per input channel by largest remainder, then repair (7)/(9)."""
    counts = _round(program, np.clip(x, 0.0, None))
    return _repair(program, counts)


def _round(program: Program, x: np.ndarray) -> np.ndarray:
    sizes = program.inputs.sizes
    out = np.zeros(x.size, dtype=np.int64)
    order = np.argsort(program.var_r, kind="stable")
    bounds = np.searchsorted(program.var_r[order], np.arange(len(sizes) + 1))
    for r in range(len(sizes)):
        idx = order[bounds[r]:bounds[r + 1]]
        if not idx.size:
            continue
        v = x[idx]
        total = v.sum()
        target = int(sizes[r]) if program.classes.risky[r] else min(int(sizes[r]), math.ceil(total - 1e-6))
        f = np.floor(v + 1e-9).astype(np.int64)
        rem = target - int(f.sum())
        frac = v - f
        if rem > 0:
            f[np.argsort(-frac, kind="stable")[:rem]] += 1
        while rem < 0:  # floors above the target (LP tolerance): take from the smallest fractions
            j = next(j for j in np.argsort(frac, kind="stable") if f[j] > 0)
            f[j] -= 1
            rem += 1
        out[idx] = f
    return out


def _repair(program: Program, n: np.ndarray) -> tuple[Assignment, Repairs]:
    coef, var_r = program.coef, program.var_r
    sizes = program.inputs.sizes
    safe = program.classes.safe
    offsets = np.searchsorted(program.var_w, np.arange(len(program.outputs) + 1))
    spare = sizes - np.bincount(var_r, n, minlength=sizes.size)
    spare[~safe] = 0
    d0 = offsets[0] + np.arange(sizes.size)  # variable of (r, d_0): d_0's members are every r in order
    added = moved = merged = rehomed = 0
    touched: set[int] = set()
    order = np.lexsort((program.psi[program.var_w], var_r))  # each channel's variables, cheapest output first
    starts = np.searchsorted(var_r[order], np.arange(sizes.size + 1))
    by_channel = [order[starts[r]:starts[r + 1]] for r in range(sizes.size)]
    for w in [*range(1, len(program.outputs)), 0]:
        vs = np.arange(offsets[w], offsets[w + 1])
        for _ in range(100_000):
            g = coef[vs].T @ n[vs]
            j = int(np.argmax(g))
            if g[j] <= RELATIVE * max(1.0, float(n[vs].sum())):
                break
            touched.add(w)
            helpers = vs[(coef[vs, j] < -TOLERANCE) & (spare[var_r[vs]] > 0)]
            if helpers.size:  # dilute with spare safe subjects of a member channel
                v = helpers[np.argmin(coef[helpers, j])]
                take = min(math.ceil(g[j] / -coef[v, j]), int(spare[var_r[v]]))
                n[v] += take
                spare[var_r[v]] -= take
                added += take
                continue
            if w != 0:  # move risky subjects out: to output channels with room, cheapest first, else d_0
                culprits = vs[(coef[vs, j] > TOLERANCE) & (n[vs] > 0)]
                v = culprits[np.argmax(coef[culprits, j])]
                take = min(math.ceil(g[j] / coef[v, j]), int(n[v]))
                n[v] -= take
                for alt in by_channel[var_r[v]]:
                    if take == 0:
                        break
                    aw = program.var_w[alt]
                    if aw == w or aw == 0:
                        continue
                    room = _room(program, n, offsets, aw, alt)
                    if room > 0:
                        step = min(room, take)
                        n[alt] += step
                        take -= step
                        rehomed += step
                        touched.add(int(aw))
                n[d0[var_r[v]]] += take
                moved += take
                continue
            donor = _most_helpful(program, n, offsets, j)  # d_0: absorb a whole safe output channel
            if donor is None:
                raise DeidError("cannot make the all-channel output safe after rounding; this should not happen "
                                "when the all-channel output of everyone is safe — please report it")
            dv = np.arange(offsets[donor], offsets[donor + 1])
            np.add.at(n, d0[var_r[dv]], n[dv])
            n[dv] = 0
            merged += 1
        else:
            raise DeidError(f"repair of output channel {w} did not converge; please report it")
    return Assignment(program, n), Repairs(added, moved, merged, tuple(sorted(touched)), rehomed, rounded=True)


def _room(program: Program, n: np.ndarray, offsets: np.ndarray, w: int, v: int) -> int:
    """How many more subjects variable ``v`` (of output channel ``w``) can take with w staying safe."""
    vs = slice(offsets[w], offsets[w + 1])
    g = program.coef[vs].T @ n[vs]
    slack = RELATIVE * max(1.0, float(n[vs].sum())) - g
    if (slack < 0).any():
        return 0
    a = program.coef[v]
    limits = [math.floor(s / c) for s, c in zip(slack, a) if c > TOLERANCE]
    return max(0, min(limits)) if limits else int(program.inputs.sizes[program.var_r[v]])


def _most_helpful(program: Program, n: np.ndarray, offsets: np.ndarray, j: int) -> int | None:
    """The used non-d_0 output channel whose merge lowers d_0's sum ``j`` the most."""
    best, best_g = None, -TOLERANCE
    for w in range(1, len(program.outputs)):
        vs = slice(offsets[w], offsets[w + 1])
        if n[vs].sum() == 0:
            continue
        g = float(program.coef[vs, j] @ n[vs])
        if g < best_g:
            best, best_g = w, g
    return best
