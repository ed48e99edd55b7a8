"""A monthly refresh released to one recipient (issue 41): twelve cumulative batches of encounters,
persons ageing (each visit carries the age at the visit) and new persons joining every month, applied
with one saved policy.  Every month is judged with the months before it: its union's k stays at the
criterion's, and the ledger lists twelve entries that verify.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from tests.test_persons import KEY, write

POLICY = "age:every=20|sex:bottom"
MONTHS = 12
FIRST, JOINING = 240, 36  # persons at the start, and joining each month (spread evenly over the groups)


def encounters(month: int) -> list[dict[str, Any]]:
    """Every visit up to ``month`` (1-based): person p joins in month max(1, …), visits monthly from then,
    aged by the months passed; their first visit's age sits in one of six (age band, sex) groups."""
    rows = []
    for p in range(FIRST + JOINING * (MONTHS - 1)):
        joined = 1 if p < FIRST else 2 + (p - FIRST) // JOINING
        if joined > month:
            continue
        cell = p % 6
        age = 25 + 20 * (cell // 2) + p % 7  # bands 20-39, 40-59, 60-79 (ages 25..67 + ageing < 1 year)
        for visit in range(joined, month + 1):
            rows.append({"patient_id": f"P{p:04d}", "age": age + (visit - 1) // 12, "sex": "FM"[cell % 2],
                         "seen": visit, "dx": "x"})
    return rows


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEID_PERSONS_KEY", KEY)


def test_twelve_monthly_batches_keep_the_unions_k_and_the_ledger_verifies(
        tmp_path: Path, run: Callable[..., Result]) -> None:
    spec = write(tmp_path, encounters(1), visits=False)
    text = spec.read_text(encoding="utf-8").replace(
        'drop = ["patient_id", "seen", "dx"]',
        'drop = ["seen", "dx"]\npseudonymize = ["patient_id"]\nsecret_env = "DEID_PERSONS_KEY"')
    spec.write_text(text.replace("min_k = 2", 'min_k = 5\nrecipient = "registry"'), encoding="utf-8")
    policy = tmp_path / "policy.json"
    run("policy", "save", spec, "-p", POLICY, "--out", policy)
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("patient_id", pa.string()), ("age", pa.int64()), ("sex", pa.string()),
                        ("seen", pa.int64()), ("dx", pa.string())])
    for month in range(1, MONTHS + 1):
        batch = tmp_path / f"batch-{month:02d}.parquet"
        pq.write_table(pa.Table.from_pylist(encounters(month), schema=schema), batch)
        out = tmp_path / f"release-{month:02d}.parquet"
        run("apply", policy, "--source", batch, "--out", out, "--accept-drift", "the monthly refresh adds patients")
        record = json.loads(out.with_name(out.name + ".release.json").read_text(encoding="utf-8"))
        assert record["ledger"]["entry"] == month and record["ledger"]["recipient"] == "registry"
        union = record["figures"].get("union")
        if month == 1:
            assert union is None
        else:  # every person released before is linked; the newcomers are told apart from them, and judged
            assert union["linked_persons"] == FIRST + JOINING * (month - 2)
            assert union["k"] >= 5 and union["earlier"] and len(union["earlier"]) == month - 1
    listed = json.loads(run("ledger", spec, "--verify", "--json").stdout)
    assert listed["verified"] is True and not listed["problems"]
    (registry,) = listed["recipients"]
    assert registry["recipient"] == "registry" and len(registry["releases"]) == MONTHS
    assert registry["persons"] == FIRST + JOINING * (MONTHS - 1) and registry["union_k"] >= 5
