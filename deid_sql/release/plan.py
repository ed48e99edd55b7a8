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

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..compiler.suppression import Suppression
from ..domains.recoding import Recoding
from ..errors import PolicyError
from ..policies.lattice import Policy
from ..policies.levels import levels_recoding

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
    #: the policy text as the user gave it (``age:cuts=18,65``), before it was completed to every QI
    #: (``text``: ``age:cuts=18,65|sex:bottom|…``); None when it was not given as text
    typed: str | None = field(default=None, compare=False)

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
        """How the API call that reproduces a release builds this plan (the sidecar's ``api``):
        ``plan_of(problem, 'age:every=10', suppression=5)``; a recoding without a text (Safe
        Harbor's) is named by its readable form."""
        if self.levels is not None:
            args = f"levels={self.levels!r}"
        elif self.text is not None:
            args = repr(self.text)
        else:
            args = f"<recoding {self.readable}>"
        if self.suppression is not None:
            args += (f", suppression={self.suppression.below}" if self.suppression.below is not None
                     else f", suppression=<{self.suppression.rule}>")
        return f"plan_of(problem, {args})"


def plan_of(problem: Problem, policy: Policy | Recoding | str | None = None,
            suppression: Suppression | int | None = None, levels: str | None = None) -> ReleasePlan:
    """The release plan of ``policy`` (a policy, its text, or a recoding) or of a level vector
    ``levels`` on the spec's hierarchies — exactly one of the two — with ``suppression`` (k: groups
    of fewer than k records, or persons with ``[person]``; or a ``Suppression``).

    The one place a release's policy is resolved: the command line (``cli.options.release_plan``)
    and API callers build the plan here, once, and every release path below takes only the plan."""
    if (policy is None) == (levels is None):
        raise PolicyError("give the policy one way: a policy text (--policy P) or hierarchy levels (--levels L), "
                          "not both" if policy is not None else
                          "say what to release: a policy (--policy P, e.g. 'age:cuts=18,65|zip:top') or hierarchy "
                          "levels (--levels L, e.g. 'age:3|zip:1' on a spec with hierarchies)")
    rule = Suppression.of(suppression)
    if rule is not None and rule.below is not None and problem.spec.person is not None:
        rule = Suppression.smaller_than(rule.below, unit="persons")  # the groups count persons
    if levels is not None:
        names = problem.spec.qi_names
        x, recoding = levels_recoding(levels, names, problem.domains, problem.lattice.hierarchies,
                                      [q.cuts for q in problem.spec.qis])
        return ReleasePlan(recoding, None, readable_levels(names, x, recoding, problem.lattice.hierarchies), rule,
                           recoding.name)
    if isinstance(policy, Recoding):
        return ReleasePlan(problem.recoding(policy), None, policy.name or "recoding", rule)
    resolved = problem.item(policy)
    if isinstance(resolved, Policy):
        typed = policy.strip() if isinstance(policy, str) else None
        return ReleasePlan(resolved, resolved.text(), resolved.readable(), rule, typed=typed)
    return ReleasePlan(resolved, resolved.name, readable_recoding(problem.spec.qi_names, resolved), rule)


def readable_recoding(names: tuple[str, ...] | list[str], recoding: Recoding, shown: int = 6) -> str:
    """A recoding's groups in words, as ``Policy.readable`` gives a policy's: only groups of more
    than one value, each by its label and its values (``race: W-or-API = [White,
    Asian-Pac-Islander]``; a hierarchy level that groups non-adjacent values is such a recoding),
    ``original data`` when none."""
    parts = []
    for name, qi in zip(names, recoding.qis):
        groups = []
        for group, label in enumerate(qi.labels):
            members = qi.members(group)
            if members.size <= 1 or qi.domain is None:
                continue
            lo, hi = int(members[0]), int(members[-1])
            if hi - lo + 1 == members.size:  # adjacent values: as a policy names its band
                groups.append(qi.domain.readable_group(lo, hi))
            else:
                values = [qi.domain.text(int(p)) for p in members[:shown]]
                groups.append(f"{label} = [{', '.join(values)}{', …' if members.size > shown else ''}]")
        if groups:
            parts.append(f"{name}: {', '.join(groups)}")
    return "; ".join(parts) or "original data"


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
