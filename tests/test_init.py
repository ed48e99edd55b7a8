"""``deid-sql init``: a starting spec that validates and releases, on the demo cohort, Adult and a
file whose column names are hostile; what it proposes, what it refuses, and its TOML quoting."""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deid_sql.starter import tomltext
from deid_sql.starter.demo import build_demo
from deid_sql.starter.detect import tokens
from deid_sql.starter.write import criteria_lines

ADULT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult" / "adult.csv"
EVIL = 'a"; drop table x; --'
# the hostile file's columns: quotes, a tab, unicode, SQL keywords, names equal but for case
EMAILS = [f"person{i}@example.org" for i in range(400)]
SSNS = [f"{100 + i % 800:03d}-{10 + i % 89:02d}-{1000 + i:04d}" for i in range(400)]


@pytest.fixture(scope="module")
def cohort(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's cohort and census, small: cohort.parquet and population.parquet."""
    folder = tmp_path_factory.mktemp("cohort")
    build_demo(folder, records=4_000, people=300_000)
    return folder


def hostile_table(rows: int = 400) -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table({
        'Patient "Name"': [f"Person {i}" for i in range(rows)],
        EVIL: [f"note {i % 7}" for i in range(rows)],
        "select": rng.integers(0, 50, rows),
        "Âge du patient": rng.integers(18, 90, rows),
        "Sex": rng.choice(["F", "M"], rows),
        "sex": rng.choice(["female", "male", "unknown"], rows),
        "ZIP code": [f"{z:05d}" for z in rng.choice([2134, 2135, 10001, 10002, 94105], rows)],
        "it's\ttab": rng.choice(["x", "y"], rows),
        "e-mail": EMAILS[:rows],
        "contact": [f"{200 + i % 700}-555-{1000 + i:04d}" for i in range(rows)],
        "ref": SSNS[:rows],
        "Birth Date": [dt.date(1950, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 20_000, rows)],
        "race|eth:nicity": rng.choice(["A|B", "C\\D", "E-F", 'G"H'], rows),
        "@marital": rng.choice(np.array(["single", "married", None], dtype=object), rows),
        "FROM": rng.normal(size=rows),
    })


def released_columns(path: Path) -> list[str]:
    return pq.read_schema(path).names


def optimum(stdout: str) -> str:
    return re.search(r"^optimum\s+(\S+)$", stdout, re.MULTILINE).group(1)  # type: ignore[union-attr]


def release_everything(run, spec: Path, out: Path) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """validate, anonymize (k = 5) and materialize its levels with --report, as the summary says;
    the two release files' columns."""
    run("validate", spec)
    anonymized = run("anonymize", spec, "--min-k", "5", "--max-suppressed-share", "0.05", "--out", out / "anon.parquet",
                     "--report", out / "anon.html")
    levels = optimum(anonymized.stdout)
    run("materialize", spec, "--levels", levels, "--suppress-below", "5", "--out", out / "release.parquet",
        "--report", out / "release.html")
    for name in ("anon.parquet", "anon.html", "release.parquet", "release.html", "release.parquet.release.json"):
        assert (out / name).is_file(), name
    return levels, "gate: passed"


# -- the demo cohort -------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_init_on_the_demo_cohort_validates_and_releases(cohort: Path, run, tmp_path: Path) -> None:
    data = cohort / "cohort.parquet"
    result = run("init", data, "--out", tmp_path / "cohort.toml")
    spec = tmp_path / "cohort.toml"
    raw = tomllib.loads(spec.read_text(encoding="utf-8"))
    qis = {q["name"]: q for q in raw["qi"]}
    assert list(qis) == ["age", "sex", "race", "zip", "admitted"]
    assert (qis["age"]["kind"], qis["age"]["role"], qis["age"]["min"]) == ("integer", "age", 0)
    assert qis["sex"]["values"] == ["Female", "Male"]
    assert (qis["admitted"]["kind"], qis["admitted"]["role"]) == ("date", "date")
    assert qis["zip"]["role"] == "zip" and qis["zip"]["values_from"] == "source"  # hundreds of ZIPs: read, not listed
    assert raw["columns"]["drop"] == ["patient_id", "diagnosis", "systolic_bp"]
    assert raw["population"] == "sample"
    assert raw["release"] == {"min_k": 5, "max_record_risk": 0.2, "no_riskier_than": "safe-harbor"}
    text = spec.read_text(encoding="utf-8")
    assert '"patient_id",  # identifier: the name looks like an identifier (id)' in text
    assert "proposed QI: the name looks like an age; integer 0.." in text
    assert "age (integer 0.." in result.stdout and "patient_id (identifiers)" in result.stdout
    assert f"deid-sql validate {spec}" in result.stdout
    release_everything(run, spec, tmp_path)
    released = released_columns(tmp_path / "release.parquet")
    assert released == ["age", "sex", "race", "zip", "admitted", "deid_suppressed"]


@pytest.mark.slow
def test_a_census_gives_the_population_and_drops_qis_it_lacks(cohort: Path, run, tmp_path: Path) -> None:
    spec = cohort / "with-census.toml"
    run("init", cohort / "cohort.parquet", "--census", cohort / "population.parquet", "count", "--out", spec)
    raw = tomllib.loads(spec.read_text(encoding="utf-8"))
    assert raw["population"] == {"path": "population.parquet", "count": "count"}  # beside the spec: relative
    qis = {q["name"]: q for q in raw["qi"]}
    assert list(qis) == ["age", "sex", "race", "zip"]
    assert qis["zip"]["values_from"] == "population"
    assert "admitted" in raw["columns"]["drop"]  # the census has no admission dates
    assert "the census has no column 'admitted'" in spec.read_text(encoding="utf-8")
    run("validate", spec)
    done = run("materialize", spec, "--policy", "age:every=10|zip:digits=3", "--suppress-below", "5",
               "--out", tmp_path / "r.parquet", "--report", tmp_path / "r.html")
    assert "gate: passed" in done.stdout and (tmp_path / "r.html").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("option", [("--population", "300000"), ("--region", "us-texas")])
def test_a_population_size_or_region_without_a_census(cohort: Path, run, tmp_path: Path,
                                                      option: tuple[str, str]) -> None:
    spec = tmp_path / "nc.toml"
    run("init", cohort / "cohort.parquet", *option, "--out", spec)
    raw = tomllib.loads(spec.read_text(encoding="utf-8"))
    assert raw["risk"] == "benedetti-franconi"
    assert raw["population"] == ({"size": 300_000} if option[0] == "--population" else {"region": "us-texas"})
    assert "no census" in run("validate", spec).stdout


# -- Adult -------------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_init_on_adult(run, tmp_path: Path) -> None:
    if not ADULT.is_file():
        pytest.skip(f"Adult data not available at {ADULT}")
    spec = tmp_path / "adult.toml"
    run("init", ADULT, "--out", spec)
    raw = tomllib.loads(spec.read_text(encoding="utf-8"))
    assert [q["name"] for q in raw["qi"]] == ["sex", "age", "race", "marital-status"]
    assert raw["source"]["path"] == ADULT.resolve().as_posix()  # outside the spec's folder: absolute
    assert set(raw["columns"]["drop"]) == {"education", "native-country", "workclass", "occupation", "salary-class"}
    # Safe Harbor needs a ZIP: the criterion that compares with it is left out, and the spec says why
    assert "no_riskier_than" not in raw["release"]
    assert '# no_riskier_than = "safe-harbor" needs QIs with role "zip" and role "age"' in spec.read_text()
    # ARX's hierarchy files beside the data are attached to the QIs proposed for their columns, and named in
    # the review notes of the columns dropped; anonymize then searches their levels, not only kept and "*"
    folder = ADULT.resolve().parent  # outside the spec's folder: absolute, as the source is
    assert {q["name"]: q.get("hierarchy") for q in raw["qi"]} == {
        n: (folder / f"adult_hierarchy_{n}.csv").as_posix() for n in ("sex", "age", "race", "marital-status")}
    assert f'hierarchy = "{(folder / "adult_hierarchy_education.csv").as_posix()}"' in spec.read_text()
    release_everything(run, spec, tmp_path)
    assert released_columns(tmp_path / "release.parquet") == ["sex", "age", "race", "marital-status",
                                                             "deid_suppressed"]


# -- hostile names -------------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_hostile_column_names_round_trip_and_release(run, tmp_path: Path, fmt: str) -> None:
    table = hostile_table()
    data = tmp_path / f"hostile.{fmt}"
    if fmt == "parquet":
        pq.write_table(table, data)
    else:
        pacsv.write_csv(table, data)
    run("init", data)
    spec = tmp_path / "hostile.toml"
    text = spec.read_text(encoding="utf-8")
    raw = tomllib.loads(text)
    qi_columns = [q.get("column", q["name"]) for q in raw["qi"]]
    # every column named exactly as the engine reads it (the second "sex" reads as sex_1), once
    engine_names = [n if n != "sex" else "sex_1" for n in table.column_names]
    assert sorted(qi_columns + raw["columns"]["drop"]) == sorted(engine_names)
    assert qi_columns == ["Âge du patient", "Sex", "sex_1", "ZIP code", "Birth Date", "race|eth:nicity", "@marital"]
    for identifier in ('Patient "Name"', "e-mail", "contact", "ref"):
        assert identifier in raw["columns"]["drop"], identifier
    assert EVIL in raw["columns"]["drop"] and "FROM" in raw["columns"]["drop"] and "it's\ttab" in raw["columns"]["drop"]
    for q in raw["qi"]:  # QI names a policy text can carry: plain, unique without regard to case
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", q["name"]), q["name"]
    assert len({q["name"].lower() for q in raw["qi"]}) == len(raw["qi"])
    race = next(q for q in raw["qi"] if q.get("column") == "race|eth:nicity")
    assert race["values"] == ["A|B", "C\\D", "E-F", 'G"H']
    marital = next(q for q in raw["qi"] if q.get("column") == "@marital")
    assert (marital["nulls"], marital["null_label"]) == ("category", "NULL")
    assert [q["role"] for q in raw["qi"] if "role" in q] == ["age", "zip", "date"]
    assert "how the engine reads a second column named 'sex' but for case" in text
    # identifiers show their shape, never their values
    assert not any(v in text for v in EMAILS + SSNS + ["Person 1"])
    assert "the values are SSN-like (ddd-dd-dddd); VARCHAR, 400 distinct (one per row), e.g. 999-99-9999" in text
    assert "the values look like phone numbers" in text and "the values look like e-mail" not in text  # by name
    release_everything(run, spec, tmp_path)
    released = released_columns(tmp_path / "release.parquet")
    assert set(released) == set(qi_columns) | {"deid_suppressed"}


# -- refusals --------------------------------------------------------------------------------------------------------

def test_an_existing_spec_is_kept_without_force(cohort: Path, run, tmp_path: Path) -> None:
    spec = tmp_path / "mine.toml"
    spec.write_text("# mine\n", encoding="utf-8")
    refused = run("init", cohort / "cohort.parquet", "--out", spec, expect=2)
    assert refused.stderr.strip() == f"error: {spec} already exists; pass --overwrite to replace it (or --out FILE " \
                                     f"to write another)"
    assert spec.read_text(encoding="utf-8") == "# mine\n"
    run("init", cohort / "cohort.parquet", "--out", spec, "--overwrite")
    assert tomllib.loads(spec.read_text(encoding="utf-8"))["source"]["path"] == (cohort / "cohort.parquet").as_posix()


@pytest.mark.parametrize("args, message", [
    (("missing.parquet",), "DATA missing.parquet does not exist or is not a file"),
    (("{data}", "--population", "10"), "--population 10 is smaller than the data's 4,000 rows"),
    (("{data}", "--census", "{census}", "people"), "has no column 'people' (the count column)"),
    (("{data}", "--census", "{census}", "sex"), "column 'sex' holds VARCHAR; the count column must hold numbers"),
    (("{data}", "--population", "10", "--region", "usa"), "give one of --census, --population and --region"),
    (("{data}", "--out", "nowhere/x.toml"), "output folder nowhere does not exist"),
    (("{data}", "--out", "{data}"), "is the data file itself"),
    (("{data}", "--source-table", "t"), "--source-table is only for DuckDB files"),
])
def test_bad_input_is_one_line_and_writes_nothing(cohort: Path, run, tmp_path: Path, args: tuple[str, ...],
                                                  message: str) -> None:
    data, census = cohort / "cohort.parquet", cohort / "population.parquet"
    before = sorted(p.name for p in tmp_path.iterdir())
    refused = run("init", *(a.format(data=data, census=census) for a in args), expect=2)
    lines = refused.stderr.strip().splitlines()
    assert message in lines[-1] and "Traceback" not in refused.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert not (cohort / "cohort.toml").exists()


def test_a_duckdb_table_needs_its_name(run, tmp_path: Path) -> None:
    import duckdb

    db = tmp_path / "data.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute('CREATE TABLE "my patients" (age INTEGER, gender VARCHAR, note VARCHAR)')
        con.execute("INSERT INTO \"my patients\" SELECT 20 + i % 50, CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END, "
                    "'n' || (i % 3) FROM range(200) t(i)")
    assert "pass --source-table NAME" in run("init", db, expect=2).stderr
    run("init", db, "--source-table", "my patients")
    raw = tomllib.loads((tmp_path / "data.toml").read_text(encoding="utf-8"))
    assert raw["source"] == {"path": "data.duckdb", "table": "my patients"}
    assert [q["name"] for q in raw["qi"]] == ["age", "gender"] and raw["columns"]["drop"] == ["note"]
    run("validate", tmp_path / "data.toml")


# -- the pieces ------------------------------------------------------------------------------------------------------

@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40))
def test_a_toml_string_holds_any_text(text: str) -> None:
    doc = f"# {tomltext.comment(text)}\nname = {tomltext.string(text)}\nlist = {tomltext.array([text, text])}\n"
    assert tomllib.loads(doc) == {"name": text, "list": [text, text]}


def test_names_split_into_words() -> None:
    assert tokens("PatientID") == ["patient", "id"]
    assert tokens("date_of_birth") == ["date", "of", "birth"]
    assert tokens("Âge du patient") == ["age", "du", "patient"]
    assert tokens("zip5") == ["zip"] and tokens("age_1") == ["age"] and tokens("e-mail") == ["e", "mail"]
    assert tokens("SSNNumber") == ["ssn", "number"] and tokens("percentage") == ["percentage"]


def test_the_starting_criteria_are_the_projects() -> None:
    from deid_sql.contract.criteria import STARTING_SET

    assert "[release] " + ", ".join(criteria_lines()) == STARTING_SET
    assert criteria_lines({"age", "date"}) == ["min_k = 5", "max_record_risk = 0.2"]


def test_a_hierarchy_beside_the_data_is_attached_only_when_it_covers_the_domain(run, tmp_path: Path) -> None:
    """ARX's naming (``<data>_hierarchy_<column>.csv``): a file covering every value of the proposed
    QI's domain is attached; one missing values is not, and the QI's comment says why."""
    data = tmp_path / "people.csv"
    data.write_text("age,sex,team\n" + "".join(f"{20 + i % 5},{'FM'[i % 2]},w{i % 3}\n" for i in range(40)),
                    encoding="utf-8")
    (tmp_path / "people_hierarchy_age.csv").write_text(
        "".join(f"{a};{a // 2 * 2}-{a // 2 * 2 + 1};*\n" for a in range(20, 25)), encoding="utf-8")
    (tmp_path / "people_hierarchy_sex.csv").write_text("F;*\n", encoding="utf-8")  # no row for M
    (tmp_path / "people_hierarchy_team.csv").write_text("w0;*\nw1;*\nw2;*\n", encoding="utf-8")
    result = run("init", data)
    spec = tmp_path / "people.toml"
    text = spec.read_text(encoding="utf-8")
    raw = tomllib.loads(text)
    hier = {q["name"]: q.get("hierarchy") for q in raw["qi"]}
    assert hier == {"age": "people_hierarchy_age.csv", "sex": None}
    assert ("people_hierarchy_sex.csv beside the data is not attached: it has no row for 1 of the domain's "
            "values (M)") in text
    assert 'hierarchy = \\"people_hierarchy_team.csv\\"' not in text  # a comment, not an escaped string
    assert 'hierarchy = "people_hierarchy_team.csv" on its [[qi]]' in text
    assert "hierarchy people_hierarchy_age.csv" in result.stdout
    run("validate", spec)
    levels = run("anonymize", spec, "--min-k", "2").stdout
    assert "optimum" in levels


def test_a_sensitive_looking_column_gets_the_attribute_criteria_commented(cohort: Path, run, tmp_path: Path) -> None:
    """diagnosis stays dropped (nobody has reviewed it), its comment says it looks sensitive, and [release]
    proposes max_confidence and min_l, commented with what each means: validate passes on the untouched
    spec, and once diagnosis is listed under sensitive and the two uncommented, it passes too."""
    spec = tmp_path / "cohort.toml"
    run("init", cohort / "cohort.parquet", "--out", spec)
    text = spec.read_text(encoding="utf-8")
    raw = tomllib.loads(text)
    assert "diagnosis" in raw["columns"]["drop"] and "sensitive" not in raw["columns"]
    assert "review: looks like a sensitive attribute (diagnosis: what a released group may reveal" in text
    assert "systolic_bp" not in text.split("# What the released values")[1]  # only diagnosis is named
    tail = text[text.index("[release]"):]
    assert "# What the released values of a sensitive column reveal: diagnosis looks sensitive." in tail
    assert "# max_confidence = 0.5  # at most half of a released group may hold any one value" in tail
    assert "# min_l = 2" in tail and "# every released group holds at least 2 distinct values" in tail
    assert set(raw["release"]) == {"min_k", "max_record_risk", "no_riskier_than"}  # commented: not in force
    run("validate", spec)
    edited = (text.replace('    "diagnosis",', "")
              .replace("\n[columns]\n", '\n[columns]\nsensitive = ["diagnosis"]\n', 1)
              .replace("# max_confidence = 0.5", "max_confidence = 0.5").replace("# min_l = 2 ", "min_l = 2 "))
    spec.write_text(edited, encoding="utf-8")
    criteria = tomllib.loads(edited)["release"]
    assert (criteria["max_confidence"], criteria["min_l"]) == (0.5, 2)
    run("validate", spec)


def test_no_sensitive_looking_column_no_attribute_criteria(run, tmp_path: Path) -> None:
    data = tmp_path / "plain.csv"
    data.write_text("age,sex,score\n" + "".join(f"{20 + i % 50},{'FM'[i % 2]},{i % 7}\n" for i in range(200)),
                    encoding="utf-8")
    run("init", data, "--out", tmp_path / "plain.toml")
    text = (tmp_path / "plain.toml").read_text(encoding="utf-8")
    assert "max_confidence" not in text and "min_l" not in text
