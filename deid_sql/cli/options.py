"""Shared click options of the commands (the error boundary is ``failures.py``).

Bad input becomes one line on stderr and exit code 2; nothing below ``cli/``
imports click.
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from ..backends import show_engine_logs
from ..backends.lazy import LazyBackend
from ..problem import Problem
from ..registry import RISK_MODELS, Registry
from ..release.gate import MIN_REASON_LETTERS, override_reason
from ..release.plan import ReleasePlan, plan_of
from ..release.targets import Target, check_targets
from ..spec.file import Spec
from .failures import (  # noqa: F401 - the commands import them from here
    BROKEN_PIPE,
    INTERNAL_ERROR,
    INTERRUPTED,
    TRACEBACK_VARIABLE,
    error_boundary,
    fail,
    handles_errors,
)

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


_SPEC = click.argument("spec", type=click.Path(path_type=Path, dir_okay=False))


def _no_cache(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        from ..invocation import use_cell_cache

        use_cell_cache(False)


_NO_CACHE = click.option(
    "--no-cache", is_flag=True, expose_value=False, callback=_no_cache,
    help="Read the data from the source again instead of reusing what an earlier command read from it "
         "(cached per spec and data in the user's cache folder; a change to the data is noticed either way).")


def _show_engine_logs(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    show_engine_logs(value)  # set on every run, so one run's --verbose does not outlive it in-process


verbose_option = click.option(
    "--verbose", is_flag=True, expose_value=False, callback=_show_engine_logs,
    help="Show the engine's own log on stderr (Spark's JVM; by default it goes to spark.log in Spark's folder).")


def spec_argument(fn: F) -> F:
    """SPEC, with --verbose (every command that reads a spec may open an engine) and --no-cache
    (whether this run reuses the cells an earlier run read from the same data)."""
    return verbose_option(_NO_CACHE(_SPEC(fn)))

_VIEW = click.option("--view", default=None, metavar="NAME",
                     help="Create a view of the release instead: in the DuckDB file --db, or in the spec's engine.")
_DB = click.option("--db", type=click.Path(path_type=Path, dir_okay=False), default=None,
                   help="DuckDB file for --view (created if missing).")


def view_options(fn: F) -> F:
    """``--view NAME`` and ``--db FILE``: a release as a view instead of a file or table (anonymize, apply)."""
    return _VIEW(_DB(fn))


_POLICY = click.option(
    "--policy", "-p", "policy", default=None, metavar="P",
    help="Policy text, one part per QI joined by '|': 'age:every=10|zip:digits=3|admitted:by=month', "
         "'age:cuts=18,65' (a new group at each value), 'race:level=1' (a hierarchy level), 'zip:top', "
         "'sex:bottom' (kept), per-QI bits 'sex:1'; or 'top', 'bottom', or @FILE to read it from a file "
         "(or give --levels).",
)
_LEVELS = click.option(
    "--levels", default=None, metavar="L",
    help="Hierarchy levels instead of --policy, as 'deid-sql anonymize' prints them: 'sex:0|age:3|…' "
         "(the hierarchies' own labels; QIs left out stay at level 0).",
)


def policy_option(fn: Any) -> Any:
    """``--policy P`` or ``--levels L``: what to release (``policy_input`` checks that one is given)."""
    return _POLICY(_LEVELS(fn))


def policy_input(policy: str | None, levels: str | None) -> tuple[str | None, str | None]:
    """The policy text (``@FILE`` read) and the levels as given (``plan_of`` checks that exactly
    one is given)."""
    return (read_policy(policy) if policy is not None else None), levels


def release_plan(problem: Problem, policy: str | None, levels: str | None,
                 suppress_below: int | None = None) -> ReleasePlan:
    """What ``--policy``/``--levels`` (and ``--suppress-below``) ask a release command to release:
    the command line's one resolution of the policy (``plan_of``); everything after takes the plan."""
    text, levels = policy_input(policy, levels)
    return plan_of(problem, text, suppression=suppress_below, levels=levels)


format_option = click.option(
    "--format", "fmt", type=click.Choice(["parquet", "csv", "duckdb"]), default=None,
    help="Output format when the extension does not tell.",
)
def checked_reason(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An override's reason checked as the command line is read (``override_reason``, the one
    validator: words, not punctuation), so a bad one is refused in one line before any data is read."""
    return override_reason(value, param.opts[0] if param.opts else "--accept-risk")


REASON_RULE = f"REASON is words (at least {MIN_REASON_LETTERS} letters, e.g. who approved it and why)"
accept_risk_option = click.option(
    "--accept-risk", default=None, metavar="REASON", callback=checked_reason,
    help="Release even though the release criteria of the spec fail (or the policy keeps the original data); "
         f"{REASON_RULE}, written beside the release and printed.",
)
suppress_option = click.option(
    "--suppress-below", type=click.IntRange(min=1), default=None, metavar="K",
    help="Replace the QIs of records in groups smaller than K by '*' and flag them (with [person]: groups of "
         "fewer than K persons, all of each person's rows).",
)


def min_k_option(help: str) -> Callable[[F], F]:
    """``--min-k K``: the smallest group a release may have (the spec's ``[release] min_k``); each
    command says what it does with it."""
    return click.option("--min-k", "k", type=int, default=None, metavar="K", help=help)  # K < 1: the library's line


def read_policy(text: str) -> str:
    """``@file`` reads the policy text from a file (policies can be long)."""
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            return path.read_text(encoding="utf-8").strip()
        except OSError:
            raise click.BadParameter(f"cannot read policy file {path}", param_hint="--policy") from None
    return text


class RegisteredChoice(click.Choice):  # type: ignore[type-arg]
    """A choice among a registry's names, read when the option is shown or checked (so importing
    a command's module discovers no plugin)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.case_sensitive = True

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        return self.registry.names()


def risk_model_option(old_risk: bool = False) -> Callable[[F], F]:
    """``--risk-model``: override the spec's ``risk``; ``old_risk``: the command once spelled it
    ``--risk`` (evaluate, alternatives, frontier), which still works with a deprecation line."""
    option = click.option(
        "--risk-model", "risk_model", type=RegisteredChoice(RISK_MODELS), default=None,
        help="Risk model: 'population' (1/g, the default), 'adversary' (an attacker who stops when attacking no "
             "longer pays, parameters from the spec's [adversary] table; 'deid-sql help adversary'), or without a "
             "census (the spec gives population = { size = N } or [weights]; 'deid-sql help no-census'): 'pitman', "
             "'zayatz', 'snb', 'dankar' (population uniques estimated from the sample) or 'benedetti-franconi' "
             "(individual risk). Overrides the spec's risk.")
    if not old_risk:
        return option
    old = renamed("--risk", "--risk-model", "risk_model", type=RegisteredChoice(RISK_MODELS))
    return lambda fn: option(old(fn))


@contextmanager
def open_problem(spec: Path, risk: str | None = None, targets: Sequence[Target] = ()) -> Iterator[Problem]:
    """The problem of SPEC; ``targets`` (what the command will write) are checked first, on the
    engine the spec names, before a row is read: an output that exists is refused at once."""
    parsed = Spec.read(spec)
    backend = LazyBackend(parsed.backend.engine, parsed.backend.options())  # connects when something needs it
    try:
        check_targets(parsed, backend, targets)  # type: ignore[arg-type]
    except BaseException:
        backend.close()
        raise
    problem = Problem.from_spec(parsed, backend=backend, risk=risk)  # type: ignore[arg-type]
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

    from ..release.unit import PERSONS, RECORDS

    unit = PERSONS if f.unit == PERSONS.many else RECORDS  # the figures' words: "max risk per person"
    groups = f"{f.groups:,} group" + ("" if f.groups == 1 else "s")
    echo(f"  released {f.records:,} {f.unit}: {groups}, k = {f.k:,}, expected re-identifications "
         f"{f.expected_reidentifications:,.4g}, max {unit.risk} {f.max_record_risk:.4g}, risk {f.risk:.4g}"
         + (f", {f.suppressed:,} suppressed" if f.suppressed else "")
         + (f", {f.outside:,} outside the domain (released as the outside label)" if f.outside else ""))
    union = getattr(f, "union", None)
    if union is not None:  # what the recipient holds with this release (the ledger's earlier releases)
        echo(f"  {union.words()}: k = {union.k:,}, expected re-identifications "
             f"{union.expected_reidentifications:,.4g}, max {unit.risk} {union.max_record_risk:.4g}, "
             f"risk {union.risk:.4g} ({union.persons:,} of these {f.unit} held before)")
    checks = "; ".join(f"{c.figure} {c.value:.6g} {'<=' if c.at_most else '>='} {c.limit:.6g}"
                       + (" (safe harbor)" if c.key.startswith("no_riskier_than") else "")
                       + ("" if c.passed else " FAILED") for c in verdict.checks)
    if verdict.accepted_risk and not verdict.passed:
        echo(f"  gate: FAILED ({'; '.join(verdict.failures)}) — released anyway, reason recorded: "
             f"{verdict.accepted_risk}")
    else:
        original = " — the original data, accepted by [release] allow_original_data" if verdict.original_data else ""
        echo(f"  gate: passed ({checks}){original}")
    if written.sidecar:
        echo(f"  sidecar: {written.sidecar}")


class RenamedOption(click.Option):
    """The old spelling of an option (``new``): accepted, hidden from --help, and announced with one
    deprecation line on stderr when given (``renamed``)."""

    def __init__(self, *args: Any, new: str, dest: str, values: Mapping[str, tuple[str, Any]] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, hidden=True, **kwargs)
        self.new, self.dest, self.values = new, dest, values


def deprecation(old: str, new: str) -> str:
    """The one line an old spelling prints on stderr."""
    return f"warning: {old} is deprecated and will be removed; use {new} (same meaning)"


def renamed(old: str, new: str, dest: str, type: Any = None, is_flag: bool = False,
            values: Mapping[str, tuple[str, Any]] | None = None) -> Callable[[F], F]:
    """``old`` still works as the option ``new`` (whose parameter is ``dest``): the value goes to
    ``dest`` and one line on stderr says the new spelling; given together with ``new`` it is a usage
    error (two spellings, maybe two values: which one was meant cannot be told), except a flag given
    both ways (one meaning, one value).  ``values``: an old choice whose values become different new
    spellings (``--format json`` -> ``--json``): each old value -> (its new spelling, ``dest``'s value)."""
    hidden = "renamed_" + old.lstrip("-").replace("-", "_")

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            value = kwargs.pop(hidden, None)
            if value is not None and value is not False:
                spelled, spelling, given = old, new, value
                if values is not None:
                    spelling, given = values[value]
                    spelled = f"{old} {value}"
                ctx = click.get_current_context()
                source = ctx.get_parameter_source(dest)
                if source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP") and not (
                        (is_flag or values is not None) and kwargs.get(dest) == given):
                    raise click.UsageError(f"{spelled} is the old spelling of {spelling}; give {spelling} only", ctx)
                click.echo(deprecation(spelled, spelling), err=True)
                kwargs[dest] = given
            return fn(*args, **kwargs)

        extra: dict[str, Any] = ({"is_flag": True} if is_flag else
                                 {"type": click.Choice(list(values)), "default": None} if values is not None else
                                 {"type": type, "default": None})
        return click.option(old, hidden, cls=RenamedOption, new=new, dest=dest, values=values,  # type: ignore[return-value]
                            **extra)(wrapper)

    return decorate


STARTED = "deid_sql.started"  # click's ctx.meta key: when the root group began parsing (cli/main.py)


def reports_wall_time(fn: F) -> F:
    """End a command that prints how long its steps took with the wall time of the whole run, from
    the command line's parsing (before the command's module is imported) to its last line: the step
    times alone would hide reading the data, comparisons and writes."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context(silent=True)
        started = ctx.meta.get(STARTED) if ctx is not None else None
        started = started if started is not None else time.perf_counter()
        result = fn(*args, **kwargs)
        click.echo(f"done in {time.perf_counter() - started:.1f} s (wall time of the whole command)")
        return result

    return wrapper  # type: ignore[return-value]
