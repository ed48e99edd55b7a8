"""The starting spec: the data profiled, roles proposed, the population chosen, the text composed,
checked as ``Spec`` reads it, and written atomically beside the data.

Safe by default: only proposed QIs are released (generalized), every other column is dropped,
the release criteria are the project's starting set, and without a census or a population size
each group's population is its own records (``population = "sample"``, the prosecutor's view:
every sample unique counts as re-identified), the most cautious assumption there is.
"""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..backends import connect
from ..backends.base import Backend
from ..contract.criteria import STARTING_SET
from ..errors import BackendError, OutputError, SpecError
from ..spec.file import FORMATS, Spec
from ..spec.population_size import REGIONS, describe
from ..storage.atomic import write_text
from ..storage.tableref import TableRef
from . import hierarchies, persons, tomltext
from .detect import Proposal, QIProposal, described, propose, tokens
from .persons import SECRET_ENV, SECRET_HINT, PersonProposal
from .profile import (
    ColumnProfile,
    as_date,
    distinct_text,
    family,
    profile,
    repeated_values,
    values_outside,
    varying_persons,
)
from .values import shape

SOURCE_VIEW = "deid_init_source"
CENSUS_VIEW = "deid_init_census"
TEXT_CONCEPT_WORDS = {"zip", "zipcode", "postcode", "postal", "postalcode", "plz", "sex", "gender", "race",
                      "ethnicity", "ethnic", "marital", "phone", "telephone", "tel", "mobile", "fax", "ssn"}
# the formats the spec tells from a file's extension (``spec._format_of``)
_FORMAT_OF = {".csv": "csv", ".tsv": "csv", ".txt": "csv", ".parquet": "parquet", ".pq": "parquet",
              ".duckdb": "duckdb", ".db": "duckdb", ".ddb": "duckdb"}
#: the roles Safe Harbor needs (``safe_harbor.REQUIRED_ROLES``: a ZIP and an age)
SAFE_HARBOR_ROLES = {"zip", "age"}
#: how many text ZIP codes are listed in the spec (more: values_from = "source", read at each load)
LISTED_ZIPS = 100


@dataclass(frozen=True)
class Population:
    """Who the data was drawn from, as ``init`` was told: a census table and its count column,
    the population's size, a region's preset, or nothing (the sample itself)."""

    census: Path | None = None
    count: str | None = None
    size: int | None = None
    region: str | None = None

    def words(self) -> str:
        if self.census is not None:
            return f"census {self.census} (people per cell in column {self.count!r})"
        if self.size is not None or self.region is not None:
            people = REGIONS[self.region][0] if self.region else self.size
            return (f"no census: {describe(people, self.region)}; each record's risk estimated from its group's "
                    f"size (benedetti-franconi)")
        return "the sample itself (no census or population size given)"


@dataclass
class Starter:
    """A composed starting spec: where it goes, what was proposed, and its text."""

    out: Path
    data: Path
    ref: TableRef
    rows: int
    proposals: list[Proposal]
    population: Population
    text: str = ""
    notes: list[str] = field(default_factory=list)
    person: PersonProposal | None = None  # the proposed [person]: rows repeat a person's key

    @property
    def qis(self) -> list[QIProposal]:
        return [p.qi for p in self.proposals if p.qi is not None]

    def dropped(self, group: str) -> list[str]:
        return [p.column for p in self.proposals if p.qi is None and p.group == group]


def criteria_lines(roles: set[str] | None = None) -> list[str]:
    """The starting release criteria (``contract.criteria.STARTING_SET``) as ``[release]`` lines;
    given the QIs' ``roles``, without ``no_riskier_than`` when Safe Harbor cannot be built (it
    needs a ZIP and an age)."""
    lines = STARTING_SET.removeprefix("[release]").strip().split(", ")
    if roles is not None and not SAFE_HARBOR_ROLES <= roles:
        lines = [line for line in lines if not line.startswith("no_riskier_than")]
    return lines


def default_out(data: Path) -> Path:
    """``cohort.parquet`` → ``cohort.toml`` beside it."""
    return data.with_name(data.stem + ".toml")


def source_ref(data: Path, fmt: str | None, table: str | None, where: str = "DATA") -> TableRef:
    """Where the data lives, as the spec's ``[source]`` will say (format from the extension unless given)."""
    if not data.is_file():
        raise SpecError(f"{where} {data} does not exist or is not a file; give a CSV, Parquet or DuckDB file")
    suffix = data.suffix.lower()
    guessed = _FORMAT_OF.get(suffix)
    kind = fmt or guessed
    if kind not in FORMATS:
        raise SpecError(f"{where} {data}: cannot tell the format from the extension {suffix or '(none)'}; "
                        f"pass --format csv, parquet or duckdb")
    if kind == "duckdb" and not table:
        raise SpecError(f"{where} {data} is a DuckDB file: pass --source-table NAME (the table to de-identify)")
    if kind != "duckdb" and table:
        raise SpecError(f"--source-table is only for DuckDB files; {data} is read as {kind}")
    return TableRef(data.resolve(), kind, table)


def build(data: Path, population: Population, out: Path | None = None, fmt: str | None = None,
          table: str | None = None) -> Starter:
    """Profile ``data``, propose every column's role, and compose the spec (nothing written)."""
    ref = source_ref(data, fmt, table)
    target = out if out is not None else default_out(data)
    if target.resolve() == data.resolve():
        raise OutputError(f"--out {target} is the data file itself; give the spec another name")
    if not target.parent.is_dir():
        raise OutputError(f"output folder {target.parent} does not exist; create it first")
    if population.census is not None:
        census_ref = source_ref(population.census, None, None, where="--census")
        if census_ref.format == "duckdb":
            raise SpecError(f"--census {population.census} is a DuckDB file; give a CSV or Parquet census (or write "
                            f"[population] path, table and count in the spec by hand)")
    with connect() as backend:  # the default engine reads the files in place
        problem = backend.unreadable(ref)
        if problem:
            raise SpecError(f"{data}: the engine {problem}")
        columns = _open(backend, SOURCE_VIEW, ref, "DATA")
        text: dict[str, bool] = {}
        if ref.format == "csv":  # read codes and yes/no as text, as the spec's load reads category and ZIP QIs
            text = {c: True for c, t in columns.items()
                    if set(tokens(c)) & TEXT_CONCEPT_WORDS or family(t) == "boolean"}
            if text:
                columns = _open(backend, SOURCE_VIEW, ref, "DATA", text)
        profiles = profile(backend, SOURCE_VIEW, columns)
        rows = profiles[0].rows if profiles else 0
        if not profiles or rows == 0:
            raise SpecError(f"DATA {data} has no {'rows' if profiles else 'columns'}; nothing to de-identify")

        def values_of(column: str, width: int | None) -> list[str]:
            return distinct_text(backend, SOURCE_VIEW, column, width)

        proposals = propose(profiles, values_of)
        if ref.format == "csv":  # a category the sniffer typed (codes 01, 02 read as 1, 2): read again as text
            typed = {q.column: True for q in (p.qi for p in proposals) if q is not None
                     and q.kind in ("category", "zip") and not text.get(q.column)
                     and family(columns[q.column]) != "text"}
            if typed:
                text |= typed
                columns = _open(backend, SOURCE_VIEW, ref, "DATA", text)
                profiles = profile(backend, SOURCE_VIEW, columns)
                proposals = propose(profiles, values_of)
        starter = Starter(target, data, ref, rows, proposals, population)
        _renamed_twins(profiles, starter)
        if population.census is not None:
            _against_census(backend, starter, census_ref)
        starter.person = persons.choose(
            starter.proposals, lambda column: repeated_values(backend, SOURCE_VIEW, column),
            lambda key, column: varying_persons(backend, SOURCE_VIEW, key, column))
        people = starter.person.persons if starter.person is not None else rows
        if population.census is None and population.size is not None and population.size < people:
            counted = f"{people:,} persons" if starter.person is not None else f"{rows:,} rows"
            raise SpecError(f"--population {population.size:,} is smaller than the data's {counted}; give the "
                            f"number of people the data was drawn from")
    for proposal in starter.proposals:
        qi = proposal.qi
        if qi is not None:
            qi.cuts = publishable_cuts(qi)  # (from the values, before a long ZIP list is left to the source)
        if (qi is not None and qi.kind == "zip" and proposal.profile.family == "text" and qi.values is not None
                and len(qi.values) > LISTED_ZIPS):
            qi.notes.append(f"values_from = \"source\": the data's {len(qi.values):,} ZIP codes, {qi.values[0]} to "
                            f"{qi.values[-1]} (list them as values = [...] to fix the domain for later batches)")
            qi.values, qi.values_from = None, "source"
    hierarchies.attach(data, starter.proposals, lambda path: _relative(path, target.resolve()))
    starter.text = compose(starter)
    _check(starter)
    return starter


def write(starter: Starter, force: bool) -> None:
    """Write the spec atomically; an existing file only with ``force`` (``--overwrite``)."""
    if starter.out.exists() and not force:
        raise OutputError(f"{starter.out} already exists; pass --overwrite to replace it (or --out FILE to write "
                          f"another)")
    write_text(starter.out, starter.text, overwrite=force)


def _open(backend: Backend, view: str, ref: TableRef, where: str,
          text: dict[str, bool] | None = None) -> dict[str, str]:
    from sqlglot import exp

    try:
        backend.create_temp_view(view, exp.select("*").from_(backend.relation(ref, text or {})))
        return backend.columns(view)
    except BackendError as e:
        message = " ".join(str(e).split())
        if any(w in message.lower() for w in ("unicode", "utf-8", "utf8")):
            raise SpecError(f"{where} {ref.path} is not UTF-8; re-encode it as UTF-8 "
                            f"(e.g. iconv -f latin1 -t utf-8)") from None
        raise SpecError(f"cannot read {where} {ref.describe()}: {message}") from None


def _renamed_twins(profiles: list[ColumnProfile], starter: Starter) -> None:
    """Columns the engine renamed (``age`` beside ``Age`` reads as ``age_1``): the spec must use
    the engine's name, and the reader should know why it differs from the file's header."""
    lowered = {p.name.lower() for p in profiles}
    for p in profiles:
        m = re.fullmatch(r"(.+)_(\d+)", p.name)
        if m and m.group(1).lower() in lowered:
            starter.notes.append(f"column {p.name!r} is how the engine reads a second column named "
                                 f"{m.group(1)!r} but for case (names are compared without case); the spec uses "
                                 f"{p.name!r}")


def _against_census(backend: Backend, starter: Starter, ref: TableRef) -> None:
    """Each proposed QI matched to the census's column (same name, else the one name equal but
    for case); one the census lacks is dropped for review; categories the census lacks noted."""
    census = _open(backend, CENSUS_VIEW, ref, "--census")
    count = starter.population.count
    if count not in census:
        raise SpecError(f"--census {ref.path} has no column {count!r} (the count column); its columns are "
                        f"{', '.join(list(census)[:12])}")
    if family(census[count]) not in ("integer", "float"):
        raise SpecError(f"--census {ref.path} column {count!r} holds {census[count]}; the count column must hold "
                        f"numbers of people")
    by_lower: dict[str, list[str]] = {}
    for name in census:
        by_lower.setdefault(name.lower(), []).append(name)
    for proposal in starter.proposals:
        qi = proposal.qi
        if qi is None:
            continue
        if qi.column in census:
            match = qi.column
        elif len(by_lower.get(qi.column.lower(), [])) == 1:
            match = by_lower[qi.column.lower()][0]
            qi.population_column = match
        else:
            proposal.demote(f"review: looks like {described(qi.concept)} (a quasi-identifier), but the census has "
                            f"no column {qi.column!r}; to declare it a [[qi]], give population_column = \"<its "
                            f"census column>\"")
            continue
        if qi.kind in ("category", "zip") and qi.values is not None:
            width = 5 if qi.kind == "zip" and proposal.profile.family == "integer" else None
            missing, examples = values_outside(backend, SOURCE_VIEW, qi.column, CENSUS_VIEW, match, width)
            if qi.kind == "zip" and not missing and width is None:
                qi.values, qi.values_from = None, "population"
                qi.notes.append("every ZIP code of the data is in the census: the domain is the census's ZIP codes")
            elif missing:
                shown = ", ".join(tomltext.string(e) for e in examples)
                qi.notes.append(f"{missing:,} of its values are not in the census (e.g. {shown}): their groups count "
                                f"only the data's own people; check that the census spells values alike")


def compose(starter: Starter) -> str:
    """The spec's text: header, population, source, the QIs, every other column dropped, criteria."""
    out = starter.out.resolve()
    lines = _header(starter)
    lines += _population(starter, out)
    lines += ["", "[source]", f"path = {tomltext.string(_relative(starter.data, out))}"]
    if starter.ref.format != _FORMAT_OF.get(starter.data.suffix.lower()):
        lines.append(f"format = {tomltext.string(starter.ref.format)}")
    if starter.ref.table is not None:
        lines.append(f"table = {tomltext.string(starter.ref.table)}")
    pop = starter.population
    if pop.census is not None:
        lines += ["", "[population]", f"path = {tomltext.string(_relative(pop.census, out))}",
                  f"count = {tomltext.string(str(pop.count))}"]
    lines += _person(starter)
    for proposal in starter.proposals:
        if proposal.qi is not None:
            lines += _qi_block(proposal)
    if not starter.qis:
        lines += ["", "# No column looked like a quasi-identifier: declare at least one before 'deid-sql validate',",
                  "# e.g. (with the column's real name and domain):",
                  "# [[qi]]", '# name = "age"', '# kind = "integer"', "# min = 0", "# max = 120"]
    lines += _columns(starter)
    roles = {q.role for q in starter.qis if q.role}
    lines += ["", "# What every release must meet: the gate judges each one and refuses it otherwise. A starting set;",
              "# tune it to the data-use agreement (deid-sql help release)."]
    if not SAFE_HARBOR_ROLES <= roles:
        lines += ['# no_riskier_than = "safe-harbor" needs QIs with role "zip" and role "age"; this spec has '
                  + (", ".join(f'role "{r}"' for r in sorted(roles)) if roles else "neither") + "."]
    lines += ["[release]", *criteria_lines(roles), *attribute_lines(starter)]
    return "\n".join(lines) + "\n"


#: the attribute criteria ``init`` proposes for a column that looks sensitive, with what each means
ATTRIBUTE_PROPOSALS = (
    ("max_confidence = 0.5", "at most half of a released group may hold any one value of a sensitive column"),
    ("min_l = 2", "every released group holds at least 2 distinct values of each sensitive column"),
)


def attribute_lines(starter: Starter) -> list[str]:
    """The attribute criteria (METHODS decision 15), commented, when a column looks sensitive: it stays
    dropped until reviewed, and once listed under sensitive these judge what each released group
    reveals of it (a group of five who all carry B20 passes min_k = 5)."""
    named = [p.column for p in starter.proposals if p.sensitive]
    if not named:
        return []
    shown = ", ".join(tomltext.comment(c) for c in named)
    width = max(len(key) for key, _ in ATTRIBUTE_PROPOSALS)
    return ["# What the released values of a sensitive column reveal: " + shown
            + (" looks" if len(named) == 1 else " look") + " sensitive.",
            "# Once listed under [columns] sensitive, uncomment these (deid-sql help release):",
            *(f"# {key.ljust(width)}  # {what}" for key, what in ATTRIBUTE_PROPOSALS)]


def _header(starter: Starter) -> list[str]:
    qis, ids, review = starter.qis, starter.dropped("identifier"), starter.dropped("review")
    keyed = "; the person key pseudonymized" if starter.person is not None else ""
    lines = [f"# A starting spec for {tomltext.comment(starter.data.name)}, written by 'deid-sql init' "
             f"(deid-sql {__version__}) on {dt.date.today().isoformat()}.",
             f"# {starter.rows:,} rows, {len(starter.proposals)} columns: "
             f"{_count(len(qis), 'proposed quasi-identifier')} (QIs); {_count(len(ids), 'identifier')} and "
             f"{_count(len(review), 'other column')} dropped{keyed}.",
             "# Safe by default: only the proposed QIs are released, generalized by the policy you choose; every",
             "# other column is dropped. Read each comment, move what may be released to keep or sensitive, and",
             "# check each QI's domain. Samples are a column's most common values; identifiers show only their",
             "# shape (9 a digit, a/A a letter).",
             "# Next: deid-sql validate SPEC; deid-sql anonymize SPEC --min-k 5; deid-sql evaluate SPEC --policy P"]
    for note in starter.notes:
        lines.append(f"# Note: {tomltext.comment(note)}")
    lines.append(f"name = {tomltext.string(starter.data.stem)}")
    return lines


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _population(starter: Starter, out: Path) -> list[str]:
    pop = starter.population
    if pop.census is not None:
        return ["", "# Population: the census table below counts the people of each cell (see [population])."]
    if pop.region is not None or pop.size is not None:
        given = (f"population = {{ region = {tomltext.string(pop.region)} }}" if pop.region is not None
                 else f"population = {{ size = {pop.size} }}")
        return ["", "# Population: no census table, only the population's size; each record's risk is estimated",
                "# from its group's size in the sample and the sampling fraction (Benedetti-Franconi): it never",
                "# rises with generalization, so every search accepts it. Dataset-level estimates (dankar, pitman,",
                "# zayatz, snb) are for evaluate and the report; the pruning searches refuse them (deid-sql help",
                "# no-census). With a census table: deid-sql init DATA --census FILE COUNT.",
                given, 'risk = "benedetti-franconi"']
    return ["", "# Population: none given, so each group's population is its own records in the sample",
            '# (population = "sample"): the most cautious assumption, every record unique in the sample counts',
            "# as re-identified. With a census table: deid-sql init DATA --census FILE COUNT (or write [population]",
            "# path and count); with only the population's size: population = { size = N } and",
            "# risk = \"benedetti-franconi\"",
            '# (or population = { region = "usa" }); see deid-sql help no-census.',
            'population = "sample"']


def _person(starter: Starter) -> list[str]:
    """``[person]``: the key whose values repeat across rows, so every figure counts persons."""
    person = starter.person
    if person is None:
        return []
    lines = ["", f"# Persons, not rows: {person.persons:,} persons over {person.rows:,} rows (deid-sql help persons). "
                 f"Every figure counts",
             f"# persons by {tomltext.comment(person.column)}; each QI is one value per person (per_person where it "
             f"varies). The",
             '# number of a person\'s rows may single them out too: a [[qi]] with derived = "rows" makes it a QI.']
    if person.order is not None:
        lines.append("# order: the column that orders a person's rows, for per_person = \"first\".")
    lines += ["[person]", f"column = {tomltext.string(person.column)}"]
    if person.order is not None:
        lines.append(f"order = {tomltext.string(person.order)}")
    return lines


def _qi_block(proposal: Proposal) -> list[str]:
    qi = proposal.qi
    assert qi is not None
    lines = ["", "[[qi]]", f"# {tomltext.comment(proposal.reason)}",
             f"# {tomltext.comment(_column_facts(proposal.profile, identifier=False))}"]
    lines += [f"# {tomltext.comment(note)}" for note in qi.notes]
    lines.append(f"name = {tomltext.string(qi.name)}")
    if qi.name != qi.column:
        lines.append(f"column = {tomltext.string(qi.column)}")
    if qi.population_column is not None:
        lines.append(f"population_column = {tomltext.string(qi.population_column)}")
    lines.append(f"kind = {tomltext.string(qi.kind)}")
    if qi.kind in ("integer", "date"):
        lines += [f"min = {tomltext.value(qi.min)}", f"max = {tomltext.value(qi.max)}"]
    elif qi.values is not None:
        lines.append(f"values = {tomltext.array(qi.values)}")
    elif qi.values_from is not None:
        lines.append(f"values_from = {tomltext.string(qi.values_from)}")
    if qi.null_label is not None:
        lines += ['nulls = "category"', f"null_label = {tomltext.string(qi.null_label)}"]
    if qi.hierarchy is not None:
        lines.append(f"hierarchy = {tomltext.string(qi.hierarchy)}")
    if qi.role is not None:
        lines.append(f"role = {tomltext.string(qi.role)}")
    if qi.per_person is not None:
        lines.append(f"per_person = {tomltext.string(qi.per_person)}")
    if qi.transform is not None:  # min and max bound the transformed values (the notes above say why)
        lines.append(f"transform = {tomltext.string(qi.transform)}")
        if qi.scale != 1:
            lines.append(f"scale = {qi.scale}")
    rule = qi.cuts if qi.hierarchy is None else None
    if rule is not None:
        lines += ["# where a policy may cut it: publishable bands, which every search keeps to (its full-domain levels",
                  "# too); widen or remove to suit the data-use agreement", rule]
    return lines


def publishable_cuts(qi: QIProposal) -> str | None:
    """The cut rule ``init`` writes for a proposed QI without a hierarchy, so that every search bands it
    out of the box: ages and birth years in 5-year bands (ages past 89 in one band), dates by month,
    quarter and year, 5-digit ZIP codes by their first 3 digits; None where the domain leaves no such
    cut (or for a category)."""
    if qi.hierarchy is not None:
        return None
    if qi.kind == "integer" and qi.concept in ("age", "birth year") and qi.min is not None and qi.max is not None:
        lo, hi = int(qi.min), int(qi.max)
        if not any(v % 5 == 0 for v in range(lo + 1, hi + 1)):
            return None
        # ages past 89 in one band (HIPAA's rule), so a sparse tail does not coarsen every band
        return "cuts = { every = 5, top = 90 }" if qi.concept == "age" and lo < 90 < hi else "cuts = { every = 5 }"
    if qi.kind == "date" and qi.min is not None and qi.max is not None:
        lo, hi = as_date(qi.min), as_date(qi.max)
        if lo is not None and hi is not None and (lo.year, lo.month) != (hi.year, hi.month):
            return 'date_cuts = ["month", "quarter", "year"]'
        return None
    if qi.kind == "zip" and qi.role == "zip" and qi.values:
        return "zip_digits = [3]" if len({v[:3] for v in qi.values}) > 1 else None
    return None


def _columns(starter: Starter) -> list[str]:
    dropped = [p for p in starter.proposals if p.qi is None and p.group != "person"]
    keyed = [p for p in starter.proposals if p.group == "person"]
    lines = ["", "[columns]",
             "# Every column that is not a proposed QI is dropped. Move one to keep (released as it is) or",
             "# sensitive (released as it is; what l-diversity protects) only after reviewing it."]
    if keyed:
        lines += ["# The person key leaves pseudonymized: an HMAC under a secret key read from the environment,",
                  "# never the spec; make it once and keep it (the same key for every release), then before",
                  f"# validate: export {SECRET_ENV}=$({SECRET_HINT})",
                  "pseudonymize = ["]
        lines += [f"    {tomltext.string(p.column)},  # {tomltext.comment(p.reason)}; "
                  f"{tomltext.comment(_column_facts(p.profile, True))}" for p in keyed]
        lines += ["]", f"secret_env = {tomltext.string(SECRET_ENV)}"]
    if not dropped:
        return lines + ["drop = []"]
    lines.append("drop = [")
    for p in dropped:
        identifier = p.group == "identifier"
        why = ("identifier: " if identifier else "") + p.reason
        facts = _column_facts(p.profile, identifier)
        lines.append(f"    {tomltext.string(p.column)},  # {tomltext.comment(why)}; {tomltext.comment(facts)}")
    lines.append("]")
    return lines


def _column_facts(p: ColumnProfile, identifier: bool) -> str:
    """A column in a few words: its type, distinct values, NULLs and two samples."""
    facts = [p.sql_type]
    if p.distinct is not None:
        facts.append(f"{p.distinct:,} distinct" + (" (one per row)" if p.unique else ""))
    if p.nulls:
        facts.append(f"{p.nulls:,} NULL")
    text = ", ".join(facts)
    if p.top:
        shown = list(dict.fromkeys(shape(v) for v, _ in p.top))[:2] if identifier else [
            tomltext.sample(v) for v, _ in p.top[:2]]
        text += ", e.g. " + ", ".join(shown)
    return text


def _relative(path: Path, out: Path) -> str:
    """``path`` as the spec names it: relative to the spec's folder when inside it (the two move
    together), else absolute."""
    target = path.resolve()
    if target.is_relative_to(out.parent):
        return target.relative_to(out.parent).as_posix()
    return target.as_posix()


def _check(starter: Starter) -> None:
    """The composed text read back as ``Spec`` reads it: a problem here is a bug of ``init``."""
    data = tomllib.loads(starter.text)
    if starter.qis:
        Spec.from_dict(data, base=starter.out.resolve().parent, path=starter.out)
