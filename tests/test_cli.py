"""Every ``deid-sql`` command through click's CliRunner, on the small problem of conftest."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import click
import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
import sqlglot
from click.testing import CliRunner
from sqlglot import exp

from deid_sql.backends.duckdb import DuckDBBackend
from deid_sql.cli import cli
from deid_sql.problem import Problem
from tests.engines import read_duckdb

POLICY = "age:cuts=18,65|race:top|zip:cuts=37301"
RACE_TOP = "White|Black|Asian|Other"
QIS = ("age", "sex", "race", "zip")
COMPILE_DIALECTS = ("duckdb", "postgres", "spark", "snowflake", "bigquery", "trino")

ACCEPT = ("--accept-risk", "test: the original data round-trips")  # the gate refuses it otherwise


def expected_labels(row: dict[str, object]) -> dict[str, str]:
    """POLICY's labels for one source row, written out by hand."""
    age = int(row["age"])  # type: ignore[call-overload]
    return {
        "age": "0-17" if age < 18 else "18-64" if age < 65 else "65-120",
        "sex": str(row["sex"]),
        "race": RACE_TOP,
        "zip": "372**" if str(row["zip"]).startswith("372") else "373**",
    }


def read_output(path: Path) -> pa.Table:
    if path.suffix == ".csv":
        # every column as text: labels like "0-17" must not be re-typed
        names = pacsv.read_csv(path).column_names
        return pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
            column_types={n: pa.string() for n in names if n != "patient_id"}))
    return pq.read_table(path)


def assert_policy_labels(project, table: pa.Table) -> None:
    """The released rows are the source's rows with POLICY's labels (patient_id dropped by the
    spec's roles): compared as multisets, since no identifier is left to join on."""
    assert table.num_rows == project.source.num_rows
    assert table.column_names == project.released_names
    names = project.released_names
    got = Counter(tuple(r[c] for c in names) for r in table.to_pylist())
    want = Counter(tuple({**row, **expected_labels(row)}[c] for c in names) for row in project.source.to_pylist())
    assert got == want


def no_temp_files(folder: Path) -> None:
    leftovers = [p.name for p in folder.rglob("*") if p.name.endswith((".tmp", ".wal")) or p.name.startswith(".")]
    assert leftovers == []


# -- help, docs ------------------------------------------------------------------------

def test_every_command_has_an_example_in_its_docstring() -> None:
    expected = {"validate", "evaluate", "compile", "materialize", "view", "demo", "safe-harbor", "alternatives"}
    assert expected <= set(cli.commands)
    for name, command in cli.commands.items():
        assert command.help and "Example:" in command.help, f"{name} has no 'Example:' in its docstring"
        assert f"deid-sql {name}" in command.help.split("Example:", 1)[1], name


def test_every_command_is_in_the_readme() -> None:
    readme = Path(__file__).resolve().parents[1] / "README.md"
    assert readme.exists(), "README.md is missing"
    text = readme.read_text(encoding="utf-8")
    missing = [name for name in cli.commands if f"deid-sql {name}" not in text]
    assert missing == [], f"commands not documented in README.md as 'deid-sql <command>': {missing}"


@pytest.mark.parametrize("name", ["validate", "evaluate", "compile", "materialize", "view", "demo"])
def test_help(run, name: str) -> None:
    result = run(name, "--help")
    assert "Example:" in result.stdout


def test_group_help_and_version(run) -> None:
    assert "demo" in run("--help").stdout
    assert "deid-sql" in run("--version").stdout
    run("no-such-command", expect=2)


# -- validate ----------------------------------------------------------------------------

def test_validate_ok_lists_qis(project, run) -> None:
    result = run("validate", project.spec_path)
    out = result.stdout
    assert out.startswith("ok: ")
    assert "500 records" in out
    for q in QIS:
        assert f"qi {q}" in out
    assert "121 values" in out and "0 … 120" in out
    assert "37201 … 37352" in out
    assert "lattice    133 bits" in out  # 120 + 1 + 3 + 9
    assert result.stderr == ""


def test_validate_sample_population(project, run) -> None:
    spec = project.spec(population=None, source="source.parquet")
    out = run("validate", spec).stdout
    assert "population sample" in out


def test_validate_broken_spec_prints_every_problem(project, run) -> None:
    spec = project.write_spec(project.spec_text(
        top='colour = "blue"\ngamma = -1', source_extra="sheet = 2",
        qis=('[[qi]]\nname = "age"\nkind = "number"\n', '[[qi]]\nname = "sex"\nkind = "category"\nwidth = 3\n'),
    ).replace("gamma = 1.0\n", ""))
    result = run("validate", spec, expect=2)
    lines = result.stderr.splitlines()
    assert result.stdout == ""
    assert all(line.startswith("error: ") for line in lines), lines
    text = result.stderr
    for fragment in ("unknown key 'colour'", "gamma = -1", "unknown key 'sheet' in [source]",
                     "kind = 'number'", "unknown key 'width' in [[qi]] 'sex'"):
        assert fragment in text
    assert len(lines) == 5


# -- evaluate ----------------------------------------------------------------------------

def test_evaluate_json(project, run) -> None:
    data = json.loads(run("evaluate", project.spec_path, "--policy", POLICY).stdout)
    assert isinstance(data, dict)
    for key in ("policy", "readable", "risk", "loss", "k", "expected_reidentifications", "groups", "records"):
        assert key in data
    assert data["records"] == 500
    assert 0.0 <= data["risk"] <= 1.0 and 0.0 <= data["loss"] <= 1.0
    assert data["policy"].startswith("age:") and "|zip:" in data["policy"]
    assert "[0-17]" in data["readable"]


def test_evaluate_several_policies_gives_a_list(project, run) -> None:
    data = json.loads(run("evaluate", project.spec_path, "-p", "bottom", "-p", "top", "-p", POLICY).stdout)
    assert isinstance(data, list) and len(data) == 3
    bottom, top, mid = data
    assert bottom["risk"] == pytest.approx(1.0) and bottom["loss"] == pytest.approx(0.0)
    assert top["k"] == 500 and top["groups"] == 1 and top["loss"] == pytest.approx(1.0)
    assert top["risk"] <= mid["risk"] <= bottom["risk"]


def test_evaluate_policy_from_file(project, run) -> None:
    (project.dir / "policy.txt").write_text(POLICY + "\n", encoding="utf-8")
    a = json.loads(run("evaluate", project.spec_path, "-p", f"@{project.dir / 'policy.txt'}").stdout)
    b = json.loads(run("evaluate", project.spec_path, "-p", POLICY).stdout)
    assert a == b
    result = run("evaluate", project.spec_path, "-p", f"@{project.dir / 'nope.txt'}", expect=2)
    assert "cannot read policy file" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("population", ["population.parquet", None])
def test_evaluate_sql_path_equals_fast_path(project, run, population) -> None:
    spec = project.spec(population=population)
    policies = ["bottom", "top", POLICY, "age:cuts=10,20,30,40,50,60,70,80,90|zip:cuts=37215,37301",
                "sex:0|race:101"]
    args = [a for p in policies for a in ("-p", p)]
    fast = json.loads(run("evaluate", spec, *args, "--path", "fast").stdout)
    sql = json.loads(run("evaluate", spec, *args, "--path", "sql").stdout)
    assert len(fast) == len(sql) == len(policies)
    for f, s in zip(fast, sql, strict=True):
        assert f.keys() == s.keys()
        for key, value in f.items():
            if isinstance(value, str):
                assert value == s[key]
            else:
                assert math.isclose(value, s[key], rel_tol=1e-9, abs_tol=1e-12), (key, value, s[key])


# -- compile -----------------------------------------------------------------------------

@pytest.mark.parametrize("dialect", COMPILE_DIALECTS)
@pytest.mark.parametrize("suppress", [None, 3])
def test_compile_parses_back(project, run, dialect: str, suppress: int | None) -> None:
    args = ["compile", project.spec_path, "-p", POLICY, "--dialect", dialect]
    if dialect != "duckdb":
        args += ["--source-table", "patients"]
    if suppress:
        args += ["--suppress-below", suppress]
    sql = run(*args).stdout
    statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    assert len(statements) == 1
    select = statements[0]
    assert isinstance(select, exp.Select)
    names = [e.alias_or_name for e in select.expressions]
    assert names == project.released_names + (["deid_suppressed"] if suppress else [])
    literals = {lit.this for lit in select.find_all(exp.Literal) if lit.is_string}
    assert {"0-17", "18-64", "65-120", RACE_TOP, "372**", "373**"} <= literals
    if dialect != "duckdb":
        assert any(t.name == "patients" for t in select.find_all(exp.Table))


def test_compile_duckdb_runs_and_matches_the_policy(project, run) -> None:
    sql = run("compile", project.spec_path, "-p", POLICY).stdout
    table = duckdb.connect().sql(sql.rstrip().rstrip(";")).to_arrow_table()
    assert_policy_labels(project, table)


def test_compile_with_table_runs_in_duckdb(project, run) -> None:
    sql = run("compile", project.spec_path, "-p", POLICY, "--source-table", "patients").stdout
    con = duckdb.connect()
    con.execute(f"CREATE TABLE patients AS SELECT * FROM read_parquet('{project.source_parquet}')")
    assert_policy_labels(project, con.sql(sql.rstrip().rstrip(";")).to_arrow_table())


# -- materialize ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["out.parquet", "out.csv"])
def test_materialize_file(project, run, name: str) -> None:
    out = project.dir / name
    result = run("materialize", project.spec_path, "-p", POLICY, "--out", out)
    assert "wrote 500 rows" in result.stdout
    assert_policy_labels(project, read_output(out))
    no_temp_files(project.dir)


def test_materialize_format_option(project, run) -> None:
    out = project.dir / "release.data"
    run("materialize", project.spec_path, "-p", POLICY, "--out", out, expect=2)
    run("materialize", project.spec_path, "-p", POLICY, "--out", out, "--format", "parquet")
    assert_policy_labels(project, pq.read_table(out))


@pytest.mark.slow
def test_materialize_duckdb_table(project, run) -> None:
    db = project.dir / "release.duckdb"
    result = run("materialize", project.spec_path, "-p", POLICY, "--out", db, "--table", "released")
    assert "table released" in result.stdout
    assert_policy_labels(project, read_duckdb(db, "released"))
    # a second table in the same file is fine; the same name needs --overwrite
    run("materialize", project.spec_path, "-p", "bottom", "--out", db, *ACCEPT)
    assert read_duckdb(db, "deidentified").num_rows == 500
    result = run("materialize", project.spec_path, "-p", "top", "--out", db, "--table", "released", expect=2)
    assert "already has a table named 'released'" in result.stderr
    assert_policy_labels(project, read_duckdb(db, "released"))
    run("materialize", project.spec_path, "-p", "top", "--out", db, "--table", "released", "--overwrite")
    top = read_duckdb(db, "released")
    assert top.num_rows == 500 and set(top.column("age").to_pylist()) == {"0-120"}
    no_temp_files(project.dir)


@pytest.mark.parametrize("name", ["out.parquet", "out.csv"])
def test_materialize_refuses_to_overwrite(project, run, name: str) -> None:
    out = project.dir / name
    out.write_bytes(b"precious")
    result = run("materialize", project.spec_path, "-p", POLICY, "--out", out, expect=2)
    assert "already exists" in result.stderr and "--overwrite" in result.stderr
    assert out.read_bytes() == b"precious"
    no_temp_files(project.dir)
    run("materialize", project.spec_path, "-p", POLICY, "--out", out, "--overwrite")
    assert_policy_labels(project, read_output(out))
    no_temp_files(project.dir)


@pytest.mark.parametrize("target", ["source.csv", "./source.csv", "../study/source.csv", "population.parquet",
                                    "spec.toml"])
@pytest.mark.parametrize("overwrite", [False, True])
def test_materialize_refuses_an_input_as_output(project, run, target: str, overwrite: bool) -> None:
    before = project.files()
    args = ["materialize", project.spec_path, "-p", POLICY, "--out", project.dir / target, "--format", "csv"]
    result = run(*args, *(["--overwrite"] if overwrite else []), expect=2)
    assert "is an input of the spec" in result.stderr
    assert project.files() == before


@pytest.mark.slow
def test_materialize_refuses_the_source_duckdb_file(project, run) -> None:
    db = project.dir / "warehouse.duckdb"
    con = duckdb.connect(str(db))
    con.execute(f"CREATE TABLE patients AS SELECT * FROM read_parquet('{project.source_parquet}')")
    con.close()
    spec = project.spec(source="warehouse.duckdb", source_extra='table = "patients"')
    before = project.files()
    result = run("materialize", spec, "-p", POLICY, "--out", db, "--table", "released", expect=2)
    assert "is an input of the spec" in result.stderr
    assert project.files() == before


def _truncating_query(monkeypatch) -> None:
    """Make the generalizing query lose rows, as a broken engine would."""
    original = Problem.query

    def query(self, *args, **kwargs):
        return original(self, *args, **kwargs).limit(10)

    monkeypatch.setattr(Problem, "query", query)


@pytest.mark.parametrize("name", ["out.parquet", "out.csv", "out.duckdb"])
def test_materialize_row_count_mismatch_writes_nothing(project, run, monkeypatch, name: str) -> None:
    _truncating_query(monkeypatch)
    before = project.files()
    result = run("materialize", project.spec_path, "-p", POLICY, "--out", project.dir / name, expect=2)
    assert "nothing was written" in result.stderr
    assert project.files() == before
    no_temp_files(project.dir)


def test_materialize_failing_engine_leaves_no_temp_file(project, run, monkeypatch) -> None:
    from deid_sql.errors import BackendError

    original = DuckDBBackend.stream

    def stream(self, query, batch_rows=1_000_000):
        yield from original(self, query, batch_rows)
        raise BackendError("DuckDB: simulated failure")

    monkeypatch.setattr(DuckDBBackend, "stream", stream)
    out = project.dir / "out.parquet"
    out.write_bytes(b"old")
    before = project.files()
    result = run("materialize", project.spec_path, "-p", POLICY, "--out", out, "--overwrite", expect=2)
    assert "simulated failure" in result.stderr
    assert project.files() == before
    no_temp_files(project.dir)


# -- view ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_view(project, run, tmp_path: Path) -> None:
    db = tmp_path / "analysts.duckdb"
    assert not db.exists()
    result = run("view", project.spec_path, "-p", POLICY, "--db", db, "--view", "patients_deid")
    assert "created view patients_deid" in result.stdout
    table = read_duckdb(db, "patients_deid")
    assert_policy_labels(project, table)
    # an existing name needs --overwrite
    result = run("view", project.spec_path, "-p", "top", "--db", db, "--view", "patients_deid", expect=2)
    assert "already has a table or view named 'patients_deid'" in result.stderr
    assert_policy_labels(project, read_duckdb(db, "patients_deid"))
    run("view", project.spec_path, "-p", "top", "--db", db, "--view", "patients_deid", "--overwrite")
    table = read_duckdb(db, "patients_deid")
    assert table.num_rows == 500 and set(table.column("race").to_pylist()) == {RACE_TOP}
    no_temp_files(tmp_path)


def test_view_refuses_an_input_as_database(project, run) -> None:
    before = project.files()
    result = run("view", project.spec_path, "-p", POLICY, "--db", project.source_csv, "--view", "v", expect=2)
    assert "is an input of the spec" in result.stderr
    assert project.files() == before


@pytest.mark.slow
def test_view_over_a_duckdb_source(project, run) -> None:
    db = project.dir / "warehouse.duckdb"
    con = duckdb.connect(str(db))
    con.execute(f"CREATE TABLE patients AS SELECT * FROM read_parquet('{project.source_parquet}')")
    con.close()
    spec = project.spec(source="warehouse.duckdb", source_extra='table = "patients"')
    other = project.dir / "other.duckdb"
    result = run("view", spec, "-p", POLICY, "--db", other, "--view", "v", expect=2)
    assert "create the view in that file" in result.stderr
    assert not other.exists()
    run("view", spec, "-p", POLICY, "--db", db, "--view", "patients_deid")
    assert_policy_labels(project, read_duckdb(db, "patients_deid"))


# -- suppression -------------------------------------------------------------------------------

def check_suppressed(table: pa.Table, k: int) -> int:
    rows = table.to_pylist()
    suppressed = [r for r in rows if r["deid_suppressed"]]
    for r in suppressed:
        assert all(r[q] == "*" for q in QIS), r
    kept = Counter(tuple(r[q] for q in QIS) for r in rows if not r["deid_suppressed"])
    assert kept and min(kept.values()) >= k
    assert all("*" not in key for key in kept)
    return len(suppressed)


@pytest.mark.slow
@pytest.mark.parametrize("k", [2, 5])
def test_suppress_below(project, run, tmp_path: Path, k: int) -> None:
    policy = "age:cuts=10,20,30,40,50,60,70,80,90|zip:cuts=37215,37301"
    plain = project.dir / "plain.parquet"
    run("materialize", project.spec_path, "-p", policy, "--out", plain)
    sizes = Counter(tuple(r[q] for q in QIS) for r in pq.read_table(plain).to_pylist())
    small = sum(n for n in sizes.values() if n < k)
    assert small > 0, "the test policy must leave some small groups"

    out = project.dir / "suppressed.parquet"
    run("materialize", project.spec_path, "-p", policy, "--out", out, "--suppress-below", k)
    table = pq.read_table(out)
    assert table.num_rows == 500
    assert table.column_names == project.released_names + ["deid_suppressed"]
    assert check_suppressed(table, k) == small

    db = tmp_path / "views.duckdb"
    run("view", project.spec_path, "-p", policy, "--db", db, "--view", "v", "--suppress-below", k)
    assert check_suppressed(read_duckdb(db, "v"), k) == small

    sql = run("compile", project.spec_path, "-p", policy, "--suppress-below", k).stdout
    assert check_suppressed(duckdb.connect().sql(sql.rstrip().rstrip(";")).to_arrow_table(), k) == small


def test_suppress_below_must_be_positive(project, run) -> None:
    result = run("compile", project.spec_path, "-p", POLICY, "--suppress-below", "0", expect=2)
    assert "--suppress-below" in result.stderr


# -- demo -------------------------------------------------------------------------------------

def test_demo_runs_with_no_arguments(run) -> None:
    result = run("demo")
    assert "risk" in result.stdout
    assert "view patients_deid created" in result.stdout
    # one no-census evaluation beside the census one (docs/no-census.md)
    assert "without a census (demo-no-census.toml" in result.stdout and "Dankar's rule takes" in result.stdout


@pytest.mark.slow
def test_demo_keeps_files_in_dir(run, tmp_path: Path) -> None:
    folder = tmp_path / "demo-out"
    result = run("demo", "--dir", folder, "--seed", "1")
    assert "risk" in result.stdout
    for name in ("demo.toml", "cohort.parquet", "population.parquet", "demo.duckdb"):
        assert (folder / name).is_file(), name
    run("validate", folder / "demo.toml")
    assert len(read_duckdb(folder / "demo.duckdb", "patients_deid")) == 20_000


COMMANDS = {"init", "validate", "evaluate", "compile", "materialize", "view", "safe-harbor", "alternatives", "frontier",
            "anonymize", "adversary", "channels", "dbt", "demo", "policy", "apply", "check", "ledger", "report", "help"}


def test_every_command_answers_help_with_its_usage_and_a_summary() -> None:
    """The command set is the documented one, and each command (and subcommand) has a one-line
    summary in ``deid-sql --help`` and its own ``--help`` page."""
    assert set(cli.commands) == COMMANDS
    runner = CliRunner()
    top = runner.invoke(cli, ["--help"])
    assert top.exit_code == 0 and all(f"  {name} " in top.stdout for name in COMMANDS), top.stdout
    todo = [[name] for name in cli.commands]
    while todo:
        path = todo.pop()
        command = cli
        for name in path:
            command = command.commands[name]  # type: ignore[attr-defined]
        page = runner.invoke(cli, [*path, "--help"])
        assert page.exit_code == 0 and f"Usage: cli {' '.join(path)}" in page.stdout, (path, page.stdout)
        assert command.get_short_help_str(200).strip(), path
        if isinstance(command, click.Group):
            todo.extend([*path, sub] for sub in command.commands)
