"""Full-domain generalization with record suppression (Prasser, Kohlmayer, Kuhn 2016; seed 004).

A transformation picks one hierarchy level per QI; applying it generalizes every QI to
its level and suppresses every record of each class that violates the privacy model.
``TransformationSpace`` is the lattice of levels, ``TransformEvaluator.apply`` judges and
measures one transformation (rolling group tables up from cached specializations).
"""

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
from .sensitive import SensitiveCells, sensitive_cells
from .transform import GroupStats, Outcome, Transformation, TransformationSpace, TransformEvaluator

__all__ = [
    "KL", "AverageRisk", "Discernibility", "DistinctLDiversity", "GroupStats", "KAnonymity", "Loss",
    "NonUniformEntropy", "Outcome", "PrivacyModel", "QualityModel", "SensitiveCells", "Transformation",
    "TransformEvaluator", "TransformationSpace", "sensitive_cells",
]
