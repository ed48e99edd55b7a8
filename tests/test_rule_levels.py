"""A QI without a hierarchy but with allowed cut points gets full-domain levels from them (issue 42).

A spec that says ``cuts = { every = 5 }`` on age or ``zip_digits = [3]`` on a ZIP says the exact
values may not be shown; the full-domain search (``anonymize``) then bands the QI the way a policy
may (5-, 10-, 20-year bands; ZIP5 then ZIP3; months, quarters, years), where it could only keep
or blank it before.  The levels form a chain, the optimum over them equals exhaustive
enumeration, and ``--levels`` names the same recodings.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import Result
from hypothesis import given, settings
from hypothesis import strategies as st

from deid_sql import Problem, plan_of
from deid_sql.domains.cuts import CutRule, rule_ladder
from deid_sql.domains.domain import DateDomain, IntegerDomain, ZipDomain
from deid_sql.fulldomain import KAnonymity, Loss, TransformationSpace, TransformEvaluator
from deid_sql.jobs.anonymize import anonymize
from deid_sql.policies.levels import qi_levels

from .baselines.fulldomain import exhaustive
from .problems import write_small_problem


def ruled_spec(folder: Path, seed: int = 3) -> Path:
    """The small problem (age 0..30, sex, race, ZIP), age cut every 5 and ZIP by 3 digits, no hierarchy."""
    spec = write_small_problem(folder, seed=seed, rows=300)
    text = spec.read_text(encoding="utf-8")
    text = text.replace('name = "age"\nkind = "integer"\nmin = 0\nmax = 30\n',
                        'name = "age"\nkind = "integer"\nmin = 0\nmax = 30\ncuts = { every = 5 }\n')
    text = text.replace('name = "zip"\nkind = "zip"\n', 'name = "zip"\nkind = "zip"\nzip_digits = [3]\n')
    assert text.count("every = 5") == 1 and text.count("zip_digits") == 1
    spec.write_text(text, encoding="utf-8")
    return spec


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 40), st.integers(1, 120), st.integers(1, 10), st.integers(1, 12))
def test_every_n_up_to_top_keeps_top_and_above_one_band(lo: int, span: int, n: int, times: int) -> None:
    """``cuts = { every = n, top = t }``: every level's bands start at multiples of the level's width up to t,
    and at t itself; none past it; a chain down to the cut at t alone."""
    top = n * times
    domain = IntegerDomain(lo, lo + span)
    ladder = rule_ladder(CutRule(every=n, top=top), domain)
    values = np.arange(domain.lo + 1, domain.hi + 1)
    for bits in ladder:
        starts = values[bits]
        assert (starts <= top).all()
        assert (top in starts) == (domain.lo < top <= domain.hi)
    for finer, coarser in zip(ladder, ladder[1:]):
        assert not (coarser & ~finer).any() and coarser.sum() < finer.sum()
    if domain.lo < top <= domain.hi:
        assert list(values[ladder[-1]]) == [top]  # below top, and top and above
    levels = qi_levels(domain, None, CutRule(every=n, top=top))
    assert levels[-1].n_groups == 1 and len(levels) == len(ladder) + 1


def test_a_top_that_is_no_multiple_of_every_is_one_line(tmp_path: Path, run: Callable[..., Result]) -> None:
    spec = ruled_spec(tmp_path)
    spec.write_text(spec.read_text(encoding="utf-8").replace("cuts = { every = 5 }", "cuts = { every = 5, top = 22 }"),
                    encoding="utf-8")
    done = run("validate", str(spec), expect=2)
    assert "top = 22 must be a whole multiple of every = 5" in done.stderr


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 60), st.integers(1, 90), st.integers(1, 12))
def test_every_n_gives_a_chain_of_bands(lo: int, span: int, n: int) -> None:
    domain = IntegerDomain(lo, lo + span)
    ladder = rule_ladder(CutRule(every=n), domain)
    values = np.arange(domain.lo, domain.hi + 1)
    width = n
    for bits in ladder:
        starts = values[1:][bits]
        assert (starts % width == 0).all() and len(starts) == int((values[1:] % width == 0).sum())
        width *= 2
    for finer, coarser in zip(ladder, ladder[1:]):
        assert not (coarser & ~finer).any() and coarser.sum() < finer.sum()  # a chain, each level coarser
    levels = qi_levels(domain, None, CutRule(every=n))
    assert levels[-1].n_groups == 1 and len(levels) == len(ladder) + 1


def test_zip_and_date_rules_give_their_widths_and_units() -> None:
    zips = ZipDomain(("37201", "37203", "37215", "37301", "38101"))
    assert [list(b) for b in rule_ladder(CutRule(zip_digits=(3, 5)), zips)] == [
        [True, True, True, True], [False, False, True, True]]
    import datetime as dt
    days = DateDomain(dt.date(2020, 12, 30), dt.date(2021, 4, 2))
    units = rule_ladder(CutRule(date_units=("month", "year")), days)
    assert [int(b.sum()) for b in units] == [4, 1]  # Jan, Feb, Mar, Apr; 2021
    assert rule_ladder(CutRule(hierarchy=True), days) == [] and rule_ladder(None, days) == []


def test_the_space_bands_and_its_optimum_is_exhaustive(tmp_path: Path) -> None:
    with Problem.from_spec(ruled_spec(tmp_path)) as p:
        space = TransformationSpace(p)
        names = list(space.names)
        age, zip_ = names.index("age"), names.index("zip")
        assert space.heights[age] == 4  # 5-, 10-, 20-year bands, *
        assert space.heights[zip_] == 2  # ZIP3, * (the rule allows no ZIP5)
        assert space.levels[age][0].labels[:2] == ("0-4", "5-9")
        for k in (2, 5):
            models = [KAnonymity(k)]
            best = anonymize(p, models, 0.0).result.optimum
            truth = exhaustive(space, TransformEvaluator(p, models, Loss(), 0.0, space=space))
            assert (best is None) == (truth is None)
            if best is not None and truth is not None:
                assert best.quality == pytest.approx(truth.quality)
        plan = plan_of(p, levels="age:1|zip:1")
        assert plan.recoding.qis[age].labels[:2] == ("0-9", "10-19")


def test_anonymize_releases_age_in_bands(tmp_path: Path, run: Callable[..., Result]) -> None:
    spec = ruled_spec(tmp_path)
    run("anonymize", spec, "--min-k", 3, "--out", "out.parquet")
    ages = set(pq.read_table(tmp_path / "out.parquet").column("age").to_pylist())
    assert ages and all(a is None or "-" in str(a) or a == "*" for a in ages), ages
    record = json.loads((tmp_path / "out.parquet.release.json").read_text(encoding="utf-8"))
    assert record["gate"]["verdict"] == "passed"


def test_a_policy_every_n_ends_its_bands_at_the_specs_top(tmp_path: Path, run: Callable[..., Result]) -> None:
    """Under ``cuts = { every = 5, top = 20 }``, ``age:every=10`` is 10-year bands up to 20 and above, and reads
    back as its cut list; a cut the spec refuses before its top is still refused."""
    spec = ruled_spec(tmp_path)
    spec.write_text(spec.read_text(encoding="utf-8").replace("cuts = { every = 5 }", "cuts = { every = 5, top = 20 }"),
                    encoding="utf-8")
    with Problem.from_spec(spec, cache=False) as problem:
        plan = plan_of(problem, "age:every=10")
        assert list(plan.recoding.qis[0].labels) == ["0-9", "10-19", "20-30"]
        # written back as the cut list: the same bands whatever spec reads the text later
        assert problem.lattice.parse("age:every=10").text().startswith("age:cuts=10,20|")
        again = problem.lattice.parse("age:every=5").text()
        assert again.startswith("age:cuts=5,10,15,20|") and problem.lattice.parse(again).text() == again
    refused = run("evaluate", str(spec), "--policy", "age:every=3", expect=2)
    assert "where the spec allows no cut" in refused.stderr
