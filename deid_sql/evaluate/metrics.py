"""The metrics of one recoding, and how the raw group sums become them.

Both evaluation paths (SQL and cells) produce the same ``RawSums`` — sums over
generalized groups — and share ``finish`` for everything derived, so they can
only disagree in the sums themselves, which the property tests compare.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class RawSums:
    """Sums over the groups G of a recoding (m = sample size, g = max(census, m))."""

    risk_sum: float  # Σ m · r(g): r = g^-γ (seed 001 eq. 1) or the adversary's P_reid × loss
    expected_reidentifications: float  # Σ m / g
    max_record_risk: float  # max r(g)
    k: int  # min m
    sample_unique_records: int  # #groups with m = 1
    groups: int
    kl_group_sum: float  # Σ m ln(m / W_G)
    lm_sum: float  # Σ m Σ_q (w_q - 1)/(n_q - 1)
    discernibility: float  # Σ m²
    corrected_groups: int  # #groups whose census count was below m
    records: int


@dataclass(frozen=True)
class Metrics:
    """Everything deid-sql reports for a policy (formulas in docs/policies-and-metrics.md).

    ``risk`` and ``loss`` are normalized to [0, 1] (METHODS.md decisions 2-3);
    the rest are in natural units.
    """

    risk: float
    loss: float
    expected_reidentifications: float
    risk_sum: float
    max_record_risk: float
    k: int
    sample_unique_records: int
    groups: int
    kl: float
    iyengar_loss: float
    discernibility: int
    corrected_groups: int
    records: int

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


@dataclass(frozen=True)
class Normalizers:
    """Problem constants: N, Σ c ln c over sample cells, the bottom's risk, KL(top)."""

    records: int
    cells_xlogx: float
    n_qis: int
    bottom_risk_sum: float = 1.0
    top_kl: float = 0.0


def kl_nats(raw: RawSums, norm: Normalizers) -> float:
    """KL(P‖Q) in nats: (Σ_cells c ln c − Σ_G m ln(m/W_G)) / N, clipped at 0 for rounding."""
    return _kl(raw.kl_group_sum, norm)


def _kl(kl_group_sum: float, norm: Normalizers) -> float:
    return max(0.0, (norm.cells_xlogx - kl_group_sum) / norm.records)


def normalized(risk_sum: float, kl_group_sum: float, norm: Normalizers) -> tuple[float, float, float]:
    """(risk, loss, KL in nats) from the two sums every figure on a frontier comes from.

    The one normalization of the evaluators (``finish``) and the chain evaluator, so both give
    the same numbers and the same answer to a zero normalizer: an adversary who never attacks
    makes the bottom's risk 0 and a one-cell sample makes KL(top) 0; the figures are then 0.
    """
    kl = _kl(kl_group_sum, norm)
    risk = risk_sum / norm.bottom_risk_sum if norm.bottom_risk_sum > 0 else 0.0
    return risk, (kl / norm.top_kl if norm.top_kl > 0 else 0.0), kl


def finish(raw: RawSums, norm: Normalizers) -> Metrics:
    risk, loss, kl = normalized(raw.risk_sum, raw.kl_group_sum, norm)
    return Metrics(
        risk=risk,
        loss=loss,
        expected_reidentifications=raw.expected_reidentifications,
        risk_sum=raw.risk_sum,
        max_record_risk=raw.max_record_risk,
        k=int(raw.k),
        sample_unique_records=int(raw.sample_unique_records),
        groups=int(raw.groups),
        kl=kl,
        iyengar_loss=raw.lm_sum / (norm.records * norm.n_qis) if norm.n_qis else 0.0,
        discernibility=int(round(raw.discernibility)),
        corrected_groups=int(raw.corrected_groups),
        records=int(raw.records),
    )
