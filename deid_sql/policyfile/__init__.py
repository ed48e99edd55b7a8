"""Policies as code: save a chosen policy to a file, re-apply it to new batches, check drift.

- ``save_policy(spec, policy, out)`` writes the policy file (``format.py``: JSON, version 1);
- ``apply_policy(policy_file, source, out=… | view=…, db=…)`` releases a new batch without the
  data the policy was chosen on (``apply.py``, over ``batch.py``);
- ``check_policy(policy_file, source)`` recomputes the risk on the batch and compares it with
  the saved threshold (``drift.py``).
"""

from .apply import Applied, apply_policy
from .batch import Batch, Outside, batch_ref, open_batch
from .drift import DriftReport, Measured, MovedGroup, check_policy, measure
from .format import MEASURE, VERSION, Figures, Groups, PolicyFile, PolicyFileError
from .save import save_policy

__all__ = [
    "MEASURE", "VERSION", "Applied", "Batch", "DriftReport", "Figures", "Groups", "Measured", "MovedGroup",
    "Outside", "PolicyFile", "PolicyFileError", "apply_policy", "batch_ref", "check_policy", "measure",
    "open_batch", "save_policy",
]
