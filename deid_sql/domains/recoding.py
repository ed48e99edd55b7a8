"""Recodings: the general form of every generalization deid-sql applies.

Per QI a recoding assigns each domain position a group id.  A lattice policy is
the recoding whose groups are consecutive intervals; a full-domain hierarchy
level is another; Safe Harbor (with its non-contiguous ``000`` ZIP bucket) is a
third.  The evaluator and the compiler take recodings, so all three share one path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import PolicyError
from .domain import Domain


@dataclass(frozen=True, eq=False)
class QIRecoding:
    """One QI's value -> group map.

    ``group_of[pos]`` is the group id (0..k-1, numbered in domain order of first
    appearance).  Labels name groups in generalized output; they are given, or
    derived from ``domain`` on first use (evaluation never needs them, so a search
    does not pay for naming thousands of groups).
    """

    group_of: np.ndarray
    given_labels: tuple[str, ...] | None = None
    domain: Domain | None = field(default=None, repr=False)
    n_groups: int = field(init=False)
    widths: np.ndarray = field(init=False, repr=False)
    contiguous: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        gid = np.asarray(self.group_of, dtype=np.int64)
        k = int(gid.max()) + 1 if gid.size else 0
        if self.given_labels is not None:
            if len(self.given_labels) < k:
                raise PolicyError("a recoding needs one label per group")
            k = len(self.given_labels)
        elif self.domain is None:
            raise PolicyError("a recoding needs labels or the domain to name its groups")
        if gid.ndim != 1 or (gid.size and gid.min() < 0):
            raise PolicyError("recoding group ids must lie in 0..k-1")
        widths = np.bincount(gid, minlength=k)
        if (widths == 0).any():
            raise PolicyError("every recoding group must contain at least one domain value")
        object.__setattr__(self, "group_of", gid)
        object.__setattr__(self, "n_groups", k)
        object.__setattr__(self, "widths", widths)
        changes = int(np.count_nonzero(np.diff(gid))) if gid.size else 0
        object.__setattr__(self, "contiguous", changes == k - 1)

    @property
    def labels(self) -> tuple[str, ...]:
        if self.given_labels is None:
            assert self.domain is not None
            if self.contiguous:
                first, last = self.bounds()
                names = tuple(self.domain.interval_label(int(a), int(b)) for a, b in zip(first, last))
            else:
                # plain ints: a date domain's ``value`` adds them to a timedelta, which refuses numpy ints
                names = tuple(self.domain.set_label([int(p) for p in self.members(g)]) for g in range(self.n_groups))
            if len(set(names)) < len(names):  # escaping makes this impossible; a release must never merge groups
                seen: set[str] = set()
                twice = next(n for n in names if n in seen or seen.add(n))  # type: ignore[func-returns-value]
                raise PolicyError(f"two groups of one QI would both be labelled {twice!r}, so the release could not "
                                  f"tell them apart; rename the values that make the labels equal")
            object.__setattr__(self, "given_labels", names)
        return self.given_labels  # type: ignore[return-value]

    def members(self, group: int) -> np.ndarray:
        """Domain positions in ``group``, ascending."""
        return np.flatnonzero(self.group_of == group)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """First and last position of every group (meaningful when contiguous)."""
        k = self.n_groups
        first = np.full(k, -1, dtype=np.int64)
        last = np.zeros(k, dtype=np.int64)
        pos = np.arange(self.group_of.size)
        first[self.group_of[::-1]] = pos[::-1]
        last[self.group_of] = pos
        return first, last

    @classmethod
    def from_groups(cls, domain: Domain, group_of: Sequence[int] | np.ndarray,
                    labels: Sequence[str] | None = None) -> QIRecoding:
        """Build from group ids, renumbering groups in domain order and naming
        them with the domain's labels unless ``labels`` are given."""
        raw = np.asarray(group_of, dtype=np.int64)
        if raw.size != domain.size:
            raise PolicyError(
                f"recoding covers {raw.size} values but the domain has {domain.size}"
            )
        _, first_idx, inverse = np.unique(raw, return_index=True, return_inverse=True)
        order = np.argsort(first_idx, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        gid = rank[inverse]
        if labels is None:
            return cls(gid, None, domain)
        given = list(labels)
        return cls(gid, tuple(given[int(raw[first_idx[o]])] for o in order), domain)


@dataclass(frozen=True)
class Recoding:
    """A value -> group map for every QI, in the problem's QI order."""

    qis: tuple[QIRecoding, ...]
    name: str = ""

    def __len__(self) -> int:
        return len(self.qis)

    @property
    def contiguous(self) -> bool:
        return all(q.contiguous for q in self.qis)
