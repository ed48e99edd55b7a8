"""Allowed cut points from the spec: every problem is reported at once, every search returns only
publishable policies, risk stays normalized by the original data, and the commands print the
readable rules (5-year ages, ZIP3) on the demo."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest

from deid_sql import Problem
from deid_sql.errors import SpecError
from deid_sql.evaluate.chain import ChainEvaluator
from deid_sql.search import bisecting_policy_search, directed_policy_search
from deid_sql.search.frontier_search import FrontierState, run
from deid_sql.search.kanon import kanonymity_frontier
from deid_sql.search.rcs import RandomChainSearch
from deid_sql.search.shs import SublatticeHeuristicSearch
from deid_sql.spec.file import Spec
from deid_sql.starter.demo import build_demo

AGE5 = '\n[[qi]]\nname = "age"\nkind = "integer"\nmin = 0\nmax = 120\ncuts = { every = 5 }\n'
SEX = '\n[[qi]]\nname = "sex"\nkind = "category"\nvalues = ["Female", "Male"]\n'
RACE = '\n[[qi]]\nname = "race"\nkind = "category"\nvalues = ["White", "Black", "Asian", "Other"]\n'
ZIP3 = '\n[[qi]]\nname = "zip"\nkind = "zip"\nzip_digits = [3]\n'


def test_every_static_problem_is_one_line(project):
    bad = [
        '\n[[qi]]\nname = "age"\nkind = "integer"\nmin = 0\nmax = 120\ncuts = [18, 200, "x"]\n',
        '\n[[qi]]\nname = "sex"\nkind = "category"\nvalues = ["Female", "Male"]\nzip_digits = [3]\n',
        '\n[[qi]]\nname = "race"\nkind = "category"\nvalues = ["White", "Black"]\ncuts = ["Purple"]\n'
        'date_cuts = ["month"]\n',
        '\n[[qi]]\nname = "zip"\nkind = "zip"\ncuts = { every = 0 }\n',
        '\n[[qi]]\nname = "day"\nkind = "date"\nmin = 2020-01-01\nmax = 2020-12-31\ndate_cuts = ["week"]\n',
        '\n[[qi]]\nname = "n"\nkind = "integer"\nmin = 0\nmax = 9\ncuts = { every = -2 }\n',
        '\n[[qi]]\nname = "m"\nkind = "category"\nvalues = ["a", "b"]\ncuts = "hierarchy"\n',
    ]
    with pytest.raises(SpecError) as e:
        Spec.read(project.spec(qis=bad))
    problems = e.value.problems
    expected = ["cut 200 is outside the domain 0..120", "cut 'x' is not a whole number",
                "zip_digits is for zip QIs, not category", "give one of cuts, date_cuts",
                "cuts = { every = … } is for integer QIs, not zip", "date_cuts = ['week'] must list units",
                "every = -2 must be a whole number > 0", 'cuts = "hierarchy" needs hierarchy']
    for text in expected:
        assert sum(text in p for p in problems) == 1, (text, problems)
    assert len(problems) == len(expected)
    assert all("\n" not in p for p in problems)


def test_data_problems_of_cuts_are_reported_with_the_data(project):
    spec = project.spec(qis=[AGE5, SEX, RACE, '\n[[qi]]\nname = "zip"\nkind = "zip"\ncuts = ["37202", "99999"]\n'])
    with pytest.raises(SpecError, match="cut '99999' is not a value after the first of the domain"):
        Problem.from_spec(spec)
    spec = project.spec(qis=[AGE5.replace("every = 5", "every = 500"), SEX, RACE, ZIP3])
    with pytest.raises(SpecError, match="allows no cut inside the domain"):
        Problem.from_spec(spec)


def _inside(problem: Problem, bits: bytes) -> bool:
    return not np.any(np.frombuffer(bits, dtype=np.bool_) & ~problem.lattice.allowed)


def _cuts_ok(problem: Problem, text: str) -> None:
    """The policy text's age cuts are multiples of 5 and its ZIP groups whole 3-digit prefixes."""
    policy = problem.policy(text)
    assert _inside(problem, policy.bits), text
    zips = problem.domains[problem.lattice.index("zip")]
    zip_bits = policy.qi_bits(problem.lattice.index("zip"))
    for b in np.flatnonzero(zip_bits):
        assert zips.text(int(b))[:3] != zips.text(int(b) + 1)[:3]
    for b in np.flatnonzero(policy.qi_bits(0)):
        assert (int(b) + 1) % 5 == 0


def test_every_search_returns_only_allowed_cuts(project):
    spec = project.spec(qis=[AGE5, SEX, RACE, ZIP3])
    with Problem.from_spec(spec) as problem:
        lat = problem.lattice
        assert lat.constrained and lat.free_bits == 24 + 1 + 3 + 1  # ages 5..120 by 5, sex, race, 372/373
        # normalized by the original data: the finest allowed policy is less risky than the data
        assert problem.evaluate(lat.original()).risk == pytest.approx(1.0)
        assert problem.evaluate(lat.bottom()).risk < 1.0
        threshold = problem.evaluate(lat.parse("age:every=10|zip:top")).risk
        for search in (bisecting_policy_search, directed_policy_search):
            found = search(lat, problem.fast, threshold, 8, seed=2).found
            assert found and all(_inside(problem, b.policy.bits) and _inside(problem, b.witness.bits) for b in found)
            for b in found:
                _cuts_ok(problem, b.policy.text())
        for searcher in (RandomChainSearch, SublatticeHeuristicSearch):
            state = FrontierState(searcher.method, 120, 1, 0.3)
            chains = ChainEvaluator(lat, problem.fast.path, problem.fast.normalizers)
            run(searcher(lat, problem.fast.fork(), chains, state, np.random.default_rng(1)))
            assert state.evaluations >= 50
            for point in state.searched:
                _cuts_ok(problem, point.key)
        kanon = kanonymity_frontier(problem, 2)
        assert kanon.members
        for label, item, _ in kanon.members:
            assert "age:kept" not in label and "zip:4d" not in label
            assert _inside(problem, item.bits)  # every level left is a lattice policy inside the cuts


def test_the_threshold_message_names_the_finest_allowed_policy(project):
    with Problem.from_spec(project.spec(qis=[AGE5, SEX, RACE, ZIP3])) as problem:
        bottom = problem.evaluate(problem.lattice.bottom()).risk
        with pytest.raises(Exception, match="finest policy the spec's allowed cuts permit"):
            bisecting_policy_search(problem.lattice, problem.fast, (bottom + 1) / 2, 1)


@pytest.fixture(scope="module")
def demo_cuts(tmp_path_factory) -> Path:
    """The demo with 5-year ages and ZIP3 as the only allowed cuts."""
    folder = tmp_path_factory.mktemp("demo-cuts")
    spec = build_demo(folder, 0)
    text = spec.read_text(encoding="utf-8")
    text = text.replace('role = "age"\n', 'role = "age"\ncuts = { every = 5 }\n')
    text = text.replace('role = "zip"\n', 'role = "zip"\nzip_digits = [3]\n')
    assert "every = 5" in text and "zip_digits" in text
    spec.write_text(text, encoding="utf-8")
    return spec


AGE_RULE = re.compile(r"^(top|every=(5|10|15|20|25|30|40|60)|cuts=\d+(,\d+)*)$")
ZIP_RULE = re.compile(r"^(top|digits=3|cuts=\d{5}(,\d{5})*)$")


def _readable_rules(text: str) -> dict[str, str]:
    return dict(part.split(":", 1) for part in text.split("|"))


def _check_rules(problem: Problem, text: str) -> None:
    rules = _readable_rules(text)
    assert AGE_RULE.match(rules["age"]) and ZIP_RULE.match(rules["zip"]), text
    if rules["age"].startswith("cuts="):
        assert all(int(v) % 5 == 0 for v in rules["age"][5:].split(","))
    if rules["zip"].startswith("cuts="):  # each cut is the first ZIP of a 3-digit prefix
        zips = problem.domains[problem.lattice.index("zip")]
        for v in rules["zip"][5:].split(","):
            pos = zips.position(v)
            assert pos and zips.text(pos - 1)[:3] != v[:3]


@pytest.mark.slow
def test_alternatives_and_frontier_print_only_publishable_bands(demo_cuts, run, tmp_path):
    out = tmp_path / "alt.json"
    run("alternatives", demo_cuts, "--max-risk", "0.002", "--iterations", "6", "--seed", "1", "--out", out)
    policies = json.loads(out.read_text())["policies"]
    assert policies and all("bits" not in row for row in policies)
    with_bits = tmp_path / "alt.csv"
    run("alternatives", demo_cuts, "--max-risk", "0.002", "--iterations", "6", "--seed", "1", "--out", with_bits,
        "--bits")
    with open(with_bits, newline="") as f:
        bit_rows = list(csv.DictReader(f))
    assert [row["policy"] for row in bit_rows] == [row["policy"] for row in policies]
    folder = tmp_path / "frontier"
    run("frontier", demo_cuts, "--budget", "150", "--seed", "2", "--out", folder)
    with open(folder / "frontier.csv", newline="") as f:
        frontier = list(csv.DictReader(f))
    assert len(frontier) > 3
    with Problem.from_spec(demo_cuts) as problem:
        for row in bit_rows:  # the bit string is the same lattice node as the readable text
            assert problem.lattice.parse(row["bits"]) == problem.policy(row["policy"])
        for row in policies + frontier:
            _check_rules(problem, row["policy"])
            for group in re.findall(r"age: ([^;]*)", row["readable"]):
                for lo in re.findall(r"\[(\d+)-", group):
                    assert int(lo) % 5 == 0, row["readable"]


def test_hierarchy_cuts_follow_level_one(project):
    (project.dir / "race.csv").write_text("White;W;*\nBlack;NW;*\nAsian;NW;*\nOther;NW;*\n", encoding="utf-8")
    race = RACE + 'hierarchy = "race.csv"\ncuts = "hierarchy"\n'
    with Problem.from_spec(project.spec(qis=[AGE5, SEX, race, ZIP3])) as problem:
        i = problem.lattice.index("race")
        assert problem.lattice.qi_allowed(i).tolist() == [True, False, False]
        assert problem.policy("race:level=1") == problem.policy("race:bottom")
    # a level that splits the declared order: the domain takes the hierarchy's order (tests/test_hierarchy_order.py)
    (project.dir / "race.csv").write_text("White;W;*\nBlack;NW;*\nAsian;W;*\nOther;NW;*\n", encoding="utf-8")
    with Problem.from_spec(project.spec(qis=[AGE5, SEX, race, ZIP3])) as problem:
        i = problem.lattice.index("race")
        assert problem.domains[i].values == ("White", "Asian", "Black", "Other")
        assert problem.lattice.qi_allowed(i).tolist() == [False, True, False]


def test_named_boundary_sets():
    import datetime as dt

    from deid_sql.domains.cuts import CutRule, allowed_mask
    from deid_sql.domains.domain import DateDomain, IntegerDomain, ZipDomain

    problems: list[str] = []
    days = DateDomain(dt.date(2020, 12, 30), dt.date(2021, 4, 2))
    quarters = allowed_mask(CutRule(date_units=("quarter",)), days, None, "q", problems)
    assert [days.text(int(b) + 1) for b in np.flatnonzero(quarters)] == ["2021-01-01", "2021-04-01"]
    listed = allowed_mask(CutRule(values=(dt.date(2021, 2, 14),)), days, None, "d", problems)
    assert [days.text(int(b) + 1) for b in np.flatnonzero(listed)] == ["2021-02-14"]
    ages = allowed_mask(CutRule(every=10), IntegerDomain(17, 41), None, "a", problems)
    assert [17 + int(b) + 1 for b in np.flatnonzero(ages)] == [20, 30, 40]
    zips = ZipDomain(("37002", "37099", "37105", "37205", "38001"))
    z = allowed_mask(CutRule(zip_digits=(2, 3)), zips, None, "z", problems)
    assert z.tolist() == [False, True, True, True] and not problems


@pytest.mark.slow
def test_publishable_policies_are_viewed_and_saved_through_the_gate(project, run):
    import duckdb

    spec = project.spec(qis=[AGE5, SEX, RACE, ZIP3])
    policy = "age:every=10|race:top|zip:digits=3"
    evaluated = json.loads(run("evaluate", spec, "--policy", policy).stdout)
    assert evaluated["policy"] == "age:every=10|sex:bottom|race:top|zip:digits=3"
    db = project.dir / "analysts.duckdb"
    run("view", spec, "--policy", policy, "--db", db, "--view", "published")
    con = duckdb.connect(str(db), read_only=True)
    try:
        ages, zips = zip(*con.execute("SELECT age, zip FROM published").fetchall())
        sidecar = json.loads(con.execute("SELECT sidecar FROM published__release").fetchone()[0])
    finally:
        con.close()
    assert set(zips) == {"372**", "373**"} and "20-29" in ages and "120" in ages
    assert sidecar["policy"]["text"] == evaluated["policy"]
    assert sidecar["figures"]["risk"] == pytest.approx(evaluated["risk"], rel=1e-12)  # the original data's norm
    out = project.dir / "published.json"
    run("policy", "save", spec, "-p", policy, "--out", out)
    saved = json.loads(out.read_text())
    assert saved["policy"] == evaluated["policy"] and saved["release"]["figures"]["risk"] == pytest.approx(
        evaluated["risk"], rel=1e-12)
    run("apply", out, "--source", project.source_csv, "--out", project.dir / "again.csv")  # the file reads back


@pytest.mark.slow
def test_searches_on_random_constraints_return_only_allowed_cuts(project):
    """Any allowed set (drawn by hypothesis): BPS, Directed, RCS and SHS return only its policies."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from deid_sql import Lattice

    with Problem.from_spec(project.spec_path) as problem:
        full = problem.lattice
        sizes = [d.size - 1 for d in full.domains]
        threshold = problem.evaluate(full.parse("age:cuts=18,30,45,65,90|zip:top")).risk

        @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
        @given(st.tuples(*(st.lists(st.booleans(), min_size=n, max_size=n) for n in sizes)), st.integers(0, 99))
        def check(parts, seed):
            mask = {n: np.array(p, dtype=bool) for n, p in zip(full.names, parts)}
            lat = Lattice(full.names, full.domains, allowed=mask)
            if lat.free_bits < 2 or problem.evaluate(lat.bottom()).risk <= threshold:
                return  # no boundary policy below the finest allowed one
            ran.append(seed)
            for search in (bisecting_policy_search, directed_policy_search):
                for b in search(lat, problem.fast, threshold, 3, seed=seed).found:
                    assert _inside_lattice(lat, b.policy.bits) and _inside_lattice(lat, b.witness.bits)
            for searcher in (RandomChainSearch, SublatticeHeuristicSearch):
                state = FrontierState(searcher.method, 60, seed, 0.3)
                chains = ChainEvaluator(lat, problem.fast.path, problem.fast.normalizers)
                run(searcher(lat, problem.fast.fork(), chains, state, np.random.default_rng(seed)))
                assert all(_inside_lattice(lat, lat.parse(p.key).bits) for p in state.searched)
                assert all(lat.parse(p.key).text() == p.key for p in state.searched)

        ran: list[int] = []
        check()
        assert len(ran) >= 3  # most drawn sets leave boundary policies to search for


def _inside_lattice(lattice, bits: bytes) -> bool:
    return not np.any(np.frombuffer(bits, dtype=np.bool_) & ~lattice.allowed)
