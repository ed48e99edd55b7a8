"""Policy files of a spec with ``[person]``: what is saved of the declaration, and a batch's person checks.

A batch of an encounters table has several rows per person, and its drift check and release
count persons as every other path does (``docs/persons.md``).  So the policy file keeps the
person declaration — the key column, the order column, each QI's ``per_person`` rule and the
derived QIs — and the spec hash covers it: a batch applied under a spec whose ``[person]``
changed would count other persons, or give them other values, than the saved figures did, and
is refused like any other change of the spec.  A file saved without ``[person]`` has no
``person`` entry and hashes exactly as before.

``check_batch`` is the load's person checks (``person_cells``, ``loading``) for a batch, which
has no cells: one scan grouped by the person key counts the persons, the rows without a key,
the persons in whom a QI without a rule varies, and those with more rows than a derived QI's
domain.  Each refusal is the load's sentence (``persons``), all on one line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from sqlglot import exp

from ..errors import DataError, DeidError
from ..spec.persons import DERIVED, PER_PERSON, null_keys_problem, rows_out_problem, varying_problem
from ..sqltext import col, ident, person_key, source_key

if TYPE_CHECKING:
    import pyarrow as pa

    from ..domains.domain import Domain
    from ..spec.file import Spec


class Batch(Protocol):
    """What the person checks ask of an open batch (``batch.Batch``, which calls them and so cannot
    be named here): the spec over it, its columns' types and saved domains, a query run, its name."""

    spec: Spec
    columns: dict[str, str | None]
    domains: list[Domain]

    def run(self, query: exp.Expression) -> pa.Table: ...

    def describe(self) -> str: ...

PERSON = "deid_person"
ROWS = "deid_rows"


@dataclass(frozen=True)
class SavedPerson:
    """The ``[person]`` declaration as a policy file keeps it (and its spec hash sees it)."""

    column: str
    order: str | None
    per_person: tuple[tuple[str, str], ...]  # (QI name, rule), in the spec's QI order
    derived: tuple[tuple[str, str], ...]  # (QI name, what it counts)

    @classmethod
    def of_spec(cls, spec: Spec) -> SavedPerson | None:
        """The spec's declaration; None without ``[person]`` (a row is a person)."""
        if spec.person is None:
            return None
        return cls(spec.person.column, spec.person.order,
                   tuple((q.name, q.per_person) for q in spec.qis if q.per_person is not None),
                   tuple((q.name, q.derived) for q in spec.qis if q.derived is not None))

    @property
    def derived_names(self) -> set[str]:
        """The derived QIs: computed from a person's rows, so no column of the source holds them."""
        return {name for name, _ in self.derived}

    def to_json(self) -> dict[str, Any]:
        """The file's ``person`` entry, which is also what the spec hash covers."""
        return {"column": self.column, "order": self.order, "per_person": dict(self.per_person),
                "derived": dict(self.derived)}

    @classmethod
    def from_json(cls, raw: Any, names: Sequence[str], fail: Callable[[str, str], DeidError]) -> SavedPerson | None:
        """The ``person`` entry of a file (None when absent: saved without ``[person]``); ``fail``
        builds the reader's one-line refusal of a malformed entry."""
        if raw is None:
            return None
        if not isinstance(raw, dict) or not isinstance(raw.get("column"), str) or not raw["column"]:
            raise fail("person", "must be an object with the person column (\"column\")")
        order = raw.get("order")
        if order is not None and (not isinstance(order, str) or not order):
            raise fail("person.order", "must name a column or be null")
        rules = []
        for key, allowed in (("per_person", PER_PERSON), ("derived", DERIVED)):
            entry = raw.get(key, {})
            if not isinstance(entry, dict) or any(n not in names or v not in allowed for n, v in entry.items()):
                raise fail(f"person.{key}", f"must map QIs of the file to one of {', '.join(allowed)}")
            rules.append(tuple((n, entry[n]) for n in names if n in entry))
        return cls(raw["column"], order, rules[0], rules[1])


def difference(saved: SavedPerson | None, now: SavedPerson | None) -> str:
    """How the spec's ``[person]`` differs from the saved one, for the hash's refusal ('' if not)."""
    if saved == now:
        return ""
    if saved is None or now is None:
        return "; [person] was " + ("added" if saved is None else "removed")
    for what, a, b in (("column", saved.column, now.column), ("order", saved.order, now.order),
                       ("per_person rules", dict(saved.per_person), dict(now.per_person)),
                       ("derived QIs", dict(saved.derived), dict(now.derived))):
        if a != b:
            return f"; [person] {what} {a!r} → {b!r}"
    return ""


def check_batch(batch: Batch, view: str) -> int:
    """The batch's persons (distinct non-NULL keys of the rows of ``view``); raises ``DataError``
    in one line for rows without a key, a QI without a rule that varies within a person, and
    persons with more rows than a derived QI's domain — the refusals of a source's load."""
    spec = batch.spec
    person = spec.person
    assert person is not None
    key = person_key(col(person.column), batch.columns.get(person.column))  # persons told apart byte for byte
    keys = _varying_keys(batch)
    per = exp.select(exp.alias_(key.copy(), PERSON), exp.alias_(exp.func("count", exp.Star()), ROWS))
    for i, k in keys.items():
        varies = exp.GT(this=exp.func("max", k.copy()), expression=exp.func("min", k.copy()))
        per = per.select(exp.alias_(_flag(varies), f"v{i}"))
    per = per.from_(view).group_by(key.copy())
    named = exp.Not(this=exp.Is(this=exp.column(PERSON), expression=exp.null()))
    rows = exp.column(ROWS)
    outer = exp.select(exp.alias_(exp.func("count", exp.column(PERSON)), "persons"),
                       exp.alias_(_sum_if(exp.Not(this=named.copy()), rows), "nulls"))
    for i in keys:
        outer = outer.select(exp.alias_(_sum_if(named.copy(), exp.column(f"v{i}")), f"v{i}"))
    derived = [q for q in spec.qis if q.derived is not None]
    for j, q in enumerate(derived):
        inside = exp.Between(this=rows.copy(), low=exp.Literal.number(int(q.min)), high=exp.Literal.number(int(q.max)))
        outer = outer.select(exp.alias_(_sum_if(exp.and_(named.copy(), exp.Not(this=inside)), exp.Literal.number(1)),
                                        f"out{j}"))
    found = batch.run(outer.from_(exp.Subquery(this=per, alias=exp.TableAlias(this=ident("p"))))).to_pylist()[0]
    problems = []
    if found["nulls"]:
        problems.append(null_keys_problem(person, int(found["nulls"]), "batch"))
    for i, k in keys.items():
        if found[f"v{i}"]:
            problems.append(varying_problem(spec.qis[i].name, int(found[f"v{i}"]), _example(batch, view, key, k)))
    for j, q in enumerate(derived):
        if found[f"out{j}"]:
            problems.append(rows_out_problem(q.name, int(found[f"out{j}"]), q.min, q.max))
    if problems:
        raise DataError(f"batch {batch.describe()}: " + "; ".join(problems))
    return int(found["persons"] or 0)


def _varying_keys(batch: Batch) -> dict[int, exp.Expression]:
    """QI index -> the value a QI without a rule is compared by within a person: its source value
    normalized to the domain's type, as the release's guards and groups see it."""
    out = {}
    for i, (q, d) in enumerate(zip(batch.spec.qis, batch.domains)):
        if q.per_person is None and q.derived is None:
            out[i] = source_key(q, d, col(q.column), batch.columns.get(q.column))
    return out


def _example(batch: Batch, view: str, key: exp.Expression, value: exp.Expression) -> tuple[str, str, str] | None:
    """One person in whom ``value`` varies (the least key), with their least and greatest value as
    text; run only when there is one."""
    # the key and the value named in a subquery: grouping and ordering by a plain column is what
    # every engine matches (PostgreSQL and Spark do not match an ORDER BY of a COLLATE expression)
    rows = exp.select(exp.alias_(key.copy(), PERSON), exp.alias_(value.copy(), "v")).from_(view)
    person, v = exp.column(PERSON), exp.column("v")
    lo, hi = exp.func("min", v.copy()), exp.func("max", v.copy())
    text = [exp.alias_(exp.cast(e.copy(), "VARCHAR"), name) for e, name in ((person, "person"), (lo, "lo"), (hi, "hi"))]
    query = (exp.select(*text).from_(exp.Subquery(this=rows, alias=exp.TableAlias(this=ident("deid_keyed"))))
             .where(exp.Not(this=exp.Is(this=person.copy(), expression=exp.null())))
             .group_by(person.copy()).having(exp.GT(this=hi, expression=lo)).order_by(person.copy()).limit(1))
    rows = batch.run(query).to_pylist()
    return (str(rows[0]["person"]), str(rows[0]["lo"]), str(rows[0]["hi"])) if rows else None


def _flag(condition: exp.Expression) -> exp.Expression:
    return exp.Case().when(condition, exp.Literal.number(1)).else_(exp.Literal.number(0))


def _sum_if(condition: exp.Expression, value: exp.Expression) -> exp.Expression:
    return exp.func("sum", exp.Case().when(condition, value).else_(exp.Literal.number(0)))


def count_persons(spec: Spec, relation: str | None = None, key_type: str | None = None) -> exp.Expression:
    """What a group of released rows counts: its rows, or with ``[person]`` its distinct persons
    (the key column of ``relation``, of SQL type ``key_type``, told apart byte for byte:
    ``sqltext.person_key``) — a person's rows all carry the person's labels."""
    if spec.person is None:
        return exp.func("count", exp.Star())
    return exp.Count(this=exp.Distinct(expressions=[person_key(col(spec.person.column, relation), key_type)]))


__all__ = ["SavedPerson", "check_batch", "count_persons", "difference"]
