"""Declared value transformations (issue 42): ``[[qi]] transform = "floor" | "round"`` and ``scale``.

An infant's age of 0.7 years is 0 whole years (floor); an age stored in decades, 0.19, is 19 years
(scale = 100, round).  The spec holds the transformation; every path reads the QI's whole number
through one SQL definition that equals the Python reference (``loading.transform.transformed``) on
every engine, and a raw value is never released: the released column is the label of the whole
number, and a raw value outside the domain (or no number at all) is refused with raw → whole shown.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sqlglot import exp

from deid_sql import Problem
from deid_sql.backends import local
from deid_sql.errors import SpecError
from deid_sql.loading.transform import transform_source, transformed, whole
from deid_sql.release.plan import plan_of
from deid_sql.spec.file import QISpec, Spec
from deid_sql.spec.transform import TOLERANCE
from deid_sql.sqltext import to_sql
from tests.engines import ENGINES, Engine, engine_fixture, engine_params, sorted_rows

QI = '''[[qi]]
name = "age"
kind = "integer"
min = 0
max = 120
{extra}
'''
SPEC = '''population = "sample"
[source]
path = "{source}"
''' + QI + '''
[[qi]]
name = "sex"
kind = "category"
values = ["F", "M"]

[columns]
keep = ["id"]

[release]
max_record_risk = 1.0
allow_original_data = true
'''
AGES = [0.2, 0.7, 0.29, 0.5, 0.99, 1.0, 1.5, 17.999, 18.0, 45.25, 64.5, 89.9, 119.5]


def write(folder: Path, ages: list[Any], extra: str = 'transform = "floor"', name: str = "people.parquet") -> Path:
    table = pa.table({"id": list(range(len(ages))), "age": ages, "sex": ["F", "M"] * (len(ages) // 2)
                      + ["F"] * (len(ages) % 2)})
    if name.endswith(".csv"):
        pacsv.write_csv(table, folder / name)
    else:
        pq.write_table(table, folder / name)
    spec = folder / "people.toml"
    spec.write_text(SPEC.format(source=name, extra=extra), encoding="utf-8")
    return spec


def release(spec: Path, out: Path, policy: str = "age:bottom|sex:bottom") -> dict[int, str]:
    """Each id's released age."""
    from deid_sql.release.output import materialize

    with Problem.from_spec(spec, cache=False) as problem:
        materialize(problem, plan_of(problem, policy), out)
    table = pq.read_table(out)
    return dict(zip(table.column("id").to_pylist(), table.column("age").to_pylist()))


def qi(how: str, scale: float = 1.0) -> QISpec:
    return QISpec(name="age", column="age", population_column="age", kind="integer", min=0, max=120,
                  transform=how, scale=scale)


# -- the spec ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("extra, message", [
    ('scale = 100', 'scale = 100 needs transform = "floor" or "round"'),
    ('transform = "ceil"', "transform = 'ceil' must be \"floor\""),
    ('transform = "floor"\nscale = 0', "scale = 0 must be a positive number"),
    ('transform = "floor"\nscale = -10', "scale = -10 must be a positive number"),
    ('transform = "floor"\nscale = true', "scale = True must be a positive number"),
    ('transform = "floor"\nscale = "100"', "scale = '100' must be a positive number"),
    ('transform = "floor"\nscale = nan', "scale = nan must be a positive number"),
    ('transform = "round"\nscale = inf', "scale = inf must be a positive number"),
])
def test_a_bad_transform_is_one_line_naming_the_fix(tmp_path: Path, extra: str, message: str) -> None:
    spec = write(tmp_path, AGES, extra)
    with pytest.raises(SpecError) as e:
        Spec.read(spec)
    assert len(e.value.problems) == 1 and message in e.value.problems[0], e.value.problems


def test_a_transform_is_only_for_an_integer_qi_read_from_a_column(tmp_path: Path) -> None:
    spec = write(tmp_path, AGES)
    text = spec.read_text(encoding="utf-8").replace('values = ["F", "M"]', 'values = ["F", "M"]\ntransform = "floor"')
    spec.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError, match='is for integer QIs .kind = "integer".*not kind = .category.'):
        Spec.read(spec)
    derived = text.replace('values = ["F", "M"]\ntransform = "floor"', 'values = ["F", "M"]').replace(
        'population = "sample"', 'population = "sample"\n[person]\ncolumn = "id"').replace(
        '[columns]', '[[qi]]\nname = "rows"\nkind = "integer"\nmin = 1\nmax = 9\nderived = "rows"\n'
                     'transform = "round"\n\n[columns]').replace('keep = ["id"]', 'keep = []')
    spec.write_text(derived, encoding="utf-8")
    with pytest.raises(SpecError, match="is counted from the rows, not read from a column: remove transform"):
        Spec.read(spec)


def test_a_declared_transform_is_kept_with_its_scale(tmp_path: Path) -> None:
    q = Spec.read(write(tmp_path, AGES, 'transform = "round"\nscale = 100')).qis[0]
    assert (q.transform, q.scale) == ("round", 100.0)
    plain = Spec.read(write(tmp_path, AGES, "")).qis[0]
    assert (plain.transform, plain.scale) == (None, 1.0)


# -- the definition ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, how, scale, want", [
    (0.2, "floor", 1, 0), (0.7, "floor", 1, 0), (0.99, "floor", 1, 0), (1.0, "floor", 1, 1),
    (0.29, "floor", 100, 29),  # 28.999999999999996 in a double: the tolerance makes it the 29 written
    (0.57, "floor", 100, 57), (0.19, "round", 100, 19), (0.145, "round", 100, 15), (0.5, "round", 1, 1),
    (2.5, "round", 1, 3), (-2.5, "round", 1, -2), (-0.2, "floor", 1, -1), (44.999, "floor", 1, 44),
    (" 0.7 ", "floor", 1, 0), ("45", "round", 1, 45), (None, "floor", 1, None), ("NA", "floor", 1, None),
    (math.nan, "floor", 1, None), (math.inf, "round", 1, None), (1e300, "floor", 1, None),
    (1e-300, "floor", 1, None),  # no NUMERAL (three exponent digits): what every engine's text reads alike
])
def test_the_reference_on_tricky_values(value: Any, how: str, scale: float, want: int | None) -> None:
    assert transformed(value, how, scale) == want


def sql_wholes(values: list[Any], how: str, scale: float, sql_type: str = "DOUBLE") -> list[int | None]:
    """``whole`` run on DuckDB over a column of ``sql_type`` holding ``values``, in order."""
    con = duckdb.connect()
    try:
        if sql_type == "VARCHAR":
            values = [v if v is None or isinstance(v, str) else repr(v) for v in values]
        arrow = pa.table({"i": list(range(len(values))),
                          "age": pa.array(values, pa.string() if sql_type == "VARCHAR" else pa.float64())})
        con.register("arrow_values", arrow)
        con.execute(f"CREATE TABLE t AS SELECT i, CAST(age AS {sql_type}) AS age FROM arrow_values")
        query = exp.select(exp.alias_(whole(qi(how, scale), exp.column("age")), "w")).from_("t").order_by("i")
        return [r[0] for r in con.execute(to_sql(query, "duckdb")).fetchall()]
    finally:
        con.close()


@pytest.mark.parametrize("sql_type", ["DOUBLE", "DECIMAL(9,3)", "REAL", "VARCHAR"])
def test_the_sql_equals_the_reference_whatever_the_column_type(sql_type: str) -> None:
    values = [0.2, 0.7, 0.29, 0.5, 0.19, 0.145, 17.999, 64.5, -2.5, None]
    got = sql_wholes(values, "floor", 100, sql_type)
    assert got == [transformed(v, "floor", 100) for v in values]
    assert sql_wholes(values, "round", 1, sql_type)[:4] == [0, 1, 0, 1]  # a REAL's 0.29 reads as the 0.29 shown


scales = st.sampled_from([1.0, 10.0, 12.0, 100.0, 0.1, 365.25, 1e-3])


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.floats(-200, 200)
                       | st.decimals(-2, 2, places=2).map(float), min_size=1, max_size=30),
       how=st.sampled_from(["floor", "round"]), scale=scales)
@example(values=[0.29, 0.57, 0.58, 1.13, 0.145], how="floor", scale=100.0)
def test_the_sql_whole_number_is_the_floor_of_the_scaled_value_plus_the_tolerance(values: list[float], how: str,
                                                                                  scale: float) -> None:
    got = sql_wholes(values, how, scale)
    for value, whole_number in zip(values, got):
        want = transformed(value, how, scale)
        assert whole_number == want, (value, how, scale)
        if want is not None:  # and the reference is the declared formula
            v = value * scale
            assert want == math.floor(v + (0.5 if how == "round" else 0.0) + TOLERANCE * max(1.0, abs(v)))


# -- releases ---------------------------------------------------------------------------------------------

def test_the_release_holds_the_label_of_each_whole_number_never_the_raw_value(tmp_path: Path) -> None:
    spec = write(tmp_path, AGES)
    got = release(spec, tmp_path / "out.parquet")
    assert got == {i: str(transformed(a, "floor", 1)) for i, a in enumerate(AGES)}
    banded = release(spec, tmp_path / "bands.parquet", "age:every=5|sex:bottom")
    assert banded[0] == "0-4" and banded[AGES.index(17.999)] == "15-19" and banded[AGES.index(119.5)] == "115-119"
    assert not set(banded.values()) & {str(a) for a in AGES}


def test_decades_are_scaled_and_rounded(tmp_path: Path) -> None:
    decades = [0.19, 0.29, 0.57, 0.145, 0.005, 1.2]
    spec = write(tmp_path, decades, 'transform = "round"\nscale = 100', "people.csv")
    assert release(spec, tmp_path / "out.parquet") == {0: "19", 1: "29", 2: "57", 3: "15", 4: "1", 5: "120"}


def test_raw_values_outside_the_domain_or_no_number_are_refused_with_raw_and_whole(run, tmp_path: Path) -> None:
    spec = write(tmp_path, [*AGES, 120.2, 121.0, 130.5], name="people.csv")
    refused = run("validate", spec, expect=2)
    assert "2 row(s) of column 'age' become whole numbers outside the declared domain 0...120" in refused.stderr
    assert "(e.g. '121.0' → 121)" in refused.stderr
    (tmp_path / "people.csv").write_text("id,age,sex\n1,0.5,F\n2,NA,M\n3,,F\n", encoding="utf-8")
    refused = run("validate", spec, expect=2)
    assert "1 row(s) of column 'age' hold no number it can make whole (e.g. 'NA')" in refused.stderr
    assert "NULL" not in refused.stderr.split("hold no number")[0]  # the empty cell is NULL, said apart


def test_every_release_path_reads_the_whole_number(run, tmp_path: Path) -> None:
    """A view in the DuckDB file that holds the source table, compiled SQL run over that table, and a
    policy file's batch each release what materialize releases."""
    spec = write(tmp_path, AGES, 'transform = "round"\nscale = 100')
    ages = [a / 100 for a in AGES]
    pq.write_table(pa.table({"id": list(range(len(ages))), "age": ages,
                             "sex": (["F", "M"] * 7)[:len(ages)]}), tmp_path / "people.parquet")
    text = spec.read_text(encoding="utf-8")
    policy = "age:bottom|sex:bottom"  # a value transformed twice (0.19 → 19 → 1900) would leave the domain
    want = release(spec, tmp_path / "want.parquet", policy)
    assert want == {i: str(transformed(a, "round", 100)) for i, a in enumerate(ages)}
    db = tmp_path / "people.duckdb"
    con = duckdb.connect(str(db))
    con.execute(f"CREATE TABLE people AS SELECT * FROM '{tmp_path / 'people.parquet'}'")
    con.close()
    in_db = tmp_path / "in-db.toml"
    in_db.write_text(text.replace('path = "people.parquet"', 'path = "people.duckdb"\ntable = "people"'),
                     encoding="utf-8")
    run("view", in_db, "--policy", policy, "--db", db, "--view", "released")
    compiled = run("compile", in_db, "--policy", policy).stdout
    con = duckdb.connect(str(db))
    try:
        assert dict(con.execute("SELECT id, age FROM released").fetchall()) == want
        body = compiled.split(";")[0]
        assert dict((r[0], r[1]) for r in con.execute(f"SELECT id, age FROM ({body})").fetchall()) == want
    finally:
        con.close()
    run("policy", "save", spec, "--policy", policy, "--out", tmp_path / "policy.json")
    run("apply", tmp_path / "policy.json", "--source", tmp_path / "people.parquet", "--out", tmp_path / "batch.parquet")
    batch = pq.read_table(tmp_path / "batch.parquet")
    assert dict(zip(batch.column("id").to_pylist(), batch.column("age").to_pylist())) == want


def test_the_source_is_read_through_the_transform_once(tmp_path: Path) -> None:
    """Transforming is not idempotent (0.19 → 19 → 1900): the relation a release reads transforms once."""
    spec = write(tmp_path, [0.19, 0.29], 'transform = "round"\nscale = 100')
    with Problem.from_spec(spec, cache=False) as problem:
        assert problem.columns["age"] == "BIGINT"
        rows = problem.backend.execute(exp.select("age").from_(exp.Subquery(this=problem.source.copy(),
                                                                            alias="s")).order_by("age"))
        assert rows.column("age").to_pylist() == [19, 29]
    backend = local()
    try:
        relation = transform_source(Spec.read(spec), exp.to_table("t"), {"id": "BIGINT", "age": "DOUBLE"})
        assert len(list(relation.find_all(exp.Floor))) == 1
    finally:
        backend.close()


# -- every engine -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module", params=engine_params(*ENGINES))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


def test_every_engine_releases_the_same_whole_numbers(engine: Engine, tmp_path: Path) -> None:
    """Floor of fractional ages and rounded decades, on DuckDB, PostgreSQL and Spark: the same rows."""
    ages = [*AGES, 0.29 * 3, 1 / 3, 2 / 3, 64.49999999999, 0.1 + 0.2]
    for extra, values in (('transform = "floor"', ages), ('transform = "round"\nscale = 100', [a / 100 for a in ages])):
        local_spec = write(tmp_path, values, extra)
        how = extra.split('"')[1]
        source = engine.load(f"people_{how}", pq.read_table(tmp_path / "people.parquet"))
        spec = engine.folder / "people-transform.toml"
        spec.write_text(local_spec.read_text(encoding="utf-8").replace(
            'population = "sample"\n[source]\npath = "people.parquet"\n',
            'population = "sample"\n' + engine.header() + f'\n[source]\n{source}\n'), encoding="utf-8")
        out = tmp_path / how
        out.mkdir()
        want = release(local_spec, out / "want.parquet")
        assert want == {i: str(transformed(a, how, 100 if "scale" in extra else 1))
                        for i, a in enumerate(values)}
        got = release(spec, out / "got.parquet")
        assert sorted_rows(pq.read_table(out / "got.parquet")) == sorted_rows(pq.read_table(out / "want.parquet"))
        assert got == want


def test_a_sets_views_read_the_person_sources_whole_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A set of linked tables as views over an owner-only key table: the person source's view (and the key
    table's suppression, read from the release's own query) see the transformed ages, as materialize does."""
    from tests.test_linked import KEY, tables, utc_rows
    from tests.test_linked_tables import run as invoke
    from tests.test_set_views import NAMES, read_duckdb, warehouse

    monkeypatch.setenv("DEID_LINK_KEY", KEY)
    data = tables()
    want_folder = tmp_path / "years"
    want_folder.mkdir()
    files, _, _ = warehouse(want_folder, data)
    args = ("--policy", "age:every=10", "--suppress-below", "2")
    assert invoke("materialize", files, *args, "--out", want_folder / "want").exit_code == 0
    decades = {**data, "patients": [{**p, "age": p["age"] / 100} for p in data["patients"]]}

    def scaled(text: str) -> str:
        return text.replace('max = 99\n', 'max = 99\ntransform = "round"\nscale = 100\n').replace(
            'drop = ["enc_id"]', 'pseudonymize = ["enc_id"]')

    _, spec, db = warehouse(tmp_path, decades, edit=scaled)
    result = invoke("view", spec, *args, "--db", db, "--view", "deid_")
    assert result.exit_code == 0, result.output
    for name in NAMES:
        want = utc_rows(pq.read_table(want_folder / "want" / f"{name}.parquet"))
        assert utc_rows(read_duckdb(db, f"deid_{name}")) == want, name
    assert {str(a) for a in read_duckdb(db, "deid_patients").column("age").to_pylist()} >= {"20-29", "*"}


@pytest.mark.slow
def test_dbt_models_of_a_set_read_the_whole_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``dbt run`` of a set's models (the person model over the source with the ages in decades) gives
    the rows ``materialize`` gives for the same ages in years."""
    pytest.importorskip("dbt")
    pytest.importorskip("dbt.adapters.duckdb")
    from deid_sql.dbt.sets import write_dbt_set
    from deid_sql.sets.release import materialize_set
    from tests.test_dbt import dbt
    from tests.test_dbt_sets import MODELS, NAMES, rows_of
    from tests.test_dbt_sets import warehouse as dbt_warehouse
    from tests.test_linked import KEY

    monkeypatch.setenv("DEID_LINK_KEY", KEY)
    years = tmp_path / "years"
    years.mkdir()
    with Problem.from_spec(dbt_warehouse(years), cache=False) as problem:
        materialize_set(problem, plan_of(problem, "age:every=10", suppression=2), years / "released")
    spec = dbt_warehouse(tmp_path)
    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    con.execute("CREATE TABLE decades AS SELECT * REPLACE (age / 100.0 AS age) FROM patients")
    con.execute("DROP TABLE patients")
    con.execute("ALTER TABLE decades RENAME TO patients")
    con.close()
    spec.write_text(spec.read_text(encoding="utf-8").replace('max = 99\n', 'max = 99\ntransform = "round"\n'
                                                                            'scale = 100\n'), encoding="utf-8")
    project = tmp_path / "wh"
    with Problem.from_spec(spec, cache=False) as problem:
        write_dbt_set(problem, plan_of(problem, "age:every=10", suppression=2), project)
    built = dbt(project, project, "run")
    assert built.returncode == 0, built.stdout + built.stderr
    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True)
    try:
        for name, model in zip(NAMES, MODELS):
            assert rows_of(con.sql(f"SELECT * FROM {model}").to_arrow_table()) == rows_of(
                pq.read_table(years / "released" / f"{name}.parquet")), name
    finally:
        con.close()


def test_the_cells_cache_keys_on_the_transform(tmp_path: Path) -> None:
    """A cached load is reused only for the same transformation: floor and round of 29.5 are other cells."""
    from deid_sql.loading.cache import CellsCache

    cache = CellsCache(tmp_path / "cache")
    spec = write(tmp_path, [19.0, 29.5, 29.5, 45.2])

    def ages(extra: str) -> tuple[list[int], bool]:
        spec.write_text(spec.read_text(encoding="utf-8").replace('transform = "floor"', extra)
                        .replace('transform = "round"', extra), encoding="utf-8")
        with Problem.from_spec(spec, cache=cache) as problem:
            hit = problem.cells_cache is not None
            domain = problem.domains[0]
            return sorted({int(domain.value(int(p))) for p in problem.sample.positions[:, 0]}), hit

    floor, _ = ages('transform = "floor"')
    rounded, _ = ages('transform = "round"')
    assert floor == [19, 29, 45] and rounded == [19, 30, 45]
    again, hit = ages('transform = "floor"')
    assert again == floor and hit
