"""The distribution half of the drift gate: did the batch's released label shares move, QI by QI?

The risk half (``tolerance.py``) watches one number, ``mean_record_risk``.  A batch can move a
lot without moving that number: every age ten years older, or twice the share of one race, keeps
the records in groups of much the same census size, and the security review found the risk test
caught 12 and 0 of 100 such batches.  This test looks at what moved instead: for each QI, the
records per *released* label (the marginal of the release's groups) of the saved release against
the batch's.

**The test.** Both counts are samples (the saved release was one draw from its population too),
so the question is two-sample: "the saved and the new records have the same label shares".  That
is Pearson's chi-square test of homogeneity on the 2 × L table (saved, new) × labels, with L − 1
degrees of freedom.  The saved counts come from the policy file's release groups (every policy
file saves them), so files saved before this test can run it too.

**Sparse and new labels.** The chi-square approximation needs expected counts of about 5 or more
in every cell (Cochran's rule).  A label whose expected count in the smaller release is below
``MIN_EXPECTED`` is pooled with the other such labels into one "rare labels" cell; when that cell
is itself below ``MIN_EXPECTED`` it is merged into the smallest regular label.  Pooling rather
than an exact test: it keeps the rare labels' total mass in the test (a batch whose rare ZIPs
doubled still moves the pooled cell), it costs nothing on thousands of labels (an exact or
permutation test of a 2 × L table does), and the level is measured (``bench/drift.py``: at most 1
false alarm in 100 same-population batches).  A label absent from the saved release — a new
category, or the fallback label ``*`` of records outside the saved domain — is a column whose
saved count is 0: it counts against the batch like any other share that moved.

**Many QIs.** One test per QI (QIs with one released label are not tested: nothing can move), so
the p-values are Holm-corrected over the QIs tested, and the batch drifted when a corrected p is
at most ``alpha``: the family-wise false-alarm rate over all QIs is at most ``alpha`` (default
``ALPHA`` = 0.001, set with ``policy save --shift-alpha``, saved in the file's ``drift.shift``).
Holm rather than Bonferroni: the same guarantee, and never less power.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .groups import Groups

ALPHA = 0.001  # family-wise over the QIs: a same-population batch fails the test with at most this probability
MIN_EXPECTED = 5.0  # Cochran's rule: cells with a smaller expected count are pooled
TEST = "chi-square test of homogeneity per QI (saved vs new released label counts), Holm-corrected over the QIs"
SHOWN = 3  # labels named per drifted QI


@dataclass(frozen=True)
class Shift:
    """How the distribution test is set: its family-wise level.  ``saved`` False: a policy file
    saved before the test (it runs at the default level from the saved groups)."""

    alpha: float = ALPHA
    saved: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"test": TEST, "alpha": self.alpha, "correction": "holm", "min_expected": MIN_EXPECTED}

    @classmethod
    def from_json(cls, raw: Any) -> Shift:
        """The ``drift.shift`` table (None: a file saved before the test); raises ValueError with
        what is wrong, for the reader's one-line message."""
        if raw is None:
            return cls(ALPHA, saved=False)
        alpha = raw.get("alpha") if isinstance(raw, dict) else None
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
            raise ValueError("must be a table with an alpha between 0 and 1")
        return cls(float(alpha))


@dataclass(frozen=True)
class ShareChange:
    """One label of a QI: its share of the records in the saved release and in the batch's."""

    label: str
    saved: float
    new: float

    @property
    def change(self) -> float:
        return self.new - self.saved

    def describe(self) -> str:
        return f"{self.label} {self.saved:.1%} → {self.new:.1%}"

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "saved": self.saved, "new": self.new, "change": self.change}


@dataclass(frozen=True)
class QITest:
    """The homogeneity test of one QI's released label counts."""

    qi: str
    statistic: float
    df: int  # cells - 1 after pooling; 0: not tested
    p_value: float  # uncorrected
    p_adjusted: float  # Holm-corrected over the QIs tested
    pooled: int  # labels pooled into the rare-labels cell
    moved: tuple[ShareChange, ...]  # the labels whose share changed most

    def describe(self, tested: int) -> str:
        labels = ", ".join(c.describe() for c in self.moved[:SHOWN])
        return f"{self.qi}: {labels}; p = {self.p_adjusted:.2g} (Holm-corrected over {tested} QIs)"

    def to_dict(self) -> dict[str, Any]:
        return {"qi": self.qi, "statistic": self.statistic, "df": self.df, "p_value": self.p_value,
                "p_adjusted": self.p_adjusted, "pooled_labels": self.pooled,
                "moved": [c.to_dict() for c in self.moved]}


@dataclass(frozen=True)
class ShiftResult:
    """The distribution test of a batch: per QI, and the verdict at ``alpha``."""

    alpha: float
    tests: tuple[QITest, ...] = ()
    note: str | None = None  # why the test could not run, or how it was set (a file saved before it)
    ran: bool = True

    @property
    def tested(self) -> int:
        return sum(1 for t in self.tests if t.df > 0)

    @property
    def drifted(self) -> list[QITest]:
        """The QIs whose corrected p is at most alpha, smallest p first."""
        return sorted((t for t in self.tests if t.df > 0 and t.p_adjusted <= self.alpha),
                      key=lambda t: (t.p_adjusted, t.qi))

    @property
    def shifted(self) -> bool:
        return bool(self.drifted)

    def describe(self) -> str:
        """One line: the QIs that drifted and their labels, or the verdict."""
        if not self.ran:
            return self.note or "the distribution test did not run"
        moved = self.drifted
        if not moved:
            smallest = min((t.p_adjusted for t in self.tests if t.df > 0), default=1.0)
            return (f"no QI's label shares moved (smallest Holm-corrected p = {smallest:.2g} over {self.tested} "
                    f"QIs, alpha {self.alpha:g})")
        return "; ".join(t.describe(self.tested) for t in moved)

    def to_dict(self) -> dict[str, Any]:
        return {"test": TEST, "alpha": self.alpha, "ran": self.ran, "note": self.note, "shifted": self.shifted,
                "qis_tested": self.tested, "drifted": [t.qi for t in self.drifted],
                "per_qi": [t.to_dict() for t in self.tests]}


def label_counts(groups: Groups, qi: int) -> dict[str, int]:
    """Records per released label of QI number ``qi`` (the marginal of the release's groups)."""
    out: dict[str, int] = {}
    for labels, m in zip(groups.labels, groups.records):
        out[labels[qi]] = out.get(labels[qi], 0) + int(m)
    return out


def shares(counts: dict[str, int]) -> dict[str, float]:
    total = float(sum(counts.values()))
    return {label: m / total for label, m in counts.items()} if total > 0 else {label: 0.0 for label in counts}


def share_changes(before: dict[str, int], after: dict[str, int], count: int = SHOWN) -> list[ShareChange]:
    """The ``count`` labels whose share of the records changed most (saved → new)."""
    a, b = shares(before), shares(after)
    changes = [ShareChange(label, a.get(label, 0.0), b.get(label, 0.0)) for label in sorted(set(a) | set(b))]
    changes = [c for c in changes if abs(c.change) > 1e-12]
    changes.sort(key=lambda c: (-abs(c.change), c.label))
    return changes[:count]


def homogeneity(saved: dict[str, int], new: dict[str, int]) -> tuple[float, int, float, int]:
    """Pearson's chi-square test of homogeneity of two label counts, rare labels pooled (see the
    module docstring): the statistic, degrees of freedom, p-value and labels pooled.  Symmetric in
    its arguments; identical counts give statistic 0 and p = 1; fewer than two cells, df 0 and p = 1."""
    from scipy.stats import chi2

    labels = sorted(set(saved) | set(new))
    a = np.array([saved.get(label, 0) for label in labels], dtype=np.float64)
    b = np.array([new.get(label, 0) for label in labels], dtype=np.float64)
    keep = (a + b) > 0
    a, b = a[keep], b[keep]
    n_a, n_b = a.sum(), b.sum()
    if n_a <= 0 or n_b <= 0 or a.size < 2:
        return 0.0, 0, 1.0, 0
    c = a + b
    smallest = min(n_a, n_b) / (n_a + n_b)
    rare = c * smallest < MIN_EXPECTED
    pooled = int(rare.sum())
    if pooled:
        cells_a, cells_b = list(a[~rare]), list(b[~rare])
        pa_, pb_ = float(a[rare].sum()), float(b[rare].sum())
        if (pa_ + pb_) * smallest < MIN_EXPECTED and cells_a:  # the pooled cell is sparse too: merge it
            j = int(np.argmin(np.asarray(cells_a) + np.asarray(cells_b)))
            cells_a[j] += pa_
            cells_b[j] += pb_
        else:
            cells_a.append(pa_)
            cells_b.append(pb_)
        a, b = np.asarray(cells_a), np.asarray(cells_b)
    if a.size < 2:
        return 0.0, 0, 1.0, pooled
    c = a + b
    total = n_a + n_b
    e_a, e_b = n_a * c / total, n_b * c / total
    statistic = float(((a - e_a) ** 2 / e_a).sum() + ((b - e_b) ** 2 / e_b).sum())
    df = int(a.size - 1)
    return statistic, df, float(chi2.sf(statistic, df)), pooled


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error over the list), in the input order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def shift_test(shift: Shift | None, saved: Groups, new: Groups) -> ShiftResult:
    """Test each QI's released label counts of the batch (``new``) against the saved release's."""
    config = shift or Shift(ALPHA, saved=False)
    if int(saved.records.sum()) <= 0:
        return ShiftResult(config.alpha, ran=False,
                           note="the distribution test cannot run for this policy file: it saves no released records "
                                "per label; the risk test still runs")
    raw = []
    for i, name in enumerate(saved.names):
        before, after = label_counts(saved, i), label_counts(new, i)
        statistic, df, p, pooled = homogeneity(before, after)
        raw.append((name, statistic, df, p, pooled, tuple(share_changes(before, after))))
    tested = [k for k, r in enumerate(raw) if r[2] > 0]
    adjusted = dict(zip(tested, holm([raw[k][3] for k in tested])))
    tests = tuple(QITest(name, statistic, df, p, adjusted.get(k, 1.0), pooled, moved)
                  for k, (name, statistic, df, p, pooled, moved) in enumerate(raw))
    note = None if config.saved else (f"this policy file was saved before the distribution test; it runs at the "
                                      f"default alpha {config.alpha:g}")
    return ShiftResult(config.alpha, tests, note)


def is_valid_alpha(alpha: float) -> bool:
    return math.isfinite(alpha) and 0 < alpha < 1
