"""Where output lands: atomic files, in-flight temporaries, table names and references, the cache folder.

The lowest layer that touches the outside world.  Every engine and every writer above uses it, so it
imports nothing of deid-sql but the errors: a write is a temporary renamed into place or nothing
(``atomic``), a killed writer's temporaries are swept by the next command (``inflight``), a table or
view name is parsed by the engine's identifier rules before anything runs (``names``).

Modules:

- ``atomic.py``: file writes as temp file then rename (``replacing``, ``replacing_together`` for a release
  and its sidecar), exclusive without ``--overwrite``, temporaries owner-only in ``.deid-sql-tmp/`` beside
  the target
- ``inflight.py``: the record of temporaries in flight (writer pid and process start time, in the cache
  folder) and ``sweep``, run by every command, which removes those of dead writers; stdlib only
- ``names.py``: table and view names parsed strictly (never by a SQL parser) by each engine's identifier
  rules (``RULES``): ``parse_name`` → ``Name``; a name the engine would fold or truncate is refused before
  anything runs; ``Name.same_as`` compares an output with the inputs as the engine reads them (folded,
  Spark's ``spark_catalog.`` left out)
- ``tableref.py``: ``TableRef``: where a table lives (a CSV or Parquet file, a table in a DuckDB file, an
  engine's table)
- ``userdirs.py``: the user's cache folder (``DEID_SQL_CACHE_DIR``, else the platform's place), created
  owner-only; stdlib only

May import: ``errors``.
Imported by: ``adversary``, ``backends``, ``channels``, ``cli``, ``compiler``, ``contract``, ``dbt``, ``jobs``,
    ``loading``, ``policyfile``, ``release``, ``report``, ``sets``, ``spec``, ``starter``.
"""
