"""Random policies over a hostile data set (issue 19): no value or name changes a number.

The data set's category and ZIP-like values and its column names hold quotes, ``|``, ``,``,
``:``, ``*``, ``-``, ``\\``, unicode, SQL keywords and NULL-like strings (``NULL``, ``None``,
``''``); an integer and a date QI come with them.  For every policy hypothesis draws:

- the fast path, the SQL path and an independent recount agree: the recount groups the raw rows
  (the Python lists this file writes) by each value's group under the policy's intervals,
  computed here from the policy's bits, and counts k, groups, sample uniques and expected
  re-identifications against the census written here;
- the released file holds as many distinct label tuples as there were evaluated groups, each
  with the records of one evaluated group (a label shared by two groups would merge them);
- the released file reads back with every record and exactly the declared columns.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deid_sql.problem import Problem
from deid_sql.release.output import materialize
from deid_sql.release.plan import plan_of

# category values in domain order: "A" and "B" are adjacent, so merging them reads like the value "A|B"
RACES = ("A", "B", "A|B", "", "NULL", "None", "O'Neil", 'x"y', "a,b", "k:v", "**", "é日本", "select", "x\\", "x\\|")
ZIPS = ("37201", "37202", "372**", "372*1", "3720-", "372|1", "37'01", "NULL", "372")
AGE_MAX = 9
DAY0 = dt.date(2024, 2, 26)  # a leap day inside
DAYS = 6
N = 160
# column names: QI names stay plain (the policy grammar's business); their columns are hostile
COLUMNS = {"race": 'ra"ce|x', "zip": "zi'p,:*", "age": "select", "day": "NULL"}
QIS = tuple(COLUMNS)  # the spec's QI order (a cell of the census is in this order)
DROPPED, SENSITIVE = 'we"ird id', "diag|n:o,s* é"


def _toml(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Data:
    """The raw rows (Python lists), the census, the spec; built once for the module."""

    def __init__(self, folder: Path) -> None:
        rng = np.random.default_rng(19)
        self.rows = {
            "race": [RACES[i] for i in rng.integers(0, len(RACES), N)],
            "zip": [ZIPS[i] for i in rng.integers(0, len(ZIPS), N)],
            "age": [int(a) for a in rng.integers(0, AGE_MAX + 1, N)],
            "day": [DAY0 + dt.timedelta(days=int(d)) for d in rng.integers(0, DAYS, N)],
        }
        source = {DROPPED: list(range(N)), **{COLUMNS[q]: v for q, v in self.rows.items()},
                  SENSITIVE: [("I10", "NULL", "", "a|b")[i] for i in rng.integers(0, 4, N)]}
        pq.write_table(pa.table(source), folder / "source.parquet")
        # census: every sampled cell with 1-4 people (some groups get corrected to m), plus unsampled cells
        cells = Counter(zip(*self.rows.values()))
        for _ in range(40):
            cells[(RACES[rng.integers(len(RACES))], ZIPS[rng.integers(len(ZIPS))], int(rng.integers(AGE_MAX + 1)),
                   DAY0 + dt.timedelta(days=int(rng.integers(DAYS))))] += 0
        self.census = {cell: int(rng.integers(1, 5)) for cell in cells}
        keys = list(self.census)
        pop = {COLUMNS[q]: [c[i] for c in keys] for i, q in enumerate(self.rows)}
        pq.write_table(pa.table({**pop, "count": list(self.census.values())}), folder / "population.parquet")
        qis = "".join(
            f'[[qi]]\nname = "{q}"\ncolumn = {_toml(COLUMNS[q])}\nkind = "{kind}"\n{extra}\n'
            for q, kind, extra in (
                ("race", "category", "values = [" + ", ".join(map(_toml, RACES)) + "]"),
                ("zip", "zip", ""),
                ("age", "integer", f"min = 0\nmax = {AGE_MAX}"),
                ("day", "date", f"min = {DAY0.isoformat()}\nmax = {(DAY0 + dt.timedelta(days=DAYS - 1)).isoformat()}"),
            ))
        self.spec = folder / "spec.toml"
        self.spec.write_text(
            'gamma = 1.0\n[source]\npath = "source.parquet"\n[population]\npath = "population.parquet"\n'
            f'count = "count"\n{qis}[columns]\ndrop = [{_toml(DROPPED)}]\nsensitive = [{_toml(SENSITIVE)}]\n',
            encoding="utf-8")
        self.folder = folder

    def positions(self, problem: Problem) -> dict[str, list[int]]:
        """Each raw value's position in its domain's order (the ZIP order is the domain's)."""
        zips = {v: i for i, v in enumerate(problem.domains[1].values)}  # type: ignore[attr-defined]
        return {"race": [RACES.index(v) for v in self.rows["race"]], "zip": [zips[v] for v in self.rows["zip"]],
                "age": list(self.rows["age"]), "day": [(d - DAY0).days for d in self.rows["day"]]}


@pytest.fixture(scope="module")
def hostile() -> Iterator[tuple[Data, Problem]]:
    with tempfile.TemporaryDirectory() as folder:
        data = Data(Path(folder))
        with Problem.from_spec(data.spec) as problem:
            yield data, problem


def recount(data: Data, problem: Problem, bits: dict[str, list[int]]) -> dict[str, float]:
    """The metrics from the raw rows: group id of position p = number of kept boundaries before p."""
    group = {q: np.concatenate([[0], np.cumsum(bits[q])]) for q in QIS}
    pos = data.positions(problem)
    keys = [tuple(int(group[q][pos[q][r]]) for q in QIS) for r in range(N)]
    m = Counter(keys)
    census: Counter[tuple[int, ...]] = Counter()
    domain_pos = {"race": RACES.index, "zip": {v: i for i, v in enumerate(problem.domains[1].values)}.__getitem__,  # type: ignore[attr-defined]
                  "age": int, "day": lambda d: (d - DAY0).days}
    for cell, people in data.census.items():
        census[tuple(int(group[q][domain_pos[q](v)]) for q, v in zip(QIS, cell))] += people
    return {"records": N, "groups": len(m), "k": min(m.values()),
            "sample_unique_records": sum(1 for c in m.values() if c == 1),
            "expected_reidentifications": sum(c / max(census[g], c) for g, c in m.items()),
            "sizes": sorted(m.values())}  # type: ignore[dict-item]


def policies(problem: Problem) -> st.SearchStrategy[dict[str, list[int]]]:
    sizes = {q.name: d.size for q, d in zip(problem.spec.qis, problem.domains)}
    return st.fixed_dictionaries({q: st.lists(st.integers(0, 1), min_size=n - 1, max_size=n - 1)
                                  for q, n in sizes.items()})


@pytest.mark.slow
def test_random_policies_on_hostile_values(hostile: tuple[Data, Problem]) -> None:
    data, problem = hostile

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(bits=policies(problem), fmt=st.sampled_from(["parquet", "csv"]))
    def check(bits: dict[str, list[int]], fmt: str) -> None:
        policy = "|".join(f"{q}:{''.join(map(str, bits[q]))}" for q in QIS)
        fast = problem.evaluate(policy).to_dict()
        sql = problem.evaluate(policy, path="sql").to_dict()
        assert fast == pytest.approx(sql, rel=1e-9), policy
        want = recount(data, problem, bits)
        sizes = want.pop("sizes")
        assert {key: fast[key] for key in want} == pytest.approx(want, rel=1e-9), policy

        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / f"release.{fmt}"
            materialize(problem, plan_of(problem, policy), out, accept_risk="test: hostile property")
            table = (pq.read_table(out) if fmt == "parquet" else pacsv.read_csv(
                out, convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in COLUMNS.values()},
                                                          strings_can_be_null=False)))
        assert table.num_rows == N
        assert sorted(table.column_names) == sorted([*COLUMNS.values(), SENSITIVE])
        released = Counter(zip(*(table.column(COLUMNS[q]).to_pylist() for q in QIS)))
        assert len(released) == fast["groups"], policy
        assert sorted(released.values()) == sizes, policy

    check()
