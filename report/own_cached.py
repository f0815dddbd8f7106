"""Time if cached from the job's own cached ops: where the kernel saw an op's pages cached, the op
was served from memory, so its duration is what a cached op of its size and shape takes on the
job's host. When those durations are above the model's cached line (a model made on a faster
host, or for requests of another shape: unaligned, into fresh buffers), the line is wrong for
this job, not the job slow (docs/assessment.md, "Cached means cached"); unless they are as slow
as the model's storage ops (report/classify.py): then they waited, for read-ahead or a CPU.

Per group of (direction, size bin, memory layout), with at least OWN_MIN_SAMPLES reads or writes
the kernel's sample found cached whose times agree (the upper quartile at most SPREAD_MAX times
the lower), the job's own line: its typical duration (the median; per byte
from 4 KiB up, where a cached op's time grows with its size) and its bound, the far-out fence of
their durations (Tukey: the upper quartile plus FENCE_IQRS interquartile ranges, on a log scale,
at least STALL_FACTOR times the typical): the ops beyond it are the rare stalls among them.
Size bins are powers of two (an op of 1 MiB and one of 1 MiB + 1 B fall in the same bin).
"""
import numpy as np

from ioassess.models.causes import JOINT_BYTES, LAYOUTS

# Kernel-confirmed cached ops of a group needed before its own line is used.
OWN_MIN_SAMPLES = 5
# The fence: upper quartile + this many interquartile ranges of log durations.
FENCE_IQRS = 3.0
# The fence is never closer to the typical than this factor.
STALL_FACTOR = 2.0
# Cached ops of one kind take about one time: a group whose upper quartile is more than this
# factor above its lower one is no evidence of a cached time (read-ahead still reading the
# pages the kernel counted as cached makes some wait for storage).
SPREAD_MAX = 3.0
SIZE_BINS = 64
SHAPES = len(LAYOUTS)          # the memory layouts (an unknown one counts as rnd, as in the model)


def size_bins(size_bytes):
    """The power-of-two bin of each size: floor(log2(size)), 0 for sizes of 0 or 1 B."""
    return np.frexp(np.maximum(np.asarray(size_bytes, np.float64), 1.0))[1].astype(np.int64) - 1


def _group_keys(directions, size_bytes, layouts):
    codes = np.asarray(layouts)
    shape = np.where((codes >= 0) & (codes < SHAPES), codes, LAYOUTS.index("rnd"))
    return (np.asarray(directions, np.int64) * SIZE_BINS + size_bins(size_bytes)) * SHAPES + shape


def per_size(size_bytes):
    """What a duration is divided by before it is compared across a bin: the size from 4 KiB up
    (whole bins: a cached op's time grows with its size there), 1 below."""
    return np.where(np.asarray(size_bytes) >= JOINT_BYTES, np.asarray(size_bytes, np.float64), 1.0)


def own_cached_lines(directions, size_bytes, durations_s, layouts, confirmed):
    """The job's own lines: a dict of arrays, one entry per group with enough of the ops that
    `confirmed` marks (read or write ops the kernel's own sample found cached): direction,
    size_low and size_high (the bin's bytes), layout (LAYOUTS code), samples, typical_per and
    bound_per (seconds, per byte from 4 KiB up, per op below)."""
    chosen = np.flatnonzero(confirmed)
    keys = _group_keys(directions[chosen], size_bytes[chosen], layouts[chosen])
    normalised = durations_s[chosen] / per_size(size_bytes[chosen])
    groups, of_op, counts = np.unique(keys, return_inverse=True, return_counts=True)
    lines = {name: [] for name in ("key", "samples", "typical_per", "bound_per")}
    for group in np.flatnonzero(counts >= OWN_MIN_SAMPLES):
        values = normalised[of_op.reshape(-1) == group]
        typical = float(np.median(values))
        low, high = np.log(np.maximum(np.percentile(values, [25, 75]), 1e-12))
        if high - low > np.log(SPREAD_MAX):
            continue
        fence = float(np.exp(high + FENCE_IQRS * (high - low)))
        lines["key"].append(int(groups[group]))
        lines["samples"].append(int(counts[group]))
        lines["typical_per"].append(typical)
        lines["bound_per"].append(max(fence, STALL_FACTOR * typical))
    key = np.asarray(lines.pop("key"), np.int64)
    size_bin = (key // SHAPES) % SIZE_BINS
    return {"direction": key // SHAPES // SIZE_BINS, "size_low": np.left_shift(1, size_bin),
            "size_high": np.left_shift(1, size_bin + 1) - 1, "layout": key % SHAPES,
            **{name: np.asarray(values) for name, values in lines.items()}, "key": key}


def line_of_op(lines, directions, size_bytes, layouts):
    """Per op, the index of its group's own line; -1 where it has none (or is no read or write)."""
    if not len(lines["key"]):
        return np.full(len(directions), -1, np.int64)
    table = np.full(2 * SIZE_BINS * SHAPES, -1, np.int64)
    table[lines["key"]] = np.arange(len(lines["key"]))
    keys = _group_keys(np.minimum(directions, 1), size_bytes, layouts)
    return np.where(np.asarray(directions) < 2, table[keys], -1)


def own_line_seconds(lines, directions, size_bytes, layouts):
    """(typical, bound) in seconds per op under the job's own lines; NaN where its group has none."""
    typical = np.full(len(directions), np.nan)
    bound = np.full(len(directions), np.nan)
    line = line_of_op(lines, directions, size_bytes, layouts)
    has = line >= 0
    per = per_size(np.asarray(size_bytes)[has])
    typical[has] = lines["typical_per"][line[has]] * per
    bound[has] = lines["bound_per"][line[has]] * per
    return typical, bound
