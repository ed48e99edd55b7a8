"""Persons, not rows (issue 29): with ``[person]`` every figure counts persons.

The figures of a multi-row table equal a pure-Python reference that reduces the rows to one
tuple per person by the same rules; a table with one row per person gives the same figures with
and without ``[person]``; the bad inputs are one line each.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deid_sql import Problem
from deid_sql.cli import cli
from deid_sql.errors import DataError, SpecError
from deid_sql.release.plan import plan_of
from tests.engines import ENGINES, Engine, engine_fixture, engine_params, sorted_rows

QIS = '''
[[qi]]
name = "age"
kind = "integer"
min = 0
max = 99
{age_rule}
[[qi]]
name = "sex"
kind = "category"
values = ["F", "M"]
{visits}
[columns]
drop = ["patient_id", "seen", "dx"]
[release]
min_k = 2
'''
VISITS = '''[[qi]]
name = "visits"
kind = "integer"
derived = "rows"
min = 1
max = 20
'''


def write(folder: Path, rows: list[dict[str, Any]], person: str | None = '[person]\ncolumn = "patient_id"\n'
          'order = "seen"\n', age_rule: str = 'per_person = "first"', visits: bool = True) -> Path:
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema(
        [("patient_id", pa.string()), ("age", pa.int64()), ("sex", pa.string()), ("seen", pa.int64()),
         ("dx", pa.string())])), folder / "enc.parquet")
    spec = folder / "enc.toml"
    spec.write_text('[source]\npath = "enc.parquet"\n' + (person or "")
                    + QIS.format(age_rule=age_rule, visits=VISITS if visits else ""), encoding="utf-8")
    return spec


def reference(rows: list[dict[str, Any]], width: int, rule: str = "first", visits: bool = True
              ) -> dict[str, float]:
    """Per-person figures by hand: each person's age by ``rule`` (first by seen, ties by age), their
    sex, their row count; ages in bands of ``width``; the population is the sample."""
    by: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in rows:
        by[r["patient_id"]].append(r)
    groups: collections.Counter[tuple[Any, ...]] = collections.Counter()
    for person_rows in by.values():
        if rule == "first":
            age = min(person_rows, key=lambda r: (r["seen"], r["age"]))["age"]
        elif rule == "last":
            age = max(person_rows, key=lambda r: (r["seen"], r["age"]))["age"]
        else:
            age = (min if rule == "min" else max)(r["age"] for r in person_rows)
        key = (age // width, person_rows[0]["sex"]) + ((len(person_rows),) if visits else ())
        groups[key] += 1
    m = list(groups.values())
    return {"records": float(len(by)), "groups": float(len(groups)), "k": float(min(m)),
            "sample_uniques": float(sum(1 for x in m if x == 1)), "risk_sum": float(len(groups))}


def encounters(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(1, 25))
    rows = []
    for p in range(n):
        sex = draw(st.sampled_from(["F", "M"]))
        for _ in range(draw(st.integers(1, 6))):
            rows.append({"patient_id": f"P{p:03d}", "age": draw(st.integers(0, 99)), "sex": sex,
                         "seen": draw(st.integers(0, 9)), "dx": "x"})
    return rows


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.composite(encounters)(), rule=st.sampled_from(["first", "last", "min", "max"]),
       width=st.sampled_from([1, 10, 50]))
def test_figures_count_persons_like_the_reference(tmp_path_factory: pytest.TempPathFactory,
                                                  rows: list[dict[str, Any]], rule: str, width: int) -> None:
    folder = tmp_path_factory.mktemp("persons")
    spec = write(folder, rows, age_rule=f'per_person = "{rule}"')
    want = reference(rows, width, rule)
    policy = f"age:every={width}" if width > 1 else "age:bottom"
    with Problem.from_spec(spec, cache=False) as problem:
        for path in ("fast", "sql"):
            m = problem.evaluate(policy, path=path)
            got = {"records": float(problem.sample.total), "groups": float(m.groups), "k": float(m.k),
                   "sample_uniques": float(m.sample_unique_records), "risk_sum": m.risk_sum}
            assert got == pytest.approx(want, rel=1e-12), (path, got, want)


def test_a_person_with_fifty_rows_counts_once_in_one_group(tmp_path: Path) -> None:
    rows = [{"patient_id": "A", "age": 40 + v % 3, "sex": "F", "seen": v, "dx": "x"} for v in range(50)]
    rows += [{"patient_id": f"B{i}", "age": 70, "sex": "M", "seen": 0, "dx": "x"} for i in range(3)]
    spec = write(tmp_path, rows, age_rule='per_person = "max"', visits=False)
    with Problem.from_spec(spec, cache=False) as problem:
        assert problem.sample.total == 4 and len(problem.sample) == 2
        m = problem.evaluate("bottom")
        assert m.groups == 2 and m.k == 1 and m.sample_unique_records == 1


def test_one_row_per_person_gives_the_same_figures_with_and_without_person(tmp_path: Path) -> None:
    rows = [{"patient_id": f"P{i}", "age": (i * 7) % 100, "sex": "FM"[i % 2], "seen": 0, "dx": "x"}
            for i in range(200)]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with_person = write(tmp_path / "a", rows, age_rule="", visits=False)
    without = write(tmp_path / "b", rows, person=None, age_rule="", visits=False)
    with Problem.from_spec(with_person, cache=False) as a, Problem.from_spec(without, cache=False) as b:
        for policy in ("bottom", "age:every=10", "age:every=25|sex:top", "top"):
            assert a.evaluate(policy).to_dict() == b.evaluate(policy).to_dict()


def test_the_row_count_is_a_qi(tmp_path: Path) -> None:
    rows = [{"patient_id": "A", "age": 30, "sex": "F", "seen": v, "dx": "x"} for v in range(7)]
    rows += [{"patient_id": f"B{i}", "age": 30, "sex": "F", "seen": 0, "dx": "x"} for i in range(4)]
    spec = write(tmp_path, rows, age_rule="")
    with Problem.from_spec(spec, cache=False) as problem:
        kept = problem.evaluate("bottom")  # seven admissions single out A
        assert kept.groups == 2 and kept.sample_unique_records == 1
        merged = problem.evaluate("visits:top")
        assert merged.groups == 1 and merged.k == 5


def _error(tmp_path: Path, rows: list[dict[str, Any]], **kw: Any) -> str:
    spec = write(tmp_path, rows, **kw)
    result = CliRunner().invoke(cli, ["validate", str(spec)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert lines, result.output
    return "\n".join(lines)


ROWS = [{"patient_id": "A", "age": 30, "sex": "F", "seen": 1, "dx": "x"},
        {"patient_id": "A", "age": 31, "sex": "F", "seen": 2, "dx": "x"},
        {"patient_id": "B", "age": 50, "sex": "M", "seen": 1, "dx": "x"}]


def test_a_varying_qi_without_a_rule_is_refused_with_a_count_and_an_example(tmp_path: Path) -> None:
    err = _error(tmp_path, ROWS, age_rule="")
    assert "QI 'age' varies within 1 person(s) (e.g. person 'A' has '30' and '31')" in err
    assert 'per_person = "first"' in err


@pytest.mark.parametrize(("person", "age_rule", "visits", "expected"), [
    ('[person]\ncolumn = "nobody"\n', "", False, "[person] person = 'nobody': the source"),
    ('[person]\ncolumn = "patient_id"\norder = "when"\n', 'per_person = "first"', False,
     "[person] order = 'when': the source"),
    ('[person]\ncolumn = "patient_id"\n', 'per_person = "first"', False, "needs [person] order"),
    ('[person]\ncolumn = "age"\n', "", False, "is also the QI 'age'"),
    (None, 'per_person = "max"', False, "needs [person] column"),
    ('[person]\ncolumn = "patient_id"\n', 'per_person = "oldest"', False, "per_person = 'oldest' must be one of"),
    ('[person]\ncolumn = "patient_id"\n', 'derived = "visits"', False, "derived = 'visits' is unknown"),
])
def test_bad_person_declarations_are_one_line_each(tmp_path: Path, person: str | None, age_rule: str,
                                                   visits: bool, expected: str) -> None:
    assert expected in _error(tmp_path, ROWS, person=person, age_rule=age_rule, visits=visits)


def test_a_derived_qi_needs_an_integer_domain(tmp_path: Path) -> None:
    spec = write(tmp_path, ROWS, age_rule='per_person = "first"', visits=False)
    text = spec.read_text(encoding="utf-8") + '[[qi]]\nname = "visits"\nkind = "integer"\nderived = "rows"\n'
    spec.write_text(text.replace("[columns]", "[columnsX]").replace("[columnsX]", "[columns]"), encoding="utf-8")
    with pytest.raises(SpecError, match='derived = "rows" needs an integer domain'):
        Problem.from_spec(spec, cache=False)


def test_null_person_keys_are_refused_with_a_count(tmp_path: Path) -> None:
    rows = [*ROWS, {"patient_id": None, "age": 20, "sex": "F", "seen": 1, "dx": "x"},
            {"patient_id": None, "age": 21, "sex": "F", "seen": 2, "dx": "x"}]
    with pytest.raises(DataError, match=r"\[person\] column 'patient_id' is NULL in 2 row\(s\)"):
        Problem.from_spec(write(tmp_path, rows), cache=False)


def test_more_rows_than_the_derived_domain_is_refused(tmp_path: Path) -> None:
    rows = [{"patient_id": "A", "age": 30, "sex": "F", "seen": v, "dx": "x"} for v in range(25)]
    with pytest.raises(DataError, match=r"QI 'visits': 1 person\(s\) have a number of rows outside 1\.\.\.20"):
        Problem.from_spec(write(tmp_path, rows), cache=False)


KEY = "32b119463c9f1d394512a1e848da57568280a7eee198a96030983cb9579b9552"  # a key that is a secret (contract/secret.py)


def releasable(spec: Path) -> Path:
    """The spec with the person key released pseudonymized (what a release in persons needs)."""
    text = spec.read_text(encoding="utf-8").replace('drop = ["patient_id", "seen", "dx"]',
                                                    'drop = ["seen", "dx"]\npseudonymize = ["patient_id"]\n'
                                                    'secret_env = "DEID_PERSONS_KEY"')
    spec.write_text(text.replace("min_k = 2", "max_record_risk = 1.0"), encoding="utf-8")
    return spec


def on_engine(engine: Engine, local: Path, rows: list[dict[str, Any]], name: str) -> Path:
    """The spec ``local`` (over ``enc.parquet``) with its source as the engine's table ``name`` of ``rows``."""
    source = engine.load(name, pa.Table.from_pylist(rows))
    spec = engine.folder / f"{name}.toml"
    spec.write_text(local.read_text(encoding="utf-8").replace('[source]\npath = "enc.parquet"\n',
                                                             engine.header() + f"\n[source]\n{source}\n"),
                    encoding="utf-8")
    return spec


def released_by_person(path: Path) -> dict[Any, set[tuple[Any, ...]]]:
    by: dict[Any, set[tuple[Any, ...]]] = collections.defaultdict(set)
    for row in pq.read_table(path).to_pylist():
        by[row.pop("patient_id")].add(tuple(sorted(row.items())))
    return by


def test_a_release_gives_every_row_of_a_person_the_persons_labels(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from deid_sql.release.output import materialize

    monkeypatch.setenv("DEID_PERSONS_KEY", KEY)
    rows = [{"patient_id": f"P{p}", "age": 20 + p % 50 + v, "sex": "FM"[p % 2], "seen": v, "dx": "x"}
            for p in range(60) for v in range(1 + p % 4)]
    spec = releasable(write(tmp_path, rows))
    out = tmp_path / "release.parquet"
    with Problem.from_spec(spec, cache=False) as problem:
        plan = plan_of(problem, "age:every=10")
        written = materialize(problem, plan, out)
        want = problem.evaluate("age:every=10")
    assert written.rows == len(rows)  # every row released, the row count checked
    by = released_by_person(out)
    assert len(by) == 60 and all(len(labels) == 1 for labels in by.values())  # one label tuple per person
    visits = {dict(next(iter(v)))["visits"] for v in by.values()}
    assert visits == {"1", "2", "3", "4"}  # the derived QI released, kept at its values
    f = written.figures
    assert f is not None and f.unit == "persons" and f.records == 60
    assert (f.groups, f.k, f.sample_unique_records) == (want.groups, want.k, want.sample_unique_records)
    assert f.expected_reidentifications == pytest.approx(want.expected_reidentifications, rel=1e-12)


def test_a_written_release_needs_the_person_key(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    spec = write(tmp_path, ROWS * 3)  # the key dropped
    result = CliRunner().invoke(cli, ["materialize", str(spec), "--policy", "age:every=10", "--out",
                                      str(tmp_path / "r.parquet")])
    assert result.exit_code == 2 and "list it under [columns] pseudonymize" in result.output
    assert not (tmp_path / "r.parquet").exists()
    monkeypatch.setenv("DEID_PERSONS_KEY", KEY)
    releasable(spec)


def test_anonymize_suppresses_all_rows_of_a_suppressed_person(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from deid_sql.jobs.anonymize import Anonymization, write_release  # noqa: F401

    monkeypatch.setenv("DEID_PERSONS_KEY", KEY)
    ages = [30] * 75 + [10, 20, 40, 50, 60]  # five persons stand out: suppressing them beats blanking the age
    rows = [{"patient_id": f"P{p}", "age": age, "sex": "F", "seen": v, "dx": "x"}
            for p, age in enumerate(ages) for v in range(1 + p % 3)]
    spec = releasable(write(tmp_path, rows, age_rule='per_person = "max"', visits=False))
    out = tmp_path / "a.parquet"
    result = CliRunner().invoke(cli, ["anonymize", str(spec), "--min-k", "3", "--max-suppressed-share", "0.2",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    table = pq.read_table(out).to_pylist()
    # a suppressed person's rows carry no pseudonym; every released person keeps all of their rows unflagged
    stand_out = {f"P{p}" for p in range(75, 80)}
    assert sum(1 for r in table if r["deid_suppressed"]) == sum(1 for r in rows if r["patient_id"] in stand_out)
    assert {r["patient_id"] for r in table if r["deid_suppressed"]} == {None}
    assert None not in {r["patient_id"] for r in table if not r["deid_suppressed"]}
    suppressed = 5
    import json

    sidecar = json.loads((tmp_path / "a.parquet.release.json").read_text(encoding="utf-8"))
    figures = sidecar["figures"]
    assert figures["unit"] == "persons" and figures["suppressed"] == suppressed and figures["records"] == 80
    # the words count persons too: the search's line and the suppression rule a reviewer reads
    assert f"suppressed   {suppressed} persons (" in result.stdout and " records" not in result.stdout
    assert "every row of a group that fails" in json.dumps(sidecar) and "of the persons allowed" in json.dumps(sidecar)


def test_the_cells_cache_keys_on_the_person_declaration(tmp_path: Path) -> None:
    rows = [{"patient_id": "A", "age": 30, "sex": "F", "seen": 1, "dx": "x"},
            {"patient_id": "A", "age": 60, "sex": "F", "seen": 2, "dx": "x"}]
    spec = write(tmp_path, rows, age_rule='per_person = "first"', visits=False)
    cache = tmp_path / "cache"
    from deid_sql.loading.cache import CellsCache

    with Problem.from_spec(spec, cache=CellsCache(cache)) as first:
        assert first.evaluate("bottom").groups == 1
        first_age = int(first.sample.positions[0, 0])
    spec.write_text(spec.read_text(encoding="utf-8").replace('per_person = "first"', 'per_person = "last"'),
                    encoding="utf-8")
    with Problem.from_spec(spec, cache=CellsCache(cache)) as last:
        assert int(last.sample.positions[0, 0]) != first_age  # 60, not the cached 30


# -- every engine -----------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=engine_params(*ENGINES))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


def test_every_engine_builds_the_same_cells_of_persons(engine: Engine, tmp_path: Path) -> None:
    """The person query (windows for first/last, per-person aggregates, flags) runs where the
    data is and gives the DuckDB file's cells, and the pure-Python reference's figures."""
    import random

    rng = random.Random(29)
    rows = [{"patient_id": f"P{p:03d}", "age": rng.randint(0, 99), "sex": sex, "seen": rng.randint(0, 5),
             "dx": "x"}
            for p in range(120) for sex in [rng.choice("FM")] for _ in range(rng.randint(1, 5))]
    local = write(tmp_path, rows)
    table = pa.Table.from_pylist(rows)
    source = engine.load("encounters", table)
    spec = engine.folder / "persons.toml"
    text = local.read_text(encoding="utf-8").replace('[source]\npath = "enc.parquet"\n',
                                                     engine.header() + f"\n[source]\n{source}\n")
    spec.write_text(text, encoding="utf-8")
    with Problem.from_spec(local, cache=False) as want, Problem.from_spec(spec, cache=False) as got:
        assert (got.sample.positions == want.sample.positions).all()
        assert (got.sample.counts == want.sample.counts).all()
        m = got.evaluate("age:every=10")
    ref = reference(rows, 10, "first")
    assert (m.groups, m.k, m.sample_unique_records) == (ref["groups"], ref["k"], ref["sample_uniques"])


def test_the_ehr_demo_counts_rows_and_persons(tmp_path: Path) -> None:
    """``demo --ehr``: several rows per patient, the age varying within a patient, and the figures
    of the persons' spec equal a reduction by hand (first visit's age)."""
    from deid_sql.starter.demo import build_ehr

    persons, rows = build_ehr(tmp_path, seed=3, patients=400, people=40_000)
    table = pq.read_table(tmp_path / "encounters.parquet").to_pylist()
    assert len(table) > 400 and len({r["patient_id"] for r in table}) <= 400
    with Problem.from_spec(persons, cache=False) as p, Problem.from_spec(rows, cache=False) as r:
        assert r.sample.total == len(table) and p.sample.total == len({x["patient_id"] for x in table})
        by: dict[Any, list[dict[str, Any]]] = collections.defaultdict(list)
        for x in table:
            by[x["patient_id"]].append(x)
        assert any(len({x["age"] for x in v}) > 1 for v in by.values())  # ages vary within patients
        groups = collections.Counter(
            (min(v, key=lambda x: (x["admitted"], x["age"]))["age"] // 10, v[0]["sex"], v[0]["race"],
             str(v[0]["zip"]).zfill(5)) for v in by.values())
        m = p.evaluate("age:every=10")
        assert (m.groups, m.sample_unique_records) == (len(groups), sum(1 for c in groups.values() if c == 1))


@pytest.mark.parametrize("k,limit", [(2, 0.0), (5, 0.04), (20, 0.1)])
def test_anonymize_finds_the_exhaustive_optimum_in_persons(tmp_path: Path, k: int, limit: float) -> None:
    """Full-domain search works on cells, so it counts persons: its optimum on the encounters demo
    equals exhaustive enumeration, and what it suppresses is at most ``limit`` of the persons."""
    from deid_sql.fulldomain import KAnonymity, Loss, TransformationSpace, TransformEvaluator
    from deid_sql.search.bfs import best_first_search
    from deid_sql.starter.demo import build_ehr
    from tests.baselines.fulldomain import exhaustive

    persons, _ = build_ehr(tmp_path, seed=5, patients=600, people=60_000)
    with Problem.from_spec(persons, cache=False) as p:
        space = TransformationSpace(p)
        truth = exhaustive(space, TransformEvaluator(p, KAnonymity(k), Loss(), limit, space=space))
        found = best_first_search(space, TransformEvaluator(p, KAnonymity(k), Loss(), limit, space=space)).optimum
        assert (found is None) == (truth is None)
        if truth is not None and found is not None:
            assert found.quality == pytest.approx(truth.quality, rel=1e-12)
            assert found.suppressed <= int(limit * p.sample.total)  # persons, not rows


def test_every_engine_releases_the_same_rows_of_persons(engine: Engine, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The person rewrite (windows over the key) and the gate's count of distinct keys run where
    the data is: each engine writes the DuckDB file's rows, pseudonyms included, and figures."""
    from deid_sql.release.output import materialize

    monkeypatch.setenv("DEID_PERSONS_KEY", KEY)
    rows = [{"patient_id": f"P{p:03d}", "age": 20 + (p * 7) % 60 + v, "sex": "FM"[p % 2], "seen": (v * 5) % 4,
             "dx": "x"} for p in range(90) for v in range(1 + p % 4)]
    local = releasable(write(tmp_path, rows))
    spec = on_engine(engine, local, rows, "encounters_release")
    figures = []
    for path, out in ((local, tmp_path / "want.parquet"), (spec, tmp_path / "got.parquet")):
        with Problem.from_spec(path, cache=False) as problem:
            figures.append(materialize(problem, plan_of(problem, "age:every=20"), out).figures)
    assert sorted_rows(pq.read_table(tmp_path / "got.parquet")) == sorted_rows(pq.read_table(tmp_path / "want.parquet"))
    assert figures[0] == figures[1]


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda t: t.replace('[[qi]]\nname = "sex"', '[[qi]]\nname = "sex"\nper_person = "max"'),
     "per_person = 'max' needs an ordered kind"),
    (lambda t: t.replace('derived = "rows"', 'derived = "rows"\nper_person = "first"'),
     "a derived QI has one value per person already"),
    (lambda t: t.replace('derived = "rows"', 'derived = "rows"\ncolumn = "seen"'),
     'derived = "rows" is computed, not read'),
    (lambda t: t + '\n[weights]\ncolumn = "seen"\n', "[weights] with [person]"),
    (lambda t: t.replace('[source]\npath = "enc.parquet"\n',
                         '[source]\npath = "enc.parquet"\n[population]\npath = "enc.parquet"\ncount = "seen"\n'),
     "derived = 'rows' with a census table"),
])
def test_bad_rules_are_one_line_each_before_any_data_is_read(tmp_path: Path, edit: Any, expected: str) -> None:
    spec = write(tmp_path, ROWS)
    spec.write_text(edit(spec.read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(SpecError) as info:
        Problem.from_spec(spec, cache=False)
    assert sum(expected in p for p in info.value.problems) == 1, info.value.problems
    assert all("\n" not in p for p in info.value.problems)


def test_a_derived_qi_named_like_a_source_column_is_refused(tmp_path: Path) -> None:
    spec = write(tmp_path, ROWS)
    text = spec.read_text(encoding="utf-8").replace('name = "visits"', 'name = "dx"')
    spec.write_text(text.replace('drop = ["patient_id", "seen", "dx"]', 'drop = ["patient_id", "seen"]'),
                    encoding="utf-8")
    result = CliRunner().invoke(cli, ["validate", str(spec)])
    assert result.exit_code == 2
    assert "QI 'dx' is derived from the rows, but the source has a column 'dx' too" in result.output


# -- first/last ties in the domain's order; NULL keys alone (issue 38) ---------------------------------
WARDS = [f"w{i:02d}" for i in reversed(range(70))]  # listed against text order, larger than an IN list
TIES = '''[person]
column = "patient_id"
order = "seen"
[[qi]]
name = "grade"
kind = "category"
values = ["b", "a"]
per_person = "first"
[[qi]]
name = "ward"
kind = "category"
values = {wards}
per_person = "last"
[columns]
drop = ["seen"]
pseudonymize = ["patient_id"]
secret_env = "DEID_PERSONS_KEY"
[release]
max_record_risk = 1.0
allow_original_data = true
'''


def test_first_and_last_break_ties_in_the_domains_order(engine: Engine, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two rows of a person on the same day: ``first`` takes the value first in the domain's order
    (``b`` of ``["b", "a"]``), ``last`` the one last in it (``w10`` of w69…w00, not the text's
    ``w20``), in the cells and in the released rows, on every engine."""
    from deid_sql.release.output import materialize

    monkeypatch.setenv("DEID_PERSONS_KEY", KEY)
    rows = [{"patient_id": f"P{p}", "grade": grade, "ward": ward, "seen": 1}
            for p in range(6) for grade, ward in (("a", "w20"), ("b", "w10"))[:: 1 if p % 2 else -1]]
    source = engine.load("ties", pa.Table.from_pylist(rows))
    spec = engine.folder / "ties.toml"
    spec.write_text(f"{engine.header()}\n[source]\n{source}\n" + TIES.format(wards=json.dumps(WARDS)),
                    encoding="utf-8")
    out = tmp_path / "ties.parquet"
    with Problem.from_spec(spec, cache=False) as problem:
        assert problem.sample.total == 6
        assert {tuple(int(v) for v in row) for row in problem.sample.positions} == {(0, WARDS.index("w10"))}
        materialize(problem, plan_of(problem, "bottom"), out)
    released = {(r["grade"], r["ward"]) for r in pq.read_table(out).to_pylist()}
    assert released == {("b", "w10")}


def test_null_keys_are_refused_alone(engine: Engine, tmp_path: Path) -> None:
    """Rows without a person key are no person: the refusal counts them, and says nothing of their
    ages varying or of their number of rows (25, above the derived QI's 20), on every engine."""
    persons = [{"patient_id": "A", "age": 30, "sex": "F", "seen": v, "dx": "x"} for v in (1, 2)]
    persons += [{"patient_id": "B", "age": 50, "sex": "M", "seen": 1, "dx": "x"}]
    rows = persons + [{"patient_id": None, "age": 20 + i, "sex": "F", "seen": i, "dx": "x"} for i in range(25)]
    spec = on_engine(engine, write(tmp_path, persons, age_rule=""), rows, "null_keys")
    with pytest.raises(DataError) as info:
        Problem.from_spec(spec, cache=False)
    assert info.value.problems == ["[person] column 'patient_id' is NULL in 25 row(s); every row must name its "
                                   "person: fill the key or filter those rows out of the source"]
