"""Candidate output channels S^out (seed 003 §5.2 eq. 5 and the §7 rules).

The all-channel output d_0 (every input channel) comes first: it makes the program
feasible whenever release is possible at all.  Generated candidates follow the §7
rules — at least one risky and one safe input channel, at most ``max_size`` members,
biased toward fewer members — drawn uniformly among the valid subsets of each size
with a seeded generator; the user's own listed channels come last.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import DeidError, SpecError
from .inputs import Classification, InputChannels

DEFAULT_COUNT = 2048
EXHAUSTIVE_LIMIT = 1_000_000  # candidates = "all" refuses to enumerate more than this many subsets


@dataclass(frozen=True)
class OutputChannels:
    """Candidate output channels; ``members[0]`` is d_0, the channel of all input channels."""

    members: tuple[np.ndarray, ...]  # sorted input-channel indices per output channel
    origin: tuple[str, ...]  # "all", "generated" or "listed"
    dropped: tuple[str, ...] = ()  # listed channels refused by eq. 5, described

    def __len__(self) -> int:
        return len(self.members)

    @property
    def sizes(self) -> np.ndarray:
        return np.array([m.size for m in self.members])


def possible(n_risky: int, n_safe: int, max_size: int) -> int:
    """How many distinct output channels the §7 rules allow, d_0 included."""
    n = n_risky + n_safe
    if not (n_risky and n_safe):
        return 1 if n else 0  # nothing to protect, or nothing to protect with: d_0 alone
    ruled = sum(math.comb(n, s) - math.comb(n_risky, s) - math.comb(n_safe, s) for s in range(2, min(max_size, n) + 1))
    return ruled + (1 if n > max_size else 0)  # d_0 is among the ruled ones when it is small enough


def generate(inputs: InputChannels, classes: Classification, count: int | str | None, max_size: int,
             seed: int, listed: Sequence[Sequence[Sequence[str]]] = ()) -> OutputChannels:
    """d_0, then generated candidates, then the user's listed ones (eq. 5 applied to those).

    ``count`` counts d_0 too (the paper's Table 4 starts at one output channel); None
    means up to 2,048, capped at what can exist; an explicit count above that is an error.
    ``"all"`` enumerates every output channel that passes eq. 5 (small problems only).
    """
    everything = np.arange(len(inputs.keys))
    risky, safe = everything[classes.risky], everything[classes.safe]
    chosen: list[np.ndarray] = [everything]
    seen = {everything.tobytes()}
    if count == "all":
        chosen += _exhaustive(everything, classes.safe, seen)
    elif risky.size and safe.size:
        limit = possible(risky.size, safe.size, max_size)
        if count is None:
            count = min(DEFAULT_COUNT, limit)
        elif count > limit:
            raise SpecError(f"[channels] candidates = {count:,} but only {limit:,} output channels can exist with "
                            f"{risky.size} risky and {safe.size} safe input channels and at most {max_size} "
                            f"members; ask for at most {limit:,} or raise max_size")
        rng = np.random.default_rng(seed)
        for s, n_s in _per_size(int(count) - 1, risky.size, safe.size, max_size, len(everything)):
            chosen += _draw(rng, risky, safe, s, n_s, seen)
    origin = ["all"] + ["generated"] * (len(chosen) - 1)
    extra, dropped = _listed(inputs, classes, listed, seen)
    return OutputChannels(tuple(chosen + extra), tuple(origin + ["listed"] * len(extra)), tuple(dropped))


def _capacity(n_risky: int, n_safe: int, s: int, n: int) -> int:
    cap = math.comb(n, s) - math.comb(n_risky, s) - math.comb(n_safe, s)
    return cap - (1 if s == n else 0)  # d_0 is already chosen


def _per_size(total: int, n_risky: int, n_safe: int, max_size: int, n: int) -> list[tuple[int, int]]:
    """Split ``total`` over sizes 2…max_size, weight halving per extra member (§7 rule 3),
    each size capped at how many subsets of that size exist (the overflow moves on)."""
    sizes = list(range(2, min(max_size, n) + 1))
    caps = {s: _capacity(n_risky, n_safe, s, n) for s in sizes}
    alloc = dict.fromkeys(sizes, 0)
    left = total
    while left > 0:
        open_sizes = [s for s in sizes if alloc[s] < caps[s]]
        if not open_sizes:
            break
        weights = np.array([0.5 ** (s - 2) for s in open_sizes])
        share = weights / weights.sum() * left
        grant = np.floor(share).astype(int)
        for i in np.argsort(-(share - grant), kind="stable")[: left - int(grant.sum())]:
            grant[i] += 1
        for s, g in zip(open_sizes, grant):
            take = min(int(g), caps[s] - alloc[s])
            alloc[s] += take
            left -= take
    return [(s, alloc[s]) for s in sizes if alloc[s]]


def _draw(rng: np.random.Generator, risky: np.ndarray, safe: np.ndarray, s: int, n_s: int,
          seen: set[bytes]) -> list[np.ndarray]:
    """``n_s`` distinct valid subsets of size ``s``, uniform over all valid ones."""
    js = np.arange(1, s)
    logw = np.array([_logcomb(risky.size, j) + _logcomb(safe.size, s - j) for j in js])
    p = np.exp(logw - logw.max())
    p /= p.sum()
    cap = sum(math.comb(risky.size, int(j)) * math.comb(safe.size, s - int(j)) for j in js)
    out: list[np.ndarray] = []
    if n_s * 2 > cap and cap <= EXHAUSTIVE_LIMIT:  # dense: enumerate, then sample without replacement
        pool = [np.array(sorted(a + b)) for j in js for a in itertools.combinations(risky.tolist(), int(j))
                for b in itertools.combinations(safe.tolist(), s - int(j))]
        pool = [m for m in pool if m.tobytes() not in seen]
        for i in sorted(rng.choice(len(pool), size=min(n_s, len(pool)), replace=False)):
            seen.add(pool[i].tobytes())
            out.append(pool[i])
        return out
    while len(out) < n_s:  # sparse: rejection of repeats is rare
        j = int(rng.choice(js, p=p))
        m = np.sort(np.concatenate([rng.choice(risky, j, replace=False), rng.choice(safe, s - j, replace=False)]))
        if m.tobytes() not in seen:
            seen.add(m.tobytes())
            out.append(m)
    return out


def _logcomb(n: int, k: int) -> float:
    return -math.inf if k > n else math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _exhaustive(everything: np.ndarray, safe: np.ndarray, seen: set[bytes]) -> list[np.ndarray]:
    """Every subset of two or more input channels that passes eq. 5 (contains a safe one)."""
    n = everything.size
    total = 2 ** n - 1 - n - (2 ** int((~safe).sum()) - 1 - int((~safe).sum()))
    if total > EXHAUSTIVE_LIMIT:
        raise DeidError(f"candidates = \"all\" would enumerate {total:,} output channels for {n} input channels; "
                        f"give a number instead (e.g. candidates = 2048)")
    out = []
    for s in range(2, n + 1):
        for combo in itertools.combinations(range(n), s):
            m = np.array(combo)
            if safe[m].any() and m.tobytes() not in seen:
                seen.add(m.tobytes())
                out.append(m)
    return out


def _listed(inputs: InputChannels, classes: Classification, listed: Sequence[Sequence[Sequence[str]]],
            seen: set[bytes]) -> tuple[list[np.ndarray], list[str]]:
    index = inputs.index()
    out, dropped = [], []
    for i, channel in enumerate(listed, 1):
        missing = [m for m in channel if tuple(m) not in index]
        if missing:
            raise SpecError(f"[channels] outputs #{i} names input channel ({', '.join(missing[0])}), which is not in "
                            f"the data; use related values that occur, in related order")
        m = np.array(sorted({index[tuple(v)] for v in channel}))
        if not classes.safe[m].any():
            dropped.append(f"#{i} " + " + ".join(inputs.describe(r) for r in m))
            continue
        if m.tobytes() not in seen:
            seen.add(m.tobytes())
            out.append(m)
    return out, dropped
