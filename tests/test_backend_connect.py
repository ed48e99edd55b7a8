"""Engines are optional extras: naming one whose package is missing says which extra to install,
in one line, before anything is read or written."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from deid_sql.backends import connect
from deid_sql.errors import BackendError
from tests.conftest import DEFAULT_QIS


@pytest.fixture
def without(monkeypatch: pytest.MonkeyPatch):
    """Pretend the named top-level packages are not installed."""
    real = importlib.util.find_spec

    def hide(*names: str) -> None:
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in names else real(name, *a))

    return hide


@pytest.mark.parametrize(("engine", "package", "extra"), [("postgres", "psycopg", "postgres"),
                                                           ("spark", "pyspark", "spark")])
def test_missing_extra_names_it(without, engine: str, package: str, extra: str) -> None:
    without(package)
    with pytest.raises(BackendError, match=rf"engine '{engine}' needs the {package} package: "
                                          rf"pip install 'deid-sql\[{extra}\]' \(from a clone of the "
                                          rf"repository: pip install '\.\[{extra}\]'\)$"):
        connect(engine, dsn="postgresql://x@127.0.0.1:1/db") if engine == "postgres" else connect(engine)


def test_missing_extra_from_the_cli(without, run, tmp_path: Path) -> None:
    without("psycopg")
    spec = tmp_path / "pg.toml"
    spec.write_text('population = "sample"\n[backend]\nengine = "postgres"\ndsn = "postgresql://x@127.0.0.1:1/db"\n'
                    '[source]\ntable = "t"\n' + "".join(DEFAULT_QIS), encoding="utf-8")
    result = run("validate", spec, expect=2)
    assert result.stderr == ("error: engine 'postgres' needs the psycopg package: pip install 'deid-sql[postgres]' "
                             "(from a clone of the repository: pip install '.[postgres]')\n")


def test_unknown_engine_is_a_spec_error(run, tmp_path: Path) -> None:
    spec = tmp_path / "x.toml"
    spec.write_text('[backend]\nengine = "oracle"\n[source]\npath = "x.csv"\n' + "".join(DEFAULT_QIS),
                    encoding="utf-8")
    result = run("validate", spec, expect=2)
    assert "[backend]: engine = 'oracle' is not one of duckdb, postgres, spark" in result.stderr


def test_unknown_engine_from_the_library() -> None:
    with pytest.raises(BackendError, match="unknown engine 'oracle'; the engines are: duckdb, postgres, spark"):
        connect("oracle")
