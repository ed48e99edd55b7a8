"""A generated dbt model never replaces one of its inputs (issue 38): ``dbt run`` builds a model
over a relation of the same name (and drops ``<model>__dbt_tmp`` / ``<model>__dbt_backup`` on the
way), so a model named like the source or the census would replace the raw rows with the release.

- refused when ``deid-sql dbt`` writes the files, for every spelling that names the same table,
  when the input is in the profile's schema (one line, exit 2, nothing written), on a single table
  and on a set;
- refused when ``dbt run`` compiles the model, where only the profile tells the schema: real
  ``dbt run`` with dbt-duckdb (slow) and with dbt-postgres (``engine``), the inputs intact after.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from deid_sql.cli import cli
from deid_sql.dbt.inputs import Input, refuse_replacing
from deid_sql.errors import OutputError
from tests.engines import default_spec, open_engine
from tests.test_dbt import dbt, files_under
from tests.test_dbt_sets import warehouse
from tests.test_linked import KEY

POLICY = "age:cuts=18,45,65|race:top|zip:top"
SET_POLICY = "age:every=20"
GUARD = "{{ deid_sql_refuse_inputs(this, ["


@pytest.fixture
def hospital(project):
    """conftest's problem with its source as table ``patients`` and its census as table ``census``
    of ``hospital.duckdb`` (the warehouse dbt reads), and a copy of the census in ``other.duckdb``."""
    for name in ("hospital.duckdb", "other.duckdb"):
        con = duckdb.connect(str(project.dir / name))
        try:
            con.register("src", project.source)
            con.register("pop", project.population)
            if name == "hospital.duckdb":
                con.execute("CREATE TABLE patients AS SELECT * FROM src")
            con.execute("CREATE TABLE census AS SELECT * FROM pop")
        finally:
            con.close()
    project.spec(source="hospital.duckdb", source_extra='table = "patients"', population="hospital.duckdb",
                 population_extra='table = "census"')
    return project


def invoke(spec: Path, *args: str, policy: str = POLICY) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["dbt", str(spec), "--policy", policy, *args])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.output


def refused(spec: Path, out: Path, *args: str, policy: str = POLICY) -> str:
    """``deid-sql dbt`` refused in one line with exit 2, nothing written; the line."""
    before = files_under(out.parent)
    code, output = invoke(spec, "--project", str(out), *args, policy=policy)
    lines = output.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), output
    assert "nothing was written" in lines[0], output
    assert not out.exists() and files_under(out.parent) == before
    return lines[0]


# -- refused when the files are written -----------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("args, fragment", [
    (["--model", "patients"], "model patients would replace the source table patients in the same schema"),
    (["--model", "PATIENTS"], "model PATIENTS would replace the source table patients"),
    (["--model", "Patients"], "model Patients would replace the source table patients"),
    (["--source-table", '"patients"', "--model", "patients"], "would replace the source table patients"),
    (["--source-table", "Raw_Patients", "--model", "raw_patients"], "would replace the source table Raw_Patients"),
    (["--source-schema", "{{ target.schema }}", "--model", "patients"], "would replace the source table patients"),
    (["--source-table", "raw", "--model", "Patients"], "would replace the spec's source table patients"),
    (["--source-table", "p__dbt_backup", "--model", "p"],
     "model p would drop the source table p__dbt_backup in the same schema when dbt runs (dbt's name for the model "
     "while it builds it is p__dbt_backup)"),
    (["--source-table", "P__DBT_TMP", "--model", "p"], "model p would drop the source table P__DBT_TMP"),
    (["--model", "census"], "model census would replace the population table census"),
    (["--model", "Census"], "model Census would replace the population table census"),
])
def test_a_model_named_like_an_input_is_refused(hospital, tmp_path: Path, args: list[str], fragment: str) -> None:
    line = refused(hospital.spec_path, tmp_path / "warehouse", *args)
    assert fragment in line and "choose another --model" in line, line


def test_a_spec_table_spelled_otherwise_is_the_same_input(hospital, tmp_path: Path) -> None:
    """DuckDB ignores case, quoted or not: the spec's ``PATIENTS`` is the warehouse's ``patients``."""
    spec = hospital.spec(name="upper.toml", source="hospital.duckdb", source_extra='table = "PATIENTS"')
    line = refused(spec, tmp_path / "warehouse", "--model", "patients")
    assert "model patients would replace the source table PATIENTS" in line


@pytest.mark.slow
def test_inputs_dbt_cannot_reach_or_another_schema_are_left_to_run_time(hospital, tmp_path: Path) -> None:
    """A census in a file or in another DuckDB file is no table of the warehouse: a model may have its
    name.  A source in a named schema collides only when the profile's schema is that one: written,
    with the run-time refusal listing every input the model must not replace."""
    for i, (population, extra, model) in enumerate([("population.parquet", "", "population"),
                                                     ("other.duckdb", 'table = "census"', "census")]):
        spec = hospital.spec(name=f"s{i}.toml", source="hospital.duckdb", source_extra='table = "patients"',
                             population=population, population_extra=extra)
        code, output = invoke(spec, "--project", str(tmp_path / f"p{i}"), "--model", model)
        assert code == 0, output
    out = tmp_path / "named"
    code, output = invoke(hospital.spec_path, "--project", str(out), "--model", "patients", "--source-schema", "main")
    assert code == 0, output
    lines = (out / "models" / "patients.sql").read_text(encoding="utf-8").splitlines()
    assert lines[2] == (GUARD + "(source('deid', 'patients'), 'the source table'), "
                        "(api.Relation.create(database=target.database, schema=target.schema, identifier='census'), "
                        "'the population table')]) }}")
    assert "macro deid_sql_refuse_inputs(relation, inputs)" in (out / "macros" / "deid_sql_tests.sql").read_text()


@pytest.mark.slow
def test_every_model_of_a_set_against_every_table_of_the_set(tmp_path: Path, monkeypatch) -> None:
    """One ``dbt run`` builds every model of a set: a linked table's model named like the person
    source's table would replace it, though it reads another table."""
    monkeypatch.setenv("DEID_LINK_KEY", KEY)
    spec = warehouse(tmp_path)
    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    try:
        con.execute("ALTER TABLE patients RENAME TO deid_diagnoses")
    finally:
        con.close()
    spec.write_text(spec.read_text(encoding="utf-8").replace('table = "patients"', 'table = "deid_diagnoses"'),
                    encoding="utf-8")
    line = refused(spec, tmp_path / "wh", policy=SET_POLICY)
    assert "model deid_diagnoses would replace the source table deid_diagnoses in the same schema" in line
    assert "choose another --prefix" in line
    line = refused(spec, tmp_path / "wh", "--prefix", "DEID_", policy=SET_POLICY)
    assert "model DEID_diagnoses would replace the source table deid_diagnoses" in line
    again = tmp_path / "again"
    again.mkdir()
    line = refused(warehouse(again), again / "wh", "--prefix", "", policy=SET_POLICY)
    assert "model patients would replace the source table patients" in line


def test_the_rule() -> None:
    """Case ignored; only an input in the profile's schema is certain; the model's temporary and
    backup relations count."""
    here = Input("the source table", "Cohort", None, None, "")
    elsewhere = Input("the source table", "cohort", "clob", None, "")
    with pytest.raises(OutputError, match="model COHORT would replace the source table Cohort"):
        refuse_replacing(["COHORT"], [elsewhere, here], "--model")
    with pytest.raises(OutputError, match="would drop the source table cohort__dbt_tmp"):
        refuse_replacing(["release", "cohort"], [Input("the source table", "cohort__dbt_tmp", None, None, "")],
                         "--prefix")
    refuse_replacing(["cohort", "cohort_deid"], [elsewhere], "--model")  # left to the run-time check
    refuse_replacing(["cohort"], [Input("the source table", "cohort", None, "warehouse", "")], "--model")


# -- refused when dbt runs --------------------------------------------------------------------------

def dbt_ready() -> None:
    pytest.importorskip("dbt")
    pytest.importorskip("dbt.adapters.duckdb")


def duckdb_profiles(folder: Path, db: Path) -> Path:
    """dbt-duckdb over ``db``: target ``dev`` builds in ``main`` (where the inputs are), ``release``
    in schema ``release``."""
    folder.mkdir()
    outputs = "".join(f"    {name}:\n      type: duckdb\n      path: {json.dumps(str(db))}\n      threads: 1\n"
                      + (f"      schema: {name}\n" if name != "dev" else "") for name in ("dev", "release"))
    (folder / "profiles.yml").write_text(f"deid_sql:\n  target: dev\n  outputs:\n{outputs}", encoding="utf-8")
    return folder


def table_rows(db: Path, query: str) -> list[tuple[object, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


@pytest.mark.slow
def test_dbt_duckdb_run_refuses_to_build_over_an_input(hospital, tmp_path: Path) -> None:
    """The source in schema ``main`` (named, so the files are written): with the profile's schema
    ``main`` dbt run fails on the models' first line and the source and its copy are intact; with
    schema ``release`` both models are built."""
    dbt_ready()
    db = hospital.dir / "hospital.duckdb"
    con = duckdb.connect(str(db))
    try:
        con.execute("CREATE TABLE patients_deid__dbt_backup AS SELECT * FROM patients")
    finally:
        con.close()
    before = {t: table_rows(db, f"SELECT * FROM {t} ORDER BY ALL") for t in ("patients", "patients_deid__dbt_backup")}
    out, profiles = tmp_path / "warehouse", duckdb_profiles(tmp_path / "profiles", db)
    for args in (["--model", "patients"], ["--source-table", "patients_deid__dbt_backup", "--model", "patients_deid"]):
        code, output = invoke(hospital.spec_path, "--project", str(out), "--source-schema", "main", *args)
        assert code == 0, output

    built = dbt(out, profiles, "run")
    assert built.returncode == 1, built.stdout
    log = " ".join(built.stdout.split())
    assert ('deid-sql: model patients would replace the source table "hospital"."main"."patients", the data its '
            'release was judged on; the model was not built') in log
    assert ('deid-sql: model patients_deid would drop the source table "hospital"."main"."patients_deid__dbt_backup" '
            "(dbt's name for the model while it builds it: patients_deid__dbt_backup)") in log
    assert {t: table_rows(db, f"SELECT * FROM {t} ORDER BY ALL") for t in before} == before
    assert {r[0] for r in table_rows(db, "SELECT table_name FROM information_schema.tables")} == {
        "patients", "patients_deid__dbt_backup", "census"}

    elsewhere = dbt(out, profiles, "run", "--target", "release")
    assert elsewhere.returncode == 0, elsewhere.stdout + elsewhere.stderr
    for model in ("patients", "patients_deid"):
        ages = {r[0] for r in table_rows(db, f"SELECT DISTINCT age FROM release.{model}")}
        assert ages == {"0-17", "18-44", "45-64", "65-120"}, model
    assert {t: table_rows(db, f"SELECT * FROM {t} ORDER BY ALL") for t in before} == before


@pytest.mark.slow
def test_dbt_run_of_a_set_refuses_to_build_over_its_tables(tmp_path: Path, monkeypatch) -> None:
    """A set's models named like its tables, the tables in a named schema: written, then refused by
    dbt run (the person model first; the linked models, which need it, are skipped); every table intact."""
    dbt_ready()
    monkeypatch.setenv("DEID_LINK_KEY", KEY)
    spec = warehouse(tmp_path)
    db = tmp_path / "warehouse.duckdb"
    names = ("patients", "encounters", "diagnoses")
    before = {t: table_rows(db, f"SELECT * FROM {t} ORDER BY ALL") for t in names}
    project = tmp_path / "wh"
    code, output = invoke(spec, "--project", str(project), "--prefix", "", "--source-schema", "main",
                          policy=SET_POLICY)
    assert code == 0, output
    for name in names:
        head = (project / "models" / f"{name}.sql").read_text(encoding="utf-8").splitlines()[2]
        assert all(f"source('deid', '{n}')" in head for n in names), head
    built = dbt(project, project, "run")
    assert built.returncode == 1, built.stdout
    log = " ".join(built.stdout.split())
    assert 'deid-sql: model patients would replace the source table "warehouse"."main"."patients"' in log
    assert {t: table_rows(db, f"SELECT * FROM {t} ORDER BY ALL") for t in names} == before


@pytest.mark.engine
def test_dbt_postgres_refuses_an_input_in_the_profiles_schema(tmp_path: Path) -> None:
    """PostgreSQL: the source and the census in a named schema, the profile's schema the same one.
    ``--model patients`` and ``--model census`` are written (the schema is the profile's business), then
    refused by dbt-postgres; ``cohort_release`` is built; the inputs are intact.  A source in the
    profile's schema (unqualified) is refused when the files are written, however it is spelled."""
    engine = open_engine("postgres", tmp_path)  # marked: skipped without PostgreSQL outside CI
    try:
        pytest.importorskip("dbt")
        pytest.importorskip("dbt.adapters.postgres")
        from psycopg.conninfo import conninfo_to_dict

        spec = default_spec(engine)
        con = engine.backend.con
        schema = engine.schema

        def rows(table: str) -> list[tuple[object, ...]]:
            return con.execute(f'SELECT * FROM "{schema}"."{table}" ORDER BY 1, 2, 3, 4').fetchall()

        before = {t: rows(t) for t in ("patients", "census")}
        out = tmp_path / "warehouse"
        for model in ("patients", "census", "cohort_release"):
            code, output = invoke(spec, "--project", str(out), "--model", model)
            assert code == 0, output
        dsn = conninfo_to_dict(engine.dsn)
        profiles = tmp_path / "profiles"
        profiles.mkdir()
        (profiles / "profiles.yml").write_text(
            "deid_sql:\n  target: dev\n  outputs:\n    dev:\n      type: postgres\n"
            f"      host: {json.dumps(dsn.get('host', '127.0.0.1'))}\n      port: {int(dsn.get('port', 5432))}\n"
            f"      user: {json.dumps(dsn.get('user', 'postgres'))}\n"
            f"      password: {json.dumps(dsn.get('password', ''))}\n"
            f"      dbname: {json.dumps(dsn.get('dbname', 'postgres'))}\n      schema: {json.dumps(schema)}\n"
            "      threads: 1\n", encoding="utf-8")
        built = dbt(out, profiles, "run")
        assert built.returncode == 1, built.stdout
        log = " ".join(built.stdout.split())
        for table, what in (("patients", "the source table"), ("census", "the population table")):
            assert (f'deid-sql: model {table} would replace {what} "postgres"."{schema}"."{table}", the data its '
                    f"release was judged on") in log, log
        assert f"OK created sql table model {schema}.cohort_release" in log, log
        assert {t: rows(t) for t in before} == before
        assert con.execute(f'SELECT count(*) FROM "{schema}"."cohort_release"').fetchone()[0] == len(before["patients"])

        # unqualified (read through the connection's search_path): dbt reads the source from the
        # profile's schema, where it writes the model
        searched = f"{engine.dsn}{'&' if '?' in engine.dsn else '?'}options=-csearch_path%3D{schema}"
        for i, (spelled, model) in enumerate([("patients", "patients"), ('\\"patients\\"', "patients"),
                                              ("patients", "PATIENTS")]):
            text = (spec.read_text(encoding="utf-8").replace(f'table = "{schema}.patients"', f'table = "{spelled}"')
                    .replace(f'dsn = "{engine.dsn}"', f'dsn = "{searched}"'))
            plain = spec.with_name(f"unqualified{i}.toml")
            plain.write_text(text, encoding="utf-8")
            line = refused(plain, tmp_path / f"refused{i}", "--model", model)
            assert f"model {model} would replace the source table patients in the same schema" in line
    finally:
        engine.close()
