"""Shared click options and the error boundary of every command.

Bad input becomes one line on stderr and exit code 2; nothing below ``cli/``
imports click.
"""

from __future__ import annotations

import functools
import io
import json
import math
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from ..adversary.params import RISKS
from ..errors import DeidError, SpecError
from ..problem import Problem

F = TypeVar("F", bound=Callable[..., Any])


class FiniteFloat(click.ParamType):
    """A float option that must be finite and in a range: click's ``float`` takes ``nan`` and
    ``inf``, which then pass every ``<`` comparison and turn risks into NaN or 0 silently."""

    name = "number"

    def __init__(self, low: float | None = None, high: float | None = None, low_open: bool = False,
                 high_open: bool = False) -> None:
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open

    def describe(self) -> str:
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{'>' if self.low_open else '≥'} {self.low:g}"
        if self.high is not None:
            return f"{'<' if self.high_open else '≤'} {self.high:g}"
        return ""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number; give a finite number {self.describe()}".rstrip(), param, ctx)
        below = self.low is not None and (number <= self.low if self.low_open else number < self.low)
        above = self.high is not None and (number >= self.high if self.high_open else number > self.high)
        if not math.isfinite(number) or below or above:
            self.fail(f"{value!r} is not a finite number {self.describe()}".rstrip() + "; give one", param, ctx)
        return number


spec_argument = click.argument("spec", type=click.Path(path_type=Path, dir_okay=False))
policy_option = click.option(
    "--policy", "-p", "policy", required=True, metavar="P",
    help="Policy text, one part per QI joined by '|': 'age:every=10|zip:digits=3|admitted:by=month', "
         "'age:cuts=18,65' (a new group at each value), 'race:level=1' (a hierarchy level), 'zip:top', "
         "'sex:bottom' (kept), per-QI bits 'sex:1'; or 'top', 'bottom', or @FILE to read it from a file.",
)
format_option = click.option(
    "--format", "fmt", type=click.Choice(["parquet", "csv", "duckdb"]), default=None,
    help="Output format when the extension does not tell.",
)
accept_risk_option = click.option(
    "--accept-risk", default=None, metavar="REASON",
    help="Release even though the release criteria of the spec fail (or the policy keeps the original data); "
         "REASON is written beside the release and printed.",
)
suppress_option = click.option(
    "--suppress-below", type=click.IntRange(min=1), default=None, metavar="K",
    help="Replace the QIs of records in groups smaller than K by '*' and flag them.",
)


def read_policy(text: str) -> str:
    """``@file`` reads the policy text from a file (policies can be long)."""
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            return path.read_text(encoding="utf-8").strip()
        except OSError:
            raise click.BadParameter(f"cannot read policy file {path}", param_hint="--policy") from None
    return text


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
    batch 1), Ctrl-C 130, any other exception — a bug — one line naming it and exit code 3 (with
    ``DEID_SQL_TRACEBACK=1`` the traceback too).  ``SystemExit`` (a command's own exit code, SIGTERM's
    128 + signum) and click's exceptions (usage errors, ``--help``) pass untouched."""
    try:
        yield
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        raise
    except SpecError as e:
        fail("; ".join(e.problems), e.exit_code)
    except DeidError as e:
        fail(str(e), e.exit_code)
    except KeyboardInterrupt:
        fail("interrupted", INTERRUPTED)
    except BrokenPipeError:  # the reader went away ('| head'): not a bug, and nothing left to say
        _silence_stdout()
        sys.exit(BROKEN_PIPE)
    except Exception as e:
        if os.environ.get(TRACEBACK_VARIABLE, "").strip() not in ("", "0"):
            traceback.print_exc(file=sys.stderr)
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


def risk_model_option(*names: str) -> Callable[[F], F]:
    """``--risk-model`` (plus any aliases): override the spec's ``risk``."""
    return click.option(
        *(names or ("--risk-model",)), "risk_model", type=click.Choice(RISKS), default=None,
        help="Risk model: 'population' (1/g, the default) or 'adversary' (the economic attacker of docs/adversary.md, "
             "parameters from the spec's [adversary] table). Overrides the spec's risk.")


@contextmanager
def open_problem(spec: Path, risk: str | None = None) -> Iterator[Problem]:
    problem = Problem.from_spec(spec, risk=risk)
    try:
        yield problem
    finally:
        problem.close()


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def echo_release(written: Any, err: bool = False) -> None:
    """What the gate measured and decided, and where the sidecar went (after a write); ``err``:
    on stderr (``compile``, whose stdout is the SQL)."""
    f, verdict = getattr(written, "figures", None), getattr(written, "verdict", None)
    if f is None or verdict is None:
        return

    def echo(line: str) -> None:
        click.echo(line, err=err)

    echo(f"  released {f.records:,} rows: {f.groups:,} groups, k = {f.k:,}, expected re-identifications "
         f"{f.expected_reidentifications:,.4g}, max record risk {f.max_record_risk:.4g}, risk {f.risk:.4g}"
         + (f", {f.suppressed:,} suppressed" if f.suppressed else "")
         + (f", {f.outside:,} outside the domain (released as the outside label)" if f.outside else ""))
    checks = "; ".join(f"{c.figure} {c.value:.6g} {'<=' if c.at_most else '>='} {c.limit:.6g}"
                       + (" (safe harbor)" if c.key.startswith("no_riskier_than") else "")
                       + ("" if c.passed else " FAILED") for c in verdict.checks)
    if verdict.accepted_risk and not verdict.passed:
        echo(f"  gate: FAILED ({'; '.join(verdict.failures)}) — released anyway, reason recorded: "
             f"{verdict.accepted_risk}")
    elif verdict.declared:
        echo(f"  gate: passed ({checks})")
    else:
        echo("  gate: passed (no [release] criteria in the spec: only the original data is refused)")
    if written.sidecar:
        echo(f"  sidecar: {written.sidecar}")
