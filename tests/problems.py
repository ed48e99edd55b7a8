"""Small hand-made problems for the core tests (data written to a temp folder)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

RACES = ["White", "Black", "Asian", "Other"]
ZIPS = ["37201", "37203", "37215", "37301", "37302", "38101"]


def write_small_problem(folder: Path, seed: int = 0, rows: int = 400, population: bool = True,
                        gamma: float = 1.0, max_age: int = 30, release: str | None = "max_record_risk = 1.0") -> Path:
    """A source of ``rows`` records over age 0..max_age × sex × race × ZIP, and a census.

    The census is drawn independently of the sample, so some groups have fewer
    census people than sample records (exercising the max(census, sample) rule).
    """
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    src = pa.table({
        "id": np.arange(rows),
        "age": rng.integers(0, max_age + 1, rows),
        "sex": rng.choice(["Female", "Male"], rows),
        "race": rng.choice(RACES, rows, p=[0.6, 0.25, 0.1, 0.05]),
        "zip": rng.choice(ZIPS, rows),
        "dx": rng.choice(["E11.9", "I10", "J45"], rows),
    })
    pq.write_table(src, folder / "source.parquet")
    spec = [f"gamma = {gamma}", "", "[source]", 'path = "source.parquet"', ""]
    if population:
        cells = [(a, s, r, z) for a in range(max_age + 1) for s in ("Female", "Male") for r in RACES for z in ZIPS]
        counts = rng.poisson(3.0, len(cells))
        pop = pa.table({
            "age": [c[0] for c in cells], "sex": [c[1] for c in cells], "race": [c[2] for c in cells],
            "zip": [c[3] for c in cells], "people": counts,
        })
        pq.write_table(pop, folder / "population.parquet")
        spec += ["[population]", 'path = "population.parquet"', 'count = "people"', ""]
    else:
        spec.insert(0, 'population = "sample"')
    spec += [
        "[[qi]]", 'name = "age"', 'kind = "integer"', "min = 0", f"max = {max_age}", "",
        "[[qi]]", 'name = "sex"', 'kind = "category"', 'values = ["Female", "Male"]', "",
        "[[qi]]", 'name = "race"', 'kind = "category"', f"values = {RACES!r}".replace("'", '"'), "",
        "[[qi]]", 'name = "zip"', 'kind = "zip"', f"values = {ZIPS!r}".replace("'", '"'), "",
        "[columns]", 'drop = ["id"]', 'sensitive = ["dx"]', "",
    ]
    if release:  # no criteria, no release: the small problem releases under a permissive one by default
        spec += ["[release]", release, ""]
    path = folder / "spec.toml"
    path.write_text("\n".join(spec), encoding="utf-8")
    return path
