"""The expert-determination report of one release, as a dict (rendered by ``release_html``).

A reviewer signs a document, not a command line: the report says what data left (columns and
roles, hashes), under which policy (its rules in words, with the labels and their records),
how risky it is on the gate's own figures (measured on the released rows, as the release gate
measures them, so the report and the gate cannot disagree) and against HIPAA Safe Harbor and
the original data (``evaluate``'s figures: the same digits ``deid-sql evaluate`` prints), what
utility is kept, where the policy sits on a frontier run, and how to reproduce it all.

``build_report`` never raises for a failing gate: the report of a refused policy says
"failed" (or "accepted" with the reason given), since a reviewer may be shown either.
"""

from __future__ import annotations

import getpass
import json
import shlex
import socket
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..compiler.compile import SUPPRESSED
from ..domains.recoding import Recoding
from ..errors import DeidError, PolicyError, ReleaseRefused
from ..evaluate.metrics import Metrics
from ..release.figures import ReleaseFigures
from ..release.gate import ReleaseGate, ReleaseSource, Verdict, build_gate
from ..release.plan import ReleasePlan, plan_of
from ..release.recorded import resolved
from ..release.sidecar import FORMAT as SIDECAR_FORMAT
from ..release.sidecar import INVOCATION, file_sha256, utc_now
from ..release.unit import Unit
from ..spec.transform import describe
from . import release_contents as contents
from .attribute_section import attribute_section, sensitive_columns, unjudged
from .cautions import cautions
from .estimates import add_expected, disagreement_caution, disagreement_sentence, estimates
from .frontier_report import CHECKPOINT, problem_identity, read_baselines
from .risk_models import describe_model, method_papers, population_sentence

if TYPE_CHECKING:

    from ..problem import Problem
    from ..spec.file import Spec

FORMAT = "deid-sql-report"
VERSION = 1
ROLE_WORDS = {"qi": "QI", "drop": "dropped", "pseudonymize": "pseudonymized", "sensitive": "sensitive",
              "keep": "kept", "flag": "suppression flag", "shift": "shifted"}
ATTESTATION = ["Name", "Role", "Organization", "Date", "Signature"]


class ReportInputError(DeidError):
    """A sidecar, policy file or frontier folder that does not belong to the report's problem."""


# -- inputs ---------------------------------------------------------------------------------
def load_sidecar(path: Path, problem: Problem) -> dict[str, Any]:
    """A release sidecar (``<file>.release.json``) of this problem's spec; its policy text is the
    report's policy.  Refuses (one line) an unreadable file or a sidecar of another spec."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ReportInputError(f"cannot read release sidecar {path} ({_reason(e)}); pass the .release.json file "
                               f"written beside a release") from None
    if not isinstance(data, dict) or data.get("format") != SIDECAR_FORMAT:
        raise ReportInputError(f"{path} is not a deid-sql release sidecar (no \"format\": \"{SIDECAR_FORMAT}\"); "
                               f"pass the .release.json file written beside a release")
    spec = data.get("spec") if isinstance(data.get("spec"), dict) else {}
    policy = data.get("policy") if isinstance(data.get("policy"), dict) else {}
    own = _spec_sha256(problem)
    if spec.get("sha256") != own:
        saved = str(spec.get("sha256") or "none")[:12]
        raise ReportInputError(f"release sidecar {path} was written for another spec ({spec.get('path')}, sha256 "
                               f"{saved}…) than {problem.spec.path} (sha256 {own[:12]}…); report it with the "
                               f"spec it was released from")
    if not any(isinstance(policy.get(key), str) and policy[key] for key in ("text", "levels")):
        raise ReportInputError(f"release sidecar {path} records no policy text (a recoding, e.g. Safe Harbor); "
                               f"report it with --policy")
    return data


def policy_from_file(path: Path, problem: Problem) -> ReleasePlan:
    """The release plan of a policy file (``deid-sql policy save``, ``anonymize --save-policy``): its
    recoding on the saved domains, text or levels, and suppressed groups; refuses a file whose spec
    hash does not match this problem's QI declarations and source columns (one line)."""
    from ..policyfile import PolicyFile
    from ..policyfile.batch import spec_digest
    from ..policyfile.format import RESAVE, type_class

    pf = PolicyFile.read(path)
    digest = spec_digest(problem.spec, pf, [(n, type_class(t)) for n, t in problem.columns.items()])
    if digest != pf.spec_sha256:
        raise ReportInputError(f"policy file {path} was saved for another spec/schema (hash {pf.spec_sha256[:12]}…, "
                               f"{problem.spec.path} gives {digest[:12]}…); {RESAVE}")
    if pf.suppression is None and pf.levels is None and all(q.groups is None for q in pf.qis):
        return plan_of(problem, pf.policy)
    plan = pf.plan()
    # the saved domains are the problem's: the recoding is checked against them, named in words
    return replace(plan, item=problem.recoding(replace(plan.recoding, name=pf.readable)))


def _spec_sha256(problem: Problem) -> str:
    path = problem.spec.path
    return file_sha256(path) if path.is_file() else ""


def _reason(e: Exception) -> str:
    if isinstance(e, OSError):
        return e.strerror or str(e)
    if isinstance(e, json.JSONDecodeError):
        return f"not JSON: line {e.lineno}, column {e.colno}: {e.msg}"
    return "not UTF-8 text"


# -- the report -------------------------------------------------------------------------------
def build_report(problem: Problem, plan: ReleasePlan, *, sidecar: dict[str, Any] | None = None,
                 frontier: Path | None = None, sample_rows: int = 0, command: str | None = None,
                 accept_risk: str | None = None, whole_set: bool = False) -> dict[str, Any]:
    """The report dict (see the module docstring and docs/report.md) of releasing ``plan``
    (``release.plan.plan_of``).

    The figures are measured on the release query's rows and the distributions computed from
    cells with the same suppression, and the two must agree (``ReportInputError`` otherwise: the
    report would describe another release).  ``whole_set``: ``plan`` releases the person source
    of a set of linked tables (``sets.release``), described here as a single table's release; its
    tables are added once written (``set_section``)."""
    if sample_rows < 0:
        raise PolicyError(f"sample rows {sample_rows} must be 0 (synthetic rows) or a count of release rows")
    spec = problem.spec
    recoding, text, readable, suppression = plan.recoding, plan.text, plan.readable, plan.suppression
    if accept_risk is None and sidecar is not None:
        accept_risk = (sidecar.get("gate") or {}).get("accepted_risk")
    call = f"build_report(Problem.from_spec({str(spec.path)!r}), {plan.repr_call()})"
    gate = build_gate(ReleaseSource.from_problem(problem), plan, call, accept_risk, whole_set=whole_set)
    recorded = (sidecar or {}).get("ledger")
    if isinstance(recorded, dict) and isinstance(recorded.get("entry"), int):
        gate.before = recorded["entry"]  # a release made earlier: judged with what its recipient held then
    figures = gate.measure(problem.backend.execute, problem.query(plan, measuring=True))
    verdict = gate.verdict(figures)
    if sample_rows > 0 and not verdict.passed and accept_risk is None:
        # the sample rows are rows of the release: they leave only through a gate that lets the release go
        failures = "; ".join(verdict.failures)
        raise ReleaseRefused(f"--sample-rows {sample_rows}: the release fails the gate ({failures}), so none of its "
                             f"rows may leave, in a report either; leave out --sample-rows (the report shows "
                             f"synthetic rows) or pass --accept-risk \"REASON\"")
    status = _status(verdict)
    unit = Unit.of(spec.person)  # the words of what the figures count: persons with [person]
    metrics = problem.evaluate(plan.item)
    original = problem.evaluate(problem.lattice.original())
    harbor, harbor_note = _safe_harbor(problem)
    groups = contents.Groups(problem, recoding, suppression, census=gate.census)  # the gate's census, built once
    if groups.suppressed != figures.suppressed:
        raise ReportInputError(f"the release suppresses {figures.suppressed:,} {unit.many} where its rule "
                               f"({suppression.rule if suppression else 'no suppression'}) gives "
                               f"{groups.suppressed:,} on the loaded data: the data changed while the report "
                               f"was built; run it again")
    kl, iyengar = (contents.losses(problem, recoding, groups) if groups.suppressed
                   else (metrics.kl, metrics.iyengar_loss))
    loss = kl / original_top_kl(problem) if groups.suppressed else metrics.loss
    qi_columns = [q.column for q in spec.qis]
    columns = list(gate.columns)

    figure_dict = {"records": figures.records, "groups": figures.groups,
                   "expected_reidentifications": figures.expected_reidentifications,
                   "mean_record_risk": figures.mean_record_risk, "max_record_risk": figures.max_record_risk,
                   "k": figures.k, "sample_uniques": figures.sample_unique_records, "suppressed": figures.suppressed,
                   "risk": figures.risk}
    model = describe_model(problem, groups.m_all, harbor_note)
    if groups.suppressed:  # the policy's groups before its suppression, labelled apart from the release's
        comparison = [_row("this policy, before suppression", metrics),
                      _row("this release, after suppression", metrics, figures, loss)]
        before_figures = _before_suppression(metrics)
    else:
        comparison = [_row("this policy", metrics, figures, loss)]
        before_figures = None
    if harbor is not None:
        comparison.append(_row("HIPAA Safe Harbor", harbor))
    comparison.append(_row("original data", original))
    no_census = _no_census(problem, recoding, groups)
    add_expected(no_census)
    estimated = estimates(figure_dict, model, no_census)  # the headline's model and the others' figures
    at_risk = groups.at_risk()
    sensitive = sensitive_columns([spec.columns.sensitive, *(t.roles.sensitive for t in spec.tables)])
    union = figures.union.to_dict() | {"words": figures.union.words()} if figures.union is not None else None
    warnings = cautions(figure_dict, at_risk, model, no_census, unit,
                        unjudged(sensitive, list(spec.release.attribute)), union)
    disagreeing = disagreement_caution(estimated)
    if disagreeing is not None:
        warnings.insert(0, disagreeing)
    attribute = attribute_section(problem.backend.execute, problem.query(plan, measuring=True), gate,
                                  spec.qi_names, figures.attribute, dict(spec.release.attribute))
    for a in attribute:  # the worst group is counted again here: a change in between would show two releases
        if a["worst_group"] is not None and abs(a["worst_group"]["share"] - a["max_confidence"]) > 1e-9:
            raise ReportInputError(f"{a['column']}: the gate measured a largest share of {a['max_confidence']:.6g} "
                                   f"and the report {a['worst_group']['share']:.6g}: the data changed while the "
                                   f"report was built; run it again")
    # with [person] a suppressed person blanks every row of theirs: the rows are said beside the persons
    suppressed_rows = (_suppressed_rows(problem, plan) if unit.persons and figures.suppressed else
                       figures.suppressed)

    rules, per_qi, marginals = [], [], []
    for q, (qi, domain, qrec) in enumerate(zip(spec.qis, problem.domains, recoding.qis)):
        before = contents.original_marginal(problem, q)
        after = groups.records_per_label(q, qrec.n_groups)
        rules.append(contents.rule(qi.name, qi.kind, domain, qrec, after, "row" if unit.persons else "record"))
        per_qi.append({"qi": qi.name, "information_kept": contents.information_kept(problem, q, qrec, groups)})
        ordered = qi.kind in ("integer", "date")
        released = float(after.sum()) + groups.suppressed
        shown = contents.shares(list(qrec.labels), after, ordered and qrec.contiguous, total=released)
        if groups.suppressed:
            shown.append({"label": f"{SUPPRESSED} (suppressed)", "share": groups.suppressed / released})
        marginals.append({"qi": qi.name,
                          "before": contents.shares([domain.text(p) for p in range(domain.size)], before, ordered),
                          "after": shown})
    if sample_rows > 0:
        names, rows = contents.release_rows(problem, plan, sample_rows)
        sample = {"source": "release", "columns": names, "rows": rows}
    else:
        sample = {"source": "synthetic", "columns": [n for n, _ in columns],
                  "rows": contents.synthetic_rows(columns, qi_columns, recoding, groups)}
    release_cmd = _release_command(sidecar, command)
    report_cmd = _report_command(spec.path, plan, frontier, sample_rows, accept_risk)
    return {
        "format": FORMAT, "version": VERSION, "created_at": utc_now(),
        "software": {"name": "deid-sql", "version": __version__},
        "summary": {"verdict": status,
                    "headline": _headline(figure_dict, verdict, status, unit,
                                          suppressed_rows if unit.persons else None, estimated),
                    "cautions": warnings, "spec": str(spec.path), "policy": readable, "released": _released(sidecar),
                    "operator": _operator()},
        "data": {
            "source": _source(problem, gate, sidecar, figures),
            "population": _population(problem, gate, sidecar),
            "columns": _columns(problem, columns, qi_columns),
            "qis": [{"name": q.name, "column": q.column, "kind": q.kind, "domain": contents.domain_summary(d),
                     "size": int(d.size)} | ({"transform": describe(q.transform, q.scale)} if q.transform else {})
                    for q, d in zip(spec.qis, problem.domains)],
        },
        "policy": {"text": text, "levels": plan.levels, "readable": readable, "sha256": gate.policy["sha256"],
                   **policy_naming(plan), "rules": rules,
                   "suppression": {"suppressed_records": figures.suppressed,
                                   "suppressed_groups": groups.suppressed_groups,
                                   "share": figures.suppressed / figures.records if figures.records else 0.0,
                                   "suppressed_rows": suppressed_rows,
                                   **(suppression.to_dict() if suppression is not None else
                                      {"rule": None, "below": None, "groups": None})},
                   "sample": sample},
        "risk": {
            "figures": figure_dict,
            "before_suppression": before_figures,
            "at_risk": {"threshold": contents.HIGH_RISK, "records": at_risk},
            "record_risk_histogram": groups.record_risk_histogram(),
            "group_sizes": groups.group_sizes(population=model["group_sizes"] is not None),
            "model": model,
            "no_census": no_census,
            "estimates": estimated,  # the gate's model and every estimator the page shows (estimates.py)
            "attribute": attribute,  # per sensitive column with an attribute criterion (attribute_section)
            "union": union,  # with what the recipient already holds (the ledger): release.union
            "comparison": comparison,
            "gate": {"criteria": _criteria(gate), "checks": [
                {"figure": c.figure, "value": float(c.value), "limit": float(c.limit), "at_most": c.at_most,
                 "passed": c.passed} for c in verdict.checks], "verdict": status},
        },
        "utility": {"kl_loss": kl, "normalized_loss": loss, "iyengar_loss": iyengar, "per_qi": per_qi,
                    "marginals": marginals},
        "frontier": None if frontier is None else place_on_frontier(problem, Path(frontier), metrics, harbor),
        "method": {"papers": method_papers(problem, model, safe_harbor=harbor is not None,
                                           frontier=frontier is not None),
                   "parameters": _parameters(problem, gate, harbor is not None),
                   "commands": {"release": release_cmd, "report": report_cmd,
                                "environment": environment(spec)}},
        "attestation": {"fields": list(ATTESTATION)},
        "unit": unit.to_dict(),  # what the figures count, in words (the keys stay "records", …)
    }


def set_section(record: dict[str, Any], where: str, spec: Spec) -> dict[str, Any]:
    """The report's list of a set's tables, from the set's record (what was written, as written):
    each table's name, file or engine table, rows written, source rows, orphans and their rule,
    rows removed with suppressed persons, and its columns with their roles, a shifted date with the
    most days it moved (``[person] shift_days``)."""
    days = spec.person.shift_days if spec.person is not None else None
    tables = []
    for t in record["release"]["tables"]:
        linked = t["role"] == "linked"
        columns = [{"name": c["name"], "role": c["role"], "words": ROLE_WORDS.get(c["role"], c["role"]),
                    "shift_days": days if c["role"] == "shift" else None} for c in t["columns"]]
        form = "file" if "file" in t else "table" if "table" in t else "not written"  # a policy's preview
        tables.append({"name": t["name"], "role": t["role"], "written_to": t.get("file") or t.get("table") or "",
                       "form": form, "rows": t["rows"], "source": t["source"],
                       "source_rows": t["source_rows"] if linked else record["source"]["rows"],
                       "person": t.get("person", spec.person.column if spec.person is not None else None),
                       "orphans": t.get("orphans"), "orphans_rule": t.get("orphans_rule"),
                       "removed_with_suppressed_persons": t.get("removed_with_suppressed_persons"),
                       "columns": columns})
    return {"record": where, "shift_days": days, "rows": record["release"]["rows"], "tables": tables}


def _status(verdict: Verdict) -> str:
    if not verdict.passed:
        return "accepted" if verdict.accepted_risk else "failed"
    return "passed"


def _row(name: str, m: Metrics, figures: ReleaseFigures | None = None, loss: float | None = None) -> dict[str, Any]:
    """One row of the comparison table; this release's risk figures are the gate's (measured on the
    released rows, suppression included), which equal ``evaluate``'s without suppression (tested)."""
    if figures is not None:
        return {"name": name, "expected_reidentifications": figures.expected_reidentifications,
                "max_record_risk": figures.max_record_risk, "k": figures.k,
                "sample_uniques": figures.sample_unique_records, "risk": figures.risk,
                "loss": m.loss if loss is None else loss}
    return {"name": name, "expected_reidentifications": m.expected_reidentifications,
            "max_record_risk": m.max_record_risk, "k": m.k, "sample_uniques": m.sample_unique_records,
            "risk": m.risk, "loss": m.loss}


def original_top_kl(problem: Problem) -> float:
    """KL(top) in nats, the normalizer of the loss (METHODS decision 3)."""
    return problem.evaluate(problem.lattice.top()).kl or 1.0


def _safe_harbor(problem: Problem) -> tuple[Metrics | None, str | None]:
    """Safe Harbor's metrics, or why it cannot be built (the spec gives no zip/age roles)."""
    from ..release.safe_harbor import missing_roles, safe_harbor_metrics

    lacking = missing_roles(problem.spec)
    if lacking:
        missing = " and ".join(repr(r) for r in sorted(lacking))
        return None, (f"HIPAA Safe Harbor is not compared: no QI has the role {missing} in the spec "
                      f"(add role = \"zip\" / role = \"age\" to the [[qi]] that holds it)")
    return safe_harbor_metrics(problem), None


def _headline(f: dict[str, Any], verdict: Verdict, status: str, unit: Unit,
              suppressed_rows: int | None = None, estimated: dict[str, Any] | None = None) -> list[str]:
    """The verdict's sentences, in the unit the figures count (``release.unit``): the gate's model
    named after its figure, and the range when the estimators on the page disagree (``estimates``)."""
    model = f" (risk model: {estimated['gate']['name']})" if estimated is not None else ""
    out = [f"expected re-identifications {contents.number(f['expected_reidentifications'])} among "
           f"{f['records']:,} {unit.many}{model}",
           (f"no {unit.whose} risk above {contents.one_in(f['max_record_risk'])}" if f["max_record_risk"] < 1 else
            f"some {unit.many}' risk is 1: they are the only person in the population with their released values")]
    disagreeing = disagreement_sentence(estimated) if estimated is not None else None
    if disagreeing is not None:
        out.append(disagreeing)
    if f["k"] > 1:
        out.append(f"every released group holds at least {unit.count(f['k'])}")
    elif f["records"]:
        n = f["sample_uniques"]
        out.append(f"{unit.count(n)} {'is' if n == 1 else 'are'} unique in the release (k = {f['k']})")
    if f["suppressed"]:
        rows = f" ({suppressed_rows:,} row{'' if suppressed_rows == 1 else 's'})" if suppressed_rows else ""
        out.append(f"{f['suppressed']:,} {unit.many} suppressed{rows}")
    if verdict.original_data:
        out.append(f"this release tells apart every {unit.one} the source tells apart: it is the original data"
                   + (", accepted by [release] allow_original_data" if verdict.allow_original_data else ""))
    if status == "passed":
        out.append(f"meets every release criterion of the spec ({len(verdict.checks)} checked)")
    else:
        out.append("fails the release gate: " + "; ".join(verdict.failures))
        if status == "accepted":
            out.append(f"released anyway, risk accepted: {verdict.accepted_risk}")
    return out


def _source(problem: Problem, gate: ReleaseGate, sidecar: dict[str, Any] | None,
            figures: ReleaseFigures) -> dict[str, Any]:
    """The Data section's source: the sidecar's (or the gate's) description, its row count under
    "rows"; with ``[person]`` also its person key and how many persons the figures count."""
    source = (sidecar or {}).get("source") or resolved(gate.source) | {"columns": len(problem.columns)}
    person = problem.spec.person
    if person is None:
        return source
    return source | {"person_key": person.column, "persons": figures.records}


def _suppressed_rows(problem: Problem, plan: ReleasePlan) -> int:
    """The rows a suppression blanks (every row of each suppressed person): one count over the
    release query, the flag column as the gate reads it."""
    from sqlglot import exp

    from ..compiler.compile import col, ident
    from ..release.figures import FLAG

    relation = exp.Subquery(this=problem.query(plan, measuring=True), alias=exp.TableAlias(this=ident("deid_rows")))
    flagged = exp.func("coalesce", exp.cast(col(FLAG), "BOOLEAN"), exp.false())
    table = problem.backend.execute(exp.select(exp.alias_(exp.func("count", exp.Star()), "n"))
                                    .from_(relation).where(flagged))
    return int(table.column("n")[0].as_py() or 0)


def _population(problem: Problem, gate: ReleaseGate, sidecar: dict[str, Any] | None) -> Any:
    if problem.spec.population is None:
        return population_sentence(problem)
    described = (sidecar or {}).get("population") or resolved(gate.population)
    if not isinstance(described, dict):
        return described
    # the gate records the people as "rows"; a reviewer needs both (the table's rows are census cells)
    from sqlglot import exp

    from ..loading.load import POPULATION_VIEW

    rows = problem.backend.execute(exp.select(exp.alias_(exp.func("count", exp.Star()), "n")).from_(POPULATION_VIEW))
    return described | {"rows": int(rows.column("n")[0].as_py()), "people": problem.population_total}


def _columns(problem: Problem, released: list[tuple[str, str]], qi_columns: list[str]) -> list[dict[str, Any]]:
    roles = dict(released)
    out = []
    for name, sql_type in problem.columns.items():
        role = "qi" if name in qi_columns else roles.get(name) or problem.spec.columns.role(name) or "drop"
        out.append({"name": name, "type": str(sql_type), "role": ROLE_WORDS.get(role, role)})
    return out


def _operator() -> str | None:
    """Who produced the report: the account and machine that ran it (a reviewer asks who, what, when);
    None when the system cannot tell."""
    try:
        return f"{getpass.getuser()} on {socket.gethostname()}"
    except (OSError, KeyError, ImportError):  # no login name in a container without a passwd entry
        return None


def _released(sidecar: dict[str, Any] | None) -> Any:
    if not sidecar:
        return None
    release = sidecar.get("release")
    if isinstance(release, dict):
        if release.get("path"):
            return str(release["path"])
        return " ".join(str(v) for v in release.values() if v not in (None, "")) or None
    return release


def _release_command(sidecar: dict[str, Any] | None, command: str | None) -> str | None:
    reproduce = (sidecar or {}).get("reproduce") or {}
    return reproduce.get("command") or command or reproduce.get("api")


def _report_command(spec: Path, plan: ReleasePlan, frontier: Path | None, sample_rows: int,
                    accept_risk: str | None) -> str:
    """The command line of this report: the one running, when it is ``deid-sql report``; else the
    ``deid-sql report`` line that rebuilds it (a release's ``--report`` writes it with the release)."""
    running = INVOCATION.get()
    if running and running.startswith("deid-sql report "):
        return running
    named = (["--levels", plan.levels] if plan.levels is not None else
             ["--policy", plan.typed or plan.text or plan.readable])
    args = ["deid-sql", "report", str(spec), *named, "--out", "report.html"]
    if frontier is not None:
        args += ["--frontier", str(frontier)]
    if sample_rows:
        args += ["--sample-rows", str(sample_rows)]
    if accept_risk:
        args += ["--accept-risk", accept_risk]
    return shlex.join(args)


def environment(spec: Spec) -> list[dict[str, str]]:
    """The environment variables the reproduce commands need (never their values): the
    pseudonymization key that ``[columns] secret_env`` names when a column is pseudonymized or a date
    shifted, and the database's connection string that ``[backend] dsn_env`` names."""
    out = []
    roles = [spec.columns, *(t.roles for t in spec.tables)]
    keyed = any(r.pseudonymize or r.shift for r in roles)
    names = list(dict.fromkeys(r.secret_env for r in roles if r.secret_env))
    if keyed:
        out += [{"name": n, "purpose": "the pseudonymization key the spec's [columns] secret_env names (the same "
                                       "key as the release's, or the pseudonyms and shifted dates differ)"}
                for n in names]
    backend = spec.raw.get("backend") if isinstance(spec.raw, dict) else None
    dsn_env = backend.get("dsn_env") if isinstance(backend, dict) else None
    if isinstance(dsn_env, str) and dsn_env:
        out.append({"name": dsn_env, "purpose": "the database connection string the spec's [backend] dsn_env names"})
    return out


def _criteria(gate: ReleaseGate) -> dict[str, Any]:
    out: dict[str, Any] = {k: v for k, v in gate.spec.release.to_dict().items() if v is not None}
    if gate.reference_risk is not None:
        out["reference_risk"] = gate.reference_risk
    return out


def _population_text(problem: Problem) -> str:
    if problem.spec.population is not None:
        return f"{problem.spec.population.describe()}, g = max(census, sample)"
    return population_sentence(problem) + " (deid-sql help no-census)"


def _no_census(problem: Problem, recoding: Recoding, groups: contents.Groups) -> dict[str, Any] | None:
    """Without a census: every estimator's population uniques and Benedetti–Franconi's expected
    re-identifications (``nocensus.risk.figures``) of the policy's groups before suppression, and
    — when the release suppresses — of the released groups after it (the suppressed records one
    group, as the gate counts them), each labelled, so no figure stands without saying which."""
    if not problem.spec.no_census:
        return None
    from ..nocensus.risk import figures, policy_figures  # scipy: loaded only without a census

    before = policy_figures(problem, recoding)
    after = None
    if groups.suppressed:
        weighted = problem.spec.weights is not None
        sizes = groups.g_all if weighted else groups.m_all * (problem.population_size / float(problem.sample.total))
        after = figures(groups.m_all, sizes, problem.population_size, weighted)
    return {"population_size": before["population_size"], "sampling_fraction": before["sampling_fraction"],
            "before_suppression": before, "after_suppression": after}


def _before_suppression(m: Metrics) -> dict[str, Any]:
    """The policy's figures on its groups before suppression (``evaluate``'s), keyed as the release's."""
    return {"records": m.records, "groups": m.groups, "expected_reidentifications": m.expected_reidentifications,
            "mean_record_risk": m.risk_sum / m.records if m.records else 0.0, "max_record_risk": m.max_record_risk,
            "k": m.k, "sample_uniques": m.sample_unique_records, "suppressed": 0, "risk": m.risk}


def policy_naming(plan: ReleasePlan) -> dict[str, Any]:
    """How the page names the release's recoding, whatever it is: ``kind`` (policy text, hierarchy
    levels, or a recoding such as Safe Harbor's), ``named`` (the text that gives it again) and
    ``arguments`` (the command-line options that give it, a ``--suppress-below`` included; None
    for a recoding no option names)."""
    if plan.levels is not None:
        kind, named, args = "hierarchy levels", plan.levels, ["--levels", plan.levels]
    elif plan.text is not None:  # given as the user typed it; ``named`` is its full form
        kind, named, args = "policy text", plan.text, ["--policy", plan.typed or plan.text]
    elif plan.readable == "safe-harbor":
        kind, named, args = "recoding", "safe-harbor (HIPAA Safe Harbor's recoding)", ["--policy", "safe-harbor"]
    else:
        kind, named, args = "recoding", plan.readable, None
    suppression = plan.suppression
    if args is not None and suppression is not None:
        if suppression.below is not None:
            args += ["--suppress-below", str(suppression.below)]
        else:  # groups chosen by a search: no option names them; the sidecar or the search gives them again
            args = None
    return {"kind": kind, "named": named, "arguments": shlex.join(args) if args is not None else None}


def _parameters(problem: Problem, gate: ReleaseGate, safe_harbor: bool = True) -> dict[str, Any]:
    spec = problem.spec
    return {"risk": spec.risk, "gamma": float(spec.gamma) if spec.risk == "population" else None,
            "population": _population_text(problem),
            "criteria": _criteria(gate),
            "adversary": spec.feature("adversary").to_dict() if spec.risk == "adversary" else None,
            # only when the page compares with Safe Harbor (a parameter of nothing shown is not cited)
            "safe_harbor": ({"zip_prefix_digits": 3, "restricted_prefix_population": 20_000, "age_top_code": 90}
                            if safe_harbor else None)}


# -- the frontier ---------------------------------------------------------------------------------
def place_on_frontier(problem: Problem, folder: Path, this: Metrics, harbor: Metrics | None) -> dict[str, Any]:
    """This policy on a frontier run of the same problem (``deid-sql frontier --out folder``): the
    frontier, Safe Harbor, and how many searched policies strictly dominate it."""
    from ..search.frontier import Point, dominates
    from ..search.frontier_search import FrontierState

    path = folder / CHECKPOINT
    fix = f"pass the --out folder of 'deid-sql frontier {problem.spec.path}'"
    if not path.is_file():
        raise ReportInputError(f"{folder} is not a frontier run folder (no {CHECKPOINT}); {fix}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        state = FrontierState.from_json(data["state"])
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
        raise ReportInputError(f"cannot read the frontier run {path} ({type(e).__name__}: {e}); {fix}") from None
    if data.get("problem") != problem_identity(problem):
        raise ReportInputError(f"frontier folder {folder} is a run of another problem (spec, QI domains, risk model "
                               f"or data differ); {fix}")
    me = Point(this.risk, this.loss)
    baselines = read_baselines(folder)
    return {"folder": str(folder), "points": [[p.risk, p.loss] for p in state.frontier],
            "this": [this.risk, this.loss],
            "safe_harbor": None if harbor is None else [harbor.risk, harbor.loss],
            "dominated_by": sum(1 for p in state.searched if dominates(p, me)),
            "evaluations": state.evaluations,
            # what else the run plotted (None: a run older than its baselines file)
            "baselines": None if baselines is None else len(baselines),
            "dominated_by_baselines": None if baselines is None else sorted(
                {p.key for p in baselines if dominates(p, me)})}
