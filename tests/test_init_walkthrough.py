"""A real-shaped extract from ``init`` to a release, untouched (issue 42's "done when").

A testing log: a row per test, so the patient id repeats; each patient's name; a yes/no result; ages
with fractions for infants (0.2, 0.7) beside adults' whole years; a column named ``C1/C2``; the
clinic's name.  ``init`` writes a spec that ``validate`` passes as written (with the key exported as
init says), ``anonymize --out`` releases the age in bands, counting persons, and ``alternatives``
runs.  The same extract with ages stored in decades (0.19 = 19 years) gets ``scale = 100``.
"""

from __future__ import annotations

import csv
import json
import random
import tomllib
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from deid_sql.loading.transform import transformed
from tests.test_init_content import CLINICS, FIRST, LAST

INFANT_AGES = [0.2, 0.7, 0.5, 0.25, 0.9]


def extract(path: Path, patients: int = 400, decades: bool = False, seed: int = 7) -> dict[str, float]:
    """The testing log written to ``path``; each patient's age as written."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    ages: dict[str, float] = {}
    for p in range(patients):
        pid = f"P{p:05d}"
        age: float = rng.choice(INFANT_AGES) if p % 5 == 0 else float(rng.randint(1, 88))
        if decades:
            age = round(int(age) / 100, 2)  # 0.19 for 19 years
        ages[pid] = age
        name, clinic = f"{rng.choice(FIRST)} {rng.choice(LAST)}", rng.choice(CLINICS)
        for _ in range(rng.randint(1, 4)):
            rows.append({"patient_id": pid, "patient_name": name, "C1/C2": rng.choice(["a", "b", "c"]),
                         "clinic_name": clinic, "age": age, "positive": rng.choice(["yes", "no"])})
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return ages


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key init's summary tells the user to export (a fresh random key, as its line makes one)."""
    import secrets

    monkeypatch.setenv("DEID_SECRET", secrets.token_hex(32))


def test_an_extract_goes_from_init_to_a_release_of_persons_in_age_bands_untouched(run, tmp_path: Path) -> None:
    data = tmp_path / "tests.csv"
    ages = extract(data)
    summary = run("init", data).stdout
    assert "export DEID_SECRET=" in summary and "deid-sql validate" in summary
    spec = tmp_path / "tests.toml"
    text = spec.read_text(encoding="utf-8")
    raw = tomllib.loads(text)
    age = next(q for q in raw["qi"] if q["name"] == "age")
    assert age["transform"] == "floor" and "scale" not in age
    assert (age["min"], age["max"]) == (0, int(max(ages.values())))  # the whole years of the data
    assert 'transform = "floor": 0.7 is 0' in text  # the spec says why
    assert raw["person"]["column"] == "patient_id" and "C1/C2" in raw["columns"]["drop"]
    validated = run("validate", spec).stdout
    assert "400 persons ([person] patient_id)" in validated
    out, report = tmp_path / "release.parquet", tmp_path / "release.html"
    released = run("anonymize", spec, "--out", out, "--report", report).stdout
    assert "released 400 persons" in released and "gate: passed" in released
    twin = json.loads((tmp_path / "release.json").read_text(encoding="utf-8"))  # the report a reviewer signs
    assert next(q for q in twin["data"]["qis"] if q["name"] == "age")["transform"] == 'transform = "floor"'
    assert 'read as whole numbers: <code>transform = &#34;floor&#34;</code>' in (tmp_path / "release.html").read_text(
        encoding="utf-8")
    table = pq.read_table(tmp_path / "release.parquet")
    labels = {str(a) for a in table.column("age").to_pylist()} - {"*"}
    assert labels and all("-" in a for a in labels), labels  # bands, never an age as written
    assert not labels & {str(a) for a in ages.values()}
    for band in labels:  # each band holds whole years: 0.2 and 0.7 are in the band of 0
        lo, hi = (int(x) for x in band.split("-"))
        assert 0 <= lo <= hi <= int(max(ages.values()))
    assert any(band.startswith("0-") for band in labels)
    searched = run("alternatives", spec)
    assert "boundary policies found" in searched.stdout and "best loss" in searched.stdout
    assert "searching by the spec's [release] criteria" in searched.stderr


def test_ages_in_decades_are_scaled_and_rounded_by_init(run, tmp_path: Path) -> None:
    data = tmp_path / "decades.csv"
    ages = extract(data, decades=True)
    run("init", data)
    spec = tmp_path / "decades.toml"
    age = next(q for q in tomllib.loads(spec.read_text(encoding="utf-8"))["qi"] if q["name"] == "age")
    assert (age["transform"], age["scale"]) == ("round", 100)
    assert age["max"] == max(transformed(a, "round", 100) or 0 for a in ages.values())
    run("validate", spec)
    run("anonymize", spec, "--out", tmp_path / "years.parquet")
    released = {str(a) for a in pq.read_table(tmp_path / "years.parquet").column("age").to_pylist()} - {"*"}
    assert released and all("-" in a for a in released), released  # bands of whole years, never 0.19
    assert max(int(a.split("-")[1]) for a in released) >= 80  # the decades became years


def test_safe_harbor_of_an_extract_without_a_zip_keeps_its_other_rules(run, tmp_path: Path) -> None:
    data = tmp_path / "tests.csv"
    extract(data)
    run("init", data)
    shown = run("safe-harbor", tmp_path / "tests.toml").stdout
    assert "no ZIP QI in the spec: nothing to cut" in shown and "90 and above become 90+" in shown
