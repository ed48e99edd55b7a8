"""What a release's figures count, in words: records, or persons when the spec declares ``[person]``.

With ``[person] column = "patient_id"`` a table holds several rows per person and every figure
counts distinct persons (k, sample uniques, risk, suppression; ``release.figures``).  A verdict
that says "among 20,000 records" when the 20,000 are patients of a 54,000-row table misleads the
reviewer who signs it, so every sentence a person reads takes its noun from one ``Unit``: the
gate's refusals, the report's headline, page, charts and model description.  Rows stay "rows"
wherever rows are meant (a table's row count, the rows blanked with a suppressed person).

Only words follow the unit: machine keys ("records", "sample_uniques" in a sidecar or a report's
JSON) are a format and keep their names; the sidecar's ``figures.unit`` says what they count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Unit:
    """The noun of what the figures count (``one``/``many``) and the name of one unit's risk.

    ``risk`` names the figure r(g) of one unit ("record risk"; with persons "risk per person",
    one phrasing used everywhere, since "record risk" of a person would name a row)."""

    one: str  # "record" | "person"
    many: str  # "records" | "persons"
    risk: str  # "record risk" | "risk per person"

    @classmethod
    def of(cls, person: object | None) -> Unit:
        """The unit of a spec's ``person`` section (or a release's person key): persons when given."""
        return PERSONS if person is not None else RECORDS

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Unit:
        """The unit a report dict carries (``to_dict``); records for a report written before it did."""
        if not data:
            return RECORDS
        return PERSONS if data.get("many") == PERSONS.many else RECORDS

    @property
    def persons(self) -> bool:
        return self.many == PERSONS.many

    def noun(self, n: float) -> str:
        """``record`` for one, ``records`` otherwise."""
        return self.one if n == 1 else self.many

    def count(self, n: float) -> str:
        """``1 record``, ``20,000 persons``."""
        return f"{n:,} {self.noun(n)}"

    @property
    def whose(self) -> str:
        """The possessive of one unit: ``record's``, ``person's``."""
        return f"{self.one}'s"

    @property
    def Many(self) -> str:  # noqa: N802 (the capitalized word, for a sentence's start)
        return self.many[:1].upper() + self.many[1:]

    def to_dict(self) -> dict[str, str]:
        return {"one": self.one, "many": self.many, "risk": self.risk}


RECORDS = Unit("record", "records", "record risk")
PERSONS = Unit("person", "persons", "risk per person")
