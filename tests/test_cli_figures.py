"""Command-line output of issue 31 (moved from tests/test_vocabulary.py, which keeps the option
names): evaluate --suppress-below gives the gate's figures, readable policy forms show their
groups, timings measure what they name and end with the wall time, validate aligns."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from .test_fulldomain import RELEASE, small_spec


# -- evaluate --suppress-below: the gate's figures -----------------------------------------------
@pytest.mark.parametrize("policy,below", [("age:every=10|zip:digits=3", 5), ("age:level=1|race:level=1", 4)])
def test_evaluate_suppress_below_gives_the_release_gate_and_report_figures(tmp_path: Path, run: Any, policy: str,
                                                                          below: int) -> None:
    spec = small_spec(tmp_path, release="min_k = 4")
    shown = json.loads(run("evaluate", spec, "--policy", policy, "--suppress-below", below, "--format", "json").stdout)
    release = shown["release"]
    out, page = tmp_path / "r.parquet", tmp_path / "r.html"
    run("materialize", spec, "--policy", policy, "--suppress-below", below, "--out", out, "--report", page,
        expect=None)
    sidecar = json.loads(out.with_name("r.parquet.release.json").read_text())
    report = json.loads(page.with_suffix(".json").read_text())
    assert {k: release[k] for k in sidecar["figures"]} == sidecar["figures"]
    figures = report["risk"]["figures"]
    assert release["suppressed"] == figures["suppressed"] > 0
    assert (release["k"], release["risk"], release["expected_reidentifications"], release["max_record_risk"]) == \
        (figures["k"], figures["risk"], figures["expected_reidentifications"], figures["max_record_risk"])
    assert release["loss"] == pytest.approx(report["utility"]["normalized_loss"], rel=1e-12)
    assert release["gate"] == sidecar["gate"]["verdict"] == "passed" and release["suppress_below"] == below
    # without suppression the top-level figures are the policy's own (smaller k: the groups suppressed)
    assert shown["k"] < release["k"] and shown["risk"] > release["risk"]


def test_evaluate_suppress_below_says_when_the_gate_would_refuse(tmp_path: Path, run: Any) -> None:
    spec = small_spec(tmp_path, release="min_k = 50")
    shown = json.loads(run("evaluate", spec, "--policy", "age:every=10", "--suppress-below", 2).stdout)
    assert shown["release"]["gate"] == "refused" and "min_k" in shown["release"]["failures"][0]
    spec_table = run("evaluate", spec, "--policy", "age:every=10", "--suppress-below", 2, "--format", "table").stdout
    assert "refused" in spec_table and "suppressed" in spec_table.splitlines()[1]
    assert list(tmp_path.glob("*.release.json")) == []  # nothing written


# -- readable forms ------------------------------------------------------------------------------
def test_every_policy_form_reads_as_its_groups(tmp_path: Path, run: Any) -> None:
    spec = small_spec(tmp_path, release=RELEASE)
    forms = {"race:level=1": "race: White+Asian = [White, Asian], Black+Other = [Black, Other]",
             "age:level=1": "age: [0-4], [5-9]", "age:cuts=10,20": "age: [0-9], [10-19], [20-30]",
             "age:every=10": "age: [0-9], [10-19], [20-29]", "sex:top": "sex: [Female, Male]",
             "zip:level=1": "zip: [", "bottom": "original data"}
    for text, readable in forms.items():
        shown = json.loads(run("evaluate", spec, "--policy", text, "--format", "json").stdout)["readable"]
        assert shown.startswith(readable) and shown != text, (text, shown)
    shown = json.loads(run("evaluate", spec, "--levels", "race:1", "--format", "json").stdout)["readable"]
    assert "race: level 1 of 2 (" in shown and "White+Asian" in shown


# -- timings -------------------------------------------------------------------------------------
def _seconds(pattern: str, text: str) -> float:
    found = re.search(pattern, text)
    assert found, (pattern, text)
    return float(found.group(1))


def test_frontier_times_what_it_names_and_ends_with_the_wall_time(tmp_path: Path, run: Any) -> None:
    spec = small_spec(tmp_path, release=RELEASE)
    out = run("frontier", spec, "--budget", 40, "--out", tmp_path / "run").stdout
    lines = out.splitlines()
    assert re.search(r"policies evaluated \(seed 0\); search \d+\.\d s$", lines[0])
    search = _seconds(r"time: search (\d+\.\d) s", out)
    compare = _seconds(r"k-anonymity frontiers (\d+\.\d) s", out)
    write = _seconds(r"writing the files (\d+\.\d) s", out)
    wall = _seconds(r"^done in (\d+\.\d) s \(wall time of the whole command\)$", lines[-1])
    assert wall + 0.15 >= search + compare + write  # each rounded to 0.1 s
    again = run("frontier", spec, "--budget", 60, "--out", tmp_path / "run", "--resume").stdout
    assert "in this run" in again.splitlines()[0] or _seconds(r"search (\d+\.\d) s", again) < 0.05


@pytest.mark.parametrize("command", [["anonymize", "{spec}", "--min-k", "2"],
                                     ["alternatives", "{spec}", "--iterations", "2", "--max-risk", "0.5"],
                                     ["adversary", "{spec}", "--policy", "top"]])
def test_timed_commands_end_with_the_wall_time(tmp_path: Path, run: Any, command: list[str]) -> None:
    spec = str(small_spec(tmp_path, release=RELEASE))
    out = run(*[a.format(spec=spec) for a in command]).stdout.splitlines()
    assert re.fullmatch(r"done in \d+\.\d s \(wall time of the whole command\)", out[-1])
    assert not any("wall time" in line for line in out[:-1])  # no step time calls itself the wall time


def test_the_wall_time_starts_when_the_command_line_is_parsed() -> None:
    import importlib

    from deid_sql.cli import options

    assert importlib.import_module("deid_sql.cli.main").STARTED == options.STARTED


# -- validate ------------------------------------------------------------------------------------
def test_validate_aligns_long_qi_names(project: Any, run: Any) -> None:
    long_age = project.QI["age"].replace('name = "age"', 'name = "age_at_first_admission_in_years"\ncolumn = "age"')
    qis = [long_age, project.QI["sex"], project.QI["zip"]]
    spec = project.write_spec(project.spec_text(qis=qis, columns='[columns]\ndrop = ["patient_id", "race"]\n'
                                                                  'sensitive = ["diagnosis"]\n'), "long.toml")
    rows = [line for line in run("validate", spec).stdout.splitlines() if line.startswith("  qi ")]
    assert len(rows) == 3 and "age_at_first_admission_in_years" in rows[0]
    assert len({line.index(" values") for line in rows}) == 1
    kinds = [re.search(r"\s(integer|category|zip|date)\s+[\d,]+ values", line) for line in rows]
    assert all(kinds) and len({k.start() for k in kinds if k}) == 1
