"""The SQL path: the reference evaluation, run by the backend on the cell tables.

Per recoding, each QI's group ids (and group widths) are passed as list
parameters; every cell's group becomes one mixed-radix BIGINT key from list
lookups, sample and census cells are grouped by that key and joined, and the
shipped ``sql/metrics.sql`` template sums the terms with the UDFs of
``deid_sql.udfs`` (risk_term, kl_term).  When the key space would overflow 63 bits
the groups are keyed by one column per QI instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sqlglot import exp

from ..backends.base import Backend
from ..cells import Cells
from ..recoding import Recoding
from ..sql import template
from .metrics import RawSums

SAMPLE_CELLS = "deid_sample_cells"
POPULATION_CELLS = "deid_population_cells"
_KEY_LIMIT = 2**62


def _lookup(name: str, q: int) -> exp.Expression:
    """``($name)[p{q} + 1]``: a domain position's entry in a per-recoding list parameter."""
    index = exp.Add(this=exp.column(f"p{q}"), expression=exp.Literal.number(1))
    return exp.Bracket(this=exp.paren(exp.Placeholder(this=name)), expressions=[index])


def _num(v: int) -> exp.Expression:
    return exp.Literal.number(v)


class SQLEvaluator:
    """Evaluates recodings with one query each over the cell tables."""

    def __init__(self, backend: Backend, sample: Cells, population: Cells | None,
                 sizes: Sequence[int], gamma: float = 1.0) -> None:
        self.backend = backend
        self.sizes = tuple(int(s) for s in sizes)
        self.gamma = float(gamma)
        backend.register_udfs()
        backend.register_table(SAMPLE_CELLS, sample.to_arrow(), copy=True)
        self.has_population = population is not None
        if population is not None:
            backend.register_table(POPULATION_CELLS, population.to_arrow(), copy=True)
        self._queries: dict[bool, exp.Expression] = {}

    def _keys(self, single: bool) -> list[exp.Expression]:
        d = len(self.sizes)
        if not single:
            return [_lookup(f"g{q}", q) for q in range(d)]
        key: exp.Expression = exp.cast(_lookup("g0", 0), "BIGINT") if d else _num(0)
        for q in range(1, d):
            key = exp.Add(this=exp.Mul(this=exp.paren(key), expression=exp.Placeholder(this=f"n{q}")),
                          expression=_lookup(f"g{q}", q))
        return [key]

    def _grouped(self, table: str, measure: str, single: bool, extra: list[exp.Expression]) -> exp.Select:
        keys = self._keys(single)
        names = [f"k{i}" for i in range(len(keys))]
        inner = exp.select(*[exp.alias_(k, n) for k, n in zip(keys, names)], exp.column("n"), *extra).from_(table)
        aggs = [exp.alias_(exp.func("sum", exp.column("n")), measure)]
        aggs += [exp.alias_(exp.AnyValue(this=exp.column(e.alias)), e.alias) for e in extra]
        outer = exp.select(*[exp.column(n) for n in names], *aggs).from_(
            exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("cells"))))
        return outer.group_by(*[exp.column(n) for n in names])

    def _build(self, single: bool) -> exp.Expression:
        width: exp.Expression = _num(1)
        lm: exp.Expression = _num(0)
        for q, n in enumerate(self.sizes):
            wq = _lookup(f"w{q}", q)
            width = exp.Mul(this=width, expression=wq)
            if n > 1:
                lm = exp.Add(this=lm, expression=exp.Div(
                    this=exp.paren(exp.Sub(this=wq.copy(), expression=_num(1))), expression=_num(n - 1)))
        extra = [exp.alias_(width, "w"), exp.alias_(lm, "lm")]
        s = exp.Subquery(this=self._grouped(SAMPLE_CELLS, "m", single, extra),
                         alias=exp.TableAlias(this=exp.to_identifier("s")))
        m = exp.column("m", table="s")
        c: exp.Expression = m.copy()
        if self.has_population:
            c = exp.func("coalesce", exp.column("c", table="p"), _num(0))
        groups = exp.select(
            exp.alias_(m, "m"), exp.alias_(c, "c"), exp.alias_(exp.func("greatest", c.copy(), m.copy()), "g"),
            exp.alias_(exp.column("w", table="s"), "w"), exp.alias_(exp.column("lm", table="s"), "lm"),
        ).from_(s)
        if self.has_population:
            p = exp.Subquery(this=self._grouped(POPULATION_CELLS, "c", single, []),
                             alias=exp.TableAlias(this=exp.to_identifier("p")))
            n_keys = 1 if single else len(self.sizes)
            on = exp.and_(*[exp.column(f"k{i}", table="s").eq(exp.column(f"k{i}", table="p"))
                            for i in range(n_keys)]) if n_keys else exp.true()
            groups = groups.join(p, on=on, join_type="LEFT")
        return template("metrics", groups=exp.Subquery(this=groups), gamma=exp.Literal.number(self.gamma))

    def query(self, rec: Recoding) -> tuple[exp.Expression, dict[str, object]]:
        """The query for ``rec`` and its parameters."""
        sizes = [q.n_groups for q in rec.qis]
        single = float(np.prod(sizes, dtype=np.float64)) < _KEY_LIMIT
        if single not in self._queries:
            self._queries[single] = self._build(single)
        params: dict[str, object] = {}
        for q, qrec in enumerate(rec.qis):
            params[f"g{q}"] = qrec.group_of.tolist()
            params[f"w{q}"] = qrec.widths[qrec.group_of].astype(np.float64).tolist()  # per position
            if single and q > 0:
                params[f"n{q}"] = int(qrec.n_groups)
        return self._queries[single], params

    def raw(self, rec: Recoding) -> RawSums:
        query, params = self.query(rec)
        row = self.backend.execute(query, params).to_pylist()[0]
        return RawSums(
            risk_sum=float(row["risk_sum"]),
            expected_reidentifications=float(row["expected_reidentifications"]),
            max_record_risk=float(row["max_record_risk"]),
            k=int(row["k"]),
            sample_unique_records=int(row["sample_unique_records"]),
            groups=int(row["groups"]),
            kl_group_sum=float(row["kl_group_sum"]),
            lm_sum=float(row["lm_sum"] or 0.0),
            discernibility=float(row["discernibility"]),
            corrected_groups=int(row["corrected_groups"]),
            records=int(row["records"]),
        )
