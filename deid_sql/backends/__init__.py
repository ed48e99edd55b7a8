"""Engines behind one interface; DuckDB is the default and the only one built in so far."""

from __future__ import annotations

from .base import Backend


def connect(engine: str = "duckdb", **options: object) -> Backend:
    """Open a backend by name."""
    if engine == "duckdb":
        from .duckdb import DuckDBBackend

        return DuckDBBackend(**options)  # type: ignore[arg-type]
    from ..errors import BackendError

    raise BackendError(f"unknown engine {engine!r}; the engines are: duckdb")


__all__ = ["Backend", "connect"]
