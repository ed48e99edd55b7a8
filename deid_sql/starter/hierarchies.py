"""Hierarchy files found beside the data, ARX's way: ``<data stem>_hierarchy_<column>.csv``.

A custodian coming from ARX keeps one generalization hierarchy per quasi-identifier beside the
data (ARX's own Adult example: ``adult_hierarchy_age.csv``).  ``init`` attaches such a file to
the QI it proposes for that column, so ``anonymize`` searches the file's levels rather than only
"kept" and "*", but only when the file reads as a hierarchy and covers every value of the QI's
domain: a spec that ``validate`` refuses is no start.  A file for a column ``init`` does not
propose as a QI is named in that column's review note, since the file says someone treated it
as one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..domains.hierarchy import Hierarchy
from ..errors import DeidError
from .detect import Proposal, QIProposal

KINDS = ("integer", "category", "zip")  # the kinds whose values a hierarchy file spells as the domain does


def candidates(data: Path, column: str) -> list[Path]:
    """Where a hierarchy of ``column`` may be, in the order looked at: none for a column whose name
    cannot be part of a file name (a slash or backslash, which would name another folder, or NUL),
    whatever the data's columns are called."""
    if any(c in column for c in ("/", "\\", "\0")):
        return []
    return [data.with_name(f"{data.stem}_hierarchy_{column}.csv"), data.with_name(f"hierarchy_{column}.csv")]


def found(data: Path, column: str) -> Path | None:
    """The first hierarchy file of ``column`` beside ``data``, or None (also for a name the file
    system refuses, e.g. longer than it allows)."""
    for path in candidates(data, column):
        try:
            if path.is_file():
                return path
        except (OSError, ValueError):  # a name too long for the file system, or one it cannot hold
            continue
    return None


def domain_values(qi: QIProposal) -> list[str] | None:
    """The QI's domain values as a hierarchy file spells them (None: not listed in the spec)."""
    if qi.kind == "integer":
        return [str(v) for v in range(int(qi.min), int(qi.max) + 1)]
    return list(qi.values) if qi.values is not None else None


def attach(data: Path, proposals: list[Proposal], relative: Callable[[Path], str]) -> None:
    """Attach each proposed QI's hierarchy file, or say in its notes why not; name a file of a
    column dropped for review in its reason.  ``relative`` turns a path into the spec's spelling."""
    for proposal in proposals:
        path = found(data, proposal.column)
        if path is None:
            continue
        qi = proposal.qi
        if qi is None:
            if proposal.group == "review":
                proposal.reason += f"; its hierarchy is beside the data: hierarchy = \"{relative(path)}\" on its [[qi]]"
            continue
        problem = _problem(path, qi)
        if problem is None:
            qi.hierarchy = relative(path)
            qi.notes.append(f"hierarchy: {path.name} beside the data (its levels are what anonymize searches; "
                            f"validate checks its labels)")
        else:
            qi.notes.append(f"{path.name} beside the data is not attached: {problem}")


def _problem(path: Path, qi: QIProposal) -> str | None:
    if qi.kind not in KINDS:
        return f"a {qi.kind} QI is generalized by its cuts, not a file"
    try:
        hierarchy = Hierarchy.read(path)
    except (DeidError, OSError, UnicodeDecodeError) as e:
        return str(e).splitlines()[0]
    values = domain_values(qi)
    if values is None:
        return "the QI's values are read from the data at each load; list them first"
    missing = [v for v in values if v not in hierarchy.rows]
    if missing:
        shown = ", ".join(missing[:3]) + (", …" if len(missing) > 3 else "")
        return f"it has no row for {len(missing):,} of the domain's values ({shown})"
    return None
