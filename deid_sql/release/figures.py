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
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from sqlglot import exp

from ..cells import Cells
from ..compile import col, ident
from ..evaluate.riskmodel import RecordRisk
from ..recoding import Recoding

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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def value(self, figure: str) -> float:
        return float(getattr(self, figure))


class Census:
    """People per released label tuple, and the labels each QI of the release can show.

    ``people`` maps a label tuple to its census people (None with ``population = "sample"``);
    a tuple of known labels that is missing from it has no people.  ``from_cells`` builds it
    from the population cells generalized by the release's recoding; a policy file's batch
    builds it from a census query (same meaning, labels as the release shows them).
    """

    def __init__(self, labels: Sequence[Sequence[str]], people: dict[tuple[str, ...], float] | None,
                 total: float) -> None:
        self.labels = [set(q) for q in labels]
        self.population = people
        self.total = float(total)

    @classmethod
    def from_cells(cls, recoding: Recoding, population: Cells | None, sample_total: int) -> Census:
        labels = [q.labels for q in recoding.qis]
        if population is None:
            return cls(labels, None, sample_total)
        people: dict[tuple[str, ...], float] = {}
        if len(population):
            ids = np.stack([q.group_of[population.positions[:, i]] for i, q in enumerate(recoding.qis)], axis=1)
            keys, inverse = np.unique(ids, axis=0, return_inverse=True)
            sums = np.bincount(inverse.ravel(), weights=population.counts.astype(np.float64), minlength=len(keys))
            people = {tuple(labels[q][int(v)] for q, v in enumerate(k)): float(n) for k, n in zip(keys, sums)}
        return cls(labels, people, population.total)

    def known(self, labels: Sequence[str | None]) -> bool:
        """Whether every label is one the recoding produces (else: a value outside the domain)."""
        return all(label is not None and label in self.labels[q] for q, label in enumerate(labels))

    def people(self, labels: tuple[str, ...]) -> float | None:
        """Census people of a released group; None with ``population = "sample"``."""
        if self.population is None:
            return None
        return self.population.get(labels, 0.0)


def group_query(relation: exp.Expression, qi_columns: Sequence[str], flag: bool) -> exp.Select:
    """``SELECT qi… (as text), [flag], count(*) GROUP BY`` over the released rows."""
    keys: list[exp.Expression] = [exp.alias_(exp.cast(col(c), "VARCHAR"), ident(f"q{i}"))
                                  for i, c in enumerate(qi_columns)]
    if flag:
        keys.append(exp.alias_(exp.func("coalesce", exp.cast(col(FLAG), "BOOLEAN"), exp.false()), ident("f")))
    source = relation if isinstance(relation, exp.Table) else exp.Subquery(
        this=relation, alias=exp.TableAlias(this=ident("deid_released")))
    return (exp.select(*keys, exp.alias_(exp.func("count", exp.Star()), ident("m")))
            .from_(source).group_by(*[exp.column(f"q{i}") for i in range(len(qi_columns))],
                                    *([exp.column("f")] if flag else [])))


def measure(run: Callable[[exp.Expression], pa.Table], relation: exp.Expression, qi_columns: Sequence[str],
            census: Census, record_risk: RecordRisk, original_risk_sum: float, flag: bool = False) -> ReleaseFigures:
    """Count the released rows of ``relation`` by label tuple (``run`` executes a query where the
    rows are: a backend's ``execute``, or a connection inside the transaction writing them)."""
    table = run(group_query(relation, qi_columns, flag))
    # a fixed order of the groups fixes the order of every sum: the same rows give the same figures
    keys = [f"q{i}" for i in range(len(qi_columns))] + (["f"] if flag else [])
    if keys and table.num_rows:
        table = table.sort_by([(k, "ascending") for k in keys])
    columns = [table.column(f"q{i}").to_pylist() for i in range(len(qi_columns))]
    m_all = np.asarray(table.column("m").to_numpy(zero_copy_only=False), dtype=np.int64)
    flags = table.column("f").to_pylist() if flag else [False] * len(m_all)
    return figures_of(list(zip(*columns)) if columns else [()] * len(m_all), m_all, flags, census, record_risk,
                      original_risk_sum)


def figures_of(labels: Sequence[tuple[str | None, ...]], m_all: np.ndarray, flags: Sequence[bool], census: Census,
               record_risk: RecordRisk, original_risk_sum: float) -> ReleaseFigures:
    """The figures from released groups (label tuple, suppressed flag, row count)."""
    kept_m: list[int] = []
    kept_g: list[float] = []
    suppressed = outside = 0
    extra_m: list[int] = []  # suppressed and outside rows: in the risk, not in k or groups
    extra_g: list[float] = []
    for labels_i, m, suppressed_i in zip(labels, m_all, flags):
        m = int(m)
        if suppressed_i:
            suppressed += m
            extra_m.append(m)
            extra_g.append(max(census.total, m))
        elif not census.known(labels_i):
            outside += m
            extra_m.append(m)
            extra_g.append(float(m))
        else:
            kept_m.append(m)
            kept_g.append(census.people(tuple(labels_i)) or 0.0)  # type: ignore[arg-type]
    m_kept = np.asarray(kept_m, dtype=np.float64)
    g_kept = m_kept.copy() if census.population is None else np.maximum(np.asarray(kept_g, dtype=np.float64), m_kept)
    m = np.concatenate([m_kept, np.asarray(extra_m, dtype=np.float64)])
    g = np.concatenate([g_kept, np.asarray(extra_g, dtype=np.float64)])
    records = int(m.sum())
    r = np.asarray(record_risk(g), dtype=np.float64) if g.size else np.zeros(0)
    risk_sum = float((m * r).sum())
    return ReleaseFigures(
        records=records, groups=int(m_kept.size), k=int(m_kept.min()) if m_kept.size else 0,
        sample_unique_records=int((m_kept == 1).sum()), risk_sum=risk_sum,
        risk=risk_sum / original_risk_sum if original_risk_sum > 0 else 0.0,
        expected_reidentifications=float((m / g).sum()) if g.size else 0.0,
        max_record_risk=float(r.max()) if r.size else 0.0,
        mean_record_risk=risk_sum / records if records else 0.0, suppressed=suppressed, outside=outside)
