"""What belongs to an engine sits behind ``Backend``: nothing above ``backends/`` imports an engine's
package or compares an engine's name; the capabilities the jobs ask for (reading a source, a
catalog for outputs, reading back an output, failing a query) are the backends' answers; the
batch's domain guard is the compiler's guard (``guards.in_domain``), numeric ZIPs included."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sqlglot import exp

from deid_sql.backends import connect, engine_class
from deid_sql.backends.base import Backend
from deid_sql.errors import BackendError, DataError, OutputError
from deid_sql.policyfile import check_policy, save_policy
from deid_sql.release.output import preview
from deid_sql.release.plan import plan_of
from deid_sql.spec.file import TableRef
from tests.engines import Engine, engine_fixture, engine_params

PACKAGE = Path(__file__).resolve().parent.parent / "deid_sql"
ENGINES = ("duckdb", "postgres", "spark")
ENGINE_PACKAGES = ("duckdb", "psycopg", "pyspark", "py4j")
# Modules that may still say an engine's name, and why.  ``spec/file.py`` parses ``[backend]``, whose
# vocabulary the engine names are; it sits below ``backends/`` (it cannot ask a backend class).
# ``compiler/compile.py`` renders SQL text for a dialect that no engine of ours runs (``deid-sql compile
# --dialect``): DuckDB's SQL can name a source file by its path, other dialects need a table.
# spec/file.py reads [backend]; compiler/compile.py renders per dialect; ledger/database.py keeps deid-sql's own
# ledger file in DuckDB whatever engine a release runs on (an embedded store, as a file format: no release SQL),
# and ledger/postgres.py the same five tables on PostgreSQL through psycopg ([release] ledger_table: a store of
# the ledger's own, written with the ledger's own SQL, never a release's)
ALLOWED = {"spec/file.py", "compiler/compile.py", "ledger/database.py", "ledger/postgres.py"}


def _engine_names(path: Path) -> list[str]:
    """Where ``path`` imports an engine's package or backend module, compares an ``engine`` or
    ``dialect`` value with an engine's name, or connects to an engine by name."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if not node.level else [
                f"backends.{a.name}" for a in node.names if node.module == "backends"] + [
                (node.module or "").replace("backends.", "backends/")]
        else:
            names = []
        for name in names:
            if name.split(".")[0] in ENGINE_PACKAGES or any(f"backends/{e}" == name for e in ENGINES) or any(
                    name == f"backends.{e}" for e in ENGINES):
                found.append(f"{path.name}:{node.lineno}: imports {name}")
        if isinstance(node, ast.Compare) and all(isinstance(op, ast.Eq | ast.NotEq) for op in node.ops):
            sides = [node.left, *node.comparators]
            named = [ast.unparse(s) for s in sides if not isinstance(s, ast.Constant)]
            constants = [s.value for s in sides if isinstance(s, ast.Constant)]
            if any(c in ENGINES for c in constants) and any("engine" in n or "dialect" in n for n in named):
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
        if (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "connect"
                and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in ENGINES):
            found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.slow
def test_nothing_above_backends_names_an_engine() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "backends" or str(relative) in ALLOWED:
            continue
        found += [f"{relative.parent}/{line}" for line in _engine_names(path)]
    assert not found, "engine knowledge above backends/ (give Backend a method or attribute):\n" + "\n".join(found)


def test_the_scan_sees_engine_names(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('import duckdb\nfrom ..backends.postgres import PostgresBackend\n'
                      'if dialect == "spark":\n    pass\nif spec.backend.engine != "duckdb":\n    pass\n'
                      'x = connect("duckdb")\nif kind == "duckdb":\n    pass\n', encoding="utf-8")
    assert [line.split(":")[1] for line in _engine_names(module)] == ["1", "2", "3", "5", "7"]


# -- the capabilities, per engine class (no connection needed) -----------------------------------------------

def test_which_sources_each_engine_reads() -> None:
    csv, duck, table = TableRef(Path("b.csv"), "csv"), TableRef(Path("b.duckdb"), "duckdb", "t"), TableRef(
        None, "table", "s.t")
    duckdb_backend = engine_class("duckdb")
    assert duckdb_backend.unreadable(csv) is None and duckdb_backend.unreadable(duck) is None
    assert duckdb_backend.unreadable(table) == "reads batch files, not the table s.t of an engine"
    assert not duckdb_backend.catalog
    classes: list[type[Backend]] = []
    for name in ("postgres", "spark"):
        try:
            classes.append(engine_class(name))
        except BackendError:
            continue
    for cls in classes:
        assert cls.catalog and cls.unreadable(table) is None
        if cls.dialect == "postgres":
            assert cls.unreadable(csv) == "reads tables of its database, not the file b.csv"
        else:
            assert cls.unreadable(csv) is None
            assert cls.unreadable(duck) == "cannot read the DuckDB file b.duckdb"


def test_every_engine_class_fills_the_interface() -> None:
    for name in ENGINES:
        try:
            cls = engine_class(name)
        except BackendError:
            continue
        assert cls.dialect == name and cls.title and not cls.__abstractmethods__


# -- each engine's answers ------------------------------------------------------------------------------------

def _raise_error_fails_only_the_rows_that_reach_it(backend: Backend, table: exp.Expression) -> None:
    x = exp.column("x", quoted=True)

    def query(limit: int) -> exp.Select:
        case = exp.Case().when(x.copy() <= limit, exp.Literal.string("ok")).else_(
            backend.raise_error("x is too big", x.copy()))
        return exp.select(exp.alias_(case, "v")).from_(table.copy())

    assert backend.execute(query(3)).column("v").to_pylist() == ["ok"] * 3
    with pytest.raises(BackendError, match="x is too big"):
        backend.execute(query(2))


def test_duckdb_raise_error_fails_only_the_rows_that_reach_it() -> None:
    with connect("duckdb") as backend:
        backend.register_table("t", pa.table({"x": [1, 2, 3]}))
        _raise_error_fails_only_the_rows_that_reach_it(backend, exp.to_table("t"))


@pytest.fixture(scope="module", params=engine_params("postgres", "spark"))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


def test_engine_head_and_raise_error(engine: Engine, tmp_path: Path) -> None:
    """The catalog engines: ``head`` reads a table of their own catalog (never a DuckDB file), and
    ``raise_error`` fails exactly the queries a row reaches."""
    engine.load("iface", pa.table({"x": pa.array([1, 2, 3], pa.int64())}))
    backend: Backend = engine.backend  # type: ignore[attr-defined]
    name = engine.qualified("iface")  # type: ignore[attr-defined]
    assert sorted(backend.head(None, name, 5)) == [(1,), (2,), (3,)]
    assert len(backend.head(None, name, 2)) == 2
    with pytest.raises(OutputError, match="leave out --db"):
        backend.head(tmp_path / "x.duckdb", name, 2)
    table = exp.select("*").from_(exp.to_table(name)).subquery("t")
    _raise_error_fails_only_the_rows_that_reach_it(backend, table)


def test_head_reads_a_duckdb_file_read_only(tmp_path: Path) -> None:
    db = tmp_path / "out.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t AS SELECT range AS i FROM range(10)")
    con.execute("CREATE VIEW v AS SELECT i * 2 AS j FROM t ORDER BY i")
    con.close()
    before = db.read_bytes()
    assert preview(db, "v", rows=3) == [(0,), (2,), (4,)]
    with connect("duckdb") as backend:
        assert backend.head(db, "t", 2) == [(0,), (1,)]
        with pytest.raises(OutputError, match="the engine is DuckDB: name the database file"):
            backend.head(None, "t", 2)
    assert db.read_bytes() == before


def test_an_output_table_in_duckdb_needs_a_file(project) -> None:
    from deid_sql.problem import Problem

    with Problem.from_spec(project.spec_path) as problem:
        from deid_sql.release.output import materialize

        with pytest.raises(OutputError, match=r"name the output file with --out \(.parquet, .csv or .duckdb\)"):
            materialize(problem, plan_of(problem, "age:cuts=18,65"), None, table="t", accept_risk="test: interface")


# -- the batch's guard is the compiler's guard ---------------------------------------------------------------

@pytest.mark.slow
def test_a_numeric_zip_too_wide_for_the_domain_is_outside_the_batch_domain(project, tmp_path: Path) -> None:
    """A ZIP stored as a number is zero-padded to the domain's width, and ``lpad`` also cuts:
    372011 would become '37201', a domain ZIP.  The batch's guard must call it outside, as the
    compiled release's guard does (``guards.member``), not release it as 37201."""
    def numeric(table: pa.Table) -> pa.Table:
        i = table.column_names.index("zip")
        return table.set_column(i, "zip", pc.cast(table["zip"], pa.int64()))

    project.write_parquet(numeric(project.source), "numeric.parquet")
    project.write_parquet(numeric(project.population), "numeric_population.parquet")
    spec = project.spec("numeric.toml", source="numeric.parquet", population="numeric_population.parquet")
    policy = save_policy(spec, "age:cuts=18,65|race:top|zip:cuts=37301", tmp_path / "p.json")
    same = check_policy(policy, project.dir / "numeric.parquet")
    assert same.new.records == project.source.num_rows  # the saved data is inside its own domain
    wide = numeric(project.source).to_pydict()
    wide["zip"][0] = 372011
    batch = project.write_parquet(pa.table(wide, schema=numeric(project.source).schema), "wide.parquet")
    with pytest.raises(DataError, match=r"1 record\(s\) in 1 distinct value\(s\) of column 'zip' \(e.g. '372011'\)"):
        check_policy(policy, batch)
