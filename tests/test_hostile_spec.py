"""Hostile specs, options and census files (issue 19): each wrong input is refused in one
line that names the real problem, never turned into a wrong number."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import Result
from hypothesis import given, settings
from hypothesis import strategies as st

from deid_sql.channels.spec import parse_channels
from deid_sql.domains.domain import CategoryDomain, IntegerDomain
from deid_sql.errors import Problems
from deid_sql.policies.lattice import Lattice
from deid_sql.spec.file import qi_name_problem

from .conftest import AGE_QI, Project

Run = Callable[..., Result]


def _one_line(result: Result) -> str:
    err = result.stderr.strip()
    assert err.startswith("error:") and "Traceback" not in err, err
    return err


# -- 1. float parameters are finite and in range ------------------------------------------------
@pytest.mark.parametrize("gamma", ["nan", "inf", "-inf", "0.0", "-1.0"])
def test_gamma_must_be_finite_and_positive(project: Project, run: Run, gamma: str) -> None:
    project.write_spec(project.spec_text().replace("gamma = 1.0", f"gamma = {gamma}"))
    err = _one_line(run("validate", project.spec_path, expect=2))
    assert f"gamma = {float(gamma)!r} must be a finite positive number" in err


@pytest.mark.parametrize("key", ["prior", "gain", "h0", "discount"])
def test_adversary_parameters_must_be_finite(project: Project, run: Run, key: str) -> None:
    project.write_spec(project.spec_text() + f"\n[adversary]\n{key} = nan\n")
    err = _one_line(run("validate", project.spec_path, expect=2))
    assert f"{key} = nan" in err


CHANNELS = {"related": ["a", "b"], "confidential": "c", "none": "N", "identity": ["id"]}


@pytest.mark.parametrize("extra, expected", [
    ({"thresholds": {"H": float("nan")}}, "'H' = nan is not a finite number"),
    ({"thresholds": {"H": float("inf")}}, "'H' = inf is not a finite number"),
    ({"b": float("inf")}, "b = inf must be a positive number, finite"),
    ({"b": float("nan")}, "b = nan must be a positive number, finite"),
    ({"b": 1.0, "weights": {"H": float("nan")}}, "'H' = nan is not a finite number"),
    ({"time_limit": float("nan")}, "time_limit = nan must be a finite positive number"),
    ({"time_limit": float("inf")}, "time_limit = inf must be a finite positive number"),
])
def test_channel_numbers_must_be_finite(extra: dict[str, object], expected: str) -> None:
    problems = Problems()
    assert parse_channels({**CHANNELS, **extra}, problems) is None
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize("args", [
    ("anonymize", "--min-k", "2", "--max-mean-record-risk", "nan"),
    ("anonymize", "--min-k", "2", "--max-mean-record-risk", "-0.1"),
    ("anonymize", "--min-k", "2", "--max-suppressed-share", "nan"),
    ("anonymize", "--min-k", "2", "--max-suppressed-share", "1.5"),
    ("anonymize", "--min-k", "2", "--time-limit", "inf"),
    ("anonymize", "--min-k", "2", "--time-limit", "-1"),
    ("frontier", "--th", "nan", "--out", "f"),
    ("frontier", "--th", "inf", "--out", "f"),
    ("policy", "save", "--policy", "top", "--out", "p.json", "--drift-limit", "nan"),
    ("policy", "save", "--policy", "top", "--out", "p.json", "--drift-limit", "-1"),
    ("adversary", "--prior", "nan"),
    ("adversary", "--gain", "inf"),
])
def test_float_options_refuse_nan_inf_and_out_of_range(project: Project, run: Run, args: tuple[str, ...]) -> None:
    before = project.names()
    cmd, rest = (args[:2], args[2:]) if args[0] == "policy" else (args[:1], args[1:])
    result = run(*cmd, project.spec_path, *rest, expect=2)
    assert "is not a finite number" in result.stderr or "must be a" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert project.names() == before


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_alternatives_threshold_must_be_finite(project: Project, run: Run, value: str) -> None:
    err = _one_line(run("alternatives", project.spec_path, "--max-risk", value, "-n", "1", expect=2))
    assert f"--max-risk {value!r} is not a finite number" in err


# -- 2. one QI per source column ----------------------------------------------------------------
def test_two_qis_on_one_column_refused(project: Project, run: Run) -> None:
    twice = AGE_QI.replace('name = "age"', 'name = "age_band"\ncolumn = "age"')
    project.spec(qis=(*project.DEFAULT_QIS, twice))
    err = _one_line(run("validate", project.spec_path, expect=2))
    assert "QIs 'age', 'age_band' all read source column 'age'" in err


# -- 3. QI names and the policy grammar ---------------------------------------------------------
@pytest.mark.parametrize("name, why", [
    ("c|a:t", "contains '|'"),
    ("a:b", "contains ':'"),
    (" age", "whitespace"),
    ("age\u00a0", "whitespace"),
    ("@age", "starts with '@'"),
    ("a\x07b", "control character"),
])
def test_qi_names_that_break_policy_text_refused(project: Project, run: Run, name: str, why: str) -> None:
    qi = AGE_QI.replace('name = "age"', f'name = "{name.replace(chr(7), chr(92) + "u0007")}"\ncolumn = "age"')
    project.spec(qis=(qi, *project.DEFAULT_QIS[1:]))
    err = _one_line(run("validate", project.spec_path, expect=2))
    assert why in err and "column = 'age'" in err, err


@pytest.mark.slow
def test_hostile_but_valid_qi_name_round_trips_through_the_cli(project: Project, run: Run) -> None:
    name = "it's \"a\" SELECT, x=1; -- é 名"
    toml_name = name.replace('"', '\\"')
    qi = AGE_QI.replace('name = "age"', f'name = "{toml_name}"\ncolumn = "age"')
    project.spec(qis=(qi, *project.DEFAULT_QIS[1:]))
    run("validate", project.spec_path)
    out = run("evaluate", project.spec_path, "--policy", f"{name}:cuts=18,65|zip:top").stdout
    assert '"risk"' in out


HOSTILE = st.lists(st.sampled_from([*"ab'\"` ;=,-#é名ßΩ\u00a0\t()*", "SELECT", "NULL", "drop", "top", "bottom",
                                     "level=1", "cuts="]), min_size=1, max_size=8).map("".join)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(names=st.lists(HOSTILE.filter(lambda n: qi_name_problem(n) is None), min_size=1, max_size=3, unique=True),
       data=st.data())
def test_printed_policy_text_parses_back(names: list[str], data: st.DataObject) -> None:
    domains = [IntegerDomain(0, 6) if i % 2 == 0 else CategoryDomain(("x", "y|z", "w:v", "'q'"))
               for i in range(len(names))]
    lattice = Lattice(names, domains)
    bits = data.draw(st.lists(st.integers(0, 1), min_size=lattice.nbits, max_size=lattice.nbits))
    policy = lattice.policy(bits)
    assert lattice.parse(policy.text()) == policy


# -- 4. census counts that do not fit a 64-bit integer ------------------------------------------
def _population_with_counts(project: Project, counts: dict[int, float]) -> None:
    table = project.population
    values = [float(c) for c in table.column("count").to_pylist()]
    for row, c in counts.items():
        values[row] = c
    project.write_parquet(table.set_column(table.schema.get_field_index("count"), "count",
                                           pa.array(values, pa.float64())), "population.parquet")


def test_count_too_large_for_int64_refused(project: Project, run: Run) -> None:
    _population_with_counts(project, {0: 1e30})
    err = _one_line(run("validate", project.spec_path, expect=2))
    assert "population count column 'count' has 1 count(s) too large for a 64-bit integer (e.g. 1e+30)" in err


def test_counts_whose_total_overflows_int64_refused(project: Project, run: Run) -> None:
    _population_with_counts(project, {0: 6e18, 1: 6e18})
    err = _one_line(run("validate", project.spec_path, expect=2))
    assert "population count column 'count' sums to 1.2e+19 people, more than a 64-bit integer holds" in err


# -- 5. paths are file names unless the spec says glob = true -----------------------------------
def _people(project: Project) -> int:
    return int(pc.sum(project.population.column("count")).as_py())


def test_literal_population_path_with_glob_characters_is_read_literally(project: Project, run: Run) -> None:
    project.write_parquet(project.population, "p*p.parquet")
    project.write_parquet(project.population, "pXp.parquet")  # would double the census if the path were a glob
    project.spec(population="p*p.parquet")
    out = run("validate", project.spec_path).stdout
    assert f"{_people(project):,} people" in out


def test_literal_source_csv_path_with_glob_characters_is_read_literally(project: Project, run: Run) -> None:
    project.write_csv(project.source, "s[1]?.csv")
    project.write_csv(project.source.slice(0, 10), "s1X.csv")
    project.spec(source="s[1]?.csv")
    assert "500 records" in run("validate", project.spec_path).stdout


def test_glob_true_reads_every_match_and_validate_lists_them(project: Project, run: Run) -> None:
    (project.dir / "parts").mkdir()
    half = project.population.num_rows // 2
    project.write_parquet(project.population.slice(0, half), "parts/pop1.parquet")
    project.write_parquet(project.population.slice(half), "parts/pop2.parquet")
    project.spec(population="parts/*.parquet", population_extra="glob = true")
    out = run("validate", project.spec_path).stdout
    assert "(glob = true: 2 file(s): pop1.parquet, pop2.parquet)" in out
    assert f"{_people(project):,} people" in out


def test_glob_true_matching_nothing_refused(project: Project, run: Run) -> None:
    project.spec(population="parts/*.parquet", population_extra="glob = true")
    err = _one_line(run("validate", project.spec_path, expect=2))
    assert "'parts/*.parquet' (glob = true) matches no file" in err


def test_missing_literal_path_that_looks_like_a_pattern_hints_glob(project: Project, run: Run) -> None:
    project.spec(population="pop*.parquet")
    err = _one_line(run("validate", project.spec_path, expect=2))
    assert "does not exist" in err and "add glob = true" in err


def test_spark_refuses_a_literal_path_it_would_read_as_a_pattern(tmp_path: Path) -> None:
    from deid_sql.errors import SpecError
    from deid_sql.spec.file import Spec

    (tmp_path / "p*p.parquet").write_bytes(b"")
    raw = {"backend": {"engine": "spark"}, "source": {"path": "p*p.parquet"}, "population": "sample",
           "qi": [{"name": "age", "kind": "integer", "min": 0, "max": 9}]}
    with pytest.raises(SpecError) as err:
        Spec.from_dict(raw, base=tmp_path)
    assert any("Spark reads as a file pattern" in p and "rename the file" in p for p in err.value.problems)


# -- 6. repeated census cells -------------------------------------------------------------------
def _population_with_repeats(project: Project) -> int:
    table = pa.concat_tables([project.population, project.population.slice(0, 3)])
    project.write_parquet(table, "population.parquet")
    return int(pc.sum(table.column("count")).as_py())


def test_repeated_population_cells_refused_with_examples(project: Project, run: Run) -> None:
    _population_with_repeats(project)
    err = _one_line(run("validate", project.spec_path, expect=2))
    assert "population has 3 cell(s) given by more than one row (6 rows; e.g. age=0, sex='Female'" in err
    assert 'duplicates = "sum"' in err


@pytest.mark.slow
def test_repeated_population_cells_summed_when_declared(project: Project, run: Run) -> None:
    people = _population_with_repeats(project)
    project.spec(population_extra='duplicates = "sum"')
    assert f"{people:,} people" in run("validate", project.spec_path).stdout


def test_population_rows_differing_in_a_column_the_qis_skip_are_not_duplicates(project: Project, run: Run) -> None:
    project.spec(qis=(AGE_QI,), columns='[columns]\ndrop = ["patient_id"]\nsensitive = ["diagnosis"]\n'
                 'keep = ["sex", "race", "zip"]\n')
    assert f"{_people(project):,} people" in run("validate", project.spec_path).stdout


def test_duplicates_value_checked(project: Project, run: Run) -> None:
    project.spec(population_extra='duplicates = "add"')
    assert "duplicates = 'add' must be \"sum\"" in _one_line(run("validate", project.spec_path, expect=2))


# -- 7. messages that name the real problem ------------------------------------------------------
def test_ragged_csv_is_named_as_such(project: Project, run: Run) -> None:
    lines = project.source_csv.read_text().splitlines()
    lines[5] += ",extra"
    lines[9] = lines[9].rsplit(",", 2)[0]
    project.source_csv.write_text("\n".join(lines) + "\n")
    err = _one_line(run("validate", project.spec_path, expect=2))
    assert "was read as one column named after its whole header line" in err and "ragged" in err, err
    assert "its columns are" not in err


def test_wrong_delimiter_is_named(project: Project, run: Run) -> None:
    project.source_csv.write_text(project.source_csv.read_text().replace(",", ";").replace('"', ""))
    project.spec(source_extra='delimiter = ","')
    err = _one_line(run("validate", project.spec_path, expect=2))
    assert "the delimiter (,) is wrong" in err and "delimiter = ';'" in err, err


def test_empty_csv_is_named_as_empty(project: Project, run: Run) -> None:
    project.source_csv.write_text("")
    err = _one_line(run("validate", project.spec_path, expect=2))
    assert "is empty (no header, no rows)" in err and "column0" not in err, err


def test_invalid_format_value_is_named(project: Project, run: Run) -> None:
    project.spec(source_extra='format = "xlsx"')
    err = _one_line(run("validate", project.spec_path, expect=2))
    assert "[source]: format = 'xlsx' is not one of csv, parquet, duckdb" in err
    assert "cannot tell the format" not in err
