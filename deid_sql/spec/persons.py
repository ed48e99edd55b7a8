"""Persons, not rows: the ``[person]`` declaration and the per-person rules of the QIs.

A hospital's encounters table has a row per visit, so a patient with six visits would be a
"group of six" on their own if rows were counted as people.  With ``[person] column =
"patient_id"`` every figure counts persons: the rows are reduced to one tuple of QI values per
person when the cells are built (``loading``), so the evaluators, the searches and the gate all
work on persons without knowing it.

A QI must be a property of the person.  One that varies within a person is refused by the
load, unless its ``[[qi]]`` says which of the person's values stands for them (``per_person =
"first" | "last" | "min" | "max"``; first and last by ``[person] order``).  The number of rows a
person has can itself single them out ("seven admissions this year"); ``derived = "rows"`` on a
``[[qi]]`` (an integer domain) makes it a QI like any other.  Stdlib only: the spec parses it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import Problems

PERSON_KEYS = {"column", "order", "shift_days"}
#: which of a person's values stands for the person, when a QI varies within a person
PER_PERSON = ("first", "last", "min", "max")
#: QIs computed from a person's rows rather than read from a column
DERIVED = ("rows",)
MAX_SHIFT_DAYS = 36_500  # a date shift of a century either way: more is a typo, not a shift


@dataclass(frozen=True)
class PersonSpec:
    """The ``[person]`` declaration: the column that names a person, and the column that orders
    a person's rows (for ``per_person = "first"`` and ``"last"``)."""

    column: str
    order: str | None = None
    shift_days: int | None = None  # D of the date shift: each person's offset is in [-D, +D] days


    def columns(self) -> list[str]:
        """The source columns the person declaration reads."""
        return [self.column] + ([self.order] if self.order is not None else [])


def parse_person(raw: Any, problems: Problems) -> PersonSpec | None:
    """``[person]``: ``column`` (required) and ``order``; None without the table (a row is a person)."""
    if raw is None:
        return None
    where = "[person]"
    if not isinstance(raw, dict):
        problems.append(f'{where} must be a table: column = "patient_id" (the column that names a person)')
        return None
    problems.unknown_keys(raw, PERSON_KEYS, where)
    column, order = raw.get("column"), raw.get("order")
    if not isinstance(column, str) or not column:
        problems.add(where, 'needs column = "<the column that names a person>", e.g. column = "patient_id"')
        return None
    if order is not None and (not isinstance(order, str) or not order):
        problems.add(where, 'order must name a column, e.g. order = "admitted"')
        order = None
    if order == column:
        problems.add(where, f"order = {order!r} is the person column itself; name the column that orders a "
                            f"person's rows (a date or a visit number)")
        order = None
    return PersonSpec(column, order, _shift_days(raw.get("shift_days"), where, problems))


def _shift_days(days: Any, where: str, problems: Problems) -> int | None:
    """``shift_days``: a whole number of days, 1 to ``MAX_SHIFT_DAYS``, or None."""
    if days is None:
        return None
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_SHIFT_DAYS:
        problems.add(where, f"shift_days = {days!r} must be a whole number of days from 1 to {MAX_SHIFT_DAYS:,} (each "
                            f"person's dates move by a secret offset in [-shift_days, +shift_days])",
                     "e.g. shift_days = 30")
        return None
    return days


def check_shift(person: PersonSpec | None, shifted: Sequence[tuple[str, Sequence[str]]], problems: Problems) -> None:
    """``shift`` lists (``(where, columns)`` of each table) need ``[person]`` with ``shift_days``: a
    shift is one offset per person."""
    listed = [(where, cols) for where, cols in shifted if cols]
    if not listed:
        if person is not None and person.shift_days is not None:
            problems.append("[person] shift_days is set, but no table lists a column under shift; list the dates to "
                            "move (e.g. [columns] shift = [\"admitted\"]) or remove shift_days")
        return
    where, cols = listed[0]
    if person is None:
        problems.append(f"{where} shift = {list(cols)!r}: a date shift moves each person's dates by one offset, so it "
                        f"needs [person] column = \"<the column that names a person>\" and shift_days = <days>")
    elif person.shift_days is None:
        problems.append(f"{where} shift = {list(cols)!r} needs [person] shift_days = <days> (each person's dates move "
                        f"by a secret offset in [-shift_days, +shift_days], e.g. shift_days = 30)")


def parse_qi_rules(q: Mapping[str, Any], kind: str | None, where: str, problems: Problems
                   ) -> tuple[str | None, str | None]:
    """A ``[[qi]]``'s ``per_person`` and ``derived`` (each None when not given)."""
    per_person, derived = q.get("per_person"), q.get("derived")
    if per_person is not None and per_person not in PER_PERSON:
        problems.add(where, f"per_person = {per_person!r} must be one of {', '.join(PER_PERSON)} (which of a "
                            f"person's values stands for the person)")
        per_person = None
    if per_person in ("min", "max") and kind == "category":
        problems.add(where, f"per_person = {per_person!r} needs an ordered kind (integer, date, zip); a category "
                            f"QI takes \"first\" or \"last\" (by [person] order)")
        per_person = None
    if derived is not None:
        if derived not in DERIVED:
            problems.add(where, f"derived = {derived!r} is unknown; the derived QIs are: {', '.join(DERIVED)} "
                                f"(the number of rows a person has)")
            derived = None
        elif kind != "integer" or q.get("min") is None or q.get("max") is None:
            problems.add(where, 'derived = "rows" needs an integer domain: kind = "integer", min = 1, max = <most '
                                'rows a person may have> (e.g. max = 50)')
            derived = None
        elif "column" in q:
            problems.add(where, f"derived = \"rows\" is computed, not read: remove column = {q['column']!r} (the "
                                f"released column is named after the QI, {q.get('name')!r})")
        if per_person is not None:
            problems.add(where, "a derived QI has one value per person already; remove per_person")
            per_person = None
    return per_person, derived


def check_person(person: PersonSpec | None, qis: Sequence[Any], weights: str | None, problems: Problems) -> None:
    """The rules between ``[person]`` and the QIs, checked without data."""
    ruled = [q for q in qis if q.per_person is not None or q.derived is not None]
    if person is None:
        for q in ruled:
            what = f"per_person = {q.per_person!r}" if q.per_person else f"derived = {q.derived!r}"
            problems.append(f"[[qi]] {q.name!r}: {what} needs [person] column = \"<the column that names a "
                            f"person>\" (without it a row is a person)")
        return
    for q in qis:
        if q.derived is None and q.column == person.column:
            problems.append(f"[person] column {person.column!r} is also the QI {q.name!r}: a person key tells every "
                            f"person apart; remove the QI (the key is released under [columns], e.g. pseudonymize)")
        if q.derived is None and q.column == person.order:
            continue  # ordering by a QI column (an admission date) is fine
        if q.per_person in ("first", "last") and person.order is None:
            problems.append(f"[[qi]] {q.name!r}: per_person = {q.per_person!r} needs [person] order = \"<column>\" "
                            f"(the column that orders a person's rows, e.g. a date)")
    if weights is not None:
        problems.append("[weights] with [person]: sampling weights weigh rows, and the figures count persons; remove "
                        "one of them")


def null_keys_problem(person: PersonSpec, rows: int, where: str = "source") -> str:
    """The refusal of rows without a person key (the load's and a policy file batch's): every
    row must name its person, or its person could not be counted."""
    return (f"[person] column {person.column!r} is NULL in {rows:,} row(s); every row must name its person: fill "
            f"the key or filter those rows out of the {where}")


def varying_problem(name: str, persons: int, example: tuple[str, str, str] | None) -> str:
    """The refusal of a QI without a ``per_person`` rule that varies within ``persons`` persons;
    ``example``: one such person's key with their least and greatest value (as text)."""
    shown = f" (e.g. person {example[0]!r} has {example[1]!r} and {example[2]!r})" if example else ""
    return (f"QI {name!r} varies within {persons:,} person(s){shown}; a QI must be a property of the person: add "
            f"per_person = \"first\", \"last\", \"min\" or \"max\" to its [[qi]] (first and last by [person] order)")


def rows_out_problem(name: str, persons: int, lo: object, hi: object) -> str:
    """The refusal of persons whose row count is outside the derived QI's declared domain."""
    return f"QI {name!r}: {persons:,} person(s) have a number of rows outside {lo}...{hi}; widen its min/max"


__all__ = ["DERIVED", "PER_PERSON", "PersonSpec", "check_person", "check_shift", "null_keys_problem", "parse_person",
           "parse_qi_rules", "rows_out_problem", "varying_problem"]
