"""Outputs: awkward names and values round-trip exactly; written files and views are complete.

The source here has column names that are SQL keywords or contain quotes,
semicolons and non-ASCII letters, as QIs and as plain columns, and values that
look like SQL.  Everything is written through DuckDB and read back with other
readers, and the compiled SQL parses back in the target dialects.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
import sqlglot
from sqlglot import exp

from tests.engines import read_duckdb

SELECT_VALUES = ["O'Brien", "a;b", "Zoë", "DROP TABLE x"]
QUOTE_VALUES = ['"quoted"', "back\\slash", "日本", "--comment", "/* c */", "'; DROP TABLE t; --"]
FREE_TEXT = ["Robert'); DROP TABLE students;--", 'say "hi"', "naïve café", "tab\there", "semi;colon", "",
             "x' OR '1'='1", "ünïcödé ✓", "SELECT * FROM secrets"]
N = 240

ACCEPT = ("--accept-risk", "test: the original data round-trips")  # the gate refuses it otherwise


def weird_table(newlines: bool) -> pa.Table:
    text = FREE_TEXT + (["two\nlines"] if newlines else [])
    return pa.table({
        "id": pa.array(range(N), pa.int64()),
        "select": pa.array([SELECT_VALUES[i % 4] for i in range(N)]),
        "it's": pa.array([(i * 7) % 121 for i in range(N)], pa.int64()),
        "a;b": pa.array([text[i % len(text)] for i in range(N)]),
        'naïve "q"': pa.array([QUOTE_VALUES[(i // 3) % len(QUOTE_VALUES)] for i in range(N)]),
        "from": pa.array([None if i % 11 == 0 else f"row {i}" for i in range(N)]),
    })


def weird_spec(source: str) -> str:
    def s(v: object) -> str:
        return json.dumps(v, ensure_ascii=False)

    return "\n".join([
        'population = "sample"',
        f"[source]\npath = {s(source)}",
        f'[[qi]]\nname = "select"\nkind = "category"\nvalues = {s(SELECT_VALUES)}',
        '[[qi]]\nname = "it\'s"\nkind = "integer"\nmin = 0\nmax = 120',
        f'[[qi]]\nname = {s(chr(110) + "aïve " + chr(34) + "q" + chr(34))}\nkind = "category"\n'
        f"values = {s(QUOTE_VALUES)}",
        f"[columns]\nkeep = {s(['id', 'a;b', 'from'])}",  # awkward names through the roles too
        "[release]\nmax_record_risk = 1.0",  # no criteria, no release: a permissive one
        "",
    ])


@pytest.fixture(params=["parquet", "csv"])
def weird(request, tmp_path: Path):
    """(spec path, source table as DuckDB reads it) with the awkward source as Parquet or CSV."""
    table = weird_table(newlines=request.param == "parquet")
    source = tmp_path / f"weird source.{request.param}"
    if request.param == "parquet":
        pq.write_table(table, source)
    else:
        pacsv.write_csv(table, source)
        # DuckDB reads a quoted empty field ("") as NULL, like most CSV readers
        table = table.set_column(3, "a;b", pa.array([v or None for v in table.column("a;b").to_pylist()]))
    spec = tmp_path / "weird.toml"
    spec.write_text(weird_spec(source.name), encoding="utf-8")
    return spec, table


def as_released(table: pa.Table) -> list[dict[str, object]]:
    """The source as the bottom policy releases it: QIs as text, the rest unchanged."""
    rows = table.to_pylist()
    for r in rows:
        r["it's"] = str(r["it's"])
    return rows


def read_back_csv(path: Path, names: list[str]) -> pa.Table:
    types = {n: pa.string() for n in names}
    types["id"] = pa.int64()
    return pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
        column_types=types, strings_can_be_null=True, quoted_strings_can_be_null=False))


def test_validate_weird_names(weird, run) -> None:
    spec, _ = weird
    out = run("validate", spec).stdout
    assert "qi select" in out and "qi it's" in out and 'qi naïve "q"' in out
    assert "O'Brien … DROP TABLE x" in out


@pytest.mark.parametrize("out_name", ["out.parquet", "out.csv", "out.duckdb"])
def test_bottom_policy_round_trips_every_value(weird, run, tmp_path: Path, out_name: str) -> None:
    spec, table = weird
    out = tmp_path / out_name
    name = 'it\'s "released"; DROP'
    args = ["--table", name] if out_name.endswith(".duckdb") else []
    run("materialize", spec, "-p", "bottom", "--out", out, *args, *ACCEPT)
    if out_name.endswith(".parquet"):
        back = pq.read_table(out)
    elif out_name.endswith(".csv"):
        back = read_back_csv(out, table.column_names)
    else:
        back = read_duckdb(out, name)
    assert back.column_names == table.column_names
    got = back.to_pylist()
    expected = as_released(table)
    if out_name.endswith(".csv"):  # written "" and NULL may read back either way: compare the rest exactly
        assert [r["a;b"] or "" for r in got] == [r["a;b"] or "" for r in expected]
        got = [{**r, "a;b": None} for r in got]
        expected = [{**r, "a;b": None} for r in expected]
    assert got == expected


def test_generalized_labels_round_trip(weird, run, tmp_path: Path) -> None:
    spec, table = weird
    out = tmp_path / "out.parquet"
    policy = 'select:cuts=Zoë|it\'s:cuts=18,65|naïve "q":top'
    run("materialize", spec, "-p", policy, "--out", out)
    got = pq.read_table(out).to_pylist()
    quote_top = "|".join(v.replace("\\", "\\\\") for v in QUOTE_VALUES)  # a backslash is escaped in a merged label
    for g, r in zip(got, table.to_pylist(), strict=True):
        assert g["select"] == ("O'Brien|a;b" if r["select"] in SELECT_VALUES[:2] else "Zoë|DROP TABLE x")
        age = r["it's"]
        assert g["it's"] == ("0-17" if age < 18 else "18-64" if age < 65 else "65-120")
        assert g['naïve "q"'] == quote_top
        assert (g["id"], g["a;b"], g["from"]) == (r["id"], r["a;b"], r["from"])


@pytest.mark.slow
def test_view_with_awkward_name(weird, run, tmp_path: Path) -> None:
    spec, table = weird
    db = tmp_path / "views.duckdb"
    name = 'v; DROP TABLE "x" --'
    run("view", spec, "-p", "bottom", "--db", db, "--view", name, *ACCEPT)
    assert read_duckdb(db, name).to_pylist() == as_released(table)
    result = run("view", spec, "-p", "bottom", "--db", db, "--view", name, *ACCEPT, expect=2)
    assert "already has a table or view named" in result.stderr
    # select:top alone still tells every record apart by "it's" (the original data): generalize that too
    run("view", spec, "-p", "select:top|it's:cuts=60", "--db", db, "--view", name, "--overwrite")
    assert set(read_duckdb(db, name).column("select").to_pylist()) == {"|".join(SELECT_VALUES)}


def test_suppression_with_awkward_names(weird, run, tmp_path: Path) -> None:
    spec, table = weird
    out = tmp_path / "out.parquet"
    run("materialize", spec, "-p", "it's:cuts=60", "--out", out, "--suppress-below", "4")
    rows = sorted(pq.read_table(out).to_pylist(), key=lambda r: r["id"])  # the window may reorder rows
    qis = ["select", "it's", 'naïve "q"']
    assert len(rows) == N
    kept = Counter(tuple(r[q] for q in qis) for r in rows if not r["deid_suppressed"])
    assert min(kept.values()) >= 4
    assert all(all(r[q] == "*" for q in qis) for r in rows if r["deid_suppressed"])
    assert [r["a;b"] for r in rows] == table.column("a;b").to_pylist()


@pytest.mark.parametrize("dialect", ["duckdb", "postgres", "spark", "snowflake", "bigquery", "trino"])
def test_compiled_sql_parses_back_with_every_name_and_value(weird, run, dialect: str) -> None:
    spec, table = weird
    policy = 'select:cuts=Zoë|naïve "q":cuts=日本'
    args = [] if dialect == "duckdb" else ["--table", "patients"]
    sql = run("compile", spec, "-p", policy, "--dialect", dialect, *args).stdout
    statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    assert len(statements) == 1
    tree = statements[0]
    assert [e.alias_or_name for e in tree.expressions] == table.column_names
    literals = {lit.this for lit in tree.find_all(exp.Literal) if lit.is_string}
    # inside a merged label a backslash is escaped (deid_sql.domains.domain.escape), so labels split back into values
    labels = {"O'Brien|a;b", "Zoë|DROP TABLE x", '"quoted"|back\\\\slash', "日本|--comment|/* c */|'; DROP TABLE t; --"}
    assert labels <= literals
    assert set(SELECT_VALUES) <= literals and set(QUOTE_VALUES) <= literals
    if dialect != "duckdb":
        assert [t.name for t in tree.find_all(exp.Table)] == ["patients"]


@pytest.mark.parametrize("dialect", ["duckdb", "postgres"])
def test_compiled_sql_runs_and_matches_materialize(weird, run, tmp_path: Path, dialect: str) -> None:
    spec, table = weird
    policy = 'select:cuts=Zoë|naïve "q":cuts=日本|it\'s:cuts=30,60'
    out = tmp_path / "out.parquet"
    run("materialize", spec, "-p", policy, "--out", out)
    con = duckdb.connect()
    if dialect == "duckdb":
        sql = run("compile", spec, "-p", policy).stdout
    else:
        sql = run("compile", spec, "-p", policy, "--dialect", dialect, "--table", "patients").stdout
        con.register("patients_arrow", table)
        con.execute("CREATE TABLE patients AS SELECT * FROM patients_arrow")
    got = con.sql(sql.rstrip().rstrip(";")).to_arrow_table()
    assert got.to_pylist() == pq.read_table(out).to_pylist()


def test_evaluate_weird_names(weird, run) -> None:
    spec, _ = weird
    data = json.loads(run("evaluate", spec, "-p", "bottom", "-p", 'select:top|naïve "q":top').stdout)
    assert [d["records"] for d in data] == [N, N]
    assert "select:" in data[1]["policy"] and 'naïve "q":' in data[1]["policy"]


# -- other output properties ---------------------------------------------------------------------------

def test_zip_with_leading_zeros_stays_text(run, tmp_path: Path) -> None:
    zips = ["02134", "02135", "10001", "00501"]
    table = pa.table({"zip": [zips[i % 4] for i in range(40)], "age": [20 + i % 7 for i in range(40)]})
    pacsv.write_csv(table, tmp_path / "z.csv")
    spec = tmp_path / "z.toml"
    spec.write_text('population = "sample"\n[source]\npath = "z.csv"\n'
                    '[[qi]]\nname = "zip"\nkind = "zip"\n'
                    '[[qi]]\nname = "age"\nkind = "integer"\nmin = 0\nmax = 120\n'
                    '[release]\nmax_record_risk = 1.0\n', encoding="utf-8")
    assert "00501 … 10001" in run("validate", spec).stdout
    out = tmp_path / "out.parquet"
    run("materialize", spec, "-p", "bottom", "--out", out, *ACCEPT)
    assert pq.read_table(out).column("zip").to_pylist() == table.column("zip").to_pylist()
    run("materialize", spec, "-p", "zip:cuts=10001", "--out", out, "--overwrite")
    assert set(pq.read_table(out).column("zip").to_pylist()) == {"0****", "10001"}


def test_outputs_have_no_flag_without_suppression(project, run) -> None:
    out = project.dir / "out.parquet"
    run("materialize", project.spec_path, "-p", "top", "--out", out)
    assert "deid_suppressed" not in pq.read_table(out).column_names
    run("materialize", project.spec_path, "-p", "top", "--out", out, "--overwrite", "--suppress-below", "2")
    flags = pq.read_table(out).column("deid_suppressed").to_pylist()
    assert flags == [False] * 500  # everything in one group of 500


@pytest.mark.slow
def test_materialize_duckdb_from_a_duckdb_source(project, run, tmp_path: Path) -> None:
    db = project.dir / "warehouse.duckdb"
    con = duckdb.connect(str(db))
    con.execute(f"CREATE TABLE \"patients; x\" AS SELECT * FROM read_parquet('{project.source_parquet}')")
    con.close()
    spec = project.spec(source="warehouse.duckdb", source_extra='table = "patients; x"')
    out = tmp_path / "release.duckdb"
    run("materialize", spec, "-p", "race:top", "--out", out)
    back = read_duckdb(out, "deidentified")
    assert back.num_rows == 500
    assert set(back.column("race").to_pylist()) == {"White|Black|Asian|Other"}
    # the source database is untouched and still readable
    assert read_duckdb(db, "patients; x").num_rows == 500
