"""``deid-sql report`` and ``--report`` of ``materialize`` and ``view``: the page and its JSON twin land
together or not at all, bad input is one line and exit 2 with nothing written, and a release written
with ``--report`` is not written when its report could not be."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deid_sql.errors import OutputError
from deid_sql.report import release_write
from deid_sql.report.release_write import check_report_target, write_report

POLICY = "age:cuts=18,30,45,65,90|zip:top"


def one_line_error(result, *words: str) -> None:
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


def report_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.suffix in (".html", ".json"))


def evaluated(run, spec: Path, policy: str = POLICY) -> dict:
    return json.loads(run("evaluate", spec, "--policy", policy).stdout)


# -- deid-sql report ----------------------------------------------------------------------------

def test_report_writes_the_page_and_its_json_twin_with_the_figures_of_evaluate(run, project) -> None:
    out = project.dir / "report.html"
    result = run("report", project.spec_path, "--policy", POLICY, "--out", out)
    assert f"report: {out}" in result.stdout and "verdict: " in result.stdout
    twin = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert twin["format"] == "deid-sql-report" and twin["version"] == 1
    page = out.read_text(encoding="utf-8")
    assert page.lstrip().lower().startswith("<!doctype html") and twin["summary"]["verdict"] in page
    assert f"verdict: {twin['summary']['verdict']}" in result.stdout
    m = evaluated(run, project.spec_path)
    figures = twin["risk"]["figures"]
    assert figures["k"] == m["k"]
    assert figures["expected_reidentifications"] == pytest.approx(m["expected_reidentifications"], rel=1e-9)
    assert figures["max_record_risk"] == pytest.approx(m["max_record_risk"], rel=1e-9)
    assert twin["method"]["commands"]["report"].startswith("deid-sql report ")


@pytest.mark.parametrize("name", ["report.htm", "report.json", "report"])
def test_an_out_that_is_not_html_is_refused_before_anything_is_done(run, project, name: str) -> None:
    before = project.files()
    result = run("report", project.spec_path, "--policy", POLICY, "--out", project.dir / name, expect=2)
    one_line_error(result, ".html")
    assert project.files() == before


def test_an_existing_page_or_twin_is_refused_without_overwrite(run, project) -> None:
    out = project.dir / "report.html"
    out.with_suffix(".json").write_text("{}", encoding="utf-8")  # only the twin is there
    result = run("report", project.spec_path, "--policy", POLICY, "--out", out, expect=2)
    one_line_error(result, "report.json", "--overwrite")
    assert not out.exists() and out.with_suffix(".json").read_text() == "{}"
    run("report", project.spec_path, "--policy", POLICY, "--out", out, "--overwrite")
    assert json.loads(out.with_suffix(".json").read_text())["format"] == "deid-sql-report"
    page = out.read_text()
    result = run("report", project.spec_path, "--policy", "top", "--out", out, expect=2)
    one_line_error(result, "already exists")
    assert out.read_text() == page


def test_a_missing_folder_is_refused(run, project) -> None:
    result = run("report", project.spec_path, "--policy", POLICY, "--out", project.dir / "no" / "r.html", expect=2)
    one_line_error(result, "does not exist")


@pytest.mark.parametrize("given", [(), ("--policy", POLICY, "--from-policy", "policy.json")])
def test_the_policy_is_given_exactly_one_way(run, project, given: tuple[str, ...]) -> None:
    result = run("report", project.spec_path, *given, "--out", project.dir / "r.html", expect=2)
    one_line_error(result, "--policy")
    assert report_files(project.dir) == []


@pytest.mark.slow
def test_from_release_reports_the_released_policy_and_refuses_another_specs_sidecar(run, project) -> None:
    release = project.dir / "release.parquet"
    run("materialize", project.spec_path, "--policy", POLICY, "--out", release)
    sidecar = project.dir / "release.parquet.release.json"
    out = project.dir / "from-release.html"
    run("report", project.spec_path, "--from-release", sidecar, "--out", out)
    twin = json.loads(out.with_suffix(".json").read_text())
    assert twin["policy"]["sha256"] == json.loads(sidecar.read_text())["policy"]["sha256"]
    # the same release judged against another spec (age up to 130): refused, nothing written
    other = project.write_spec(project.spec_text().replace("max = 120", "max = 130"), "other.toml")
    result = run("report", other, "--from-release", sidecar, "--out", project.dir / "other.html", expect=2)
    one_line_error(result)
    assert not (project.dir / "other.html").exists() and not (project.dir / "other.json").exists()


@pytest.mark.slow
def test_from_policy_reports_a_saved_policy_and_refuses_one_of_another_spec(run, project) -> None:
    saved = project.dir / "policy.json"
    run("policy", "save", project.spec_path, "--policy", POLICY, "--out", saved)
    out = project.dir / "from-policy.html"
    run("report", project.spec_path, "--from-policy", saved, "--out", out)
    assert json.loads(out.with_suffix(".json").read_text())["format"] == "deid-sql-report"
    other = project.write_spec(project.spec_text().replace("max = 120", "max = 130"), "other.toml")
    result = run("report", other, "--from-policy", saved, "--out", project.dir / "other.html", expect=2)
    one_line_error(result)
    assert not (project.dir / "other.html").exists() and not (project.dir / "other.json").exists()


@pytest.mark.slow
def test_a_frontier_folder_of_another_problem_is_refused(run, project) -> None:
    other = project.write_spec(project.spec_text().replace("max = 120", "max = 130"), "other.toml")
    run("frontier", other, "--budget", "40", "--out", project.dir / "other-frontier")
    result = run("report", project.spec_path, "--policy", POLICY, "--frontier", project.dir / "other-frontier",
                 "--out", project.dir / "r.html", expect=2)
    one_line_error(result)
    assert not (project.dir / "r.html").exists() and not (project.dir / "r.json").exists()
    run("frontier", project.spec_path, "--budget", "40", "--out", project.dir / "own-frontier")
    run("report", project.spec_path, "--policy", POLICY, "--frontier", project.dir / "own-frontier",
        "--out", project.dir / "r.html")
    frontier = json.loads((project.dir / "r.json").read_text())["frontier"]
    assert frontier is not None and frontier["evaluations"] >= 1 and frontier["points"]


def test_accept_risk_is_the_verdict_and_needs_a_reason(run, project) -> None:
    out = project.dir / "r.html"
    result = run("report", project.spec_path, "--policy", "bottom", "--accept-risk", "IRB approved", "--out", out)
    assert "verdict: accepted" in result.stdout
    assert json.loads(out.with_suffix(".json").read_text())["summary"]["verdict"] == "accepted"


# -- write_report: both files or neither ---------------------------------------------------------

def test_write_report_writes_both_or_neither(tmp_path: Path, monkeypatch) -> None:
    from tests.report_sample import sample_report

    report = sample_report()
    out = tmp_path / "r.html"
    assert write_report(report, out, overwrite=False) == [out, tmp_path / "r.json"]
    assert json.loads((tmp_path / "r.json").read_text()) == report
    with pytest.raises(OutputError, match="already exists"):
        write_report(report, out, overwrite=False)
    bad = sample_report()
    bad["risk"]["figures"]["risk"] = float("nan")
    with pytest.raises(OutputError, match="JSON"):
        write_report(bad, tmp_path / "nan.html", overwrite=False)

    def broken(_: dict) -> str:
        raise RuntimeError("template bug")

    monkeypatch.setattr(release_write, "render_html", broken)
    with pytest.raises(RuntimeError):
        write_report(report, tmp_path / "broken.html", overwrite=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html", "r.json"]  # no temporaries either


def test_the_twin_failing_to_land_leaves_the_old_page(tmp_path: Path, monkeypatch) -> None:
    """The second rename failing puts the first file back: a page never sits beside another page's twin."""
    from deid_sql.storage import atomic
    from tests.report_sample import sample_report

    out = tmp_path / "r.html"
    write_report(sample_report(), out, overwrite=False)
    old_page, old_twin = out.read_bytes(), (tmp_path / "r.json").read_bytes()
    real = atomic.place

    def failing(tmp: Path, path: Path, overwrite: bool) -> None:
        if path.suffix == ".json":
            raise OSError(28, "No space left on device")
        real(tmp, path, overwrite)

    monkeypatch.setattr(atomic, "place", failing)
    changed = sample_report()
    changed["summary"]["verdict"] = "failed"
    with pytest.raises(OSError):
        write_report(changed, out, overwrite=True)
    assert out.read_bytes() == old_page and (tmp_path / "r.json").read_bytes() == old_twin
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html", "r.json"]


def test_check_report_target_names_the_twin(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text("{}")
    with pytest.raises(OutputError, match=r"r\.json already exists.*twin of r\.html"):
        check_report_target(tmp_path / "r.html", overwrite=False)
    assert check_report_target(tmp_path / "r.html", overwrite=True) == [tmp_path / "r.html", tmp_path / "r.json"]
    assert release_write.report_paths(Path("a/b.HTML")) == [Path("a/b.HTML"), Path("a/b.json")]


# -- --report on the release commands -------------------------------------------------------------

def test_report_suppress_below_reports_the_release_materialize_writes_and_evaluate_measures(run, project) -> None:
    """``report --suppress-below K`` is the standalone report of a suppressed release: its figures are
    the sidecar's of ``materialize --suppress-below K`` and the release entry of ``evaluate
    --suppress-below K``, and the report names the suppression; with a sidecar or a policy file
    (which carry their own) it is refused in one line."""
    out = project.dir / "suppressed.html"
    run("report", project.spec_path, "--policy", POLICY, "--suppress-below", "3", "--out", out)
    twin = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    release = project.dir / "suppressed.parquet"
    run("materialize", project.spec_path, "--policy", POLICY, "--suppress-below", "3", "--out", release)
    sidecar = json.loads((project.dir / "suppressed.parquet.release.json").read_text(encoding="utf-8"))
    figures = twin["risk"]["figures"]
    assert figures["suppressed"] == sidecar["figures"]["suppressed"] > 0
    for key in ("k", "groups", "records"):
        assert figures[key] == sidecar["figures"][key], key
    assert figures["expected_reidentifications"] == pytest.approx(sidecar["figures"]["expected_reidentifications"])
    assert twin["risk"]["before_suppression"]["k"] < figures["k"]
    assert "--suppress-below 3" in twin["policy"]["arguments"]
    measured = json.loads(run("evaluate", project.spec_path, "--policy", POLICY, "--suppress-below", "3").stdout)
    assert measured["release"]["k"] == figures["k"]
    result = run("report", project.spec_path, "--from-release", project.dir / "suppressed.parquet.release.json",
                 "--suppress-below", "3", "--out", project.dir / "again.html", expect=2)
    one_line_error(result, "--suppress-below", "--from-release")
    assert not (project.dir / "again.html").exists()


def test_materialize_with_report_writes_release_sidecar_page_and_twin(run, project) -> None:
    release, page = project.dir / "release.parquet", project.dir / "release.html"
    result = run("materialize", project.spec_path, "--policy", POLICY, "--out", release, "--report", page)
    assert f"report: {page}" in result.stdout and "verdict: " in result.stdout
    assert release.exists() and (project.dir / "release.parquet.release.json").exists()
    twin = json.loads(page.with_suffix(".json").read_text())
    assert str(release) in twin["summary"]["released"]
    assert twin["method"]["commands"]["release"].startswith("deid-sql materialize ")
    sidecar = json.loads((project.dir / "release.parquet.release.json").read_text())
    assert twin["risk"]["figures"]["k"] == sidecar["figures"]["k"]


def test_a_refused_release_writes_no_report(run, project) -> None:
    before = project.files()
    result = run("materialize", project.spec_path, "--policy", "bottom", "--out", project.dir / "release.parquet",
                 "--report", project.dir / "release.html", expect=2)
    one_line_error(result, "refused")
    assert project.files() == before


def test_an_existing_report_target_refuses_the_release_before_it_is_written(run, project) -> None:
    page = project.dir / "release.html"
    page.write_text("signed earlier", encoding="utf-8")
    before = project.files()
    result = run("materialize", project.spec_path, "--policy", POLICY, "--out", project.dir / "release.parquet",
                 "--report", page, expect=2)
    one_line_error(result, "release.html", "--overwrite")
    assert project.files() == before
    result = run("materialize", project.spec_path, "--policy", POLICY, "--out", project.dir / "release.parquet",
                 "--report", project.dir / "release.pdf", expect=2)
    one_line_error(result, ".html")
    assert project.files() == before


def test_a_report_named_like_the_releases_sidecar_is_refused(run, project) -> None:
    """``--report release.parquet.release.html`` has the twin ``release.parquet.release.json``: the sidecar's name."""
    before = project.files()
    result = run("materialize", project.spec_path, "--policy", POLICY, "--out", project.dir / "release.parquet",
                 "--report", project.dir / "release.parquet.release.html", "--overwrite", expect=2)
    one_line_error(result, "sidecar")
    assert project.files() == before


@pytest.mark.slow
def test_a_report_that_fails_after_the_release_removes_the_release(run, project, monkeypatch) -> None:
    """The report is written after the release; if it then fails (here: a full disk), the release file
    and its sidecar go too, so no release is left without its report."""
    from deid_sql.report import release_write

    def full_disk(*args: object, **kwargs: object) -> list[Path]:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(release_write, "write_report", full_disk)
    before = project.files()
    result = run("materialize", project.spec_path, "--policy", POLICY, "--out", project.dir / "release.parquet",
                 "--report", project.dir / "release.html", expect=2)
    one_line_error(result, "could not write the report", "removed")
    assert project.files() == before


@pytest.mark.slow
def test_view_with_report(run, project) -> None:
    db, page = project.dir / "analysts.duckdb", project.dir / "view.html"
    result = run("view", project.spec_path, "--policy", POLICY, "--db", db, "--view", "patients_deid",
                 "--report", page)
    assert "created view patients_deid" in result.stdout and f"report: {page}" in result.stdout
    assert "view patients_deid" in json.loads(page.with_suffix(".json").read_text())["summary"]["released"]
    # again without --overwrite: the report target is refused before the view is touched
    result = run("view", project.spec_path, "--policy", "top", "--db", db, "--view", "other_view",
                 "--report", page, expect=2)
    one_line_error(result, "already exists")
    run("view", project.spec_path, "--policy", POLICY, "--db", db, "--view", "patients_deid", "--overwrite",
        "--report", page)


def test_report_is_a_listed_command_with_an_example() -> None:
    from deid_sql.cli.main import COMMANDS, cli
    from deid_sql.cli.report import report

    assert "report" in COMMANDS and cli.commands["report"] is report
    assert "Example: deid-sql report demo/demo.toml" in (report.help or "")


@pytest.mark.slow
def test_demo_ends_by_writing_the_report_of_its_policy(run, tmp_path: Path) -> None:
    folder = tmp_path / "demo-out"
    result = run("demo", "--dir", folder, "--budget", "200")
    page = folder / "report.html"
    assert f"report for the chosen policy: {page}" in result.stdout
    twin = json.loads(page.with_suffix(".json").read_text(encoding="utf-8"))
    chosen = result.stdout.split("\nchosen: ", 1)[1].splitlines()[1].strip()
    assert twin["policy"]["readable"].startswith(chosen.rstrip("…")[:200])
    assert twin["frontier"] is not None and twin["frontier"]["folder"].endswith("frontier")
    assert twin["method"]["commands"]["report"].startswith("deid-sql report ")
    assert page.stat().st_size < 1_000_000


@pytest.mark.slow
def test_with_release_criteria_the_verdict_follows_the_gate(run, project) -> None:
    """min_k = 5: a policy with small groups is refused with its report; released anyway with --accept-risk,
    its report says "accepted"; a general enough policy "passed"."""
    spec = project.write_spec(project.spec_text(release="min_k = 5"), "gated.toml")
    before = project.files()
    result = run("materialize", spec, "--policy", "age:cuts=18,65", "--out", project.dir / "small.parquet",
                 "--report", project.dir / "small.html", expect=2)
    one_line_error(result, "refused")
    assert project.files() == before
    result = run("materialize", spec, "--policy", "age:cuts=18,65", "--out", project.dir / "small.parquet",
                 "--report", project.dir / "small.html", "--accept-risk", "IRB 2026-114 approved k=1")
    assert "verdict: accepted" in result.stdout
    twin = json.loads((project.dir / "small.json").read_text())
    assert twin["summary"]["verdict"] == "accepted" and twin["risk"]["gate"]["verdict"] == "accepted"
    result = run("report", spec, "--policy", "top", "--out", project.dir / "top.html")
    assert "verdict: passed" in result.stdout
    assert json.loads((project.dir / "top.json").read_text())["summary"]["verdict"] == "passed"
    result = run("report", spec, "--policy", "age:cuts=18,65", "--out", project.dir / "failed.html")
    assert "verdict: failed" in result.stdout  # a report of a refused policy is written: a reviewer may see it


# -- --report on safe-harbor, compile and dbt; --policy safe-harbor ---------------------------------

def _with_safe_harbor_roles(project) -> Path:
    qis = [q.replace('name = "age"', 'name = "age"\nrole = "age"').replace('name = "zip"', 'name = "zip"\nrole = "zip"')
           for q in project.DEFAULT_QIS]
    return project.spec(name="roles.toml", qis=qis)


@pytest.mark.slow
def test_safe_harbor_release_writes_its_report_and_report_names_safe_harbor(run, project) -> None:
    spec = _with_safe_harbor_roles(project)
    out, page = project.dir / "sh.parquet", project.dir / "sh.html"
    result = run("safe-harbor", spec, "--out", out, "--report", page)
    assert out.exists() and page.exists() and page.with_suffix(".json").exists()
    assert f"report: {page}" in result.stdout
    twin = json.loads(page.with_suffix(".json").read_text(encoding="utf-8"))
    assert twin["summary"]["released"] == str(out)
    assert "--policy safe-harbor" in twin["method"]["commands"]["report"]
    # the rebuild command works: 'deid-sql report --policy safe-harbor' reports the same figures
    again = project.dir / "again.html"
    run("report", spec, "--policy", "safe-harbor", "--out", again)
    rebuilt = json.loads(again.with_suffix(".json").read_text(encoding="utf-8"))
    assert rebuilt["risk"]["figures"] == twin["risk"]["figures"]
    assert rebuilt["summary"]["policy"] == twin["summary"]["policy"]


def test_safe_harbor_report_without_a_release_is_refused(run, project) -> None:
    spec = _with_safe_harbor_roles(project)
    before = project.files()
    one_line_error(run("safe-harbor", spec, "--report", project.dir / "sh.html", expect=2), "--out")
    assert project.files() == before


def test_compile_report_keeps_stdout_for_the_sql(run, project) -> None:
    page = project.dir / "sql.html"
    result = run("compile", project.spec_path, "--policy", POLICY, "--report", page)
    assert result.stdout.rstrip().endswith(";") and "report:" not in result.stdout
    assert f"report: {page}" in result.stderr
    twin = json.loads(page.with_suffix(".json").read_text(encoding="utf-8"))
    assert twin["summary"]["released"].startswith("SQL for duckdb")
    assert twin["risk"]["figures"]["k"] == evaluated(run, project.spec_path)["k"]


def test_dbt_model_writes_its_report(run, project) -> None:
    page, warehouse = project.dir / "model.html", project.dir / "warehouse"
    run("dbt", project.spec_path, "--policy", POLICY, "--project", warehouse, "--report", page)
    twin = json.loads(page.with_suffix(".json").read_text(encoding="utf-8"))
    assert twin["summary"]["released"].startswith("dbt model ") and str(warehouse) in twin["summary"]["released"]
    assert (warehouse / "models").is_dir()


def test_dbt_with_an_existing_report_writes_no_model(run, project) -> None:
    page, warehouse = project.dir / "model.html", project.dir / "warehouse"
    page.write_text("signed already", encoding="utf-8")
    one_line_error(run("dbt", project.spec_path, "--policy", POLICY, "--project", warehouse, "--report", page,
                       expect=2), "already exists")
    assert not warehouse.exists() and page.read_text(encoding="utf-8") == "signed already"


def test_sample_rows_of_a_refused_release_write_no_report(run, project) -> None:
    before = project.files()
    result = run("report", project.spec_path, "--policy", "bottom", "--sample-rows", 3, "--out",
                 project.dir / "rows.html", expect=2)
    one_line_error(result, "--sample-rows 3: the release fails the gate", "original data")
    assert project.files() == before
