"""The release gate: every path that writes or exposes rows judges them first and writes a sidecar.

Each refusal is checked for its exit code, its one line and that nothing was written (on disk
and inside DuckDB files); each override (``--accept-risk``) for the reason in the sidecar.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from deid_sql import Problem
from deid_sql.contract.criteria import parse_release
from deid_sql.errors import PolicyError, ReleaseRefused
from deid_sql.release.output import create_view, materialize
from deid_sql.release.plan import plan_of
from deid_sql.release.sidecar import read_sidecar, sidecar_path

POLICY = "age:cuts=18,30,45,65,90|zip:top"


def with_release(project, body: str, name: str = "spec.toml") -> Path:
    """The project's default spec (age and zip with their Safe Harbor roles) with ``[release]`` appended."""
    qis = [q + ('role = "age"\n' if '"age"' in q else 'role = "zip"\n' if '"zip"' in q else "")
           for q in project.DEFAULT_QIS]
    return project.write_spec(project.spec_text(qis=qis, release=body), name)


def one_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def tables_in(path: Path) -> set[str]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables UNION ALL "
                                          "SELECT view_name FROM duckdb_views WHERE NOT internal").fetchall()}
    finally:
        con.close()


# -- criteria parsing ------------------------------------------------------------------------

@pytest.mark.parametrize("body, message", [
    ({"max_risk": 1.5}, "must lie in"),
    ({"max_risk": float("nan")}, "finite number"),
    ({"max_expected_reidentifications": -1}, "finite number"),
    ({"min_k": 0}, "whole number >= 1"),
    ({"min_k": 2.5}, "whole number >= 1"),
    ({"no_riskier_than": "hipaa"}, "must be one of"),
    ({"max_rsik": 0.1}, "unknown key 'max_rsik'"),
    ({"outside_label": ""}, "non-empty"),
    ({}, "is empty"),
])
def test_bad_release_tables_are_refused(body: dict, message: str) -> None:
    problems: list[str] = []
    parse_release(body, problems)
    assert len(problems) == 1 and message in problems[0]


def test_bad_release_table_in_validate(project, run) -> None:
    spec = with_release(project, "max_risk = 2\nmin_k = 0")
    err = run("validate", spec, expect=2).stderr
    assert "max_risk = 2 is a normalized risk" in err and "min_k = 0 must be a whole number" in err


# -- refusals --------------------------------------------------------------------------------

def test_empty_policy_is_an_error_everywhere(project, run) -> None:
    before = project.files()
    for args in (("materialize", project.spec_path, "--policy", "", "--out", project.dir / "r.parquet"),
                 ("materialize", project.spec_path, "--policy", " | ", "--out", project.dir / "r.parquet"),
                 ("evaluate", project.spec_path, "--policy", ""),
                 ("view", project.spec_path, "--policy", "", "--db", project.dir / "v.duckdb", "--view", "v"),
                 ("compile", project.spec_path, "--policy", "")):
        assert "policy text is empty" in one_line(run(*args, expect=2))
    assert project.files() == before


@pytest.mark.parametrize("out", ["r.parquet", "r.csv", "r.duckdb"])
def test_original_data_is_refused_without_release_criteria(project, run, out: str) -> None:
    before = project.files()
    for policy in ("bottom", "age:bottom"):  # QIs left out are kept: both keep every value
        line = one_line(run("materialize", project.spec_path, "--policy", policy, "--out", project.dir / out,
                            expect=2))
        assert "original data" in line and "--accept-risk" in line and "nothing was written" in line
    assert project.files() == before


def test_accept_risk_releases_and_records_the_reason(project, run) -> None:
    out = project.dir / "r.parquet"
    result = run("materialize", project.spec_path, "--policy", "bottom", "--out", out,
                 "--accept-risk", "IRB 2026-114: internal enclave")
    assert "released anyway" in result.stdout and "IRB 2026-114" in result.stdout
    record = read_sidecar(sidecar_path(out))
    assert record["gate"]["verdict"] == "accepted"
    assert record["gate"]["accepted_risk"] == "IRB 2026-114: internal enclave"
    assert record["gate"]["original_data"] is True
    assert "original data" in record["gate"]["failures"][0]
    assert "IRB 2026-114" in record["reproduce"]["command"]


def test_accept_risk_needs_a_reason(project, run) -> None:
    line = one_line(run("materialize", project.spec_path, "--policy", "bottom", "--out", project.dir / "r.parquet",
                        "--accept-risk", "  ", expect=2))
    assert "needs a reason" in line
    assert not (project.dir / "r.parquet").exists()


NOT_REASONS = ["-", "--", ".", "...", "ok", "IRB", "IRB 2026-114", "n/a", "- - -", "x y z"]


@pytest.mark.parametrize("reason", NOT_REASONS)
@pytest.mark.parametrize("command", ["materialize", "report", "dbt", "apply-risk", "apply-drift"])
def test_a_reason_is_words_not_punctuation(project, run, reason: str, command: str) -> None:
    """Issue 38: ``--accept-risk -`` (and ``--``, ``.``, ``--accept-drift -``) was recorded as the
    reason; a reason is words (at least 8 letters), refused in one line before any data is read
    (the spec named here does not even exist), every option through one validator."""
    missing = project.dir / "no-such-spec.toml"
    args = {"materialize": ("materialize", missing, "--policy", "bottom", "--out", project.dir / "r.parquet",
                            "--accept-risk", reason),
            "report": ("report", missing, "--policy", "bottom", "--out", project.dir / "r.html", "--accept-risk",
                       reason),
            "dbt": ("dbt", missing, "--policy", "bottom", "--project", project.dir / "dbt", "--accept-risk", reason),
            "apply-risk": ("apply", project.dir / "no-such.json", "--source", project.source_parquet, "--out",
                           project.dir / "r.parquet", "--accept-risk", reason),
            "apply-drift": ("apply", project.dir / "no-such.json", "--source", project.source_parquet, "--out",
                            project.dir / "r.parquet", "--accept-drift", reason)}[command]
    before = project.files()
    line = one_line(run(*args, expect=2))
    option = "--accept-drift" if command == "apply-drift" else "--accept-risk"
    assert line.startswith(f"error: {option} needs a reason in words") and "at least 8 letters" in line, line
    assert project.files() == before


@pytest.mark.parametrize("reason", NOT_REASONS)
def test_the_library_takes_the_same_reasons(project, reason: str) -> None:
    spec = with_release(project, "min_k = 100000")
    with Problem.from_spec(spec) as problem, pytest.raises(PolicyError, match="needs a reason in words"):
        materialize(problem, plan_of(problem, POLICY), project.dir / "r.parquet", accept_risk=reason)
    assert not (project.dir / "r.parquet").exists()
    with Problem.from_spec(spec) as problem:  # a reason in words is recorded as given, stripped
        materialize(problem, plan_of(problem, POLICY), project.dir / "r.parquet", accept_risk=" DUA 7: enclave only ")
    assert read_sidecar(sidecar_path(project.dir / "r.parquet"))["gate"]["accepted_risk"] == "DUA 7: enclave only"


@pytest.mark.slow
@pytest.mark.parametrize("criterion, figure", [
    ("max_risk = 1e-9", "risk"),
    ("max_expected_reidentifications = 0.001", "expected_reidentifications"),
    ("max_record_risk = 1e-6", "max_record_risk"),
    ("min_k = 1000", "k"),
])
def test_each_failed_criterion_names_the_figure_and_limit(project, run, criterion: str, figure: str) -> None:
    spec = with_release(project, criterion)
    before = project.files()
    key, limit = (s.strip() for s in criterion.split("="))
    for args in (("materialize", spec, "--policy", POLICY, "--out", project.dir / "r.parquet"),
                 ("materialize", spec, "--policy", POLICY, "--out", project.dir / "r.duckdb"),
                 ("view", spec, "--policy", POLICY, "--db", project.dir / "v.duckdb", "--view", "v"),
                 ("safe-harbor", spec, "--out", project.dir / "sh.parquet"),
                 ("compile", spec, "--policy", POLICY, "--dialect", "postgres")):
        result = run(*args, expect=2)
        assert result.stdout == "" or args[0] == "safe-harbor"  # it prints Safe Harbor's figures first
        line = one_line(result)
        assert f"{figure} " in line and f"limit {key} = " in line and "nothing was written" in line, line
    assert project.files() == before


@pytest.mark.slow
def test_no_riskier_than_safe_harbor(project, run) -> None:
    spec = with_release(project, 'no_riskier_than = "safe-harbor"')
    with Problem.from_spec(spec) as problem:
        from deid_sql.release.safe_harbor import safe_harbor

        reference = problem.evaluate(safe_harbor(problem).recoding).risk
        riskier = problem.evaluate("race:top").risk
        safer = problem.evaluate("top").risk
    assert riskier > reference >= safer
    line = one_line(run("materialize", spec, "--policy", "race:top", "--out", project.dir / "a.parquet",
                        expect=2))
    assert "no_riskier_than = 'safe-harbor'" in line
    run("materialize", spec, "--policy", "top", "--out", project.dir / "b.parquet")
    gate = read_sidecar(sidecar_path(project.dir / "b.parquet"))["gate"]
    assert gate["verdict"] == "passed" and gate["reference_risk"] == pytest.approx(reference)


@pytest.mark.slow
def test_compile_prints_only_sql_and_judges_it(project, run) -> None:
    spec = with_release(project, "min_k = 1", name="gated.toml")
    result = run("compile", spec, "--policy", POLICY, "--dialect", "postgres")
    sqlglot = pytest.importorskip("sqlglot")
    sqlglot.parse_one(result.stdout.strip().rstrip(";"), read="postgres")  # stdout is the SQL alone
    assert "gate: passed" in result.stderr and "k 1 >= 1" in result.stderr
    line = one_line(run("compile", project.spec_path, "--policy", "bottom", expect=2))
    assert "original data" in line
    accepted = run("compile", project.spec_path, "--policy", "bottom", "--accept-risk", "test: reviewed")
    assert "released anyway" in accepted.stderr and accepted.stdout.startswith("SELECT")


def test_stale_sidecar_blocks_the_write(project, run) -> None:
    out = project.dir / "r.parquet"
    sidecar_path(out).write_text("{}", encoding="utf-8")
    line = one_line(run("materialize", project.spec_path, "--policy", POLICY, "--out", out, expect=2))
    assert "already exists" in line
    assert not out.exists()
    run("materialize", project.spec_path, "--policy", POLICY, "--out", out, "--overwrite")
    assert read_sidecar(sidecar_path(out))["release"]["rows"] == 500


# -- the sidecar -----------------------------------------------------------------------------

@pytest.mark.slow
def test_sidecar_records_hashes_roles_figures_and_command(project, run) -> None:
    spec = with_release(project, "max_risk = 0.5\nmin_k = 1")
    out = project.dir / "r.parquet"
    result = run("materialize", spec, "--policy", POLICY, "--out", out)
    assert "gate: passed" in result.stdout
    record = read_sidecar(sidecar_path(out))
    sha = lambda p: hashlib.sha256(Path(p).read_bytes()).hexdigest()  # noqa: E731
    assert record["spec"]["sha256"] == sha(spec)
    assert record["source"]["sha256"] == sha(project.source_csv) and record["source"]["rows"] == 500
    assert record["population"]["sha256"] == sha(project.population_path)
    assert record["release"]["sha256"] == sha(out) and record["release"]["rows"] == 500
    written = pq.read_table(out).column_names
    assert [c["name"] for c in record["columns"]] == written
    roles = {c["name"]: c["role"] for c in record["columns"]}
    assert {roles[q] for q in ("age", "sex", "race", "zip")} == {"qi"}
    with Problem.from_spec(spec) as problem:
        m = problem.evaluate(POLICY)
        assert record["policy"]["text"] == problem.policy(POLICY).text()
    f = record["figures"]
    assert f["risk"] == pytest.approx(m.risk, rel=1e-9)
    assert f["expected_reidentifications"] == pytest.approx(m.expected_reidentifications, rel=1e-9)
    assert f["max_record_risk"] == pytest.approx(m.max_record_risk, rel=1e-9)
    assert (f["k"], f["groups"], f["sample_unique_records"], f["records"]) == (
        m.k, m.groups, m.sample_unique_records, m.records)
    assert f["suppressed"] == 0 and f["outside"] == 0
    assert record["gate"]["verdict"] == "passed"
    assert {c["criterion"] for c in record["gate"]["checks"]} == {"max_risk", "min_k"}
    assert record["reproduce"]["command"].startswith("deid-sql materialize ")
    assert record["software"]["name"] == "deid-sql" and record["created_at"].endswith("Z")


@pytest.mark.slow
def test_suppression_is_measured_on_what_is_written(project, run) -> None:
    spec = with_release(project, "min_k = 5")
    out = project.dir / "r.csv"
    run("materialize", spec, "--policy", "age:cuts=18,30,45,65,90", "--out", out, "--suppress-below", "5")
    record = read_sidecar(sidecar_path(out))
    f = record["figures"]
    assert f["suppressed"] > 0 and f["k"] >= 5
    assert record["columns"][-1] == {"name": "deid_suppressed", "role": "flag"}
    # without suppression the same policy fails min_k
    line = one_line(run("materialize", spec, "--policy", "age:cuts=18,30,45,65,90", "--out",
                        project.dir / "s.csv", expect=2))
    assert "k " in line and "min_k" in line


@pytest.mark.slow
def test_table_and_view_sidecars_land_in_the_database(project, run) -> None:
    db = project.dir / "out.duckdb"
    run("materialize", project.spec_path, "--policy", POLICY, "--out", db, "--table", "released")
    run("view", project.spec_path, "--policy", POLICY, "--db", db, "--view", "patients_deid")
    assert tables_in(db) >= {"released", "released__release", "patients_deid", "patients_deid__release"}
    con = duckdb.connect(str(db), read_only=True)
    try:
        (text,) = con.execute('SELECT sidecar FROM "released__release"').fetchone()
        (verdict,) = con.execute('SELECT verdict FROM "patients_deid__release"').fetchone()
    finally:
        con.close()
    assert json.loads(text)["release"]["name"] == "released" and verdict == "passed"
    # a refused view leaves the file as it was
    spec = with_release(project, "min_k = 1000", name="strict.toml")
    one_line(run("view", spec, "--policy", POLICY, "--db", db, "--view", "v2", expect=2))
    assert "v2" not in tables_in(db) and "v2__release" not in tables_in(db)


def test_refused_table_output_creates_no_database(project, run) -> None:
    spec = with_release(project, "min_k = 1000")
    one_line(run("materialize", spec, "--policy", POLICY, "--out", project.dir / "new.duckdb", expect=2))
    assert not (project.dir / "new.duckdb").exists()


def test_python_api_goes_through_the_gate(project) -> None:
    spec = with_release(project, "max_record_risk = 1e-6")
    with Problem.from_spec(spec) as problem:
        with pytest.raises(ReleaseRefused, match="max_record_risk"):
            materialize(problem, plan_of(problem, POLICY), project.dir / "r.parquet")
        with pytest.raises(ReleaseRefused, match="max_record_risk"):
            create_view(problem, plan_of(problem, POLICY), project.dir / "v.duckdb", "v")
        with pytest.raises(PolicyError, match="empty"):
            materialize(problem, plan_of(problem, ""), project.dir / "r.parquet")
        written = materialize(problem, plan_of(problem, POLICY), project.dir / "r.parquet", accept_risk="hand tested")
        assert written.verdict is not None and written.verdict.status == "accepted"
    assert not (project.dir / "v.duckdb").exists()


def test_safe_harbor_writes_a_sidecar(project, run) -> None:
    spec = with_release(project, "max_risk = 1")
    run("safe-harbor", spec, "--out", project.dir / "sh.parquet")
    assert read_sidecar(sidecar_path(project.dir / "sh.parquet"))["gate"]["verdict"] == "passed"


def test_a_source_swapped_between_load_and_write_releases_no_raw_value(project) -> None:
    """The file changes after the problem loaded it: the guards label the new values as outside the
    domain, and the gate measures (and the sidecar records) what was written, not what was loaded."""
    import pyarrow as pa

    spec = project.spec(source="source.parquet")
    with Problem.from_spec(spec) as problem:
        swapped = project.source
        ages = swapped.column("age").to_pylist()
        zips = swapped.column("zip").to_pylist()
        races = swapped.column("race").to_pylist()
        for i in range(0, 30, 3):
            ages[i], zips[i + 1], races[i + 2] = 150, "99999", "Martian"
        swapped = (swapped.set_column(1, "age", pa.array(ages, pa.int64()))
                   .set_column(4, "zip", pa.array(zips)).set_column(3, "race", pa.array(races)))
        pq.write_table(swapped, project.source_parquet)  # after the load, before the write
        written = materialize(problem, plan_of(problem, "age:cuts=18,65"), project.dir / "r.parquet")
    released = pq.read_table(project.dir / "r.parquet").to_pylist()
    assert not any(r["age"] == "150" or r["zip"] == "99999" or r["race"] == "Martian" for r in released)
    assert sum(r["age"] == "*" for r in released) == 10
    assert sum(r["zip"] == "*" for r in released) == 10 and sum(r["race"] == "*" for r in released) == 10
    assert written.figures is not None and written.figures.outside == 30
    assert read_sidecar(sidecar_path(project.dir / "r.parquet"))["figures"]["outside"] == 30


# -- apply: the drift gate first, then the release gate -----------------------------------------------

@pytest.mark.slow
def test_apply_writes_the_sidecar_with_the_drift_check(project, run) -> None:
    spec = with_release(project, "max_record_risk = 0.5")
    policy = project.dir / "policy.json"
    run("policy", "save", spec, "--policy", POLICY, "--out", policy)
    out = project.dir / "batch.parquet"
    result = run("apply", policy, "--source", project.source_parquet, "--out", out)
    assert "gate: passed" in result.stdout and "sidecar:" in result.stdout
    record = read_sidecar(sidecar_path(out))
    assert record["drift"]["exceeded"] is False and record["drift"]["accepted_drift"] is None
    assert record["policy"]["file_sha256"] == hashlib.sha256(policy.read_bytes()).hexdigest()
    assert [c["name"] for c in record["columns"]] == pq.read_table(out).column_names
    assert "patient_id" not in pq.read_table(out).column_names
    with Problem.from_spec(spec) as problem:
        m = problem.evaluate(POLICY)
    assert record["figures"]["risk"] == pytest.approx(m.risk, rel=1e-9)
    assert record["figures"]["k"] == m.k and record["figures"]["records"] == 500


@pytest.mark.slow
def test_apply_is_refused_by_the_release_criteria(project, run) -> None:
    policy = project.dir / "policy.json"
    run("policy", "save", project.spec_path, "--policy", POLICY, "--out", policy)
    with_release(project, "min_k = 1000")  # the spec tightened after the save: the gate reads it again
    before = project.files()
    line = one_line(run("apply", policy, "--source", project.source_parquet, "--out", project.dir / "b.parquet",
                        expect=2))
    assert "min_k" in line and "nothing was written" in line
    line = one_line(run("apply", policy, "--source", project.source_parquet, "--view", "v", "--db",
                        project.dir / "v.duckdb", expect=2))
    assert "min_k" in line
    assert project.files() == before
    run("apply", policy, "--source", project.source_parquet, "--out", project.dir / "b.parquet",
        "--accept-risk", "test: tightened after the save")
    gate = read_sidecar(sidecar_path(project.dir / "b.parquet"))["gate"]
    assert gate["verdict"] == "accepted" and gate["accepted_risk"] == "test: tightened after the save"


def test_anonymize_release_is_gated_and_recorded(tmp_path: Path) -> None:
    """The optimum's release: suppressed records measured as suppressed, k over the rest, sidecar written."""
    from deid_sql.jobs.anonymize import anonymize, privacy_models, write_release
    from tests.test_fulldomain import small_spec

    spec = small_spec(tmp_path)
    spec.write_text(spec.read_text(encoding="utf-8") + "\n[release]\nmin_k = 3\n", encoding="utf-8")
    out = tmp_path / "anon.parquet"
    with Problem.from_spec(spec) as problem:
        run = anonymize(problem, privacy_models(k=3), suppression=0.1)
        assert run.result.optimum is not None
        written = write_release(problem, run, out)
        suppressed = run.result.optimum.suppressed
        problem.spec = replace(problem.spec, release=parse_release({"min_k": 1000}, []))  # a stricter spec
        with pytest.raises(ReleaseRefused, match="min_k"):
            write_release(problem, anonymize(problem, privacy_models(k=2)), tmp_path / "strict.parquet")
    assert not (tmp_path / "strict.parquet").exists()
    record = read_sidecar(sidecar_path(out))
    assert record["figures"]["suppressed"] == suppressed and record["figures"]["k"] >= 3
    assert record["columns"][-1] == {"name": "deid_suppressed", "role": "flag"}
    assert written.verdict is not None and written.verdict.status == "passed"


def test_docs_columns_table_is_the_demos_roles() -> None:
    """The [columns] example of docs/releases.md parses and declares exactly the roles the demo's spec gives
    (the page's examples, run by tests/test_docs.py, say the demo's spec declares them)."""
    import tomllib

    from deid_sql.contract.roles import parse_columns
    from deid_sql.starter.demo import DEMO_SPEC

    text = (Path(__file__).resolve().parents[1] / "docs" / "releases.md").read_text(encoding="utf-8")
    block = text.split("```toml\n[columns]\n", 1)[1].split("```", 1)[0]
    problems: list[str] = []
    shown = parse_columns(tomllib.loads(block), problems)
    demo = parse_columns(tomllib.loads(DEMO_SPEC)["columns"], problems)
    assert problems == []
    assert (shown.keep, shown.sensitive, sorted(shown.drop)) == (demo.keep, demo.sensitive, sorted(demo.drop))
