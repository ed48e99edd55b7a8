"""The no-census risk models plug in here (METHODS.md decision 10; docs/no-census.md): each
estimates from the sample alone and needs the population's size, not a census table."""

from __future__ import annotations

from ..registry import RISK_MODELS

_TARGET = "deid_sql.nocensus.risk:risk_model"
RISK_MODELS.add("pitman", _TARGET, census=False, summary="population uniques by Pitman's model")
RISK_MODELS.add("zayatz", _TARGET, census=False, summary="population uniques by Zayatz's method")
RISK_MODELS.add("snb", _TARGET, census=False, summary="population uniques by the slide negative binomial")
RISK_MODELS.add("dankar", _TARGET, census=False, summary="population uniques by Dankar's selection rule")
RISK_MODELS.add("benedetti-franconi", _TARGET, census=False,
                summary="Benedetti–Franconi's individual risk E[1/F | f]")
