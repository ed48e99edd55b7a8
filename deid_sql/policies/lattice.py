"""The policy lattice (seed 000 §3.2, Defs 3.3–3.6): order, covers, chains, sublattices.

The lattice knows the QIs' names and domains and nothing about data.  Order
follows the paper: ``a ≺ b`` when a is strictly more general (every kept boundary
of a is kept in b, and b keeps at least one more).  The paper's GLB of a policy is
one of its *parents* here (one kept boundary removed); the LUB is a *child*.
With the spec's allowed cut points (``domains/cuts.py``) the lattice is the sublattice of the policies
that keep only allowed boundaries; the text forms are in ``policies/text.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..domains.domain import Domain
from ..domains.hierarchy import Hierarchy
from ..domains.limits import require_sizes
from ..domains.recoding import QIRecoding, Recoding
from ..errors import PolicyError
from .text import bit_text, cut_texts, format_qi, named_forms, parse_qi, segments


@dataclass(frozen=True, eq=False)
class Policy:
    """A lattice node.  ``bits`` holds one byte (0/1) per boundary, all QIs concatenated."""

    lattice: Lattice
    bits: bytes

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Policy) and self.bits == other.bits and (
            self.lattice.names == other.lattice.names
        )

    def __hash__(self) -> int:
        return hash(self.bits)

    @property
    def array(self) -> np.ndarray:
        """The bits as a read-only numpy bool array."""
        return np.frombuffer(self.bits, dtype=np.bool_)

    def qi_bits(self, index: int) -> np.ndarray:
        lo, hi = self.lattice.offsets[index], self.lattice.offsets[index + 1]
        return self.array[lo:hi]

    @property
    def level(self) -> int:
        """Number of kept boundaries (0 at the top, ``lattice.free_bits`` at the bottom)."""
        return int(np.count_nonzero(self.array))

    def __lt__(self, other: Policy) -> bool:
        """``a < b`` is the paper's ``a ≺ b``: a is strictly more general than b."""
        return self.lattice.precedes(self, other)

    def __le__(self, other: Policy) -> bool:
        return self.lattice.leq(self, other)

    def text(self) -> str:
        """The canonical text a person reads and writes: ``age:every=10|zip:digits=3|sex:bottom``
        (``policies.text``: named forms where they fit, the cut list otherwise); it is what every
        output leads with, and ``Lattice.parse`` reads it back to this policy."""
        return self._text

    @functools.cached_property
    def _text(self) -> str:  # a search prints the same policy many times; the forms cost a scan of each QI
        return self.lattice.text(self)

    def bit_text(self) -> str:
        """The bit string of every QI: ``age:0110…|sex:1|…`` (``--bits``; parses back too)."""
        return self.lattice.text(self, bits=True)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"Policy({self.text()!r})"

    def qi_recoding(self, index: int) -> QIRecoding:
        gid = np.concatenate(([0], np.cumsum(self.qi_bits(index), dtype=np.int64)))
        return QIRecoding(gid, None, self.lattice.domains[index])

    def recoding(self) -> Recoding:
        """This policy as a recoding (intervals labelled ``20-29``, ``372**``, ...)."""
        return Recoding(tuple(self.qi_recoding(i) for i in range(len(self.lattice.names))),
                        name=self.text())

    def generalized_groups(self) -> dict[str, list[str]]:
        """Per QI, the readable names of the groups wider than one value."""
        out: dict[str, list[str]] = {}
        for i, name in enumerate(self.lattice.names):
            domain = self.lattice.domains[i]
            bits = self.qi_bits(i)
            starts = np.concatenate(([0], np.flatnonzero(bits) + 1))
            ends = np.concatenate((starts[1:] - 1, [domain.size - 1]))
            groups = [domain.readable_group(int(a), int(b)) for a, b in zip(starts, ends) if b > a]
            if groups:
                out[name] = groups
        return out

    def readable(self) -> str:
        """Human form listing only generalized groups, like seed 001 Table 3:
        ``age: [90-120]; race: [Asian, Other]`` (``original data`` when none)."""
        groups = self.generalized_groups()
        if not groups:
            return "original data"
        return "; ".join(f"{name}: {', '.join(g)}" for name, g in groups.items())


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
    """All policies over the given QIs and their domains, or, with ``allowed``, the sublattice of
    the policies that keep only allowed boundaries (the spec's allowed cut points, ``domains/cuts.py``).

    A constrained lattice keeps the bit layout (one bit per domain boundary, so policies,
    recodings and evaluators have the same shape); a boundary outside the allowed set is always
    merged (its bit is always 0).  Its ``bottom`` is every allowed boundary kept, which is the
    original data only when nothing is constrained; ``original`` is the original data's recoding
    (evaluators normalize risk by it, seed 000 eq. 2-3, constrained or not).  Without ``allowed``
    every method behaves, and draws random numbers, exactly as before constraints existed.
    """

    def __init__(self, names: Sequence[str], domains: Sequence[Domain],
                 hierarchies: Mapping[str, Hierarchy] | None = None,
                 allowed: Mapping[str, np.ndarray] | None = None) -> None:
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
        mask = np.ones(self.nbits, dtype=bool)
        for name, qi_mask in (allowed or {}).items():
            i = self.index(name)
            qi_mask = np.asarray(qi_mask, dtype=bool)
            if qi_mask.shape != (sizes[i],):
                raise PolicyError(f"the allowed cuts of QI {name!r} need one flag per boundary ({sizes[i]})")
            mask[self.offsets[i]:self.offsets[i + 1]] = qi_mask
        mask.setflags(write=False)
        self.allowed = mask
        self.constrained = not bool(mask.all())
        self.free_bits = int(np.count_nonzero(mask))  # the lattice holds 2 ** free_bits policies
        self._positions = np.flatnonzero(mask)
        self._named: dict[int, list[tuple[str, np.ndarray]]] = {}
        self._cut_texts: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def qi_allowed(self, i: int) -> np.ndarray:
        """The allowed boundaries of QI ``i`` (all True when the spec does not restrict it)."""
        return self.allowed[self.offsets[i]:self.offsets[i + 1]]

    def named_forms(self, i: int) -> list[tuple[str, np.ndarray]]:
        """The named text forms of QI ``i`` written without a search (``digits=3``, ``by=month``), computed once."""
        if i not in self._named:
            self._named[i] = named_forms(self, i)
        return self._named[i]

    def cut_texts(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """QI ``i``'s values as a cut list writes them, and which read back (``policies.text.cut_texts``)."""
        if i not in self._cut_texts:
            self._cut_texts[i] = cut_texts(self.domains[i])
        return self._cut_texts[i]

    def free_positions(self) -> int | np.ndarray:
        """What a search permutes to order the allowed bits at random: ``nbits`` when nothing is
        constrained (``rng.permutation(n)``, as before constraints existed), else the positions."""
        return self._positions if self.constrained else self.nbits

    def original(self) -> Recoding:
        """The original data (every boundary kept) as a recoding, constrained or not."""
        rec = Policy(self, b"\x01" * self.nbits).recoding()
        return Recoding(rec.qis, name="original data")

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
        policy = Policy(self, arr.astype(np.uint8).tobytes())
        self._check(policy)
        return policy

    def top(self) -> Policy:
        """The most general policy: every QI in one group."""
        return Policy(self, bytes(self.nbits))

    def bottom(self) -> Policy:
        """The most specific policy: every allowed boundary kept (the original data when
        nothing is constrained)."""
        return Policy(self, self.allowed.astype(np.uint8).tobytes())

    def index(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            raise PolicyError(
                f"unknown QI {name!r} in policy; the QIs are {', '.join(self.names)}"
            ) from None

    def parse(self, text: str) -> Policy:
        """Parse a policy text (the forms per QI are in ``policies.text``).

        Segments are separated by ``|``; QIs left out are kept as they are (``bottom``: every
        allowed boundary).  The whole text may also be ``top`` or ``bottom``.  A cut the spec
        does not allow is refused, naming the allowed ones.
        """
        text = text.strip()
        if not text.strip("| \t\n"):  # an unset shell variable must not mean "keep everything"
            raise PolicyError("the policy text is empty; write one, e.g. 'age:cuts=18,65|zip:top', or 'bottom' "
                              "to keep every QI as it is")
        if text in ("top", "bottom"):
            return self.top() if text == "top" else self.bottom()
        bits = self.bottom().array.astype(np.uint8)
        seen: set[str] = set()
        for _, name, body in segments(text):
            i = self.index(name)
            if name in seen:
                raise PolicyError(f"policy names QI {name!r} twice; give each QI once")
            seen.add(name)
            lo, hi = self.offsets[i], self.offsets[i + 1]
            bits[lo:hi] = parse_qi(self, i, body)
        return Policy(self, bits.tobytes())

    def text(self, policy: Policy, bits: bool = False) -> str:
        """The canonical text of ``policy`` (``policies.text.format_qi`` per QI), or with ``bits``
        the bit string of every QI (``age:0110…|sex:1``); both parse back to ``policy``."""
        if bits:
            return "|".join(f"{name}:{bit_text(policy.qi_bits(i))}" for i, name in enumerate(self.names))
        return "|".join(f"{name}:{format_qi(self, i, policy.qi_bits(i))}" for i, name in enumerate(self.names))

    # -- order ------------------------------------------------------------------------
    def _check(self, *policies: Policy) -> None:
        for p in policies:
            if len(p.bits) != self.nbits:
                raise PolicyError("policy does not belong to this lattice (wrong length)")
            if self.constrained and np.any(p.array & ~self.allowed):
                bad = int(np.flatnonzero(p.array & ~self.allowed)[0])
                q = int(self.qi_of_bit[bad])
                raise PolicyError(f"policy cuts QI {self.names[q]!r} where the spec allows no cut (before "
                                  f"{self.domains[q].text(bad - self.offsets[q] + 1)}); its allowed cuts are "
                                  f"{format_qi(self, q, self.qi_allowed(q))}")

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
        return [self._flip(p, int(i)) for i in np.flatnonzero(~p.array & self.allowed)]

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
        self._check(p, upper, lower)
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
        """A random lattice node; each allowed boundary is kept with probability ``density``
        (the same draws constrained or not: a disallowed boundary's draw is discarded)."""
        return Policy(self, ((rng.random(self.nbits) < density) & self.allowed).astype(np.uint8).tobytes())


def parse_release(lattice: Lattice, text: str) -> Policy | Recoding:
    """What a policy text names: the lattice policy, or — when a segment names a hierarchy level
    that groups values that are not adjacent in the domain (``race:level=1``) — a recoding, which
    every release path and evaluator takes but no lattice search visits.  The other segments are
    read as ``Lattice.parse`` reads them."""
    if text.strip() in ("top", "bottom") or not text.strip("| \t\n"):
        return lattice.parse(text)
    parts = segments(text)
    scattered = {}
    for _, name, body in parts:
        hierarchy = lattice.hierarchies.get(name)
        if not body.startswith("level=") or hierarchy is None or name not in lattice.names:
            continue
        try:
            level = int(body[6:])
        except ValueError:
            continue  # the lattice's parser says what is wrong with it
        if 0 <= level < hierarchy.height:
            rec = hierarchy.recoding(lattice.domains[lattice.index(name)], level)
            if not rec.contiguous:
                scattered[name] = rec
    if not scattered:
        return lattice.parse(text)
    rest = "|".join(segment for segment, name, _ in parts if name not in scattered)
    base = lattice.parse(rest) if rest else lattice.bottom()
    qis = tuple(scattered[name] if name in scattered else base.qi_recoding(i) for i, name in enumerate(lattice.names))
    return Recoding(qis, name="|".join(segment for segment, _, _ in parts))
