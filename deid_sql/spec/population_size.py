"""The population without a census: its size (given, or a region's preset) and sampling weights.

``population = { size = 2_000_000 }`` or ``population = { region = "usa" }`` says how many people
the sample was drawn from when no census table exists; ``[weights] column = "w"`` names a
sampling-weight column (each record stands for w people: 1 / its inclusion probability).  The
no-census risk models (``deid_sql.nocensus``) read them.  Stdlib only: the core spec parses
these forms, and nothing heavy loads for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import Problems

# region → (people, source).  Resident populations counted by each country's census.
REGIONS: dict[str, tuple[int, str]] = {
    "usa": (331_449_281, "U.S. Census Bureau, 2020 Census, resident population (April 1, 2020)"),
    "us-california": (39_538_223, "U.S. Census Bureau, 2020 Census, resident population of California"),
    "us-texas": (29_145_505, "U.S. Census Bureau, 2020 Census, resident population of Texas"),
    "us-florida": (21_538_187, "U.S. Census Bureau, 2020 Census, resident population of Florida"),
    "us-new-york": (20_201_249, "U.S. Census Bureau, 2020 Census, resident population of New York"),
    "canada": (36_991_981, "Statistics Canada, 2021 Census of Population"),
    "australia": (25_422_788, "Australian Bureau of Statistics, 2021 Census, usual resident population"),
    "england-and-wales": (59_597_542, "Office for National Statistics, Census 2021, usual resident population"),
}

SIZE_KEYS = {"size", "region"}
WEIGHTS_KEYS = {"column"}


def parse_size(raw: Mapping[str, Any], problems: Problems) -> tuple[int | None, str | None]:
    """(people, region) of ``population = { size = N }`` or ``{ region = "…" }``; each problem is
    one line saying what is wrong and how to fix it."""
    where = "population"
    census = sorted(set(raw) - SIZE_KEYS)
    if census:
        problems.append(f"{where}: {', '.join(census)} describe a census table and size/region a population "
                        f"without one; give either [population] path and count (a census) or only size "
                        f"(or region) (no census)")
        return None, None
    size, region = raw.get("size"), raw.get("region")
    if size is not None and region is not None:
        problems.append(f'{where}: give size or region, not both (region = "usa" means size = {REGIONS["usa"][0]:_})')
        return None, None
    if region is not None:
        if region not in REGIONS:
            problems.append(f"{where}: region = {region!r} is not a preset; use one of {', '.join(REGIONS)} "
                            f"or give size = <people>")
            return None, None
        return REGIONS[region][0], str(region)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        problems.append(f"{where}: size = {size!r} must be a whole number of people ≥ 1, e.g. size = 2_000_000")
        return None, None
    return int(size), None


def parse_weights(raw: Any, problems: Problems) -> str | None:
    """The sampling-weight column of ``[weights] column = "w"``."""
    if not isinstance(raw, dict):
        problems.append('weights must be a table: [weights] with column = "<sampling weight column>"')
        return None
    problems.unknown_keys(raw, WEIGHTS_KEYS, "[weights]")
    column = raw.get("column")
    if not isinstance(column, str) or not column:
        problems.append('[weights] needs column = "<the source column holding each record\'s sampling weight>"')
        return None
    return column


def describe(size: int | None, region: str | None) -> str:
    """The population size as a person reads it: "2,000,000 people" or the region and its source."""
    if size is None:
        return "unknown"
    if region is not None:
        return f"{size:,} people (region {region}: {REGIONS[region][1]})"
    return f"{size:,} people"
