"""The person behind the rows: a testing log has a row per test, and a patient with four tests
would be "a group of four" on their own if rows were counted as people (``deid-sql help persons``).

When a column the spec would drop as an identifier has an id-like name (``patient_id``, ``MRN``,
``member_no``) and its values repeat across rows (fewer distinct values than rows, most of them on
more than one row), ``init`` proposes it as the ``[person]`` key: the figures then count persons.
The key is pseudonymized rather than dropped, since a written release counted in persons carries
it (the gate counts persons by it); its secret is read from an environment variable, never the
spec.  Only one column names a person: a name that says whose (patient, person, member …) is
preferred, then the table's order.

A QI must be one value per person.  A QI that varies within a person gets the rule that says
which value stands for them: the value on the person's first row when a date column orders the
rows (``[person] order``), else the least value for numbers, dates and ZIP codes; a category that
varies with nothing to order it by is dropped for review, saying why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..contract.secret import HINT as SECRET_HINT
from .detect import Proposal, described, id_like, says_person, tokens

#: the environment variable a proposed spec reads the pseudonyms' key from (never the spec)
SECRET_ENV = "DEID_SECRET"
__all__ = ["SECRET_ENV", "SECRET_HINT", "PersonProposal", "choose"]  # SECRET_HINT: how to make the key, as said
#: the kinds of QI whose least value may stand for a person (``per_person = "min"``)
ORDERED_KINDS = ("integer", "date", "zip")
#: words of a date column that does not order a person's rows (it is the same on each of them)
BIRTH_WORDS = {"birth", "dob", "birthdate", "birthday", "born"}

#: how many distinct values of a column more than one row holds: column → count
Repeated = Callable[[str], int]
#: how many persons hold more than one value of a column: (person key, column) → count
Varying = Callable[[str, str], int]


@dataclass
class PersonProposal:
    """The proposed ``[person]``: its key column, the column ordering a person's rows (when a QI
    needs it), and the comment above it."""

    column: str
    persons: int
    rows: int
    order: str | None = None
    notes: list[str] | None = None


def choose(proposals: Sequence[Proposal], repeated: Repeated, varying: Varying) -> PersonProposal | None:
    """The person key among the identifiers, marked ``group = "person"`` (pseudonymized), and every
    QI made one value per person; None (nothing changed) when no id-like column repeats."""
    candidates = [p for p in proposals if _candidate(p)]
    candidates.sort(key=lambda p: not says_person(p.column))  # stable: then the table's order
    chosen: Proposal | None = None
    for proposal in candidates:
        prof = proposal.profile
        if prof.nulls:
            proposal.reason += (f"; its values repeat across rows, but {prof.nulls:,} rows have none, and a [person] "
                                f"key needs one on every row")
            continue
        shared = repeated(proposal.column)
        if 2 * shared <= (prof.distinct or 0):
            continue
        if chosen is None:
            chosen = proposal
            proposal.group = "person"
            proposal.reason = (f"the person key ([person]): {prof.distinct:,} values over {prof.rows:,} rows, "
                               f"{shared:,} of them on more than one row, so the figures count persons, not rows; "
                               f"pseudonymized (an HMAC under the key in ${SECRET_ENV}), as a release counted in "
                               f"persons carries the key")
        else:
            proposal.reason += f"; its values repeat across rows too, but one column names a person: {chosen.column!r}"
    if chosen is None:
        return None
    person = PersonProposal(chosen.column, chosen.profile.distinct or 0, chosen.profile.rows, notes=[])
    _per_person(proposals, person, varying)
    return person


def _candidate(p: Proposal) -> bool:
    prof = p.profile
    return (p.group == "identifier" and id_like(p.column) and prof.family in ("text", "integer")
            and prof.distinct is not None and 1 < prof.distinct < prof.rows)


def _order(proposals: Sequence[Proposal]) -> str | None:
    """The column that orders a person's rows: the first date or timestamp column that is not a
    birth date (the same on each of a person's rows, it orders nothing)."""
    for p in proposals:
        if p.profile.family in ("date", "timestamp") and not set(tokens(p.column)) & BIRTH_WORDS:
            return p.column
    return None


def _per_person(proposals: Sequence[Proposal], person: PersonProposal, varying: Varying) -> None:
    order = _order(proposals)
    for proposal in proposals:
        qi = proposal.qi
        if qi is None:
            continue
        spread = varying(person.column, qi.column)
        if not spread:
            continue
        persons = f"{spread:,} person" + ("" if spread == 1 else "s")
        if order is not None:
            qi.per_person, person.order = "first", order
            qi.notes.append(f"varies within {persons}: the value on a person's first row by {order!r} stands for "
                            f"them, on every row of theirs (per_person = \"first\")")
        elif qi.kind in ORDERED_KINDS:
            qi.per_person = "min"
            qi.notes.append(f"varies within {persons}: a person's least value stands for them, on every row of "
                            f"theirs (per_person = \"min\"; for an age, the age at the first row)")
        else:
            proposal.demote(f"review: looks like {described(qi.concept)} (a quasi-identifier), but it varies within "
                            f"{persons} and no date column orders a person's rows; a QI is one value per person: "
                            f"declare it with per_person = \"first\" and [person] order = \"<the column ordering "
                            f"a person's rows>\"")
