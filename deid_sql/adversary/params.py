"""The adversary's economics: costs, gain, penalties, detection, prior, discount.

Defaults are the case study of seed 002 §3.5–3.6 (C_d = $100, C_l = $0, C_e = $10,
G = $8,000, C_p = $10,000 at most once, h0 = −4.59 so the first exploit is detected
with probability 0.01, prior 0.63).  Every value is checked here, so a solver never
sees a parameter set it cannot model; each message names the parameter and a fix.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ..errors import SpecError

SCENARIOS = ("known", "unknown")
RISKS = ("population", "adversary")


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
        problems = self.problems()
        if problems:
            raise SpecError(problems)

    def problems(self) -> list[str]:
        out: list[str] = []
        for name in ("access_cost", "link_cost", "exploit_cost", "gain", "penalty", "loss"):
            value = getattr(self, name)
            if not _number(value) or value < 0:
                out.append(f"adversary {name} = {value!r} must be a number ≥ 0 (dollars; e.g. {_DEFAULTS[name]})")
        for name in ("h0", "h1"):
            if not _number(getattr(self, name)):
                out.append(f"adversary {name} = {getattr(self, name)!r} must be a finite number")
        if _number(self.h1) and self.h1 < 0:
            out.append(f"adversary h1 = {self.h1!r} must be ≥ 0 (detection may only grow with attempts)")
        if not _number(self.prior) or not 0 < self.prior <= 1:
            out.append(f"adversary prior = {self.prior!r} must be in (0, 1] "
                       "(the share of the population in the external dataset, e.g. 0.63)")
        if not _number(self.discount) or not 0 < self.discount <= 1:
            out.append(f"adversary discount = {self.discount!r} must be in (0, 1] (1 = no discounting)")
        if self.max_penalties is not None and (not _integer(self.max_penalties) or self.max_penalties < 1):
            out.append(f"adversary max_penalties = {self.max_penalties!r} must be an integer ≥ 1 "
                       "(or \"unbounded\")")
        if self.external_size is not None and (not _integer(self.external_size) or self.external_size < 1):
            out.append(f"adversary external_size = {self.external_size!r} must be an integer ≥ 1 (people)")
        if self.scenario not in SCENARIOS:
            out.append(f"adversary scenario = {self.scenario!r} must be one of {', '.join(SCENARIOS)}")
        return out

    # -- model quantities -----------------------------------------------------------------
    @property
    def unbounded_penalties(self) -> bool:
        return self.max_penalties is None

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
    def from_mapping(cls, raw: dict[str, Any], where: str = "[adversary]") -> AdversaryParams:
        """Parameters from a spec table or CLI options; unknown keys and bad values are
        reported together."""
        names = {f.name for f in fields(cls)}
        problems = [f"unknown key {k!r} in {where}; allowed keys are {', '.join(sorted(names))}"
                    for k in raw if k not in names]
        values = {k: v for k, v in raw.items() if k in names}
        if values.get("max_penalties") in ("unbounded", "inf", "infinity"):
            values["max_penalties"] = None
        if problems:
            raise SpecError(problems)
        try:
            return cls(**values)
        except SpecError as err:
            raise SpecError([f"{where}: {p}" for p in err.problems]) from None


_DEFAULTS = {f.name: f.default for f in fields(AdversaryParams)}


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _integer(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
