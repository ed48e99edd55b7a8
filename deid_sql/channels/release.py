"""The release: whole subjects per output channel, compiled to SQL, and its check.

Inside each input channel, subjects are ranked by a seeded hash of their identity
columns (``row_number() OVER (PARTITION BY channel ORDER BY md5(seed|ids))``); a
plan of rank ranges — a ``VALUES`` list, so a view needs no side table — sends
ranks [lo, hi] of channel r to output channel w.  The assignment is thus blind to
the confidential value, reproducible, and runs in any engine sqlglot can render.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from sqlglot import exp

from ..backends.base import Backend
from ..compiler.compile import col, ident
from ..errors import DeidError
from .assignment import RELATIVE, Assignment
from .inputs import InputChannels, RiskRule, text_key, value_key
from .spec import ChannelSpec

PLAN = "deid_plan"
RANKED = "deid_ranked"


@dataclass(frozen=True)
class ChannelPlan:
    """Released output channels (used ones and the singletons that keep safe subjects)."""

    labels: tuple[str, ...]
    members: tuple[tuple[int, ...], ...]  # input channels per released output channel
    subjects: dict[tuple[int, int], int]  # (released channel, input channel) -> subjects sent
    ranges: tuple[tuple[int, int, int, int], ...]  # (input channel, first rank, last rank, released channel)

    def totals(self) -> np.ndarray:
        out = np.zeros(len(self.labels), dtype=np.int64)
        for (w, _), n in self.subjects.items():
            out[w] += n
        return out


def plan(assignment: Assignment) -> ChannelPlan:
    """Label the used output channels (fewest members first, d_0 last as ``all``) and the
    singletons, and lay each input channel's ranks out over its output channels."""
    program = assignment.program
    inputs = program.inputs
    x = np.rint(assignment.x).astype(np.int64)
    totals = np.bincount(program.var_w, x, minlength=len(program.outputs))
    used = [w for w in np.flatnonzero(totals).tolist() if w != 0]
    used.sort(key=lambda w: (program.outputs.members[w].size, [inputs.keys[r] for r in program.outputs.members[w]]))
    kept = assignment.kept.round().astype(np.int64)
    singles = [r for r in range(len(inputs.keys)) if kept[r] > 0]
    members = [tuple(program.outputs.members[w].tolist()) for w in used] + [(r,) for r in singles]
    origin = used + [-1] * len(singles)
    if totals[0]:
        members.append(tuple(range(len(inputs.keys))))
        origin.append(0)
    labels = [f"w{i}" for i in range(1, len(members) + 1)]
    if totals[0]:
        labels[-1] = "all"
    released = {w: i for i, w in enumerate(origin) if w >= 0}
    single_of = {r: len(used) + i for i, r in enumerate(singles)}
    subjects: dict[tuple[int, int], int] = {}
    for v in np.flatnonzero(x):
        subjects[(released[int(program.var_w[v])], int(program.var_r[v]))] = int(x[v])
    for r in singles:
        subjects[(single_of[r], r)] = int(kept[r])
    ranges = []
    lo = np.ones(len(inputs.keys), dtype=np.int64)
    for w, r in sorted(subjects, key=lambda wr: (wr[1], wr[0])):
        n = subjects[(w, r)]
        ranges.append((r, int(lo[r]), int(lo[r] + n - 1), w))
        lo[r] += n
    return ChannelPlan(tuple(labels), tuple(members), subjects, tuple(ranges))


def composition(release: ChannelPlan, inputs: InputChannels) -> pa.Table:
    """One row per (output channel, member input channel): what data users are told (§3.1)."""
    totals = release.totals()
    rows: dict[str, list[object]] = {"output_channel": []}
    rows.update({c: [] for c in inputs.related})
    rows.update({"subjects_from_input": [], "output_subjects": []})
    for w, members in enumerate(release.members):
        for r in members:
            rows["output_channel"].append(release.labels[w])
            for c, v in zip(inputs.related, inputs.keys[r]):
                rows[c].append(v)
            rows["subjects_from_input"].append(release.subjects.get((w, r), 0))
            rows["output_subjects"].append(int(totals[w]))
    return pa.table(rows)


def helper_names(channels: ChannelSpec) -> dict[str, str]:
    """Names of the query's own columns, chosen so no released or source column can shadow them."""
    taken = {*channels.identity, *channels.related, channels.confidential, channels.label_column}
    names: dict[str, str] = {}
    for base in ["rank", "n", "v", *(f"k{i}" for i in range(len(channels.related)))]:
        name, n = f"deid_{base}", 0
        while name in taken:
            n += 1
            name = f"deid_{base}_{n}"
        taken.add(name)
        names[base] = name
    return names


def release_query(source: exp.Expression, columns: Sequence[str], channels: ChannelSpec, release: ChannelPlan,
                  inputs: InputChannels, seed: int, truth: bool = False) -> exp.Select:
    """``SELECT`` identity columns and the output-channel label (in place of the related columns),
    one row per source row of the solved input channels (rows of any other channel, or of a channel
    whose size changed, are withheld: the guard of a view over a changing source); ``truth`` adds
    the true channel and value (for the check only, under ``helper_names``)."""
    h = helper_names(channels)
    width = len(channels.related)
    keys = [text_key(c, channels) for c in channels.related]
    ids = [exp.func("coalesce", exp.cast(col(c), "VARCHAR"), exp.Literal.string("")) for c in channels.identity]
    # every part is non-NULL (coalesced), so the plain CONCAT_WS needs no NULL guard in any dialect
    digest = exp.MD5(this=exp.ConcatWs(expressions=[exp.Literal.string("|"), exp.Literal.string(str(seed)), *ids],
                                       safe=True, coalesce=True))
    window = exp.Window(this=exp.RowNumber(), partition_by=keys,
                        order=exp.Order(expressions=[exp.Ordered(this=digest)]
                                        + [exp.Ordered(this=col(c)) for c in channels.identity]))
    size = exp.Window(this=exp.func("count", exp.Star()), partition_by=[k.copy() for k in keys])
    # only the columns the release needs: a source column can never shadow a helper
    ranked = exp.select(*[col(c) for c in channels.identity],
                        *[exp.alias_(k.copy(), ident(h[f"k{i}"])) for i, k in enumerate(keys)],
                        exp.alias_(value_key(channels), ident(h["v"])),
                        exp.alias_(window, ident(h["rank"])),
                        exp.alias_(size, ident(h["n"]))).from_(_from(source))
    # the guard: a row is released only when its input channel is one the program solved and still
    # has the subjects it had then; a new input channel (its confidential share never checked) or a
    # channel whose rows were added or removed since (its ranks no longer follow the plan) is
    # withheld whole, so a view over a source that changes never releases an unchecked subject
    sizes = inputs.sizes
    values = exp.values([(*inputs.keys[r], lo, hi, int(sizes[r]), release.labels[w])
                         for r, lo, hi, w in release.ranges],
                        alias=PLAN, columns=[*(f"k{i}" for i in range(width)), "lo", "hi", "n", "label"])
    on = exp.and_(*[exp.EQ(this=col(h[f"k{i}"], RANKED), expression=col(f"k{i}", PLAN)) for i in range(width)],
                  exp.Between(this=col(h["rank"], RANKED), low=col("lo", PLAN), high=col("hi", PLAN)),
                  exp.EQ(this=col(h["n"], RANKED), expression=col("n", PLAN)))
    projections: list[exp.Expression] = []
    for name in columns:
        if name in channels.identity:
            projections.append(exp.alias_(col(name, RANKED), ident(name)))
        elif name == channels.related[0]:
            projections.append(exp.alias_(col("label", PLAN), ident(channels.label_column)))
    if truth:
        projections += [exp.alias_(col(h[f"k{i}"], RANKED), ident(h[f"k{i}"])) for i in range(width)]
        projections.append(exp.alias_(col(h["v"], RANKED), ident(h["v"])))
    return (exp.select(*projections)
            .from_(exp.Subquery(this=ranked, alias=exp.TableAlias(this=ident(RANKED))))
            .join(values, on=on))


def _from(source: exp.Expression) -> exp.Expression:
    if isinstance(source, exp.Select):
        return exp.Subquery(this=source, alias=exp.TableAlias(this=ident("source")))
    return source


@dataclass(frozen=True)
class ReleaseCheck:
    """(6) and (8) recomputed from released rows; ``how`` says how rows met their truth."""

    rows: int
    how: str
    worst_u: float  # max over used output channels of P(v^k|w) - u_k (eq. 6 holds when <= 0)
    worst_b: float | None  # max of Σ c_j P(v^j|w) - b (eq. 8), None without b
    realized_excess: float  # max of the realized share of v^k in w minus u_k (information only)


def check(backend: Backend, released: exp.Expression, source: exp.Expression, channels: ChannelSpec,
          inputs: InputChannels, rule: RiskRule, release: ChannelPlan, join_back: bool) -> ReleaseCheck:
    """Recompute P(v^k | output channel) by eq. 1 from the released rows and assert (6)/(8),
    that every subject's output channel contains its input channel, and the planned counts.

    With ``join_back`` the released rows are joined to the source on the identity columns
    (one to one); otherwise ``released`` must carry the true channel (``truth=True``).
    """
    width = len(channels.related)
    label = col(channels.label_column, "rel")
    if join_back:
        on = exp.and_(*[exp.NullSafeEQ(this=col(c, "rel"), expression=col(c, "src")) for c in channels.identity])
        keys = [text_key(c, channels, "src") for c in channels.related]
        value = value_key(channels, "src")
        rel_from = exp.Subquery(this=released, alias=exp.TableAlias(this=ident("rel")))
        src_from = exp.Subquery(this=exp.select("*").from_(_from(source)), alias=exp.TableAlias(this=ident("src")))
        q = exp.select(exp.alias_(label, ident("label")), *[exp.alias_(k, ident(f"k{i}")) for i, k in enumerate(keys)],
                       exp.alias_(value, ident("v")), exp.alias_(exp.func("count", exp.Star()), ident("n")))
        q = q.from_(rel_from).join(src_from, on=on)
    else:
        h = helper_names(channels)
        q = exp.select(exp.alias_(label, ident("label")),
                       *[exp.alias_(col(h[f"k{i}"], "rel"), ident(f"k{i}")) for i in range(width)],
                       exp.alias_(col(h["v"], "rel"), ident("v")),
                       exp.alias_(exp.func("count", exp.Star()), ident("n")))
        q = q.from_(exp.Subquery(this=released, alias=exp.TableAlias(this=ident("rel"))))
    q = q.group_by(*[e.this.copy() for e in q.expressions[:-1]])  # the expressions, never a same-named column
    data = backend.execute(q).to_pydict()
    return _verify(data, width, inputs, rule, release, "joined back on identity" if join_back else "release query")


def _verify(data: dict[str, list], width: int, inputs: InputChannels, rule: RiskRule, release: ChannelPlan,
            how: str) -> ReleaseCheck:
    label_of = {lab: w for w, lab in enumerate(release.labels)}
    row_of = inputs.index()
    col_of = {v: k for k, v in enumerate(inputs.values)}
    x = np.zeros((len(release.labels), len(inputs.keys)), dtype=np.int64)
    m = np.zeros((len(inputs.keys), len(inputs.values)), dtype=np.int64)  # m_r^k recomputed from the rows
    realized = np.zeros((len(release.labels), len(inputs.values)), dtype=np.int64)
    for i, n in enumerate(data["n"]):
        w, k = label_of[data["label"][i]], col_of[data["v"][i]]
        r = row_of[tuple(data[f"k{j}"][i] for j in range(width))]
        x[w, r] += n
        m[r, k] += n
        realized[w, k] += n
    rows = int(x.sum())
    if rows != inputs.total or not np.array_equal(m, inputs.counts):
        raise DeidError(f"release check: {rows:,} released rows met {inputs.total:,} source rows; nothing was written")
    planned = np.zeros_like(x)
    for (w, r), n in release.subjects.items():
        planned[w, r] = n
    if not np.array_equal(x, planned):
        raise DeidError("release check: the released rows do not follow the assignment; nothing was written")
    for w, r in zip(*np.nonzero(x)):
        if r not in release.members[w]:
            raise DeidError(f"release check: a subject of {inputs.describe(r)} landed in {release.labels[w]}, which "
                            f"does not contain it; nothing was written")
    totals = x.sum(axis=1)
    p = (x @ (m / m.sum(axis=1, keepdims=True))) / totals[:, None]  # eq. 1
    worst_u = float((p[:, 1:] - rule.u[1:]).max()) if len(inputs.values) > 1 else -1.0
    worst_b = float((p @ rule.c - rule.b).max()) if rule.b is not None else None
    excess = float((realized[:, 1:] / totals[:, None] - rule.u[1:]).max()) if len(inputs.values) > 1 else -1.0
    slack = RELATIVE * 10
    if worst_u > slack or (worst_b is not None and worst_b > slack):
        excess_b = worst_b if worst_b is not None else -1.0
        raise DeidError(f"release check: an output channel breaks (6) or (8) (excess {max(worst_u, excess_b):.3g}); "
                        f"nothing was written")
    return ReleaseCheck(rows, how, worst_u, worst_b, excess)
