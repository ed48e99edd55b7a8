"""Policies as code: ``policy save``, ``apply`` and ``check`` (thin wrappers over ``deid_sql.policyfile``)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import DataError, OutputError
from ..policyfile import (
    DriftReport,
    MovedGroup,
    PolicyFile,
    apply_policy,
    apply_set,
    check_policy,
    check_set,
    save_policy,
)
from ..policyfile.applyset import linked_ref
from ..policyfile.batch import batch_ref, engine_ref
from ..policyfile.format import MEASURE
from ..policyfile.shift import ALPHA
from ..spec.file import TableRef
from .options import (
    REASON_RULE,
    F,
    FiniteFloat,
    accept_risk_option,
    checked_reason,
    echo_json,
    echo_release,
    handles_errors,
    policy_input,
    policy_option,
    renamed,
    spec_argument,
    verbose_option,
    view_options,
)
from .report import batch_report, finish_release_report, report_option, written_files


def policy_file_argument(fn: F) -> F:
    """POLICY_FILE, and ``--verbose`` with it (apply and check open the engine the policy names)."""
    return verbose_option(click.argument("policy_file", type=click.Path(path_type=Path, dir_okay=False))(fn))


source_option = click.option("--source", "-s", default=None, type=click.Path(path_type=Path, dir_okay=False),
                             help="The new batch: a .csv, .parquet or .duckdb file (with --source-table).")
source_table_option = click.option(
    "--source-table", default=None, metavar="NAME",
    help="The new batch's table: inside a .duckdb --source, or without --source a table of the spec's [backend] "
         "engine (PostgreSQL schema.table, a Spark catalog table).")


def table_option(fn: F) -> F:
    """``--table``, the old spelling of ``--source-table`` for the table inside a .duckdb --source
    (``check``; on ``apply`` --table names the table written, the project's word for an output table)."""
    return renamed("--table", "--source-table", "source_table", type=str)(fn)


def linked_options(fn: F) -> F:
    """``--linked NAME=FILE`` and ``--linked-table NAME=TABLE``: the batches of a set's linked tables."""
    fn = click.option("--linked-table", "linked_tables", multiple=True, metavar="NAME=TABLE",
                      help="A linked table's batch as a table of the spec's engine (PostgreSQL schema.table, a Spark "
                           "catalog table); repeat for each.")(fn)
    return click.option("--linked", "linked", multiple=True, metavar="NAME=FILE",
                        help="The batch of the linked table NAME ([[table]] name) of a policy saved on a set: a .csv "
                             "or .parquet file; repeat for each linked table (every one needs its batch).")(fn)


def _linked(files: tuple[str, ...], tables: tuple[str, ...]) -> dict[str, Path | TableRef]:
    """The linked batches by release name, each NAME=VALUE checked (one line for a bad one); a file
    is opened after its name is known to be a linked table of the set (``applyset.linked_refs``)."""
    out: dict[str, Path | TableRef] = {}
    for flag, values, table in (("--linked", files, False), ("--linked-table", tables, True)):
        for value in values:
            name, sep, where = value.partition("=")
            if not sep or not name.strip() or not where.strip():
                raise DataError(f"{flag} {value!r} must be NAME={'TABLE' if table else 'FILE'}: a linked table's "
                                f"release name and its batch, e.g. {flag} encounters="
                                + ("staging.encounters_06" if table else "encounters-06.parquet"))
            if name.strip() in out:
                raise DataError(f"{flag} {name.strip()}=…: the linked table {name.strip()!r} is given twice; give "
                                f"each linked table one batch")
            out[name.strip()] = linked_ref(where.strip(), engine_table=True) if table else Path(where.strip())
    return out
RULE_HELP = (
    "By default the limit is the saved figure plus a tolerance for chance: the batch's records and the saved "
    "records are pooled per released group, 999 batches of the batch's size are drawn from that pool at random "
    "(seeded), and the limit is the largest of their figures, never below the saved figure. A batch from the "
    "same population as the saved data therefore fails at most 1 time in 1000, whatever its size; a batch with a "
    "riskier mix (more records in thinly populated groups) fails. With population = \"sample\" a smaller batch "
    "is compared with batches of its own size. A --drift-limit set at 'policy save' is an exact limit; a policy "
    "file saved before this rule keeps the saved figure as an exact limit (check says so). Besides the risk, each QI's "
    "released label shares are tested against the saved ones (a chi-square test of homogeneity per QI, rare labels "
    "pooled, Holm-corrected over the QIs at a family-wise level of 0.001 unless 'policy save --shift-alpha' set "
    "another): a batch whose ages, races, … moved is drift too, even when its risk did not rise.")


@click.group(name="policy")
def policy_group() -> None:
    """Save a chosen policy to a file that 'deid-sql apply' and 'deid-sql check' re-use on new batches.

    Example: deid-sql policy save demo/demo.toml --policy 'age:cuts=18,65|zip:top' --out policy.json
    """


@policy_group.command(name="save")
@spec_argument
@policy_option
@click.option("--out", "-o", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="The policy file to write (JSON).")
@click.option("--drift-limit", "threshold", type=FiniteFloat(0.0), default=None, metavar="R",
              help=f"Exact drift limit on {MEASURE} (expected re-identifications per record) for 'deid-sql check' "
                   "and 'apply'; default: the saved figure plus a tolerance for chance (see 'deid-sql check --help').")
@click.option("--fallback", default=None, metavar="LABEL",
              help="Label for values of later batches outside the saved domains (default: refuse them).")
@click.option("--shift-alpha", type=FiniteFloat(0.0), default=ALPHA, show_default=True, metavar="A",
              help="Family-wise false-alarm rate of the drift check's distribution test (each QI's released label "
                   "shares against the saved ones, Holm-corrected over the QIs).")
@renamed("--threshold", "--drift-limit", "threshold", type=FiniteFloat(0.0))
@click.option("--overwrite", is_flag=True, help="Replace an existing policy file.")
@handles_errors
def save(spec: Path, policy: str | None, levels: str | None, out: Path, threshold: float | None,
         fallback: str | None, shift_alpha: float, overwrite: bool) -> None:
    """Save a policy with its QI domains, schema, spec hash, figures and drift threshold.

    Example: deid-sql policy save demo/demo.toml --policy 'age:cuts=18,65|zip:top' --out fallback.json --fallback other
    """
    text, levels = policy_input(policy, levels)
    saved = save_policy(spec, text, out, threshold, fallback, overwrite, levels=levels, shift_alpha=shift_alpha)
    f = saved.figures
    click.echo(f"saved {out}: {saved.readable}")
    click.echo(f"  {f.records:,} {_unit(saved)} in {f.groups:,} groups, k = {f.k}, risk {saved.metrics['risk']:.6g}, "
               f"loss {saved.metrics['loss']:.6g}")
    limit = (f"drift limit {saved.threshold:.6g} (set at save, exact)" if saved.tolerance.rule == "exact" else
             "drift limit: the saved figure + a permutation-test tolerance (at most 0.1 % false alarms)")
    click.echo(f"  {MEASURE} {f.mean_record_risk:.6g}; {limit}"
               + (f"; fallback label {saved.fallback!r}" if saved.fallback is not None else ""))
    click.echo(f"  label shares: each QI tested against the saved ones at a family-wise alpha of {shift_alpha:g}")
    if saved.linked is not None:
        names = ", ".join(saved.linked.names)
        click.echo(f"  set: {saved.linked.source_name} with the linked tables {names}; apply and check take a batch of "
                   f"each: --linked NAME=FILE")


def _batch(source: Path | None, source_table: str | None) -> TableRef:
    """The new batch: a file (``--source``, a .duckdb one with its table ``--source-table``) or a table
    of the spec's engine (``--source-table`` alone)."""
    if source is None and source_table is None:
        raise DataError("give the new batch with --source FILE (a .duckdb file with --source-table NAME too) or "
                        "--source-table NAME (a table of the spec's engine)")
    if source is None:
        assert source_table is not None
        return engine_ref(source_table)
    return batch_ref(source, source_table)


@click.command(name="apply")
@policy_file_argument
@source_option
@source_table_option
@click.option("--out", "-o", type=click.Path(path_type=Path), default=None,
              help="Write the release: .parquet, .csv or .duckdb (table --table); with --linked, the folder of "
                   "the set (one file per table and release.json).")
@click.option("--table", "out_table", default=None, metavar="NAME",
              help="Table name inside a .duckdb --out (default deidentified); without --out, a table of the spec's "
                   "PostgreSQL or Spark engine.")
@renamed("--out-table", "--table", "out_table", type=str)
@view_options
@click.option("--overwrite", is_flag=True, help="Replace an existing output file, table or view.")
@click.option("--accept-drift", default=None, metavar="REASON", callback=checked_reason,
              help="Release even though the batch drifted (the check exits 1 and nothing is written without it); "
                   f"{REASON_RULE}, printed and kept with the release.")
@accept_risk_option
@report_option
@linked_options
@handles_errors
def apply_(policy_file: Path, source: Path | None, source_table: str | None, out: Path | None,
           out_table: str | None, view: str | None, db: Path | None, overwrite: bool,
           accept_drift: str | None, accept_risk: str | None, report: Path | None, linked: tuple[str, ...],
           linked_tables: tuple[str, ...]) -> None:
    """Check a new batch for drift, then release it with a saved policy (atomic, row count checked); no
    original data needed. A drifted batch is refused (exit 1, nothing written) unless --accept-drift.
    With --report FILE.html the report a reviewer signs is written too, for the batch as released.
    A policy saved on a set of linked tables takes a batch of each linked table (--linked NAME=FILE)
    and writes the set into the folder --out (one file per table and release.json).

    Example: deid-sql apply policy.json --source demo/cohort.parquet --out release-batch.parquet
    """
    if linked or linked_tables:
        if view is not None or db is not None or out_table is not None or out is None:
            raise OutputError("the batches of a set are released together into a folder: give --out FOLDER (one "
                              "file per table and release.json), without --view, --db or --table")
        if report is not None:
            raise OutputError("--report is not written for a set of linked tables yet: release.json in the folder is "
                              "the set's record; leave out --report")
        _apply_set(policy_file, _batch(source, source_table), _linked(linked, linked_tables), out, overwrite,
                   accept_drift, accept_risk)
        return
    released = (f"view {view} in {db if db is not None else 'the engine'}" if view is not None else
                f"{out}" + (f" table {out_table}" if out_table else "") if out is not None else f"table {out_table}")
    prepare = batch_report(report, overwrite, accept_risk, out if view is None else None, released)
    done = apply_policy(policy_file, _batch(source, source_table), None, out, view, db, out_table,
                        overwrite, accept_drift, accept_risk, prepare=prepare)
    _drift_line(done.drift, done.accepted_drift)
    if done.view is None and done.written is not None:
        w = done.written
        where = (f"{w.path}" + (f" table {w.table}" if w.table else "")) if w.path is not None else f"table {w.table}"
        click.echo(f"wrote {w.rows:,} rows to {where} ({w.format})")
    else:
        where = f"in {done.db}" if done.db is not None else "in the engine"
        click.echo(f"created view {done.view} {where} over {done.batch} ({done.records:,} rows now)")
    echo_release(done.written)
    if done.outside.records:
        click.echo(f"fallback: {done.outside.records:,} {_rows(done.policy)} had values outside the saved domain and "
                   f"were released as {done.policy.fallback!r} ({done.outside.summary()})")
    if done.written is not None:
        finish_release_report(done.prepared, written_files(done.written), figures=done.written.figures)


def _drift_line(d: DriftReport, accepted: str | None) -> None:
    if d.drifted:
        click.echo(f"drift accepted: {d.why()}; reason: {accepted}")
    else:
        click.echo(f"drift check ok: {MEASURE} {d.new.mean_record_risk:.6g} within the limit {d.threshold:.6g}; "
                   f"no QI's label shares moved")


def _apply_set(policy_file: Path, source: TableRef, linked: dict[str, Path | TableRef], out: Path, overwrite: bool,
               accept_drift: str | None, accept_risk: str | None) -> None:
    """``apply`` of a set's batches: the person batch's drift check, then every table into ``out``."""
    done = apply_set(policy_file, source, linked, out, None, overwrite, accept_drift, accept_risk)
    _drift_line(done.drift, done.accepted_drift)
    w = done.written
    click.echo(f"wrote {len(w.tables)} tables ({w.rows:,} rows) to {w.folder}/ ({w.format})")
    counts = {t["name"]: t for t in done.linked}
    for t in w.tables:
        c = counts.get(t.name)
        extra = [] if c is None else (
            ([f"{c['orphans']:,} orphan row(s) dropped"] if c["orphans"] else [])
            + ([f"{c['removed_with_suppressed_persons']:,} row(s) of suppressed persons removed"]
               if c["removed_with_suppressed_persons"] else []))
        click.echo(f"  {t.name}: {t.rows:,} rows" + (f" ({'; '.join(extra)})" if extra else ""))
    echo_release(w)
    if done.outside.records:
        click.echo(f"fallback: {done.outside.records:,} {_rows(done.policy)} had values outside the saved domain and "
                   f"were released as {done.policy.fallback!r} ({done.outside.summary()})")


@click.command(name="check", help=(
    f"Recompute a saved policy's risk on a new batch; exit 1 when its {MEASURE} (expected re-identifications "
    f"per record) exceeds the drift limit, a QI's label shares moved, or the batch's release fails an attribute "
    f"criterion of the spec's [release] (min_l, max_confidence, max_t…, judged as apply's gate would), 0 when not, "
    f"2 for bad input. It prints saved against new, the groups "
    f"whose record risk rose, per QI the label shares that changed most, and per sensitive column the worst "
    f"group's figures.\n\n{RULE_HELP}\n\n"
    f"A policy saved on a set of linked tables takes a batch of each (--linked NAME=FILE): the person batch's "
    f"drift is checked, and each linked batch's rows, orphans and rows of suppressed persons are counted.\n\n"
    f"Example: deid-sql check policy.json --source demo/cohort.parquet"))
@policy_file_argument
@source_option
@source_table_option
@table_option
@click.option("--json", "as_json", is_flag=True, help="Print the figures, the limit, groups and shares as JSON.")
@linked_options
@handles_errors
def check(policy_file: Path, source: Path | None, source_table: str | None, as_json: bool,
          linked: tuple[str, ...], linked_tables: tuple[str, ...]) -> None:
    ref = _batch(source, source_table)
    if linked or linked_tables:
        checked = check_set(policy_file, ref, _linked(linked, linked_tables))
        report, counts = checked.drift, checked.linked
    else:
        report, counts = check_policy(policy_file, ref), []
    if as_json:
        echo_json(report.to_dict() | ({"linked": counts} if counts else {}))
    else:
        _print_report(report)
        for c in counts:
            click.echo(f"linked  {c['name']} {c['batch']}: {c['rows']:,} rows, {c['orphans']:,} orphan row(s) "
                       f"(orphans = {c['orphans_rule']!r}), {c['removed_with_suppressed_persons']:,} row(s) of "
                       f"suppressed persons; {c['released']:,} rows to release")
    if report.failed:
        sys.exit(1)


_FIGURES = (("risk (normalized)", "risk", ".6g"), ("expected re-identifications", "expected_reidentifications", ",.6g"),
            ("max record risk", "max_record_risk", ".6g"), ("k (smallest group)", "k", ","),
            ("groups", "groups", ","), ("sample-unique {unit}", "sample_unique_records", ","),
            ("{unit}", "records", ","))


def _unit(pf: PolicyFile) -> str:
    """What the figures count: persons with [person] (docs/persons.md), else records."""
    return "persons" if pf.person is not None else "records"


def _rows(pf: PolicyFile) -> str:
    """What the fallback counts: a batch's rows (with [person], not persons)."""
    return "row(s)" if pf.person is not None else "record(s)"


def _print_report(r: DriftReport) -> None:
    pf = r.policy
    unit = _unit(pf)
    click.echo(f"policy  {pf.path}: {pf.readable}")
    click.echo(f"batch   {r.batch}: {r.new.records:,} {unit} (saved on {pf.saved_on()}: {r.saved.records:,})")
    if r.outside.records:
        click.echo(f"fallback {r.outside.records:,} {_rows(pf)} outside the saved domain, released as "
                   f"{pf.fallback!r} ({r.outside.summary()})")
    click.echo(f"{MEASURE} (expected re-identifications per record): saved {r.saved.mean_record_risk:.6g}, "
               f"new {r.new.mean_record_risk:.6g}, limit {r.threshold:.6g} ({r.rule})")
    if r.limit is not None and r.limit.expected is not None:
        click.echo(f"  batches of {r.new.records:,} {unit} drawn from the saved and new {unit} pooled: "
                   f"{r.limit.expected:.6g} on average")
    for label, key, fmt in _FIGURES:
        before, after = format(getattr(r.saved, key), fmt), format(getattr(r.new, key), fmt)
        click.echo(f"  {label.format(unit=unit):<28} {before:>14} → {after}")
    if r.moved:
        click.echo(f"groups that moved: {r.rose:,} with a higher record risk, {r.below_k:,} smaller than the saved "
                   f"k = {r.saved.k}, {r.new_groups:,} not in the saved release, {r.gone:,} gone; "
                   f"{len(r.moved)} shown, largest rise first:")
        for g in r.moved:
            click.echo("  " + _group_line(pf.names, g, unit))
    shares = {qi: changes for qi, changes in r.shares.items() if changes}
    if shares:
        click.echo("label shares that changed most (saved → new):")
        for qi, changes in shares.items():
            click.echo(f"  {qi}: " + ", ".join(f"{c.describe()} ({c.change * 100:+.1f} pts)" for c in changes))
    if pf.without_tolerance:
        click.echo("note: this policy file was saved without a drift tolerance, so its limit is the saved figure "
                   "exactly; re-save it with deid-sql policy save for the statistical limit")
    s = r.shift
    if s is not None:
        if s.note:
            click.echo(f"note: {s.note}")
        for t in s.drifted:
            click.echo(f"drift in {t.describe(s.tested)}")
        if s.ran and not s.shifted:
            click.echo(f"ok: {s.describe()}")
    if r.exceeded:
        click.echo(f"drift: {MEASURE} {r.new.mean_record_risk:.6g} exceeds the limit {r.threshold:.6g}")
    else:
        click.echo(f"ok: {MEASURE} {r.new.mean_record_risk:.6g} is within the limit {r.threshold:.6g}")
    _print_attribute(r)


def _print_attribute(r: DriftReport) -> None:
    """The spec's attribute criteria on the batch's release: per sensitive column the worst group's
    figures, each criterion's verdict in the gate's words, then one verdict line."""
    if not r.attribute:
        return
    click.echo("attribute criteria of [release] on the batch's release (as apply's gate judges the rows it writes):")
    for a in r.attribute:
        figures = [f"largest share {a.max_confidence:.3g}", f"distinct ℓ {a.min_distinct_l:.3g}",
                   f"entropy ℓ {a.min_entropy_l:.3g}"]
        figures += [f"t {a.max_t:.3g}"] if a.max_t is not None else []
        figures += [f"presence {a.max_presence:.3g}"] if a.max_presence is not None else []
        click.echo(f"  {a.column} over {a.groups:,} groups, the worst: " + ", ".join(figures))
        for c in a.checks:
            click.echo(f"    {'ok  ' if c.passed else 'FAIL'} {c.key}: {c.text}")
    failures = r.attribute_failures
    if failures:
        columns = ", ".join(dict.fromkeys(c.column for c in failures))
        click.echo(f"refused: the batch's release fails {len(failures)} attribute criteri"
                   f"{'on' if len(failures) == 1 else 'a'} on {columns}; apply would refuse it")
    else:
        click.echo("ok: the batch's release meets every attribute criterion")


def _group_line(names: tuple[str, ...], g: MovedGroup, unit: str = "records") -> str:
    labels = ", ".join(f"{n}={v}" for n, v in zip(names, g.labels))
    before = "new group" if g.records_before is None else f"{g.records_before:,}"
    parts = [f"{unit} {before} → {g.records_after:,}"]
    if g.population_after is not None:
        pop = "-" if g.population_before is None else f"{g.population_before:,.0f}"
        parts.append(f"population {pop} → {g.population_after:,.0f}")
    risk = "-" if g.risk_before is None else f"{g.risk_before:.4g}"
    parts.append(f"record risk {risk} → {g.risk_after:.4g}")
    return f"[{labels}] " + ", ".join(parts) + (" (below the saved k)" if g.below_k else "")
