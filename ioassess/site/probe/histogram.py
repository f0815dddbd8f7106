"""Durations on a fixed logarithmic scale, and quantiles of groups of (weighted) values.

Durations fall in the bins of SCALE (models/log_scale.py): bins 1 % wide from
0.1 us to about 40 min, so a quantile read from summed bin counts is within 0.5 % of the
duration's. The store keeps an hour of one op as its non-empty bins and their counts.
"""
import numpy as np

from ...models.log_scale import LogScale

SCALE = LogScale(min_s=1e-7, ratio=1.01, bins=2400)
BINS = SCALE.bins
bins_of = SCALE.bins_of
seconds_of = SCALE.seconds_of


def encode(seconds):
    """(bins, counts) as bytes: the non-empty bins (uint16, ascending) of the durations, and
    how many fell in each (uint32)."""
    bins, counts = np.unique(bins_of(seconds), return_counts=True)
    return bins.astype("<u2").tobytes(), counts.astype("<u4").tobytes()


def decode(bins, counts):
    return np.frombuffer(bins, dtype="<u2"), np.frombuffer(counts, dtype="<u4")


def dense_medians(labels, bins, counts, label_count):
    """The median duration (s) of each label's binned durations (NaN for a label without any),
    and how many each has: the counts summed per label and bin, no sort."""
    dense = np.bincount(np.asarray(labels, dtype=np.int64) * BINS + bins, weights=counts,
                        minlength=label_count * BINS).reshape(label_count, BINS)
    cumulative = np.cumsum(dense, axis=1)
    totals = cumulative[:, -1]
    rank = np.floor(0.5 * (totals - 1))
    median_bin = np.array([np.searchsorted(row, value, side="right") for row, value in zip(cumulative, rank)])
    return np.where(totals > 0, seconds_of(np.minimum(median_bin, BINS - 1)), np.nan), totals


def group_quantiles(values, weights, groups, group_count, quantiles):
    """(total weight per group, len(quantiles) x group_count array): for each group the
    smallest value whose cumulative weight exceeds q * (weight - 1), i.e. the value of rank
    floor(q * (n - 1)) among the group's n (weighted) values; NaN for empty groups. groups are
    integers 0 .. group_count - 1."""
    values = np.asarray(values, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    groups = np.asarray(groups, dtype=np.int64)
    order = np.lexsort((values, groups))
    values, weights, groups = values[order], weights[order], groups[order]
    totals = np.bincount(groups, weights=weights, minlength=group_count)
    cumulative = np.cumsum(weights)
    before = np.concatenate(([0.0], np.cumsum(totals)))[:-1]   # the weight of the groups before each
    result = np.full((len(quantiles), group_count), np.nan)
    filled = np.flatnonzero(totals > 0)
    for row, quantile in enumerate(quantiles):
        rank = before[filled] + np.floor(quantile * (totals[filled] - 1))
        result[row, filled] = values[np.searchsorted(cumulative, rank, side="right")]
    return totals, result
