"""The attribute criteria in the spec (METHODS decision 15): ``[release]`` ℓ, t, confidence and
presence, per-column tables, resolved per sensitive column; every bad input one line, exit 2,
nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from deid_sql import Spec
from deid_sql.contract.attribute import AttributeLimits

POLICY = "age:cuts=18,30,45,65,90|zip:top|race:top"


def spec_with(project, release: str, columns: str | None = None, population: bool = True) -> Path:
    kwargs: dict = {"release": release}
    if columns is not None:
        kwargs["columns"] = columns
    if not population:
        kwargs["population"] = None
    return project.spec(**kwargs)


def test_global_keys_apply_to_every_sensitive_column_and_a_table_overrides(project) -> None:
    columns = '\n[columns]\ndrop = ["patient_id"]\nsensitive = ["diagnosis", "race_note"]\nunlisted = "drop"\n'
    path = spec_with(project, 'min_k = 2\nmax_confidence = 0.8\nmax_t = 0.5\nt_distance = "equal"\n'
                              '[release.sensitive.diagnosis]\nmax_confidence = 0.5\nignore_values = ["none"]\n'
                              'min_l = 2\n', columns)
    release = Spec.read(path).release
    assert release.declared
    assert release.attribute == {
        "diagnosis": AttributeLimits("diagnosis", min_l=2, max_t=0.5, t_distance="equal", max_confidence=0.5,
                                     ignore_values=("none",)),
        "race_note": AttributeLimits("race_note", max_t=0.5, t_distance="equal", max_confidence=0.8)}
    assert release.attribute["diagnosis"].keys() == ["min_l", "max_t", "max_confidence"]


def test_every_key_parses(project, tmp_path: Path) -> None:
    (project.dir / "dx.csv").write_text("I10;I;*\nE11;E;*\nJ45;J;*\nK21;K;*\n", encoding="utf-8")
    path = spec_with(project, 'min_entropy_l = 1.5\nrecursive_cl = [3, 2]\nmax_presence = 0.9\n'
                              '[release.sensitive.diagnosis]\nmax_t = 0.4\nt_distance = "hierarchical"\n'
                              'hierarchy = "dx.csv"\norder = ["I10", "E11"]\n')
    limits = Spec.read(path).release.attribute["diagnosis"]
    assert (limits.min_entropy_l, limits.recursive_cl, limits.max_presence) == (1.5, (3.0, 2), 0.9)
    assert (limits.max_t, limits.t_distance, limits.hierarchy) == (0.4, "hierarchical", project.dir / "dx.csv")
    assert limits.order == ("I10", "E11")
    assert Spec.read(path).release.to_dict()["attribute"]["diagnosis"]["recursive_cl"] == [3.0, 2]


def test_identity_criteria_alone_resolve_no_attribute(project) -> None:
    assert Spec.read(spec_with(project, "min_k = 5")).release.attribute == {}


def test_an_attribute_criterion_alone_is_a_criterion(project) -> None:
    assert Spec.read(spec_with(project, "max_confidence = 0.9")).release.declared


NO_SENSITIVE = '\n[columns]\ndrop = ["patient_id"]\nkeep = ["diagnosis"]\n'


@pytest.mark.parametrize("release, columns, population, message", [
    ("min_k = 5\nmax_confidence = 0.8", NO_SENSITIVE, True, "no column is sensitive"),
    ("min_k = 5\nmax_t = 0.5", None, True, "max_t needs t_distance"),
    ('min_k = 5\nmax_t = 0.5\nt_distance = "hierarchical"', None, True, "needs the column's hierarchy"),
    ('min_k = 5\nmax_t = 0.5\nt_distance = "manhattan"', None, True, "t_distance = 'manhattan' must be one of"),
    ("min_k = 5\nmax_presence = 0.5", None, False, "max_presence needs a census"),
    ("min_k = 5\nmin_l = 0", None, True, "min_l = 0 must be a whole number >= 1"),
    ("min_k = 5\nmin_entropy_l = 0.5", None, True, "min_entropy_l = 0.5 must be a number >= 1"),
    ("min_k = 5\nrecursive_cl = [0, 2]", None, True, "recursive_cl c = 0 must be a number > 0"),
    ("min_k = 5\nrecursive_cl = [3, 0]", None, True, "recursive_cl l = 0 must be a whole number >= 1"),
    ("min_k = 5\nrecursive_cl = 3", None, True, "must be [c, l]"),
    ("min_k = 5\nmax_confidence = 0", None, True, "max_confidence = 0 must be a share in (0, 1]"),
    ("min_k = 5\nmax_confidence = 1.2", None, True, "max_confidence = 1.2 must be a share in (0, 1]"),
    ("min_k = 5\nmax_t = -0.1\nt_distance = \"equal\"", None, True, "max_t = -0.1 must be a share in (0, 1]"),
    ("min_k = 5\nmax_presence = 2", None, True, "max_presence = 2 must be a share in (0, 1]"),
    ("min_k = 5\n[release.sensitive.race_note]\nmax_confidence = 0.5", None, True,
     "[release.sensitive.race_note] names 'race_note', which is not a sensitive column"),
    ("min_k = 5\n[release.sensitive.diagnosis]\nmax_confidence = 0.5\nhierarchy = \"missing.csv\"", None, True,
     "hierarchy file"),
    ("min_k = 5\n[release.sensitive.diagnosis]\nmax_confidense = 0.5", None, True, "unknown key 'max_confidense'"),
    ('min_k = 5\nmax_confidence = 0.5\norder = ["a", "b"]', None, True, "unknown key 'order' in [release]"),
    ('min_k = 5\n[release.sensitive.diagnosis]\nmax_confidence = 0.5\nignore_values = "none"', None, True,
     "ignore_values = 'none' must be a list of values"),
])
def test_bad_attribute_criteria_are_one_line_exit_2_nothing_written(project, run, release: str,
                                                                    columns: str | None, population: bool,
                                                                    message: str) -> None:
    spec = spec_with(project, release, columns, population)
    before = project.files()
    out = project.dir / "out.parquet"
    result = run("materialize", spec, "--policy", POLICY, "--out", out, expect=2)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert message in lines[0], lines[0]
    assert project.files() == before and not out.exists()
