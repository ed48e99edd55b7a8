"""Persons are told apart byte for byte (issue 38): a case-insensitive person key column.

A key column declared ``VARCHAR COLLATE NOCASE`` (DuckDB) or with a nondeterministic ICU collation
(PostgreSQL) makes ``Q1`` and ``q1`` one value to a plain ``GROUP BY``, ``PARTITION BY``,
``DISTINCT`` or join, while their pseudonyms (an HMAC of the bytes) are two.  ``evaluate`` counted
one person (k 3) where the gate counted two pseudonyms (k 6).  Every path now compares the key's
bytes (``sqltext.person_key``), like QI values (METHODS.md decision 12): the cells, the gate, the
person rewrite of a release, suppression windows, linked tables and their views, a policy file's
batches and a dbt model; ``validate`` names the key's collation.
"""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from deid_sql import Problem
from deid_sql.cli import cli
from deid_sql.release.plan import plan_of
from tests.engines import Engine, engine_params, open_engine
from tests.test_dbt import model_body

KEY = "bd0c27d844438bc97c2a19d90f430840f2060f9af73180ef1b56fa21c3df0b5e"  # random: a guessable key is refused
QIS = '''
[[qi]]
name = "age"
kind = "integer"
min = 0
max = 99
per_person = "first"
[[qi]]
name = "sex"
kind = "category"
values = ["F", "M"]
[columns]
{columns}
[release]
max_record_risk = 1.0
'''
PSEUDONYMIZED = 'drop = ["seen"]\npseudonymize = ["pid"]\nsecret_env = "DEID_PERSON_KEYS_KEY"'
DROPPED = 'drop = ["seen", "pid"]'  # stored SQL: the gate counts persons with the key, never released
Row = tuple[str | None, int, str, int]  # pid, age, sex, seen
# three pairs of persons whose keys differ only in case, one age band
PAIRS: list[Row] = [(f"{c}{i}", 31 + i, "F", 1) for i in range(3) for c in "Qq"]


def run(*args: object) -> Any:
    return CliRunner().invoke(cli, [str(a) for a in args])


class Collated:
    """A place holding tables whose ``pid`` column compares text case-insensitively: a DuckDB file
    (``VARCHAR COLLATE NOCASE``), the schema of a PostgreSQL ``engine`` with an ICU collation
    (``deterministic = false``) or a Spark database (``STRING COLLATE UTF8_LCASE``), shared by the
    module's tests (each names its tables with its own ``prefix``: a schema dropped after every test
    raced the server's removal of the CLI sessions' temporary views)."""

    def __init__(self, folder: Path, engine: Engine | None = None, prefix: str = "") -> None:
        self.folder, self.engine, self.prefix = folder, engine, prefix
        self.db = folder / "warehouse.duckdb"

    @property
    def spark(self) -> bool:
        return self.engine is not None and self.engine.name == "spark"

    @property
    def text(self) -> str:
        if self.engine is None:
            return "VARCHAR COLLATE NOCASE"
        if self.spark:
            return "STRING COLLATE UTF8_LCASE"
        return f'TEXT COLLATE "{self.engine.schema}".ci'  # type: ignore[attr-defined]

    def sql(self, statement: str, params: list[Any] | None = None) -> None:
        if self.engine is None:
            con = duckdb.connect(str(self.db))
            try:
                con.execute(statement, params)
            finally:
                con.close()
        elif self.spark:
            self.engine.backend.session.sql(statement, args=params)  # type: ignore[attr-defined]
        else:
            self.engine.backend.con.execute(statement, params)  # type: ignore[attr-defined]

    def qualified(self, table: str) -> str:
        """``table`` as a spec and a view name it: inside the test schema (database on Spark)."""
        if self.engine is None:
            return table
        return f"{self.engine.qualified('')}{self.prefix}{table}"  # type: ignore[attr-defined]

    def table(self, name: str, rows: list[Row]) -> str:
        """The table ``name`` (pid collated, age, sex, seen) holding ``rows``; the TOML lines naming it."""
        q = "`" if self.spark else '"'
        quoted = ".".join(f"{q}{part}{q}" for part in self.qualified(name).split("."))
        self.sql(f"CREATE TABLE {quoted} (pid {self.text}, age BIGINT, sex STRING, seen BIGINT)" if self.spark
                 else f"CREATE TABLE {quoted} (pid {self.text}, age BIGINT, sex TEXT, seen BIGINT)")
        mark = "?" if self.engine is None or self.spark else "%s"
        for row in rows:
            self.sql(f"INSERT INTO {quoted} VALUES ({mark}, {mark}, {mark}, {mark})", list(row))
        if self.engine is None:
            return f'path = "{self.db}"\ntable = "{name}"'
        return f'table = "{self.qualified(name)}"'

    def spec(self, rows: list[Row], columns: str = PSEUDONYMIZED, name: str = "visits") -> Path:
        """A spec over the table ``name`` of ``rows``: persons by ``pid``, first age by ``seen``."""
        header = self.engine.header() if self.engine is not None else ""
        path = self.folder / f"{self.prefix}{name}.toml"
        path.write_text(f"{header}\n[source]\n{self.table(name, rows)}\n[person]\ncolumn = \"pid\"\n"
                        f"order = \"seen\"\n" + QIS.format(columns=columns), encoding="utf-8")
        return path


@pytest.fixture(scope="module", params=engine_params("duckdb", "postgres", "spark"))
def place(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine | None]:
    """None (DuckDB: a file per test), the module's PostgreSQL engine, its schema holding the
    collation, or its Spark engine (UTF8_LCASE is built in)."""
    if request.param == "duckdb":
        yield None
        return
    if request.param == "spark":
        engine = open_engine("spark", tmp_path_factory.mktemp("spark"))
        try:
            yield engine
        finally:
            engine.close()
        return
    engine = open_engine("postgres", tmp_path_factory.mktemp("postgres"))
    try:
        schema = engine.schema  # type: ignore[attr-defined]
        engine.backend.con.execute(  # type: ignore[attr-defined]
            f'CREATE COLLATION "{schema}".ci (provider = icu, locale = \'und-u-ks-level2\', deterministic = false)')
        yield engine
    finally:
        engine.close()


@pytest.fixture
def collated(place: Engine | None, tmp_path: Path, request: pytest.FixtureRequest,
             monkeypatch: pytest.MonkeyPatch) -> Collated:
    monkeypatch.setenv("DEID_PERSON_KEYS_KEY", KEY)
    return Collated(tmp_path, place, re.sub(r"\W", "_", request.node.originalname)[5:40] + "_")


def released(path: Path) -> dict[str, set[tuple[str, str]]]:
    """Pseudonym → the (age, sex) labels its rows carry."""
    by: dict[str, set[tuple[str, str]]] = collections.defaultdict(set)
    for row in pq.read_table(path).to_pylist():
        by[row["pid"]].add((row["age"], row["sex"]))
    return dict(by)


def test_evaluate_and_the_gate_count_the_same_persons(collated: Collated) -> None:
    """Q0/q0, Q1/q1, Q2/q2: six persons for the load, as for the gate (k 6, not 3 against 6)."""
    spec = collated.spec(PAIRS)
    with Problem.from_spec(spec, cache=False) as problem:
        metrics = problem.evaluate("age:every=10")
    assert (problem.sample.total, metrics.k, metrics.groups) == (6, 6, 1)
    out = collated.folder / "release.parquet"
    result = run("materialize", spec, "--policy", "age:every=10", "--out", out, "--no-cache")
    assert result.exit_code == 0, result.output
    figures = json.loads(Path(f"{out}.release.json").read_text(encoding="utf-8"))["figures"]
    assert (figures["records"], figures["k"]) == (metrics.sample_unique_records + 6, metrics.k)
    assert len(released(out)) == 6


def test_validate_names_the_key_columns_collation(collated: Collated) -> None:
    result = run("validate", collated.spec(PAIRS), "--no-cache")
    assert result.exit_code == 0, result.output
    assert "6 persons" in result.output
    note = next(line for line in result.output.splitlines() if "[person] column 'pid'" in line)
    assert "COLLATE" in note.upper() and "byte for byte" in note and "3 person(s) more" in note


def test_a_persons_rows_carry_their_own_values(collated: Collated) -> None:
    """q1's sex differs from Q1's (no varying QI: two persons), and q1's first visit (seen 0) is not
    Q1's: each keeps their own first age in the release (the windows partition by the bytes)."""
    rows: list[Row] = [("Q1", 30, "F", 1), ("Q1", 33, "F", 2), ("q1", 50, "M", 0), ("q1", 52, "M", 3)]
    rows += [(f"P{i}", 30 + i, "F", 1) for i in range(4)] + [(f"R{i}", 50 + i, "M", 1) for i in range(4)]
    spec = collated.spec(rows)
    out = collated.folder / "release.parquet"
    result = run("materialize", spec, "--policy", "age:every=10", "--out", out, "--no-cache")
    assert result.exit_code == 0, result.output
    labels = sorted(released(out).values(), key=sorted)
    assert labels.count({("30-39", "F")}) == 5 and labels.count({("50-59", "M")}) == 5  # Q1 with P*, q1 with R*
    assert len(labels) == 10


def test_suppression_counts_persons_differing_in_case(collated: Collated) -> None:
    """The window of ``--suppress-below`` counts Q1 and q1 as two persons: their group is kept."""
    rows: list[Row] = [("Q1", 30, "F", 1), ("Q1", 30, "F", 2), ("q1", 31, "F", 1), ("Z", 70, "M", 1)]
    out = collated.folder / "release.parquet"
    result = run("materialize", collated.spec(rows), "--policy", "age:every=10", "--suppress-below", 2,
                 "--out", out, "--no-cache")
    assert result.exit_code == 0, result.output
    flagged = {(r["age"], r["deid_suppressed"]) for r in pq.read_table(out).to_pylist()}
    assert flagged == {("30-39", False), ("*", True)}


def test_a_view_counts_and_partitions_by_the_key_bytes(collated: Collated) -> None:
    """A view (the key dropped, the gate counting with it): the same k as evaluate, and each
    person's first age."""
    rows: list[Row] = [("Q1", 30, "F", 1), ("Q1", 33, "F", 2), ("q1", 50, "F", 0), ("q1", 52, "F", 3),
                       ("P2", 35, "F", 1)]
    spec = collated.spec(rows, DROPPED)
    name = collated.qualified("visits_deid")
    args = ["--db", collated.db] if collated.engine is None else []
    result = run("view", spec, "--policy", "age:every=10", "--view", name, *args, "--no-cache")
    if collated.spark:  # the test's Spark keeps its catalog in memory: a view would not outlive the command
        assert result.exit_code == 2 and "catalog lives in memory" in result.output, result.output
        return
    assert result.exit_code == 0, result.output
    assert "released 3 persons: 2 groups, k = 1" in result.output
    if collated.engine is None:
        con = duckdb.connect(str(collated.db), read_only=True)
        ages = sorted(r[0] for r in con.execute("SELECT age FROM visits_deid").fetchall())
        con.close()
    else:
        ages = sorted(collated.engine.read(name).column("age").to_pylist())
    assert ages == ["30-39", "30-39", "30-39", "50-59", "50-59"]


# -- DuckDB only: sets, set views, policy-file batches, dbt ---------------------------------------------

@pytest.fixture
def nocase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Collated:
    monkeypatch.setenv("DEID_PERSON_KEYS_KEY", KEY)
    return Collated(tmp_path)


def linked_spec(place: Collated, persons: list[Row], stays: list[tuple[str, str]]) -> Path:
    """A set: the person source ``visits`` and the linked table ``stays`` (pid collated, unit)."""
    spec = place.spec(persons)
    place.sql("CREATE TABLE stays (pid VARCHAR COLLATE NOCASE, unit VARCHAR)")
    for row in stays:
        place.sql("INSERT INTO stays VALUES (?, ?)", list(row))
    spec.write_text(spec.read_text(encoding="utf-8") + f'\n[[table]]\nname = "stays"\npath = "{place.db}"\n'
                    'table = "stays"\nkeep = ["unit"]\n', encoding="utf-8")
    return spec


def test_a_linked_row_joins_its_person_byte_for_byte(nocase: Collated) -> None:
    """A stay of 'Q1' when the person source holds only 'q1' is an orphan (refused with its count),
    not a row of q1's."""
    persons: list[Row] = [("q1", 30, "F", 1), ("P2", 31, "F", 1)]
    spec = linked_spec(nocase, persons, [("q1", "A"), ("Q1", "B"), ("P2", "A")])
    result = run("materialize", spec, "--policy", "age:every=10", "--out", nocase.folder / "set", "--no-cache")
    assert result.exit_code == 2, result.output
    assert "has 1 row(s) whose person is not in the person source" in result.output


def test_set_views_give_each_spelling_its_own_pseudonym(nocase: Collated) -> None:
    """The key table of a set's views has one row per byte-distinct key: Q1's and q1's stays carry
    their own person's pseudonym, as the person view does."""
    persons: list[Row] = [("Q1", 30, "F", 1), ("q1", 31, "F", 1)]
    spec = linked_spec(nocase, persons, [("Q1", "A"), ("q1", "B"), ("q1", "C")])
    result = run("view", spec, "--policy", "age:every=10", "--db", nocase.db, "--view", "deid_", "--no-cache")
    assert result.exit_code == 0, result.output
    con = duckdb.connect(str(nocase.db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM deid_keys").fetchone() == (2,)
        people = {r[0] for r in con.execute("SELECT pid FROM deid_visits").fetchall()}
        stays = collections.Counter(r[0] for r in con.execute("SELECT pid FROM deid_stays").fetchall())
    finally:
        con.close()
    assert len(people) == 2 and set(stays) == people and sorted(stays.values()) == [1, 2]


def test_a_batch_counts_persons_differing_in_case(nocase: Collated) -> None:
    """A policy file's batch: Q1 and q1 with different sexes are two persons (no varying QI), and
    its gate counts them as its drift check does."""
    spec = nocase.spec([(f"P{i}", 30 + i, "FM"[i % 2], 1) for i in range(6)])
    policy = nocase.folder / "policy.json"
    result = run("policy", "save", spec, "--policy", "age:every=10|sex:top", "--out", policy, "--no-cache")
    assert result.exit_code == 0, result.output
    nocase.table("batch", [("Q1", 30, "F", 1), ("q1", 31, "M", 1), ("Q2", 32, "F", 1), ("q2", 33, "M", 1)])
    out = nocase.folder / "batch.parquet"
    result = run("apply", policy, "--source", nocase.db, "--source-table", "batch", "--out", out)
    assert result.exit_code == 0, result.output
    assert "released 4 persons: 1 group, k = 4" in result.output
    assert len({r["pid"] for r in pq.read_table(out).to_pylist()}) == 4


def test_a_dbt_model_partitions_by_the_key_bytes(nocase: Collated) -> None:
    """The model's SQL (its ``{{ source() }}`` read as the table) gives Q1 and q1 their own first age."""
    from deid_sql.dbt import write_dbt

    rows: list[Row] = [("Q1", 30, "F", 1), ("Q1", 33, "F", 2), ("q1", 50, "F", 0), ("q1", 52, "F", 3),
                       ("P2", 35, "F", 1)]
    spec = nocase.spec(rows, DROPPED)
    with Problem.from_spec(spec, cache=False) as problem:
        written = write_dbt(problem, plan_of(problem, "age:every=10"), nocase.folder / "dbt", model="visits_deid")
    assert written.figures is not None and written.figures.records == 3
    model = (nocase.folder / "dbt" / "models" / "visits_deid.sql").read_text(encoding="utf-8")
    body = model_body(model)  # after the header comment, the config line and the run-time input guard
    sql = re.sub(r"\{\{ source\([^)]*\) \}\}", '"visits"', body)
    con = duckdb.connect(str(nocase.db), read_only=True)
    try:
        ages = sorted(r[0] for r in con.execute(sql).fetchall())
    finally:
        con.close()
    assert ages == ["30-39", "30-39", "30-39", "50-59", "50-59"]
