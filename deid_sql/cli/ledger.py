"""``deid-sql ledger``: what each recipient already holds, and whether the ledger is whole."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..errors import OutputError
from .options import echo_json, handles_errors


@click.command(name="ledger")
@click.argument("spec", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--recipient", default=None, help="Show only this recipient's releases.")
@click.option("--verify", is_flag=True,
              help="Check the whole hash chain, every person's labels included; exit 1 when it is broken.")
@click.option("--release", "releases", multiple=True, type=click.Path(path_type=Path, dir_okay=False, exists=True),
              metavar="FILE.release.json",
              help="With --verify: also check that the ledger still holds the entry this release's record names "
                   "(the only way to find the last entries removed). Repeat for several releases.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@handles_errors
def ledger_(spec: Path, recipient: str | None, verify: bool, releases: tuple[Path, ...], as_json: bool) -> None:
    """List what each recipient already holds (the ledger of linkable releases) and check its chain.

    For each recipient: the releases recorded (what, when, persons) and the union's k, the fewest
    persons sharing everything those releases told about them.  Every release that can be linked (it
    carries a pseudonym) is recorded in the ledger, one file beside the spec unless [release] ledger
    names another (or ledger_table, tables on PostgreSQL); a new release to the same recipient is
    judged with what they already hold.

    Example: deid-sql ledger demo/demo.toml --verify
    """
    from ..ledger.store import Ledger, exists, summarize
    from ..release.recorded import recorded_problems
    from ..release.union import ledger_location
    from ..spec.file import Spec

    if releases and not verify:
        raise OutputError("--release names releases to check against the ledger: give --verify too")
    records = []
    for release in releases:
        try:
            record = json.loads(release.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise OutputError(f"--release {release}: not a release record ({e}); give the .release.json beside "
                              f"the release") from None
        records.append((release, record if isinstance(record, dict) else {}))

    loaded = Spec.read(spec)
    path = ledger_location(loaded)
    if not exists(path):  # nothing linkable was ever released from here
        if records:  # no ledger can hold a release's entry
            click.echo(f"ledger {path}: missing")
            for line in (p for release, record in records for p in recorded_problems(None, record, str(release))):
                click.echo(f"  {line}")
            sys.exit(1)
        if recipient is not None:
            raise OutputError(f"no ledger at {path}: no release to {recipient!r} has been recorded")
        if as_json:
            echo_json({"ledger": str(path), "verified": True if verify else None, "problems": [], "recipients": []})
        else:
            click.echo(f"ledger {path}: no release recorded (only releases that carry a pseudonym are)")
        return
    with Ledger(path, create=False) as ledger:
        problems = ledger.verify() if verify else []
        for release, record in records:
            problems += recorded_problems(ledger, record, str(release))
        summaries = [s for s in summarize(ledger) if recipient is None or s.recipient == recipient]
    if recipient is not None and not summaries:
        raise OutputError(f"ledger {path} holds no release to {recipient!r}; its recipients are listed by "
                          f"deid-sql ledger {spec}")
    if as_json:
        echo_json({"ledger": str(path), "verified": (not problems) if verify else None, "problems": problems,
                   "recipients": [s.to_dict() for s in summaries]})
    else:
        click.echo(f"ledger {path}")
        for s in summaries:
            n = len(s.entries)
            click.echo(f"\n{s.recipient}: {n} release{'' if n == 1 else 's'}, {s.persons} persons, union k = {s.k}")
            for e in s.entries:
                click.echo(f"  {e.seq:>4}  {e.created_at}  {e.persons:>8} persons  {e.target}  policy {e.policy}")
        if verify:
            click.echo("\nhash chain: " + ("whole" if not problems else "BROKEN"))
            for line in problems:
                click.echo(f"  {line}")
    if problems:
        sys.exit(1)
