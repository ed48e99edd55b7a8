"""The spec file: one de-identification problem declared in TOML, checked before any data is read.

``file`` parses the core (``[source]``, ``[population]``, ``[[qi]]``, ``[backend]``, ``[release]``,
``[columns]``) and collects every problem before raising one ``SpecError``; the feature sections
(``[adversary]``, ``[channels]``) are parsed by their own packages through ``sections``.  The
declarations of persons (``[person]``) and linked tables (``[[table]]``) live here because the
spec checks them without data; the release contract's parts are ``deid_sql.contract``.

Modules:

- ``file.py``: TOML → ``Spec``: ``[source]``, ``[population]``, ``gamma``, ``risk`` (a registered model),
  ``[[qi]]``, ``[backend]``, ``[release]`` → ``Spec.release``, ``[columns]`` → ``Spec.columns``, feature
  sections → ``Spec.features`` / ``Spec.feature(name)``; every static problem collected
- ``linked.py``: linked tables: ``[[table]]`` entries (``LinkedTable``: where, release name, person key
  column, column roles, orphans) and the rules of a set checked without data (``check_set``: one name per
  table, no QI column released from a linked table)
- ``persons.py``: persons, not rows: the ``[person]`` declaration (``PersonSpec``: the key column and the
  column that orders a person's rows) and the QIs' per-person rules (``per_person`` first/last/min/max,
  ``derived = "rows"``), checked without data; stdlib only
- ``population_size.py``: the population without a census: ``population = { size = N }`` or ``{ region = …
  }``, and ``[weights] column``; parsed for the core spec; stdlib only
- ``transform.py``: an integer QI's declared value transformation (``transform = "floor" | "round"``,
  ``scale``): parsed and checked without data, and its definition in Python (``transformed``), the
  reference the SQL of ``loading.transform`` equals; stdlib only
- ``sections.py``: the spec's feature sections: their keys and parsers read from ``registry.SECTIONS``,
  parsed into one ``Problems`` collector; the core names no feature

May import: ``contract``, ``domains``, ``errors``, ``registry``, ``storage``.
Imported by: ``adversary``, ``channels``, ``cli``, ``compiler``, ``dbt``, ``loading``, ``policyfile``,
    ``problem``, ``release``, ``report``, ``sets``, ``starter``.
"""
