"""Which released groups a release suppresses: the compiler's, the gate's and the report's rule.

A release suppresses whole groups: every record of the group shows ``*`` in each QI and is
flagged in ``deid_suppressed``.  Two rules choose the groups:

- ``below``: groups of fewer than k records (``--suppress-below k`` of materialize, view,
  compile and dbt; the compiler's window count decides on the rows), or of fewer than k persons
  with ``[person]`` (the window counts each person's first row);
- ``groups``: an explicit set of label tuples (``anonymize``'s optimum: the groups its search
  suppressed, which depend on the privacy model, not only on the group size); the compiler
  joins them as a ``VALUES`` table, never as a literal list.

``mask`` applies the same rule to the groups a recoding makes of the sample cells, so a report
computed from cells describes the same suppression the release query performed (the report
checks this: its figures must equal those measured on the released rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Suppression:
    """The suppression of one release: a size rule or a set of label tuples, and the rule in words."""

    below: int | None = None
    groups: frozenset[tuple[str, ...]] | None = None
    rule: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)  # e.g. anonymize's privacy models and limit

    def __post_init__(self) -> None:
        if (self.below is None) == (self.groups is None):
            raise ValueError("a suppression has exactly one rule: below=k or groups=label tuples")

    @classmethod
    def smaller_than(cls, k: int, unit: str = "records") -> Suppression:
        """Groups of fewer than ``k`` of ``unit``: records, or persons with ``[person]`` (every row of
        a person then sits in one group, so a suppressed person loses all of their rows' QIs)."""
        what = "row" if unit == "persons" else "record"
        return cls(below=int(k), rule=f"every {what} of a released group of fewer than {int(k):,} {unit} shows "
                                      f"'*' in each QI (and deid_suppressed = true)")

    @classmethod
    def of_groups(cls, groups: Sequence[tuple[str, ...]], rule: str,
                  parameters: dict[str, Any] | None = None) -> Suppression:
        return cls(groups=frozenset(tuple(g) for g in groups), rule=rule, parameters=dict(parameters or {}))

    @classmethod
    def of(cls, value: Suppression | int | None) -> Suppression | None:
        """A suppression from what the API takes: None, k (groups of fewer than k records), or one."""
        if value is None or isinstance(value, Suppression):
            return value
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise TypeError(f"a suppression is a Suppression or a whole number k, not {value!r}")
        return cls.smaller_than(int(value))

    @property
    def ordered_groups(self) -> list[tuple[str, ...]]:
        """The label tuples in a fixed order (the compiled SQL is the same on every run)."""
        return sorted(self.groups or ())

    def mask(self, labels: Sequence[Sequence[str]], ids: Sequence[np.ndarray], m: np.ndarray) -> np.ndarray:
        """Which of the groups (per QI group ids into ``labels``, records ``m``) are suppressed."""
        m = np.asarray(m)
        if self.below is not None:
            return m < self.below
        assert self.groups is not None
        if not self.groups or not m.size:
            return np.zeros(m.size, dtype=bool)
        return np.fromiter((tuple(labels[q][int(ids[q][i])] for q in range(len(ids))) in self.groups
                            for i in range(m.size)), dtype=bool, count=m.size)

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "below": self.below,
                "groups": None if self.groups is None else len(self.groups), **self.parameters}
