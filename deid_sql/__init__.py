"""deid-sql: de-identification of person-level data as a database job.

Importing this package has no side effects; open a problem with
``Problem.from_spec("spec.toml")``.
"""

from .errors import DataError, DeidError, OutputError, PolicyError, SpecError
from .evaluate import Metrics
from .lattice import Chain, Lattice
from .policy import Policy
from .problem import Problem
from .recoding import QIRecoding, Recoding
from .spec import Spec

__version__ = "0.1.0"

__all__ = [
    "Chain", "DataError", "DeidError", "Lattice", "Metrics", "OutputError", "Policy",
    "PolicyError", "Problem", "QIRecoding", "Recoding", "Spec", "SpecError", "__version__",
]
