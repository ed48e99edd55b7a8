"""Group labels are unambiguous whatever the values contain (issue 19).

A merged category reads ``A|B``; a category whose value is ``A|B`` must not read the same, or
the release shows fewer groups than were evaluated.  Labels escape the separator (and the
escape character) and ``split_label`` reads them back into values.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deid_sql.domains.domain import CategoryDomain, DateDomain, ZipDomain, split_label
from deid_sql.domains.recoding import QIRecoding
from deid_sql.errors import DeidError
from deid_sql.problem import Problem
from deid_sql.release.output import materialize
from deid_sql.release.plan import plan_of

HOSTILE = ("A", "B", "A|B", "x\\", "x\\|", "*x", "")


def test_category_labels_of_merged_and_literal_values_differ() -> None:
    d = CategoryDomain(("A", "B", "A|B"))
    merged = QIRecoding.from_groups(d, [0, 0, 1]).labels
    assert merged[0] != merged[1]
    assert [split_label(label) for label in merged] == [["A", "B"], ["A|B"]]


@pytest.mark.parametrize("groups", [[0, 0, 1, 1, 2, 2, 3], [0, 1, 0, 1, 0, 1, 0], [0, 1, 2, 3, 4, 5, 6],
                                    [0, 0, 0, 0, 0, 0, 0], [0, 1, 1, 2, 2, 2, 3]])
def test_category_labels_round_trip(groups: list[int]) -> None:
    d = CategoryDomain(HOSTILE)
    rec = QIRecoding.from_groups(d, groups)
    assert len(set(rec.labels)) == rec.n_groups
    for g, label in enumerate(rec.labels):
        assert split_label(label) == [HOSTILE[int(p)] for p in rec.members(g)]


def test_zip_labels_never_collide() -> None:
    """A ZIP-like value holding ``-`` or ``*`` reads like a range or a prefix unless escaped."""
    z = ZipDomain(("1", "1-2", "2", "3*", "31"))
    for groups in ([0, 0, 1, 2, 3], [0, 1, 1, 2, 3], [0, 1, 2, 3, 3], [0, 1, 0, 1, 2]):
        labels = QIRecoding.from_groups(z, groups).labels
        assert len(set(labels)) == len(labels), labels


def test_scattered_date_groups_are_named() -> None:
    """``QIRecoding.labels`` passed numpy ints to ``DateDomain.value`` (TypeError)."""
    d = DateDomain(dt.date(2020, 1, 1), dt.date(2020, 1, 4))
    assert QIRecoding.from_groups(d, [0, 1, 0, 1]).labels == ("2020-01-01|2020-01-03", "2020-01-02|2020-01-04")


def _spec(tmp_path: Path, values: list[str], top: str = "") -> Path:
    pq.write_table(pa.table({"id": list(range(len(values))), "race": values}), tmp_path / "s.parquet")
    cats = ", ".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in dict.fromkeys(values))
    spec = tmp_path / "spec.toml"
    spec.write_text(f'gamma = 1.0\npopulation = "sample"\n{top}\n[source]\npath = "s.parquet"\n'
                    f'[[qi]]\nname = "race"\nkind = "category"\nvalues = [{cats}]\n'
                    f'[columns]\ndrop = ["id"]\n', encoding="utf-8")
    return spec


def test_released_labels_equal_evaluated_groups(tmp_path: Path) -> None:
    spec = _spec(tmp_path, ["A", "B", "A|B", "A|B", "A"])
    with Problem.from_spec(spec) as problem:
        groups = problem.evaluate("race:01").groups  # A and B merged; A|B alone
        written = materialize(problem, plan_of(problem, "race:01"), tmp_path / "out.parquet", accept_risk="test labels")
    released = pq.read_table(tmp_path / "out.parquet").column("race").to_pylist()
    assert groups == 2 == len(set(released))
    assert written is not None
    assert sorted(map(tuple, map(split_label, set(released)))) == [("A", "B"), ("A|B",)]


def test_category_equal_to_the_outside_label_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DeidError, match=r"outside label '\*' is also a label a policy can show"):
        Problem.from_spec(_spec(tmp_path, ["A", "*", "B"]))
    spec = _spec(tmp_path, ["A", "other", "B"], top='[release]\noutside_label = "other"\n')
    with pytest.raises(DeidError, match=r"outside label 'other' is also a label"):
        Problem.from_spec(spec)


def test_group_label_equal_to_the_outside_label_is_refused(tmp_path: Path) -> None:
    """A merged group labelled like out-of-domain values could not be told from them: an outside label
    that some policy could show is refused when the spec is loaded, before any policy is asked for."""
    spec = _spec(tmp_path, ["A", "B", "C"], top='[release]\noutside_label = "A|B"\n')
    with pytest.raises(DeidError, match="outside label 'A|B' is also a label a policy can show"):
        Problem.from_spec(spec)
