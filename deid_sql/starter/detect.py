"""Each column's proposed role, from its name, its type and its values — guessed conservatively.

A column is proposed as a quasi-identifier only when its name says what it is (age, birth date,
sex or gender, race or ethnicity, ZIP or postcode, marital status) or when it holds dates, and
its values fit a QI kind; its domain is read from the data.  A column is called an identifier
when its name says so (names, ids, MRN, SSN, phone, e-mail, address) or its values do (SSN-like
``ddd-dd-dddd``, e-mail addresses, phone numbers, one value per row).  Everything else is
dropped with a note to review it: a column nobody has looked at never leaves.  Every proposal
carries the reason in words, written beside it in the spec.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..spec.file import qi_name_problem
from .profile import ColumnProfile, as_date, whole_numbers

#: the most categories a proposed category QI lists (more: dropped, with a note)
MAX_CATEGORIES = 100
#: the share of a column's sampled values that must fit an identifier pattern
PATTERN_SHARE = 0.8
#: the fewest rows for "one value per row" to call a column a record key
KEY_ROWS = 20

IDENTIFIER_WORDS = {
    "id", "ids", "uuid", "guid", "mrn", "ssn", "nhs", "npi", "phone", "telephone", "tel", "mobile", "cellphone",
    "fax", "email", "mail", "name", "names", "firstname", "lastname", "surname", "fullname", "forename",
    "givenname", "middlename", "maidenname", "username", "login", "ip", "url", "website", "account", "acct",
    "iban", "license", "licence", "passport", "vin", "plate", "serial", "ein", "tin",
}
KEY_ENDINGS = {"key", "number", "no", "num", "nr"}  # patient_key, record_number, member_no
PLACE_WORDS = {"address", "addr", "street", "city", "town", "county", "precinct", "geocode", "latitude",
               "longitude", "lat", "lon", "lng"}
#: names of what a group may reveal of a person once found in it: a sensitive attribute, kept dropped
#: until reviewed, with the attribute criteria that would judge it proposed under [release]
SENSITIVE_WORDS = {"diagnosis", "diagnoses", "dx", "icd", "disease", "diseases", "condition", "conditions",
                   "illness", "drug", "drugs", "medication", "medications", "prescription", "procedure",
                   "procedures", "treatment", "hiv", "cancer", "pregnancy", "pregnant"}
MAYBE_QI_WORDS = {"education", "occupation", "job", "employment", "employer", "workclass", "country", "nationality",
                  "citizenship", "language", "religion", "income", "salary", "state", "region", "height", "weight",
                  "household", "children", "veteran", "disability", "profession", "school", "degree"}

SSN = re.compile(r"\d{3}-\d{2}-\d{4}")
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
PHONE = re.compile(r"\+?\(?\d[\d ().-]*")
PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


@dataclass
class QIProposal:
    """A proposed ``[[qi]]``: its name, source column, kind and domain, read from the data."""

    name: str
    column: str
    kind: str  # integer | category | zip | date
    concept: str  # what the name says: age, birth date, date, sex, race, zip, marital status, birth year
    min: Any = None
    max: Any = None
    values: list[str] | None = None  # categories in domain order; None: values_from
    values_from: str | None = None
    role: str | None = None  # age | zip | date (Safe Harbor's roles)
    null_label: str | None = None  # set: NULL is a category of its own (nulls = "category")
    population_column: str | None = None  # the census's spelling of the column, when it differs
    hierarchy: str | None = None  # a hierarchy file beside the data, as the spec names it (``hierarchies``)
    notes: list[str] = field(default_factory=list)  # further lines of the comment

    def describe(self) -> str:
        """The domain in a few words (the summary line)."""
        if self.kind in ("integer", "date"):
            return f"{self.kind} {self.min}..{self.max}"
        noun = "ZIP codes" if self.kind == "zip" else "categories"
        count = f"{len(self.values)} " if self.values is not None else ""
        return f"{count}{noun}" + (f" from the {self.values_from}" if self.values_from else "")


@dataclass
class Proposal:
    """One column's proposed role: a QI, or dropped as an identifier or for review."""

    profile: ColumnProfile
    group: str  # qi | identifier | review
    reason: str  # the comment beside it: why
    qi: QIProposal | None = None

    @property
    def sensitive(self) -> bool:
        """Dropped for review, but its name says a sensitive attribute (``SENSITIVE_WORDS``)."""
        return self.group == "review" and self.reason.startswith(SENSITIVE_REVIEW)

    @property
    def column(self) -> str:
        return self.profile.name

    def demote(self, reason: str) -> None:
        """Not a QI after all (a census without its column, NULLs): dropped for review, saying why."""
        self.group, self.qi, self.reason = "review", None, reason


#: reads every distinct value of a column as the load spells it: (column, ZIP width or None) → values
ValuesOf = Callable[[str, "int | None"], list[str]]


def tokens(name: str) -> list[str]:
    """The words of a column name: ``PatientID`` → patient, id; ``date_of_birth`` → date, of, birth;
    ``zip5`` → zip (digits trimmed, so a renamed twin ``age_1`` reads as age)."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()  # Âge → Age
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", folded)
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", spaced)
    words = [w.rstrip("0123456789") for w in re.split(r"[\W_]+", spaced.lower())]
    return [w for w in words if w]


def _concept(words: list[str]) -> str | None:
    """What a column's name says it holds, among the likely quasi-identifiers."""
    joined = "".join(words)
    ws = set(words)
    if ws & {"dob", "birthdate", "birthday"} or ("birth" in ws and ws & {"date", "day", "dt"}):
        return "birth date"
    if ws & {"yob", "birthyear"} or ("birth" in ws and "year" in ws):
        return "birth year"
    if "age" in ws or "ages" in ws:
        return "age"
    if ws & {"sex", "gender"}:
        return "sex"
    if ws & {"race", "ethnicity", "ethnic", "ethnicgroup"}:
        return "race"
    if ws & {"marital", "maritalstatus", "married"}:
        return "marital status"
    if ws & {"zip", "zipcode", "postcode", "postal", "postalcode", "plz"} or joined in ("zipcode", "postcode"):
        return "zip"
    return None


def _identifier_by_name(words: list[str]) -> str | None:
    """Why the name says identifier (None: it does not)."""
    if not words:
        return None
    joined = "".join(words)
    ws = set(words)
    if ws & PLACE_WORDS:
        return ("the name looks like a place smaller than a state (Safe Harbor removes it; to release it "
                "generalized, declare it as a category [[qi]])")
    found = sorted(ws & IDENTIFIER_WORDS)
    if found:
        return f"the name looks like an identifier ({found[0]})"
    if len(words) > 1 and words[-1] in KEY_ENDINGS:
        return f"the name looks like a record key ({words[-1]})"
    if joined.endswith("name") or "email" in joined or "phone" in joined or "ssn" in joined:
        return "the name looks like an identifier"
    return None


def _identifier_by_values(p: ColumnProfile) -> str | None:
    """Why the values say identifier: most sampled values SSN-like, e-mails or phone numbers."""
    if p.family != "text" or not p.top:
        return None
    sample = [str(v).strip() for v, _ in p.top]
    for what, test in (("are SSN-like (ddd-dd-dddd)", lambda s: SSN.fullmatch(s) is not None),
                       ("look like e-mail addresses", lambda s: EMAIL.fullmatch(s) is not None),
                       ("look like phone numbers", _phone)):
        if sum(map(test, sample)) >= PATTERN_SHARE * len(sample):
            return f"the values {what}"
    return None


def _phone(text: str) -> bool:
    digits = sum(c.isdigit() for c in text)
    return PHONE.fullmatch(text) is not None and 10 <= digits <= 15 and (digits < len(text) or text.startswith("+"))


def shape(value: Any) -> str:
    """A value's shape, not its content (an identifier's sample): digits as 9, letters as a or A."""
    out = []
    for c in str(value)[:24]:
        if c.isdigit():
            out.append("9")
        elif c.isalpha():
            out.append("A" if c.isupper() else "a")
        else:
            out.append(c)
    return "".join(out) + ("…" if len(str(value)) > 24 else "")


def propose(profiles: Sequence[ColumnProfile], values_of: ValuesOf) -> list[Proposal]:
    """Every column's proposal, in the table's order; QI names unique and plain, each of the
    roles ``age`` and ``zip`` given once."""
    out = [_one(p, values_of) for p in profiles]
    taken: set[str] = set()
    roles: set[str] = set()
    for proposal in out:
        qi = proposal.qi
        if qi is None:
            continue
        qi.name = _qi_name(qi.column, qi.concept, taken)
        taken.add(qi.name.lower())
        if qi.role in roles and qi.role != "date":
            qi.notes.append(f"no role: another column already has role {qi.role!r} (one QI per role)")
            qi.role = None
        elif qi.role:
            roles.add(qi.role)
    return out


def _qi_name(column: str, concept: str, taken: set[str]) -> str:
    """The QI's name in policy texts: the column's own when plain (``age``), else a plain one made
    from it (``Patient Age (years)`` → ``patient_age_years``), unique without regard to case."""
    if PLAIN_NAME.fullmatch(column) and qi_name_problem(column) is None:
        base = column
    else:
        ascii_name = unicodedata.normalize("NFKD", column).encode("ascii", "ignore").decode()
        base = "_".join(re.findall(r"[A-Za-z0-9]+", ascii_name)).lower() or concept.replace(" ", "_")
        if base[0].isdigit():
            base = f"qi_{base}"
    name, i = base, 2
    while name.lower() in taken:
        name, i = f"{base}_{i}", i + 1
    return name


def _one(p: ColumnProfile, values_of: ValuesOf) -> Proposal:
    words = tokens(p.name)
    why = _identifier_by_name(words)
    if why is not None:
        return Proposal(p, "identifier", why)
    if p.values == 0:
        return Proposal(p, "review", "every row is NULL")
    why = _identifier_by_values(p)
    if why is not None:
        return Proposal(p, "identifier", why)
    concept = _concept(words)
    if concept is None and p.family in ("date", "timestamp"):
        concept = "date"
    if concept is not None:
        proposal = _qi(p, concept, values_of)
        if proposal is not None:
            return proposal
    if p.unique and p.rows >= KEY_ROWS and p.family in ("integer", "text"):
        return Proposal(p, "identifier", "every row holds a value of its own (a record key)")
    return Proposal(p, "review", _review(p, words))


SENSITIVE_REVIEW = "review: looks like a sensitive attribute"


def _review(p: ColumnProfile, words: list[str]) -> str:
    told = sorted(set(words) & SENSITIVE_WORDS)
    if told:
        return (f"{SENSITIVE_REVIEW} ({told[0]}: what a released group may reveal of a person); to release it "
                f"unchanged, list it under sensitive and uncomment the attribute criteria under [release]")
    maybe = sorted(set(words) & MAYBE_QI_WORDS)
    if maybe:
        return (f"review: {maybe[0]} may be a quasi-identifier (others may know it): declare it as a [[qi]] "
                f"to release it generalized, or list it under keep or sensitive")
    if p.family in ("integer", "float") and (p.distinct or 0) > MAX_CATEGORIES:
        return "review: not recognised; a measurement? list it under keep or sensitive to release it"
    return "review: not recognised; list it under keep or sensitive to release it, or declare it as a [[qi]]"


def _qi(p: ColumnProfile, concept: str, values_of: ValuesOf) -> Proposal | None:
    """The QI for ``concept`` when the values fit a kind; a review proposal saying why not; None
    when the values do not fit at all (the column is then judged like any other)."""
    fam, like = p.family, f"the name looks like {described(concept)}"

    def review(text: str) -> Proposal:
        return Proposal(p, "review", f"review: {text}")

    if concept in ("birth date", "date"):
        if fam not in ("date", "timestamp"):
            return review(f"{like}, but the column holds {p.sql_type}; store it as a DATE to declare it a date [[qi]]")
        if p.nulls:
            return review(f"{described(concept)} (a quasi-identifier), but {p.nulls:,} rows are NULL and a date QI "
                          f"holds none; fill or filter them, then declare it a [[qi]]")
        lo, hi = as_date(p.lo), as_date(p.hi)
        what = "dates" if fam == "date" else "timestamps, read by day"
        qi = QIProposal("", p.name, "date", concept, lo, hi, role="date")
        return Proposal(p, "qi", f"proposed QI: {like if concept == 'birth date' else 'a date'}; {what} {lo}..{hi}", qi)
    if concept in ("age", "birth year") and fam in ("integer", "float"):
        if not whole_numbers(p):
            return review(f"{like}, but it holds fractions; round it to whole numbers to declare it an integer [[qi]]")
        lo, hi = int(p.lo), int(p.hi)
        plausible = 0 <= lo and hi <= 130 if concept == "age" else 1850 <= lo and hi <= 2100
        if not plausible:
            return review(f"{like}, but its values {lo}..{hi} are not; check it")
        if p.nulls:
            return review(f"{described(concept)} (a quasi-identifier), but {p.nulls:,} rows are NULL and an integer "
                          f"QI holds none; fill or filter them, then declare it a [[qi]]")
        qi = QIProposal("", p.name, "integer", concept, lo, hi, role="age" if concept == "age" else None)
        return Proposal(p, "qi", f"proposed QI: {like}; integer {lo}..{hi}", qi)
    if concept == "zip":
        return _zip(p, values_of)
    if concept == "birth year":
        return None
    return _category(p, concept, values_of)


def _category(p: ColumnProfile, concept: str, values_of: ValuesOf) -> Proposal | None:
    if p.family not in ("text", "integer", "boolean"):
        return None
    distinct = p.distinct or 0
    if distinct > MAX_CATEGORIES:
        return Proposal(p, "review", f"review: the name looks like {described(concept)}, but it holds {distinct:,} "
                                     f"distinct values; declare it as a [[qi]] with a hierarchy, or clean it")
    values = values_of(p.name, None)
    if all(_number(v) is not None for v in values):
        values.sort(key=lambda v: _number(v) or 0.0)  # codes in numeric order: 1, 2, 10
    qi = QIProposal("", p.name, "category", concept, values=values)
    if p.nulls:
        qi.null_label = next(label for label in ("NULL", "(missing)", "(NULL)", "(none)", "(missing value)")
                             if label not in values)
        qi.notes.append(f"{p.nulls:,} NULL rows: NULL is the category {qi.null_label!r}")
    qi.notes.append("the order of values matters: a policy merges neighbours, so put similar values side by side")
    return Proposal(p, "qi", f"proposed QI: the name looks like {described(concept)}; {len(values)} categories", qi)


def _zip(p: ColumnProfile, values_of: ValuesOf) -> Proposal | None:
    if p.family == "integer":
        if p.lo is None or int(p.lo) < 0 or int(p.hi) > 99_999:
            return None
        width: int | None = 5
        values = values_of(p.name, width)
    elif p.family == "text":
        width = None
        values = values_of(p.name, None)
    else:
        return None
    qi = QIProposal("", p.name, "zip", "zip", values=values)
    five = all(len(v) == 5 and v.isdigit() for v in values)
    if five:
        qi.role = "zip"
    else:
        qi.notes.append("no role: not every value is a 5-digit ZIP code, so Safe Harbor's ZIP rule does not apply")
        if all(v.isdigit() for v in values) and any(len(v) < 5 for v in values) and max(map(len, values)) == 5:
            qi.notes.append("some codes have fewer than 5 digits: were leading zeros lost when the file was written?")
    if p.nulls:
        qi.null_label = next(label for label in ("NULL", "(missing)", "(NULL)") if label not in values)
        qi.notes.append(f"{p.nulls:,} NULL rows: NULL is the category {qi.null_label!r}")
    stored = " (stored as numbers: written zero-padded, as they are read)" if width else ""
    return Proposal(p, "qi", f"proposed QI: the name looks like {described('zip')}; {len(values):,} codes{stored}", qi)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


# how a concept is named in the comments
_WORDS = {"sex": "sex or gender", "race": "race or ethnicity", "zip": "ZIP or postcode"}


def described(concept: str) -> str:
    words = _WORDS.get(concept, concept)
    return ("an " if words[0] in "aeiou" else "a ") + words
