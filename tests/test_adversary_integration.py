"""The adversary risk model inside deid-sql: spec, evaluators (fast = SQL = chain =
reference), monotone along the lattice, searches refusing non-monotone settings, CLI."""

from __future__ import annotations

import csv
import itertools
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from deid_sql.adversary.params import AdversaryParams
from deid_sql.cli import cli
from deid_sql.errors import DeidError, SpecError
from deid_sql.evaluate.chain import ChainEvaluator
from deid_sql.problem import Problem
from deid_sql.spec.file import Spec

from . import adversary_reference as reference
from .problems import write_small_problem
from .reference import small_problem_cells
from .test_fulldomain import RELEASE, small_spec

NON_MONOTONE = ["h1 = 0.5", "max_penalties = 2", "penalty = 1000"]


def _spec(folder, lines=(), risk="adversary", **kw):
    path = write_small_problem(folder, **kw)
    text = path.read_text(encoding="utf-8")
    head = f'risk = "{risk}"\n' if risk else ""
    adversary = "\n[adversary]\n" + "\n".join(lines) + "\n" if lines else ""
    path.write_text(head + text + adversary, encoding="utf-8")
    return path


def _run(*args, expect=0):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == expect, (result.stdout, result.stderr, result.exception)
    return result


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    folder = tmp_path_factory.mktemp("adv")
    with Problem.from_spec(_spec(folder, ["gain = 6000", "exploit_cost = 20"], rows=600)) as p:
        FOLDERS[id(p)] = folder
        yield p


FOLDERS: dict[int, Path] = {}  # the problem's folder: the reference reads its raw files


def test_spec_reads_the_adversary_table(tmp_path):
    spec = Spec.read(_spec(tmp_path, ["gain = 5000", 'max_penalties = "unbounded"', "h1 = 0.18",
                                      'scenario = "unknown"', "external_size = 1000"]))
    assert spec.risk == "adversary"
    assert spec.feature("adversary") == AdversaryParams(gain=5000, max_penalties=None, h1=0.18, scenario="unknown",
                                             external_size=1000)


@pytest.mark.parametrize("lines,risk,needle", [
    (["bogus = 1"], "adversary", "'bogus'"),
    (["prior = 0"], "adversary", "prior"),
    (["penalty = -1"], "adversary", "penalty"),
    ([], "sometimes", "risk = 'sometimes'"),
])
def test_spec_errors_name_the_key(tmp_path, lines, risk, needle):
    with pytest.raises(SpecError, match=needle):
        Spec.read(_spec(tmp_path, lines, risk=risk))


def test_population_risk_is_unchanged_by_an_adversary_table(tmp_path):
    plain = write_small_problem(tmp_path / "a")
    with_table = _spec(tmp_path / "b", ["gain = 5000"], risk=None)
    with Problem.from_spec(plain) as a, Problem.from_spec(with_table) as b:
        assert a.evaluate("bottom") == b.evaluate("bottom")


def _raw_groups(folder: Path, recoding) -> tuple[list[tuple[int, int]], int]:
    """(m, g = max(census, m)) per generalized group with sample records, and the population total,
    counted from the raw rows of the problem's source and population files."""
    def group(cell: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(int(q.group_of[v]) for q, v in zip(recoding.qis, cell))

    sample = Counter(group(c) for c in small_problem_cells(pq.read_table(folder / "source.parquet")))
    population = pq.read_table(folder / "population.parquet")
    census: Counter[tuple[int, ...]] = Counter()
    for cell, people in zip(small_problem_cells(population), population["people"].to_pylist()):
        census[group(cell)] += people
    return [(m, max(census[gid], m)) for gid, m in sample.items()], sum(population["people"].to_pylist())


def _reference(problem, policy, folder: Path) -> float:
    """Σ m · P_reid(g) over groups: groups from the raw rows, P_reid from the independent solver of
    ``adversary_reference`` (which solves each group's attack by its own backward induction)."""
    params = problem.spec.feature("adversary")
    groups, total = _raw_groups(folder, problem.policy(policy).recoding())
    if params.scenario == "known":
        return sum(m * reference.known_p_reid(params, g) for m, g in groups)
    return sum(m * reference.unknown_p_reid(params, g, total, params.external_size) for m, g in groups)


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.0, 1.0))
def test_fast_equals_sql_equals_reference(problem, seed, density):
    policy = problem.lattice.random_policy(np.random.default_rng(seed), density)
    fast = problem.evaluate(policy)
    sql = problem.evaluate(policy, path="sql")
    assert fast.risk_sum == pytest.approx(_reference(problem, policy, FOLDERS[id(problem)]), rel=1e-9, abs=1e-12)
    assert sql.risk_sum == pytest.approx(fast.risk_sum, rel=1e-9, abs=1e-12)
    assert sql.max_record_risk == pytest.approx(fast.max_record_risk, rel=1e-9, abs=1e-12)
    assert sql.risk == pytest.approx(fast.risk, rel=1e-9, abs=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_adversary_risk_is_monotone_along_the_lattice(problem, a, b):
    lattice = problem.lattice
    x = lattice.random_policy(np.random.default_rng(a), 0.6)
    y = lattice.meet(x, lattice.random_policy(np.random.default_rng(b), 0.6))  # y ⪯ x: coarser
    assert lattice.leq(y, x) or lattice.leq(x, y)
    low, high = (y, x) if lattice.leq(y, x) else (x, y)
    assert problem.evaluate(low).risk_sum <= problem.evaluate(high).risk_sum + 1e-9


def test_risk_moves_across_the_lattice(problem):
    """The fixture is useful: the data as is is attacked, the top is not."""
    bottom, top = problem.evaluate("bottom"), problem.evaluate("top")
    assert bottom.risk == 1.0 and bottom.risk_sum > 0
    assert top.risk_sum == 0.0 and top.risk == 0.0


def test_chain_evaluator_equals_fast(problem):
    lattice = problem.lattice
    chain = lattice.random_chain(lattice.top(), lattice.bottom(), np.random.default_rng(3))
    chains = ChainEvaluator(lattice, problem.fast.path, problem.fast.normalizers)
    risks, _ = chains.evaluate_chain(chain)
    expected = [problem.fast.evaluate(p).risk for p in chain.policies()]
    assert np.allclose(risks, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.slow
def test_unknown_scenario_through_the_evaluator(tmp_path):
    spec = _spec(tmp_path, ['scenario = "unknown"', "external_size = 3000"])
    with Problem.from_spec(spec) as p:
        fast, sql = p.evaluate("bottom"), p.evaluate("bottom", path="sql")
        assert sql.risk_sum == pytest.approx(fast.risk_sum, rel=1e-9)
        reference_sum = _reference(p, "bottom", tmp_path)
        assert reference_sum > 0  # some groups are attacked: the comparison means something
        assert fast.risk_sum == pytest.approx(reference_sum, rel=1e-9)


@pytest.mark.slow
def test_searches_refuse_non_monotone_parameters(tmp_path):
    spec = _spec(tmp_path, NON_MONOTONE)
    with Problem.from_spec(spec) as p:
        with pytest.raises(DeidError, match="never rises with generalization.*h1=0.5"):
            p.require_monotone_risk("test")
    result = _run("alternatives", spec, "--max-risk", "0.5", "--iterations", "2", expect=2)
    assert "rises from" in result.stderr and "\n" not in result.stderr.strip()
    out = tmp_path / "run"
    result = _run("frontier", spec, "--budget", "50", "--out", out, expect=2)
    assert "rises from" in result.stderr and not out.exists()


@pytest.mark.slow
def test_searches_run_with_the_adversary(tmp_path):
    spec = _spec(tmp_path, [], risk=None)
    _run("alternatives", spec, "--max-risk", "0.5", "--iterations", "3", "--risk-model", "adversary")
    out = tmp_path / "front"
    _run("frontier", spec, "--budget", "60", "--out", out, "--risk-model", "adversary")
    assert (out / "frontier.csv").exists()


def test_evaluate_cli_risk_option(tmp_path):
    import json

    spec = _spec(tmp_path, [], risk=None)
    population = json.loads(_run("evaluate", spec, "--policy", "bottom").stdout)
    adversary = json.loads(_run("evaluate", spec, "--policy", "bottom", "--risk-model", "adversary").stdout)
    with Problem.from_spec(spec, risk="adversary") as p:
        assert adversary["risk_sum"] == pytest.approx(p.evaluate("bottom").risk_sum)
    assert adversary["risk_sum"] != population["risk_sum"]


def test_anonymize_average_adversary_risk(tmp_path):
    """The release meets the average adversary risk: recomputed from the optimum's
    recoding with the evaluator's groups, without its suppressed records."""
    from deid_sql.jobs.anonymize import anonymize, privacy_models

    spec = small_spec(tmp_path, population=True, release=RELEASE)
    out = tmp_path / "release.parquet"
    _run("anonymize", spec, "--max-mean-record-risk", "0.2", "--risk-model", "adversary",
         "--max-suppressed-share", "0.1", "--out", out)
    rows = pq.read_table(out).to_pylist()
    with Problem.from_spec(spec, risk="adversary") as p:
        run = anonymize(p, privacy_models(risk=0.2), suppression=0.1)
        assert run.levels is not None
        m, _, g = p.fast.path.groups(run.space.recoding(run.levels))
        record = p.record_risk(g)
    suppressed = sum(r["deid_suppressed"] for r in rows)
    # the riskiest groups are suppressed first: drop groups in that order until the count matches
    order = np.lexsort((m, g, -record))
    dropped = int(np.searchsorted(np.cumsum(m[order]), suppressed)) + 1 if suppressed else 0
    keep = np.ones(m.size, dtype=bool)
    keep[order[:dropped]] = False
    assert int(m[keep].sum()) == len(rows) - suppressed
    assert float((m[keep] * record[keep]).sum() / m[keep].sum()) <= 0.2 + 1e-12
    assert (record > 0).any()  # the adversary attacks some groups of the optimum's recoding


# -- the adversary command ----------------------------------------------------------------
def test_adversary_command_reports(tmp_path):
    spec = _spec(tmp_path, [], risk=None)
    out = _run("adversary", spec).stdout
    for needle in ("thresholds  k = ", "k′ = ", "at risk (P_reid > 0)",
                   "baseline (eq. 3.7)", "population 1/g", "adversary MDP"):
        assert needle in out


def _dataset_risk(text: str) -> str:
    return next(line for line in text.splitlines() if "adversary MDP" in line)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["known", "unknown"])
def test_adversary_solvers_agree_on_the_release(tmp_path, scenario):
    spec = _spec(tmp_path, [], risk=None, rows=200)
    args = ["adversary", spec, "--policy", "age:cuts=10,20|zip:top", "--scenario", scenario,
            "--external-size", "600"]
    lines = {s: _dataset_risk(_run(*args, "--solver", s).stdout) for s in ("dp", "two-level", "lp")}
    assert len(set(lines.values())) == 1, lines


# Fig. 3.9's fixed values and settings (seed 002 §3.6), written out here rather than imported; the spec
# below gives the same values, around which the command sweeps
SWEEP_BASE = AdversaryParams(access_cost=100.0, link_cost=0.0, exploit_cost=10.0, gain=1000.0, penalty=20000.0,
                             prior=1.0, h0=-4.59, h1=0.0, max_penalties=None)
SWEEP_SETTINGS = {"h1=0, n_f=inf": {"h1": 0.0, "max_penalties": None}, "n_f=1": {"h1": 0.0, "max_penalties": 1},
                  "h1=0.18, n_f=inf": {"h1": 0.18, "max_penalties": None}}
SWEEP_PARAMETERS = {"access_cost", "exploit_cost", "penalty", "detection"}


def test_adversary_sensitivity_outputs(tmp_path):
    spec = _spec(tmp_path, ["gain = 1000", "penalty = 20000", "prior = 1.0", 'max_penalties = "unbounded"'],
                 risk=None)
    csv_path = tmp_path / "sweep.csv"
    _run("adversary", spec, "--sensitivity", csv_path)
    assert csv_path.read_text().startswith("parameter,value,setting,k,k_prime")
    rows = list(csv.DictReader(csv_path.open(encoding="utf-8")))
    assert {r["parameter"] for r in rows} == SWEEP_PARAMETERS and {r["setting"] for r in rows} == set(SWEEP_SETTINGS)
    for r in rows:  # every point equals the independent solver's thresholds
        value = float(r["value"])
        change = {"h0": math.log(value / (1 - value))} if r["parameter"] == "detection" else {r["parameter"]: value}
        t = reference.thresholds(SWEEP_BASE.with_changes(**SWEEP_SETTINGS[r["setting"]], **change))
        assert (int(r["k"]), int(r["k_prime"])) == (t.k, t.k_prime), r
    # Fig. 3.9: raising any deterrent never widens the attacked range, and k ≤ k′
    for (parameter, setting), points in itertools.groupby(rows, key=lambda r: (r["parameter"], r["setting"])):
        points = sorted(points, key=lambda r: float(r["value"]))
        k_primes = [int(r["k_prime"]) for r in points]
        assert k_primes == sorted(k_primes, reverse=True) and k_primes[0] > k_primes[-1], (parameter, setting)
        assert all(int(r["k"]) <= int(r["k_prime"]) for r in points)
    # Finding 2 in the sweep: with h1 = 0 and n_f = ∞ the attack is all or none (k = k′)
    assert all(r["k"] == r["k_prime"] for r in rows if r["setting"] == "h1=0, n_f=inf")
    assert (tmp_path / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = _run("adversary", spec, "--sensitivity", csv_path, expect=2)
    assert "already exists" in result.stderr
    _run("adversary", spec, "--sensitivity", csv_path, "--overwrite")
    result = _run("adversary", spec, "--sensitivity", tmp_path / "sweep.txt", expect=2)
    assert ".csv" in result.stderr


@pytest.mark.parametrize("args,needle", [
    (["--prior", "0"], "prior"),
    (["--gain", "-5"], "gain"),
    (["--max-penalties", "0"], "max_penalties"),
    (["--h1", "-1"], "h1"),
    (["--discount", "1.5"], "discount"),
    (["--external-size", "0"], "external_size"),
    (["--policy", "age:cuts=99"], "age"),
])
def test_adversary_bad_input(tmp_path, args, needle):
    spec = _spec(tmp_path, [], risk=None)
    result = _run("adversary", spec, *args, expect=2)
    assert needle in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_external_dataset_smaller_than_a_group(tmp_path):
    spec = _spec(tmp_path, [], risk=None)
    result = _run("adversary", spec, "--policy", "top", "--external-size", "10", expect=2)
    assert "smaller than a group" in result.stderr and "prior" in result.stderr
    with pytest.raises(DeidError, match="smaller than a group"):
        Problem.from_spec(_spec(tmp_path / "b", ["external_size = 10"]))


def test_solver_failure_names_scenario_and_parameters():
    from deid_sql.adversary.lp import SolverError, solve_program

    params = AdversaryParams(scenario="unknown", gain=1234)
    infeasible = [(np.array([0]), np.array([0]), np.array([1.0]))]  # V ≤ −1 with V ≥ 0
    with pytest.raises(SolverError, match="unknown-group scenario.*G=1234"):
        solve_program(1, infeasible, np.array([-1.0]), params, "test LP")
