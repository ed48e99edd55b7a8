"""What rows let anyone count (issue 41, METHODS decision 16): while a person's rows stay linkable in a
release (the person key pseudonymized), their number of rows is visible per pseudonym, so a
``derived = "rows"`` QI is judged at its exact value whatever the policy shows of it.

40 patients, each with 1 + p % 20 visits: two patients share each visit count.  ``visits:top`` shows
``*`` for every row, and k over the labels alone is 40; counted per pseudonym, k is 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from deid_sql.cli import cli
from tests.test_persons import KEY, write

POLICY = "age:top|sex:top|visits:top"


def visits(folder: Path, release: str = "min_k = 5") -> Path:
    rows = [{"patient_id": f"P{p:02d}", "age": 30 + p, "sex": "FM"[p % 2], "seen": v, "dx": "x"}
            for p in range(40) for v in range(1 + p % 20)]
    spec = write(folder, rows)
    text = spec.read_text(encoding="utf-8").replace(
        'drop = ["patient_id", "seen", "dx"]',
        'drop = ["seen", "dx"]\npseudonymize = ["patient_id"]\nsecret_env = "DEID_PERSONS_KEY"')
    spec.write_text(text.replace("min_k = 2", release), encoding="utf-8")
    return spec


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEID_PERSONS_KEY", KEY)


def test_a_linkable_row_count_is_judged_at_its_exact_value(tmp_path: Path) -> None:
    spec = visits(tmp_path)
    out = tmp_path / "r.parquet"
    result = CliRunner().invoke(cli, ["materialize", str(spec), "--policy", POLICY, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "k 2 (limit min_k = 5" in result.output and not out.exists()


def test_the_exact_count_is_what_a_recipient_counts(tmp_path: Path) -> None:
    spec = visits(tmp_path, "min_k = 2")
    out = tmp_path / "r.parquet"
    result = CliRunner().invoke(cli, ["materialize", str(spec), "--policy", POLICY, "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = pq.read_table(out).to_pylist()
    assert {r["visits"] for r in rows} == {"1-20"}  # the policy hides the count …
    per_person: dict[str, int] = {}
    for r in rows:
        per_person[r["patient_id"]] = per_person.get(r["patient_id"], 0) + 1
    shared = {n: sum(1 for c in per_person.values() if c == n) for n in set(per_person.values())}
    figures = json.loads((tmp_path / "r.parquet.release.json").read_text(encoding="utf-8"))["figures"]
    assert figures["k"] == min(shared.values()) == 2  # … but the rows per pseudonym show it, and k says so
    assert figures["groups"] == len(shared) == 20 and figures["unit"] == "persons"


def test_a_release_that_drops_the_key_is_judged_by_its_labels(tmp_path: Path) -> None:
    spec = visits(tmp_path)
    # a view may drop the person key (check_person_release): nobody can count rows per person there
    text = spec.read_text(encoding="utf-8").replace('pseudonymize = ["patient_id"]\nsecret_env = "DEID_PERSONS_KEY"',
                                                    'drop = ["patient_id"]').replace(
        'drop = ["seen", "dx"]\ndrop = ["patient_id"]', 'drop = ["seen", "dx", "patient_id"]')
    spec.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(cli, ["view", str(spec), "--policy", POLICY, "--view", "v",
                                      "--db", str(tmp_path / "v.duckdb")])
    assert result.exit_code == 0, result.output
    assert "k = 40" in result.output
