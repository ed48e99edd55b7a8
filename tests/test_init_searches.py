"""init's spec with only a population size works with every search as written (issue 42).

init used to write ``risk = "dankar"`` with ``--population``: a dataset-level estimate that the
pruning searches (``alternatives``' BPS, ``frontier``'s SHS) refuse. It now writes a record-level
model that never rises with generalization, so anonymize, alternatives and frontier all run on
the untouched spec.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from deid_sql.starter.demo import build_demo


@pytest.mark.slow
def test_every_search_runs_on_inits_spec_with_a_population_size(run: Callable[..., Result], tmp_path: Path) -> None:
    build_demo(tmp_path, records=2_000, people=200_000)
    spec = tmp_path / "sized.toml"
    run("init", tmp_path / "cohort.parquet", "--population", "200000", "--out", spec)
    assert tomllib.loads(spec.read_text(encoding="utf-8"))["risk"] == "benedetti-franconi"
    run("validate", spec)
    assert "best:" in run("alternatives", spec, "--iterations", 20, "--seed", 1).stdout
    run("frontier", spec, "--budget", 5, "--seed", 1, "--out", tmp_path / "frontier")
    assert any((tmp_path / "frontier").iterdir())  # the frontier's folder, written
    assert "optimum" in run("anonymize", spec, "--min-k", 5, "--max-suppressed-share", 0.05).stdout


@pytest.mark.slow
def test_inits_spec_bands_out_of_the_box(run: Callable[..., Result], tmp_path: Path) -> None:
    """init writes publishable cut points (ages every 5 years up to 90 and above, ZIP3, dates by month,
    quarter and year), so the untouched spec's full-domain search bands them instead of keeping or
    blanking each."""
    import pyarrow.parquet as pq

    build_demo(tmp_path, records=2_000, people=200_000)
    spec = tmp_path / "sized.toml"
    run("init", tmp_path / "cohort.parquet", "--population", "200000", "--out", spec)
    qis = {q["name"]: q for q in tomllib.loads(spec.read_text(encoding="utf-8"))["qi"]}
    assert qis["age"]["max"] > 90  # the demo's oldest: ages past 89 are one band (HIPAA's rule)
    assert qis["age"]["cuts"] == {"every": 5, "top": 90} and qis["zip"]["zip_digits"] == [3]
    assert qis["admitted"]["date_cuts"] == ["month", "quarter", "year"] and "cuts" not in qis["sex"]
    run("anonymize", spec, "--min-k", 5, "--max-suppressed-share", 0.05, "--out", tmp_path / "out.parquet")
    released = pq.read_table(tmp_path / "out.parquet")
    ages = {str(a) for a in released.column("age").to_pylist()} - {"*", "None"}
    assert ages and all("-" in a for a in ages), ages  # bands, never an exact age
    assert not [a for a in ages if int(a.split("-")[0]) > 90], ages  # none starts past 90
    zips = {str(z) for z in released.column("zip").to_pylist()} - {"*", "None"}
    assert all(z.endswith("**") for z in zips), zips
