"""Population uniques from a sample's class-size histogram, without a census.

A sample of n records drawn from a population of N people (sampling fraction f = n/N) shows
``u1`` sample uniques; how many people are unique in the *population*?  Each estimator here
reads only the histogram f_k (the number of sample classes of size k), as ARX's
``RiskModelPopulationUniqueness`` does (METHODS.md decision 10):

* Zayatz (1991): the share of sample uniques that are population uniques, from the
  hypergeometric probability that a class shows up in the sample as a unique, class sizes
  estimated by the sample's; population uniques = u1 · P(pop. unique | sample unique) / f.
* Pitman (Hoshino 2001): θ, α of the Pitman sampling formula fitted to the histogram by
  maximum likelihood; population uniques = Γ(θ+1)/Γ(θ+α) · N^α.
* SNB (Chen & Keller-McNulty 1998): population class sizes minus one are negative
  binomial(α, β); the number of population classes K comes from Shlosser's estimator
  (Haas et al. 1995, D̂_Sh3), α and β solve E[u1] = u1, E[u2] = u2; population uniques = K β^α.
* Dankar et al. (2012): f ≤ 0.1 → Pitman (Zayatz when Pitman fails); else min(Zayatz, SNB)
  when SNB is valid, else Zayatz.

Every estimate is 0 without sample uniques and u1 for a census (f = 1: the sample is the
population).  A fit that does not converge raises ``EstimationError`` (one line naming the
histogram); Dankar's rule records which model it took and why.  scipy is imported here, so
callers import this module inside functions (the CLI starts without scipy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from ..errors import DeidError

MODELS = ("pitman", "zayatz", "snb", "dankar")
DANKAR_FRACTION = 0.1  # Dankar et al. 2012: Pitman at or below this sampling fraction


class EstimationError(DeidError):
    """A population-uniqueness model that could not be fitted to a histogram."""


@dataclass(frozen=True)
class Histogram:
    """Sample classes by size: ``sizes[i]`` records in ``counts[i]`` classes (sizes ascending)."""

    sizes: np.ndarray  # int64, distinct class sizes ≥ 1
    counts: np.ndarray  # float64, classes of each size

    @classmethod
    def of(cls, m: np.ndarray) -> Histogram:
        """The histogram of class sizes ``m`` (one entry per class; zero-size classes ignored)."""
        m = np.asarray(m)
        m = np.rint(m[m > 0]).astype(np.int64)
        sizes, counts = np.unique(m, return_counts=True)
        return cls(sizes, counts.astype(np.float64))

    @property
    def n(self) -> float:
        """Records in the sample."""
        return float((self.sizes * self.counts).sum())

    @property
    def classes(self) -> float:
        return float(self.counts.sum())

    def of_size(self, k: int) -> float:
        hit = np.flatnonzero(self.sizes == k)
        return float(self.counts[hit[0]]) if hit.size else 0.0

    def describe(self) -> str:
        return f"{self.n:,.0f} records in {self.classes:,.0f} classes, {self.of_size(1):,.0f} sample uniques"


@dataclass(frozen=True)
class Estimate:
    """Population uniques by one model; ``model`` is the one that gave the number (Dankar's pick);
    ``fallback_from`` the model Dankar's rule wanted but could not fit ("" when it took its pick)."""

    uniques: float
    model: str
    note: str = ""
    fallback_from: str = ""


def sampling_fraction(n: float, population: float) -> float:
    if not (population >= n > 0):
        raise EstimationError(f"a population of {population:,.0f} cannot hold a sample of {n:,.0f} records")
    return float(n) / float(population)


def _trivial(h: Histogram, population: float, model: str) -> Estimate | None:
    """0 without sample uniques; u1 for a census (f = 1)."""
    u1 = h.of_size(1)
    if u1 == 0:
        return Estimate(0.0, model, "no sample uniques")
    if sampling_fraction(h.n, population) == 1.0:
        return Estimate(u1, model, "the sample is the population: its uniques are the population's")
    return None


# -- Zayatz ---------------------------------------------------------------------------------
def zayatz(h: Histogram, population: float) -> Estimate:
    """Zayatz (1991), as ARX's ``ModelZayatz``: with P_i = P(exactly one of a class of i
    people is sampled) = hypergeometric(N, i, n)(1),
    P(pop. unique | sample unique) = (f_1 P_1) / Σ_i f_i P_i, and the population uniques are
    u1 · that / f."""
    done = _trivial(h, population, "zayatz")
    if done is not None:
        return done
    p_one = hypergeometric_one(h.sizes, h.n, population)
    conditional = h.of_size(1) * p_one[0] / float((h.counts * p_one).sum())
    return Estimate(h.of_size(1) * conditional / sampling_fraction(h.n, population), "zayatz")


def hypergeometric_one(sizes: np.ndarray, n: float, population: float) -> np.ndarray:
    """P(exactly one of a class of ``sizes`` people is among n drawn from N) =
    i · C(N−i, n−1) / C(N, n), in log-gamma form (scipy's ``hypergeom.pmf`` is slower by far)."""
    i = np.asarray(sizes, dtype=np.float64)
    N = float(population)
    log_p = (np.log(i) + special.gammaln(N - i + 1) - special.gammaln(n) - special.gammaln(N - i - n + 2)
             - special.gammaln(N + 1) + special.gammaln(n + 1) + special.gammaln(N - n + 1))
    return np.where(i <= N - n + 1, np.exp(log_p), 0.0)


# -- Pitman ---------------------------------------------------------------------------------
def pitman_log_likelihood(theta: float, alpha: float, h: Histogram) -> float:
    """ln L of the Pitman sampling formula (Hoshino 2001 eq. 2), the constant dropped:
    Σ_{i<K} ln(θ + iα) − Σ_{i<n} ln(θ + i) + Σ_j f_j Σ_{i<j} ln(i − α), in gamma functions."""
    K, n = h.classes, h.n
    sums = (K - 1) * math.log(alpha) + special.gammaln(theta / alpha + K) - special.gammaln(theta / alpha + 1)
    sums -= special.gammaln(theta + n) - special.gammaln(theta + 1)
    sums += float((h.counts * (special.gammaln(h.sizes - alpha) - special.gammaln(1 - alpha))).sum())
    return float(sums)


def _pitman_gradient(theta: float, alpha: float, h: Histogram) -> tuple[float, float]:
    """(∂/∂θ, ∂/∂α) of ``pitman_log_likelihood`` (digamma forms of ARX's object functions)."""
    K, n = h.classes, h.n
    a, t = alpha, theta
    d_k = special.digamma(t / a + K) - special.digamma(t / a + 1)
    d_theta = d_k / a - (special.digamma(t + n) - special.digamma(t + 1))
    d_alpha = (K - 1) / a - t / (a * a) * d_k
    d_alpha -= float((h.counts * (special.digamma(h.sizes - a) - special.digamma(1 - a))).sum())
    return float(d_theta), float(d_alpha)


def _pitman_hessian(theta: float, alpha: float, h: Histogram) -> np.ndarray:
    """The second derivatives of ``pitman_log_likelihood`` (trigamma forms)."""
    K, n = h.classes, h.n
    a, t = alpha, theta
    d_k = special.digamma(t / a + K) - special.digamma(t / a + 1)
    d1 = special.polygamma(1, t / a + K) - special.polygamma(1, t / a + 1)
    tt = d1 / (a * a) - (special.polygamma(1, t + n) - special.polygamma(1, t + 1))
    ta = -d_k / (a * a) - t / a ** 3 * d1
    aa = -(K - 1) / (a * a) + 2 * t / a ** 3 * d_k + t * t / a ** 4 * d1
    aa += float((h.counts * (special.polygamma(1, h.sizes - a) - special.polygamma(1, 1 - a))).sum())
    return np.array([[tt, ta], [ta, aa]], dtype=np.float64)


def _pitman_newton(h: Histogram, t: float, a: float) -> tuple[float, float] | None:
    """Newton's method on the score from (t, a), steps halved to stay in 0 < α < 1, θ > −α
    and to raise the likelihood; None unless the score vanishes (relative 1e-9) within 30 steps."""
    value = pitman_log_likelihood(t, a, h)
    for _ in range(30):
        grad = np.array(_pitman_gradient(t, a, h))
        if abs(grad[0]) * max(1.0, abs(t)) + abs(grad[1]) <= 1e-9 * max(1.0, abs(value)):
            return t, a
        hess = _pitman_hessian(t, a, h)
        try:
            step = np.linalg.solve(hess, -grad)
        except np.linalg.LinAlgError:
            return None
        if float(step @ grad) <= 0:  # not an ascent direction (the Hessian is not negative definite here)
            step = grad / max(1.0, float(np.abs(grad).max()))
        for _ in range(30):
            nt, na = t + step[0], a + step[1]
            if 0 < na < 1 and nt > -na:
                nv = pitman_log_likelihood(nt, na, h)
                if math.isfinite(nv) and nv >= value - 1e-12 * abs(value):
                    break
            step = step / 2
        else:
            return None
        t, a, value = float(nt), float(na), nv
    return None


def _pitman_bounded(h: Histogram, starts: list[tuple[float, float]]) -> tuple[float, float] | None:
    """The fallback: scipy's L-BFGS-B on θ = −α + e^s, α in (0, 1) (slower, but needs no
    negative-definite Hessian); None unless it reports success inside the bounds with a
    vanishing score."""
    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        a = float(x[1])
        t = -a + math.exp(float(x[0]))
        dt, da = _pitman_gradient(t, a, h)
        return -pitman_log_likelihood(t, a, h), -np.array([dt * math.exp(float(x[0])), da - dt])

    for t0, a0 in starts[:1]:
        try:
            res = optimize.minimize(objective, np.array([math.log(t0 + a0), a0]), jac=True, method="L-BFGS-B",
                                    bounds=[(-30.0, 30.0), (1e-9, 1 - 1e-9)], options={"maxiter": 200})
        except (FloatingPointError, ValueError, OverflowError, ZeroDivisionError):
            continue
        if not (res.success and np.all(np.isfinite(res.x)) and math.isfinite(res.fun)):
            continue
        a = float(res.x[1])
        t = -a + math.exp(float(res.x[0]))
        score = np.abs(_pitman_gradient(t, a, h))
        # a point on a bound (α → 0 or 1) is no maximum of the model: the likelihood runs off
        if 1e-6 < a < 1 - 1e-6 and float(score.max()) <= 1e-6 * max(1.0, abs(float(res.fun))):
            return t, a
    return None


def pitman_fit(h: Histogram) -> tuple[float, float]:
    """Maximum-likelihood (θ, α) with 0 < α < 1 and θ > −α: Newton's method on the score (the
    Hessian in trigamma functions, as ARX's closed form), from Hoshino's moment start (ARX's
    initial guess) and then fixed starts; the first start whose score vanishes wins, else
    scipy's bounded L-BFGS-B from the same starts.  Raises
    ``EstimationError`` when none converges, or when α runs to 0 (the Ewens limit, where
    Pitman's estimate no longer depends on N)."""
    u1, u2, K, n = h.of_size(1), max(h.of_size(2), 1.0), h.classes, h.n
    c = u1 * (u1 - 1) / u2
    starts = [(1.0, 0.5), (K / 2.0, 0.2)]
    denominator = 2 * u1 * K + u1 * c - n * c
    if denominator != 0:
        t0 = (n * K * c - u1 * (n - 1) * (2 * K + c)) / denominator
        a0 = (t0 * (u1 - n) + (n - 1) * u1) / (n * K)
        if 0 < a0 < 1 and t0 > -a0:
            starts.insert(0, (t0, a0))
    fit = None
    with np.errstate(all="ignore"):
        for t0, a0 in starts:
            fit = _pitman_newton(h, t0, a0)
            if fit is not None:
                break
        if fit is None:
            fit = _pitman_bounded(h, starts)
    if fit is None:
        raise EstimationError(f"the Pitman model did not converge on {h.describe()}")
    t, a = fit
    if a < 1e-6:
        raise EstimationError(f"the Pitman fit runs to α = 0 (the Ewens limit) on {h.describe()}; "
                              f"its population-unique estimate would not depend on the population size")
    return t, a


def pitman_uniques(theta: float, alpha: float, population: float) -> float:
    """Γ(θ+1)/Γ(θ+α) · N^α (Hoshino 2001), in logs."""
    return math.exp(special.gammaln(theta + 1) - special.gammaln(theta + alpha) + alpha * math.log(population))


def pitman(h: Histogram, population: float) -> Estimate:
    """Pitman (Hoshino 2001): ``pitman_fit`` then ``pitman_uniques``; an estimate above N (a
    fit the data cannot support) raises ``EstimationError``."""
    done = _trivial(h, population, "pitman")
    if done is not None:
        return done
    theta, alpha = pitman_fit(h)
    uniques = pitman_uniques(theta, alpha, population)
    if not 0 <= uniques <= population:
        raise EstimationError(f"the Pitman estimate {uniques:,.0f} is outside 0..{population:,.0f} on {h.describe()}")
    return Estimate(uniques, "pitman", f"theta={theta:.6g} alpha={alpha:.6g}")


# -- SNB ------------------------------------------------------------------------------------
def shlosser(h: Histogram, f: float) -> float:
    """Shlosser's estimate of the number of classes in the population (Haas et al. 1995, D̂_Sh3):
    K = u + u1 · [Σ i f²(1−f²)^(i−1) f_i / Σ (1−f)^i ((1+f)^i − 1) f_i] · [Σ (1−f)^i f_i / Σ i f (1−f)^(i−1) f_i]²."""
    i, c = h.sizes.astype(np.float64), h.counts
    q = (1 - f) ** i
    # (1−f)^i ((1+f)^i − 1) = (1−f²)^i − (1−f)^i: no overflow for large classes
    first = float((i * f * f * (1 - f * f) ** (i - 1) * c).sum()) / float((((1 - f * f) ** i - q) * c).sum())
    ratio = float((q * c).sum()) / float((i * f * (1 - f) ** (i - 1) * c).sum())
    return h.classes + h.of_size(1) * first * ratio * ratio


def snb_expected(alpha: float, beta: float, classes: float, f: float) -> tuple[float, float]:
    """E[u1], E[u2] when K population classes have sizes 1 + NegBin(α, β) and each person is
    sampled with probability f (Chen & Keller-McNulty 1998): with d = (1−f)(1−β),
    E[u1] = K f (β/(1−d))^α (1 + α d/(1−d)),
    E[u2] = K f²/2 · α β^α (1−β) (2 − (1−α) d) / (1−d)^(α+2)."""
    d = (1 - f) * (1 - beta)
    u1 = classes * f * (beta / (1 - d)) ** alpha * (1 + alpha * d / (1 - d))
    u2 = classes * f * f / 2 * alpha * beta ** alpha * (1 - beta) * (2 - (1 - alpha) * d) / (1 - d) ** (alpha + 2)
    return u1, u2


def snb(h: Histogram, population: float) -> Estimate:
    """SNB (Chen & Keller-McNulty 1998): K from ``shlosser``, (α, β) with E[u1] = u1 and
    E[u2] = u2 by scipy's MINPACK root finder (α = e^x, β logistic) from several starts;
    population uniques K β^α.
    Raises ``EstimationError`` when no start solves both equations (to 1e-6 relative)."""
    done = _trivial(h, population, "snb")
    if done is not None:
        return done
    f = sampling_fraction(h.n, population)
    u1, u2 = h.of_size(1), h.of_size(2)
    classes = shlosser(h, f)
    scale = np.array([max(u1, 1.0), max(u2, 1.0)])

    def residual(x: np.ndarray) -> np.ndarray:
        # α = e^x0 > 0, β = 1 / (1 + e^−x1) in (0, 1): the solver works unconstrained
        alpha, beta = math.exp(x[0]), special.expit(x[1])
        e1, e2 = snb_expected(alpha, float(beta), classes, f)
        return (np.array([e1, e2]) - np.array([u1, u2])) / scale

    best: tuple[float, float, float] | None = None
    note = ""
    for a0, b0 in ((0.5, 0.05), (1.0, 0.5), (0.1, 0.01), (2.0, 0.2)):
        with np.errstate(all="ignore"):
            try:
                res = optimize.root(residual, [math.log(a0), float(special.logit(b0))], method="hybr",
                                    options={"xtol": 1e-12, "maxfev": 400})
            except (FloatingPointError, ValueError, OverflowError, ZeroDivisionError):
                continue
        if not np.all(np.isfinite(res.fun)) or not np.all(np.isfinite(res.x)) or float(np.abs(res.fun).max()) > 1e-6:
            continue
        alpha, beta = math.exp(float(res.x[0])), float(special.expit(res.x[1]))
        if not (0 < beta < 1):
            continue
        best = (float(np.abs(res.fun).max()), classes * beta ** alpha, alpha)
        note = f"K={classes:.6g} alpha={alpha:.6g} beta={beta:.6g}"
        break
    if best is None:
        raise EstimationError(f"the SNB model has no solution on {h.describe()} (K = {classes:,.1f} by Shlosser)")
    uniques = best[1]
    if not 0 <= uniques <= population:
        raise EstimationError(f"the SNB estimate {uniques:,.0f} is outside 0..{population:,.0f} on {h.describe()}")
    return Estimate(uniques, "snb", note)


# -- Dankar ---------------------------------------------------------------------------------
def dankar(h: Histogram, population: float) -> Estimate:
    """Dankar et al. (2012): f ≤ 0.1 → Pitman, Zayatz when Pitman fails; f > 0.1 → the smaller
    of Zayatz and SNB, Zayatz alone when SNB fails.  ``model`` names the one taken, ``note`` why."""
    done = _trivial(h, population, "dankar")
    if done is not None:
        return done
    f = sampling_fraction(h.n, population)
    if f <= DANKAR_FRACTION:
        try:
            return pitman(h, population)
        except EstimationError as e:
            z = zayatz(h, population)
            return Estimate(z.uniques, "zayatz", f"Pitman failed ({e})", fallback_from="pitman")
    z = zayatz(h, population)
    try:
        s = snb(h, population)
    except EstimationError as e:
        return Estimate(z.uniques, "zayatz", f"SNB failed ({e})", fallback_from="snb")
    return z if z.uniques < s.uniques else s


ESTIMATORS = {"pitman": pitman, "zayatz": zayatz, "snb": snb, "dankar": dankar}


def population_uniques(model: str, h: Histogram, population: float) -> Estimate:
    """The estimate of ``model`` (one of ``MODELS``)."""
    return ESTIMATORS[model](h, population)
