"""Column roles and pseudonymization: every source column declared, nothing passed through by
accident, and pseudonyms that are HMAC-SHA-256 byte for byte on every engine and batch."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from deid_sql.backends import connect
from deid_sql.contract.pseudonym import pads, pads_by_hand, pseudonym, text_of
from deid_sql.contract.roles import ColumnRoles, parse_columns
from deid_sql.errors import DeidError, SpecError
from deid_sql.problem import Problem
from deid_sql.release.output import materialize
from deid_sql.release.plan import plan_of
from deid_sql.spec.file import Spec
from tests.conftest import AGE_QI, DEFAULT_COLUMNS, RACE_QI, SEX_QI, ZIP_QI
from tests.engines import ENGINES, Engine, engine_fixture, engine_params

SECRET_ENV = "DEID_TEST_ROLES_SECRET"
SECRET = "8d4a78ff0366ef6d9f3d9d9242fe047addf7a67b2b93bd1f1491ae1665e9acc1"  # a random key (contract/secret.py)
KEY = SECRET.encode()
POLICY = "age:cuts=18,65|zip:top"
PSEUDONYMIZE = f"""
[columns]
pseudonymize = ["patient_id"]
secret_env = "{SECRET_ENV}"
sensitive = ["diagnosis"]
"""
HOSTILE_VALUES = ["O'Brien", 'say "hi"', "a;b", "--comment", "DROP TABLE x; --", "two\nlines", "naïve café",
                  "日本語", "emoji 🙂", "", " leading space", "SELECT * FROM secrets", "back\\slash", "tab\there"]


@pytest.fixture
def secret(monkeypatch: pytest.MonkeyPatch) -> bytes:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    return KEY


def one_line(result) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


# -- the reference ------------------------------------------------------------------------------

def test_reference_is_rfc2104_hmac() -> None:
    for key in (b"k" * 16, b"x" * 64, b"long key " * 20):  # short, a whole block, hashed first
        for message in (b"", b"42", "é'; --\n🙂".encode()):
            want = hmac.new(key, message, hashlib.sha256).hexdigest()
            assert pads_by_hand(key, message) == want
    assert pseudonym(KEY, 42) == hmac.new(KEY, b"42", hashlib.sha256).hexdigest()
    assert pseudonym(KEY, "42") == pseudonym(KEY, 42)  # a value is hashed as its text
    assert pseudonym(KEY, 42, "integer") == int(pseudonym(KEY, 42)[:15], 16) < 2**60  # type: ignore[index]
    assert pseudonym(KEY, None) is None and text_of(True) == "true"
    assert len(pseudonym(KEY, "x")) == 64 and pseudonym(KEY, "x") != pseudonym(b"another-key-0123456", "x")


# -- parsing [columns] ---------------------------------------------------------------------------

@pytest.mark.parametrize("body, fragment", [
    ('keep = "visit"', "keep must be a list of column names"),
    ('drop = ["a", ""]', "drop must be a list of column names"),
    ('drop = ["a", "a"]', "lists 'a' more than once"),
    ('keep = ["a"]\ndrop = ["a"]', "lists 'a' under both keep and drop"),
    ('keep = ["age"]', "lists 'age', which is a QI"),
    ('pseudonymize = ["patient_id"]', "pseudonymize needs secret_env"),
    ('secret_env = "X"', "secret_env is only for pseudonymize"),
    ('pseudonymize = ["patient_id"]\nsecret_env = ""', "secret_env must name an environment variable"),
    ('pseudonym = "base64"', 'pseudonym = \'base64\' must be "hex"'),
    ('unlisted = "keep"', 'unlisted = \'keep\' must be "error"'),
    ('colour = "blue"', "unknown key 'colour' in [columns]"),
])
def test_bad_columns_table_is_one_line(project, run, body: str, fragment: str) -> None:
    spec = project.spec(columns=f"\n[columns]\n{body}\n")
    with pytest.raises(SpecError) as info:
        Spec.read(spec)
    assert len(info.value.problems) == 1 and fragment in info.value.problems[0]
    assert "\n" not in info.value.problems[0]
    assert fragment in one_line(run("validate", spec, expect=2))


def test_columns_must_be_a_table() -> None:
    problems: list[str] = []
    assert parse_columns(["a"], problems).declared
    assert problems == ['[columns] must be a table, e.g. [columns] drop = ["name"], keep = ["visit_type"]']


def test_every_problem_is_collected() -> None:
    problems: list[str] = []
    parse_columns({"keep": ["a", "age"], "drop": ["a"], "unlisted": "x", "colour": 1}, problems, ["age"])
    assert len(problems) == 4


def test_roles_api() -> None:
    problems: list[str] = []
    roles = parse_columns({"keep": ["v"], "sensitive": ["dx"], "drop": ["name"], "pseudonymize": ["id"],
                           "secret_env": SECRET_ENV, "pseudonym": "integer"}, problems)
    assert problems == []
    assert [roles.role(c) for c in ("v", "dx", "name", "id", "age", "other")] == [
        "keep", "sensitive", "drop", "pseudonymize", None, None]
    source = ["id", "name", "age", "v", "dx"]
    assert roles.released(source, ["age"]) == [("id", "pseudonymize"), ("age", "qi"), ("v", "keep"),
                                               ("dx", "sensitive")]
    assert roles.problems(source + ["extra", "x2"], ["age"], "source s.csv") == [
        "source s.csv columns 'extra', 'x2' have no role; list each under [columns] keep, sensitive, drop or "
        "pseudonymize (or set unlisted = \"drop\" in [columns] to drop every unlisted column)"]
    assert ColumnRoles().problems(["age", "id"], ["age"])[0].startswith("source column 'id' has no role; add a "
                                                                      "[columns] table")
    missing = roles.problems(["age", "v"], ["age"])
    assert len(missing) == 1 and "lists 'dx', 'name', 'id', which source does not have; its columns are 'age'" \
        in missing[0]


# -- validate -------------------------------------------------------------------------------------

@pytest.mark.slow
def test_validate_prints_the_released_columns_in_order(project, run, secret) -> None:
    spec = project.spec(columns=PSEUDONYMIZE)
    out = run("validate", spec).stdout
    assert ("released   6 columns, in this order: patient_id (pseudonymize, hex), age (qi), sex (qi), race (qi), "
            "zip (qi), diagnosis (sensitive)") in out
    assert f"key        HMAC-SHA-256 key from ${SECRET_ENV} (set)" in out
    out = run("validate", project.spec()).stdout
    assert "released   5 columns, in this order: age (qi), sex (qi), race (qi), zip (qi), diagnosis (sensitive)" in out
    assert "dropped    patient_id\n" in out
    out = run("validate", project.spec(columns='\n[columns]\nunlisted = "drop"\n')).stdout
    assert 'released   4 columns' in out and 'dropped    patient_id, diagnosis (unlisted = "drop")' in out


def test_validate_reports_unroled_columns_with_the_data_problems(project, run) -> None:
    spec = project.spec(columns=None)
    line = one_line(run("validate", spec, expect=2))
    assert "columns 'patient_id', 'diagnosis' have no role; add a [columns] table" in line
    # a data problem and the role problem are reported together
    qi = '[[qi]]\nname = "age"\nkind = "integer"\nmin = 0\nmax = 60\n'
    result = run("validate", project.spec(qis=(qi, SEX_QI, RACE_QI, ZIP_QI), columns=None), expect=2)
    errors = result.stderr.splitlines()
    assert len(errors) == 2
    assert "outside the declared domain" in errors[0] and "have no role" in errors[1]


def test_validate_reports_listed_columns_the_source_lacks(project, run) -> None:
    spec = project.spec(columns=DEFAULT_COLUMNS + 'keep = ["visit", "ward"]\n')
    line = one_line(run("validate", spec, expect=2))
    assert "[columns] lists 'visit', 'ward', which source" in line
    assert "its columns are 'patient_id', 'age', 'sex', 'race', 'zip', 'diagnosis'" in line


def test_validate_reports_a_missing_secret(project, run, monkeypatch) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)
    line = one_line(run("validate", project.spec(columns=PSEUDONYMIZE), expect=2))
    assert f"secret_env = '{SECRET_ENV}' names no set environment variable" in line


@pytest.mark.slow
def test_evaluation_needs_no_roles(project, run) -> None:
    spec = project.spec(columns=None)
    data = json.loads(run("evaluate", spec, "-p", POLICY).stdout)
    assert data["records"] == 500
    with Problem.from_spec(spec) as problem:
        assert problem.evaluate(POLICY).records == 500


# -- refusals on every release path ----------------------------------------------------------------

RELEASES = {
    "materialize": lambda spec, d: ["materialize", spec, "-p", POLICY, "--out", d / "out.parquet"],
    "materialize-csv": lambda spec, d: ["materialize", spec, "-p", POLICY, "--out", d / "out.csv"],
    "materialize-duckdb": lambda spec, d: ["materialize", spec, "-p", POLICY, "--out", d / "out.duckdb"],
    "view": lambda spec, d: ["view", spec, "-p", POLICY, "--db", d / "v.duckdb", "--view", "v"],
    "compile": lambda spec, d: ["compile", spec, "-p", POLICY],
    "dbt": lambda spec, d: ["dbt", spec, "-p", POLICY, "--project", d / "warehouse"],
    "safe-harbor": lambda spec, d: ["safe-harbor", spec, "--out", d / "sh.parquet"],
    "safe-harbor-view": lambda spec, d: ["safe-harbor", spec, "--db", d / "sh.duckdb", "--view", "sh"],
    "anonymize": lambda spec, d: ["anonymize", spec, "--min-k", "2", "--out", d / "anon.parquet"],
}
ROLED_QIS = (AGE_QI + 'role = "age"\n', SEX_QI, RACE_QI, ZIP_QI + 'role = "zip"\n')


def nothing_written(project, tmp_path: Path, before: dict[str, bytes], outside: list[str]) -> None:
    assert project.files() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == outside


@pytest.mark.parametrize("command", sorted(RELEASES))
def test_unroled_column_is_refused_and_nothing_written(project, run, tmp_path, command: str) -> None:
    spec = project.spec(qis=ROLED_QIS, columns='\n[columns]\nsensitive = ["diagnosis"]\n')
    before, outside = project.files(), sorted(p.name for p in tmp_path.iterdir())
    line = one_line(run(*RELEASES[command](spec, tmp_path), expect=2))
    assert "column 'patient_id' has no role; list each under [columns] keep, sensitive, drop or pseudonymize" \
        in line
    nothing_written(project, tmp_path, before, outside)


@pytest.mark.parametrize("command", ["view", "compile", "dbt", "safe-harbor-view"])
def test_persistent_sql_with_pseudonyms_is_refused(project, run, tmp_path, secret, command: str) -> None:
    spec = project.spec(qis=ROLED_QIS, columns=PSEUDONYMIZE)
    before, outside = project.files(), sorted(p.name for p in tmp_path.iterdir())
    result = run(*RELEASES[command](spec, tmp_path), expect=2)
    line = one_line(result)
    assert "would hold the secret key in its SQL text" in line and "'patient_id'" in line
    assert "deid-sql materialize" in line and "drop" in line
    assert pads(secret)[0].hex() not in result.output and SECRET not in result.output
    nothing_written(project, tmp_path, before, outside)


@pytest.mark.parametrize("value", [None, "", "short"])
def test_missing_or_weak_secret_is_one_line(project, run, tmp_path, monkeypatch, value: str | None) -> None:
    if value is None:
        monkeypatch.delenv(SECRET_ENV, raising=False)
    else:
        monkeypatch.setenv(SECRET_ENV, value)
    spec = project.spec(columns=PSEUDONYMIZE)
    before, outside = project.files(), sorted(p.name for p in tmp_path.iterdir())
    line = one_line(run("materialize", spec, "-p", POLICY, "--out", tmp_path / "out.parquet", expect=2))
    assert SECRET_ENV in line
    expected = {None: "names no set environment variable", "": "is set but empty", "short": "needs at least 32"}
    assert expected[value] in line
    nothing_written(project, tmp_path, before, outside)


def test_unstable_type_is_refused(project, run, tmp_path, secret) -> None:
    table = project.source.set_column(0, "patient_id", pa.array([i + 0.5 for i in range(500)]))
    project.write_parquet(table, "floats.parquet")
    spec = project.spec(source="floats.parquet", columns=PSEUDONYMIZE)
    line = one_line(run("materialize", spec, "-p", POLICY, "--out", tmp_path / "out.parquet", expect=2))
    assert "column 'patient_id' is DOUBLE, whose text differs between engines" in line


# -- what is written ----------------------------------------------------------------------------

def test_roles_in_the_written_file(project, run, secret) -> None:
    table = project.source.append_column("name", pa.array([f"Patient {i}" for i in range(500)]))
    table = table.append_column("visit_type", pa.array(["inpatient", "outpatient"] * 250))
    project.write_parquet(table, "wide.parquet")
    columns = PSEUDONYMIZE + 'drop = ["name"]\nkeep = ["visit_type"]\n'
    spec = project.spec(source="wide.parquet", columns=columns)
    out = project.dir / "out.parquet"
    run("materialize", spec, "-p", POLICY, "--out", out, "--suppress-below", "3")
    got = pq.read_table(out)
    assert got.column_names == ["patient_id", "age", "sex", "race", "zip", "diagnosis", "visit_type",
                                "deid_suppressed"]
    want = Counter((pseudonym(KEY, r["patient_id"]), r["diagnosis"], r["visit_type"]) for r in table.to_pylist())
    rows = list(zip(*(got.column(c).to_pylist() for c in ("patient_id", "diagnosis", "visit_type", "deid_suppressed"))))
    shown = Counter(r[:3] for r in rows if not r[3])
    assert all(r[0] is None for r in rows if r[3]) and any(r[3] for r in rows)  # suppressed rows: no pseudonym
    assert not shown - want and sum(shown.values()) + sum(1 for r in rows if r[3]) == sum(want.values())
    side = json.loads((project.dir / "out.parquet.release.json").read_text())
    assert [(c["name"], c["role"]) for c in side["columns"]] == [
        ("patient_id", "pseudonymize"), ("age", "qi"), ("sex", "qi"), ("race", "qi"), ("zip", "qi"),
        ("diagnosis", "sensitive"), ("visit_type", "keep"), ("deid_suppressed", "flag")]
    text = (project.dir / "out.parquet.release.json").read_text()
    assert SECRET not in text and pads(KEY)[0].hex() not in text and pads(KEY)[1].hex() not in text


def test_integer_pseudonyms_and_unlisted_drop(project, run, secret) -> None:
    columns = f'\n[columns]\npseudonymize = ["patient_id"]\nsecret_env = "{SECRET_ENV}"\npseudonym = "integer"\n' \
              'unlisted = "drop"\n'
    spec = project.spec(columns=columns)
    out = project.dir / "out.parquet"
    run("materialize", spec, "-p", POLICY, "--out", out)
    got = pq.read_table(out)
    assert got.column_names == ["patient_id", "age", "sex", "race", "zip"]  # diagnosis listed nowhere: dropped
    assert got.schema.field("patient_id").type == pa.int64()
    assert sorted(got.column("patient_id").to_pylist()) == sorted(
        pseudonym(KEY, i, "integer") for i in project.source.column("patient_id").to_pylist())  # type: ignore[type-var]


def test_same_value_same_pseudonym_across_batches(project, run, secret) -> None:
    """Two batches (CSV and Parquet, overlapping ids): the same id gets the same pseudonym; the id
    is also kept in clear here (``id_clear``) so the test can match them."""
    table = project.source.append_column("id_clear", project.source.column("patient_id"))
    project.write_csv(table.slice(0, 300), "batch1.csv")
    project.write_parquet(table.slice(200, 300), "batch2.parquet")
    columns = PSEUDONYMIZE + 'keep = ["id_clear"]\n'
    mapping: list[dict[int, str]] = []
    for name in ("batch1.csv", "batch2.parquet"):
        spec = project.spec(source=name, columns=columns, name=f"{name}.toml")
        out = project.dir / f"{name}.out.parquet"
        run("materialize", spec, "-p", POLICY, "--out", out)
        rows = pq.read_table(out).to_pylist()
        mapping.append({int(r["id_clear"]): r["patient_id"] for r in rows})
    shared = set(mapping[0]) & set(mapping[1])
    assert len(shared) == 100
    assert all(mapping[0][i] == mapping[1][i] == pseudonym(KEY, i) for i in shared)
    assert len(set(mapping[0].values()) | set(mapping[1].values())) == 500


def test_csv_identifier_is_hashed_as_the_files_text(project, run, secret) -> None:
    """A CSV id with leading zeros is hashed as written ("007"), not as the number DuckDB sniffs."""
    ids = [f"{i:03d}" for i in range(500)]
    table = project.source.set_column(0, "patient_id", pa.array(ids))
    project.write_csv(table, "zeros.csv")
    spec = project.spec(source="zeros.csv", columns=PSEUDONYMIZE)
    out = project.dir / "out.parquet"
    run("materialize", spec, "-p", POLICY, "--out", out)
    assert sorted(pq.read_table(out).column("patient_id").to_pylist()) == sorted(pseudonym(KEY, i) for i in ids)


def test_hostile_names_and_values_through_roles(tmp_path, run, secret) -> None:
    n = 2 * len(HOSTILE_VALUES)
    ident, drop, keep = 'it\'s "id"; --\nx', "select", "naïve; DROP TABLE t"
    table = pa.table({
        ident: pa.array([HOSTILE_VALUES[i % len(HOSTILE_VALUES)] if i % 9 else None for i in range(n)]),
        "age": pa.array([(i * 7) % 100 for i in range(n)], pa.int64()),
        drop: pa.array(["secret"] * n),
        keep: pa.array(HOSTILE_VALUES * 2),
    })
    pq.write_table(table, tmp_path / "hostile.parquet")
    spec = tmp_path / "hostile.toml"
    spec.write_text('population = "sample"\n[source]\npath = "hostile.parquet"\n'
                    '[[qi]]\nname = "age"\nkind = "integer"\nmin = 0\nmax = 120\n'
                    f"[columns]\npseudonymize = {json.dumps([ident])}\nsecret_env = \"{SECRET_ENV}\"\n"
                    f"drop = {json.dumps([drop])}\nkeep = {json.dumps([keep])}\n"
                    "[release]\nmax_record_risk = 1.0\n", encoding="utf-8")
    out = tmp_path / "out.parquet"
    run("materialize", spec, "-p", "age:cuts=50", "--out", out)
    got = pq.read_table(out)
    assert got.column_names == [ident, "age", keep]
    assert got.column(ident).to_pylist() == [pseudonym(KEY, v) for v in table.column(ident).to_pylist()]
    assert got.column(keep).to_pylist() == HOSTILE_VALUES * 2


def test_anonymize_releases_the_roles(tmp_path, secret) -> None:
    from deid_sql.jobs.anonymize import anonymize, privacy_models, write_release
    from tests.test_fulldomain import RELEASE, small_spec

    spec = small_spec(tmp_path, release=RELEASE)
    text = spec.read_text().replace('drop = ["id"]', f'pseudonymize = ["id"]\nsecret_env = "{SECRET_ENV}"')
    spec.write_text(text, encoding="utf-8")
    out = tmp_path / "anon.parquet"
    with Problem.from_spec(spec) as problem:
        write_release(problem, anonymize(problem, privacy_models(k=3)), out)
    got = pq.read_table(out)
    assert got.column_names == ["id", "age", "sex", "race", "zip", "dx", "deid_suppressed"]
    source = pq.read_table(tmp_path / "source.parquet").column("id").to_pylist()
    assert sorted(got.column("id").to_pylist()) == sorted(pseudonym(KEY, i) for i in source)


# -- every engine -------------------------------------------------------------------------------

@pytest.fixture(scope="module", params=engine_params(*ENGINES))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


def engine_table() -> pa.Table:
    n = 3 * len(HOSTILE_VALUES)
    return pa.table({
        "patient's id": pa.array([10**12 + i % 20 for i in range(n)], pa.int64()),  # repeats: same pseudonym
        "mrn": pa.array([HOSTILE_VALUES[i % len(HOSTILE_VALUES)] if i % 7 else None for i in range(n)]),
        "age": pa.array([(i * 13) % 90 for i in range(n)], pa.int64()),
        "select": pa.array(["I10", "E11", "J45"] * len(HOSTILE_VALUES)),
        "name": pa.array(["Ann"] * n),
    })


@pytest.mark.parametrize("form", ["hex", "integer"])
def test_pseudonyms_are_the_same_on_every_engine(engine: Engine, tmp_path: Path, secret, form: str) -> None:
    table = engine_table()
    body = engine.load(f"hostile_{form}", table)
    spec = tmp_path / "spec.toml"
    spec.write_text('population = "sample"\n' + engine.header() + f'\n[source]\n{body}\n'
                    '[[qi]]\nname = "age"\nkind = "integer"\nmin = 0\nmax = 120\n'
                    f'[columns]\npseudonymize = ["patient\'s id", "mrn"]\nsecret_env = "{SECRET_ENV}"\n'
                    f'pseudonym = "{form}"\nsensitive = ["select"]\ndrop = ["name"]\n'
                    '[release]\nmax_record_risk = 1.0\n', encoding="utf-8")
    want = Counter((pseudonym(KEY, r["patient's id"], form), pseudonym(KEY, r["mrn"], form), r["select"])
                   for r in table.to_pylist())
    with Problem.from_spec(spec) as problem:
        assert problem.released_columns == [("patient's id", "pseudonymize"), ("mrn", "pseudonymize"),
                                            ("age", "qi"), ("select", "sensitive")]
        outputs = []
        out = tmp_path / "release.parquet"
        materialize(problem, plan_of(problem, "age:cuts=30,60"), out)  # streamed from the engine to a file
        outputs.append(pq.read_table(out))
        if engine.name != "duckdb":  # a table inside the engine
            name = engine.qualified(f"released_{form}")
            materialize(problem, plan_of(problem, "age:cuts=30,60"), None, table=name)
            outputs.append(engine.read(name))
        with pytest.raises(DeidError, match="would hold the secret key"):
            problem.compile(plan_of(problem, "age:cuts=30,60"))
    for got in outputs:
        assert got.column_names == ["patient's id", "mrn", "age", "select"]
        rows = Counter(zip(*(got.column(c).to_pylist() for c in ("patient's id", "mrn", "select"))))
        assert rows == want


# -- property: SQL equals the reference ------------------------------------------------------------

@pytest.fixture(scope="module")
def duck() -> Iterator:
    backend = connect("duckdb")
    yield backend
    backend.close()


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(values=st.lists(st.one_of(st.text(), st.integers(min_value=-(2**63), max_value=2**63 - 1), st.none()),
                       min_size=1, max_size=8),
       key=st.binary(min_size=16, max_size=100))
def test_duckdb_sql_equals_the_reference(duck, values: list[object], key: bytes) -> None:
    texts = [v if v is None or isinstance(v, str) else str(v) for v in values]
    duck.register_table("deid_prop", pa.table({"v": pa.array(texts, pa.string())}))
    ints = [v for v in values if isinstance(v, int)]
    duck.register_table("deid_prop_int", pa.table({"v": pa.array(ints, pa.int64())}))
    for form in ("hex", "integer"):
        got = duck.execute(exp.select(duck.pseudonymize(exp.column("v", quoted=True), key, form))
                           .from_("deid_prop")).column(0).to_pylist()
        assert got == [pseudonym(key, v, form) for v in texts]
        got = duck.execute(exp.select(duck.pseudonymize(exp.column("v", quoted=True), key, form))
                           .from_("deid_prop_int")).column(0).to_pylist()
        assert got == [pseudonym(key, v, form) for v in ints]


@pytest.mark.engine
def test_postgres_pgcrypto_fallback_agrees(tmp_path) -> None:
    """PostgreSQL before 11 has no sha256(): pgcrypto's hmac() gives the same pseudonyms (checked
    here inside a transaction that is rolled back, so the database keeps no extension)."""
    from tests.engines import open_engine

    pg = open_engine("postgres", tmp_path)
    try:
        from deid_sql.backends.postgres import hmac_expression

        con = pg.backend.con  # type: ignore[attr-defined]
        values = ["42", *[v for v in HOSTILE_VALUES if v]]
        with con.transaction(force_rollback=True):
            try:
                con.execute(f'CREATE EXTENSION pgcrypto SCHEMA "{pg.schema}"')  # type: ignore[attr-defined]
            except Exception as e:  # noqa: BLE001 - contrib not installed: nothing to compare
                pytest.skip(f"pgcrypto is not available: {e}")
            con.execute(f'SET LOCAL search_path = "{pg.schema}", public')  # type: ignore[attr-defined]
            for form in ("hex", "integer"):
                for value in values:
                    query = exp.select(hmac_expression(exp.Literal.string(value), KEY, form, pgcrypto=True))
                    row = con.execute(query.sql(dialect="postgres")).fetchone()
                    assert row is not None and row[0] == pseudonym(KEY, value, form)
    finally:
        pg.close()


def test_the_key_never_reaches_duckdb_files(project, run, tmp_path, secret) -> None:
    """A DuckDB output holds the rows, not the query: the key's pads are in no stored object."""
    db = tmp_path / "out.duckdb"
    run("materialize", project.spec(columns=PSEUDONYMIZE), "-p", POLICY, "--out", db)
    con = duckdb.connect(str(db), read_only=True)
    try:
        sql = " ".join(str(r[0]) for r in con.execute("SELECT sql FROM duckdb_tables() UNION ALL "
                                                      "SELECT sql FROM duckdb_views()").fetchall())
    finally:
        con.close()
    assert pads(KEY)[0].hex() not in sql and pads(KEY)[1].hex() not in sql
    assert os.environ[SECRET_ENV] not in db.read_bytes().decode("latin-1")
