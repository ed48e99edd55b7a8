"""What a release's sensitive values reveal, measured on the rows it releases (METHODS decision 15).

For each sensitive column with an attribute criterion (``contract.attribute``), one ``GROUP BY``
over the same relation the gate measures counts, per released label tuple and value, the persons
holding it (distinct person keys, byte for byte, with ``[person]``; else rows), suppressed rows left
out: ``f_G(v)``.  n_G and m(G) are the gate's group counts; g(G) the census people of ``Census``;
q(v), t-closeness' reference, is counted once over every person of the source (suppressed ones
included, as ARX).  The figures are ``evaluate.attribute``'s; each criterion is judged on the worst
group, and a failure names the column, that group (by its labels) and the figure, never a person.

A group whose persons hold only ``ignore_values`` reveals nothing: ℓ, (c,ℓ) and t do not judge it.

In a set (``[[table]]``), f_G(v) counts the persons of G holding v on any of their rows in ANY table
of the set: a sensitive column of a linked table (a patient's diagnoses) is counted by one
``GROUP BY`` (``linked_value_query``) joining its rows to the person source's raw release by the
person key (byte for byte, ``sqltext.person_key``): each person's released label tuple, suppressed
persons left out; a person without rows in the table holds no value but counts in n_G.  The counts
run where the data is (``LinkedValues``, opened by ``open_linked_values`` on the release's engine),
once per set: the written files carry pseudonyms and no linked rows to join.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from sqlglot import exp

from ..compiler.compile import col, ident
from ..contract.attribute import AttributeLimits
from ..domains.hierarchy import Hierarchy
from ..errors import BackendError, DataError, SpecError
from ..evaluate import attribute as fig
from ..loading.load import read_problem
from ..sqltext import aliased, person_key
from .figures import FLAG, AttributeCheck, AttributeFigures, Census
from .unit import Unit

if TYPE_CHECKING:
    from ..backends.base import Backend
    from ..spec.file import Spec

Run = Callable[[exp.Expression], pa.Table]


def value_query(relation: exp.Expression, qi_columns: Sequence[str], column: str, flag: bool,
                person: str | None) -> exp.Select:
    """``SELECT q… (as text), v, count GROUP BY q…, v`` over the released, unsuppressed rows: the persons
    (or rows) of each label tuple holding each value of ``column`` (NULL a value of its own)."""
    keys: list[exp.Expression] = [exp.alias_(exp.cast(col(c), "VARCHAR"), ident(f"q{i}"))
                                  for i, c in enumerate(qi_columns)]
    source = relation if isinstance(relation, exp.Table) else exp.Subquery(
        this=relation, alias=exp.TableAlias(this=ident("deid_released")))
    count = (exp.func("count", exp.Star()) if person is None
             else exp.Count(this=exp.Distinct(expressions=[person_key(col(person))])))
    query = (exp.select(*keys, exp.alias_(col(column), ident("v")), exp.alias_(count, ident("f")))
             .from_(source).group_by(*[exp.column(f"q{i}") for i in range(len(qi_columns))], exp.column("v")))
    if flag:
        query = query.where(exp.not_(exp.func("coalesce", exp.cast(col(FLAG), "BOOLEAN"), exp.false())))
    return query


def source_query(relation: exp.Expression, column: str, person: str | None) -> exp.Select:
    """``SELECT v, count GROUP BY v`` over the source: q(v)'s persons (or rows) holding each value."""
    source = relation if isinstance(relation, exp.Table) else exp.Subquery(
        this=relation, alias=exp.TableAlias(this=ident("deid_source")))
    count = (exp.func("count", exp.Star()) if person is None
             else exp.Count(this=exp.Distinct(expressions=[person_key(col(person))])))
    return exp.select(exp.alias_(col(column), ident("v")), exp.alias_(count, ident("f"))).from_(source).group_by(
        exp.column("v"))


@dataclass(frozen=True)
class Groups:
    """The released, unsuppressed groups the gate counted: labels, n_G = m(G), g(G)."""

    labels: Sequence[tuple[Any, ...]]  # a list, or made on demand (``constraint``: a search's policies)
    m: np.ndarray
    g: np.ndarray | None  # census people (None without a census)

    @classmethod
    def of(cls, table: pa.Table, qis: int, flag: bool, census: Census) -> Groups:
        """From the gate's group table (``figures.group_query``, sorted)."""
        if flag:
            keep = np.logical_not(np.asarray(table.column("f").fill_null(False).to_numpy(zero_copy_only=False),
                                             dtype=bool))
            table = table.filter(pa.array(keep))
        columns = [table.column(f"q{i}").combine_chunks() for i in range(qis)]
        labels = list(zip(*[c.to_pylist() for c in columns])) if qis else [()] * table.num_rows
        m = np.asarray(table.column("m").to_numpy(zero_copy_only=False), dtype=np.float64)
        g = None
        if census.population:
            ids = census.group_ids(columns)
            known = np.ones(m.size, dtype=bool)
            for q in ids:
                known &= q >= 0
            g = m.copy()  # a label outside the domain: no census cell vouches for it (g = m, as the figures)
            if known.any():
                g[known] = np.maximum(census.people(census.key_of([q[known] for q in ids])), m[known])
        return cls(labels, m, g)


def measure_column(run: Run, relation: exp.Expression, qi_columns: Sequence[str], qi_names: Sequence[str],
                   limits: AttributeLimits, groups: Groups, flag: bool, person: str | None,
                   reference: Callable[[], pa.Table] | None, table: pa.Table | None = None) -> AttributeFigures:
    """Count ``limits.column`` on the released rows and judge its criteria (``reference``: the source's
    value counts, for t-closeness; ``table``: the counts already taken, ``value_query``'s columns)."""
    column = limits.column
    if table is None:
        table = run(value_query(relation, qi_columns, column, flag, person))
    index = {labels: i for i, labels in enumerate(groups.labels)}
    labels = list(zip(*[table.column(f"q{i}").to_pylist() for i in range(len(qi_columns))])) if qi_columns \
        else [()] * table.num_rows
    at = np.array([index.get(lab, -1) for lab in labels], dtype=np.int64)
    counts = np.asarray(table.column("f").to_numpy(zero_copy_only=False), dtype=np.float64)
    return judge_values(limits, at, table.column("v"), counts, groups, qi_names, Unit.of(person), reference)


def judge_values(limits: AttributeLimits, group: np.ndarray, raw_values: pa.ChunkedArray | pa.Array,
                 counts: np.ndarray, groups: Groups, qi_names: Sequence[str], unit: Unit,
                 reference: Callable[[], pa.Table] | None) -> AttributeFigures:
    """Judge ``limits`` on f_G(v) given as (group index, value, persons) entries (a group index of -1 is
    not released); ``reference``: the source's value counts, for t-closeness."""
    column = limits.column
    values = raw_values.to_pylist()
    ignored = _ignored(limits)
    q_counts: dict[Any, float] = {}
    if limits.max_t is not None:
        if reference is None:
            raise SpecError(f"{column!r}: max_t needs the source's distribution, which this release path cannot "
                            f"count; remove max_t")
        src = reference()
        q_counts = {v: float(f) for v, f in zip(src.column("v").to_pylist(), src.column("f").to_pylist())
                    if not ignored(v)}
    universe = list(dict.fromkeys([*q_counts, *(v for v in values if not ignored(v))]))
    code, parents, size = _codes(limits, universe, raw_values.type)
    rows = [(int(i), code[v], f) for i, v, f in zip(group.tolist(), values, counts) if i >= 0 and not ignored(v)]
    vc = fig.ValueCounts.of([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], groups.m, size)
    return _judge(limits, vc, groups, qi_names, unit, q_counts, code, parents, size)


@dataclass(frozen=True)
class LinkedRows:
    """One linked table of a set as the gate counts it: its rows (a FROM-able relation on the
    release's engine), its person key column and that column's SQL type, its sensitive columns."""

    name: str
    relation: exp.Expression
    key: str
    key_type: str | None
    sensitive: tuple[str, ...]


@dataclass(frozen=True)
class LinkedValues:
    """Where a set's sensitive values are counted over every table: ``run`` executes on the engine
    holding the person source's raw release ``released`` (its QI labels, the person key ``key`` of SQL
    type ``key_type`` unpseudonymized, the suppression flag when ``flag``) and the linked ``tables``;
    ``source_sensitive``: the person source's own sensitive columns (a column sensitive in the
    source and a linked table is one column of the set: a person holds the values of both)."""

    run: Run
    released: exp.Expression
    key: str
    key_type: str | None
    flag: bool
    tables: tuple[LinkedRows, ...]
    source_sensitive: frozenset[str]

    def holders(self, column: str) -> list[LinkedRows]:
        """The linked tables where ``column`` is sensitive."""
        return [t for t in self.tables if column in t.sensitive]

    def persons(self, qi_columns: Sequence[str], released_only: bool) -> exp.Select:
        """``SELECT DISTINCT k, q…``: each person of the release (``released_only``: the unsuppressed ones)
        with their label tuple (one per person: every row of a person carries the person's labels)."""
        keys = [exp.alias_(exp.cast(col(c), "VARCHAR"), ident(f"q{i}")) for i, c in enumerate(qi_columns)]
        query = exp.select(exp.alias_(person_key(col(self.key), self.key_type), ident("k")), *keys).distinct().from_(
            aliased(self.released, "deid_person_release"))
        if released_only and self.flag:
            query = query.where(exp.not_(exp.func("coalesce", exp.cast(col(FLAG), "BOOLEAN"), exp.false())))
        return query

    def pairs(self, column: str) -> exp.Expression:
        """``(k, v)``: the persons' keys with each value of ``column`` they hold, in every table where it is
        sensitive (as text when several tables hold it, so their types meet)."""
        holders = self.holders(column)
        text = len(holders) + (column in self.source_sensitive) > 1

        def value() -> exp.Expression:
            return exp.alias_(exp.cast(col(column), "VARCHAR") if text else col(column), ident("v"))

        parts: list[exp.Select] = [
            exp.select(exp.alias_(person_key(col(t.key), t.key_type), ident("k")), value()).from_(
                aliased(t.relation, f"deid_linked_rows_{i}")) for i, t in enumerate(holders)]
        if column in self.source_sensitive:
            parts.append(exp.select(exp.alias_(person_key(col(self.key), self.key_type), ident("k")), value())
                         .from_(aliased(self.released, "deid_person_rows")))
        union: exp.Expression = parts[0]
        for part in parts[1:]:
            union = exp.union(union, part, distinct=False)
        return union


def linked_value_query(values: LinkedValues, qi_columns: Sequence[str], column: str) -> exp.Select:
    """``SELECT q…, v, count(DISTINCT k)``: per released label tuple and value of ``column``, the
    unsuppressed persons holding it on any row of any table of the set (``value_query``'s shape)."""
    persons = exp.Subquery(this=values.persons(qi_columns, True), alias=exp.TableAlias(this=ident("p")))
    pairs = exp.Subquery(this=values.pairs(column), alias=exp.TableAlias(this=ident("s")))
    labels = [exp.column(f"q{i}", "p") for i in range(len(qi_columns))]
    return (exp.select(*[exp.alias_(q, ident(f"q{i}")) for i, q in enumerate(labels)],
                       exp.alias_(exp.column("v", "s"), ident("v")),
                       exp.alias_(exp.Count(this=exp.Distinct(expressions=[exp.column("k", "s")])), ident("f")))
            .from_(persons).join(pairs, on=exp.EQ(this=exp.column("k", "p"), expression=exp.column("k", "s")))
            .group_by(*[q.copy() for q in labels], exp.column("v", "s")))


def linked_source_query(values: LinkedValues, column: str) -> exp.Select:
    """``SELECT v, count(DISTINCT k)``: q(v)'s persons over every person of the source (suppressed ones
    included) holding each value of ``column`` in any table of the set; orphans are no person's."""
    persons = exp.Subquery(this=values.persons([], False), alias=exp.TableAlias(this=ident("p")))
    pairs = exp.Subquery(this=values.pairs(column), alias=exp.TableAlias(this=ident("s")))
    return (exp.select(exp.alias_(exp.column("v", "s"), ident("v")),
                       exp.alias_(exp.Count(this=exp.Distinct(expressions=[exp.column("k", "s")])), ident("f")))
            .from_(persons).join(pairs, on=exp.EQ(this=exp.column("k", "p"), expression=exp.column("k", "s")))
            .group_by(exp.column("v", "s")))


def linked_columns(spec: Spec) -> list[str]:
    """The columns with an attribute criterion that are sensitive in a linked table of ``spec``."""
    return [c for c in spec.release.attribute if any(c in t.roles.sensitive for t in spec.tables)]


def open_linked_values(backend: Backend, spec: Spec, released: exp.Expression, key_type: str | None,
                       flag: bool) -> LinkedValues:
    """The linked tables of ``spec`` holding a judged sensitive column, opened as session views on
    ``backend`` (the engine of ``released``, the person source's raw release); one ``DataError`` line
    for a table that cannot be read or lacks its key or the column."""
    assert spec.person is not None  # a spec with [[table]] declares [person]
    judged = set(linked_columns(spec))
    tables = []
    for i, t in enumerate(spec.tables):
        sensitive = tuple(c for c in t.roles.sensitive if c in judged)
        if not sensitive:
            continue
        view = f"deid_attribute_linked_{i}"
        try:
            backend.create_temp_view(view, exp.select("*").from_(backend.relation(t.source, {t.person: True})))
            columns = backend.columns(view)
        except BackendError as e:
            raise DataError(read_problem(f"linked table {t.name!r}", t.source.describe(), str(e))) from None
        missing = [c for c in (t.person, *sensitive) if c not in columns]
        if missing:
            raise DataError(f"{t.where} ({t.source.describe()}) has no column {missing[0]!r}; its columns are "
                            f"{', '.join(list(columns)[:12])}: fix the [[table]]'s person or sensitive list")
        tables.append(LinkedRows(t.name, exp.to_table(view), t.person, columns.get(t.person), sensitive))
    return LinkedValues(backend.execute, released, spec.person.column, key_type, flag, tuple(tables),
                        frozenset(spec.columns.sensitive))


def _ignored(limits: AttributeLimits) -> Callable[[Any], bool]:
    texts = {str(v) for v in limits.ignore_values}
    return lambda v: v is not None and (v in limits.ignore_values or str(v) in texts)


def _codes(limits: AttributeLimits, universe: list[Any], sql_type: pa.DataType) -> tuple[dict[Any, int],
                                                                                      list[np.ndarray], int]:
    """Each value's code (its position in the column's order for ordered t, its leaf in the hierarchy
    for hierarchical t), the hierarchy's parent maps, and the number of codes."""
    column, where = limits.column, f"[release.sensitive.{limits.column}]"
    distance = limits.t_distance if limits.max_t is not None else None
    if distance == "hierarchical":
        assert limits.hierarchy is not None
        h = Hierarchy.read(limits.hierarchy)
        missing = [v for v in universe if v is None or str(v) not in h.rows]
        if missing:
            shown = ", ".join("NULL" if v is None else repr(str(v)) for v in missing[:5])
            raise DataError(f"{where} hierarchy {limits.hierarchy} does not cover {column!r}'s value(s) {shown}; "
                            f"add a row for each (value;level1;…)")
        leaves = list(h.rows)
        code = {v: leaves.index(str(v)) for v in universe}
        return code, _parents(h), len(leaves)
    if distance == "ordered":
        if limits.order is not None:
            order = {str(v): i for i, v in enumerate(limits.order)}
            missing = [v for v in universe if v is not None and str(v) not in order]
            if missing:
                raise DataError(f"{where} order does not list {column!r}'s value(s) "
                                f"{', '.join(repr(str(v)) for v in missing[:5])}; list every value in order")
            # the values present, in the declared order (NULL last): m counts the values the source holds,
            # as the search's model does (``fulldomain.attribute``), not the order's length
            ranked = sorted((v for v in universe if v is not None), key=lambda v: order[str(v)])
            ranked += [None] if None in universe else []
            return {v: i for i, v in enumerate(ranked)}, [], max(len(ranked), 1)
        if pa.types.is_string(sql_type) or pa.types.is_large_string(sql_type) or pa.types.is_binary(sql_type):
            raise SpecError(f'{where} t_distance = "ordered" needs an order, and {column!r} is text: give '
                            f'{where} order = [its values in order], or use t_distance = "equal"')
        ranked = sorted(v for v in universe if v is not None) + ([None] if None in universe else [])
        return {v: i for i, v in enumerate(ranked)}, [], max(len(ranked), 1)
    ranked = sorted(universe, key=lambda v: (v is None, str(v)))
    return {v: i for i, v in enumerate(ranked)}, [], max(len(ranked), 1)


def _parents(h: Hierarchy) -> list[np.ndarray]:
    """``evaluate.attribute.t_hierarchical``'s parent maps of a hierarchy (a root level added when its
    top level holds several groups)."""
    rows = list(h.rows.values())
    levels = [list(dict.fromkeys(r[level] for r in rows)) for level in range(h.height)]
    levels[0] = [r[0] for r in rows]
    out = []
    for level in range(h.height - 1):
        up = {label: i for i, label in enumerate(levels[level + 1])}
        node = {label: i for i, label in enumerate(levels[level])}
        parent = np.zeros(len(levels[level]), dtype=np.int64)
        for r in rows:
            parent[node[r[level]]] = up[r[level + 1]]
        out.append(parent)
    if len(levels[-1]) > 1:
        out.append(np.zeros(len(levels[-1]), dtype=np.int64))
    return out


def _judge(limits: AttributeLimits, vc: fig.ValueCounts, groups: Groups, qi_names: Sequence[str], unit: Unit,
           q_counts: dict[Any, float], code: dict[Any, int], parents: list[np.ndarray],
           size: int) -> AttributeFigures:
    column = limits.column
    value_of = {c: v for v, c in code.items()}
    held = vc.totals() > 0  # a group holding only ignored values reveals nothing of this column
    conf = fig.confidence(vc)
    dl, el = fig.distinct_l(vc), fig.entropy_l(vc)

    def group(i: int) -> str:
        return "group " + ", ".join(f"{n} {label}" for n, label in zip(qi_names, groups.labels[i]))

    def top_value(i: int) -> tuple[str, float]:
        mine = vc.group == i
        j = int(np.argmax(np.where(mine, vc.persons, -1.0)))
        v = value_of[int(vc.value[j])]
        return ("NULL" if v is None else repr(str(v))), float(vc.persons[j])

    def worst(values: np.ndarray, mask: np.ndarray, highest: bool) -> int | None:
        if not mask.any():
            return None
        masked = np.where(mask, values, -np.inf if highest else np.inf)
        return int(np.argmax(masked) if highest else np.argmin(masked))

    checks: list[AttributeCheck] = []

    def add(key: str, figure: str, i: int | None, value: float, limit: float, at_most: bool, ok: bool,
            text: str) -> None:
        checks.append(AttributeCheck(key, column, figure, value, limit, at_most, ok, f"{column}: {text}"))

    if limits.max_confidence is not None:
        i = worst(conf, np.ones(vc.groups, dtype=bool), True)
        value = float(conf[i]) if i is not None else 0.0
        ok = value <= limits.max_confidence * (1 + 1e-12)
        text = "no group is released"
        if i is not None:
            shown, f = top_value(i) if held[i] else ("no value", 0.0)
            text = (f"{group(i)} holds {shown} for {_n(f)} of {unit.count(int(groups.m[i]))} "
                    f"(confidence {_f(value)} {'<=' if ok else '>'} max_confidence {_f(limits.max_confidence)})")
        add("max_confidence", "confidence", i, value, limits.max_confidence, True, ok, text)
    if limits.min_l is not None:
        i = worst(dl, held, False)
        value = float(dl[i]) if i is not None else float("inf")
        ok = i is None or value >= limits.min_l
        text = "no group holds a counted value" if i is None else (
            f"{group(i)} holds {_n(value)} distinct value{'' if value == 1 else 's'} "
            f"(ℓ {_n(value)} {'>=' if ok else '<'} min_l {limits.min_l})")
        add("min_l", "distinct_l", i, value, float(limits.min_l), False, ok, text)
    if limits.min_entropy_l is not None:
        i = worst(el, held, False)
        value = float(el[i]) if i is not None else float("inf")
        ok = i is None or value >= limits.min_entropy_l * (1 - 1e-12)
        text = "no group holds a counted value" if i is None else (
            f"{group(i)} has entropy ℓ {_f(value)} ({'>=' if ok else '<'} min_entropy_l {_f(limits.min_entropy_l)})")
        add("min_entropy_l", "entropy_l", i, value, limits.min_entropy_l, False, ok, text)
    if limits.recursive_cl is not None:
        c, l = limits.recursive_cl  # noqa: E741 - the model's name
        passes = fig.recursive_cl(vc, c, l) | ~held
        i = None if passes.all() else int(np.argmin(passes))
        ok = i is None
        text = f"every group is recursive ({_f(c)}, {l})-diverse"
        value = 1.0 if ok else 0.0
        if i is not None:
            shown, f = top_value(i)
            text = (f"{group(i)} is not recursive ({_f(c)}, {l})-diverse: {shown} is held by {_n(f)} of "
                    f"{unit.count(int(groups.m[i]))}, {_n(dl[i])} distinct value{'' if dl[i] == 1 else 's'} "
                    f"(needs r1 < {_f(c)} × (r{l} + … + rm) and at least {l} values)")
        add("recursive_cl", "recursive_cl", i, value, 1.0, False, ok, text)
    t_max = None
    if limits.max_t is not None:
        q = np.zeros(size)
        for v, f in q_counts.items():
            q[code[v]] += f
        q = q / q.sum() if q.sum() > 0 else q
        t = (fig.t_hierarchical(vc, q, parents) if limits.t_distance == "hierarchical" else
             fig.t_ordered(vc, q) if limits.t_distance == "ordered" else fig.t_equal(vc, q))
        i = worst(t, held, True)
        t_max = float(t[i]) if i is not None else 0.0
        ok = t_max <= limits.max_t * (1 + 1e-12)
        text = "no group holds a counted value" if i is None else (
            f"{group(i)} is at t = {_f(t_max)} from the source's distribution ({limits.t_distance} distance; "
            f"{'<=' if ok else '>'} max_t {_f(limits.max_t)})")
        add("max_t", "t", i, t_max, limits.max_t, True, ok, text)
    p_max = None
    if groups.g is not None:
        pres = fig.presence(groups.m, groups.g)
        i = worst(pres, np.ones(len(pres), dtype=bool), True)
        p_max = float(pres[i]) if i is not None else 0.0
        if limits.max_presence is not None:
            ok = p_max <= limits.max_presence * (1 + 1e-12)
            text = "no group is released" if i is None else (
                f"{group(i)} releases {_n(groups.m[i])} of its {_n(max(groups.g[i], groups.m[i]))} census people "
                f"(presence {_f(p_max)} {'<=' if ok else '>'} max_presence {_f(limits.max_presence)})")
            add("max_presence", "presence", i, p_max, limits.max_presence, True, ok, text)
    judged = held if held.any() else np.zeros(0, dtype=bool)
    return AttributeFigures(column=column, groups=vc.groups,
                            max_confidence=float(conf.max()) if conf.size else 0.0,
                            min_distinct_l=float(dl[judged].min()) if judged.any() else 0.0,
                            min_entropy_l=float(el[judged].min()) if judged.any() else 0.0,
                            max_t=t_max, max_presence=p_max, checks=tuple(checks))


def _n(x: float) -> str:
    return f"{x:,.0f}"


def _f(x: float) -> str:
    return f"{x:.3g}"
