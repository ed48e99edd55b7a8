"""``view`` of a spec that links tables: the set's views, key tables and record, all or none."""

from __future__ import annotations

from pathlib import Path

import click

from ..backends import engine_class
from ..release.targets import Target, file
from ..spec.file import Spec
from .options import echo_release, open_problem, release_plan
from .report import add_set, finish_release_report, prepare_release_report


def view_set(spec: Spec, policy: str | None, levels: str | None, db: Path | None, prefix: str, replace: bool,
             suppress_below: int | None, accept_risk: str | None, report: Path | None) -> None:
    """``view SET_SPEC --view PREFIX``: refused in one line before any data is read where the key
    table could not be protected (``sets.views.check_place``) or a name is taken."""
    from ..sets.views import check_place, create_set_views, set_view_names

    names = set_view_names(spec, prefix)
    check_place(spec, engine_class(spec.backend.engine), db, names)  # before the engine starts
    targets = [Target("view", db, name, replace, False, "--overwrite", "--view") for name in names.all]
    with open_problem(spec.path, targets=targets + file(report, replace)) as problem:
        plan = release_plan(problem, policy, levels, suppress_below)
        where = f"in {db}" if db is not None else f"in the {spec.backend.engine} engine"
        pending = prepare_release_report(problem, plan, report, replace, accept_risk,
                                         f"views {prefix}… {where} (a set of {len(spec.tables) + 1} tables)",
                                         whole_set=True)
        written = create_set_views(problem, plan, prefix, db, replace, accept_risk=accept_risk)
        click.echo(f"created {len(written.tables)} views ({written.rows:,} rows now) {where}, with the key "
                   f"table{'s' if len(written.keys) > 1 else ''} {', '.join(written.keys)}")
        for t in written.tables:
            click.echo(f"  {t.table}: {t.rows:,} rows")
        echo_release(written)
        if pending is not None:
            add_set(pending, written.record, f"table {written.sidecar}", spec)
        finish_release_report(pending, [], figures=written.figures)
