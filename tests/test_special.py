"""The special functions of the tail statistics (ioassess.models.special, numpy and math alone)
against scipy.special on many arguments over the ranges the fits use: durations' z-scores of any
size, probabilities down to 1e-300 (order statistics take quantiles at e^-665), Gamma shapes
from 0.01 to 1e8 (models/families.py: _MAX_SHAPE). Above a shape of 300 scipy's incomplete gamma
function is itself off by more than 1e-12 in places (2e-11 at 3000-8500, 4 % at 1e7 near the
mode, against 60-digit mpmath), so there the reference is mpmath."""
import math
import subprocess
import sys

import mpmath
import numpy as np
import pytest
from scipy import special as reference

from ioassess.models import special

RELATIVE = 1e-12


def relative_errors(ours, theirs, floor=1e-300):
    """|ours - theirs| / |theirs| where theirs is at least floor; elsewhere 0 if both are below
    floor or equal (infinities, NaN), else infinity."""
    ours, theirs = np.broadcast_arrays(np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64))
    errors = np.zeros(theirs.shape)
    sized = np.isfinite(theirs) & (np.abs(theirs) >= floor)
    errors[sized] = np.abs(ours[sized] - theirs[sized]) / np.abs(theirs[sized])
    alike = (ours == theirs) | (np.isnan(ours) & np.isnan(theirs)) | ((np.abs(ours) < floor) & (np.abs(theirs) < floor))
    errors[~sized & ~alike] = np.inf
    return errors


def assert_close(ours, theirs, arguments, relative=RELATIVE):
    errors = relative_errors(ours, theirs)
    worst = int(np.argmax(errors))
    assert errors[worst] <= relative, (f"relative error {errors[worst]:.2e} at {np.ravel(arguments)[worst]!r}: "
                                       f"{np.ravel(ours)[worst]!r} against {np.ravel(theirs)[worst]!r}")


RNG = np.random.default_rng(20261128)
Z_SCORES = np.concatenate([RNG.normal(0, 1, 20_000), RNG.normal(0, 10, 20_000), RNG.uniform(-40, 40, 20_000),
                           np.linspace(-39, 39, 20_001), np.linspace(-8.01, 8.01, 20_001),
                           [0.0, -0.0, 1e-300, -1e-300, 11.3, -11.3, 1e300, -1e300, np.inf, -np.inf, np.nan]])
PROBABILITIES = np.concatenate([10 ** -RNG.uniform(0, 300, 20_000), RNG.uniform(0, 1, 20_000),
                                1 - 10 ** -RNG.uniform(1, 15, 5000), 0.5 + RNG.normal(0, 1e-6, 1000),
                                [1e-300, 1e-41, 0.25, 0.5, 0.75, 1 - 2 ** -53, 0.0, 1.0, np.nan, -0.5, 1.5]])
SHAPES = np.concatenate([10 ** RNG.uniform(-3, 8, 3000), RNG.uniform(0.01, 60, 2000),
                         [0.04, 1.4616321449683623, 2.0, 12.0]])


def test_the_normal_distribution_matches_scipy():
    assert_close(special.ndtr(Z_SCORES), reference.ndtr(Z_SCORES), Z_SCORES)
    assert_close(special.ndtri(PROBABILITIES), reference.ndtri(PROBABILITIES), PROBABILITIES)
    points = np.concatenate([RNG.uniform(-45, 45, 5000), np.linspace(-10, 40, 5001)])
    assert_close([special.log_ndtr(z) for z in points], reference.log_ndtr(points), points)
    assert_close([special.erfc(z) for z in points], reference.erfc(points), points)
    finite = Z_SCORES[np.isfinite(Z_SCORES) & (np.abs(Z_SCORES) < 700)]
    assert_close(special.expit(finite), reference.expit(finite), finite)


def test_the_gamma_function_family_matches_scipy():
    for ours, theirs in ((special.digamma, reference.digamma), (special.trigamma, lambda a: reference.zeta(2.0, a)),
                         (special.gammaln, reference.gammaln)):
        # near digamma's zero (1.46) and ln Gamma's (1 and 2) the error is absolute: 1e-16
        errors = relative_errors([ours(float(a)) for a in SHAPES], theirs(SHAPES))
        values = np.abs(theirs(SHAPES))
        assert np.all((errors <= RELATIVE) | (errors * values <= 1e-15)), ours.__name__


def shapes_and_arguments(shapes):
    """For each shape a: x over decades around a, near a in its standard deviations (3 and
    30), small and tiny x, and the edges; probabilities down to 1e-300."""
    for a in shapes:
        spread = math.sqrt(a)
        x = np.concatenate([a * 10 ** RNG.uniform(-3, 1, 100), a + spread * RNG.normal(0, 3, 100),
                            a + spread * RNG.normal(0, 30, 100), RNG.uniform(0, 5, 30), 10 ** RNG.uniform(-15, 3, 30),
                            [0.0, np.inf, a, a + 1, 0.5 * a, 2 * a, 0.7 * a, 1.3 * a]])
        probabilities = np.concatenate([10 ** -RNG.uniform(0, 300, 60), RNG.uniform(0, 1, 30),
                                        [1e-300, 1e-41, 0.5, 0.9, 0.0, 1.0]])
        yield float(a), x[x >= 0], probabilities


@pytest.mark.parametrize("low, high", [(0.01, 1.0), (1.0, 50.0), (50.0, 300.0)])
def test_the_incomplete_gamma_functions_match_scipy(low, high):
    shapes = np.concatenate([10 ** RNG.uniform(math.log10(low), math.log10(high), 100), [low, high]])
    for a, x, probabilities in shapes_and_arguments(shapes):
        assert_close(special.gammainc(a, x), reference.gammainc(a, x), x)
        assert_close(special.gammaincc(a, x), reference.gammaincc(a, x), x)
        assert_close(special.gammaincinv(a, probabilities), reference.gammaincinv(a, probabilities), probabilities)
        assert_close(special.gammainccinv(a, probabilities), reference.gammainccinv(a, probabilities), probabilities)


def mpmath_p_q(a, x):
    """(P, Q, digits) by mpmath as 1 - Q and Q, with enough digits for the smaller down to
    1e-330 (it is about e^(-a phi), phi = u - ln(1 + u), u = x / a - 1)."""
    u = x / a - 1.0
    digits = 60 + min(330, int(a * (u - math.log1p(u)) / 2.3)) if x > 0 else 60
    with mpmath.workdps(digits):
        upper = mpmath.gammainc(mpmath.mpf(a), mpmath.mpf(x), mpmath.inf, regularized=True)
        return 1 - upper, upper, digits


@pytest.mark.parametrize("a", [300.0, 963.5, 3000.0, 8457.3, 1e5, 1e6, 1e7, 1e8])
def test_the_incomplete_gamma_functions_of_large_shapes_match_mpmath(a):
    """P and Q to 1e-12 where they are above 1e-300, and x of the inverses to 1e-12: the
    relative error of x is |ln F(x) - ln target| / (d ln F / d ln x), with F and its slope
    x^a e^-x / Gamma(a) / F from mpmath."""
    spread = math.sqrt(a)
    x = np.concatenate([a + spread * np.array([-30, -8, -3, -1, -0.1, 0, 0.1, 1, 3, 8, 30]),
                        a * np.array([0.5, 0.7, 1.3, 2.0])])
    x = x[x > 0]
    u = x / a - 1.0
    representable = a * (u - np.log1p(u)) < 745  # elsewhere the smaller of P and Q is below 1e-323
    lower, upper = special.gammainc(a, x), special.gammaincc(a, x)
    assert np.all(np.where(u < 0, lower, upper)[~representable] < 1e-300)
    assert np.all(np.where(u < 0, upper, lower)[~representable] == 1.0)
    for i in np.flatnonzero(representable):
        expected = mpmath_p_q(a, x[i])
        assert_close([lower[i], upper[i]], [float(expected[0]), float(expected[1])], [x[i], x[i]])
    targets = np.array([1e-300, 1e-100, 1e-20, 1e-5, 0.01, 0.3, 0.5])
    for inverse, upper_side in ((special.gammaincinv, False), (special.gammainccinv, True)):
        for target, value in zip(targets, inverse(a, targets)):
            lower, upper, digits = mpmath_p_q(a, value)
            with mpmath.workdps(digits):
                function = upper if upper_side else lower
                slope = mpmath.exp(a * mpmath.log(value) - value - mpmath.loggamma(a)) / function
                error = abs(mpmath.log(function) - mpmath.log(target)) / slope
            assert error <= RELATIVE, (inverse.__name__, target, value, float(error))


def test_edges_and_scalars():
    assert special.ndtri(0.0) == -np.inf and special.ndtri(1.0) == np.inf and special.ndtri(0.5) == 0.0
    assert np.isnan(special.ndtri(np.nan)) and np.isnan(special.ndtri(-0.1)) and np.isnan(special.ndtr(np.nan))
    assert np.ndim(special.ndtr(0.3)) == np.ndim(special.ndtri(0.3)) == np.ndim(special.gammainc(2.0, 1.0)) == 0
    for a in (0.05, 3.0, 500.0):
        assert special.gammainc(a, 0.0) == 0.0 and special.gammaincc(a, 0.0) == 1.0
        assert special.gammainc(a, np.inf) == 1.0 and special.gammaincc(a, np.inf) == 0.0
        assert special.gammaincinv(a, 0.0) == 0.0 and special.gammaincinv(a, 1.0) == np.inf
        assert special.gammainccinv(a, 0.0) == np.inf and special.gammainccinv(a, 1.0) == 0.0
        assert np.isnan(special.gammainc(a, np.nan)) and np.isnan(special.gammaincinv(a, 2.0))
    assert special.gammaincinv(0.7, 1e-262) == reference.gammaincinv(0.7, 1e-262) == 0.0  # below the smallest double
    shaped = special.gammaincc(2.5, np.arange(6.0).reshape(2, 3))
    assert shaped.shape == (2, 3)


def test_the_tail_statistics_import_no_scipy():
    """The reason for the module: a report's tail fits without scipy's 0.2-0.45 s import."""
    code = "import sys, ioassess.models.tails; assert 'scipy' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)
