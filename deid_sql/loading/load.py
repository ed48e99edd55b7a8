"""Rows become cells, once: domains resolved and checked against the data, then one
``GROUP BY`` per table (source and population) in the backend.

Every data problem is collected (bad values with up to five examples and their
count, NULLs, missing columns, bad census counts) so ``validate`` reports them all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from .. import progress
from ..backends.base import Backend
from ..compiler.compile import col, ident, is_integer_type, literal, source_key
from ..contract.pseudonym import type_problems
from ..contract.shift import shift_type_problems
from ..domains.cuts import hierarchy_domain
from ..domains.domain import CategoryDomain, DateDomain, Domain, IntegerDomain, ZipDomain
from ..domains.hierarchy import Hierarchy
from ..domains.limits import resolved_problems, value_cap
from ..errors import BackendError, DataError, SpecError, Unreachable
from ..spec.file import QISpec, Spec, TableRef
from ..spec.persons import null_keys_problem, rows_out_problem, varying_problem
from ..sqltext import exact_text, typed_cast, whole_number
from .cells import Cells
from .person_cells import NULL_ROWS, ROWS_OUT, VARYING, FastCells, example_query, fast_person_cells, person_cells_query
from .shifting import range_problems, shifted_select, shifts_qis, source_shift
from .transform import released_types, transform_problems, transform_source, transformed_qis

SOURCE_VIEW = "deid_source"
READ_VIEW = "deid_source_read"  # the source as read, under the view of shifted dates or transformed QIs
POPULATION_VIEW = "deid_population"


@dataclass
class Table:
    """A registered table: its view name and column types."""

    view: str
    columns: dict[str, str]
    label: str  # "source" or "population" for messages


def open_table(backend: Backend, spec: Spec, which: str, problems: list[str]) -> Table | None:
    """Create the session view over the source or population; record missing columns."""
    ref = spec.source if which == "source" else spec.population
    assert ref is not None
    attr = "column" if which == "source" else "population_column"
    qis = [q for q in spec.qis if which == "population" or q.derived is None]  # derived QIs have no source column
    text_cols = {getattr(q, attr): q.kind in ("category", "zip") for q in qis}
    shifting = which == "source" and shifts_qis(spec)
    transforming = which == "source" and bool(transformed_qis(spec))
    if shifting and spec.person is not None:
        text_cols.setdefault(spec.person.column, True)  # the offset hashes the key's text, as pseudonyms do
    # the source as read sits under the view every path reads when its QIs are shifted or transformed
    view = (READ_VIEW if shifting or transforming else SOURCE_VIEW) if which == "source" else POPULATION_VIEW
    try:
        columns = _open_view(backend, view, ref, text_cols)
    except Unreachable:
        raise  # said once for the job, not once per table
    except BackendError as e:
        # read_csv(types=...) fails when the header lacks a text QI column: read the header
        # untyped so the missing column is reported like for the other formats
        columns = _untyped_columns_if_missing(backend, view, ref, text_cols)
        if columns is None:
            problems.append(read_problem(which, ref.describe(), str(e)))
            return None
    misread = _misread_csv(ref, columns, [getattr(q, attr) for q in qis])
    if misread:
        problems.append(f"{which} {ref.describe()} {misread}")
        return None
    if which == "source" and spec.person is not None:
        for what, name in (("person", spec.person.column), ("order", spec.person.order)):
            if name is not None and name not in columns:
                problems.append(f"[person] {what} = {name!r}: the source {ref.describe()} has no such column; its "
                                f"columns are {', '.join(list(columns)[:12])}{'…' if len(columns) > 12 else ''}")
        for q in spec.qis:
            if q.derived is not None and q.column in columns:
                problems.append(f"QI {q.name!r} is derived from the rows, but the source has a column {q.column!r} "
                                f"too; name the QI differently (its released column takes the QI's name)")
    for q in qis:
        name = getattr(q, attr)
        if name not in columns:
            problems.append(
                f"{which} {ref.describe()} has no column {name!r} for QI {q.name!r}; its columns are "
                f"{', '.join(list(columns)[:12])}{'…' if len(columns) > 12 else ''}"
            )
    if which == "population" and spec.count_column not in columns:
        problems.append(f"population {ref.describe()} has no count column {spec.count_column!r}")
    if which == "source" and source_shift(spec):
        problems += shift_problems(spec, columns, f"source {ref.describe()}")
    relation: exp.Expression = exp.to_table(view)
    if which == "source" and source_shift(spec) and not problems:
        assert spec.person is not None and spec.person.shift_days is not None
        try:
            secret = spec.columns.secret()
        except SpecError as e:
            if shifting:  # the cells need the shifted dates; an unshifted QI's cells need no key
                problems.extend(e.problems)
                return None
            secret = None
        if secret is not None:
            moved = source_shift(spec)
            domains = {q.column: (q.name, q.min, q.max) for q in spec.qis
                       if q.kind == "date" and q.derived is None and q.column in moved}
            found = range_problems(backend, exp.to_table(view), columns, moved, spec.person.column, secret,
                                   spec.person.shift_days, f"source {ref.describe()}", domains)
            problems += found  # counted before anything reads a shifted date
            if shifting and not found:  # a shifted date QI: the cells read the dates as released
                relation = shifted_select(backend, relation, columns, moved, spec.person.column, secret,
                                          spec.person.shift_days)
    if transforming and not problems:  # the cells read each transformed QI as its whole number
        problems += transform_problems(backend, spec, exp.to_table(view), columns, f"source {ref.describe()}")
        if not problems:
            relation = transform_source(spec, relation, columns)
            columns = released_types(spec, columns)
    if view != SOURCE_VIEW and which == "source" and not problems:
        backend.create_temp_view(SOURCE_VIEW, relation)
        view = SOURCE_VIEW
    return Table(view, columns, which)


def shift_problems(spec: Spec, columns: Mapping[str, str], where: str) -> list[str]:
    """The person source's ``shift`` columns that are missing or not dates, and a person key whose
    text differs between engines (its offset would too)."""
    assert spec.person is not None
    out = shift_type_problems(source_shift(spec), columns, where)
    if spec.person.column in columns:
        out += type_problems([spec.person.column], columns, where)
    return out


def _misread_csv(ref: TableRef, columns: dict[str, str], wanted: Sequence[str]) -> str | None:
    """Why a CSV file's columns are not what its header says, when the reader gave up on it.

    DuckDB reads an empty file as one column ``column0`` and a file whose rows are ragged (or
    whose delimiter is not the one given) as one text column named after the whole header line;
    "no column 'age'; its columns are age,zip,race,sex" would hide the real problem."""
    if ref.format != "csv" or ref.path is None or ref.glob or not ref.path.is_file() or len(columns) != 1:
        return None
    (only,) = columns
    if only in wanted:
        return None
    size = ref.path.stat().st_size
    if size == 0 or (size <= 4096 and not ref.path.read_bytes().strip()):
        return "is empty (no header, no rows); write the file again, or point path at the right file"
    found = [d for d in (",", ";", "\t", "|") if d in only]
    if not found:
        return None
    given = ref.delimiter or "auto-detected"
    return (f"was read as one column named after its whole header line {only[:60]!r}: its rows are ragged (some "
            f"have more or fewer fields than the header) or the delimiter ({given}) is wrong; fix the rows, or set "
            f"delimiter = {found[0]!r} in the spec")


def _open_view(backend: Backend, view: str, ref: TableRef, text_cols: dict[str, bool]) -> dict[str, str]:
    backend.create_temp_view(view, exp.select("*").from_(backend.relation(ref, text_cols)))
    return backend.columns(view)


def _untyped_columns_if_missing(backend: Backend, view: str, ref: TableRef,
                                text_cols: dict[str, bool]) -> dict[str, str] | None:
    if ref.format != "csv" or not any(text_cols.values()):
        return None
    try:
        columns = _open_view(backend, view, ref, {})
    except BackendError:
        return None
    return columns if any(c not in columns for c, text in text_cols.items() if text) else None


def read_problem(which: str, where: str, message: str) -> str:
    """One line for a file the engine could not read (also used when materializing)."""
    lowered = message.lower()
    if "unicode" in lowered or "utf-8" in lowered or "utf8" in lowered:
        return f"{which} file {where} is not UTF-8; re-encode it as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
    return f"cannot read {which} {where}: {message}"


def resolve_domains(backend: Backend, spec: Spec, source: Table, population: Table | None,
                    problems: list[str], known: Mapping[str, tuple[str, ...]] | None = None,
                    notes: list[str] | None = None) -> tuple[list[Domain | None], dict[str, Hierarchy]]:
    """Build each QI's domain from the spec, reading values from data where asked (or taking
    them from ``known``, a cached load's values of the same data).  A QI with ``cuts =
    "hierarchy"`` gets its hierarchy's order when the declared one splits a group
    (``cuts.hierarchy_domain``), said in ``notes``."""
    domains: list[Domain | None] = []
    hierarchies: dict[str, Hierarchy] = {}
    for q in spec.qis:
        hierarchy = None
        if q.hierarchy is not None:
            try:
                hierarchy = Hierarchy.read(q.hierarchy)
                hierarchies[q.name] = hierarchy
            except SpecError as e:
                problems.extend(e.problems)
        try:
            if known is not None and q.name in known and q.values is None and q.values_from != "hierarchy":
                domains.append((ZipDomain if q.kind == "zip" else CategoryDomain)(known[q.name]))
            else:
                domains.append(_domain(backend, q, hierarchy, source, population))
        except SpecError as e:
            problems.extend(f"QI {q.name!r}: {p}" for p in e.problems)
            domains.append(None)
        except Unreachable:
            raise
        except BackendError as e:
            problems.append(f"QI {q.name!r}: {e}")
            domains.append(None)
    problems.extend(resolved_problems(spec.qis, domains))  # before anything is sized by a domain
    for i, (q, d) in enumerate(zip(spec.qis, domains)):
        h = hierarchies.get(q.name)
        if d is not None and h is not None:
            try:
                h.recoding(d, 0)
                if q.cuts is not None and q.cuts.hierarchy:
                    domains[i], note = hierarchy_domain(d, h, f"QI {q.name!r}")
                    if note is not None and notes is not None:
                        notes.append(note)
            except SpecError as e:
                problems.extend(f"QI {q.name!r}: {p}" for p in e.problems)
    return domains, hierarchies


def _domain(backend: Backend, q: QISpec, hierarchy: Hierarchy | None, source: Table,
            population: Table | None) -> Domain:
    if q.kind == "integer":
        return IntegerDomain(int(q.min), int(q.max))
    if q.kind == "date":
        return DateDomain(q.min, q.max)
    cls = ZipDomain if q.kind == "zip" else CategoryDomain
    if q.values is not None:
        values = list(q.values)
    elif q.values_from == "hierarchy":
        assert hierarchy is not None
        values = list(hierarchy.rows)
    else:
        table = population if q.values_from == "population" else source
        if table is None:
            raise SpecError("values_from names a table that is not declared")
        name = q.column if table is source else q.population_column
        if name not in table.columns:
            return cls(("?",))  # the missing column is reported by open_table
        key = exp.cast(col(name), "VARCHAR")
        query = (exp.select(exp.alias_(key, "v")).distinct().from_(table.view)
                 .where(exp.Not(this=exp.Is(this=col(name), expression=exp.null()))).order_by("v").limit(value_cap()))
        values = [str(v) for v in backend.execute(query).column("v").to_pylist()]
        if not values:
            raise SpecError(f"no values found in the {table.label} to build the domain from")
    if q.nulls == "category":
        if q.null_label in values:
            raise SpecError(f"null_label {q.null_label!r} is also a real value; pick another")
        values.append(q.null_label)
    return cls(tuple(values))


def _position(domain: Domain, key: exp.Expression, raw: exp.Expression | None = None,
              sql_type: str | None = None) -> exp.Expression:
    """Position of the normalized key in an integer or date domain, NULL when outside it (a
    category's is a join or ``Backend.value_position``: ``positions_query``)."""
    value = (raw if raw is not None else key).copy()
    if isinstance(domain, IntegerDomain):
        lo = exp.Literal.number(domain.lo)
        if sql_type is not None and not is_integer_type(sql_type):  # text, DOUBLE, DECIMAL: one definition
            return exp.Sub(this=whole_number(value, domain.lo, domain.hi, sql_type), expression=lo)
        as_int = typed_cast(value, "BIGINT", sql_type)  # an integer column's type known: no text test
        ok: exp.Expression = exp.Between(this=as_int.copy(), low=lo.copy(), high=exp.Literal.number(domain.hi))
        if sql_type is None:  # a whole number (an integer column always holds one; the cast rounds 45.5 to 46)
            as_dbl = typed_cast(value, "DOUBLE", sql_type)
            ok = exp.and_(as_dbl.eq(as_int.copy()), ok)
        return exp.Case().when(ok, exp.Sub(this=as_int.copy(), expression=lo))
    if isinstance(domain, DateDomain):
        # the raw value, cast knowing its type: PostgreSQL reads a date's text by the session's DateStyle
        as_date = typed_cast(value, "DATE", sql_type)
        ok = exp.Between(this=as_date.copy(), low=literal(domain, 0), high=literal(domain, domain.size - 1))
        diff = exp.DateDiff(this=as_date.copy(), expression=literal(domain, 0), unit=exp.var("DAY"))
        return exp.Case().when(ok, diff)
    raise TypeError(f"no position expression for a {domain.kind} domain")


def positions_query(backend: Backend, spec: Spec, domains: Sequence[Domain], table: Table,
                    attr: str) -> exp.Select:
    """``SELECT p0, p1, …, <raw columns>`` over the table, domains joined where needed."""
    select = exp.select().from_(exp.alias_(exp.to_table(table.view), "t", table=True))
    for i, (q, d) in enumerate(zip(spec.qis, domains)):
        name = getattr(q, attr)
        if q.derived is not None and attr == "column":  # computed per person (``person_cells``), not read
            select = select.select(exp.alias_(exp.null(), f"p{i}"))
            continue
        key = source_key(q, d, col(name, "t"), table.columns.get(name))
        position = backend.value_position(key, d.values) if isinstance(d, CategoryDomain) else None
        if isinstance(d, CategoryDomain) and position is None:
            dom = f"deid_dom_{i}"
            backend.register_table(dom, pa.table({"v": pa.array(d.values, pa.string()),
                                                  "pos": pa.array(np.arange(d.size), pa.int32())}))
            select = select.join(exp.to_table(dom), on=exp.column("v", table=dom).eq(key), join_type="LEFT")
            position = exp.column("pos", table=dom)
        elif position is None:
            position = _position(d, key, col(name, "t"), table.columns.get(name))
        select = select.select(exp.alias_(position, f"p{i}"))
    return select


def aggregate(backend: Backend, spec: Spec, domains: Sequence[Domain], table: Table,
              problems: list[str]) -> Cells | None:
    """GROUP BY the positions; rows outside the domains become problems (source) or are
    dropped and counted (population, whose census may cover more than the domain)."""
    attr = "column" if table.label == "source" else "population_column"
    pos = positions_query(backend, spec, domains, table, attr)
    n = len(domains)
    count: exp.Expression | None = None
    if table.label == "source":
        measure: exp.Expression = exp.func("count", exp.Star())
    else:
        count = col(str(spec.count_column), "t")
        ctype = table.columns.get(str(spec.count_column), "")
        if not (is_integer_type(ctype) or ctype.upper().startswith(("DOUBLE", "FLOAT", "DECIMAL", "REAL"))):
            problems.append(f"population count column {spec.count_column!r} has type {ctype}; it must hold numbers")
            return None
        measure = exp.func("sum", exp.cast(count, "DOUBLE"))
    fast: FastCells | None = None
    if table.label == "source" and spec.person is not None:
        order_type = table.columns.get(spec.person.order) if spec.person.order else None
        key_type = table.columns.get(spec.person.column)
        fast = fast_person_cells(pos, spec.qis, domains, spec.person, order_type, key_type, backend.arg_aggregates)
        query = fast.query
        exact = person_cells_query(pos, spec.qis, spec.person, key_type, aggregate_first=backend.arg_aggregates)
    else:
        query = pos.select(exp.alias_(measure, "n"))
        query = query.group_by(*[exp.column(f"p{i}") for i in range(n)]) if n else query
    ref = spec.source if table.label == "source" else spec.population
    assert ref is not None
    try:  # the full scan happens here: a CSV may turn out to be unreadable past the sniffed rows
        with progress.watching(f"reading the {table.label} {ref.describe()}", backend.progress):
            result = _scan(backend, spec, table, query, count, ref, problems)
            if fast is not None and result is not None:  # the exact query only for persons to report
                result = backend.execute(exact) if fast.unsure(result) else fast.cells(result)
    except Unreachable:
        raise
    except BackendError as e:
        problems.append(read_problem(table.label, ref.describe(), str(e)))
        return None
    if result is None:
        return None
    if table.label == "source" and spec.person is not None and not _person_problems(
            backend, spec, domains, pos, result, table.columns.get(spec.person.column), problems):
        return None
    has_null = np.zeros(result.num_rows, dtype=bool)
    for i in range(n):
        has_null |= np.asarray(result.column(f"p{i}").is_null().to_numpy(zero_copy_only=False))
    if table.label == "source":
        if result.num_rows == 0:
            problems.append(f"the source {spec.source.describe()} has no rows; nothing to de-identify")
            return None
        if has_null.any():
            _describe_bad(backend, spec, domains, table, problems)
            return None
    keep = pa.array(~has_null)
    return Cells.from_arrow(result.filter(keep), n)



def aggregate_weights(backend: Backend, spec: Spec, domains: Sequence[Domain], source: Table,
                      problems: list[str]) -> Cells | None:
    """The sampling weights summed per sample cell (``[weights]``): each cell's estimated number of
    people, the population cells of a spec without a census.  A missing or non-numeric column,
    NULL weights and weights below 1 (a record stands for at least itself: w = 1 / its inclusion
    probability) are problems, one line each, with the rows' count and an example."""
    column = str(spec.weights)
    where = f"[weights] column {column!r} of source {spec.source.describe()}"
    ctype = source.columns.get(column)
    if ctype is None:
        problems.append(f"{where} does not exist; its columns are {', '.join(list(source.columns)[:12])}"
                        f"{'…' if len(source.columns) > 12 else ''}: fix [weights] column")
        return None
    if not (is_integer_type(ctype) or ctype.upper().startswith(("DOUBLE", "FLOAT", "DECIMAL", "REAL"))):
        problems.append(f"{where} has type {ctype}; sampling weights must be numbers (people per record)")
        return None
    w = col(column, "t")
    check = exp.select(_flag_sum(w.copy().is_(exp.null()), "nulls"),
                       _flag_sum(exp.LT(this=w.copy(), expression=exp.Literal.number(1)), "small"),
                       exp.alias_(exp.func("min", w.copy()), "lowest")).from_(
        exp.alias_(exp.to_table(source.view), "t", table=True))
    row = backend.execute(check).to_pylist()[0]
    if row["nulls"]:
        problems.append(f"{where} is NULL in {row['nulls']:,} rows; give every record its weight (or drop those rows)")
    if row["small"]:
        problems.append(f"{where} is below 1 in {row['small']:,} rows (lowest {row['lowest']!r}); a sampling weight is "
                        f"the number of people a record stands for (1 / its inclusion probability), so at least 1")
    if row["nulls"] or row["small"]:
        return None
    pos = positions_query(backend, spec, domains, source, "column")
    query = pos.select(exp.alias_(exp.func("sum", exp.cast(w.copy(), "DOUBLE")), "n"))
    query = query.group_by(*[exp.column(f"p{i}") for i in range(len(domains))]) if domains else query
    result = backend.execute(query)
    return Cells.from_arrow(result, len(domains), exact=True)


def _scan(backend: Backend, spec: Spec, table: Table, query: exp.Select, count: exp.Expression | None,
          ref: TableRef, problems: list[str]) -> pa.Table | None:
    """The census checks (population) and the GROUP BY itself: None when the counts are bad."""
    if table.label != "source":
        assert count is not None
        found = len(problems)
        _check_counts(backend, table, count, problems)
        if ref.duplicates != "sum":
            _check_duplicates(backend, table, str(spec.count_column), problems)
        if len(problems) > found:  # bad counts are reported; summing them is pointless
            return None
    return backend.execute(query)

def _flag_sum(condition: exp.Expression, alias: str) -> exp.Expression:
    case = exp.Case().when(condition, exp.Literal.number(1)).else_(exp.Literal.number(0))
    return exp.alias_(exp.func("sum", case), alias)


INT64_LIMIT = 2.0 ** 63  # the first value a 64-bit integer (BIGINT, numpy int64) cannot hold


def _check_counts(backend: Backend, table: Table, count: exp.Expression, problems: list[str]) -> None:
    """Census counts must be whole, non-negative, present and small enough to add up.

    Counts are summed as DOUBLE and kept as int64 cells: a count of 1e30 (a DOUBLE column)
    would wrap to a negative number of people, so counts and their total must stay below
    2^63.  NaN sorts above every number in DuckDB, PostgreSQL and Spark, so it is caught as
    too large too."""
    c = exp.cast(count.copy(), "DOUBLE")
    limit = exp.Literal.number(repr(INT64_LIMIT))
    q = exp.select(
        _flag_sum(c.copy() < 0, "neg"),
        _flag_sum(c.copy().neq(exp.func("round", c.copy())), "frac"),
        _flag_sum(exp.Is(this=c.copy(), expression=exp.null()), "nulls"),
        _flag_sum(c.copy() >= limit.copy(), "big"),
        exp.alias_(exp.func("max", c.copy()), "largest"),
        exp.alias_(exp.func("sum", exp.Case().when(c.copy() >= 0, c.copy()).else_(exp.Literal.number(0))), "total"),
    ).from_(exp.alias_(exp.to_table(table.view), "t", table=True))
    row = backend.execute(q).to_pylist()[0]
    name = count.name
    if row["big"]:
        problems.append(f"population count column {name!r} has {row['big']} count(s) too large for a 64-bit "
                        f"integer (e.g. {row['largest']:g}); counts are people: fix the wrong values (or unit)")
    elif row["total"] is not None and not row["total"] < INT64_LIMIT:
        problems.append(f"population count column {name!r} sums to {row['total']:g} people, more than a 64-bit "
                        f"integer holds ({int(INT64_LIMIT) - 1:,}); fix the wrong counts (or unit)")
    if row["neg"]:
        problems.append(f"population count column {name!r} has {row['neg']} negative count(s); "
                        f"counts are people, >= 0")
    if row["frac"]:
        problems.append(f"population count column {name!r} has {row['frac']} non-integer count(s); "
                        f"counts must be whole people")
    if row["nulls"]:
        problems.append(f"population count column {name!r} has {row['nulls']} NULL count(s); "
                        f"use 0 or drop those rows")


def _check_duplicates(backend: Backend, table: Table, count: str, problems: list[str]) -> None:
    """A census row is one cell: rows equal in every column but the count would be added up
    without a word (a file appended twice doubles the population and understates risk), so
    they are a problem unless the spec declares ``duplicates = "sum"``.  Rows that differ in a
    column the QIs do not use (e.g. county) are not duplicates: summing them is the intended
    marginalization."""
    keys = [c for c in table.columns if c != count]
    if not keys:
        return
    repeated = (exp.select(*[exp.alias_(col(c, "t"), f"k{i}") for i, c in enumerate(keys)],
                           exp.alias_(exp.func("count", exp.Star()), "n"))
                .from_(exp.alias_(exp.to_table(table.view), "t", table=True))
                .group_by(*[col(c, "t") for c in keys])
                .having(exp.func("count", exp.Star()) > exp.Literal.number(1)))
    sub = exp.Subquery(this=repeated, alias=exp.TableAlias(this=ident("d")))
    total = backend.execute(exp.select(exp.alias_(exp.func("count", exp.Star()), "cells"),
                                       exp.alias_(exp.func("sum", exp.column("n")), "rows")).from_(sub.copy()))
    row = total.to_pylist()[0]
    if not row["cells"]:
        return
    order = [exp.Ordered(this=exp.column("n"), desc=True), *[exp.column(f"k{i}") for i in range(len(keys))]]
    examples = backend.execute(exp.select("*").from_(sub).order_by(*order).limit(5)).to_pylist()
    shown = "; ".join(", ".join(f"{c}={r[f'k{i}']!r}" for i, c in enumerate(keys)) + f" ({r['n']} rows)"
                      for r in examples)
    problems.append(f"population has {row['cells']:,} cell(s) given by more than one row ({row['rows']:,} rows; "
                    f"e.g. {shown}); their counts would be added up: remove the repeated rows, or add "
                    f"duplicates = \"sum\" to [population] if the rows are parts of one cell")


def _person_problems(backend: Backend, spec: Spec, domains: Sequence[Domain], rows: exp.Select, result: pa.Table,
                     key_type: str | None, problems: list[str]) -> bool:
    """The load's person checks (``person_cells``): rows without a person key (their count alone:
    they are no person, so nothing else is said of them), QIs that vary within a person without a
    ``per_person`` rule (with one example), persons with more rows than a derived QI's domain.
    ``key_type``: the person key's SQL type.  False when any was found."""
    assert spec.person is not None
    found = len(problems)

    def total(name: str) -> int:
        return int(pc.sum(result.column(name)).as_py() or 0) if name in result.column_names else 0

    nulls = total(NULL_ROWS)
    if nulls:
        problems.append(null_keys_problem(spec.person, nulls))
    for i, q in enumerate(spec.qis):
        varying = total(VARYING.format(i))
        if q.derived is None and varying:
            example = backend.execute(example_query(rows, spec.person, i, key_type)).to_pylist()
            shown = None
            if example:
                e, d = example[0], domains[i]
                shown = (str(e["person"]), d.text(int(e["lo"])), d.text(int(e["hi"])))
            problems.append(varying_problem(q.name, varying, shown))
    out = total(ROWS_OUT)
    if out:
        derived = next(q for q in spec.qis if q.derived == "rows")
        problems.append(rows_out_problem(derived.name, out, derived.min, derived.max))
    return len(problems) == found


def _describe_bad(backend: Backend, spec: Spec, domains: Sequence[Domain], table: Table,
                  problems: list[str]) -> None:
    """One problem per QI with values outside its domain (≤ 5 shown) or NULLs."""
    pos = positions_query(backend, spec, domains, table, "column")
    for i, q in enumerate(spec.qis):
        if q.derived is not None:
            continue  # computed per person: its problems are the person checks'
        raw = col(q.column, "t")
        bad = exp.and_(exp.Is(this=exp.column(f"p{i}"), expression=exp.null()))
        shown_as = exp.cast(exact_text(exp.cast(raw, "VARCHAR")), "VARCHAR")  # each spelling apart
        sub = exp.Subquery(this=pos.copy().select(exp.alias_(shown_as, "raw")),
                           alias=exp.TableAlias(this=ident("x")))
        summary = (exp.select(exp.alias_(exp.column("raw"), "v"), exp.alias_(exp.func("count", exp.Star()), "n"))
                   .from_(sub).where(bad).group_by("v").order_by(exp.Ordered(this=exp.column("n"), desc=True), "v"))
        rows = backend.execute(summary).to_pylist()
        if not rows:
            continue
        nulls = sum(r["n"] for r in rows if r["v"] is None)
        values = [r for r in rows if r["v"] is not None]
        if nulls:
            problems.append(
                f"QI {q.name!r}: column {q.column!r} has {nulls} NULL value(s); clean them or set "
                f"nulls = \"category\" (category and zip QIs) to keep NULL as its own group"
            )
        if values:
            count = sum(r["n"] for r in values)
            shown = ", ".join(repr(r["v"]) for r in values[:5])
            problems.append(
                f"QI {q.name!r}: {count} record(s) in {len(values)} distinct value(s) of column "
                f"{q.column!r} are outside the declared domain (e.g. {shown}); widen the domain "
                f"(min/max or values) or fix the data"
            )


def raise_if(problems: list[str]) -> None:
    """Raise one ``DataError`` carrying every problem collected so far."""
    if problems:
        raise DataError(problems)
