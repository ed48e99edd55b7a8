"""PostgreSQL bad input: each is one line naming what, where and how to fix, exit code 2."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from tests.conftest import DEFAULT_COLUMNS, DEFAULT_QIS, PERMISSIVE_RELEASE, _source_table
from tests.engines import PostgresEngine, engine_params, open_engine

pytest.importorskip("psycopg")


def one_line(run, *args: object) -> str:
    result = run(*args, expect=2)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def spec(folder: Path, dsn: str, table: str) -> Path:
    path = folder / "pg.toml"
    path.write_text(f'population = "sample"\n[backend]\nengine = "postgres"\ndsn = "{dsn}"\n\n[source]\n'
                    f'table = "{table}"\n' + "".join(DEFAULT_QIS) + DEFAULT_COLUMNS
                    + f"\n[release]\n{PERMISSIVE_RELEASE}\n", encoding="utf-8")
    return path


def test_unreachable_server_names_host_port_and_how_to_start(run, tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    line = one_line(run, "validate", spec(tmp_path, f"postgresql://postgres@127.0.0.1:{port}/postgres", "t.patients"))
    assert f"cannot reach PostgreSQL at 127.0.0.1:{port} database postgres" in line
    assert "start a server" in line and "fix [backend] dsn" in line


def test_missing_dsn_and_files_as_sources_are_refused(run, tmp_path: Path) -> None:
    path = tmp_path / "nodsn.toml"
    path.write_text('[backend]\nengine = "postgres"\n[source]\ntable = "t"\n' + "".join(DEFAULT_QIS), encoding="utf-8")
    assert 'engine "postgres" needs dsn' in one_line(run, "validate", path)
    path.write_text('[backend]\nengine = "postgres"\ndsn_env = "DEID_NO_SUCH_VARIABLE"\n[source]\ntable = "t"\n'
                    + "".join(DEFAULT_QIS), encoding="utf-8")
    assert "dsn_env = 'DEID_NO_SUCH_VARIABLE' names no set environment variable" in one_line(run, "validate", path)


@pytest.fixture(scope="module", params=engine_params("postgres"))  # its tests are marked engine
def pg(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    engine = open_engine(request.param, tmp_path_factory.mktemp("pg"))
    assert isinstance(engine, PostgresEngine)
    engine.load("patients", _source_table())
    yield engine
    engine.close()


def test_missing_table(run, tmp_path: Path, pg: PostgresEngine) -> None:
    line = one_line(run, "validate", spec(tmp_path, pg.dsn, pg.qualified("nobody")))
    assert "cannot read source table" in line and "does not exist" in line


def test_missing_permission(run, tmp_path: Path, pg: PostgresEngine) -> None:
    con = pg.backend.con
    drop_role(con, "deid_reader")
    con.execute("CREATE ROLE deid_reader LOGIN")
    try:
        dsn = pg.dsn.replace("postgres@", "deid_reader@", 1)
        line = one_line(run, "validate", spec(tmp_path, dsn, pg.qualified("patients")))
        assert "permission denied for schema" in line or "permission denied for table" in line
        con.execute(f'GRANT USAGE ON SCHEMA "{pg.schema}" TO deid_reader')
        con.execute(f'GRANT SELECT ON "{pg.schema}"."patients" TO deid_reader')
        run("validate", spec(tmp_path, dsn, pg.qualified("patients")))  # reading is all it needs
        line = one_line(run, "materialize", spec(tmp_path, dsn, pg.qualified("patients")), "-p", "top",
                        "--table", pg.qualified("released"))
        assert "permission denied for schema" in line
    finally:
        con.execute(f'REVOKE ALL ON ALL TABLES IN SCHEMA "{pg.schema}" FROM deid_reader')
        con.execute(f'REVOKE ALL ON SCHEMA "{pg.schema}" FROM deid_reader')
        drop_role(con, "deid_reader")


def drop_role(con, role: str) -> None:
    """A closed session's temporary objects are dropped by its server process a moment after the
    client disconnects; until that process is gone they still belong to the role. Wait for the
    role's sessions to end, then drop it (retrying the races PostgreSQL reports while they end)."""
    import psycopg

    for _ in range(200):
        busy = con.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = %s", (role,)).fetchone()[0]
        if not busy:
            try:
                con.execute(f'DROP ROLE IF EXISTS "{role}"')
                return
            except (psycopg.errors.DependentObjectsStillExist, psycopg.errors.InternalError):
                pass
        time.sleep(0.05)
    con.execute(f'DROP ROLE IF EXISTS "{role}"')


def test_a_view_in_a_file_is_refused_for_postgres(run, tmp_path: Path, pg: PostgresEngine) -> None:
    line = one_line(run, "view", spec(tmp_path, pg.dsn, pg.qualified("patients")), "-p", "top",
                    "--db", tmp_path / "x.duckdb", "--view", "v")
    assert "create the view there (leave out --db)" in line
    assert not (tmp_path / "x.duckdb").exists()


def test_duckdb_needs_a_file_for_views(run, project) -> None:
    line = one_line(run, "view", project.spec_path, "-p", "top", "--view", "v")
    assert "the engine is DuckDB: name the database file" in line


def test_materialize_in_postgres_from_the_cli(run, tmp_path: Path, pg: PostgresEngine) -> None:
    path = spec(tmp_path, pg.dsn, pg.qualified("patients"))
    out = run("materialize", path, "-p", "age:cuts=18,65", "--table", pg.qualified("cli_release"))
    assert "wrote 500 rows to the database table" in out.stdout
    assert set(pg.read(pg.qualified("cli_release")).column("age").to_pylist()) == {"0-17", "18-64", "65-120"}
    line = one_line(run, "materialize", path, "-p", "top")
    assert "name the table to create in the postgres engine with --table" in line
