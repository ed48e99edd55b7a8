"""Policies as code: save a chosen policy to a file, re-apply it to new batches, check drift.

- ``save_policy(spec, policy, out)`` writes the policy file (``format.py``: JSON, version 1);
- ``check_policy(policy_file, source)`` recomputes the risk on the batch and holds it to the
  policy's drift limit (``drift.py``; the default limit is a permutation test against the saved
  groups, ``tolerance.py``), and tests each QI's released label shares against the saved ones
  (``shift.py``: chi-square tests of homogeneity, Holm-corrected);
- ``apply_policy(policy_file, source, out=… | view=… | out_table=…)`` runs that check, refuses a
  drifted batch (``DriftRefused``) unless ``accept_drift`` gives a reason, and releases the batch
  without the data the policy was chosen on (``apply.py``, over ``batch.py``).  A batch is a file,
  or (``engine_ref``) a table of the spec's PostgreSQL or Spark engine;
- a policy saved on a spec with linked tables (``[[table]]``) keeps its set (``linkedset.py``), and
  ``apply_set``/``check_set`` (``applyset.py``) take a batch of the person source and one of every
  linked table, released together into one folder as ``materialize_set`` releases a set.
"""

from .apply import Applied, apply_policy
from .applyset import AppliedSet, SetCheck, apply_set, check_set
from .batch import Batch, Outside, batch_ref, engine_ref, open_batch
from .drift import DriftRefused, DriftReport, Measured, MovedGroup, ShareChange, check_policy, drift_report, measure
from .format import MEASURE, VERSION, Figures, Groups, PolicyFile, PolicyFileError
from .save import save_policy
from .tolerance import Limit, Tolerance

__all__ = [
    "MEASURE", "VERSION", "Applied", "AppliedSet", "Batch", "DriftRefused", "DriftReport", "Figures", "Groups",
    "Limit", "Measured", "MovedGroup", "Outside", "PolicyFile", "PolicyFileError", "SetCheck", "ShareChange",
    "Tolerance", "apply_policy", "apply_set", "batch_ref", "check_policy", "check_set", "drift_report", "engine_ref",
    "measure", "open_batch", "save_policy",
]
