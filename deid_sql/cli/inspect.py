"""Commands that read: ``validate`` and ``evaluate``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..backends import connect
from ..errors import DeidError, PolicyError, SpecError
from ..policies.lattice import Policy
from ..problem import Problem
from ..spec.file import Spec
from .options import (
    echo_json,
    handles_errors,
    open_problem,
    release_plan,
    renamed,
    risk_model_option,
    spec_argument,
    suppress_option,
)

if TYPE_CHECKING:
    from ..channels.job import Loaded
    from ..release.plan import ReleasePlan


@click.command()
@spec_argument
def validate(spec: Path) -> None:
    """Check SPEC against its data and report every problem at once.

    Example: deid-sql validate demo/demo.toml
    """
    try:
        parsed = Spec.read(spec)
        if parsed.qis:
            with Problem.from_spec(parsed, check_roles=True, cache=False) as problem:  # always reads the data
                _report_problem(problem)
        if parsed.feature("channels") is not None:
            from ..channels.job import load  # scipy's LP solvers: loaded only for a spec with [channels]

            with connect(parsed.backend.engine, **parsed.backend.options()) as backend:
                _report_channels(load(parsed, backend))
    except SpecError as e:
        for p in e.problems:
            click.echo(f"error: {p}", err=True)
        sys.exit(2)
    except DeidError as e:  # e.g. the engine failing to read the data: still one line, exit 2
        click.echo(f"error: {e}", err=True)
        sys.exit(2)


def _report_problem(problem: Problem) -> None:
    s = problem.spec
    click.echo(f"ok: {s.path}")
    unit = f"persons ([person] {s.person.column})" if s.person is not None else "records"
    click.echo(f"  source     {s.source.describe()}: {problem.sample.total:,} {unit} in "
               f"{len(problem.sample):,} cells")
    if problem.population is not None and s.population is not None:
        click.echo(f"  population {s.population.describe()}: {problem.population.total:,} people in "
                   f"{len(problem.population):,} cells")
    elif s.no_census:
        from ..spec.population_size import describe

        weights = f"; group sizes from the summed weights of column {s.weights!r}" if s.weights else ""
        size = describe(s.population_size, s.population_region) if s.population_size else \
            f"{problem.population_total:,} people (the sum of the weights)"
        click.echo(f"  population no census: {size}{weights}; risk {s.risk}")
    else:
        click.echo("  population sample (group sizes from the sample itself)")
    name_width = max([12, *(len(q.name) for q in s.qis)])  # long QI names widen the column, never shift it
    size_width = max([6, *(len(f"{d.size:,}") for d in problem.domains)])
    for q, d in zip(s.qis, problem.domains):
        click.echo(f"  qi {q.name:<{name_width}} {d.kind:<8} {d.size:>{size_width},} values  {d.text(0)} … "
                   f"{d.text(d.size - 1)}")
    for note in problem.notes:
        click.echo(f"  text       {note}")
    for note in problem.order_notes:
        click.echo(f"  hierarchy  {note}")
    for warning in _hierarchy_warnings(problem):
        click.echo(f"  warning    {warning}")
    lattice = problem.lattice
    allowed = (f" ({lattice.free_bits} allowed by the spec's cuts: 2^{lattice.free_bits} policies)"
               if lattice.constrained else "")
    click.echo(f"  lattice    {lattice.nbits} bits{allowed}, gamma = {s.gamma:g}")
    released = problem.released_columns
    roles = s.columns
    shown = ", ".join(f"{name} ({role}{', ' + roles.pseudonym if role == 'pseudonymize' else ''})"
                      for name, role in released)
    click.echo(f"  released   {len(released)} columns, in this order: {shown}")
    dropped = [c for c in problem.columns if c not in dict(released)]
    if dropped:
        how = "" if all(roles.role(c) == "drop" for c in dropped) else ' (unlisted = "drop")'
        click.echo(f"  dropped    {', '.join(dropped)}{how}")
    if s.tables:
        _report_linked(problem)
    shifted = [*roles.shift, *[f"{c} ({t.name})" for t in s.tables for c in t.roles.shift]]
    if shifted and s.person is not None:
        click.echo(f"  shift      each person's dates move by one secret offset in [-{s.person.shift_days}, "
                   f"+{s.person.shift_days}] days: {', '.join(shifted)}")
    if roles.pseudonymize or shifted:
        click.echo(f"  key        HMAC-SHA-256 key from ${roles.secret_env} (set)")


def _hierarchy_warnings(problem: Problem) -> list[str]:
    """Hierarchy labels naming a range some of their values are outside (``hierarchy_labels``)."""
    from ..domains.hierarchy_labels import label_warnings

    lines: list[str] = []
    for name, domain in zip(problem.spec.qi_names, problem.domains):
        hierarchy = problem.lattice.hierarchies.get(name)
        if hierarchy is not None:
            lines += label_warnings(name, hierarchy, [domain.text(i) for i in range(domain.size)])
    return lines


def _report_linked(problem: Problem) -> None:
    """The linked tables of a set: rows, key, orphans, what each releases (opened and counted)."""
    from ..sets.release import linked_sources
    from ..sets.rows import released_columns

    for linked in linked_sources(problem):
        t = linked.table
        orphans = f"{linked.orphans:,} orphans" + (" (dropped)" if linked.orphans else "")
        shown = ", ".join(f"{name} ({role})" for name, role in released_columns(linked))
        click.echo(f"  linked     {t.name}: {t.source.describe()}, {linked.rows:,} rows, key {t.person}, {orphans}; "
                   f"releases {shown}")


def _report_channels(loaded: Loaded) -> None:
    inputs, classes, s = loaded.inputs, loaded.classes, loaded.spec
    click.echo(f"ok: {s.path} [channels]")
    click.echo(f"  source     {s.source.describe()}: {inputs.total:,} subjects in {len(inputs.keys):,} input channels")
    click.echo(f"  risky      {int(classes.risky.sum()):,} input channels, "
               f"{inputs.sizes[classes.risky].sum() / inputs.total:.1%} of subjects")
    for k, value in enumerate(inputs.values):
        u = "" if k == 0 else f"  u = {loaded.rule.u[k]:.4g}" + (f", c = {loaded.rule.c[k]:g}" if loaded.rule.b else "")
        click.echo(f"  value      {value!r:<24} P = {inputs.prior[k]:.4g}{u}{'  (none)' if k == 0 else ''}")
    if loaded.duplicates:
        click.echo(f"  identity   {loaded.duplicates:,} identity keys name several rows: the release check reads "
                   f"the release query instead of joining rows back")


@click.command()
@spec_argument
@click.option("--policy", "-p", "policies", multiple=True, metavar="P",
              help="Policy text (repeat for several); see 'deid-sql compile --help'.")
@click.option("--levels", "levels", multiple=True, metavar="L",
              help="Hierarchy levels, as 'deid-sql anonymize' prints them: 'sex:0|age:3|…' (repeat for several).")
@click.option("--path", "path", type=click.Choice(["fast", "sql"]), default="fast", show_default=True,
              help="Evaluate on the cell arrays (fast) or with the reference SQL query.")
@click.option("--json/--no-json", "as_json", default=None,
              help="Print JSON, or (--no-json) the brief table; by default the table on a terminal and JSON "
                   "otherwise, so scripts get JSON.")
@renamed("--format", "--json", "as_json", values={"json": ("--json", True), "table": ("--no-json", False)})
@click.option("--bits", is_flag=True, help="Also give each policy as its bit string (one 0/1 per boundary).")
@suppress_option
@risk_model_option(old_risk=True)
@handles_errors
def evaluate(spec: Path, policies: tuple[str, ...], levels: tuple[str, ...], path: str, as_json: bool | None,
             bits: bool, suppress_below: int | None, risk_model: str | None) -> None:
    """Print the risk and utility metrics of policies: a brief table on a terminal, JSON otherwise.

    With --suppress-below K each policy is also measured as the release that suppresses groups
    smaller than K (as materialize, view and compile release it): the figures the release gate
    measures on its rows and its verdict against the spec's [release] criteria; nothing is written.

    Example: deid-sql evaluate demo/demo.toml --policy 'age:every=10|zip:digits=3' --policy 'zip:top'

    Example: deid-sql evaluate demo/demo.toml --policy 'age:every=10|zip:digits=3' --suppress-below 5
    """
    if as_json is None:
        as_json = not sys.stdout.isatty()
    if not policies and not levels:
        raise PolicyError("say what to evaluate: --policy P (e.g. 'age:every=10|zip:digits=3') or --levels L")
    with open_problem(spec, risk_model) as problem:
        plans = ([release_plan(problem, text, None, suppress_below) for text in policies]
                 + [release_plan(problem, None, text, suppress_below) for text in levels])
        out = []
        for plan in plans:
            metrics = problem.evaluate(plan.item, path=path)
            row = {"policy": plan.text or plan.levels, "readable": plan.readable, "risk_model": problem.spec.risk,
                   **metrics.to_dict()}
            if plan.suppression is not None:
                row["release"] = release_figures(problem, plan)
            if problem.spec.no_census:  # population uniques by every estimator, beside the spec's model's figures
                from ..nocensus.risk import policy_figures  # scipy: loaded only without a census

                row["no_census"] = policy_figures(problem, plan.item)
            if plan.levels is not None:
                row["levels"] = plan.levels
            if bits:
                row["bits"] = plan.item.bit_text() if isinstance(plan.item, Policy) else None
            out.append(row)
        if as_json:
            echo_json(out[0] if len(out) == 1 else out)
        else:
            _table(out)


def release_figures(problem: Problem, plan: ReleasePlan) -> dict[str, Any]:
    """What the release gate measures on the rows of releasing ``plan`` (with its suppression) and
    its verdict, as materialize, view, compile and their --report get them: the same gate, built
    the same way, measuring the same release query; nothing is written, so nothing is refused.
    ``loss`` is the normalized loss of the released groups (as the report's), suppressed records
    counted in one group of their own."""
    from ..release.gate import ReleaseSource, build_gate
    from ..report.release_contents import Groups, losses
    from ..report.release_report import original_top_kl

    gate = build_gate(ReleaseSource.from_problem(problem), plan, f"evaluate({plan.repr_call()})",
                      whole_set=bool(problem.spec.tables))
    figures = gate.measure(problem.backend.execute, problem.query(plan, measuring=True))
    verdict = gate.verdict(figures)
    groups = Groups(problem, plan.recoding, plan.suppression, census=gate.census)
    loss = (losses(problem, plan.recoding, groups)[0] / original_top_kl(problem) if groups.suppressed
            else problem.evaluate(plan.item).loss)
    assert plan.suppression is not None
    return {"suppress_below": plan.suppression.below, **figures.to_dict(), "loss": loss,
            "gate": verdict.status, "failures": list(verdict.failures)}


def _table(rows: list[dict[str, Any]]) -> None:
    """Risk, loss and the counts a reviewer looks at first, then each policy's text and groups;
    with --suppress-below, the release's figures (what the gate measures) and its verdict."""
    if rows and "release" in rows[0]:
        _release_table(rows)
        return
    click.echo(f"{'#':>2} {'risk':>10} {'loss':>8} {'k':>6} {'exp. re-ids':>12} {'uniques':>8}  policy")
    for i, r in enumerate(rows, 1):
        click.echo(f"{i:>2} {r['risk']:>10.6f} {r['loss']:>8.4f} {r['k']:>6} {r['expected_reidentifications']:>12.2f} "
                   f"{r['sample_unique_records']:>8}  {r['policy']}")
    _readable(rows)


def _release_table(rows: list[dict[str, Any]]) -> None:
    below = rows[0]["release"]["suppress_below"]
    click.echo(f"released with --suppress-below {below}: the figures the release gate measures")
    click.echo(f"{'#':>2} {'risk':>10} {'loss':>8} {'k':>6} {'exp. re-ids':>12} {'uniques':>8} {'suppressed':>10} "
               f"{'gate':>8}  policy")
    for i, r in enumerate(rows, 1):
        f = r["release"]
        click.echo(f"{i:>2} {f['risk']:>10.6f} {f['loss']:>8.4f} {f['k']:>6} {f['expected_reidentifications']:>12.2f} "
                   f"{f['sample_unique_records']:>8} {f['suppressed']:>10} {f['gate']:>8}  {r['policy']}")
    _readable(rows)
    for i, r in enumerate(rows, 1):
        if r["release"]["failures"]:
            click.echo(f"{i}: gate {r['release']['gate']}: {'; '.join(r['release']['failures'])}")


def _readable(rows: list[dict[str, Any]]) -> None:
    for i, r in enumerate(rows, 1):
        click.echo(f"\n{i}: {r['readable']}")
        if "bits" in r:
            click.echo(f"   bits {r['bits']}")
