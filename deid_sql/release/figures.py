"""A release's risk, measured on the rows it releases.

The gate must judge what leaves, not what was evaluated earlier: the source may have changed
since it was loaded, suppression may blank groups, and values outside the domain show as the
outside label.  So the release's groups are counted with one ``GROUP BY`` over the released
QI columns of what was written (the temporary file read back, the staged table, or — for a
view or compiled SQL — the release query over the data as it is now), and each group's
population size comes from the census cells, generalized with the same recoding:

- a group of released labels: g = max(census people in the cells it covers, m) (seed 001
  eq. 1 with METHODS decision 1), or g = m with ``population = "sample"``;
- rows suppressed by the release (flag ``deid_suppressed``): the attacker learns none of
  their QIs, so g = max(population total, m); they count as suppressed, not as a group;
- rows showing a label the policy never produces (a value outside the domain, shown as the
  outside label): no census cell vouches for them, so g = m — the conservative choice.

The figures are those ``evaluate`` reports (same risk model, same normalization by the
original data's risk sum), so on unchanged data without suppression they are equal (tested).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from ..compiler.compile import col, ident
from ..domains.recoding import Recoding
from ..evaluate.groups import PeopleByKey, group_cells, group_sizes, keys_of
from ..evaluate.riskmodel import RecordRisk, expected_reidentifications, group_risks
from ..loading.cells import Cells
from ..sqltext import person_key

FLAG = "deid_suppressed"


@dataclass(frozen=True)
class ReleaseFigures:
    """What the gate judges and the sidecar records (every figure over the released rows)."""

    records: int  # rows released
    groups: int  # distinct released QI label tuples, suppressed rows left out
    k: int  # smallest such group (0 when every row is suppressed)
    sample_unique_records: int
    risk_sum: float  # Σ m · r(g)
    risk: float  # risk_sum / risk_sum of the original data (as evaluate's risk)
    expected_reidentifications: float  # Σ m / g
    max_record_risk: float
    mean_record_risk: float  # risk_sum / records
    suppressed: int  # rows blanked by suppression
    outside: int  # rows with a QI value outside the declared domain (shown as the outside label)
    unit: str = "rows"  # what records, groups and k count: "persons" with [person] (distinct released keys)
    attribute: tuple[AttributeFigures, ...] = ()  # per sensitive column with an attribute criterion
    # the same release on its persons' combined labels with the earlier releases to its recipient (``union``)
    union: UnionFigures | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.unit == "rows":  # the sidecar says what it counts only when it is not rows
            del out["unit"]
        if not self.attribute:
            del out["attribute"]
        out.pop("union")
        if self.union is not None:
            out["union"] = self.union.to_dict()
        return out

    def value(self, figure: str) -> float:
        return float(getattr(self, figure))


@dataclass(frozen=True)
class AttributeCheck:
    """One attribute criterion on one column: the worst group's figure and whether every group passes."""

    key: str  # the spec key, e.g. max_confidence
    column: str
    figure: str  # confidence, distinct_l, entropy_l, recursive_cl, t, presence
    value: float  # the worst group's figure
    limit: float
    at_most: bool
    passed: bool
    text: str  # the worst group in words (a refusal's line)


@dataclass(frozen=True)
class AttributeFigures:
    """The figures of one sensitive column over the released groups (the sidecar's record)."""

    column: str
    groups: int  # released groups judged
    max_confidence: float
    min_distinct_l: float
    min_entropy_l: float
    max_t: float | None  # when max_t is asked (its distance)
    max_presence: float | None  # with a census
    checks: tuple[AttributeCheck, ...]


@dataclass(frozen=True)
class UnionFigures:
    """The figures of a release on its persons' combined labels, with the earlier releases used."""

    recipient: str
    earlier: tuple[str, ...]  # the earlier releases' ids, in order
    persons: int  # persons of this release found in an earlier one
    records: int
    groups: int
    k: int
    sample_unique_records: int
    risk_sum: float
    risk: float
    expected_reidentifications: float
    max_record_risk: float
    mean_record_risk: float
    # the attribute criteria on the combined labels, per sensitive column judged
    attribute: tuple[AttributeFigures, ...] = ()

    def value(self, figure: str) -> float:
        return float(getattr(self, figure))

    def to_dict(self) -> dict[str, Any]:
        return {"recipient": self.recipient, "earlier": list(self.earlier), "linked_persons": self.persons,
                "records": self.records, "groups": self.groups, "k": self.k,
                "sample_unique_records": self.sample_unique_records, "risk_sum": self.risk_sum, "risk": self.risk,
                "expected_reidentifications": self.expected_reidentifications,
                "max_record_risk": self.max_record_risk, "mean_record_risk": self.mean_record_risk,
                **({"attribute": [asdict(a) for a in self.attribute]} if self.attribute else {})}

    def words(self) -> str:
        n = len(self.earlier)
        return f"with the {n} earlier release{'' if n == 1 else 's'} to {self.recipient} ({', '.join(self.earlier)})"


class Census:
    """People per released group, and the labels each QI of the release can show.

    A released label tuple is known when every label is one the recoding produces (else it
    holds a value outside the domain); its group key is the group module's key of its per-QI
    group ids, and ``table`` (``evaluate.groups.PeopleByKey``) gives the census people of every
    group that has any (None with ``population = "sample"``).  ``from_cells`` generalizes the
    population cells with the release's recoding; ``from_mapping`` takes people per label tuple
    (a policy file's batch, whose census comes from a query).
    """

    def __init__(self, labels: Sequence[Sequence[str]], table: PeopleByKey | None, total: float) -> None:
        self.labels = [list(q) for q in labels]
        self.sizes = [max(len(q), 1) for q in self.labels]
        self.table = table
        self.total = float(total)

    @property
    def population(self) -> bool:
        return self.table is not None

    @classmethod
    def from_cells(cls, recoding: Recoding, population: Cells | None, sample_total: int) -> Census:
        labels = [q.labels for q in recoding.qis]
        if population is None:
            return cls(labels, None, sample_total)
        return cls(labels, PeopleByKey.of_cells(recoding, population), population.total)

    @classmethod
    def from_mapping(cls, labels: Sequence[Sequence[str]], people: dict[tuple[str, ...], float] | None,
                     total: float) -> Census:
        if people is None:
            return cls(labels, None, total)
        census = cls(labels, None, total)
        index = [{label: g for g, label in enumerate(q)} for q in census.labels]
        rows = [(tuple(index[q].get(label, -1) for q, label in enumerate(t)), n) for t, n in people.items()]
        rows = [(ids, n) for ids, n in rows if min(ids, default=0) >= 0]
        ids = [np.asarray([r[0][q] for r in rows], dtype=np.int64) for q in range(len(census.labels))]
        census.table = PeopleByKey.of(census.key_of(ids), np.asarray([r[1] for r in rows], dtype=np.float64),
                                      census.sizes)
        return census

    def key_of(self, ids: Sequence[np.ndarray]) -> np.ndarray:
        """Group keys of per-QI group ids (``evaluate.groups.keys_of``)."""
        return keys_of(ids, self.sizes)

    def group_ids(self, columns: Sequence[pa.Array]) -> list[np.ndarray]:
        """Per QI the group id of each released label (-1: a label the recoding never produces)."""
        out = []
        for q, column in enumerate(columns):
            found = pc.index_in(column.cast(pa.string()), value_set=pa.array(self.labels[q], pa.string()))
            out.append(np.asarray(found.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64))
        return out

    def people(self, keys: np.ndarray) -> np.ndarray:
        """Census people of groups (0 where the census has none)."""
        assert self.table is not None
        return self.table.lookup(keys)


def group_query(relation: exp.Expression, qi_columns: Sequence[str], flag: bool,
                person: str | None = None, row_hash: exp.Expression | None = None) -> exp.Select:
    """``SELECT qi… (as text), [flag], count(*) GROUP BY`` over the released rows; with ``person``
    (the released person key, ``[person]``), the distinct persons of each group instead of rows,
    told apart byte for byte whatever the column's collation (``sqltext.person_key``: as the
    cells count them).  ``row_hash`` (``Backend.row_hash`` of every released column) adds each
    group's sum of it as text, ``h``: the table's row hash taken in the pass that counts it."""
    keys: list[exp.Expression] = [exp.alias_(exp.cast(col(c), "VARCHAR"), ident(f"q{i}"))
                                  for i, c in enumerate(qi_columns)]
    if flag:
        keys.append(exp.alias_(exp.func("coalesce", exp.cast(col(FLAG), "BOOLEAN"), exp.false()), ident("f")))
    source = relation if isinstance(relation, exp.Table) else exp.Subquery(
        this=relation, alias=exp.TableAlias(this=ident("deid_released")))
    count = (exp.func("count", exp.Star()) if person is None
             else exp.Count(this=exp.Distinct(expressions=[person_key(col(person))])))
    sums = [] if row_hash is None else [exp.alias_(exp.cast(exp.func("sum", row_hash), "VARCHAR"), ident("h"))]
    return (exp.select(*keys, exp.alias_(count, ident("m")), *sums)
            .from_(source).group_by(*[exp.column(f"q{i}") for i in range(len(qi_columns))],
                                    *([exp.column("f")] if flag else [])))


def count_groups(run: Callable[[exp.Expression], pa.Table], relation: exp.Expression, qi_columns: Sequence[str],
                 flag: bool = False, person: str | None = None, row_hash: exp.Expression | None = None) -> pa.Table:
    """The released rows (or persons) of ``relation`` per label tuple (``group_query``), sorted."""
    return in_group_order(run(group_query(relation, qi_columns, flag, person, row_hash)), len(qi_columns), flag)


def in_group_order(table: pa.Table, n_qis: int, flag: bool) -> pa.Table:
    """Counted groups sorted by their labels (and flag): a fixed order of the groups fixes the order of
    every sum, so the same groups give the same figures, counted on rows or on cells."""
    keys = [f"q{i}" for i in range(n_qis)] + (["f"] if flag else [])
    return table.sort_by([(k, "ascending") for k in keys]) if keys and table.num_rows else table


def measure(run: Callable[[exp.Expression], pa.Table], relation: exp.Expression, qi_columns: Sequence[str],
            census: Census, record_risk: RecordRisk, original_risk_sum: float, flag: bool = False,
            person: str | None = None, table: pa.Table | None = None) -> ReleaseFigures:
    """Count the released rows of ``relation`` by label tuple (``run`` executes a query where the
    rows are: a backend's ``execute``, or a connection inside the transaction writing them); with
    ``person``, the distinct persons (the released person key) of each label tuple.  ``table``: the
    counts already taken (``count_groups``)."""
    if table is None:
        table = count_groups(run, relation, qi_columns, flag, person)
    figures = counted_figures(table, len(qi_columns), census, record_risk, original_risk_sum, flag)
    return figures if person is None else replace(figures, unit="persons")


def counted_figures(table: pa.Table, n_qis: int, census: Census, record_risk: RecordRisk, original_risk_sum: float,
                    flag: bool = False) -> ReleaseFigures:
    """The figures of counted groups (``count_groups``' table: labels ``q0``…, ``m``, ``f``), however they
    were counted: on the rows, or on the cells (``release.cell_figures``)."""
    columns = [table.column(f"q{i}").combine_chunks() for i in range(n_qis)]
    m = np.asarray(table.column("m").to_numpy(zero_copy_only=False), dtype=np.int64)
    flags = (np.asarray(table.column("f").fill_null(False).to_numpy(zero_copy_only=False), dtype=bool) if flag
             else np.zeros(m.size, dtype=bool))
    return figures_of(census.group_ids(columns), m, flags, census, record_risk, original_risk_sum)


def figures_of(ids: Sequence[np.ndarray], m: np.ndarray, suppressed: np.ndarray, census: Census,
               record_risk: RecordRisk, original_risk_sum: float) -> ReleaseFigures:
    """The figures from released groups: per QI group ids (-1: outside), row counts, suppressed flags."""
    m = np.asarray(m, dtype=np.int64)
    known = np.ones(m.size, dtype=bool)
    for q in ids:
        known &= q >= 0
    kept = known & ~suppressed
    outside = ~known & ~suppressed
    m_kept = m[kept].astype(np.float64)
    if census.population:
        g_kept = np.maximum(census.people(census.key_of([q[kept] for q in ids])), m_kept)
    else:
        g_kept = m_kept.copy()
    m_all = np.concatenate([m_kept, m[suppressed].astype(np.float64), m[outside].astype(np.float64)])
    g_all = np.concatenate([g_kept, np.maximum(census.total, m[suppressed].astype(np.float64)),
                            m[outside].astype(np.float64)])
    return ReleaseFigures(
        groups=int(m_kept.size), k=int(m_kept.min()) if m_kept.size else 0,
        sample_unique_records=int((m_kept == 1).sum()), **risk_figures(record_risk, m_all, g_all, original_risk_sum),
        suppressed=int(m[suppressed].sum()), outside=int(m[outside].sum()))


def risk_figures(record_risk: RecordRisk, m_all: np.ndarray, g_all: np.ndarray,
                 original_risk_sum: float) -> dict[str, Any]:
    """The risk figures of every group of a release at once (kept, suppressed, outside: a dataset-level
    model reads the whole histogram), from their sizes ``m_all`` and population sizes ``g_all``:
    records, risk_sum, risk (over the original data's), expected re-identifications, the largest and
    the mean record risk.  The one place they are computed, for a release alone and for its union."""
    records = int(m_all.sum())
    r = group_risks(record_risk, m_all, g_all) if g_all.size else np.zeros(0)
    risk_sum = float((m_all * r).sum())
    return {"records": records, "risk_sum": risk_sum,
            "risk": risk_sum / original_risk_sum if original_risk_sum > 0 else 0.0,
            "expected_reidentifications": expected_reidentifications(record_risk, m_all, g_all, risk_sum),
            "max_record_risk": float(r.max()) if r.size else 0.0,
            "mean_record_risk": risk_sum / records if records else 0.0}


def cell_groups(recoding: Recoding, sample: Cells, census: Census) -> tuple[list[np.ndarray], np.ndarray,
                                                                          np.ndarray, np.ndarray]:
    """The groups ``recoding`` makes of the sample cells, for a report's distributions: per QI
    each group's id, its sample records m, g = max(census people, m) (g = m without a
    population), as ``evaluate`` counts them, and each sample cell's group.  Groups are sorted
    by their key (``evaluate.groups.group_cells``); ``census`` is the gate's, built once."""
    grouped = group_cells(recoding, sample, cell_group=True)
    assert grouped.cell_group is not None
    m = grouped.m
    g = group_sizes(census.people(grouped.keys), m) if census.population else m.copy()
    return grouped.ids, m, g, grouped.cell_group
