"""DuckDB user-defined functions for the risk and KL terms (shipped as ``deid_sql.udfs``).

Each UDF is vectorized over Arrow arrays: DuckDB hands a whole batch to numpy, so
no Python runs per row.  ``UDFS`` lists name, function, argument and return types
(as type names, so this module imports no engine).

Modules:

- ``terms.py``: the per-group terms m·g^−γ and c ln c, vectorized over Arrow; the record-risk UDF of a risk
  model

May import: nothing of deid_sql.
Imported by: ``backends``, ``evaluate``.
"""

from .terms import UDFS, risk_term, xlogx

__all__ = ["UDFS", "risk_term", "xlogx"]
