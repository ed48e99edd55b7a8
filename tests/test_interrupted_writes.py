"""A refused release never touches the disk, and a killed write leaves nothing for long (issue 26, part 3).

- the release query is judged before any file or table is created: a refusal leaves no target, no
  temporary file and no temporary folder, on every writing path (file, DuckDB table, engine table);
- a write killed with ``kill -9`` leaves its temporary owner-only (0600 in a 0700 hidden folder),
  recorded in the cache folder; the next deid-sql command, run anywhere, removes it and says so;
- the record tells a dead writer from a live one by pid and process start time (a reused pid is
  not the writer).

The killed writes are real: a few million generated rows, so the write lasts long enough to be
caught in the act, with no hook in the code.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deid_sql.errors import ReleaseRefused
from deid_sql.release.plan import plan_of
from deid_sql.storage import inflight
from deid_sql.storage.atomic import TMP_FOLDER

RUN_CLI = "import sys\nfrom deid_sql.cli import main\nsys.argv = ['deid-sql', *sys.argv[1:]]\nmain()\n"
ROWS = 3_000_000
# [release] bodies; the refused runs generalize (bottom would be refused as the original data before min_k)
REFUSING = "min_k = 100000000"  # no group holds that many rows: refused
ACCEPTING = "max_record_risk = 1.0"


def _big_project(folder: Path, release: str) -> Path:
    """A source of ``ROWS`` rows (two QIs and three incompressible text columns) and its spec."""
    import duckdb

    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "big.parquet"
    if not source.exists():
        con = duckdb.connect()
        con.execute(f"""COPY (SELECT i AS id, (i * 7919) % 121 AS age, CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END AS sex,
                                     md5(i::VARCHAR) AS a, md5((i + 1)::VARCHAR) AS b, md5((i + 2)::VARCHAR) AS c
                              FROM range({ROWS}) t(i)) TO '{source}' (FORMAT parquet)""")
        con.close()
    spec = folder / "big.toml"
    spec.write_text('gamma = 1.0\npopulation = "sample"\n\n[source]\npath = "big.parquet"\n\n'
                    '[[qi]]\nname = "age"\nkind = "integer"\nmin = 0\nmax = 120\n\n'
                    '[[qi]]\nname = "sex"\nkind = "category"\nvalues = ["F", "M"]\n\n'
                    '[columns]\nkeep = ["id", "a", "b", "c"]\n\n[release]\n' + release + "\n", encoding="utf-8")
    return spec


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "DEID_SQL_CACHE_DIR": str(cache), "DEID_SQL_NO_CACHE": "1"}


def _start(args: list[str], cwd: Path, cache: Path, umask: int = -1) -> subprocess.Popen[str]:
    # cwd: not the repository, whose deid_sql/ (without the sql/ and udfs/ it ships) would shadow the installed one
    return subprocess.Popen([sys.executable, "-c", RUN_CLI, *args], cwd=cwd, env=_env(cache), umask=umask,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _temporaries(folder: Path) -> list[Path]:
    hidden = folder / TMP_FOLDER
    try:
        return [p for p in hidden.iterdir()] + [hidden]
    except OSError:
        return []


@pytest.mark.slow
def test_a_refused_release_never_creates_a_file(tmp_path: Path) -> None:
    """Watched the whole run: no temporary folder, no temporary file, no target, at any moment."""
    spec = _big_project(tmp_path / "study", REFUSING)
    out = spec.parent / "raw.parquet"
    before = sorted(p.name for p in spec.parent.iterdir())
    proc = _start(["materialize", str(spec), "--policy", "age:cuts=30,60,90", "--out", str(out)], spec.parent,
                  tmp_path / "cache")
    seen: set[str] = set()
    deadline = time.monotonic() + 300
    while proc.poll() is None:
        seen |= {p.name for p in spec.parent.iterdir()} - set(before)
        assert time.monotonic() < deadline, "the run did not finish"
        time.sleep(0.002)
    _, err = proc.communicate()
    assert proc.returncode == 2, err
    assert "release refused by the gate" in err and "min_k" in err and "nothing was written" in err
    assert seen == set(), f"created during a refused run: {seen}"
    assert sorted(p.name for p in spec.parent.iterdir()) == before


@pytest.mark.slow
def test_a_killed_write_leaves_an_owner_only_temporary_the_next_command_removes(tmp_path: Path) -> None:
    spec = _big_project(tmp_path / "study", ACCEPTING)
    out = spec.parent / "release.parquet"
    cache = tmp_path / "cache"
    # umask 0: owner-only whatever the umask says
    proc = _start(["materialize", str(spec), "--policy", "age:cuts=30,60,90", "--out", str(out)], spec.parent, cache,
                  umask=0)
    deadline = time.monotonic() + 300
    staged: list[Path] = []
    while not staged:  # a temporary with rows in it: the write is under way
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the write never started"
        staged = [p for p in _temporaries(spec.parent) if p.is_file() and p.stat().st_size > 1_000_000]
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    hidden = spec.parent / TMP_FOLDER
    assert not out.exists()
    assert stat.S_IMODE(hidden.stat().st_mode) == 0o700
    leftovers = [p for p in hidden.iterdir()]
    assert leftovers and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in leftovers), leftovers
    assert list((cache / inflight.FOLDER).iterdir())  # recorded while in flight

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run([sys.executable, "-c", RUN_CLI, "--version"], cwd=elsewhere, env=_env(cache),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    # the release and its sidecar are staged together: two temporaries
    assert len(lines) == 1 and lines[0].startswith(f"removed {len(leftovers)} leftover temporary file"), done.stderr
    assert "of an interrupted deid-sql run: " in lines[0] and all(str(p) in lines[0] for p in leftovers)
    assert not hidden.exists() and not out.exists()
    assert list((cache / inflight.FOLDER).iterdir()) == []
    again = subprocess.run([sys.executable, "-c", RUN_CLI, "--version"], cwd=elsewhere, env=_env(cache),
                           capture_output=True, text=True, timeout=60)
    assert again.stderr == ""  # said once


# -- the record: dead, reused and live pids --------------------------------------------------------------

def test_the_record_tells_a_dead_or_reused_pid_from_the_writer(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DEID_SQL_CACHE_DIR", str(tmp_path / "cache"))
    me = os.getpid()
    assert inflight.running(me, inflight.start_time(me))
    assert not inflight.running(me, "1")  # the pid is taken by a process that started at another time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = inflight.start_time(child.pid)
        assert start is not None and inflight.running(child.pid, start)
        child.kill()
        deadline = time.monotonic() + 10
        while inflight.running(child.pid, start):  # not yet reaped: a zombie, no writer any more
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        child.kill()
        child.wait()
    assert not inflight.running(child.pid, start)


def test_sweep_removes_the_dead_writers_temporaries_only(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DEID_SQL_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "out" / TMP_FOLDER
    folder.mkdir(parents=True)
    dead, live, mine = folder / "dead.tmp", folder / "live.tmp", folder / "mine.tmp"
    for p in (dead, live, mine, dead.with_name("dead.tmp.wal")):
        p.write_text("rows")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        registry = inflight.registry()
        inflight.record(mine)
        for pid, start, path in ((child.pid, "999999999", dead),  # the pid of a process that started later
                                 (child.pid, inflight.start_time(child.pid), live)):
            registry.joinpath(f"{pid}.{start}.abc.path").write_bytes(os.fsencode(str(path)))
        assert sorted(p.name for p in inflight.sweep()) == ["dead.tmp", "dead.tmp.wal"]
        assert live.exists() and mine.exists() and not dead.exists()
        assert len(list(registry.iterdir())) == 2
    finally:
        child.kill()
        child.wait()
    assert sorted(p.name for p in inflight.sweep()) == ["live.tmp"]


# -- judged before writing, on every path ------------------------------------------------------------------

@pytest.fixture
def untouched(monkeypatch):  # noqa: ANN201
    """Fail the test if any temporary folder or file is asked for, or any table created."""
    import deid_sql.backends.duckdb  # noqa: F401  (the engines' classes, to guard their create_table)
    import deid_sql.storage.atomic as atomic
    from deid_sql.backends.base import Backend

    try:
        import deid_sql.backends.postgres  # noqa: F401
    except ImportError:
        pass

    calls: list[str] = []

    def refuse(*args: object, **kwargs: object) -> None:
        calls.append(repr(args))
        raise AssertionError("a write started before the release was judged")

    monkeypatch.setattr(atomic, "temp_folder", refuse)
    for cls in Backend.__subclasses__():
        monkeypatch.setattr(cls, "create_table", refuse)
    return calls


def _refusing_spec(project) -> Path:  # noqa: ANN001
    return project.spec("refusing.toml", source="source.parquet", release=REFUSING)


@pytest.mark.parametrize("target", ["r.parquet", "r.csv", "r.duckdb", "existing.duckdb"])
def test_a_refused_file_or_duckdb_table_creates_nothing(project, untouched, target: str) -> None:
    import duckdb

    from deid_sql.problem import Problem
    from deid_sql.release.output import materialize

    if target == "existing.duckdb":
        duckdb.connect(str(project.dir / target)).close()
    spec = _refusing_spec(project)
    before = project.files()
    with Problem.from_spec(spec) as problem, pytest.raises(ReleaseRefused, match="min_k"):
        materialize(problem, plan_of(problem, "age:cuts=30,60,90"), project.dir / target, table="t")
    assert untouched == []
    assert project.files() == before and not (project.dir / TMP_FOLDER).exists()


@pytest.mark.engine
def test_a_refused_engine_table_creates_nothing(tmp_path: Path, untouched) -> None:
    from deid_sql.problem import Problem
    from deid_sql.release.output import materialize
    from tests.engines import default_spec, open_engine

    engine = open_engine("postgres", tmp_path)
    try:
        spec = default_spec(engine, release=REFUSING)
        name = engine.qualified("refused")  # type: ignore[attr-defined]
        with Problem.from_spec(spec) as problem, pytest.raises(ReleaseRefused, match="min_k"):
            materialize(problem, plan_of(problem, "age:cuts=30,60,90"), None, table=name)
        assert untouched == []
        assert not engine.backend.exists(None, name)  # type: ignore[attr-defined]
    finally:
        engine.close()
