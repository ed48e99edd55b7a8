"""The ``deid-sql`` command line (click); thin wrappers over the library."""

from .main import cli, main

__all__ = ["cli", "main"]
