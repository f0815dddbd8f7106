"""Slowdown over time (Kunkel & Betke 2019, sections 3.2 and 3.3): the slowdown of an op is its
observed duration over the duration expected for it (given by the caller: the cause model's
cached typical time, or a probe's median); per time interval and op kind it is reduced to its
median, 90th and 99th percentile (numpy's default, linear interpolation: R's type 7).

slowdown_by_interval() returns a Slowdown (plain data; as_dict() for JSON). Ops whose start is not
finite, or whose observed or expected duration is not positive and finite, are left out and
counted by reason; no output number is ever NaN or infinite (an empty interval's quantiles are
None).
"""
import math
from dataclasses import dataclass

import numpy as np

from .plain import finite_list, finite_or_none

TARGET_INTERVALS = 50  # the automatic width gives about this many intervals over the ops' span
# The narrowest automatic interval: a microsecond, the order of the fastest op (a cached read).
# A job of half a second gets its 50 intervals of 10 ms like any other.
MIN_INTERVAL_SECONDS = 1e-6
MAX_INTERVALS = 100_000  # more would make a timeline nobody reads, and a large allocation
QUANTILES = (0.5, 0.9, 0.99)
QUANTILE_NAMES = ("median", "p90", "p99")
EXCLUSION_REASONS = ("start not finite", "observed not positive and finite", "expected not positive and finite",
                     "ratio not finite")


@dataclass(frozen=True)
class KindSlowdown:
    """Slowdown of one op kind: per interval the op count and the QUANTILES of observed /
    expected (NaN where the interval has no op), and the same over all intervals."""

    kind: str
    count: tuple
    median: tuple
    p90: tuple
    p99: tuple
    total_count: int
    total_median: float
    total_p90: float
    total_p99: float

    def as_dict(self):
        return {"count": list(self.count), "median": finite_list(self.median), "p90": finite_list(self.p90),
                "p99": finite_list(self.p99),
                "overall": {"count": self.total_count, "median": finite_or_none(self.total_median),
                            "p90": finite_or_none(self.total_p90), "p99": finite_or_none(self.total_p99)}}


@dataclass(frozen=True)
class Slowdown:
    """Intervals [origin + i * interval_seconds, origin + (i + 1) * interval_seconds), i = 0 ..
    interval_count - 1, origin = the earliest start; an op belongs to the interval of its start.
    kinds: a KindSlowdown per op kind, in sorted order of the kind labels. count: ops used;
    excluded: ops left out, by the first of EXCLUSION_REASONS that applies."""

    origin_seconds: float
    interval_seconds: float
    interval_count: int
    kinds: tuple
    count: int
    excluded: dict

    @property
    def excluded_count(self):
        return sum(self.excluded.values())

    def as_dict(self):
        starts = self.origin_seconds + self.interval_seconds * np.arange(self.interval_count)
        return {"origin_seconds": finite_or_none(self.origin_seconds), "interval_seconds": self.interval_seconds,
                "interval_count": self.interval_count, "interval_starts_seconds": finite_list(starts),
                "quantiles": dict(zip(QUANTILE_NAMES, QUANTILES)),
                "kinds": {kind.kind: kind.as_dict() for kind in self.kinds},
                "count": self.count, "excluded_count": self.excluded_count, "excluded": dict(self.excluded)}


def slowdown_by_interval(start_seconds, observed_seconds, expected_seconds, kinds, interval_seconds=None):
    """Slowdown per time interval and op kind. start_seconds, observed_seconds,
    expected_seconds and kinds (labels, e.g. "read"/"write" or codes) are equally long 1-D
    sequences, one entry per op. interval_seconds: the interval width, or None for the
    automatic one (automatic_interval_seconds of the ops' span). Raises ValueError for
    sequences of different lengths, a width that is not positive and finite, or more than
    MAX_INTERVALS intervals."""
    start, observed, expected = (np.asarray(values, dtype=np.float64).ravel()
                                 for values in (start_seconds, observed_seconds, expected_seconds))
    kinds = np.asarray(kinds).ravel()
    if not start.size == observed.size == expected.size == kinds.size:
        raise ValueError(f"start, observed, expected and kinds differ in length: "
                         f"{start.size}, {observed.size}, {expected.size}, {kinds.size}")
    if interval_seconds is not None and not (math.isfinite(interval_seconds) and interval_seconds > 0):
        raise ValueError(f"interval_seconds must be positive and finite, got {interval_seconds}")

    valid, excluded = _valid_ops(start, observed, expected)
    start, ratio, kinds = start[valid], observed[valid] / expected[valid], kinds[valid]
    if start.size == 0:
        return Slowdown(0.0, interval_seconds or MIN_INTERVAL_SECONDS, 0, (), 0, excluded)
    origin = float(np.min(start))
    span = float(np.max(start)) - origin
    width = float(interval_seconds) if interval_seconds is not None else automatic_interval_seconds(span)
    interval_count = int(span // width) + 1
    if interval_count > MAX_INTERVALS:
        raise ValueError(f"{interval_count} intervals of {width} s over {span} s: more than {MAX_INTERVALS}")

    labels, kind_index = np.unique(kinds, return_inverse=True)
    interval = np.minimum(((start - origin) // width).astype(np.int64), interval_count - 1)
    per_interval = _group_quantiles(ratio, kind_index * interval_count + interval, labels.size * interval_count)
    overall = _group_quantiles(ratio, kind_index, labels.size)
    kind_results = []
    for index, label in enumerate(labels):
        rows = slice(index * interval_count, (index + 1) * interval_count)
        counts, quantiles = per_interval[0][rows], per_interval[1][:, rows]
        kind_results.append(KindSlowdown(str(label), tuple(int(c) for c in counts),
                                         *(tuple(float(v) for v in row) for row in quantiles),
                                         int(overall[0][index]), *(float(row[index]) for row in overall[1])))
    return Slowdown(origin, width, interval_count, tuple(kind_results), int(ratio.size), excluded)


def automatic_interval_seconds(span_seconds):
    """span / TARGET_INTERVALS rounded to the nearest (in log) of 1, 2, 5 times a power of
    ten, and at least MIN_INTERVAL_SECONDS: 32 to 80 intervals over any span longer than 50 us."""
    raw = span_seconds / TARGET_INTERVALS
    if not raw > MIN_INTERVAL_SECONDS:
        return MIN_INTERVAL_SECONDS
    decade = 10.0 ** math.floor(math.log10(raw))
    nice = min((1.0, 2.0, 5.0, 10.0), key=lambda mantissa: abs(math.log(raw / (mantissa * decade))))
    return max(MIN_INTERVAL_SECONDS, nice * decade)


def _valid_ops(start, observed, expected):
    """(mask of usable ops, {reason: count} of the others, by the first reason that applies)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        ratio_finite = np.isfinite(observed / expected)  # a tiny expected can overflow it
    checks = (np.isfinite(start), np.isfinite(observed) & (observed > 0), np.isfinite(expected) & (expected > 0),
              ratio_finite)
    valid = np.ones(start.size, dtype=bool)
    excluded = {}
    for reason, passes in zip(EXCLUSION_REASONS, checks):
        excluded[reason] = int(np.count_nonzero(valid & ~passes))
        valid &= passes
    return valid, excluded


def _group_quantiles(values, group, group_count):
    """(count per group, QUANTILES x groups array: linear-interpolation quantiles of each group's
    values, NaN for empty groups), for integer group labels 0 .. group_count - 1."""
    order = np.lexsort((values, group))
    ordered = values[order]
    counts = np.bincount(group, minlength=group_count)
    first = np.cumsum(counts) - counts
    result = np.full((len(QUANTILES), group_count), np.nan)
    filled = counts > 0
    for row, quantile in enumerate(QUANTILES):
        position = (counts[filled] - 1) * quantile
        below = np.floor(position).astype(np.int64)
        above = np.minimum(below + 1, counts[filled] - 1)
        low, high = ordered[first[filled] + below], ordered[first[filled] + above]
        result[row, filled] = low + (position - below) * (high - low)
    return counts, result
