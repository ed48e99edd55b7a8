"""Spark runs as a user runs them: a second ``materialize --table --overwrite`` replaces the table,
also when an earlier process left the table's folder in the warehouse (Spark's default catalog
forgets tables when the process ends; their folders stay and Spark refuses to create a table over
one, ``LOCATION_ALREADY_EXISTS``); Spark's files go into deid-sql's Spark folder, never the working
directory; the JVM's log lines stay off stderr unless ``--verbose``.

The folder and log checks run the CLI in fresh processes (``subprocess``): which folders Spark
creates and what its JVM prints happen when Spark starts, once per process, and the JVM writes on
file descriptor 2, which ``CliRunner`` does not capture.  The folder rules themselves are pure
Python and need no Java.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import Result

from deid_sql.backends import spark_home
from deid_sql.errors import BackendError
from deid_sql.spec.file import Spec, SpecError
from tests.conftest import DEFAULT_COLUMNS, DEFAULT_QIS, N_SOURCE, PERMISSIVE_RELEASE, _population_table, _source_table
from tests.engines import Engine, engine_fixture, engine_params
from tests.spark_engine import parquet_study

# what Spark's JVM prints when it starts, at its default log level
JVM_LINES = re.compile(r"log4j|Setting default log level|NativeCodeLoader|WARN |incubator modules|sc\.setLogLevel")
SPARK_FILES = ("spark-warehouse", "metastore_db", "derby.log")
RELEASE = f"\n[release]\n{PERMISSIVE_RELEASE}\n"  # no criteria, no release: a permissive one


# -- the folder rules (no Java) ---------------------------------------------------------------------
def test_default_folder_is_the_user_cache_made_owner_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(spark_home.ENV, raising=False)
    monkeypatch.delenv("DEID_SQL_CACHE_DIR", raising=False)  # the tests' own cache folder (conftest)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = spark_home.home_folder(None)
    assert folder == tmp_path / "cache" / "deid-sql" / "spark"
    for level in (tmp_path / "cache", tmp_path / "cache" / "deid-sql", folder):  # every level it made
        assert stat.S_IMODE(level.stat().st_mode) == 0o700, level
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # not absolute: ignored, as the XDG rules say
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert spark_home.default_home() == tmp_path / "home" / ".cache" / "deid-sql" / "spark"


def test_environment_and_spec_name_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(spark_home.ENV, str(tmp_path / "from-env"))
    assert spark_home.home_folder(None) == tmp_path / "from-env"
    assert spark_home.home_folder(tmp_path / "given") == tmp_path / "given"  # the spec's wins
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(BackendError, match="is not a folder"):
        spark_home.home_folder(tmp_path / "a-file")
    spec = tmp_path / "study" / "spec.toml"
    spec.parent.mkdir()
    pq.write_table(_source_table(), spec.parent / "s.parquet")
    spec.write_text('population = "sample"\n[backend]\nengine = "spark"\nhome = "../spark-files"\n'
                    '[source]\npath = "s.parquet"\n' + "".join(DEFAULT_QIS), encoding="utf-8")
    backend = Spec.read(spec).backend
    assert backend.home == tmp_path / "spark-files"  # relative to the spec's folder
    assert backend.options()["home"] == tmp_path / "spark-files"
    spec.write_text('population = "sample"\n[backend]\nhome = "x"\n[source]\npath = "s.parquet"\n'
                    + "".join(DEFAULT_QIS), encoding="utf-8")
    with pytest.raises(SpecError, match='master, conf and home are only for engine "spark"'):
        Spec.read(spec)


def test_spark_files_go_into_the_folder_and_conf_wins(tmp_path: Path) -> None:
    folder = tmp_path / "spark files"
    settings = spark_home.startup_settings(folder, {})
    assert settings["spark.sql.warehouse.dir"] == str(folder / "warehouse")
    assert str(folder / "metastore_db") in settings["spark.hadoop.javax.jdo.option.ConnectionURL"]
    assert settings[spark_home.JAVA_OPTIONS] == (f'-Dderby.system.home="{folder}" '
                                                 f'-Dderby.stream.error.file="{folder / "derby.log"}"')
    given = {"spark.sql.warehouse.dir": "/data/wh", spark_home.JAVA_OPTIONS: "-Dderby.system.home=/mine"}
    settings = spark_home.startup_settings(folder, given)
    assert settings["spark.sql.warehouse.dir"] == "/data/wh"
    assert settings[spark_home.JAVA_OPTIONS].endswith(" -Dderby.system.home=/mine")  # last -D wins in Java


# -- Spark in this process: the catalog paths -------------------------------------------------------
@pytest.fixture(scope="module", params=engine_params("spark"))  # its tests are marked engine
def spark(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from engine_fixture(request, tmp_path_factory)


@pytest.fixture(scope="module")
def spark_spec(spark: Engine) -> Path:
    source = spark.load("patients", _source_table())
    population = spark.load("census", _population_table())
    path = spark.folder / "spec.toml"
    path.write_text(spark.header() + f"\n[source]\n{source}\n\n[population]\n{population}\ncount = \"count\"\n"
                    + "".join(DEFAULT_QIS) + DEFAULT_COLUMNS + RELEASE, encoding="utf-8")
    return path


def _materialize(run: Callable[..., Result], spec: Path, table: str, policy: str, *flags: str,
                 expect: int = 0) -> Result:
    return run("materialize", spec, "--policy", policy, "--table", table, *flags, expect=expect)


def _table_folder(spark: Engine, name: str) -> Path:
    """Where Spark puts the managed table ``name`` of the engine's database (a local warehouse)."""
    database = spark.qualified("x").split(".")[0]
    location = spark.backend.session.catalog.getDatabase(database).locationUri  # type: ignore[attr-defined]
    return Path(location.removeprefix("file:")) / name


def test_materialize_twice_with_overwrite_replaces(spark: Engine, spark_spec: Path,
                                                   run: Callable[..., Result]) -> None:
    table = spark.qualified("twice")
    _materialize(run, spark_spec, table, "age:cuts=18,65|zip:top", "--overwrite")
    _materialize(run, spark_spec, table, "top", "--overwrite")
    got = spark.read(table)
    assert got.num_rows == N_SOURCE
    assert set(got.column("age").to_pylist()) == {"0-120"}  # the second policy's rows
    refused = _materialize(run, spark_spec, table, "top", expect=2)
    assert refused.stderr.strip().count("\n") == 0
    assert "already has a table named" in refused.stderr and "--overwrite" in refused.stderr


def test_a_leftover_folder_is_refused_then_replaced(spark: Engine, spark_spec: Path,
                                                    run: Callable[..., Result]) -> None:
    """The folder of a table an earlier process wrote (or a crash left): no catalog table owns it."""
    table = spark.qualified("left_behind")
    folder = _table_folder(spark, "left_behind")
    folder.mkdir(parents=True)
    (folder / "part-00000-old.parquet").write_bytes(b"rows of an earlier run")
    sidecar = _table_folder(spark, "left_behind__release")
    sidecar.mkdir()
    (sidecar / "part-00000-old.parquet").write_bytes(b"its sidecar")
    refused = _materialize(run, spark_spec, table, "top", expect=2)
    line = refused.stderr.strip()
    assert "\n" not in line and "left by an earlier run" in line and "--overwrite" in line, line
    assert "LOCATION_ALREADY_EXISTS" not in line
    assert (folder / "part-00000-old.parquet").exists()  # refused: nothing touched

    _materialize(run, spark_spec, table, "age:cuts=18,65|zip:top", "--overwrite")
    got = spark.read(table)
    assert got.num_rows == N_SOURCE
    assert set(got.column("zip").to_pylist()) == {"37***"}  # zip:top keeps what every ZIP shares
    assert not (folder / "part-00000-old.parquet").exists() and not (sidecar / "part-00000-old.parquet").exists()
    assert spark.read(spark.qualified("left_behind__release")).num_rows == 1


# -- fresh processes: where Spark's files go, what reaches stderr -------------------------------------
@pytest.fixture
def study(spark: Engine, tmp_path: Path) -> Path:
    """A spec of Parquet files read by Spark with the default settings (no conf), and an empty
    working folder ``tmp_path/work`` to run in."""
    spec = parquet_study(tmp_path)
    (tmp_path / "work").mkdir()
    return spec


def _cli(spec: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``deid-sql ARGS`` in a new process, in ``spec``'s folder's ``work``, with ``home`` as Spark's folder."""
    env = {**os.environ, spark_home.ENV: str(home), "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.run([sys.executable, "-c", "from deid_sql.cli.main import main; main()", *args],
                          cwd=spec.parent / "work", env=env, capture_output=True, text=True, timeout=600)


def test_reruns_in_new_processes_replace_and_stay_quiet(study: Path) -> None:
    home = study.parent / "spark-home"
    for policy in ("age:cuts=18,65|zip:top", "top"):
        done = _cli(study, home, "materialize", str(study), "--policy", policy, "--table", "released", "--overwrite")
        assert done.returncode == 0, done.stderr
        assert "wrote 500 rows" in done.stdout
        assert not JVM_LINES.search(done.stderr), done.stderr
    assert not list((study.parent / "work").iterdir())  # no spark-warehouse/, metastore_db/, derby.log
    rows = pq.read_table(home / "warehouse" / "released")  # the second run's table, in Spark's folder
    assert rows.num_rows == N_SOURCE and set(rows.column("age").to_pylist()) == {"0-120"}
    assert JVM_LINES.search((home / spark_home.LOG).read_text())  # the JVM's lines went here instead


def test_verbose_shows_the_jvm_log_and_a_hive_metastore_stays_in_the_folder(study: Path) -> None:
    home = study.parent / "spark-home"
    text = study.read_text().replace('master = "local[1]"', 'master = "local[1]"\n'
                                     'conf = { "spark.sql.catalogImplementation" = "hive" }')
    study.write_text(text, encoding="utf-8")
    done = _cli(study, home, "materialize", str(study), "--policy", "top", "--table", "released", "--verbose")
    assert done.returncode == 0, done.stderr
    assert JVM_LINES.search(done.stderr), done.stderr
    assert not any((study.parent / "work" / name).exists() for name in SPARK_FILES)
    assert all((home / name).exists() for name in ("warehouse", "metastore_db", "derby.log"))
