"""Ordered QI domains and what may be done to them: positions, labels, hierarchies, cut points, recodings.

Everything here knows values and their order, nothing about data or SQL.  A domain maps each
admissible value to a position; a recoding gives each position a group; a hierarchy's levels are
recodings; cut points say where a custodian may cut.  The spec and the policies both stand on it.

Modules:

- ``cuts.py``: where a QI may be cut: the spec's allowed cut points (``cuts``, ``zip_digits``,
  ``date_cuts``) and the named boundary sets (every N, ZIP digits, month/quarter/year, hierarchy level);
  ``hierarchy_domain`` puts a category domain in its hierarchy's order for ``cuts = "hierarchy"``
- ``domain.py``: ordered QI domains (integer range, categories, ZIPs, dates): value ↔ position, group labels
  (``20-29``, ``372**``, ``Asian|Other``) with escaping, ``split_label``, ``can_label``
- ``hierarchy.py``: ARX-style hierarchy CSVs, checked (equal depth, a tree), their levels as recodings, and
  the order of values that keeps every group of every level a run (``nested_order``)
- ``hierarchy_labels.py``: range-like hierarchy labels (``0-19``, ``<20``, ``90+``, ``[20, 30)``) checked
  against their values: ``validate``'s warnings when a label holds a value outside the range it names
- ``limits.py``: the largest QI domain (1 M values) and problem (4 M) allowed, checked from the spec and
  again after reading categories, before anything is sized by them; ``KEY_LIMIT`` (2^62), the one bound
  on positions packed into a 64-bit integer (group keys, persons' packed positions)
- ``recoding.py``: the general generalization: per QI a group id per domain position, with labels; knows
  whether its groups are intervals

May import: ``errors``.
Imported by: ``cli``, ``compiler``, ``dbt``, ``evaluate``, ``fulldomain``, ``loading``, ``policies``,
    ``policyfile``, ``problem``, ``release``, ``report``, ``search``, ``spec``, ``starter``.
"""
