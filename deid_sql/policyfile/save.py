"""``save_policy``: freeze a chosen policy, its domains and its figures in a policy file."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import replace
from pathlib import Path

import numpy as np

from .. import __version__
from ..domains.recoding import Recoding
from ..errors import PolicyError
from ..loading.person_rows import check_person_release
from ..problem import Problem
from ..release.plan import ReleasePlan, plan_of
from ..release.targets import check_file
from ..spec.file import Spec
from ..spec.transform import describe
from ..storage.atomic import write_text
from .applyset import saved_set
from .batch import open_batch, spec_digest, spec_for_batch
from .drift import measure_with_risk
from .format import MEASURE, Column, Figures, Groups, PolicyFile, relative, risk_model_of
from .persons import SavedPerson
from .saved_qi import SavedQI
from .shift import ALPHA, Shift, is_valid_alpha
from .tolerance import DEFAULT, Tolerance


def save_policy(spec: str | Path | Spec, policy: str | None, out: str | Path, threshold: float | None = None,
                fallback: str | None = None, overwrite: bool = False, levels: str | None = None,
                shift_alpha: float = ALPHA) -> PolicyFile:
    """Evaluate ``policy`` (a policy text; or the level vector ``levels`` on the spec's hierarchies)
    on the spec's data and write the policy file ``out`` (JSON, atomic).

    ``threshold`` is an exact drift limit on ``mean_record_risk``; by default the limit is the
    saved figure plus the tolerance of a permutation test against the saved groups
    (``tolerance.py``), so a batch from the same population passes but a riskier mix does not.
    ``fallback`` labels values of later batches that are outside the saved domains.
    ``shift_alpha`` is the family-wise level of the distribution test (``shift.py``: a batch whose
    released label shares moved is refused too).  A spec with linked tables (``[[table]]``) saves
    its set too (``linkedset.py``), each linked table checked as ``materialize`` checks it, so its
    batches can be released together later (``applyset.py``).
    """
    parsed = spec if isinstance(spec, Spec) else Spec.read(spec)
    target = Path(out)
    check_file(parsed, target, overwrite)  # before loading anything
    with Problem.from_spec(parsed) as problem:
        return save_policy_file(problem, plan_of(problem, policy, levels=levels), target, threshold, fallback,
                                overwrite, shift_alpha)


def save_policy_file(problem: Problem, plan: ReleasePlan, out: str | Path, threshold: float | None = None,
                     fallback: str | None = None, overwrite: bool = False, shift_alpha: float = ALPHA) -> PolicyFile:
    """Freeze ``plan`` (any recoding, with its suppressed groups) of a loaded problem in the policy
    file ``out``: what ``save_policy`` writes, for a caller that has the problem open already
    (``anonymize --save-policy``)."""
    parsed = problem.spec
    target = Path(out)
    check_file(parsed, target, overwrite)
    if threshold is not None and (not math.isfinite(threshold) or threshold <= 0):
        raise PolicyError(f"--drift-limit {threshold} must be a positive number (a mean record risk, e.g. 0.01)")
    if not is_valid_alpha(shift_alpha):
        raise PolicyError(f"--shift-alpha {shift_alpha:g} must be between 0 and 1 (a family-wise false-alarm rate, "
                          f"e.g. 0.001)")
    if fallback is not None and not fallback.strip():
        raise PolicyError("--fallback must be a non-empty label, e.g. 'other'")
    if plan.suppression is not None and plan.suppression.below is not None:
        raise PolicyError("a policy file keeps suppressed groups by their labels (anonymize --save-policy); "
                          "suppression of small groups (--suppress-below) is not saved")
    check_person_release(parsed)  # with [person]: a batch's release carries the person key
    spec_for_batch(parsed.path, parsed.source)  # refuses what a batch could not be read with, before loading
    recoding = plan.recoding
    if fallback is not None:
        _check_fallback(fallback, problem, recoding)
    metrics = problem.evaluate(plan.item).to_dict()
    qis = tuple(replace(SavedQI.from_recoding(q.name, q.column, q.kind, q.nulls, d, recoding.qis[i]),
                        transform=describe(q.transform, q.scale) if q.transform else None)
                for i, (q, d) in enumerate(zip(parsed.qis, problem.domains)))
    columns = tuple(Column(name, str(t)) for name, t in problem.columns.items())
    metrics["mean_record_risk"] = metrics["risk_sum"] / metrics["records"]
    names = tuple(q.name for q in qis)
    on_table = parsed.source.format == "table"
    draft = PolicyFile(
        policy=plan.text or plan.levels or plan.readable, readable=plan.readable, spec=parsed.path.resolve(),
        spec_sha256="", levels=plan.levels, suppression=plan.suppression,
        source=str(parsed.source.table) if on_table else relative(Path(str(parsed.source.path)), target.parent),
        source_table=on_table, person=SavedPerson.of_spec(parsed), linked=saved_set(problem, target.parent),
        columns=columns, qis=qis, fallback=fallback, risk_model=risk_model_of(parsed), metrics=metrics,
        threshold=1.0, threshold_from="saved figure", figures=_empty_figures(),
        groups=Groups(names, (), np.zeros(0, dtype=np.int64), None, np.zeros(0)),
        saved_at=dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        saved_with=f"deid-sql {__version__}", path=target)
    with open_batch(replace(draft, spec_sha256=_hash(draft, parsed)), parsed.source) as batch:
        measured = measure_with_risk(batch)
    figures = measured.figures
    if threshold is not None and threshold < figures.mean_record_risk:
        raise PolicyError(f"--drift-limit {threshold:g} is below the {MEASURE} of the data the policy is saved on "
                          f"({figures.mean_record_risk:.6g}), so the policy would fail its own check; give a larger "
                          f"threshold or a more general policy")
    saved = replace(draft, spec_sha256=_hash(draft, parsed), figures=figures, groups=measured.groups,
                    threshold=figures.mean_record_risk if threshold is None else float(threshold),
                    threshold_from="saved figure" if threshold is None else "set at save",
                    tolerance=DEFAULT if threshold is None else Tolerance(), shift=Shift(float(shift_alpha)))
    write_text(target, saved.to_json(target.parent), overwrite)
    return saved


def _hash(draft: PolicyFile, spec: Spec) -> str:
    return spec_digest(spec, draft, [(c.name, c.kind) for c in draft.columns])


def _check_fallback(fallback: str, problem: Problem, recoding: Recoding) -> None:
    """Out-of-domain records labelled like a real group would pose as its members (and be
    counted with them): the fallback must differ from every label the policy produces."""
    for q, rec in zip(problem.spec.qis, recoding.qis):
        if fallback in rec.labels:
            raise PolicyError(f"--fallback {fallback!r} is also a label of QI {q.name} under this policy, so records "
                              f"outside the saved domains would pose as that group; choose another, e.g. 'other'")


def _empty_figures() -> Figures:
    return Figures(records=0, groups=0, k=0, sample_unique_records=0, risk_sum=0.0, mean_record_risk=0.0,
                   expected_reidentifications=0.0, max_record_risk=0.0, corrected_groups=0, population_total=0.0,
                   risk=0.0)
