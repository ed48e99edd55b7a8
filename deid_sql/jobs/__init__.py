"""Jobs that search and then write: full-domain anonymization and the frontier run.

A job wires a search (``deid_sql.search``) to the release path (``deid_sql.release``) and the
reports: ``anonymize`` finds the optimal transformation and writes it under the gate; ``frontier``
runs a frontier search in a folder with checkpoints, baselines and reports.

Modules:

- ``anonymize.py``: the anonymization job: privacy models from options, the search, its optimum as a
  ``ReleasePlan`` with the suppressed groups, ``write_release``, ``rerun``
- ``earlier.py``: what a recipient already holds (the ledger's state joined with each person's pseudonym),
  as cells of earlier combined labels for ``UnionKAnonymity``: anonymize searches on the union
- ``frontier.py``: a frontier run in a folder: checkpoint/resume, Safe Harbor and k-anonymity comparison,
  reports

May import: ``compiler``, ``errors``, ``evaluate``, ``fulldomain``, ``ledger``, ``loading``, ``policies``,
    ``problem``, ``progress``, ``release``, ``report``, ``search``, ``storage``.
Imported by: ``cli``.
"""
