"""``alternatives`` and ``frontier`` keep to the attribute criteria of ``[release]`` (issue 40, METHODS
decision 15).  The searches judge a policy on cells (``release.constraint.AttributeConstraint``); these
tests hold that judgement to the gate's on the rows of the policy's release (single table, ``[person]``
with several values per person, a set with the diagnoses in a linked table), check that feasibility is
monotone along random chains (hypothesis), that every policy ``alternatives`` returns passes the gate,
and that the frontier of a tiny lattice is the frontier of its feasible policies found exhaustively."""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deid_sql import Problem
from deid_sql.contract.attribute import AttributeLimits
from deid_sql.release.constraint import AttributeConstraint
from deid_sql.release.gate import ReleaseSource, build_gate
from deid_sql.release.plan import plan_of
from deid_sql.search.frontier import Frontier, Point
from tests.test_attribute_gate import write_problem
from tests.test_attribute_persons import write as write_encounters
from tests.test_attribute_sets import write_set
from tests.test_linked import KEY

EVERY = ('max_confidence = 0.8\nmin_l = 2\nmin_entropy_l = 1.5\nrecursive_cl = [3, 2]\nmax_t = 0.5\n'
         't_distance = "equal"')
FIGURES = ("groups", "max_confidence", "min_distinct_l", "min_entropy_l", "max_t", "max_presence")


def gate_figures(problem: Problem, policy: Any) -> tuple[Any, ...]:
    """The gate's attribute figures on the rows of ``policy``'s release (what the release is judged by)."""
    plan = plan_of(problem, policy)
    gate = build_gate(ReleaseSource.from_problem(problem), plan, "test", whole_set=bool(problem.spec.tables))
    relation = problem.query(plan, measuring=True) if not problem.spec.tables else problem.query(plan)
    return gate.measure(problem.backend.execute, relation).attribute


def assert_same(mine: tuple[Any, ...], theirs: tuple[Any, ...]) -> None:
    assert [a.column for a in mine] == [a.column for a in theirs]
    for a, b in zip(mine, theirs):
        for name in FIGURES:
            x, y = getattr(a, name), getattr(b, name)
            assert (x is None and y is None) or x == pytest.approx(y, rel=1e-9, abs=1e-12), (a.column, name)
        # the same verdicts on the same worst figures (among groups tied at the worst, the gate names the
        # first by its labels' text, the cells the first by its positions: the group named may differ)
        assert [(c.key, c.passed) for c in a.checks] == [(c.key, c.passed) for c in b.checks]
        assert [c.value for c in a.checks] == pytest.approx([c.value for c in b.checks], rel=1e-9, abs=1e-12)


def random_policies(problem: Problem, count: int, seed: int = 0) -> list[Any]:
    rng = np.random.default_rng(seed)
    lattice = problem.lattice
    return [lattice.top(), lattice.bottom()] + [lattice.policy(rng.integers(0, 2, lattice.nbits) & lattice.allowed)
                                                for _ in range(count)]


# -- the cells judge as the gate does -----------------------------------------------------------------
def test_cells_judge_every_criterion_as_the_gate_does(tmp_path: Path) -> None:
    spec = write_problem(tmp_path, EVERY)
    with Problem.from_spec(spec, cache=False) as problem:
        constraint = AttributeConstraint.of(problem)
        assert constraint is not None
        for policy in random_policies(problem, 12):
            assert_same(constraint.figures(policy), gate_figures(problem, policy))


def test_cells_judge_ordered_and_hierarchical_t_and_ignored_values_as_the_gate_does(tmp_path: Path) -> None:
    (tmp_path / "dx.csv").write_text("I10;circulatory;*\nE11;metabolic;*\nJ45;respiratory;*\nK21;digestive;*\n"
                                     "B20;infectious;*\n", encoding="utf-8")
    spec = write_problem(tmp_path, 'max_t = 0.6\nt_distance = "hierarchical"\nmin_l = 2\n'
                                   '[release.sensitive.diagnosis]\nhierarchy = "dx.csv"\nignore_values = ["K21"]')
    with Problem.from_spec(spec, cache=False) as problem:
        constraint = AttributeConstraint.of(problem)
        assert constraint is not None
        for policy in random_policies(problem, 8, seed=1):
            assert_same(constraint.figures(policy), gate_figures(problem, policy))
    spec.write_text(spec.read_text().replace('t_distance = "hierarchical"', 't_distance = "ordered"')
                    .replace('hierarchy = "dx.csv"', 'order = ["I10", "E11", "J45", "K21", "B20"]'))
    with Problem.from_spec(spec, cache=False) as problem:
        constraint = AttributeConstraint.of(problem)
        assert constraint is not None
        for policy in random_policies(problem, 8, seed=2):
            assert_same(constraint.figures(policy), gate_figures(problem, policy))


def test_cells_count_persons_as_the_gate_does(tmp_path: Path) -> None:
    """[person]: a person holding several values on several rows counts once under each."""
    rng = random.Random(4)
    sexes = [rng.choice("FM") for _ in range(60)]
    rows = [{"pid": f"P{p:02d}", "age": rng.randrange(100), "sex": sexes[p], "seen": s,
             "dx": rng.choice(["A", "B", "C", None])} for p in range(60) for s in range(rng.randrange(1, 4))]
    spec = write_encounters(tmp_path, rows)
    with Problem.from_spec(spec, cache=False) as problem:
        constraint = AttributeConstraint.of(problem)
        assert constraint is not None and constraint.unit.persons
        for policy in random_policies(problem, 8, seed=3):
            assert_same(constraint.figures(policy), gate_figures(problem, policy))


def test_cells_count_a_linked_tables_values_as_the_gate_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEID_LINK_KEY", KEY)
    spec = write_set(tmp_path, "max_confidence = 0.8\nmin_l = 2")
    with Problem.from_spec(spec, cache=False) as problem:
        constraint = AttributeConstraint.of(problem)
        assert constraint is not None
        for policy in random_policies(problem, 6, seed=5):
            assert_same(constraint.figures(policy), gate_figures(problem, policy))


# -- monotone along chains --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def b20(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Problem]:
    spec = write_problem(tmp_path_factory.mktemp("b20"), EVERY)
    with Problem.from_spec(spec, cache=False) as problem:
        yield problem


LIMITS = st.fixed_dictionaries({}, optional={
    "min_l": st.integers(1, 5), "min_entropy_l": st.floats(1, 5), "max_confidence": st.floats(0.2, 1),
    "recursive_cl": st.tuples(st.floats(0.5, 4), st.integers(1, 4)), "max_t": st.floats(0.05, 1)})


@settings(max_examples=40, deadline=None)
@given(limits=LIMITS, seed=st.integers(0, 2**32 - 1), distance=st.sampled_from(["equal", "ordered"]))
def test_feasibility_is_monotone_along_random_chains(b20: Problem, limits: dict[str, Any], seed: int,
                                                     distance: str) -> None:
    """From the top (everything generalized) to the bottom a chain's policies are feasible, then not:
    a coarser policy never fails where a finer one passes; the bisection finds that cut."""
    lim = replace(AttributeLimits("diagnosis"), **limits,
                  **({"t_distance": distance, "order": ("I10", "E11", "J45", "K21", "B20")}
                     if "max_t" in limits else {}))
    constraint = AttributeConstraint(b20, {"diagnosis": lim})
    lattice = b20.lattice
    chain = lattice.random_chain(lattice.top(), lattice.bottom(), np.random.default_rng(seed))
    verdicts = [constraint.feasible(p) for p in chain.policies()]
    cut = verdicts.index(False) if False in verdicts else len(verdicts)
    assert verdicts == [True] * cut + [False] * (len(verdicts) - cut), verdicts
    assert constraint.feasible_prefix(chain)[0] == cut


# -- alternatives ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["bps", "directed"])
def test_every_policy_alternatives_returns_passes_the_gate(tmp_path: Path, run, method: str) -> None:
    spec = write_problem(tmp_path, 'max_confidence = 0.8\nmin_l = 2\nmax_t = 0.5\nt_distance = "equal"')
    out = tmp_path / "alt.json"
    result = run("alternatives", spec, "--max-risk", "0.5", "-n", "6", "--method", method, "--out", out)
    assert "met by every policy found: diagnosis: min_l 2, max_t 0.5, max_confidence 0.8" in result.stdout
    found = json.loads(out.read_text(encoding="utf-8"))
    assert found["attribute_criteria"] and found["policies"]
    with Problem.from_spec(spec, cache=False) as problem:
        unconstrained = False
        for row in found["policies"]:
            policy = problem.lattice.parse(row["policy"])
            assert problem.evaluate(policy).risk <= 0.5
            figures = gate_figures(problem, policy)
            assert all(c.passed for a in figures for c in a.checks), (row["policy"], figures)
        # the constraint binds: without it the search returns policies the gate refuses
        from deid_sql.search import bisecting_policy_search
        free = bisecting_policy_search(problem.lattice, problem.fast, 0.5, 6, 0)
        for b in free.found:
            unconstrained |= not all(c.passed for a in gate_figures(problem, b.policy) for c in a.checks)
        assert unconstrained


def test_alternatives_refuses_when_the_top_fails_the_criteria(tmp_path: Path, run) -> None:
    spec = write_problem(tmp_path, "min_l = 6")  # five values in all: no group can hold six
    result = run("alternatives", spec, "--max-risk", "0.5", expect=2)
    assert "the most general policy fails the attribute criteria of [release]" in result.stderr
    assert "holds 5 distinct values (ℓ 5 < min_l 6)" in result.stderr


# -- the frontier of a tiny lattice, against every policy --------------------------------------------------
def tiny(folder: Path) -> Path:
    """Ages 20-27 and clinics C0-C3 (7 + 3 boundaries: 1,024 policies), 160 persons, four diagnoses with
    B20 crowded in the young at C0."""
    rng = random.Random(9)
    rows = []
    for i in range(160):
        age, clinic = rng.randrange(20, 28), rng.choice(["C0", "C1", "C2", "C3"])
        dx = "B20" if age < 23 and clinic == "C0" and rng.random() < 0.8 else rng.choice(["I10", "E11", "J45", "B20"])
        rows.append({"pid": i, "age": age, "clinic": clinic, "diagnosis": dx})
    pq.write_table(pa.Table.from_pylist(rows), folder / "tiny.parquet")
    spec = folder / "tiny.toml"
    spec.write_text('population = "sample"\n[source]\npath = "tiny.parquet"\n'
                    '[[qi]]\nname = "age"\nkind = "integer"\nmin = 20\nmax = 27\n'
                    '[[qi]]\nname = "clinic"\nkind = "category"\nvalues = ["C0", "C1", "C2", "C3"]\n'
                    '[columns]\ndrop = ["pid"]\nsensitive = ["diagnosis"]\n'
                    '[release]\nmax_confidence = 0.6\nmin_l = 3\n', encoding="utf-8")
    return spec


def exhaustive(spec: Path) -> tuple[dict[str, Point], set[str]]:
    """Every policy's point and the set of those that meet the criteria (each judged by the gate's figures
    on cells, and a sample of them on the rows)."""
    with Problem.from_spec(spec, cache=False) as problem:
        constraint = AttributeConstraint.of(problem)
        assert constraint is not None
        lattice = problem.lattice
        points, feasible = {}, set()
        for n in range(2 ** lattice.nbits):
            policy = lattice.policy(np.array([(n >> b) & 1 for b in range(lattice.nbits)], dtype=np.uint8))
            m = problem.evaluate(policy)
            points[policy.text()] = Point(m.risk, m.loss, policy.text())
            if constraint.feasible(policy):
                feasible.add(policy.text())
            if n % 97 == 0:
                assert_same(constraint.figures(policy), gate_figures(problem, policy))
    return points, feasible


@pytest.mark.parametrize("method", ["rcs", "shs"])
def test_the_frontier_holds_only_feasible_policies_and_all_the_best(tmp_path: Path, run, method: str) -> None:
    spec = tiny(tmp_path)
    points, feasible = exhaustive(spec)
    assert 0 < len(feasible) < len(points)
    best = Frontier()
    for key in sorted(feasible):
        best.update(points[key])
    out = tmp_path / "run"
    result = run("frontier", spec, "--method", method, "--budget", 1024, "--out", out)
    with (out / "searched.csv").open(newline="", encoding="utf-8") as f:
        searched = list(csv.DictReader(f))
    with (out / "frontier.csv").open(newline="", encoding="utf-8") as f:
        frontier = {row["policy"] for row in csv.DictReader(f)}
    verdict = {row["policy"]: row["meets_criteria"] == "True" for row in searched}
    assert all(verdict[k] == (k in feasible) for k in verdict)  # every searched policy judged right
    failing = sum(1 for ok in verdict.values() if not ok)
    assert failing and f"{failing:,} of {len(searched):,} searched policies fail them" in result.stdout
    assert frontier <= feasible
    # the frontier is that of the feasible policies searched (subset-dominance: none better, none missing)
    mine = Frontier()
    for key in verdict:
        if verdict[key]:
            mine.update(points[key])
    assert frontier == {p.key for p in mine}
    if len(verdict) == len(points):  # the whole lattice searched: the exhaustive frontier
        assert frontier == {p.key for p in best}
    else:
        assert all(not best.dominated(points[k]) or k not in frontier for k in frontier)
    page = (out / "frontier.html").read_text(encoding="utf-8")
    assert "searched policies failing them (never on the frontier)" in page and f"{failing:,}" in page
