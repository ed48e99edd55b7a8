"""Readable policy text on the command line: evaluate's table and JSON, --bits, checkpoints written
with bit strings, the demo's writable policies; and the unconstrained searches unchanged."""

from __future__ import annotations

import csv
import hashlib
import json

import numpy as np
import pytest

from deid_sql import Problem
from deid_sql.evaluate.chain import ChainEvaluator
from deid_sql.search import bisecting_policy_search, directed_policy_search
from deid_sql.search.frontier_search import FrontierState, run
from deid_sql.search.rcs import RandomChainSearch
from deid_sql.search.shs import SublatticeHeuristicSearch


def _digest(items: list[bytes]) -> str:
    return hashlib.sha256(b"".join(items)).hexdigest()[:16]


@pytest.mark.slow
def test_unconstrained_searches_give_the_results_of_the_code_before_cut_points(project):
    """Figures computed by the code before allowed cut points and readable texts existed (commit
    2db985d, same seeds): the policies found, in order, and the frontier areas are bit for bit equal."""
    with Problem.from_spec(project.spec_path) as problem:
        lat = problem.lattice
        assert not lat.constrained
        threshold = problem.evaluate(lat.parse("age:cuts=18,30,45,65,90|zip:top")).risk
        bps = bisecting_policy_search(lat, problem.fast, threshold, 10, seed=3)
        assert (_digest([b.policy.bits for b in bps.found]), bps.evaluations) == ("051c19cd6dec6ccd", 70)
        directed = directed_policy_search(lat, problem.fast, threshold, 10, seed=3)
        assert (_digest([b.policy.bits for b in directed.found]), directed.evaluations) == ("ecfd2c74b0f4ea73", 478)
        expected = {"rcs": ("f2411632e52e831e", 181, 0.21204827999555695),
                    # 190 before the batched chain evaluator: two policies have the same risk and loss under
                    # full evaluation, and the last-bit order of the chain's sums now keeps one of them
                    "shs": ("5f55c919d2f8ae1b", 189, 0.21067468938261688)}
        for searcher in (RandomChainSearch, SublatticeHeuristicSearch):
            state = FrontierState(searcher.method, 300, 5, 0.3)
            chains = ChainEvaluator(lat, problem.fast.path, problem.fast.normalizers)
            run(searcher(lat, problem.fast.fork(), chains, state, np.random.default_rng(5)))
            found = (_digest([lat.parse(p.key).bits for p in state.searched]), len(state.frontier))
            digest, size, area = expected[searcher.method]
            assert found == (digest, size)
            # the area to 1e-12: the chain evaluator batches disjoint steps (issue 21), which changes the
            # order of its float sums in the last bits; the policies searched and the frontier are the same
            assert state.frontier.area() == pytest.approx(area, rel=1e-12, abs=0)


def test_evaluate_prints_json_when_piped_and_a_table_on_request(project, run):
    policy = "age:every=10|zip:digits=3"
    data = json.loads(run("evaluate", project.spec_path, "--policy", policy).stdout)
    assert data["policy"] == "age:every=10|sex:bottom|race:bottom|zip:digits=3" and "bits" not in data
    with Problem.from_spec(project.spec_path) as problem:
        parsed = problem.policy(policy)
        assert problem.policy(data["policy"]) == parsed
    both = json.loads(run("evaluate", project.spec_path, "--policy", policy, "--policy", "top", "--bits").stdout)
    assert both[0]["bits"] == parsed.bit_text() and both[1]["policy"] == "age:top|sex:top|race:top|zip:top"
    table = run("evaluate", project.spec_path, "--policy", policy, "--no-json").stdout
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["#", "risk", "loss"]
    assert lines[1].endswith(data["policy"]) and f"{data['risk']:.6f}" in lines[1]
    assert "zip: [372**], [373**]" in table and "bits" not in table


@pytest.mark.slow
def test_a_checkpoint_with_bit_keys_resumes_under_readable_keys(project, run, tmp_path):
    folder = tmp_path / "run"
    run("frontier", project.spec_path, "--budget", "40", "--seed", "4", "--out", folder)
    path = folder / "checkpoint.json"
    data = json.loads(path.read_text())
    with Problem.from_spec(project.spec_path) as problem:
        old = {k: problem.lattice.parse(k).bit_text() for _, _, k in data["state"]["searched"]}
        for name in ("frontier", "searched"):  # as a run before readable texts wrote it
            data["state"][name] = [[r, u, old[k]] for r, u, k in data["state"][name]]
        data["state"]["pruned"] = [[old.get(a, a), old.get(b, b)] for a, b in data["state"]["pruned"]]
        path.write_text(json.dumps(data))
        run("frontier", project.spec_path, "--budget", "80", "--seed", "4", "--out", folder, "--resume")
        with open(folder / "searched.csv", newline="") as f:
            keys = [row["policy"] for row in csv.DictReader(f)]
        assert len(keys) == 80 and not any(set(k.split("|")[0][4:]) <= {"0", "1"} for k in keys)
        assert len({problem.lattice.parse(k).bits for k in keys}) == 80  # no policy counted twice


@pytest.mark.slow
def test_the_demo_prints_policies_a_user_can_type(run, tmp_path):
    out = run("demo", "--dir", tmp_path / "demo", "--budget", "60").stdout
    text = out.split("policy text: ", 1)[1].split("\n", 1)[0]
    assert len(text) < 200 and "…" not in text  # short, whole, in the policy language (no bit strings)
    assert all(":" in part and set(part.split(":", 1)[1]) - set("01") for part in text.split("|"))
    typed = json.loads(run("evaluate", tmp_path / "demo" / "demo-publishable.toml", "--policy", text,
                           "--json").stdout)
    assert typed["policy"] == text  # typed back, it is the same policy
    view = json.loads((tmp_path / "demo" / "report.json").read_text())["method"]["commands"]["report"]
    assert text in view


@pytest.mark.slow
def test_frontier_writes_the_bit_string_only_on_request(project, run, tmp_path):
    run("frontier", project.spec_path, "--budget", "30", "--out", tmp_path / "plain")
    with open(tmp_path / "plain" / "frontier.csv", newline="") as f:
        assert "bits" not in next(csv.reader(f))
    run("frontier", project.spec_path, "--budget", "30", "--out", tmp_path / "bits", "--bits")
    with Problem.from_spec(project.spec_path) as problem:
        for name in ("frontier.csv", "searched.csv"):
            with open(tmp_path / "bits" / name, newline="") as f:
                rows = list(csv.DictReader(f))
            assert rows and all(problem.policy(r["bits"]) == problem.policy(r["policy"]) for r in rows)
            assert all(set(r["bits"].split("|")[0][4:]) <= {"0", "1"} for r in rows)
