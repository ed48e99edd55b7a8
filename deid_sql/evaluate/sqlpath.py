"""The SQL path: the reference evaluation, run by the backend on the cell tables.

Per recoding, each QI's group ids and group widths are passed as list
parameters; cells are regrouped with list lookups, sample and census groups are
joined, and the shipped ``sql/metrics.sql`` template sums the terms with the
UDFs of ``deid_sql.udfs`` (risk_term, kl_term).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from ..backends.base import Backend
from ..cells import Cells
from ..recoding import Recoding
from ..sql import template
from .metrics import RawSums

SAMPLE_CELLS = "deid_sample_cells"
POPULATION_CELLS = "deid_population_cells"


def _lookup(name: str, index: exp.Expression) -> exp.Expression:
    return exp.func("list_extract", exp.Placeholder(this=name), exp.Add(this=index, expression=exp.Literal.number(1)))


class SQLEvaluator:
    """Evaluates recodings with one query each over the registered cell tables."""

    def __init__(self, backend: Backend, sample: Cells, population: Cells | None,
                 sizes: Sequence[int], gamma: float = 1.0) -> None:
        self.backend = backend
        self.sizes = tuple(int(s) for s in sizes)
        self.gamma = float(gamma)
        backend.register_udfs()
        backend.register_table(SAMPLE_CELLS, sample.to_arrow())
        self.has_population = population is not None
        if population is not None:
            backend.register_table(POPULATION_CELLS, population.to_arrow())
        self.query = self._build()

    def _regroup(self, table: str, alias: str) -> exp.Select:
        d = len(self.sizes)
        sel = exp.select(*[exp.alias_(_lookup(f"g{q}", exp.column(f"p{q}")), f"g{q}") for q in range(d)],
                         exp.alias_(exp.func("sum", exp.column("n")), alias)).from_(table)
        return sel.group_by(*[exp.column(f"g{q}") for q in range(d)]) if d else sel

    def _build(self) -> exp.Expression:
        d = len(self.sizes)
        s = exp.Subquery(this=self._regroup(SAMPLE_CELLS, "m"), alias=exp.TableAlias(this=exp.to_identifier("s")))
        m = exp.column("m", table="s")
        if self.has_population:
            c_sub = exp.Subquery(this=self._regroup(POPULATION_CELLS, "c"),
                                 alias=exp.TableAlias(this=exp.to_identifier("p")))
            c: exp.Expression = exp.func("coalesce", exp.column("c", table="p"), exp.Literal.number(0))
        else:
            c = m.copy()
        width: exp.Expression = exp.Literal.number(1)
        lm: exp.Expression = exp.Literal.number(0)
        for q in range(d):
            wq = _lookup(f"w{q}", exp.column(f"g{q}", table="s"))
            width = exp.Mul(this=width, expression=wq)
            if self.sizes[q] > 1:
                term = exp.Div(this=exp.paren(exp.Sub(this=wq.copy(), expression=exp.Literal.number(1))),
                               expression=exp.Literal.number(self.sizes[q] - 1))
                lm = exp.Add(this=lm, expression=term)
        groups = exp.select(
            exp.alias_(m, "m"), exp.alias_(c, "c"),
            exp.alias_(exp.func("greatest", c.copy(), m.copy()), "g"),
            exp.alias_(width, "w"), exp.alias_(lm, "lm"),
        ).from_(s)
        if self.has_population:
            on = exp.and_(*[exp.column(f"g{q}", table="s").eq(exp.column(f"g{q}", table="p")) for q in range(d)]) \
                if d else exp.true()
            groups = groups.join(c_sub, on=on, join_type="LEFT")
        return template("metrics", groups=exp.Subquery(this=groups),
                        gamma=exp.Literal.number(self.gamma))

    def raw(self, rec: Recoding) -> RawSums:
        params: dict[str, object] = {}
        for q, qrec in enumerate(rec.qis):
            params[f"g{q}"] = [int(x) for x in qrec.group_of]
            params[f"w{q}"] = [float(x) for x in qrec.widths]
        row = self.backend.execute(self.query, params).to_pylist()[0]
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
