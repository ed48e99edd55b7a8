"""The adversary's economics: costs, gain, penalties, detection, prior, discount.

Defaults are the case study of seed 002 §3.5–3.6 (C_d = $100, C_l = $0, C_e = $10,
G = $8,000, C_p = $10,000 at most once, h0 = −4.59 so the first exploit is detected
with probability 0.01, prior 0.63).  Every value is checked here, so a solver never
sees a parameter set it cannot model; each message names the parameter and a fix.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ..errors import Problems
from ..spec.sections import SectionContext

SCENARIOS = ("known", "unknown")


@dataclass(frozen=True)
class AdversaryParams:
    """One adversary (seed 002 eq. 3.2–3.4; METHODS.md decision 7).

    ``max_penalties`` is n_f (``None`` = no bound); ``external_size`` is the size n of the
    external dataset (the unknown-group belief is Binomial(n, g / population total));
    ``loss`` is the publisher's loss L_reid per re-identification (eq. 3.1).
    """

    access_cost: float = 100.0
    link_cost: float = 0.0
    exploit_cost: float = 10.0
    gain: float = 8000.0
    penalty: float = 10000.0
    max_penalties: int | None = 1
    h0: float = -4.59
    h1: float = 0.0
    prior: float = 0.63
    discount: float = 1.0
    external_size: int | None = None
    loss: float = 1.0
    scenario: str = "known"

    def __post_init__(self) -> None:
        problems = Problems()
        _check(asdict(self), problems, "")
        problems.raise_if_any()

    def problems(self) -> list[str]:
        """What is wrong with these values (one line each; empty when the model can take them)."""
        problems = Problems()
        _check(asdict(self), problems, "")
        return list(problems)

    # -- model quantities -----------------------------------------------------------------
    @property
    def scale(self) -> float:
        """The size of the money involved: ties are judged relative to it."""
        return max(1.0, self.gain, self.penalty, self.access_cost, self.exploit_cost, self.link_cost)

    @property
    def tie(self) -> float:
        """An action must beat stopping by more than this to be chosen (ties → terminate)."""
        return 1e-9 * self.scale

    def with_changes(self, **changes: Any) -> AdversaryParams:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["max_penalties"] = "unbounded" if self.max_penalties is None else self.max_penalties
        return out

    def describe(self) -> str:
        nf = "∞" if self.max_penalties is None else str(self.max_penalties)
        return (f"C_d={self.access_cost:g} C_l={self.link_cost:g} C_e={self.exploit_cost:g} G={self.gain:g} "
                f"C_p={self.penalty:g} n_f={nf} h0={self.h0:g} h1={self.h1:g} prior={self.prior:g} "
                f"discount={self.discount:g}")

    @classmethod
    def parse(cls, raw: Mapping[str, Any], problems: Problems, where: str = "[adversary]") -> AdversaryParams:
        """Parameters from a spec table or CLI options; unknown keys and bad values all go to
        ``problems`` (the defaults are returned when there are any: the caller refuses anyway)."""
        names = {f.name for f in fields(cls)}
        before = len(problems)
        problems.unknown_keys(dict(raw), names, where)
        values = {k: v for k, v in raw.items() if k in names}
        if values.get("max_penalties") in ("unbounded", "inf", "infinity"):
            values["max_penalties"] = None
        _check({**_DEFAULTS, **values}, problems, where)
        return cls(**values) if len(problems) == before else cls()

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], where: str = "[adversary]") -> AdversaryParams:
        """``parse`` on its own: one ``SpecError`` naming every unknown key and bad value."""
        problems = Problems()
        params = cls.parse(raw, problems, where)
        problems.raise_if_any()
        return params


_DEFAULTS = {f.name: f.default for f in fields(AdversaryParams)}


def parse_section(data: Mapping[str, Any], context: SectionContext, problems: Problems) -> AdversaryParams:
    """The spec's ``[adversary]`` (registered in ``adversary/plugin.py``): the attacker's parameters,
    the case study's defaults when the spec has none."""
    raw = data.get("adversary", {})
    if not isinstance(raw, dict):
        problems.append("adversary must be a table: [adversary] with gain = 8000, penalty = 10000, …")
        return AdversaryParams()
    return AdversaryParams.parse(raw, problems)


def _check(values: Mapping[str, Any], problems: Problems, where: str) -> None:
    """Add a line to ``problems`` for each value the model cannot take (``where`` prefixes it)."""
    def add(what: str) -> None:
        if where:
            problems.add(where, what)
        else:
            problems.append(what)

    for name in ("access_cost", "link_cost", "exploit_cost", "gain", "penalty", "loss"):
        value = values[name]
        if not _number(value) or value < 0:
            add(f"adversary {name} = {value!r} must be a number ≥ 0 (dollars; e.g. {_DEFAULTS[name]})")
    for name in ("h0", "h1"):
        if not _number(values[name]):
            add(f"adversary {name} = {values[name]!r} must be a finite number")
    h1, prior, discount = values["h1"], values["prior"], values["discount"]
    if _number(h1) and h1 < 0:
        add(f"adversary h1 = {h1!r} must be ≥ 0 (detection may only grow with attempts)")
    if not _number(prior) or not 0 < prior <= 1:
        add(f"adversary prior = {prior!r} must be in (0, 1] "
            "(the share of the population in the external dataset, e.g. 0.63)")
    if not _number(discount) or not 0 < discount <= 1:
        add(f"adversary discount = {discount!r} must be in (0, 1] (1 = no discounting)")
    max_penalties, external_size = values["max_penalties"], values["external_size"]
    if max_penalties is not None and (not _integer(max_penalties) or max_penalties < 1):
        add(f"adversary max_penalties = {max_penalties!r} must be an integer ≥ 1 (or \"unbounded\")")
    if external_size is not None and (not _integer(external_size) or external_size < 1):
        add(f"adversary external_size = {external_size!r} must be an integer ≥ 1 (people)")
    if values["scenario"] not in SCENARIOS:
        add(f"adversary scenario = {values['scenario']!r} must be one of {', '.join(SCENARIOS)}")


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _integer(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
