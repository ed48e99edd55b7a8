"""Risk without a census through the spec and the commands: ``population = { size | region }``,
``[weights]``, ``--risk pitman|zayatz|snb|dankar|benedetti-franconi``; each bad combination one
line and exit 2; the evaluators agree (fast and SQL paths) and the searches that prune on monotone
risk refuse the models that are not monotone."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pytest

from deid_sql.nocensus.estimators import Histogram, zayatz
from deid_sql.problem import Problem
from deid_sql.registry import RISK_MODELS
from deid_sql.spec.population_size import REGIONS

# the registered risk models that estimate from the sample alone
NO_CENSUS_RISKS = tuple(entry.name for entry in RISK_MODELS if not entry["census"])
SIZE = 50_000  # people; the project's source has 500 records (f = 0.01)


def no_census(project, size: str = f"population = {{ size = {SIZE} }}", risk: str = "", extra: str = "",
              source: str = "source.csv") -> object:
    text = project.spec_text(population=None, source=source).replace('population = "sample"', size)
    return project.write_spec((f'risk = "{risk}"\n' if risk else "") + text + extra)


def skewed(project) -> object:
    """A source whose ages follow a power law (as real QIs do: a few common values, a long tail),
    on the QIs age and zip: Pitman's likelihood has its maximum inside 0 < alpha < 1 there
    (on the project's uniform synthetic source it runs to alpha = 0)."""
    rng = np.random.default_rng(3)
    ages = np.minimum(rng.zipf(1.3, project.source.num_rows), 121) - 1
    table = project.source.set_column(project.source.column_names.index("age"), "age", pa.array(ages))
    project.write_csv(table, "skewed.csv")
    text = project.spec_text(population=None, source="skewed.csv", qis=(project.QI["age"], project.QI["zip"]))
    return project.write_spec(text.replace('population = "sample"', f"population = {{ size = {SIZE} }}"),
                              "skewed.toml")


def one_line_error(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    return lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("risk", NO_CENSUS_RISKS)
def test_evaluate_with_each_model_gives_its_figures(project, run, risk: str) -> None:
    spec = skewed(project)
    out = json.loads(run("evaluate", spec, "--risk-model", risk, "--policy", "age:every=10", "--json").stdout)
    assert out["risk_model"] == risk
    figures = out["no_census"]
    assert figures["population_size"] == SIZE and figures["sampling_fraction"] == pytest.approx(500 / SIZE)
    sql = json.loads(run("evaluate", spec, "--risk-model", risk, "--policy", "age:every=10", "--path", "sql",
                         "--json").stdout)
    assert sql["risk_sum"] == pytest.approx(out["risk_sum"], rel=1e-9)
    # the expected re-identifications are the model's own estimate, never the count of groups
    # (the sample as its own population would make every sample unique a certain re-identification)
    assert out["expected_reidentifications"] == pytest.approx(out["risk_sum"], rel=1e-12)
    assert sql["expected_reidentifications"] == pytest.approx(out["risk_sum"], rel=1e-9)
    assert out["expected_reidentifications"] < out["groups"]
    assert sql["max_record_risk"] == pytest.approx(out["max_record_risk"], rel=1e-9)
    if risk == "benedetti-franconi":
        assert out["risk_sum"] == pytest.approx(figures["benedetti_franconi"]["expected_reidentifications"])
    elif "population_uniques" in figures[risk]:
        # Σ r = f·U, capped at the sample uniques (docs/no-census.md)
        expected = min(figures["sample_uniques"], figures["sampling_fraction"] * figures[risk]["population_uniques"])
        assert out["risk_sum"] == pytest.approx(expected, rel=1e-9)


@pytest.mark.slow
def test_a_model_that_cannot_fit_says_so_in_one_line(project, run) -> None:
    # 427 of the 462 classes of the original data are unique: Pitman's likelihood runs to alpha = 0
    line = one_line_error(run("evaluate", no_census(project), "--risk-model", "pitman", "--policy", "top", expect=2))
    assert "Pitman" in line
    out = json.loads(run("evaluate", no_census(project), "--risk-model", "dankar", "--policy", "bottom", "--format",
                         "json").stdout)
    assert out["no_census"]["pitman"]["error"].startswith("the Pitman")  # listed as an error, never a number
    assert out["no_census"]["dankar"]["model"] == "zayatz" and "Pitman failed" in out["no_census"]["dankar"]["note"]


def test_zayatz_risk_by_hand(project) -> None:
    """Σ r over the records of the bottom policy = f · Zayatz's population uniques of its histogram."""
    with Problem.from_spec(no_census(project, risk="zayatz")) as problem:
        m, _, _ = problem._fast_path.groups(problem.recoding("bottom"))
        u = zayatz(Histogram.of(m), SIZE).uniques
        assert problem.evaluate("bottom").risk_sum == pytest.approx(min((m == 1).sum(), 500 / SIZE * u), rel=1e-12)


@pytest.mark.slow
def test_region_preset(project, run) -> None:
    spec = no_census(project, size='population = { region = "canada" }')
    out = json.loads(run("evaluate", spec, "--risk-model", "dankar", "--policy", "top", "--json").stdout)
    assert out["no_census"]["population_size"] == REGIONS["canada"][0]
    assert "canada" in run("validate", spec).stdout


@pytest.mark.slow
def test_benedetti_franconi_with_weights_by_hand(project, run) -> None:
    weights = np.where(np.arange(project.source.num_rows) % 3 == 0, 40.0, 120.5)
    project.write_csv(project.source.append_column("w", pa.array(weights)), "weighted.csv")
    spec = no_census(project, size="", risk="benedetti-franconi", source="weighted.csv",
                     extra='\n[weights]\ncolumn = "w"\n')
    text = spec.read_text().replace('drop = ["patient_id"]', 'drop = ["patient_id", "w"]')
    spec.write_text(text)
    out = json.loads(run("evaluate", spec, "--policy", "age:every=20|zip:top", "--json").stdout)
    # by hand: groups of the policy, their records f and summed weights F, p = f / F
    rows = project.source.to_pylist()
    groups: dict[tuple, list[float]] = {}
    for row, w in zip(rows, weights):
        key = (row["age"] // 20, row["sex"], row["race"])
        groups.setdefault(key, []).append(float(w))
    expected = 0.0
    for ws in groups.values():
        f, F = len(ws), sum(ws)
        p, q = f / F, 1 - f / F
        if f == 1:
            r = p / q * math.log(1 / p)
        elif f == 2:
            r = p / q - (p / q) ** 2 * math.log(1 / p)
        elif f == 3:
            r = (p / q) ** 3 * (q * (3 * q - 2) / (2 * p * p) + math.log(1 / p))
        else:
            r = p / (f - q)
        expected += f * r
    assert out["risk_sum"] == pytest.approx(expected, rel=1e-9)
    assert out["no_census"]["population_size"] == pytest.approx(weights.sum(), abs=1)
    assert out["no_census"]["benedetti_franconi"]["weights"] is True


@pytest.mark.parametrize("bad, says", [
    ("zero", "below 1"), ("negative", "below 1"), ("null", "NULL"), ("missing", "does not exist"),
])
def test_bad_weights_one_line(project, run, bad: str, says: str) -> None:
    weights = pa.array([None if bad == "null" and i == 4 else (0.0 if bad == "zero" and i == 4 else
                        (-2.0 if bad == "negative" and i == 4 else 10.0)) for i in range(project.source.num_rows)],
                       pa.float64())
    project.write_csv(project.source.append_column("w", weights), "weighted.csv")
    column = "nope" if bad == "missing" else "w"
    spec = no_census(project, size="", source="weighted.csv", extra=f'\n[weights]\ncolumn = "{column}"\n')
    line = one_line_error(run("evaluate", spec, "--policy", "top", expect=2))
    assert says in line and "[weights]" in line


@pytest.mark.parametrize("population, says", [
    ('population = { size = 100 }', "smaller than the sample"),
    ('population = { size = 0 }', "whole number of people"),
    ('population = { region = "atlantis" }', "not a preset"),
    ('population = { size = 10_000, region = "usa" }', "not both"),
    ('population = { size = 10_000, path = "population.parquet", count = "count" }', "census table"),
])
def test_bad_population_one_line(project, run, population: str, says: str) -> None:
    line = one_line_error(run("evaluate", no_census(project, size=population), "--policy", "top", expect=2))
    assert says in line


def test_a_census_and_a_no_census_model_or_weights(project, run) -> None:
    line = one_line_error(run("evaluate", project.spec_path, "--risk-model", "pitman", "--policy", "top", expect=2))
    assert "census table" in line
    spec = project.write_spec(project.spec_text() + '\n[weights]\ncolumn = "age"\n', "both.toml")
    assert "census table" in one_line_error(run("evaluate", spec, "--policy", "top", expect=2))


def test_a_no_census_model_needs_the_population_size(project, run) -> None:
    spec = project.spec(population=None)
    line = one_line_error(run("evaluate", spec, "--risk-model", "snb", "--policy", "top", expect=2))
    assert "population = { size" in line


def test_every_command_with_risk_lists_the_models(run) -> None:
    for command in ("evaluate", "alternatives", "frontier", "anonymize"):
        text = " ".join(run(command, "--help").stdout.split())
        for name in NO_CENSUS_RISKS:
            assert name in text, (command, name)
    assert "is not one of" in run("evaluate", "x.toml", "--risk-model", "pitmann", "--policy", "top", expect=2).stderr


@pytest.mark.slow
def test_pruning_searches_refuse_dataset_level_models(project, run) -> None:
    spec = no_census(project)
    line = one_line_error(run("alternatives", spec, "--risk-model", "dankar", "--max-risk", "0.5", expect=2))
    assert "never rises with generalization" in line and "dankar" in line
    with Problem.from_spec(spec, risk="benedetti-franconi") as problem:
        problem.require_monotone_risk("a search")  # monotone without weights: no refusal


def test_the_report_shows_the_model_and_its_figures(project, run, tmp_path) -> None:
    spec = no_census(project, risk="zayatz")
    run("report", spec, "--policy", "age:every=10", "--out", tmp_path / "r.html")
    parameters = json.loads((tmp_path / "r.json").read_text())["method"]["parameters"]
    assert parameters["risk"] == "zayatz" and parameters["population"].startswith(f"no census: {SIZE:,} people")
    estimates = json.loads((tmp_path / "r.json").read_text())["risk"]["no_census"]["before_suppression"]
    assert "population_uniques" in estimates["zayatz"] and "expected_reidentifications" in \
        estimates["benedetti_franconi"]
    assert "population uniques" in (tmp_path / "r.html").read_text()
