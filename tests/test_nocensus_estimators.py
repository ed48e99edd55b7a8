"""The no-census estimators against hand-derived values (each formula evaluated here from its
definition, with plain sums and ``math``, independently of the implementation's closed forms),
and their properties on random histograms (hypothesis)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deid_sql.nocensus import estimators as est
from deid_sql.nocensus.estimators import EstimationError, Histogram
from deid_sql.nocensus.individual import benedetti_franconi, sample_risks


def hist(*sizes: int) -> Histogram:
    return Histogram.of(np.array(sizes))


# -- Zayatz ---------------------------------------------------------------------------------
def test_zayatz_by_hand() -> None:
    # classes 1, 1, 2, 3: n = 7 records, u1 = 2, K = 4; N = 70 (f = 0.1)
    n, N = 7, 70

    def p_one(i: int) -> float:  # one of a class of i people among n drawn from N
        return i * math.comb(N - i, n - 1) / math.comb(N, n)

    conditional = (2 / 4 * p_one(1)) / (2 / 4 * p_one(1) + 1 / 4 * p_one(2) + 1 / 4 * p_one(3))
    expected = 2 * conditional / (n / N)
    assert est.zayatz(hist(1, 1, 2, 3), N).uniques == pytest.approx(expected, rel=1e-12)
    assert p_one(1) == pytest.approx(n / N)


def test_hypergeometric_one_matches_scipy() -> None:
    from scipy import stats

    sizes = np.array([1, 2, 5, 40])
    assert est.hypergeometric_one(sizes, 300, 10_000) == pytest.approx(stats.hypergeom.pmf(1, 10_000, sizes, 300),
                                                                        rel=1e-9)


# -- Pitman ---------------------------------------------------------------------------------
def _loglik_by_sums(t: float, a: float, h: list[int]) -> float:
    K, n = len(h), sum(h)
    out = sum(math.log(t + i * a) for i in range(1, K)) - sum(math.log(t + i) for i in range(1, n))
    return out + sum(math.log(i - a) for j in h for i in range(1, j))


def test_pitman_likelihood_and_fit_by_hand() -> None:
    classes = [1] * 30 + [2] * 12 + [3] * 6 + [4] * 3 + [7, 9, 12]
    h = hist(*classes)
    assert est.pitman_log_likelihood(2.5, 0.4, h) == pytest.approx(_loglik_by_sums(2.5, 0.4, classes), rel=1e-12)
    t, a = est.pitman_fit(h)
    K, n = len(classes), sum(classes)
    # the score equations of Hoshino 2001 (ARX's iterative object functions), summed term by term
    d_theta = sum(1 / (t + i * a) for i in range(1, K)) - sum(1 / (t + i) for i in range(1, n))
    d_alpha = sum(i / (t + i * a) for i in range(1, K)) - sum(1 / (i - a) for j in classes for i in range(1, j))
    assert abs(d_theta) < 1e-8 and abs(d_alpha) < 1e-7
    # it is a maximum: nearby points are less likely
    best = _loglik_by_sums(t, a, classes)
    for dt, da in ((0.1, 0), (-0.1, 0), (0, 0.01), (0, -0.01)):
        assert _loglik_by_sums(t + dt, a + da, classes) < best
    N = 100_000
    expected = math.exp(math.lgamma(t + 1) - math.lgamma(t + a) + a * math.log(N))
    assert est.pitman(h, N).uniques == pytest.approx(expected, rel=1e-12)


def test_pitman_without_a_fit_says_so() -> None:
    # every class a sample unique: the likelihood grows without bound toward alpha -> 1
    with pytest.raises(EstimationError, match="Pitman"):
        est.pitman(hist(*([1] * 50)), 1_000_000)


# -- SNB ------------------------------------------------------------------------------------
def test_snb_expectations_by_summation() -> None:
    from scipy import stats

    alpha, beta, K, f = 0.7, 0.2, 500.0, 0.05
    s = np.arange(1, 4000)
    pmf = stats.nbinom.pmf(s - 1, alpha, beta)  # population class size 1 + NegBin(alpha, beta)
    u1 = K * float((pmf * s * f * (1 - f) ** (s - 1)).sum())
    u2 = K * float((pmf * s * (s - 1) / 2 * f * f * (1 - f) ** (s - 2)).sum())
    assert est.snb_expected(alpha, beta, K, f) == pytest.approx((u1, u2), rel=1e-9)


def test_shlosser_by_hand() -> None:
    h, f = hist(1, 1, 1, 2, 2, 3), 0.2
    fi = {1: 3, 2: 2, 3: 1}
    a = sum(i * f * f * (1 - f * f) ** (i - 1) * c for i, c in fi.items())
    b = sum((1 - f) ** i * ((1 + f) ** i - 1) * c for i, c in fi.items())
    c_ = sum((1 - f) ** i * c for i, c in fi.items())
    d = sum(i * f * (1 - f) ** (i - 1) * c for i, c in fi.items())
    assert est.shlosser(h, f) == pytest.approx(6 + 3 * (a / b) * (c_ / d) ** 2, rel=1e-12)


def test_snb_solves_its_equations() -> None:
    classes = [1] * 300 + [2] * 80 + [3] * 30 + [4] * 12 + [6] * 5 + [10] * 2
    h = hist(*classes)
    N = 8000  # f ≈ 0.08
    e = est.snb(h, N)
    K, alpha, beta = (float(part.split("=")[1]) for part in e.note.split())
    f = h.n / N
    assert est.snb_expected(alpha, beta, K, f) == pytest.approx((300, 80), rel=1e-5)
    assert e.uniques == pytest.approx(K * beta ** alpha, rel=1e-5)


# -- Dankar and the trivial cases --------------------------------------------------------------
def test_dankar_rule() -> None:
    classes = [1] * 300 + [2] * 80 + [3] * 30 + [4] * 12 + [6] * 5 + [10] * 2
    h = hist(*classes)
    small, large = h.n * 20, h.n * 4  # f = 0.05 and 0.25
    assert est.dankar(h, small).uniques == est.pitman(h, small).uniques
    picked = est.dankar(h, large)
    z = est.zayatz(h, large).uniques
    try:
        s = est.snb(h, large).uniques
    except EstimationError:
        assert picked.uniques == z and picked.model == "zayatz"
    else:
        assert picked.uniques == min(z, s)


def test_dankar_falls_back_to_zayatz_when_pitman_fails() -> None:
    h = hist(*([1] * 50))
    picked = est.dankar(h, 1_000_000)
    assert picked.model == "zayatz" and "Pitman" in picked.note
    assert picked.uniques == est.zayatz(h, 1_000_000).uniques


@pytest.mark.parametrize("model", est.MODELS)
def test_no_sample_uniques_and_a_census(model: str) -> None:
    assert est.population_uniques(model, hist(2, 2, 3, 5), 10_000).uniques == 0
    h = hist(1, 1, 1, 2, 4)
    assert est.population_uniques(model, h, h.n).uniques == 3  # n = N: the sample's uniques


def test_a_population_smaller_than_the_sample_is_refused() -> None:
    with pytest.raises(EstimationError, match="cannot hold"):
        est.zayatz(hist(1, 2, 3), 5)


# -- Benedetti–Franconi --------------------------------------------------------------------------
def _series(f: int, p: float) -> float:
    """E[1/F | f] = Σ_{h≥f} (1/h) C(h−1, f−1) p^f q^(h−f), summed until the terms vanish."""
    q, total, h = 1 - p, 0.0, f
    term = 1.0
    while h < f + 200_000 and (term > 1e-18 or h < f + 10):
        term = math.comb(h - 1, f - 1) * p ** f * q ** (h - f) / h
        total += term
        h += 1
    return total


@pytest.mark.parametrize("p", [0.02, 0.3, 0.75])
def test_benedetti_franconi_closed_forms(p: float) -> None:
    q = 1 - p
    r = benedetti_franconi(np.array([1.0, 2.0, 3.0, 4.0, 9.0]), np.full(5, p))
    assert r[0] == pytest.approx(_series(1, p), rel=1e-9)
    assert r[0] == pytest.approx(p / q * math.log(1 / p), rel=1e-12)
    assert r[1] == pytest.approx(_series(2, p), rel=1e-9)
    assert r[2] == pytest.approx(_series(3, p), rel=1e-9)
    assert r[3] == pytest.approx(p / (4 - q), rel=1e-12)  # sdcMicro's approximation from f = 4
    assert r[4] == pytest.approx(p / (9 - q), rel=1e-12)
    assert abs(r[3] - _series(4, p)) < 0.05 * _series(4, p)  # and it is close to the series


def test_benedetti_franconi_of_a_population_is_one_over_f() -> None:
    assert benedetti_franconi(np.array([1.0, 3.0, 8.0]), np.ones(3)) == pytest.approx([1, 1 / 3, 1 / 8])


def test_el_emam_by_hand() -> None:
    m = np.array([1.0, 2.0, 5.0])
    big = np.array([10.0, 4.0, 50.0])
    r = sample_risks(m, big)
    assert (r.prosecutor_max, r.prosecutor_mean) == (1.0, 3 / 8)
    assert r.journalist_max == pytest.approx(1 / 4)
    assert r.journalist_mean == pytest.approx((1 / 10 + 2 / 4 + 5 / 50) / 8)


# -- properties --------------------------------------------------------------------------------
histograms = st.lists(st.integers(min_value=1, max_value=12), min_size=3, max_size=60).map(
    lambda sizes: sorted(sizes))


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(histograms, st.floats(min_value=1.0, max_value=1000.0))
def test_estimates_are_between_zero_and_the_population(classes: list[int], scale: float) -> None:
    h = hist(*classes)
    N = math.ceil(h.n * scale)
    u1 = h.of_size(1)
    for model in est.MODELS:
        try:
            e = est.population_uniques(model, h, N)
        except EstimationError:
            assert model in ("pitman", "snb")  # Zayatz and Dankar (which falls back to it) always answer
            continue
        assert 0 <= e.uniques <= N
        if u1 == 0:
            assert e.uniques == 0
    if u1:
        assert est.zayatz(h, N).uniques <= u1 / (h.n / N) * (1 + 1e-9)


@settings(max_examples=40, deadline=None)
@given(histograms)
def test_equal_to_the_sample_when_the_sample_is_the_population(classes: list[int]) -> None:
    h = hist(*classes)
    for model in est.MODELS:
        assert est.population_uniques(model, h, h.n).uniques == h.of_size(1)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(histograms, st.floats(min_value=1.5, max_value=100.0))
def test_monotone_in_the_population_size(classes: list[int], scale: float) -> None:
    h = hist(*classes)
    N = math.ceil(h.n * scale)
    try:  # Pitman's fit does not depend on N: U = C · N^α grows with N
        assert est.pitman(h, N).uniques <= est.pitman(h, 2 * N).uniques
    except EstimationError:
        pass
    # Benedetti–Franconi without weights: a larger population hides every record better
    sizes = np.array(classes, dtype=np.float64)
    assert np.all(benedetti_franconi(sizes, np.full(sizes.size, h.n / (2 * N)))
                  <= benedetti_franconi(sizes, np.full(sizes.size, h.n / N)))
    # and its global risk lies between 0 and the sample uniques + Σ 1/f over the other classes
    r = benedetti_franconi(sizes, np.full(sizes.size, h.n / N))
    assert 0 <= float((sizes * r).sum()) <= float((sizes * (1 / sizes)).sum()) + 1e-9
