"""The release ledger: what each recipient already holds (METHODS decision 16).

A recipient who keeps every release links a person across them by the stable pseudonym; the
ledger remembers, per recipient, each linkable release's persons and labels, chained by hash, so
that the gate (``release.union``) can judge a new release on what the recipient will hold with it.
Storage only: the judgment is ``deid_sql.release``.

Modules:

- ``combine.py``: the arithmetic of combining releases: dense keys of label tuples (hash-based, rows packed
  into one int64), one label per person (a set's label for a person shown under several tuples), persons'
  integer keys (``person_keys``: a pseudonym's integer form) and their lookup (``sorted_lookup``)
- ``content.py``: an entry's content hash made from the persons being appended (their pseudonyms sorted as
  integers), or None where the database must compute it
- ``database.py``: where a ledger's tables live, behind one interface (``LedgerDatabase``): a DuckDB file
  (owner-only, the default), or ``LedgerTables`` on PostgreSQL; the canonical content hash of an entry
- ``postgres.py``: the ledger's tables on PostgreSQL (``[release] ledger_table``): owner-only, appends
  serialized by a lock
- ``store.py``: ``Ledger`` (entries, persons' label tuples, ``append`` in one transaction, ``verify`` of the
  hash chain), ``Entry``, ``LedgerQI`` (a QI's partition of its domain), ``Released`` (what one release
  shows per person), ``key_fingerprint`` (HMAC of a fixed label: tells keys apart, never reveals one);
  per recipient, the state (each person's combined label), folded in with every entry (``fold``) so a
  release is judged with one lookup

May import: ``errors``, ``contract``, ``backends``.
Imported by: ``cli``, ``jobs``, ``release``.
"""
