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


class Problems(list[str]):
    """The one collector every spec validator reports into, so ``validate`` shows them all at once.

    It is a list of finished one-line messages (``append`` takes one); ``add`` builds the line
    from where, what and how to fix it, and ``raise_if_any`` turns the lot into one ``SpecError``.
    Validators never raise for a bad value: they add a line and go on, so a spec with problems
    in every section is refused once, with every problem named."""

    def add(self, where: str, what: str, fix: str = "") -> None:
        """One problem: ``where: what; fix`` (``fix`` says how to repair it)."""
        self.append(f"{where}: {what}" + (f"; {fix}" if fix else ""))

    def unknown_keys(self, table: dict[str, object], allowed: set[str] | frozenset[str], where: str) -> None:
        """One line per key of ``table`` that ``where`` does not take, naming the ones it does."""
        for key in table:
            if key not in allowed:
                self.append(f"unknown key {key!r} in {where}; allowed keys are {', '.join(sorted(allowed))}")

    def raise_if_any(self, error: type[SpecError] | None = None) -> None:
        """Raise one ``SpecError`` (or the subclass ``error``) holding every problem, if any."""
        if self:
            raise (error or SpecError)(list(self))


class DataError(SpecError):
    """The source or population data disagrees with the spec (domains, columns, counts)."""


class PolicyError(DeidError):
    """A policy text or object does not fit the problem's quasi-identifiers."""


class OutputError(DeidError):
    """An output path or object cannot be written as asked (exists, equals the source, ...)."""


class BackendError(DeidError):
    """The database engine refused a query or could not be reached."""


class Unreachable(BackendError):
    """The engine could not be connected to: said once for the whole job, never per table."""


class DialectError(DeidError):
    """A target SQL dialect cannot express what the compiler needs."""


class ReleaseRefused(DeidError):
    """A release failed the gate (the spec's ``[release]`` criteria, or the original data without
    criteria) and no ``--accept-risk`` reason was given; nothing was written."""
