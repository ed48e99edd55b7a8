"""deid-sql: de-identification of person-level data as a database job.

Importing this package has no side effects and loads nothing heavy: the names below are
imported on first use (``from deid_sql import Problem`` loads the library then), so the
command line starts at once.  Open a problem with ``Problem.from_spec("spec.toml")``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name → the module that defines it
_EXPORTS = {
    "Chain": "policies.lattice", "DataError": "errors", "DeidError": "errors", "Lattice": "policies.lattice",
    "Metrics": "evaluate", "OutputError": "errors", "Policy": "policies.lattice", "PolicyError": "errors",
    "Problem": "problem", "QIRecoding": "domains.recoding", "Recoding": "domains.recoding",
    "ReleasePlan": "release.plan", "Spec": "spec.file", "SpecError": "errors", "plan_of": "release.plan",
}

__all__ = [
    "Chain", "DataError", "DeidError", "Lattice", "Metrics", "OutputError", "Policy",
    "PolicyError", "Problem", "QIRecoding", "Recoding", "ReleasePlan", "Spec", "SpecError", "__version__", "plan_of",
]

if TYPE_CHECKING:
    from .domains.recoding import QIRecoding, Recoding
    from .errors import DataError, DeidError, OutputError, PolicyError, SpecError
    from .evaluate import Metrics
    from .policies.lattice import Chain, Lattice, Policy
    from .problem import Problem
    from .release.plan import ReleasePlan, plan_of
    from .spec.file import Spec


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'deid_sql' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
