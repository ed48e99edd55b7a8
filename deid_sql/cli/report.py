"""``deid-sql report``: the expert-determination report of a policy, and ``--report`` of the release commands.

Every release command imports this module for ``--report``; the report's builder, renderer and
writer (and the release writers they use) are imported inside the functions that use them, so a
command run without ``--report`` does not load them (jinja2, pyarrow.compute: about 0.1 s).

The report is the page a privacy reviewer or an IRB signs (``report.release_report`` builds it,
``report.release_html`` renders it, ``report.release_write`` writes it with its JSON twin).  Every
bad input (a sidecar of another spec, a policy file whose hash does not match, a frontier folder of
another problem, a target that is not ``.html`` or already exists) is refused before anything is
written.
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import OutputError, PolicyError
from ..problem import Problem
from ..release.plan import LEVELS, ReleasePlan, plan_of
from ..release.sidecar import INVOCATION, sidecar_path
from .options import (
    REASON_RULE,
    checked_reason,
    handles_errors,
    open_problem,
    read_policy,
    release_plan,
    spec_argument,
    suppress_option,
)

if TYPE_CHECKING:

    from ..policyfile.batch import Batch
    from ..release.figures import ReleaseFigures
    from ..release.gate import ReleaseGate
    from ..spec.file import Spec

SAFE_HARBOR = "safe-harbor"  # --policy safe-harbor: HIPAA Safe Harbor's recoding (as 'deid-sql adversary' reads it)

REPORT_HELP = ("Also write the expert-determination report of this release, FILE.html, and its JSON twin FILE.json "
               "(see 'deid-sql report --help'); refused before anything is written when FILE exists.")


def report_option(fn: Any) -> Any:
    return click.option("--report", "report", type=click.Path(path_type=Path, dir_okay=False), default=None,
                        metavar="FILE.html", help=REPORT_HELP)(fn)


@click.command()
@spec_argument
@click.option("--policy", "-p", "policy", default=None, metavar="P",
              help="Policy text ('age:cuts=18,65|zip:top', or @FILE), as for 'deid-sql materialize'; "
                   "'safe-harbor' reports HIPAA Safe Harbor.")
@click.option("--levels", default=None, metavar="L",
              help="Hierarchy levels instead of --policy, as 'deid-sql anonymize' prints them: 'sex:0|age:3|…'.")
@click.option("--from-release", "release", type=click.Path(path_type=Path, dir_okay=False), default=None,
              metavar="FILE.release.json", help="Report the release this sidecar records (it must be of SPEC).")
@click.option("--from-policy", "policy_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              metavar="policy.json", help="Report the policy of a policy file ('deid-sql policy save'); its hash "
                                          "must match SPEC.")
@suppress_option
@click.option("--out", "-o", type=click.Path(path_type=Path, dir_okay=False), required=True, metavar="FILE.html",
              help="The report page (.html); its JSON twin is written beside it as FILE.json.")
@click.option("--frontier", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="A frontier run's folder ('deid-sql frontier --out DIR') of the same problem: the report places "
                   "the policy on that risk-utility frontier.")
@click.option("--sample-rows", type=click.IntRange(min=0), default=0, show_default=True, metavar="N",
              help="Show N rows of the release itself as the analyst will see them (0: five made-up rows "
                   "with the released labels, so no record leaves in the report).")
@click.option("--overwrite", is_flag=True, help="Replace an existing report (and its JSON twin).")
@click.option("--accept-risk", default=None, metavar="REASON", callback=checked_reason,
              help="The reason a policy failing the spec's release criteria is released anyway (as given to "
                   f"materialize; {REASON_RULE}); the report's verdict is then 'accepted' and shows the reason.")
@handles_errors
def report(spec: Path, policy: str | None, levels: str | None, release: Path | None, policy_file: Path | None,
           suppress_below: int | None, out: Path, frontier: Path | None, sample_rows: int, overwrite: bool,
           accept_risk: str | None) -> None:
    """Write the report a privacy reviewer signs: one self-contained HTML page and its JSON twin.

    The page holds the verdict against the spec's release criteria, the data and every column's
    role, the policy in words, the risk figures beside HIPAA Safe Harbor and the original data,
    the utility kept, the methods and the commands that reproduce it, and blank lines to sign.
    Give the policy one way: --policy, --from-release (a release's sidecar) or --from-policy;
    --suppress-below K reports the release that suppresses small groups, as 'deid-sql materialize
    --suppress-below K' would write it (a sidecar and a policy file carry their own suppression).

    Example: deid-sql report demo/demo.toml --policy 'age:cuts=18,30,45,65,90|zip:top' --out report.html
    """
    from ..release.output import check_not_input
    from ..release.records import verify_release
    from ..release.safe_harbor import safe_harbor
    from ..report.release_report import build_report, load_sidecar, policy_from_file
    from ..report.release_write import check_report_target, report_paths, write_report

    given = [name for name, value in (("--policy", policy), ("--levels", levels), ("--from-release", release),
                                      ("--from-policy", policy_file)) if value is not None]
    if len(given) != 1:
        raise PolicyError(("give the policy to report one way, not " + " and ".join(given)) if given else
                          "say which policy to report: --policy P, --levels L, --from-release FILE.release.json or "
                          "--from-policy policy.json")
    if suppress_below is not None and (release is not None or policy_file is not None):
        raise PolicyError(f"--suppress-below applies to --policy or --levels; {given[0]} carries its own "
                          f"suppression (leave --suppress-below out)")
    check_report_target(out, overwrite)
    with open_problem(spec) as problem:
        for path in report_paths(out):
            check_not_input(problem.spec, path)
        sidecar = None
        if release is not None:
            sidecar = load_sidecar(release, problem)
            recorded = sidecar.get("release") if isinstance(sidecar.get("release"), dict) else {}
            if recorded.get("kind") == "set":  # its folder holds the set's files only
                check_report_outside(out, release.parent, "--out")
            verify_release(sidecar, release, problem.backend)  # the release must still be what it records
            plan = release_of_sidecar(problem, sidecar, release)
        elif policy_file is not None:
            plan = policy_from_file(policy_file, problem)
        elif policy is not None and read_policy(policy) == SAFE_HARBOR:
            plan = plan_of(problem, safe_harbor(problem).recoding, suppression=suppress_below)
        else:
            plan = release_plan(problem, policy, levels, suppress_below)
        # no release command of our own: a sidecar's is its release's, and a policy is not released yet
        linked = bool(problem.spec.tables)  # a set: the person source judged for the whole set
        built = build_report(problem, plan, sidecar=sidecar, frontier=frontier, sample_rows=sample_rows,
                             accept_risk=accept_risk, whole_set=linked)
        if linked:
            from ..report.release_report import set_section
            from ..sets.release import preview

            record = sidecar if sidecar is not None and release is not None else preview(problem, plan)
            where = str(release) if sidecar is not None else "none: a policy, not yet released"
            built["data"]["set"] = set_section(record, where, problem.spec)
        if sidecar is not None:
            check_against_release(built, sidecar, release)
        paths = write_report(built, out, overwrite)
    echo_report(built, paths)


def release_of_sidecar(problem: Problem, sidecar: dict[str, Any], where: Path) -> ReleasePlan:
    """What a sidecar's release released, as a release plan: the policy text or level vector and the
    suppression it records.  An anonymization is run again from its recorded parameters (the search
    is deterministic) and must reach the recorded optimum; the figures are compared with the
    recorded ones afterwards."""
    from ..report.release_report import ReportInputError

    policy = sidecar["policy"]  # load_sidecar refuses a release without policy text or levels
    named = str(policy.get("text") or policy.get(LEVELS))
    recorded = sidecar.get("suppression") if isinstance(sidecar.get("suppression"), dict) else {}
    search = recorded.get("anonymize") if isinstance(recorded.get("anonymize"), dict) else None
    if search is not None:
        from ..jobs.anonymize import release_plan, rerun

        run = rerun(problem, search)
        if run.levels is None or list(run.levels) != list(search.get("levels") or []):
            found = "none" if run.levels is None else run.space.text(run.levels)
            raise ReportInputError(f"--from-release {where}: the anonymization run again finds {found}, not the "
                                   f"released {named}: the data changed since; nothing was written")
        return release_plan(problem, run)
    below = recorded.get("below", sidecar.get("suppress_below"))
    rule = below if isinstance(below, int) and not isinstance(below, bool) else None
    levels = str(policy[LEVELS]) if policy.get(LEVELS) else None
    return plan_of(problem, None if levels else named, levels=levels, suppression=rule)


#: figures a release's sidecar records and the report recomputes: (sidecar key, report key)
RECORDED = (("records", "records"), ("groups", "groups"), ("k", "k"), ("suppressed", "suppressed"),
            ("expected_reidentifications", "expected_reidentifications"), ("max_record_risk", "max_record_risk"))


def check_against_release(built: dict[str, Any], sidecar: dict[str, Any], where: Path | None) -> None:
    """A report of a release must say what the release recorded: refuse (one line, nothing written)
    when the figures differ, e.g. the source changed since, or the release suppressed records the
    report does not describe, rather than hand a reviewer a page that disagrees with the release."""
    recorded, figures = sidecar.get("figures") or {}, built["risk"]["figures"]
    differ = [f"{ours} {figures.get(ours)} (release: {recorded[theirs]})" for theirs, ours in RECORDED
              if theirs in recorded and not _same(recorded[theirs], figures.get(ours))]
    if differ:
        if where is None:  # the release just written (its figures measured on the rows written)
            raise OutputError(f"the report's figures differ from those measured on the rows written "
                              f"({'; '.join(differ[:3])}): the data changed while the release was written")
        raise OutputError(f"--from-release {where}: the report's figures differ from those the release recorded "
                          f"({'; '.join(differ[:3])}): the data changed since the release; nothing was written")


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(a)))


def echo_report(built: dict[str, Any], paths: list[Path], err: bool = False) -> None:
    """Where the report went and its verdict, in one line each (``err``: on stderr, for ``compile``)."""
    summary = built.get("summary", {})
    click.echo(f"report: {paths[0]} (JSON twin {paths[1]})", err=err)
    headline = "; ".join(str(s) for s in summary.get("headline", []))
    click.echo(f"  verdict: {summary.get('verdict')}" + (f" — {headline}" if headline else ""), err=err)


@dataclass
class PendingReport:
    """A report built before its release is written (``--report`` of materialize and view)."""

    report: dict[str, Any]
    out: Path
    overwrite: bool


def prepare_release_report(problem: Problem, plan: ReleasePlan, out: Path | None, overwrite: bool,
                           accept_risk: str | None, released: str, release: Path | None = None,
                           whole_set: bool = False) -> PendingReport | None:
    """Refuse a bad ``--report`` target and build the report, both before the release is written,
    so a bad target or a failing build writes nothing at all (the release included); ``release`` is the
    release file, which the report must not replace (nor its sidecar).  ``plan`` is what the
    release releases.  ``whole_set``: the release of a set of linked tables, whose report describes
    the person source's release (its gate is the set's) and gets the set's tables once written
    (``add_set``)."""
    if out is None:
        return None
    from ..report.release_report import build_report
    from ..report.release_write import check_report_target

    check_report_target(out, overwrite, "--report")
    _check_report_paths(problem.spec, out, release)
    command = INVOCATION.get()  # the release's command line: it reproduces the release and this report
    built = build_report(problem, plan, command=command, accept_risk=accept_risk, whole_set=whole_set)
    built["summary"]["released"] = released
    built["method"]["commands"]["release"] = command
    if whole_set:  # `deid-sql report` describes one table: the set's release command writes this report again
        rebuild: list[str] | None = None
    elif plan.suppression is None:
        named = (["--levels", plan.levels] if plan.levels is not None else
                 ["--policy", plan.typed or plan.text or plan.readable])  # the policy as it was typed
        rebuild = ["deid-sql", "report", str(problem.spec.path), *named]
    elif release is not None and _sidecar_file(release):  # it records the suppression: the report rebuilds this
        rebuild = ["deid-sql", "report", str(problem.spec.path), "--from-release", str(sidecar_path(release))]
    else:  # a view or table with suppression: its release command writes this report again
        rebuild = None
    if rebuild is not None:
        rebuild += ["--out", str(out), "--overwrite"] + (["--accept-risk", accept_risk] if accept_risk else [])
        built["method"]["commands"]["report"] = shlex.join(rebuild)
    else:
        built["method"]["commands"]["report"] = command
    return PendingReport(built, out, overwrite)


def add_set(pending: PendingReport, record: dict[str, Any], where: str, spec: Spec) -> None:
    """The tables of a set, as its record (``release.json`` or the record table ``where``) lists
    them, added to a report prepared before the set was written."""
    from ..report.release_report import set_section

    pending.report["data"]["set"] = set_section(record, where, spec)


def check_report_outside(report: Path | None, folder: Path, option: str = "--report") -> None:
    """A set's report goes beside its folder, never into it: the folder holds the set's files only
    (and is replaced as a whole with ``--overwrite``), and a file its record does not list makes
    the set fail its check (``records.verify_release``)."""
    if report is None:
        return
    inside = folder.resolve()
    if any(inside == parent for parent in report.resolve().parents):
        raise OutputError(f"{option} {report} is inside the set's folder {folder}, which holds the set's files only; "
                          f"write the report beside it (e.g. {folder.name}-report.html)")


def _check_report_paths(spec: Spec, out: Path, release: Path | None) -> None:
    """The report's page and twin may replace neither an input nor the release or its sidecar."""
    from ..release.output import check_not_input
    from ..report.release_write import report_paths

    for path in report_paths(out):
        check_not_input(spec, path)
        if release is not None and path.resolve() in (release.resolve(), sidecar_path(release).resolve()):
            raise OutputError(f"--report {out}: its page or JSON twin {path.name} would replace the release or its "
                              f"sidecar; name the report differently (e.g. {release.stem}-report.html)")


def batch_report(out: Path | None, overwrite: bool, accept_risk: str | None, release: Path | None,
                 released: str) -> Callable[[Batch, ReleaseGate], PendingReport] | None:
    """``--report`` of ``apply``: the target is checked now, before the batch is read; the returned
    hook builds the report once the batch passed its checks and before the release is written
    (``apply_policy``'s ``prepare``).  The report is that of the batch as a problem of its own, with
    the policy file's saved domains and the spec's population; its figures are checked against the
    release's after it is written (``finish_release_report``)."""
    if out is None:
        return None
    from ..report.release_report import build_report
    from ..report.release_write import check_report_target

    check_report_target(out, overwrite, "--report")

    def prepare(batch: Batch, gate: ReleaseGate) -> PendingReport:
        if batch.outside.records:
            rows = "row(s)" if batch.policy.person is not None else "record(s)"  # rows: [person] counts persons
            raise OutputError(f"--report: {batch.outside.records:,} {rows} of the batch hold values outside the "
                              f"saved domains ({batch.outside.summary()}), released as the fallback label; the "
                              f"report describes only batches within them: release without --report, or save the "
                              f"policy again on data that covers these values")
        _check_report_paths(batch.spec, out, release)
        pf = batch.policy
        plan = pf.plan()
        plan = replace(plan, item=replace(plan.recoding, name=pf.readable))
        command = INVOCATION.get()
        with Problem.from_spec(batch.frozen_spec()) as problem:
            built = build_report(problem, plan, command=command, accept_risk=accept_risk)
        built["summary"]["released"] = released
        built["data"]["batch"] = {"source": batch.describe(), "policy_file": gate.policy.get("file"),
                                  "policy_file_sha256": gate.policy.get("file_sha256"),
                                  "drift": gate.extra.get("drift")}
        built["method"]["commands"]["release"] = command
        built["method"]["commands"]["report"] = command  # the batch's release command writes this report again
        return PendingReport(built, out, overwrite)

    return prepare


def _sidecar_file(release: Path) -> bool:
    """Whether a release file gets a sidecar file (Parquet, CSV) rather than a record table (DuckDB)."""
    from ..release.output import output_format

    try:
        return output_format(release, None) in ("parquet", "csv")
    except OutputError:
        return False


def written_files(written: Any) -> list[Path]:
    """The files of a release (a Parquet or CSV file and its sidecar) that ``finish_release_report``
    removes when the report cannot follow them; a table or view inside a database has none."""
    path = getattr(written, "path", None)
    if path is None or getattr(written, "format", None) not in ("parquet", "csv"):
        return []
    return [path, sidecar_path(path)]


def finish_release_report(pending: PendingReport | None, undo: list[Path], err: bool = False,
                          figures: ReleaseFigures | None = None) -> None:
    """Write the report after its release; if that fails (the target appeared meanwhile, a full disk),
    or the release's ``figures`` (measured on the rows written) differ from the report's, remove the
    release files in ``undo`` so neither is left without the other, and say so in one line."""
    if pending is None:
        return
    from ..report.release_write import write_report

    try:
        if figures is not None:
            check_against_release(pending.report, {"figures": figures.to_dict()}, None)
        paths = write_report(pending.report, pending.out, pending.overwrite)
    except BaseException as e:
        for path in undo:
            if path.is_dir():  # a set's folder
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        if not isinstance(e, (OSError, OutputError)):
            raise
        removed = f"; the release ({', '.join(p.name for p in undo)}) was removed too" if undo else \
            "; the release inside the database stays (it passed the gate and has its record table)"
        raise OutputError(f"could not write the report {pending.out}: {e}{removed}") from None
    echo_report(pending.report, paths, err)
