"""SQL templates shipped with deid-sql (as ``deid_sql.sql``).

Templates are parsed with sqlglot and composed as expression trees: named
placeholders (``:name``) are replaced by sqlglot nodes, never by text.

Modules:

- ``metrics.sql``: the SQL path's sums over groups: risk, expected re-identifications, k, uniques, KL terms,
  discernibility

May import: nothing of deid_sql.
Imported by: ``evaluate``.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import sqlglot
from sqlglot import exp


@cache
def _text(name: str) -> str:
    return resources.files(__name__).joinpath(f"{name}.sql").read_text(encoding="utf-8")


def template(name: str, **nodes: exp.Expression) -> exp.Expression:
    """Parse template ``name`` and substitute each ``:placeholder`` with its node."""
    tree = sqlglot.parse_one(_text(name), read="duckdb")
    missing: list[str] = []

    def sub(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Placeholder) and node.name:
            if node.name not in nodes:
                missing.append(node.name)
                return node
            return nodes[node.name].copy()
        return node

    out = tree.transform(sub)
    if missing:
        raise KeyError(f"template {name} needs nodes for {', '.join(sorted(set(missing)))}")
    return out
