"""What a column's values say, whatever its name: SSN-like codes, e-mails, phone numbers, person
names, yes/no flags, and whether its values are a handful repeated over many rows.

Names lie both ways: ``clinic_name`` holds the names of three clinics (a place, not a person),
while a column called ``contact`` may hold ``Anna Smith`` on every row.  These tests read the
profile's most common values (``ColumnProfile.top``) and its counts, never the whole column, so
they cost nothing beyond the profile.
"""

from __future__ import annotations

import re
import unicodedata

from .profile import ColumnProfile

#: the share of a column's sampled values that must fit an identifier pattern
PATTERN_SHARE = 0.8
#: a column of person names has at least this many distinct values ...
NAME_MIN_DISTINCT = 10
#: ... each on at most this many rows on average (a person's name repeats over that person's rows only)
NAME_ROWS_PER_VALUE = 10
#: "a handful repeated over many rows": at most this many distinct values ...
FEW_VALUES = 20
#: ... each on at least this many rows on average
FEW_ROWS_PER_VALUE = 5

SSN = re.compile(r"\d{3}-\d{2}-\d{4}")
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
PHONE = re.compile(r"\+?\(?\d[\d ().-]*")
# one word of a person's name: Anna, O'Brien, Smith-Jones, McDonald, an initial (J or J.)
NAME_WORD = re.compile(r"(?:[A-Z]'|Ma?c)?[A-Z][a-z]+(?:['-][A-Z]?[a-z]+)*|[A-Z]\.?")
#: the spellings of a yes/no column, lowercased: a two-valued column of one pair is a flag
FLAG_PAIRS = ({"y", "n"}, {"yes", "no"}, {"true", "false"}, {"t", "f"}, {"0", "1"}, {"1", "2"})


def identifier_by_values(p: ColumnProfile) -> str | None:
    """Why the values say identifier: most sampled values SSN-like, e-mails, phone numbers, or
    person names (many distinct, each on few rows), wherever the column sits."""
    if p.family != "text" or not p.top:
        return None
    sample = [str(v).strip() for v, _ in p.top]
    for what, test in (("are SSN-like (ddd-dd-dddd)", lambda s: SSN.fullmatch(s) is not None),
                       ("look like e-mail addresses", lambda s: EMAIL.fullmatch(s) is not None),
                       ("look like phone numbers", phone)):
        if sum(map(test, sample)) >= PATTERN_SHARE * len(sample):
            return f"the values {what}"
    if person_names(p):
        return "the values look like person names (two or more capitalised words, each name on few rows)"
    return None


def phone(text: str) -> bool:
    digits = sum(c.isdigit() for c in text)
    return PHONE.fullmatch(text) is not None and 10 <= digits <= 15 and (digits < len(text) or text.startswith("+"))


def person_name(text: str) -> bool:
    """``Anna Smith``, ``Smith, Anna``, ``J. O'Brien``: two to five capitalised words, one of them at
    least more than an initial (unicode letters folded: ``José Núñez`` counts)."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = [w for w in re.split(r"[\s,]+", folded.strip()) if w]
    if not 2 <= len(words) <= 5 or not all(NAME_WORD.fullmatch(w) for w in words):
        return False
    return any(len(w.rstrip(".")) > 1 for w in words)


def person_names(p: ColumnProfile) -> bool:
    """Most sampled values are person names, and the column has many distinct values, each on few
    rows: a handful of clinic names repeated over thousands of rows is not a list of people."""
    if p.family != "text" or not p.top or p.distinct is None:
        return False
    sample = [str(v) for v, _ in p.top]
    if sum(map(person_name, sample)) < PATTERN_SHARE * len(sample):
        return False
    return p.distinct >= NAME_MIN_DISTINCT and p.values <= NAME_ROWS_PER_VALUE * p.distinct


def few(p: ColumnProfile) -> bool:
    """A handful of values repeated over many rows (``test_id`` with 2 values over 146 rows): a code
    or a category, not a key of records or persons."""
    distinct = p.distinct or 0
    return 0 < distinct <= FEW_VALUES and p.values >= FEW_ROWS_PER_VALUE * distinct


def flag(p: ColumnProfile) -> list[str] | None:
    """The two spellings of a yes/no column (``Y``/``N``, ``yes``/``no``, ``true``/``false``, ``0``/``1``),
    as the data spells them; None when it is not one."""
    if p.distinct != 2 or not p.complete:
        return None
    spelled = [str(v) for v, _ in p.top]
    if {s.strip().lower() for s in spelled} in FLAG_PAIRS:
        return sorted(spelled)
    return None


def shape(value: object) -> str:
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
