"""What one release releases, whatever chose it: the one input of every release path.

A lattice policy (its text or object), HIPAA Safe Harbor's recoding, a full-domain level
vector (``--levels sex:0|age:3``, with the hierarchies' own labels), a policy text naming a
hierarchy level that groups non-adjacent values (``race:level=1``: a recoding, not a lattice
node), or an ``anonymize`` optimum with the groups it suppressed: each becomes a
``ReleasePlan`` — the recoding the compiler generalizes with, the text that names it again,
its readable form, and its suppression — and goes through the same compile → gate → write
path into a file, an engine table, a view, a dbt model or a policy file.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..errors import PolicyError
from ..levels import levels_recoding
from ..policy import Policy
from ..recoding import Recoding
from ..suppression import Suppression

if TYPE_CHECKING:
    from ..problem import Problem

LEVELS = "levels"  # the sidecar's and the policy file's key for a level vector's text


@dataclass(frozen=True)
class ReleasePlan:
    """A release's recoding (``item``), its names and its suppression.

    ``text`` is a policy text that parses back to ``item`` (None for a recoding without one, e.g.
    Safe Harbor's); ``levels`` the level-vector text when the recoding is a full-domain
    transformation (``sex:0|age:3``), which ``TransformationSpace.parse`` reads back."""

    item: Policy | Recoding
    text: str | None
    readable: str
    suppression: Suppression | None = None
    levels: str | None = None

    @property
    def recoding(self) -> Recoding:
        return self.item.recoding() if isinstance(self.item, Policy) else self.item

    def with_suppression(self, suppression: Suppression | int | None) -> ReleasePlan:
        return replace(self, suppression=Suppression.of(suppression))

    def describe(self) -> dict[str, Any]:
        """The plan as a sidecar's ``policy`` entry adds it (with the recoding's hash, by the gate)."""
        out: dict[str, Any] = {"text": self.text, "readable": self.readable}
        if self.levels is not None:
            out[LEVELS] = self.levels
        return out

    def repr_call(self) -> str:
        """How the API call that reproduces a release names this plan (in the sidecar's ``api``)."""
        if self.levels is not None:
            return f"plan_of(problem, levels={self.levels!r})"
        return repr(self.text or self.readable)


def plan_of(problem: Problem, item: ReleasePlan | Policy | Recoding | str | None = None,
            suppression: Suppression | int | None = None, levels: str | None = None) -> ReleasePlan:
    """The release plan of ``item`` (a plan, a policy, a recoding or a policy text) or of a level
    vector ``levels`` on the spec's hierarchies — exactly one of the two — with ``suppression``."""
    if (item is None) == (levels is None):
        raise PolicyError("give the policy one way: a policy text (--policy) or hierarchy levels (--levels), "
                          "not both" if item is not None else "give a policy (--policy P) or hierarchy levels "
                                                              "(--levels sex:0|age:3)")
    if isinstance(item, ReleasePlan):
        return item if suppression is None else item.with_suppression(suppression)
    rule = Suppression.of(suppression)
    if levels is not None:
        names = problem.spec.qi_names
        x, recoding = levels_recoding(levels, names, problem.domains, problem.lattice.hierarchies)
        return ReleasePlan(recoding, None, readable_levels(names, x, recoding, problem.lattice.hierarchies), rule,
                           recoding.name)
    if isinstance(item, Recoding):
        return ReleasePlan(problem.recoding(item), None, item.name or "recoding", rule)
    resolved = problem.item(item)
    if isinstance(resolved, Policy):
        return ReleasePlan(resolved, resolved.text(), resolved.readable(), rule)
    return ReleasePlan(resolved, resolved.name, resolved.name, rule)


def readable_levels(names: tuple[str, ...] | list[str], x: tuple[int, ...], recoding: Recoding,
                    hierarchies: Any) -> str:
    """``age: level 3 of 5 (20-29, …); sex: kept`` — a level vector in words."""
    parts = []
    for q, (name, level) in enumerate(zip(names, x)):
        hierarchy = hierarchies.get(name)
        top = (hierarchy.height if hierarchy is not None else 2) - 1
        labels = list(recoding.qis[q].labels)
        if level == 0:
            parts.append(f"{name}: kept")
        elif level == top and len(labels) == 1:
            parts.append(f"{name}: not released ({labels[0]!r})")
        else:
            shown = ", ".join(labels[:4]) + (", …" if len(labels) > 4 else "")
            parts.append(f"{name}: level {level} of {top} ({shown})")
    return "; ".join(parts)
