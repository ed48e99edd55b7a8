"""Installing deid-sql adds only the deid_sql package (sql/, udfs/, fixtures/ live inside it)."""

from __future__ import annotations

import importlib
import importlib.metadata as md
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

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


ROOT = Path(__file__).resolve().parents[1]
GENERIC = ("fixtures", "sql", "tests", "udfs", "bench")  # the repository's other top-level folders


def installed_distribution() -> md.Distribution:
    """The installed deid-sql, not the ``deid_sql.egg-info`` a build leaves in the repository: with
    the repository on sys.path (``python -m pytest`` from it) importlib.metadata finds that one
    first, and its SOURCES.txt lists every file of the sdist (fixtures/, sql/, tests/, udfs/ …)."""
    found = [d for d in md.distributions(name="deid-sql") if Path(d.locate_file("")).resolve() != ROOT]
    assert found, "deid-sql is not installed (pip install -e '.[test]')"
    return found[0]


def test_no_generic_top_level_modules():
    dist = installed_distribution()
    top = (dist.read_text("top_level.txt") or "deid_sql").split()
    roots = {str(f).split("/")[0] for f in (dist.files or []) if str(f).endswith(".py")}
    assert set(top) == {"deid_sql"}
    assert all(r.startswith(("deid_sql", "__editable__")) for r in roots), roots


@pytest.mark.slow
def test_editable_install_adds_only_deid_sql(tmp_path):
    """``pip install -e`` in a fresh virtual environment: from outside the repository only
    ``deid_sql`` imports (its sql/udfs/fixtures mapped inside it), as with the wheel.  Dependencies
    are left out (--no-deps); the isolated build needs setuptools from the package index."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "-e", str(ROOT)],
                             capture_output=True, text=True, cwd=tmp_path)
    if install.returncode != 0:
        tail = install.stderr.strip().splitlines()[-1:] or ["(no output)"]
        if os.environ.get("CI"):
            pytest.fail(f"pip install -e failed under CI: {tail[0]}")
        pytest.skip(f"pip install -e failed (no package index?): {tail[0]}")
    code = textwrap.dedent(f"""
        import importlib.metadata as md, importlib.util as u, json, pathlib, sys
        dist = md.distribution("deid-sql")
        mapping = {{}}  # what setuptools' editable finder maps: package name -> folder
        for folder in (p for p in sys.path if p.endswith("site-packages")):
            for finder in pathlib.Path(folder).glob("__editable___*_finder.py"):
                scope = {{}}
                exec(compile(finder.read_text(), str(finder), "exec"), scope)
                mapping.update(scope.get("MAPPING", {{}}))
        files = {{str(f).split("/")[0] for f in dist.files or [] if str(f).endswith(".py")}}
        print(json.dumps({{"importable": [n for n in {list(GENERIC)!r} if u.find_spec(n) is not None],
                          "deid_sql": u.find_spec("deid_sql") is not None,
                          "top": (dist.read_text("top_level.txt") or "").split(),
                          "files": sorted(files), "mapping": sorted(mapping)}}))
    """)
    seen = json.loads(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True,
                                     cwd=tmp_path).stdout)
    assert seen["deid_sql"] and seen["importable"] == [], seen
    assert seen["top"] == ["deid_sql"], seen
    assert all(f.startswith(("deid_sql", "__editable__")) for f in seen["files"]), seen
    assert seen["mapping"] and all(m == "deid_sql" or m.startswith("deid_sql.") for m in seen["mapping"]), seen


def test_import_has_no_side_effects(tmp_path):
    """Importing the package writes nothing, prints nothing and opens no database."""
    code = "import deid_sql, deid_sql.cli, sys; print(sorted(m for m in sys.modules if m == 'duckdb'))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert run.stdout.strip() == "[]" and run.stderr == ""
    assert list(tmp_path.iterdir()) == []


def test_every_subpackage_is_listed_for_the_wheel():
    """An unlisted subpackage works in an editable install but is missing from the wheel."""
    import tomllib

    root = ROOT
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(root).parts) for p in (root / "deid_sql").rglob("__init__.py")}
    assert on_disk <= listed, f"add to [tool.setuptools] packages: {sorted(on_disk - listed)}"


def test_dbt_extra_installs_the_adapters_docs_dbt_runs():
    """docs/dbt.md runs dbt on DuckDB and on PostgreSQL: the ``dbt`` extra brings both adapters,
    each in the range of dbt-core it names (dbt-core stays below 1.12, whose parser cannot be built
    from the package registries), and the page's install line says so (issue 27, case 10)."""
    import tomllib

    from packaging.requirements import Requirement

    extra = {Requirement(r).name: Requirement(r) for r in
             tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dbt"]}
    assert {"dbt-core", "dbt-duckdb", "dbt-postgres"} <= set(extra)
    assert not extra["dbt-core"].specifier.contains("1.12.0")
    for version in ("1.9.0", "1.11.0"):
        assert extra["dbt-core"].specifier.contains(version) and extra["dbt-postgres"].specifier.contains(version)
    assert not extra["dbt-postgres"].specifier.contains("1.12.0")
    install = next(line for line in (ROOT / "docs" / "dbt.md").read_text().splitlines() if "pip install" in line)
    assert "dbt-postgres" in install
