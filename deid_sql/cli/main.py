"""Entry point: the ``deid-sql`` group and its commands (one module per group)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, MutableMapping

import click

from .. import __version__
from ..invocation import set_invocation, use_cell_cache
from ..registry import COMMANDS
from .failures import error_boundary

STARTED = "deid_sql.started"  # = options.STARTED, spelled here so the root group imports no library module

# Every command: its module in this package and its one-line summary (``registry.COMMANDS``).  A
# command's module is imported when the command runs (or its own --help is asked), so ``deid-sql
# --help`` lists them all without importing the library; tests/test_cli_startup.py checks each
# summary against the command's own help.
COMMANDS.add("init", "deid_sql.cli.init:init",
             summary="Write a starting spec for DATA: likely QIs proposed, every other column dropped for review.")
COMMANDS.add("validate", "deid_sql.cli.inspect:validate",
             summary="Check SPEC against its data and report every problem at once.")
COMMANDS.add("evaluate", "deid_sql.cli.inspect:evaluate",
             summary="Print the risk and utility metrics of policies: a brief table on a terminal, JSON otherwise.")
COMMANDS.add("compile", "deid_sql.cli.output:compile_",
             summary="Print the SELECT that applies a policy, in any SQL dialect (or write it with --out).")
COMMANDS.add("materialize", "deid_sql.cli.output:materialize_",
             summary="Write the de-identified table (atomic; row count checked against the source).")
COMMANDS.add("view", "deid_sql.cli.output:view",
             summary="Create a DuckDB view that analysts can SELECT from; it reads the source in place.")
COMMANDS.add("safe-harbor", "deid_sql.cli.search:safe_harbor_",
             summary=("Apply HIPAA Safe Harbor (ZIP3 with small prefixes to 000, ages 90+, dates to years) and print "
                     "its risk."))
COMMANDS.add("alternatives", "deid_sql.cli.search:alternatives",
             summary="Find boundary policies no riskier than a threshold (default: Safe Harbor's risk).")
COMMANDS.add("frontier", "deid_sql.cli.frontier:frontier",
             summary="Search the risk–utility frontier and write it with plots beside Safe Harbor and k-anonymity.")
COMMANDS.add("anonymize", "deid_sql.cli.anonymize:anonymize_",
             summary="Find the optimal full-domain generalization (hierarchy levels) with suppression.")
COMMANDS.add("adversary", "deid_sql.cli.adversary:adversary",
             summary=("Risk of a release under an economic attacker who stops when attacking no longer pays (a Markov "
                     "decision process; 'deid-sql help adversary')."))
COMMANDS.add("channels", "deid_sql.cli.channels:channels",
             summary="Release identities with confidentiality-related values pooled into safe output channels.")
COMMANDS.add("dbt", "deid_sql.cli.dbt:dbt_",
             summary="Write a dbt model that applies a policy over {{ source() }}, with tests and the policy in meta.")
COMMANDS.add("demo", "deid_sql.cli.demo:demo",
             summary=("Run the whole job on a synthetic cohort: policies, Safe Harbor, alternatives, the frontier, the "
                     "policy it recommends, SQL, a view, and the report a reviewer signs for that policy "
                     "(DIR/report.html)."))
COMMANDS.add("policy", "deid_sql.cli.policy:policy_group",
             summary="Save a chosen policy to a file that 'deid-sql apply' and 'deid-sql check' re-use on new batches.")
COMMANDS.add("apply", "deid_sql.cli.policy:apply_",
             summary=("Check a new batch for drift, then release it with a saved policy (atomic, row count checked); "
                     "no original data needed."))
COMMANDS.add("check", "deid_sql.cli.policy:check",
             summary=("Recompute a saved policy's risk on a new batch; exit 1 when its mean_record_risk (expected "
                     "re-identifications per record) exceeds the drift limit, a QI's label shares moved, or the "
                     "batch's release fails an attribute criterion of the spec's [release] (min_l, max_confidence, "
                     "max_t…, judged as apply's gate would), 0 when not, 2 for bad input."))
COMMANDS.add("ledger", "deid_sql.cli.ledger:ledger_",
             summary="List what each recipient already holds (the ledger of linkable releases) and check its chain.")
COMMANDS.add("report", "deid_sql.cli.report:report",
             summary="Write the report a privacy reviewer signs: one self-contained HTML page and its JSON twin.")
COMMANDS.add("help", "deid_sql.cli.help:help_",
             summary="Print a topic page (the spec, policies, risk models, …), or list the topics.")


class _LazyCommands(MutableMapping[str, click.Command]):
    """The root group's commands: every name of ``COMMANDS`` is there from the start, its module
    imported when the command is first looked up; commands added later (``add_command``) are kept
    as they are."""

    def __init__(self) -> None:
        self._loaded: dict[str, click.Command] = {}
        self._names = list(COMMANDS.names())

    def loaded(self, name: str) -> bool:
        return name in self._loaded

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            if name not in COMMANDS or name not in self._names:
                raise KeyError(name)
            command = COMMANDS.load(name)
            assert isinstance(command, click.Command)
            self._loaded[name] = command
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command
        if name not in self._names:
            self._names.append(name)

    def __delitem__(self, name: str) -> None:
        if name not in self._names:
            raise KeyError(name)
        self._names.remove(name)
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._names))

    def __len__(self) -> int:
        return len(self._names)


class _Group(click.Group):
    """The root group; remembers the command line so a release's sidecar can say how to reproduce it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # every command first removes the temporaries of deid-sql runs that were killed (kill -9, a
        # power cut), wherever they are, before --help or --version can exit: one scandir when none
        from ..storage.inflight import announce

        announce()
        ctx.meta[STARTED] = time.perf_counter()  # the wall time's start (options.reports_wall_time)
        set_invocation(args)
        # commands reuse the cells an earlier one stored, unless told not to (--no-cache sets it off)
        use_cell_cache(os.environ.get("DEID_SQL_NO_CACHE", "").strip().lower() in ("", "0", "false", "no"))
        return super().parse_args(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from the summaries above: no command module is imported for it."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            if name in COMMANDS and not self.commands.loaded(name):  # type: ignore[attr-defined]
                rows.append((name, click.utils.make_default_short_help(COMMANDS.entry(name)["summary"], limit)))
            else:
                command = self.commands[name]
                if not command.hidden:
                    rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> object:
        """Every command inside the error boundary, also one without ``handles_errors``: no
        exception leaves deid-sql as a traceback and exit code 1, the code of ``check``'s verdict."""
        try:
            with error_boundary():
                return super().invoke(ctx)
        finally:
            use_cell_cache(False)  # a library call after this command (a test, a notebook) decides for itself


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="deid-sql")
def cli() -> None:
    """deid-sql: de-identify person-level data inside the database.

    Start with 'deid-sql demo'; then 'deid-sql init DATA' writes a starting spec for your own file
    ('deid-sql help spec' shows its tables): review it and run 'deid-sql validate SPEC'.
    'deid-sql help' lists the other topics.

    \b
    Exit codes:
      0    success
      1    'check' found drift, or 'apply' refused a drifted batch
      2    bad input or a refused release: one line on stderr, nothing written
      3    internal error (a bug): one line naming it; set DEID_SQL_TRACEBACK=1
           to see the traceback, and report it
      130  interrupted (Ctrl-C); 143 terminated: temporary files removed
    """


cli.commands = _LazyCommands()  # every command, imported on first use


def main() -> None:
    # SIGINT, SIGTERM and SIGHUP: recorded, the engines' running queries cancelled at once, the writes'
    # temporaries removed on the way out, one line and exit 128 + signum (``interrupts``)
    from ..interrupts import install

    install()
    cli()
