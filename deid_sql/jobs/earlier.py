"""What a recipient already holds, as the search reads it (METHODS decision 16, issue 41).

A release to a recipient is judged on every person's combined label: their labels in the earlier
releases to that recipient (the ledger, ``deid_sql.ledger``), then this one.  The gate judges the
written release so; for ``anonymize`` to find the best policy whose union passes, the search needs
the earlier labels while it tries policies.  They are a fixed value of each person, like a
sensitive column's: each person's QI positions (as the cells place them) with the pseudonym a
release gives them (``loading.sensitive.pseudonymized_positions``, one query), joined with the
recipient's state in the ledger, then counted per (cell, earlier combined label).  The full-domain
model ``fulldomain.UnionKAnonymity`` judges k on them.

Only k is searched on the union; the union's other criteria (risks, the attribute criteria) are
judged by the gate on the written release, which refuses it when they fail.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..errors import DeidError
from ..ledger.combine import distinct_persons, person_keys
from ..ledger.store import Ledger, exists
from ..loading.sensitive import SensitiveCells, pseudonymized_positions
from ..problem import Problem
from ..release.gate import usable_entries
from ..release.union import LedgerPlan

#: the name the earlier labels go by as a value column (never a source column's: it has brackets and spaces)
EARLIER = "(earlier releases)"
NEW = "not released before"


@dataclass(frozen=True)
class EarlierReleases:
    """The earlier releases to the recipient of a spec's next release: their ids, the ledger entry
    the state is read before (``before``: the next entry, or a recorded one when a report runs a
    search again), the persons of the source the recipient already holds, and the cells."""

    recipient: str
    releases: tuple[str, ...]
    before: int
    held: int
    cells: SensitiveCells

    def words(self) -> str:
        n = len(self.releases)
        return (f"{n} earlier release{'s' if n != 1 else ''} to {self.recipient!r} "
                f"({self.held:,} of these persons held)")


def earlier_releases(problem: Problem, before: int | None = None) -> EarlierReleases | None:
    """The earlier releases to the recipient of ``problem``'s spec, or None: the release cannot be
    linked (no pseudonymized column), or no ledger entry to that recipient comes before ``before``
    (default: every entry).  Refuses a ledger that fails its chain or holds another key's releases
    to the recipient, as the gate does."""
    spec = problem.spec
    plan = LedgerPlan.of(spec, problem.released_columns)
    if plan is None or not exists(plan.location):
        return None
    if spec.person is not None and plan.link != spec.person.column:
        raise DeidError(f"the release links persons by {plan.link!r}, not by the [person] key "
                        f"{spec.person.column!r}: the search cannot count what the recipient holds per person; "
                        f"pseudonymize the [person] key (or drop {plan.link!r})")
    with Ledger(plan.location, create=False) as ledger:
        entries = usable_entries(ledger, plan)
        following = max((e.seq for e in ledger.entries()), default=0) + 1
        before = following if before is None else before
        earlier = [e for e in entries if e.seq < before]
        if not earlier:
            return None
        positions, pseudonyms = pseudonymized_positions(problem, plan.link)
        unlinked = np.asarray(pseudonyms.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        keys = np.zeros(len(pseudonyms), dtype=np.int64)
        keys[~unlinked] = person_keys(pseudonyms.filter(pa.array(~unlinked)))
        names, person_of_row = distinct_persons(keys)
        # the stored state, or as it was before an entry (a report of that release runs the search again)
        held, _ = ledger.held(plan.recipient, names, len(earlier), None if before >= following else before)
    row_held = np.where(unlinked, -1, held[person_of_row])  # a row without a pseudonym links to nothing
    return EarlierReleases(plan.recipient, tuple(e.release for e in earlier), before,
                           int(len(np.unique(person_of_row[row_held >= 0]))),
                           _cells(positions, row_held, spec.person is not None))


def _cells(positions: np.ndarray, held: np.ndarray, per_person: bool) -> SensitiveCells:
    """Persons (rows without ``[person]``) per (cell, earlier combined label); "not released before"
    is a label of its own, code 0 when any person has it."""
    labels, code = np.unique(held, return_inverse=True)
    values = tuple(NEW if h < 0 else f"combined label {h}" for h in labels)
    rows = np.column_stack([positions.astype(np.int64), code.astype(np.int64)])
    cells, counts = np.unique(rows, axis=0, return_counts=True)
    return SensitiveCells(EARLIER, np.ascontiguousarray(cells[:, :-1], dtype=np.int32),
                          cells[:, -1].astype(np.int32), counts.astype(np.int64), values, per_person)
