"""Full-domain baselines: the optimum by exhaustive enumeration (the reference the best-first
search must equal) and the best-first search before inherited bounds (issue 21's "before").
"""

from __future__ import annotations

from deid_sql.fulldomain.transform import Outcome, TransformationSpace, TransformEvaluator
from deid_sql.progress import Counter
from deid_sql.search.antichain import AntichainTree
from deid_sql.search.bfs import BFSResult, StoreFactory, branch_and_bound


def exhaustive(space: TransformationSpace, evaluator: TransformEvaluator) -> Outcome | None:
    """The optimum by evaluating every transformation."""
    best: Outcome | None = None
    for x in space:
        out = evaluator.apply(x)
        if out.accepted and (best is None or out.quality < best.quality):
            best = out
    return best


def search_without_inherited_bounds(space: TransformationSpace, evaluator: TransformEvaluator,
                                    store: StoreFactory = AntichainTree, time_limit: float | None = None,
                                    counter: Counter | None = None) -> BFSResult:
    """``best_first_search`` with DM and KL bounded only after their check, even without
    suppression (no prediction nor probes for them): the search before inherited bounds."""
    return branch_and_bound(space, evaluator, False, store, time_limit, counter)
