"""Input channels, counted once in the backend, and their risk (seed 003 §4, §5.1).

One ``GROUP BY related…, confidential`` gives m_r^k for every input channel r and
confidential value v^k; everything after that — risk classification, candidate
generation, the LP — works on that small table, never on rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from ..backends.base import Backend
from ..compiler.compile import col, ident
from ..errors import DataError
from .spec import ChannelSpec

TOLERANCE = 1e-12  # P(v|r) > u is read as P(v|r) - u > TOLERANCE, so float noise never makes a channel risky


def text_key(column: str, channels: ChannelSpec, table: str | None = None) -> exp.Expression:
    """A related column as text, NULL read as its category when declared (the join key)."""
    key: exp.Expression = exp.cast(col(column, table), "VARCHAR")
    if channels.nulls == "category":
        key = exp.func("coalesce", key, exp.Literal.string(channels.null_label))
    return key


def value_key(channels: ChannelSpec, table: str | None = None) -> exp.Expression:
    """The confidential column as text, NULL read as v^0 when declared."""
    key: exp.Expression = exp.cast(col(channels.confidential, table), "VARCHAR")
    if channels.confidential_nulls == "none":
        key = exp.func("coalesce", key, exp.Literal.string(channels.none))
    return key


@dataclass(frozen=True)
class InputChannels:
    """m_r^k for every input channel r (rows, sorted by key) and value v^k (columns; v^0 first)."""

    related: tuple[str, ...]
    keys: tuple[tuple[str, ...], ...]
    values: tuple[str, ...]
    counts: np.ndarray  # (R, K+1) int64

    @property
    def sizes(self) -> np.ndarray:
        """m_r^in."""
        return self.counts.sum(axis=1)

    @property
    def total(self) -> int:
        """m, the number of subjects."""
        return int(self.counts.sum())

    @property
    def prior(self) -> np.ndarray:
        """P(v^k) over the whole data set (eq. 2's right-hand side)."""
        return self.counts.sum(axis=0) / self.total

    @property
    def conditional(self) -> np.ndarray:
        """P(v^k | d_r^in), shape (R, K+1)."""
        return self.counts / self.sizes[:, None]

    def index(self) -> dict[tuple[str, ...], int]:
        return {k: i for i, k in enumerate(self.keys)}

    def describe(self, r: int) -> str:
        return "(" + ", ".join(self.keys[r]) + ")"


@dataclass(frozen=True)
class RiskRule:
    """u_k (eq. 3) and, optionally, b with weights c_k (eq. 4); index 0 is v^0."""

    u: np.ndarray  # (K+1,), u[0] = inf
    b: float | None
    c: np.ndarray  # (K+1,), c[0] = 0

    def classify(self, inputs: InputChannels) -> Classification:
        p = inputs.conditional
        over = (p[:, 1:] - self.u[1:]) > TOLERANCE
        weighted = p @ self.c
        heavy = (weighted - self.b) > TOLERANCE if self.b is not None else np.zeros(len(p), bool)
        return Classification(risky=over.any(axis=1) | heavy, risky_for=over, weighted=weighted, heavy=heavy)


@dataclass(frozen=True)
class Classification:
    """Which input channels are risky (R^in) and why."""

    risky: np.ndarray  # (R,) bool
    risky_for: np.ndarray  # (R, K) bool: eq. 3 holds for v^k
    weighted: np.ndarray  # (R,) sum_k c_k P(v^k | r)
    heavy: np.ndarray  # (R,) bool: eq. 4 holds

    @property
    def safe(self) -> np.ndarray:
        return ~self.risky


def count_channels(backend: Backend, source: exp.Expression, channels: ChannelSpec,
                   columns: Sequence[str], where: str) -> InputChannels:
    """The one GROUP BY; every data problem is collected into one ``DataError``."""
    problems: list[str] = []
    needed = [*channels.related, channels.confidential, *channels.identity]
    for name in needed:
        if name not in columns:
            problems.append(f"source {where} has no column {name!r} named in [channels]; its columns are "
                            f"{', '.join(list(columns)[:12])}{'…' if len(columns) > 12 else ''}")
    if problems:
        raise DataError(problems)
    # grouped by the expressions, not their aliases: a source column named k0 or v must not be picked up
    groups = [exp.cast(col(c), "VARCHAR") for c in (*channels.related, channels.confidential)]
    names = [f"k{i}" for i in range(len(channels.related))] + ["v"]
    q = exp.select(*[exp.alias_(g.copy(), ident(n)) for g, n in zip(groups, names)],
                   exp.alias_(exp.func("count", exp.Star()), ident("n"))).from_(source).group_by(*groups)
    table = backend.execute(q).to_pydict()
    n = np.asarray(table["n"], dtype=np.int64)
    if n.sum() == 0:
        raise DataError(f"source {where} has no rows; a release needs subjects")
    keys = list(zip(*(table[f"k{i}"] for i in range(len(channels.related)))))
    vals = list(table["v"])
    null_rows = [i for i, k in enumerate(keys) if any(v is None for v in k)]
    if null_rows:
        if channels.nulls == "error":
            cols = sorted({channels.related[j] for i in null_rows for j, v in enumerate(keys[i]) if v is None})
            problems.append(f"source {where} has {int(n[null_rows].sum()):,} rows with NULL in related column(s) "
                            f"{', '.join(map(repr, cols))}; clean them or set nulls = \"category\" in [channels]")
        else:
            real = {v for k in keys for v in k if v is not None}
            if channels.null_label in real:
                problems.append(f"[channels] null_label {channels.null_label!r} is also a real related value; "
                                f"pick another null_label")
            keys = [tuple(channels.null_label if v is None else v for v in k) for k in keys]
    null_values = [i for i, v in enumerate(vals) if v is None]
    if null_values:
        if channels.confidential_nulls == "error":
            problems.append(f"source {where} has {int(n[null_values].sum()):,} rows with NULL in the confidential "
                            f"column {channels.confidential!r}; clean them or set confidential_nulls = \"none\" "
                            f"to read them as {channels.none!r}")
        vals = [channels.none if v is None else v for v in vals]
    if channels.none not in vals:
        shown = ", ".join(repr(v) for v in sorted(set(vals))[:5])
        problems.append(f"the none value {channels.none!r} does not occur in {channels.confidential!r} "
                        f"(values: {shown}…); set [channels] none to the value that means no diagnosis")
    if problems:
        raise DataError(problems)
    values = (channels.none, *sorted(set(vals) - {channels.none}))
    key_list = sorted(set(keys))
    row_of = {k: i for i, k in enumerate(key_list)}
    col_of = {v: j for j, v in enumerate(values)}
    counts = np.zeros((len(key_list), len(values)), dtype=np.int64)
    np.add.at(counts, ([row_of[k] for k in keys], [col_of[v] for v in vals]), n)
    return InputChannels(tuple(channels.related), tuple(key_list), values, counts)


def risk_rule(inputs: InputChannels, channels: ChannelSpec) -> RiskRule:
    """u_k (default P(v^k)), b and c_k, checked against the data."""
    problems: list[str] = []
    known = set(inputs.values[1:])
    for label, table in (("thresholds", channels.thresholds), ("weights", channels.weights)):
        for value in table:
            if value not in known:
                problems.append(f"[channels].{label} names {value!r}, which is not a confidential value in the "
                                f"data; the values are {', '.join(map(repr, sorted(known)[:8]))}")
    prior = inputs.prior
    u = np.full(len(inputs.values), np.inf)
    for k, value in enumerate(inputs.values[1:], 1):
        u[k] = channels.thresholds.get(value, prior[k])
        if u[k] < prior[k] - TOLERANCE or u[k] > 1:
            problems.append(f"[channels].thresholds: u = {u[k]:g} for {value!r} lies outside [P(v), 1] = "
                            f"[{prior[k]:.6g}, 1]; eq. 3 needs u_k >= P(v^k)")
    c = np.zeros(len(inputs.values))
    if channels.b is not None:
        for k, value in enumerate(inputs.values[1:], 1):
            c[k] = channels.weights.get(value, 1.0)
    if problems:
        raise DataError(problems)
    return RiskRule(u=u, b=channels.b, c=c)


def duplicate_identities(backend: Backend, source: exp.Expression, channels: ChannelSpec) -> int:
    """How many identity keys name more than one row (0: rows join back one to one)."""
    keys = [col(c) for c in channels.identity]
    inner = (exp.select(*keys).from_(source).group_by(*[k.copy() for k in keys])
             .having(exp.GT(this=exp.func("count", exp.Star()), expression=exp.Literal.number(1))))
    q = exp.select(exp.alias_(exp.func("count", exp.Star()), ident("n"))).from_(
        exp.Subquery(this=inner, alias=exp.TableAlias(this=ident("dups"))))
    return int(backend.execute(q).column("n")[0].as_py())
