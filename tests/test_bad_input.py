"""Bad input: one clear ``error:`` line, exit code 2, no traceback, and nothing written."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.conftest import DEFAULT_COLUMNS

POLICY = "age:cuts=18,65|race:top"
LOADING = ("validate", "evaluate", "materialize", "view")
POLICY_USERS = ("evaluate", "compile", "materialize", "view")


def command(name: str, spec: Path, tmp_path: Path, policy: str = POLICY) -> list[object]:
    out = tmp_path / "study" / "release.parquet"
    return {
        "validate": ["validate", spec],
        "evaluate": ["evaluate", spec, "-p", policy],
        "compile": ["compile", spec, "-p", policy],
        "materialize": ["materialize", spec, "-p", policy, "--out", out],
        "materialize-duckdb": ["materialize", spec, "-p", policy, "--out", tmp_path / "release.duckdb"],
        "view": ["view", spec, "-p", policy, "--db", tmp_path / "analysts.duckdb", "--view", "v"],
    }[name]


def refused(project, run, tmp_path: Path, spec: Path, fragment: str, commands=LOADING,
            policy: str = POLICY, lines: int | None = 1) -> str:
    """Run each command; all exit 2 with ``fragment`` on stderr; no file appears or changes."""
    before = project.files()
    outside = sorted(p.name for p in tmp_path.iterdir())
    message = ""
    for name in commands:
        result = run(*command(name, spec, tmp_path, policy), expect=2)
        err = result.stderr
        assert fragment in err, f"{name}: {fragment!r} not in {err!r}"
        assert result.stdout == "", name
        assert "Traceback" not in result.output
        errors = err.splitlines()
        assert errors and all(line.startswith("error: ") for line in errors), errors
        if lines is not None and name != "validate":
            assert len(errors) == lines, errors
        message = message or err
    assert project.files() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == outside
    return message


# -- the spec -----------------------------------------------------------------------------

def test_unknown_top_level_key(project, run, tmp_path) -> None:
    spec = project.spec(top='colour = "blue"')
    msg = refused(project, run, tmp_path, spec, "unknown key 'colour' in the spec's top level")
    assert "allowed keys are" in msg


def test_unknown_source_key(project, run, tmp_path) -> None:
    spec = project.spec(source_extra="sheet = 2")
    refused(project, run, tmp_path, spec, "unknown key 'sheet' in [source]")


def test_unknown_population_key(project, run, tmp_path) -> None:
    spec = project.spec(population_extra='weights = "w"')
    refused(project, run, tmp_path, spec, "unknown key 'weights' in [population]")


def test_unknown_qi_key(project, run, tmp_path) -> None:
    qi = '[[qi]]\nname = "age"\nkind = "integer"\nmin = 0\nmax = 120\nwidht = 5\n'
    spec = project.spec(qis=(qi,))
    refused(project, run, tmp_path, spec, "unknown key 'widht' in [[qi]] 'age'")


def test_missing_spec_file(project, run, tmp_path) -> None:
    refused(project, run, tmp_path, project.dir / "nope.toml", "spec file", commands=("validate", "materialize"))


def test_spec_not_toml(project, run, tmp_path) -> None:
    spec = project.write_spec("[source\npath = 1\n")
    refused(project, run, tmp_path, spec, "is not valid TOML")


def test_missing_source_file(project, run, tmp_path) -> None:
    spec = project.spec(source="missing.csv")
    msg = refused(project, run, tmp_path, spec, "missing.csv does not exist")
    assert "[source]" in msg and "relative to the spec file" in msg


def test_missing_population_file(project, run, tmp_path) -> None:
    spec = project.spec(population="census.parquet")
    refused(project, run, tmp_path, spec, "census.parquet does not exist")


def test_missing_qi_column(project, run, tmp_path) -> None:
    qi = '[[qi]]\nname = "ethnicity"\nkind = "category"\nvalues = ["A", "B"]\n'
    spec = project.spec(qis=(qi,))
    msg = refused(project, run, tmp_path, spec, "has no column 'ethnicity' for QI 'ethnicity'")
    assert "its columns are patient_id, age, sex, race, zip, diagnosis" in msg  # lists the columns there are


def test_missing_qi_column_via_column_key(project, run, tmp_path) -> None:
    qi = '[[qi]]\nname = "sex"\ncolumn = "gender"\nkind = "category"\nvalues = ["Female", "Male"]\n'
    spec = project.spec(qis=(qi,), population=None)
    refused(project, run, tmp_path, spec, "has no column 'gender' for QI 'sex'")


# -- values against domains ---------------------------------------------------------------------

def shown_values(message: str) -> list[str]:
    found = re.search(r"\(e\.g\. (.*?)\); widen", message)
    assert found, message
    return re.findall(r"'([^']*)'", found.group(1))


def test_integer_values_outside_the_domain(project, run, tmp_path) -> None:
    qi = '[[qi]]\nname = "age"\nkind = "integer"\nmin = 0\nmax = 60\n'
    spec = project.spec(qis=(qi,), population=None)
    msg = refused(project, run, tmp_path, spec, "outside the declared domain")
    ages = [a for a in project.source.column("age").to_pylist() if a > 60]
    assert len(set(ages)) > 5
    assert f"{len(ages)} record(s) in {len(set(ages))} distinct value(s) of column 'age'" in msg
    shown = shown_values(msg)
    assert len(shown) == 5
    assert all(int(v) > 60 for v in shown)
    counts = Counter(ages)
    assert [counts[int(v)] for v in shown] == sorted((counts[int(v)] for v in shown), reverse=True)
    assert "widen the domain" in msg


def test_category_values_outside_the_domain(project, run, tmp_path) -> None:
    qi = '[[qi]]\nname = "race"\nkind = "category"\nvalues = ["White", "Black"]\n'
    spec = project.spec(qis=(qi,), population=None)
    msg = refused(project, run, tmp_path, spec, "outside the declared domain")
    races = [r for r in project.source.column("race").to_pylist() if r not in ("White", "Black")]
    assert f"{len(races)} record(s) in 2 distinct value(s) of column 'race'" in msg
    assert sorted(shown_values(msg)) == ["Asian", "Other"]


@pytest.mark.slow
def test_non_integer_age_values(project, run, tmp_path) -> None:
    t = project.source
    ages = pa.array([f"{a}.5" if i < 3 else str(a) for i, a in enumerate(t.column("age").to_pylist())])
    project.write_csv(t.set_column(1, "age", ages), "fractional.csv")
    spec = project.spec(source="fractional.csv", population=None)
    msg = refused(project, run, tmp_path, spec, "outside the declared domain")
    assert "3 record(s)" in msg


def with_race_nulls(project, rows=(3, 10, 250)) -> pa.Table:
    race = project.source.column("race").to_pylist()
    for i in rows:
        race[i] = None
    return project.source.set_column(3, "race", pa.array(race, pa.string()))


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_nulls_in_a_qi(project, run, tmp_path, fmt: str) -> None:
    table = with_race_nulls(project)
    name = f"nulls.{fmt}"
    project.write_csv(table, name) if fmt == "csv" else project.write_parquet(table, name)
    spec = project.spec(source=name)
    msg = refused(project, run, tmp_path, spec, "column 'race' has 3 NULL value(s)")
    assert 'nulls = "category"' in msg


def race_qi(extra: str = "") -> str:
    return '[[qi]]\nname = "race"\nkind = "category"\nvalues = ["White", "Black", "Asian", "Other"]\n' + extra


@pytest.mark.slow
@pytest.mark.parametrize("label", [None, "unknown"])
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_nulls_as_a_category(project, run, tmp_path, label: str | None, fmt: str) -> None:
    """With nulls = "category" the problem loads and NULL is a group of its own."""
    table = with_race_nulls(project)
    name = f"nulls.{fmt}"
    project.write_csv(table, name) if fmt == "csv" else project.write_parquet(table, name)
    extra = 'nulls = "category"\n' + (f'null_label = "{label}"\n' if label else "")
    shown = label or "NULL"
    spec = project.spec(source=name, qis=(project.QI["age"], project.QI["sex"], race_qi(extra), project.QI["zip"]))
    assert f"5 values  White … {shown}" in run("validate", spec).stdout

    keys = {(r["age"], r["sex"], r["race"] or shown, r["zip"]) for r in table.to_pylist()}
    metrics = json.loads(run("evaluate", spec, "-p", "bottom").stdout)
    assert metrics["records"] == 500 and metrics["groups"] == len(keys)

    out = project.dir / "release.parquet"
    run("materialize", spec, "-p", "bottom", "--out", out, "--accept-risk", "test: the original data round-trips")
    released = pq.read_table(out).to_pylist()
    assert [r["race"] for r in released] == [r["race"] or shown for r in table.to_pylist()]
    run("materialize", spec, "-p", "race:top", "--out", out, "--overwrite")
    assert set(pq.read_table(out).column("race").to_pylist()) == {f"White|Black|Asian|Other|{shown}"}
    run("materialize", spec, "-p", "race:cuts=Asian", "--out", out, "--overwrite")
    race = Counter(pq.read_table(out).column("race").to_pylist())
    assert race[f"Asian|Other|{shown}"] == sum(r["race"] in (None, "Asian", "Other") for r in table.to_pylist())


def test_null_label_clashing_with_a_category(project, run, tmp_path) -> None:
    spec = project.spec(qis=(race_qi('nulls = "category"\nnull_label = "Other"\n'),))
    refused(project, run, tmp_path, spec, "null_label 'Other' is also a real category")


def test_nulls_category_only_for_categories(project, run, tmp_path) -> None:
    qi = '[[qi]]\nname = "age"\nkind = "integer"\nmin = 0\nmax = 120\nnulls = "category"\n'
    spec = project.spec(qis=(qi,), population=None)
    refused(project, run, tmp_path, spec, 'nulls = "category" is for category and zip QIs')


def test_duplicate_categories(project, run, tmp_path) -> None:
    qi = '[[qi]]\nname = "race"\nkind = "category"\nvalues = ["White", "Black", "White", "Asian", "Other"]\n'
    spec = project.spec(qis=(qi,))
    msg = refused(project, run, tmp_path, spec, "duplicate categories 'White'")
    assert "list every category once" in msg


@pytest.mark.slow
def test_empty_source(project, run, tmp_path) -> None:
    (project.dir / "empty.csv").write_text("patient_id,age,sex,race,zip,diagnosis\n", encoding="utf-8")
    spec = project.spec(source="empty.csv")
    refused(project, run, tmp_path, spec, "has no rows; nothing to de-identify")


@pytest.mark.slow
def test_empty_parquet_source(project, run, tmp_path) -> None:
    project.write_parquet(project.source.slice(0, 0), "empty.parquet")
    spec = project.spec(source="empty.parquet")
    refused(project, run, tmp_path, spec, "has no rows; nothing to de-identify")


# -- the population -----------------------------------------------------------------------------

def test_population_missing_a_qi_column(project, run, tmp_path) -> None:
    project.write_parquet(project.population.drop_columns(["race"]), "census.parquet")
    spec = project.spec(population="census.parquet")
    msg = refused(project, run, tmp_path, spec, "has no column 'race' for QI 'race'")
    assert msg.startswith("error: population ")


def test_population_missing_the_count_column(project, run, tmp_path) -> None:
    spec = project.spec(count="people")
    refused(project, run, tmp_path, spec, "has no count column 'people'")


def with_counts(project, values: dict[int, object], type_: pa.DataType) -> pa.Table:
    counts = project.population.column("count").to_pylist()
    for i, v in values.items():
        counts[i] = v
    return project.population.set_column(4, "count", pa.array(counts, type_))


@pytest.mark.slow
def test_population_negative_counts(project, run, tmp_path) -> None:
    project.write_parquet(with_counts(project, {0: -1, 5: -3, 99: -40}, pa.int64()), "census.parquet")
    spec = project.spec(population="census.parquet")
    msg = refused(project, run, tmp_path, spec, "population count column 'count' has 3 negative count(s)")
    assert ">= 0" in msg


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_population_non_integer_counts(project, run, tmp_path, fmt: str) -> None:
    table = with_counts(project, {1: 2.5, 7: 0.25}, pa.float64())
    name = f"census.{fmt}"
    project.write_parquet(table, name) if fmt == "parquet" else project.write_csv(table, name)
    spec = project.spec(population=name)
    msg = refused(project, run, tmp_path, spec, "has 2 non-integer count(s)")
    assert "whole people" in msg


@pytest.mark.slow
def test_population_null_counts(project, run, tmp_path) -> None:
    project.write_parquet(with_counts(project, {2: None}, pa.int64()), "census.parquet")
    spec = project.spec(population="census.parquet")
    refused(project, run, tmp_path, spec, "has 1 NULL count(s)")


def test_population_text_counts(project, run, tmp_path) -> None:
    table = project.population.set_column(
        4, "count", pc.cast(project.population.column("count"), pa.string()))
    project.write_parquet(table, "census.parquet")
    spec = project.spec(population="census.parquet")
    refused(project, run, tmp_path, spec, "it must hold numbers")


# -- policies ----------------------------------------------------------------------------------------

def test_policy_with_wrong_bits(project, run, tmp_path) -> None:
    msg = refused(project, run, tmp_path, project.spec_path, "QI 'sex' needs 1 bits", commands=POLICY_USERS,
                  policy="sex:101")
    assert "'101'" in msg


def test_policy_with_wrong_bits_long(project, run, tmp_path) -> None:
    refused(project, run, tmp_path, project.spec_path, "QI 'age' needs 120 bits", commands=POLICY_USERS,
            policy="age:" + "01" * 30)


def test_policy_naming_an_unknown_qi(project, run, tmp_path) -> None:
    msg = refused(project, run, tmp_path, project.spec_path, "unknown QI 'weight'", commands=POLICY_USERS,
                  policy="age:top|weight:top")
    assert "age, sex, race, zip" in msg


def test_policy_with_a_bad_cut(project, run, tmp_path) -> None:
    refused(project, run, tmp_path, project.spec_path, "cut '200' for QI 'age'", commands=POLICY_USERS,
            policy="age:cuts=18,200")


def test_policy_without_colon(project, run, tmp_path) -> None:
    refused(project, run, tmp_path, project.spec_path, "has no ':'", commands=POLICY_USERS, policy="age")


# -- encodings ---------------------------------------------------------------------------------------

LATIN1_COLUMNS = DEFAULT_COLUMNS + 'keep = ["name"]\n'  # the roles of latin1_csv's columns


def latin1_csv(project, name: str, rows: int, bad_row: int, column: str) -> Path:
    """The source as CSV with one latin-1 byte in ``column`` of row ``bad_row``."""
    src = project.source.to_pylist()
    lines = ["patient_id,age,sex,race,zip,diagnosis,name"]
    for i in range(rows):
        r = src[i % len(src)]
        race = "Whit\xe9" if (column == "race" and i == bad_row) else r["race"]
        person = "Jos\xe9" if (column == "name" and i == bad_row) else "Ann"
        lines.append(f"{i},{r['age']},{r['sex']},{race},{r['zip']},{r['diagnosis']},{person}")
    path = project.dir / name
    path.write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    return path


@pytest.mark.parametrize("column", ["name", "race"])
def test_non_utf8_csv(project, run, tmp_path, column: str) -> None:
    latin1_csv(project, "latin1.csv", 500, 7, column)
    spec = project.spec(source="latin1.csv", columns=LATIN1_COLUMNS)
    msg = refused(project, run, tmp_path, spec, "is not UTF-8; re-encode it as UTF-8")
    assert "latin1.csv" in msg


def test_non_utf8_population_csv(project, run, tmp_path) -> None:
    rows = ["age,sex,race,zip,count", "30,F\xe9male,White,37201,3"]
    rows += [f"{r['age']},{r['sex']},{r['race']},{r['zip']},{r['count']}"
             for r in project.population.slice(0, 300).to_pylist()]
    (project.dir / "census.csv").write_bytes("\n".join(rows).encode("latin-1"))
    spec = project.spec(population="census.csv")
    refused(project, run, tmp_path, spec, "population file")


def test_non_utf8_qi_value_past_the_sniffed_rows(project, run, tmp_path) -> None:
    """DuckDB sniffs the first rows only; a bad byte further down is found by the full scan."""
    latin1_csv(project, "latin1.csv", 40_000, 39_990, "race")
    spec = project.spec(source="latin1.csv", columns=LATIN1_COLUMNS)
    refused(project, run, tmp_path, spec, "latin1.csv is not UTF-8; re-encode it as UTF-8",
            commands=("validate", "materialize"))


@pytest.mark.slow
@pytest.mark.parametrize("target", ["materialize", "materialize-duckdb"])
def test_non_utf8_other_column_past_the_sniffed_rows(project, run, tmp_path, target: str) -> None:
    """A column outside the QIs is first read in full when writing: still one line, nothing written."""
    latin1_csv(project, "latin1.csv", 40_000, 39_990, "name")
    spec = project.spec(source="latin1.csv", columns=LATIN1_COLUMNS)
    refused(project, run, tmp_path, spec, "latin1.csv is not UTF-8; re-encode it as UTF-8", commands=(target,))


# -- outputs and dialects --------------------------------------------------------------------------------

def test_output_exists(project, run, tmp_path) -> None:
    out = project.dir / "release.parquet"
    out.write_bytes(b"keep me")
    refused(project, run, tmp_path, project.spec_path, "already exists; pass --overwrite",
            commands=("materialize",))
    assert out.read_bytes() == b"keep me"


def test_output_equal_to_the_source(project, run, tmp_path) -> None:
    for out in (project.source_csv, project.dir / "sub" / ".." / "source.csv", project.population_path):
        before = project.files()
        result = run("materialize", project.spec_path, "-p", POLICY, "--out", out, "--overwrite", expect=2)
        assert "is an input of the spec; write the de-identified data elsewhere" in result.stderr
        assert len(result.stderr.splitlines()) == 1
        assert project.files() == before


def test_output_folder_missing(project, run, tmp_path) -> None:
    for out in ("nope/release.parquet", "nope/release.duckdb"):
        result = run("materialize", project.spec_path, "-p", POLICY, "--out", project.dir / out, expect=2)
        assert "output folder" in result.stderr and "does not exist" in result.stderr
    result = run("view", project.spec_path, "-p", POLICY, "--db", tmp_path / "nope" / "a.duckdb", "--view", "v",
                 expect=2)
    assert "does not exist" in result.stderr
    assert not (project.dir / "nope").exists() and not (tmp_path / "nope").exists()


def test_output_not_a_duckdb_file(project, run, tmp_path) -> None:
    junk = tmp_path / "junk.duckdb"
    junk.write_text("not a database", encoding="utf-8")
    for args in (("materialize", project.spec_path, "-p", POLICY, "--out", junk),
                 ("view", project.spec_path, "-p", POLICY, "--db", junk, "--view", "v")):
        result = run(*args, expect=2)
        assert "as a DuckDB database" in result.stderr and len(result.stderr.splitlines()) == 1
    assert junk.read_text(encoding="utf-8") == "not a database"


def test_output_unknown_extension(project, run, tmp_path) -> None:
    before = project.files()
    result = run("materialize", project.spec_path, "-p", POLICY, "--out", project.dir / "release.xlsx", expect=2)
    assert "cannot tell the output format" in result.stderr and "--format" in result.stderr
    assert project.files() == before


def test_unknown_dialect(project, run) -> None:
    result = run("compile", project.spec_path, "-p", POLICY, "--dialect", "cobol", expect=2)
    assert result.stderr.splitlines() == [
        "error: unknown SQL dialect 'cobol'; try one of duckdb, postgres, spark, snowflake, bigquery, trino, "
        "sqlite, mysql, tsql"
    ]
    assert result.stdout == ""


# -- several problems at once --------------------------------------------------------------------------

def test_validate_reports_every_spec_problem(project, run, tmp_path) -> None:
    qis = ('[[qi]]\nname = "age"\nkind = "integer"\nmin = 10\nmax = 5\n',
           '[[qi]]\nname = "race"\nkind = "category"\nvalues = ["A", "A"]\nnulls = "maybe"\n',
           '[[qi]]\nname = "zip"\nkind = "postcode"\n')
    spec = project.spec(top='colour = "blue"', source="missing.csv", qis=qis)
    result = run("validate", spec, expect=2)
    errors = result.stderr.splitlines()
    fragments = ["unknown key 'colour'", "missing.csv does not exist", "min <= max", "duplicate categories 'A'",
                 'nulls must be "error" or "category"', "kind = 'postcode'"]
    assert len(errors) == len(fragments), errors
    for fragment in fragments:
        assert sum(fragment in e for e in errors) == 1, (fragment, errors)
    # the other commands say the same on one line
    result = run("materialize", spec, "-p", "top", "--out", project.dir / "o.parquet", expect=2)
    assert result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1
    assert all(f in result.stderr for f in fragments)


def test_validate_reports_every_data_problem(project, run, tmp_path) -> None:
    t = with_race_nulls(project, rows=(4,))
    ages = t.column("age").to_pylist()
    ages[0] = 130
    project.write_parquet(t.set_column(1, "age", pa.array(ages)), "dirty.parquet")
    project.write_parquet(with_counts(project, {0: -2, 1: 1.5}, pa.float64()), "census.parquet")
    spec = project.spec(source="dirty.parquet", population="census.parquet")
    before = project.files()
    result = run("validate", spec, expect=2)
    errors = result.stderr.splitlines()
    fragments = ["QI 'age': 1 record(s) in 1 distinct value(s)", "column 'race' has 1 NULL value(s)",
                 "1 negative count(s)", "1 non-integer count(s)"]
    assert len(errors) == len(fragments), errors
    for fragment in fragments:
        assert sum(fragment in e for e in errors) == 1, (fragment, errors)
    assert project.files() == before


def test_validate_reports_every_missing_column(project, run, tmp_path) -> None:
    project.write_parquet(project.population.drop_columns(["sex", "zip"]), "census.parquet")
    qi = '[[qi]]\nname = "height"\nkind = "integer"\nmin = 0\nmax = 300\n'
    spec = project.spec(population="census.parquet", qis=(*project.DEFAULT_QIS, qi))
    result = run("validate", spec, expect=2)
    text = result.stderr
    assert "source" in text and "no column 'height'" in text
    assert "no column 'sex'" in text and "no column 'zip'" in text
    assert len(text.splitlines()) == 4  # height in source and population, sex, zip


def test_no_traceback_for_an_engine_failure(project, run, tmp_path) -> None:
    (project.dir / "broken.parquet").write_bytes(b"PAR1 this is not parquet")
    spec = project.spec(source="broken.parquet")
    refused(project, run, tmp_path, spec, "cannot read source")


def test_json_of_a_valid_spec_is_unaffected(project, run) -> None:
    # sanity: the same folder without the faults evaluates fine
    data = json.loads(run("evaluate", project.spec_path, "-p", POLICY).stdout)
    assert data["records"] == 500
