"""The frontier command: outputs, bad input, resume safety."""

from __future__ import annotations

import csv

import pytest


def _roles(project):
    qis = [q.replace('name = "age"', 'name = "age"\nrole = "age"').replace('name = "zip"', 'name = "zip"\nrole = "zip"')
           for q in project.DEFAULT_QIS]
    return project.spec(name="roles.toml", qis=qis)


@pytest.mark.slow
def test_frontier_writes_every_output(project, run):
    out = project.dir / "run"
    result = run("frontier", _roles(project), "--budget", 400, "--seed", 1, "--out", out)
    for name in ("frontier.csv", "searched.csv", "frontier.png", "frontier.html", "checkpoint.json"):
        assert (out / name).exists(), name
    assert "frontier size" in result.stdout and "strictly dominate it" in result.stdout
    rows = list(csv.DictReader((out / "frontier.csv").open(encoding="utf-8")))
    assert rows and {"risk", "loss", "policy", "readable"} <= set(rows[0])
    searched = list(csv.DictReader((out / "searched.csv").open(encoding="utf-8")))
    assert len(searched) == 400
    again = run("frontier", _roles(project), "--budget", 400, "--seed", 1, "--out", out, expect=2)
    assert "already holds a frontier run" in again.stderr
    resumed = run("frontier", _roles(project), "--budget", 600, "--seed", 1, "--out", out, "--resume")
    assert "600 policies evaluated" in resumed.stdout


def test_frontier_bad_input(project, run):
    out = project.dir / "bad"
    assert "below 2" in run("frontier", project.spec_path, "--budget", 1, "--out", out, expect=2).stderr
    assert "outside [0, 1]" in run("frontier", project.spec_path, "--th", 1.5, "--out", out, expect=2).stderr
    assert "no checkpoint.json to resume" in run("frontier", project.spec_path, "--out", out, "--resume",
                                                 expect=2).stderr


@pytest.mark.slow
def test_resume_refuses_another_problems_checkpoint(project, run):
    out = project.dir / "shared-out"
    run("frontier", project.spec_path, "--budget", 200, "--out", out)
    other = project.spec(name="other.toml", qis=project.DEFAULT_QIS[:3])  # without zip: another problem
    result = run("frontier", other, "--budget", 300, "--out", out, "--resume", expect=2)
    assert "belongs to a different problem" in result.stderr
    wrong = run("frontier", project.spec_path, "--budget", 300, "--out", out, "--resume", "--method", "rcs",
                expect=2)
    assert "resume it with --method shs --seed 0" in wrong.stderr
