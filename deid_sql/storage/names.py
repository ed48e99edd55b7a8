"""Table and view names given on the command line or to the API, parsed strictly, per engine.

A name is never handed to a SQL parser (``'a.b/*'`` crashed it, ``'a.b--'`` silently became
``a.b``): it is split here and every part enters the SQL as a quoted identifier.  What the
catalog ends up holding depends on the engine, so each engine has a ``Rules`` entry (``RULES``,
keyed by the backend's ``dialect``): its quote character, what it does to an unquoted part
(PostgreSQL folds it to lower case), the most bytes a name may have (PostgreSQL truncates past
63, so a release and its ``__release`` sidecar could collide), whether a dot may appear inside
quotes.  A name the engine would fold or truncate is refused in one line before anything runs,
because the table the user would find afterwards is not the one they named.

- ``NAME`` without a dot or quote: on engines with ``bare_literal`` (DuckDB) it is taken
  literally, whatever it holds (``Patients 2024``, ``v;--``); elsewhere it is one plain part;
- ``SCHEMA.NAME`` names a table or view in a schema; each part is a plain identifier
  (letters, digits, ``_``, ``$``; not starting with a digit) or a quoted one
  (``"my.schema"."a b"``, ``""`` for a quote inside; identifier characters may follow the closing
  quote, so that ``"a b"__release``, the sidecar table of ``"a b"``, is a name too);
- anything else — an empty name or part, more parts than the engine has, a part that is
  neither form, a control character — is refused in one line with the accepted forms.

``parse_name(text, engine)`` gives a ``Name``: the parts as the catalog stores them (no quote
characters, folded as the engine folds), ``table()`` for SQL, ``text`` (a form that parses back
to the same parts), ``with_suffix`` for the sidecar and staging names, ``same_as`` to compare
two names of one engine: parts folded as the engine folds them (a source table ``Clinic.Patients``
is read as ``clinic.patients`` on PostgreSQL and Spark, so an output of that name replaces it), an
unqualified name in the engine's default schema, and the engine's own catalog left out (Spark's
``spark_catalog.db.t`` is ``db.t``: ``spark_catalog`` is the current catalog unless
``spark.sql.defaultCatalog`` says otherwise, and a name in another catalog is taken as the same as
one without a catalog, since that catalog may be the current one: an output never risks an input).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from ..errors import OutputError

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
FORMS = ('NAME (any text without a dot) or SCHEMA.NAME, each part letters, digits, _ or $ '
         '(not starting with a digit) or "double-quoted"')
SIDECAR_SUFFIX = "__release"


@dataclass(frozen=True)
class Rules:
    """One engine's identifier rules (what its catalog does with a name as typed)."""

    engine: str                     # the backend's dialect: "duckdb", "postgres", "spark"
    title: str                      # the engine's name in messages
    quote: str = '"'                # the quote character of a quoted part (doubled inside it)
    fold: str = "none"              # what the engine does to an unquoted part: "lower", "upper" or "none"
    max_bytes: int | None = None    # longest part in UTF-8 bytes (longer ones are truncated or refused)
    dots_in_quotes: bool = True     # whether a quoted part may hold a dot
    max_parts: int = 2              # NAME or SCHEMA.NAME
    bare_literal: bool = False      # a name without dot or quote is taken literally, whatever it holds
    default_schema: str | None = None  # where an unqualified name lives (to compare names)
    plain: str = r"[A-Za-z_][A-Za-z0-9_$]*"  # an unquoted part as the engine reads it
    characters: str | None = None   # what a part the engine's own catalog stores may hold (None: anything)
    fold_quoted: bool = False       # the catalog folds quoted parts too (Spark's case-insensitive catalog)
    own_catalog: str | None = None  # CATALOG.SCHEMA.NAME in another catalog follows that catalog's rules

    def forms(self) -> str:
        q = self.quote
        if self.bare_literal:
            return FORMS if q == '"' else FORMS.replace('"double-quoted"', f"{q}quoted{q}")
        return (f"NAME or SCHEMA.NAME, each part letters, digits, _ or $ (not starting with a digit) "
                f"or {q}quoted{q}")

    def folded(self, part: str) -> str:
        return part.lower() if self.fold == "lower" else part.upper() if self.fold == "upper" else part

    def quoted(self, part: str) -> str:
        return self.quote + part.replace(self.quote, self.quote * 2) + self.quote


GENERIC = Rules("generic", "the engine", bare_literal=True)
RULES: dict[str, Rules] = {
    "duckdb": Rules("duckdb", "DuckDB", bare_literal=True, default_schema="main"),
    "postgres": Rules("postgres", "PostgreSQL", fold="lower", max_bytes=63, default_schema="public"),
    # Spark's session catalog holds letters, digits and _ only, folded to lower case even when quoted
    # (INVALID_SCHEMA_OR_RELATION_NAME otherwise, after CREATE TABLE … AS has made the folder)
    "spark": Rules("spark", "Spark", fold="lower", max_parts=3, default_schema="default",
                   plain=r"[A-Za-z0-9_$]+", characters=r"[A-Za-z0-9_]+", fold_quoted=True,
                   own_catalog="spark_catalog"),
}


def rules_for(engine: str | None) -> Rules:
    """The rules of ``engine`` (a backend's ``dialect``); an engine without an entry gets the
    lenient generic rules (no folding, no length limit)."""
    return RULES.get(engine or "", GENERIC)


@dataclass(frozen=True)
class Name:
    """A parsed table or view name: ``parts`` as the catalog stores them."""

    parts: tuple[str, ...]
    rules: Rules
    given: str = ""
    #: which parts were typed quoted (a missing entry: taken as stored, never folded)
    quoted: tuple[bool, ...] = ()

    @property
    def name(self) -> str:
        return self.parts[-1]

    @property
    def schema(self) -> str | None:
        return self.parts[-2] if len(self.parts) > 1 else None

    @property
    def text(self) -> str:
        """The name as text that parses back to the same parts: plain parts as they are, others quoted."""
        if len(self.parts) == 1 and self.rules.bare_literal and "." not in self.name \
                and not self.name.startswith(self.rules.quote) and self.name == self.name.strip():
            return self.name
        return ".".join(p if _PLAIN.fullmatch(p) and self.rules.folded(p) == p else self.rules.quoted(p)
                        for p in self.parts)

    def table(self) -> exp.Table:
        ids = [exp.to_identifier(p, quoted=True) for p in self.parts]
        return exp.Table(this=ids[-1], db=ids[-2] if len(ids) > 1 else None,
                         catalog=ids[-3] if len(ids) > 2 else None)

    def with_suffix(self, suffix: str, what: str = "table name") -> Name:
        """The name with ``suffix`` on its last part (a sidecar, a staging table), checked for length."""
        out = Name((*self.parts[:-1], self.name + suffix), self.rules, self.given, self.quoted)
        _check_length(out, what, self.given or self.text)
        return out

    def with_name(self, name: str, what: str = "table name") -> Name:
        """Another table in the same schema (a staging table), checked for length."""
        out = Name((*self.parts[:-1], name), self.rules, name, (*self.quoted[:len(self.parts) - 1], True))
        _check_length(out, what, name)
        return out

    def _where(self) -> tuple[str | None, tuple[str, ...]]:
        """(the catalog named, lower case, or None; the schema and name as the catalog holds them).
        Parts are folded as the engine folds them — unquoted ones, and quoted ones too where its
        catalog folds every name (Spark) — except in another catalog, whose rules are its own."""
        rules, parts = self.rules, list(self.parts)
        catalog = None
        if len(parts) == 3 and rules.own_catalog is not None:
            catalog = parts.pop(0).lower()
        if catalog in (None, rules.own_catalog):
            offset = len(self.parts) - len(parts)
            parts = [rules.folded(p) if rules.fold_quoted or not self._was_quoted(i + offset) else p
                     for i, p in enumerate(parts)]
        if len(parts) == 1 and rules.default_schema is not None:
            parts.insert(0, rules.default_schema)
        return catalog, tuple(parts)

    def _was_quoted(self, index: int) -> bool:
        return index >= len(self.quoted) or self.quoted[index]

    def key(self) -> tuple[str, ...]:
        """What identifies the object in the catalog: parts folded as the engine folds them, the
        default schema filled in, the engine's own catalog (``spark_catalog``) left out."""
        catalog, parts = self._where()
        return parts if catalog in (None, self.rules.own_catalog) else (catalog, *parts)

    def same_as(self, other: Name) -> bool:
        """Whether the two names may be one object: the same schema and name, and the same catalog
        where both name one (a name without a catalog lives in the current one, which may be any)."""
        (mine, parts), (theirs, other_parts) = self._where(), other._where()
        return parts == other_parts and (mine is None or theirs is None or mine == theirs)

    def __str__(self) -> str:
        return self.text


def parse_name(text: str, engine: str | Rules | None = None, what: str = "table name", strict: bool = True) -> Name:
    """``text`` parsed by the rules of ``engine``; raises ``OutputError`` (one line) when it is not a
    name, or — ``strict``, for a name the engine will create — when the engine would fold or truncate
    it into another one or its catalog cannot hold it.  A name only read (a source table) is looked up
    as the engine folds it, so ``strict=False`` checks its form alone."""
    rules = engine if isinstance(engine, Rules) else rules_for(engine)
    q = rules.quote

    def refuse(why: str) -> OutputError:
        return OutputError(f"{what} {text!r} {why}; use {rules.forms()}")

    if not isinstance(text, str) or not text.strip():
        raise refuse("is empty")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise refuse("holds a control character")
    if rules.bare_literal and "." not in text and not text.startswith(q):
        if text != text.strip():
            raise refuse("starts or ends with a space")
        out = Name((text,), rules, text, (True,))
        _check_length(out, what, text)
        return out
    quoted_part = re.compile(f"{re.escape(q)}((?:[^{re.escape(q)}]|{re.escape(q * 2)})+){re.escape(q)}"
                             r"([A-Za-z0-9_$]*)")  # a suffix after the quote: a sidecar's NAME__release
    plain = re.compile(rules.plain)
    parts: list[str] = []
    quoted: list[bool] = []
    pos = 0
    while True:
        m = quoted_part.match(text, pos)
        if m:
            part = m.group(1).replace(q * 2, q) + m.group(2)
            if strict and "." in m.group(1) and not rules.dots_in_quotes:
                raise OutputError(f"{what} {text!r}: {rules.title} allows no dot inside a quoted name "
                                  f"({m.group(0)}); pick a name without one")
        else:
            m = plain.match(text, pos)
            if not m:
                raise refuse(f"is not a name at {text[pos:pos + 20]!r}")
            part = m.group(0)
        parts.append(part)
        quoted.append(m.group(0).startswith(q))
        pos = m.end()
        if pos == len(text):
            break
        if text[pos] != "." or pos + 1 == len(text):
            raise refuse(f"is not a name at {text[pos:pos + 20]!r}")
        pos += 1
    if len(parts) > rules.max_parts:
        raise refuse(f"has {len(parts)} parts")
    foreign = len(parts) == 3 and rules.own_catalog is not None and parts[0].lower() != rules.own_catalog
    if strict and not foreign:
        for part, was_quoted in zip(parts, quoted):
            folded = rules.folded(part)
            if not was_quoted and folded != part:
                raise OutputError(f"{what} {text!r}: {rules.title} would turn {part} into {folded} (it folds "
                                  f"unquoted names to {rules.fold} case); write it as {folded}"
                                  + ("" if rules.fold_quoted else f" or quote it: {rules.quoted(part)}"))
        _check_catalog(parts, quoted, rules, what, text)
    out = Name(tuple(parts), rules, text, tuple(quoted))
    _check_length(out, what, text)
    return out


def _check_catalog(parts: Sequence[str], quoted: Sequence[bool], rules: Rules, what: str, text: str) -> None:
    """Refuse a schema or table part the engine's own catalog cannot hold, or would fold although quoted."""
    for part, was_quoted in zip(parts[-2:], quoted[-2:]):
        if rules.characters is not None and not re.fullmatch(rules.characters, part):
            bad = "a dot" if "." in part else "a space" if " " in part else repr(part)
            suggestion = re.sub(r"[^A-Za-z0-9_]+", "_", part).strip("_").lower() or "released"
            raise OutputError(f"{what} {text!r} cannot live in {rules.title}'s catalog: its names hold only "
                              f"letters, digits and _ (not {bad}); pick such a name, e.g. {suggestion}")
        if was_quoted and rules.fold_quoted and rules.folded(part) != part:
            raise OutputError(f"{what} {text!r}: {rules.title}'s catalog folds names to {rules.fold} case, so "
                              f"\"{part}\" would be {rules.folded(part)}; write it in {rules.fold} case")


def _check_length(name: Name, what: str, given: str) -> None:
    limit = name.rules.max_bytes
    if limit is None:
        return
    for part in name.parts:
        size = len(part.encode())
        if size > limit:
            raise OutputError(f"{what} {given!r}: {part!r} is {size} bytes and {name.rules.title} keeps "
                              f"{limit} (it would truncate it); use a shorter name")


def release_name(text: str, engine: str | Rules | None = None, what: str = "table name",
                 sidecar: bool = True) -> Name:
    """A release's name, refused (one line) when it or its ``__release`` sidecar is no name of the
    engine: a sidecar name the engine would truncate could collide with the release itself."""
    out = parse_name(text, engine, what)
    limit = out.rules.max_bytes
    if sidecar and limit is not None and len(out.name.encode()) + len(SIDECAR_SUFFIX) > limit:
        room = limit - len(SIDECAR_SUFFIX)
        raise OutputError(f"{what} {text!r}: its release record {out.name + SIDECAR_SUFFIX!r} would be "
                          f"{len(out.name.encode()) + len(SIDECAR_SUFFIX)} bytes and {out.rules.title} keeps "
                          f"{limit}; use a name of at most {room} bytes")
    return out


def check_output_name(engine: str | Rules | None, name: str, what: str = "table name", *,
                      inputs: Sequence[str] = (), sidecar: bool = True) -> Name:
    """``name`` parsed by ``engine``'s identifier rules (``release_name``: folded, truncated or a
    sidecar too long for the engine is refused), and refused when it names one of ``inputs`` (the
    tables the job reads, compared as the catalog sees them, the default schema filled in): an
    ``--overwrite`` there would replace the data the release is computed from."""
    out = release_name(name, engine, what, sidecar=sidecar)
    for table in inputs:
        try:  # an input is only read: any spelling the engine folds to the output's name is that table
            read = parse_name(table, out.rules, "table", strict=False)
        except OutputError:
            continue  # an input that is no name of this engine is refused where it is read
        if out.same_as(read) or (sidecar and Name((*out.parts[:-1], out.name + SIDECAR_SUFFIX), out.rules,
                                                  quoted=out.quoted).same_as(read)):
            raise OutputError(f"{what} {name!r} is an input of the job (table {table!r}, read by the spec or "
                              f"the batch); write the release to another name")
    return out


def split_name(text: str, what: str = "table name", engine: str | Rules | None = None) -> tuple[str | None, str]:
    """``(schema or None, name)`` of ``text``; raises ``OutputError`` (one line) when it is not a name."""
    out = parse_name(text, engine if engine is not None else RULES["duckdb"], what)
    return out.schema, out.name


def table_name(text: str, what: str = "table name", engine: str | Rules | None = None) -> exp.Table:
    """``text`` as a table expression of quoted identifiers (``parse_name``)."""
    return parse_name(text, engine if engine is not None else RULES["duckdb"], what).table()


def check_name(text: str, what: str = "table name", engine: str | Rules | None = None) -> str:
    """``text`` unchanged once it parses (for callers that pass names on as text)."""
    parse_name(text, engine if engine is not None else RULES["duckdb"], what)
    return text


__all__ = ["FORMS", "GENERIC", "RULES", "SIDECAR_SUFFIX", "Name", "Rules", "check_name", "check_output_name",
           "parse_name", "release_name", "rules_for", "split_name", "table_name"]
