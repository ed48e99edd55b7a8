"""The report's "attribute disclosure" section: what the released values of each sensitive column
reveal about a person once found in their group (METHODS decision 15).

k and the record risk judge who a row is; a group of five patients who all carry B20 passes
``min_k = 5`` and still tells anyone who finds a patient in it their diagnosis.  So the report
shows, for each sensitive column the gate judged (``ReleaseFigures.attribute``: one with an
attribute criterion), the gate's own figures — the largest share of a group's persons holding
one value (confidence), the least distinct and entropy ℓ, the largest t and presence — with the
criteria's verdicts, and two things the gate does not keep: the worst group by its labels and
the histogram of the largest share per group, from one more ``GROUP BY`` over the same release
query the gate measured (``release.attribute.value_query``, counted as the gate counts).

A sensitive column that no criterion judges is listed apart (``unjudged``): the cautions warn of
it, since it leaves unchanged with nothing looking at it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
from sqlglot import exp

from ..contract.attribute import AttributeLimits
from ..evaluate import attribute as fig
from ..release.attribute import Groups, value_query
from ..release.figures import AttributeFigures, Census, count_groups
from .release_contents import plain

#: the histogram's bins of the largest share per group: tenths of the group
EDGES = [i / 10 for i in range(11)]
#: what each figure is called on the page and in the JSON twin's ``checks``
FIGURE_WORDS = {"confidence": "largest share of a group holding one value", "distinct_l": "distinct ℓ",
                "entropy_l": "entropy ℓ", "recursive_cl": "recursive (c, ℓ)-diversity", "t": "t (closeness)",
                "presence": "presence (released ÷ census people)"}

Run = Callable[[exp.Expression], pa.Table]


class Measured(Protocol):
    """What the section reads of the gate that measured the release (``release.gate.ReleaseGate``)."""

    qi_columns: list[str]
    columns: Sequence[tuple[str, str]]
    census: Census
    person: str | None

    @property
    def flagged(self) -> bool: ...


def sensitive_columns(tables: Sequence[Sequence[str]]) -> list[str]:
    """Every sensitive column of the source and of each linked table, each once, in order."""
    return list(dict.fromkeys(c for t in tables for c in t))


def unjudged(sensitive: Sequence[str], judged: Sequence[str]) -> list[str]:
    """The sensitive columns no attribute criterion judges."""
    return [c for c in sensitive if c not in set(judged)]


def attribute_section(run: Run, relation: exp.Expression, gate: Measured, qi_names: Sequence[str],
                      attribute: Sequence[AttributeFigures],
                      limits: dict[str, AttributeLimits]) -> list[dict[str, Any]]:
    """Per judged sensitive column: the gate's figures and checks, its criteria, the worst group by
    confidence (labels, value, persons) and the histogram of the largest share per group.

    ``relation`` is the release query the gate measured, ``attribute`` the gate's figures of it.  A
    column the release query does not hold (a linked table's) has the gate's figures only."""
    if not attribute:
        return []
    released = {name for name, _ in gate.columns}
    table = count_groups(run, relation, gate.qi_columns, gate.flagged, gate.person)
    groups = Groups.of(table, len(gate.qi_columns), gate.flagged, gate.census)
    out = []
    for figures in attribute:
        column = figures.column
        entry: dict[str, Any] = {
            "column": column, "groups": figures.groups, "max_confidence": figures.max_confidence,
            "min_distinct_l": figures.min_distinct_l, "min_entropy_l": figures.min_entropy_l,
            "max_t": figures.max_t, "max_presence": figures.max_presence,
            "criteria": _criteria(limits.get(column)),
            "checks": [{"criterion": c.key, "figure": c.figure, "words": FIGURE_WORDS.get(c.figure, c.figure),
                        "value": c.value, "limit": c.limit, "at_most": c.at_most, "passed": c.passed,
                        "text": c.text} for c in figures.checks],
            "worst_group": None, "confidence_histogram": None}
        if column in released and column in limits:
            shares, worst = _shares(run, relation, gate, groups, limits[column])
            counts, _ = np.histogram(shares, bins=EDGES)
            entry["confidence_histogram"] = {"edges": list(EDGES), "counts": [int(c) for c in counts]}
            if worst is not None:
                i, value, persons = worst
                entry["worst_group"] = {"labels": dict(zip(qi_names, (plain(v) for v in groups.labels[i]))),
                                        "share": float(shares[i]), "value": plain(value), "holding": persons,
                                        "of": float(groups.m[i])}
        out.append(entry)
    return out


def _criteria(limits: AttributeLimits | None) -> dict[str, Any]:
    """The column's limits as the spec gives them (criteria and their settings), those set only."""
    if limits is None:
        return {}
    data = limits.to_dict()
    out = {k: v for k, v in data.items() if v is not None and v != []}
    for key in ("ignore_values", "order"):
        if key in out:
            out[key] = [plain(v) for v in out[key]]
    return out


def _shares(run: Run, relation: exp.Expression, gate: Measured, groups: Groups,
            limits: AttributeLimits) -> tuple[np.ndarray, tuple[int, Any, float] | None]:
    """The largest share per released group (``evaluate.attribute.confidence``: max_v f_G(v) / n_G,
    ``ignore_values`` left out, as the gate counts it) and the worst group: (its index, its most
    held value, the persons holding it)."""
    table = run(value_query(relation, gate.qi_columns, limits.column, gate.flagged, gate.person))
    index = {labels: i for i, labels in enumerate(groups.labels)}
    qis = len(gate.qi_columns)
    labels = (list(zip(*[table.column(f"q{i}").to_pylist() for i in range(qis)])) if qis
              else [()] * table.num_rows)
    texts = {str(v) for v in limits.ignore_values}
    values = table.column("v").to_pylist()
    counts = table.column("f").to_pylist()
    kept = [(index[lab], v, float(f)) for lab, v, f in zip(labels, values, counts)
            if lab in index and (v is None or (v not in limits.ignore_values and str(v) not in texts))]
    code = {v: c for c, v in enumerate(dict.fromkeys(v for _, v, _ in kept))}
    vc = fig.ValueCounts.of([g for g, _, _ in kept], [code[v] for _, v, _ in kept], [f for _, _, f in kept],
                            groups.m, max(len(code), 1))
    shares = fig.confidence(vc)
    if not kept:
        return shares, None
    i = int(np.argmax(shares))
    best = max(((f, v) for g, v, f in kept if g == i), key=lambda t: t[0])
    return shares, (i, best[1], best[0])
