"""The drift gate's distribution test (``deid_sql/policyfile/shift.py``): each QI's released label
shares against the saved ones, chi-square tests of homogeneity, Holm-corrected.

On the demo (a cohort of 20,000 saved, batches of 2,000 drawn with fresh seeds like the fixtures'
cohorts): a same-population batch passes; a batch 10 years older and one with the Black share
doubled are refused by ``apply`` and reported by ``check``, naming the QI and its labels.  The
rates over 100 batches of each kind are ``bench/drift.py``'s; here a few batches keep it fast.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deid_sql.fixtures import shift as batches
from deid_sql.policyfile import DriftRefused, PolicyFile, apply_policy, check_policy, save_policy
from deid_sql.policyfile.groups import Groups
from deid_sql.policyfile.shift import ALPHA, MIN_EXPECTED, Shift, holm, homogeneity, shift_test
from deid_sql.starter.demo import build_demo

from .test_policy_file import one_error_line

POLICY = "age:cuts=18,30,45,65,90|zip:top"
ROWS = 2000


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The demo written once, its policy saved on the cohort: (folder, policy file)."""
    folder = tmp_path_factory.mktemp("shift")
    spec = build_demo(folder / "demo")
    save_policy(spec, POLICY, folder / "policy.json")
    population = pq.read_table(folder / "demo" / "population.parquet")
    raced = batches.doubled(population)
    for kind in batches.KINDS:
        for i in range(3):
            pq.write_table(batches.draw(kind, population, ROWS, 500 + i, raced), folder / f"{kind}-{i}.parquet")
    return folder, folder / "policy.json"


# -- the test on counts ---------------------------------------------------------------------------

counts = st.dictionaries(st.sampled_from([f"l{i}" for i in range(12)]), st.integers(0, 400), min_size=1)


@settings(max_examples=60, deadline=None)
@given(counts)
def test_identical_counts_give_p_one(a: dict[str, int]) -> None:
    statistic, _, p, _ = homogeneity(a, dict(a))
    assert statistic == pytest.approx(0.0, abs=1e-9) and p == pytest.approx(1.0)


@settings(max_examples=60, deadline=None)
@given(counts, counts)
def test_the_test_is_symmetric(a: dict[str, int], b: dict[str, int]) -> None:
    one, two = homogeneity(a, b), homogeneity(b, a)
    assert one[1:] == pytest.approx(two[1:]) and one[0] == pytest.approx(two[0])
    assert 0.0 <= one[2] <= 1.0


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(counts, st.integers(2, 20))
def test_proportional_counts_do_not_move(a: dict[str, int], factor: int) -> None:
    """The same shares in a release ``factor`` times larger: nothing moved."""
    assert homogeneity(a, {k: v * factor for k, v in a.items()})[2] == pytest.approx(1.0)


def test_rare_labels_are_pooled_and_a_new_label_counts() -> None:
    saved = {"A": 900, "B": 95, "r1": 10, "r2": 10, "r3": 10}
    same = {"A": 180, "B": 19, "r1": 2, "r2": 3, "r3": 1}
    statistic, df, p, pooled = homogeneity(saved, same)
    assert pooled == 3 and df == 2 and p > 0.5  # A, B and the pooled rare labels
    # the fallback label * (absent from the saved release) on 10 % of the batch
    statistic, df, p, pooled = homogeneity(saved, {"A": 162, "B": 18, "*": 20})
    assert pooled == 4 and p < 1e-4  # pooled with the rare labels: still 20 records where about 8 were expected
    # a pooled cell that is itself sparse is merged into the smallest regular label
    assert homogeneity({"A": 900, "B": 100, "r": 1}, {"A": 90, "B": 10})[1:] == (1, pytest.approx(1.0, abs=0.05), 1)
    assert MIN_EXPECTED == 5.0
    assert homogeneity({"A": 5}, {"A": 7})[1:] == (0, 1.0, 0)  # one label: nothing can move


def test_holm() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([]) == [] and holm([0.5]) == [0.5]
    assert holm([0.9, 0.9]) == [1.0, 1.0]


def test_no_saved_records_say_the_test_cannot_run() -> None:
    empty = Groups(("age",), (), np.zeros(0, dtype=np.int64), None, np.zeros(0))
    result = shift_test(Shift(), empty, Groups(("age",), (("0-17",),), np.array([5]), None, np.zeros(1)))
    assert not result.ran and not result.shifted
    assert result.describe() == ("the distribution test cannot run for this policy file: it saves no released "
                                 "records per label; the risk test still runs")


# -- check and apply on the demo ------------------------------------------------------------------

@pytest.mark.slow
def test_same_population_batches_pass(demo: tuple[Path, Path], run) -> None:
    folder, policy = demo
    for i in range(3):
        report = check_policy(policy, folder / f"same-{i}.parquet")
        assert not report.drifted, report.why()
        assert report.shift is not None and report.shift.tested == 3  # age, sex, race (ZIP withheld)
    out = run("check", policy, "--source", folder / "same-0.parquet", expect=0).stdout
    assert "ok: no QI's label shares moved (smallest Holm-corrected p = " in out


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "qi", "label"), [("older", "age", "0-17"), ("race", "race", "Black")])
def test_shifted_batches_are_refused_naming_the_qi(demo: tuple[Path, Path], run, kind: str, qi: str,
                                                   label: str) -> None:
    folder, policy = demo
    for i in range(3):
        report = check_policy(policy, folder / f"{kind}-{i}.parquet")
        assert report.shifted and [t.qi for t in report.shift.drifted][:1] == [qi], report.why()
    source = folder / f"{kind}-0.parquet"
    out = run("check", policy, "--source", source, expect=1).stdout
    lines = [x for x in out.splitlines() if x.startswith(f"drift in {qi}: ")]
    assert len(lines) == 1 and label in lines[0] and "Holm-corrected over 3 QIs" in lines[0], out
    release = folder / f"{kind}.parquet.out.parquet"
    result = run("apply", policy, "--source", source, "--out", release, expect=1)
    line = one_error_line(result)
    assert line.startswith("error: drift: ") and f"label shares of batch {source} moved: {qi}: " in line
    assert "nothing was written" in line and not release.exists()
    with pytest.raises(DriftRefused):
        apply_policy(policy, source, out=release)
    as_json = json.loads(run("check", policy, "--source", source, "--json", expect=1).stdout)
    assert as_json["drifted"] and as_json["shift"]["drifted"][0] == qi and as_json["shift"]["alpha"] == ALPHA


@pytest.mark.slow
def test_shift_alpha_is_saved_and_an_old_file_still_loads(demo: tuple[Path, Path], run, tmp_path: Path) -> None:
    folder, policy = demo
    data = json.loads(policy.read_text())
    assert data["drift"]["shift"]["alpha"] == ALPHA and data["drift"]["shift"]["correction"] == "holm"
    # a file saved before the test: no drift.shift; it loads, and the test runs at the default level
    del data["drift"]["shift"]
    old = folder / "old.json"
    old.write_text(json.dumps(data))
    pf = PolicyFile.read(old)
    assert pf.shift is not None and not pf.shift.saved
    out = run("check", old, "--source", folder / "race-0.parquet", expect=1).stdout
    assert "note: this policy file was saved before the distribution test; it runs at the default alpha 0.001" in out
    assert "drift in race: " in out
    # a tiny alpha set at save lets the doubled race share pass the distribution test
    tiny = folder / "tiny.json"
    run("policy", "save", folder / "demo" / "demo.toml", "-p", POLICY, "--out", tiny, "--shift-alpha", "1e-300")
    assert json.loads(tiny.read_text())["drift"]["shift"]["alpha"] == 1e-300
    assert not check_policy(tiny, folder / "same-0.parquet").shifted
    result = run("policy", "save", folder / "demo" / "demo.toml", "-p", POLICY, "--out", folder / "bad.json",
                 "--shift-alpha", "1", expect=2)
    assert one_error_line(result).startswith("error: --shift-alpha 1 must be between 0 and 1")
    data["drift"]["shift"] = {"alpha": 2}
    broken = folder / "broken.json"
    broken.write_text(json.dumps(data))
    result = run("check", broken, "--source", folder / "same-0.parquet", expect=2)
    assert "drift.shift" in one_error_line(result)
