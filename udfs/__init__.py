"""DuckDB user-defined functions for the risk and KL terms (shipped as ``deid_sql.udfs``).

Each UDF is vectorized over Arrow arrays: DuckDB hands a whole batch to numpy, so
no Python runs per row.  ``UDFS`` lists name, function, argument and return types
(as type names, so this module imports no engine).
"""

from .terms import UDFS, risk_term, xlogx

__all__ = ["UDFS", "risk_term", "xlogx"]
