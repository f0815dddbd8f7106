"""The distribution families of the tail statistics (Dong, Byna, Wu 2015, section 4.2).

Head families, for the durations at or below the pivot: Normal and Cauchy. Tail families, for the
durations above it: power law, log-normal, exponential, Weibull and Gamma, each with its location
fixed at the pivot: the power law's xmin is the pivot, the others describe the excess
e = duration - pivot. Fitted with a free location, scipy's generic fits collapse silently on such
data (Gamma to shape ~0, Weibull to shape 0.12, measured); with the location fixed, every
maximum-likelihood fit here is a closed form or the root of a monotone one-dimensional equation
(means below are weighted when the sample has weights, see TailSample):

    power law    alpha = 1 + 1 / mean(ln(x / xmin))   (density ~ x^-alpha: the exponent of
                 Clauset et al. and of the powerlaw package; the Pareto shape is alpha - 1)
    log-normal   mu, sigma = mean and standard deviation of ln e
    exponential  scale = mean(e)
    Weibull      shape k: the root of mean(e^k ln e) / mean(e^k) - 1/k - mean(ln e), which
                 rises with k; scale = mean(e^k)^(1/k)
    Gamma        shape a: the root of ln a - digamma(a) = ln mean(e) - mean(ln e), which falls
                 with a; scale = mean(e) / a
    Normal       truncated to x <= upper: the root of one monotone equation (normal_from_moments)
    Cauchy       truncated to x <= upper: Newton's method with step halving

All seven share one interface, with the parameters as a tuple in the order of parameter_names:

    fit(...)                  the parameters, or None when the data have no finite maximum-
                              likelihood fit (for example no spread) or the solver fails
    cdf(x, params), sf(x, params), logpdf(x, params), ppf(u, params), isf(s, params)
    free_parameters           the number of fitted parameters (a fixed location is not one)
    frozen(params)            the same functions of x (or u, s) alone

Head families are fitted with fit(values, upper); tail families with fit(sample), a TailSample.
A tail family's functions take durations; below the location they treat x as the location (cdf
0, sf 1), and logpdf is meant for x above it. isf is accurate for survival probabilities far
below machine epsilon, which order statistics need (models/tails.py).
"""
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from . import special

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_RELATIVE_TOLERANCE = 1e-12
_MAX_ITERATIONS = 100
_MAX_HALVINGS = 60
_QUADRATIC_REGION = 1e-6  # Cauchy: a Newton step this small (relative to the scale) is taken as is
_MAX_SHAPE = 1e8  # a Weibull or Gamma shape beyond this is a spike: no fit
_CAUCHY_START_POINTS = 5000  # the Cauchy fit starts from a fit to about this many values


class TailSample:
    """Tail values above location (the pivot), optionally weighted (weights in [0, 1]: the
    probability that each value belongs to the tail; None: all 1), with the logs and means the
    tail fits share, each computed once on first use."""

    def __init__(self, values, location, weights=None):
        self.values = np.asarray(values, dtype=np.float64)
        self.location = float(location)
        self.weights = weights
        self.weight_sum = float(self.values.size if weights is None else np.sum(weights))

    def weighted(self, weights):
        """The same values with other weights, sharing the logs already computed."""
        sample = TailSample(self.values, self.location, weights)
        for name in ("excess", "log_excess"):
            if name in self.__dict__:
                sample.__dict__[name] = self.__dict__[name]
        return sample

    def mean(self, array):
        if self.weights is None:
            return float(np.mean(array))
        return float(np.dot(self.weights, array)) / self.weight_sum

    @cached_property
    def excess(self):
        return self.values - self.location

    @cached_property
    def log_excess(self):
        return np.log(self.excess)

    @cached_property
    def mean_excess(self):
        return self.mean(self.excess)

    @cached_property
    def mean_log_excess(self):
        return self.mean(self.log_excess)


@dataclass(frozen=True, eq=False)
class Frozen:
    """A family with fixed parameters: cdf, sf, logpdf, ppf and isf of x (or u, s) alone."""

    family: object
    params: tuple

    def cdf(self, x):
        return self.family.cdf(x, self.params)

    def sf(self, x):
        return self.family.sf(x, self.params)

    def logpdf(self, x):
        return self.family.logpdf(x, self.params)

    def ppf(self, u):
        return self.family.ppf(u, self.params)

    def isf(self, s):
        return self.family.isf(s, self.params)


class _Family:
    name = ""
    parameter_names = ()
    free_parameters = 0

    def frozen(self, params):
        return Frozen(self, tuple(params))

    def log_likelihood(self, values, params):
        return float(np.sum(self.logpdf(values, params)))

    def __repr__(self):
        return self.name


def _fitted(params, positive):
    """params as floats, or None unless all are finite and those in positive are > 0."""
    if all(math.isfinite(p) for p in params) and all(p > 0 for p in positive):
        return tuple(float(p) for p in params)
    return None


def _excess(x, location):
    return np.maximum(np.asarray(x, dtype=np.float64) - location, 0.0)


# ---- head families ----
#
# The head is the durations at or below the pivot: a sample truncated there. Its families are
# fitted by maximum likelihood as truncated to x <= upper (upper = the pivot; infinite for no
# truncation); their functions are those of the untruncated distribution.

class Normal(_Family):
    name = "normal"
    parameter_names = ("mean", "sd")
    free_parameters = 2

    def fit(self, values, upper=math.inf):
        values = np.asarray(values, dtype=np.float64)
        mean = float(np.mean(values))
        return normal_from_moments(mean, float(np.mean((values - mean) ** 2)), upper)

    def cdf(self, x, params):
        mean, sd = params
        return special.ndtr((np.asarray(x, dtype=np.float64) - mean) / sd)

    def sf(self, x, params):
        mean, sd = params
        return special.ndtr((mean - np.asarray(x, dtype=np.float64)) / sd)

    def logpdf(self, x, params):
        mean, sd = params
        z = (np.asarray(x, dtype=np.float64) - mean) / sd
        return -0.5 * z * z - math.log(sd) - _LOG_SQRT_2PI

    def ppf(self, u, params):
        mean, sd = params
        return mean + sd * special.ndtri(u)

    def isf(self, s, params):
        mean, sd = params
        return mean - sd * special.ndtri(s)


# Standardised truncation points b = (upper - mean) / sd searched for the truncated Normal.
# Below _LOWEST_TRUNCATION the head would be the far left tail of its Normal (no finite fit
# of such data); above _HIGHEST_TRUNCATION truncation changes the moments by < 1e-300.
_LOWEST_TRUNCATION, _HIGHEST_TRUNCATION = -10.0, 40.0


def normal_from_moments(mean, variance, upper=math.inf):
    """The maximum-likelihood Normal (mean, sd) of values with this mean and variance (divisor
    n), as truncated to x <= upper; None when there is none (no spread, or values that only a
    Normal truncated far below its mean would fit).

    The truncated Normal is an exponential family in (x, x^2), so its maximum likelihood matches
    their means: mean = mu - sd l(b), variance = sd^2 (1 - b l(b) - l(b)^2), with b = (upper -
    mu) / sd and l(b) = phi(b) / Phi(b). With d = upper - mean = sd (b + l(b)), the ratio
    variance / d^2 = (1 - b l - l^2) / (b + l)^2 falls strictly from about 1 to 0 as b rises, so
    one root finding in b gives b, then sd = d / (b + l(b)) and mu = upper - sd b."""
    if not variance > 0:
        return None
    ratio = variance / (upper - mean) ** 2  # 0 for no truncation
    if ratio <= _LEAST_VARIANCE_RATIO:
        return _fitted((mean, math.sqrt(variance)), ())
    if not ratio < _GREATEST_VARIANCE_RATIO:
        return None
    distance = upper - mean
    truncation = _falling_root(lambda b: _truncated_variance_ratio(b) - ratio, _LOWEST_TRUNCATION,
                               _HIGHEST_TRUNCATION)
    sd = distance / (truncation + _inverse_mills(truncation))
    return _fitted((upper - sd * truncation, sd), (sd,))


def _falling_root(function, low, high, tolerance=1e-13):
    """The root of a strictly falling function between low and high, by bisection (scipy.optimize
    would cost a report 25 MiB and a quarter of a second to import, for this one root)."""
    while high - low > tolerance * max(1.0, abs(low), abs(high)):
        middle = 0.5 * (low + high)
        if function(middle) > 0:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high)


def _inverse_mills(b):
    """phi(b) / Phi(b), stable for b far below 0."""
    return math.exp(-0.5 * b * b - _LOG_SQRT_2PI - float(special.log_ndtr(b)))


def _truncated_variance_ratio(b):
    mills = _inverse_mills(b)
    return (1.0 - b * mills - mills * mills) / (b + mills) ** 2


_LEAST_VARIANCE_RATIO = _truncated_variance_ratio(_HIGHEST_TRUNCATION)
_GREATEST_VARIANCE_RATIO = _truncated_variance_ratio(_LOWEST_TRUNCATION)


class Cauchy(_Family):
    name = "cauchy"
    parameter_names = ("location", "scale")
    free_parameters = 2

    def fit(self, values, upper=math.inf):
        """Newton's method on the truncated log-likelihood, halving steps that do not raise it
        (and taking the gradient, scaled by the Hessian's diagonal, where the Hessian is not
        negative definite); from the median and half the interquartile range, or, for many
        values, from the fit to every m-th of them (fewer iterations over all values)."""
        values = np.asarray(values, dtype=np.float64)
        q25, median, q75 = np.quantile(values, (0.25, 0.5, 0.75))
        start = (float(median), float(0.5 * (q75 - q25)) or float(np.mean(np.abs(values - median))))
        if not start[1] > 0:
            return None
        step = values.size // _CAUCHY_START_POINTS
        if step > 1:
            start = _cauchy_maximise(values[::step], upper, start) or start
        return _cauchy_maximise(values, upper, start)

    def cdf(self, x, params):
        location, scale = params
        return np.arctan2(1.0, (location - np.asarray(x, dtype=np.float64)) / scale) / math.pi

    def sf(self, x, params):
        location, scale = params
        return np.arctan2(1.0, (np.asarray(x, dtype=np.float64) - location) / scale) / math.pi

    def logpdf(self, x, params):
        location, scale = params
        z = (np.asarray(x, dtype=np.float64) - location) / scale
        return -np.log1p(z * z) - math.log(math.pi * scale)

    def ppf(self, u, params):
        location, scale = params
        return location - scale / np.tan(math.pi * np.asarray(u, dtype=np.float64))

    def isf(self, s, params):
        location, scale = params
        return location + scale / np.tan(math.pi * np.asarray(s, dtype=np.float64))


def _cauchy_maximise(values, upper, start):
    location, scale = start
    log_likelihood = _truncated_cauchy_log_likelihood(values, upper, location, scale)
    for _ in range(_MAX_ITERATIONS):
        gradient, hessian = _cauchy_derivatives(values, upper, location, scale)
        newton = hessian[0, 0] < 0 and np.linalg.det(hessian) > 0
        if newton:
            step = -scale * np.linalg.solve(hessian, gradient)
        else:
            step = scale * gradient / np.maximum(np.abs(np.diag(hessian)), 1e-300)
        if np.all(np.abs(step) <= _RELATIVE_TOLERANCE * scale):
            return _fitted((location + step[0], scale + step[1]), (scale + step[1],))
        if newton and np.all(np.abs(step) <= _QUADRATIC_REGION * scale):
            # so close that the likelihood gain is below its rounding: Newton converges here
            location, scale = location + step[0], scale + step[1]
            continue
        for _ in range(_MAX_HALVINGS):
            if scale + step[1] > 0:
                new_log_likelihood = _truncated_cauchy_log_likelihood(values, upper, location + step[0],
                                                                      scale + step[1])
                if new_log_likelihood >= log_likelihood:
                    break
            step = 0.5 * step
        else:
            return None
        location, scale, log_likelihood = location + step[0], scale + step[1], new_log_likelihood
    return None


def _truncated_cauchy_log_likelihood(values, upper, location, scale):
    log_likelihood = CAUCHY.log_likelihood(values, (location, scale))
    if upper != math.inf:
        with np.errstate(divide="ignore"):  # a trial location far above upper: -inf, rejected
            log_likelihood -= values.size * float(np.log(CAUCHY.cdf(upper, (location, scale))))
    return log_likelihood


def _cauchy_derivatives(values, upper, location, scale):
    """Gradient and Hessian of the Cauchy log-likelihood of values truncated to x <= upper, in
    units of the scale (times scale and scale^2: the derivatives in (location, scale) / scale),
    from z = (x - location) / scale, so that no scale overflows them. The truncation adds
    -n ln F(upper), F = 1/2 + atan(u)/pi with u = (upper - location) / scale."""
    count = values.size
    z = (values - location) / scale
    weight = 1.0 / (1.0 + z * z)
    weight_squared = weight * weight
    spread = float(np.dot(z * z - 1.0, weight_squared))
    gradient = np.array([2.0 * float(np.dot(z, weight)), count - 2.0 * float(np.sum(weight))])
    cross = -4.0 * float(np.dot(z, weight_squared))
    hessian = np.array([[2.0 * spread, cross], [cross, -count - 2.0 * spread]])
    if upper != math.inf:
        u = (upper - location) / scale
        mass = math.atan2(1.0, -u) / math.pi
        density = 1.0 / (math.pi * (1.0 + u * u))
        first = density / mass  # d ln F / du
        second = -2.0 * u * density / (1.0 + u * u) / mass - first * first
        gradient += count * np.array([first, first * u])
        mixed = second * u + first
        hessian -= count * np.array([[second, mixed], [mixed, second * u * u + 2.0 * first * u]])
    return gradient, hessian


# ---- tail families ----

class PowerLaw(_Family):
    name = "power_law"
    parameter_names = ("xmin", "alpha")
    free_parameters = 1  # xmin is the pivot

    def fit(self, sample):
        if not sample.location > 0:
            return None
        tail_index = 1.0 / sample.mean(np.log1p(sample.excess / sample.location))
        return _fitted((sample.location, 1.0 + tail_index), (tail_index,))

    def cdf(self, x, params):
        return -np.expm1(self._log_sf(x, params))

    def sf(self, x, params):
        return np.exp(self._log_sf(x, params))

    def logpdf(self, x, params):
        xmin, alpha = params
        return math.log((alpha - 1.0) / xmin) - alpha * self._log_ratio(x, xmin)

    def ppf(self, u, params):
        xmin, alpha = params
        return xmin * np.exp(-np.log1p(-np.asarray(u, dtype=np.float64)) / (alpha - 1.0))

    def isf(self, s, params):
        xmin, alpha = params
        return xmin * np.exp(-np.log(s) / (alpha - 1.0))

    def _log_sf(self, x, params):
        xmin, alpha = params
        return -(alpha - 1.0) * self._log_ratio(x, xmin)

    @staticmethod
    def _log_ratio(x, xmin):
        return np.log1p(_excess(x, xmin) / xmin)


class LogNormal(_Family):
    name = "lognormal"
    parameter_names = ("location", "mu", "sigma")
    free_parameters = 2

    def fit(self, sample):
        sigma = math.sqrt(sample.mean((sample.log_excess - sample.mean_log_excess) ** 2))
        return _fitted((sample.location, sample.mean_log_excess, sigma), (sigma,))

    def cdf(self, x, params):
        return special.ndtr(self._z(x, params))

    def sf(self, x, params):
        return special.ndtr(-self._z(x, params))

    def logpdf(self, x, params):
        location, mu, sigma = params
        log_excess = np.log(_excess(x, location))
        z = (log_excess - mu) / sigma
        return -0.5 * z * z - log_excess - math.log(sigma) - _LOG_SQRT_2PI

    def ppf(self, u, params):
        location, mu, sigma = params
        return location + np.exp(mu + sigma * special.ndtri(u))

    def isf(self, s, params):
        location, mu, sigma = params
        return location + np.exp(mu - sigma * special.ndtri(s))

    @staticmethod
    def _z(x, params):
        location, mu, sigma = params
        with np.errstate(divide="ignore"):
            return (np.log(_excess(x, location)) - mu) / sigma


class Exponential(_Family):
    name = "exponential"
    parameter_names = ("location", "scale")
    free_parameters = 1

    def fit(self, sample):
        return _fitted((sample.location, sample.mean_excess), (sample.mean_excess,))

    def cdf(self, x, params):
        location, scale = params
        return -np.expm1(-_excess(x, location) / scale)

    def sf(self, x, params):
        location, scale = params
        return np.exp(-_excess(x, location) / scale)

    def logpdf(self, x, params):
        location, scale = params
        return -_excess(x, location) / scale - math.log(scale)

    def ppf(self, u, params):
        location, scale = params
        return location - scale * np.log1p(-np.asarray(u, dtype=np.float64))

    def isf(self, s, params):
        location, scale = params
        return location - scale * np.log(s)


class Weibull(_Family):
    name = "weibull"
    parameter_names = ("location", "shape", "scale")
    free_parameters = 2

    def fit(self, sample):
        """The shape solves the profile-likelihood equation h(k) = 0, h(k) = the mean of y
        weighted by e^(k y) (times the sample weights) - 1/k, y = ln e - mean(ln e); h rises
        from -inf to max(y) > 0, so the root is unique. Newton's method (h'(k) = the weighted
        variance of y + 1/k^2), kept inside the bracket known so far, bisecting where a step
        would leave it."""
        centred = sample.log_excess - sample.mean_log_excess
        spread = math.sqrt(sample.mean(centred * centred))
        weights = sample.weights
        if weights is not None:  # values without weight could overflow e^(k y) below
            centred, weights = centred[weights > 0], weights[weights > 0]
        if not (centred.size and spread > 0):
            return None
        highest = float(np.max(centred))
        shifted = centred - highest  # exponents <= 0: no overflow
        low, high = 0.0, math.inf
        shape = math.pi / (math.sqrt(6.0) * spread)  # moment estimate: sd(ln e) = pi / (k sqrt 6)
        for _ in range(_MAX_ITERATIONS):
            if shape > _MAX_SHAPE:
                return None
            power = np.exp(shape * shifted)
            if weights is not None:
                power *= weights
            total = float(np.sum(power))
            weighted_mean = float(np.dot(power, centred)) / total
            weighted_variance = float(np.dot(power, centred * centred)) / total - weighted_mean ** 2
            equation = weighted_mean - 1.0 / shape
            if equation < 0:
                low = shape
            else:
                high = shape
            new_shape = shape - equation / (weighted_variance + 1.0 / shape ** 2)
            if not low < new_shape < high:
                new_shape = 2.0 * shape if high == math.inf else 0.5 * (low + high)
            if abs(new_shape - shape) <= _RELATIVE_TOLERANCE * shape:
                # scale = mean(e^k)^(1/k), with e^k = exp(k (mean(ln e) + highest + shifted))
                scale = float(np.exp(sample.mean_log_excess + highest + math.log(total / sample.weight_sum) / shape))
                return _fitted((sample.location, shape, scale), (shape, scale))
            shape = new_shape
        return None

    def cdf(self, x, params):
        return -np.expm1(-self._power(x, params))

    def sf(self, x, params):
        return np.exp(-self._power(x, params))

    def logpdf(self, x, params):
        location, shape, scale = params
        log_ratio = np.log(_excess(x, location) / scale)
        with np.errstate(over="ignore"):  # far beyond the scale: -inf, the right limit
            return math.log(shape / scale) + (shape - 1.0) * log_ratio - np.exp(shape * log_ratio)

    def ppf(self, u, params):
        location, shape, scale = params
        return location + scale * (-np.log1p(-np.asarray(u, dtype=np.float64))) ** (1.0 / shape)

    def isf(self, s, params):
        location, shape, scale = params
        return location + scale * (-np.log(s)) ** (1.0 / shape)

    @staticmethod
    def _power(x, params):
        location, shape, scale = params
        with np.errstate(over="ignore"):  # inf: cdf 1, sf 0
            return (_excess(x, location) / scale) ** shape


class Gamma(_Family):
    name = "gamma"
    parameter_names = ("location", "shape", "scale")
    free_parameters = 2

    def fit(self, sample):
        """Minka's (2002) generalised Newton iteration for the shape, from his approximation."""
        target = math.log(sample.mean_excess) - sample.mean_log_excess  # >= 0 by Jensen
        if not target > 0:
            return None
        shape = (3.0 - target + math.sqrt((target - 3.0) ** 2 + 24.0 * target)) / (12.0 * target)
        for _ in range(_MAX_ITERATIONS):
            if shape > _MAX_SHAPE:
                return None
            equation = math.log(shape) - special.digamma(shape) - target
            slope = 1.0 / shape - special.trigamma(shape)  # d/da (ln a - digamma(a)) < 0
            new_shape = 1.0 / (1.0 / shape + equation / (shape * shape * slope))
            if not new_shape > 0:
                new_shape = 0.5 * shape
            if abs(new_shape - shape) <= _RELATIVE_TOLERANCE * shape:
                scale = sample.mean_excess / new_shape
                return _fitted((sample.location, new_shape, scale), (new_shape, scale))
            shape = new_shape
        return None

    def cdf(self, x, params):
        location, shape, scale = params
        return special.gammainc(shape, _excess(x, location) / scale)

    def sf(self, x, params):
        location, shape, scale = params
        return special.gammaincc(shape, _excess(x, location) / scale)

    def logpdf(self, x, params):
        location, shape, scale = params
        excess = _excess(x, location)
        return (shape - 1.0) * np.log(excess) - excess / scale - special.gammaln(shape) - shape * math.log(scale)

    def ppf(self, u, params):
        location, shape, scale = params
        return location + scale * special.gammaincinv(shape, u)

    def isf(self, s, params):
        location, shape, scale = params
        return location + scale * special.gammainccinv(shape, s)


NORMAL, CAUCHY = Normal(), Cauchy()
POWER_LAW, LOG_NORMAL, EXPONENTIAL, WEIBULL, GAMMA = PowerLaw(), LogNormal(), Exponential(), Weibull(), Gamma()
HEAD_FAMILIES = (NORMAL, CAUCHY)
TAIL_FAMILIES = (POWER_LAW, LOG_NORMAL, EXPONENTIAL, WEIBULL, GAMMA)
