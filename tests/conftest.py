"""Shared fixtures: a small problem folder built in ``tmp_path`` and a CLI runner.

The folder holds a hand-made source (CSV and Parquet, 500 patients), a census
population Parquet covering every (age, sex, race, zip) cell, and a spec.  QIs:
``age`` integer 0-120, ``sex`` and ``race`` categories, ``zip`` kind "zip" whose
values come from the population.  Tests write variants of the spec with
``project.spec(...)`` / ``project.write_spec(text)``.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from deid_sql.cli import cli

from .ci_skips import pytest_runtest_makereport  # noqa: F401  (a hook: pytest finds it in the conftest)
from .markers import pytest_runtest_protocol  # noqa: F401  (a hook: the running test, for require())

# the CLI's cells cache goes to a folder of this test run, never the user's cache
os.environ["DEID_SQL_CACHE_DIR"] = tempfile.mkdtemp(prefix="deid-sql-test-cache-")

SEXES = ("Female", "Male")
RACES = ("White", "Black", "Asian", "Other")
ZIPS = ("37201", "37202", "37203", "37215", "37216", "37301", "37302", "37350", "37351", "37352")
N_SOURCE = 500

AGE_QI = """
[[qi]]
name = "age"
kind = "integer"
min = 0
max = 120
"""
SEX_QI = """
[[qi]]
name = "sex"
kind = "category"
values = ["Female", "Male"]
"""
RACE_QI = """
[[qi]]
name = "race"
kind = "category"
values = ["White", "Black", "Asian", "Other"]
"""
ZIP_QI = """
[[qi]]
name = "zip"
kind = "zip"
"""
DEFAULT_QIS = (AGE_QI, SEX_QI, RACE_QI, ZIP_QI)
# the roles of the source's other columns: the identifier dropped, the diagnosis released as sensitive
DEFAULT_COLUMNS = """
[columns]
drop = ["patient_id"]
sensitive = ["diagnosis"]
"""
QI_NAMES = ("age", "sex", "race", "zip")
# the criterion the test specs release under (no criteria, no release): accepts any figures
PERMISSIVE_RELEASE = "max_record_risk = 1.0"


@functools.cache
def _source_table() -> pa.Table:
    rng = np.random.default_rng(7)
    ages = np.clip(np.rint(rng.normal(45, 22, N_SOURCE)), 0, 120).astype(np.int64)
    ages[:3] = (0, 120, 101)  # both ends of the domain and a rare old age
    return pa.table({
        "patient_id": pa.array(np.arange(1, N_SOURCE + 1, dtype=np.int64)),
        "age": pa.array(ages),
        "sex": pa.array([SEXES[i] for i in rng.integers(0, 2, N_SOURCE)]),
        "race": pa.array([RACES[i] for i in rng.choice(4, N_SOURCE, p=[0.7, 0.18, 0.07, 0.05])]),
        "zip": pa.array([ZIPS[i] for i in rng.integers(0, len(ZIPS), N_SOURCE)]),
        "diagnosis": pa.array([("I10", "E11", "J45", "K21")[i] for i in rng.integers(0, 4, N_SOURCE)]),
    })


@functools.cache
def _population_table() -> pa.Table:
    rng = np.random.default_rng(11)
    age, sex, race, zip_ = np.meshgrid(np.arange(121), np.arange(2), np.arange(4), np.arange(len(ZIPS)),
                                       indexing="ij")
    n = age.size
    return pa.table({
        "age": pa.array(age.ravel().astype(np.int32)),
        "sex": pa.array([SEXES[i] for i in sex.ravel()]),
        "race": pa.array([RACES[i] for i in race.ravel()]),
        "zip": pa.array([ZIPS[i] for i in zip_.ravel()]),
        "count": pa.array(rng.integers(1, 60, n).astype(np.int64)),
    })


@dataclass
class Project:
    """A problem folder: source.csv, source.parquet, population.parquet and spec.toml."""

    QI = {"age": AGE_QI, "sex": SEX_QI, "race": RACE_QI, "zip": ZIP_QI}  # TOML of the default QIs
    DEFAULT_QIS = DEFAULT_QIS

    dir: Path
    source: pa.Table
    population: pa.Table

    @property
    def source_csv(self) -> Path:
        return self.dir / "source.csv"

    @property
    def source_parquet(self) -> Path:
        return self.dir / "source.parquet"

    @property
    def population_path(self) -> Path:
        return self.dir / "population.parquet"

    @property
    def spec_path(self) -> Path:
        return self.dir / "spec.toml"

    def spec_text(self, source: str = "source.csv", population: str | None = "population.parquet",
                  qis: Sequence[str] = DEFAULT_QIS, top: str = "", source_extra: str = "",
                  population_extra: str = "", count: str = "count", columns: str | None = DEFAULT_COLUMNS,
                  release: str | None = PERMISSIVE_RELEASE) -> str:
        """Spec TOML; ``population=None`` means ``population = "sample"``; ``columns`` is the
        ``[columns]`` table (None: none, so the source's non-QI columns have no role); ``release``
        the ``[release]`` table's body (None: none — every release of the spec is refused)."""
        parts = [top.strip() + "\n" if top.strip() else "", "gamma = 1.0\n"]
        if population is None:
            parts.append('population = "sample"\n')
        parts.append(f'\n[source]\npath = "{source}"\n{source_extra.strip()}\n')
        if population is not None:
            parts.append(f'\n[population]\npath = "{population}"\ncount = "{count}"\n'
                         f"{population_extra.strip()}\n")
        parts.extend(qis)
        if columns:
            parts.append(columns)
        if release:
            parts.append(f"\n[release]\n{release.strip()}\n")
        return "".join(parts)

    @property
    def released_names(self) -> list[str]:
        """The columns a release of the default spec has, in order (``DEFAULT_COLUMNS`` drops
        ``patient_id``)."""
        return [c for c in self.source.column_names if c != "patient_id"]

    def write_spec(self, text: str, name: str = "spec.toml") -> Path:
        path = self.dir / name
        path.write_text(text, encoding="utf-8")
        return path

    def spec(self, name: str = "spec.toml", **kwargs: object) -> Path:
        """Write ``spec_text(**kwargs)`` and return its path."""
        return self.write_spec(self.spec_text(**kwargs), name)  # type: ignore[arg-type]

    def write_csv(self, table: pa.Table, name: str) -> Path:
        path = self.dir / name
        pacsv.write_csv(table, path)
        return path

    def write_parquet(self, table: pa.Table, name: str) -> Path:
        path = self.dir / name
        pq.write_table(table, path)
        return path

    def files(self) -> dict[str, bytes]:
        """Every file under the folder (recursively) with its content, for 'nothing written' checks."""
        return {str(p.relative_to(self.dir)): p.read_bytes()
                for p in sorted(self.dir.rglob("*")) if p.is_file()}

    def names(self) -> set[str]:
        return {str(p.relative_to(self.dir)) for p in self.dir.rglob("*")}


@pytest.fixture
def project(tmp_path: Path) -> Project:
    folder = tmp_path / "study"
    folder.mkdir()
    p = Project(folder, _source_table(), _population_table())
    p.write_csv(p.source, "source.csv")
    p.write_parquet(p.source, "source.parquet")
    p.write_parquet(p.population, "population.parquet")
    p.spec()
    return p


@pytest.fixture
def run(tmp_path: Path) -> Callable[..., Result]:
    """Invoke the CLI in-process: ``run("validate", spec, expect=0)``; checks the exit code."""
    runner = CliRunner()

    def invoke(*args: object, expect: int | None = 0) -> Result:
        old = os.getcwd()
        os.chdir(tmp_path)  # relative paths (and stray files) stay inside tmp_path
        try:
            result = runner.invoke(cli, [str(a) for a in args], catch_exceptions=True)
        finally:
            os.chdir(old)
        if expect is not None and result.exit_code != expect:
            exc = result.exception
            raise AssertionError(
                f"deid-sql {' '.join(map(str, args))} exited {result.exit_code}, expected {expect}\n"
                f"stdout: {result.stdout}\nstderr: {result.stderr}\nexception: {exc!r}"
            ) from (exc if exc and not isinstance(exc, SystemExit) else None)
        return result

    return invoke


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tables a load grouped into cells (empty: every cell came from the cache)."""
    import deid_sql.problem as deid_problem

    seen: list[str] = []
    original = deid_problem.aggregate

    def counting(backend, spec, domains, table, problems):  # type: ignore[no-untyped-def]
        seen.append(table.label)
        return original(backend, spec, domains, table, problems)

    monkeypatch.setattr(deid_problem, "aggregate", counting)
    return seen
