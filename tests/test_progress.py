"""Progress lines: drawn on a terminal after a delay, erased at the end, silent elsewhere."""

from __future__ import annotations

import io
import threading
import time

import pytest

from deid_sql import progress

from .test_fulldomain import small_spec


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _no_forcing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEID_SQL_PROGRESS", raising=False)


def test_a_terminal_sees_the_fraction_and_the_line_is_erased_at_the_end() -> None:
    out = Terminal()
    seen = threading.Event()
    state = {"f": 0.25}

    def fraction() -> float:
        seen.set()
        return state["f"]

    with progress.watching("writing release.parquet", fraction, stream=out, delay=0, interval=0.01):
        assert seen.wait(5)
        time.sleep(0.05)
        state["f"] = 0.5
        time.sleep(0.05)
    text = out.getvalue()
    assert "writing release.parquet [######" in text and " 25%" in text and " 50%" in text
    assert text.endswith("\r")  # erased: the last write blanks the line and returns the cursor
    last = text.rsplit("\r", 2)[-2]
    assert last.strip() == ""


def test_a_pipe_sees_nothing() -> None:
    out = io.StringIO()
    with progress.watching("loading", lambda: 0.5, stream=out, delay=0, interval=0.01):
        time.sleep(0.05)
    with progress.counting("searching", 10, stream=out, delay=0, interval=0.01) as c:
        c.advance(5)
        time.sleep(0.05)
    assert out.getvalue() == ""


def test_a_short_job_draws_nothing_even_on_a_terminal() -> None:
    out = Terminal()
    with progress.watching("loading", lambda: 0.5, stream=out, delay=10, interval=0.01):
        pass
    assert out.getvalue() == ""


def test_the_environment_forces_lines_on_or_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEID_SQL_PROGRESS", "1")
    assert progress.enabled(io.StringIO())
    monkeypatch.setenv("DEID_SQL_PROGRESS", "0")
    assert not progress.enabled(Terminal())


def test_an_unknown_fraction_or_a_failing_probe_shows_the_elapsed_time() -> None:
    out = Terminal()

    def broken() -> float:
        raise RuntimeError("engine went away")

    with progress.watching("loading", broken, stream=out, delay=0, interval=0.01):
        time.sleep(0.05)
    assert "loading …" in out.getvalue() and " s" in out.getvalue()


def test_counting_draws_done_over_total() -> None:
    out = Terminal()
    with progress.counting("searching", total=4, stream=out, delay=0, interval=0.01) as c:
        for _ in range(3):
            c.advance()
        time.sleep(0.05)
    assert " 75%" in out.getvalue()


def test_line_clamps_and_fills() -> None:
    assert progress.line("x", 2.0, 1.0).startswith("x [" + "#" * progress.WIDTH + "] 100%")
    assert progress.line("x", -1.0, 0.0).startswith("x [" + "." * progress.WIDTH + "]   0%")


def test_a_count_without_total_shows_the_count() -> None:
    out = Terminal()
    with progress.counting("searching", stream=out, delay=0, interval=0.01, unit="checked") as c:
        c.advance(1238)
        time.sleep(0.05)
    assert "searching … 1,238 checked" in out.getvalue()


@pytest.fixture
def instant(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines drawn at once and often, and forced on (the CLI runner's stderr is no terminal)."""
    monkeypatch.setattr(progress, "DELAY", 0.0)
    monkeypatch.setattr(progress, "INTERVAL", 0.001)
    monkeypatch.setenv("DEID_SQL_PROGRESS", "1")


def test_materialize_draws_its_write_on_stderr_only(project, run, instant) -> None:  # noqa: ANN001
    result = run("materialize", project.spec(), "--policy", "age:top", "--out", "release.parquet",
                 "--accept-risk", "test: a progress line")
    assert "writing release.parquet" in result.stderr
    assert "writing release.parquet" not in result.stdout and "wrote" in result.stdout


@pytest.mark.slow
def test_loads_and_searches_draw_their_lines(project, run, instant, tmp_path) -> None:  # noqa: ANN001
    spec = project.spec()
    assert "reading the source" in run("evaluate", spec, "--policy", "age:top").stderr
    assert "bps: 5 iterations" in run("alternatives", spec, "--max-risk", "0.5", "--iterations", "5").stderr
    anonymizing = run("anonymize", small_spec(tmp_path), "--min-k", 3).stderr
    assert "searching" in anonymizing and "checked" in anonymizing


@pytest.mark.slow
def test_without_a_terminal_the_cli_draws_nothing(project, run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "DELAY", 0.0)
    result = run("materialize", project.spec(), "--policy", "age:top", "--out", "release.parquet",
                 "--accept-risk", "test: no progress line")
    assert "writing" not in result.stderr and "\r" not in result.stderr
