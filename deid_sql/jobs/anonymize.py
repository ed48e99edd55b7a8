"""Full-domain anonymization as a job: find the optimal transformation, then write it.

The optimum comes from a traversal of the lattice of transformations: by default the path search
(``search/paths.py``), or the best-first branch and bound (``search/bfs.py``); the output is
the core compiler's generalizing query with every record of a suppressed group turned
into ``*`` in each QI and flagged in ``deid_suppressed`` — the groups suppressed are
exactly those the evaluator suppressed, listed as label tuples, so the release matches
the reported statistics whatever the privacy model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from .. import progress
from ..compiler.suppression import Suppression
from ..errors import DeidError
from ..fulldomain import (
    KL,
    T_DISTANCES,
    AverageRisk,
    Confidence,
    Discernibility,
    DistinctLDiversity,
    EntropyLDiversity,
    KAnonymity,
    Loss,
    NonUniformEntropy,
    Presence,
    PrivacyModel,
    RecursiveCLDiversity,
    TCloseness,
    TransformationSpace,
    TransformEvaluator,
    UnionKAnonymity,
)
from ..problem import Problem
from ..release.plan import ReleasePlan, plan_of
from ..release.unit import RECORDS, Unit
from ..search.bfs import STORES, BFSResult
from ..search.paths import DEFAULT_TRAVERSAL, TRAVERSALS
from .earlier import EarlierReleases, earlier_releases

if TYPE_CHECKING:
    from ..release.output import Written

METRICS = {"loss": Loss, "nue": NonUniformEntropy, "dm": Discernibility, "kl": KL}
FLAG = "deid_suppressed"


@dataclass
class Anonymization:
    """The search's result with what is needed to write and report it."""

    result: BFSResult
    space: TransformationSpace
    evaluator: TransformEvaluator
    models: tuple[PrivacyModel, ...] = ()
    limit: float = 0.0  # the share of records that may be suppressed
    metric: str = "loss"
    traversal: str = DEFAULT_TRAVERSAL

    @property
    def levels(self) -> tuple[int, ...] | None:
        return self.result.optimum.levels if self.result.optimum is not None else None


def privacy_models(k: int | None = None, l: int | None = None, sensitive: str | None = None,  # noqa: E741
                   risk: float | None = None, *, min_entropy_l: float | None = None,
                   recursive_cl: Sequence[float] | None = None, max_t: float | None = None,
                   t_distance: str | None = None, max_confidence: float | None = None,
                   max_presence: float | None = None, ignore_values: Sequence[str | None] = (),
                   order: Sequence[str | None] | None = None, hierarchy: str | None = None) -> list[PrivacyModel]:
    """The privacy models of the flags (or the spec's ``[release]`` criteria), named after the
    ``[release]`` keys: ``k`` min_k, ``l`` min_l, ``risk`` the mean record risk, and the attribute
    criteria of decision 15 on the ``sensitive`` column (``hierarchy``: the column's hierarchy file,
    for ``t_distance = "hierarchical"``; ``order``: its values in order, for "ordered")."""
    models: list[PrivacyModel] = []
    if k is not None:
        models.append(KAnonymity(k))
    attribute = {"--min-l": l, "--min-entropy-l": min_entropy_l, "--recursive-cl": recursive_cl, "--max-t": max_t,
                 "--max-confidence": max_confidence}
    given = [flag for flag, value in attribute.items() if value is not None]
    if given and not sensitive:
        raise DeidError(f"{given[0]} needs --sensitive COLUMN: the confidential column whose values it judges")
    if t_distance is not None and max_t is None:
        raise DeidError("--t-distance is the distance of --max-t; give --max-t T too")
    ignore = tuple(ignore_values)
    if sensitive and l is not None:
        models.append(DistinctLDiversity(l, sensitive, ignore))
    if sensitive and min_entropy_l is not None:
        models.append(EntropyLDiversity(min_entropy_l, sensitive, ignore))
    if sensitive and recursive_cl is not None:
        if isinstance(recursive_cl, str) or len(recursive_cl) != 2:
            raise DeidError(f"recursive_cl = {recursive_cl!r} must be two numbers [c, l], e.g. [3, 2]")
        models.append(RecursiveCLDiversity(recursive_cl[0], recursive_cl[1], sensitive, ignore))
    if sensitive and max_t is not None:
        if t_distance is None:
            raise DeidError(f"--max-t needs --t-distance: one of {', '.join(T_DISTANCES)} (the spec's t_distance)")
        models.append(TCloseness(max_t, sensitive, t_distance, ignore, order=order, hierarchy_file=hierarchy))
    if sensitive and max_confidence is not None:
        models.append(Confidence(max_confidence, sensitive, ignore))
    if max_presence is not None:
        models.append(Presence(max_presence))
    if risk is not None:
        models.append(AverageRisk(risk))
    if not models:
        raise DeidError("give a privacy model: --min-k K, --min-l L --sensitive COLUMN, or --max-mean-record-risk R "
                        "(or the spec's [release] criteria)")
    return models


def spec_models(problem: Problem) -> list[PrivacyModel]:
    """The privacy models of the spec's ``[release]`` criteria, for ``anonymize SPEC`` without a
    privacy flag: ``min_k`` as k-anonymity and each attribute criterion of a sensitive column
    (``contract.attribute``'s limits: ``ignore_values``, ``order``, ``hierarchy`` included) as its
    model; ``max_presence`` as δ-presence (the smallest one given).  The other criteria (risk limits,
    ``no_riskier_than``) are not search models: the release gate still checks them on the output."""
    release = problem.spec.release
    limits = {column: lim for column, lim in release.attribute.items() if lim.declared}
    judged = {column: lim for column, lim in limits.items() if [key for key in lim.keys() if key != "max_presence"]}
    if len(judged) > 1:
        raise DeidError(f"[release] has attribute criteria on several sensitive columns ({', '.join(sorted(judged))}); "
                        f"the search judges one — give its criteria as flags with --sensitive COLUMN")
    source = set(problem.columns)
    for column in judged:
        if column not in source:
            raise DeidError(f"[release] judges sensitive column {column!r}, which is not in the source; the search "
                            f"judges the source's columns — give the criteria as flags with --sensitive COLUMN")
    presence = [lim.max_presence for lim in limits.values() if lim.max_presence is not None]
    models: list[PrivacyModel] = []
    if judged:
        (column, lim), = judged.items()
        text = tuple(None if v is None else str(v) for v in lim.ignore_values)
        order = tuple(None if v is None else str(v) for v in lim.order) if lim.order is not None else None
        models = privacy_models(release.min_k, lim.min_l, column, min_entropy_l=lim.min_entropy_l,
                                recursive_cl=lim.recursive_cl, max_t=lim.max_t, t_distance=lim.t_distance,
                                max_confidence=lim.max_confidence, max_presence=min(presence, default=None),
                                ignore_values=text, order=order,
                                hierarchy=str(lim.hierarchy) if lim.hierarchy is not None else None)
    elif release.min_k is not None or presence:
        models = privacy_models(release.min_k, max_presence=min(presence, default=None))
    if not models:
        raise DeidError("give a privacy model: --min-k K, --min-l L --sensitive COLUMN, or --max-mean-record-risk R, "
                        "or put min_k or an attribute criterion in the spec's [release]")
    return models


def with_earlier(models: list[PrivacyModel], earlier: EarlierReleases | None) -> list[PrivacyModel]:
    """``models`` with k-anonymity of what the recipient holds with the earlier releases
    (``UnionKAnonymity``, at the models' k) when there are earlier releases and a k to judge."""
    k = next((m.k for m in models if isinstance(m, KAnonymity)), None)
    if earlier is None or k is None or searches_union(models):
        return models
    return [*models, UnionKAnonymity(k, earlier.cells, earlier.recipient, earlier.releases, earlier.before)]


def searches_union(models: Sequence[PrivacyModel]) -> bool:
    """Do ``models`` keep k over what the recipient holds (``with_earlier`` found a k to judge)?"""
    return any(isinstance(m, UnionKAnonymity) for m in models)


def anonymize(problem: Problem, models: list[PrivacyModel], suppression: float = 0.0, metric: str = "loss",
              time_limit: float | None = None, store: str = "tree",
              traversal: str = DEFAULT_TRAVERSAL) -> Anonymization:
    """The globally optimal full-domain transformation (or the best within ``time_limit``), found by
    ``traversal`` (``search/paths.py``'s TRAVERSALS: the same optimal quality whichever, but among
    equally good transformations each may pick another, so a rerun uses the recorded one).  Give
    ``UnionKAnonymity`` among ``models`` (``with_earlier``) to search on what the recipient holds."""
    if metric not in METRICS:
        raise DeidError(f"unknown quality metric {metric!r}; use {', '.join(METRICS)}")
    if store not in STORES:
        raise DeidError(f"unknown property store {store!r}; use {', '.join(STORES)}")
    if traversal not in TRAVERSALS:
        raise DeidError(f"unknown traversal {traversal!r}; use {', '.join(TRAVERSALS)}")
    space = TransformationSpace(problem)
    evaluator = TransformEvaluator(problem, models, METRICS[metric](), suppression, space=space)
    with progress.counting(f"searching {space.size:,} transformations", unit="checked") as checked:
        result = TRAVERSALS[traversal](space, evaluator, STORES[store], time_limit, checked)
    return Anonymization(result, space, evaluator, tuple(models), float(suppression), metric, traversal)


def model_parameters(models: Sequence[PrivacyModel]) -> dict[str, Any]:
    """The privacy models as ``privacy_models``' keyword arguments (recorded in the sidecar, so a
    report of the release can run the same deterministic search again)."""
    out: dict[str, Any] = {"k": None, "l": None, "sensitive": None, "risk": None}
    for model in models:
        if isinstance(model, UnionKAnonymity):  # run again on the state before the same ledger entry
            out["earlier"] = {"recipient": model.recipient, "before": model.before, "releases": list(model.releases)}
        elif isinstance(model, KAnonymity):
            out["k"] = model.k
        elif isinstance(model, AverageRisk):
            out["risk"] = model.threshold
        elif isinstance(model, Presence):
            out["max_presence"] = model.delta
        else:
            out["sensitive"] = model.sensitive
            if getattr(model, "ignore_values", ()):
                out["ignore_values"] = list(model.ignore_values)  # type: ignore[attr-defined]
            if isinstance(model, DistinctLDiversity):
                out["l"] = model.l
            elif isinstance(model, EntropyLDiversity):
                out["min_entropy_l"] = model.l
            elif isinstance(model, RecursiveCLDiversity):
                out["recursive_cl"] = [model.c, model.l]
            elif isinstance(model, Confidence):
                out["max_confidence"] = model.alpha
            elif isinstance(model, TCloseness):
                out["max_t"], out["t_distance"] = model.t, model.distance
                if model.order is not None:
                    out["order"] = list(model.order)
                if model.hierarchy_file is not None:
                    out["hierarchy"] = model.hierarchy_file
    return out


def model_words(models: Sequence[PrivacyModel]) -> str:
    """The privacy models in words, e.g. ``k-anonymity (k = 5) and average risk at most 0.05``."""
    words = []
    for model in models:
        if isinstance(model, UnionKAnonymity):
            n = len(model.releases)
            words.append(f"k-anonymity with the {n} earlier release{'s' if n != 1 else ''} to {model.recipient!r} "
                         f"(k = {model.k})")
        elif isinstance(model, KAnonymity):
            words.append(f"k-anonymity (k = {model.k})")
        elif isinstance(model, DistinctLDiversity):
            words.append(f"distinct ℓ-diversity (ℓ = {model.l} on {model.sensitive!r})")
        elif isinstance(model, EntropyLDiversity):
            words.append(f"entropy ℓ-diversity (ℓ = {model.l:g} on {model.sensitive!r})")
        elif isinstance(model, RecursiveCLDiversity):
            words.append(f"recursive (c,ℓ)-diversity (c = {model.c:g}, ℓ = {model.l} on {model.sensitive!r})")
        elif isinstance(model, TCloseness):
            words.append(f"t-closeness (t = {model.t:g}, {model.distance} distance, on {model.sensitive!r})")
        elif isinstance(model, Confidence):
            words.append(f"a confidence bound (at most {model.alpha:g} of a group holding one value "
                         f"of {model.sensitive!r})")
        elif isinstance(model, Presence):
            words.append(f"δ-presence (δ = {model.delta:g})")
        elif isinstance(model, AverageRisk):
            words.append(f"average record risk at most {model.threshold:g}")
    return " and ".join(words)


def release_suppression(run: Anonymization, unit: Unit = RECORDS) -> Suppression:
    """The optimum's suppression as the report and sidecar describe it: the groups the search
    suppressed, the rule in words (``unit``: persons with ``[person]``, whose rows all go with
    them), and the search's parameters (to run it again)."""
    groups = suppressed_groups(run)
    what = "row" if unit.persons else "record"
    rule = (f"every {what} of a group that fails {model_words(run.models)} shows '*' in each QI (and "
            f"deid_suppressed = true): {len(groups):,} group(s) chosen by the search, at most "
            f"{run.limit:.1%} of the {unit.many} allowed")
    return Suppression.of_groups(groups, rule, {"anonymize": {
        "models": model_parameters(run.models), "suppression": run.limit, "metric": run.metric,
        "traversal": run.traversal, "levels": list(run.levels) if run.levels is not None else None}})


#: the traversal of a sidecar that records none: every release before traversals were a choice
RECORDED_BEFORE_TRAVERSALS = "best-first"


def rerun(problem: Problem, recorded: dict[str, Any]) -> Anonymization:
    """The anonymization a sidecar records (``release_suppression``'s parameters), run again: the
    search is deterministic, so on the same data and with the same traversal it finds the same
    optimum and suppression (another traversal could pick another of equally good optima)."""
    try:
        parameters = dict(recorded["models"])
        union = parameters.pop("earlier", None)
        models = privacy_models(**parameters)
        if union is not None:
            earlier = earlier_releases(problem, before=int(union["before"]))
            if earlier is None or earlier.recipient != union["recipient"] or list(earlier.releases) != list(
                    union["releases"]):
                raise DeidError(f"the release was searched with the earlier releases {union['releases']} to "
                                f"{union['recipient']!r}, which the ledger no longer holds as they were; report it "
                                f"with --policy")
            models = with_earlier(models, earlier)
        traversal = str(recorded.get("traversal", RECORDED_BEFORE_TRAVERSALS))
        return anonymize(problem, models, float(recorded["suppression"]), str(recorded["metric"]),
                         traversal=traversal)
    except (KeyError, TypeError, ValueError) as e:
        raise DeidError(f"the release records an anonymization this version cannot run again ({e}); "
                        f"report it with --policy") from None


def suppressed_groups(run: Anonymization) -> list[tuple[str, ...]]:
    """Label tuples (one label per QI) of the groups the optimum suppresses."""
    assert run.levels is not None
    x = run.levels
    stats = run.evaluator.groups(x)
    mask = run.evaluator.suppress(stats)  # the rule the search judged the optimum by
    ids = stats.ids(mask)
    labels = [run.space.levels[q][x[q]].labels for q in range(len(x))]
    return [tuple(labels[q][int(ids[q][i])] for q in range(len(x))) for i in range(int(mask.sum()))]


def release_plan(problem: Problem, run: Anonymization) -> ReleasePlan:
    """The optimum as a release plan: its level vector's recoding (the hierarchies' labels) and the
    groups the search suppressed, so it goes through every release path (file, engine table, view,
    dbt model, policy file) like any policy."""
    if run.levels is None:
        raise DeidError("no transformation meets the privacy model within the suppression limit; nothing to release")
    return plan_of(problem, levels=run.space.text(run.levels),
                   suppression=release_suppression(run, Unit.of(problem.spec.person)))


def release_query(problem: Problem, run: Anonymization) -> exp.Select:
    """The generalizing query with the suppressed groups blanked to ``*`` and flagged (a join to a
    ``VALUES`` table of their label tuples, ``compile.generalize``)."""
    return problem.query(release_plan(problem, run))


def write_release(problem: Problem, run: Anonymization, out: str | Path | None, overwrite: bool = False,
                  accept_risk: str | None = None, table: str | None = None) -> Written:
    """Write the optimum's release through the release gate (figures measured on the written rows,
    the suppressed records flagged), with its sidecar: a file, or (``out`` None) table ``table`` of
    the engine.  The writers are imported here: a search alone does not load them."""
    from ..release.output import materialize

    return materialize(problem, release_plan(problem, run), out, table=table, overwrite=overwrite,
                       accept_risk=accept_risk)
