"""One vocabulary on the command line (issues 31 and 42): an option name means one thing on every
command and each meaning has one name on every command (``MEANINGS_42``: the input and output
table, the view, replacing an output, JSON on stdout, the file written), old spellings still work
hidden with one deprecation line, --help and messages stand alone (no docs paths; topic pages ship
with the package).  Issue 31's figures, forms and timings are in tests/test_cli_figures.py."""

from __future__ import annotations

import ast
import json
import re
import tomllib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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


# -- one name per meaning (issue 42) -------------------------------------------------------------
@dataclass(frozen=True)
class Meaning:
    """What an option means, the name every command gives it, the names it had, how to find it
    whatever it is called (``has``: the option's help, kind and choices), and the commands that
    have it today (a command that gains or loses it is a change the table must record)."""

    words: str
    name: str
    kind: str
    retired: tuple[str, ...]
    has: Callable[[click.Option], bool]
    commands: frozenset[str]
    short: str | None = None  # the short form the name comes with


def _help(option: click.Option) -> str:
    return " ".join((option.help or "").split())


def _written_file(o: click.Option) -> bool:
    """The one file or folder a command writes (what it is for, not an extra file beside it)."""
    return kind(o) == "path" and bool(re.match(r"(Write the|Where to write|Output file|The (policy file|report "
                                                r"page)|Folder for (frontier|the demo))", _help(o)))


MEANINGS_42 = (
    Meaning("the name of the table a command reads", "--source-table", "text", ("--table",),
            lambda o: kind(o) == "text" and bool(re.match(r"(The )?(source table|new batch's table|table to read)",
                                                          _help(o), re.I)),
            frozenset({"apply", "channels", "check", "compile", "dbt", "init"})),
    Meaning("the name of the table a release is written to", "--table", "text", ("--out-table",),
            lambda o: kind(o) == "text" and bool(re.match(r"Table name inside|the table to create", _help(o), re.I)),
            frozenset({"anonymize", "apply", "channels", "materialize"})),
    Meaning("the name of the view a release is created as", "--view", "text", ("--name",),
            lambda o: kind(o) == "text" and bool(re.search(r"\bview\b", _help(o), re.I))
            and "--view" not in _help(o),
            frozenset({"anonymize", "apply", "channels", "safe-harbor", "view"})),
    Meaning("replace an output that exists", "--overwrite", "flag", ("--replace", "--force"),
            lambda o: kind(o) == "flag" and bool(re.match(r"(Replace|Start again)", _help(o))),
            frozenset({"adversary", "alternatives", "anonymize", "apply", "channels", "compile", "dbt", "frontier",
                       "init", "materialize", "policy save", "report", "safe-harbor", "view"})),
    Meaning("print JSON on stdout", "--json", "flag", ("--format",),
            lambda o: (kind(o) == "flag" and bool(re.match(r"Print .*JSON", _help(o))))
            or (isinstance(o.type, click.Choice) and "json" in o.type.choices),
            frozenset({"check", "evaluate", "ledger"})),
    Meaning("the file (or folder) a command writes", "--out", "path", ("--materialize",), _written_file,
            frozenset({"alternatives", "anonymize", "apply", "channels", "compile", "demo", "frontier", "init",
                       "materialize", "policy save", "report", "safe-harbor"}), short="-o"),
)
# options found by a meaning that keep their own name, and why
KEPT = {
    ("demo", "--dir"): "the folder the demo fills (data, spec, database, runs): its place, not one output",
}
# retired everywhere; the rest are retired only in one meaning (--table read, --format printed)
RETIRED_EVERYWHERE = {"--out-table", "--name", "--replace", "--force", "--materialize"}


def visible_options(group: click.Group) -> list[tuple[str, click.Option]]:
    return [(" ".join(path), p) for path, command in commands(group) for p in command.params
            if isinstance(p, click.Option) and not p.hidden]


def meaning_problems(group: click.Group, meanings: Sequence[Meaning] = MEANINGS_42) -> list[str]:
    """(a) no visible option is spelled a retired way; (c) every option with a meaning has its name
    (and kind and short form), and the commands that have each meaning are the table's."""
    problems = []
    options = visible_options(group)
    for where, o in options:
        names = set(o.opts) | set(o.secondary_opts)
        for name in sorted(names & RETIRED_EVERYWHERE):
            problems.append(f"{where} shows the retired spelling {name}")
    for m in meanings:
        found = [(where, o) for where, o in options if m.has(o)]
        for where, o in found:
            spelled = "/".join(o.opts + o.secondary_opts)
            if (where, o.opts[0]) in KEPT:
                continue
            if m.name not in o.opts:
                problems.append(f"{where} {spelled}: {m.words} is named {m.name}")
            elif m.short is not None and m.short not in o.opts:
                problems.append(f"{where} {spelled}: {m.name} comes with {m.short}")
            if kind(o) != m.kind:
                problems.append(f"{where} {spelled}: {m.name} takes a {m.kind}, not a {kind(o)}")
        having = {where for where, _ in found}
        if having != m.commands:
            problems.append(f"{m.name} ({m.words}): commands {sorted(having)}, the table says {sorted(m.commands)}")
        for where, o in options:  # the chosen name means only this
            if m.name in o.opts and not m.has(o):
                problems.append(f"{where} {m.name} does not mean {m.words}")
    return problems


def test_every_meaning_has_its_one_name_on_every_command() -> None:
    assert meaning_problems(cli) == []


def test_a_retired_or_stray_spelling_fails_the_meaning_check() -> None:
    """The check can fail: a new command that writes a view as --view-name, shows --replace, prints
    JSON with --format json, reads its table as --table."""

    @click.group()
    def root() -> None: ...

    @root.command(name="new")
    @click.option("--view-name", help="Create a view of the release by this name.")
    @click.option("--replace", is_flag=True, help="Replace an existing view.")
    @click.option("--format", type=click.Choice(["table", "json"]), help="A table, or JSON.")
    @click.option("--table", help="The table to read when DATA is a DuckDB file.")
    def new(**_: Any) -> None: ...

    problems = meaning_problems(root)
    assert "new shows the retired spelling --replace" in problems
    assert "new --view-name: the name of the view a release is created as is named --view" in problems
    assert "new --format: print JSON on stdout is named --json" in problems
    assert "new --table: the name of the table a command reads is named --source-table" in problems
    assert "new --replace: replace an output that exists is named --overwrite" in problems
    assert "new --table does not mean the name of the table a release is written to" in problems


def test_each_retired_spelling_of_the_table_is_kept_hidden() -> None:
    """Every retired name of a meaning still works where a command had it: hidden, as the new one."""
    hidden = {(" ".join(path), old.opts[0]): old.new for path, _, old in renamed_options()}
    for m in MEANINGS_42:
        for name in m.retired:
            assert any(old == name and new == m.name for (_, old), new in hidden.items()), (m.name, name)


# old and new spelling, the same run: the same stdout, one deprecation line
def _same_run(run: Any, old: list[Any], new: list[Any], warned: str, names: tuple[str, str] = ("", "")) -> None:
    """``names``: the output the old run wrote and the one the new run wrote (read as the same)."""
    before, after = run(*old), run(*new)
    assert [line.replace(*names) for line in _stdout(before)] == _stdout(after), (before.stdout, after.stdout)
    assert _deprecations(before) == [warned] and _deprecations(after) == []


@pytest.mark.slow
def test_view_name_and_replace_still_work(tmp_path: Path, run: Any) -> None:
    spec = small_spec(tmp_path, release=RELEASE)
    base = ["view", spec, "--policy", "age:level=1", "--db", tmp_path / "v.duckdb"]
    _same_run(run, [*base, "--name", "v1"], [*base, "--view", "v2"], deprecation("--name", "--view"), ("v1", "v2"))
    _same_run(run, [*base, "--view", "v1", "--replace"], [*base, "--view", "v2", "--overwrite"],
              deprecation("--replace", "--overwrite"), ("v1", "v2"))
    missing = run(*base, expect=2)
    assert "Missing option '--view'" in missing.stderr


def test_evaluate_format_still_works(tmp_path: Path, run: Any) -> None:
    spec = small_spec(tmp_path, release=RELEASE)
    base = ["evaluate", spec, "--policy", "age:level=1"]
    _same_run(run, [*base, "--format", "json"], [*base, "--json"], deprecation("--format json", "--json"))
    _same_run(run, [*base, "--format", "table"], [*base, "--no-json"], deprecation("--format table", "--no-json"))
    piped = run(*base).stdout  # not a terminal: JSON, as before
    assert json.loads(piped)["readable"] == json.loads(run(*base, "--json").stdout)["readable"]


@pytest.mark.slow
def test_init_table_and_force_still_work(tmp_path: Path, run: Any, project: Any) -> None:
    import duckdb

    db = tmp_path / "data.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(f"CREATE TABLE patients AS SELECT * FROM read_parquet('{project.source_parquet}')")
    spec = tmp_path / "s.toml"
    _same_run(run, ["init", db, "--table", "patients", "--out", spec],
              ["init", db, "--source-table", "patients", "--out", spec, "--overwrite"],
              deprecation("--table", "--source-table"))
    _same_run(run, ["init", db, "--source-table", "patients", "--out", spec, "--force"],
              ["init", db, "--source-table", "patients", "--out", spec, "--overwrite"],
              deprecation("--force", "--overwrite"))


@pytest.mark.slow
def test_apply_out_table_still_works_and_its_old_table_is_refused_loudly(tmp_path: Path, run: Any,
                                                                         project: Any) -> None:
    """apply's --table names its output now; the old ``apply --table`` (its batch's table in a
    .duckdb --source) cannot silently become an output name: the batch's table is then missing."""
    import duckdb

    policy = tmp_path / "p.json"
    run("policy", "save", project.spec_path, "--policy", "age:every=10|zip:top", "--out", policy)
    base = ["apply", policy, "--source", project.source_parquet]
    _same_run(run, [*base, "--out", tmp_path / "a.duckdb", "--out-table", "t"],
              [*base, "--out", tmp_path / "b.duckdb", "--table", "t"], deprecation("--out-table", "--table"),
              ("a.duckdb", "b.duckdb"))
    db = tmp_path / "batch.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(f"CREATE TABLE patients AS SELECT * FROM read_parquet('{project.source_parquet}')")
    old = run("apply", policy, "--source", db, "--table", "patients", "--out", tmp_path / "c.duckdb", expect=2)
    assert old.stderr.splitlines() == [f"error: batch {db} is a DuckDB file: name its table with --source-table"]


@pytest.mark.slow
def test_safe_harbor_materialize_and_replace_still_work(run: Any, project: Any) -> None:
    qis = [q.replace('name = "age"', 'name = "age"\nrole = "age"').replace('name = "zip"', 'name = "zip"\nrole = "zip"')
           for q in project.DEFAULT_QIS]
    spec = project.spec(name="roles.toml", qis=qis)
    base = ["safe-harbor", spec]
    _same_run(run, [*base, "--materialize", project.dir / "a.parquet"], [*base, "--out", project.dir / "b.parquet"],
              deprecation("--materialize", "--out"), ("a.parquet", "b.parquet"))
    db = project.dir / "v.duckdb"
    run(*base, "--view", "v", "--db", db)
    _same_run(run, [*base, "--view", "v", "--db", db, "--replace"], [*base, "--view", "v", "--db", db, "--overwrite"],
              deprecation("--replace", "--overwrite"))


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
