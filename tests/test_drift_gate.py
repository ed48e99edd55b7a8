"""The drift gate: the default limit's error rates, ``apply`` refusing a drifted batch, what moved,
policy files without the rule, and batches that are tables of PostgreSQL and Spark.

The rates are measured on ``deid_sql.fixtures.drift``'s seeded batches: 100 from the saved
batch's population must give at most one false alarm, 100 with a riskier mix (effect sizes in
that module's docstring) at least 99 detections.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deid_sql.errors import DeidError
from deid_sql.fixtures import drift as fixture
from deid_sql.policyfile import (
    DriftRefused,
    PolicyFile,
    apply_policy,
    check_policy,
    engine_ref,
    save_policy,
)
from deid_sql.policyfile.drift import judge
from deid_sql.policyfile.tolerance import PERMUTATIONS, permutation_limit
from tests.conftest import DEFAULT_QIS, PERMISSIVE_RELEASE, _population_table, _source_table
from tests.engines import Engine, engine_fixture, engine_params

from .test_policy_file import POLICY, batch, one_error_line, save, with_column

COLUMNS = '\n[columns]\ndrop = ["patient_id"]\nsensitive = ["diagnosis"]\n'
RELEASE = f"\n[release]\n{PERMISSIVE_RELEASE}\n"  # no criteria, no release: a permissive one


def kids(n: int = 300, seed: int = 8) -> pa.Table:
    """Children only: the age band with the smallest census, a riskier mix than the saved batch."""
    table = batch(seed=seed, n=n)
    return with_column(table, "age", [a % 18 for a in table.column("age").to_pylist()])


# -- the rates ------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("population", ["census", "sample"])
def test_false_alarm_and_detection_rates(population: str) -> None:
    rates = fixture.drift_rates(n_batches=100, seed=0, population=population)
    assert rates.false_alarms <= 1, rates.describe()
    assert rates.detections >= 99, rates.describe()
    # the effect sizes the module states
    assert rates.effect > (4.0 if population == "census" else 0.5), rates.describe()


@pytest.mark.slow
def test_the_rates_go_through_check_exactly() -> None:
    """``drift_rates`` counts groups itself; on the same batches ``check_policy`` (the SQL path)
    gives the same figures and the same limits, so the rates are those of ``check``."""
    for population in ("census", "sample"):
        fast = fixture.drift_rates(n_batches=2, seed=3, population=population)
        slow = fixture.drift_rates(n_batches=2, seed=3, population=population, through="check")
        assert (fast.false_alarms, fast.detections) == (slow.false_alarms, slow.detections)
        for key in ("saved", "same_mean", "riskier_mean", "mean_limit"):
            assert getattr(fast, key) == pytest.approx(getattr(slow, key), rel=1e-12), (population, key)


def test_expected_effect_of_the_riskier_mix() -> None:
    assert fixture.expected_rise(0.0) == 0.0
    assert fixture.expected_rise() == pytest.approx(4.98, abs=0.01)  # the census mix tested: 5.98 times the figure
    shares = fixture.cell_shares(0.15).reshape(fixture.census_counts().shape)
    assert shares[:fixture.SMALLEST].sum() == pytest.approx(0.040, abs=5e-4)  # the three smallest counties


def test_permutation_limit_is_the_largest_permuted_figure(tmp_path: Path) -> None:
    """On the saved batch itself the limit is the largest of 999 permuted figures, above the saved
    figure; the same batch always gets the same limit (seeded)."""
    spec = fixture.write_study(tmp_path)
    saved = save_policy(spec, fixture.POLICY, tmp_path / "p.json")
    report = check_policy(saved, tmp_path / "saved.parquet")
    assert report.limit is not None and report.limit.permutations == PERMUTATIONS
    assert report.new == saved.figures and not report.exceeded
    assert report.threshold > saved.figures.mean_record_risk and not report.limit.floor
    again = check_policy(saved, tmp_path / "saved.parquet")
    assert again.threshold == report.threshold
    figures, groups = fixture.released_groups(pq.read_table(tmp_path / "saved.parquet"))
    from deid_sql.evaluate.riskmodel import PopulationRisk

    limit = permutation_limit(saved.tolerance, saved.groups, groups, figures.mean_record_risk,
                              figures.mean_record_risk, PopulationRisk(1.0))
    assert limit.value == report.threshold
    assert judge(saved, figures, groups, PopulationRisk(1.0))[1] is False


# -- apply runs the check --------------------------------------------------------------------------

@pytest.mark.slow
def test_apply_refuses_a_drifted_batch_and_writes_nothing(project, run, tmp_path: Path) -> None:
    policy = save(project, run)
    source = project.write_parquet(kids(), "kids.parquet")
    existing = tmp_path / "existing.duckdb"
    con = duckdb.connect(str(existing))
    con.execute("CREATE TABLE keep AS SELECT 1 AS x")
    con.close()
    before, db_before = project.files(), existing.read_bytes()
    targets = [("--out", project.dir / "r.parquet"), ("--out", project.dir / "r.csv"),
               ("--out", project.dir / "r.duckdb", "--table", "released"),
               ("--view", "released", "--db", project.dir / "views.duckdb"),
               ("--view", "released", "--db", existing)]
    for target in targets:
        result = run("apply", policy, "--source", source, *target, expect=1)
        line = one_error_line(result)
        assert line.startswith("error: drift: mean_record_risk ") and "exceeds the limit" in line
        assert "largest of 999 permuted batches" in line and "moved: age 0-17 11.8% → 100.0%" in line
        assert "nothing was written" in line and '--accept-drift "REASON"' in line
        assert result.stdout == ""
    assert project.files() == before and existing.read_bytes() == db_before
    assert not (project.dir / "views.duckdb").exists()


@pytest.mark.slow
def test_apply_accept_drift_releases_and_says_why(project, run) -> None:
    policy = save(project, run)
    source = project.write_parquet(kids(), "kids.parquet")
    out = project.dir / "r.parquet"
    result = run("apply", policy, "--source", source, "--out", out, "--accept-drift", "  pediatric study, IRB 7 ")
    first = result.stdout.splitlines()[0]
    assert first.startswith("drift accepted: mean_record_risk") and "age 0-17 11.8% → 100.0%" in first
    assert first.endswith("reason: pediatric study, IRB 7") and "wrote 300 rows" in result.stdout
    assert pq.read_table(out).num_rows == 300
    done = apply_policy(policy, source, out=project.dir / "lib.parquet", accept_drift="pediatric study")
    assert done.drift.exceeded and done.accepted_drift == "pediatric study"
    assert done.drift.new.mean_record_risk > done.drift.threshold
    with pytest.raises(DriftRefused) as refused:
        apply_policy(policy, source, out=project.dir / "lib2.parquet")
    assert refused.value.exit_code == 1 and refused.value.report.exceeded
    assert not (project.dir / "lib2.parquet").exists()
    for reason in ("", "   "):
        line = one_error_line(run("apply", policy, "--source", source, "--out", project.dir / "x.parquet",
                                  "--accept-drift", reason, expect=2))
        assert "--accept-drift needs a reason" in line
    assert not (project.dir / "x.parquet").exists()


@pytest.mark.slow
def test_apply_passes_a_batch_from_the_same_population(project, run) -> None:
    policy = save(project, run)
    for seed, n in ((8, 500), (9, 700), (10, 60)):
        source = project.write_parquet(batch(seed=seed, n=n), f"b{seed}.parquet")
        result = run("apply", policy, "--source", source, "--out", project.dir / f"r{seed}.parquet")
        assert result.stdout.startswith("drift check ok: mean_record_risk"), result.stdout
        done = apply_policy(policy, source, out=project.dir / f"lib{seed}.parquet", accept_drift="not needed")
        assert not done.drift.exceeded and done.accepted_drift == "not needed"  # the reason is kept as given


@pytest.mark.slow
def test_apply_with_an_exact_threshold(project, run) -> None:
    policy = save(project, run, "--drift-limit", "6e-5")
    source = project.write_parquet(kids(), "kids.parquet")
    line = one_error_line(run("apply", policy, "--source", source, "--out", project.dir / "r.parquet", expect=1))
    assert "exceeds the limit 6e-05 (set at save, exact" in line
    assert not (project.dir / "r.parquet").exists()


# -- check says what moved -----------------------------------------------------------------------------

@pytest.mark.slow
def test_check_names_the_label_shares_that_moved(project, run) -> None:
    policy = save(project, run)
    source = project.write_parquet(kids(), "kids.parquet")
    out = run("check", policy, "--source", source, expect=1).stdout
    lines = out.splitlines()
    at = lines.index("label shares that changed most (saved → new):")
    assert lines[at + 1] == "  age: 0-17 11.8% → 100.0% (+88.2 pts), 18-64 73.6% → 0.0% (-73.6 pts), " \
                            "65-120 14.6% → 0.0% (-14.6 pts)"
    # race is released as one label (race:top): its share cannot move, so it is not listed
    assert [line.split(":")[0].strip() for line in lines[at + 1:at + 4]] == ["age", "sex", "zip"]
    assert "limit" in out and "(largest of 999 permuted batches; p = 0.001)" in out
    data = json.loads(run("check", policy, "--source", source, "--json", expect=1).stdout)
    assert set(data["shares"]) == {"age", "sex", "race", "zip"} and data["shares"]["race"] == []
    assert all(len(v) <= 3 for v in data["shares"].values())
    for changes in data["shares"].values():
        moves = [abs(c["change"]) for c in changes]
        assert moves == sorted(moves, reverse=True)
        assert all(c["change"] == pytest.approx(c["new"] - c["saved"]) for c in changes)
    same = json.loads(run("check", policy, "--source", project.source_parquet, "--json").stdout)
    assert same["shares"] == {"age": [], "sex": [], "race": [], "zip": []}  # the saved data: nothing moved


def test_check_help_states_the_rule() -> None:
    from click.testing import CliRunner

    from deid_sql.cli import cli

    text = " ".join(CliRunner().invoke(cli, ["check", "--help"]).output.split())
    for fragment in ("999 batches of the batch's size", "at most 1 time in 1000", "never below the saved figure",
                     "--drift-limit set at 'policy save' is an exact limit", "--source-table"):
        assert fragment in text, fragment


# -- policy files without the rule, or with a broken one ------------------------------------------------

@pytest.mark.slow
def test_a_policy_file_saved_before_the_rule_keeps_the_exact_limit(project, run) -> None:
    policy = save(project, run)
    data = json.loads(policy.read_text(encoding="utf-8"))
    data["drift"] = {k: v for k, v in data["drift"].items()
                     if k in ("measure", "meaning", "saved", "threshold", "threshold_from")}
    old = project.dir / "old.json"
    old.write_text(json.dumps(data), encoding="utf-8")
    assert PolicyFile.read(old).without_tolerance
    source = project.write_parquet(batch(seed=8, n=500), "b.parquet")
    result = run("check", old, "--source", source, expect=None)
    assert "limit 4.1" in result.stdout and "saved without a drift tolerance" in result.stdout
    report = json.loads(run("check", old, "--source", source, "--json", expect=None).stdout)
    assert report["threshold"] == report["saved"]["mean_record_risk"] and report["without_tolerance"] is True
    assert report["rule"] == "exact" and report["limit"] is None
    assert report["exceeded"] == (report["new"]["mean_record_risk"] > report["threshold"])


@pytest.mark.slow
def test_broken_rule_fields_are_refused(project, run) -> None:
    policy = save(project, run)
    data = json.loads(policy.read_text(encoding="utf-8"))
    cases = {
        "rule.json": ({"rule": "magic"}, "drift.rule 'magic' is not one of exact, permutation"),
        "alarm.json": ({"false_alarm": 2}, "drift.false_alarm must be between 0 and 1"),
        "perms.json": ({"permutations": "many"}, "drift.permutations has the wrong type"),
        "threshold.json": ({"threshold": 0.5}, "drift.threshold must be the saved figure"),
        "from.json": ({"threshold_from": "set at save"}, "goes with threshold_from \"saved figure\" only"),
    }
    for name, (edit, fragment) in cases.items():
        path = project.dir / name
        path.write_text(json.dumps({**data, "drift": {**data["drift"], **edit}}), encoding="utf-8")
        before = project.files()
        for command in (("check", path, "--source", project.source_parquet),
                        ("apply", path, "--source", project.source_parquet, "--out", project.dir / "r.parquet")):
            line = one_error_line(run(*command, expect=2))
            assert fragment in line, (name, line)
        assert project.files() == before


# -- where the batch comes from ------------------------------------------------------------------------

@pytest.mark.slow
def test_batch_arguments(project, run) -> None:
    policy = save(project, run)
    before = project.files()
    for args, fragment in [
        ((), "give the new batch with --source FILE (a .duckdb file with --source-table NAME too) or --source-table "
             "NAME"),
        (("--source", project.source_parquet, "--source-table", "t"), "--source-table with --source is only for a "
                                                                      "DuckDB batch"),
        (("--source-table", "staging.batch"), "runs on DuckDB, which reads batch files"),
        (("--source-table", " "), "--source-table needs a table name"),
    ]:
        for command in ("check", "apply"):
            extra = ("--out", project.dir / "r.parquet") if command == "apply" else ()
            line = one_error_line(run(command, policy, *args, *extra, expect=2))
            assert fragment in line, (command, args, line)
    # the old spelling beside the new one: click's usage error, exit 2 (check; apply's --table names its output)
    result = run("check", policy, "--source-table", "t", "--table", "x", expect=2)
    assert "--table is the old spelling of --source-table; give --source-table only" in result.stderr
    line = one_error_line(run("apply", policy, "--source", project.source_parquet, "--table", "t", expect=2))
    assert "--table names the table inside a .duckdb --out (the spec runs on DuckDB)" in line
    line = one_error_line(run("apply", policy, "--source", project.source_parquet, "--view", "v", "--db",
                              project.dir / "v.duckdb", "--table", "t", expect=2))
    assert "not of a view" in line
    assert project.files() == before


# -- PostgreSQL and Spark: batches that are tables of the engine -------------------------------------------

@pytest.fixture(scope="module", params=engine_params("postgres", "spark"))
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


@pytest.fixture(scope="module")
def study(engine: Engine) -> Path:
    """The conftest problem stored in the engine, with three batches beside it; returns the spec."""
    source = engine.load("patients", _source_table())
    population = engine.load("census", _population_table())
    engine.load("batch8", batch(seed=8, n=500))
    engine.load("kids", kids())
    bad = batch(seed=9, n=50)
    engine.load("bad", with_column(bad, "zip", ["99999"] + bad.column("zip").to_pylist()[1:]))
    text = (engine.header() + f"\n[source]\n{source}\n\n[population]\n{population}\ncount = \"count\"\n"
            + "".join(DEFAULT_QIS) + COLUMNS + RELEASE)
    path = engine.folder / "spec.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[PolicyFile, Path]:
    """The same problem from Parquet files on DuckDB, with the same batches as files."""
    folder = tmp_path_factory.mktemp("reference")
    pq.write_table(_source_table(), folder / "patients.parquet")
    pq.write_table(_population_table(), folder / "census.parquet")
    pq.write_table(batch(seed=8, n=500), folder / "batch8.parquet")
    pq.write_table(kids(), folder / "kids.parquet")
    spec = folder / "spec.toml"
    spec.write_text('gamma = 1.0\n[source]\npath = "patients.parquet"\n\n[population]\npath = "census.parquet"\n'
                    'count = "count"\n' + "".join(DEFAULT_QIS) + COLUMNS + RELEASE, encoding="utf-8")
    return save_policy(spec, POLICY, folder / "policy.json"), folder


def rows(table: pa.Table) -> list[tuple[object, ...]]:
    names = sorted(table.column_names)
    return sorted(zip(*(table.column(c).to_pylist() for c in names)), key=repr)


def test_engine_batches(engine: Engine, study: Path, reference: tuple[PolicyFile, Path], run) -> None:
    ref_policy, ref_folder = reference
    policy = save_policy(study, POLICY, engine.folder / "policy.json")
    assert policy.source_table and policy.saved_on() == f"table {engine.qualified('patients')}"
    saved = json.loads((engine.folder / "policy.json").read_text(encoding="utf-8"))
    assert saved["source"]["table"] == engine.qualified("patients") and "path" not in saved["source"]
    assert PolicyFile.read(engine.folder / "policy.json").source == engine.qualified("patients")
    for key, value in ref_policy.figures.to_dict().items():
        assert getattr(policy.figures, key) == pytest.approx(value, rel=1e-9), key

    # check: the same figures and limits as the DuckDB reference on the same data
    for name in ("batch8", "kids"):
        mine = check_policy(policy, engine_ref(engine.qualified(name)))
        theirs = check_policy(ref_policy, ref_folder / f"{name}.parquet")
        assert mine.exceeded == theirs.exceeded == (name == "kids")
        assert mine.new.mean_record_risk == pytest.approx(theirs.new.mean_record_risk, rel=1e-9)
        assert mine.threshold == pytest.approx(theirs.threshold, rel=1e-9)
        assert mine.shares == theirs.shares
    result = run("check", engine.folder / "policy.json", "--source-table", engine.qualified("batch8"))
    assert result.stdout.splitlines()[-1].startswith("ok:")

    # apply refuses the drifted batch and writes nothing in the engine
    for target in (("--table", engine.qualified("rel_kids")), ("--view", engine.qualified("view_kids")),
                   ("--out", engine.folder / "kids.parquet")):
        line = one_error_line(run("apply", engine.folder / "policy.json", "--source-table", engine.qualified("kids"),
                                  *target, expect=1))
        assert "exceeds the limit" in line and "nothing was written" in line
    assert not engine.backend.exists(None, engine.qualified("rel_kids"))
    assert not engine.backend.exists(None, engine.qualified("view_kids"))
    assert not (engine.folder / "kids.parquet").exists()

    # … and releases it with a reason: the rows apply gives on the reference's files
    done = apply_policy(policy, engine_ref(engine.qualified("kids")), out_table=engine.qualified("rel_kids"),
                        accept_drift="pediatric study")
    assert done.written is not None and done.written.rows == 300 and done.accepted_drift == "pediatric study"
    apply_policy(ref_policy, ref_folder / "kids.parquet", out=ref_folder / "kids-release.parquet",
                 accept_drift="pediatric study", overwrite=True)  # the reference is shared by the engines
    expected = rows(pq.read_table(ref_folder / "kids-release.parquet"))
    assert rows(engine.read(engine.qualified("rel_kids"))) == expected

    # a batch from the same population: a table, a view in the engine, and a local file
    apply_policy(policy, engine_ref(engine.qualified("batch8")), view=engine.qualified("view8"))
    apply_policy(ref_policy, ref_folder / "batch8.parquet", out=ref_folder / "b8.parquet", overwrite=True)
    expected = rows(pq.read_table(ref_folder / "b8.parquet"))
    assert rows(engine.read(engine.qualified("view8"))) == expected
    result = run("apply", engine.folder / "policy.json", "--source-table", engine.qualified("batch8"),
                 "--out", engine.folder / "b8.parquet")
    assert "drift check ok" in result.stdout and "wrote 500 rows" in result.stdout
    assert rows(pq.read_table(engine.folder / "b8.parquet")) == expected
    result = run("apply", engine.folder / "policy.json", "--source-table", engine.qualified("batch8"),
                 "--table", engine.qualified("rel8"))
    assert f"wrote 500 rows to table {engine.qualified('rel8')}" in result.stdout
    assert rows(engine.read(engine.qualified("rel8"))) == expected


def test_engine_refusals(engine: Engine, study: Path, run) -> None:
    policy = engine.folder / "policy.json"
    if not policy.exists():
        save_policy(study, POLICY, policy)
    for args, fragment in [
        (("--source-table", engine.qualified("batch8"), "--table", engine.qualified("patients"), "--overwrite"),
         "is an input"),
        (("--source-table", engine.qualified("batch8"), "--table", engine.qualified("batch8"), "--overwrite"),
         "is an input"),
        (("--source-table", engine.qualified("batch8"), "--view", "v", "--db", engine.folder / "x.duckdb"),
         "leave out --db"),
        (("--source-table", engine.qualified("batch8")), "give --out FILE, --table NAME"),
        (("--source-table", engine.qualified("bad"), "--table", engine.qualified("rel_bad")),
         "outside the domain saved in"),
    ]:
        line = one_error_line(run("apply", policy, *args, expect=2))
        assert fragment in line, (args, line)
    assert not engine.backend.exists(None, engine.qualified("rel_bad"))
    pq.write_table(batch(seed=8, n=20), engine.folder / "f.parquet")
    if engine.name == "postgres":
        line = one_error_line(run("check", policy, "--source", engine.folder / "f.parquet", expect=2))
        assert "runs on PostgreSQL, which reads tables of its database" in line
    else:  # Spark reads Parquet files itself
        assert check_policy(policy, engine.folder / "f.parquet").new.records == 20


def test_engine_guard_fails_the_query(engine: Engine, study: Path, monkeypatch) -> None:
    """A value outside the domain that slips past the scan fails the release query on the engine
    too (DuckDB's error() does not exist there), so nothing is written."""
    from deid_sql.policyfile import batch as batch_module

    policy = engine.folder / "policy.json"
    if not policy.exists():
        save_policy(study, POLICY, policy)
    monkeypatch.setattr(batch_module.Batch, "_scan", lambda self: (50, batch_module.Outside(0, ())))
    monkeypatch.setattr("deid_sql.policyfile.apply.drift_report", _no_drift)
    with pytest.raises(DeidError, match="outside the domain of QI 'zip'"):
        apply_policy(policy, engine_ref(engine.qualified("bad")), out_table=engine.qualified("rel_guard"))
    assert not engine.backend.exists(None, engine.qualified("rel_guard"))


def _no_drift(batch):  # the check's own query would run into the guard first; this test is about the write
    from deid_sql.policyfile.drift import DriftReport

    pf = batch.policy
    return DriftReport(pf, batch.describe(), pf.figures, pf.figures, False, batch.outside)
