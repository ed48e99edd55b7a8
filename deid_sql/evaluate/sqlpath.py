"""The SQL path: the reference evaluation, run by the backend on the cell tables.

Per recoding, every cell's group becomes one mixed-radix BIGINT key built from
list parameters (``$gb0[b0 + 1]`` = the group of combined position b0, where a
block of small consecutive QIs such as age×sex×race shares one combined position);
sample and census cells are grouped by that key and joined (g = max(c, m)).
Group widths enter through the sample marginals of each QI (Σ_G m ln W_G splits
into per-QI sums, METHODS.md decision 3).  The shipped ``sql/metrics.sql``
template sums the terms with the UDFs of ``deid_sql.udfs``.

A QI left whole (one group) drops out of the key and a QI kept as is enters as
its position, so the query text depends on the recoding's *shape*; each shape is
built and rendered once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from sqlglot import exp

from ..backends.base import Backend
from ..domains.limits import require_sizes
from ..domains.recoding import Recoding
from ..loading.cells import Cells
from ..sql import template
from ..udfs.terms import record_risk_udf
from .groups import fits, radix_of
from .metrics import RawSums
from .riskmodel import PopulationRisk, RecordRisk, estimates_reidentifications, group_risks

SAMPLE_CELLS = "deid_sample_cells"
POPULATION_CELLS = "deid_population_cells"
MARGINAL = "deid_sample_marginal_{}"
RECORD_RISK_UDF = "deid_record_risk"  # the problem's risk model, when it is not g^−γ
BLOCK_LIMIT = 4096  # largest combined domain looked up as one list parameter

CONST, IDENTITY, LOOKUP = "c", "i", "l"


def _num(v: float) -> exp.Expression:
    return exp.Literal.number(v)


def _lookup(name: str, index: exp.Expression) -> exp.Expression:
    """``($name)[index + 1]``: an entry of a per-recoding list parameter."""
    return exp.Bracket(this=exp.paren(exp.Placeholder(this=name)),
                       expressions=[exp.Add(this=index, expression=_num(1))])


class SQLEvaluator:
    """Evaluates recodings with one query each over the cell tables."""

    def __init__(self, backend: Backend, sample: Cells, population: Cells | None,
                 sizes: Sequence[int], gamma: float = 1.0, record_risk: RecordRisk | None = None) -> None:
        self.backend = backend
        self.sizes = tuple(int(s) for s in sizes)
        require_sizes([f"#{q + 1}" for q in range(len(self.sizes))], self.sizes)  # lookup lists per value
        self.gamma = float(gamma)
        backend.register_udfs()
        self.record_risk = record_risk or PopulationRisk(gamma)
        # a dataset-level model (population uniques from the histogram) is fitted per recoding
        # before its metrics query runs: the UDF sees distinct (m, g) pairs, not the histogram
        self.dataset_level = bool(getattr(self.record_risk, "dataset_level", False))
        self._fitted: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
        if not isinstance(self.record_risk, PopulationRisk):
            backend.register_function(RECORD_RISK_UDF, record_risk_udf(self._group_risks), ("DOUBLE", "DOUBLE"),
                                      "DOUBLE")
        self.blocks = _blocks(self.sizes)
        self._register_cells(SAMPLE_CELLS, sample)
        for q in range(len(self.sizes)):
            marginal = (exp.select(exp.alias_(exp.column(f"p{q}"), "pos"),
                                   exp.alias_(exp.func("sum", exp.column("n")), "n"))
                        .from_(SAMPLE_CELLS).group_by(exp.column(f"p{q}")))
            backend.create_temp_table(MARGINAL.format(q), marginal)
        self.has_population = population is not None
        if population is not None:
            self._register_cells(POPULATION_CELLS, population)
        self._rendered: dict[tuple[str, str, bool], tuple[str, tuple[str, ...]]] = {}  # also histogram queries

    def _group_risks(self, m: np.ndarray, g: np.ndarray) -> np.ndarray:
        if self.dataset_level:
            assert self._fitted is not None, "a dataset-level risk model is fitted before its query runs"
            return self._fitted(m, g)
        return group_risks(self.record_risk, m, g)

    def _register_cells(self, name: str, cells: Cells) -> None:
        """A native table of the cells plus one combined position ``b{j}`` per block of QIs."""
        staging = f"{name}_arrow"
        self.backend.register_table(staging, cells.to_arrow())
        combined = []
        for j, block in enumerate(self.blocks):
            expr: exp.Expression = exp.cast(exp.column(f"p{block[0]}"), "BIGINT")
            for q in block[1:]:
                expr = exp.Add(this=exp.Mul(this=exp.paren(expr), expression=_num(self.sizes[q])),
                               expression=exp.column(f"p{q}"))
            combined.append(exp.alias_(expr, f"b{j}"))
        self.backend.create_temp_table(name, exp.select("*", *combined).from_(staging))

    # -- query construction -----------------------------------------------------------------
    def _keys(self, shape: str, single: bool) -> list[exp.Expression]:
        """The group key of a cell from its blocks' combined positions (``shape`` per block)."""
        parts: list[tuple[exp.Expression, exp.Expression]] = []
        for j, kind in enumerate(shape):
            pos = exp.column(f"b{j}")
            if kind == IDENTITY:
                parts.append((pos, _num(int(np.prod([self.sizes[q] for q in self.blocks[j]])))))
            elif kind == LOOKUP:
                parts.append((exp.cast(_lookup(f"gb{j}", pos), "BIGINT"), exp.Placeholder(this=f"nb{j}")))
        if not parts:
            return [_num(0)]
        if not single:
            return [p for p, _ in parts]
        key = parts[0][0]
        for part, radix in parts[1:]:
            key = exp.Add(this=exp.Mul(this=exp.paren(key), expression=radix), expression=part)
        return [key]

    def _grouped(self, table: str, measure: str, keys: list[exp.Expression],
                 only_in: str | None = None) -> exp.Select:
        """Cells grouped by key; ``only_in`` names a CTE whose keys are the only ones kept
        (census rows of groups without sample records never reach the aggregate)."""
        names = [f"k{i}" for i in range(len(keys))]
        inner = exp.select(*[exp.alias_(k.copy(), n) for k, n in zip(keys, names)], exp.column("n")).from_(table)
        outer = exp.select(*[exp.column(n) for n in names], exp.alias_(exp.func("sum", exp.column("n")), measure))
        outer = outer.from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("keyed"))))
        if only_in is not None and len(names) == 1:
            outer = outer.where(exp.column("k0").isin(query=exp.select("k0").from_(only_in)))
        return outer.group_by(*[exp.column(n) for n in names])

    def _widths(self, shape: str) -> exp.Expression:
        """One row per QI: its share of Σ m ln W and of Iyengar's loss."""
        rows: list[exp.Select] = []
        for q, kind in enumerate(shape):
            n, size = exp.column("n"), self.sizes[q]
            if kind == IDENTITY or size == 1:
                continue
            w = _num(size) if kind == CONST else _lookup(f"w{q}", exp.column("pos"))
            lw = exp.func("sum", exp.Mul(this=n.copy(), expression=exp.func("ln", w.copy())))
            lm = exp.func("sum", exp.Div(this=exp.Mul(this=n.copy(), expression=exp.paren(
                exp.Sub(this=w.copy(), expression=_num(1)))), expression=_num(size - 1)))
            rows.append(exp.select(exp.alias_(lw, "lw"), exp.alias_(lm, "lm")).from_(MARGINAL.format(q)))
        if not rows:
            return exp.select(exp.alias_(_num(0.0), "lw"), exp.alias_(_num(0.0), "lm"))
        union: exp.Expression = rows[0]
        for r in rows[1:]:
            union = exp.union(union, r, distinct=False)
        return union

    def _build(self, block_shape: str, qi_shape: str, single: bool) -> exp.Expression:
        groups = self._groups(block_shape, single)
        return template("metrics", groups=exp.Subquery(this=groups), widths=exp.Subquery(this=self._widths(qi_shape)),
                        **self._risk_nodes())

    def _histogram(self, block_shape: str, single: bool) -> exp.Expression:
        """Groups per sample count m: what a dataset-level risk model is fitted to."""
        groups = exp.Subquery(this=self._groups(block_shape, single),
                              alias=exp.TableAlias(this=exp.to_identifier("grp")))
        return (exp.select(exp.column("m"), exp.alias_(exp.func("count", exp.Star()), "cnt"))
                .from_(groups).group_by(exp.column("m")))

    def _groups(self, block_shape: str, single: bool) -> exp.Select:
        """One row per generalized group: m, c and g = max(c, m)."""
        keys = self._keys(block_shape, single)
        s = exp.to_table("s")
        m = exp.column("m", table="s")
        c: exp.Expression = m.copy()
        if self.has_population:
            c = exp.func("coalesce", exp.column("c", table="p"), _num(0))
        groups = exp.select(exp.alias_(m, "m"), exp.alias_(c, "c"),
                            exp.alias_(exp.func("greatest", c.copy(), m.copy()), "g")).from_(s)
        if self.has_population:
            p = exp.Subquery(this=self._grouped(POPULATION_CELLS, "c", keys, only_in="s"),
                             alias=exp.TableAlias(this=exp.to_identifier("p")))
            on = exp.and_(*[exp.column(f"k{i}", table="s").eq(exp.column(f"k{i}", table="p"))
                            for i in range(len(keys))])
            groups = groups.join(p, on=on, join_type="LEFT")
        return groups.with_("s", as_=self._grouped(SAMPLE_CELLS, "m", keys))

    def _risk_nodes(self) -> dict[str, exp.Expression]:
        """m · r(g) and r(g) in SQL: the core's UDF and POWER for g^−γ, else the model's UDF."""
        m, g = exp.column("m"), exp.column("g")
        if isinstance(self.record_risk, PopulationRisk):
            return {"risk_term": exp.func("deid_risk_term", m, g, _num(self.gamma)),
                    "record_risk": exp.func("power", g.copy(), _num(-self.gamma))}
        record = exp.Anonymous(this=RECORD_RISK_UDF, expressions=[m.copy(), g])
        return {"risk_term": exp.Mul(this=m, expression=record), "record_risk": record.copy()}

    def _shape(self, rec: Recoding) -> tuple[str, str, bool]:
        """Per block and per QI: whole (const), kept as is (identity) or looked up."""
        qi_shape = "".join(CONST if q.n_groups == 1 else IDENTITY if q.n_groups == size else LOOKUP
                           for q, size in zip(rec.qis, self.sizes))
        block_shape = ""
        for block in self.blocks:
            kinds = {qi_shape[q] for q in block}
            block_shape += kinds.pop() if len(kinds) == 1 and LOOKUP not in kinds else LOOKUP
        return block_shape, qi_shape, fits(radix_of(rec))  # one BIGINT key, or a key column per block

    def _params(self, rec: Recoding, block_shape: str, qi_shape: str) -> dict[str, object]:
        params: dict[str, object] = {}
        for j, (kind, block) in enumerate(zip(block_shape, self.blocks)):
            if kind == LOOKUP:
                combined = np.zeros(1, dtype=np.int64)
                radix = 1
                for q in block:  # mixed radix of the members' group ids, C order like b{j}
                    qrec = rec.qis[q]
                    combined = (combined[:, None] * qrec.n_groups + qrec.group_of[None, :]).ravel()
                    radix *= qrec.n_groups
                params[f"gb{j}"] = combined.tolist()
                params[f"nb{j}"] = int(radix)
        for q, (kind, qrec) in enumerate(zip(qi_shape, rec.qis)):
            if kind == LOOKUP:
                params[f"w{q}"] = qrec.widths[qrec.group_of].astype(np.float64).tolist()  # per position
        return params

    def _fit(self, shape: tuple[str, str, bool], params: dict[str, object]) -> None:
        key = ("histogram", shape[0], shape[2])
        if key not in self._rendered:
            query = self._histogram(shape[0], shape[2])
            names = tuple(sorted({p.name for p in query.find_all(exp.Placeholder)}))
            self._rendered[key] = (self.backend.render(query), names)  # type: ignore[index]
        text, names = self._rendered[key]  # type: ignore[index]
        table = self.backend.execute(text, {k: params[k] for k in names})
        m = np.asarray(table.column("m").to_numpy(zero_copy_only=False), dtype=np.float64)
        cnt = np.asarray(table.column("cnt").to_numpy(zero_copy_only=False), dtype=np.int64)
        self._fitted = _fit_histogram(self.record_risk, m, cnt)

    def raw(self, rec: Recoding) -> RawSums:
        shape = self._shape(rec)
        if shape not in self._rendered:
            query = self._build(*shape)
            names = tuple(sorted({p.name for p in query.find_all(exp.Placeholder)}))
            self._rendered[shape] = (self.backend.render(query), names)
        text, names = self._rendered[shape]
        params = self._params(rec, shape[0], shape[1])
        if self.dataset_level:
            self._fit(shape, params)
        row = self.backend.execute(text, {k: params[k] for k in names}).to_pylist()[0]
        estimated = estimates_reidentifications(self.record_risk)
        return RawSums(
            risk_sum=float(row["risk_sum"]),
            expected_reidentifications=float(row["risk_sum"] if estimated else row["expected_reidentifications"]),
            max_record_risk=float(row["max_record_risk"]),
            k=int(row["k"]),
            sample_unique_records=int(row["sample_unique_records"]),
            groups=int(row["groups"]),
            kl_group_sum=float(row["group_xlogx"]) - float(row["width_log_sum"]),
            lm_sum=float(row["lm_sum"]),
            discernibility=float(row["discernibility"]),
            corrected_groups=int(row["corrected_groups"]),
            records=int(row["records"]),
        )


def _fit_histogram(model: object, m: np.ndarray, cnt: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The per-group risk of a dataset-level model fitted to a histogram (groups ``cnt`` of size ``m``)."""
    every = np.repeat(np.asarray(m, dtype=np.float64), np.asarray(cnt, dtype=np.int64))
    return model.fitted(every)  # type: ignore[attr-defined,no-any-return]


def _blocks(sizes: Sequence[int], limit: int = BLOCK_LIMIT) -> list[list[int]]:
    """Consecutive QIs grouped while their domains' product stays ≤ ``limit``: one list
    lookup per block instead of one per QI (age×sex×race is one lookup of 1,210 entries)."""
    blocks: list[list[int]] = []
    product = limit + 1
    for q, n in enumerate(sizes):
        if blocks and product * n <= limit:
            blocks[-1].append(q)
            product *= n
        else:
            blocks.append([q])
            product = n
    return blocks
