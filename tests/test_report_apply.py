"""``deid-sql apply --report``: the report of a batch released with a saved policy.

The report is that of the batch (its records, the spec's population) with the policy file's saved domains,
so its figures are the ones the release recorded; it names the batch, the policy file and the drift check,
and a batch it cannot describe (values outside the saved domains) is refused before anything is written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from .test_policy_file import POLICY, batch, one_error_line, save, with_column
from .test_report_cli import report_files
from .test_report_suppression import _agrees


@pytest.mark.slow
def test_apply_writes_the_report_of_the_batch_it_released(project, run) -> None:
    policy = save(project, run)
    # a batch with only part of the ZIPs: the report keeps the saved domain, not the batch's own values
    table = batch(seed=11, n=400)
    zips = table.column("zip").to_pylist()
    source = project.write_parquet(with_column(table, "zip", [z if z < "37300" else "37201" for z in zips]),
                                   "june.parquet")
    out, page = project.dir / "june-release.parquet", project.dir / "june.html"
    # every ZIP moved to 372**: the drift check's distribution test finds it (the risk did not rise)
    result = run("apply", policy, "--source", source, "--out", out, "--report", page,
                 "--accept-drift", "only the 372 clinics this month")
    assert "drift accepted: label shares of batch" in result.stdout and f"report: {page}" in result.stdout
    twin = json.loads(page.with_suffix(".json").read_text(encoding="utf-8"))
    sidecar = json.loads(Path(f"{out}.release.json").read_text(encoding="utf-8"))
    _agrees(twin, sidecar)
    assert twin["risk"]["figures"]["records"] == pq.read_table(out).num_rows == 400
    saved = json.loads(policy.read_text(encoding="utf-8"))
    assert twin["policy"]["text"] == saved["policy"]
    zip_domain = next(q for q in twin["data"]["qis"] if q["name"] == "zip")
    saved_zips = next(q for q in saved["qis"] if q["name"] == "zip")["domain"]
    assert zip_domain["size"] == len(saved_zips["values"]) > len({z for z in zips if z < "37300"})
    assert twin["data"]["batch"]["source"].endswith("june.parquet")
    assert Path(twin["data"]["batch"]["policy_file"]).resolve() == policy.resolve()
    assert twin["data"]["batch"]["drift"]["exceeded"] is False
    assert twin["method"]["commands"]["release"].startswith("deid-sql apply ")
    html = page.read_text(encoding="utf-8")
    assert 'id="batch"' in html and "june.parquet" in html and "within the limit" in html


@pytest.mark.slow
def test_a_batch_outside_the_saved_domains_is_refused_with_nothing_written(project, run) -> None:
    policy = save(project, run, "--fallback", "other", name="fallback.json")
    table = batch(seed=12, n=300)
    source = project.write_parquet(with_column(table, "zip", ["99999"] + table.column("zip").to_pylist()[1:]),
                                   "odd.parquet")
    before = project.files()
    result = run("apply", policy, "--source", source, "--out", project.dir / "odd-release.parquet",
                 "--report", project.dir / "odd.html", expect=2)
    line = one_error_line(result)
    assert "outside the saved domains" in line and "--report" in line
    assert project.files() == before
    # without --report the fallback release goes through as before
    run("apply", policy, "--source", source, "--out", project.dir / "odd-release.parquet")
    assert report_files(project.dir) == ["fallback.json", "odd-release.parquet.release.json"]


def test_apply_report_target_is_checked_before_the_batch_is_read(project, run) -> None:
    policy = save(project, run, policy=POLICY)
    before = project.files()
    result = run("apply", policy, "--source", project.dir / "missing.parquet", "--out", project.dir / "r.parquet",
                 "--report", project.dir / "r.pdf", expect=2)
    assert ".html" in one_error_line(result)
    assert project.files() == before
