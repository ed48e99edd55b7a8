"""Full-domain generalization with record suppression (seed 004): transformations and models.

The space of level vectors, the evaluator that applies one (rolling groups up from cached
group tables), and the privacy and quality models with their bounds.

Modules:

- ``attribute.py``: attribute-disclosure models (entropy and recursive (c,ℓ)-diversity, t-closeness,
  the confidence bound, δ-presence) on ``evaluate.attribute``'s figures, with their predictive properties;
  ``UnionKAnonymity``, k of what a recipient holds with the earlier releases (their labels as a value)
- ``models.py``: privacy models (k-anonymity, distinct ℓ-diversity, average risk) and quality models (loss,
  NUE, discernibility, KL) with their bounds
- ``tables.py``: ``LevelRanks`` (each QI's groups present per level, ranked: the keys' fields), ``GroupTables``
  (a set of cells' group tables: sorted keys and counts, grouped from the cells or rolled up from the
  smallest cached specialization) and their LRU ``TableCache``
- ``transform.py``: ``TransformationSpace`` (levels, order, lift) and ``TransformEvaluator`` (apply with
  suppression, roll-up from cached group tables; census through ``Problem.group_sizes``, keys in
  ``KEY_BITS``); a sensitive column's cells come from ``loading.sensitive`` (counted in persons, cached)

May import: ``domains``, ``errors``, ``evaluate``, ``loading``, ``policies``.
Imported by: ``jobs``, ``search``.
"""

from .attribute import (
    T_DISTANCES,
    Confidence,
    EntropyLDiversity,
    Presence,
    RecursiveCLDiversity,
    TCloseness,
    UnionKAnonymity,
)
from .models import (
    KL,
    AverageRisk,
    Discernibility,
    DistinctLDiversity,
    KAnonymity,
    Loss,
    NonUniformEntropy,
    PrivacyModel,
    QualityModel,
)
from .transform import GroupStats, Outcome, Transformation, TransformationSpace, TransformEvaluator

__all__ = [
    "KL", "T_DISTANCES", "AverageRisk", "Confidence", "EntropyLDiversity", "Presence", "RecursiveCLDiversity",
    "TCloseness", "Discernibility", "DistinctLDiversity", "GroupStats", "KAnonymity", "Loss",
    "NonUniformEntropy", "Outcome", "PrivacyModel", "QualityModel", "Transformation",
    "TransformEvaluator", "TransformationSpace", "UnionKAnonymity",
]
