"""A release judged with what its recipient already holds: the union of their releases (METHODS decision 16).

A recipient who keeps every release links a person across them by the stable pseudonym, so what
they know of a person is the tuple of every label the person was released under.  The gate
judges a new release to a recipient twice: alone, and on these combined labels over the persons
it releases, with the earlier releases read from the ledger (``ledger.store``):

- m of a combined label = the persons of this release sharing it; k, uniques and the sample
  risks follow as for one release;
- population risk uses g = max(census people in the intersection of the label regions, m).  The
  regions of one QI across releases are cells of the common refinement of the releases'
  partitions of its domain, so the census is generalized once per refinement (one per pattern of
  which earlier releases a person was in); an empty intersection gives the sample view (g = m);
  an earlier release's QI with another domain (or a name this spec lacks) adds to the combined
  label but not to the intersection;
- persons suppressed now count as in the release alone (their labels are not shown); persons
  with a label outside the policy count as outside.

The linkable column is the pseudonymized person key with ``[person]``, else the first
pseudonymized column; a release without one is not recorded (nothing links it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from ..compiler.compile import col, ident
from ..contract.criteria import LEDGER_FILE
from ..domains.recoding import QIRecoding, Recoding
from ..evaluate.riskmodel import RecordRisk
from ..ledger.combine import dense, dense_keys, first_of, per_person, person_keys, sorted_lookup
from ..ledger.database import LedgerTables, Location
from ..ledger.store import Entry, Ledger, LedgerQI, Released, domain_sha256, key_fingerprint
from ..sqltext import person_key
from .attribute import Groups, judge_values
from .figures import AttributeFigures, Census, UnionFigures, risk_figures
from .unit import Unit

if TYPE_CHECKING:
    from ..contract.attribute import AttributeLimits
    from ..spec.file import Spec


@dataclass(frozen=True)
class LedgerPlan:
    """Where a linkable release is recorded and judged: the ledger (a file, or tables on PostgreSQL), the
    recipient, the key's fingerprint and the released column a recipient links persons by."""

    location: Location
    recipient: str
    fingerprint: str
    link: str

    @classmethod
    def of(cls, spec: Spec, columns: Sequence[tuple[str, str]]) -> LedgerPlan | None:
        """The plan of releasing ``columns`` (name, role) under ``spec``, or None: nothing links it."""
        linked = [name for name, role in columns if role == "pseudonymize"]
        if not linked:
            return None
        person = spec.person.column if spec.person is not None else None
        link = person if person in linked else linked[0]
        return cls(ledger_location(spec), spec.release.recipient, key_fingerprint(spec.columns.secret()), link)


ROWS_COUNTED = "deid_rows_counted"  # the window column of each person's rows in the release


@dataclass(frozen=True)
class RowsCounted:
    """A derived row count (``derived = "rows"``) as a recipient counts it: the rows of each person in
    the release (``relation`` adds them as ``ROWS_COUNTED``), judged with the QI at its exact value
    (``recoding``: the policy's, with those QIs kept; ``census``: its census)."""

    person: str
    qi_columns: list[str]
    recoding: Recoding
    census: Census  # of ``recoding``

    @classmethod
    def of(cls, spec: Spec, recoding: Recoding, census_of: Callable[[Recoding], Census]) -> RowsCounted | None:
        """None unless ``spec`` has a derived row count and releases the person key (rows linkable)."""
        person = spec.person
        rows = [i for i, q in enumerate(spec.qis) if q.derived == "rows"]
        if person is None or not rows or spec.columns.role(person.column) not in ("pseudonymize", "keep"):
            return None
        qis = list(recoding.qis)
        columns = [q.column for q in spec.qis]
        for i in rows:
            domain = qis[i].domain
            if domain is None:
                return None
            qis[i] = QIRecoding.from_groups(domain, np.arange(domain.size))
            columns[i] = ROWS_COUNTED
        exact = Recoding(tuple(qis), name=recoding.name)
        return cls(person.column, columns, exact, census_of(exact))

    def relation(self, relation: exp.Expression) -> exp.Select:
        """``relation`` with each row's person's number of rows in it (``ROWS_COUNTED``)."""
        inner = exp.select(exp.Star()).from_(relation) if isinstance(relation, exp.Table) else relation
        source = exp.Subquery(this=inner, alias=exp.TableAlias(this=ident("deid_counted")))
        window = exp.Window(this=exp.func("count", exp.Star()),
                            partition_by=[person_key(col(self.person))])
        return exp.select(exp.Column(this=exp.Star(), table=ident("deid_counted")),
                          exp.alias_(window, ident(ROWS_COUNTED))).from_(source)


def ledger_location(spec: Spec) -> Location:
    """Where ``spec``'s releases are recorded: ``[release] ledger_table`` (tables on the spec's PostgreSQL),
    else ``[release] ledger``, else ``LEDGER_FILE`` beside the spec."""
    if spec.release.ledger_table is not None and spec.backend.dsn:
        return LedgerTables(spec.backend.dsn, spec.release.ledger_table)
    given = spec.release.ledger
    return Path(given if given is not None else spec.path.parent / LEDGER_FILE).resolve()


def persons_query(relation: exp.Expression, link: str, qi_columns: Sequence[str], flag: str | None,
                  distinct: bool = True) -> exp.Select:
    """The released persons' label tuples: ``SELECT [DISTINCT] link, qi…`` over the rows shown (not
    suppressed, a pseudonym present), the labels as text, the pseudonym as released (hex text or
    its integer form)."""
    source = relation if isinstance(relation, exp.Table) else exp.Subquery(
        this=relation, alias=exp.TableAlias(this=ident("deid_released")))
    keys = [exp.alias_(col(link), ident("p"))] + [
        exp.alias_(exp.cast(col(c), "VARCHAR"), ident(f"q{i}")) for i, c in enumerate(qi_columns)]
    shown = exp.Not(this=exp.Is(this=col(link), expression=exp.null()))
    query = exp.select(*keys).from_(source).where(shown)
    if distinct:
        query = query.distinct()
    if flag is not None:  # suppressed rows show no labels
        query = query.where(exp.Not(this=exp.func("coalesce", exp.cast(col(flag), "BOOLEAN"), exp.false())))
    return query


def person_values_query(relation: exp.Expression, link: str, column: str, flag: str | None) -> exp.Select:
    """``SELECT DISTINCT link, column`` over the rows shown: the values each released person holds."""
    query = persons_query(relation, link, (), flag)
    return query.select(exp.alias_(col(column), ident("v")))


def union_attribute(run: Callable[[exp.Expression], pa.Table], relation: exp.Expression, link: str,
                    flag: str | None, union: UnionGroups, limits: AttributeLimits, unit: Unit,
                    reference: Callable[[], pa.Table] | None) -> AttributeFigures:
    """``limits``' criteria on the groups of combined labels: f_G(v) = the persons of G holding v."""
    table = run(person_values_query(relation, link, limits.column, flag))
    order = np.argsort(union.names, kind="stable")
    found = sorted_lookup(union.names[order], person_keys(table.column("p").combine_chunks()))
    group = np.where(found >= 0, union.group[order[np.maximum(found, 0)]], -1) if order.size else found
    return judge_values(limits, group, table.column("v"), np.ones(table.num_rows), union.groups,
                        ("combined labels",), unit, reference)


def released_persons(run: Callable[[exp.Expression], pa.Table], relation: exp.Expression, link: str,
                     qi_columns: Sequence[str], flag: str | None, census: Census,
                     rows_per_person: bool = True) -> Released:
    """Per released (person, label tuple): the pseudonym and the group ids (-1: outside the policy).

    ``rows_per_person``: the release may hold several rows per person (``[person]``), so the engine
    keeps one per (person, tuple) (``DISTINCT``); otherwise every row comes back (a ``DISTINCT`` on a
    million pseudonyms' text costs more than the rare repeat), which the union counts once and the
    ledger entry drops (``Released.deduplicated``)."""
    table = run(persons_query(relation, link, qi_columns, flag, distinct=rows_per_person))
    groups = _label_ids(table, len(qi_columns), census)
    pseudonyms = table.column("p")  # chunked as it came: the entry's text, never copied here
    return Released(pseudonyms, groups, person_keys(pseudonyms))


def persons_and_groups(run: Callable[[exp.Expression], pa.Table], relation: exp.Expression, person: str,
                       qi_columns: Sequence[str], flag: str | None, census: Census) -> tuple[pa.Table, Released]:
    """One query for both counts a release of persons linked by its ``[person]`` key needs: the gate's
    persons per label tuple (``figures.count_groups`` with ``person``: the same table, sorted) and the
    released persons' tuples (``released_persons``).  ``SELECT DISTINCT person, qi…, [flag]`` over every
    row: a group's persons are its distinct non-null keys (a suppressed group whose rows carry no
    pseudonym counts 0, as ``COUNT(DISTINCT …)`` gives), the released ones those not suppressed."""
    source = relation if isinstance(relation, exp.Table) else exp.Subquery(
        this=relation, alias=exp.TableAlias(this=ident("deid_released")))
    names = [f"q{i}" for i in range(len(qi_columns))]
    keys = [exp.alias_(col(person), ident("p"))] + [
        exp.alias_(exp.cast(col(c), "VARCHAR"), ident(n)) for n, c in zip(names, qi_columns)]
    if flag is not None:
        keys.append(exp.alias_(exp.func("coalesce", exp.cast(col(flag), "BOOLEAN"), exp.false()), ident("f")))
        names.append("f")
    rows = run(exp.select(*keys).distinct().from_(source))
    if names:
        counted = rows.group_by(names, use_threads=False).aggregate([("p", "count")])  # non-null keys
        table = pa.table({**{n: counted.column(n) for n in names}, "m": counted.column("p_count")})
        if table.num_rows:
            table = table.sort_by([(n, "ascending") for n in names])
    else:
        table = pa.table({"m": pa.array([rows.num_rows - rows.column("p").null_count], pa.int64())})
    shown = np.asarray(pc.is_valid(rows.column("p")).to_numpy(zero_copy_only=False), dtype=bool)
    if flag is not None:
        shown &= ~np.asarray(rows.column("f").to_numpy(zero_copy_only=False), dtype=bool)
    groups = _label_ids(rows, len(qi_columns), census)
    pseudonyms = rows.column("p")
    if not shown.all():  # only the pseudonyms are copied, the rows' labels are ids already
        pseudonyms, groups = pseudonyms.filter(pa.array(shown)), groups[shown]
    return table, Released(pseudonyms, groups)


def _label_ids(table: pa.Table, qis: int, census: Census) -> np.ndarray:
    """The group ids (row × QI, -1: outside the policy) of the label columns ``q0``… of ``table``."""
    ids = census.group_ids([table.column(f"q{i}").combine_chunks() for i in range(qis)])
    return np.stack(ids, axis=1) if ids else np.zeros((table.num_rows, 0), dtype=np.int64)


@dataclass(frozen=True)
class EntryGroup:
    """One label tuple of a ledger entry as a stored release's test reads it: its labels (text), its
    persons, and the least and greatest of their pseudonyms (as text)."""

    labels: tuple[str, ...]
    persons: int
    least: str
    greatest: str


def entry_groups(released: Released, recoding: Recoding) -> list[EntryGroup] | None:
    """Per label tuple of ``released``, what a dbt model's test compares the model's data with: the
    data changed past the ledger entry when a tuple's persons or its least or greatest pseudonym
    differ (a person in or out, or moved).  None when a person shows a label outside the policy."""
    if not len(released.pseudonyms) or (released.groups < 0).any():
        return None
    names = [f"g{i}" for i in range(released.groups.shape[1])]
    table = pa.table({**{n: released.groups[:, i] for i, n in enumerate(names)},
                      "p": released.pseudonyms.cast(pa.string())})
    found = table.group_by(names).aggregate([("p", "count_distinct"), ("p", "min"), ("p", "max")])
    ids = [np.asarray(found.column(n).to_numpy(zero_copy_only=False), dtype=np.int64) for n in names]
    out = [EntryGroup(tuple(str(q.labels[int(g[j])]) for q, g in zip(recoding.qis, ids)), int(n), str(lo), str(hi))
           for j, (n, lo, hi) in enumerate(zip(found.column("p_count_distinct").to_pylist(),
                                               found.column("p_min").to_pylist(), found.column("p_max").to_pylist()))]
    return sorted(out, key=lambda e: e.labels)


def ledger_qis(recoding: Recoding, qi_names: Sequence[str]) -> tuple[LedgerQI, ...]:
    """The QIs' partitions as the ledger keeps them."""
    out = []
    for name, q in zip(qi_names, recoding.qis):
        domain = q.domain
        texts = [domain.text(p) for p in range(domain.size)] if domain is not None else [str(len(q.group_of))]
        out.append(LedgerQI.of(name, domain_sha256(texts), q.group_of, q.labels))
    return tuple(out)


def union_figures(current: Released, qis: Sequence[LedgerQI], recoding: Recoding, earlier: Sequence[Entry],
                  ledger: Ledger, recipient: str, census_of: Callable[[Recoding], Census] | None,
                  record_risk: RecordRisk, original_risk_sum: float, suppressed: int,
                  census_total: float, before: int | None = None) -> tuple[UnionFigures, UnionGroups]:
    """The figures of ``current`` on its persons' combined labels with ``earlier`` (entries of ``ledger``),
    and the groups of combined labels (for the attribute criteria).  ``before``: judge with what the
    recipient held before that entry (a report of an earlier release), replayed from the entries."""
    # what the recipient holds of each person: one lookup in their state, however many releases came before;
    # the persons numbered by their place in it (the new ones after), so no key is hashed
    assert current.keys is not None
    place, row_held, matrix, size = ledger.held_at(recipient, current.keys, len(earlier), before)
    new = place < 0
    if new.any():
        place = place.copy()
        place[new] = size + dense(current.keys[new])
    person_of_row = dense(place)
    n = int(person_of_row.max()) + 1 if person_of_row.size else 0
    if n == person_of_row.size:  # one row per person (the usual release): the rows are the persons
        names, held, cur_groups = current.keys, row_held, current.groups
        cur_key, mixed = None, np.zeros(n, dtype=bool)
    else:
        first = first_of(person_of_row, n)
        names, held = current.keys[first], row_held[first]
        # a person shown under several tuples is known by all of them: one key for the set, the sample
        # view for g
        cur_key, mixed, _ = per_person(person_of_row, dense_keys(current.groups), n)
        cur_groups = current.groups[first]
    outside = (cur_groups < 0).any(axis=1) if cur_groups.size else np.zeros(n, dtype=bool)
    tuples = [_tuple_matrix(ledger.tuples(e.seq), len(e.qis)) for e in earlier]
    known = held >= 0
    if known.any() and len(earlier):  # shown under several tuples in an earlier release: per combined label
        several = np.zeros(matrix.shape[0], dtype=bool)
        for e, t in enumerate(tuples):
            several |= matrix[:, e] >= len(t)
        mixed |= known & several[np.maximum(held, 0)]
    linked = int(known.sum()) if len(earlier) else 0

    shown = ~outside
    # a person's combined label: this release's tuple (or set of tuples), then what they were known by
    now = cur_groups if cur_key is None else cur_key[:, None]
    group = dense_keys(np.column_stack([now, np.where(known, held, -1)])[shown])
    m = np.bincount(group).astype(np.float64) if group.size else np.zeros(0)
    rep = np.flatnonzero(shown)[first_of(group, m.size)]  # one person per group stands for it
    labels = np.full((rep.size, len(earlier)), -1, dtype=np.int64)  # each one's label in each earlier release
    if len(earlier) and rep.size:
        labels[known[rep]] = matrix[held[rep][known[rep]]]
    g = m.copy()
    if census_of is not None and m.size:
        g = _population(census_of, recoding, qis, earlier, tuples, cur_groups[rep], labels, mixed[rep], m)
    m_out = np.ones(int(outside.sum()), dtype=np.float64)  # each outside person: the sample view, alone
    m_all = np.concatenate([m, np.full(1 if suppressed else 0, float(suppressed)), m_out])
    g_all = np.concatenate([g, np.full(1 if suppressed else 0, max(census_total, float(suppressed))), m_out])
    figures = UnionFigures(
        recipient=recipient, earlier=tuple(e.release for e in earlier), persons=linked,
        groups=int(m.size), k=int(m.min()) if m.size else 0, sample_unique_records=int((m == 1).sum()),
        **risk_figures(record_risk, m_all, g_all, original_risk_sum))
    group_of = np.full(n, -1, dtype=np.int64)
    group_of[np.flatnonzero(shown)] = group
    words = _Words(recoding, qis, earlier, tuples, cur_groups[rep], labels)
    return figures, UnionGroups(names, group_of, Groups(words, m, g if census_of is not None else None))


@dataclass(frozen=True)
class UnionGroups:
    """This release's persons (``names``, distinct integer keys) and the group of combined labels of each
    (``group``, -1: outside the policy), as the attribute criteria count them (``groups``)."""

    names: np.ndarray
    group: np.ndarray
    groups: Groups


class _Words(Sequence[tuple[str, ...]]):
    """A combined label in words, made when a refusal names its group (there may be a million)."""

    def __init__(self, recoding: Recoding, qis: Sequence[LedgerQI], earlier: Sequence[Entry],
                 tuples: Sequence[np.ndarray], cur_groups: np.ndarray, labels: np.ndarray) -> None:
        self.recoding, self.qis, self.earlier, self.tuples = recoding, qis, earlier, tuples
        self.cur_groups, self.labels = cur_groups, labels  # of the person standing for each group

    def __len__(self) -> int:
        return len(self.cur_groups)

    def __getitem__(self, i: int) -> tuple[str, ...]:  # type: ignore[override]
        person = int(i)
        now = ", ".join(f"{q.name} {r.labels[int(gid)]}" for q, r, gid in
                        zip(self.qis, self.recoding.qis, self.cur_groups[person]))
        before = []
        for e, entry in enumerate(self.earlier):
            label = int(self.labels[person, e])
            if label < 0:
                before.append(f"{entry.release}: not released")
            elif label < len(self.tuples[e]):
                before.append(f"{entry.release}: " + ", ".join(
                    f"{q.name} {q.labels[int(gid)] if gid >= 0 else '(outside)'}"
                    for q, gid in zip(entry.qis, self.tuples[e][label])))
            else:
                before.append(f"{entry.release}: several labels")
        return (f"{now}; earlier {'; '.join(before)}",)


def _population(census_of: Callable[[Recoding], Census], recoding: Recoding, qis: Sequence[LedgerQI],
                earlier: Sequence[Entry], tuples: Sequence[np.ndarray], cur_groups: np.ndarray, labels: np.ndarray,
                mixed: np.ndarray, m: np.ndarray) -> np.ndarray:
    """g per combined group: max(census people in the intersection of its persons' regions, m).
    ``cur_groups``, ``labels`` and ``mixed`` are those of one person per group (a group's persons share
    every label)."""
    g = m.copy()
    # per earlier entry, per current QI: the entry's QI index over the same domain (None: not comparable)
    same = [[next((i for i, eq in enumerate(e.qis) if eq.name == q.name and eq.domain == q.domain), None)
             for q in qis] for e in earlier]
    patterns, pattern_of = np.unique(labels >= 0, axis=0, return_inverse=True)
    pattern_of = pattern_of.reshape(-1)
    for p, pattern in enumerate(patterns):
        members = np.flatnonzero((pattern_of == p) & ~mixed)
        if not members.size:
            continue
        entries = [i for i, here in enumerate(pattern) if here]
        refined_qis = []
        class_ids = []
        for j, q in enumerate(recoding.qis):
            parts = [q.group_of]
            columns = [cur_groups[members, j]]
            for i in entries:
                at = same[i][j]
                if at is None:
                    continue
                parts.append(earlier[i].qis[at].group_of())
                columns.append(tuples[i][labels[members, i], at])
            cells, refined = np.unique(np.column_stack(parts), axis=0, return_inverse=True)
            class_ids.append(_rows_in(cells, np.column_stack(columns)))
            refined_qis.append(QIRecoding(refined.reshape(-1), tuple(str(c) for c in range(len(cells)))))
        census = census_of(Recoding(tuple(refined_qis), name="union"))
        keep = np.logical_and.reduce([ids >= 0 for ids in class_ids]) if class_ids else np.ones(members.size, bool)
        if keep.any():  # an empty intersection keeps the sample view
            people = census.people(census.key_of([ids[keep] for ids in class_ids]))
            g[members[keep]] = np.maximum(people, m[members[keep]])
    return g


def _tuple_matrix(tuples: dict[int, np.ndarray], width: int) -> np.ndarray:
    """An entry's label tuples as a matrix, row = label id."""
    out = np.full((max(tuples, default=-1) + 1, width), -1, dtype=np.int64)
    for label, groups in tuples.items():
        out[label] = groups
    return out


def _rows_in(cells: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The index in ``cells`` (unique rows) of each row of ``wanted`` (-1: none)."""
    _, common = np.unique(np.vstack([cells, wanted]), axis=0, return_inverse=True)
    common = common.reshape(-1)
    at = np.full(int(common.max()) + 1 if common.size else 0, -1, dtype=np.int64)
    at[common[:len(cells)]] = np.arange(len(cells))
    return at[common[len(cells):]]
