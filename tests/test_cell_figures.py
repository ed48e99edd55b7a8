"""The judgment before a write, counted on the source's cells (``release.cell_figures``): the same
figures the gate measures on the release query's rows, so the source is not read twice."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deid_sql import Problem
from deid_sql.compiler.suppression import Suppression
from deid_sql.errors import ReleaseRefused
from deid_sql.release import output
from deid_sql.release.cell_figures import counted_groups, prejudged
from deid_sql.release.gate import ReleaseSource, build_gate
from deid_sql.release.output import materialize
from deid_sql.release.plan import ReleasePlan, plan_of

POLICIES = ["age:cuts=18,30,45,65,90|zip:top", "age:cuts=30,60|race:top|zip:digits=3", "zip:digits=2",
            "age:cuts=50|sex:top|race:top|zip:top"]


def gate_of(problem: Problem, plan: ReleasePlan):
    return build_gate(ReleaseSource.from_problem(problem), plan, "test")


@pytest.fixture
def problem(project):
    with Problem.from_spec(project.dir / "spec.toml") as p:
        yield p


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(policy=st.sampled_from(POLICIES), rule=st.sampled_from(["none", "below", "groups"]),
       k=st.integers(min_value=1, max_value=12), pick=st.integers(min_value=0, max_value=2 ** 16))
def test_cell_figures_equal_the_figures_measured_on_the_release_query(problem, policy, rule, k, pick):
    plan = plan_of(problem, policy)
    if rule != "none":  # suppress by size, or a few label tuples the rows have (anonymize's optimum)
        rows = gate_of(problem, plan)
        table = counted_groups(problem, rows)
        tuples = [tuple(r[f"q{i}"] for i in range(4)) for r in table.to_pylist()]
        chosen = [t for i, t in enumerate(tuples) if (pick >> (i % 16)) & 1]
        suppression = Suppression.smaller_than(k) if rule == "below" else Suppression.of_groups(chosen, "chosen")
        plan = plan.with_suppression(suppression)
    gate = gate_of(problem, plan)
    counted = prejudged(problem, gate)
    assert counted is not None
    measured = gate.measure(problem.backend.execute, problem.query(plan), union=False)
    assert counted == measured


def test_materialize_reads_the_source_once_and_judges_the_written_rows(problem, tmp_path, monkeypatch):
    def no_query(*args, **kwargs):
        raise AssertionError("the judgment before the write measured the source query")

    monkeypatch.setattr(output, "prejudge", no_query)
    written = materialize(problem, plan_of(problem, POLICIES[0]), tmp_path / "out.parquet")
    assert written.verdict is not None and written.verdict.passed
    assert written.figures == prejudged(problem, gate_of(problem, plan_of(problem, POLICIES[0])))


def test_a_source_changed_after_loading_is_caught_on_the_written_rows(project, tmp_path):
    """The cells say the release passes; the rows written from the changed source (as many rows, one
    moved out of the smallest group) fail the gate: nothing lands."""
    policy = "age:cuts=18,30,45,65,90|sex:top|race:top|zip:top"
    table = pq.read_table(project.source_parquet)
    ages = np.asarray(table.column("age").to_numpy(zero_copy_only=False))
    bands = np.searchsorted([18, 30, 45, 65, 90], ages, side="right")
    sizes = np.bincount(bands, minlength=6)
    smallest = int(np.argmin(np.where(sizes > 0, sizes, ages.size + 1)))
    spec = project.spec(source="source.parquet", release=f"min_k = {int(sizes[smallest])}")
    with Problem.from_spec(spec) as problem:
        plan = plan_of(problem, policy)
        assert prejudged(problem, gate_of(problem, plan)).k == sizes[smallest]
        moved = ages.copy()
        moved[np.flatnonzero(bands == smallest)[0]] = int(ages[bands == int(np.argmax(sizes))][0])
        field = table.schema.get_field_index("age")
        pq.write_table(table.set_column(field, "age", pa.array(moved, table.schema.field("age").type)),
                       project.source_parquet)
        with pytest.raises(ReleaseRefused, match="min_k"):
            materialize(problem, plan, tmp_path / "out.parquet")
    assert not (tmp_path / "out.parquet").exists()


def test_what_cells_cannot_count_is_measured_on_the_query(project):
    spec = project.spec(release="max_record_risk = 1.0\n[release.sensitive.diagnosis]\nmin_l = 1")
    with Problem.from_spec(spec) as problem:
        assert prejudged(problem, gate_of(problem, plan_of(problem, POLICIES[0]))) is None
