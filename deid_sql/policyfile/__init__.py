"""Policies as code: a policy saved as a file, a new batch checked for drift, applied under the gate.

- ``save_policy(spec, policy, out)`` writes the policy file (``format.py``: JSON, version 1);
- ``check_policy(policy_file, source)`` (``check.py``) recomputes the risk on the batch and holds it
  to the policy's drift limit (``drift.py``; the default limit is a permutation test against the
  saved groups, ``tolerance.py``), tests each QI's released label shares against the saved ones
  (``shift.py``: chi-square tests of homogeneity, Holm-corrected), and judges the spec's
  ``[release]`` attribute criteria on the batch's release as ``apply``'s gate would;
- ``apply_policy(policy_file, source, out=… | view=… | out_table=…)`` runs that check, refuses a
  drifted batch (``DriftRefused``) unless ``accept_drift`` gives a reason, and releases the batch
  without the data the policy was chosen on (``apply.py``, over ``batch.py``).  A batch is a file,
  or (``engine_ref``) a table of the spec's PostgreSQL or Spark engine;
- a policy saved on a spec with linked tables (``[[table]]``) keeps its set (``linkedset.py``), and
  ``apply_set``/``check_set`` (``applyset.py``) take a batch of the person source and one of every
  linked table, released together into one folder as ``materialize_set`` releases a set.

Modules:

- ``apply.py``: ``apply_policy``: drift check, then ``batch_gate`` (the batch's ``ReleaseSource`` for
  ``build_gate``), then the write
- ``applyset.py``: a set's batches under a policy file: ``saved_set`` (what ``save`` keeps), ``check_set``
  and ``apply_set`` (the person batch's drift check and gate, each linked batch checked against its saved
  columns and counted, every table written through ``sets.release.write_tables`` into one staged folder)
- ``batch.py``: a new batch opened against a policy file (file or engine table): schema, hash and domain
  checks, the guarded release query
- ``check.py``: ``check_policy``: the drift check and the attribute criteria measured by the batch's gate on its
  release (``attribute_figures``, ``checked``: also ``check_set``'s), nothing written
- ``drift.py``: a batch's figures from its release groups (groups and census people counted with SQL in the
  engine: a batch has no cells), ``drift_report``, ``DriftReport`` (with ``check``'s attribute figures)
- ``format.py``: the policy file (JSON v1): domains, intervals, schema, spec hash, figures, release groups,
  drift rule; read and checked
- ``groups.py``: a release's generalized groups as saved and compared
- ``layout.py``: the policy file's JSON layout: one key per line, short objects and table rows on one line
- ``linkedset.py``: the set a policy file keeps of a spec with ``[[table]]`` (``SavedSet``: the person
  source's release name, ``shift_days``, each linked table's key, roles, columns and orphans rule; in the
  spec hash) and the one-line refusal of a set's file on a one-batch path
- ``persons.py``: a policy file of a spec with ``[person]``: the saved person declaration (in the spec
  hash), a batch's person checks in one scan grouped by the key, groups counted in distinct persons
- ``save.py``: ``save_policy``: freeze a release plan, its domains and figures
- ``saved_qi.py``: ``SavedQI``: one QI as saved (declaration, full domain as JSON, the policy's intervals or
  groups) and the recoding rebuilt from it
- ``shift.py``: the distribution half of the drift check: per-QI chi-square tests of label shares,
  Holm-corrected
- ``tolerance.py``: the default drift limit: a seeded permutation test over the pooled saved and new groups

May import: ``backends``, ``compiler``, ``contract``, ``domains``, ``errors``, ``evaluate``, ``loading``,
    ``policies``, ``problem``, ``progress``, ``release``, ``sets``, ``spec``, ``sqltext``, ``storage``.
Imported by: ``cli``, ``fixtures``, ``report``.
"""

from .apply import Applied, apply_policy
from .applyset import AppliedSet, SetCheck, apply_set, check_set
from .batch import Batch, Outside, batch_ref, engine_ref, open_batch
from .check import check_policy
from .drift import DriftRefused, DriftReport, Measured, MovedGroup, ShareChange, drift_report, measure
from .format import MEASURE, VERSION, Figures, Groups, PolicyFile, PolicyFileError
from .save import save_policy
from .tolerance import Limit, Tolerance

__all__ = [
    "MEASURE", "VERSION", "Applied", "AppliedSet", "Batch", "DriftRefused", "DriftReport", "Figures", "Groups",
    "Limit", "Measured", "MovedGroup", "Outside", "PolicyFile", "PolicyFileError", "SetCheck", "ShareChange",
    "Tolerance", "apply_policy", "apply_set", "batch_ref", "check_policy", "check_set", "drift_report", "engine_ref",
    "measure", "open_batch", "save_policy",
]
