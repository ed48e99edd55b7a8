"""A de-identification policy: one bit-string per QI, concatenated (seed 000 §3.2).

Bit ``i`` of a QI is 1 when the boundary between domain values ``i`` and ``i+1``
is kept.  All 1s is the **bottom** (original data), all 0s the **top**.  A policy
is immutable and hashable so searches can cache and deduplicate evaluations.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..domains.recoding import QIRecoding, Recoding

if TYPE_CHECKING:
    from .lattice import Lattice


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
        (``policytext``: named forms where they fit, the cut list otherwise); it is what every
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
