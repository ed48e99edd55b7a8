"""The cells cache from the command line: a second command reuses the first one's cells, a
changed file or spec is noticed, --no-cache reads the data again, a damaged entry is never used,
and a library call caches only when asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deid_sql.loading.cache import CellsCache
from deid_sql.problem import Problem
from deid_sql.release.plan import plan_of
from deid_sql.storage.userdirs import cache_dir


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "user-cache"
    monkeypatch.setenv("DEID_SQL_CACHE_DIR", str(folder))
    return folder


def _evaluate(run, spec: Path, *extra: str) -> dict:
    return json.loads(run("evaluate", spec, "--policy", "age:cuts=18,65|zip:top", "--json", *extra).stdout)


def test_the_second_command_reuses_the_cells(project, run, scans, own_cache: Path) -> None:
    first = _evaluate(run, project.spec_path)
    assert scans == ["source", "population"]
    assert _evaluate(run, project.spec_path) == first
    assert scans == ["source", "population"]
    entry = next(own_cache.rglob("meta.json"))
    # cells are counts of the data's QI combinations: every folder and file is the owner's alone
    folder = entry
    while folder != own_cache.parent:
        assert folder.stat().st_mode & 0o077 == 0, folder
        folder = folder.parent
    _evaluate(run, project.spec_path, "--no-cache")
    assert scans == ["source", "population"] * 2


def test_a_changed_source_or_spec_is_noticed(project, run, scans, own_cache: Path) -> None:
    first = _evaluate(run, project.spec_path)
    lines = (project.dir / "source.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    (project.dir / "source.csv").write_text("".join(lines[:-50]), encoding="utf-8")
    second = _evaluate(run, project.spec_path)
    assert second["records"] == first["records"] - 50
    assert scans == ["source", "population"] * 2
    # the spec's QIs decide the cells: another declaration is another entry
    project.write_spec(project.spec_path.read_text(encoding="utf-8").replace("max = 120", "max = 130"))
    _evaluate(run, project.spec_path)
    assert scans == ["source", "population"] * 3


def test_a_damaged_entry_is_never_used(project, run, scans, own_cache: Path) -> None:
    first = _evaluate(run, project.spec_path)
    arrays = next(own_cache.rglob("cells.npz"))
    arrays.write_bytes(arrays.read_bytes()[:-20] + b"\0" * 20)
    assert _evaluate(run, project.spec_path) == first
    assert scans == ["source", "population"] * 2


def test_validate_always_reads_the_data(project, run, scans, own_cache: Path) -> None:
    _evaluate(run, project.spec_path)
    run("validate", project.spec_path)
    assert scans == ["source", "population"] * 2


def test_a_library_load_caches_only_when_asked(project, scans, own_cache: Path, tmp_path: Path) -> None:
    with Problem.from_spec(project.spec_path):
        pass
    assert not own_cache.exists()
    with Problem.from_spec(project.spec_path, cache=True):
        pass
    with Problem.from_spec(project.spec_path, cache=True) as again:
        assert again.sample.total > 0
    assert scans == ["source", "population"] * 2  # the uncached load, then the one that stored its cells
    assert cache_dir() == own_cache and any(own_cache.rglob("meta.json"))
    other = CellsCache(tmp_path / "elsewhere")
    with Problem.from_spec(project.spec_path, cache=other):
        pass
    assert any((tmp_path / "elsewhere").rglob("meta.json"))


@pytest.mark.slow
def test_a_load_of_files_from_the_cache_connects_no_engine_until_a_query_runs(
        project, run, own_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark starts a JVM to connect: a command that only evaluates needs none when its cells are
    cached; a release after such a load connects, makes the session views, and writes as always."""
    import deid_sql.backends.lazy as lazy

    connects: list[str] = []
    original = lazy.connect

    def counting(engine: str, **options: object):  # type: ignore[no-untyped-def]
        connects.append(engine)
        return original(engine, **options)

    monkeypatch.setattr(lazy, "connect", counting)
    first = _evaluate(run, project.spec_path)
    assert connects == ["duckdb"]
    assert _evaluate(run, project.spec_path) == first
    assert connects == ["duckdb"], "the cached load connected the engine"
    # a release from a problem loaded from the cache: the engine connects, the views are made
    from deid_sql.release.output import materialize

    out = tmp_path / "release.parquet"
    with Problem.from_spec(project.spec_path, cache=True) as problem:
        assert connects == ["duckdb"]
        written = materialize(problem, plan_of(problem, "age:cuts=18,65|zip:top"), out)
        assert connects == ["duckdb", "duckdb"]
    assert written.rows == first["records"] and written.figures is not None


def test_a_frontier_folder_is_checked_before_the_data_is_read(project, run, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "frontier.csv").write_text("earlier run\n", encoding="utf-8")

    def no_load(*args: object, **kwargs: object) -> None:
        raise AssertionError("the data was read before the folder was checked")

    monkeypatch.setattr(Problem, "_load", no_load)
    result = run("frontier", project.spec_path, "--budget", "10", "--out", folder, expect=2)
    assert "already holds a frontier run" in result.stderr
    result = run("frontier", project.spec_path, "--budget", "10", "--out", tmp_path / "empty", "--resume", expect=2)
    assert "to resume" in result.stderr
