"""``validate`` warns when a range-like hierarchy label holds values outside the range it names
(ARX's Adult age hierarchy puts 20 in ``0-19``): one line per label, then their count; exit 0."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from deid_sql.domains.hierarchy import Hierarchy
from deid_sql.domains.hierarchy_labels import Range, label_mismatches, label_range, label_warnings

ADULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult"
AGE = '\n[[qi]]\nname = "age"\nkind = "integer"\nmin = 0\nmax = 120\nhierarchy = "age.csv"\n'
SEX = '\n[[qi]]\nname = "sex"\nkind = "category"\nvalues = ["Female", "Male"]\n'
RACE = '\n[[qi]]\nname = "race"\nkind = "category"\nvalues = ["White", "Black", "Asian", "Other"]\n'
ZIP = '\n[[qi]]\nname = "zip"\nkind = "zip"\n'


@pytest.mark.parametrize("label, inside, outside", [
    ("0-19", [0, 7, 19], [-1, 20, 19.5]),
    ("20 - 29", [20, 29], [19, 30]),
    ("20–29", [20, 29], [30]),
    ("<20", [-3, 0, 19], [20, 21]),
    ("<=19", [19], [20]),
    (">89", [90], [89]),
    (">=90", [90, 120], [89]),
    ("90+", [90, 101], [89]),
    ("[20, 30)", [20, 29.9], [19, 30]),
    ("(19, 29]", [20, 29], [19, 30]),
    ("[0.5,1.5]", [0.5, 1.5], [0.4, 1.6]),
    ("-10-10", [-10, 0, 10], [-11, 11]),
])
def test_range_like_labels(label: str, inside: list[float], outside: list[float]):
    span = label_range(label)
    assert span is not None
    assert all(span.holds(x) for x in inside) and not any(span.holds(x) for x in outside)


@pytest.mark.parametrize("label", ["*", "Higher education", "20", "2020-01", "2020-01-31", "White|Asian",
                                   "372**", "30-20", "[30, 20)", "ages 20 to 29", ""])
def test_other_labels_name_no_range(label: str):
    assert label_range(label) is None


def test_unbounded_ranges():
    assert label_range("<20") == Range(hi=20, hi_closed=False)
    assert label_range("90+") == Range(lo=90) and label_range("90+").hi == math.inf  # type: ignore[union-attr]


def test_a_label_holding_a_value_outside_it_is_found_per_level():
    rows = {str(a): (str(a), f"{(a - 1) // 5 * 5}-{(a - 1) // 5 * 5 + 4}", "<10" if a < 10 else "10+", "*")
            for a in range(1, 15)}
    rows["x"] = ("x", "0-4", "<10", "*")  # not a number: never outside
    h = Hierarchy("age.csv", rows, 4)
    found = label_mismatches(h, [str(a) for a in range(1, 15)] + ["x"])
    assert [(m.level, m.label, m.outside) for m in found] == [(1, "0-4", ("5",)), (1, "5-9", ("10",))]
    # only the values given count: without 5 and 10 nothing is outside
    assert label_mismatches(h, [str(a) for a in (1, 2, 3, 4, 6, 7, 8, 9, 11)]) == []
    lines = label_warnings("age", h, [str(a) for a in range(1, 15)])
    assert lines == [
        "QI 'age' level 1: label '0-4' holds 5, outside the range it names",
        "QI 'age' level 1: label '5-9' holds 10, outside the range it names",
        "QI 'age': 2 hierarchy labels name ranges that some of their values are outside; a release by hierarchy "
        "levels shows these labels as they are: correct them in age.csv",
    ]


def test_many_values_outside_one_label_are_shown_briefly():
    h = Hierarchy("h.csv", {str(a): (str(a), "<2") for a in range(10)}, 2)
    assert label_warnings("n", h, [str(a) for a in range(10)]) == [
        "QI 'n' level 1: label '<2' holds 2, 3, 4, 5, 6 and 3 more, outside the range it names",
        "QI 'n': 1 hierarchy label names a range that some of their values are outside; a release by hierarchy "
        "levels shows these labels as they are: correct them in h.csv",
    ]


def test_validate_warns_and_exits_zero(project, run):
    # ARX's habit: every multiple of 10 one band too low, and 40 under "<40"
    rows = "".join(f"{a};{max(a - 1, 0) // 10 * 10}-{max(a - 1, 0) // 10 * 10 + 9};{'<40' if a <= 40 else '40+'};*\n"
                   for a in range(121))
    (project.dir / "age.csv").write_text(rows, encoding="utf-8")
    result = run("validate", project.spec(qis=[AGE, SEX, RACE, ZIP]))
    warnings = [line for line in result.stdout.splitlines() if line.startswith("  warning    ")]
    assert warnings[0] == "  warning    QI 'age' level 1: label '0-9' holds 10, outside the range it names"
    assert "  warning    QI 'age' level 1: label '110-119' holds 120, outside the range it names" in warnings
    assert "  warning    QI 'age' level 2: label '<40' holds 40, outside the range it names" in warnings
    assert len(warnings) == 12 + 1 + 1 and warnings[-1].startswith(
        "  warning    QI 'age': 13 hierarchy labels name ranges that some of their values are outside")
    assert result.stdout.startswith("ok: ") and result.stderr == ""


def test_validate_is_silent_when_labels_fit(project, run):
    rows = "".join(f"{a};{a // 10 * 10}-{a // 10 * 10 + 9};{'<40' if a < 40 else '40+'};*\n" for a in range(121))
    (project.dir / "age.csv").write_text(rows, encoding="utf-8")
    assert "warning" not in run("validate", project.spec(qis=[AGE, SEX, RACE, ZIP])).stdout


@pytest.mark.slow
@pytest.mark.skipif(not ADULT.is_dir(), reason="the Adult data is not in ../shared/data/adult")
def test_arx_adult_age_hierarchy_puts_20_in_0_19(tmp_path: Path, run):
    from deid_sql.fixtures import adult_hierarchy_spec

    h = Hierarchy.read(ADULT / "adult_hierarchy_age.csv")
    ages = [str(a) for a in range(17, 91)]
    found = {(m.level, m.label): m.outside for m in label_mismatches(h, ages)}
    assert found[(3, "0-19")] == ("20",) and found[(1, "15-19")] == ("20",) and found[(2, "80-89")] == ("90",)
    # inside 17..90 each of the 15 five-year bands from 15-19, the 8 ten-year bands from 10-19 and the
    # 4 twenty-year bands below 80 holds the value after its end; 80-99 holds all it has
    assert sorted(level for level, _ in found) == [1] * 15 + [2] * 8 + [3] * 4
    spec = tmp_path / "adult.toml"
    spec.write_text(adult_hierarchy_spec(ADULT, ["age", "sex", "race"]), encoding="utf-8")
    result = run("validate", spec)
    assert "  warning    QI 'age' level 3: label '0-19' holds 20, outside the range it names" in result.stdout
    assert (f"  warning    QI 'age': 27 hierarchy labels name ranges that some of their values are outside; a "
            f"release by hierarchy levels shows these labels as they are: correct them in "
            f"{(ADULT / 'adult_hierarchy_age.csv').resolve()}") in result.stdout
