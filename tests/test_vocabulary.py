"""One vocabulary on the command line (issue 31): an option name means one thing on every command,
old spellings still work with one deprecation line, --help and messages stand alone (no docs
paths; topic pages ship with the package), evaluate --suppress-below gives the gate's figures,
readable policy forms show their groups, timings measure what they name, validate aligns."""

from __future__ import annotations

import ast
import json
import re
import tomllib
from collections import defaultdict
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from deid_sql.cli import cli
from deid_sql.cli.help import topics
from deid_sql.cli.options import FiniteFloat, RenamedOption, deprecation, renamed
from deid_sql.cli.vocabulary import MEANINGS

from .test_fulldomain import RELEASE, small_spec

ROOT = Path(__file__).resolve().parents[1]
DOCS_PATH = re.compile(r"docs/|\.\./shared|METHODS\.md|\b[\w-]+\.md\b")


# -- the checker ---------------------------------------------------------------------------------
def commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    """Every command of the tree with its path (``("policy", "save")``)."""
    ctx = click.Context(group)
    out = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            out += commands(command, (*prefix, name))
        else:
            out.append(((*prefix, name), command))
    return out


def kind(param: click.Parameter) -> str:
    """The kind of value an option takes, as ``vocabulary.MEANINGS`` names it."""
    if isinstance(param, click.Option) and param.is_flag:
        return "flag"
    t = param.type
    if isinstance(t, click.Choice):
        return "choice"
    if isinstance(t, click.types.IntParamType):
        return "int"
    if isinstance(t, FiniteFloat | click.types.FloatParamType):
        return "number"
    if isinstance(t, click.Path):
        return "path"
    return "text"


def vocabulary_problems(group: click.Group, meanings: dict[str, tuple[str, str]]) -> list[str]:
    """Every way the tree breaks "one name, one meaning": a name on two commands that the table does
    not declare, a name whose kind of value differs from the table's, a row no command uses."""
    uses: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for path, command in commands(group):
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                for name in (*param.opts, *param.secondary_opts):
                    uses[name].append((" ".join(path), kind(param)))
    for param in group.params:  # --version
        if isinstance(param, click.Option):
            for name in param.opts:
                uses[name].append(("deid-sql", kind(param)))
    problems = []
    for name, used in sorted(uses.items()):
        shared = len({c for c, _ in used}) > 1
        if name not in meanings:
            if shared:
                problems.append(f"{name} is used by {', '.join(c for c, _ in used)} but has no meaning declared")
            continue
        expected = meanings[name][0]
        problems += [f"{name} takes a {k} on {c}; the vocabulary says {expected}" for c, k in used
                     if k != expected and not (name in ("--help", "-h") and k == "flag")]
    problems += [f"{name} is declared but no command has it" for name in meanings
                 if name not in uses and name not in ("--help", "-h")]
    return problems


def test_one_option_name_means_one_thing_on_every_command() -> None:
    assert vocabulary_problems(cli, MEANINGS) == []


def test_the_checker_finds_a_clash() -> None:
    """The check above can fail: a limit and a model under one name, and a shared undeclared name."""

    @click.group()
    def root() -> None: ...

    @root.command()
    @click.option("--risk", type=FiniteFloat(0.0))
    @click.option("--shared")
    def a(risk: float, shared: str) -> None: ...

    @root.command()
    @click.option("--risk", type=click.Choice(["population", "pitman"]))
    @click.option("--shared")
    def b(risk: str, shared: str) -> None: ...

    problems = vocabulary_problems(root, {"--risk": ("number", "a limit"), "--gone": ("flag", "")})
    assert "--risk takes a choice on b; the vocabulary says number" in problems
    assert "--shared is used by a, b but has no meaning declared" in problems
    assert "--gone is declared but no command has it" in problems


# -- old spellings -------------------------------------------------------------------------------
def renamed_options() -> list[tuple[tuple[str, ...], click.Command, RenamedOption]]:
    return [(path, command, p) for path, command in commands(cli) for p in command.params
            if isinstance(p, RenamedOption)]


EXPECTED_RENAMES = {
    ("anonymize", "--k"): "--min-k", ("anonymize", "--l"): "--min-l", ("anonymize", "--risk"): "--max-mean-record-risk",
    ("anonymize", "--suppression"): "--max-suppressed-share", ("evaluate", "--risk"): "--risk-model",
    ("alternatives", "--risk"): "--risk-model", ("frontier", "--risk"): "--risk-model",
    ("alternatives", "--threshold"): "--max-risk", ("alternatives", "-t"): "--max-risk",
    ("policy save", "--threshold"): "--drift-limit", ("dbt", "--k"): "--min-k",
    ("compile", "--table"): "--source-table", ("check", "--table"): "--source-table",
    ("channels", "--report"): "--figures",
    # issue 42 (RETIRED below): apply's --table names its output now, so its old alias of --source-table is gone
    ("apply", "--out-table"): "--table", ("view", "--name"): "--view", ("view", "--replace"): "--overwrite",
    ("safe-harbor", "--replace"): "--overwrite", ("safe-harbor", "--materialize"): "--out",
    ("init", "--force"): "--overwrite", ("init", "--table"): "--source-table", ("evaluate", "--format"): "--json",
}


def test_every_old_spelling_is_hidden_and_names_an_option_of_its_command() -> None:
    found = {}
    for path, command, old in renamed_options():
        where = " ".join(path)
        found[(where, old.opts[0])] = old.new
        new = [p for p in command.params if old.new in getattr(p, "opts", ()) and not getattr(p, "hidden", False)]
        assert len(new) == 1 and new[0].name == old.dest, (where, old.opts, old.new)
        assert kind(old) == kind(new[0]) or (old.values and kind(new[0]) == "flag"), (where, old.opts)
        with click.Context(command, info_name=path[-1]) as ctx:
            shown = command.get_help(ctx)
        assert not re.search(rf"(?<![\w-]){re.escape(old.opts[0])}(?![\w-])", shown.split("Options:")[1]), \
            (where, old.opts[0])
    assert found == EXPECTED_RENAMES


def _value(param: click.Parameter) -> list[str]:
    if isinstance(param, click.Option) and param.is_flag:
        return []
    k = kind(param)
    if k == "choice":
        return [list(param.type.choices)[0]]  # type: ignore[attr-defined]
    return {"int": ["2"], "number": ["0.5"]}.get(k, ["x.csv"])


def _base_args(path: tuple[str, ...], command: click.Command, tmp_path: Path) -> list[str]:
    """The command with its arguments (a file that does not exist) and required options."""
    args = [*path]
    for param in command.params:
        if isinstance(param, click.Argument):
            args.append(str(tmp_path / "x.toml"))
        elif param.required:
            args += [param.opts[0], *_value(param)]
    return args


@pytest.mark.parametrize("path,old", [(path, old.opts[0]) for path, _, old in renamed_options()],
                         ids=lambda v: " ".join(v) if isinstance(v, tuple) else v)
def test_old_and_new_spelling_together_is_one_usage_error(path: tuple[str, ...], old: str, tmp_path: Path) -> None:
    """Every alias is wired to its option: given with it, the command stops before it reads anything
    (a flag given both ways means one thing: it is only announced; a choice whose values became
    options, ``--format table``, clashes with the other value's option)."""
    command = dict(commands(cli))[path]
    option = next(p for p in command.params if isinstance(p, RenamedOption) and p.opts[0] == old)
    new = next(p for p in command.params if option.new in getattr(p, "opts", ()))
    args = _base_args(path, command, tmp_path)
    spelled = old
    if option.is_flag:
        result = CliRunner().invoke(cli, [*args, old, option.new])
        assert "old spelling" not in result.output and _deprecations(result) == [deprecation(old, option.new)]
        return
    if option.values:  # --format table beside --json
        value, (new_name, _) = next((v, n) for v, n in option.values.items() if n[0] != option.new)
        args += [old, value, option.new]
        spelled = f"{old} {value}"
    else:
        args += [old, *_value(option), option.new, *_value(new)]
        new_name = option.new
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, (args, result.output)
    assert f"{spelled} is the old spelling of {new_name}; give {new_name} only" in result.output


@pytest.mark.parametrize("path,old", [(path, old.opts[0]) for path, _, old in renamed_options()],
                         ids=lambda v: " ".join(v) if isinstance(v, tuple) else v)
def test_every_old_spelling_parses_and_prints_one_deprecation_line(path: tuple[str, ...], old: str,
                                                                    tmp_path: Path) -> None:
    """Each hidden spelling is read and announced in exactly one line before the command runs (here
    it then stops at its missing input: exit 2, one error line, no traceback)."""
    command = dict(commands(cli))[path]
    option = next(p for p in command.params if isinstance(p, RenamedOption) and p.opts[0] == old)
    cases = ([([old, v], f"{old} {v}", new) for v, (new, _) in option.values.items()] if option.values else
             [([old, *_value(option)], old, option.new)])
    for given, spelled, new in cases:
        result = CliRunner().invoke(cli, [*_base_args(path, command, tmp_path), *given])
        assert result.exit_code == 2 and "Traceback" not in result.output, (given, result.output)
        assert _deprecations(result) == [deprecation(spelled, new)], (given, result.stderr)
        assert result.stderr.splitlines()[0] == deprecation(spelled, new)


def _stdout(result: Any) -> list[str]:
    """The lines that do not depend on the clock."""
    return [line for line in result.stdout.splitlines()
            if not line.startswith("done in") and " s (" not in line and "search time" not in line
            and not re.search(r"search \d", line)]


def _deprecations(result: Any) -> list[str]:
    return [line for line in result.stderr.splitlines() if "deprecated" in line]


@pytest.mark.parametrize("command,old,new", [
    (["evaluate", "{spec}", "--policy", "age:level=1|race:level=1"], ["--risk", "population"],
     ["--risk-model", "population"]),
    (["anonymize", "{spec}"], ["--k", "3", "--suppression", "0.05"],
     ["--min-k", "3", "--max-suppressed-share", "0.05"]),
    (["anonymize", "{spec}", "--sensitive", "dx"], ["--l", "2"], ["--min-l", "2"]),
    (["anonymize", "{spec}", "--min-k", "2"], ["--risk", "0.3"], ["--max-mean-record-risk", "0.3"]),
    (["alternatives", "{spec}", "--iterations", "3"], ["--threshold", "0.5"], ["--max-risk", "0.5"]),
    (["alternatives", "{spec}", "--iterations", "3"], ["-t", "0.5"], ["--max-risk", "0.5"]),
    (["compile", "{spec}", "--policy", "age:level=2", "-d", "postgres"], ["--table", "patients"],
     ["--source-table", "patients"]),
])
def test_old_spellings_still_work_with_one_deprecation_line(tmp_path: Path, command: list[str], old: list[str],
                                                             new: list[str]) -> None:
    spec = str(small_spec(tmp_path, release=RELEASE))
    args = [a.format(spec=spec) for a in command]
    before, after = CliRunner().invoke(cli, [*args, *old]), CliRunner().invoke(cli, [*args, *new])
    assert before.exit_code == after.exit_code == 0, (before.output, after.output)
    assert _stdout(before) == _stdout(after) and _stdout(after)
    warned = _deprecations(before)
    assert len(warned) == len([a for a in old if a.startswith("-")])
    assert all(line.startswith(f"warning: {o} is deprecated and will be removed; use ") for line, o in
               zip(warned, [a for a in old if a.startswith("-")]))
    assert _deprecations(after) == []


def test_old_spellings_of_files_and_tables_still_work(tmp_path: Path, run: Any, project: Any) -> None:
    """policy save --threshold, apply/check --table, channels-free: the value reaches the new option."""
    spec = project.spec_path
    saved = {}
    for flag in ("--threshold", "--drift-limit"):
        out = tmp_path / f"p{flag}.json"
        result = run("policy", "save", spec, "--policy", "age:every=10|zip:top", "--out", out, flag, "0.5")
        saved[flag] = json.loads(out.read_text())["drift"]["threshold"]
        assert len(_deprecations(result)) == (flag == "--threshold")
    assert saved["--threshold"] == saved["--drift-limit"] == 0.5
    import duckdb

    db = tmp_path / "batch.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(f"CREATE TABLE patients AS SELECT * FROM read_parquet('{project.source_parquet}')")
    policy = tmp_path / "p--drift-limit.json"
    old = run("check", policy, "--source", db, "--table", "patients", "--json", expect=None)
    new = run("check", policy, "--source", db, "--source-table", "patients", "--json", expect=None)
    assert old.exit_code == new.exit_code and json.loads(old.stdout)["new"] == json.loads(new.stdout)["new"]
    assert _deprecations(old) == ["warning: --table is deprecated and will be removed; use --source-table "
                                  "(same meaning)"]
    line = run("check", policy, "--source", project.source_parquet, "--source-table", "patients", expect=2).stderr
    assert "--source-table with --source is only for a DuckDB batch" in line


# -- stand-alone help ----------------------------------------------------------------------------
def test_no_help_text_names_a_docs_path() -> None:
    texts = {"deid-sql": cli.get_help(click.Context(cli, info_name="deid-sql"))}
    for path, command in commands(cli):
        with click.Context(command, info_name=" ".join(path)) as ctx:
            texts[" ".join(path)] = command.get_help(ctx)
    named = {where: DOCS_PATH.findall(text) for where, text in texts.items() if DOCS_PATH.search(text)}
    assert named == {}
    assert len(texts) > 15


# strings the user may see that still name a docs page: owned elsewhere (issue 31 notes them)
ELSEWHERE: set[str] = set()  # modules allowed to name a docs path in a message (none)


def _user_strings(path: Path) -> list[str]:
    """The string constants of a module that are not docstrings (messages, help texts, output)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docstrings]


def test_no_message_names_a_docs_path() -> None:
    package = ROOT / "deid_sql"
    found = {}
    for path in sorted(package.rglob("*.py")):
        where = path.relative_to(package).as_posix()
        hits = [s for s in _user_strings(path) if re.search(r"docs/|\.\./shared|METHODS\.md", s)]
        if hits and where not in ELSEWHERE:
            found[where] = hits
    assert found == {}


def test_help_lists_the_shipped_topics_and_prints_each(run: Any) -> None:
    pages = sorted(p.stem for p in (ROOT / "deid_sql" / "topics").glob("*.md"))
    assert {"spec", "policies", "release", "no-census", "adversary", "channels"} <= set(pages)
    listed = run("help").stdout
    for name in [*pages, "options"]:
        assert re.search(rf"^  {re.escape(name)}\s+\S", listed, re.M), name
        text = run("help", name).stdout
        assert len(text.splitlines()) > 5 and not re.search(r"docs/|\.\./shared|METHODS\.md", text), name
    assert run("help", "spec").stdout.startswith("# spec: ")
    assert "--risk-model" in run("help", "options").stdout
    assert re.match(r"Usage: \S+ view \[OPTIONS\] SPEC", run("help", "view").stdout)
    bad = run("help", "nothing-here", expect=2)
    assert bad.stderr.count("\n") == 1 and "no help topic 'nothing-here'" in bad.stderr and "spec" in bad.stderr
    assert set(topics()) == {*pages, "options"}


def test_the_wheel_ships_the_topic_pages() -> None:
    """pyproject's package data covers every page (an editable install finds them either way)."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    shipped = {p for pattern in data["deid_sql"] for p in (ROOT / "deid_sql").glob(pattern)}
    assert shipped == set((ROOT / "deid_sql" / "topics").glob("*.md"))


def test_renamed_refuses_both_spellings_before_the_command_runs() -> None:
    ran = []

    @click.command()
    @click.option("--new", "value", type=int, default=None)
    @renamed("--old", "--new", "value", type=int)
    def command(value: int | None) -> None:
        ran.append(value)

    runner = CliRunner()
    assert runner.invoke(command, ["--old", "3"]).exit_code == 0 and ran == [3]
    assert "warning: --old is deprecated" in runner.invoke(command, ["--old", "4"]).stderr and ran == [3, 4]
    assert runner.invoke(command, ["--new", "5"]).stderr == "" and ran == [3, 4, 5]
    assert runner.invoke(command, ["--old", "1", "--new", "2"]).exit_code == 2 and ran == [3, 4, 5]
    assert "--old" not in runner.invoke(command, ["--help"]).stdout


# -- evaluate --suppress-below: the gate's figures -----------------------------------------------
@pytest.mark.parametrize("policy,below", [("age:every=10|zip:digits=3", 5), ("age:level=1|race:level=1", 4)])
def test_evaluate_suppress_below_gives_the_release_gate_and_report_figures(tmp_path: Path, run: Any, policy: str,
                                                                          below: int) -> None:
    spec = small_spec(tmp_path, release="min_k = 4")
    shown = json.loads(run("evaluate", spec, "--policy", policy, "--suppress-below", below, "--format", "json").stdout)
    release = shown["release"]
    out, page = tmp_path / "r.parquet", tmp_path / "r.html"
    run("materialize", spec, "--policy", policy, "--suppress-below", below, "--out", out, "--report", page,
        expect=None)
    sidecar = json.loads(out.with_name("r.parquet.release.json").read_text())
    report = json.loads(page.with_suffix(".json").read_text())
    assert {k: release[k] for k in sidecar["figures"]} == sidecar["figures"]
    figures = report["risk"]["figures"]
    assert release["suppressed"] == figures["suppressed"] > 0
    assert (release["k"], release["risk"], release["expected_reidentifications"], release["max_record_risk"]) == \
        (figures["k"], figures["risk"], figures["expected_reidentifications"], figures["max_record_risk"])
    assert release["loss"] == pytest.approx(report["utility"]["normalized_loss"], rel=1e-12)
    assert release["gate"] == sidecar["gate"]["verdict"] == "passed" and release["suppress_below"] == below
    # without suppression the top-level figures are the policy's own (smaller k: the groups suppressed)
    assert shown["k"] < release["k"] and shown["risk"] > release["risk"]


def test_evaluate_suppress_below_says_when_the_gate_would_refuse(tmp_path: Path, run: Any) -> None:
    spec = small_spec(tmp_path, release="min_k = 50")
    shown = json.loads(run("evaluate", spec, "--policy", "age:every=10", "--suppress-below", 2).stdout)
    assert shown["release"]["gate"] == "refused" and "min_k" in shown["release"]["failures"][0]
    spec_table = run("evaluate", spec, "--policy", "age:every=10", "--suppress-below", 2, "--format", "table").stdout
    assert "refused" in spec_table and "suppressed" in spec_table.splitlines()[1]
    assert list(tmp_path.glob("*.release.json")) == []  # nothing written


# -- readable forms ------------------------------------------------------------------------------
def test_every_policy_form_reads_as_its_groups(tmp_path: Path, run: Any) -> None:
    spec = small_spec(tmp_path, release=RELEASE)
    forms = {"race:level=1": "race: White+Asian = [White, Asian], Black+Other = [Black, Other]",
             "age:level=1": "age: [0-4], [5-9]", "age:cuts=10,20": "age: [0-9], [10-19], [20-30]",
             "age:every=10": "age: [0-9], [10-19], [20-29]", "sex:top": "sex: [Female, Male]",
             "zip:level=1": "zip: [", "bottom": "original data"}
    for text, readable in forms.items():
        shown = json.loads(run("evaluate", spec, "--policy", text, "--format", "json").stdout)["readable"]
        assert shown.startswith(readable) and shown != text, (text, shown)
    shown = json.loads(run("evaluate", spec, "--levels", "race:1", "--format", "json").stdout)["readable"]
    assert "race: level 1 of 2 (" in shown and "White+Asian" in shown


# -- timings -------------------------------------------------------------------------------------
def _seconds(pattern: str, text: str) -> float:
    found = re.search(pattern, text)
    assert found, (pattern, text)
    return float(found.group(1))


def test_frontier_times_what_it_names_and_ends_with_the_wall_time(tmp_path: Path, run: Any) -> None:
    spec = small_spec(tmp_path, release=RELEASE)
    out = run("frontier", spec, "--budget", 40, "--out", tmp_path / "run").stdout
    lines = out.splitlines()
    assert re.search(r"policies evaluated \(seed 0\); search \d+\.\d s$", lines[0])
    search = _seconds(r"time: search (\d+\.\d) s", out)
    compare = _seconds(r"k-anonymity frontiers (\d+\.\d) s", out)
    write = _seconds(r"writing the files (\d+\.\d) s", out)
    wall = _seconds(r"^done in (\d+\.\d) s \(wall time of the whole command\)$", lines[-1])
    assert wall + 0.15 >= search + compare + write  # each rounded to 0.1 s
    again = run("frontier", spec, "--budget", 60, "--out", tmp_path / "run", "--resume").stdout
    assert "in this run" in again.splitlines()[0] or _seconds(r"search (\d+\.\d) s", again) < 0.05


@pytest.mark.parametrize("command", [["anonymize", "{spec}", "--min-k", "2"],
                                     ["alternatives", "{spec}", "--iterations", "2", "--max-risk", "0.5"],
                                     ["adversary", "{spec}", "--policy", "top"]])
def test_timed_commands_end_with_the_wall_time(tmp_path: Path, run: Any, command: list[str]) -> None:
    spec = str(small_spec(tmp_path, release=RELEASE))
    out = run(*[a.format(spec=spec) for a in command]).stdout.splitlines()
    assert re.fullmatch(r"done in \d+\.\d s \(wall time of the whole command\)", out[-1])
    assert not any("wall time" in line for line in out[:-1])  # no step time calls itself the wall time


def test_the_wall_time_starts_when_the_command_line_is_parsed() -> None:
    import importlib

    from deid_sql.cli import options

    assert importlib.import_module("deid_sql.cli.main").STARTED == options.STARTED


# -- validate ------------------------------------------------------------------------------------
def test_validate_aligns_long_qi_names(project: Any, run: Any) -> None:
    long_age = project.QI["age"].replace('name = "age"', 'name = "age_at_first_admission_in_years"\ncolumn = "age"')
    qis = [long_age, project.QI["sex"], project.QI["zip"]]
    spec = project.write_spec(project.spec_text(qis=qis, columns='[columns]\ndrop = ["patient_id", "race"]\n'
                                                                  'sensitive = ["diagnosis"]\n'), "long.toml")
    rows = [line for line in run("validate", spec).stdout.splitlines() if line.startswith("  qi ")]
    assert len(rows) == 3 and "age_at_first_admission_in_years" in rows[0]
    assert len({line.index(" values") for line in rows}) == 1
    kinds = [re.search(r"\s(integer|category|zip|date)\s+[\d,]+ values", line) for line in rows]
    assert all(kinds) and len({k.start() for k in kinds if k}) == 1
