"""The ledger test of a dbt model that releases pseudonyms: its data against its ledger entry (issue 41).

A model is judged, and recorded in its recipient's ledger (``release.union``), when its files are
generated; ``dbt run`` builds it later, and again every night.  Data that changed since is data
the recipient gets without the union judgment: new persons, persons gone, persons moved to another
label tuple.  The test compares, per label tuple, the model's persons and their least and greatest
pseudonym with the entry's (``release.union.entry_groups``), and returns a row for each tuple that
differs, so ``dbt test`` fails and names the labels; the fix is to generate the model again (judged
with the ledger as it is then).  Comparing the least and greatest pseudonym catches a person who
replaces another in a tuple unless both fall strictly inside it; the counts catch everything else.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from ..compiler.compile import to_sql
from ..release.union import EntryGroup
from .text import header, jinja_text

_SENTINEL = "deid_sql_model_3b9e41c07d2a"  # rendered as the model, then replaced by {{ model }}


def ledger_test_name(model: str) -> str:
    """The test's name (one per model, defined in its own macro file)."""
    return f"deid_sql_ledger__{model}"


def ledger_sql(model: str, groups: Sequence[EntryGroup], qi_columns: Sequence[str], person: str,
               flag: str | None, dialect: str, entry: str) -> str:
    """The macro file defining the test of ``model`` against ``groups`` (the ledger entry ``entry``,
    in words), in ``dialect``."""
    n = len(qi_columns)
    text = exp.DataType.build("VARCHAR")

    def as_text(e: exp.Expression) -> exp.Expression:
        return exp.Cast(this=e, to=text.copy())

    pid = exp.column(exp.to_identifier(person, quoted=True))
    labels = [exp.alias_(as_text(exp.column(exp.to_identifier(c, quoted=True))), f"q{i}")
              for i, c in enumerate(qi_columns)]
    shown: exp.Expression = exp.Not(this=exp.Is(this=pid.copy(), expression=exp.null()))
    if flag is not None:
        suppressed = exp.func("coalesce", exp.cast(exp.column(exp.to_identifier(flag, quoted=True)), "BOOLEAN"),
                              exp.false())
        shown = exp.and_(shown, exp.Not(this=suppressed))
    released = (exp.select(*labels,
                           exp.alias_(exp.Count(this=exp.Distinct(expressions=[pid.copy()])), "n"),
                           exp.alias_(exp.Min(this=as_text(pid.copy())), "lo"),
                           exp.alias_(exp.Max(this=as_text(pid.copy())), "hi"))
                .from_(exp.to_table(_SENTINEL)).where(shown)
                .group_by(*[exp.Literal.number(i + 1) for i in range(n)]))
    rows = [exp.tuple_(*[exp.Literal.string(label) for label in g.labels], exp.Literal.number(g.persons),
                       exp.Literal.string(g.least), exp.Literal.string(g.greatest)) for g in groups]
    names = [f"q{i}" for i in range(n)] + ["n", "lo", "hi"]
    recorded = exp.select(*names).from_(exp.values(rows, alias="e", columns=names))
    r, e = "r", "e"
    on = exp.and_(*[exp.NullSafeEQ(this=exp.column(f"q{i}", r), expression=exp.column(f"q{i}", e))
                    for i in range(n)]) if n else exp.true()
    differs = exp.or_(exp.Is(this=exp.column("n", r), expression=exp.null()),
                      exp.Is(this=exp.column("n", e), expression=exp.null()),
                      exp.NEQ(this=exp.column("n", r), expression=exp.column("n", e)),
                      exp.NEQ(this=exp.column("lo", r), expression=exp.column("lo", e)),
                      exp.NEQ(this=exp.column("hi", r), expression=exp.column("hi", e)))
    query = (exp.select(*[exp.alias_(exp.func("coalesce", exp.column(f"q{i}", r), exp.column(f"q{i}", e)),
                                     exp.to_identifier(c, quoted=True)) for i, c in enumerate(qi_columns)],
                        exp.alias_(exp.column("n", r), "persons_now"),
                        exp.alias_(exp.column("n", e), "persons_recorded"))
             .from_(exp.Subquery(this=released, alias=exp.TableAlias(this=exp.to_identifier(r))))
             .join(exp.Subquery(this=recorded, alias=exp.TableAlias(this=exp.to_identifier(e))), on=on,
                   join_type="FULL OUTER")
             .where(differs))
    sql = to_sql(query, dialect)
    before, after = sql.split(_SENTINEL)
    return (f"{{# {header()} #}}\n"
            f"{{# The model's released persons per label tuple against {jinja_text(entry)}: a row for each tuple\n"
            f"   whose persons, least or greatest pseudonym differ, i.e. the data changed past the entry that\n"
            f"   judged it.  Generate the model again to judge and record the data as it is now. #}}\n"
            f"{{% test {ledger_test_name(model)}(model) -%}}\n"
            f"{jinja_text(before)}{{{{ model }}}}{jinja_text(after)}\n{{%- endtest %}}\n")
