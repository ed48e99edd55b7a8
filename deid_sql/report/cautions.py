"""The report's cautions: what a reviewer must weigh even when the release passes its gate.

A gate judges the criteria the spec declares, nothing else: ``no_riskier_than = "safe-harbor"``
passes a release with k = 1, with records that are unique in it, or with records whose risk is
1, and a no-census estimate may have come from a fallback model.  A green "passed" alone would
hide that, so the summary lists every such finding, on a pass as on a failure:

* ``k1``: the smallest released group holds one record;
* ``sample_uniques``: records unique in the release (found with certainty by an attacker who
  knows the person is in the data, whatever the population-based figures say);
* ``high_risk``: records whose record risk under the spec's model is 0.5 or more;
* ``fallback``: a population-uniqueness estimate the page shows came from a fallback model
  (Dankar's rule taking Zayatz because Pitman or SNB could not be fitted);
* ``sensitive_unjudged``: a sensitive column released unchanged that no attribute criterion judges
  (``min_l``, ``max_confidence``…): a group may tell everyone in it its value (METHODS decision 15).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..release.unit import RECORDS, Unit
from .release_contents import HIGH_RISK, number

NAMES = {"pitman": "Pitman", "zayatz": "Zayatz", "snb": "SNB", "dankar": "Dankar"}


def cautions(figures: dict[str, Any], at_risk: int, model: dict[str, Any],
             no_census: dict[str, Any] | None, unit: Unit = RECORDS,
             unjudged: Sequence[str] = (), union: dict[str, Any] | None = None) -> list[dict[str, str]]:
    """Every caution of one release (``kind`` and ``text`` each), in the order above.

    ``figures`` are the release's (the gate's, after suppression), ``at_risk`` its records with a
    record risk of ``HIGH_RISK`` or more, ``model`` the report's ``risk.model`` and ``no_census``
    the report's ``risk.no_census`` (None with a census); ``unit`` the words of what the figures
    count (persons with ``[person]``); ``unjudged`` the sensitive columns no attribute criterion judges;
    ``union`` the release's figures with what its recipient already holds (``release.union``)."""
    out: list[dict[str, str]] = []
    if union is not None and union["k"] < figures["k"]:
        out.append({"kind": "union", "text": f"{union['words'][0].upper()}{union['words'][1:]}, the recipient can "
                                             f"link {unit.count(union['linked_persons'])} by their pseudonym: on "
                                             f"everything they then hold, the smallest group is {union['k']:,} "
                                             f"(this release alone: {figures['k']:,})."})
    released = figures["records"] - figures["suppressed"]
    if released > 0 and figures["k"] == 1:
        out.append({"kind": "k1", "text": f"k = 1: the smallest released group holds a single {unit.one}, so the "
                                          f"release is not k-anonymous for any k above 1."})
    uniques = figures["sample_uniques"]
    if uniques:
        out.append({"kind": "sample_uniques",
                    "text": f"{unit.count(uniques)} {'is' if uniques == 1 else 'are'} unique in the release: an "
                            f"attacker who knows a person is in the data and knows their quasi-identifiers finds "
                            f"{'that ' + unit.one if uniques == 1 else 'each of them'} with certainty (prosecutor "
                            f"risk 1), whatever the population-based risk says."})
    if at_risk:
        out.append({"kind": "high_risk",
                    "text": f"{unit.count(at_risk)} {'has' if at_risk == 1 else 'have'} "
                            f"{'a risk' if unit.persons else 'a record risk'} of {HIGH_RISK:g} or more under the "
                            f"risk model (highest {number(figures['max_record_risk'])}): "
                            f"{'it is' if at_risk == 1 else 'they are'} more likely re-identified than not."})
    estimate = model.get("estimate") or {}
    if estimate.get("fallback_from"):
        out.append({"kind": "fallback",
                    "text": f"The risk model's population estimate fell back: "
                            f"{NAMES.get(estimate['estimator'], estimate['estimator'])}'s rule took "
                            f"{NAMES.get(estimate['model'], estimate['model'])} because "
                            f"{NAMES.get(estimate['fallback_from'], estimate['fallback_from'])} could not be fitted "
                            f"({estimate['note']}); its figures rest on the fallback model."})
    for when, shown in _shown(no_census):
        dankar = shown.get("dankar") or {}
        if dankar.get("fallback_from") and not estimate.get("fallback_from"):
            out.append({"kind": "fallback",
                        "text": f"The Dankar estimate of population uniques{when} fell back to "
                                f"{NAMES.get(dankar['model'], dankar['model'])}: {dankar.get('note', '')}."})
    for column in unjudged:
        out.append({"kind": "sensitive_unjudged",
                    "text": f"Column {column} is released unchanged and no attribute criterion judges it: a "
                            f"released group whose {unit.many} all hold one value tells that value of each of "
                            f"them; add max_confidence or min_l under [release] (deid-sql help release)."})
    return out


def _shown(no_census: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    if not no_census:
        return []
    after = no_census.get("after_suppression")
    if after is None:
        return [("", no_census["before_suppression"])]
    return [(" before suppression", no_census["before_suppression"]), (" after suppression", after)]
