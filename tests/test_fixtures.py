"""Tests for deid_sql.fixtures: synthetic population, cohorts, and ZIP assignment."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# deid_sql.fixtures is first- or third-party depending on the ruff config: pin it here.
# isort: off
from deid_sql.fixtures import (
    RACES,
    SEXES,
    add_zip,
    add_zip_with_report,
    adult_with_zip,
    load_adult,
    population_by_prefix,
    synthetic_cohort,
    synthetic_population,
    write_cohort_parquet,
)
# isort: on

ADULT_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult"
ADULT_CSV = ADULT_DIR / "adult.csv"
QI = ["age", "sex", "race", "zip"]


@pytest.fixture(scope="module")
def population() -> pa.Table:
    """The default population (seed 0); generating it takes well under a second."""
    return synthetic_population(0)


@pytest.fixture(scope="module")
def small_population() -> pa.Table:
    return synthetic_population(3, n_prefixes=3, zips_per_prefix=6, total=60_000)


@functools.cache
def tiny_population() -> pa.Table:
    """A very small population, so that many (age, sex, race) cells are empty."""
    return synthetic_population(11, n_prefixes=2, zips_per_prefix=4, total=20_000)


def missing_cells(table: pa.Table, population: pa.Table, zip_column: str = "zip") -> int:
    """Rows of ``table`` whose (age, sex, race, zip) cell is absent from ``population``."""
    keys = pa.table(
        {
            "age": table.column("age").cast(pa.int64()),
            "sex": table.column("sex"),
            "race": table.column("race"),
            "zip": table.column(zip_column),
        }
    )
    cells = population.select(QI).set_column(0, "age", population.column("age").cast(pa.int64()))
    cells = cells.append_column("present", pa.array(np.ones(cells.num_rows, dtype=bool)))
    joined = keys.join(cells, keys=QI, join_type="left outer")
    return joined.num_rows - int(pc.sum(joined.column("present").is_valid()).as_py())


def sample_people(population: pa.Table, n: int, seed: int) -> pa.Table:
    """People drawn from ``population`` without ZIP, plus an extra non-QI column."""
    cohort = synthetic_cohort(population, n, seed)
    people = cohort.select(["patient_id", "age", "sex", "race", "diagnosis"])
    return people.set_column(1, "age", cohort.column("age").cast(pa.int64()))


# --- population -------------------------------------------------------------------


def test_population_schema_and_values(population: pa.Table) -> None:
    assert population.column_names == ["age", "sex", "race", "zip", "count"]
    assert population.schema.field("age").type in (pa.int16(), pa.int32())
    assert population.schema.field("count").type == pa.int64()
    for name in ("sex", "race", "zip"):
        assert population.schema.field(name).type == pa.string()
    assert pc.min(population.column("count")).as_py() > 0
    ages = population.column("age").to_numpy()
    assert ages.min() == 0 and ages.max() <= 120
    assert set(pc.unique(population.column("sex")).to_pylist()) == set(SEXES)
    assert set(pc.unique(population.column("race")).to_pylist()) == set(RACES)
    zips = pc.unique(population.column("zip")).to_pylist()
    assert all(len(z) == 5 and z.isdigit() for z in zips)
    assert zips == sorted(zips)
    assert pc.sum(population.column("count")).as_py() == 6_000_000
    assert 300_000 <= population.num_rows <= 1_000_000


def test_population_cells_are_unique(population: pa.Table) -> None:
    grouped = population.group_by(QI).aggregate([])
    assert grouped.num_rows == population.num_rows


def test_population_geography(population: pa.Table) -> None:
    by_prefix = population_by_prefix(population)
    assert len(by_prefix) == 15
    assert len(pc.unique(population.column("zip"))) == 600
    assert all(370 <= int(p) <= 385 for p in by_prefix)
    assert sum(by_prefix.values()) == 6_000_000
    small = [p for p, n in by_prefix.items() if n <= 20_000]
    assert len(small) >= 1
    assert all(n > 50_000 for p, n in by_prefix.items() if p not in small)
    # Within a prefix, ZIP suffixes are sparse rather than one consecutive run.
    zips = pc.unique(population.column("zip")).to_pylist()
    for prefix in by_prefix:
        suffixes = [int(z[3:]) for z in zips if z.startswith(prefix)]
        assert max(suffixes) - min(suffixes) + 1 > len(suffixes)
    per_zip = population.group_by("zip").aggregate([("count", "sum")])
    sizes = per_zip.column("count_sum").to_numpy()
    assert sizes.max() > 5 * np.median(sizes)


@pytest.mark.parametrize("seed", [1, 2, 7])
def test_small_totals_keep_a_safe_harbor_prefix(seed: int) -> None:
    pop = synthetic_population(seed, total=400_000)
    assert pc.sum(pop.column("count")).as_py() == 400_000
    assert min(population_by_prefix(pop).values()) <= 20_000


def test_population_age_pyramid(population: pa.Table) -> None:
    ages = population.column("age").to_numpy()
    counts = population.column("count").to_numpy()
    male = pc.equal(population.column("sex"), "Male").to_numpy()
    race = population.column("race").to_numpy()
    by_age = np.bincount(ages, weights=counts, minlength=121)
    assert by_age[0:60].min() > 0.6 * by_age[0:60].max()  # roughly flat to 60
    assert by_age[60] > by_age[75] > by_age[90] > by_age[100]
    assert by_age[100:].sum() < 0.001 * counts.sum()
    old = ages >= 90
    assert counts[old & ~male].sum() > 1.5 * counts[old & male].sum()
    race_share = {r: counts[race == r].sum() / counts.sum() for r in RACES}
    assert 0.7 < race_share["White"] < 0.9
    assert 0.08 < race_share["Black"] < 0.22
    assert race_share["Amer-Indian-Eskimo"] < 0.02


def test_population_is_deterministic() -> None:
    a = synthetic_population(5, total=200_000)
    assert a.equals(synthetic_population(5, total=200_000))
    assert not a.equals(synthetic_population(6, total=200_000))


def test_population_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        synthetic_population(zips_per_prefix=100)
    with pytest.raises(ValueError):
        synthetic_population(total=-1)


# --- cohort -----------------------------------------------------------------------


def test_cohort_schema_and_rows(small_population: pa.Table) -> None:
    cohort = synthetic_cohort(small_population, 12_345, seed=4)
    assert cohort.num_rows == 12_345
    assert cohort.column_names == [
        "patient_id", "age", "sex", "race", "zip", "diagnosis", "systolic_bp", "admitted",
    ]  # fmt: skip
    for name in ("age", "sex", "race", "zip"):
        assert cohort.schema.field(name).type == small_population.schema.field(name).type
    assert cohort.schema.field("patient_id").type == pa.int64()
    assert pa.types.is_integer(cohort.schema.field("systolic_bp").type)
    assert cohort.schema.field("admitted").type == pa.date32()
    assert cohort.column("patient_id").to_pylist() == list(range(1, 12_346))
    lo, hi = pc.min_max(cohort.column("admitted")).values()
    assert lo.as_py().year >= 2019 and hi.as_py().year <= 2021
    assert all("." in d or len(d) == 3 for d in pc.unique(cohort.column("diagnosis")).to_pylist())
    assert all(column.null_count == 0 for column in cohort.columns)
    assert missing_cells(cohort, small_population) == 0


def test_cohort_follows_population_counts(small_population: pa.Table) -> None:
    cohort = synthetic_cohort(small_population, 60_000, seed=1)
    got = population_by_prefix(cohort.append_column("count", pa.array(np.ones(60_000, np.int64))))
    want = population_by_prefix(small_population)
    for prefix, n in want.items():
        assert abs(got.get(prefix, 0) / 60_000 - n / 60_000) < 0.02


def test_cohort_determinism_and_empty(small_population: pa.Table) -> None:
    a = synthetic_cohort(small_population, 1000, seed=2)
    assert a.equals(synthetic_cohort(small_population, 1000, seed=2))
    assert not a.equals(synthetic_cohort(small_population, 1000, seed=3))
    empty = synthetic_cohort(small_population, 0)
    assert empty.num_rows == 0 and empty.schema == a.schema


def test_write_cohort_parquet(small_population: pa.Table, tmp_path: Path) -> None:
    target = tmp_path / "cohort.parquet"
    target.write_bytes(b"old")
    out = write_cohort_parquet(small_population, 2_500, target, seed=9, row_group_rows=1_000)
    assert out == target
    assert pq.ParquetFile(target).metadata.num_row_groups == 3
    assert pq.read_table(target).equals(synthetic_cohort(small_population, 2_500, seed=9))
    assert os.listdir(tmp_path) == ["cohort.parquet"]  # no temporary file left behind


# --- add_zip ----------------------------------------------------------------------


def test_add_zip_draws_from_the_record_cell(small_population: pa.Table) -> None:
    people = sample_people(small_population, 5_000, seed=5)
    result, n_fallback = add_zip_with_report(people, small_population, seed=0)
    assert n_fallback == 0
    assert result.column_names == [*people.column_names, "zip"]
    assert result.select(people.column_names).equals(people)
    assert result.schema.field("zip").type == pa.string()
    assert missing_cells(result, small_population) == 0
    assert add_zip(people, small_population, seed=0).equals(result)
    assert not add_zip(people, small_population, seed=1).equals(result)


def test_add_zip_is_proportional_to_counts(population: pa.Table) -> None:
    n = 20_000
    people = pa.table({"age": [40] * n, "sex": ["Female"] * n, "race": ["Black"] * n})
    zips = add_zip(people, population, seed=3).column("zip")
    mask = pc.and_(
        pc.and_(
            pc.equal(population.column("age"), 40),
            pc.equal(population.column("sex"), "Female"),
        ),
        pc.equal(population.column("race"), "Black"),
    )
    cell = population.filter(mask)
    expected = dict(zip(cell.column("zip").to_pylist(), cell.column("count").to_pylist(), strict=True))
    total = sum(expected.values())
    observed = {d["values"]: d["counts"] for d in pc.value_counts(zips).to_pylist()}
    assert set(observed) <= set(expected)
    tv = 0.5 * sum(abs(observed.get(z, 0) / n - c / total) for z, c in expected.items())
    assert tv < 0.06


def test_add_zip_fallback(small_population: pa.Table) -> None:
    people = pa.table(
        {
            "age": pa.array([40, 40, 119, 300, None], pa.int64()),
            "sex": ["Male", "Male", "Female", "Male", "Female"],
            "race": ["White", "Martian", "Amer-Indian-Eskimo", "White", "White"],
        }
    )
    result, n_fallback = add_zip_with_report(people, small_population, seed=0)
    assert n_fallback == 4
    zips = set(pc.unique(small_population.column("zip")).to_pylist())
    assert set(result.column("zip").to_pylist()) <= zips
    assert result.column("age").equals(people.column("age"))
    assert missing_cells(result.slice(0, 1), small_population) == 0


def test_add_zip_top_age(population: pa.Table) -> None:
    n = 2_000
    rng = np.random.default_rng(0)
    ages = np.where(rng.random(n) < 0.5, 90, rng.integers(17, 90, n))
    people = pa.table(
        {
            "id": np.arange(n),
            "age": ages.astype(np.int64),
            "sex": rng.choice(list(SEXES), n),
            "race": rng.choice(list(RACES), n),
        }
    )
    result, n_fallback = add_zip_with_report(people, population, seed=0, top_age=90)
    assert n_fallback == 0
    new_ages = result.column("age").to_numpy()
    assert result.schema.field("age").type == pa.int64()
    assert np.array_equal(new_ages[ages < 90], ages[ages < 90])
    assert new_ages[ages >= 90].min() >= 90 and new_ages.max() <= 120
    assert len(np.unique(new_ages[ages >= 90])) > 5
    assert missing_cells(result, population) == 0


def test_add_zip_custom_column_names(small_population: pa.Table) -> None:
    people = pa.table({"a": [30, 31], "s": ["Female", "Male"], "r": ["White", "Black"]})
    result = add_zip(people, small_population, age="a", sex="s", race="r", zip_column="zip5")
    assert result.column_names == ["a", "s", "r", "zip5"]
    with pytest.raises(ValueError):
        add_zip(result, small_population, age="a", sex="s", race="r", zip_column="zip5")


@settings(max_examples=25, deadline=None, database=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 130),
            st.sampled_from([*SEXES, "Unknown"]),
            st.sampled_from([*RACES, "Unknown"]),
        ),
        min_size=1,
        max_size=40,
    ),
    st.integers(0, 2**32 - 1),
)
def test_add_zip_property(records: list[tuple[int, str, str]], seed: int) -> None:
    pop = tiny_population()
    ages, sexes, races = (list(col) for col in zip(*records, strict=True))
    people = pa.table({"age": pa.array(ages, pa.int64()), "sex": sexes, "race": races})
    result, n_fallback = add_zip_with_report(people, pop, seed=seed)
    assert result.num_rows == len(records)
    assert set(result.column("zip").to_pylist()) <= set(pop.column("zip").to_pylist())
    assert missing_cells(result, pop) == n_fallback


# --- Adult ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def adult_csv() -> Path:
    if not ADULT_CSV.is_file():
        pytest.skip(f"Adult data not available at {ADULT_CSV}")
    return ADULT_CSV


def test_load_adult(adult_csv: Path) -> None:
    adult = load_adult(adult_csv)
    assert adult.num_rows == 30_162
    assert adult.column_names[:3] == ["sex", "age", "race"]
    assert adult.schema.field("age").type == pa.int64()
    assert set(pc.unique(adult.column("race")).to_pylist()) == set(RACES)


@pytest.mark.slow
def test_adult_with_zip(adult_csv: Path, population: pa.Table) -> None:
    adult = load_adult(adult_csv)
    result = adult_with_zip(adult_csv, seed=0, population=population)
    assert result.column_names == [*adult.column_names, "zip"]
    before = adult.column("age").to_numpy()
    after = result.column("age").to_numpy()
    assert np.array_equal(after[before < 90], before[before < 90])
    assert (after[before >= 90] >= 90).all() and after.max() <= 120
    assert missing_cells(result, population) == 0
    assert result.drop_columns(["age", "zip"]).equals(adult.drop_columns(["age"]))
    assert adult_with_zip(adult_csv, seed=0, population=population).equals(result)
