"""The core's own risk model, registered like any other (``registry.RISK_MODELS``)."""

from __future__ import annotations

from ..registry import RISK_MODELS

RISK_MODELS.add("population", "deid_sql.evaluate.riskmodel:population_risk", census=True,
                summary="(1/g)^γ with g the census people of the record's group (seed 001)")
