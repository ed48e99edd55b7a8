"""``deid-sql init`` on real-shaped extracts (issue 42): roles read from the values, not the names alone.

A testing log has a row per test, so its patient id repeats (the ``[person]`` key, pseudonymized); a
``yes``/``no`` column is written with the data's spellings; ``clinic_name`` holding three clinics is a
place (a category QI), not an identifier; ``test_id`` holding two codes is a code, not a record key; a
column of person names is an identifier wherever it sits; ``C1/C2`` is a column like any other."""

from __future__ import annotations

import csv
import datetime as dt
import random
import secrets
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from deid_sql.starter.detect import Proposal, propose
from deid_sql.starter.persons import SECRET_ENV
from deid_sql.starter.profile import ColumnProfile
from deid_sql.starter.values import few, flag, person_name, person_names

FIRST = ["Anna", "Ben", "Carla", "David", "Eva", "Frank", "Grace", "Hugo", "Ines", "Jonas", "Karl", "Lena", "Mona",
         "Nils", "Olga", "Paul"]
LAST = ["Smith", "Jones", "Miller", "Brown", "Garcia", "Lopez", "Wilson", "Taylor", "O'Brien", "Smith-Jones"]
CLINICS = ["North Clinic", "South Clinic", "East Clinic"]


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pseudonyms' key, as the init summary tells the user to export it."""
    monkeypatch.setenv(SECRET_ENV, secrets.token_hex(32))


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def log_rows(patients: int = 120, seed: int = 1, dates: bool = True, clinic_moves: bool = True,
                null_keys: int = 0) -> list[dict[str, Any]]:
    """A row per test: 1 to 4 tests per patient, the patient's name, age and marital status on each
    of their rows; a clinic per patient (some patients tested at a second one); a yes/no result."""
    rng = random.Random(seed)
    rows = []
    for p in range(patients):
        name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        age, married, clinic = rng.randint(20, 80), rng.choice(["yes", "no"]), rng.choice(CLINICS)
        for t in range(rng.randint(1, 4)):
            row = {"patient_id": f"P{p:05d}" if p >= null_keys else "", "patient_name": name,
                   "C1/C2": rng.choice(["a", "b", "c"]),
                   "clinic_name": rng.choice(CLINICS) if clinic_moves and t == 3 else clinic,
                   "test_id": rng.choice(["T1", "T2"]), "age": age, "married": married,
                   "positive": rng.choice(["Y", "N"])}
            if dates:
                row["test_date"] = (dt.date(2024, 1, 1) + dt.timedelta(days=7 * t + p % 5)).isoformat()
            rows.append(row)
    return rows


def init(run, data: Path) -> tuple[dict[str, Any], str, str]:  # type: ignore[no-untyped-def]
    """init, then the spec read back: (TOML, its text, init's summary)."""
    done = run("init", data)
    spec = data.with_suffix(".toml")
    text = spec.read_text(encoding="utf-8")
    return tomllib.loads(text), text, done.stdout


def qis(raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {q.get("column", q["name"]): q for q in raw.get("qi", [])}


def comment_of(text: str, column: str) -> str:
    """The comment beside a column listed under [columns]."""
    line = next(line for line in text.splitlines() if line.startswith(f'    "{column}",'))
    return line.split("#", 1)[1]


# -- all at once ------------------------------------------------------------------------------------------------

def test_a_log_rows_gives_a_spec_that_validates_untouched_and_releases_persons(run, tmp_path: Path) -> None:
    data = write_csv(tmp_path / "tests.csv", log_rows())
    raw, text, summary = init(run, data)
    assert raw["person"] == {"column": "patient_id", "order": "test_date"}
    assert raw["columns"]["pseudonymize"] == ["patient_id"] and raw["columns"]["secret_env"] == SECRET_ENV
    assert sorted(raw["columns"]["drop"]) == sorted(["patient_name", "C1/C2", "test_id", "positive"])
    found = qis(raw)
    assert list(found) == ["clinic_name", "age", "married", "test_date"]
    assert found["married"]["values"] == ["no", "yes"]  # the data's spellings, not booleans
    assert found["clinic_name"]["values"] == sorted(CLINICS) and found["clinic_name"]["kind"] == "category"
    assert found["clinic_name"]["per_person"] == "first"  # some patients were tested at a second clinic
    assert "per_person" not in found["age"] and "per_person" not in found["married"]
    assert "the values look like person names" in comment_of(text, "patient_name")
    assert "a code, not a record key" in comment_of(text, "test_id")
    assert not any(name in text for name in ("Anna Smith", "Ben Jones"))  # a name shows its shape only
    assert "person        patient_id (120 persons over" in summary and f"export {SECRET_ENV}=" in summary
    checked = run("validate", data.with_suffix(".toml"))
    assert "120 persons ([person] patient_id)" in checked.stdout
    released = run("anonymize", data.with_suffix(".toml"), "--min-k", "2", "--out", tmp_path / "out.parquet")
    assert "released 120 persons" in released.stdout
    table = pq.read_table(tmp_path / "out.parquet")
    assert "patient_name" not in table.column_names and "test_id" not in table.column_names
    keys = set(table.column("patient_id").to_pylist())
    assert len(keys) == 120 and not keys & {f"P{p:05d}" for p in range(120)}  # pseudonymized


def test_without_the_key_validate_says_what_to_export_in_one_line(run, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    data = write_csv(tmp_path / "tests.csv", log_rows())
    run("init", data)
    monkeypatch.delenv(SECRET_ENV)
    refused = run("validate", data.with_suffix(".toml"), expect=2)
    assert f"export {SECRET_ENV}" in refused.stderr and "Traceback" not in refused.output


# -- yes/no ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("yes, no", [("yes", "no"), ("Y", "N"), ("true", "false"), ("TRUE", "FALSE"), ("1", "0")])
def test_a_yes_no_category_keeps_the_data_spellings(run, tmp_path: Path, yes: str, no: str) -> None:
    rng = random.Random(3)
    rows = [{"age": rng.randint(20, 70), "married": rng.choice([yes, no]), "smoker": rng.choice([yes, no])}
            for _ in range(200)]
    raw, text, _ = init(run, write_csv(tmp_path / "survey.csv", rows))
    assert qis(raw)["married"]["values"] == sorted([yes, no])
    # a yes/no column nobody has looked at stays dropped, its note in the data's spellings
    assert comment_of(text, "smoker").startswith(f" review: a yes/no column ({', '.join(sorted([yes, no]))})")
    run("validate", tmp_path / "survey.toml")


def test_a_boolean_parquet_column_is_a_category_of_its_text(run, tmp_path: Path) -> None:
    pq.write_table(pa.table({"age": [20 + i % 40 for i in range(100)], "married": [i % 3 == 0 for i in range(100)]}),
                   tmp_path / "survey.parquet")
    raw, _, _ = init(run, tmp_path / "survey.parquet")
    assert qis(raw)["married"]["values"] == ["false", "true"]  # how the load spells a BOOLEAN as text
    run("validate", tmp_path / "survey.toml")


def test_a_yes_no_column_for_review_says_so() -> None:
    assert flag(profile("smoker", "VARCHAR", [("Y", 60), ("N", 40)])) == ["N", "Y"]
    assert flag(profile("smoker", "BOOLEAN", [(True, 60), (False, 40)])) == ["False", "True"]
    assert flag(profile("grade", "VARCHAR", [("A", 60), ("B", 40)])) is None
    assert flag(profile("smoker", "VARCHAR", [("Y", 60), ("N", 30), ("?", 10)])) is None
    (proposal,) = proposed(profile("smoker", "VARCHAR", [("Y", 60), ("N", 40)]))
    assert proposal.group == "review" and proposal.reason.startswith("review: a yes/no column (N, Y)")


# -- names ---------------------------------------------------------------------------------------------------------

def profile(name: str, sql_type: str, top: list[tuple[Any, int]], rows: int | None = None,
            distinct: int | None = None) -> ColumnProfile:
    """A column's profile as ``profile`` reads it, from its most common values."""
    total = sum(n for _, n in top)
    return ColumnProfile(name, sql_type, rows if rows is not None else total, total,
                         distinct if distinct is not None else len(top), top=top)


def proposed(*profiles: ColumnProfile) -> list[Proposal]:
    return propose(profiles, lambda column, width: sorted({str(v) for p in profiles if p.name == column
                                                           for v, _ in p.top}))


def names(count: int, rows_each: int = 1) -> list[tuple[Any, int]]:
    return [(f"{FIRST[i % len(FIRST)]} {LAST[i // len(FIRST) % len(LAST)]}", rows_each) for i in range(count)]


def test_person_names_are_capitalised_words() -> None:
    for text in ("Anna Smith", "Smith, Anna", "J. O'Brien", "Mary-Ann McDonald", "José Núñez", "Anna B. Smith"):
        assert person_name(text), text
    for text in ("Anna", "anna smith", "A B", "ANNA SMITH", "T1", "a@b.org", "North Clinic 2", ""):
        assert not person_name(text), text


def test_person_names_are_an_identifier_wherever_they_sit() -> None:
    contact, = proposed(profile("contact", "VARCHAR", names(60, 2)))
    assert contact.group == "identifier" and "look like person names" in contact.reason
    assert person_names(profile("x", "VARCHAR", names(60, 4)))  # a person's name on each of their rows
    assert not person_names(profile("x", "VARCHAR", names(60, 30)))  # 30 rows each: not one person's
    assert not person_names(profile("x", "VARCHAR", names(5, 2)))  # five values: too few to tell


def test_a_name_column_of_a_handful_of_things_is_not_an_identifier() -> None:
    clinic, drug, who = proposed(
        profile("clinic_name", "VARCHAR", [(c, 300) for c in CLINICS]),
        profile("drug_name", "VARCHAR", [("Aspirin", 300), ("Ibuprofen", 200)]),
        profile("name", "VARCHAR", names(200)))
    assert clinic.group == "qi" and clinic.qi is not None and clinic.qi.kind == "category"
    assert drug.group == "review" and "names of things, not of persons" in drug.reason
    assert who.group == "identifier"


def test_a_persons_name_is_an_identifier_whatever_its_values() -> None:
    for column in ("patient_name", "first_name", "surname", "username"):
        (proposal,) = proposed(profile(column, "VARCHAR", [("Ann", 300), ("Bob", 200)]))
        assert proposal.group == "identifier", column


# -- ids -------------------------------------------------------------------------------------------------------------

def test_an_id_with_a_handful_of_values_over_many_rows_is_a_code() -> None:
    test_id, visit_id = proposed(profile("test_id", "VARCHAR", [("T1", 80), ("T2", 66)]),
                                 profile("visit_id", "VARCHAR", [(f"V{i}", 2) for i in range(73)]))
    assert test_id.group == "review" and test_id.qi is None  # never leaves unreviewed
    assert 'a code, not a record key' in test_id.reason and 'values = ["T1", "T2"]' in test_id.reason
    assert visit_id.group == "identifier"
    assert few(profile("x", "VARCHAR", [("a", 10), ("b", 10)])) and not few(profile("x", "VARCHAR", [("a", 4)] * 3))
    # a patient's id stays an identifier however few its values (three patients with many tests each)
    (patient,) = proposed(profile("patient_id", "VARCHAR", [("P1", 50), ("P2", 50), ("P3", 40)]))
    assert patient.group == "identifier"


# -- places ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("column", ["clinic", "Ward", "site_id", "department", "care_unit", "facility_name",
                                    "Hospital"])
def test_where_a_person_was_seen_is_a_category_qi(column: str) -> None:
    (proposal,) = proposed(profile(column, "VARCHAR", [("A", 50), ("B", 40), ("C", 10)]))
    assert proposal.group == "qi" and proposal.qi is not None and proposal.qi.kind == "category", proposal.reason
    assert "where a person was seen" in proposal.reason


@pytest.mark.parametrize("column, top", [
    ("hospital_address", [("1 Main St", 50), ("2 High St", 50)]),  # a place smaller than a state
    ("city", [("Springfield", 50), ("Shelbyville", 50)]),
    ("clinic", [(f"c{i}", 2) for i in range(150)]),  # many values: not a handful of places
    ("clinic_phone", [("555-0100", 50), ("555-0101", 50)]),  # a detail of the place, not the place
])
def test_places_smaller_than_a_state_or_with_many_values_stay_dropped(column: str, top: list[tuple[Any, int]]) -> None:
    (proposal,) = proposed(profile(column, "VARCHAR", top))
    assert proposal.qi is None and proposal.group in ("identifier", "review")


# -- persons ---------------------------------------------------------------------------------------------------------

def test_ids_that_do_not_repeat_give_no_person(run, tmp_path: Path) -> None:
    rows = [{"patient_id": f"P{i:04d}", "age": 20 + i % 50, "sex": "FM"[i % 2]} for i in range(300)]
    raw, text, _ = init(run, write_csv(tmp_path / "once.csv", rows))
    assert "person" not in raw and "pseudonymize" not in raw["columns"] and "secret_env" not in raw["columns"]
    assert raw["columns"]["drop"] == ["patient_id"]
    run("validate", tmp_path / "once.toml")


def test_a_key_with_null_rows_is_no_person_and_says_why(run, tmp_path: Path) -> None:
    raw, text, _ = init(run, write_csv(tmp_path / "log.csv", log_rows(null_keys=3)))
    assert "person" not in raw and "patient_id" in raw["columns"]["drop"]
    assert "a [person] key needs one on every row" in comment_of(text, "patient_id")


def test_one_person_key_the_patients_preferred(run, tmp_path: Path) -> None:
    rows = log_rows(dates=False, clinic_moves=False)
    for i, row in enumerate(rows):  # a batch id repeating over rows, left of the patient's
        row["batch_id"] = f"B{i // 3:04d}"
    rows = [{"batch_id": r.pop("batch_id"), **r} for r in rows]
    raw, text, _ = init(run, write_csv(tmp_path / "log.csv", rows))
    assert raw["person"] == {"column": "patient_id"} and raw["columns"]["pseudonymize"] == ["patient_id"]
    assert "one column names a person: 'patient_id'" in comment_of(text, "batch_id")
    run("validate", tmp_path / "log.toml")


def test_a_qi_varying_within_a_person_without_dates(run, tmp_path: Path) -> None:
    """No date orders a person's rows: an age that varies takes the person's least value, a clinic
    that varies is dropped for review, saying why; the spec validates and releases persons."""
    rows = log_rows(dates=False)
    for row in rows[::5]:
        row["age"] += 1  # a birthday between two tests
    raw, text, _ = init(run, write_csv(tmp_path / "log.csv", rows))
    assert raw["person"] == {"column": "patient_id"}
    assert qis(raw)["age"]["per_person"] == "min" and "clinic_name" not in qis(raw)
    assert "varies within" in comment_of(text, "clinic_name") and "[person] order" in comment_of(text, "clinic_name")
    run("validate", tmp_path / "log.toml")
    assert "released 120 persons" in run("anonymize", tmp_path / "log.toml", "--min-k", "2", "--out",
                                         tmp_path / "out.parquet").stdout


def test_an_id_repeating_on_a_few_rows_only_is_no_person(run, tmp_path: Path) -> None:
    """Fewer distinct values than rows is not enough: most values must be on more than one row (a
    record key with a few duplicated rows is not a person's key)."""
    rows = [{"patient_id": f"P{i:04d}", "age": 20 + i % 50} for i in range(300)]
    rows += [{"patient_id": f"P{i:04d}", "age": 20 + i % 50} for i in range(0, 300, 10)]  # 30 of 300 twice
    raw, _, _ = init(run, write_csv(tmp_path / "dups.csv", rows))
    assert "person" not in raw and raw["columns"]["drop"] == ["patient_id"]
    rows += [{"patient_id": f"P{i:04d}", "age": 20 + i % 50} for i in range(300) if i % 10 and i % 3]  # most twice
    raw, _, _ = init(run, write_csv(tmp_path / "twice.csv", rows))
    assert raw["person"] == {"column": "patient_id"}


def test_a_birth_date_does_not_order_a_persons_rows(run, tmp_path: Path) -> None:
    rng = random.Random(5)
    rows = []
    for p in range(80):
        born = dt.date(1950, 1, 1) + dt.timedelta(days=rng.randint(0, 20_000))
        for v in range(rng.randint(1, 3)):
            rows.append({"patient_id": f"P{p:03d}", "birth_date": born.isoformat(), "sex": rng.choice("FM"),
                         "visit_date": (dt.date(2023, 1, 1) + dt.timedelta(days=30 * v + p)).isoformat()})
    raw, _, _ = init(run, write_csv(tmp_path / "visits.csv", rows))
    assert raw["person"] == {"column": "patient_id", "order": "visit_date"}
    found = qis(raw)
    assert found["sex"]["per_person"] == "first" and found["visit_date"]["per_person"] == "first"
    assert "per_person" not in found["birth_date"]  # the same on each of a person's rows
    run("validate", tmp_path / "visits.toml")


def test_a_population_size_is_compared_with_the_persons(run, tmp_path: Path) -> None:
    rows = log_rows(patients=50)
    data = write_csv(tmp_path / "log.csv", rows)
    assert len(rows) > 60
    run("init", data, "--population", "60")  # fewer than the rows, more than the persons
    refused = run("init", data, "--population", "40", "--out", tmp_path / "x.toml", expect=2)
    assert "smaller than the data's 50 persons" in refused.stderr


# -- any column name -----------------------------------------------------------------------------------------------

# printable names a CSV header holds: quotes, commas, slashes, spaces, unicode, leading digits, SQL keywords
CSV_CHARS = st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"))
CSV_NAME = st.one_of(st.text(CSV_CHARS, min_size=1, max_size=16),
                     st.sampled_from(["C1/C2", "select", "FROM", "1st visit", 'say "hi"', "it's", "a,b", "日本 клиника",
                                      "group by", "x\\y", "..", "#", "  padded  ", "e\u0301"]))


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(CSV_NAME, min_size=1, max_size=4, unique_by=lambda n: n.strip().lower()))
@example(["C1/C2"])
@example(['pa"tient', "select", "1st", "C1/C2"])
def test_any_column_names_of_a_csv_round_trip_through_init_and_validate(run, names: list[str]) -> None:
    """A testing log whose every column name is arbitrary (the person key's too, with " id" appended
    so it reads as an id): init writes a spec with [person] that validate accepts untouched."""
    with tempfile.TemporaryDirectory() as tmp:
        rows = log_rows(patients=40, dates=False, clinic_moves=False)
        renamed = {"patient_id": f"{names[0]} id", "age": f"{names[0]} age"}
        for i, name in enumerate(names[1:]):
            renamed[["C1/C2", "clinic_name", "married"][i % 3]] = name
        data = write_csv(Path(tmp) / "log.csv", [{renamed.get(k, k): v for k, v in row.items()} for row in rows])
        done = run("init", data, expect=None)
        assert done.exit_code == 0, done.output
        spec = Path(tmp) / "log.toml"
        raw = tomllib.loads(spec.read_text(encoding="utf-8"))
        assert raw["person"]["column"].strip() == renamed["patient_id"].strip(), raw["person"]
        checked = run("validate", spec, expect=None)
        assert checked.exit_code == 0, (names, checked.output, spec.read_text(encoding="utf-8"))
        assert "40 persons" in checked.stdout
