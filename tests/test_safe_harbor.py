"""Safe Harbor (METHODS.md decision 4) on hand-made data: the recoding, its SQL, its metrics.

ZIP → first three digits, every prefix with ≤ 20,000 people → "000" (population table, or
the HHS 2000 list without one); ages ≥ 90 → "90+"; dates → years; other QIs kept.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deid_sql import DeidError, Problem, SpecError
from deid_sql.release.plan import plan_of
from deid_sql.release.safe_harbor import HHS_2000_PREFIXES, PREFIX_LIMIT, safe_harbor

# Prefix totals in the census: 372 one above the limit, 373 exactly at it, 381 well above,
# 384 far below.  In ZIP order 372 < 373 < 381 < 384, so the 000 bucket {373xx, 384xx}
# is split by 381xx: a non-contiguous group.
CENSUS_ZIPS = ("37201", "37215", "37301", "37302", "38101", "38401")
PREFIX_TOTALS = {"372": PREFIX_LIMIT + 1, "373": PREFIX_LIMIT, "381": 50_000, "384": 7}
RESTRICTED = {"373", "384"}
AGES = range(85, 121)
SEXES = ("F", "M")

# Without a population table: 036 and 893 are on the HHS list, 372 is not.
SAMPLE_ZIPS = ("03601", "03602", "37201", "37203", "89301")
VISIT_LO, VISIT_HI = dt.date(2018, 12, 20), dt.date(2020, 1, 10)
BIRTH_LO, BIRTH_HI = dt.date(1930, 1, 1), dt.date(1930, 3, 31)

ROLE_AGE = 'role = "age"\n'
ROLE_ZIP = 'role = "zip"\n'


def census_spec(age_role: str = ROLE_AGE, zip_role: str = ROLE_ZIP) -> str:
    return (
        "gamma = 1.0\n\n[source]\npath = \"source.parquet\"\n\n"
        "[population]\npath = \"population.parquet\"\ncount = \"people\"\n\n"
        f"[[qi]]\nname = \"age\"\nkind = \"integer\"\nmin = 85\nmax = 120\n{age_role}\n"
        "[[qi]]\nname = \"sex\"\nkind = \"category\"\nvalues = [\"F\", \"M\"]\n\n"
        f"[[qi]]\nname = \"zip\"\nkind = \"zip\"\n{zip_role}"
        "\n[columns]\nkeep = [\"id\"]\nsensitive = [\"dx\"]\n"  # id kept so rows can be matched
    )


def write_census_problem(folder: Path, age_role: str = ROLE_AGE, zip_role: str = ROLE_ZIP) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    cells = [(a, s, z) for z in CENSUS_ZIPS for a in AGES for s in SEXES]
    people = np.zeros(len(cells), dtype=np.int64)
    rng = np.random.default_rng(5)
    for prefix, total in PREFIX_TOTALS.items():
        idx = np.array([i for i, c in enumerate(cells) if c[2].startswith(prefix)])
        share = rng.multinomial(total, np.full(idx.size, 1 / idx.size))  # sums to exactly ``total``
        people[idx] = share
    pq.write_table(pa.table({
        "age": [c[0] for c in cells], "sex": [c[1] for c in cells], "zip": [c[2] for c in cells],
        "people": people,
    }), folder / "population.parquet")
    n = 300
    ages = rng.integers(85, 121, n)
    ages[:4] = (85, 89, 90, 120)
    pq.write_table(pa.table({
        "id": np.arange(n), "age": ages, "sex": rng.choice(SEXES, n),
        "zip": rng.choice(CENSUS_ZIPS, n), "dx": rng.choice(["I10", "E11"], n),
    }), folder / "source.parquet")
    path = folder / "spec.toml"
    path.write_text(census_spec(age_role, zip_role), encoding="utf-8")
    return path


def write_sample_problem(folder: Path) -> Path:
    """No population table; a date QI with role "date" and a date QI without a role."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(9)
    n = 250
    visit_days = (VISIT_HI - VISIT_LO).days
    birth_days = (BIRTH_HI - BIRTH_LO).days
    ages = rng.integers(60, 111, n)
    ages[:3] = (60, 89, 90)
    visits = [VISIT_LO + dt.timedelta(days=int(d)) for d in rng.integers(0, visit_days + 1, n)]
    visits[:2] = [VISIT_LO, VISIT_HI]
    pq.write_table(pa.table({
        "id": np.arange(n), "age": ages, "sex": rng.choice(SEXES, n),
        "zip": rng.choice(SAMPLE_ZIPS, n),
        "visit": pa.array(visits, pa.date32()),
        "birth": pa.array([BIRTH_LO + dt.timedelta(days=int(d)) for d in rng.integers(0, birth_days + 1, n)],
                          pa.date32()),
    }), folder / "source.parquet")
    spec = (
        "gamma = 1.0\npopulation = \"sample\"\n\n[source]\npath = \"source.parquet\"\n\n"
        "[[qi]]\nname = \"age\"\nkind = \"integer\"\nmin = 60\nmax = 110\nrole = \"age\"\n\n"
        "[[qi]]\nname = \"sex\"\nkind = \"category\"\nvalues = [\"F\", \"M\"]\n\n"
        "[[qi]]\nname = \"zip\"\nkind = \"zip\"\nrole = \"zip\"\n\n"
        f"[[qi]]\nname = \"visit\"\nkind = \"date\"\nmin = {VISIT_LO}\nmax = {VISIT_HI}\nrole = \"date\"\n\n"
        f"[[qi]]\nname = \"birth\"\nkind = \"date\"\nmin = {BIRTH_LO}\nmax = {BIRTH_HI}\n"
        "\n[columns]\nkeep = [\"id\"]\n"
    )
    path = folder / "spec.toml"
    path.write_text(spec, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def census(tmp_path_factory) -> Iterator[Problem]:
    with Problem.from_spec(write_census_problem(tmp_path_factory.mktemp("census"))) as p:
        yield p


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Iterator[Problem]:
    with Problem.from_spec(write_sample_problem(tmp_path_factory.mktemp("sample"))) as p:
        yield p


def _rows(problem: Problem, query) -> list[dict]:
    return sorted(problem.backend.execute(query).to_pylist(), key=lambda r: r["id"])


def _source(problem: Problem) -> list[dict]:
    return _rows(problem, f"SELECT * FROM {problem.source_view}")


def _age_label(age: int) -> str:
    return "90+" if age >= 90 else str(age)


# -- with a population table ----------------------------------------------------------------


def test_prefix_populations_and_restricted_prefixes(census) -> None:
    sh = safe_harbor(census)
    assert sh.prefix_population == PREFIX_TOTALS
    assert sh.restricted_prefixes == tuple(sorted(RESTRICTED))


def test_labels_of_the_recoding(census) -> None:
    age, sex, zip_ = safe_harbor(census).recoding.qis
    assert age.labels == ("85", "86", "87", "88", "89", "90+")
    assert age.widths.tolist() == [1, 1, 1, 1, 1, 31]  # 90..120 in one group
    assert sex.labels == SEXES and sex.n_groups == 2
    zip_labels = [zip_.labels[g] for g in zip_.group_of]
    assert zip_labels == ["372", "372", "000", "000", "381", "000"]
    assert not zip_.contiguous  # 000 = {373xx, 384xx}, split by 381xx


@pytest.mark.parametrize("via", ["query", "compile"])
def test_sql_gives_the_labels_for_every_record(census, via) -> None:
    sh = safe_harbor(census)
    plan = plan_of(census, sh.recoding)
    query = census.query(plan) if via == "query" else census.compile(plan)
    out = _rows(census, query)
    src = _source(census)
    assert len(out) == len(src) == 300
    assert {r["age"] for r in out} >= {"85", "89", "90+"}
    for o, s in zip(out, src):
        assert o["id"] == s["id"] and o["dx"] == s["dx"]
        assert o["age"] == _age_label(s["age"])
        assert o["sex"] == s["sex"]  # no role: kept
        prefix = s["zip"][:3]
        assert o["zip"] == ("000" if prefix in RESTRICTED else prefix)
    assert {r["zip"] for r in out} == {"372", "000", "381"}


def test_fast_and_sql_paths_agree_on_a_non_contiguous_recoding(census) -> None:
    rec = safe_harbor(census).recoding
    assert not rec.contiguous
    _assert_paths_agree(census, rec)


@pytest.mark.parametrize("missing", ["zip", "age", "both"])
def test_missing_role_is_refused(tmp_path, missing) -> None:
    spec = write_census_problem(tmp_path, age_role="" if missing in ("age", "both") else ROLE_AGE,
                                zip_role="" if missing in ("zip", "both") else ROLE_ZIP)
    with Problem.from_spec(spec) as p, pytest.raises(SpecError) as info:
        safe_harbor(p)
    message = str(info.value)
    assert isinstance(info.value, DeidError)
    assert "Safe Harbor cannot be built without it" in message
    for role in ("zip", "age"):
        assert (f"'{role}'" in message) == (missing in (role, "both"))


def test_zip_null_category_keeps_its_label(tmp_path) -> None:
    """A NULL ZIP kept as a category stays that category, not a prefix "NUL" of its label."""
    folder = tmp_path / "nulls"
    write_census_problem(folder)
    src = pq.read_table(folder / "source.parquet")
    zips = src.column("zip").to_pylist()
    zips[5:8] = [None, None, None]
    pq.write_table(src.set_column(src.schema.get_field_index("zip"), "zip", pa.array(zips)),
                   folder / "source.parquet")
    spec = folder / "spec.toml"
    spec.write_text(census_spec().replace(ROLE_ZIP, ROLE_ZIP + 'nulls = "category"\nvalues_from = "source"\n'),
                    encoding="utf-8")
    with Problem.from_spec(spec) as p:
        sh = safe_harbor(p)
        out = _rows(p, p.query(plan_of(p, sh.recoding)))
        assert [r["zip"] for r in out[5:8]] == ["NULL"] * 3
        assert {r["zip"] for r in out} == {"372", "000", "381", "NULL"}
        _assert_paths_agree(p, sh.recoding)


# -- without a population table ------------------------------------------------------------------


def test_hhs_list_without_population(sample) -> None:
    sh = safe_harbor(sample)
    assert sh.prefix_population is None
    assert sh.restricted_prefixes == ("036", "893")
    assert {"036", "893"} <= HHS_2000_PREFIXES and "372" not in HHS_2000_PREFIXES
    zip_ = sh.recoding.qis[2]
    assert [zip_.labels[g] for g in zip_.group_of] == ["000", "000", "372", "372", "000"]
    assert not zip_.contiguous


def test_sample_problem_sql_labels(sample) -> None:
    sh = safe_harbor(sample)
    visit = sh.recoding.qis[3]
    assert visit.labels == ("2018", "2019", "2020")
    out = _rows(sample, sample.query(plan_of(sample, sh.recoding)))
    src = _source(sample)
    assert len(out) == len(src) == 250
    for o, s in zip(out, src):
        assert o["id"] == s["id"]
        assert o["age"] == _age_label(s["age"])
        assert o["sex"] == s["sex"]
        assert o["zip"] == ("372" if s["zip"].startswith("372") else "000")
        assert o["visit"] == str(s["visit"].year)
        assert o["birth"] == s["birth"].isoformat()  # a date without role is kept
    assert {r["visit"] for r in out} == {"2018", "2019", "2020"}
    assert "2019" in {r["visit"] for r in out}
    assert {r["zip"] for r in out} == {"000", "372"}


def test_fast_and_sql_paths_agree_without_population(sample) -> None:
    _assert_paths_agree(sample, safe_harbor(sample).recoding)


def _assert_paths_agree(problem: Problem, rec) -> None:
    fast, sql = problem.evaluate(rec), problem.evaluate(rec, path="sql")
    for name in ("risk", "loss", "expected_reidentifications", "risk_sum", "max_record_risk", "kl",
                 "iyengar_loss"):
        a, b = getattr(fast, name), getattr(sql, name)
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), (name, a, b)
    for name in ("k", "sample_unique_records", "groups", "discernibility", "corrected_groups", "records"):
        assert getattr(fast, name) == getattr(sql, name), name
    assert 0 < fast.risk <= 1
