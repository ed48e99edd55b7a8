"""The release contract as the spec declares it: what a release must meet and what each column is.

``criteria`` (the spec's ``[release]`` acceptance criteria), ``roles`` (the spec's ``[columns]``:
every source column is a QI, kept, sensitive, dropped or pseudonymized), ``pseudonym`` (the
HMAC-SHA-256 reference and key handling every backend renders in its SQL), ``secret`` (the one
check that a key read from the environment is a secret) and ``sections`` (the
parsers of ``[release]`` and ``[columns]``).  These are declarations, below the spec and the
engines; the judgement — figures measured on the rows written, the gate, the plan, the sidecar —
is ``deid_sql.release``, above the problem.  Nothing is imported here.
"""
