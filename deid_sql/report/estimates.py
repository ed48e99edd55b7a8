"""One headline risk: the gate's model, named, and what the other estimators on the page say.

Without a census the page shows several estimates of the same risk: the model the gate judged
with (the spec's ``risk``), every population-uniqueness estimator and Benedetti–Franconi.  They
may disagree (Dankar's rule can find no population unique where Benedetti–Franconi expects 1.6
re-identifications), and a page whose headline says 0 while a table below says 1.63 reads as a
contradiction.  So the headline gives the gate's figure with the model's name, and whenever the
estimators shown disagree, the summary states the range and the cautions name the most
pessimistic estimator with its figure.

Every estimator's expected re-identifications is computed here from the figures the page's
table shows (``nocensus.risk.figures``): f·U, at most the sample uniques u1, for a
population-uniqueness estimator (Σ m·π over the sample uniques, π = min(1, f·U/u1), the figure
the gate computes under it) and Benedetti–Franconi's Σ m·E[1/F | m].
"""

from __future__ import annotations

from typing import Any

from .release_contents import number

UNIQUENESS = ("pitman", "zayatz", "snb", "dankar")
NAMES = {"pitman": "Pitman", "zayatz": "Zayatz", "snb": "SNB", "dankar": "Dankar's rule",
         "benedetti_franconi": "Benedetti–Franconi"}
RELATIVE = 1e-9  # two figures closer than this (relative to the larger, or 1) are the same figure


def short_name(model: dict[str, Any]) -> str:
    """The gate's risk model in a few words, for the headline (``risk.model``)."""
    key, source = model["key"], model.get("population_source")
    if key == "population":
        return {"census": "population-based (1/g)^γ, g counted in the census",
                "weights": "population-based (1/g)^γ, g from the sampling weights"}.get(
            source, "sample-based (1/m)^γ, the sample its own population")
    if key == "benedetti-franconi":
        return "Benedetti–Franconi"
    if key in UNIQUENESS:
        taken = (model.get("estimate") or {}).get("model")
        name = NAMES[key]
        took = key == "dankar" and taken in ("pitman", "zayatz", "snb")
        return f"{name} (took {NAMES[taken]})" if took else name
    if key == "adversary":
        return "the economic adversary (Xia 2017)"
    return str(key)


def add_expected(no_census: dict[str, Any] | None) -> None:
    """Each estimator's expected re-identifications, in place, beside its population uniques
    (``expected_reidentifications``: min(u1, f·U)) in each column of the no-census table."""
    for fig in _columns(no_census):
        f, u1 = fig["sampling_fraction"], fig["sample_uniques"]
        for key in UNIQUENESS:
            e = fig[key]
            if "error" not in e:
                e["expected_reidentifications"] = min(float(u1), f * float(e["population_uniques"]))


def estimates(figures: dict[str, Any], model: dict[str, Any], no_census: dict[str, Any] | None
              ) -> dict[str, Any]:
    """The report's ``risk.estimates``: ``gate`` (the model the gate used: ``key``, ``name`` and its
    ``expected_reidentifications``, the headline's figure), ``estimators`` (each estimate the page
    shows of the released groups: ``key``, ``name``, ``expected_reidentifications``), ``range``
    (lowest and highest of all of them), ``disagree`` and ``most_pessimistic`` (the estimator with
    the highest figure).  Without a census table of estimators only the gate's figure is shown."""
    gate = {"key": model["key"], "name": short_name(model),
            "expected_reidentifications": float(figures["expected_reidentifications"])}
    shown: list[dict[str, Any]] = []
    columns = _columns(no_census)
    if columns:
        fig = columns[-1]  # the released groups: after suppression when the release suppresses
        for key in UNIQUENESS:
            if "expected_reidentifications" in fig[key]:
                shown.append({"key": key, "name": NAMES[key],
                              "expected_reidentifications": fig[key]["expected_reidentifications"]})
        shown.append({"key": "benedetti-franconi", "name": NAMES["benedetti_franconi"],
                      "expected_reidentifications": float(fig["benedetti_franconi"]["expected_reidentifications"])})
    values = [gate["expected_reidentifications"], *(e["expected_reidentifications"] for e in shown)]
    low, high = min(values), max(values)
    disagree = high - low > RELATIVE * max(1.0, abs(high))
    # the gate's model first: of equal figures, the one the headline already gives is named
    candidates = [{"key": gate["key"], "name": f"{gate['name']} (the gate's model)",
                   "expected_reidentifications": gate["expected_reidentifications"], "gate": True},
                  *({**e, "gate": False} for e in shown)]
    pessimistic = max(candidates, key=lambda e: e["expected_reidentifications"]) if shown else None
    return {"gate": gate, "estimators": shown, "range": [low, high], "disagree": disagree,
            "most_pessimistic": pessimistic if disagree else None}


def disagreement_sentence(e: dict[str, Any]) -> str | None:
    """The summary's sentence when the estimators disagree, else None."""
    if not e["disagree"]:
        return None
    low, high = e["range"]
    worst = e["most_pessimistic"]
    highest = ("the gate's model the highest" if worst["gate"] else
               f"the highest by {worst['name']}; the headline gives the gate's model's")
    return (f"the estimators on this page disagree: expected re-identifications range from {number(low)} to "
            f"{number(high)}, {highest}")


def disagreement_caution(e: dict[str, Any]) -> dict[str, str] | None:
    """The caution naming the most pessimistic estimator and its figure, when the estimators disagree."""
    if not e["disagree"]:
        return None
    worst, gate = e["most_pessimistic"], e["gate"]
    low, high = e["range"]
    where = ("the gate's model is the most pessimistic estimate on this page" if worst["gate"] else
             f"the most pessimistic estimator on this page, {worst['name']}, expects "
             f"{number(worst['expected_reidentifications'])}")
    return {"kind": "estimators_disagree",
            "text": f"The risk estimates disagree: the gate judged with {gate['name']}, which expects "
                    f"{number(gate['expected_reidentifications'])} re-identifications; {where} (range "
                    f"{number(low)} to {number(high)}). The estimators rest on different assumptions about the "
                    f"unseen population (Without a census, below); weigh the highest figure before signing."}


def _columns(no_census: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not no_census:
        return []
    return [c for c in (no_census["before_suppression"], no_census.get("after_suppression")) if c]
