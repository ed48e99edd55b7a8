"""The risk model of a release in words, with its assumptions, its population and its papers.

A reviewer signs what the page says, so the report must describe the model that produced the
figures, never a default.  The description is chosen by the same inputs ``evaluate.riskmodel``
builds the record risk from — the spec's ``risk`` and where its population comes from (a census
table, summed sampling weights, a size or region, or the sample itself) — for every model the
spec can name: the census's (1/g)^γ (seed 001 eq. 1), the sample as its own population, sampling
weights, Benedetti–Franconi's E[1/F | f], the four population-uniqueness estimators (Pitman,
Zayatz, SNB and Dankar's rule, with the model Dankar's rule took on this very release), and
seed 002's economic adversary.  Each says what one record's risk is, what the figure "expected
re-identifications" counts under it, what the group-size chart can show (a counted population,
an estimate, or nothing), and which papers it comes from (authors, year, title, venue).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..release.unit import Unit

if TYPE_CHECKING:
    from ..problem import Problem

#: every paper the report may cite: authors, title, venue, year (``used_for`` is added per report)
PAPERS: dict[str, dict[str, Any]] = {
    "benitez2010": {"authors": "Kathleen Benitez, Grigorios Loukides, Bradley Malin",
                    "title": "Beyond Safe Harbor: Automatic Discovery of Health Information De-identification "
                             "Policy Alternatives",
                    "venue": "Proceedings of the 1st ACM International Health Informatics Symposium (IHI)",
                    "year": 2010},
    "xia2013": {"authors": "Weiyi Xia, Raymond Heatherly, Xiaofeng Ding, Jiuyong Li, Bradley Malin",
                "title": "Efficient Discovery of De-identification Policies Through a Risk-Utility Frontier",
                "venue": "Proceedings of the 3rd ACM Conference on Data and Application Security and Privacy "
                         "(CODASPY)", "year": 2013},
    "xia2017": {"authors": "Weiyi Xia", "title": "Optimizing the Privacy Risk - Utility Framework in Data Publication",
                "venue": "PhD dissertation, Vanderbilt University", "year": 2017},
    "benedetti1998": {"authors": "Roberto Benedetti, Luisa Franconi",
                      "title": "Statistical and Technological Solutions for Controlled Data Dissemination",
                      "venue": "Pre-proceedings of New Techniques and Technologies for Statistics (NTTS), "
                               "vol. 1, pp. 225–232", "year": 1998},
    "templ2015": {"authors": "Matthias Templ, Alexander Kowarik, Bernhard Meindl",
                  "title": "Statistical Disclosure Control for Micro-Data Using the R Package sdcMicro",
                  "venue": "Journal of Statistical Software 67(4)", "year": 2015},
    "zayatz1991": {"authors": "Laura V. Zayatz",
                   "title": "Estimation of the Percent of Unique Population Elements on a Microdata File Using the "
                            "Sample",
                   "venue": "Statistical Research Division Report Census/SRD/RR-91/08, U.S. Bureau of the Census",
                   "year": 1991},
    "hoshino2001": {"authors": "Nobuaki Hoshino",
                    "title": "Applying Pitman's Sampling Formula to Microdata Disclosure Risk Assessment",
                    "venue": "Journal of Official Statistics 17(4)", "year": 2001},
    "chen1998": {"authors": "Gong Chen, Sallie Keller-McNulty",
                 "title": "Estimation of Identification Disclosure Risk in Microdata",
                 "venue": "Journal of Official Statistics 14(1)", "year": 1998},
    "haas1995": {"authors": "Peter J. Haas, Jeffrey F. Naughton, S. Seshadri, Lynne Stokes",
                 "title": "Sampling-Based Estimation of the Number of Distinct Values of an Attribute",
                 "venue": "Proceedings of the 21st International Conference on Very Large Data Bases (VLDB)",
                 "year": 1995},
    "dankar2012": {"authors": "Fida Kamal Dankar, Khaled El Emam, Angelica Neisa, Tyson Roffey",
                   "title": "Estimating the Re-identification Risk of Clinical Data Sets",
                   "venue": "BMC Medical Informatics and Decision Making 12:66", "year": 2012},
}

UNIQUENESS = ("pitman", "zayatz", "snb", "dankar")
#: each population-uniqueness estimator: its name in words and the papers it rests on
ESTIMATORS: dict[str, tuple[str, tuple[str, ...]]] = {
    "pitman": ("Pitman's sampling formula fitted by maximum likelihood (Hoshino 2001)", ("hoshino2001",)),
    "zayatz": ("Zayatz's method (1991)", ("zayatz1991",)),
    "snb": ("the slide negative binomial model (Chen & Keller-McNulty 1998), K by Shlosser's estimator",
            ("chen1998", "haas1995")),
    "dankar": ("Dankar et al.'s selection rule (2012): Pitman when f ≤ 0.1, else the smaller of Zayatz and SNB",
               ("dankar2012", "hoshino2001", "zayatz1991", "chen1998", "haas1995")),
}
MODEL_NAMES = {"pitman": "Pitman", "zayatz": "Zayatz", "snb": "SNB", "dankar": "Dankar"}
ATTACKER = "The attacker knows the quasi-identifiers (QIs) of the target and nothing else the release hides."


def linking(unit: Unit) -> str:
    """The linking assumption, in the unit the figures count."""
    return (f"{unit.Many} are only linked through the released QI labels; the other released columns add no "
            f"identifying information.")


def unit_of(problem: Problem) -> Unit:
    """What the problem's figures count: persons with ``[person]``, else records."""
    return Unit.of(problem.spec.person)


def population_source(problem: Problem) -> str:
    """Where each released group's population size g comes from: ``census`` (counted in the
    population table), ``weights`` (the group's summed sampling weights: an estimate), or
    ``size`` (only the population's size is known: the model estimates without g, or takes g = m)
    or ``sample`` (the sample is its own population: g is the group's own sample count)."""
    if problem.spec.population is not None:
        return "census"
    if problem.spec.weights is not None and problem.population is not None:
        return "weights"
    return "size" if problem.spec.population_size is not None else "sample"


def population_sentence(problem: Problem) -> str:
    """The population in one sentence for a report without a census table (the Data section's
    population column; a census gets its table's path, rows and hash instead)."""
    spec = problem.spec
    n = float(problem.sample.total)
    size = _size_words(problem)
    u = unit_of(problem)
    if spec.risk in UNIQUENESS or spec.risk == "benedetti-franconi":
        return (f"no census: {size}, sampling fraction f = n/N = {n / problem.population_size:.4g}; the population "
                f"size of each released group is not counted but estimated by the risk model "
                f"({describe_key(spec.risk)})")
    if population_source(problem) == "weights":
        return (f"no census: {size}; each released group's population size is estimated by its summed sampling "
                f"weights (column {spec.weights!r})")
    if spec.population_size is not None:
        return (f"no census: {size}, but the risk model {spec.risk!r} takes the sample as its own population "
                f"(g = {u.many} in the released group); the population size is used only by the no-census "
                f"estimates shown for comparison")
    return f"none: the sample is its own population (g = {u.many} in the released group)"


def _size_words(problem: Problem) -> str:
    spec = problem.spec
    if spec.population_size is not None:
        from ..spec.population_size import describe

        return f"{describe(spec.population_size, spec.population_region)} (N)"
    if spec.weights is not None:
        return f"{problem.population_size:,.0f} people (N), the sum of the sampling weights (column {spec.weights!r})"
    return f"{problem.population_size:,.0f} people (N, the sample)"


def describe_key(risk: str) -> str:
    if risk == "benedetti-franconi":
        return "Benedetti–Franconi"
    if risk in ESTIMATORS:
        return ESTIMATORS[risk][0]
    return risk


def describe_model(problem: Problem, released_m: np.ndarray, harbor_note: str | None) -> dict[str, Any]:
    """The report's ``risk.model``: ``key`` (the spec's ``risk``), ``name``, ``gamma`` (None when the
    model has no γ), ``population`` and ``population_source``, ``record_risk`` (one record's risk in
    words), ``expected_reidentifications`` (what that figure counts under this model),
    ``group_sizes`` (what the group-size chart's second series is, or why there is none),
    ``estimate`` (a population-uniqueness fit on this release: the model taken, U, π, a fallback),
    ``assumptions``, ``adversary`` (seed 002's parameters and thresholds) and ``papers``.

    ``released_m``: the records of every released group, the suppressed group included (the
    histogram a dataset-level estimator fits, as the gate fits it)."""
    spec = problem.spec
    source = population_source(problem)
    u = unit_of(problem)
    if spec.risk == "adversary":
        out = _adversary(problem, source)
    elif spec.risk == "benedetti-franconi":
        out = _benedetti_franconi(problem)
    elif spec.risk in UNIQUENESS:
        out = _uniqueness(problem, released_m)
    elif spec.risk == "population":
        out = _population(problem, source)
    else:  # a risk model registered by a plugin: say what its registration says, claim nothing else
        from ..registry import RISK_MODELS

        summary = RISK_MODELS.entry(spec.risk).get("summary") or spec.risk
        out = {"name": f"{spec.risk}: {summary}", "gamma": None,
               "record_risk": f"r(g) of the registered risk model {spec.risk!r} for a group of g people",
               "expected_reidentifications": f"Σ m/g over the released groups (each {u.one} 1/g)",
               "assumptions": [ATTACKER, linking(u)], "papers": [], "estimate": None, "adversary": None}
    # the chart's second series: g as the model reads it, counted (census) or estimated (weights)
    series = {"census": "population (census people)", "weights": "summed weights (estimated population)"}
    group_sizes = series.get(source) if spec.risk not in UNIQUENESS else None
    if harbor_note:
        out["assumptions"].append(harbor_note + ".")
    population = (spec.population.describe() if spec.population is not None else population_sentence(problem))
    return {"key": spec.risk, "population": population, "population_source": source,
            "group_sizes": group_sizes, "group_sizes_note": _group_sizes_note(problem, source), **out}


def _group_sizes_note(problem: Problem, source: str) -> str:
    """What the group-size chart shows beside the sample's bars, in words."""
    risk = problem.spec.risk
    u = unit_of(problem)
    if risk in UNIQUENESS:
        return (f"each group's {u.many} in the sample only: there is no census, so no group's population size is "
                f"counted. The estimator reads this histogram of group sizes and estimates how many people are unique "
                f"in the population; only sample-unique {u.many} (groups of 1) can be")
    if source == "census":
        return f"each group's {u.many} in the sample and its people in the population (census table)"
    if source == "weights":
        return (f"each group's {u.many} in the sample and its summed sampling weights, the estimate of its "
                f"population size (no census: no group is counted in the population)")
    if risk == "benedetti-franconi":
        p = problem.record_risk.fraction
        return (f"each group's {u.many} in the sample only: there is no census, so no group's population size is "
                f"counted. Benedetti–Franconi does not need one: it takes the population size F of a group of m "
                f"{u.many} as unknown, m plus a negative binomial(m, p = {p:.4g}) count, and averages 1/F over it "
                f"(F̂ = m/p = m·N/n on average)")
    return (f"each group's {u.many} in the sample only: there is no census, and the risk model takes each group's "
            f"sample {u.many} as its population (g = m)")


def _population(problem: Problem, source: str) -> dict[str, Any]:
    spec = problem.spec
    gamma = float(spec.gamma)
    u = unit_of(problem)
    if source == "census":
        name = f"population-based {u.risk} (1/g)^γ, g counted in the census table"
        g = (f"g = max(census people, sample {u.many}) of its released group ({problem.population_total:,} people "
             f"in all)")
        where = (f"The population table counts every person the target could be; a released group covers "
                 f"g = max(census people, sample {u.many}) of them ({problem.population_total:,} people in all).")
    elif source == "weights":
        name = f"population-based {u.risk} (1/g)^γ, g estimated by summed sampling weights (no census)"
        g = f"g = the summed sampling weights (column {spec.weights!r}) of its released group"
        where = (f"No census: each {u.one} stands for as many people as its sampling weight (column "
                 f"{spec.weights!r}), so a released group's summed weights estimate its population size g.")
    else:
        name = f"sample-based {u.risk} (1/m)^γ: the sample is its own population (no census)"
        g = f"g = m, the {u.many} of its released group in the sample"
        where = (f"No census: the sample is its own population, so a released group of m {u.many} stands for m "
                 f"people (the prosecutor's view, where the attacker knows the target is in the data).")
    record = f"(1/g)^γ with γ = {gamma:g}, {g}"
    expected = (f"Σ m/g over the released groups: each {u.one} is re-identified with probability 1/g"
                + ("; with g = m this is the number of released groups" if source == "sample" else ""))
    return {"name": name, "gamma": gamma, "record_risk": record, "expected_reidentifications": expected,
            "assumptions": [ATTACKER, where, linking(u),
                            f"A {u.one} in a group of g people is re-identified with probability (1/g)^γ, "
                            f"γ = {gamma:g}."],
            "papers": [_cite("benitez2010", f"the population-based {u.risk} (1/g)^γ (eq. 1)"),
                       _cite("xia2013", "risk normalized by the original data's (eq. 2–3)")],
            "estimate": None, "adversary": None}


def _benedetti_franconi(problem: Problem) -> dict[str, Any]:
    model = problem.record_risk
    spec = problem.spec
    u = unit_of(problem)
    if model.weighted:
        p = (f"p = m / F̂, F̂ the group's summed sampling weights (column {spec.weights!r}), the Horvitz–Thompson "
             f"estimate of its population size")
    else:
        p = (f"p = n/N = {model.fraction:.4g} for every group (no weights: each {u.one} stands for N/n = "
             f"{1 / model.fraction:,.1f} people)")
    return {"name": "Benedetti–Franconi individual risk E[1/F | f = m] (no census: estimated from the sample)",
            "gamma": None,
            "record_risk": (f"E[1/F | f = m] for a {u.one} in a released group of m sample {u.many}, F its "
                            f"unknown population size, F − m negative binomial(m, p), {p}"),
            "expected_reidentifications": (f"Σ m·E[1/F | m] over the released groups: Benedetti–Franconi's global "
                                           f"risk, the expected number of {u.many} re-identified"),
            "assumptions": [
                ATTACKER,
                f"No census: no group's population size is counted. The sample is drawn from a population of "
                f"{_size_words(problem)}; sampling fraction f = n/N = {model.fraction:.4g}.",
                f"Given its m sample {u.many}, a group's population size F is m plus a negative binomial(m, p) "
                f"count (Benedetti & Franconi's superpopulation model); a {u.whose} risk is E[1/F], 1/F being the "
                f"chance of picking the target among the F people who share its released values.",
                "Closed forms for m = 1, 2, 3 and sdcMicro's approximation p/(m − 1 + p) for m ≥ 4; when p = 1 "
                "the group is its own population (risk 1/m).",
                linking(u)],
            "papers": [_cite("benedetti1998", "the individual risk E[1/F | f] without a census (the risk model)"),
                       _cite("templ2015", f"sdcMicro's approximation of E[1/F | f] for groups of 4 or more "
                                          f"{u.many}")],
            "estimate": None, "adversary": None}


def _uniqueness(problem: Problem, released_m: np.ndarray) -> dict[str, Any]:
    spec = problem.spec
    model = problem.record_risk
    u = unit_of(problem)
    words, keys = ESTIMATORS[spec.risk]
    estimate = None
    fitted = ""
    if np.asarray(released_m).size:
        est, share = model.estimate(np.asarray(released_m, dtype=np.float64))
        estimate = {"estimator": spec.risk, "model": est.model, "population_uniques": float(est.uniques),
                    "share": float(share), "note": est.note, "fallback_from": est.fallback_from}
        fitted = (f"On this release {MODEL_NAMES.get(spec.risk, spec.risk)} estimates {est.uniques:,.4g} population "
                  f"uniques, so a sample-unique {u.one} is unique in the population with probability "
                  f"π = {share:.4g}")
        if spec.risk == "dankar" and est.model != "dankar":  # "dankar": nothing to fit (no sample uniques)
            fitted += f"; the rule took {MODEL_NAMES.get(est.model, est.model)}"
        if est.fallback_from:
            fitted += (f", falling back from {MODEL_NAMES.get(est.fallback_from, est.fallback_from)}: "
                       f"{est.note}")
        fitted += "."
    assumptions = [
        ATTACKER,
        f"No census: no group's population size is counted. The sample is drawn from a population of "
        f"{_size_words(problem)}; sampling fraction f = n/N = {model.fraction:.4g}.",
        f"Only a {u.one} that is unique in the population can be re-identified with certainty, and a population "
        f"unique that is in the sample is a sample unique: a {u.one} sharing its released values with another "
        f"{u.one} has risk 0 here.",
        f"The number of population uniques U is estimated from the sample's histogram of group sizes by {words}.",
        linking(u)]
    if fitted:
        assumptions.append(fitted)
    return {"name": f"population uniqueness by {MODEL_NAMES.get(spec.risk, spec.risk)} (no census: estimated "
                    f"from the sample)", "gamma": None,
            "record_risk": (f"π = min(1, f·U/u1) for each sample-unique {u.one} (U the estimated population uniques "
                            f"of this release, u1 its sample uniques, f = n/N), 0 for every other {u.one}"),
            "expected_reidentifications": (f"f·U, at most u1: the expected number of sample {u.many} that are unique "
                                           f"in the population"),
            "assumptions": assumptions,
            "papers": [_cite(k, "the risk model: population uniques estimated from the sample") for k in keys],
            "estimate": estimate, "adversary": None}


def _adversary(problem: Problem, source: str) -> dict[str, Any]:
    from ..adversary.risk import thresholds

    params = problem.spec.feature("adversary")
    t = thresholds(params)
    u = unit_of(problem)
    risks = "risks per person" if u.persons else "record risks"
    g = {"census": "its released group's people in the census table",
         "weights": "its released group's summed sampling weights"}.get(source, f"its released group's sample "
                                                                                f"{u.many} (no census: g = m)")
    return {"name": "adversary: P(re-identification) × loss under the attacker's optimal attack",
            "gamma": None,
            "record_risk": (f"P(re-identification) × loss under the attacker's optimal policy (a Markov decision "
                            f"process) against an external data set holding max(1, round(prior · g)) of the g "
                            f"people of the {u.whose} group, g = {g}"),
            "expected_reidentifications": (f"Σ m/g over the released groups (each {u.one} 1/g): the population "
                                           f"figure, beside the adversary's {risks} (mean, maximum and "
                                           f"normalized risk)"),
            "assumptions": [
                ATTACKER,
                "The attacker is rational: pays to access an external data set, links and exploits only while the "
                "expected gain exceeds the costs and the expected penalties.",
                f"A share prior = {params.prior:g} of the population is in the external data set the attacker links.",
                f"Groups of fewer than k = {t.k} external matches are fully exploited; groups of at least "
                f"k′ = {t.k_prime} are not attacked at all.",
                linking(u)],
            "papers": [_cite("xia2017", f"the adversary's re-identification attack as a Markov decision process: "
                                        f"{u.risk} = P(re-identification) × loss, thresholds k and k′"),
                       _cite("xia2013", "risk normalized by the original data's (eq. 2–3)")],
            "estimate": None,
            "adversary": {"parameters": params.to_dict(), "describe": params.describe(),
                          "thresholds": {"k": t.k, "k_prime": t.k_prime, "k_prime_sunk": t.k_prime_sunk}}}


def _cite(key: str, used_for: str) -> dict[str, Any]:
    return {**PAPERS[key], "used_for": used_for}


def method_papers(problem: Problem, model: dict[str, Any], *, safe_harbor: bool = True,
                  frontier: bool = False) -> list[dict[str, Any]]:
    """The Method section's papers, only for what this report used: the lattice's, Safe Harbor's when
    the page compares with it (``safe_harbor``), the frontier's when it places the policy on one
    (``frontier``), the risk model's own, and the no-census estimators' when their figures are shown
    for comparison.  Each once, its uses joined."""
    cited: dict[str, dict[str, Any]] = {}

    def add(paper: dict[str, Any]) -> None:
        key = (paper["authors"], paper["year"], paper["title"])
        if key in cited:
            if paper["used_for"] not in cited[key]["used_for"]:
                cited[key]["used_for"] += "; " + paper["used_for"]
        else:
            cited[key] = dict(paper)

    add(_cite("benitez2010", ("HIPAA Safe Harbor as a policy and the reference it is compared with; " if safe_harbor
                              else "") + "policies as bit strings of kept boundaries"))
    add(_cite("xia2013", "the policy lattice, risk normalized by the original data's, KL-divergence utility loss"
                         + (", the risk-utility frontier and its searches" if frontier else "")))
    for paper in model["papers"]:
        add(paper)
    if problem.spec.no_census:
        add(_cite("benedetti1998", "Benedetti–Franconi's expected re-identifications in the no-census figures"))
        for risk in UNIQUENESS:
            for key in ESTIMATORS[risk][1]:
                add(_cite(key, "population uniques in the no-census figures"))
    return list(cited.values())
