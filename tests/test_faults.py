"""Faults found in review (issue 20): zero normalizers, chain-end drift and repeated policies on
a frontier, unknown evaluation paths, the exit code of an unexpected exception, and two
misleading report lines (the channels' MILP route, the adversary's exploits past k′)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deid_sql import Problem
from deid_sql.adversary.params import AdversaryParams
from deid_sql.adversary.risk import thresholds
from deid_sql.channels.assignment import Repairs
from deid_sql.cli import options
from deid_sql.errors import DeidError, PolicyError
from deid_sql.evaluate.chain import ChainEvaluator
from deid_sql.evaluate.metrics import Normalizers, RawSums, finish
from deid_sql.fixtures.channels import write_table1
from deid_sql.search import FrontierState, RandomChainSearch, SublatticeHeuristicSearch
from deid_sql.search.frontier_search import run as run_search

from .problems import write_small_problem


def _adversary_spec(folder: Path, lines: list[str]) -> Path:
    path = write_small_problem(folder, rows=300)
    text = path.read_text(encoding="utf-8")
    path.write_text('risk = "adversary"\n' + text + "\n[adversary]\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return path


# -- 1. one normalization: a zero normalizer gives 0, on every path ------------------------------------------

@pytest.mark.slow
def test_frontier_rcs_with_an_adversary_who_never_attacks(tmp_path, run):
    spec = _adversary_spec(tmp_path / "never", ["gain = 0"])  # nothing to gain: no record is ever at risk
    out = tmp_path / "out"
    result = run("frontier", spec, "--method", "rcs", "--budget", 60, "--seed", 2, "--out", out)
    assert "60 policies evaluated" in result.stdout and "error" not in result.stderr
    rows = list(csv.DictReader((out / "searched.csv").open(encoding="utf-8")))
    assert len(rows) == 60
    for row in rows:
        assert float(row["risk"]) == 0.0 and 0.0 <= float(row["loss"]) <= 1.0
    frontier = list(csv.DictReader((out / "frontier.csv").open(encoding="utf-8")))
    assert [(float(r["risk"]), float(r["loss"])) for r in frontier] == [(0.0, 0.0)]  # the bottom: no risk, no loss


def test_chain_evaluator_and_finish_share_the_zero_guard(tmp_path):
    with Problem.from_spec(_adversary_spec(tmp_path, ["gain = 0"])) as p:
        assert p.fast.normalizers.bottom_risk_sum == 0
        chains = ChainEvaluator(p.lattice, p.fast.path, p.fast.normalizers)
        chain = p.lattice.random_chain(p.lattice.top(), p.lattice.bottom(), np.random.default_rng(0))
        risks, losses = chains.evaluate_chain(chain)
        assert (risks == 0).all() and np.isfinite(losses).all()
    raw = RawSums(0.0, 0.0, 0.0, 1, 0, 1, 0.0, 0.0, 1.0, 0, 1)
    m = finish(raw, Normalizers(records=1, cells_xlogx=0.0, n_qis=1, bottom_risk_sum=0.0, top_kl=0.0))
    assert (m.risk, m.loss) == (0.0, 0.0)


# -- 2. exact chain ends; a policy evaluated once ------------------------------------------------------------

@pytest.fixture(scope="module")
def small(tmp_path_factory):
    with Problem.from_spec(write_small_problem(tmp_path_factory.mktemp("small"), seed=2)) as p:
        yield p


def test_chain_ends_are_the_exact_figures(small):
    """The top-to-bottom chain's last policy is the bottom at exactly (1, 0), as ``evaluate`` gives it."""
    chains = ChainEvaluator(small.lattice, small.fast.path, small.fast.normalizers)
    for seed in range(5):
        chain = small.lattice.random_chain(small.lattice.top(), small.lattice.bottom(), np.random.default_rng(seed))
        risks, losses = chains.evaluate_chain(chain)
        top, bottom = small.evaluate("top"), small.evaluate("bottom")
        assert (risks[0], losses[0]) == (top.risk, top.loss)
        assert (risks[-1], losses[-1]) == (bottom.risk, bottom.loss) == (1.0, 0.0)


def _search(problem, cls, budget, seed):
    state = FrontierState(cls.method, budget, seed, 0.1)
    chains = ChainEvaluator(problem.lattice, problem.fast.path, problem.fast.normalizers)
    return run_search(cls(problem.lattice, problem.fast, chains, state, np.random.default_rng(seed)))


@pytest.mark.slow
@pytest.mark.parametrize("cls", [RandomChainSearch, SublatticeHeuristicSearch])
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**16))
def test_no_policy_is_evaluated_twice_nor_twice_on_the_frontier(small, cls, seed):
    state = _search(small, cls, 500, seed)
    keys = [p.key for p in state.searched]
    assert len(keys) == len(set(keys)) == state.evaluations == 500  # a repeat costs no budget
    on_frontier = [p.key for p in state.frontier]
    assert len(on_frontier) == len(set(on_frontier))
    bottom = small.lattice.bottom().text()
    assert [(p.risk, p.loss) for p in state.frontier if p.key == bottom] == [(1.0, 0.0)]


@pytest.mark.slow
def test_an_exhausted_lattice_ends_the_search(tmp_path):
    """With repeats free, a budget larger than the lattice must still end (here 2^6 policies)."""
    spec = write_small_problem(tmp_path, seed=3, max_age=3, rows=120)
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text[: text.index('[[qi]]\nname = "zip"')], encoding="utf-8")
    with Problem.from_spec(spec) as p:
        size = 2 ** p.lattice.nbits
        for cls in (RandomChainSearch, SublatticeHeuristicSearch):
            state = _search(p, cls, 10 * size, 0)
            assert state.evaluations <= size and state.done
            assert len({q.key for q in state.searched}) == state.evaluations


# -- 3. unknown evaluation paths ----------------------------------------------------------------------------

def test_unknown_evaluation_path_is_an_error(small):
    for path in ("SQL", "cells", ""):
        with pytest.raises(DeidError, match="unknown evaluation path .*'fast'.*'sql'") as err:
            small.evaluate("bottom", path=path)
        assert "\n" not in str(err.value)
        with pytest.raises(DeidError, match="unknown evaluation path"):
            small.evaluate_many(["bottom", "top"], path=path)
    assert small.evaluate("bottom", path="fast") == small.evaluate_many(["bottom"])[0]


# -- 4. exit codes ------------------------------------------------------------------------------------------

def _boom(*args, **kwargs):
    raise RuntimeError("something broke\nacross two lines")


def test_unexpected_exception_exits_3_with_one_line(project, run, monkeypatch):
    monkeypatch.setattr(Problem, "evaluate", _boom)
    monkeypatch.delenv("DEID_SQL_TRACEBACK", raising=False)
    result = run("evaluate", project.spec_path, "--policy", "top", expect=3)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: internal error: RuntimeError: something broke across two lines")
    assert "DEID_SQL_TRACEBACK=1" in lines[0] and "report" in lines[0] and "Traceback" not in result.output
    monkeypatch.setenv("DEID_SQL_TRACEBACK", "1")
    traced = run("evaluate", project.spec_path, "--policy", "top", expect=3)
    assert "Traceback (most recent call last)" in traced.stderr and "_boom" in traced.stderr
    assert traced.stderr.splitlines()[-1] == lines[0]


def test_commands_without_the_decorator_are_covered(project, run, monkeypatch):
    """The root group is the boundary too: a bug outside ``handles_errors`` still exits 3."""
    from deid_sql.cli.main import cli

    @cli.command(name="explode-for-test")
    def explode() -> None:
        raise ValueError("no decorator here")

    try:
        result = run("explode-for-test", expect=3)
        assert result.stderr.startswith("error: internal error: ValueError: no decorator here")
        assert len(result.stderr.splitlines()) == 1
    finally:
        cli.commands.pop("explode-for-test")


def test_interrupt_exits_130_and_deid_errors_keep_their_code(project, run, monkeypatch):
    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Problem, "evaluate", interrupt)
    assert run("evaluate", project.spec_path, "--policy", "top", expect=130).stderr == "error: interrupted\n"
    monkeypatch.setattr(Problem, "evaluate", _raises(SystemExit(143)))
    run("evaluate", project.spec_path, "--policy", "top", expect=143)  # SIGTERM's exit passes untouched
    monkeypatch.setattr(Problem, "evaluate", _raises(PolicyError("policy x does not fit")))
    assert run("evaluate", project.spec_path, "--policy", "top", expect=2).stderr == "error: policy x does not fit\n"


def _raises(error):
    def raiser(*args, **kwargs):
        raise error

    return raiser


def test_help_lists_the_exit_codes(run):
    text = run("--help").stdout
    for line in ("0    success", "1    'check' found drift", "2    bad input", "3    internal error",
                 "130  interrupted"):
        assert line in text, line
    assert "DEID_SQL_TRACEBACK=1" in text
    assert options.INTERNAL_ERROR == 3


# -- 5. the channels' MILP route does no rounding ----------------------------------------------------------

@pytest.mark.slow
def test_milp_route_does_not_claim_a_rounding(run, tmp_path):
    milp = run("channels", write_table1(tmp_path / "milp"))
    assert "release (MILP, proven optimal)" in milp.stdout
    assert "whole subjects from the MILP; no rounding" in milp.stdout and "rounding kept" not in milp.stdout
    lp = run("channels", write_table1(tmp_path / "lp", extra='integer = "never"'))
    assert "LP rounded by largest remainder" in lp.stdout and "from the MILP" not in lp.stdout
    assert "rounding kept (7) and (9)" in lp.stdout or "after rounding" in lp.stdout
    assert Repairs(rounded=True).describe() == "rounding kept (7) and (9); no repair"


# -- 6. the exploits past k′ assume the external data is bought --------------------------------------------

@pytest.mark.slow
def test_exploits_past_k_prime_say_the_data_is_already_bought(tmp_path, run):
    spec = _adversary_spec(tmp_path, ["gain = 8000"])
    t = thresholds(AdversaryParams())
    assert t.k_prime < t.k_prime_sunk  # the defaults plan exploits for sizes only a holder of D_e attacks
    for flags in ((), ("--access-cost", "1000")):
        t = thresholds(AdversaryParams(access_cost=1000.0) if flags else AdversaryParams())
        line = next(x for x in run("adversary", spec, *flags).stdout.splitlines() if x.startswith("exploits"))
        head, _, tail = line.partition(f"at k′ = {t.k_prime} and above, assuming the external data is already bought: ")
        assert tail, line
        sizes = [int(pair.split(":")[0]) for pair in tail.split(", ")]
        assert sizes == list(range(max(t.k, t.k_prime), t.k_prime_sunk))
        before = head.split(": ", 1)[1].rstrip("; ")
        assert all(int(pair.split(":")[0]) < t.k_prime for pair in before.split(", ") if pair)
