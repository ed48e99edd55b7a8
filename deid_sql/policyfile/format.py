"""The policy file (JSON, version 1): a chosen policy frozen so it can be re-applied to new batches.

It holds what a new batch needs without the data the policy was chosen on: every QI's full
domain (ordered values, or min/max), the policy's intervals with their labels (``saved_qi.py``), the source's
schema, a hash that ties both to the spec, the figures at save time (with the release's groups
and their sizes) and the drift rule (``tolerance.py``: a permutation test against the saved
groups, or an exact threshold; a file saved before the rule has no ``drift.rule`` and keeps the
exact limit it was saved with) with the level of the distribution test (``shift.py``; a file
without it runs that test at the default level), and the ``[person]`` declaration of a spec that
counts persons (``spec/persons.py``) and the set of a spec with linked tables (``linkedset.py``; the
hash covers both).  ``PolicyFile.read`` checks all of it and refuses a
file that is not JSON, of another version, malformed, or edited so its parts disagree.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from ..compiler.suppression import Suppression
from ..domains.domain import CategoryDomain, DateDomain, Domain, IntegerDomain, ZipDomain
from ..domains.recoding import Recoding
from ..errors import DeidError, OutputError, PolicyError
from ..policies.lattice import Lattice
from ..release.plan import ReleasePlan
from ..spec.file import Spec
from .groups import Groups
from .layout import pretty
from .linkedset import SavedSet
from .persons import SavedPerson
from .saved_qi import Interval, SavedGroup, SavedQI
from .shift import Shift
from .tolerance import RULES, Tolerance

FORMAT = "deid-sql policy"
VERSION = 1
MEASURE = "mean_record_risk"
MEASURE_MEANING = ("risk_sum / records: the expected re-identification rate per record, i.e. the mean over "
                   "records of r(g) = g^-gamma (or of P_reid x loss with risk = \"adversary\"), g = the group's "
                   "population size (its sample size with population = \"sample\")")
RESAVE = "re-save it with deid-sql policy save"
_NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
            "UHUGEINT", "INT", "INT1", "INT2", "INT4", "INT8", "LONG", "SHORT", "FLOAT", "FLOAT4", "FLOAT8",
            "DOUBLE", "REAL", "DECIMAL", "NUMERIC", "DOUBLE PRECISION")
_TEXT = ("VARCHAR", "TEXT", "STRING", "CHAR", "BPCHAR")


class PolicyFileError(PolicyError):
    """A policy file that cannot be used as it is (not JSON, another version, malformed, stale)."""


def type_class(sql_type: str) -> str:
    """The kind of a column's SQL type that a batch must keep: ``number`` (any integer, float or
    decimal — a small CSV batch may sniff 70.0 as BIGINT), ``text``, ``date``, ``timestamp``, …"""
    t = str(sql_type).upper().split("(")[0].strip()
    if t in _NUMERIC:
        return "number"
    if t in _TEXT:
        return "text"
    if t.startswith("TIMESTAMP") or t == "DATETIME":
        return "timestamp"
    if t in ("BOOLEAN", "BOOL", "LOGICAL"):
        return "boolean"
    return t.lower()


def spec_sha256(declarations: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]],
                person: dict[str, Any] | None = None, linked: dict[str, Any] | None = None) -> str:
    """sha256 over the canonical JSON of the QI declarations (name, column, kind, nulls, domain),
    the source's columns (name, type class; sorted by name, so column order does not count) and
    the ``[person]`` declaration and the set of linked tables (``linkedset.SavedSet``; each only
    when there is one: a file without it hashes as before)."""
    payload = {"qis": list(declarations), "columns": sorted([list(c) for c in columns])}
    payload |= {"person": person} if person is not None else {}
    payload |= {"set": linked} if linked is not None else {}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def risk_model_of(spec: Spec) -> dict[str, Any]:
    """What the saved and the new figures must share to be compared."""
    return {"risk": spec.risk, "gamma": spec.gamma,
            "population": "sample" if spec.population is None else "table",
            "adversary": spec.feature("adversary").to_dict() if spec.risk == "adversary" else None}


@dataclass(frozen=True)
class Column:
    name: str
    type: str

    @property
    def kind(self) -> str:
        return type_class(self.type)


@dataclass(frozen=True)
class Figures:
    """A release's risk figures, computed on its generalized groups (see ``drift.measure``)."""

    records: int
    groups: int
    k: int
    sample_unique_records: int
    risk_sum: float
    mean_record_risk: float
    expected_reidentifications: float
    max_record_risk: float
    corrected_groups: int
    population_total: float
    risk: float  # risk_sum / risk_sum of the batch's own original data (docs/policies-and-metrics.md: normalized risk)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _group_row(row: Any, d: int) -> bool:
    """A saved group row: d labels, records, population people (or null), record risk."""
    number = (int, float)
    return (isinstance(row, list) and len(row) == d + 3 and all(isinstance(x, str) for x in row[:d])
            and isinstance(row[d], int) and not isinstance(row[d], bool)
            and (row[d + 1] is None or isinstance(row[d + 1], number)) and isinstance(row[d + 2], number))


@dataclass(frozen=True)
class PolicyFile:
    """A saved policy (see the module docstring); ``path`` is where it was read from."""

    policy: str
    readable: str
    spec: Path  # absolute
    spec_sha256: str
    source: str
    columns: tuple[Column, ...]
    qis: tuple[SavedQI, ...]
    fallback: str | None
    risk_model: dict[str, Any]
    metrics: dict[str, Any]
    threshold: float
    threshold_from: str  # "saved figure" (the default) or "set at save" (--threshold)
    figures: Figures
    groups: Groups
    tolerance: Tolerance = Tolerance()  # the drift rule; "exact" for --threshold and for files saved before it
    shift: Shift | None = None  # the distribution test's level; None or not ``saved``: a file saved before it
    source_table: bool = False  # ``source`` names a table of the spec's engine, not a file
    levels: str | None = None  # the level vector's text, when the policy is one (``--levels``, anonymize)
    suppression: Suppression | None = None  # groups suppressed by label (an anonymization's)
    person: SavedPerson | None = None  # the [person] declaration: the figures count persons
    linked: SavedSet | None = None  # the set of linked tables its batches are released with
    saved_at: str = ""
    saved_with: str = ""
    path: Path | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(q.name for q in self.qis)

    @property
    def domains(self) -> list[Domain]:
        return [q.domain for q in self.qis]

    def lattice(self) -> Lattice:
        return Lattice(self.names, self.domains)

    def recoding(self) -> Recoding:
        """The saved policy as a recoding, built from the saved domains and intervals or groups only."""
        if all(q.groups is None for q in self.qis):
            return self.lattice().policy(np.concatenate([q.bits() for q in self.qis])).recoding()
        return Recoding(tuple(q.recoding() for q in self.qis), name=self.policy)

    def plan(self) -> ReleasePlan:
        """The saved policy as a release plan over the saved domains: its recoding, text (a level
        vector's is ``levels``), readable form and suppression."""
        levels = self.levels or None
        return ReleasePlan(self.recoding(), None if levels else self.policy, self.readable, self.suppression, levels)

    def bottom(self) -> Recoding:
        return self.lattice().bottom().recoding()

    def describe(self) -> str:
        return str(self.path) if self.path is not None else "(unsaved policy)"

    def saved_on(self) -> str:
        return f"table {self.source}" if self.source_table else self.source

    @property
    def without_tolerance(self) -> bool:
        """A file saved before the drift rule: its limit is the saved figure exactly."""
        return self.tolerance.rule == "exact" and self.threshold_from == "saved figure"

    # -- JSON ---------------------------------------------------------------------------
    def to_json(self, folder: Path) -> str:
        """The file's text; the spec and source paths are written relative to ``folder``."""
        data = {
            "format": FORMAT, "version": VERSION, "saved_with": self.saved_with, "saved_at": self.saved_at,
            "policy": self.policy, "readable": self.readable,
            **({"levels": self.levels} if self.levels is not None else {}),
            **({"suppression": {"rule": self.suppression.rule, "groups": [list(g) for g in
                                                                          self.suppression.ordered_groups]}}
               if self.suppression is not None else {}),
            "spec": {"path": relative(self.spec, folder), "sha256": self.spec_sha256},
            "source": {**({"table": self.source} if self.source_table else {"path": self.source}),
                       "records": self.figures.records,
                       "columns": [{"name": c.name, "type": c.type, "class": c.kind} for c in self.columns]},
            "qis": [q.to_json() for q in self.qis],
            **({"person": self.person.to_json()} if self.person is not None else {}),
            **({"set": self.linked.to_json()} if self.linked is not None else {}),
            "fallback": self.fallback,
            "risk_model": self.risk_model,
            "metrics": self.metrics,
            "drift": {"measure": MEASURE, "meaning": MEASURE_MEANING, "saved": self.figures.mean_record_risk,
                      "threshold": self.threshold, "threshold_from": self.threshold_from,
                      **self.tolerance.to_json(),
                      **({"shift": self.shift.to_json()} if self.shift is not None and self.shift.saved else {})},
            "release": {"figures": self.figures.to_dict(), "groups": self.groups.to_json()},
        }
        return pretty(data) + "\n"

    @classmethod
    def read(cls, path: str | Path) -> PolicyFile:
        p = Path(path)
        try:
            text = p.read_bytes().decode("utf-8")
        except FileNotFoundError:
            raise PolicyFileError(f"policy file {p} does not exist; write one with deid-sql policy save") from None
        except IsADirectoryError:
            raise PolicyFileError(f"policy file {p} is a folder; pass the .json file") from None
        except UnicodeDecodeError:
            raise PolicyFileError(f"policy file {p} is not UTF-8 text; {RESAVE}") from None
        except OSError as e:
            raise PolicyFileError(f"cannot read policy file {p}: {e.strerror or e}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise PolicyFileError(f"policy file {p} is not JSON (line {e.lineno}, column {e.colno}: {e.msg}); "
                                  f"{RESAVE}") from None
        return _Reader(p).policy_file(data)


def relative(path: Path, folder: Path) -> str:
    """``path`` relative to ``folder`` when they share a root, else absolute (POSIX slashes)."""
    try:
        return Path(os.path.relpath(path.resolve(), folder.resolve())).as_posix()
    except ValueError:  # another drive
        return path.resolve().as_posix()


class _Reader:
    """Checks a parsed policy file, each problem one line naming the key."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, what: str) -> DeidError:
        return PolicyFileError(f"policy file {self.path} is malformed: {where} {what}; {RESAVE}")

    def get(self, obj: Any, key: str, types: type | tuple[type, ...], where: str, optional: bool = False) -> Any:
        if not isinstance(obj, dict):
            raise self.fail(where, "must be a JSON object")
        if key not in obj or (optional and obj[key] is None):
            if optional:
                return None
            raise self.fail(f"{where}.{key}" if where else key, "is missing")
        value = obj[key]
        bad_bool = isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,))
        if not isinstance(value, types) or bad_bool:
            raise self.fail(f"{where}.{key}" if where else key, f"has the wrong type ({type(value).__name__})")
        return value

    def number(self, obj: Any, key: str, where: str) -> float:
        value = float(self.get(obj, key, (int, float), where))
        if not math.isfinite(value):
            raise self.fail(f"{where}.{key}", "is not a finite number")
        return value

    def policy_file(self, data: Any) -> PolicyFile:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise PolicyFileError(f"policy file {self.path} is not a deid-sql policy file (no \"format\": "
                                  f"\"{FORMAT}\"); pass a file written by deid-sql policy save")
        version = data.get("version")
        if version != VERSION:
            raise PolicyFileError(f"policy file {self.path} has version {version!r}; this deid-sql reads version "
                                  f"{VERSION} — {RESAVE}")
        spec = self.get(data, "spec", dict, "")
        source = self.get(data, "source", dict, "")
        columns = tuple(Column(self.get(c, "name", str, "source.columns[]"),
                               self.get(c, "type", str, "source.columns[]"))
                        for c in self.get(source, "columns", list, "source"))
        qis = tuple(self.qi(q, i) for i, q in enumerate(self.get(data, "qis", list, "")))
        if not qis:
            raise self.fail("qis", "is empty")
        names = [q.name for q in qis]
        if len(set(names)) != len(names):
            raise self.fail("qis", "names a QI twice")
        person = SavedPerson.from_json(data.get("person"), names, self.fail)
        derived = person.derived_names if person is not None else set()  # counted per person, not read
        missing = [q.column for q in qis if q.column not in {c.name for c in columns} and q.name not in derived]
        if missing:
            raise self.fail("source.columns", f"lacks the QI column {missing[0]!r}")
        text = self.get(data, "policy", str, "")
        levels = self.get(data, "levels", str, "", optional=True)
        suppression = self.suppression(data.get("suppression"), len(qis))
        if all(q.groups is None for q in qis):  # a lattice policy: its text and its intervals must agree
            lattice = Lattice(names, [q.domain for q in qis])
            try:
                text = lattice.parse(text).text()
            except PolicyError as e:
                raise self.fail("policy", f"does not fit the saved domains ({e})") from None
            parsed = lattice.parse(text)
            for i, q in enumerate(qis):
                if not np.array_equal(parsed.qi_bits(i).astype(np.uint8), q.bits()):
                    raise self.fail(f"qis[{i}].intervals", f"of QI {q.name!r} disagree with the policy text")
        digest = self.get(spec, "sha256", str, "spec")
        linked = SavedSet.from_json(data.get("set"), self.fail)
        own = spec_sha256([q.declaration() for q in qis], [(c.name, c.kind) for c in columns],
                          person.to_json() if person is not None else None,
                          linked.declaration() if linked is not None else None)
        if own != digest:
            raise PolicyFileError(f"policy file {self.path}: its QIs or columns do not match its spec hash "
                                  f"(edited by hand?); {RESAVE}")
        drift = self.get(data, "drift", dict, "")
        if self.get(drift, "measure", str, "drift") != MEASURE:
            raise self.fail("drift.measure", f"must be {MEASURE!r}")
        threshold = self.number(drift, "threshold", "drift")
        if threshold <= 0:
            raise self.fail("drift.threshold", "must be > 0")
        threshold_from = self.get(drift, "threshold_from", str, "drift")
        tolerance = self.tolerance(drift, threshold_from)
        try:
            shift = Shift.from_json(drift.get("shift"))
        except ValueError as e:
            raise self.fail("drift.shift", str(e)) from None
        release = self.get(data, "release", dict, "")
        fallback = self.get(data, "fallback", str, "", optional=True)
        if fallback == "":
            raise self.fail("fallback", "is empty (use null for none)")
        table = self.get(source, "table", str, "source", optional=True)
        source_table = table is not None
        source_name = table if source_table else self.get(source, "path", str, "source")
        spec_ref = self.get(spec, "path", str, "spec")
        spec_path = Path(spec_ref)
        if not spec_path.is_absolute():
            spec_path = self.path.resolve().parent / spec_path
        figures = self.figures(self.get(release, "figures", dict, "release"))
        if tolerance.rule != "exact" and threshold != figures.mean_record_risk:
            raise self.fail("drift.threshold", "must be the saved figure (release.figures.mean_record_risk) with "
                                               f"rule {tolerance.rule!r}")
        return PolicyFile(
            policy=text, readable=self.get(data, "readable", str, ""), spec=spec_path.resolve(),
            levels=levels, suppression=suppression,
            spec_sha256=digest, source=source_name, columns=columns, qis=qis,
            fallback=fallback, risk_model=self.get(data, "risk_model", dict, ""),
            metrics=self.get(data, "metrics", dict, ""), threshold=threshold, threshold_from=threshold_from,
            figures=figures,
            groups=self.groups(self.get(release, "groups", dict, "release"), tuple(names)),
            tolerance=tolerance, shift=shift, source_table=source_table, person=person, linked=linked,
            saved_at=str(data.get("saved_at", "")), saved_with=str(data.get("saved_with", "")), path=self.path)

    def tolerance(self, drift: dict[str, Any], threshold_from: str) -> Tolerance:
        """The drift rule; a file without ``rule`` (saved before it) keeps the exact limit."""
        rule = self.get(drift, "rule", str, "drift", optional=True)
        if rule is None or rule == "exact":
            return Tolerance()
        if rule not in RULES:
            raise self.fail("drift.rule", f"{rule!r} is not one of {', '.join(RULES)}")
        if threshold_from != "saved figure":
            raise self.fail("drift.rule", f"{rule!r} goes with threshold_from \"saved figure\" only")
        false_alarm = self.number(drift, "false_alarm", "drift")
        if not 0 < false_alarm < 1:
            raise self.fail("drift.false_alarm", "must be between 0 and 1")
        permutations = self.get(drift, "permutations", int, "drift")
        seed = self.get(drift, "seed", int, "drift")
        if permutations < 1 or seed < 0:
            raise self.fail("drift.permutations", "and drift.seed must be a positive count and a seed >= 0")
        return Tolerance(rule, false_alarm, permutations, seed)

    def qi(self, raw: Any, i: int) -> SavedQI:
        where = f"qis[{i}]"
        name = self.get(raw, "name", str, where)
        kind = self.get(raw, "kind", str, where)
        nulls = self.get(raw, "nulls", str, where)
        domain = self.domain(kind, self.get(raw, "domain", dict, where), f"{where}.domain")
        transform = self.get(raw, "transform", str, where, optional=True) or None
        if "groups" in raw and isinstance(raw, dict):
            return SavedQI(name, self.get(raw, "column", str, where), kind, nulls, domain, (),
                           self.saved_groups(self.get(raw, "groups", list, where), domain, f"{where}.groups"),
                           transform)
        intervals = []
        previous = -1
        for j, iv in enumerate(self.get(raw, "intervals", list, where)):
            at = f"{where}.intervals[{j}]"
            first = self.position(domain, self.get(iv, "first", (int, str), at), f"{at}.first")
            last = self.position(domain, self.get(iv, "last", (int, str), at), f"{at}.last")
            if not previous < first < last:
                raise self.fail(at, "must be a run of at least two values after the previous interval")
            label = self.get(iv, "label", str, at)
            if label != domain.interval_label(first, last):
                raise self.fail(f"{at}.label", f"{label!r} is not the label of that interval "
                                               f"({domain.interval_label(first, last)!r})")
            intervals.append(Interval(first, last, label))
            previous = last
        return SavedQI(name, self.get(raw, "column", str, where), kind, nulls, domain, tuple(intervals),
                       transform=transform)

    def saved_groups(self, raw: list[Any], domain: Domain, where: str) -> tuple[SavedGroup, ...]:
        """Every group of a QI with its label and values: each domain value in exactly one group,
        each label once."""
        groups, seen, labels = [], set(), set()
        for j, group in enumerate(raw):
            at = f"{where}[{j}]"
            label = self.get(group, "label", str, at)
            if label in labels:
                raise self.fail(f"{at}.label", f"{label!r} labels two groups")
            labels.add(label)
            positions = tuple(self.position(domain, v, f"{at}.values") for v in self.get(group, "values", list, at))
            if not positions or seen & set(positions):
                raise self.fail(f"{at}.values", "must be values of the domain that no other group has")
            seen |= set(positions)
            groups.append(SavedGroup(label, positions))
        if len(seen) != domain.size:
            raise self.fail(where, f"cover {len(seen)} of the domain's {domain.size} values; every value needs a group")
        return tuple(groups)

    def suppression(self, raw: Any, n_qis: int) -> Suppression | None:
        """The suppressed groups (label tuples, one label per QI) and their rule, or None."""
        if raw is None:
            return None
        rule = self.get(raw, "rule", str, "suppression")
        groups = self.get(raw, "groups", list, "suppression")
        if not all(isinstance(g, list) and len(g) == n_qis and all(isinstance(v, str) for v in g) for g in groups):
            raise self.fail("suppression.groups", f"must be lists of {n_qis} labels (one per QI)")
        return Suppression.of_groups([tuple(g) for g in groups], rule)

    def domain(self, kind: str, raw: dict[str, Any], where: str) -> Domain:
        try:
            if kind == "integer":
                lo, hi = self.get(raw, "min", int, where), self.get(raw, "max", int, where)
                if lo > hi:
                    raise self.fail(where, "has min > max")
                return IntegerDomain(lo, hi)
            if kind == "date":
                lo, hi = (dt.date.fromisoformat(self.get(raw, k, str, where)) for k in ("min", "max"))
                if lo > hi:
                    raise self.fail(where, "has min > max")
                return DateDomain(lo, hi)
            if kind in ("category", "zip"):
                values = self.get(raw, "values", list, where)
                if not all(isinstance(v, str) for v in values):
                    raise self.fail(f"{where}.values", "must be strings")
                return (ZipDomain if kind == "zip" else CategoryDomain)(tuple(values))
        except ValueError as e:
            raise self.fail(where, f"is not valid ({e})") from None
        except DeidError as e:
            if isinstance(e, PolicyFileError):
                raise
            raise self.fail(where, f"is not valid ({e})") from None
        raise self.fail(where.rsplit(".", 1)[0] + ".kind", f"{kind!r} is not integer, category, zip or date")

    def position(self, domain: Domain, value: Any, where: str) -> int:
        pos = domain.position(value) if not isinstance(value, bool) else None
        if pos is None:
            raise self.fail(where, f"{value!r} is not a value of the domain")
        return pos

    def figures(self, raw: dict[str, Any]) -> Figures:
        values: dict[str, Any] = {}
        for f in fields(Figures):
            x = self.number(raw, f.name, "release.figures")
            values[f.name] = int(x) if f.type == "int" else x
        return Figures(**values)

    def groups(self, raw: dict[str, Any], names: tuple[str, ...]) -> Groups:
        columns = self.get(raw, "columns", list, "release.groups")
        if columns != [*names, "records", "population", "record_risk"]:
            raise self.fail("release.groups.columns", "do not match the QIs")
        rows = self.get(raw, "rows", list, "release.groups")
        d = len(names)
        labels, records, population, risk = [], [], [], []
        for row in rows:
            if not _group_row(row, d):
                raise self.fail("release.groups.rows", f"has a bad row {str(row)[:80]}")
            labels.append(tuple(row[:d]))
            records.append(row[d])
            population.append(np.nan if row[d + 1] is None else row[d + 1])
            risk.append(row[d + 2])
        pop = np.asarray(population, dtype=np.float64)
        return Groups(names, tuple(labels), np.asarray(records, dtype=np.int64),
                      None if rows and np.isnan(pop).all() else pop, np.asarray(risk, dtype=np.float64))


def one_table(policy: PolicyFile, command: str) -> None:
    """Refuse a set's policy file on a path that reads one batch: its linked tables would be
    neither checked nor released, and a set is released whole or not at all."""
    if policy.linked is not None:
        names = ", ".join(policy.linked.names)
        out = " and --out FOLDER" if command == "apply" else ""
        raise OutputError(f"policy file {policy.describe()} was saved for a set of linked tables ({names}): give each "
                          f"its batch with --linked NAME=FILE (or --linked-table NAME=TABLE){out}, beside the person "
                          f"batch")
