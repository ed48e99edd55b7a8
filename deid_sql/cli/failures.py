"""The error boundary of every command: what failures become, in one line and an exit code.

Kept apart from the options (which import the library) so the root group can wrap every
command without importing anything heavy: ``deid-sql --help`` loads click and this module only.
"""

from __future__ import annotations

import functools
import io
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from ..errors import DeidError, SpecError
from ..interrupts import Terminated, received, words

F = TypeVar("F", bound=Callable[..., Any])

INTERNAL_ERROR = 3  # an unexpected exception: a bug, not the user's input (2) nor check's verdict (1)
INTERRUPTED = 130  # Ctrl-C, as a shell reports a process killed by SIGINT
BROKEN_PIPE = 141  # 128 + SIGPIPE: stdout's reader closed the pipe
TRACEBACK_VARIABLE = "DEID_SQL_TRACEBACK"


def fail(message: str, code: int = 2) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


@contextmanager
def error_boundary() -> Iterator[None]:
    """What every command's failures become: ``DeidError`` one line and its exit code (2; a drifted
    batch 1), a signal one line and 128 + signum (Ctrl-C 130, SIGTERM 143: ``interrupts``) whatever
    exception it ended in (the driver's error for a cancelled query too), any other exception — a
    bug — one line naming it and exit code 3 (with ``DEID_SQL_TRACEBACK=1`` the traceback too).
    ``SystemExit`` (a command's own exit code) and click's exceptions (usage errors, ``--help``) pass
    untouched."""
    try:
        yield
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        raise
    except Terminated as e:
        fail(words(e.signum), 128 + e.signum)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        fail("interrupted", INTERRUPTED)
    except Exception as e:
        signum = received()
        if signum is not None:  # a cancelled query's error, or what the handler's exception became
            fail(words(signum), 128 + signum)
        _failed(e)


def _failed(e: Exception) -> None:
    """An exception no signal caused: a ``DeidError`` one line and its code, anything else a bug."""
    if isinstance(e, SpecError):
        fail("; ".join(e.problems), e.exit_code)
    if isinstance(e, DeidError):
        fail(str(e), e.exit_code)
    if isinstance(e, BrokenPipeError):  # the reader went away ('| head'): not a bug, and nothing left to say
        _silence_stdout()
        sys.exit(BROKEN_PIPE)
    if os.environ.get(TRACEBACK_VARIABLE, "").strip() not in ("", "0"):
        traceback.print_exception(e, file=sys.stderr)
    message = " ".join(str(e).split())  # one line, whatever the exception's text holds
    fail(f"internal error: {type(e).__name__}{': ' + message if message else ''} — this is a bug; set "
         f"{TRACEBACK_VARIABLE}=1 to see the traceback and report it, with the command you ran, to the "
         f"deid-sql issue tracker", INTERNAL_ERROR)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail on the closed pipe again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass


def handles_errors(fn: F) -> F:
    """Run a command inside ``error_boundary``: bad input is one line on stderr and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with error_boundary():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


