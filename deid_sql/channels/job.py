"""Channel expansion end to end: spec → input channels → candidates → program →
whole subjects → release plan; and writing the release with its composition table.

The continuous LP is always solved (it is the paper's model and a lower bound on
any release); whole subjects come from HiGHS's MILP when asked or when the
instance is small, otherwise from rounding the LP (METHODS decision 8).  With
``integer = "auto"`` a MILP runs for at most ``SMALL_SUBJECTS`` subjects and
``SMALL_VARIABLES`` variables, within ``time_limit``; its assignment is released when HiGHS
proves it optimal (never worse than the rounded LP, and reproducible), else the rounded LP.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from sqlglot import exp

from ..backends import Backend, connect
from ..compiler.compile import compile_source, to_sql
from ..errors import BackendError, DataError, DeidError, SpecError
from ..loading.load import SOURCE_VIEW, read_problem
from ..spec.file import Spec
from . import candidates as cand
from .assignment import Assignment, Repairs, whole_subjects
from .inputs import Classification, InputChannels, RiskRule, count_channels, duplicate_identities, risk_rule
from .program import Program, Solution, build, solve_lp, solve_milp
from .release import ChannelPlan, ReleaseCheck, check, plan, release_query
from .spec import ChannelSpec

SMALL_SUBJECTS = 100_000
SMALL_VARIABLES = 20_000


@dataclass
class ChannelJob:
    """A solved channel expansion, ready to release (keeps the backend open: ``close()``)."""

    spec: Spec
    backend: Backend
    source: exp.Expression
    columns: list[str]
    inputs: InputChannels
    rule: RiskRule
    classes: Classification
    program: Program
    lp: Solution
    whole: Assignment
    repairs: Repairs
    route: str  # how the whole-subject assignment was found
    release: ChannelPlan
    duplicates: int  # identity keys naming more than one row (0: the check joins back one to one)
    seconds: dict[str, float]

    @property
    def settings(self) -> ChannelSpec:
        assert self.spec.feature("channels") is not None
        return self.spec.feature("channels")

    def query(self, source: exp.Expression | None = None, truth: bool = False) -> exp.Select:
        """The release ``SELECT`` over ``source`` (default: the spec's source, read in place)."""
        return release_query(source if source is not None else self.source.copy(), self.columns, self.settings,
                             self.release, self.inputs, self.settings.seed, truth)

    def compile(self, dialect: str = "duckdb", table: str | None = None, pretty: bool = True) -> str:
        """The release as SQL text for ``dialect`` (see ``compile_source`` for what it reads)."""
        source = compile_source(self.spec.source, self.source, dialect, table)
        return to_sql(self.query(source), dialect, pretty=pretty)

    def check(self) -> ReleaseCheck:
        """(6)/(8) recomputed from the released rows (joined back to the source when identities are unique)."""
        join_back = self.duplicates == 0
        released = self.query(truth=not join_back)
        return check(self.backend, released, self.source.copy(), self.settings, self.inputs, self.rule,
                     self.release, join_back)

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> ChannelJob:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def solve(spec: Spec | str | Path, candidates: int | str | None = None, seed: int | None = None,
          integer: str | None = None, backend: Backend | None = None) -> ChannelJob:
    """Load, classify, generate candidates, solve and plan the release; CLI options override the spec."""
    spec = spec if isinstance(spec, Spec) else Spec.read(spec)
    channels = _require_channels(spec)
    overrides = {k: v for k, v in (("candidates", candidates), ("seed", seed), ("integer", integer)) if v is not None}
    spec = spec.with_feature("channels", replace(channels, **overrides))
    backend = backend or connect(spec.backend.engine, **spec.backend.options())
    try:
        return _solve(spec, backend)
    except BaseException:
        backend.close()
        raise


@dataclass
class Loaded:
    """A channel spec checked against its data: input channels counted and classified."""

    spec: Spec
    source: exp.Expression
    columns: list[str]
    inputs: InputChannels
    rule: RiskRule
    classes: Classification
    duplicates: int
    seconds: float


def load(spec: Spec, backend: Backend) -> Loaded:
    """Read the source once (one GROUP BY), check the data against ``[channels]`` and classify."""
    settings = _require_channels(spec)
    start = time.perf_counter()
    names = [*settings.related, settings.confidential, *settings.identity]
    try:  # the header first, so a missing column is named rather than failing the typed read
        backend.create_temp_view(SOURCE_VIEW, exp.select("*").from_(backend.relation(spec.source, {})))
        present = backend.columns(SOURCE_VIEW)
        relation = backend.relation(spec.source, {n: True for n in names if n in present})
        backend.create_temp_view(SOURCE_VIEW, exp.select("*").from_(relation.copy()))
        columns = list(backend.columns(SOURCE_VIEW))
    except BackendError as e:
        raise DataError(read_problem("source", spec.source.describe(), str(e))) from None
    view = exp.to_table(SOURCE_VIEW)
    inputs = count_channels(backend, view, settings, columns, spec.source.describe())
    rule = risk_rule(inputs, settings)
    _require_releasable(inputs, rule)
    classes = rule.classify(inputs)
    duplicates = duplicate_identities(backend, view, settings)
    return Loaded(spec, relation, columns, inputs, rule, classes, duplicates, time.perf_counter() - start)


def _solve(spec: Spec, backend: Backend) -> ChannelJob:
    settings = spec.feature("channels")
    assert settings is not None
    loaded = load(spec, backend)
    inputs, rule, classes = loaded.inputs, loaded.rule, loaded.classes
    seconds: dict[str, float] = {"read": loaded.seconds}
    start = time.perf_counter()
    outputs = cand.generate(inputs, classes, settings.candidates, settings.max_size, settings.seed, settings.outputs)
    program = build(inputs, classes, rule, outputs)
    seconds["build"] = time.perf_counter() - start
    lp = solve_lp(program)
    seconds["lp"] = lp.seconds
    rounded, repairs = whole_subjects(program, lp.x)
    whole, route = rounded, "LP rounded by largest remainder"
    if _wants_milp(settings.integer, inputs, program):
        exact = solve_milp(program, settings.time_limit)
        seconds["milp"] = exact.seconds if exact else settings.time_limit
        # only a proven optimum: an incumbent cut off by the clock depends on machine load, and
        # the same spec and seed must give the same release
        if exact is not None and exact.optimal:
            whole, repairs, route = Assignment(program, exact.x), Repairs(), "MILP, proven optimal"
        else:
            route += f" (the MILP proved no optimum within {settings.time_limit:g} s)"
    if whole.violations():
        raise DeidError("the whole-subject assignment breaks (7) or (9); this should not happen — please report it")
    release = plan(whole)
    return ChannelJob(spec, backend, loaded.source, loaded.columns, inputs, rule, classes, program, lp, whole,
                      repairs, route, release, loaded.duplicates, seconds)


def _require_channels(spec: Spec) -> ChannelSpec:
    if spec.feature("channels") is None:
        raise SpecError(f"spec {spec.path} has no [channels] table; add one (its keys: 'deid-sql help "
                        f"channels') to run a channel expansion")
    return spec.feature("channels")


def _wants_milp(mode: str, inputs: InputChannels, program: Program) -> bool:
    if mode == "always":
        return True
    return mode == "auto" and inputs.total <= SMALL_SUBJECTS and program.n_vars <= SMALL_VARIABLES


def _require_releasable(inputs: InputChannels, rule: RiskRule) -> None:
    """The all-channel output with everyone must be safe (§3.1); else nothing can be released."""
    if rule.b is None:
        return  # u_k >= P(v^k) was checked, so (6) holds for the whole data set
    share = inputs.prior * rule.c
    total = float(share.sum())
    if total - rule.b > 1e-12:
        order = np.argsort(-share)
        worst = ", ".join(f"{inputs.values[k]!r} (c·P = {share[k]:.4g})" for k in order[:3] if share[k] > 0)
        raise DeidError(f"no release is possible: even the channel of all input channels has weighted risk "
                        f"{total:.4g} > b = {rule.b:g} (eq. 8); the values that make it so: {worst}; raise b or "
                        f"lower their weights")
