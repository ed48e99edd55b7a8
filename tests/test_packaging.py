"""Installing deid-sql adds only the deid_sql package (sql/, udfs/, fixtures/ live inside it)."""

from __future__ import annotations

import importlib
import importlib.metadata as md
import subprocess
import sys

import pytest


def test_shipped_folders_import_under_deid_sql():
    for name in ("deid_sql.sql", "deid_sql.udfs", "deid_sql.fixtures"):
        assert importlib.import_module(name).__name__ == name
    from sqlglot import exp

    from deid_sql.sql import template

    risk = {"risk_term": exp.column("m"), "record_risk": exp.column("g")}
    tree = template("metrics", groups=exp.to_table("g"), widths=exp.to_table("w"), **risk)
    assert not list(tree.find_all(exp.Placeholder))
    with pytest.raises(KeyError, match="widths"):
        template("metrics", groups=exp.to_table("g"), **risk)


def test_no_generic_top_level_modules():
    dist = md.distribution("deid-sql")
    top = (dist.read_text("top_level.txt") or "deid_sql").split()
    roots = {str(f).split("/")[0] for f in (dist.files or []) if str(f).endswith(".py")}
    assert set(top) == {"deid_sql"}
    assert all(r.startswith(("deid_sql", "__editable__")) for r in roots), roots


def test_import_has_no_side_effects(tmp_path):
    """Importing the package writes nothing, prints nothing and opens no database."""
    code = "import deid_sql, deid_sql.cli, sys; print(sorted(m for m in sys.modules if m == 'duckdb'))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert run.stdout.strip() == "[]" and run.stderr == ""
    assert list(tmp_path.iterdir()) == []


def test_every_subpackage_is_listed_for_the_wheel():
    """An unlisted subpackage works in an editable install but is missing from the wheel."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(root).parts) for p in (root / "deid_sql").rglob("__init__.py")}
    assert on_disk <= listed, f"add to [tool.setuptools] packages: {sorted(on_disk - listed)}"
