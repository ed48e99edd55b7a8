"""Risk of a saved policy on a batch, and drift against the figures saved with it.

``drift_report`` (run by ``check_policy``, ``check.py``, and by ``apply_policy`` before it writes)
measures the batch and holds its
``mean_record_risk`` to the limit of the policy file's drift rule (``tolerance.py``: by default
a permutation test against the saved groups, at most 0.1 % false alarms; an explicit threshold
is an exact limit), tests each QI's released label shares against the saved ones (``shift.py``:
chi-square tests of homogeneity, Holm-corrected, family-wise level 0.001 by default) — a batch
drifted when either test fails — and says what moved: the groups whose record risk rose, and per
QI the label shares that changed most.

``measure`` computes a release's figures from its generalized groups — the groups an
analyst sees, counted by one ``GROUP BY`` over the release query itself, so records given
the fallback label are counted as released.  Each group's population size g is
max(census people in the cells it covers, its records), with the spec's population table,
or its records with ``population = "sample"``; r(g) is the spec's record risk.  These are
the figures ``deid-sql evaluate`` gives (tested), plus the drift measure ``mean_record_risk``
= risk_sum / records, which — unlike the normalized risk, a ratio to the batch's own
original data — compares batches of any size.  With ``[person]`` a record is a person: the
release query gives each person's rows the person's labels and the groups count distinct
persons (``persons.count_persons``); the census side counts people as before.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
from sqlglot import exp

from .. import progress
from ..compiler.compile import col, generalize
from ..domains.recoding import Recoding
from ..errors import BackendError, DataError, ReleaseRefused
from ..evaluate.riskmodel import RecordRisk, group_risks, risk_model
from ..loading.load import read_problem
from ..release.figures import FLAG, AttributeCheck, AttributeFigures
from .batch import Batch, Outside
from .format import MEASURE, RESAVE, Figures, Groups, PolicyFile, PolicyFileError, risk_model_of
from .persons import count_persons
from .shift import ShareChange, ShiftResult, label_counts, shift_test
from .shift import share_changes as qi_share_changes
from .tolerance import Limit, permutation_limit

POPULATION_VIEW = "deid_batch_population"
SHOWN = 10  # groups named by check
SHARES = 3  # labels per QI whose share changed most, named by check
TOLERANCE = 1e-12  # relative: the same data gives the same figure; this only absorbs float noise


@dataclass(frozen=True)
class Measured:
    figures: Figures
    groups: Groups


def measure(batch: Batch, recoding: Recoding | None = None, keep_groups: bool = True) -> Measured:
    """The figures of the release of ``batch`` (the saved policy, or ``recoding``); the groups'
    labels are kept only with ``keep_groups`` (the original data's groups are many).  With
    ``[person]`` m and the suppressed count are distinct persons (each person's rows carry one
    label tuple), so every figure counts persons as ``evaluate`` does."""
    rec = recoding or batch.policy.recoding()
    labels = [f"l{i}" for i in range(len(batch.domains))]
    # the saved policy's own release, with its suppressed groups (an anonymization's), when measuring it
    suppressing = recoding is None and batch.policy.suppression is not None
    release = batch.release_query(recoding=recoding, roles=False).subquery("deid_release")
    key_type = batch.columns.get(batch.spec.person.column) if batch.spec.person is not None else None
    sample = (exp.select(*[exp.alias_(col(q.column), labels[i]) for i, q in enumerate(batch.spec.qis)],
                         exp.alias_(count_persons(batch.spec, key_type=key_type), "m"))
              .from_(release).group_by(*[exp.column(c) for c in labels]))
    suppressed = 0
    if suppressing:  # suppressed rows are no group of labels: counted apart, as the release gate counts them
        sample = sample.where(exp.Not(this=col(FLAG)))
        count = exp.select(exp.alias_(count_persons(batch.spec, key_type=key_type), "s")).from_(
            release.copy()).where(col(FLAG))
        suppressed = int(_execute(batch, count).column("s")[0].as_py() or 0)
    census, total = _census(batch, rec, labels)
    if census is None:
        query = exp.select(*[exp.column(c, "s") for c in labels], exp.column("m", "s"),
                           exp.alias_(exp.null(), "n")).from_(sample.subquery("s"))
    else:
        on = exp.and_(*[exp.column(c, "s").eq(exp.column(c, "c")) for c in labels])
        query = (exp.select(*[exp.column(c, "s") for c in labels], exp.column("m", "s"), exp.column("n", "c"))
                 .from_(sample.subquery("s")).join(census.subquery("c"), on=on, join_type="LEFT"))
    # a fixed order of the groups fixes the order of every sum: the same data gives the same figures
    table = _execute(batch, query).sort_by([(c, "ascending") for c in labels])
    m = np.asarray(table.column("m").to_numpy(zero_copy_only=False), dtype=np.int64)
    records = int(m.sum()) + suppressed
    if census is None:
        population = None
        g = m.astype(np.float64)
        total = float(records)
    else:
        population = np.nan_to_num(np.asarray(table.column("n").to_numpy(zero_copy_only=False), dtype=np.float64))
        g = np.maximum(population, m)
    model = risk_model(batch.spec, total)
    g_s = max(total, float(suppressed))
    # one call over every group, the suppressed one included (a dataset-level model reads the histogram)
    every = group_risks(model, np.append(m, float(suppressed)) if suppressed else m.astype(np.float64),
                        np.append(g, g_s) if suppressed else g)
    risk = every[:m.size]
    risk_sum = float((m * risk).sum())
    expected = float((m / g).sum())
    highest = float(risk.max()) if risk.size else 0.0
    if suppressed:  # the attacker learns none of their QIs: one group of everyone (``release.figures``)
        r_s = float(every[-1])
        risk_sum += suppressed * r_s
        expected += suppressed / g_s
        highest = max(highest, r_s)
    figures = Figures(
        records=records, groups=int(m.size), k=int(m.min()) if m.size else 0,
        sample_unique_records=int((m == 1).sum()),
        risk_sum=risk_sum, mean_record_risk=risk_sum / records, expected_reidentifications=expected,
        max_record_risk=highest,
        corrected_groups=int((population < m).sum()) if population is not None else 0,
        population_total=float(total), risk=0.0)
    names = tuple(q.name for q in batch.policy.qis)
    keys = tuple(zip(*(table.column(c).to_pylist() for c in labels))) if keep_groups else ()
    return Measured(figures, Groups(names, keys, m, population, risk))


def measure_with_risk(batch: Batch) -> Measured:
    """``measure`` plus the normalized risk (risk_sum over that of the batch's original data)."""
    policy = measure(batch)
    bottom = measure(batch, batch.policy.bottom(), keep_groups=False)
    normalized = policy.figures.risk_sum / bottom.figures.risk_sum if bottom.figures.risk_sum > 0 else 0.0
    return Measured(replace(policy.figures, risk=normalized), policy.groups)


def _census(batch: Batch, rec: Recoding, labels: list[str]) -> tuple[exp.Select | None, float]:
    """People per generalized group from the spec's population table (rows outside the saved
    domains are ignored, as when a problem loads), and their total; None with a sample."""
    spec = batch.spec
    if spec.population is None:
        return None, 0.0
    pop_qis = [replace(q, column=q.population_column) for q in spec.qis]
    text = {q.population_column: q.kind in ("category", "zip") for q in spec.qis}
    try:
        relation = batch.backend.relation(spec.population, text)
        batch.backend.create_temp_view(POPULATION_VIEW, exp.select("*").from_(relation))
        columns = batch.backend.columns(POPULATION_VIEW)
    except BackendError as e:
        raise DataError(read_problem("population", spec.population.describe(), str(e))) from None
    count = str(spec.count_column)
    missing = [c for c in [q.column for q in pop_qis] + [count] if c not in columns]
    if missing:
        raise DataError(f"population {spec.population.describe()} has no column {missing[0]!r}")
    oks = [batch.ok(i, q=q, sql_type=columns.get(q.column)) for i, q in enumerate(pop_qis)]
    inside = exp.select("*").from_(POPULATION_VIEW).where(exp.and_(*oks) if len(oks) > 1 else oks[0])
    wanted = {q.column: columns[q.column] for q in pop_qis} | {count: columns[count]}
    generalized = generalize(rec, pop_qis, batch.domains, inside, wanted).subquery("deid_census")
    people = exp.func("sum", exp.cast(col(count), "DOUBLE"))
    census = (exp.select(*[exp.alias_(col(q.column), labels[i]) for i, q in enumerate(pop_qis)],
                         exp.alias_(people.copy(), "n"))
              .from_(generalized).group_by(*[exp.column(c) for c in labels]))
    total = _execute(batch, exp.select(exp.alias_(people, "n")).from_(inside.subquery("deid_inside")))
    return census, float(total.column("n")[0].as_py() or 0.0)


def census_people(batch: Batch, rec: Recoding) -> dict[tuple[str, ...], float] | None:
    """The census people of each label tuple ``rec`` makes of the spec's population (None with a
    sample): a recoding other than the policy's, such as the common refinement of a person's label
    regions across releases (``release.union``), counted where the population is."""
    labels = [f"deid_l{i}" for i in range(len(rec.qis))]
    query, _ = _census(batch, rec, labels)
    if query is None:
        return None
    table = _execute(batch, query)
    keys = zip(*(table.column(c).to_pylist() for c in labels))
    return {tuple(map(str, k)): float(n or 0.0) for k, n in zip(keys, table.column("n").to_pylist())}


def _execute(batch: Batch, query: exp.Expression):  # -> pa.Table
    try:
        with progress.watching(f"reading the batch {batch.describe()}", batch.backend.progress):
            return batch.backend.execute(query)
    except BackendError as e:
        raise DataError(read_problem("batch", batch.describe(), str(e))) from None


# -- check ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class MovedGroup:
    """A released group of the batch whose record risk rose, or that is smaller than the saved k."""

    labels: tuple[str, ...]
    records_before: int | None  # None: the group was not in the saved release
    records_after: int
    population_before: float | None
    population_after: float | None
    risk_before: float | None
    risk_after: float
    below_k: bool

    def to_dict(self, names: tuple[str, ...]) -> dict[str, Any]:
        return {"labels": dict(zip(names, self.labels)), "records_before": self.records_before,
                "records_after": self.records_after, "population_before": self.population_before,
                "population_after": self.population_after, "record_risk_before": self.risk_before,
                "record_risk_after": self.risk_after, "below_saved_k": self.below_k}


@dataclass(frozen=True)
class DriftReport:
    """What ``check`` found: saved vs new figures, the limit and verdict, and what moved."""

    policy: PolicyFile
    batch: str
    saved: Figures
    new: Figures
    exceeded: bool  # mean_record_risk above the limit (the risk test)
    outside: Outside
    moved: list[MovedGroup] = field(default_factory=list)  # up to SHOWN, largest rise first
    rose: int = 0  # groups whose record risk rose
    below_k: int = 0  # groups smaller than the saved k
    new_groups: int = 0  # groups not in the saved release
    gone: int = 0  # saved groups absent from the batch
    limit: Limit | None = None  # None: the policy's threshold, exact
    shares: dict[str, list[ShareChange]] = field(default_factory=dict)  # per QI, largest change first
    groups: Groups | None = field(default=None, repr=False)  # the batch's released groups (the gate's census)
    shift: ShiftResult | None = None  # the distribution test (None: not run)
    # ``check`` only: the spec's [release] attribute criteria judged on the batch's release (``check.py``;
    # ``apply``'s gate judges them on the rows it writes)
    attribute: tuple[AttributeFigures, ...] = ()

    @property
    def shifted(self) -> bool:
        """Some QI's released label shares moved (the distribution test)."""
        return self.shift is not None and self.shift.shifted

    @property
    def drifted(self) -> bool:
        """The verdict of the drift gate: the risk test or the distribution test failed."""
        return self.exceeded or self.shifted

    @property
    def attribute_failures(self) -> list[AttributeCheck]:
        """The attribute criteria the batch's release fails (each names its column and worst group)."""
        return [c for column in self.attribute for c in column.checks if not c.passed]

    @property
    def failed(self) -> bool:
        """``check``'s verdict: the batch drifted, or its release fails an attribute criterion."""
        return self.drifted or bool(self.attribute_failures)

    def why(self) -> str:
        """What failed, in one line (for apply's refusal and for --accept-drift)."""
        parts = []
        if self.exceeded:
            parts.append(f"{MEASURE} {self.new.mean_record_risk:.6g} of batch {self.batch} exceeds the limit "
                         f"{self.threshold:.6g} "
                         f"({self.rule}; saved {self.saved.mean_record_risk:.6g}); moved: {self.moved_briefly()}")
        if self.shifted and self.shift is not None:
            parts.append(f"label shares of batch {self.batch} moved: {self.shift.describe()}")
        return "; ".join(parts) or "no drift"

    @property
    def threshold(self) -> float:
        """The limit the batch's figure was held to."""
        return self.limit.value if self.limit is not None else self.policy.threshold

    @property
    def rule(self) -> str:
        """Where the limit comes from, in words."""
        pf = self.policy
        if pf.without_tolerance:
            return "the saved figure, exact: this policy file was saved without a drift tolerance; re-save it"
        if self.limit is None or self.limit.rule == "exact":
            return f"{pf.threshold_from}, exact"
        return self.limit.describe()

    def moved_briefly(self, count: int = 3) -> str:
        """The label shares that changed most over all QIs, for a one-line message."""
        top = sorted(((abs(c.change), qi, c) for qi, changes in self.shares.items() for c in changes[:1]),
                     key=lambda x: (-x[0], x[1]))
        return "; ".join(f"{qi} {c.describe()}" for _, qi, c in top[:count]) or "no label share changed"

    def to_dict(self) -> dict[str, Any]:
        names = self.policy.names
        return {
            "policy_file": str(self.policy.path), "policy": self.policy.policy, "batch": self.batch,
            "measure": MEASURE, "threshold": self.threshold, "threshold_from": self.policy.threshold_from,
            "rule": self.policy.tolerance.rule, "limit": self.limit.to_dict() if self.limit else None,
            "without_tolerance": self.policy.without_tolerance,
            "saved": self.saved.to_dict(), "new": self.new.to_dict(), "exceeded": self.exceeded,
            "shifted": self.shifted, "drifted": self.drifted,
            "shift": self.shift.to_dict() if self.shift is not None else None,
            "fallback": self.policy.fallback, "fallback_records": self.outside.records,
            "groups_rose": self.rose, "groups_below_saved_k": self.below_k, "groups_new": self.new_groups,
            "groups_gone": self.gone, "moved": [g.to_dict(names) for g in self.moved],
            "shares": {qi: [c.to_dict() for c in changes] for qi, changes in self.shares.items()},
            **({"unit": "persons"} if self.policy.person is not None else {}),  # what records, groups and k count
            "attribute": [_attribute_dict(a) for a in self.attribute],
            "attribute_failed": bool(self.attribute_failures), "failed": self.failed,
        }


def _attribute_dict(figures: AttributeFigures) -> dict[str, Any]:
    """One sensitive column's figures as the sidecar records them, with its verdict; a figure no
    group gives (ℓ of a column no group holds a counted value of: infinite) is null, so the JSON is JSON."""
    def finite(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: finite(v) for k, v in value.items()}
        if isinstance(value, list):
            return [finite(v) for v in value]
        return value

    return finite(asdict(figures)) | {"passed": all(c.passed for c in figures.checks)}


class DriftRefused(ReleaseRefused):
    """``apply`` found drift and no ``--accept-drift`` reason was given; nothing was written (exit 1)."""

    exit_code = 1

    def __init__(self, report: DriftReport) -> None:
        self.report = report
        super().__init__(
            f"drift: {report.why()}; nothing was written — run deid-sql check for the "
            f"details, or pass --accept-drift \"REASON\" to release anyway")


def drift_report(batch: Batch, shown: int = SHOWN) -> DriftReport:
    """``check`` on an open batch (``apply`` runs it before writing, on the same connection)."""
    pf = batch.policy
    now = risk_model_of(batch.spec)
    if now != pf.risk_model:
        changed = ", ".join(f"{k} {pf.risk_model.get(k)!r} → {v!r}" for k, v in now.items()
                            if pf.risk_model.get(k) != v)
        raise PolicyFileError(f"the risk model of spec {pf.spec} changed since {pf.describe()} was saved "
                              f"({changed}), so the saved and new risks would not compare; {RESAVE}")
    measured = measure_with_risk(batch)
    new = measured.figures
    limit, exceeded = judge(pf, new, measured.groups, risk_model(batch.spec, new.population_total))
    report = _compare(pf, batch.describe(), new, measured.groups, exceeded, batch.outside, shown, limit)
    return replace(report, groups=measured.groups, shift=shift_test(pf.shift, pf.groups, measured.groups))


def judge(pf: PolicyFile, new: Figures, groups: Groups, risk: RecordRisk) -> tuple[Limit | None, bool]:
    """The limit for a batch with these figures and released groups (None: the policy's exact
    threshold), and whether its ``mean_record_risk`` exceeds it; ``risk`` is the batch's r(g)."""
    limit = None
    if pf.tolerance.rule == "permutation":
        limit = permutation_limit(pf.tolerance, pf.groups, groups, pf.figures.mean_record_risk,
                                  new.mean_record_risk, risk)
    bound = limit.value if limit is not None else pf.threshold
    return limit, new.mean_record_risk > bound * (1 + TOLERANCE)


def share_changes(saved: Groups, new: Groups, count: int = SHARES) -> dict[str, list[ShareChange]]:
    """Per QI, the ``count`` labels whose share of the records changed most (saved → new)."""
    return {name: qi_share_changes(label_counts(saved, i), label_counts(new, i), count)
            for i, name in enumerate(saved.names)}


def _compare(pf: PolicyFile, batch: str, new: Figures, groups: Groups, exceeded: bool, outside: Outside,
             shown: int, limit: Limit | None) -> DriftReport:
    before = pf.groups.index()
    saved_k = pf.figures.k
    moved: list[tuple[float, MovedGroup]] = []
    rose = below = fresh = 0
    for i, labels in enumerate(groups.labels):
        j = before.get(labels)
        r_after = float(groups.risk[i])
        r_before = None if j is None else float(pf.groups.risk[j])
        m = int(groups.records[i])
        rise = r_after - (r_before or 0.0)
        small = m < saved_k
        fresh += j is None
        rose += rise > 0
        below += small
        if rise > 0 or small:
            pop_after = None if groups.population is None else float(groups.population[i])
            pop_before = None if j is None or pf.groups.population is None else float(pf.groups.population[j])
            moved.append((rise, MovedGroup(labels, None if j is None else int(pf.groups.records[j]), m, pop_before,
                                           pop_after, r_before, r_after, small)))
    moved.sort(key=lambda x: (-x[0], x[1].labels))
    present = set(groups.labels)
    gone = sum(1 for labels in pf.groups.labels if labels not in present)
    return DriftReport(pf, batch, pf.figures, new, exceeded, outside, [g for _, g in moved[:shown]], rose, below,
                       fresh, gone, limit, share_changes(pf.groups, groups))
