"""Sets of linked tables: the person source and every ``[[table]]`` released together or not at all.

A set is judged once (the gate on the person source) and written as one unit: a folder with
``release.json`` (``release``), engine tables (``tables``) or views over a protected key table
(``views``).  ``rows`` opens and checks each linked table's rows on the person source's engine.

Modules:

- ``release.py``: one release of linked tables: the person source judged once and every linked table counted
  (``prepare_set``, shared with the tables form), every table written into one staged folder renamed into
  place, one ``release.json`` listing each table's file, rows, hash, orphans and removed rows; ``preview``:
  the same list counted, nothing written, for the report of a set not yet released (or dbt models not yet
  run)
- ``rows.py``: the rows of a linked table in a set release: its view on the person source's engine, checked
  (key column, roles, shifted dates), orphans and rows of suppressed persons counted in one query, and its
  release query (rows of kept persons, dates shifted, key pseudonymized)
- ``tables.py``: a release set written as tables (``materialize --tables PREFIX``): ``PREFIX`` + each
  release name and the record table ``PREFIX`` + ``release``, in the engine or a DuckDB file, all or none
  (``Backend.create_tables``), the gate judging the person source's table as written inside the write
- ``views.py``: a release set as views (``view SET_SPEC --view PREFIX``): the keyed values run once into the
  key table ``PREFIX`` + ``keys`` (and ``PREFIX`` + ``pseudonyms``), one view per table reading its source
  and the key table, so no stored SQL holds the key; key tables only where protected (PostgreSQL, locked to
  their owner; the DuckDB file of the person source); all or none (``Backend.create_set_views``), judged
  once

May import: ``backends``, ``compiler``, ``contract``, ``errors``, ``loading``, ``problem``, ``progress``,
    ``release``, ``spec``, ``sqltext``, ``storage``.
Imported by: ``cli``, ``dbt``, ``policyfile``.
"""
