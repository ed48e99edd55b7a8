"""``deid-sql demo``: the main job on the embedded default problem."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import click

from ..demo import EHR_POLICIES, build_adult, build_demo, build_ehr, showcase_policies
from ..frontier_job import run_frontier
from ..output import create_view, preview
from ..policy import Policy
from ..problem import Problem
from ..release.plan import ReleasePlan, plan_of
from ..report.release_report import build_report
from ..report.release_write import write_report
from ..safe_harbor import safe_harbor_metrics
from ..search import bisecting_policy_search
from .options import handles_errors


@click.command()
@click.option("--dir", "folder", type=click.Path(path_type=Path, file_okay=False), default=Path("deid-sql-demo"),
              show_default=True, help="Folder for the demo data, spec, database, frontier and report (rewritten).")
@click.option("--seed", default=0, show_default=True, help="Seed of the synthetic data.")
@click.option("--budget", default=3_000, show_default=True, help="Policies the closing frontier search evaluates.")
@click.option("--adult", "adult_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Instead of the demo, write the Adult problems of the docs into --dir: adult.toml (Adult with "
                   "ZIP codes from the synthetic census) and adult-hierarchies.toml (ARX's hierarchies), reading "
                   "ARX's adult.csv and adult_hierarchy_*.csv from this folder in place.")
@click.option("--ehr", is_flag=True,
              help="Instead of the demo, write an encounters table (several rows per patient) and its specs into "
                   "--dir, and compare its figures counted by rows with those counted by persons; with it, "
                   "patients and diagnoses tables and a spec releasing the three together (ehr-set.toml).")
@handles_errors
def demo(folder: Path, seed: int, budget: int, adult_dir: Path | None, ehr: bool) -> None:
    """Run the whole job on a synthetic cohort: policies, Safe Harbor, alternatives, SQL, a view, the frontier,
    and the report a reviewer signs for the chosen policy (DIR/report.html).

    With --adult, write the Adult example problems instead (nothing else runs); with --ehr, the
    encounters example (one row per visit, counted in persons).

    Example: deid-sql demo --dir demo-out --budget 200
    """
    if adult_dir is not None:
        t0 = time.perf_counter()
        census, hierarchies = build_adult(folder, adult_dir, seed)
        click.echo(f"wrote {census} (Adult with ZIP codes against the synthetic census: adult.parquet, "
                   f"population.parquet) and {hierarchies} (every attribute with ARX's hierarchies, reading "
                   f"{adult_dir} in place) ({time.perf_counter() - t0:.1f} s)")
        return
    if ehr:
        _ehr(folder, seed)
        return
    _run(folder, seed, budget)


def _ehr(folder: Path, seed: int) -> None:
    """The encounters demo: the same policies' figures counted by rows and by persons."""
    t0 = time.perf_counter()
    persons, rows = build_ehr(folder, seed)
    click.echo(f"wrote {persons} (a person per patient_id) and {rows} (a row as a person) over "
               f"{folder / 'encounters.parquet'} ({time.perf_counter() - t0:.1f} s)")
    click.echo(f"wrote {folder / 'ehr-set.toml'}: patients, encounters and diagnoses released as one set "
               f"(deid-sql materialize {folder / 'ehr-set.toml'} --policy P --out FOLDER)")
    with Problem.from_spec(rows) as by_rows, Problem.from_spec(persons) as by_persons:
        click.echo(f"\n{by_rows.sample.total:,} encounters of {by_persons.sample.total:,} patients\n")
        click.echo(f"{'policy':<40}{'counted by':<12}{'k':>5}{'uniques':>9}{'exp. re-ids':>13}")
        for policy in EHR_POLICIES:
            for label, problem in (("rows", by_rows), ("persons", by_persons)):
                m = problem.evaluate(policy)
                click.echo(f"{policy:<40}{label:<12}{m.k:>5}{m.sample_unique_records:>9}"
                           f"{m.expected_reidentifications:>13.1f}")
    click.echo("\nCounted by rows, a patient's visits form a group of their own, so unique patients are missed (k and "
               "the uniques are too kind), and the expected re-identifications count visits, not people. The "
               "persons' figures are the right ones ([person] in ehr.toml; docs/persons.md).")


def _run(folder: Path, seed: int, budget: int) -> None:
    t0 = time.perf_counter()
    spec = build_demo(folder, seed)
    click.echo(f"demo data and spec in {folder} ({time.perf_counter() - t0:.1f} s)")
    t0 = time.perf_counter()
    with Problem.from_spec(spec) as problem:
        pop = problem.population.total if problem.population is not None else 0
        click.echo(f"loaded {problem.sample.total:,} patients ({len(problem.sample):,} cells) against "
                   f"{pop:,} census people; lattice of {problem.lattice.nbits} boundary bits "
                   f"({time.perf_counter() - t0:.1f} s)\n")
        click.echo(f"{'policy':<34}{'risk':>9}{'loss':>8}{'exp. re-ids':>13}{'k':>6}{'uniques':>9}")
        showcase = showcase_policies(problem.lattice)
        for label, policy in showcase:
            m = problem.evaluate(policy)
            click.echo(f"{label:<34}{m.risk:>9.4f}{m.loss:>8.4f}{m.expected_reidentifications:>13.1f}"
                       f"{m.k:>6}{m.sample_unique_records:>9}")
        _safe_harbor_and_alternatives(problem)
        label, chosen = showcase[3]
        _no_census(problem, folder / "demo-no-census.toml", label, chosen)
        click.echo(f"\nchosen: {label}\n  {chosen.readable()[:300]}\n  policy text: {chosen.text()}")
        plan = plan_of(problem, chosen)
        sql = problem.compile(plan, dialect="postgres", table="patients")
        click.echo("\nits SQL for PostgreSQL (first lines):\n  " + "\n  ".join(sql.splitlines()[:12]) + "\n  …")
        db = folder / "demo.duckdb"
        create_view(problem, plan, db, "patients_deid", replace=True)
        click.echo(f"\nview patients_deid created in {db}; the first rows an analyst sees:")
        for row in preview(db, "patients_deid"):
            click.echo("  " + "  ".join(str(v) for v in row))
        _frontier(problem, folder / "frontier", budget)
        _report(problem, spec, plan, folder)


def _safe_harbor_and_alternatives(problem: Problem, iterations: int = 100) -> None:
    """Safe Harbor's risk and loss, then BPS alternatives no riskier that lose less."""
    sh = safe_harbor_metrics(problem)
    click.echo(f"{'HIPAA Safe Harbor':<34}{sh.risk:>9.4f}{sh.loss:>8.4f}{sh.expected_reidentifications:>13.1f}"
               f"{sh.k:>6}{sh.sample_unique_records:>9}")
    result = bisecting_policy_search(problem.lattice, problem.fast, sh.risk, iterations, seed=0)
    better = sorted((b for b in result.found if b.metrics.loss < sh.loss), key=lambda b: b.metrics.loss)
    click.echo(f"\nBisecting Policy Search: {iterations} iterations, {result.evaluations} policies evaluated in "
               f"{result.seconds:.1f} s; {len(better)} of {len(result.found)} boundary policies are no riskier than "
               f"Safe Harbor and lose less information:")
    for b in better[:5]:
        click.echo(f"  risk {b.metrics.risk:.4f}  loss {b.metrics.loss:.4f}  {b.policy.readable()[:150]}")


def _no_census(problem: Problem, spec: Path, label: str, chosen: Policy) -> None:
    """The chosen policy evaluated without the census beside with it: the population's size only."""
    census = problem.evaluate(chosen)
    with Problem.from_spec(spec) as nc:
        from ..nocensus.risk import policy_figures  # scipy: loaded only without a census

        f = policy_figures(nc, chosen.text())
        m = nc.evaluate(chosen.text())
    dankar = f["dankar"]
    click.echo(f"\nwithout a census ({spec.name}: only the population's size, {f['population_size']:,.0f} people, "
               f"f = {f['sampling_fraction']:.3f}), {label}:")
    click.echo(f"  census:    expected re-identifications {census.expected_reidentifications:.1f}, "
               f"{census.sample_unique_records} sample uniques")
    estimates = ", ".join(f"{k} {f[k]['population_uniques']:,.3g}" if "population_uniques" in f[k] else f"{k} failed"
                          for k in ("pitman", "zayatz", "snb"))
    click.echo(f"  no census: population uniques {estimates}; Dankar's rule takes {dankar.get('model', '-')}: "
               f"{m.risk_sum:.3g} sample records expected unique in the population; Benedetti-Franconi "
               f"expects {f['benedetti_franconi']['expected_reidentifications']:.1f} re-identifications")


def _frontier(problem: Problem, folder: Path, budget: int) -> None:
    """The risk–utility frontier by SHS, with the plot beside Safe Harbor and k-anonymity."""
    result = run_frontier(problem, folder, "shs", budget, seed=0, overwrite=True)
    s = result.state
    click.echo(f"\nrisk–utility frontier (Sublattice Heuristic Search, {s.evaluations:,} policies, "
               f"{s.seconds:.1f} s): {len(s.frontier):,} policies, area {s.frontier.area():.4f}; "
               f"{len(result.dominating_safe_harbor):,} of them strictly dominate Safe Harbor")
    click.echo(f"  plot: {folder / 'frontier.png'}   interactive: {folder / 'frontier.html'}")


def _report(problem: Problem, spec: Path, plan: ReleasePlan, folder: Path) -> None:
    """The expert-determination report of the chosen policy, placed on the frontier just searched."""
    t0 = time.perf_counter()
    out, frontier, db = folder / "report.html", folder / "frontier", folder / "demo.duckdb"
    # the release this report stands beside: the demo's view (the command that recreates it)
    view = shlex.join(["deid-sql", "view", str(spec), "--policy", str(plan.text), "--db", str(db), "--name",
                       "patients_deid", "--replace"])
    built = build_report(problem, plan, frontier=frontier, command=view)
    built["summary"]["released"] = f"view patients_deid in {db}"
    built["method"]["commands"]["report"] = shlex.join(
        ["deid-sql", "report", str(spec), "--policy", str(plan.text), "--frontier", str(frontier), "--out", str(out),
         "--overwrite"])
    html, twin = write_report(built, out, overwrite=True)
    click.echo(f"\nreport for the chosen policy: {html} (JSON twin {twin.name}; verdict {built['summary']['verdict']}, "
               f"{time.perf_counter() - t0:.1f} s); open it in a browser, print it, sign it")
