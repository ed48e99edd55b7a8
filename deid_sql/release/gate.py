"""The release gate: one check that every path writing or exposing rows runs before anything is seen.

A release passes when its figures, measured on the rows it releases (``release.figures``),
meet every criterion of the spec's ``[release]`` table (``contract.criteria``).  No criteria,
no release: a spec without one is refused.  The original data is refused whatever the policy
text looks like: a recoding that keeps every value, or a release whose groups on the actual
rows are as many as the source's distinct QI combinations (a policy that merges only values
nobody has tells every record apart as the source does), unless ``allow_original_data``.
A failed gate raises ``ReleaseRefused`` and the caller writes nothing;
``accept_risk`` (the CLI's ``--accept-risk "REASON"``) releases anyway and the reason, the
figures and the limits go into the sidecar (``release.sidecar``) and are printed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from sqlglot import exp

from .. import __version__
from ..compiler.suppression import Suppression
from ..contract.criteria import STARTING_SET, ReleaseCriteria
from ..domains.recoding import Recoding
from ..errors import OutputError, PolicyError, ReleaseRefused, SpecError
from ..evaluate.riskmodel import RecordRisk
from ..ledger.store import Entry, Ledger, LedgerQI, Released, exists
from .attribute import (
    Groups,
    LinkedValues,
    linked_columns,
    linked_source_query,
    linked_value_query,
    measure_column,
    open_linked_values,
    source_query,
)
from .figures import FLAG, AttributeFigures, Census, ReleaseFigures, count_groups, measure
from .plan import ReleasePlan
from .recorded import record_sha256, resolved
from .sidecar import (
    FORMAT,
    INVOCATION,
    VERSION,
    as_table,
    file_sha256,
    population_kind,
    population_without_census,
    recoding_sha256,
    sidecar_table,
    utc_now,
)
from .union import (
    EntryGroup,
    LedgerPlan,
    RowsCounted,
    entry_groups,
    ledger_qis,
    persons_and_groups,
    released_persons,
    union_attribute,
    union_figures,
)
from .unit import RECORDS, Unit

if TYPE_CHECKING:
    from ..problem import Problem
    from ..spec.file import Spec, TableRef


@dataclass(frozen=True)
class Check:
    """One criterion checked: the figure, its value, the limit, and whether it passed."""

    key: str
    figure: str
    value: float
    limit: float
    at_most: bool
    passed: bool
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"criterion": self.key, "figure": self.figure, "value": self.value, "limit": self.limit,
                "must_be": "<=" if self.at_most else ">=", "passed": self.passed}


@dataclass(frozen=True)
class Verdict:
    """The gate's answer: every check, and whether the release may go (passed or accepted)."""

    checks: tuple[Check, ...]
    original_data: bool  # the release tells apart every record the source tells apart
    declared: bool  # the spec's [release] gives at least one criterion
    accepted_risk: str | None = None
    allow_original_data: bool = False  # [release] allow_original_data = true
    unit: Unit = RECORDS  # what the figures count: the words of the failures (persons with [person])
    union: str | None = None  # the earlier releases the union checks (figure "union.…") were judged with

    @property
    def failures(self) -> list[str]:
        out = [c.text for c in self.checks if not c.passed and not c.figure.startswith("union.")]
        joined = [c.text for c in self.checks if not c.passed and c.figure.startswith("union.")]
        if joined:  # what the recipient holds with this release: the earlier releases named once
            out.append(f"{self.union}: {'; '.join(joined)}")
        if self.original_data and not self.allow_original_data:
            out.insert(0, f"the release tells apart every {self.unit.one} the source tells apart (the original data, "
                          f"whatever the policy text says); generalize more, or set [release] allow_original_data = "
                          f"true to accept it")
        if not self.declared:
            out.insert(0, f"the spec declares no release criteria: add a starting set such as {STARTING_SET} and "
                          f"tune it to the data-use agreement")
        return out

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def status(self) -> str:
        return "passed" if self.passed else ("accepted" if self.accepted_risk else "refused")

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.status, "checks": [c.to_dict() for c in self.checks],
                "original_data": self.original_data, "allow_original_data": self.allow_original_data,
                "failures": self.failures, "accepted_risk": self.accepted_risk}


@dataclass(frozen=True)
class ReleaseSource:
    """What a release is cut from, as the gate needs it, whatever path releases it: a loaded
    ``Problem`` (``from_problem``) or a policy file's batch (``policyfile.apply``).

    ``census`` gives the census people of the plan's released groups; ``safe_harbor_risk``
    computes Safe Harbor's risk on the same data, called by ``build_gate`` only when the spec's
    ``[release]`` asks for it (``no_riskier_than = "safe-harbor"``)."""

    spec: Spec
    census: Callable[[Recoding], Census]
    record_risk: RecordRisk
    original_risk_sum: float  # Σ m·r(g) of the original data (the normalizer of the risk figures)
    source: dict[str, Any]
    population: dict[str, Any] | str
    columns: list[tuple[str, str]]  # released (name, role), in order, before the suppression flag
    safe_harbor_risk: Callable[[], float]
    source_combinations: int | None = None  # distinct QI combinations of the source (its cells)
    policy: dict[str, Any] = field(default_factory=dict)  # added to the sidecar's policy entry
    extra: dict[str, Any] = field(default_factory=dict)  # added to the sidecar (a batch's drift check)
    person: str | None = None  # the released person key ([person]): figures count persons, not rows
    # the source's persons (rows without [person]) holding each value of a sensitive column: q(v) of
    # t-closeness, every person of the source, suppressed ones included (``release.attribute.source_query``)
    source_values: Callable[[str], pa.Table] | None = None
    # a set (``[[table]]``): the person source's raw release of a plan and the linked tables, where the
    # data is, to count their sensitive values per person (``release.attribute.LinkedValues``)
    linked: Callable[[ReleasePlan], LinkedValues] | None = None
    # the source's persons ([person]): the written rows of suppressed persons carry no key to count them by
    persons: int | None = None

    @classmethod
    def from_problem(cls, problem: Problem) -> ReleaseSource:
        """A loaded problem: census people from its cells, Safe Harbor on its data (computed once
        per problem, whichever paths of one run release from it)."""
        spec = problem.spec
        key = spec.person.column if spec.person is not None else None

        def linked(plan: ReleasePlan) -> LinkedValues:
            return open_linked_values(problem.backend, spec, problem.query(plan, roles=False),
                                      problem.columns.get(key or ""), plan.suppression is not None)

        return cls(
            spec=spec,
            census=lambda recoding: Census.from_cells(recoding, problem.population, problem.sample.total),
            record_risk=problem.record_risk,
            original_risk_sum=problem.fast.normalizers.bottom_risk_sum,  # computed once at load
            source=describe_table(spec, spec.source, problem.source_rows, problem.columns),
            population=(population_without_census(spec) if spec.population is None else
                        describe_table(spec, spec.population, problem.population_total, None)),
            columns=list(problem.released_columns),
            safe_harbor_risk=lambda: safe_harbor_risk(problem),
            source_combinations=len(problem.sample),
            person=key,
            source_values=lambda column: problem.backend.execute(source_query(problem.source.copy(), column, key)),
            linked=linked if spec.tables else None,
            persons=problem.sample.total if key is not None else None)


def build_gate(released: ReleaseSource, plan: ReleasePlan, call: str, accept_risk: str | None = None,
               whole_set: bool = False, reference: bool = True, recorded: bool = True) -> ReleaseGate:
    """The gate of releasing ``plan`` from ``released``: the one builder of every release path
    (files, engine tables, views, compiled SQL, dbt models, reports, policy-file batches).

    ``call`` is the API call that reproduces the release (the CLI line replaces it when set);
    ``accept_risk`` the reason to release a failed gate anyway.  A spec with linked tables
    (``[[table]]``) is released as a whole set or not at all: only ``whole_set`` paths
    (``sets.release``, the report of a set) may build its gate.  ``reference=False``: a gate that only
    measures (``deid-sql check`` judges a batch's attribute criteria, writes nothing): Safe Harbor's
    risk, the reference of ``no_riskier_than``, costs a load of the data and is not computed.
    ``recorded``: a release that can be linked is judged with what its recipient already holds and
    recorded in their ledger (``release.union``); False for a gate that only measures (``check``)."""
    spec, recoding = released.spec, plan.recoding
    if spec.tables and not whole_set:
        names = ", ".join(repr(t.name) for t in spec.tables)
        raise OutputError(f"spec {spec.path} links tables ({names}) to its source: they are released together, as "
                          f"one set, with deid-sql materialize --out FOLDER (one file per table); this path writes "
                          f"one table only")
    linked = linked_columns(spec)
    if linked and released.linked is None:
        raise SpecError(f"[release] attribute criteria on {linked[0]!r}, sensitive in a [[table]] of {spec.path}, "
                        f"are judged over the whole set, which this path does not read; release the set with "
                        f"deid-sql materialize --out FOLDER")
    opener = released.linked
    reference_risk = (released.safe_harbor_risk() if reference and spec.release.no_riskier_than == "safe-harbor"
                      else None)
    columns = list(released.columns) + ([(FLAG, "flag")] if plan.suppression is not None else [])
    return ReleaseGate(
        spec=spec, recoding=recoding,
        policy=plan.describe() | {"sha256": recoding_sha256(recoding, spec.qi_names)} | released.policy,
        qi_columns=[q.column for q in spec.qis], columns=columns, census=released.census(recoding),
        record_risk=released.record_risk, original_risk_sum=released.original_risk_sum,
        source=released.source, population=released.population, call=call, reference_risk=reference_risk,
        accept_risk=override_reason(accept_risk), suppression=plan.suppression, extra=dict(released.extra),
        source_combinations=released.source_combinations, person=released.person,
        source_values=released.source_values,
        linked=(lambda: opener(plan)) if linked and opener is not None else None,
        ledger=LedgerPlan.of(spec, columns) if recorded else None,
        census_of=released.census,
        rows_counted=RowsCounted.of(spec, recoding, released.census),
        source_persons=released.persons)


def safe_harbor_risk(problem: Problem) -> float:
    """HIPAA Safe Harbor's risk on ``problem``'s data: the reference of ``no_riskier_than =
    "safe-harbor"`` (``safe_harbor.safe_harbor_metrics``, computed once per loaded problem)."""
    from .safe_harbor import safe_harbor_metrics

    return safe_harbor_metrics(problem).risk


@dataclass
class ReleaseGate:
    """Everything one release is judged by and recorded with, built by ``build_gate``.

    ``judge`` raises ``ReleaseRefused`` for a failed gate without ``accept_risk``; ``record``
    is the sidecar's content.
    """

    spec: Spec
    recoding: Recoding
    policy: dict[str, Any]  # text, readable, sha256
    qi_columns: list[str]
    columns: list[tuple[str, str]]  # released (name, role), in order
    census: Census
    record_risk: RecordRisk
    original_risk_sum: float
    source: dict[str, Any]
    population: dict[str, Any] | str
    call: str  # the API call that reproduces the release (the CLI line replaces it when set)
    reference_risk: float | None = None  # Safe Harbor's risk, when [release] asks for it
    accept_risk: str | None = None
    suppression: Suppression | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. drift check of a batch
    # distinct QI combinations of the source (its cells): a release with as many groups is the original data
    source_combinations: int | None = None
    person: str | None = None  # the released person key: the figures count distinct persons
    source_values: Callable[[str], pa.Table] | None = None  # q(v)'s counts per sensitive column
    # a set with attribute criteria on a linked table's column: its sensitive values over every table
    linked: Callable[[], LinkedValues] | None = None
    _values: dict[str, pa.Table] = field(default_factory=dict, repr=False)  # source_values, once per column
    _linked: dict[str, AttributeFigures] = field(default_factory=dict, repr=False)  # judged once per set
    _set_values: LinkedValues | None = field(default=None, repr=False)  # the linked tables, opened once
    # a linkable release (a pseudonym column): where it is recorded, and the census of any recoding (the
    # intersections of its persons' label regions with their earlier releases')
    ledger: LedgerPlan | None = None
    census_of: Callable[[Recoding], Census] | None = None
    _released: Released | None = field(default=None, repr=False)  # the persons' label tuples, as measured
    _recorded: bool = field(default=False, repr=False)  # ``record`` appended them to the ledger
    _labelled: Recoding | None = field(default=None, repr=False)  # the recoding their group ids are of
    _qis: tuple[LedgerQI, ...] = field(default=(), repr=False)  # its partitions, as the ledger keeps them
    # a derived row count judged at its exact value (``_as_counted``), or None
    rows_counted: RowsCounted | None = None
    # judge with what the recipient held before this ledger entry (a report of a release made earlier)
    before: int | None = None
    source_persons: int | None = None  # ReleaseSource.persons

    # -- measuring and judging -----------------------------------------------------------
    @property
    def flagged(self) -> bool:
        """Whether the release carries the suppression flag column."""
        return any(name == FLAG for name, _ in self.columns)

    def measure(self, run: Callable[[exp.Expression], pa.Table], relation: exp.Expression,
                union: bool = True, counted: pa.Table | None = None) -> ReleaseFigures:
        """The figures of the released rows of ``relation`` (``figures.measure``), where ``run``
        executes a query: a backend's ``execute``, or the transaction writing the rows.  Each sensitive
        column with an attribute criterion is counted by one more ``GROUP BY`` (``release.attribute``).
        ``union=False``: this release alone, even when it is recorded (a judgment before the write, whose
        written rows are judged with the union: reading the release's persons from the query would
        compute every pseudonym twice).  ``counted``: the groups of ``relation`` already counted
        (``count_groups``, rows not persons: ``release.written``)."""
        relation, qi_columns, census, recoding = self._as_counted(relation)
        flag = FLAG if self.flagged else None
        released = None
        union = union and self.ledger is not None
        if union and self.person is not None and self.ledger is not None and self.ledger.link == self.person:
            # persons linked by their key: the gate's counts and the ledger's tuples from one query
            counted, released = persons_and_groups(run, relation, self.person, qi_columns, flag, census)
        elif counted is None:
            counted = count_groups(run, relation, qi_columns, self.flagged, self.person)
        table = self._suppressed_persons(counted)
        figures = measure(run, relation, qi_columns, census, self.record_risk, self.original_risk_sum,
                          flag=self.flagged, person=self.person, table=table)
        if union:
            figures = self._with_union(run, relation, figures, qi_columns, census, recoding, released)
        attribute = self.spec.release.attribute
        if not attribute:
            return figures
        groups = Groups.of(table, len(qi_columns), self.flagged, census)
        linked = set(linked_columns(self.spec))
        return replace(figures, attribute=tuple(
            self._over_set(column) if column in linked else
            measure_column(run, relation, qi_columns, self.spec.qi_names, limits, groups, self.flagged,
                           self.person, self._reference(column) if self.source_values is not None else None)
            for column, limits in attribute.items()))

    def _suppressed_persons(self, table: pa.Table) -> pa.Table:
        """The persons of the suppressed group where the rows written cannot tell them apart: a suppressed
        person's rows carry no pseudonym (``contract.roles.apply_roles``), so the group counts as the
        source's persons less those released in the other groups (every row of a person is written)."""
        if self.person is None or not self.flagged or self.source_persons is None or not table.num_rows:
            return table
        flags = np.asarray(table.column("f").fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
        m = np.asarray(table.column("m").to_numpy(zero_copy_only=False), dtype=np.int64)
        if not flags.any() or m[flags].sum() > 0:
            return table  # no suppressed row, or their keys were counted (the query the gate measures)
        m = m.copy()
        m[np.flatnonzero(flags)[0]] = max(self.source_persons - int(m[~flags].sum()), 0)
        return table.set_column(table.schema.get_field_index("m"), "m", pa.array(m, table.schema.field("m").type))

    def _as_counted(self, relation: exp.Expression) -> tuple[exp.Expression, list[str], Census, Recoding]:
        """What a recipient can count, as counted (METHODS decision 16): while a person's rows stay linkable
        (the person key released, pseudonymized or kept), a ``derived = "rows"`` QI is judged at each
        person's number of rows in the release, whatever the policy shows of it (``rows_counted``)."""
        counted = self.rows_counted
        if counted is None:
            return relation, list(self.qi_columns), self.census, self.recoding
        return counted.relation(relation), counted.qi_columns, counted.census, counted.recoding

    def _with_union(self, run: Callable[[exp.Expression], pa.Table], relation: exp.Expression,
                    figures: ReleaseFigures, qi_columns: Sequence[str], census: Census,
                    recoding: Recoding, released: Released | None = None) -> ReleaseFigures:
        """``figures`` with the union's (``release.union``) when the recipient holds earlier releases;
        the persons' label tuples (``released``, else read here) are kept for the ledger entry
        ``record`` appends."""
        assert self.ledger is not None
        self._released = released if released is not None else released_persons(
            run, relation, self.ledger.link, qi_columns, FLAG if self.flagged else None, census,
            rows_per_person=self.person is not None)
        self._labelled, self._qis = recoding, ledger_qis(recoding, self.spec.qi_names)
        if not exists(self.ledger.location):
            return figures
        with Ledger(self.ledger.location, create=False) as ledger:  # read once: the entries, then the persons
            earlier = [e for e in usable_entries(ledger, self.ledger) if self.before is None or e.seq < self.before]
            if not earlier:
                return figures
            union, groups = union_figures(
                self._released, self._qis, recoding, earlier, ledger,
                self.ledger.recipient, self.census_of if census.population else None, self.record_risk,
                self.original_risk_sum, figures.suppressed, census.total, self.before)
        linked = set(linked_columns(self.spec))
        attribute = tuple(  # the attribute criteria on the combined labels (a linked table's column: by the set)
            union_attribute(run, relation, self.ledger.link, FLAG if self.flagged else None, groups, limits,
                            Unit.of(self.person), self._reference(column) if self.source_values is not None else None)
            for column, limits in self.spec.release.attribute.items() if column not in linked)
        return replace(figures, union=replace(union, attribute=attribute))

    def _over_set(self, column: str) -> AttributeFigures:
        """A column sensitive in a linked table, counted over the whole set where the data is and judged
        once (``release.attribute.linked_value_query``): every later measure of the set (its files or
        tables as written) reuses the figures, as the linked rows they count are written unchanged."""
        if column not in self._linked:
            assert self.linked is not None  # build_gate refuses linked criteria on a path without it
            if self._set_values is None:
                self._set_values = self.linked()
            values = self._set_values
            released, qi_columns, census, _ = self._as_counted(values.released)
            table = count_groups(values.run, released, qi_columns, values.flag, values.key)
            groups = Groups.of(table, len(qi_columns), values.flag, census)
            counts = values.run(linked_value_query(values, qi_columns, column))
            self._linked[column] = measure_column(
                values.run, released, qi_columns, self.spec.qi_names, self.spec.release.attribute[column],
                groups, values.flag, values.key, lambda: values.run(linked_source_query(values, column)), counts)
        return self._linked[column]

    def _reference(self, column: str) -> Callable[[], pa.Table]:
        def counts() -> pa.Table:
            if column not in self._values:
                assert self.source_values is not None
                self._values[column] = self.source_values(column)
            return self._values[column]
        return counts

    def original_data(self, figures: ReleaseFigures | None = None) -> bool:
        """Whether the release tells apart every record the source tells apart: the recoding keeps
        every value of every QI, or — measured — the released groups are as many as the source's
        distinct QI combinations, none suppressed (before measuring: the recoding alone, and no
        suppression asked for)."""
        keeps = all(q.n_groups == q.group_of.size for q in self.recoding.qis)
        if figures is not None:
            distinguishes = self.source_combinations is not None and figures.groups >= self.source_combinations
            return (keeps or distinguishes) and figures.suppressed == 0
        return keeps and self.suppression is None and not any(r == "flag" for _, r in self.columns)

    def precheck(self) -> None:
        """Refuse before writing what can be refused without the rows: no criteria, the original data."""
        verdict = self.verdict(None)
        if self.accept_risk is None and not verdict.passed:
            raise ReleaseRefused(self._refusal(verdict.failures))

    def verdict(self, figures: ReleaseFigures | None) -> Verdict:
        criteria: ReleaseCriteria = self.spec.release
        checks = []
        if figures is not None:
            for c in criteria.criteria(self.reference_risk):
                value = figures.value(c.figure)
                checks.append(Check(c.key, c.figure, value, c.limit, c.at_most, c.passes(value), c.describe(value)))
            for column in figures.attribute:
                checks.extend(Check(a.key, f"{a.column}.{a.figure}", a.value, a.limit, a.at_most, a.passed, a.text)
                              for a in column.checks)
            union = figures.union
            if union is not None:  # the same limits on what the recipient holds with this release
                for c in criteria.criteria(self.reference_risk):
                    value = union.value(c.figure)
                    checks.append(Check(c.key, f"union.{c.figure}", value, c.limit, c.at_most, c.passes(value),
                                        c.describe(value)))
                for column in union.attribute:
                    checks.extend(Check(a.key, f"union.{a.column}.{a.figure}", a.value, a.limit, a.at_most,
                                        a.passed, a.text) for a in column.checks)
        return Verdict(tuple(checks), self.original_data(figures), criteria.declared, self.accept_risk,
                       criteria.allow_original_data, Unit.of(self.person),
                       figures.union.words() if figures is not None and figures.union is not None else None)

    def judge(self, figures: ReleaseFigures) -> Verdict:
        """The verdict on measured figures; raises ``ReleaseRefused`` when it fails unaccepted."""
        verdict = self.verdict(figures)
        if not verdict.passed and self.accept_risk is None:
            raise ReleaseRefused(self._refusal(verdict.failures))
        return verdict

    def _refusal(self, failures: Sequence[str]) -> str:
        where = f"[release] of {self.spec.path}" if self.spec.release.declared else f"spec {self.spec.path}"
        return (f"release refused by the gate ({where}): {'; '.join(failures)}; choose a more general policy or "
                f"fix the criteria, or pass --accept-risk \"REASON\" to release anyway (the reason is recorded "
                f"beside the release); nothing was written")

    # -- the record -----------------------------------------------------------------------
    def record_table(self, name: str, figures: ReleaseFigures, verdict: Verdict,
                     release: dict[str, Any]) -> dict[str, pa.Table]:
        """The sidecar as the companion table ``<name>__release`` of a table or view in a database."""
        return {sidecar_table(name): as_table(self.record(figures, verdict, release))}

    def record(self, figures: ReleaseFigures, verdict: Verdict, release: dict[str, Any]) -> dict[str, Any]:
        """The sidecar: hashes, columns and roles, figures, criteria and verdict, how to reproduce."""
        spec_path = self.spec.path
        command = INVOCATION.get()
        record = {
            "format": FORMAT, "version": VERSION,
            "release": release,
            "created_at": utc_now(),
            "software": {"name": "deid-sql", "version": __version__},
            "reproduce": {"command": command, "api": self.call},
            "spec": {"path": str(spec_path), "sha256": file_sha256(spec_path) if spec_path.is_file() else None,
                     "name": self.spec.name},
            "policy": self.policy,
            "source": resolved(self.source),
            "population": resolved(self.population),
            "columns": [{"name": n, "role": r} for n, r in self.columns],
            "risk_model": {"risk": self.spec.risk, "gamma": self.spec.gamma,
                           "population": population_kind(self.spec)},
            "suppress_below": self.suppression.below if self.suppression is not None else None,
            "suppression": self.suppression.to_dict() if self.suppression is not None else None,
            "figures": figures.to_dict(),
            "gate": {"criteria": self.spec.release.to_dict(), "reference_risk": self.reference_risk,
                     **verdict.to_dict()},
            **self.extra,
        }
        if self.ledger is not None and self._released is not None:
            record["ledger"] = self._append(record, release)
            self._recorded = True
        return record

    def entry_groups(self) -> list[EntryGroup] | None:
        """The persons this release recorded in the ledger, per label tuple (``union.entry_groups``),
        once ``record`` has appended its entry; None when nothing was recorded."""
        if self.ledger is None or self._released is None or self._labelled is None or not self._recorded:
            return None
        return entry_groups(self._released, self._labelled)

    def _append(self, record: dict[str, Any], release: dict[str, Any]) -> dict[str, Any]:
        """Append this release to its recipient's ledger (the record's hash, the persons' labels) and
        say where; a ledger that cannot be written stops the release (the caller writes nothing)."""
        assert self.ledger is not None and self._released is not None
        plan = self.ledger
        spec_path = self.spec.path
        shipped = release.get("path") if release.get("kind") == "set" else release.get("project")
        if shipped and isinstance(plan.location, Path) and plan.location.is_relative_to(Path(shipped).resolve()):
            raise OutputError(f"the ledger {plan.location} is inside the folder the release is written to ({shipped}), "
                              f"which goes to its recipient with every earlier release's labels: point [release] "
                              f"ledger outside it; nothing was written")
        digest = record_sha256(record)
        entry = Entry(seq=0, recipient=plan.recipient, release=f"{record['created_at']}/{digest[:12]}",
                      created_at=record["created_at"], key_fingerprint=plan.fingerprint, spec=str(spec_path),
                      spec_sha256=record["spec"]["sha256"], policy=_policy_words(self.policy),
                      record_sha256=digest, target=_target(release), persons=self._released.persons, rows=0,
                      held=0, qis=self._qis, content_sha256="", previous="", hash="")
        try:
            with Ledger(plan.location) as ledger:
                earlier = usable_entries(ledger, plan)
                stored = ledger.append(entry, self._released)
        except OSError as e:
            raise OutputError(f"the ledger {plan.location} cannot be written ({e.strerror or e}); a release that "
                              f"can be linked is recorded before it leaves, so nothing was written") from None
        return {"path": str(plan.location), "recipient": plan.recipient, "entry": stored.seq, "hash": stored.hash,
                "earlier": len(earlier), "link": plan.link}


def usable_entries(ledger: Ledger, plan: LedgerPlan) -> list[Entry]:
    """The recipient's entries, after checking the chain (headers and person counts) and the key."""
    ledger.check(content=False)
    entries = ledger.entries(plan.recipient)
    other = next((e for e in entries if e.key_fingerprint != plan.fingerprint), None)
    if other is not None:
        raise SpecError(f"ledger {plan.location} holds releases to {plan.recipient!r} made under another key (entry "
                        f"{other.seq}, {other.release}); pseudonyms of different keys do not link, so the union "
                        f"cannot be judged: give this recipient another name ([release] recipient) or use the key "
                        f"of its earlier releases")
    return entries


def _policy_words(policy: dict[str, Any]) -> str:
    """A release's policy as the ledger lists it: the text given, else the hierarchy levels (anonymize's
    optimum), else the readable form."""
    for key in ("text", "levels", "readable"):
        if policy.get(key):
            return f"levels {policy[key]}" if key == "levels" else str(policy[key])
    return ""


def _target(release: dict[str, Any]) -> str:
    kind = release.get("kind", "release")
    where = release.get("path") or release.get("table") or release.get("view") or release.get("name") or ""
    return f"{kind} {where}".strip()


def describe_table(spec: Spec, ref: TableRef, rows: int, columns: dict[str, str] | None) -> dict[str, Any]:
    """A source or population as the sidecar records it: file hash, or engine table rows and schema."""
    out: dict[str, Any] = {"rows": int(rows)}
    if ref.path is not None:
        out |= {"path": str(ref.path), "format": ref.format, "table": ref.table}
        # hashed in the background while the release is written (hashlib releases the GIL)
        out["sha256"] = _HASHING.submit(file_sha256, ref.path) if Path(ref.path).is_file() else None
    else:
        out |= {"engine": spec.backend.engine, "table": ref.table}
    if columns is not None:
        out["schema"] = {name: str(t) for name, t in columns.items()}
    return out


_HASHING = ThreadPoolExecutor(max_workers=2, thread_name_prefix="deid-sql-hash")


MIN_REASON_LETTERS = 8  # a recorded reason holds words: '-', '.', '--', 'ok' or 'IRB' alone say nothing
REASON_EXAMPLES = {"--accept-risk": "IRB 2026-114 approved k=3", "--accept-drift": "new clinic joined in June"}


def override_reason(reason: str | None, option: str = "--accept-risk", example: str | None = None) -> str | None:
    """The reason given to override a check (``--accept-risk``, ``--accept-drift``), stripped, or
    None.  The one validator of every reason that is recorded: it is kept beside the release for a
    reviewer, so it must be words — at least ``MIN_REASON_LETTERS`` letters (of any script), not
    punctuation or a placeholder."""
    if reason is None:
        return None
    letters = sum(c.isalpha() for c in reason)
    if letters < MIN_REASON_LETTERS:
        example = example or REASON_EXAMPLES.get(option, REASON_EXAMPLES["--accept-risk"])
        given = f"{reason.strip()!r} has {letters} letter{'' if letters == 1 else 's'}" if reason.strip() else \
            "it is blank"
        raise PolicyError(f"{option} needs a reason in words, kept beside the release for the reviewer ({given}; "
                          f"at least {MIN_REASON_LETTERS} letters), e.g. {option} \"{example}\"")
    return reason.strip()

