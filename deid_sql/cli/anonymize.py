"""``deid-sql anonymize``: the optimal full-domain generalization with record suppression."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import DeidError, OutputError
from ..jobs.anonymize import (
    METRICS,
    T_DISTANCES,
    anonymize,
    privacy_models,
    release_plan,
    searches_union,
    spec_models,
    with_earlier,
)
from ..jobs.earlier import earlier_releases
from ..problem import Problem
from ..release.plan import ReleasePlan
from ..release.targets import release_targets
from ..release.unit import Unit
from ..search.bfs import STORES
from ..search.paths import DEFAULT_TRAVERSAL, TRAVERSALS
from .options import (
    FiniteFloat,
    accept_risk_option,
    echo_release,
    handles_errors,
    min_k_option,
    open_problem,
    renamed,
    reports_wall_time,
    risk_model_option,
    spec_argument,
    view_options,
)
from .report import finish_release_report, prepare_release_report, report_option, written_files


@click.command(name="anonymize")
@spec_argument
@min_k_option("k-anonymity: every group released has at least K records (the spec's [release] min_k).")
@renamed("--k", "--min-k", "k", type=int)
@click.option("--min-l", "l", type=int, default=None, metavar="L",
              help="Distinct ℓ-diversity on --sensitive: every group released has at least L distinct values.")
@renamed("--l", "--min-l", "l", type=int)
@click.option("--min-entropy-l", "min_entropy_l", type=FiniteFloat(1.0), default=None, metavar="L",
              help="Entropy ℓ-diversity on --sensitive: exp(entropy) of every released group's values at least L.")
@click.option("--recursive-cl", "recursive_cl", type=FiniteFloat(0.0, low_open=True), nargs=2, default=None,
              metavar="C L", help="Recursive (c,ℓ)-diversity on --sensitive: in every released group the most common "
                                  "value is held by fewer than C times the ℓ-th and rarer values together.")
@click.option("--max-t", "max_t", type=FiniteFloat(0.0, 1.0, low_open=True), default=None, metavar="T",
              help="t-closeness on --sensitive: every released group's values within T of the whole source's, "
                   "by --t-distance.")
@click.option("--t-distance", "t_distance", type=click.Choice(list(T_DISTANCES)), default=None,
              help="The distance of --max-t: equal, ordered (a numeric column) or hierarchical (--t-hierarchy).")
@click.option("--t-hierarchy", "t_hierarchy", type=click.Path(path_type=Path, dir_okay=False), default=None,
              metavar="FILE.csv", help="The sensitive column's hierarchy for --t-distance hierarchical.")
@click.option("--max-confidence", "max_confidence", type=FiniteFloat(0.0, 1.0, low_open=True), default=None,
              metavar="A", help="Confidence bound on --sensitive: at most a share A of a released group holds any "
                                "one value ((α,k)-anonymity's α).")
@click.option("--max-presence", "max_presence", type=FiniteFloat(0.0, 1.0, low_open=True), default=None,
              metavar="D", help="δ-presence: at most a share D of a released group's census people is released "
                                "(needs the spec's population).")
@click.option("--sensitive", default=None, metavar="COLUMN",
              help="The sensitive column (not a QI) of --min-l, --min-entropy-l, --recursive-cl, --max-t and "
                   "--max-confidence.")
@click.option("--max-mean-record-risk", "risk", type=FiniteFloat(0.0, 1.0, low_open=True), default=None, metavar="R",
              help="Average re-identification risk: the released records' mean record risk (expected "
                   "re-identifications per record, the release figure mean_record_risk) at most R, with the record "
                   "risk of --risk-model or the spec's risk; the riskiest groups are suppressed to meet it.")
@renamed("--risk", "--max-mean-record-risk", "risk", type=FiniteFloat(0.0, 1.0, low_open=True))
@click.option("--max-suppressed-share", "suppression", type=FiniteFloat(0.0, 1.0), default=0.0, show_default=True,
              metavar="SHARE", help="Share of records that may be suppressed, at most (0.04 = 4 %).")
@renamed("--suppression", "--max-suppressed-share", "suppression", type=FiniteFloat(0.0, 1.0))
@click.option("--metric", type=click.Choice(sorted(METRICS)), default="loss", show_default=True,
              help="Quality model to optimize: loss, nue (non-uniform entropy), dm (discernibility), kl.")
@click.option("--time-limit", type=FiniteFloat(0.0), default=None,
              help="Stop after S seconds with the best found so far.")
@click.option("--traversal", type=click.Choice(list(TRAVERSALS)), default=DEFAULT_TRAVERSAL, show_default=True,
              help="How the search walks the transformations; every traversal finds an equally good optimum. "
                   "'paths' (fastest, fewest checks) takes them in order of the best quality they could have and "
                   "settles each unknown one by a binary search along a path to the top; 'best-first' climbs from "
                   "the original data, best bound first, for comparison. "
                   "Example: --traversal best-first")
@click.option("--store", type=click.Choice(sorted(STORES)), default="tree", show_default=True,
              help="How predictive properties are kept: a prefix tree (fastest), or a list with or without "
                   "the antichain invariant (for comparison).")
@click.option("--out", "-o", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the de-identified table (.parquet, .csv or .duckdb).")
@click.option("--table", default=None, metavar="NAME",
              help="Table name inside a .duckdb --out (default deidentified), or the table to create in the "
                   "spec's PostgreSQL or Spark engine when --out is left out.")
@view_options
@click.option("--save-policy", type=click.Path(path_type=Path, dir_okay=False), default=None, metavar="FILE.json",
              help="Save the optimum (levels and suppressed groups) as a policy file, to apply to new batches "
                   "with 'deid-sql apply'.")
@click.option("--overwrite", is_flag=True, help="Replace an existing output file, table, view or policy file.")
@click.option("--store-stats", is_flag=True, help="Also print how each store of predictive properties was used.")
@risk_model_option()
@accept_risk_option
@report_option
@handles_errors
@reports_wall_time
def anonymize_(spec: Path, k: int | None, l: int | None, min_entropy_l: float | None,  # noqa: E741
               recursive_cl: tuple[float, float] | None, max_t: float | None, t_distance: str | None,
               t_hierarchy: Path | None, max_confidence: float | None, max_presence: float | None,
               sensitive: str | None, risk: float | None,
               suppression: float, metric: str, time_limit: float | None, traversal: str, store: str,
               out: Path | None, table: str | None, view: str | None, db: Path | None, save_policy: Path | None,
               overwrite: bool, store_stats: bool, risk_model: str | None, accept_risk: str | None,
               report: Path | None) -> None:
    """Find the optimal full-domain generalization (hierarchy levels) with suppression.

    The optimum is released like any policy: --out writes a file (or --table a table of the engine),
    --view creates a view, --save-policy writes a policy file for new batches; suppressed records show
    '*' and are flagged, and every release goes through the release gate with its record.
    --report FILE.html adds the report a reviewer signs, describing the suppression too.

    Example: deid-sql anonymize demo/demo.toml --min-k 2 --max-suppressed-share 0.05 --out demo-2anon.parquet

    Example: deid-sql anonymize demo/demo.toml --min-k 2 --traversal best-first
    """
    targets = [name for name, given in (("--out", out is not None or (table is not None and view is None)),
                                         ("--view", view is not None)) if given]
    if len(targets) > 1:
        raise OutputError("give one release: --out FILE (or --table NAME in the engine) or --view NAME, not both")
    if db is not None and view is None:
        raise OutputError("--db is the DuckDB file of --view; give --view NAME too")
    if report is not None and not targets:
        raise OutputError("--report describes a release: give --out FILE, --table NAME or --view NAME too")
    early = release_targets(out=out, table=table if targets else None, view=view, db=db, report=report,
                            policy_file=save_policy, replace=overwrite)
    with open_problem(spec, risk_model, early) as problem:
        flags = (k, l, risk, min_entropy_l, recursive_cl, max_t, max_confidence, max_presence)
        if all(flag is None for flag in flags) and t_distance is None and t_hierarchy is None:
            models = spec_models(problem)  # the spec's [release] criteria
        else:
            models = privacy_models(k, l, sensitive, risk, min_entropy_l=min_entropy_l,
                                    recursive_cl=_recursive(recursive_cl), max_t=max_t, t_distance=t_distance,
                                    max_confidence=max_confidence, max_presence=max_presence,
                                    hierarchy=str(t_hierarchy) if t_hierarchy is not None else None)
        earlier = earlier_releases(problem)  # what the recipient holds: the search judges the union's k
        models = with_earlier(models, earlier)
        if earlier is not None:
            searched = searches_union(models)
            click.echo(f"with the {earlier.words()}: " + ("the search keeps k over what they will hold" if searched
                       else "no k to search on; the release gate judges what they will hold"))
        run = anonymize(problem, models, suppression, metric, time_limit, store, traversal)
        r, best = run.result, run.result.optimum
        if best is None:
            click.echo(f"no transformation meets the privacy model with at most {suppression:.1%} suppressed "
                       f"({r.checked:,} checked; search {r.seconds:.2f} s)")
        else:
            click.echo(f"optimum      {run.space.text(best.levels)}")
            click.echo(f"{metric:<12} {best.quality:.6g}")
            unit = Unit.of(problem.spec.person)  # the cells count persons with [person]
            click.echo(f"suppressed   {unit.count(best.suppressed)} ({best.suppressed_share:.2%}), "
                       f"{best.groups_kept:,} groups kept")
        click.echo(f"checked      {r.checked:,} of {r.size:,} transformations ({r.checked_share:.2%}), "
                   f"{r.pruned:,} excluded by their quality bound; search {r.seconds:.2f} s ({r.traversal})"
                   + (" (time limit reached: best found so far)" if r.timed_out else ""))
        if store_stats:
            for name, s in r.stores.items():
                rate = s.hits / s.queries if s.queries else 0.0
                size = s.max_size / s.inserts if s.inserts else 0.0
                click.echo(f"  {name:<26} inserts {s.inserts:,}  queries {s.queries:,}  hits {rate:.1%}  "
                           f"max antichain {s.max_size:,} ({size:.1%} of inserts)")
        if best is None:
            return
        plan = release_plan(problem, run)
        if targets:
            _release(problem, plan, out, table, view, db, overwrite, accept_risk, report)
        if save_policy is not None:
            from ..policyfile.format import MEASURE  # only here: a run without --save-policy skips their import
            from ..policyfile.save import save_policy_file

            saved = save_policy_file(problem, plan, save_policy, overwrite=overwrite)
            click.echo(f"saved policy {saved.path} (drift limit {saved.threshold:.6g} on {MEASURE})")


def _recursive(given: tuple[float, float] | None) -> tuple[float, int] | None:
    """--recursive-cl C L: ℓ a whole number (click gives both as numbers)."""
    if not given:
        return None
    c, l = given  # noqa: E741 - the model's name
    if l != int(l):
        raise DeidError(f"--recursive-cl {c:g} {l:g}: ℓ must be a whole number (e.g. --recursive-cl 3 2)")
    return c, int(l)


def _release(problem: Problem, plan: ReleasePlan, out: Path | None, table: str | None, view: str | None,
             db: Path | None, overwrite: bool, accept_risk: str | None, report: Path | None) -> None:
    """The optimum through the release path every policy takes: a file, an engine table or a view
    (the writers are imported here: a run that only searches does not load them)."""
    from ..release.output import create_view, materialize

    if view is not None:
        where = f"view {view} in {db if db is not None else 'the database'}"
        pending = prepare_release_report(problem, plan, report, overwrite, accept_risk, where)
        written = create_view(problem, plan, db, view, overwrite, accept_risk=accept_risk)
        click.echo(f"created view {view} in {db if db is not None else 'the engine'}")
        echo_release(written)
        finish_release_report(pending, [], figures=written.figures)
        return
    where = str(out) if out is not None else f"table {table} in the {problem.spec.backend.engine} engine"
    pending = prepare_release_report(problem, plan, report, overwrite, accept_risk, where, out)
    written = materialize(problem, plan, out, table=table, overwrite=overwrite, accept_risk=accept_risk)
    shown = (f"{written.path}" if written.path else "the database") + (f" table {written.table}" if written.table
                                                                          else "")
    click.echo(f"wrote {written.rows:,} rows to {shown}")
    echo_release(written)
    finish_release_report(pending, written_files(written), figures=written.figures)
