"""``deid-sql init``: a starting spec for a data file, safe by default."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from ..errors import OutputError
from ..spec.population_size import REGIONS
from ..starter.persons import SECRET_ENV, SECRET_HINT
from ..starter.write import Population, Starter, build, criteria_lines, default_out, write
from .options import handles_errors, renamed


@click.command()
@click.argument("data", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--census", nargs=2, type=(click.Path(path_type=Path, dir_okay=False), str), default=None,
              metavar="FILE COUNT",
              help="A census table (CSV or Parquet) with the same QI columns and COUNT, its column of people per row.")
@click.option("--population", "size", type=click.IntRange(min=1), default=None, metavar="N",
              help="Without a census: the number of people the data was drawn from (risk is then estimated from "
                   "the sample).")
@click.option("--region", type=click.Choice(sorted(REGIONS)), default=None,
              help="Without a census: a region whose census counted the population (its size is built in).")
@click.option("--out", "-o", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Where to write the spec (default: beside DATA, DATA's name with .toml).")
@click.option("--overwrite", "force", is_flag=True, help="Replace the spec file if it exists.")
@renamed("--force", "--overwrite", "force", is_flag=True)
@click.option("--source-table", "table", default=None, metavar="NAME",
              help="The table to read when DATA is a DuckDB file.")
@renamed("--table", "--source-table", "table", type=str)
@click.option("--format", "fmt", type=click.Choice(["csv", "parquet", "duckdb"]), default=None,
              help="DATA's format when its extension does not tell.")
@handles_errors
def init(data: Path, census: tuple[Path, str] | None, size: int | None, region: str | None, out: Path | None,
         force: bool, table: str | None, fmt: str | None) -> None:
    """Write a starting spec for DATA: likely QIs proposed, every other column dropped for review.

    DATA is a CSV or Parquet file, or a table of a DuckDB file (--source-table). Every column is listed with
    its type, distinct values and two samples; likely quasi-identifiers (age, dates, sex, race, ZIP,
    marital status, a clinic, ward or site) are proposed with their domains read from the data;
    identifiers (person names, ids, phone, e-mail, SSN-like values) and every other column are
    dropped with a note; an id whose values repeat across rows becomes the [person] key,
    pseudonymized; the release criteria are a starting set to tune.

    Without --census, --population or --region, each group's population is its own records (the most
    cautious assumption). The spec is written beside DATA as DATA's name with .toml; an existing one is
    kept unless --overwrite. Read its comments, then run 'deid-sql validate' on it.

    Example: deid-sql init demo/cohort.parquet --census demo/population.parquet count --out demo/mine.toml
    """
    given = [flag for flag, value in (("--census", census), ("--population", size), ("--region", region))
             if value is not None]
    if len(given) > 1:
        raise click.UsageError(f"give one of --census, --population and --region, not {' and '.join(given)}")
    population = Population(census=census[0] if census else None, count=census[1] if census else None,
                            size=size, region=region)
    target = out if out is not None else default_out(data)
    if target.resolve() == data.resolve():
        raise OutputError(f"--out {target} is the data file itself; give the spec another name")
    if target.exists() and not force:  # said before the data is read
        raise OutputError(f"{target} already exists; pass --overwrite to replace it (or --out FILE to write another)")
    starter = build(data, population, out, fmt=fmt, table=table)
    write(starter, force)
    _summary(starter)


def _summary(starter: Starter) -> None:
    qis = starter.qis
    click.echo(f"wrote {starter.out}: {len(starter.proposals)} columns, {starter.rows:,} rows")
    click.echo("  proposed QIs  " + (", ".join(f"{_shown(q.name)} ({q.describe()}"
                                               + (f", role {q.role}" if q.role else "")
                                               + (f", hierarchy {q.hierarchy})" if q.hierarchy else ")") for q in qis)
                                     or "none: declare at least one [[qi]] before validate"))
    for group, words in (("identifier", "identifiers"), ("review", "to review")):
        names = starter.dropped(group)
        if names:
            click.echo(f"  dropped       {', '.join(_shown(n) for n in names)} ({words})")
    person = starter.person
    if person is not None:
        click.echo(f"  person        {_shown(person.column)} ({person.persons:,} persons over {person.rows:,} rows; "
                   f"pseudonymized, key in ${SECRET_ENV}"
                   + (f"; order {_shown(person.order)})" if person.order is not None else ")"))
    click.echo(f"  population    {starter.population.words()}")
    click.echo("  release       " + ", ".join(criteria_lines({q.role for q in qis if q.role})))
    for note in starter.notes:
        click.echo(f"  note          {_shown(note, quote=False)}")
    spec = shlex.quote(str(starter.out))
    click.echo("next: read the spec's comments, then")
    if person is not None:  # validate and every release read the pseudonyms' key
        click.echo(f"  export {SECRET_ENV}=$({SECRET_HINT})  # once; keep the key, the same for every release")
    click.echo(f"  deid-sql validate {spec}")
    if qis:
        click.echo(f"  deid-sql anonymize {spec} --min-k 5 --max-suppressed-share 0.05")
        click.echo(f"  deid-sql materialize {spec} --levels LEVELS --suppress-below 5 --out release.parquet "
                   f"--report release.html")


def _shown(text: str, quote: bool = True) -> str:
    """A name as a terminal line shows it: as it is when printable, else quoted with escapes."""
    if text.isprintable() and (not quote or (text.strip() == text and "," not in text and "(" not in text)):
        return text
    return repr(text) if quote else text.encode("unicode_escape").decode("ascii")
