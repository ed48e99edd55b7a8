"""The benchmarks' shared problem: UCI Adult with ZIP5 drawn from the synthetic census.

As in the papers, each Adult record gets a ZIP sampled from the (synthetic) state census
conditional on its age, sex and race, and Adult's top-coded 90 is spread over 90–120.
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow.parquet as pq

from deid_sql.fixtures import adult_with_zip, synthetic_population
from deid_sql.starter.demo import census_spec

ADULT_CSV = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult" / "adult.csv"
DATA_SEED = 0  # synthetic population and ZIP assignment


def out(line: str = "") -> None:
    """Print a report line at once (benchmarks run for minutes)."""
    print(line, flush=True)


def build(folder: Path, name: str) -> tuple[Path, float]:
    """Adult with ZIP and the census as Parquet plus their spec; returns the spec and seconds."""
    start = time.perf_counter()
    population = synthetic_population(DATA_SEED)
    pq.write_table(population, folder / "population.parquet")
    pq.write_table(adult_with_zip(ADULT_CSV, DATA_SEED, population), folder / "adult.parquet")
    spec = folder / "adult.toml"
    spec.write_text(census_spec("adult.parquet", name=name), encoding="utf-8")
    return spec, time.perf_counter() - start
