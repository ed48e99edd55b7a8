"""A signal during a query (issue 38): SIGTERM or Ctrl-C while an engine ran a query ended as exit 3,
"internal error: RuntimeError: Query interrupted — this is a bug", and only once the query had run
to its end.  Now the query is cancelled at once (``deid_sql/interrupts.py``) and the run exits 143
(SIGTERM) or 130 (SIGINT) with one line, after removing what it staged.

The runs are real subprocesses that get the signal while DuckDB (or PostgreSQL) works: a view over
three billion generated rows (a query of minutes, created in no time), or a release of a few
million rows caught while its staged file grows.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from deid_sql import interrupts
from deid_sql.storage import inflight
from deid_sql.storage.atomic import TMP_FOLDER
from tests.test_interrupted_writes import ACCEPTING, RUN_CLI, _big_project, _temporaries

SIGNALS = [pytest.param(signal.SIGTERM, "error: terminated by SIGTERM", id="SIGTERM"),
           pytest.param(signal.SIGINT, "error: interrupted", id="SIGINT")]
ROWS = 3_000_000_000  # minutes of work for the cells' GROUP BY: the signal surely lands inside it
SPEC = ('population = "sample"\n\n{backend}[source]\n{source}\n\n[[qi]]\nname = "age"\nkind = "integer"\nmin = 0\n'
        'max = 120\n\n[[qi]]\nname = "sex"\nkind = "category"\nvalues = ["F", "M"]\n\n[columns]\nkeep = ["id"]\n\n'
        '[release]\nmax_record_risk = 1.0\n')
PEOPLE = (f"SELECT i AS id, (i * 7919) % 121 AS age, CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END AS sex "
          f"FROM range({ROWS}) t(i)")


class Running:
    """A deid-sql command in a subprocess, its stderr read as it comes (progress lines say what runs)."""

    def __init__(self, args: list[object], cwd: Path, cache: Path) -> None:
        env = {**os.environ, "DEID_SQL_CACHE_DIR": str(cache), "DEID_SQL_NO_CACHE": "1", "DEID_SQL_PROGRESS": "1"}
        # cwd: not the repository, whose deid_sql/ (without the sql/ and udfs/ it ships) would shadow the installed one
        self.proc = subprocess.Popen([sys.executable, "-c", RUN_CLI, *map(str, args)], cwd=cwd, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.err = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for chunk in iter(lambda: self.proc.stderr.read(1), ""):  # type: ignore[union-attr]
            self.err += chunk

    def wait_for(self, text: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.err:
            assert self.proc.poll() is None, f"ended before {text!r}: {self.err}"
            assert time.monotonic() < deadline, f"no {text!r} in {timeout} s: {self.err}"
            time.sleep(0.05)

    def stopped_by(self, signum: int, timeout: float = 60) -> tuple[int, float, list[str]]:
        """Send ``signum``; the exit code, the seconds the run took to end, stderr's lines (progress erased)."""
        self.proc.send_signal(signum)
        sent = time.monotonic()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"still running {timeout} s after the signal: the query was not cancelled; {self.err}")
        took = time.monotonic() - sent
        self._reader.join(timeout=10)
        lines = [part.strip() for line in self.err.split("\n") for part in line.split("\r")]
        return self.proc.returncode, took, [line for line in lines if line and not line.startswith("reading the ")
                                            and not line.startswith(("judging", "writing"))]


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "said"), SIGNALS)
def test_a_signal_during_a_long_duckdb_query_stops_it_at_once(tmp_path: Path, signum: int, said: str) -> None:
    import duckdb

    con = duckdb.connect(str(tmp_path / "gen.duckdb"))
    con.execute(f"CREATE VIEW people AS {PEOPLE}")  # three billion rows, none stored
    con.close()
    spec = tmp_path / "gen.toml"
    spec.write_text(SPEC.format(backend="", source='path = "gen.duckdb"\ntable = "people"'), encoding="utf-8")
    run = Running(["evaluate", spec, "--policy", "top"], tmp_path, tmp_path / "cache")
    run.wait_for("reading the source")  # the cells' GROUP BY runs
    code, took, lines = run.stopped_by(signum)
    assert code == 128 + signum, run.err
    assert lines == [said], run.err  # one line: no internal error, no traceback
    assert took < 30, f"the query went on for {took:.0f} s after the signal"


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "said"), SIGNALS)
@pytest.mark.parametrize("suffix", [".parquet", ".duckdb"])
def test_a_signal_during_a_write_removes_what_it_staged(tmp_path: Path, signum: int, said: str, suffix: str) -> None:
    """Caught while the release's staged file grows (the write's own query runs): nothing is left,
    neither the target, nor its temporary, nor the record of the temporary."""
    spec = _big_project(tmp_path / "study", ACCEPTING)
    out = spec.parent / f"release{suffix}"
    cache = tmp_path / "cache"
    run = Running(["materialize", spec, "--policy", "age:cuts=30,60,90", "--out", out], spec.parent, cache)
    deadline = time.monotonic() + 300
    while not [p for p in _temporaries(spec.parent) if p.is_file() and p.stat().st_size > 1_000_000]:
        assert run.proc.poll() is None, run.err
        assert time.monotonic() < deadline, "the write never started"
        time.sleep(0.01)
    code, _, lines = run.stopped_by(signum)
    assert code == 128 + signum, run.err
    assert lines == [said], run.err
    assert not out.exists() and not (spec.parent / f"release{suffix}.release.json").exists()
    assert _temporaries(spec.parent) == [] and not (spec.parent / TMP_FOLDER).exists()
    records = cache / inflight.FOLDER
    assert not records.exists() or list(records.iterdir()) == []  # no temporary left in flight


@pytest.mark.engine
def test_sigterm_during_a_postgres_query_cancels_it_and_says_so(tmp_path: Path) -> None:
    from tests.engines import open_engine

    engine = open_engine("postgres", tmp_path)
    try:
        schema = engine.schema  # type: ignore[attr-defined]
        view = f"{schema}.people"
        engine.backend.con.execute(  # type: ignore[attr-defined]
            f'CREATE VIEW "{schema}"."people" AS SELECT i AS id, (i * 7919) % 121 AS age, '
            f"CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END AS sex FROM generate_series(1, {ROWS}::bigint) i")
        spec = tmp_path / "pg.toml"
        spec.write_text(SPEC.format(backend=engine.header() + "\n", source=f'table = "{view}"'), encoding="utf-8")
        run = Running(["evaluate", spec, "--policy", "top"], tmp_path, tmp_path / "cache")
        run.wait_for("reading the source")
        code, took, lines = run.stopped_by(signal.SIGTERM)
        assert code == 143 and lines == ["error: terminated by SIGTERM"], run.err
        assert took < 30
        deadline = time.monotonic() + 30
        while True:  # the server runs no query over the view any more (cancelled, not abandoned)
            active = engine.backend.con.execute(  # type: ignore[attr-defined]
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE %s AND pid <> "
                "pg_backend_pid()", (f"%{schema}%",)).fetchone()
            if active == (0,):
                break
            assert time.monotonic() < deadline, "the query still runs on the server"
            time.sleep(0.2)
    finally:
        engine.close()


@pytest.mark.engine
def test_sigterm_during_a_postgres_write_leaves_no_staging_table(tmp_path: Path) -> None:
    """PostgreSQL stages a release in a table of its own, in one transaction: a signal during the write
    cancels the query, the transaction rolls back, and no table is left beside the source."""
    from tests.engines import open_engine

    engine = open_engine("postgres", tmp_path)
    try:
        schema = engine.schema  # type: ignore[attr-defined]
        con = engine.backend.con  # type: ignore[attr-defined]
        con.execute(f'CREATE VIEW "{schema}"."people" AS SELECT i AS id, (i * 7919) % 121 AS age, '
                    f"CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END AS sex FROM generate_series(1, 3000000::bigint) i")
        spec = tmp_path / "pg.toml"
        spec.write_text(SPEC.format(backend=engine.header() + "\n", source=f'table = "{schema}.people"'),
                        encoding="utf-8")
        run = Running(["materialize", spec, "--policy", "age:cuts=30,60,90", "--table", f"{schema}.released"],
                      tmp_path, tmp_path / "cache")
        run.wait_for("writing table")
        code, _, lines = run.stopped_by(signal.SIGTERM)
        assert code == 143 and lines == ["error: terminated by SIGTERM"], run.err
        tables = con.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                             (schema,)).fetchall()
        assert tables == [("people",)]  # the view alone: no release, no staging table
    finally:
        engine.close()


# -- the error boundary, in process ------------------------------------------------------------------------

@pytest.fixture
def signalled():  # noqa: ANN201
    """Set the signal ``interrupts`` records (as its handlers and watcher do), forgotten afterwards."""
    def receive(signum: int) -> None:
        interrupts._note(signum)

    interrupts.reset()
    yield receive
    interrupts.reset()


@pytest.mark.parametrize(("signum", "said"), SIGNALS)
def test_whatever_a_signal_ends_in_is_its_exit_code_and_one_line(project, run, monkeypatch, signalled, signum: int,
                                                                  said: str) -> None:
    """The driver's own error for a cancelled query (DuckDB's "Query interrupted", a BackendError
    wrapping it) is the signal's exit, not an internal error."""
    from deid_sql.errors import BackendError
    from deid_sql.problem import Problem

    for error in (RuntimeError("Query interrupted"), BackendError("INTERRUPT Error: Interrupted!")):
        def cancelled(*args: object, error: Exception = error, **kwargs: object) -> None:
            signalled(signum)
            raise error

        monkeypatch.setattr(Problem, "evaluate", cancelled)
        assert run("evaluate", project.spec_path, "--policy", "top", expect=128 + signum).stderr == said + "\n"
        interrupts.reset()


def test_sigterm_raised_by_the_handler_says_so_in_one_line(project, run, monkeypatch) -> None:
    from deid_sql.problem import Problem

    def terminated(*args: object, **kwargs: object) -> None:
        raise interrupts.Terminated(signal.SIGTERM)

    monkeypatch.setattr(Problem, "evaluate", terminated)
    assert run("evaluate", project.spec_path, "--policy", "top", expect=143).stderr == \
        "error: terminated by SIGTERM\n"
    assert interrupts.words(signal.SIGHUP) == "terminated by SIGHUP"


def test_a_cancel_registered_is_called_by_the_watcher_and_forgotten(tmp_path: Path) -> None:
    """In a subprocess (the handlers are the process's): a signal calls every registered cancel
    from the watcher thread while the main thread is busy elsewhere (here: asleep in C)."""
    script = ("import os, signal, time, threading\nfrom deid_sql import interrupts\ninterrupts.install()\n"
              "called = threading.Event()\ninterrupts.on_signal(called.set)\n"
              "gone = interrupts.on_signal(lambda: print('forgotten one called'))\ninterrupts.forget(gone)\n"
              "threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()\n"
              "try:\n    time.sleep(30)\nexcept SystemExit as e:\n"
              "    print('exit', e.code, called.wait(10), interrupts.received())\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["exit", "143", "True", str(int(signal.SIGTERM))], done.stdout + done.stderr
