"""Seed 003's channel expansion plugs in here: its ``[channels]`` section (a spec holding it
needs no [[qi]]: a channel release generalizes nothing)."""

from __future__ import annotations

from ..registry import SECTIONS

SECTIONS.add("channels", "deid_sql.channels.spec:parse_section", keys=("channels",), replaces_qis=True)
