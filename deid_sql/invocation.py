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
