"""The contents of a release report: histograms, rules in words, marginals, information kept, sample rows.

Everything here is computed from the sample cells generalized with the release's recoding
(``release.figures.cell_groups``: the groups ``evaluate`` counts), so the histograms add up to
the figures the report prints beside them.  Numbers come out as plain ``int``/``float`` (the
report is JSON).  ``release_report`` assembles them into the report dict.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import numpy as np

from ..compiler.suppression import Suppression
from ..domains.domain import Domain
from ..domains.recoding import QIRecoding, Recoding
from ..evaluate.riskmodel import group_risks
from ..release.figures import Census, cell_groups

if TYPE_CHECKING:
    from ..problem import Problem
    from ..release.plan import ReleasePlan

MAX_LABELS = 30  # labels shown per QI in the rules and marginals; the rest are summed as "other (N labels)"
MAX_VALUES = 10  # member values listed per label
MAX_DOMAIN = 50  # category values listed per QI domain
SAMPLE_ROWS = 5  # synthetic rows when no release rows are asked for
IN_WORDS = 8  # labels named in a rule's sentence
HIGH_RISK = 0.5  # a record risk at or above this is a caution, and the record-risk histogram's last bin


class Groups:
    """The released groups of one recoding over the sample cells: ids per QI, m, g, record risk.

    With a ``suppression``, the groups it suppresses are taken out (``kept``) and their records
    form the one suppressed group the release shows (every QI ``*``): ``suppressed`` records,
    whose population size is max(population total, suppressed), as the gate counts them."""

    def __init__(self, problem: Problem, recoding: Recoding, suppression: Suppression | None = None,
                 census: Census | None = None) -> None:
        if census is None:  # a report passes its gate's census: one census per report
            census = Census.from_cells(recoding, problem.population, problem.sample.total)
        ids, m, g, self.cell_group = cell_groups(recoding, problem.sample, census)
        labels = [q.labels for q in recoding.qis]
        mask = suppression.mask(labels, ids, m) if suppression is not None else np.zeros(m.size, dtype=bool)
        self.cell_suppressed = mask[self.cell_group] if mask.size else np.zeros(0, dtype=bool)
        self.suppressed = int(round(float(m[mask].sum())))
        self.suppressed_groups = int(mask.sum())
        kept = ~mask
        self.ids, self.m, self.g = [q[kept] for q in ids], m[kept], g[kept]
        total = float(problem.population_total if problem.population is not None else problem.sample.total)
        # one call over every released group, the suppressed one included (a dataset-level model
        # reads the release's whole histogram)
        m_all = np.append(self.m, float(self.suppressed)) if self.suppressed else self.m
        g_all = np.append(self.g, max(total, float(self.suppressed))) if self.suppressed else self.g
        risk = group_risks(problem.record_risk, m_all, g_all) if g_all.size else np.zeros(0)
        self.m_all, self.g_all = m_all, g_all  # every released group, the suppressed one last
        self.risk = risk[:self.g.size]
        self.suppressed_risk = float(risk[-1]) if self.suppressed else 0.0

    def _released_risks(self) -> tuple[np.ndarray, np.ndarray]:
        """(record risk, records) of every released group, the suppressed records as one group of '*'."""
        if self.suppressed:
            return np.append(self.risk, self.suppressed_risk), np.append(self.m, float(self.suppressed))
        return self.risk, self.m

    def record_risk_histogram(self) -> dict[str, list[Any]]:
        """Records per record-risk bin: 0, then one bin per decade up to 0.1, then [0.1, 0.5) and
        [0.5, 1] — the last bin holds the records at risk 0.5 or more (``at_risk``), the ones a
        reviewer must see first."""
        risk, m = self._released_risks()
        positive = risk[risk > 0]
        low = int(math.floor(math.log10(float(positive.min())))) if positive.size else -1
        low = max(min(low, -1), -12)
        edges = [0.0] + [10.0 ** e for e in range(low, 0)] + [HIGH_RISK, 1.0]
        counts, _ = np.histogram(np.clip(risk, 0.0, 1.0), bins=edges, weights=m)
        return {"edges": edges, "counts": [int(round(c)) for c in counts]}

    def at_risk(self, threshold: float = HIGH_RISK) -> int:
        """Records whose record risk is ``threshold`` or more (suppressed records included)."""
        risk, m = self._released_risks()
        return int(round(float(m[risk >= threshold].sum()))) if risk.size else 0

    def group_sizes(self, population: bool = True) -> dict[str, Any]:
        """Groups per size bin (1, 2, 5, 10, 20, 50, … : log-spaced), by sample records m and — when
        ``population`` (g is counted in a census or estimated by weights) — by population people
        g, else ``population`` None; the last edge is above the largest group.  Suppressed records
        are not a group of the release's labels and are left out."""
        sizes = [self.m.max()] + ([self.g.max()] if population else []) if self.m.size else []
        top = float(max(sizes)) if sizes else 1.0
        edges: list[int] = [1]
        step = 0
        while edges[-1] <= top:
            step += 1
            edges.append((1, 2, 5)[step % 3] * 10 ** (step // 3))
        sample, _ = np.histogram(self.m, bins=edges)
        counted = [int(c) for c in np.histogram(self.g, bins=edges)[0]] if population else None
        return {"edges": edges, "sample": [int(c) for c in sample], "population": counted}

    def records_per_label(self, q: int, n_groups: int) -> np.ndarray:
        return np.bincount(self.ids[q], weights=self.m, minlength=n_groups)

    def largest(self, n: int) -> list[int]:
        """The ``n`` groups with the most records (ties by key), for synthetic rows."""
        order = np.lexsort((np.arange(self.m.size), -self.m))
        return [int(i) for i in order[:n]]


# -- the policy in words -------------------------------------------------------------------
def rule(name: str, kind: str, domain: Domain, qrec: QIRecoding, records: np.ndarray,
         line: str = "record") -> dict[str, Any]:
    """One QI's rule: a sentence and its labels with their values and records (persons with
    ``[person]``); ``line``: what one released line is called in the sentence ("row" with persons).
    Only the labels some released record carries are listed: ``empty`` counts the others (bands of
    the domain no record falls in), which the page names in one line instead of a row each."""
    labels = list(qrec.labels)
    rows = [{"label": label, "values": _members(domain, qrec, g), "records": int(round(records[g]))}
            for g, label in enumerate(labels)]
    empty = sum(1 for r in rows if r["records"] == 0)
    rows = [r for r in rows if r["records"] > 0]
    if len(rows) > MAX_LABELS:
        rest = rows[MAX_LABELS - 1:]
        rows = rows[:MAX_LABELS - 1] + [{"label": f"other ({len(rest):,} labels)",
                                          "values": [f"{sum(len(r['values']) for r in rest):,}+ values"],
                                          "records": sum(r["records"] for r in rest)}]
    return {"qi": name, "words": words(name, kind, domain, qrec, line), "labels": rows, "empty": empty}


def words(name: str, kind: str, domain: Domain, qrec: QIRecoding, line: str = "record") -> str:
    """A QI's generalization in one sentence, e.g. ``age in 6 bands: 0-17, 18-29, …``; ``line``
    names one released line ("record", or "row" when the figures count persons)."""
    k, n = qrec.n_groups, domain.size
    labels = list(qrec.labels)
    if k == n:
        return f"{name}: kept as it is ({n:,} values)"
    if k == 1:
        return f"{name}: not released in detail; every {line} shows {labels[0]!r}"
    if kind == "zip":
        digits = _zip_digits(domain, qrec)
        if digits is not None:
            return f"{name}: first {digits} digit{'s' if digits != 1 else ''} kept ({k:,} prefixes)"
    shown = ", ".join(labels[:IN_WORDS]) + (", …" if k > IN_WORDS else "")
    if kind in ("integer", "date") and qrec.contiguous:
        return f"{name} in {k:,} bands: {shown}"
    merged = int(np.count_nonzero(qrec.widths > 1))
    return f"{name}: {n:,} values shown as {k:,} labels ({merged:,} merge several values): {shown}"


def _zip_digits(domain: Domain, qrec: QIRecoding) -> int | None:
    """The prefix length when every group is exactly the ZIPs sharing a prefix of one length."""
    texts = [domain.text(p) for p in range(domain.size)]
    for digits in range(0, max(len(t) for t in texts)):
        prefix_group: dict[str, int] = {}
        ok = True
        for pos, text in enumerate(texts):
            group = int(qrec.group_of[pos])
            if prefix_group.setdefault(text[:digits], group) != group:
                ok = False
                break
        if ok and len(prefix_group) == qrec.n_groups:
            return digits
    return None


def _members(domain: Domain, qrec: QIRecoding, group: int) -> list[str]:
    members = qrec.members(group)
    if members.size <= MAX_VALUES:
        return [domain.text(int(p)) for p in members]
    head = [domain.text(int(p)) for p in members[:MAX_VALUES - 2]]
    return [*head, "…", domain.text(int(members[-1]))]


def domain_summary(domain: Domain) -> str | list[str]:
    """A QI's domain: ``lo … hi`` for integers and dates, else its values (at most ``MAX_DOMAIN``)."""
    if domain.kind in ("integer", "date"):
        return f"{domain.text(0)} … {domain.text(domain.size - 1)}"
    values = [domain.text(p) for p in range(min(domain.size, MAX_DOMAIN))]
    if domain.size > MAX_DOMAIN:
        values.append(f"… {domain.size - MAX_DOMAIN:,} more")
    return values


# -- utility per QI --------------------------------------------------------------------------
def original_marginal(problem: Problem, q: int) -> np.ndarray:
    """Sample records per domain value of QI ``q``."""
    return np.bincount(problem.sample.positions[:, q], weights=problem.sample.counts.astype(np.float64),
                       minlength=problem.domains[q].size)


def entropy(counts: np.ndarray) -> float:
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def information_kept(problem: Problem, q: int, qrec: QIRecoding, groups: Groups) -> float:
    """I(value; released label) / H(value) of QI ``q``, in [0, 1]: the share of the QI's information
    (in the sample's own distribution, ignoring the other QIs) an analyst still has.

    Without suppression the label is a function of the value, so I = H(label): generalizing can
    only lose entropy.  A suppressed record shows ``*`` whatever its value, so the label is then
    not a function of the value and the mutual information H(value) + H(label) − H(value, label)
    counts only what the label still says.  A QI with one observed value has nothing to lose: 1."""
    counts = problem.sample.counts.astype(np.float64)
    value = problem.sample.positions[:, q].astype(np.int64)
    h = entropy(np.bincount(value, weights=counts))
    if h <= 0:
        return 1.0
    label = qrec.group_of[value].astype(np.int64)
    if groups.cell_suppressed.size:
        label = np.where(groups.cell_suppressed, qrec.n_groups, label)  # '*' is one more label
    joint = np.unique(value * (qrec.n_groups + 1) + label, return_inverse=True)[1]
    kept = h + entropy(np.bincount(label, weights=counts)) - entropy(np.bincount(np.asarray(joint).ravel(),
                                                                               weights=counts))
    return float(min(1.0, max(0.0, kept / h)))


def losses(problem: Problem, recoding: Recoding, groups: Groups) -> tuple[float, float]:
    """KL(P‖Q) in nats and Iyengar's loss of the release, suppressed records included.

    Seed 000 eq. 4 spreads each group's m records uniformly over the W_G cells it covers
    (METHODS decision 3).  A suppressed record is generalized to the top, so the suppressed
    group spreads its S records over every cell of the domain (W_top): a sample cell's
    Q·N = m_G/W_G (when its group is kept) + S/W_top, and KL = Σ_cells (c/N) ln(c / (Q·N)).
    Without suppression this is ``evaluate``'s KL (tested).  Iyengar's loss counts a suppressed
    record as fully generalized (1 per QI)."""
    sample = problem.sample
    counts = sample.counts.astype(np.float64)
    n = float(counts.sum())
    if n <= 0:
        return 0.0, 0.0
    sizes = [d.size for d in problem.domains]
    log_w = np.zeros(len(counts))
    lm = np.zeros(len(counts))
    for i, qrec in enumerate(recoding.qis):
        width = qrec.widths[qrec.group_of[sample.positions[:, i]]].astype(np.float64)
        log_w += np.log(width)
        lm += (width - 1.0) / (sizes[i] - 1) if sizes[i] > 1 else 0.0
    m_of = np.bincount(groups.cell_group, weights=counts)
    suppressed = groups.cell_suppressed if groups.cell_suppressed.size else np.zeros(len(counts), dtype=bool)
    m_cell = m_of[groups.cell_group]
    with np.errstate(divide="ignore"):
        log_kept = np.where(suppressed, -np.inf, np.log(m_cell) - log_w)
        log_star = (np.log(groups.suppressed) - float(np.sum(np.log(sizes)))) if groups.suppressed else -np.inf
        log_q = np.logaddexp(log_kept, log_star)
    kl = float((counts * (np.log(counts) - log_q)).sum() / n)
    lm = np.where(suppressed, float(len(sizes)), lm)
    iyengar = float((counts * lm).sum() / (n * len(sizes))) if sizes else 0.0
    return max(kl, 0.0), iyengar


def shares(labels: Sequence[str], counts: np.ndarray, ordered: bool = False,
           total: float | None = None) -> list[dict[str, Any]]:
    """Share per label, in domain order, adding up to 1.  At most ``MAX_LABELS`` labels: an ordered
    QI (integers, dates) past that is shown in ``MAX_LABELS`` consecutive bands (``0 … 4``), so the
    chart keeps its shape; any other keeps its largest labels with records and sums the rest as
    ``other (N labels)``.  ``total``: the records the shares are of, when some (suppressed ones)
    are not among ``counts``."""
    total = float(counts.sum()) if total is None else float(total)
    if total <= 0:
        return []
    if ordered and len(labels) > MAX_LABELS:
        width = -(-len(labels) // MAX_LABELS)
        out = []
        for lo in range(0, len(labels), width):
            hi = min(lo + width, len(labels)) - 1
            name = labels[lo] if lo == hi else f"{labels[lo]} … {labels[hi]}"
            out.append({"label": name, "share": float(counts[lo:hi + 1].sum() / total)})
        return out
    present = [i for i in range(len(labels)) if counts[i] > 0]
    rest: list[int] = []
    if len(present) > MAX_LABELS:
        keep = set(sorted(present, key=lambda i: (-counts[i], i))[:MAX_LABELS - 1])
        rest = [i for i in present if i not in keep]
        present = [i for i in present if i in keep]
    out = [{"label": labels[i], "share": float(counts[i] / total)} for i in present]
    if rest:
        out.append({"label": f"other ({len(rest):,} labels)", "share": float(counts[rest].sum() / total)})
    return out


# -- rows an analyst sees ----------------------------------------------------------------------
def release_rows(problem: Problem, plan: ReleasePlan, n: int) -> tuple[list[str], list[list[Any]]]:
    """The first ``n`` rows of the release query of ``plan``, as JSON values."""
    from sqlglot import exp

    query = exp.select("*").from_(exp.Subquery(this=problem.query(plan),
                                               alias=exp.TableAlias(this=exp.to_identifier("deid_release"))))
    table = problem.backend.execute(query.limit(n))
    return list(table.column_names), [[plain(v) for v in row.values()] for row in table.to_pylist()]


PLACEHOLDER = {"sensitive": "(sensitive value)", "keep": "(kept value)", "pseudonymize": "(pseudonym)"}


def synthetic_rows(columns: Sequence[tuple[str, str]], qi_columns: Sequence[str], recoding: Recoding,
                   groups: Groups) -> list[list[Any]]:
    """Rows built from the labels of the largest released groups, the other columns as placeholders:
    what the columns look like, without showing a single record."""
    index = {c: i for i, c in enumerate(qi_columns)}
    rows = []
    for g in groups.largest(SAMPLE_ROWS):
        rows.append([recoding.qis[index[name]].labels[int(groups.ids[index[name]][g])] if name in index
                     else PLACEHOLDER.get(role, f"({role})") for name, role in columns])
    return rows


def plain(value: Any) -> Any:
    """A query result value as JSON: numbers and text as they are, dates as ISO text."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dt.date | dt.datetime | dt.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def number(x: float) -> str:
    """A figure for a sentence: 0.61, 41.7, 2,640 (three significant digits below 1,000)."""
    x = float(x)
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}" if abs(x) < 1 else f"{x:,.3g}".rstrip(".")


def one_in(p: float) -> str:
    """A probability as ``1/20`` when it is one over a whole number, else ``0.0123 (about 1 in 81)``."""
    if p <= 0:
        return "0"
    n = 1.0 / p
    if abs(n - round(n)) <= 1e-9 * n:
        return f"1/{round(n):,}"
    return f"{number(p)} (about 1 in {number(n)})"
