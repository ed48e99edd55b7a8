"""``deid-sql help [TOPIC]``: short topic pages that ship with the package.

--help texts and messages stand alone: they never send a pip-installed user to a docs file they
do not have.  What is too long for a --help text is a topic here, a Markdown page in
``deid_sql/topics`` (package data), printed as it is; ``options`` is the command line's vocabulary
(``vocabulary.MEANINGS``), and a command's name prints that command's --help.
"""

from __future__ import annotations

from importlib import resources

import click

from ..errors import DeidError

OPTIONS = "options"  # the generated topic: vocabulary.describe()


def topics() -> dict[str, str]:
    """Every shipped topic by name, with its one-line summary (the page's title line)."""
    out = {}
    for entry in sorted(resources.files("deid_sql").joinpath("topics").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".md"):
            title = entry.read_text(encoding="utf-8").splitlines()[0].lstrip("# ").strip()
            out[entry.name[:-3]] = title.split(": ", 1)[1] if ": " in title else title
    out[OPTIONS] = "what each option name means, on every command"
    return out


def topic_text(name: str) -> str:
    """The page of topic ``name`` (``DeidError`` naming the topics when there is none)."""
    if name == OPTIONS:
        from .vocabulary import describe

        return describe()
    known = topics()
    if name not in known:
        raise DeidError(f"no help topic {name!r}; the topics are {', '.join(sorted(known))} (or a command's name)")
    return resources.files("deid_sql").joinpath("topics", f"{name}.md").read_text(encoding="utf-8").rstrip()


@click.command(name="help")
@click.argument("topic", required=False)
@click.pass_context
def help_(ctx: click.Context, topic: str | None) -> None:
    """Print a topic page (the spec, policies, risk models, …), or list the topics.

    Example: deid-sql help policies
    """
    from .failures import error_boundary

    with error_boundary():
        root = ctx.find_root().command
        if topic is None:
            known = topics()
            width = max(len(name) for name in known)
            click.echo("Topics (deid-sql help TOPIC):")
            for name, summary in known.items():
                click.echo(f"  {name:<{width}}  {summary}")
            click.echo("\nA command's name prints its --help: deid-sql help anonymize")
            return
        command = root.get_command(ctx, topic) if isinstance(root, click.Group) else None
        if command is not None and topic not in topics():
            with click.Context(command, info_name=topic, parent=ctx.parent) as sub:
                click.echo(command.get_help(sub))
            return
        click.echo(topic_text(topic))
