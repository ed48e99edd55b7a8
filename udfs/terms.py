"""The per-group terms of the risk (seed 001 eq. 1) and KL loss (seed 000 eq. 4).

risk_term(m, g, γ) = m · g^(−γ): the risk of the m sample records of a group whose
population size is g.  xlogx(c) = c ln c with 0 ln 0 = 0: the entropy terms of
N·KL = Σ_cells c ln c − Σ_G m_G ln m_G + Σ_G m_G ln W_G (METHODS.md decision 3).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def _np(a: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(a.to_numpy(zero_copy_only=False), dtype=np.float64)


def risk_term(m: pa.Array, g: pa.Array, gamma: pa.Array) -> pa.Array:
    """m · g^(−γ), vectorized; g ≥ 1 is guaranteed by the caller (g = max(census, sample))."""
    mm, gg, ga = _np(m), _np(g), _np(gamma)
    return pa.array(mm * np.power(gg, -ga), type=pa.float64())


def xlogx(c: pa.Array) -> pa.Array:
    """c · ln c with the convention 0 ln 0 = 0."""
    cc = _np(c)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(cc > 0, cc * np.log(cc), 0.0)
    return pa.array(out, type=pa.float64())


def record_risk_udf(record_risk: object) -> object:
    """An Arrow UDF r(m, g) from a risk model's vectorized record risk of groups of m sample
    records and g people (numpy in, numpy out; most models read g alone)."""

    def udf(m: pa.Array, g: pa.Array) -> pa.Array:
        return pa.array(record_risk(_np(m), _np(g)), type=pa.float64())  # type: ignore[operator]

    return udf


# name, python function, argument type names, return type name
UDFS: tuple[tuple[str, object, tuple[str, ...], str], ...] = (
    ("deid_risk_term", risk_term, ("DOUBLE", "DOUBLE", "DOUBLE"), "DOUBLE"),
    ("deid_xlogx", xlogx, ("DOUBLE",), "DOUBLE"),
)
