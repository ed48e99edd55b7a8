"""``deid-sql demo``: the main job on the embedded default problem.

Everything it prints is a table with a header or a line of words: a cell or line too long for the
terminal is cut at a token boundary and ends with "…", and a count printed above a list is the
count of what the list shows.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import click

from ..errors import ReleaseRefused
from ..evaluate.metrics import Metrics
from ..jobs.frontier import FrontierRun, run_frontier
from ..policies.lattice import Policy
from ..problem import Problem
from ..release.output import create_view, preview
from ..release.plan import ReleasePlan, plan_of
from ..release.safe_harbor import safe_harbor_metrics
from ..report.frontier_report import FrontierReport
from ..report.html import html_frontier
from ..report.release_report import build_report
from ..report.release_write import write_report
from ..search import bisecting_policy_search
from ..search.kanon import full_domain_generalizations
from ..starter.demo import (
    EHR_POLICIES,
    PUBLISHABLE_AGE_CUTS,
    PUBLISHABLE_FILE,
    Candidate,
    build_adult,
    build_demo,
    build_ehr,
    choose_policy,
    dominators,
    showcase_policies,
)
from .options import handles_errors

WIDTH = 110  # characters of a printed line: a cell or line longer than this is cut with "…"
SHOWN = 5  # boundary policies listed
BPS_ITERATIONS = 50


@click.command()
@click.option("--dir", "folder", type=click.Path(path_type=Path, file_okay=False), default=Path("deid-sql-demo"),
              show_default=True, help="Folder for the demo data, spec, database, frontier and report (rewritten).")
@click.option("--seed", default=0, show_default=True, help="Seed of the synthetic data.")
@click.option("--budget", default=500, show_default=True, help="Policies the frontier search evaluates.")
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
    """Run the whole job on a synthetic cohort: policies, Safe Harbor, alternatives, the frontier, the policy
    it recommends, SQL, a view, and the report a reviewer signs for that policy (DIR/report.html). The
    search and the release use DIR/demo-publishable.toml: ages in 5-year bands up to 90+, ZIP3.

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
               "persons' figures are the right ones ([person] in ehr.toml; deid-sql help persons).")


def clip(text: str, width: int = WIDTH) -> str:
    """``text`` cut to at most ``width`` characters at a token boundary (after a space), ending with
    "…" when anything was cut: ``age: [0-4], [5-9], …`` rather than ``age: [0-4], [5-``.  The kept part
    is a prefix of ``text``; a single token longer than the width is cut inside it (there is no
    boundary to cut at)."""
    if len(text) <= width:
        return text
    room = text[:width - 1]
    cut = room.rfind(" ") + 1
    return (room[:cut] if cut > 0 else room) + "…"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool],
          indent: str = "", width: int = WIDTH) -> list[str]:
    """Lines of a table: the header, then the rows; columns as wide as their widest cell (a
    left-aligned last column unpadded), numbers right-aligned (``right``), every line clipped to
    ``width``."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    if not right[-1]:
        widths[-1] = 0
    out = []
    for row in [header, *rows]:
        cells = [(cell.rjust(w) if r else cell.ljust(w)) for cell, w, r in zip(row, widths, right)]
        out.append(clip((indent + "  ".join(cells)).rstrip(), width))
    return out


def echo_table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool],
               indent: str = "") -> None:
    for line in table(header, rows, right, indent):
        click.echo(line)


def fig(value: float) -> str:
    """A normalized risk or loss in three significant digits (``0.0546``, ``2.15e-05``)."""
    return f"{value:.3g}"


METRIC_HEADER = ("risk", "loss", "exp. re-ids", "k", "uniques")


def metric_cells(m: Metrics) -> list[str]:
    return [fig(m.risk), f"{m.loss:.4f}", f"{m.expected_reidentifications:.2f}", f"{m.k:,}",
            f"{m.sample_unique_records:,}"]


def _run(folder: Path, seed: int, budget: int) -> None:
    t0 = time.perf_counter()
    build_demo(folder, seed)
    spec = folder / PUBLISHABLE_FILE
    click.echo(f"demo data and specs in {folder} ({time.perf_counter() - t0:.1f} s): demo.toml (the problem, "
               f"every cut allowed), demo-no-census.toml, and {PUBLISHABLE_FILE}, the one the demo searches and "
               f"releases with (ages in 5-year bands to {PUBLISHABLE_AGE_CUTS[-1]}+, ZIP3)")
    t0 = time.perf_counter()
    with Problem.from_spec(spec) as problem:
        pop = problem.population.total if problem.population is not None else 0
        lattice = problem.lattice
        click.echo(f"loaded {problem.sample.total:,} patients ({len(problem.sample):,} cells) against "
                   f"{pop:,} census people; {int(lattice.allowed.sum())} of the {lattice.nbits} boundaries "
                   f"between QI values may be cut ({time.perf_counter() - t0:.1f} s)\n")
        sh = safe_harbor_metrics(problem)
        rows = [[label, *metric_cells(problem.evaluate(item))] for label, item in showcase_policies(lattice)]
        rows.insert(1, ["HIPAA Safe Harbor", *metric_cells(sh)])
        echo_table(["policy", *METRIC_HEADER], rows, [False, True, True, True, True, True])
        click.echo("(risk: expected re-identifications relative to the original data's; loss: information lost, "
                   "0 to 1; the original data is the reference, not a release)")
        meets = _criteria(problem, sh)
        limit = _risk_limit(problem, sh)
        found = _alternatives(problem, limit)
        run = _frontier(problem, folder / "frontier", budget)
        label, chosen = _choose(problem, run, found, meets)
        _no_census(problem, folder / "demo-no-census.toml", label, chosen)
        plan = plan_of(problem, chosen)
        sql = problem.compile(plan, dialect="postgres", table="patients")
        lines = sql.splitlines()
        click.echo(f"\nits SQL for PostgreSQL (the first 12 of {len(lines)} lines):")
        for line in lines[:12]:
            click.echo(clip("  " + line))
        if len(lines) > 12:
            click.echo("  …")
        db = folder / "demo.duckdb"
        create_view(problem, plan, db, "patients_deid", replace=True)
        shown = preview(db, "patients_deid")
        columns = [name for name, _ in problem.released_columns]
        columns += [f"column {i + 1}" for i in range(len(columns), max((len(r) for r in shown), default=0))]
        click.echo(f"\nview patients_deid created in {db}; the first {len(shown)} rows an analyst sees:")
        echo_table(columns, [[str(v) for v in r] for r in shown], [False] * len(columns), indent="  ")
        _report(problem, spec, plan, folder)


def _criteria(problem: Problem, sh: Metrics) -> Callable[[Metrics], bool]:
    """Does a policy's figures meet the spec's ``[release]`` criteria (Safe Harbor's risk the
    reference of ``no_riskier_than``)?  The gate judges the release itself; this picks candidates."""
    criteria = problem.spec.release.criteria(sh.risk)
    return lambda m: all(c.passes(float(getattr(m, c.figure))) for c in criteria)


def _risk_limit(problem: Problem, sh: Metrics) -> float:
    """The normalized risk the criteria allow: Safe Harbor's, or the expected re-identifications'
    limit over the original data's (risk = risk_sum / risk_sum(original), and with gamma = 1 the
    risk sum is the expected re-identifications), whichever is lower."""
    original = problem.evaluate(problem.lattice.original())
    limits = [sh.risk]
    release = problem.spec.release
    if release.max_expected_reidentifications is not None and problem.spec.gamma == 1:
        limits.append(release.max_expected_reidentifications / original.risk_sum)
    if release.max_risk is not None:
        limits.append(release.max_risk)
    return min(limits)


def _criteria_words(problem: Problem) -> str:
    """The demo spec's ``[release]`` in words: "at most 1 expected re-identification, no riskier than Safe Harbor"."""
    release, words = problem.spec.release, []
    if release.max_expected_reidentifications is not None:
        n = release.max_expected_reidentifications
        words.append(f"at most {n:g} expected re-identification{'' if n == 1 else 's'}")
    if release.max_risk is not None:
        words.append(f"risk at most {release.max_risk:g}")
    if release.no_riskier_than == "safe-harbor":
        words.append("no riskier than Safe Harbor")
    return ", ".join(words)


def _alternatives(problem: Problem, limit: float, iterations: int = BPS_ITERATIONS) -> list[Candidate]:
    """BPS boundary policies at the criteria's risk limit, the least lossy listed."""
    result = bisecting_policy_search(problem.lattice, problem.fast, limit, iterations, seed=0)
    found = sorted(result.found, key=lambda b: (b.metrics.loss, b.metrics.risk))
    click.echo(f"\nBisecting Policy Search at risk {fig(limit)} (the spec's criteria: {_criteria_words(problem)}): "
               f"{iterations} iterations, {result.evaluations:,} "
               f"policies evaluated in {result.seconds:.1f} s, {len(found)} boundary policies found; "
               f"the {min(SHOWN, len(found))} that lose least:")
    rows = [[*metric_cells(b.metrics), b.policy.readable()] for b in found[:SHOWN]]
    echo_table([*METRIC_HEADER, "policy"], rows, [True] * 5 + [False], indent="  ")
    return [Candidate("Bisecting Policy Search", b.policy.text(), b.policy, b.metrics) for b in found]


def _frontier(problem: Problem, folder: Path, budget: int) -> FrontierRun:
    """The risk–utility frontier by SHS, drawn beside Safe Harbor and the k-anonymity baselines as the
    interactive page only: the PNG (``deid-sql frontier`` writes it) would cost the demo matplotlib's
    second or two, and the report draws the frontier again with the chosen policy on it."""
    result = run_frontier(problem, folder, "shs", budget, seed=0, overwrite=True, plots=False)
    s = result.state
    readable = {p.key: problem.lattice.parse(p.key).readable() for p in s.frontier}
    page = FrontierReport(title=f"SHS frontier, {s.evaluations:,} policies, seed {s.seed}", searched=s.searched,
                          frontier=list(s.frontier), readable=readable, safe_harbor=result.safe_harbor,
                          kanon={k: list(f) for k, f in result.kanon.items()}, area=s.frontier.area())
    html_frontier(page, folder / "frontier.html")
    (folder / "frontier.png").unlink(missing_ok=True)  # an earlier run's plot would not be this one's
    baselines = ", ".join(f"{name} ({len(f)} policies)" for name, f in result.kanon.items())
    click.echo(f"\nrisk–utility frontier (Sublattice Heuristic Search, {s.evaluations:,} policies, {s.seconds:.1f} s): "
               f"{len(s.frontier):,} policies, area {s.frontier.area():.4f}; plotted beside Safe Harbor and the "
               f"full-domain baselines {baselines}")
    click.echo(f"  interactive plot: {folder / 'frontier.html'} (policies, Safe Harbor and baselines; "
               f"deid-sql frontier draws a PNG too)")
    return result


def _choose(problem: Problem, run: FrontierRun, found: list[Candidate],
            meets: Callable[[Metrics], bool]) -> tuple[str, Policy]:
    """The recommended policy: the least lossy of those plotted or proposed that meet the criteria and
    that nothing plotted dominates (``demo.choose_policy``)."""
    candidates = [Candidate("the frontier", p.key, problem.policy(p.key), problem.evaluate(p.key))
                  for p in run.state.frontier]
    labels = {p.key for f in run.kanon.values() for p in f}
    for label, item in full_domain_generalizations(problem):
        if label in labels and isinstance(item, Policy):
            candidates.append(Candidate("a k-anonymity baseline", label, item, problem.evaluate(item)))
    candidates += found
    distinct: dict[str, Candidate] = {}  # a policy on the frontier may also be a baseline or an alternative
    for c in candidates:
        distinct.setdefault(c.item.text() if isinstance(c.item, Policy) else c.label, c)
    candidates = list(distinct.values())
    baselines = [p for f in run.kanon.values() for p in f]
    harbor = [run.safe_harbor] if run.safe_harbor is not None else []
    plotted = list(run.state.searched) + baselines + harbor
    best = choose_policy(candidates, plotted, meets)
    if best is None:
        raise ReleaseRefused(f"no policy plotted or proposed meets the release criteria of {problem.spec.path}; "
                             f"loosen its [release] table or raise --budget")
    assert isinstance(best.item, Policy)  # every candidate above is a lattice policy
    chosen, m = best.item, best.metrics
    beaten = dominators(best.point, plotted)  # none by construction; the count is printed to be checked
    meeting = sum(1 for c in candidates if meets(c.metrics))
    label = (f"the least loss of the {meeting:,} policies found (of {len(candidates):,} on the frontier, the "
             f"baselines and the alternatives) that meet the spec's criteria, from {best.source}")
    click.echo(f"\nchosen: {label}\n  {clip(chosen.readable(), WIDTH - 2)}\n  policy text: {chosen.text()}")
    click.echo(f"  risk {fig(m.risk)}, loss {m.loss:.4f}, {m.expected_reidentifications:.2f} expected "
               f"re-identifications, k {m.k}, {m.sample_unique_records} sample uniques; dominated by "
               f"{len(beaten)} of the {len(plotted):,} points plotted ({run.state.evaluations:,} searched, "
               f"{len(baselines)} on the k-anonymity baselines{', Safe Harbor' if harbor else ''})")
    return "the chosen policy", chosen


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
    estimates = ", ".join(f"{k} {f[k]['population_uniques']:,.3g}" if "population_uniques" in f[k] else
                          f"{k} none (its model did not converge on this data)" for k in ("pitman", "zayatz", "snb"))
    click.echo(f"  no census: population uniques {estimates}; Dankar's rule takes {dankar.get('model', '-')}: "
               f"{m.risk_sum:.3g} sample records expected unique in the population; Benedetti-Franconi "
               f"expects {f['benedetti_franconi']['expected_reidentifications']:.1f} re-identifications")


def _report(problem: Problem, spec: Path, plan: ReleasePlan, folder: Path) -> None:
    """The expert-determination report of the chosen policy, placed on the frontier just searched."""
    t0 = time.perf_counter()
    out, frontier, db = folder / "report.html", folder / "frontier", folder / "demo.duckdb"
    # the release this report stands beside: the demo's view (the command that recreates it)
    view = shlex.join(["deid-sql", "view", str(spec), "--policy", str(plan.text), "--db", str(db), "--view",
                       "patients_deid", "--overwrite"])
    built = build_report(problem, plan, frontier=frontier, command=view)
    built["summary"]["released"] = f"view patients_deid in {db}"
    built["method"]["commands"]["report"] = shlex.join(
        ["deid-sql", "report", str(spec), "--policy", str(plan.text), "--frontier", str(frontier), "--out", str(out),
         "--overwrite"])
    html, twin = write_report(built, out, overwrite=True)
    click.echo(f"\nreport for the chosen policy: {html} (JSON twin {twin.name}; verdict {built['summary']['verdict']}, "
               f"{time.perf_counter() - t0:.1f} s); open it in a browser, print it, sign it")
