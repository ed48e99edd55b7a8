"""Rows become cells, once: domains checked against the data, one GROUP BY per table, cached.

The backend aggregates the source and the population into ``Cells`` (position arrays with
counts); every policy after that is work on cells.  With ``[person]`` the cells are persons'
tuples (``person_cells``) and a release reads the rows with each person's one label
(``person_rows``); dates may be shifted per person first (``shifting``), and integer QIs read through a
declared transformation (``transform``: fractional or scaled ages made whole).  ``cache`` keeps a
load's cells so the next command on unchanged data reads no rows.

Modules:

- ``cache.py``: the cells cache: a load's cells kept under the spec's identity and the data's fingerprint; a
  stale entry is never used
- ``cells.py``: ``Cells``: position arrays and counts, marginals
- ``collation.py``: ``spelling_notes``: text QIs (and a ``[person]`` key) whose engine collation folds spellings
  that deid-sql tells apart byte for byte, with the rows (persons) that makes a difference for
- ``load.py``: data → domains and cells: views over the tables, domains resolved, every data problem
  collected, one ``GROUP BY`` per table
- ``person_cells.py``: cells of persons: the source's row positions reduced to one tuple per person (each QI
  by its ``per_person`` rule, the derived row count) and grouped, in the same single query as cells of rows,
  with the flags the load refuses (NULL person keys, QIs that vary within a person, row counts outside the
  domain)
- ``person_rows.py``: rows of persons for a release: the source rewritten with windows over the person key,
  so every row of a person carries the person's value of each QI (the same rule and tie-break as the cells)
  and derived QIs their row count; ``check_person_release`` (rows written carry the key pseudonymized;
  stored SQL may drop it, the gate counting with it)
- ``sensitive.py``: cells that carry a sensitive column's value: one more ``GROUP BY`` per (QI positions,
  value), counting persons with ``[person]`` (a person's cell by the same rules as ``person_cells``; a
  column of a linked ``[[table]]`` joined by the person key), kept in the cells cache beside the cells;
  ``pseudonymized_positions``: each person's positions with the pseudonym a release gives them
- ``shifting.py``: date shifts in SQL: a table read with its ``shift`` columns moved by each person's offset
  (the engine's integer pseudonym of the key under the shift key, ``Backend.shift_days``), so the cells of a
  shifted date QI and every release read the shifted dates; ``range_problems``, the one test of a shift that
  would leave the engine's dates (``Backend.date_days``) or a date QI's domain, counted where the data is
  read
- ``transform.py``: declared value transformations in SQL: a table read with each transformed integer QI
  (``[[qi]] transform``, ``scale``) replaced by its whole number, one definition on every engine (the
  value read from its text, IEEE arithmetic, ``FLOOR``), applied once where each path reads the source
  as stored; ``transform_problems`` counts values with no whole number or one outside the domain

May import: ``backends``, ``compiler``, ``contract``, ``domains``, ``errors``, ``progress``, ``spec``,
    ``sqltext``, ``storage``.
Imported by: ``channels``, ``dbt``, ``evaluate``, ``fulldomain``, ``jobs``, ``policyfile``, ``problem``, ``release``,
    ``report``, ``sets``, ``starter``.
"""
