"""The probe's slowdown (Kunkel & Betke 2019, sections 3.2 and 3.3): an op's observed duration
over its normal, the median of the op's durations over the normal_days before the window's end;
per interval and op (and per kind: reads, writes, metadata) reduced to the median, p90, p95 and
p99 of those ratios.

Intervals of whole hours are read from the hourly histograms (kept aggregate_days), shorter ones
from the raw rows (kept raw_days); the automatic width is whole hours for a window older than
the raw rows. No number is NaN: an interval without ops has None.
"""
import math

import numpy as np

from . import histogram
from .target import OPS

QUANTILES = (0.5, 0.9, 0.95, 0.99)
QUANTILE_NAMES = ("median", "p90", "p95", "p99")
KINDS = ("read", "write", "metadata")
KIND_OF_OP = {"read_1MiB": "read", "read_4KiB": "read", "write_1MiB": "write", "write_4KiB": "write",
              "create": "metadata", "stat": "metadata", "read": "metadata", "delete": "metadata"}
OP_KIND = np.array([KINDS.index(KIND_OF_OP[op]) for op in OPS])
TARGET_INTERVALS = 50
SLOW_FACTOR = 2.0     # a kind whose median slowdown in an interval is this or more is slow then
MAX_INTERVALS = 10_000
HOUR = 3600
NICE_SECONDS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 4 * 3600, 6 * 3600, 12 * 3600,
                86400, 2 * 86400, 7 * 86400)


def normals(store, target, until_s, days):
    """(median duration s per op, None where the op has none; ops counted) over [until - days,
    until): the hourly histograms made so far and the raw rows after them."""
    since = until_s - days * 86400
    aggregated = min(store.aggregated_until(), until_s)
    ops, _, bins, counts = store.hour_histograms(target, math.floor(since / HOUR) * HOUR, aggregated)
    raw_ops, _, raw_seconds = store.raw(target, max(since, aggregated), until_s)
    medians, totals = histogram.dense_medians(np.concatenate((ops, raw_ops)),
                                              np.concatenate((bins, histogram.bins_of(raw_seconds))),
                                              np.concatenate((counts, np.ones(raw_ops.size))), len(OPS))
    return [None if math.isnan(value) else float(value) for value in medians], [int(n) for n in totals]


def automatic_width(since_s, until_s, oldest_raw_s, oldest_hour_s):
    """About TARGET_INTERVALS intervals of a round width; whole hours if the window starts
    before the oldest raw row and the raw rows before it were dropped (hours older than it
    are kept)."""
    raw = (until_s - since_s) / TARGET_INTERVALS
    width = next((nice for nice in NICE_SECONDS if nice >= raw), NICE_SECONDS[-1])
    raw_from = math.inf if oldest_raw_s is None else oldest_raw_s
    if oldest_hour_s is not None and oldest_hour_s + HOUR <= raw_from and since_s < raw_from:
        width = max(HOUR, math.ceil(width / HOUR) * HOUR)
    return float(width)


def probe_slowdown(store, name, since_s, until_s, width_s=None, normal_days=30.0):
    """The slowdown of target `name` over [since, until) as plain data (docs/probe.md)."""
    target, directory, io_mode = store.targets()[name]
    normal, normal_counts = normals(store, target, until_s, normal_days)
    if width_s is None:
        width_s = automatic_width(since_s, until_s, store.oldest_raw(target), store.oldest_hour(target))
    width_s = max(float(width_s), (until_s - since_s) / MAX_INTERVALS)
    origin = math.floor(since_s / width_s) * width_s if width_s % HOUR == 0 else since_s
    interval_count = max(1, math.ceil((until_s - origin) / width_s))
    if width_s % HOUR == 0:
        ops, starts, bins, weights = store.hour_histograms(target, origin, until_s)
        seconds = histogram.seconds_of(bins)
    else:
        ops, starts, seconds = store.raw(target, since_s, until_s)
        weights = np.ones(ops.size)
    expected = np.array([value or np.nan for value in normal])[ops] if ops.size else np.zeros(0)
    known = np.isfinite(expected)
    ops, ratio, weights = ops[known], seconds[known] / expected[known], weights[known]
    # clipped: a start stored in whole microseconds can fall a hair before `since`
    interval = np.clip(((starts[known] - origin) // width_s).astype(np.int64), 0, interval_count - 1)
    by_op = _quantiles_by(ops, interval, ratio, weights, len(OPS), interval_count)
    by_kind = _quantiles_by(OP_KIND[ops], interval, ratio, weights, len(KINDS), interval_count)
    return {"target": name, "dir": directory, "io_mode": io_mode, "since": since_s, "until": until_s,
            "interval_seconds": width_s, "interval_starts": [origin + i * width_s for i in range(interval_count)],
            "source": "hourly histograms" if width_s % HOUR == 0 else "raw rows",
            "normal_days": normal_days, "quantiles": dict(zip(QUANTILE_NAMES, QUANTILES)),
            "ops": {op: {"normal_seconds": normal[index], "normal_count": normal_counts[index], **by_op[index]}
                    for index, op in enumerate(OPS)},
            "kinds": dict(zip(KINDS, by_kind))}


def _quantiles_by(labels, interval, ratio, weights, label_count, interval_count):
    """Per label: count and QUANTILES of the ratios per interval, and over the whole window."""
    counts, per_interval = histogram.group_quantiles(ratio, weights, labels * interval_count + interval,
                                                     label_count * interval_count, QUANTILES)
    totals, overall = histogram.group_quantiles(ratio, weights, labels, label_count, QUANTILES)
    result = []
    for label in range(label_count):
        rows = slice(label * interval_count, (label + 1) * interval_count)
        entry = {"count": [int(n) for n in counts[rows]]}
        entry.update({name: _finite(per_interval[row, rows]) for row, name in enumerate(QUANTILE_NAMES)})
        entry["overall"] = {"count": int(totals[label]),
                            **{name: _finite([overall[row, label]])[0] for row, name in enumerate(QUANTILE_NAMES)}}
        result.append(entry)
    return result


def slow_spans(slowdown, factor):
    """[{"kind", "start", "end", "slowdown"}]: runs of consecutive intervals in which a kind's
    median slowdown is at least factor; slowdown is the run's largest interval median."""
    spans = []
    width = slowdown["interval_seconds"]
    for kind, entry in slowdown["kinds"].items():
        run = None
        for start, median in zip(slowdown["interval_starts"], entry["median"]):
            if median is not None and median >= factor:
                if run is None:
                    run = {"kind": kind, "start": start, "end": start + width, "slowdown": median}
                    spans.append(run)
                run["end"] = start + width
                run["slowdown"] = max(run["slowdown"], median)
            else:
                run = None
    return sorted(spans, key=lambda span: span["start"])


def _finite(values):
    return [float(value) if math.isfinite(value) else None for value in values]
