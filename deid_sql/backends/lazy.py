"""A backend that connects on first use.

A command whose cells come from the cache (``loading.cache``) and whose data are files needs no
engine to evaluate policies or search: on Spark that saves starting a JVM, on PostgreSQL a
connection.  ``LazyBackend`` stands in for the engine until something asks it for a query;
then it connects, runs ``after_connect`` (the session views the problem's queries read), and
passes every call through.  Its capabilities (``catalog``, ``title``, ``file_formats``, …) are
the engine class's, known without connecting.  Made, it removes what killed runs of the engine
left behind (``sweep_leftovers``: Spark's staging folders), as a connected backend does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from . import check_engine, connect, sweep_leftovers
from .base import Backend


class LazyBackend:
    """``connect(engine, **options)`` deferred to the first call that needs the engine."""

    def __init__(self, engine: str, options: Mapping[str, Any]) -> None:
        self._engine = engine
        self._options = dict(options)
        self._entry = check_engine(engine)  # a missing extra is refused now, not at first use
        sweep_leftovers(engine, self._options)  # a command served from the cells cache tidies up too
        self._class: type[Backend] | None = None  # imported when a capability is first asked for
        self._real: Backend | None = None
        #: run once on the new connection, before the call that caused it
        self.after_connect: Callable[[Backend], None] | None = None

    @property
    def connected(self) -> bool:
        return self._real is not None

    def real(self) -> Backend:
        """The engine's backend, connected now if it was not."""
        if self._real is None:
            backend = connect(self._engine, **self._options)
            try:
                if self.after_connect is not None:
                    self.after_connect(backend)
            except BaseException:
                backend.close()
                raise
            self._real = backend
        return self._real

    def __getattr__(self, name: str) -> Any:
        if self._real is None:
            if self._class is None:
                self._class = self._entry.load()  # the engine's module (DuckDB's: 40 ms of imports)
            attribute = getattr(self._class, name, None)
            if attribute is not None and not callable(attribute) and not isinstance(attribute, property):
                return attribute  # a capability of the engine: no connection needed
        return getattr(self.real(), name)

    def close(self) -> None:
        if self._real is not None:
            self._real.close()
