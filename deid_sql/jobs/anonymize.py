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
    AverageRisk,
    Discernibility,
    DistinctLDiversity,
    KAnonymity,
    Loss,
    NonUniformEntropy,
    PrivacyModel,
    TransformationSpace,
    TransformEvaluator,
)
from ..problem import Problem
from ..release.plan import ReleasePlan, plan_of
from ..search.bfs import STORES, BFSResult
from ..search.paths import DEFAULT_TRAVERSAL, TRAVERSALS

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
                   risk: float | None = None) -> list[PrivacyModel]:
    models: list[PrivacyModel] = []
    if k is not None:
        models.append(KAnonymity(k))
    if l is not None:
        if not sensitive:
            raise DeidError("ℓ-diversity needs --sensitive COLUMN: the confidential column whose values must vary")
        models.append(DistinctLDiversity(l, sensitive))
    if risk is not None:
        models.append(AverageRisk(risk))
    if not models:
        raise DeidError("give a privacy model: --min-k K, --min-l L --sensitive COLUMN, or --max-mean-record-risk R")
    return models


def anonymize(problem: Problem, models: list[PrivacyModel], suppression: float = 0.0, metric: str = "loss",
              time_limit: float | None = None, store: str = "tree",
              traversal: str = DEFAULT_TRAVERSAL) -> Anonymization:
    """The globally optimal full-domain transformation (or the best within ``time_limit``), found by
    ``traversal`` (``search/paths.py``'s TRAVERSALS: the same optimal quality whichever, but among
    equally good transformations each may pick another, so a rerun uses the recorded one)."""
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
        if isinstance(model, KAnonymity):
            out["k"] = model.k
        elif isinstance(model, DistinctLDiversity):
            out["l"], out["sensitive"] = model.l, model.sensitive
        elif isinstance(model, AverageRisk):
            out["risk"] = model.threshold
    return out


def model_words(models: Sequence[PrivacyModel]) -> str:
    """The privacy models in words, e.g. ``k-anonymity (k = 5) and average risk at most 0.05``."""
    words = []
    for model in models:
        if isinstance(model, KAnonymity):
            words.append(f"k-anonymity (k = {model.k})")
        elif isinstance(model, DistinctLDiversity):
            words.append(f"distinct ℓ-diversity (ℓ = {model.l} on {model.sensitive!r})")
        elif isinstance(model, AverageRisk):
            words.append(f"average record risk at most {model.threshold:g}")
    return " and ".join(words)


def release_suppression(run: Anonymization) -> Suppression:
    """The optimum's suppression as the report and sidecar describe it: the groups the search
    suppressed, the rule in words, and the search's parameters (to run it again)."""
    groups = suppressed_groups(run)
    rule = (f"every record of a group that fails {model_words(run.models)} shows '*' in each QI (and "
            f"deid_suppressed = true): {len(groups):,} group(s) chosen by the search, at most "
            f"{run.limit:.1%} of the records allowed")
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
        models = privacy_models(**recorded["models"])
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
    return plan_of(problem, levels=run.space.text(run.levels), suppression=release_suppression(run))


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
