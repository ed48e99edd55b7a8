"""Every shell and Python example of README.md and docs/*.md runs as written (conventions in
``tests/docs_runner.py``).  Each page's examples run in order in a copy of one ``deid-sql demo`` folder;
examples that need an engine, the Adult data or dbt run in their own copy when that is there, are
skipped otherwise, and fail under ``CI=true`` (like the engine suite)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.docs_runner import (
    ADULT,
    REPO,
    RUN,
    SHARED,
    SHOWN,
    Block,
    bash_script,
    blocks,
    environment,
    extras,
    matches,
    pages,
    pip_lines,
    run_block,
)

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
pytestmark = pytest.mark.docs  # the pages' examples and their conventions (tests/markers.py)


def groups() -> list[object]:
    """(page, need) for every page with examples to run, one group per need; the groups that need
    PostgreSQL or Spark are marked engine too."""
    found: list[object] = []
    for page in pages():
        for need in dict.fromkeys(b.need for b in blocks(page) if b.lang in RUN):
            marks = pytest.mark.engine if need.startswith("engine=") else ()
            found.append(pytest.param(page, need, marks=marks, id=f"{page.name}-{need or 'plain'}"))
    return found


def missing(need: str) -> str | None:
    """Why the examples needing ``need`` cannot run here, or None."""
    if need == "engine=postgres":
        if importlib.util.find_spec("psycopg") is None:
            return "psycopg is not installed (pip install '.[postgres]')"
        if not os.environ.get("DEID_TEST_POSTGRES_DSN"):
            return "no PostgreSQL: export DEID_TEST_POSTGRES_DSN (eval \"$(bash .ci/postgres.sh start DIR)\")"
    if need == "engine=spark" and importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install '.[spark]')"
    if need == "adult" and not (ADULT / "adult.csv").exists():
        return f"the Adult data is not in {ADULT}"
    if need == "dbt" and (importlib.util.find_spec("dbt") is None or shutil.which("dbt", path=str(
            Path(sys.executable).parent)) is None):
        return "dbt is not installed (pip install '.[dbt]')"
    return None


@pytest.fixture(scope="session")
def demo_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``deid-sql demo`` run (small frontier budget) that every page's folder is copied from."""
    root = tmp_path_factory.mktemp("docs-demo")
    done = subprocess.run(["deid-sql", "demo", "--dir", "demo", "--budget", "200"], cwd=root, capture_output=True,
                          text=True, env=environment(root), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "demo"


@pytest.mark.parametrize("page, need", groups())
def test_examples_run(page: Path, need: str, demo_folder: Path, tmp_path: Path) -> None:
    reason = missing(need)
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{page.name} examples ({need}) cannot run under CI: {reason}")
        pytest.skip(reason)
    work = tmp_path / "work"
    shutil.copytree(demo_folder, work / "demo")
    if SHARED.exists():
        (tmp_path / "shared").symlink_to(SHARED, target_is_directory=True)
    state = tmp_path / "state"
    state.mkdir()
    ran = 0
    for block in blocks(page):
        if block.lang in RUN and block.need == need:
            run_block(block, work, state)
            ran += 1
    assert ran > 0


def test_install_lines_name_existing_extras() -> None:
    declared = set(PROJECT["project"]["optional-dependencies"])
    named = {e: b.where() for page in pages() for b in blocks(page) for line in pip_lines(b) for e in extras(line)}
    assert {"test", "postgres", "spark", "dbt"} <= set(named)
    assert {e: w for e, w in named.items() if e not in declared} == {}
    # deid-sql is installed from a clone: the engines page names the extras on "."
    engine_lines = [line.strip() for b in blocks(REPO / "docs" / "engines.md") for line in pip_lines(b)]
    assert {"'.[postgres]'", "'.[spark]'", "'.[dbt]'"} <= {line.split("#")[0].strip() for line in engine_lines}


def test_the_readme_keeps_the_test_command_ci_runs() -> None:
    command = "pip install '.[test,postgres,spark,dbt]' && ruff check . && pytest"
    assert command in [line.strip() for b in blocks(REPO / "README.md") for line in b.text.splitlines()]
    assert command in (REPO / ".ci" / "run").read_text(encoding="utf-8")


def test_blocks_are_run_or_shown_and_toml_parses() -> None:
    for page in pages():
        for block in blocks(page):
            assert block.lang in RUN + SHOWN, f"{block.where()}: unknown block language {block.lang!r}"
            assert not block.attrs or block.lang in RUN, f"{block.where()}: attributes on a block that is not run"
            assert all(a in ("engine=postgres", "engine=spark", "adult", "dbt") for a in block.attrs), block.where()
            if block.lang == "toml":
                tomllib.loads(block.text)  # raises with the line


def test_examples_use_no_files_that_exist_nowhere() -> None:
    """The names a new user stumbled on: nothing creates them."""
    for page in pages():
        for block in blocks(page):
            for name in ("study.toml", "clinic.csv", "clinic.toml", "warehouse.duckdb --table", "batch-2025-06"):
                assert name not in block.text, f"{block.where()}: {name}"


def test_demo_adult_writes_the_adult_specs_or_nothing(run, tmp_path: Path) -> None:
    """``deid-sql demo --adult FOLDER``: one line naming the missing files, nothing written; with the data,
    both specs validate and read the Adult files in place (never copied)."""
    result = run("demo", "--adult", tmp_path / "nowhere", "--dir", tmp_path / "adult", expect=2)
    assert result.stderr.count("\n") == 1 and "adult.csv" in result.stderr and "ARX" in result.stderr
    assert not (tmp_path / "adult").exists()
    reason = missing("adult")
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    run("demo", "--adult", ADULT, "--dir", tmp_path / "adult")
    written = sorted(p.name for p in (tmp_path / "adult").iterdir())
    assert written == ["adult-hierarchies.toml", "adult.parquet", "adult.toml", "population.parquet"]
    assert str(ADULT.resolve() / "adult.csv") in (tmp_path / "adult" / "adult-hierarchies.toml").read_text()
    for spec in ("adult.toml", "adult-hierarchies.toml"):
        assert "released" in run("validate", tmp_path / "adult" / spec).stdout


def test_help_texts_cite_no_paper_sections() -> None:
    """Section, equation, figure and table numbers of the papers belong in docs/, not in --help."""
    import re

    import click

    from deid_sql.cli import cli

    def texts(command: click.Command, name: str) -> list[tuple[str, str]]:
        found = [(name, command.help or "")] + [(f"{name} {p.name}", getattr(p, "help", None) or "")
                                                 for p in command.params]
        for sub_name, sub in getattr(command, "commands", {}).items():
            found += texts(sub, f"{name} {sub_name}")
        return found

    cited = re.compile(r"§|seed 00\d|\beq\. ?\d|\bFig\. ?\d|\bTable \d|\bDef\. ?\d|\bAlg\. ?\d")
    assert [(where, text) for where, text in texts(cli, "deid-sql") if cited.search(text)] == []


def help_examples() -> list[tuple[str, str]]:
    """(command, example line) of every command's ``--help``, in the order ``deid-sql --help`` lists
    them (``policy save`` comes before ``apply`` and ``check``, which read its policy file)."""
    import click

    from deid_sql.cli import cli
    from deid_sql.cli.main import COMMANDS

    def walk(command: click.Command, name: str) -> list[tuple[str, str]]:
        found = [(name, line.strip()[len("Example: "):]) for line in (command.help or "").splitlines()
                 if line.strip().startswith("Example: ")]
        for sub_name, sub in getattr(command, "commands", {}).items():
            found += walk(sub, f"{name} {sub_name}")
        return found

    assert set(COMMANDS.names()) == set(cli.commands)
    return [found for name in COMMANDS.names() for found in walk(cli.commands[name], f"deid-sql {name}")]


def test_every_command_has_an_example_and_every_help_example_runs(demo_folder: Path, tmp_path: Path) -> None:
    """The ``Example:`` of each ``--help`` runs as written in a folder holding the demo (and the
    channels fixture its example names), so a user can copy it."""
    examples = help_examples()
    leaves = {name for name, _ in examples}
    from deid_sql.cli import cli

    commands = {f"deid-sql {n}" for n, c in cli.commands.items() if not hasattr(c, "commands")}
    commands |= {f"deid-sql {n} {s}" for n, c in cli.commands.items() for s in getattr(c, "commands", {})}
    assert commands <= leaves, f"commands without an example: {sorted(commands - leaves)}"
    work = tmp_path / "work"
    shutil.copytree(demo_folder, work / "demo")
    state = tmp_path / "state"
    state.mkdir()
    prepare = ("from pathlib import Path\nfrom deid_sql.fixtures.channels import write_table1\n"
               "write_table1(Path('table1'))\n")
    run_block(Block(REPO / "deid_sql" / "cli", 1, "python", (), prepare), work, state)
    script = "".join(f"{line}\n" for _, line in examples)
    run_block(Block(REPO / "deid_sql" / "cli", 1, "bash", (), script), work, state)


# -- the runner itself can fail ------------------------------------------------------------------

def runner_block(text: str, lang: str = "bash") -> Block:
    return Block(REPO / "README.md", 1, lang, (), text)


def test_a_documented_exit_code_is_checked(tmp_path: Path) -> None:
    run_block(runner_block("sh -c 'echo \"error: no\" >&2; exit 2'\n# exit 2: error: no…\n"), tmp_path, tmp_path)
    with pytest.raises(AssertionError, match="expected exit 2, got 0"):
        run_block(runner_block("true\n# exit 2\n"), tmp_path, tmp_path)
    with pytest.raises(AssertionError, match="stderr lacks"):
        run_block(runner_block("sh -c 'echo other >&2; exit 2'\n# exit 2: error: no\n"), tmp_path, tmp_path)
    with pytest.raises(AssertionError, match="exit 1"):
        run_block(runner_block("false\necho never\n"), tmp_path, tmp_path)
    with pytest.raises(AssertionError, match="exit 1"):
        run_block(runner_block("raise SystemExit(1)\n", "python"), tmp_path, tmp_path)


def test_pip_lines_are_not_run_and_output_lines_are_checked(tmp_path: Path) -> None:
    assert ": skipped" in bash_script("pip install '.[nope]' && exit 1\n")
    run_block(runner_block("pip install '.[nope]' && exit 1\n"), tmp_path, tmp_path)
    assert extras("pip install '.[test,postgres]' 'deid-sql[dbt]'") == ["test", "postgres", "dbt"]
    block = runner_block("echo '  released   6 columns: a, b'\n")
    block.expected = ["  released   6 columns: …"]
    run_block(block, tmp_path, tmp_path)
    block.expected = ["  released   7 columns: …"]
    with pytest.raises(AssertionError, match="lacks the documented line"):
        run_block(block, tmp_path, tmp_path)
    assert matches("k 1 (limit …)", "k 1 (limit min_k = 5)") and not matches("k 1", "k 10")


def test_the_demo_folder_is_ignored_by_git() -> None:
    """``deid-sql demo`` run in a clone writes ./deid-sql-demo: it must not show up as a change."""
    ignored = (REPO / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "deid-sql-demo/" in ignored
