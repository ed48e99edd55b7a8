"""Commands that run again: the cells cache on every engine, outputs refused before the data is
read, and an anonymization's suppressed groups released on every engine (``anonymize --out``
ran over 14 minutes on PostgreSQL when they were a long row-``IN`` list).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deid_sql.loading.cache import CellsCache
from deid_sql.problem import Problem
from tests.conftest import _source_table
from tests.engines import ENGINES, Engine, default_spec, engine_fixture, engine_params


@pytest.fixture(scope="module", params=engine_params(*ENGINES))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


@pytest.fixture(scope="module")
def spec_on(engine: Engine) -> Path:
    return default_spec(engine)


def _change_one_age(engine: Engine, spec: Path) -> None:
    """One patient a year older, in place, the way the data would change between two commands."""
    table = _source_table()
    ages = table.column("age").to_pylist()
    ages[0] = (ages[0] + 1) % 100
    changed = table.set_column(table.column_names.index("age"), "age", pa.array(ages, table.schema.field("age").type))
    if engine.name == "duckdb":
        pq.write_table(changed, engine.folder / "patients.parquet")
    elif engine.name == "postgres":
        engine.backend.register_table("changed_patients", changed)  # type: ignore[attr-defined]
        qualified = engine.qualified("patients").split(".")  # type: ignore[attr-defined]
        engine.backend.con.execute(f'DELETE FROM "{qualified[0]}"."{qualified[1]}"')  # type: ignore[attr-defined]
        engine.backend.con.execute(  # type: ignore[attr-defined]
            f'INSERT INTO "{qualified[0]}"."{qualified[1]}" SELECT * FROM "changed_patients"')
    else:
        engine.backend.register_table("changed_patients", changed)  # type: ignore[attr-defined]
        engine.backend.session.sql(  # type: ignore[attr-defined]
            f"INSERT OVERWRITE TABLE {engine.qualified('patients')} SELECT * FROM changed_patients")


@pytest.mark.slow
def test_a_second_load_takes_the_cells_from_the_cache_until_the_data_changes(
        spec_on: Path, engine: Engine, tmp_path: Path, scans: list[str]) -> None:
    cache = CellsCache(tmp_path / "cache")
    with Problem.from_spec(spec_on, cache=cache) as first:
        metrics = first.evaluate("age:cuts=18,65|zip:top")
        cells = first.sample.counts.copy()
    assert scans == ["source", "population"]
    with Problem.from_spec(spec_on, cache=cache) as second:
        assert second.evaluate("age:cuts=18,65|zip:top") == metrics
        assert (second.sample.counts == cells).all()
        assert [d.size for d in second.domains] == [d.size for d in first.domains]
    assert scans == ["source", "population"], "the second load grouped the data again"
    _change_one_age(engine, spec_on)
    with Problem.from_spec(spec_on, cache=cache) as third:
        assert third.sample.total == cells.sum()
    assert scans == ["source", "population"] * 2, "a changed source was not noticed"
    entries = [p for p in (tmp_path / "cache").rglob("meta.json")]
    assert len(entries) == 1, "the stale entry was kept"


def test_an_existing_output_is_refused_before_the_data_is_read(
        spec_on: Path, engine: Engine, run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if engine.name == "duckdb":
        taken = tmp_path / "taken.parquet"
        taken.write_bytes(b"earlier release")
        where = ["--out", taken]
    else:
        name = engine.qualified("taken")  # type: ignore[attr-defined]
        run("materialize", spec_on, "--policy", "top", "--table", name)
        where = ["--table", name]

    def no_load(*args: object, **kwargs: object) -> None:
        raise AssertionError("the data was read before the output was checked")

    monkeypatch.setattr(Problem, "_load", no_load)
    result = run("materialize", spec_on, "--policy", "top", *where, expect=2)
    assert "already" in result.stderr and "--overwrite" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_anonymize_releases_its_suppressed_groups_on_every_engine(spec_on: Path, engine: Engine, run,
                                                                   tmp_path: Path) -> None:
    out = tmp_path / f"anon-{engine.name}.parquet"
    result = run("anonymize", spec_on, "--min-k", "20", "--max-suppressed-share", "0.2", "--metric", "loss",
                 "--out", out)
    assert "optimum" in result.stdout
    released = pq.read_table(out)
    assert released.num_rows == len(_source_table())
    flagged = released.column("deid_suppressed").to_pylist()
    assert any(flagged)
    rows = released.select(["age", "sex", "race", "zip"]).to_pylist()
    groups: dict[tuple[object, ...], int] = {}
    for row, hidden in zip(rows, flagged):
        if not hidden:
            key = tuple(row.values())
            groups[key] = groups.get(key, 0) + 1
    assert min(groups.values()) >= 20
    assert all(set(row.values()) == {"*"} for row, hidden in zip(rows, flagged) if hidden)

