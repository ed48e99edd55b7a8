"""The policy lattice (seed 000 §3.2, Defs 3.3–3.6): order, covers, chains, sublattices.

The lattice knows the QIs' names and domains and nothing about data.  Order
follows the paper: ``a ≺ b`` when a is strictly more general (every kept boundary
of a is kept in b, and b keeps at least one more).  The paper's GLB of a policy is
one of its *parents* here (one kept boundary removed); the LUB is a *child*.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .domain import Domain
from .errors import PolicyError
from .hierarchy import Hierarchy
from .limits import require_sizes
from .policy import Policy


@dataclass(frozen=True)
class Chain:
    """A maximal chain of sublattice(start, end): ``start`` then one flipped bit at a time.

    Consecutive policies differ in exactly one boundary of one QI, which is what
    incremental chain evaluation exploits.
    """

    start: Policy
    flips: np.ndarray  # bit positions set to 1, in order

    def __len__(self) -> int:
        return int(self.flips.size) + 1

    def end(self) -> Policy:
        """The last policy: the start with every flip set."""
        bits = bytearray(self.start.bits)
        for pos in self.flips:
            bits[int(pos)] = 1
        return Policy(self.start.lattice, bytes(bits))

    def policies(self) -> Iterator[Policy]:
        bits = bytearray(self.start.bits)
        yield self.start
        for pos in self.flips:
            bits[int(pos)] = 1
            yield Policy(self.start.lattice, bytes(bits))


class Lattice:
    """All policies over the given QIs and their domains."""

    def __init__(self, names: Sequence[str], domains: Sequence[Domain],
                 hierarchies: Mapping[str, Hierarchy] | None = None) -> None:
        if len(names) != len(domains):
            raise PolicyError("a lattice needs one domain per QI name")
        self.names = tuple(names)
        self.domains = tuple(domains)
        self.hierarchies = dict(hierarchies or {})
        # sized before anything is allocated: a domain of 10^9 values would need GBs per array
        require_sizes(self.names, [d.size for d in self.domains], [d.kind for d in self.domains])
        sizes = [d.size - 1 for d in self.domains]
        self.offsets = tuple(int(x) for x in np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))))
        self.nbits = self.offsets[-1]
        self.qi_of_bit = np.repeat(np.arange(len(self.names), dtype=np.int32), sizes)
        self._index = {n: i for i, n in enumerate(self.names)}

    # -- construction -----------------------------------------------------------------
    def policy(self, bits: Sequence[int] | np.ndarray | bytes) -> Policy:
        arr = np.frombuffer(bits, dtype=np.uint8) if isinstance(bits, bytes) else np.asarray(bits)
        if arr.size != self.nbits:
            raise PolicyError(
                f"policy has {arr.size} bits but the lattice over {', '.join(self.names)} "
                f"needs {self.nbits}; give one bit per boundary of every QI"
            )
        if arr.size and not np.isin(arr, (0, 1)).all():
            raise PolicyError("policy bits must be 0 or 1")
        return Policy(self, arr.astype(np.uint8).tobytes())

    def top(self) -> Policy:
        """The most general policy: every QI in one group."""
        return Policy(self, bytes(self.nbits))

    def bottom(self) -> Policy:
        """The original data: every boundary kept."""
        return Policy(self, b"\x01" * self.nbits)

    def index(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            raise PolicyError(
                f"unknown QI {name!r} in policy; the QIs are {', '.join(self.names)}"
            ) from None

    def parse(self, text: str) -> Policy:
        """Parse a policy text.

        Forms per QI (segments separated by ``|``, QIs left out are kept as they are):
        ``age:0110…`` (bits), ``age:top``, ``age:bottom``, ``age:level=2`` (a level of the
        QI's hierarchy, when interval-shaped) and ``age:cuts=18,65`` (a new group starts
        at each listed value).  The whole text may also be ``top`` or ``bottom``.
        """
        text = text.strip()
        if not text.strip("| \t\n"):  # an unset shell variable must not mean "keep everything"
            raise PolicyError("the policy text is empty; write one, e.g. 'age:cuts=18,65|zip:top', or 'bottom' "
                              "to keep every QI as it is")
        if text in ("top", "bottom"):
            return self.top() if text == "top" else self.bottom()
        bits = self.bottom().array.astype(np.uint8)
        seen: set[str] = set()
        for segment in filter(None, (s.strip() for s in text.split("|"))):
            name, sep, body = segment.partition(":")
            if not sep:
                raise PolicyError(
                    f"policy segment {segment!r} has no ':'; write QI:BITS, e.g. age:0110"
                )
            name = name.strip()
            i = self.index(name)
            if name in seen:
                raise PolicyError(f"policy names QI {name!r} twice; give each QI once")
            seen.add(name)
            lo, hi = self.offsets[i], self.offsets[i + 1]
            bits[lo:hi] = self._parse_qi(i, body.strip())
        return Policy(self, bits.tobytes())

    def _parse_qi(self, i: int, body: str) -> np.ndarray:
        name, domain = self.names[i], self.domains[i]
        n = domain.size - 1
        if body == "top":
            return np.zeros(n, dtype=np.uint8)
        if body == "bottom":
            return np.ones(n, dtype=np.uint8)
        if body.startswith("level="):
            return self._level_bits(i, body[6:])
        if body.startswith("cuts="):
            out = np.zeros(n, dtype=np.uint8)
            for raw in filter(None, (c.strip() for c in body[5:].split(","))):
                pos = domain.position(int(raw) if domain.kind == "integer" and _is_int(raw) else raw)
                if pos is None or pos == 0:
                    raise PolicyError(
                        f"cut {raw!r} for QI {name!r} is not a value after the first of its "
                        f"domain; cuts name the first value of each new group"
                    )
                out[pos - 1] = 1
            return out
        if len(body) != n or any(c not in "01" for c in body):
            raise PolicyError(
                f"QI {name!r} needs {n} bits (its domain has {domain.size} values) but the "
                f"policy gives {body[:40]!r}{'…' if len(body) > 40 else ''}; use 0/1 per boundary, "
                f"or top, bottom, level=N, cuts=v1,v2"
            )
        return np.frombuffer(body.encode(), dtype=np.uint8) - ord("0")

    def _level_bits(self, i: int, raw: str) -> np.ndarray:
        name = self.names[i]
        hierarchy = self.hierarchies.get(name)
        if hierarchy is None:
            raise PolicyError(f"QI {name!r} has no hierarchy in the spec, so level={raw} means nothing")
        if not _is_int(raw):
            raise PolicyError(f"level for QI {name!r} must be a whole number, not {raw!r}")
        rec = hierarchy.recoding(self.domains[i], int(raw))
        if not rec.contiguous:
            raise PolicyError(
                f"level {raw} of the hierarchy of {name!r} groups non-adjacent values, so it is a "
                f"recoding, not a lattice policy; reorder the domain or use it as a recoding"
            )
        return (np.diff(rec.group_of) != 0).astype(np.uint8)

    # -- order ------------------------------------------------------------------------
    def _check(self, *policies: Policy) -> None:
        for p in policies:
            if len(p.bits) != self.nbits:
                raise PolicyError("policy does not belong to this lattice (wrong length)")

    def leq(self, a: Policy, b: Policy) -> bool:
        """``a ≼ b``: a is at least as general as b."""
        self._check(a, b)
        return not np.any(a.array & ~b.array)

    def precedes(self, a: Policy, b: Policy) -> bool:
        """``a ≺ b`` (Def. 3.3): a strictly more general than b."""
        return a.bits != b.bits and self.leq(a, b)

    def meet(self, a: Policy, b: Policy) -> Policy:
        """The most specific policy at least as general as both (bitwise AND)."""
        self._check(a, b)
        return Policy(self, (a.array & b.array).astype(np.uint8).tobytes())

    def join(self, a: Policy, b: Policy) -> Policy:
        """The most general policy at least as specific as both (bitwise OR)."""
        self._check(a, b)
        return Policy(self, (a.array | b.array).astype(np.uint8).tobytes())

    def parents(self, p: Policy) -> list[Policy]:
        """Direct generalizations: the policies that are a GLB of ``p`` (Def. 3.4)."""
        return [self._flip(p, int(i)) for i in np.flatnonzero(p.array)]

    def children(self, p: Policy) -> list[Policy]:
        """Direct specializations: the policies ``p`` is a GLB of."""
        return [self._flip(p, int(i)) for i in np.flatnonzero(~p.array)]

    def is_cover(self, a: Policy, b: Policy) -> bool:
        """True when a is a GLB of b: they differ in exactly one bit, 0 in a, 1 in b."""
        return self.levels_between(a, b) == 1 and self.leq(a, b)

    def _flip(self, p: Policy, i: int) -> Policy:
        bits = bytearray(p.bits)
        bits[i] ^= 1
        return Policy(self, bytes(bits))

    def levels_between(self, a: Policy, b: Policy) -> int:
        """Hamming distance ``|a XOR b|`` (seed 001 §2.4.2)."""
        self._check(a, b)
        return int(np.count_nonzero(a.array != b.array))

    def in_sublattice(self, p: Policy, upper: Policy, lower: Policy) -> bool:
        """Membership in sublattice(upper, lower): ``upper ≼ p ≼ lower``."""
        return self.leq(upper, p) and self.leq(p, lower)

    def _differing(self, upper: Policy, lower: Policy) -> np.ndarray:
        if not self.leq(upper, lower):
            raise PolicyError("the first policy must be at least as general as the second")
        return np.flatnonzero(upper.array != lower.array)

    def halfway(self, upper: Policy, lower: Policy, rng: np.random.Generator,
                weights: np.ndarray | None = None, generalize: bool = False) -> Policy:
        """A policy halfway between ``upper ≼ lower``: ⌊d/2⌋ of the d differing boundaries are
        chosen without replacement with probability ∝ ``weights[bit]``; the chosen ones are
        set (as in ``lower``), or with ``generalize`` left unset (as in ``upper``) while the
        others are set."""
        diff = self._differing(upper, lower)
        half = diff.size // 2
        if half == 0:  # nothing to choose: the chosen (no) bits set, or with generalize all the others
            return lower if generalize else upper
        p = None
        if weights is not None:
            w = np.asarray(weights, dtype=float)[diff]
            p = w / w.sum()
        chosen = rng.choice(diff, size=half, replace=False, p=p)
        bits = bytearray(upper.bits)
        targets = np.setdiff1d(diff, chosen) if generalize else chosen
        for i in targets:
            bits[int(i)] = 1
        return Policy(self, bytes(bits))

    def random_chain(self, upper: Policy, lower: Policy, rng: np.random.Generator) -> Chain:
        """A uniformly random maximal chain of sublattice(upper, lower): every maximal
        chain is one order of the differing bits, so a uniform permutation is uniform."""
        diff = self._differing(upper, lower)
        return Chain(upper, rng.permutation(diff))

    def random_policy(self, rng: np.random.Generator, density: float = 0.5) -> Policy:
        """A random lattice node; each boundary is kept with probability ``density``."""
        return Policy(self, (rng.random(self.nbits) < density).astype(np.uint8).tobytes())


def _is_int(raw: str) -> bool:
    try:
        int(raw)
    except ValueError:
        return False
    return True
