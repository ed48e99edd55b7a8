"""One QI as a policy file saves it: its declaration, its full domain in JSON, and the policy's
intervals on it (or, for a recoding that is not a lattice policy's, every group with its values),
from which the saved recoding is rebuilt without the data the policy was chosen on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..domains.domain import CategoryDomain, DateDomain, Domain, IntegerDomain
from ..domains.recoding import QIRecoding
from ..policies.lattice import Policy


def domain_to_json(domain: Domain) -> dict[str, Any]:
    if isinstance(domain, IntegerDomain):
        return {"min": domain.lo, "max": domain.hi}
    if isinstance(domain, DateDomain):
        return {"min": domain.lo.isoformat(), "max": domain.hi.isoformat()}
    assert isinstance(domain, CategoryDomain)
    return {"values": list(domain.values)}


def value_to_json(domain: Domain, pos: int) -> Any:
    """A domain value as JSON: an integer, an ISO date, or a string."""
    return int(domain.value(pos)) if isinstance(domain, IntegerDomain) else domain.text(pos)  # type: ignore[call-overload]



@dataclass(frozen=True)
class Interval:
    """A group of more than one consecutive domain value: positions ``first..last``."""

    first: int
    last: int
    label: str


@dataclass(frozen=True)
class SavedGroup:
    """One group of a recoding saved group by group: its label and its values' domain positions."""

    label: str
    positions: tuple[int, ...]


@dataclass(frozen=True)
class SavedQI:
    """One QI as saved: its declaration, its full domain and the policy's intervals on it."""

    name: str
    column: str
    kind: str
    nulls: str
    domain: Domain
    intervals: tuple[Interval, ...]  # only the groups wider than one value; other values are kept
    groups: tuple[SavedGroup, ...] | None = None  # every group, for a recoding that is not lattice-shaped
    transform: str | None = None  # the declared value transformation, as the spec writes it (``spec.transform``)

    def declaration(self) -> dict[str, Any]:
        """The part of the spec hash this QI contributes (a transform only when declared)."""
        return {"name": self.name, "column": self.column, "kind": self.kind, "nulls": self.nulls,
                "domain": domain_to_json(self.domain)} | ({"transform": self.transform} if self.transform else {})

    def bits(self) -> np.ndarray:
        """The policy's bits for this QI: 1 where the boundary after a value is kept."""
        bits = np.ones(self.domain.size - 1, dtype=np.uint8)
        for iv in self.intervals:
            bits[iv.first:iv.last] = 0
        return bits

    @classmethod
    def from_policy(cls, name: str, column: str, kind: str, nulls: str, domain: Domain, policy: Policy,
                    index: int) -> SavedQI:
        return cls.from_recoding(name, column, kind, nulls, domain, policy.qi_recoding(index))

    @classmethod
    def from_recoding(cls, name: str, column: str, kind: str, nulls: str, domain: Domain,
                      rec: QIRecoding) -> SavedQI:
        """Intervals when the recoding is a lattice policy's (adjacent values, the domain's interval
        labels); otherwise every group with its label and values (a hierarchy level's own labels,
        values that are not adjacent)."""
        first, last = rec.bounds() if rec.contiguous else (None, None)
        labels = list(rec.labels)
        if first is not None and all(labels[g] == domain.interval_label(int(a), int(b))
                                     for g, (a, b) in enumerate(zip(first, last))):
            intervals = tuple(Interval(int(a), int(b), labels[g]) for g, (a, b) in enumerate(zip(first, last))
                              if b > a)
            return cls(name, column, kind, nulls, domain, intervals)
        groups = tuple(SavedGroup(labels[g], tuple(int(p) for p in rec.members(g))) for g in range(rec.n_groups))
        return cls(name, column, kind, nulls, domain, (), groups)

    def recoding(self) -> QIRecoding:
        """The saved recoding of this QI, from the saved domain and intervals or groups only."""
        if self.groups is None:
            gid = np.concatenate(([0], np.cumsum(self.bits(), dtype=np.int64)))
            return QIRecoding(gid, None, self.domain)
        gid = np.empty(self.domain.size, dtype=np.int64)
        for g, group in enumerate(self.groups):
            gid[list(group.positions)] = g
        return QIRecoding.from_groups(self.domain, gid, [group.label for group in self.groups])

    def to_json(self) -> dict[str, Any]:
        d = self.domain
        out = self.declaration()
        if self.groups is not None:
            return out | {"groups": [{"label": g.label, "values": [value_to_json(d, p) for p in g.positions]}
                                     for g in self.groups]}
        return out | {"intervals": [{"label": iv.label, "first": value_to_json(d, iv.first),
                                     "last": value_to_json(d, iv.last)} for iv in self.intervals]}


__all__ = ["Interval", "SavedGroup", "SavedQI", "domain_to_json", "value_to_json"]
