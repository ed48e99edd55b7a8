"""A column's collation cannot widen the domain guard: values leave as the domain spells them.

A DuckDB column declared ``VARCHAR COLLATE NOCASE`` (or ``NOCASE.NOACCENT``) made ``col IN
('female')`` true for ``'FEMALE'``; the guard let the row through and the release showed the
source's own text.  Membership is now byte for byte, and a value kept as itself is written from
the domain, so such a row is outside the domain: refused at load, the outside label in a view or
in compiled SQL run later.
"""

from __future__ import annotations

import duckdb
import pytest
from click.testing import CliRunner

from deid_sql import Problem
from deid_sql.cli import cli
from deid_sql.release.output import create_view
from deid_sql.release.plan import plan_of

from .problems import write_small_problem

RELEASE = "\n[release]\nmax_record_risk = 1.0\n"


def _collated_source(tmp_path, collation: str) -> tuple[object, object]:
    """The small problem with its source as a DuckDB table whose text QIs carry ``collation``."""
    spec = write_small_problem(tmp_path, seed=4, release=None)
    db = tmp_path / "hospital.duckdb"
    con = duckdb.connect(str(db))
    con.execute(f"CREATE TABLE patients (id BIGINT, age BIGINT, sex VARCHAR COLLATE {collation}, "
                f"race VARCHAR COLLATE {collation}, zip VARCHAR COLLATE {collation}, dx VARCHAR)")
    con.execute("INSERT INTO patients SELECT * FROM read_parquet(?)", [str(tmp_path / "source.parquet")])
    con.close()
    text = spec.read_text().replace('path = "source.parquet"', 'path = "hospital.duckdb"\ntable = "patients"')
    spec.write_text(text + RELEASE)
    return spec, db


def _append_spellings(db, collation: str = "NOCASE") -> None:
    """Rows whose text equals a domain value only under ``collation`` (case; accents too for NOACCENT)."""
    race = "WHÍTE" if "NOACCENT" in collation else "WHITE"
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO patients VALUES (9001, 20, 'FEMALE', 'White', '37201', 'I10'), "
                "(9002, 21, 'Female', ?, '37201', 'I10'), (9003, 22, 'male', 'white', '37201', 'J45')", [race])
    con.close()


@pytest.mark.slow
@pytest.mark.parametrize("collation", ["NOCASE", "NOCASE.NOACCENT"])
def test_validate_counts_other_spellings_as_outside_the_domain(tmp_path, collation):
    spec, db = _collated_source(tmp_path, collation)
    _append_spellings(db, collation)
    result = CliRunner().invoke(cli, ["validate", str(spec)])
    assert result.exit_code == 2, result.output
    assert "outside the declared domain" in result.output
    assert f"is varchar collate {collation.lower()}; deid-sql compares its text byte for byte" in result.output.lower()
    assert "FEMALE" in result.output or "WHÍTE" in result.output or "white" in result.output
    out = tmp_path / "release.parquet"
    result = CliRunner().invoke(cli, ["materialize", str(spec), "--policy", "age:top", "--out", str(out)])
    assert result.exit_code == 2 and not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("collation", ["NOCASE", "NOCASE.NOACCENT"])
def test_view_shows_the_outside_label_for_other_spellings(tmp_path, collation):
    spec, db = _collated_source(tmp_path, collation)
    with Problem.from_spec(spec) as problem:
        create_view(problem, plan_of(problem, "age:cuts=10,20"), db, "patients_deid")
    _append_spellings(db, collation)  # the data changes under the view
    con = duckdb.connect(str(db), read_only=True)
    sexes = {r[0] for r in con.execute("SELECT DISTINCT sex FROM patients_deid").fetchall()}
    races = {r[0] for r in con.execute("SELECT DISTINCT race FROM patients_deid").fetchall()}
    con.close()
    assert sexes <= {"Female", "Male", "*"} and "*" in sexes
    assert races <= {"White", "Black", "Asian", "Other", "*"} and "*" in races


@pytest.mark.slow
def test_compiled_sql_on_a_collated_table_releases_only_domain_spellings(tmp_path):
    spec, db = _collated_source(tmp_path, "NOCASE.NOACCENT")
    with Problem.from_spec(spec) as problem:
        sql = problem.compile(plan_of(problem, "age:cuts=10,20|zip:digits=3"), dialect="duckdb")
    _append_spellings(db, "NOCASE.NOACCENT")
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute(sql).fetchall()
    con.close()
    released = {v for row in rows for v in row if isinstance(v, str)}
    assert not released & {"FEMALE", "WHÍTE", "white", "male"}
    assert sum(1 for row in rows if "*" in row) == 3
    assert len(rows) == 403


def test_kept_values_are_written_from_the_domain(tmp_path):
    """A value kept as itself is a literal of the compiled query, never the source column's text."""
    with Problem.from_spec(write_small_problem(tmp_path)) as problem:
        sql = problem.compile(plan_of(problem, "age:cuts=10,20"), dialect="duckdb")
    assert "THEN 'Female'" in sql and "THEN 'White'" in sql
    assert 'COLLATE "C"' in sql


def test_validate_names_a_collated_column_of_clean_data(tmp_path):
    spec, _ = _collated_source(tmp_path, "NOCASE")
    result = CliRunner().invoke(cli, ["validate", str(spec)])
    assert result.exit_code == 0, result.output
    assert "column 'sex' is varchar collate nocase" in result.output.lower() and "0 row(s)" in result.output


def _postgres(tmp_path):
    from .engines import open_engine

    return open_engine("postgres", tmp_path)


@pytest.mark.engine
def test_postgres_nondeterministic_collation_and_padded_char(tmp_path):
    """A case-insensitive ICU collation (sex) and a blank-padded CHAR(8) (race) in PostgreSQL: validate
    names both, a view shows the outside label for other spellings, and no padding leaves."""
    import pyarrow.parquet as pq

    engine = _postgres(tmp_path)
    try:
        spec = write_small_problem(tmp_path, seed=4, release=None)
        source = pq.read_table(tmp_path / "source.parquet")
        engine.load("raw", source)
        con, schema = engine.backend.con, engine.schema
        con.execute(f'CREATE COLLATION IF NOT EXISTS "{schema}".ci (provider = icu, locale = \'und-u-ks-level2\', '
                    "deterministic = false)")
        con.execute(f'CREATE TABLE "{schema}".patients (id BIGINT, age BIGINT, sex TEXT COLLATE "{schema}".ci, '
                    f'race CHAR(8), zip TEXT, dx TEXT)')
        con.execute(f'INSERT INTO "{schema}".patients SELECT * FROM "{schema}".raw')
        text = spec.read_text().replace('path = "source.parquet"', f'table = "{schema}.patients"')
        text = text.replace("[source]", engine.header() + "\n[source]", 1) + RELEASE
        text = text.replace('[population]\npath = "population.parquet"',
                            f'[population]\n{engine.load("census", pq.read_table(tmp_path / "population.parquet"))}')
        spec.write_text(text)
        result = CliRunner().invoke(cli, ["validate", str(spec)])
        assert result.exit_code == 0, result.output
        assert "column 'sex' is text COLLATE" in result.output and "column 'race' is character(8)" in result.output
        view = f"{schema}.patients_deid"
        result = CliRunner().invoke(cli, ["view", str(spec), "--policy", "age:cuts=10,20", "--view", view])
        assert result.exit_code == 0, result.output
        con.execute(f"INSERT INTO \"{schema}\".patients VALUES (9001, 20, 'FEMALE', 'White', '37201', 'I10'), "
                    f"(9002, 21, 'female', 'White', '37201', 'I10')")
        rows = con.execute(f'SELECT sex, race, octet_length(race) FROM "{schema}".patients_deid').fetchall()
        sexes = {r[0] for r in rows}
        assert sexes == {"Female", "Male", "*"}, sexes
        assert {r[1] for r in rows} <= {"White", "Black", "Asian", "Other"}
        assert all(r[2] == len(r[1]) for r in rows)  # the domain's spelling: no blank padding
    finally:
        engine.close()


@pytest.mark.engine
def test_spark_utf8_lcase_collation(tmp_path):
    """Spark 4's case-insensitive ``UTF8_LCASE``: validate names it, and compiled SQL run on the table
    after other spellings arrive shows the outside label for them."""
    import pyarrow.parquet as pq

    from .engines import open_engine

    engine = open_engine("spark", tmp_path)
    try:
        spec = write_small_problem(tmp_path, seed=4, release=None)
        engine.load("raw", pq.read_table(tmp_path / "source.parquet"))
        db, session = engine.database, engine.backend.session
        session.sql(f"CREATE TABLE `{db}`.patients (id BIGINT, age BIGINT, sex STRING COLLATE UTF8_LCASE, "
                    f"race STRING COLLATE UTF8_LCASE, zip STRING, dx STRING)")
        session.sql(f"INSERT INTO `{db}`.patients SELECT * FROM `{db}`.raw")
        census = engine.load("census", pq.read_table(tmp_path / "population.parquet"))
        text = (spec.read_text().replace('path = "source.parquet"', f'table = "{db}.patients"')
                .replace('[population]\npath = "population.parquet"', f"[population]\n{census}"))
        spec.write_text(text.replace("[source]", engine.header() + "\n[source]", 1) + RELEASE)
        result = CliRunner().invoke(cli, ["validate", str(spec)])
        assert result.exit_code == 0, result.output
        assert "column 'sex' is STRING COLLATE UTF8_LCASE" in result.output
        with Problem.from_spec(spec) as problem:
            sql = problem.compile(plan_of(problem, "age:cuts=10,20"), dialect="spark", table=f"{db}.patients")
        session.sql(f"INSERT INTO `{db}`.patients VALUES (9001, 20, 'FEMALE', 'White', '37201', 'I10'), "
                    f"(9002, 21, 'Female', 'WHITE', '37201', 'I10')")
        rows = session.sql(sql).collect()
        assert {r["sex"] for r in rows} == {"Female", "Male", "*"}
        assert "WHITE" not in {r["race"] for r in rows} and "*" in {r["race"] for r in rows}
    finally:
        engine.close()
