"""One exception hierarchy for everything deid-sql refuses to do.

Every message is one line that says *what* is wrong, *where* (file, key, column,
QI) and *how to fix it*.  The CLI prints ``str(error)`` and exits with code 2, so
a user never sees a traceback for bad input.
"""

from __future__ import annotations


class DeidError(Exception):
    """Base class: a problem with the user's input or request (CLI exit code 2)."""

    exit_code = 2


class SpecError(DeidError):
    """The spec file is malformed or disagrees with the data.

    ``problems`` holds every problem found, so ``validate`` can report all at once.
    """

    def __init__(self, problems: list[str] | str) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        if len(self.problems) == 1:
            text = self.problems[0]
        else:
            text = f"{len(self.problems)} problems: " + "; ".join(self.problems)
        super().__init__(text)


class DataError(SpecError):
    """The source or population data disagrees with the spec (domains, columns, counts)."""


class PolicyError(DeidError):
    """A policy text or object does not fit the problem's quasi-identifiers."""


class OutputError(DeidError):
    """An output path or object cannot be written as asked (exists, equals the source, ...)."""


class BackendError(DeidError):
    """The database engine refused a query or could not be reached."""


class DialectError(DeidError):
    """A target SQL dialect cannot express what the compiler needs."""


class ReleaseRefused(DeidError):
    """A release failed the gate (the spec's ``[release]`` criteria, or the original data without
    criteria) and no ``--accept-risk`` reason was given; nothing was written."""
