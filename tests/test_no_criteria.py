"""No criteria, no release; the original data judged on the rows; an outside label no policy can show.

The security review's cases: a spec without criteria released everything but ``bottom``; a
policy merging only values nobody has (``age:cuts=1,2,…``) released the rows byte for byte with
"gate: passed"; a ``[release]`` table holding only ``outside_label`` switched the original-data
rule off; ``outside_label = "3****"`` (a ZIP prefix label) was accepted.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from deid_sql import Problem
from deid_sql.cli import cli
from deid_sql.errors import DeidError, ReleaseRefused
from deid_sql.release.output import create_view, materialize
from deid_sql.release.plan import plan_of

from .problems import write_small_problem


def _spec(tmp_path: Path, release: str | None, max_age: int = 30) -> Path:
    return write_small_problem(tmp_path, seed=3, release=release, max_age=max_age)


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def _near_identity(tmp_path: Path) -> tuple[Path, str]:
    """The data holds ages 0..30; the domain runs to 40; cutting at every age up to 30 merges only
    30-40, which holds the 30-year-olds alone: every record told apart as in the source."""
    spec = _spec(tmp_path, "max_record_risk = 1.0")
    spec.write_text(spec.read_text().replace("max = 30", "max = 40"))
    return spec, "age:cuts=" + ",".join(str(a) for a in range(1, 31))


def test_every_release_path_refuses_a_spec_without_criteria(tmp_path: Path) -> None:
    spec = _spec(tmp_path, None)
    out = tmp_path / "r.parquet"
    for args in (["materialize", str(spec), "--policy", "age:top", "--out", str(out)],
                 ["view", str(spec), "--policy", "age:top", "--db", str(tmp_path / "a.duckdb"), "--view", "v"],
                 ["compile", str(spec), "--policy", "age:top"],
                 ["compile", str(spec), "--policy", "age:top", "--out", str(tmp_path / "r.sql")],
                 ["dbt", str(spec), "--policy", "age:top", "--project", str(tmp_path / "dbt"), "--model", "m"]):
        code, output = _run(*args)
        assert code == 2, (args, output)
        assert "declares no release criteria" in output and "min_k = 5" in output, output
        assert "Traceback" not in output
    assert not out.exists() and not (tmp_path / "a.duckdb").exists() and not (tmp_path / "r.sql").exists()


@pytest.mark.slow
def test_accept_risk_overrides_and_is_recorded(tmp_path: Path) -> None:
    spec = _spec(tmp_path, None)
    out = tmp_path / "r.parquet"
    code, output = _run("materialize", str(spec), "--policy", "age:top", "--out", str(out),
                        "--accept-risk", "IRB 2026-7 approved")
    assert code == 0, output
    record = json.loads(Path(f"{out}.release.json").read_text())
    assert record["gate"]["verdict"] == "accepted" and record["gate"]["accepted_risk"] == "IRB 2026-7 approved"


def test_a_release_table_with_only_outside_label_counts_as_none(tmp_path: Path, monkeypatch) -> None:
    from deid_sql.contract import criteria

    monkeypatch.setattr(criteria, "_SAID", set())  # the deprecation is said once per process
    spec = _spec(tmp_path, 'outside_label = "(outside)"')
    out = tmp_path / "r.parquet"
    for policy in ("bottom", "age:top"):
        code, output = _run("materialize", str(spec), "--policy", policy, "--out", str(out))
        assert code == 2 and "declares no release criteria" in output, output
        assert ("deprecated: [release] outside_label" in output) == (policy == "bottom")
    spec.write_text(spec.read_text().replace('name = "age"', 'name = "age"\nrole = "age"')
                    .replace('name = "zip"', 'name = "zip"\nrole = "zip"'))
    code, output = _run("safe-harbor", str(spec), "--out", str(out))
    assert code == 2 and "declares no release criteria" in output, output
    assert not out.exists()


@pytest.mark.slow
def test_a_near_identity_policy_is_the_original_data(tmp_path: Path) -> None:
    spec, policy = _near_identity(tmp_path)
    out = tmp_path / "r.parquet"
    code, output = _run("materialize", str(spec), "--policy", policy, "--out", str(out))
    assert code == 2, output
    assert "tells apart every record the source tells apart" in output and not out.exists()
    with Problem.from_spec(spec) as problem:
        with pytest.raises(ReleaseRefused, match="original data"):
            create_view(problem, plan_of(problem, policy), tmp_path / "a.duckdb", "v")
        with pytest.raises(ReleaseRefused, match="original data"):
            materialize(problem, plan_of(problem, "bottom"), out)
        assert materialize(problem, plan_of(problem, "age:cuts=10,20"), out) is not None  # merges ages people have
    assert not (tmp_path / "a.duckdb").exists() or not duckdb.connect(str(tmp_path / "a.duckdb")).execute(
        "SELECT * FROM information_schema.tables WHERE table_name = 'v'").fetchall()


def test_allow_original_data_accepts_it_and_the_record_says_so(tmp_path: Path) -> None:
    spec, policy = _near_identity(tmp_path)
    spec.write_text(spec.read_text().replace("[release]\n", "[release]\nallow_original_data = true\n"))
    out = tmp_path / "r.parquet"
    code, output = _run("materialize", str(spec), "--policy", policy, "--out", str(out))
    assert code == 0, output
    assert "the original data, accepted by [release] allow_original_data" in output
    record = json.loads(Path(f"{out}.release.json").read_text())
    assert record["gate"]["original_data"] is True and record["gate"]["allow_original_data"] is True
    assert pq.read_table(out).num_rows == 400


@pytest.mark.parametrize("label", ["3****", "372**", "45-64", "7", "White|Black", "Female", "37201-38101"])
def test_an_outside_label_a_policy_can_show_is_refused(tmp_path: Path, label: str) -> None:
    spec = _spec(tmp_path, "max_record_risk = 1.0", max_age=70)
    spec.write_text(spec.read_text().replace('sensitive = ["dx"]', f'sensitive = ["dx"]\noutside_label = "{label}"'))
    with pytest.raises(DeidError, match="is also a label a policy can show"):
        Problem.from_spec(spec)


def test_an_outside_label_in_columns_is_used(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "max_record_risk = 1.0")
    spec.write_text(spec.read_text().replace('sensitive = ["dx"]', 'sensitive = ["dx"]\noutside_label = "(none)"'))
    with Problem.from_spec(spec) as problem:
        assert "'(none)'" in problem.compile(plan_of(problem, "age:cuts=10,20"), dialect="duckdb")


@pytest.mark.parametrize(("release", "columns", "words"), [
    ("max_record_risk = 1.0\nallow_original_data = \"yes\"", "",
     "[release] allow_original_data = 'yes' must be true or false"),
    ("max_record_risk = 1.0", 'outside_label = ""', "[columns] outside_label = '' must be a non-empty text"),
    ('max_record_risk = 1.0\noutside_label = "(a)"', 'outside_label = "(b)"',
     "[release] outside_label = '(a)' and [columns] outside_label = '(b)' disagree; keep the one in [columns]"),
])
def test_bad_release_and_outside_label_settings_are_one_line(tmp_path: Path, release: str, columns: str,
                                                            words: str) -> None:
    spec = _spec(tmp_path, release)
    spec.write_text(spec.read_text().replace('sensitive = ["dx"]', f'sensitive = ["dx"]\n{columns}'))
    out = tmp_path / "r.parquet"
    result = CliRunner().invoke(cli, ["materialize", str(spec), "--policy", "age:top", "--out", str(out)])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and words in errors[0], result.output
    assert "Traceback" not in result.output and not out.exists()
