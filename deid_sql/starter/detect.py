"""Each column's proposed role, from its name, its type and its values — guessed conservatively.

A column is proposed as a quasi-identifier only when its name says what it is (age, birth date,
sex or gender, race or ethnicity, ZIP or postcode, marital status, a clinic, ward or site where a
person was seen) or when it holds dates, and its values fit a QI kind; its domain is read from the
data.  A column is called an identifier when its name says so (ids, MRN, SSN, phone, e-mail,
address) or its values do (SSN-like ``ddd-dd-dddd``, e-mail addresses, phone numbers, person
names, one value per row).  A name alone is not trusted where the values contradict it: a
``clinic_name`` holding three clinics is a place, and a ``test_id`` holding two codes over every
row is a code, not a key.  Everything else is dropped with a note to review it: a column nobody
has looked at never leaves.  Every proposal carries the reason in words, written beside it in the
spec.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..loading.transform import transformed
from ..spec.file import qi_name_problem
from . import tomltext
from .profile import ColumnProfile, as_date, whole_numbers
from .values import few, flag, identifier_by_values, person_names

#: the most categories a proposed category QI lists (more: dropped, with a note)
MAX_CATEGORIES = 100
#: the fewest rows for "one value per row" to call a column a record key
KEY_ROWS = 20

IDENTIFIER_WORDS = {
    "id", "ids", "uuid", "guid", "mrn", "ssn", "nhs", "npi", "phone", "telephone", "tel", "mobile", "cellphone",
    "fax", "email", "mail", "name", "names", "firstname", "lastname", "surname", "fullname", "forename",
    "givenname", "middlename", "maidenname", "username", "login", "ip", "url", "website", "account", "acct",
    "iban", "license", "licence", "passport", "vin", "plate", "serial", "ein", "tin",
}
#: words of a name that says "a name", of something or someone: judged by the values (``_named``)
NAME_WORDS = {"name", "names"}
#: words that make "name" a person's: first_name, family_name, nick_name
PERSONAL_NAME_WORDS = {"first", "last", "given", "family", "middle", "maiden", "nick", "full", "birth", "sur"}
#: words that say whose: a person's name or key is an identifier whatever its values
PERSON_WORDS = {"patient", "patients", "person", "persons", "people", "subject", "participant", "member", "client",
                "respondent", "individual", "customer", "employee", "user", "pid", "mrn", "nhs", "resident",
                "enrollee", "beneficiary", "case"}
#: words of an id-like name: a record key, or the key of a person when its values repeat (``persons``)
ID_WORDS = {"id", "ids", "uuid", "guid", "mrn", "nhs", "npi", "pid"}
#: where a person was seen: a category others may know (a quasi-identifier), when it has few values
LOCATION_WORDS = {"clinic": "clinic", "clinics": "clinic", "ward": "ward", "wards": "ward", "site": "site",
                  "sites": "site", "department": "department", "departments": "department", "dept": "department",
                  "unit": "unit", "units": "unit", "facility": "facility", "facilities": "facility",
                  "hospital": "hospital", "hospitals": "hospital"}
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
    cuts: str | None = None  # the publishable cut rule written for it (``write.publishable_cuts``), as TOML
    per_person: str | None = None  # which of a person's values stands for them, when it varies (``persons``)
    transform: str | None = None  # how a fractional age becomes whole years (``spec.transform``), with scale
    scale: int = 1
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
    group: str  # qi | identifier | review | person (the [person] key, pseudonymized: ``persons``)
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


def _identifier_by_name(words: list[str]) -> tuple[str, str] | None:
    """What the name says of an identifier, and why in words (None: nothing): ``place`` (smaller
    than a state), ``name`` (a name of something or someone: the values decide), ``id`` (a record
    key, or a person's when its values repeat), or ``other`` (SSN, phone, a person's name …)."""
    if not words:
        return None
    joined = "".join(words)
    ws = set(words)
    if ws & PLACE_WORDS:
        return "place", ("the name looks like a place smaller than a state (Safe Harbor removes it; to release it "
                         "generalized, declare it as a category [[qi]])")
    found = sorted(ws & IDENTIFIER_WORDS)
    if found:
        why = f"the name looks like an identifier ({found[0]})"
        if ws & (PERSON_WORDS | PERSONAL_NAME_WORDS) or set(found) - NAME_WORDS - ID_WORDS:
            return "other", why
        return ("id" if set(found) & ID_WORDS else "name"), why
    if len(words) > 1 and words[-1] in KEY_ENDINGS:
        return ("other" if ws & PERSON_WORDS else "id"), f"the name looks like a record key ({words[-1]})"
    if joined.endswith("name") or "email" in joined or "phone" in joined or "ssn" in joined:
        return "other", "the name looks like an identifier"
    return None


def id_like(name: str) -> bool:
    """The name says an id or key (``patient_id``, ``MRN``, ``member_no``): a person's key when its
    values repeat across rows (``persons``)."""
    words = tokens(name)
    return bool(set(words) & ID_WORDS) or (len(words) > 1 and words[-1] in KEY_ENDINGS)


def says_person(name: str) -> bool:
    """The name says whose: a patient's, a person's, a member's (``PERSON_WORDS``)."""
    return bool(set(tokens(name)) & PERSON_WORDS)


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
    place = _location(p, words, values_of)
    if place is not None:
        return place
    named = _identifier_by_name(words)
    if named is not None:
        return _named(p, *named)
    if p.values == 0:
        return Proposal(p, "review", "every row is NULL")
    why = identifier_by_values(p)
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


def _named(p: ColumnProfile, kind: str, why: str) -> Proposal:
    """A column whose name says identifier, judged by its values where the name alone may mislead:
    a generic ``..._name`` of person names is an identifier, of a handful of things repeated over
    many rows it is not; an ``..._id`` of a handful of values over many rows is a code, not a key."""
    if kind in ("name", "other") and p.values and person_names(p):
        return Proposal(p, "identifier", "the values look like person names (two or more capitalised words, each "
                                         "name on few rows)")
    if kind == "name" and p.values:
        if few(p):
            return Proposal(p, "review", f"review: the name says a name, but its {p.distinct:,} values repeat over "
                                         f"{p.values:,} rows: names of things, not of persons; declare it as a "
                                         f"category [[qi]] if others may know it, or list it under keep or sensitive")
    if kind == "id" and p.values and few(p):
        listed = tomltext.array(sorted(str(v) for v, _ in p.top), width=60)
        return Proposal(p, "review", f"review: the name looks like an id, but it holds {p.distinct:,} values over "
                                     f"{p.values:,} rows: a code, not a record key. What it codes is not known, so "
                                     f"it stays dropped: declare it a category [[qi]] (values = {listed}) if others "
                                     f"may know it, or list it under keep or sensitive")
    return Proposal(p, "identifier", why)


def _location(p: ColumnProfile, words: list[str], values_of: ValuesOf) -> Proposal | None:
    """A clinic, ward, site, department, unit, facility or hospital with few values: where a person
    was seen, which others (a neighbour, an employer) may know, so a category QI rather than an
    identifier; None when the name says no such place, names a person's detail too (a clinic's phone,
    a patient's site), has many values or holds person names."""
    ws = set(words)
    found = sorted(w for w in ws if w in LOCATION_WORDS)
    if not found or ws & PLACE_WORDS or ws & PERSON_WORDS or (ws & IDENTIFIER_WORDS) - NAME_WORDS - ID_WORDS:
        return None
    distinct = p.distinct or 0
    if (not p.values or distinct > MAX_CATEGORIES or p.values < 2 * distinct or p.family not in CATEGORY_FAMILIES
            or identifier_by_values(p) is not None):
        return None
    concept = LOCATION_WORDS[found[0]]
    proposal = _category(p, concept, values_of)
    if proposal is not None and proposal.qi is not None:
        proposal.reason = (f"proposed QI: the name looks like {described(concept)}, where a person was seen (others "
                           f"may know it); {len(proposal.qi.values or []):,} categories")
    return proposal


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
    spellings = flag(p)
    if spellings is not None:
        return (f"review: a yes/no column ({', '.join(spellings)}); declare it as a category [[qi]] if others may "
                f"know it, or list it under keep or sensitive")
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
    if concept == "age" and fam == "float" and not whole_numbers(p) and p.lo is not None:
        return _fractional_age(p, like)
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


#: an age column whose values all lie in 0..DECADES_MAX with at most two decimals holds ages in decades
DECADES_MAX = 1.3


def _decades(p: ColumnProfile) -> bool:
    """Every value of the age column lies in 0..1.3 and has at most two decimals (0.19 is 19 years):
    ages stored in decades, told from the complete list of its values (at most 131 of them)."""
    if not (0 <= float(p.lo) and 0 < float(p.hi) <= DECADES_MAX and p.complete):
        return False
    return all(abs(float(v) * 100 - round(float(v) * 100)) < 1e-6 for v, _ in p.top)


def _fractional_age(p: ColumnProfile, like: str) -> Proposal:
    """An age column holding fractions: an integer age QI read through a declared transformation, its
    domain the transformed data's — whole years of infants' fractional ages (``transform = "floor"``:
    0.7 → 0), or ages stored in decades (``scale = 100``, ``transform = "round"``: 0.19 → 19)."""
    decades = _decades(p)
    how, scale = ("round", 100) if decades else ("floor", 1)
    lo, hi = transformed(p.lo, how, scale), transformed(p.hi, how, scale)
    if lo is None or hi is None or not 0 <= lo <= hi <= 130:
        return Proposal(p, "review", f"review: {like}, but its values {p.lo}..{p.hi} are not ages; check it")
    if p.nulls:
        return Proposal(p, "review", f"review: {described('age')} (a quasi-identifier), but {p.nulls:,} rows are NULL "
                                     f"and an integer QI holds none; fill or filter them, then declare it a [[qi]]")
    qi = QIProposal("", p.name, "integer", "age", lo, hi, role="age", transform=how, scale=scale)
    if decades:
        qi.notes += [f"its values lie in {p.lo}..{p.hi} with two decimals: ages stored in decades (0.19 is 19 years), "
                     f"so the QI is the value x 100 rounded (scale = 100, transform = \"round\");",
                     "if they are fractions of a year (infants), write transform = \"floor\" and remove scale"]
    else:
        qi.notes.append(f"it holds fractions ({p.fractional:,} rows, e.g. infants' ages in years): the QI is the whole "
                        f"years, each value rounded down (transform = \"floor\": 0.7 is 0), the extract unchanged")
    unit = "decades, x 100 rounded" if decades else "fractions, rounded down"
    return Proposal(p, "qi", f"proposed QI: {like}; integer {lo}..{hi} ({unit})", qi)


#: the column types a category QI is read from (as text, as the load reads it)
CATEGORY_FAMILIES = ("text", "integer", "boolean")


def _category(p: ColumnProfile, concept: str, values_of: ValuesOf) -> Proposal | None:
    if p.family not in CATEGORY_FAMILIES:
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
