"""``check``: a saved policy's new batch judged without writing anything (METHODS decisions 14, 15).

``apply`` judges what a batch's released values reveal in its release gate, on the rows it writes;
``check`` writes nothing, so it asks the same gate (``apply.batch_gate``, built as ``apply`` builds
it, and ``ReleaseGate.measure``: one ``GROUP BY`` per sensitive column with an attribute criterion,
``release.attribute``) to measure the batch's release query, after the drift check.  The figures
and each criterion's verdict land in the ``DriftReport`` (``attribute``): a batch in which one group
came to hold a single diagnosis fails ``check`` (exit 1) before anyone tries to ``apply`` it.

The gate is asked to measure the release with the columns as saved (``roles=False``): the released
person key is a pseudonym of the same key, so the persons counted are the same, and ``check`` needs
no secret key.  Safe Harbor's risk, which only a judgement of ``no_riskier_than`` needs, is not
computed (``reference=False``).  In a set (``applyset.check_set``), a column sensitive in a linked
table is counted per person over the set's batches, as ``apply_set``'s gate counts it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..release.figures import AttributeFigures
from ..spec.file import TableRef
from .apply import batch_gate
from .batch import Batch, batch_ref, open_batch
from .drift import SHOWN, DriftReport, drift_report
from .format import PolicyFile, one_table


def attribute_figures(batch: Batch, drift: DriftReport, whole_set: bool = False) -> tuple[AttributeFigures, ...]:
    """The spec's ``[release]`` attribute criteria measured and judged on ``batch``'s release, as
    ``apply``'s gate would on the rows it writes (nothing without an attribute criterion)."""
    if not batch.spec.release.attribute:
        return ()
    call = f"deid_sql.policyfile.check_policy({str(batch.policy.path)!r}, {batch.describe()!r})"
    gate = batch_gate(batch, drift, call, None, None, whole_set=whole_set, reference=False, recorded=False)
    return gate.measure(batch.backend.execute, batch.release_query(roles=False)).attribute


def checked(batch: Batch, shown: int = SHOWN, whole_set: bool = False) -> DriftReport:
    """``check`` on an open batch: the drift report with the attribute criteria's figures."""
    drift = drift_report(batch, shown)
    return replace(drift, attribute=attribute_figures(batch, drift, whole_set))


def check_policy(policy: str | Path | PolicyFile, source: str | Path | TableRef, table: str | None = None,
                 shown: int = SHOWN) -> DriftReport:
    """Recompute the saved policy's risk on a batch and hold it to the policy's drift limit, and
    judge the spec's attribute criteria on the batch's release (``DriftReport.failed``)."""
    pf = policy if isinstance(policy, PolicyFile) else PolicyFile.read(policy)
    one_table(pf, "check")
    ref = source if isinstance(source, TableRef) else batch_ref(source, table)
    with open_batch(pf, ref) as batch:
        return checked(batch, shown)
