"""The newcomer's path: ``deid-sql init`` (a starting spec for a data file) and the demo's data.

``init`` profiles a data file through the engine and proposes each column's role; ``demo`` builds
the embedded default problem (a synthetic census, a cohort and their specs).

Modules:

- ``demo.py``: the embedded default problem: synthetic census, cohort and spec (``build_demo``), the Adult
  specs (``build_adult``)
- ``detect.py``: each column's proposed role from its name, type and values: QIs (age, dates, sex, race,
  ZIP, marital status, where a person was seen) with their domains, identifiers (names, ids, SSN-like,
  e-mails, phones, record keys), the rest for review (codes such as a two-valued ``test_id`` among them);
  plain unique QI names, one QI per role
- ``hierarchies.py``: ARX-style hierarchy files beside the data (``<data>_hierarchy_<column>.csv``):
  attached to a proposed QI when they read as a hierarchy and cover its domain, else the reason in its
  comment; named in a reviewed column's note
- ``persons.py``: the ``[person]`` key proposed when an id repeats across rows (pseudonymized, its key in
  ``DEID_SECRET``), and each QI made one value per person (``per_person``)
- ``profile.py``: a data file column by column through the engine: type, values, distinct count, range,
  fractions, most common values (``profile``), every distinct value as the load spells it, values another
  table lacks
- ``tomltext.py``: TOML text of names and values from the data: basic strings with every control character
  escaped, arrays, one-line comments
- ``values.py``: what a column's values say whatever its name: SSN-like, e-mails, phones, person names,
  yes/no spellings, a handful of values repeated over many rows
- ``write.py``: the starting spec put together: population (census, size, region or the sample), the QIs,
  ``[columns]`` drop with a comment per column, the starting ``[release]`` criteria; read back as ``Spec``
  reads it, then written atomically

May import: ``backends``, ``contract``, ``domains``, ``errors``, ``evaluate``, ``fixtures``, ``loading``, ``policies``,
    ``release``, ``search``, ``spec``, ``sqltext``, ``storage``.
Imported by: ``cli``.
"""
