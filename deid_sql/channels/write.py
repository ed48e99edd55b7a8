"""Writing a channel release: the released rows (file, DuckDB table or view), the
output-channel composition users are told (§3.1), and a JSON summary.

The release is checked before anything is written; files go through temporary
siblings renamed together at the end, so a failure leaves nothing behind.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
from sqlglot import exp

from .. import __version__
from ..compiler.compile import ident
from ..errors import OutputError, ReleaseRefused
from ..release.gate import Check, Verdict
from ..release.output import check_not_input, output_format, view_source, write_file
from ..release.sidecar import (
    FORMAT,
    INVOCATION,
    VERSION,
    as_table,
    file_sha256,
    sidecar_path,
    sidecar_table,
    to_json,
    utc_now,
)
from ..storage.atomic import replacing
from .assignment import RELATIVE
from .job import ChannelJob
from .release import ReleaseCheck, composition


@dataclass
class Written:
    """What ``write_release`` produced, for the CLI to report."""

    check: ReleaseCheck
    lines: list[str] = field(default_factory=list)


def summary(job: ChannelJob, checked: ReleaseCheck | None = None) -> dict[str, Any]:
    """The figures of a solved expansion (what the CLI prints and ``--figures`` writes)."""
    inputs, classes, whole = job.inputs, job.classes, job.whole
    n_out = len(job.program.outputs)
    used = int(whole.used.sum())
    data: dict[str, Any] = {
        "subjects": inputs.total,
        "input_channels": len(inputs.keys),
        "risky_input_channels": int(classes.risky.sum()),
        "risky_subjects": int(inputs.sizes[classes.risky].sum()),
        "values": {v: {"prior": float(inputs.prior[k]), "u": float(job.rule.u[k]), "c": float(job.rule.c[k])}
                   for k, v in enumerate(inputs.values) if k},
        "b": job.rule.b,
        "output_channels": n_out,
        "dropped_listed_output_channels": list(job.program.outputs.dropped),
        "variables": job.program.n_vars,
        "constraints": job.program.n_constraints,
        "lp": {"psi": job.lp.objective, "omega": job.lp.objective / inputs.total ** 2, "seconds": job.lp.seconds},
        "release": {"route": job.route, "psi": whole.objective, "omega": whole.omega, "used_output_channels": used,
                    "unused_share": 1 - used / n_out, "all_channel_share": whole.all_channel_share,
                    "repairs": job.repairs.describe()},
        "seconds": job.seconds,
    }
    if checked is not None:
        data["check"] = {"how": checked.how, "max_p_minus_u": checked.worst_u, "max_weighted_minus_b": checked.worst_b,
                         "max_realized_share_minus_u": checked.realized_excess, "rows": checked.rows}
    return data


def write_release(job: ChannelJob, out: Path | None = None, fmt: str | None = None, table: str | None = None,
                  view: str | None = None, db: Path | None = None, report: Path | None = None,
                  overwrite: bool = False) -> Written:
    """Check the release, then write what was asked — all of it, or nothing.

    Every target is checked first (names taken, inputs of the spec); files are written to
    temporary siblings renamed together at the end; database objects created before a
    later step fails are dropped again.
    """
    in_engine = job.backend.catalog  # views then go into the engine's catalog, no file
    if (db is not None and view is None) or (view is not None and db is None and not in_engine):
        raise OutputError("--view and --db go together: name the view and the DuckDB file to create it in")
    # --table without --out: a table inside the engine itself (PostgreSQL, Spark)
    kind = output_format(out, fmt) if out is not None else ("engine" if table else None)
    name = table or "released"
    _refuse_taken(job, out, kind, name, view, db, report, overwrite)
    checked = job.check()
    verdict = channel_verdict(checked)
    if not verdict.passed:  # the check raises first today; the verdict is the gate's word all the same
        raise ReleaseRefused(f"channel release refused by its check ([channels] of {job.spec.path}): "
                             f"{'; '.join(verdict.failures)}; nothing was written")
    result = Written(checked)
    comp = composition(job.release, job.inputs)
    where = ({"kind": "file", "name": out.name, "path": str(out.resolve()), "format": kind} if out is not None
             and kind not in ("duckdb", "engine") else {"kind": "table", "name": name,
                                                       "database": str(out.resolve()) if out else "engine"})
    if view is not None:
        where = {"kind": "view", "name": view, "database": str(db.resolve()) if db else "engine"}
    record = release_record(job, checked, where, verdict)
    created: list[tuple[Path, str, str]] = []
    with ExitStack() as stack:
        try:
            if report is not None:
                tmp = stack.enter_context(replacing(report, overwrite))
                tmp.write_text(json.dumps(summary(job, checked), indent=2, default=_jsonable), encoding="utf-8")
                result.lines.append(f"summary {report}")
            if kind in ("duckdb", "engine"):  # tables: out is the DuckDB file, or None for the engine
                job.backend.register_table("deid_composition", comp)
                job.backend.create_table(out, f"{name}_channels", exp.select("*").from_("deid_composition"),
                                         comp.num_rows, overwrite)
                created.append((out, f"{name}_channels", "TABLE"))
                rows = job.backend.create_table(
                    out, name, job.query(), job.inputs.total, overwrite,
                    finish=lambda run, target: {sidecar_table(name): as_table(record | {"release": where | {
                        "rows": job.inputs.total}})})
                created.append((out, name, "TABLE"))
                created.append((out, sidecar_table(name), "TABLE"))
                where = out if out is not None else "the database"
                result.lines.append(f"wrote {rows:,} rows to {where} table {name}, composition table {name}_channels, "
                                    f"sidecar table {sidecar_table(name)}")
            elif out is not None and kind is not None:
                companion = _companion(out)
                pacsv.write_csv(comp, stack.enter_context(replacing(companion, overwrite)))
                side = stack.enter_context(replacing(sidecar_path(out), overwrite))
                tmp = stack.enter_context(replacing(out, overwrite))
                rows = write_file(job.backend, job.spec, job.query(), tmp, kind, job.inputs.total, out.name)
                side.write_text(to_json(record | {"release": where | {"rows": rows, "sha256": file_sha256(tmp)}}),
                                encoding="utf-8")
                result.lines.append(f"wrote {rows:,} rows to {out} ({kind}), composition {companion}, "
                                    f"sidecar {sidecar_path(out)}")
            if view is not None:
                source = view_source(job.spec, job.source, db, dict.fromkeys(job.columns))
                job.backend.create_view(db, f"{view}_channels", _values(comp), overwrite)
                created.append((db, f"{view}_channels", "VIEW"))
                job.backend.create_view(db, view, job.query(source), overwrite,
                                        companions={sidecar_table(view): as_table(record)})
                created.append((db, view, "VIEW"))
                created.append((db, sidecar_table(view), "TABLE"))
                result.lines.append(f"created view {view} in {db if db is not None else 'the database'}, "
                                    f"composition view {view}_channels, sidecar table {sidecar_table(view)}")
        except BaseException:
            for database, obj, obj_kind in reversed(created):
                job.backend.drop(database, obj, obj_kind)
            raise
    return result


def channel_verdict(checked: ReleaseCheck) -> Verdict:
    """The gate's ``Verdict`` on a channel release: the [channels] thresholds, not [release]'s
    criteria (a channel release protects the confidential value, not identities).  (6): no value
    more likely in any output channel than its u_k; (8): the weighted risk at most b (with b);
    each within the solver's tolerance."""
    slack = RELATIVE * 10
    checks = [Check("channels.u", "max P(v|output channel) - u", checked.worst_u, slack, True,
                    checked.worst_u <= slack,
                    f"(6) max P(v|output channel) - u {checked.worst_u:.6g} (limit {slack:.3g}: must be <=)")]
    if checked.worst_b is not None:
        checks.append(Check("channels.b", "max sum c P(v|output channel) - b", checked.worst_b, slack, True,
                            checked.worst_b <= slack,
                            f"(8) max sum c P(v|output channel) - b {checked.worst_b:.6g} (limit {slack:.3g}: "
                            f"must be <=)"))
    return Verdict(tuple(checks), original_data=False, declared=True)


def release_record(job: ChannelJob, checked: ReleaseCheck, where: dict[str, Any],
                   verdict: Verdict | None = None) -> dict[str, Any]:
    """The sidecar of a channel release: what left (identity columns and the output-channel
    label; every other column is not released), from what, and the check that it is safe."""
    verdict = verdict if verdict is not None else channel_verdict(checked)
    settings = job.settings
    roles = []
    for column in job.columns:
        if column in settings.identity:
            roles.append({"name": column, "role": "identity (released)"})
        elif column in settings.related:
            roles.append({"name": column, "role": "related (replaced by the output channel)"})
        elif column == settings.confidential:
            roles.append({"name": column, "role": "confidential (not released)"})
        else:
            roles.append({"name": column, "role": "not released"})
    roles.append({"name": settings.label_column, "role": "output channel label"})
    spec = job.spec
    source = {"path": str(spec.source.path), "format": spec.source.format, "table": spec.source.table,
              "sha256": file_sha256(spec.source.path) if spec.source.path and spec.source.path.is_file() else None,
              "rows": job.inputs.total} if spec.source.path else {"engine": spec.backend.engine,
                                                                    "table": spec.source.table,
                                                                    "rows": job.inputs.total}
    return {
        "format": FORMAT, "version": VERSION, "release": where, "created_at": utc_now(),
        "software": {"name": "deid-sql", "version": __version__},
        "reproduce": {"command": INVOCATION.get(), "api": "deid_sql.channels.write_release(solve(spec), …)"},
        "spec": {"path": str(spec.path), "sha256": file_sha256(spec.path) if spec.path.is_file() else None,
                 "name": spec.name},
        "source": source, "population": None, "columns": roles,
        "figures": summary(job, checked),
        "gate": {"criteria": "[channels] thresholds u_k and b (seed 003 eqs. 2-4)", **verdict.to_dict()},
    }


def _companion(out: Path) -> Path:
    return out.with_name(out.stem + ".channels.csv")


def _refuse_taken(job: ChannelJob, out: Path | None, kind: str | None, name: str, view: str | None,
                  db: Path | None, report: Path | None, overwrite: bool) -> None:
    """Every target at once, before the check and before any write."""
    files = [p for p in (report, out if kind != "duckdb" else None,
                         _companion(out) if out is not None and kind != "duckdb" else None,
                         sidecar_path(out) if out is not None and kind != "duckdb" else None) if p is not None]
    tables = kind in ("duckdb", "engine")
    for path in files + [p for p in (out, db) if p is not None]:
        check_not_input(job.spec, path)
    for path in files:
        if path.exists() and not overwrite:
            raise OutputError(f"output {path} already exists; pass --overwrite to replace it")
    objects = [(out, n, "--table") for n in (name, f"{name}_channels", sidecar_table(name))] if tables else []
    if view:
        objects += [(db, n, "--view") for n in (view, f"{view}_channels", sidecar_table(view))]
    for database, obj, flag in objects:
        if not overwrite and job.backend.exists(database, obj):
            where = database if database is not None else "the database"
            raise OutputError(f"{where} already has a table or view named {obj!r}; pick another {flag} or pass "
                              f"--overwrite")


def _values(table: pa.Table) -> exp.Select:
    """A self-contained ``SELECT`` of a small table (a view that needs no side table)."""
    rows = [exp.tuple_(*[exp.convert(v) for v in r.values()]) for r in table.to_pylist()]
    alias = exp.TableAlias(this=ident("composition"), columns=[ident(c) for c in table.column_names])
    values = exp.Values(expressions=rows, alias=alias)
    return exp.select(*[exp.Column(this=ident(c)) for c in table.column_names]).from_(values)


def _jsonable(value: object) -> object:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")
