"""Individual risk without a census: Benedetti–Franconi (1998), and El Emam's three attackers.

Benedetti–Franconi: a sample class of f_k records whose weights add up to F̂_k (the
Horvitz–Thompson estimate of its population size) has p_k = f_k / F̂_k; given f_k, the
population size F_k is f_k plus a negative binomial(f_k, p_k) count, so each of its records
is re-identified with probability r_k = E[1/F_k | f_k] = Σ_{h≥f} (1/h) C(h−1, f−1) p^f q^(h−f)
(q = 1 − p).  In closed form (the series summed):

* f = 1: r = (p/q) · ln(1/p)
* f = 2: r = p/q − (p/q)² · ln(1/p)
* f = 3: r = (p/q)³ · [q(3q − 2)/(2p²) + ln(1/p)]
* f ≥ 4: r ≈ p / (f − q), the approximation sdcMicro's ``indivRisk`` (method "approx") uses
* p = 1 (the class is its population): r = 1/f.

The global risk is the expected number of re-identifications Σ_k f_k r_k; divided by n, the
re-identification rate.  Without a weight column every record stands for N/n people, so
p_k = n/N for every class.

El Emam (2013): the prosecutor knows the target is in the sample (record risk 1/f_k), the
journalist does not (1/F̂_k), the marketer re-identifies as many records as he can (the mean
of the journalist's record risk).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def benedetti_franconi(f: np.ndarray, p: np.ndarray) -> np.ndarray:
    """r_k = E[1/F_k | f_k] per class (see the module text); ``f`` class sizes ≥ 1, ``p`` in (0, 1]."""
    f = np.asarray(f, dtype=np.float64)
    p = np.broadcast_to(np.asarray(p, dtype=np.float64), f.shape).astype(np.float64)
    if np.any(f < 1) or np.any(~np.isfinite(p)) or np.any(p <= 0) or np.any(p > 1):
        raise ValueError("Benedetti-Franconi needs class sizes >= 1 and 0 < p <= 1")
    out = np.empty(f.shape, dtype=np.float64)
    census = p >= 1.0
    out[census] = 1.0 / f[census]
    rest = ~census
    fr, pr = f[rest], p[rest]
    qr = 1.0 - pr
    ratio = pr / qr
    log_inv = -np.log(pr)
    r = np.where(fr >= 4, pr / (fr - qr), 0.0)
    one, two, three = fr == 1, fr == 2, fr == 3
    r[one] = ratio[one] * log_inv[one]
    r[two] = ratio[two] - ratio[two] ** 2 * log_inv[two]
    q3, p3 = qr[three], pr[three]
    r[three] = ratio[three] ** 3 * (q3 * (3 * q3 - 2) / (2 * p3 * p3) + log_inv[three])
    out[rest] = r
    return out


@dataclass(frozen=True)
class SampleRisks:
    """The figures from class sizes alone (and estimated population class sizes)."""

    records: int
    classes: int
    sample_uniques: int  # classes (= records) of size 1
    prosecutor_max: float  # 1 / smallest class
    prosecutor_mean: float  # classes / records: the mean of 1/f_k over records
    journalist_max: float  # 1 / smallest estimated population class
    journalist_mean: float  # Σ f_k / F̂_k / n
    marketer: float  # expected share of records re-identified by matching everyone: = journalist_mean

    def to_dict(self) -> dict[str, float | int]:
        return dict(self.__dict__)


def sample_risks(m: np.ndarray, population_sizes: np.ndarray) -> SampleRisks:
    """El Emam's figures for classes of ``m`` records and estimated population sizes (F̂ ≥ m)."""
    m = np.asarray(m, dtype=np.float64)
    big = np.maximum(np.asarray(population_sizes, dtype=np.float64), m)
    n = float(m.sum())
    journalist = float((m / big).sum()) / n if n else 0.0
    return SampleRisks(
        records=int(round(n)), classes=int(m.size), sample_uniques=int((m == 1).sum()),
        prosecutor_max=float(1.0 / m.min()) if m.size else 0.0,
        prosecutor_mean=float(m.size / n) if n else 0.0,
        journalist_max=float(1.0 / big.min()) if big.size else 0.0,
        journalist_mean=journalist, marketer=journalist)
