"""Entry point: the ``deid-sql`` group and its commands (one module per group)."""

from __future__ import annotations

import signal

import click

from .. import __version__
from ..release.sidecar import set_invocation
from .adversary import adversary
from .anonymize import anonymize_
from .channels import channels
from .dbt import dbt_
from .demo import demo
from .frontier import frontier
from .inspect import evaluate, validate
from .options import error_boundary
from .output import compile_, materialize_, view
from .policy import apply_, check, policy_group
from .report import report
from .search import alternatives, safe_harbor_


class _Group(click.Group):
    """The root group; remembers the command line so a release's sidecar can say how to reproduce it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        set_invocation(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> object:
        """Every command inside the error boundary, also one without ``handles_errors``: no
        exception leaves deid-sql as a traceback and exit code 1, the code of ``check``'s verdict."""
        with error_boundary():
            return super().invoke(ctx)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="deid-sql")
def cli() -> None:
    """deid-sql: de-identify person-level data inside the database.

    Start with 'deid-sql demo'; then write a spec (see docs/policies-and-metrics.md) and run
    'deid-sql validate SPEC'.

    \b
    Exit codes:
      0    success
      1    'check' found drift, or 'apply' refused a drifted batch
      2    bad input or a refused release: one line on stderr, nothing written
      3    internal error (a bug): one line naming it; set DEID_SQL_TRACEBACK=1
           to see the traceback, and report it
      130  interrupted (Ctrl-C); 143 terminated: temporary files removed
    """


COMMANDS = (validate, evaluate, compile_, materialize_, view, safe_harbor_, alternatives, frontier, anonymize_,
            adversary, channels, dbt_, demo, policy_group, apply_, check, report)
for command in COMMANDS:
    cli.add_command(command)


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM (and SIGHUP) as an exception, like Ctrl-C's KeyboardInterrupt: the ``finally`` blocks of
    the writes run and remove their temporary files (``atomic``), where the default action would kill
    the process on the spot and leave them (hundreds of MB beside a Parquet output)."""
    raise SystemExit(128 + signum)


def main() -> None:
    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), _terminated)
    cli()
