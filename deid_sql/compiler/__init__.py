"""A recoding compiled to SQL: sqlglot expressions behind domain guards, rendered per dialect.

Every released row is computed by a query built here: a ``CASE`` per QI behind its domain guard
(a value outside the declared domain becomes the outside label), the suppression rule (which
released groups are blanked), and the FROM item of a source that may be a query.  Nothing here
runs SQL or names an engine.

Modules:

- ``compile.py``: recoding → sqlglot ``SELECT``: per QI a ``CASE`` behind its guard, or for a category or
  text-ZIP domain too large for ``IN`` lists a joined ``(value, label)`` table (the join is the guard);
  suppression by window count or joined label tuples
- ``guards.py``: the domain guard of a QI: true exactly when a value lies in the declared or saved domain
  (ranges; for categories and ZIPs an ``IN`` list, or ``IN (SELECT v FROM (VALUES …))`` for a large domain);
  compiled releases and policy-file batches share it
- ``suppression.py``: ``Suppression``: which released groups a release blanks to ``*`` and flags (fewer than
  k records, or listed label tuples), and the same rule on cell groups (``mask``)

May import: ``domains``, ``spec``, ``sqltext``, ``storage``.
Imported by: ``channels``, ``cli``, ``dbt``, ``jobs``, ``loading``, ``policyfile``,
    ``problem``, ``release``, ``report``, ``sets``.
"""
