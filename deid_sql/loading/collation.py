"""Notes on text columns the engine compares under a rule other than their bytes (a collation that folds
case or accents, a blank-padded ``CHAR(n)``): deid-sql compares and tells persons apart byte for byte
everywhere, so ``validate`` says how many rows or persons that treats differently from the column's own rule.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from ..backends.base import Backend
from ..compiler.compile import col, source_key
from ..domains.domain import Domain
from ..spec.file import Spec
from ..sqltext import exact_text, person_key
from .load import Table


def spelling_notes(backend: Backend, spec: Spec, domains: Sequence[Domain],
                   table: Table) -> list[tuple[int, str]]:
    """``(rows, line)`` per text QI column the engine compares under a rule other than its bytes (a
    case- or accent-folding collation, a blank-padded ``CHAR(n)``; ``Backend.text_collations``):
    how deid-sql treats it (byte for byte, released in the domain's spelling) and how many rows
    equal a domain value only under the column's own rule (they are outside the domain).  A
    ``[person]`` key column with such a collation gets a note too (rows 0: it is no data problem):
    its persons are told apart byte for byte (``sqltext.person_key``)."""
    names = [q.column for q, d in zip(spec.qis, domains) if d.kind in ("category", "zip")]
    key = spec.person.column if spec.person is not None else None
    asked = names + ([key] if key is not None and key not in names else [])
    declared = backend.text_collations(spec.source, asked) if asked else {}
    notes: list[tuple[int, str]] = []
    if key is not None and "COLLATE" in declared.get(key, "").upper():
        notes.append((0, _person_key_note(backend, key, declared[key], table)))
    for q, d in zip(spec.qis, domains):
        if q.column not in declared:
            continue
        raw = col(q.column, "t")
        exact = source_key(q, d, raw.copy(), table.columns.get(q.column))
        texts = [exp.Literal.string(d.text(p)) for p in range(d.size)]
        loose = exp.cast(raw.copy(), "VARCHAR") if d.kind == "zip" else raw.copy()
        # literal lists, compared under the column's own collation (a VALUES column would carry a
        # collation of its own, which Spark refuses to mix with the column's)
        differs = exp.and_(exp.In(this=loose, expressions=[t.copy() for t in texts]),
                           exp.Not(this=exp.func("coalesce", exp.In(this=exact, expressions=texts), exp.false())))
        query = (exp.select(exp.alias_(exp.func("count", exp.Star()), "n"),
                            exp.alias_(exp.func("min", exp.cast(exact_text(raw.copy()), "VARCHAR")), "e"))
                 .from_(exp.alias_(exp.to_table(table.view), "t", table=True)).where(differs))
        result = backend.execute(query).to_pylist()[0]
        n, example = int(result["n"] or 0), result["e"]
        shown = f" (e.g. {example!r})" if n else ""
        notes.append((n, f"QI {q.name!r}: column {q.column!r} is {declared[q.column]}; deid-sql compares its text "
                         f"byte for byte and releases the domain's spelling, so {n:,} row(s) that equal a domain "
                         f"value only under the column's own rule{shown} are outside the domain"))
    return notes


def _person_key_note(backend: Backend, key: str, declared: str, table: Table) -> str:
    """The note of a ``[person]`` key column whose collation equates spellings (``Q1`` and ``q1``):
    deid-sql tells persons apart byte for byte everywhere (the cells, the gate, the pseudonyms, the
    sets), and how many persons that makes beyond those the column's own rule tells apart."""
    raw = col(key, "t")
    exact = person_key(raw.copy(), table.columns.get(key))
    query = (exp.select(exp.alias_(exp.Count(this=exp.Distinct(expressions=[exact])), "exact"),
                        exp.alias_(exp.Count(this=exp.Distinct(expressions=[raw.copy()])), "folded"))
             .from_(exp.alias_(exp.to_table(table.view), "t", table=True)))
    row = backend.execute(query).to_pylist()[0]
    more = int(row["exact"] or 0) - int(row["folded"] or 0)
    return (f"[person] column {key!r} is {declared}; deid-sql tells persons apart byte for byte (as their "
            f"pseudonyms do), so keys that differ only under the column's own rule are different persons: "
            f"{more:,} person(s) more than the collation tells apart")
