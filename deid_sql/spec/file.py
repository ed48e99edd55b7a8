"""The spec file: one de-identification problem declared in TOML.

``Spec.read(path)`` parses and checks everything that can be checked without
data, collecting *every* problem (one ``Problems`` collector) before raising one
``SpecError``; checks against the data happen when a ``Problem`` loads (see ``problem.py``).

This module parses the core every job needs, the risk model's name (checked against the
registered risk models) and the release contract (``[release]``, ``[columns]``:
``contract.sections``); the features' sections (``[adversary]``, ``[channels]``) are parsed by
their own packages, registered in ``registry.SECTIONS`` and kept by name in ``Spec.features``,
so the core imports no feature.
"""

from __future__ import annotations

import datetime as dt
import glob as globlib
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..contract.criteria import ReleaseCriteria
from ..contract.roles import ColumnRoles
from ..contract.sections import parse_columns_section, parse_release_section, resolve_release_section
from ..domains.cuts import CutRule, parse_rule
from ..domains.domain import KINDS, parse_date
from ..domains.limits import domain_problems
from ..errors import Problems, SpecError
from ..registry import ENGINES, RISK_MODELS
from ..storage.tableref import TableRef
from .linked import TABLE_ROLE_KEYS, LinkedTable, check_set, parse_linked, parse_release_name
from .persons import PersonSpec, check_person, check_shift, parse_person, parse_qi_rules
from .population_size import parse_size, parse_weights
from .sections import parse_sections, qis_required, section_keys
from .transform import TRANSFORM_KEYS, parse_transform

# TableRef lives in ``tableref`` (below the backends); it is re-exported here for the spec's readers
__all__ = ["BackendSpec", "QISpec", "Spec", "SpecError", "TableRef", "qi_name_problem", "read_toml", "top_keys"]

CORE_KEYS = {"source", "population", "gamma", "qi", "name", "backend", "weights", "risk", "release", "columns",
             "person", "table"}
SOURCE_KEYS = {"path", "table", "delimiter", "format", "glob", "name"}
LOCATION_KEYS = SOURCE_KEYS - {"name"}
POPULATION_KEYS = {"path", "table", "delimiter", "format", "count", "glob", "duplicates"}
DUPLICATES = ("error", "sum")
GLOB_CHARS = "*?[]{}"  # pattern characters of DuckDB's and Hadoop's (Spark's) file globs
QI_KEYS = {"name", "column", "population_column", "kind", "min", "max", "values", "values_from",
           "hierarchy", "nulls", "null_label", "role", "cuts", "zip_digits", "date_cuts", "per_person", "derived",
           *TRANSFORM_KEYS}
ROLES = ("zip", "age", "date")
FORMATS = ("csv", "parquet", "duckdb")
BACKEND_KEYS = {"engine", "dsn", "dsn_env", "master", "conf", "home"}


@dataclass(frozen=True)
class BackendSpec:
    """Which engine runs the row-level work, and how to reach it (``[backend]``)."""

    engine: str = "duckdb"
    dsn: str | None = None  # PostgreSQL connection string (or read from the variable ``dsn_env``)
    master: str | None = None  # Spark master URL, e.g. local[2]
    conf: tuple[tuple[str, str], ...] = ()  # extra Spark settings
    home: Path | None = None  # Spark's folder (warehouse, metastore, log); None: DEID_SQL_SPARK_HOME or the cache

    def options(self) -> dict[str, object]:
        """Keyword arguments for ``backends.connect``."""
        if self.engine == "postgres":
            return {"dsn": self.dsn}
        if self.engine == "spark":
            return {"master": self.master, "conf": dict(self.conf), "home": self.home}
        return {}


@dataclass(frozen=True)
class QISpec:
    """One quasi-identifier as declared (its domain is resolved against data later)."""

    name: str
    column: str
    population_column: str
    kind: str
    min: Any = None
    max: Any = None
    values: tuple[str, ...] | None = None
    values_from: str | None = None
    hierarchy: Path | None = None
    nulls: str = "error"
    null_label: str = "NULL"
    role: str | None = None
    cuts: CutRule | None = None  # where a policy may cut this QI (``domains/cuts.py``); None: anywhere
    per_person: str | None = None  # which of a person's values stands for them (``persons.PER_PERSON``)
    derived: str | None = None  # computed from a person's rows ("rows"), not read from a column
    # an integer QI read through a declared transformation: "floor" | "round" of column × scale (``spec/transform``)
    transform: str | None = None
    scale: float = 1.0


@dataclass(frozen=True)
class Spec:
    """A validated problem declaration.

    ``features`` holds each registered feature section's value by the section's name
    (``feature("adversary")``: ``AdversaryParams``; ``feature("channels")``: ``ChannelSpec | None``);
    their types live in the feature packages, and the core neither imports nor reads them."""

    path: Path
    source: TableRef
    population: TableRef | None
    count_column: str | None
    gamma: float
    qis: tuple[QISpec, ...]
    risk: str  # a registered risk model: "population" (g^−γ), "adversary", a no-census estimator
    release: ReleaseCriteria  # ``[release]``: the acceptance criteria (``contract.criteria``)
    columns: ColumnRoles  # ``[columns]``: the role of every non-QI column (``contract.roles``)
    features: Mapping[str, Any] = field(default_factory=dict)  # feature section name → its value
    name: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    backend: BackendSpec = field(default_factory=BackendSpec)
    # no census: the population's size (``population = { size = N }`` or a region's preset) and a
    # sampling-weight column (``[weights] column = "w"``); see ``spec/population_size.py``
    population_size: int | None = None
    population_region: str | None = None
    weights: str | None = None
    # persons, not rows: the column that names a person (``spec/persons.py``); None: a row is a person
    person: PersonSpec | None = None
    # linked tables released with the source as one set (``spec/linked.py``), and the source's release name
    tables: tuple[LinkedTable, ...] = ()
    source_name: str = "source"

    def feature(self, name: str) -> Any:
        """A feature section's value (its default when the spec lacks the section)."""
        return self.features[name]

    def with_feature(self, name: str, value: Any) -> Spec:
        """This spec with one feature section's value replaced (e.g. other adversary parameters)."""
        return replace(self, features={**self.features, name: value})

    @property
    def qi_names(self) -> tuple[str, ...]:
        return tuple(q.name for q in self.qis)

    @property
    def no_census(self) -> bool:
        """The population is known by its size or the sample's weights, not by a census table."""
        return self.population is None and (self.population_size is not None or self.weights is not None)

    @classmethod
    def read(cls, path: str | Path) -> Spec:
        p = Path(path)
        return cls.from_dict(read_toml(p), base=p.resolve().parent, path=p)

    @classmethod
    def from_dict(cls, data: dict[str, Any], base: Path, path: Path | None = None) -> Spec:
        problems = Problems()
        problems.unknown_keys(data, top_keys(), "the spec's top level")
        backend = _backend(data.get("backend"), base, problems)
        engine_tables = backend.engine != "duckdb"
        source = _table(data.get("source"), "[source]", base, SOURCE_KEYS, problems, required=True,
                        engine_tables=engine_tables, engine=backend.engine)
        pop_raw = data.get("population", "sample")
        population = count = None
        size = region = None
        if isinstance(pop_raw, dict) and set(pop_raw) & {"size", "region"}:
            size, region = parse_size(pop_raw, problems)
        elif pop_raw != "sample":
            if isinstance(pop_raw, str):
                problems.append(
                    f'population = {pop_raw!r} is not understood; write population = "sample" '
                    f"or a [population] table with path and count"
                )
            else:
                population = _table(pop_raw, "[population]", base, POPULATION_KEYS, problems,
                                     required=True, engine_tables=engine_tables, engine=backend.engine)
                count = pop_raw.get("count") if isinstance(pop_raw, dict) else None
                duplicates = pop_raw.get("duplicates", "error") if isinstance(pop_raw, dict) else "error"
                if duplicates not in DUPLICATES:
                    problems.append(f'[population]: duplicates = {duplicates!r} must be "sum" (rows repeating a '
                                    f'cell are added up, e.g. a census split over files) or "error" (the default)')
                elif population is not None:
                    population = replace(population, duplicates=str(duplicates))
                if not isinstance(count, str) or not count:
                    problems.append("[population] needs count = \"<column with census counts>\"")
        weights = parse_weights(data["weights"], problems) if "weights" in data else None
        if weights is not None and population is not None:
            problems.append("[weights]: sampling weights estimate population group sizes, but the spec has a census "
                            "table, which counts them; remove [weights] or the [population] table")
        gamma = data.get("gamma", 1.0)
        if isinstance(gamma, bool) or not isinstance(gamma, int | float) or not math.isfinite(gamma) or gamma <= 0:
            problems.append(f"gamma = {gamma!r} must be a finite positive number (1 is the papers' choice)")
            gamma = 1.0
        # a feature section (channel expansion) may need no quasi-identifiers; every other job does
        qis = _qis(data.get("qi"), base, population is not None, problems) if qis_required(data) else []
        person = parse_person(data.get("person"), problems)
        check_person(person, qis, weights, problems)
        problems.extend(domain_problems(qis))  # refused before any structure is sized by a domain
        qi_columns = tuple(q.column for q in qis)
        risk = data.get("risk", "population")
        if risk not in RISK_MODELS:
            problems.append(f"risk = {risk!r} must be one of {', '.join(RISK_MODELS.names())}")
        release = parse_release_section(data, problems, base)
        if release.ledger_table is not None and backend.engine != "postgres":
            problems.append(
                f"[release] ledger_table keeps the ledger as tables on PostgreSQL, but this spec runs on "
                f"{backend.engine}: " + ("a Spark catalog has no grants to keep its tables owner-only" if
                                         backend.engine == "spark" else "the ledger is a DuckDB file already")
                + "; use ledger = \"PATH\" (a file) instead")
        columns = parse_columns_section(data, qi_columns, problems)
        source_raw = data.get("source")
        source_name = parse_release_name(source_raw.get("name") if isinstance(source_raw, dict) else None, source,
                                         "[source]", problems)
        tables = _linked_tables(data.get("table"), base, columns, person, engine_tables, backend.engine, problems)
        check_set(source, source_name, tables, person.column if person else None, columns, qi_columns, problems)
        check_shift(person, [("[columns]", columns.shift)] + [(t.where, t.roles.shift) for t in tables], problems)
        release = resolve_release_section(release, [columns, *(t.roles for t in tables)], population is not None,
                                          problems)
        features = parse_sections(data, qi_columns, {"release": release, "columns": columns}, problems)
        problems.raise_if_any()
        assert source is not None
        return cls(path=path or base / "spec.toml", source=source, population=population,
                   count_column=count, gamma=float(gamma), qis=tuple(qis),
                   name=str(data.get("name", "")), raw=data, backend=backend, population_size=size,
                   population_region=region, weights=weights, person=person, risk=str(risk), release=release,
                   columns=columns, features=features, tables=tuple(tables), source_name=source_name)


def _linked_tables(raw: Any, base: Path, columns: ColumnRoles, person: PersonSpec | None, engine_tables: bool,
                   engine: str, problems: Problems) -> list[LinkedTable]:
    """``[[table]]``: the linked tables released with the source (``spec/linked.py``)."""
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        problems.append('[[table]] must be an array of tables: [[table]] name = "encounters" path = "…" …')
        return []
    out = []
    for i, t in enumerate(raw):
        where = f"[[table]] {t.get('name', i + 1)!r}"
        ref = _table({k: v for k, v in t.items() if k in LOCATION_KEYS}, where, base, LOCATION_KEYS, problems,
                     required=True, engine_tables=engine_tables, engine=engine)
        for key in t:
            if key not in TABLE_ROLE_KEYS | LOCATION_KEYS:
                problems.append(f"unknown key {key!r} in {where}; allowed keys are "
                                f"{', '.join(sorted(TABLE_ROLE_KEYS | LOCATION_KEYS))}")
        linked = parse_linked(t, ref, where, columns, person.column if person else None, problems)
        if linked is not None:
            out.append(linked)
    return out


def top_keys() -> frozenset[str]:
    """Every top-level key a spec may hold: the core's and the registered feature sections'."""
    return frozenset(CORE_KEYS) | section_keys()


def read_toml(path: Path, missing: str | None = None) -> dict[str, Any]:
    """A spec file's TOML, or one ``SpecError`` line (``missing`` replaces the not-found advice)."""
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise SpecError(missing or f"spec file {path} does not exist; pass the path of a .toml spec") from None
    except UnicodeDecodeError:
        raise SpecError(f"spec file {path} is not UTF-8; re-save it as UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"spec file {path} is not valid TOML: {e}") from None


def _backend(raw: Any, base: Path, problems: Problems) -> BackendSpec:
    if raw is None:
        return BackendSpec()
    where = "[backend]"
    if not isinstance(raw, dict):
        problems.append(f'{where} must be a table: engine = "postgres", dsn = "postgresql://…"')
        return BackendSpec()
    problems.unknown_keys(raw, BACKEND_KEYS, where)
    engine = raw.get("engine", "duckdb")
    if engine not in ENGINES:  # the registered engines (``backends/plugin.py``)
        problems.add(where, f"engine = {engine!r} is not one of {', '.join(ENGINES.names())}")
        return BackendSpec()
    dsn = raw.get("dsn")
    dsn_env = raw.get("dsn_env")
    if dsn_env is not None:
        if dsn is not None:
            problems.add(where, "give dsn or dsn_env, not both")
        elif not isinstance(dsn_env, str) or not os.environ.get(dsn_env):
            problems.add(where, f"dsn_env = {dsn_env!r} names no set environment variable; export it "
                            f"(e.g. {dsn_env}=postgresql://user@host:5432/db)")
        else:
            dsn = os.environ[dsn_env]
    if engine == "postgres" and not isinstance(dsn, str) and dsn_env is None:
        problems.append(f'{where}: engine "postgres" needs dsn = "postgresql://user@host:5432/db" (or dsn_env)')
    if engine != "postgres" and (dsn is not None or dsn_env is not None):
        problems.add(where, "dsn is only for engine \"postgres\"")
    master = raw.get("master")
    conf = raw.get("conf", {})
    home = raw.get("home")
    if engine != "spark" and (master is not None or "conf" in raw or home is not None):
        problems.add(where, "master, conf and home are only for engine \"spark\"")
    if home is not None and (not isinstance(home, str) or not home):
        problems.append(f'{where}: home must be a folder for Spark\'s files, e.g. home = "spark-files" (relative to '
                        f'the spec\'s folder)')
        home = None
    if master is not None and not isinstance(master, str):
        problems.append(f'{where}: master must be a Spark master URL such as "local[2]"')
    if not isinstance(conf, dict) or not all(isinstance(v, str | int | float | bool) for v in conf.values()):
        problems.append(f'{where}: conf must be a table of Spark settings, e.g. '
                        f'conf = {{ "spark.driver.memory" = "4g" }}')
        conf = {}
    return BackendSpec(engine=str(engine), dsn=dsn if isinstance(dsn, str) else None,
                       master=master if isinstance(master, str) else None,
                       home=(base / Path(home).expanduser()).resolve() if home is not None else None,
                       conf=tuple((str(k), str(v).lower() if isinstance(v, bool) else str(v))
                                  for k, v in sorted(conf.items())))


def _table(raw: Any, where: str, base: Path, allowed: set[str], problems: Problems,
           required: bool, engine_tables: bool = False, engine: str = "duckdb") -> TableRef | None:
    if raw is None:
        if required:
            problems.append(f"the spec needs a {where} table with a path")
        return None
    if not isinstance(raw, dict):
        problems.append(f"{where} must be a table (path = ..., ...)")
        return None
    problems.unknown_keys(raw, allowed, where)
    path = raw.get("path")
    if engine_tables and path is None:  # a table the engine itself holds
        table = raw.get("table")
        if not isinstance(table, str) or not table:
            problems.append(f'{where} needs table = "<schema.table>" (a table in the engine) or path = "<file>"')
            return None
        for key in ("delimiter", "format", "glob"):
            if key in raw:
                problems.add(where, f"{key} is only for files; remove it")
        return TableRef(None, "table", table)
    if not isinstance(path, str) or not path:
        problems.append(f"{where} needs path = \"<csv, parquet or duckdb file>\"")
        return None
    p = (base / path).resolve()
    given = raw.get("format")
    if given is not None and given not in FORMATS:
        problems.add(where, f"format = {given!r} is not one of {', '.join(FORMATS)}; fix it (or remove it to "
                        f"tell the format from the extension)")
        return None
    fmt = given or _format_of(p)
    if fmt not in FORMATS:
        problems.append(
            f"{where} path {path!r}: cannot tell the format from the extension; "
            f"add format = \"csv\", \"parquet\" or \"duckdb\""
        )
        return None
    is_glob = raw.get("glob", False)
    matches: tuple[Path, ...] = ()
    if not isinstance(is_glob, bool):
        problems.add(where, f"glob = {is_glob!r} must be true (path is a pattern such as \"parts/*.parquet\") "
                        f"or false (a file name)")
        is_glob = False
    if is_glob:
        # the files read are listed by validate (``describe``): a pattern that also matched a stray
        # file would double the population silently
        matches = tuple(Path(m) for m in sorted(globlib.glob(str(p), recursive=True)) if Path(m).is_file())
        if fmt == "duckdb":
            problems.add(where, "glob = true is for CSV and Parquet files, not a DuckDB file; remove it")
        elif not matches:
            problems.append(f"{where} path {path!r} (glob = true) matches no file; fix the pattern "
                            f"(relative to the spec file)")
    elif not p.exists():
        hint = ("; it is read as a file name: if it is a pattern, add glob = true"
                if any(c in path for c in GLOB_CHARS) and globlib.glob(str(p)) else "")
        problems.append(f"{where} file {p} does not exist; fix path (relative to the spec file){hint}")
    elif engine == "spark" and any(c in str(p) for c in GLOB_CHARS + "\\"):
        problems.append(f"{where} path {str(p)!r} holds a character Spark reads as a file pattern "
                        f"({GLOB_CHARS}\\); rename the file (or set glob = true if it is meant as a pattern)")
    table = raw.get("table")
    if fmt == "duckdb" and not table:
        problems.append(f"{where} is a DuckDB file: add table = \"<table name>\"")
    if fmt != "duckdb" and table:
        problems.add(where, "table is only for DuckDB files; remove it")
    delimiter = raw.get("delimiter")
    if delimiter is not None and (fmt != "csv" or not isinstance(delimiter, str) or len(delimiter) != 1):
        problems.add(where, "delimiter must be one character and only for CSV files")
        delimiter = None
    return TableRef(p, fmt, table, delimiter, glob=is_glob, matches=matches)


def _format_of(p: Path) -> str | None:
    suffix = p.suffix.lower()
    if suffix in (".csv", ".tsv", ".txt"):
        return "csv"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix in (".duckdb", ".db", ".ddb"):
        return "duckdb"
    return None


def _qis(raw: Any, base: Path, has_population: bool, problems: Problems) -> list[QISpec]:
    if not isinstance(raw, list) or not raw:
        problems.append("the spec needs at least one [[qi]] table (name, kind, and its domain)")
        return []
    out: list[QISpec] = []
    names: set[str] = set()
    for i, q in enumerate(raw, 1):
        where = f"[[qi]] #{i}"
        if not isinstance(q, dict):
            problems.append(f"{where} must be a table")
            continue
        name = q.get("name")
        if isinstance(name, str) and name:
            where = f"[[qi]] {name!r}"
        else:
            problems.append(f"{where} needs name = \"...\"")
            continue
        problems.unknown_keys(q, QI_KEYS, where)
        bad = qi_name_problem(name)
        if bad:
            problems.add(where, f"the name {bad}, so policy texts naming it could not be read back; give a "
                            f"plain name = \"...\" and the real column as column = {q.get('column', name)!r}")
        if name in names:
            problems.append(f"{where} is declared twice; give each QI once")
        names.add(name)
        qi = _qi(q, name, where, base, has_population, problems)
        if qi is not None:
            out.append(qi)
    by_column: dict[str, list[str]] = {}
    for q in out:
        by_column.setdefault(q.column, []).append(q.name)
    for column, qi_names in by_column.items():
        if len(qi_names) > 1:  # the release would apply only the last QI's generalization to the column
            problems.append(f"QIs {', '.join(repr(n) for n in qi_names)} all read source column {column!r}; a column "
                            f"is generalized once, so declare it as one QI (or copy the column first)")
    roles = [q.role for q in out if q.role]
    for role in set(roles) - {"date"}:  # several dates (birth, admission, …) may all become years
        if roles.count(role) > 1:
            problems.append(f"role {role!r} is given to more than one QI; give it to one")
    return out


def qi_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a QI name in policy texts (None when it can).

    ``Lattice.parse`` splits a policy text at ``|``, each segment at its first ``:``, and strips
    whitespace around names; ``--policy @FILE`` reads a file.  A name with ``|`` or ``:``, spaces
    at either end, a leading ``@`` or a control character would print a policy text that reads
    back as another policy (or not at all).  ``=`` and ``,`` only separate inside the part after
    ``:``, so names may hold them (and quotes, unicode, inner spaces, SQL keywords)."""
    if not name:
        return "is empty"
    for ch in "|:":
        if ch in name:
            return f"{name!r} contains {ch!r} (the policy text separator)"
    if name != name.strip():
        return f"{name!r} starts or ends with whitespace (policy texts strip it)"
    if name.startswith("@"):
        return f"{name!r} starts with '@' (--policy @FILE reads a file)"
    if any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in name):
        return f"{name!r} contains a control character"
    return None


def _qi(q: dict[str, Any], name: str, where: str, base: Path, has_population: bool,
        problems: Problems) -> QISpec | None:
    kind = q.get("kind")
    if kind not in KINDS:
        problems.add(where, f"kind = {kind!r} is not one of {', '.join(KINDS)}")
        return None
    per_person, derived = parse_qi_rules(q, kind, where, problems)
    transform, scale = parse_transform(q, kind, derived, where, problems)
    column = name if derived is not None else q.get("column", name)
    if derived is not None and has_population and "population_column" not in q:
        problems.add(where, f"derived = {derived!r} with a census table: the census must count people by it too; "
                            f"give population_column = \"<its census column>\", or use population = \"sample\"")
    lo, hi = q.get("min"), q.get("max")
    values = q.get("values")
    values_from = q.get("values_from")
    hierarchy = q.get("hierarchy")
    if kind == "integer":
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (lo, hi)) or lo > hi:
            problems.add(where, "an integer QI needs whole numbers min <= max (e.g. min = 0, max = 120)")
    elif kind == "date":
        try:
            lo, hi = parse_date(lo, f"{where} min"), parse_date(hi, f"{where} max")
            if lo > hi:
                problems.add(where, f"min {lo} is after max {hi}")
        except SpecError as e:
            problems.append(str(e))
    else:
        if values is not None and values_from is not None:
            problems.add(where, "give values or values_from, not both")
        if values is not None and (not isinstance(values, list) or not values
                                   or not all(isinstance(v, str) for v in values)):
            problems.add(where, "values must be a non-empty list of strings in domain order")
            values = None
        elif values is not None:
            seen: set[str] = set()
            dups = [v for v in values if v in seen or seen.add(v)]  # type: ignore[func-returns-value]
            if dups:
                shown = ", ".join(repr(d) for d in dups[:5])
                problems.add(where, f"duplicate categories {shown}; list every category once")
        allowed_from = ("source", "population", "hierarchy")
        if values_from is not None and values_from not in allowed_from:
            problems.add(where, f"values_from must be one of {', '.join(allowed_from)}")
        if values_from == "population" and not has_population:
            problems.add(where, "values_from = \"population\" needs a [population] table")
        if values_from == "hierarchy" and not hierarchy:
            problems.add(where, "values_from = \"hierarchy\" needs hierarchy = \"<file>\"")
        if values is None and values_from is None:
            values_from = "hierarchy" if hierarchy else (
                "population" if kind == "zip" and has_population else "source")
    if kind in ("integer", "date") and (values is not None or values_from is not None):
        problems.add(where, f"{kind} QIs take min and max, not values")
    nulls = q.get("nulls", "error")
    if nulls not in ("error", "category"):
        problems.add(where, "nulls must be \"error\" or \"category\"")
    if nulls == "category" and kind not in ("category", "zip"):
        problems.append(
            f"{where}: nulls = \"category\" is for category and zip QIs; declare {name!r} as a "
            f"category or clean its NULLs"
        )
    null_label = q.get("null_label", "NULL")
    if values and nulls == "category" and null_label in values:
        problems.add(where, f"null_label {null_label!r} is also a real category; pick another")
    role = q.get("role")
    if role is not None and role not in ROLES:
        problems.add(where, f"role must be one of {', '.join(ROLES)}")
    elif role == "date" and kind != "date":
        problems.add(where, "role \"date\" needs kind = \"date\" (Safe Harbor turns dates into years)")
    elif role == "age" and kind != "integer":
        problems.add(where, "role \"age\" needs kind = \"integer\"")
    hpath = None
    if hierarchy is not None:
        if not isinstance(hierarchy, str):
            problems.add(where, "hierarchy must be a file path")
        else:
            hpath = (base / hierarchy).resolve()
            if not hpath.exists():
                problems.add(where, f"hierarchy file {hpath} does not exist")
    for key in ("column", "population_column"):
        if key in q and (not isinstance(q[key], str) or not q[key]):
            problems.add(where, f"{key} must be a column name")
    if isinstance(lo, dt.datetime):
        lo = lo.date()
    cuts = parse_rule(q, kind, lo, hi, values, where, problems)
    return QISpec(name=name, column=str(column), population_column=str(q.get("population_column", column)),
                  kind=kind, min=lo, max=hi, values=tuple(values) if values else None,
                  values_from=values_from, hierarchy=hpath, nulls=nulls, null_label=str(null_label),
                  role=role, cuts=cuts, per_person=per_person, derived=derived, transform=transform, scale=scale)
