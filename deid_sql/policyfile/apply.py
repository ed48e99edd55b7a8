"""``apply_policy``: release a new batch under a saved policy, without the data it was chosen on.

The drift check runs first, on the same connection: a batch that ``check`` would flag (its risk
above the limit, or a QI's label shares moved) is
refused (``DriftRefused``, exit 1) before anything is written, unless ``accept_drift`` gives the
reason to release it anyway; the report and the reason come back in ``Applied``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..backends import engine_class
from ..domains.recoding import Recoding
from ..errors import OutputError
from ..evaluate.riskmodel import risk_model
from ..release.attribute import open_linked_values, source_query
from ..release.figures import Census
from ..release.gate import (
    ReleaseGate,
    ReleaseSource,
    build_gate,
    describe_table,
    override_reason,
    safe_harbor_risk,
)
from ..release.output import FORMATS, Written, view_source, write_query
from ..release.sidecar import file_sha256, population_without_census, sidecar_table
from ..spec.file import TableRef
from ..storage.names import check_output_name
from ..storage.tableref import engine_inputs
from .batch import Batch, Outside, batch_ref, engine_of, engine_tables, open_batch, spec_for_batch
from .drift import DriftRefused, DriftReport, census_people, drift_report
from .format import PolicyFile, one_table


@dataclass(frozen=True)
class Applied:
    """What ``apply_policy`` wrote — a file or table (``written``) or a view — with the drift
    report it passed (or that ``accepted_drift`` overrode) and the fallback count."""

    policy: PolicyFile
    batch: str
    records: int
    outside: Outside
    drift: DriftReport
    written: Written | None = None
    view: str | None = None
    db: Path | None = None  # the DuckDB file of the view; None for a view in the engine
    accepted_drift: str | None = None  # the --accept-drift reason (given, whether or not drift was found)
    prepared: Any = None  # what ``prepare`` returned (the CLI's pending report)


def apply_policy(policy: str | Path | PolicyFile, source: str | Path | TableRef, table: str | None = None,
                 out: str | Path | None = None, view: str | None = None, db: str | Path | None = None,
                 out_table: str | None = None, overwrite: bool = False,
                 accept_drift: str | None = None, accept_risk: str | None = None,
                 prepare: Callable[[Batch, ReleaseGate], Any] | None = None) -> Applied:
    """Generalize a batch with a saved policy into ``out`` (Parquet, CSV or a DuckDB table, atomic
    and row-count checked), into view ``view`` (of the DuckDB file ``db``, or of the engine), or —
    on PostgreSQL or Spark — into table ``out_table`` of the engine.

    The batch must have the saved columns (same names, same kinds of type) and the spec must
    still declare the saved QIs (the spec hash); values outside the saved domains are refused,
    or given the policy's fallback label when it has one.  A batch that drifted (see
    ``check_policy``) is refused with ``DriftRefused`` unless ``accept_drift`` says why it may go.
    Then the release gate: the spec's column roles, and its ``[release]`` criteria judged on the
    rows written (``accept_risk`` overrides a failure); the sidecar records both reasons.
    ``prepare(batch, gate)`` runs after the checks and before anything is written (the CLI builds
    the release's report there, so a report that cannot be built writes nothing); what it returns
    comes back as ``Applied.prepared``.
    """
    reason = override_reason(accept_drift, "--accept-drift")
    pf = policy if isinstance(policy, PolicyFile) else PolicyFile.read(policy)
    one_table(pf, "apply")
    ref = source if isinstance(source, TableRef) else batch_ref(source, table)
    engine = engine_of(spec_for_batch(pf.spec, ref)[1])
    target = _check_target(pf, engine, out, view, db, out_table, overwrite)
    name = view if view is not None else out_table
    if out is None and db is None and name is not None and engine_class(engine).catalog:
        # before the batch is read: an output that is an input (the batch, the spec's source or
        # population) would be replaced by the data computed from it
        raw = spec_for_batch(pf.spec, ref)[1]
        check_output_name(engine, name, "--view" if view is not None else "--table",
                          inputs=[*engine_inputs(ref), *sorted(engine_tables(raw))])
    with open_batch(pf, ref) as batch:
        name = view if view is not None else out_table
        if target is not None and batch.original is not None and target.resolve() == batch.original:
            raise OutputError(f"output {target} is the source the policy was saved on; write elsewhere")
        drift = drift_report(batch)
        if drift.drifted and reason is None:
            raise DriftRefused(drift)
        done = Applied(pf, batch.describe(), batch.records, batch.outside, drift, accepted_drift=reason)
        call = (f"deid_sql.policyfile.apply_policy({str(pf.path)!r}, {str(ref.path or ref.table)!r}, "
                + ", ".join(f"{k}={v!r}" for k, v in (("out", out and str(out)), ("view", view), ("db", db and str(db)),
                                                       ("out_table", out_table)) if v) + ")")
        gate = batch_gate(batch, drift, call, accept_risk, reason)
        gate.precheck()
        if prepare is not None:
            done = replace(done, prepared=prepare(batch, gate))
        if view is None:
            written = write_query(batch.backend, batch.spec, batch.release_query(), target, batch.records, None,
                                  out_table, overwrite, gate=gate)
            return replace(done, written=written)
        query = batch.release_query(view_source(batch.spec, batch.relation, target, batch.columns), persistent=True)
        figures = gate.measure(batch.backend.execute, batch.release_query())
        verdict = gate.judge(figures)
        where = {"kind": "view", "name": view, "database": str(target.resolve()) if target else engine,
                 "rows": batch.records}  # the batch's rows (the figures may count persons)
        batch.backend.create_view(target, view, query, overwrite,
                                  companions=gate.record_table(view, figures, verdict, where))
        return replace(done, view=view, db=target, written=Written(target, "view", batch.records, view,
                                                                     figures=figures, verdict=verdict,
                                                                     sidecar=sidecar_table(view)))


def batch_gate(batch: Batch, drift: DriftReport, call: str, accept_risk: str | None,
               accept_drift: str | None, whole_set: bool = False, reference: bool = True,
               recorded: bool = True) -> ReleaseGate:
    """The release gate of a batch (``build_gate``, as every release path): the spec's criteria
    and roles, the census people of the batch's released groups (from the drift check's census
    query), Safe Harbor on the batch itself, and the drift check's record.  With ``[person]`` the
    gate counts persons (distinct released keys) on the rows written; the source is described by
    its rows, which the written rows must match.  ``whole_set``: the batches of a set of linked
    tables released together (``applyset``), the only path that may release a spec with ``[[table]]``;
    ``reference=False``: a gate that only measures (``check.attribute_figures``), without Safe Harbor's risk."""
    spec, pf = batch.spec, batch.policy
    measured = drift.groups
    people = (None if measured is None or measured.population is None else
              {labels: float(n) for labels, n in zip(measured.labels, measured.population)})
    new = drift.new
    names = [c.name for c in pf.columns]

    policy_labels = [list(q.labels) for q in pf.plan().recoding.qis]

    def census(recoding: Recoding) -> Census:
        """The policy's groups from the drift check's census query; any other recoding (the union's
        refinements, a derived row count kept exact) counted on the population where it is."""
        labels = [list(q.labels) for q in recoding.qis]
        mapping = people if labels == policy_labels else (
            census_people(batch, recoding) if people is not None else None)
        return Census.from_mapping(labels, mapping, new.population_total)

    def safe_harbor() -> float:
        from ..problem import Problem

        with Problem.from_spec(spec) as problem:  # the batch as the source
            return safe_harbor_risk(problem)

    released = ReleaseSource(
        spec=spec,
        census=census,
        record_risk=risk_model(spec, new.population_total),
        original_risk_sum=new.risk_sum / new.risk if new.risk > 0 else 0.0,
        source=describe_table(spec, batch.ref, batch.records, {n: batch.columns[n] for n in names}),
        population=(population_without_census(spec) if spec.population is None else
                    describe_table(spec, spec.population, int(new.population_total), None)),
        columns=spec.columns.released(names, [q.column for q in spec.qis], f"batch {batch.describe()}"),
        safe_harbor_risk=safe_harbor,
        policy={"file": str(pf.path) if pf.path else None,
                "file_sha256": file_sha256(pf.path) if pf.path is not None and pf.path.is_file() else None},
        extra={"drift": drift.to_dict() | {"accepted_drift": accept_drift}},
        person=spec.person.column if spec.person is not None else None,
        source_values=lambda column: batch.backend.execute(
            source_query(batch.relation.copy(), column, spec.person.column if spec.person else None)),
        linked=(lambda plan: open_linked_values(  # a set's batches: the linked batches' sensitive values
            batch.backend, spec, batch.release_query(roles=False),
            batch.columns.get(spec.person.column if spec.person else ""), plan.suppression is not None))
        if spec.tables else None,
        persons=int(new.records) if spec.person is not None else None)
    return build_gate(released, pf.plan(), call, accept_risk, whole_set=whole_set, reference=reference,
                      recorded=recorded)


def _check_target(pf: PolicyFile, engine: str, out: str | Path | None, view: str | None, db: str | Path | None,
                  out_table: str | None, overwrite: bool) -> Path | None:
    """Which output was asked for, refused before the batch is read when it cannot be written:
    the policy file or its spec, an existing file, a combination the engine does not have.
    Returns the output file or the view's DuckDB file (None: a table or view in the engine)."""
    in_engine = engine_class(engine).catalog  # tables and views can go into the engine itself
    if out is not None and view is not None:
        raise OutputError("give --out FILE or --view NAME (one of them), not both")
    if view is not None and out_table is not None:
        raise OutputError("--table names the table of a release, not of a view; give one of them")
    if out is None and view is None and (out_table is None or not in_engine):
        if out_table is not None:
            raise OutputError("--table names the table inside a .duckdb --out (the spec runs on DuckDB); "
                              "add --out FILE.duckdb")
        raise OutputError("give --out FILE, or --view NAME with --db FILE.duckdb (one of them)" if not in_engine else
                          f"give --out FILE, --table NAME (a table in {engine}) or --view NAME (a view in "
                          f"{engine})")
    if view is not None:
        if not in_engine and db is None:
            raise OutputError("--view needs --db FILE.duckdb: the DuckDB file to create the view in")
        if in_engine and db is not None:
            raise OutputError(f"the spec runs on {engine}: the view goes into its catalog, not into {db}; "
                              f"leave out --db")
    target = Path(out) if out is not None else Path(db) if db is not None else None
    if target is None:
        return None
    if pf.path is not None and target.resolve() == pf.path.resolve():
        raise OutputError(f"output {target} is the policy file; write the release elsewhere")
    if target.resolve() == pf.spec:
        raise OutputError(f"output {target} is the policy's spec; write the release elsewhere")
    fmt = FORMATS.get(target.suffix.lower())
    if out is not None and fmt is None:
        raise OutputError(f"cannot tell the output format of {target}; use .parquet, .csv or .duckdb")
    if out is not None and out_table is not None and fmt != "duckdb":
        raise OutputError(f"--table names the table inside a .duckdb --out; {target} is a {fmt} file")
    if out is not None and fmt != "duckdb" and target.exists() and not overwrite:
        raise OutputError(f"output {target} already exists; pass --overwrite to replace it")
    return target
