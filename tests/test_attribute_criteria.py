"""The gate end to end for the attribute criteria ``test_attribute_gate.py`` leaves out (issue 40,
METHODS decision 15), on its 200 persons in groups of 5 with one group all B20: ``min_entropy_l``,
``recursive_cl``, ordered and hierarchical ``max_t`` and ``max_presence`` each refuse the release
naming ``diagnosis`` and the worst group, and pass with a limit the data meets; and what needs the
data is one line, exit 2, nothing written: ``ordered`` on a text column without ``order``, a value
missing from ``order``, a hierarchy that does not cover a value."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from deid_sql.release.sidecar import read_sidecar, sidecar_path
from tests.test_attribute_gate import POLICY, one_error, source_table, write_problem

ORDER = 'order = ["B20", "E11", "I10", "J45", "K21", "Z99"]'
DX_H = "B20;infectious;*\nE11;chronic;*\nI10;chronic;*\nJ45;chronic;*\nK21;chronic;*\n"
GROUP = "diagnosis: group age 20-29, clinic C0"


def released(run, spec: Path, folder: Path) -> dict:
    """Materialize ``spec`` and return its sidecar."""
    out = folder / "r.parquet"
    run("materialize", spec, "--policy", POLICY, "--out", out, "--overwrite")
    return read_sidecar(sidecar_path(out))


def refused(run, spec: Path, folder: Path) -> str:
    """The one error line of a refused materialize; nothing was written."""
    out = folder / "refused.parquet"
    line = one_error(run("materialize", spec, "--policy", POLICY, "--out", out, expect=2))
    assert not out.exists() and not sidecar_path(out).exists()
    return line


def checks(record: dict) -> dict[str, dict]:
    return {c["criterion"]: c for c in record["gate"]["checks"] if c["figure"].startswith("diagnosis.")}


def test_entropy_l_refuses_the_one_valued_group_and_passes_at_one(tmp_path: Path, run) -> None:
    """The B20 group holds one value (entropy ℓ 1); every other group five, equally (ℓ 5)."""
    line = refused(run, write_problem(tmp_path, "min_entropy_l = 2"), tmp_path)
    assert f"{GROUP} has entropy ℓ 1 (< min_entropy_l 2)" in line and "nothing was written" in line, line
    record = released(run, write_problem(tmp_path, "min_entropy_l = 1"), tmp_path)
    assert checks(record)["min_entropy_l"]["passed"] and record["figures"]["attribute"][0]["min_entropy_l"] == 1.0


def test_recursive_cl_refuses_too_few_values_and_passes_when_the_top_is_not_too_common(tmp_path: Path,
                                                                                      run) -> None:
    """(2, 2): the B20 group has one value (fewer than ℓ = 2).  (2, 1): r1 = 5 < 2 × 5 in every group."""
    line = refused(run, write_problem(tmp_path, "recursive_cl = [2, 2]"), tmp_path)
    assert f"{GROUP} is not recursive (2, 2)-diverse: 'B20' is held by 5 of 5 records, 1 distinct value" in line
    record = released(run, write_problem(tmp_path, "recursive_cl = [2, 1]"), tmp_path)
    assert checks(record)["recursive_cl"]["passed"] and record["gate"]["verdict"] == "passed"


def test_ordered_t_follows_the_declared_order(tmp_path: Path, run) -> None:
    """In the order B20 < E11 < I10 < J45 < K21, the B20 group's cumulative differences from q
    (B20 44/200, each other 39/200) sum to 0.78 + 0.585 + 0.39 + 0.195 = 1.95, over m − 1 = 4: m
    counts the values the source holds (as the search does), never a slot for an absent NULL or a
    value the order lists but nobody holds ("Z99")."""
    column = f'[release.sensitive.diagnosis]\nmax_t = {{}}\nt_distance = "ordered"\n{ORDER}'
    line = refused(run, write_problem(tmp_path, column.format(0.45)), tmp_path)
    assert f"{GROUP} is at t = 0.48" in line and "(ordered distance; > max_t 0.45)" in line, line
    record = released(run, write_problem(tmp_path, column.format(0.49)), tmp_path)
    assert record["figures"]["attribute"][0]["max_t"] == pytest.approx(1.95 / 4)
    assert checks(record)["max_t"]["passed"]


def test_hierarchical_t_rolls_the_differences_up_the_hierarchy(tmp_path: Path, run) -> None:
    """B20 alone under "infectious", the four others under "chronic": the B20 group's surplus of 0.78
    at B20 and the shortfall under "chronic" meet only at the root (weight 2/2): t = 0.78."""
    (tmp_path / "dx.csv").write_text(DX_H, encoding="utf-8")
    column = '[release.sensitive.diagnosis]\nmax_t = {}\nt_distance = "hierarchical"\nhierarchy = "dx.csv"'
    line = refused(run, write_problem(tmp_path, column.format(0.7)), tmp_path)
    assert f"{GROUP} is at t = 0.78 from the source's distribution (hierarchical distance; > max_t 0.7)" in line
    record = released(run, write_problem(tmp_path, column.format(0.8)), tmp_path)
    assert record["figures"]["attribute"][0]["max_t"] == pytest.approx(0.78)


def with_census(folder: Path, release: str, people: int) -> Path:
    """The spec over a census with two people per source row, ``people`` per row in the B20 group."""
    spec = write_problem(folder, release)
    source = source_table()
    b20 = pc.and_(pc.less(source.column("age"), 30), pc.equal(source.column("clinic"), "C0"))
    counts = pc.if_else(b20, people, 2)
    pq.write_table(pa.table({"age": source.column("age"), "clinic": source.column("clinic"),
                             "people": counts.cast(pa.int64())}), folder / "census.parquet")
    text = spec.read_text(encoding="utf-8").replace('population = "sample"\n',
                                                    '[population]\npath = "census.parquet"\ncount = "people"\n')
    spec.write_text(text, encoding="utf-8")
    return spec


def test_presence_refuses_a_group_the_census_holds_no_more_people_of(tmp_path: Path, run) -> None:
    """With one census person per row of the B20 group, all 5 of its 5 are released (presence 1);
    every other group releases 5 of 10."""
    line = refused(run, with_census(tmp_path, "max_presence = 0.6", 1), tmp_path)
    assert f"{GROUP} releases 5 of its 5 census people (presence 1 > max_presence 0.6)" in line, line
    record = released(run, with_census(tmp_path, "max_presence = 0.6", 2), tmp_path)
    assert record["figures"]["attribute"][0]["max_presence"] == pytest.approx(0.5)
    assert checks(record)["max_presence"]["passed"]


BAD = [
    ('[release.sensitive.diagnosis]\nmax_t = 0.5\nt_distance = "ordered"',
     '[release.sensitive.diagnosis] t_distance = "ordered" needs an order, and \'diagnosis\' is text'),
    ('[release.sensitive.diagnosis]\nmax_t = 0.5\nt_distance = "ordered"\norder = ["B20", "E11", "I10", "J45"]',
     "[release.sensitive.diagnosis] order does not list 'diagnosis''s value(s) 'K21'"),
    ('[release.sensitive.diagnosis]\nmax_t = 0.5\nt_distance = "hierarchical"\nhierarchy = "dx.csv"',
     "dx.csv does not cover 'diagnosis''s value(s) 'K21'; add a row for each"),
]


@pytest.mark.parametrize("release, message", BAD, ids=["ordered-text-without-order", "order-missing-a-value",
                                                        "hierarchy-missing-a-value"])
def test_what_needs_the_data_is_one_line_exit_2_nothing_written(tmp_path: Path, run, release: str,
                                                                message: str) -> None:
    (tmp_path / "dx.csv").write_text(DX_H.replace("K21;chronic;*\n", ""), encoding="utf-8")
    spec = write_problem(tmp_path, release)
    before = sorted(p.name for p in tmp_path.iterdir())
    line = refused(run, spec, tmp_path)
    assert message in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_criterion_judged_on_no_group_writes_strict_json_and_a_report(tmp_path: Path, run) -> None:
    """Every value ignored: no group holds a counted value, ℓ is vacuous (infinite).  The sidecar and the
    report's JSON twin write it as null (JSON has no Infinity), and the report is written."""
    import json

    spec = write_problem(tmp_path, 'min_l = 2\n[release.sensitive.diagnosis]\n'
                                   'ignore_values = ["B20", "E11", "I10", "J45", "K21", "Z99"]')
    out = tmp_path / "r.parquet"
    run("materialize", spec, "--policy", POLICY, "--out", out)
    text = sidecar_path(out).read_text(encoding="utf-8")
    record = json.loads(text, parse_constant=lambda c: pytest.fail(f"the sidecar holds {c}"))
    (figures,) = record["figures"]["attribute"]
    assert figures["column"] == "diagnosis" and checks(record)["min_l"]["value"] is None
    assert checks(record)["min_l"]["passed"]
    run("report", spec, "--from-release", sidecar_path(out), "--out", tmp_path / "report.html")
    json.loads((tmp_path / "report.json").read_text(encoding="utf-8"),
               parse_constant=lambda c: pytest.fail(f"the report's JSON holds {c}"))
