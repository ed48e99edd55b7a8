"""The command line starts at once: ``deid-sql --help`` and ``import deid_sql`` load no library module.

Commands are imported when they run (``cli.main.COMMANDS``), so the root help lists them from
summaries kept beside the names; these tests hold those summaries to each command's own help and
check, in a fresh interpreter, what the start-up imports.  (The times are measured in
``bench/startup.py``, not here.)
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from deid_sql.cli import cli
from deid_sql.cli.main import COMMANDS

HEAVY = ("numpy", "pyarrow", "duckdb", "sqlglot", "scipy", "jinja2", "matplotlib", "deid_sql.problem")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True, cwd="/")
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_every_summary_is_the_commands_own() -> None:
    for name in COMMANDS.names():
        command = cli.commands[name]
        assert COMMANDS.entry(name)["summary"] == command.get_short_help_str(10_000), name


def test_root_help_and_import_load_nothing_heavy() -> None:
    for code in ("import deid_sql", "from deid_sql.cli.main import cli\ntry:\n    cli(['--help'])\n"
                                     "except SystemExit:\n    pass"):
        loaded = _modules_after(code)
        heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY or m in HEAVY)
        assert not heavy, (code, heavy)


@pytest.mark.slow
def test_root_help_lists_every_command_and_a_command_loads_when_it_runs() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS.names():
        assert f"\n  {name} " in result.output
    loaded = _modules_after("from deid_sql.cli.main import cli\ntry:\n    cli(['evaluate', '--help'])\n"
                            "except SystemExit:\n    pass")
    assert "deid_sql.cli.inspect" in loaded and "deid_sql.cli.adversary" not in loaded
    result = CliRunner().invoke(cli, ["no-such-command"])
    assert result.exit_code == 2 and "No such command" in result.output


def test_the_package_names_are_there_on_first_use() -> None:
    import deid_sql

    for name in deid_sql.__all__:
        assert getattr(deid_sql, name) is not None
    assert deid_sql.Problem.__module__ == "deid_sql.problem"
