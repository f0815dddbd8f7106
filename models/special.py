"""The special functions of the tail statistics (families.py, tails.py), with numpy and math
alone: importing scipy.special cost a report 0.2-0.45 s and 26 MiB (scipy 1.17 imports
numpy.f2py through its array-API layer), more than the rest of a Darshan log's report.
tests/test_special.py checks each against scipy.special to 1e-12 relative on many arguments over
the ranges the fits use, and against mpmath for Gamma shapes above 300 (where scipy's own error
exceeds that).

    erfc(x), log_ndtr(x), digamma(x), trigamma(x), gammaln(x)   of a float
    expit(x), ndtr(x), ndtri(p)                                  of an array
    gammainc(a, x), gammaincc(a, x)        the regularized incomplete gamma functions P and Q
    gammaincinv(a, p), gammainccinv(a, s)  and their inverses in x, of a float a > 0 and an array

Methods: erfc of arrays from Taylor polynomials about the centres of 1/2048-wide intervals up to 8
(their coefficients from erfc's differential equation, made at import from math.erfc) and
Laplace's continued fraction beyond; ndtri by Halley's method from Abramowitz and Stegun's
26.2.23; the incomplete gamma functions by their series (P) and Legendre's continued fraction
(Q) as in Numerical Recipes, and for a >= 50 with x from a/2 to 2a by Temme's uniform expansion
(DLMF 8.12), whose coefficients are derived at first use from DLMF 8.12.9-8.12.11; their
inverses by Newton's method on ln P or ln Q in ln x (both are concave there).
"""
import functools
import math

import numpy as np

gammaln = math.lgamma
erfc = math.erfc

_EPSILON = np.finfo(np.float64).eps
_SQRT1_2 = math.sqrt(0.5)
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def expit(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))


# ---- the normal distribution ----

_ERFC_STEPS_PER_UNIT = 2048
_ERFC_TABLE_END = 8.0
_ERFC_DEGREE = 5
_ERFC_FRACTION_TERMS = 16  # Laplace's continued fraction beyond the table: < 1e-16 from 8 on
_ERFC_UNDERFLOW = 27.3  # erfc(27.3) < 2^-1074
_ERFC_FEW = 400


def _erfc_taylor_table():
    """coefficients[n, k], n <= degree: erfc(c + d / 2048) = sum over n of coefficients[n, k] d^n
    about the centre c = (k + 1/2) / 2048 of each interval (exact, as is c^2), from f = erfc' =
    -2/sqrt(pi) exp(-y^2), f' = -2 y f: (n + 1) f[n + 1] = -2 c f[n] - 2 f[n - 1]. A last column
    of zeros serves the arguments beyond the table, which are computed otherwise."""
    intervals = int(_ERFC_TABLE_END * _ERFC_STEPS_PER_UNIT)
    centres = (np.arange(intervals) + 0.5) / _ERFC_STEPS_PER_UNIT
    coefficients = np.zeros((_ERFC_DEGREE + 1, intervals + 1))
    coefficients[0, :intervals] = [math.erfc(c) for c in centres.tolist()]
    previous, current = np.zeros(intervals), -_TWO_OVER_SQRT_PI * np.exp(-centres * centres)
    for n in range(_ERFC_DEGREE):
        coefficients[n + 1, :intervals] = current / (n + 1) / _ERFC_STEPS_PER_UNIT ** (n + 1)
        previous, current = current, (-2.0 * centres * current - 2.0 * previous) / (n + 1)
    return coefficients


_ERFC_COEFFICIENTS = _erfc_taylor_table()


def _erfc(x):
    """erfc of an array, to a few units in the last place (relative); below _ERFC_FEW values,
    math.erfc of each (faster there than the table's array operations)."""
    x = np.asarray(x, dtype=np.float64)
    flat = x.ravel()
    if flat.size < _ERFC_FEW:
        return np.array([math.erfc(value) for value in flat.tolist()]).reshape(x.shape)
    y = np.abs(flat)
    scaled = np.fmin(y, _ERFC_TABLE_END) * _ERFC_STEPS_PER_UNIT  # NaN: the last, empty interval
    index = scaled.astype(np.intp)
    offset = scaled - index  # exact, in [0, 1)
    offset -= 0.5
    result = _ERFC_COEFFICIENTS[-1].take(index, mode="wrap")
    coefficient = np.empty_like(result)
    for row in _ERFC_COEFFICIENTS[-2::-1]:
        result *= offset
        result += row.take(index, out=coefficient, mode="wrap")
    if not y.max() < _ERFC_TABLE_END:  # beyond the table (0 there: right where erfc underflows) or NaN
        beyond = ~(y < _ERFC_TABLE_END) & ~(y >= _ERFC_UNDERFLOW)
        result[beyond] = _erfc_beyond_table(y[beyond])
    np.subtract(2.0, result, out=result, where=flat < 0)
    return result.reshape(x.shape)


def _erfc_beyond_table(y):
    """erfc(y) for y from 8 to _ERFC_UNDERFLOW (and NaN): exp(-y^2) / sqrt(pi) / (y + (1/2) / (y +
    1 / (y + (3/2) / (y + ...)))), exp(-y^2) as exp(-h^2) exp(-l (y + h)) with y = h + l and h^2
    exact."""
    fraction = y.copy()
    for n in range(_ERFC_FRACTION_TERMS, 0, -1):
        fraction = y + 0.5 * n / fraction
    high = np.round(y * 1024.0) / 1024.0
    return np.exp(-high * high) * np.exp(-(y - high) * (y + high)) / (math.sqrt(math.pi) * fraction)


def ndtr(x):
    """The standard normal CDF, 0.5 erfc(-x / sqrt 2)."""
    x = np.asarray(x, dtype=np.float64)
    if x.size < _ERFC_FEW:
        return np.array([0.5 * math.erfc(value * -_SQRT1_2) for value in x.ravel().tolist()]).reshape(x.shape)[()]
    return 0.5 * _erfc(x * -_SQRT1_2)


def log_ndtr(x):
    """ln ndtr(x) of a float: for x < -20 by the asymptotic series of the Mills ratio."""
    if x > 0:
        return math.log1p(-0.5 * math.erfc(x * _SQRT1_2))
    if x > -20:
        return math.log(0.5 * math.erfc(-x * _SQRT1_2))
    inverse_square, term, total = 1.0 / (x * x), 1.0, 1.0
    for n in range(1, 13):
        term *= -(2 * n - 1) * inverse_square
        total += term
    return -0.5 * x * x - math.log(-x) - _LOG_SQRT_2PI + math.log(total)


_CENTRAL_QUANTILE = 0.25  # below this tail probability ndtri's residual is taken from ndtr
_HALLEY_STEPS = 3  # errors from below 4.5e-4: 1e-8, 1e-22, then rounding only (0 at p = 1/2)


def ndtri(p):
    """The standard normal quantile: Abramowitz and Stegun 26.2.23 (error < 4.5e-4) for the
    smaller tail q = min(p, 1 - p), then Halley's method; in the centre the residual is
    (1/2 - q) - erf(|x| / sqrt 2) / 2, so that x keeps its relative precision near 0."""
    shape = np.shape(p)
    p = np.asarray(p, dtype=np.float64).ravel()
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        q = np.minimum(p, 1.0 - p)
        valid = q > 0
        q_valid = np.where(valid, q, 0.5)
        t = np.sqrt(-2.0 * np.log(q_valid))
        x = -(t - (2.515517 + t * (0.802853 + t * 0.010328)) / (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))))
        central = np.flatnonzero(q_valid >= _CENTRAL_QUANTILE)
        for _ in range(_HALLEY_STEPS):
            residual = ndtr(x) - q_valid
            if central.size:
                residual[central] = (0.5 - q_valid[central]) - 0.5 * _erf_small(-x[central] * _SQRT1_2)
            ratio = residual * _SQRT_2PI * np.exp(0.5 * x * x)
            x = np.where(np.isfinite(ratio), x - ratio / (1.0 + 0.5 * x * ratio), x)
        x = np.where(p > 0.5, -x, x)
        x = np.where(valid, x, np.where(p == 0, -np.inf, np.where(p == 1, np.inf, np.nan)))
    return x.reshape(shape)[()]


def _erf_small(y):
    """erf(y) for |y| <= 0.5 by its Taylor series (1e-19 after 13 terms)."""
    square = y * y
    term, total = y, y.copy()
    for n in range(1, 14):
        term = term * -square / n
        total += term / (2 * n + 1)
    return _TWO_OVER_SQRT_PI * total


# ---- the digamma and trigamma functions of a float x > 0 ----

# B_2k / (2k) for the asymptotic series of digamma (and B_2k for trigamma's), k = 1..7
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6)
_ASYMPTOTIC_FROM = 12.0


def digamma(x):
    shift = 0.0
    while x < _ASYMPTOTIC_FROM:
        shift -= 1.0 / x
        x += 1.0
    inverse_square = 1.0 / (x * x)
    series = 0.0
    for k in range(len(_BERNOULLI), 0, -1):
        series = series * inverse_square + _BERNOULLI[k - 1] / (2 * k)
    return shift + math.log(x) - 0.5 / x - series * inverse_square


def trigamma(x):
    shift = 0.0
    while x < _ASYMPTOTIC_FROM:
        shift += 1.0 / (x * x)
        x += 1.0
    inverse_square = 1.0 / (x * x)
    series = 0.0
    for k in range(len(_BERNOULLI), 0, -1):
        series = series * inverse_square + _BERNOULLI[k - 1]
    return shift + 1.0 / x + 0.5 * inverse_square + series * inverse_square / x


# ---- the regularized incomplete gamma functions of a float a > 0 ----

_TEMME_FROM = 50.0  # shapes from which x near a is computed by Temme's expansion
_TEMME_RANGE = (-0.5, 1.0)  # (x - a) / a inside which it is (|eta| < 0.8)
_TEMME_TERMS, _TEMME_DEGREE = 25, 30
_MAX_TERMS = 2000  # of the series and the continued fraction at most
_FEW_FRACTIONS = 8  # up to this many x, the continued fraction of each in Python


def gammainc(a, x):
    return _incomplete_gamma(a, x)[0]


def gammaincc(a, x):
    return _incomplete_gamma(a, x)[1]


def _incomplete_gamma(a, x):
    """(P(a, x), Q(a, x)), each to its own relative precision; x an array (or float), NaN
    where x is NaN or negative."""
    a = float(a)
    x = np.asarray(x, dtype=np.float64)
    flat = x.ravel()
    lower, upper = np.full(flat.shape, np.nan), np.full(flat.shape, np.nan)
    finite = np.isfinite(flat) & (flat >= 0)
    lower[flat == np.inf], upper[flat == np.inf] = 1.0, 0.0
    values = flat[finite]
    p, q = np.empty(values.shape), np.empty(values.shape)
    u = (values - a) / a
    temme = (a >= _TEMME_FROM) & (u > _TEMME_RANGE[0]) & (u < _TEMME_RANGE[1])
    fraction = ~temme & ((values >= a + 1.0) if a < _TEMME_FROM else (u > 0))
    series = ~temme & ~fraction
    if temme.any():
        p[temme], q[temme] = _temme(a, u[temme])
    if fraction.any():
        q[fraction] = _continued_fraction(a, values[fraction]) * _prefactor(a, values[fraction])
        p[fraction] = 1.0 - q[fraction]
    if series.any():
        small = values[series]
        p[series] = _series(a, small) * _prefactor(a, small) / a
        q[series] = _small_x_q(a, small) if a < 1.0 else 1.0 - p[series]
    lower[finite], upper[finite] = p, q
    return lower.reshape(x.shape)[()], upper.reshape(x.shape)[()]


def _prefactor(a, x):
    """x^a e^-x / Gamma(a); for a >= _TEMME_FROM by Stirling's formula, sqrt(a / 2 pi)
    exp(-a phi(u) - stirling(a)), u = x / a - 1, which keeps a ln x - ln Gamma(a) from
    cancelling (phi(u) = u - ln(x / a) is precise only outside _TEMME_RANGE, where P and Q use
    it; inside, only for the slope of Newton's steps)."""
    with np.errstate(divide="ignore"):
        if a < _TEMME_FROM:
            return np.exp(a * np.log(x) - x - math.lgamma(a))
        u = (x - a) / a
        return math.sqrt(a / (2.0 * math.pi)) * np.exp(-a * (u - np.log(x / a)) - _stirling(a))


def _stirling(a):
    """ln Gamma(a) - ((a - 1/2) ln a - a + ln sqrt(2 pi)), for a >= 10 (error < 1e-19)."""
    inverse = 1.0 / a
    square = inverse * inverse
    return inverse * (1 / 12 - square * (1 / 360 - square * (1 / 1260 - square * (1 / 1680 - square / 1188))))


def _series(a, x):
    """The sum over n >= 0 of x^n / ((a + 1) ... (a + n)) (P(a, x) = it * prefactor / a),
    from its last term back, with as many terms as the largest x needs (all positive)."""
    largest = float(np.max(x))
    terms, term = 0, 1.0
    while term > 0.25 * _EPSILON * (1.0 - largest / (a + terms + 1.0)) and terms < _MAX_TERMS:
        terms += 1
        term *= largest / (a + terms)
    total = np.ones(x.shape)
    for n in range(terms, 0, -1):
        total *= x
        total *= 1.0 / (a + n)
        total += 1.0
    return total


def _continued_fraction(a, x):
    """Q(a, x) / prefactor by Legendre's continued fraction 1 / (b0 + a1 / (b1 + a2 / (b2 +
    ...))), b_i = x + 2i + 1 - a, a_i = -i (i - a), for x >= a + 1: for a few x, each by the
    modified Lentz method; for more, from its end back, to the depth at which that converges for
    the smallest x (the slowest)."""
    if x.size <= _FEW_FRACTIONS:
        return np.array([_lentz(a, value)[0] for value in x.tolist()])
    depth = _lentz(a, float(np.min(x)))[1] + 2
    total = x + (2.0 * depth + 1.0 - a)
    for i in range(depth, 0, -1):
        total = (-i * (i - a)) / total
        total += x
        total += 2.0 * i - 1.0 - a
    return 1.0 / total


def _lentz(a, x):
    """(Q(a, x) / prefactor, the terms it took) for one x, by the modified Lentz method."""
    tiny = 1e-300
    b = x + 1.0 - a
    c, d = 1.0 / tiny, 1.0 / b
    value = d
    for depth in range(1, _MAX_TERMS):
        numerator = -depth * (depth - a)
        b += 2.0
        d = numerator * d + b
        c = b + numerator / c
        d, c = 1.0 / (d or tiny), c or tiny
        value *= d * c
        if abs(d * c - 1.0) <= _EPSILON:
            break
    return value, depth


def _small_x_q(a, x):
    """Q(a, x) for a < 1 and x < a + 1, where P is near 1: 1 - x^a / Gamma(a + 1) (as
    -expm1) minus x^a / Gamma(a + 1) a sum over n >= 1 of (-x)^n / (n! (a + n)), the sum by
    Horner's rule with as many terms as the largest x needs."""
    with np.errstate(divide="ignore"):
        log_power = a * np.log(x) - math.lgamma(a + 1.0)
    largest = float(np.max(x))
    terms, term = 1, largest
    while term > 0.25 * _EPSILON * largest / (a + 1.0) and terms < _MAX_TERMS:
        terms += 1
        term *= largest / terms
    total = np.zeros(x.shape)
    for n in range(terms, 0, -1):
        total += (-1.0) ** n / (math.factorial(n) * (a + n))
        total *= x
    return -np.expm1(log_power) - np.exp(log_power) * a * total


def _phi(u):
    """u - ln(1 + u) for u > -1, without the cancellation for small u: with z = u / (2 + u),
    it is u z - 2 z^3 (1/3 + z^2/5 + z^4/7 + ...), summed while z^2k > 1e-17."""
    result = u - np.log1p(u)
    small = np.abs(u) < 0.5
    if small.any():
        s = u[small]
        z = s / (2.0 + s)
        square = z * z
        largest = float(np.max(square))
        terms = 1 if largest == 0 else min(20, max(1, math.ceil(math.log(1e-17) / math.log(largest))))
        series = np.zeros(s.shape)
        for k in range(terms, 0, -1):
            series = series * square + 1.0 / (2 * k + 1)
        result[small] = s * z - 2.0 * z * square * series
    return result


def _temme(a, u):
    """(P, Q) by Temme's uniform expansion (DLMF 8.12.3-8.12.8): with eta = sign(u) sqrt(2
    phi(u)), Q = erfc(eta sqrt(a/2)) / 2 + R and P = erfc(-eta sqrt(a/2)) / 2 - R, R =
    exp(-a eta^2 / 2) / sqrt(2 pi a) times the sum over k of c_k(eta) a^-k (as a polynomial in
    eta, to the degree whose terms matter at the largest |eta|)."""
    phi = _phi(u)
    eta = np.copysign(np.sqrt(2.0 * phi), u)
    powers = float(a) ** -np.arange(_TEMME_TERMS)
    coefficients = powers @ _temme_coefficients()  # the sum over k, per power of eta
    sizes = np.abs(coefficients) * float(np.max(np.abs(eta))) ** np.arange(coefficients.size)
    degree = int(np.flatnonzero(sizes > 1e-17 * sizes[0])[-1])
    total = np.full(u.shape, coefficients[degree])
    for coefficient in coefficients[:degree][::-1]:
        total = total * eta + coefficient
    remainder = np.exp(-a * phi) / math.sqrt(2.0 * math.pi * a) * total
    argument = eta * math.sqrt(0.5 * a)
    smaller = 0.5 * _erfc(np.abs(argument))
    above = argument > 0
    return np.where(above, 1.0 - smaller, smaller) - remainder, np.where(above, smaller, 1.0 - smaller) + remainder


@functools.cache
def _temme_coefficients():
    """d[k, n], the coefficient of eta^n in c_k(eta), k < _TEMME_TERMS, n < _TEMME_DEGREE.

    With lambda = x / a and mu = lambda - 1, eta^2 / 2 = mu - ln(1 + mu): eta = mu h(mu), h =
    sqrt(sum over j of 2 (-mu)^j / (j + 2)), reverted by Lagrange's formula ([eta^n] mu = [mu^(n-1)]
    h^-n / n). Then c_0 = 1/mu - 1/eta, and c_k = (c_(k-1)' + (-1)^k g_k eta / mu) / eta, where
    the Stirling coefficient g_k is what makes the bracket vanish at eta = 0."""
    size = _TEMME_DEGREE + 2 * _TEMME_TERMS + 2
    inside = np.array([2.0 * (-1.0) ** j / (j + 2) for j in range(size)])
    inverse_h = _series_power(inside, -0.5)
    mu = np.zeros(size + 1)  # mu[n]: the coefficient of eta^n
    power = np.zeros(size)
    power[0] = 1.0
    for n in range(1, size + 1):
        power = np.convolve(power, inverse_h)[:size]
        mu[n] = power[n - 1] / n
    eta_over_mu = _series_power(mu[1:], -1.0)  # eta / mu, a series from 1
    coefficients = np.zeros((_TEMME_TERMS, _TEMME_DEGREE))
    current = eta_over_mu[1:]  # c_0
    for k in range(_TEMME_TERMS):
        coefficients[k] = current[:_TEMME_DEGREE]
        derivative = current[1:] * np.arange(1, current.size)
        stirling_term = -derivative[0]  # (-1)^(k+1) g_(k+1)
        current = derivative[1:] + stirling_term * eta_over_mu[1:derivative.size]
    return coefficients


def _series_power(series, exponent):
    """The power series of f^exponent for f with f[0] = 1, to f's length (J. C. P. Miller)."""
    result = np.zeros(series.size)
    result[0] = 1.0
    for n in range(1, series.size):
        k = np.arange(1, n + 1)
        result[n] = np.sum((exponent * k - (n - k)) * series[k] * result[n - k]) / n
    return result


# ---- their inverses ----

_NEWTON_STEPS = 60


def gammaincinv(a, p):
    """The x with P(a, x) = p."""
    return _inverse_incomplete_gamma(a, p, True)


def gammainccinv(a, s):
    """The x with Q(a, x) = s."""
    return _inverse_incomplete_gamma(a, s, False)


def _inverse_incomplete_gamma(a, probability, lower):
    """Newton's method on ln F(x) = ln target in ln x, F the smaller of P and Q at the root
    (target = min(probability, 1 - probability)). ln P(e^y) and ln Q(e^y) are concave in y (the
    log-gamma distribution's density is log-concave), so every step lands below the root when F
    is P and above it when F is Q, and steps from that side approach the root monotonically: a
    point on the other side only bounds the bracket, and the next point is the step from the
    last point on the near side (or the bracket's geometric middle where that leaves it, as
    where F underflowed). Started from Wilson and Hilferty's cube (a >= 1 and a cube above 0.1)
    or otherwise the leading term of F; where P's leading term gives x below 1e-100, that is x
    (P = x^a / Gamma(a + 1) (1 - O(x)))."""
    a = float(a)
    probability = np.asarray(probability, dtype=np.float64)
    flat = probability.ravel()
    result = np.full(flat.shape, np.nan)
    result[flat == 0] = 0.0 if lower else np.inf
    result[flat == 1] = np.inf if lower else 0.0
    solve = np.flatnonzero((flat > 0) & (flat < 1))
    given = flat[solve]
    on_p = (given <= 0.5) == lower  # whether F is P
    target = np.minimum(given, 1.0 - given)
    x, leading = _initial_guess(a, target, on_p)
    tiny = on_p & (leading < _TINY_QUANTILE)
    result[solve[tiny]] = leading[tiny]
    solve, on_p, target, x = solve[~tiny], on_p[~tiny], target[~tiny], x[~tiny]
    low, high, from_near = np.zeros(x.shape), np.full(x.shape, np.inf), np.full(x.shape, np.nan)
    active = np.arange(x.size)
    for _ in range(_NEWTON_STEPS):
        here, side, wanted = x[active], on_p[active], target[active]
        p, q = _incomplete_gamma(a, here)
        function = np.where(side, p, q)
        above = np.where(side, function > wanted, function < wanted)  # here is above the root
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            slope = _prefactor(a, here) / function * np.where(side, 1.0, -1.0)
            step = (np.log(function) - np.log(wanted)) / slope
            proposal = here * np.exp(-step)
            valid = np.isfinite(proposal) & (proposal > 0)
            bracket_low = low[active] = np.where(above, low[active], here)
            bracket_high = high[active] = np.where(above, here, high[active])
            near = above != side  # the side of the root the steps approach it from
            seen_near = np.where(near, np.where(valid, proposal, np.nan), from_near[active])
            from_near[active] = seen_near
            open_above = ~np.isfinite(bracket_high)
            candidate = np.where(np.isnan(seen_near), np.where(valid, proposal, here * math.e), seen_near)
            middle = np.where(bracket_low > 0, np.sqrt(bracket_low * bracket_high), bracket_high / math.e)
            inside = (candidate > bracket_low) & (candidate < bracket_high)
            candidate = np.where(open_above | inside, candidate, middle)
            converged = valid & (np.abs(step) <= 4.0 * _EPSILON * np.maximum(1.0, 1.0 / np.abs(slope)))
            narrow = ~open_above & (bracket_high - bracket_low <= 4.0 * _EPSILON * bracket_high)
        x[active] = np.where(converged, proposal, candidate)
        active = active[~(converged | narrow)]
        if not active.size:
            break
    result[solve] = x
    return result.reshape(probability.shape)[()]


_TINY_QUANTILE = 1e-100


def _initial_guess(a, target, on_p):
    """(guess, P's leading-term x): Wilson and Hilferty, x = a (1 - 1/(9a) + z / (3 sqrt a))^3
    with z the normal quantile of P, where a >= 1 and the cube is above 0.1; otherwise P ~ x^a /
    Gamma(a + 1) for small x, and Q ~ x^(a-1) e^-x / Gamma(a) for large x."""
    z = ndtri(target) * np.where(on_p, 1.0, -1.0)
    cube = 1.0 - 1.0 / (9.0 * a) + z / (3.0 * math.sqrt(a))
    guess = a * np.maximum(cube, 0.0) ** 3
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        leading = np.exp((np.log(target) + math.lgamma(a + 1.0)) / a)
        large = np.maximum(-np.log(target) - math.lgamma(a), 1.0)
        large = np.maximum(-np.log(target) - math.lgamma(a) + (a - 1.0) * np.log(large), 1e-3)
    fallback = np.where(on_p, np.maximum(leading, _TINY_QUANTILE), large)
    usable = (a >= 1.0) & (cube > 0.1)
    return np.where(usable, guess, fallback), leading
