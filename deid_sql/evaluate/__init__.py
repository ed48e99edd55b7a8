"""Evaluation of recodings on cells: the fast, chain and SQL paths, metrics, record risk.

``Evaluator`` is what the searches see: either path with the problem's normalizers, a cache and
an evaluation count.  Every group a path meets is keyed and given its census people by the one
group module, ``groups``, so no two paths count a group differently.

Modules:

- ``attribute.py``: what released values reveal (METHODS decision 15): ``ValueCounts`` (f_G(v) per released
  group) and distinct/entropy ℓ, recursive (c,ℓ), confidence, presence and the three t-distances
- ``chain.py``: incremental chain evaluation: groups kept, a step splits those of one interval (census by
  box sums of the cube), disjoint steps batched
- ``fast.py``: the fast path: groups and census people from ``groups.py``, KL and Iyengar's loss from
  marginals
- ``groups.py``: the one group module (its own row in the layer table, right after ``loading/cells.py``):
  keys, census people, g
- ``metrics.py``: ``RawSums`` → ``Metrics`` (``finish``), the shared normalization of both paths
- ``plugin.py``: registers the core's risk model ``population`` in ``registry.RISK_MODELS``
- ``riskmodel.py``: the record risk r(g): ``RecordRisk``, ``PopulationRisk`` (g^−γ), ``risk_model`` (the
  spec's, from ``registry.RISK_MODELS``), ``group_risks``, ``expected_reidentifications``
- ``sqlpath.py``: the SQL path (the reference): mixed-radix keys from list parameters, ``sql/metrics.sql``
  with the UDFs, one text per recoding shape

May import: ``backends``, ``domains``, ``errors``, ``loading``, ``policies``, ``registry``, ``sql``,
    ``udfs``.
Imported by: ``cli``, ``dbt``, ``fixtures``, ``fulldomain``, ``jobs``, ``policyfile``, ``problem``,
    ``release``, ``report``, ``search``, ``starter``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import numpy as np

from ..domains.recoding import Recoding
from ..loading.cells import Cells
from ..policies.lattice import Policy
from .metrics import Metrics, Normalizers, RawSums, finish


class RawPath(Protocol):
    def raw(self, rec: Recoding) -> RawSums: ...


class Evaluator:
    """Metrics for policies and recodings, normalized by the problem's bottom and top.

    ``evaluations`` counts distinct lattice policies evaluated (cache hits are free),
    the budget unit of the searches.
    """

    def __init__(self, path: RawPath, sample: Cells, bottom: Recoding, top: Recoding,
                 cache: bool = True) -> None:
        self.path = path
        with np.errstate(divide="ignore", invalid="ignore"):
            c = sample.counts.astype(np.float64)
            xlogx = float(np.where(c > 0, c * np.log(c), 0.0).sum())
        base = Normalizers(records=sample.total, cells_xlogx=xlogx, n_qis=len(bottom.qis))
        from .metrics import kl_nats

        bottom_raw = path.raw(bottom)
        top_raw = path.raw(top)
        self.normalizers = Normalizers(records=base.records, cells_xlogx=xlogx, n_qis=base.n_qis,
                                       bottom_risk_sum=bottom_raw.risk_sum,
                                       top_kl=kl_nats(top_raw, base))
        self._cache: dict[bytes, Metrics] | None = {} if cache else None
        self.evaluations = 0

    def fork(self) -> Evaluator:
        """A fresh cache and count over the same path and normalizers, so one search's
        evaluations can be counted on their own."""
        twin = object.__new__(Evaluator)
        twin.path, twin.normalizers = self.path, self.normalizers
        twin._cache = {} if self._cache is not None else None
        twin.evaluations = 0
        return twin

    def evaluate(self, item: Policy | Recoding) -> Metrics:
        if isinstance(item, Policy):
            if self._cache is not None and item.bits in self._cache:
                return self._cache[item.bits]
            self.evaluations += 1
            metrics = finish(self.path.raw(item.recoding()), self.normalizers)
            if self._cache is not None:
                self._cache[item.bits] = metrics
            return metrics
        return finish(self.path.raw(item), self.normalizers)

    def evaluate_many(self, items: Iterable[Policy | Recoding]) -> list[Metrics]:
        return [self.evaluate(i) for i in items]


__all__ = ["Evaluator", "Metrics", "Normalizers", "RawSums"]
