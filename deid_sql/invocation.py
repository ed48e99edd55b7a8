"""The command line being run, remembered for the records a release writes (stdlib only).

The CLI sets it before a command runs; a release's sidecar and report say how to reproduce
it.  It lives apart from the sidecar so the CLI's root group can set it without importing
the library (``deid-sql --help`` stays instant).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from contextvars import ContextVar

INVOCATION: ContextVar[str | None] = ContextVar("deid_sql_invocation", default=None)


def set_invocation(args: Sequence[str]) -> None:
    """Remember the command line (the CLI calls this before running a command)."""
    INVOCATION.set(shlex.join(["deid-sql", *args]))


#: whether the problems this run opens may reuse (and store) cells from the user's cache
#: (``loading.cache``): the CLI turns it on for its commands (off with ``--no-cache`` or
#: ``DEID_SQL_NO_CACHE=1``); library callers pass ``Problem.from_spec(cache=True)``.
CACHE_CELLS: ContextVar[bool] = ContextVar("deid_sql_cache_cells", default=False)


def use_cell_cache(on: bool) -> None:
    """Let this run's problems use the cells cache (the CLI calls this before a command runs)."""
    CACHE_CELLS.set(on)
