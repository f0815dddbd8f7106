"""Tail statistics of I/O durations (Dong, Byna, Wu 2015), made precise; docs/tail-statistics.md
gives the methods, the decisions and the measured numbers.

analyse_durations(seconds) splits the durations at a pivot into a head (at or below it) and a
tail (above it), fits the head and tail families of models/families.py, ranks them, compares
power law and log-normal with Vuong's test, computes the summary statistics and the order
statistics of the fitted model, and returns a TailAnalysis (plain data; as_dict() for JSON).

The model (HeadTailModel) is a mixture: a Normal head with weight w and a tail family with weight
1 - w whose location (the power law's xmin) is the pivot. The head group (all durations at or
below the pivot) is the head's Normal truncated at the pivot, so the Normal is fitted to it as
such, and w = (head share) / Phi((pivot - mean) / sd): the Normal's few durations above the pivot
are part of the model, and the tail fits weigh each tail duration by the probability that it
belongs to the tail (EM with the head fixed). The pivot minimises the Kolmogorov-Smirnov
distances of the head and the tail group to the model with the best tail family (least BIC),
each scaled by the square root of the group's size (split_distance). It is searched over tail
counts on a logarithmic grid, then refined twice between the best count's neighbours, on the
sorted durations (thinned to every m-th order statistic beyond SEARCH_POINTS, with the tail
families fitted without EM); the final fits use all durations.
"""
import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from . import special
from .families import HEAD_FAMILIES, LOG_NORMAL, NORMAL, POWER_LAW, TAIL_FAMILIES, TailSample, normal_from_moments
from .plain import finite_list, finite_or_none

STATUS_OK = "ok"
STATUS_TOO_FEW = "too few points"
STATUS_ALL_EQUAL = "all values equal"
STATUS_NO_TAIL = "no tail"

# Longer is no duration a job's clock measures (about 31 700 years) but a corrupt record; such
# values are left out like NaN, and the squares and fourth powers of the rest cannot overflow.
MAX_DURATION_SECONDS = 1e12
MIN_GROUP_POINTS = 5  # in the head and in the tail of any split
MIN_POINTS = 2 * MIN_GROUP_POINTS
MAX_TAIL_FRACTION = 0.5  # a tail is the minority of the durations
SEARCH_POINTS = 20_000  # the pivot search thins larger data to about this many order statistics
GRID_POINTS = 24  # tail counts on the first, logarithmic grid
REFINE_POINTS = 16  # tail counts between the best count's neighbours, per refinement
REFINE_ROUNDS = 2
EM_TOLERANCE = 1e-10  # relative change of the log-likelihood at which EM stops
EM_MAX_STEPS = 200
VUONG_LEVEL = 0.1  # below this p-value the Vuong test favours one family (Clauset et al.)
DEFAULT_SERVER_COUNTS = tuple(2 ** i for i in range(11))  # 1, 2, 4, ... 1024
REFERENCE_MOMENTS = {"normal": {"skewness": 0.0, "kurtosis": 3.0},
                     "uniform": {"skewness": 0.0, "kurtosis": 1.8}}


# ---- the model ----

@dataclass(frozen=True, eq=False)
class HeadTailModel:
    """head_weight * Normal(head = (mean, sd)) + (1 - head_weight) * tail, where tail is a
    frozen tail family located at the pivot. cdf, sf, ppf, isf of the mixture."""

    head: tuple
    head_weight: float
    tail: object
    pivot: float

    @property
    def tail_weight(self):
        return 1.0 - self.head_weight

    def cdf(self, x):
        x = np.asarray(x, dtype=np.float64)
        result = np.array(self.head_weight * NORMAL.cdf(x, self.head))
        above = x > self.pivot
        result[above] += self.tail_weight * self.tail.cdf(x[above])
        return result

    def sf(self, x):
        x = np.asarray(x, dtype=np.float64)
        return self.head_weight * NORMAL.sf(x, self.head) + self.tail_weight * self.tail.sf(x)

    def ppf(self, u):
        u = np.asarray(u, dtype=np.float64)
        result = np.empty(u.shape)
        in_head = u <= self._cdf_at_pivot
        result[in_head] = NORMAL.ppf(u[in_head] / self.head_weight, self.head)
        result[~in_head] = self._above_pivot(1.0 - u[~in_head])
        return result

    def isf(self, s):
        s = np.asarray(s, dtype=np.float64)
        result = np.empty(s.shape)
        above = s < 1.0 - self._cdf_at_pivot
        result[above] = self._above_pivot(s[above])
        result[~above] = NORMAL.ppf((1.0 - s[~above]) / self.head_weight, self.head)
        return result

    def kink_probabilities(self):
        """Where the quantile function has a kink: at the pivot, where the tail's density
        starts (for expected_maximum)."""
        return (self._cdf_at_pivot,)

    @cached_property
    def _cdf_at_pivot(self):
        return self.head_weight * float(NORMAL.cdf(self.pivot, self.head))

    def _above_pivot(self, s):
        """The x > pivot with sf(x) = s, by bisection. sf(x) >= s where either part alone is
        s (the larger of those x bounds the root from below) and sf(x) <= s where each part
        is at most s / 2 (the larger of those x bounds it from above)."""
        head_sf = np.minimum(s / self.head_weight, 1.0)
        tail_sf = np.minimum(s / self.tail_weight, 1.0)
        low = np.maximum(self.pivot, np.maximum(NORMAL.isf(head_sf, self.head), self.tail.isf(tail_sf)))
        high = np.maximum(NORMAL.isf(0.5 * head_sf, self.head), self.tail.isf(0.5 * tail_sf))
        for _ in range(_BISECTION_STEPS):
            middle = 0.5 * (low + high)
            above_root = self.sf(middle) < s
            high = np.where(above_root, middle, high)
            low = np.where(above_root, low, middle)
        return 0.5 * (low + high)


_BISECTION_STEPS = 64  # the bracket shrinks to its floating-point resolution


# ---- results ----

@dataclass(frozen=True)
class FamilyFit:
    """One family fitted to one group: parameters by name (empty when not converged); the KS
    distance of the group against the model's distribution of that group (the head: the family
    truncated at the pivot; the tail: the mixture above the pivot); the group's log-likelihood
    under the same; BIC = free parameters * ln(group size) - 2 * log-likelihood."""

    family: str
    converged: bool
    parameters: dict = field(default_factory=dict)
    ks_distance: "float | None" = None
    log_likelihood: "float | None" = None
    bic: "float | None" = None

    def as_dict(self):
        return {"family": self.family, "converged": self.converged,
                "parameters": {name: finite_or_none(value) for name, value in self.parameters.items()},
                "ks_distance": finite_or_none(self.ks_distance),
                "log_likelihood": finite_or_none(self.log_likelihood), "bic": finite_or_none(self.bic)}


@dataclass(frozen=True)
class VuongTest:
    """Vuong's test of power law against log-normal on the tail group: log_likelihood_ratio R
    = the sum of the pointwise log-likelihood differences, statistic = R / (sqrt(n) * their
    standard deviation), positive favouring the power law, its two-sided p-value, and the
    favoured family at VUONG_LEVEL ("neither" above it)."""

    log_likelihood_ratio: float
    statistic: "float | None"
    p_value: "float | None"
    favoured: str

    def as_dict(self):
        return {"log_likelihood_ratio": finite_or_none(self.log_likelihood_ratio),
                "statistic": finite_or_none(self.statistic), "p_value": finite_or_none(self.p_value),
                "favoured": self.favoured}


@dataclass(frozen=True)
class OrderStatistics:
    """The expected maximum of n independent durations for each n in server_counts: of the
    fitted model (None where its mean is not finite), its ratio to the model's median, and of
    the durations themselves (n drawn with replacement)."""

    server_counts: tuple
    median_seconds: float
    expected_max_seconds: tuple
    ratio_to_median: tuple
    empirical_expected_max_seconds: tuple

    def as_dict(self):
        return {"server_counts": list(self.server_counts), "median_seconds": finite_or_none(self.median_seconds),
                "expected_max_seconds": finite_list(self.expected_max_seconds),
                "ratio_to_median": finite_list(self.ratio_to_median),
                "empirical_expected_max_seconds": finite_list(self.empirical_expected_max_seconds)}


@dataclass(frozen=True)
class TailAnalysis:
    """The result of analyse_durations.

    status: STATUS_OK, or why there is no split: too few points (fewer than MIN_POINTS valid
    durations), all values equal, no tail (a single Normal describes the durations at least as
    well by BIC, or no split has a fittable head). Without a split the split's fields are None
    or empty; with "no tail", head_fits and the order statistics are those of all durations
    (untruncated) and tail_fraction and tail_time_share are 0.
    count: durations used; excluded_count: those left out (NaN, negative, or above
    MAX_DURATION_SECONDS, which includes infinite).
    tail_fraction: the tail's weight in the model (the durations above the pivot, less those
    the head's Normal accounts for); tail_count: durations above the pivot; tail_time_share:
    their durations weighted by the probability of being in the tail, over the total."""

    status: str
    count: int
    excluded_count: int
    pivot_seconds: "float | None" = None
    tail_count: int = 0
    tail_fraction: "float | None" = None
    tail_time_share: "float | None" = None
    skewness: "float | None" = None
    kurtosis: "float | None" = None
    head_fits: tuple = ()
    head_family: "str | None" = None
    tail_fits: tuple = ()
    tail_family: "str | None" = None
    model_ks_distance: "float | None" = None
    vuong: "VuongTest | None" = None
    order_statistics: "OrderStatistics | None" = None

    def fit(self, family):
        """The FamilyFit of the named family (head or tail), or None."""
        return next((fit for fit in self.head_fits + self.tail_fits if fit.family == family), None)

    def model(self):
        """The fitted distribution: the HeadTailModel, with "no tail" the Normal of all
        durations, otherwise None."""
        normal = self.fit(NORMAL.name)
        if normal is None or not normal.converged:
            return None
        head = tuple(normal.parameters.values())
        if self.tail_family is None:
            return NORMAL.frozen(head)
        tail = next(family for family in TAIL_FAMILIES if family.name == self.tail_family)
        return HeadTailModel(head, 1.0 - self.tail_fraction,
                             tail.frozen(tuple(self.fit(tail.name).parameters.values())), self.pivot_seconds)

    def as_dict(self):
        return {"status": self.status, "count": self.count, "excluded_count": self.excluded_count,
                "pivot_seconds": finite_or_none(self.pivot_seconds), "tail_count": self.tail_count,
                "tail_fraction": finite_or_none(self.tail_fraction),
                "tail_time_share": finite_or_none(self.tail_time_share),
                "skewness": finite_or_none(self.skewness), "kurtosis": finite_or_none(self.kurtosis),
                "reference_moments": REFERENCE_MOMENTS,
                "head_fits": [fit.as_dict() for fit in self.head_fits], "head_family": self.head_family,
                "tail_fits": [fit.as_dict() for fit in self.tail_fits], "tail_family": self.tail_family,
                "model_ks_distance": finite_or_none(self.model_ks_distance),
                "vuong": self.vuong.as_dict() if self.vuong else None,
                "order_statistics": self.order_statistics.as_dict() if self.order_statistics else None}


# ---- the analysis ----

def analyse_durations(seconds, server_counts=DEFAULT_SERVER_COUNTS):
    """The tail analysis of durations in seconds (any shape; NaN, negative values and values
    above MAX_DURATION_SECONDS, infinite included, are left out and counted). server_counts:
    the n of the order statistics, positive integers (ValueError otherwise)."""
    counts = _server_counts(server_counts)
    durations, excluded = _valid_sorted(seconds)
    if durations.size < MIN_POINTS:
        return TailAnalysis(STATUS_TOO_FEW, durations.size, excluded)
    if durations[0] == durations[-1]:
        return TailAnalysis(STATUS_ALL_EQUAL, durations.size, excluded)
    skewness, kurtosis = skewness_kurtosis(durations)
    common = dict(count=durations.size, excluded_count=excluded, skewness=skewness, kurtosis=kurtosis)
    pivot = find_pivot(durations)
    analysis = None if pivot is None else _split_analysis(durations, pivot, counts, common)
    if analysis is not None:
        return analysis
    head_fits = tuple(_head_fit(family, durations, math.inf) for family in HEAD_FAMILIES)
    normal = head_fits[HEAD_FAMILIES.index(NORMAL)]
    order_statistics = None
    if normal.converged:
        order_statistics = _order_statistics(NORMAL.frozen(tuple(normal.parameters.values())), durations, counts)
    return TailAnalysis(STATUS_NO_TAIL, tail_fraction=0.0, tail_time_share=0.0, head_fits=head_fits,
                        head_family=_least_bic_name(head_fits), order_statistics=order_statistics, **common)


def _split_analysis(durations, pivot, counts, common):
    """The TailAnalysis of the split at pivot, or None when its model cannot be fitted or does
    not beat a single Normal of all durations by BIC (its extra parameters: the tail family's,
    the pivot and the weight)."""
    size = durations.size
    head_count = int(np.searchsorted(durations, pivot, side="right"))
    head_values, sample = durations[:head_count], TailSample(durations[head_count:], pivot)
    head = NORMAL.fit(head_values, pivot)
    head_weight = _head_weight(head, pivot, head_count / size)
    if head_weight is None:
        return None
    candidates = _tail_candidates(sample, head, head_weight, refine=True)
    best = _least_bic(candidates)
    if best.params is None:
        return None
    log_likelihood = (head_count * math.log(head_weight) + NORMAL.log_likelihood(head_values, head)
                      + best.log_likelihood)
    free_parameters = NORMAL.free_parameters + best.family.free_parameters + 2
    normal = NORMAL.fit(durations)
    normal_log_likelihood = -math.inf if normal is None else NORMAL.log_likelihood(durations, normal)
    if (free_parameters * math.log(size) - 2 * log_likelihood
            >= NORMAL.free_parameters * math.log(size) - 2 * normal_log_likelihood):
        return None
    model = best.model(head, head_weight)
    head_fits = tuple(_head_fit(family, head_values, pivot) for family in HEAD_FAMILIES)
    power_law, lognormal = (candidates[TAIL_FAMILIES.index(family)] for family in (POWER_LAW, LOG_NORMAL))
    vuong = None
    if power_law.params is not None and lognormal.params is not None:
        vuong = vuong_test(power_law.log_density - lognormal.log_density)
    return TailAnalysis(
        STATUS_OK, pivot_seconds=float(pivot), tail_count=sample.values.size, tail_fraction=model.tail_weight,
        tail_time_share=float(np.dot(best.responsibility, sample.values) / np.sum(durations)),
        head_fits=head_fits, head_family=_least_bic_name(head_fits),
        tail_fits=tuple(candidate.family_fit(head, head_weight) for candidate in candidates),
        tail_family=best.family.name, model_ks_distance=ks_distance(model.cdf(durations)), vuong=vuong,
        order_statistics=_order_statistics(model, durations, counts), **common)


def _head_weight(head, pivot, head_share):
    """The Normal's weight in the mixture, head_share / Phi((pivot - mean) / sd); None unless
    the head is fitted and the weight is below 1 (a tail must remain)."""
    if head is None:
        return None
    weight = head_share / float(NORMAL.cdf(pivot, head))
    return weight if weight < 1.0 else None


@dataclass(frozen=True, eq=False)
class _TailCandidate:
    """A tail family fitted to the tail group of a split (params None: not converged), with the
    mixture's log density at each tail value and its tail part (the tail's weight times its
    density), and so each value's probability of being in the tail (its responsibility)."""

    family: object
    sample: TailSample
    params: "tuple | None" = None
    log_density: "np.ndarray | None" = None
    tail_log_density: "np.ndarray | None" = None

    @cached_property
    def responsibility(self):
        return np.exp(self.tail_log_density - self.log_density)

    @cached_property
    def log_likelihood(self):
        return -math.inf if self.params is None else float(np.sum(self.log_density))

    @cached_property
    def bic(self):
        if not math.isfinite(self.log_likelihood):
            return math.inf
        return self.family.free_parameters * math.log(self.sample.values.size) - 2 * self.log_likelihood

    def model(self, head, head_weight):
        return HeadTailModel(head, head_weight, self.family.frozen(self.params), self.sample.location)

    def family_fit(self, head, head_weight):
        if self.params is None or not math.isfinite(self.log_likelihood):
            return FamilyFit(self.family.name, False)
        model = self.model(head, head_weight)
        below = float(model.cdf(self.sample.location))
        conditional_cdf = (model.cdf(self.sample.values) - below) / (1.0 - below)
        return FamilyFit(self.family.name, True, dict(zip(self.family.parameter_names, self.params)),
                         ks_distance(conditional_cdf), self.log_likelihood, self.bic)


def _tail_candidates(sample, head, head_weight, refine):
    """A _TailCandidate per tail family, in TAIL_FAMILIES order. Each maximises the tail
    group's mixture log-likelihood, the sum of ln(w phi(x) + (1 - w) f(x)), over the family's
    parameters by EM with the head fixed (refine=True), or is the family's plain fit to the
    tail group (refine=False, for the pivot search)."""
    head_log_density = math.log(head_weight) + NORMAL.logpdf(sample.values, head)
    log_tail_weight = math.log(1.0 - head_weight)
    return [_mixture_fit(family, sample, head_log_density, log_tail_weight, refine) for family in TAIL_FAMILIES]


def _mixture_fit(family, sample, head_log_density, log_tail_weight, refine):
    def evaluate(params):
        tail_log_density = log_tail_weight + family.logpdf(sample.values, params)
        return _TailCandidate(family, sample, params, np.logaddexp(head_log_density, tail_log_density),
                              tail_log_density)

    params = family.fit(sample)
    if params is None:
        return _TailCandidate(family, sample)
    candidate = evaluate(params)
    for _ in range(EM_MAX_STEPS if refine else 0):
        if not np.any(candidate.responsibility > 0):
            return _TailCandidate(family, sample)
        params = family.fit(sample.weighted(candidate.responsibility))
        if params is None:
            return _TailCandidate(family, sample)
        previous, candidate = candidate, evaluate(params)
        if abs(candidate.log_likelihood - previous.log_likelihood) <= EM_TOLERANCE * abs(candidate.log_likelihood):
            return candidate
    return _TailCandidate(family, sample) if refine else candidate


def _least_bic(candidates):
    return min(candidates, key=lambda candidate: candidate.bic)


def _least_bic_name(fits):
    converged = [fit for fit in fits if fit.converged]
    return min(converged, key=lambda fit: fit.bic).family if converged else None


def _head_fit(family, values, upper):
    """family fitted to the sorted values as truncated to x <= upper, and evaluated so."""
    params = family.fit(values, upper)
    mass = 0.0 if params is None else float(family.cdf(upper, params))
    log_likelihood = family.log_likelihood(values, params) - values.size * math.log(mass) if mass > 0 else -math.inf
    if not math.isfinite(log_likelihood):
        return FamilyFit(family.name, False)
    return FamilyFit(family.name, True, dict(zip(family.parameter_names, params)),
                     ks_distance(family.cdf(values, params) / mass), log_likelihood,
                     family.free_parameters * math.log(values.size) - 2 * log_likelihood)


# ---- the pivot ----

def find_pivot(durations):
    """The pivot (a duration; the head group is at or below it) whose split has the least
    split_distance to the sorted, valid durations, or None when no split can be fitted. Grid:
    GRID_POINTS tail counts from MIN_GROUP_POINTS to MAX_TAIL_FRACTION of the (thinned)
    durations, evenly spaced in log; then REFINE_ROUNDS times REFINE_POINTS counts between the
    best count's neighbours."""
    search = _PivotSearch(_thinned(durations, SEARCH_POINTS))
    grid = np.geomspace(MIN_GROUP_POINTS, MAX_TAIL_FRACTION * search.values.size, GRID_POINTS)
    best = search.best(grid)
    for _ in range(REFINE_ROUNDS):
        below, above = grid[grid < best], grid[grid > best]
        grid = np.geomspace(below.max() if below.size else best, above.min() if above.size else best,
                            REFINE_POINTS)
        best = search.best(np.append(grid, best))
    return search.pivot(best)


class _PivotSearch:
    """The split_distance of the model of each split of sorted values. Head means
    and variances come from prefix sums (of the values minus their median, so that the variance
    does not cancel away); each split is evaluated once."""

    def __init__(self, values):
        self.values = values
        self.reference = values[values.size // 2]
        shifted = values - self.reference
        self.prefix_sum = np.concatenate(([0.0], np.cumsum(shifted)))
        self.prefix_sum_squares = np.concatenate(([0.0], np.cumsum(shifted * shifted)))
        self.distance_by_head_count = {}

    def head_count(self, tail_count):
        """Head size for a tail of about tail_count: ties at the split all go to the head."""
        head_count = self.values.size - int(round(tail_count))
        return int(np.searchsorted(self.values, self.values[head_count - 1], side="right"))

    def best(self, tail_counts):
        """The tail count among tail_counts whose split has the least distance."""
        return min(tail_counts, key=lambda tail_count: self.distance(self.head_count(tail_count)))

    def pivot(self, tail_count):
        head_count = self.head_count(tail_count)
        return float(self.values[head_count - 1]) if math.isfinite(self.distance(head_count)) else None

    def distance(self, head_count):
        if head_count not in self.distance_by_head_count:
            self.distance_by_head_count[head_count] = self._evaluate(head_count)
        return self.distance_by_head_count[head_count]

    def _evaluate(self, head_count):
        values = self.values
        if not MIN_GROUP_POINTS <= head_count <= values.size - MIN_GROUP_POINTS:
            return math.inf
        mean_shift = self.prefix_sum[head_count] / head_count
        variance = self.prefix_sum_squares[head_count] / head_count - mean_shift * mean_shift
        pivot = values[head_count - 1]
        head = normal_from_moments(self.reference + mean_shift, variance, pivot)
        head_weight = _head_weight(head, pivot, head_count / values.size)
        if head_weight is None:
            return math.inf
        best = _least_bic(_tail_candidates(TailSample(values[head_count:], pivot), head, head_weight, refine=False))
        if best.params is None:
            return math.inf
        return split_distance(best.model(head, head_weight).cdf(values), head_count)


# ---- statistics ----

def split_distance(cdf_at_sorted, head_count):
    """The pivot search's objective: sqrt(n_head) D_head + sqrt(n_tail) D_tail, where D_head
    and D_tail are the KS distances of the head and the tail group to the model's distribution
    of each (its CDF conditioned on x <= pivot and on x > pivot), from the model's CDF at the
    sorted values, whose head group is the first head_count. Scaled by the square root of its
    size, each group's distance has Kolmogorov's distribution when the model is right, whatever
    the group's size."""
    tail_count = cdf_at_sorted.size - head_count
    at_pivot = head_count / cdf_at_sorted.size  # the model's CDF at the pivot, by its head weight
    return (math.sqrt(head_count) * ks_distance(cdf_at_sorted[:head_count] / at_pivot)
            + math.sqrt(tail_count) * ks_distance((cdf_at_sorted[head_count:] - at_pivot) / (1.0 - at_pivot)))


def ks_distance(cdf_at_sorted):
    """Kolmogorov-Smirnov distance between the empirical CDF of sorted values and a model
    whose CDF at them is cdf_at_sorted."""
    size = cdf_at_sorted.size
    steps = np.arange(size + 1) / size
    return float(max(np.max(steps[1:] - cdf_at_sorted), np.max(cdf_at_sorted - steps[:-1])))


def vuong_test(log_ratio_terms):
    """Vuong's test from the pointwise log-likelihood differences (first model minus second);
    VuongTest.favoured names the power law for a positive statistic, the log-normal for a
    negative one."""
    ratio = float(np.sum(log_ratio_terms))
    spread = float(np.std(log_ratio_terms))
    if not (math.isfinite(ratio) and spread > 0):
        return VuongTest(ratio, None, None, "neither")
    statistic = ratio / (math.sqrt(log_ratio_terms.size) * spread)
    p_value = float(special.erfc(abs(statistic) / math.sqrt(2.0)))
    favoured = "neither" if p_value >= VUONG_LEVEL else (POWER_LAW.name if statistic > 0 else LOG_NORMAL.name)
    return VuongTest(ratio, statistic, p_value, favoured)


def skewness_kurtosis(values):
    """Moment skewness m3 / m2^1.5 and kurtosis m4 / m2^2 (not excess: Normal 3, Uniform 1.8),
    both None without spread. The values are scaled to a largest magnitude of 1 first, so that
    a huge duration cannot overflow the fourth powers."""
    largest = float(np.max(np.abs(values)))
    if not largest > 0:
        return None, None
    centred = values / largest
    centred = centred - np.mean(centred)
    squares = centred * centred
    second = float(np.mean(squares))
    if not second > 0:
        return None, None
    return float(np.mean(squares * centred)) / second ** 1.5, float(np.mean(squares * squares)) / second ** 2


# ---- order statistics ----

# Double-exponential quadrature for expected_maximum, trapezoidal rule on evenly spaced tau:
# on [a, inf), t = a + exp(tau - e^-tau) (t - a from 1e-41 to 665); on [a, b], tanh-sinh,
# t = a + (b - a) expit(pi sinh(tau)) (ends approached to 1e-23 of b - a).
_TAU_STEP = 1.0 / 16.0
_HALF_LINE_TAU = np.arange(-4.5, 6.5 + _TAU_STEP / 2, _TAU_STEP)
_HALF_LINE_OFFSETS = np.exp(_HALF_LINE_TAU - np.exp(-_HALF_LINE_TAU))
_HALF_LINE_WEIGHTS = _HALF_LINE_OFFSETS * (1.0 + np.exp(-_HALF_LINE_TAU)) * _TAU_STEP
_FINITE_TAU = np.arange(-3.5, 3.5 + _TAU_STEP / 2, _TAU_STEP)
_FINITE_SHARES = special.expit(math.pi * np.sinh(_FINITE_TAU))
_FINITE_WEIGHTS = _FINITE_SHARES * (1.0 - _FINITE_SHARES) * math.pi * np.cosh(_FINITE_TAU) * _TAU_STEP
_TRUNCATION_TOLERANCE = 1e-10
_NEGLIGIBLE_WEIGHT = 1e-17


def expected_maximum(distribution, counts, kinks=()):
    """E[max of n independent draws] for each n in counts (positive integers), for a
    distribution with vectorised ppf(u) and isf(s) (scipy.stats frozen distributions, the
    families' Frozen, HeadTailModel); NaN where the integral does not converge (the mean is
    infinite, as for a power law with alpha <= 2, or too heavy to compute). kinks: the
    probabilities u in (0, 1) at which the quantile function has a kink (HeadTailModel:
    kink_probabilities()); the integral is split there.

    E[max_n] = integral of 1 - F(x)^n dx  (for x >= 0, minus the integral of F^n below 0)
             = integral over u in (0, 1) of Q(u) n u^(n-1) du          (x = Q(u), by parts)
             = integral over t > 0 of Q(1 - e^-t) n e^-t (1 - e^-t)^(n-1) dt
    The weight is now the density of the largest of n unit exponentials, a bump of width ~1 at
    t = ln n, and even a power-law quantile grows only like e^(t / (alpha - 1)), so the integrand
    decays exponentially. Double-exponential substitutions (see above) make it decay double-
    exponentially at the ends of each piece, where the trapezoidal rule converges geometrically
    (a kink inside a piece would cost that, hence the split); one set of quantiles serves every
    n. Quantiles are taken as isf(e^-t) (accurate where the survival probability is tiny) and,
    for t < ln 2, as ppf(1 - e^-t) (accurate where u is tiny)."""
    counts = _server_counts(counts)
    nodes, node_weights = _quadrature_nodes(sorted(-math.log1p(-u) for u in kinks))
    upper = nodes >= math.log(2.0)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        quantiles = np.empty(nodes.size)
        quantiles[upper] = distribution.isf(np.exp(-nodes[upper]))
        quantiles[~upper] = distribution.ppf(-np.expm1(-nodes[~upper]))
        n = np.asarray(counts, dtype=np.float64)[:, None]
        terms = n * np.exp((n - 1.0) * np.log(-np.expm1(-nodes)) - nodes) * node_weights * quantiles
        totals = np.sum(terms, axis=1)
        truncated = np.abs(terms[:, 0]) + np.abs(terms[:, -1]) > _TRUNCATION_TOLERANCE * np.abs(totals)
    return np.where(np.isfinite(totals) & ~truncated, totals, np.nan)


def _quadrature_nodes(kink_times):
    """Nodes t and weights covering (0, inf), split at the (sorted, positive) kink_times."""
    starts = [0.0] + list(kink_times)
    nodes = [start + (end - start) * _FINITE_SHARES for start, end in zip(starts, kink_times)]
    weights = [(end - start) * _FINITE_WEIGHTS for start, end in zip(starts, kink_times)]
    return (np.concatenate(nodes + [starts[-1] + _HALF_LINE_OFFSETS]),
            np.concatenate(weights + [_HALF_LINE_WEIGHTS]))


def empirical_expected_maximum(sorted_values, counts):
    """E[max of n draws with replacement] from sorted non-negative values, for each n in
    counts: the sum over i of x_(i) ((i/N)^n - ((i-1)/N)^n). Terms where (i/N)^n < 1e-17 are
    left out: together they weigh less than 1e-17 of the smallest value kept."""
    counts = _server_counts(counts)
    size = sorted_values.size
    result = []
    for count in counts:
        first = int(size * _NEGLIGIBLE_WEIGHT ** (1.0 / count))
        cdf_power = (np.arange(first, size + 1) / size) ** count
        result.append(float(np.dot(sorted_values[first:], np.diff(cdf_power))))
    return np.array(result)


def _order_statistics(distribution, durations, counts):
    kinks = distribution.kink_probabilities() if isinstance(distribution, HeadTailModel) else ()
    expected = expected_maximum(distribution, counts, kinks)
    median = float(distribution.ppf(0.5))
    ratio = expected / median if median > 0 else np.full(expected.shape, np.nan)
    return OrderStatistics(tuple(counts), median, tuple(expected), tuple(ratio),
                           tuple(empirical_expected_maximum(durations, counts)))


# ---- input ----

def _server_counts(counts):
    array = np.asarray(counts)
    if array.ndim != 1 or array.size == 0 or not np.issubdtype(array.dtype, np.integer) or np.any(array < 1):
        raise ValueError(f"server counts must be a non-empty sequence of positive integers, got {counts!r}")
    return tuple(int(count) for count in array)


def _valid_sorted(seconds):
    """(the valid durations, 0 to MAX_DURATION_SECONDS, sorted; how many others there were)."""
    values = np.asarray(seconds, dtype=np.float64).ravel()
    valid = values[(values >= 0) & (values <= MAX_DURATION_SECONDS)]  # False for NaN
    return np.sort(valid), values.size - valid.size


def _thinned(sorted_values, limit):
    """Every m-th order statistic (the middle one of each run of m), m = ceil(size / limit):
    an empirical CDF within 1/limit of the full one."""
    step = -(-sorted_values.size // limit)
    return sorted_values if step == 1 else np.ascontiguousarray(sorted_values[step // 2::step])
