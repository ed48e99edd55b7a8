"""Commands built on Safe Harbor and the boundary searches: ``safe-harbor`` and ``alternatives``."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import click

from .. import progress
from ..errors import DeidError, OutputError
from ..evaluate import Metrics
from ..problem import Problem
from ..release.constraint import AttributeConstraint, CriteriaConstraint
from ..release.output import create_view, materialize
from ..release.plan import plan_of
from ..release.safe_harbor import AGE_LIMIT, PREFIX_LIMIT, missing_roles, safe_harbor, safe_harbor_metrics
from ..release.targets import release_targets
from ..release.unit import Unit
from ..report import write_boundaries
from ..search import BoundarySearch, bisecting_policy_search, directed_policy_search
from .options import (
    accept_risk_option,
    echo_release,
    handles_errors,
    open_problem,
    renamed,
    reports_wall_time,
    risk_model_option,
    spec_argument,
)
from .report import finish_release_report, prepare_release_report, report_option, written_files

METHODS = {"bps": bisecting_policy_search, "directed": directed_policy_search}


@click.command(name="safe-harbor")
@spec_argument
@click.option("--out", "-o", "out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the Safe Harbor release (.parquet, .csv or .duckdb).")
@renamed("--materialize", "--out", "out", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--overwrite", is_flag=True, help="Replace an existing --out file or --view.")
@click.option("--view", "view_name", default=None, metavar="NAME", help="Also create this DuckDB view (needs --db).")
@click.option("--db", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="DuckDB file for --view.")
@renamed("--replace", "--overwrite", "overwrite", is_flag=True)
@accept_risk_option
@report_option
@handles_errors
def safe_harbor_(spec: Path, out: Path | None, overwrite: bool, view_name: str | None, db: Path | None,
                 accept_risk: str | None, report: Path | None) -> None:
    """Apply HIPAA Safe Harbor (ZIP3 with small prefixes to 000, ages 90+, dates to years) and print its risk.

    Example: deid-sql safe-harbor demo/demo.toml --out safe_harbor.parquet
    """
    if (view_name is None) != (db is None):
        raise OutputError("--view and --db go together: name the view and the DuckDB file")
    early = (release_targets(out=out, replace=overwrite) if out is not None else [])
    early += release_targets(view=view_name, db=db, replace=overwrite) if view_name is not None else []
    with open_problem(spec, targets=early) as problem:
        sh = safe_harbor(problem)
        m = problem.evaluate(sh.recoding)
        source = "census prefix populations" if sh.prefix_population is not None else "the HHS 2000-census list"
        restricted = ", ".join(sh.restricted_prefixes) or "none"
        click.echo(f"Safe Harbor for {spec}")
        click.echo(f"  zip   first 3 digits; prefixes with <= {PREFIX_LIMIT:,} people become 000 ({source}): "
                   f"{restricted}" if sh.zip_qi is not None else "  zip   no ZIP QI in the spec: nothing to cut")
        click.echo(f"  age   {AGE_LIMIT} and above become {AGE_LIMIT}+; dates become years; other QIs kept")
        click.echo(f"  risk {m.risk:.6g}  loss {m.loss:.6g}  expected re-identifications "
                   f"{m.expected_reidentifications:.2f}  k {m.k}  sample-unique {Unit.of(problem.spec.person).many} "
                   f"{m.sample_unique_records}")
        if report is not None and out is None and view_name is None:
            raise OutputError("--report describes a release: add --out FILE or --view NAME --db FILE "
                              "(or run 'deid-sql report SPEC --policy safe-harbor --out FILE.html')")
        released = " and ".join(([f"{out}"] if out is not None else [])
                                + ([f"view {view_name} in {db}"] if view_name is not None else []))
        plan = plan_of(problem, sh.recoding)
        pending = prepare_release_report(problem, plan, report, overwrite, accept_risk, released, out)
        undo: list[Path] = []
        if out is not None:
            written = materialize(problem, plan, out, overwrite=overwrite, accept_risk=accept_risk)
            click.echo(f"wrote {written.rows:,} rows to {written.path}")
            echo_release(written)
            undo = written_files(written)
        if view_name is not None and db is not None:
            shown = create_view(problem, plan, db, view_name, overwrite, accept_risk=accept_risk)
            click.echo(f"created view {view_name} in {db}")
            echo_release(shown)
        finish_release_report(pending, undo)


@click.command()
@spec_argument
@click.option("--max-risk", "threshold", default=None, metavar="T|safe-harbor",
              help="The risk limit T (the spec's [release] max_risk: the normalized risk, in (0, 1]), or "
                   "'safe-harbor' for Safe Harbor's risk on the same data.  [default: safe-harbor; when Safe "
                   "Harbor cannot be built or changes nothing the spec's cuts do not, the spec's [release] "
                   "criteria]")
@renamed("--threshold", "--max-risk", "threshold", type=str)
@renamed("-t", "--max-risk", "threshold", type=str)
@click.option("--iterations", "-n", type=click.IntRange(min=1), default=100, show_default=True,
              help="Boundary policies to search for (one per iteration; repeats are kept once).")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@click.option("--method", type=click.Choice(sorted(METHODS)), default="bps", show_default=True,
              help="Bisecting Policy Search, or the directed walk it is compared with.")
@click.option("--out", "-o", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the boundary policies to .csv or .json.")
@click.option("--overwrite", is_flag=True, help="Replace an existing --out file.")
@click.option("--bits", is_flag=True, help="Also give each policy of --out as its bit string (a last column).")
@risk_model_option(old_risk=True)
@handles_errors
@reports_wall_time
def alternatives(spec: Path, threshold: str | None, iterations: int, seed: int, method: str, out: Path | None,
                 overwrite: bool, bits: bool, risk_model: str | None) -> None:
    """Find boundary policies no riskier than a threshold (default: Safe Harbor's risk).

    When the spec's [release] has attribute criteria (min_l, max_confidence, max_t…), every policy
    found meets them too.  When Safe Harbor cannot be built (no ZIP or age role) or changes nothing
    the spec's cuts do not (no ZIP, nobody 90 or older, no dates), the default searches the finest
    policies the spec's [release] criteria accept (min_k, max_record_risk, …).

    Example: deid-sql alternatives demo/demo.toml --max-risk safe-harbor --iterations 100 --seed 1 --out alt.csv
    """
    if out is not None:
        if out.suffix.lower() not in (".csv", ".json"):
            raise OutputError(f"cannot tell the format of {out}; use .csv or .json")
        if out.exists() and not overwrite:
            raise OutputError(f"output {out} already exists; pass --overwrite to replace it")
    with open_problem(spec, risk_model) as problem:
        problem.require_monotone_risk(f"{method} (boundary policies)")
        reference = None
        constraint: AttributeConstraint | CriteriaConstraint | None = AttributeConstraint.of(problem)
        if threshold is None:
            reason = _no_safe_harbor(problem)
            threshold = "safe-harbor" if reason is None else None
            if reason is not None:
                criteria = CriteriaConstraint(problem, constraint)
                if not criteria:
                    raise DeidError(f"{reason}; give --max-risk T (a normalized risk in (0, 1]) or declare [release] "
                                    f"criteria (min_k, max_record_risk) to search by")
                click.echo(f"{reason}: searching by the spec's [release] criteria instead", err=True)
                constraint, value = criteria, problem.spec.release.max_risk or 1.0
        if threshold == "safe-harbor":
            reference = safe_harbor_metrics(problem)
            value = reference.risk
        elif threshold is not None:
            try:
                value = float(threshold)
            except ValueError:
                raise DeidError(f"--max-risk {threshold!r} is neither 'safe-harbor' nor a number") from None
            if not math.isfinite(value):  # refused here, before the progress bar starts, in one line
                raise DeidError(f"--max-risk {threshold!r} is not a finite number; give 'safe-harbor' or a risk "
                                f"in (0, 1]")
        with progress.counting(f"{method}: {iterations:,} iterations", iterations) as done:
            result = METHODS[method](problem.lattice, problem.fast, value, iterations, seed, progress=done.advance,
                                     constraint=constraint)
        if out is not None:
            write_boundaries(result, out, overwrite, bits)
        _summary(result, reference, out, "criteria" if isinstance(constraint, CriteriaConstraint) else
                 "attribute criteria")
    if result.interrupted:
        click.echo("interrupted: the results above are what was found before Ctrl-C", err=True)
        sys.exit(130)


def _no_safe_harbor(problem: Problem) -> str | None:
    """Why Safe Harbor's risk cannot be the default threshold (None when it can): the spec lacks its
    roles, or Safe Harbor is no stricter than the finest policy the spec allows (no ZIP, nobody 90
    or older, no dates: every policy, the finest too, is no riskier, so none is a boundary)."""
    missing = missing_roles(problem.spec)
    if missing:
        return f"Safe Harbor cannot be built (no QI has the role {' or '.join(repr(m) for m in missing)})"
    finest = problem.evaluate(problem.lattice.bottom()).risk
    if safe_harbor_metrics(problem).risk >= finest:
        return (f"Safe Harbor is no stricter on this data than the finest policy the spec allows (risk "
                f"{safe_harbor_metrics(problem).risk:.6g} >= {finest:.6g})")
    return None


def _summary(result: BoundarySearch, reference: Metrics | None, out: Path | None,
             words: str = "attribute criteria") -> None:
    click.echo(f"{result.method}: threshold {result.threshold:.6g}, {result.iterations} iteration(s), "
               f"seed {result.seed}")
    if result.constraint is not None:
        click.echo(f"  {words} of [release], met by every policy found: {result.constraint}")
    click.echo(f"  boundary policies found      {len(result.found)}")
    click.echo(f"  non-dominated among them     {result.non_dominated}")
    click.echo(f"  policies evaluated           {result.evaluations} "
               f"({result.evaluations_per_boundary:.1f} per boundary policy)")
    click.echo(f"  search time                  {result.seconds:.2f} s ({result.seconds_per_boundary:.4f} s per "
               f"boundary policy)")
    if reference is not None and result.found:
        better = [b for b in result.found if b.metrics.loss < reference.loss]
        best = min(result.found, key=lambda b: b.metrics.loss)
        click.echo(f"  beat Safe Harbor (risk <= {reference.risk:.6g}, loss < {reference.loss:.6g}): {len(better)}; "
                   f"best loss {best.metrics.loss:.6g}")
        click.echo(f"  best: {best.policy.readable()[:240]}")
    elif words == "criteria" and result.found:  # searched by [release]: the finest accepted policy that loses least
        best = min(result.found, key=lambda b: b.metrics.loss)
        click.echo(f"  best loss {best.metrics.loss:.6g}: {best.policy.readable()[:240]}")
    if out is not None:
        click.echo(f"wrote {len(result.found)} policies to {out}")
