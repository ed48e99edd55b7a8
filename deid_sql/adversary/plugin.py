"""Seed 002's economic adversary plugs in here: its ``[adversary]`` section and its risk model."""

from __future__ import annotations

from ..registry import RISK_MODELS, SECTIONS

SECTIONS.add("adversary", "deid_sql.adversary.params:parse_section", keys=("adversary",))
RISK_MODELS.add("adversary", "deid_sql.adversary.risk:risk_model", census=True,
                summary="P_reid × loss under the attacker's optimal policy (seed 002; [adversary])")
