"""The release contract as the spec declares it: what a release must meet and what each column is.

``criteria`` (the ``[release]`` acceptance criteria), ``roles`` (the ``[columns]`` roles: every
source column a QI, kept, sensitive, dropped or pseudonymized), ``pseudonym`` and ``keys`` (the
HMAC-SHA-256 reference and where the key lives when SQL runs), ``shift`` (per-person date
offsets) and ``sections`` (the parsers).  Declarations only: the judgement is ``deid_sql.release``.

Modules:

- ``attribute.py``: ``[release]``'s criteria on what sensitive values reveal (ℓ-diversity, t-closeness,
  confidence, presence; ``[release.sensitive.COLUMN]``), resolved per sensitive column (``AttributeLimits``)
- ``criteria.py``: ``[release]``: the acceptance criteria (``ReleaseCriteria``, ``Criterion``;
  ``ReleaseCriteria.attribute``, the attribute limits of each sensitive column), ``allow_original_data``;
  no criteria, no release
- ``keys.py``: who holds the key when a release's SQL runs: the backend's pads in the SQL (``Pads``, the
  default), or calls of functions the session registers (``Udfs``, SQL that may be stored)
- ``pseudonym.py``: HMAC-SHA-256 pseudonyms: the pure-Python reference, the pads each backend renders in
  SQL, the column types allowed
- ``roles.py``: ``[columns]``: every source column a QI, kept, sensitive, dropped or pseudonymized
  (``ColumnRoles``); ``apply_roles`` rewrites a release query's projections
- ``secret.py``: the one check of every key read (``key_problem``, from ``ColumnRoles.secret``;
  ``variable_problem`` when ``[columns]`` is parsed): a well-known variable (``PATH``, ``HOME``, ``LC_*``,
  …), fewer than 32 bytes, hex or base64 decoding to fewer, fewer than 10 distinct characters, words, or an
  estimated entropy below 128 bits is refused; stdlib only
- ``words.txt``: the dictionary ``secret.py`` reads words of a key from (package data, one word a line)
- ``sections.py``: the parsers of ``[release]`` and ``[columns]``, called by the core spec
- ``shift.py``: date shifts: each person's offset in [−D, +D] days from the integer pseudonym of the key
  under a shift key derived from the secret (``offset``, the pure-Python reference), and the column types a
  shift moves (dates, timestamps without time zone)

May import: ``errors``, ``storage``.
Imported by: ``backends``, ``dbt``, ``ledger``, ``loading``, ``policyfile``, ``problem``, ``release``, ``report``,
    ``sets``, ``spec``, ``starter``.
"""
