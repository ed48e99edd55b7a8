"""The report of a release that suppresses records: ``--suppress-below`` and ``anonymize``'s optimum.

The report's figures must be those the release recorded (measured on its rows), its distributions must
add up with the suppressed records counted once, its loss must count a suppressed record as generalized
to the top, and ``--from-release`` must rebuild the same page from the sidecar alone (an anonymization is
run again from the recorded parameters).
"""

from __future__ import annotations

import collections
import json
import math
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deid_sql.compiler.suppression import Suppression
from deid_sql.problem import Problem
from deid_sql.report import release_contents as contents

from .test_fulldomain import small_spec
from .test_report_cli import POLICY, one_line_error, report_files

RECORDED = ("records", "groups", "k", "suppressed", "expected_reidentifications", "max_record_risk")


def _agrees(twin: dict, sidecar: dict) -> None:
    figures, recorded = twin["risk"]["figures"], sidecar["figures"]
    for key in RECORDED:
        assert figures[key] == pytest.approx(recorded[key], rel=1e-12, abs=1e-12), key


def _read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


# -- --suppress-below ------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_release_with_suppress_below_gets_a_report_of_what_it_released(run, project) -> None:
    release, page = project.dir / "release.parquet", project.dir / "release-report.html"
    result = run("materialize", project.spec_path, "--policy", POLICY, "--suppress-below", "5", "--out", release,
                 "--report", page)
    assert "verdict: " in result.stdout
    twin, sidecar = _read(page.with_suffix(".json")), _read(Path(f"{release}.release.json"))
    _agrees(twin, sidecar)
    rows = pq.read_table(release).to_pylist()
    flagged = sum(1 for r in rows if r["deid_suppressed"])
    assert flagged > 0 and twin["risk"]["figures"]["suppressed"] == flagged  # an independent count of the rows
    suppression = twin["policy"]["suppression"]
    assert suppression["below"] == 5 and "fewer than 5 records" in suppression["rule"]
    assert suppression["suppressed_records"] == flagged
    assert suppression["share"] == pytest.approx(flagged / len(rows))
    # the distributions add up to the release: labels + '*' for every QI, the histogram over every record
    for marginal in twin["utility"]["marginals"]:
        assert sum(s["share"] for s in marginal["after"]) == pytest.approx(1.0)
        assert marginal["after"][-1]["label"] == "* (suppressed)"
        assert marginal["after"][-1]["share"] == pytest.approx(flagged / len(rows))
    for rule in twin["policy"]["rules"]:
        assert sum(label["records"] for label in rule["labels"]) == len(rows) - flagged
    assert sum(twin["risk"]["record_risk_histogram"]["counts"]) == len(rows)
    kept = collections.Counter(tuple(r[q] for q in ("age", "sex", "race", "zip")) for r in rows
                               if not r["deid_suppressed"])
    assert sum(twin["risk"]["group_sizes"]["sample"]) == len(kept) == twin["risk"]["figures"]["groups"]
    # the comparison has the policy before suppression and the release after it, labelled; the loss grows
    before, this = twin["risk"]["comparison"][:2]
    assert before["name"] == "this policy, before suppression" and this["name"] == "this release, after suppression"
    assert this["k"] == sidecar["figures"]["k"] >= 5 > before["k"]
    plain = _read_report(run, project, POLICY, project.dir / "plain.html")
    # the figures before suppression are the policy's own, evaluate's digits: the report without suppression
    assert before["expected_reidentifications"] == plain["risk"]["comparison"][0]["expected_reidentifications"]
    assert twin["risk"]["before_suppression"]["k"] == plain["risk"]["figures"]["k"] == before["k"]
    assert twin["risk"]["before_suppression"]["expected_reidentifications"] == pytest.approx(
        plain["risk"]["figures"]["expected_reidentifications"], rel=1e-12)
    assert twin["risk"]["figures"]["expected_reidentifications"] == this["expected_reidentifications"]
    assert plain["risk"]["before_suppression"] is None and len(plain["risk"]["comparison"]) == 2
    # the page gives each figure twice, in columns that say which is which
    text = page.read_text(encoding="utf-8")
    assert "<th class=\"num\">before suppression</th><th class=\"num\">released, after suppression</th>" in text
    assert "--suppress-below 5" in twin["policy"]["arguments"]
    assert twin["utility"]["kl_loss"] > plain["utility"]["kl_loss"]
    assert twin["utility"]["iyengar_loss"] > plain["utility"]["iyengar_loss"]
    assert twin["method"]["commands"]["report"].startswith("deid-sql report ")
    assert "--from-release" in twin["method"]["commands"]["report"]
    assert "deid_suppressed" in page.read_text(encoding="utf-8")


def _read_report(run, project, policy: str, out: Path) -> dict:
    run("report", project.spec_path, "--policy", policy, "--out", out)
    return _read(out.with_suffix(".json"))


@pytest.mark.slow
def test_from_release_rebuilds_the_report_of_a_suppressing_release(run, project) -> None:
    release = project.dir / "release.parquet"
    run("materialize", project.spec_path, "--policy", POLICY, "--suppress-below", "5", "--out", release,
        "--report", project.dir / "with.html")
    run("report", project.spec_path, "--from-release", f"{release}.release.json", "--out", project.dir / "later.html")
    first, later = _read(project.dir / "with.json"), _read(project.dir / "later.json")
    assert later["risk"]["figures"] == first["risk"]["figures"]
    assert later["utility"]["kl_loss"] == first["utility"]["kl_loss"]
    assert later["policy"]["suppression"] == first["policy"]["suppression"]


@pytest.mark.slow
def test_a_sidecar_whose_figures_differ_is_refused_with_nothing_written(run, project) -> None:
    release = project.dir / "release.parquet"
    run("materialize", project.spec_path, "--policy", POLICY, "--suppress-below", "5", "--out", release)
    sidecar = Path(f"{release}.release.json")
    data = _read(sidecar)
    data["figures"]["suppressed"] += 1
    sidecar.write_text(json.dumps(data), encoding="utf-8")
    result = run("report", project.spec_path, "--from-release", sidecar, "--out", project.dir / "r.html", expect=2)
    one_line_error(result, "differ", "suppressed")
    assert report_files(project.dir) == ["release.parquet.release.json"]


@pytest.mark.slow
def test_a_view_with_suppression_gets_its_report_too(run, project) -> None:
    db, page = project.dir / "views.duckdb", project.dir / "view.html"
    run("view", project.spec_path, "--policy", POLICY, "--suppress-below", "3", "--db", db, "--view", "released",
        "--report", page)
    twin = _read(page.with_suffix(".json"))
    assert twin["policy"]["suppression"]["below"] == 3 and twin["risk"]["figures"]["k"] >= 3
    assert twin["method"]["commands"]["report"] == twin["method"]["commands"]["release"]  # it rebuilds both


# -- anonymize --report ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_anonymize_writes_the_report_of_its_optimum_with_the_groups_it_suppressed(run, tmp_path) -> None:
    spec = small_spec(tmp_path, release="min_k = 10")  # the gate judges the release by the same k
    out, page = tmp_path / "release.parquet", tmp_path / "release-report.html"
    result = run("anonymize", spec, "--min-k", "10", "--max-suppressed-share", "0.05", "--out", out, "--report", page)
    assert "verdict: " in result.stdout
    twin, sidecar = _read(page.with_suffix(".json")), _read(Path(f"{out}.release.json"))
    _agrees(twin, sidecar)
    rows = pq.read_table(out).to_pylist()
    flagged = sum(1 for r in rows if r["deid_suppressed"])
    assert flagged > 0 and twin["risk"]["figures"]["suppressed"] == flagged
    assert twin["risk"]["figures"]["k"] >= 10
    suppression = twin["policy"]["suppression"]
    assert "k-anonymity (k = 10)" in suppression["rule"] and suppression["anonymize"]["models"]["k"] == 10
    assert suppression["suppressed_groups"] == suppression["groups"] > 0
    assert twin["policy"]["levels"] == result.stdout.split("optimum", 1)[1].split()[0]
    assert twin["policy"]["text"] is None
    # the same page again from the sidecar alone: the search is run again and reaches the same optimum
    run("report", spec, "--from-release", f"{out}.release.json", "--out", tmp_path / "later.html")
    later = _read(tmp_path / "later.json")
    assert later["risk"]["figures"] == twin["risk"]["figures"]
    assert later["utility"]["kl_loss"] == twin["utility"]["kl_loss"]


def test_anonymize_report_needs_out_and_a_sidecar_of_another_optimum_is_refused(run, tmp_path) -> None:
    spec = small_spec(tmp_path, release="min_k = 3")
    result = run("anonymize", spec, "--min-k", "3", "--report", tmp_path / "r.html", expect=2)
    one_line_error(result, "--out")
    out = tmp_path / "release.parquet"
    run("anonymize", spec, "--min-k", "3", "--max-suppressed-share", "0.05", "--out", out)
    sidecar = Path(f"{out}.release.json")
    data = _read(sidecar)
    data["suppression"]["anonymize"]["levels"][0] += 1  # as if the data had changed since
    sidecar.write_text(json.dumps(data), encoding="utf-8")
    result = run("report", spec, "--from-release", sidecar, "--out", tmp_path / "r.html", expect=2)
    one_line_error(result, "run again", "changed")
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "r.json").exists()


def test_anonymize_store_stats_replaces_the_old_report_flag(run, tmp_path) -> None:
    spec = small_spec(tmp_path)
    result = run("anonymize", spec, "--min-k", "3", "--store-stats")
    assert "max antichain" in result.stdout


# -- the figures from cells equal the definitions ------------------------------------------------------------

@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("suppression")
    with Problem.from_spec(small_spec(folder, population=True)) as problem:
        yield problem


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), below=st.integers(1, 12))
def test_losses_and_information_equal_their_definitions(loaded: Problem, seed: int, below: int) -> None:
    """Without suppression the report's KL and Iyengar loss are ``evaluate``'s and the information kept is
    H(label)/H(value); with suppression they equal a record-by-record computation in plain Python."""
    rng = np.random.default_rng(seed)
    policy = loaded.lattice.random_policy(rng, density=float(rng.uniform(0.05, 0.95)))
    recoding = policy.recoding()
    plain = contents.Groups(loaded, recoding)
    kl, iyengar = contents.losses(loaded, recoding, plain)
    metrics = loaded.evaluate(policy)
    assert kl == pytest.approx(metrics.kl, rel=1e-9, abs=1e-12)
    assert iyengar == pytest.approx(metrics.iyengar_loss, rel=1e-9, abs=1e-12)
    for q, qrec in enumerate(recoding.qis):
        before = contents.original_marginal(loaded, q)
        after = np.bincount(qrec.group_of, weights=before, minlength=qrec.n_groups)
        expected = contents.entropy(after) / contents.entropy(before) if contents.entropy(before) > 0 else 1.0
        assert contents.information_kept(loaded, q, qrec, plain) == pytest.approx(expected, abs=1e-12)
    cut = contents.Groups(loaded, recoding, Suppression.smaller_than(below))
    kl_s, iyengar_s = contents.losses(loaded, recoding, cut)
    ref_kl, ref_iyengar = _reference_losses(loaded, recoding, below)
    assert kl_s == pytest.approx(ref_kl, rel=1e-9, abs=1e-12)
    assert iyengar_s == pytest.approx(ref_iyengar, rel=1e-9, abs=1e-12)
    assert cut.suppressed == sum(int(m) for m in plain.m if m < below)
    for q, qrec in enumerate(recoding.qis):
        assert 0.0 <= contents.information_kept(loaded, q, qrec, cut) <= 1.0


def _reference_losses(problem: Problem, recoding, below: int) -> tuple[float, float]:
    """KL and Iyengar's loss record by record: each sample cell's group, its records, the cells it covers;
    a suppressed record is spread over every cell of the domain and loses everything."""
    sample = problem.sample
    sizes = [d.size for d in problem.domains]
    cells = [tuple(int(p) for p in row) for row in sample.positions]
    counts = [int(c) for c in sample.counts]
    group = [tuple(int(q.group_of[p]) for q, p in zip(recoding.qis, cell)) for cell in cells]
    records = collections.Counter()
    for g, c in zip(group, counts):
        records[g] += c
    suppressed_total = sum(m for m in records.values() if m < below)
    n = sum(counts)
    top = math.prod(sizes)
    kl = lm = 0.0
    for g, c in zip(group, counts):
        width = [int(q.widths[gid]) for q, gid in zip(recoding.qis, g)]
        kept = records[g] >= below
        q_n = (records[g] / math.prod(width) if kept else 0.0) + suppressed_total / top
        kl += c / n * math.log(c / q_n)
        lm += c * (sum((w - 1) / (s - 1) if s > 1 else 0.0 for w, s in zip(width, sizes)) if kept else len(sizes))
    return kl, lm / (n * len(sizes))
