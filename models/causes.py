"""Linear cause models and the classification of ops by them (Kunkel 2015, sections 4.2 and 6).

A cause model holds, per op (read, write), class (memcpy, cached, uncached) and memory layout
(off0, rnd), a bound line (the slowest duration the class explains, used to classify) and a
typical line (the usual duration, used to estimate time). Each line has two segments joined at
4096 B. An op belongs to the first class, fastest first, whose bound is at or above its
duration; time lost is its duration minus the cached typical duration of its size. Writes also
have an appended line (writes into new pages), used where the kernel says an op's pages were new.
docs/cause-models.md explains the choices; models/modelfile.py stores models as JSON.

Everything here is a pure function on numpy arrays.
"""
import dataclasses

import numpy as np

from ioassess.arrays import distinct
OPS = ("read", "write")  # direction codes 0, 1; other codes (sync: 2) are not classified
CLASSES = ("memcpy", "cached", "uncached", "slow")  # fastest first; class codes 0..3
LINE_CLASSES = CLASSES[:-1]  # classes that have lines; slow is what lies above uncached
# Writes into new page-cache pages (appends; whole pages of an uncached file): a write line of its
# own, not a class of classify() (a duration cannot tell new pages from cached ones), used where
# the kernel saw an op's pages were new: their time if cached and the longest that memory explains.
APPENDED = "appended"
# fsync/fdatasync: a sync line ("sync", FLUSHED, layout) of the time to write back the bytes a
# file's writes dirtied (its x is the bytes dirty, not an access size), trained by the appended
# runs' fsync at their end. Not a class of classify() either.
FLUSHED = "flushed"
# The ops each line class has lines for.
LINE_OPS = {**{cls: OPS for cls in LINE_CLASSES}, APPENDED: ("write",), FLUSHED: ("sync",)}
# Memory layout codes 0-3: off0 (the thread's previous buffer again), rnd (another), each with
# the buffer on a 64-byte cache line or off it (-unaligned: a copy into or out of such a buffer
# took 2.3 times as long for 1 MiB on an AMD EPYC host, docs/cause-models.md).
LAYOUTS = ("off0", "rnd", "off0-unaligned", "rnd-unaligned")
ALIGNMENT_BYTES = 64
UNALIGNED = 2        # added to a layout's code when its buffer is off the cache line
# No buffer address (e.g. Darshan DXT). Treated as rnd, the slower layout, so that time spent
# on memory placement is never blamed on the file system.
LAYOUT_UNKNOWN = 4
# The lines a layout uses, best first: its own, the other reuse's, then the aligned ones (a
# model trained before the -unaligned layouts has only those).
LAYOUT_FALLBACK = {"off0": ("off0", "rnd"), "rnd": ("rnd", "off0"),
                   "off0-unaligned": ("off0-unaligned", "rnd-unaligned", "off0", "rnd"),
                   "rnd-unaligned": ("rnd-unaligned", "off0-unaligned", "rnd", "off0")}
UNCLASSIFIED = -1
JOINT_BYTES = 4096
# Sizes at which a slower class's bound must not be below a faster one's (same op and layout).
BOUND_CHECK_SIZES = (1, JOINT_BYTES, 1 << 20, 16 << 20)


@dataclasses.dataclass(frozen=True)
class SegmentedLine:
    """Duration in seconds = intercept + slope * size, with the small segment's parameters for
    sizes up to JOINT_BYTES and the large segment's above. Both intercepts are values at size
    0; the large one may be negative (an extrapolation below the segment's sizes)."""
    small_intercept_s: float
    small_slope_s_per_byte: float
    large_intercept_s: float
    large_slope_s_per_byte: float

    def predict(self, size_bytes):
        size = np.asarray(size_bytes, dtype=np.float64)
        return np.where(size <= JOINT_BYTES,
                        self.small_intercept_s + self.small_slope_s_per_byte * size,
                        self.large_intercept_s + self.large_slope_s_per_byte * size)


@dataclasses.dataclass(frozen=True)
class MeasuredLine:
    """A typical line that keeps the sizes it was measured at: between the smallest and the
    largest of them the power law through the two nearest points (straight in log size and log
    duration), so that the time at a measured size is its measurement; elsewhere the segmented
    line fitted to them. One slope above 4 KiB cannot follow a copy's cost per byte as the
    buffers leave the CPU's caches (1 MiB cached overwrites: the fitted line 7 % above their
    mean, 4 MiB 11 %, 64 KiB 12 % below: docs/cause-models.md, "The fit")."""
    fitted: SegmentedLine
    sizes_bytes: tuple
    seconds: tuple

    def predict(self, size_bytes):
        size = np.asarray(size_bytes, dtype=np.float64)
        known, seconds = np.log(np.asarray(self.sizes_bytes, np.float64)), np.log(np.asarray(self.seconds))
        inside = (size >= self.sizes_bytes[0]) & (size <= self.sizes_bytes[-1])
        between = np.exp(np.interp(np.log(np.maximum(size, 1.0)), known, seconds))
        return np.where(inside, between, self.fitted.predict(size))


@dataclasses.dataclass(frozen=True)
class ModelLine:
    bound: SegmentedLine  # classification: the slowest duration this class explains
    typical: "SegmentedLine | MeasuredLine | None"  # time estimates: the usual duration
    errors: dict  # "small"/"large" -> Table-3 metrics of the bound line, see line_errors()
    note: str


@dataclasses.dataclass
class CauseModel:
    name: str
    description: str
    provenance: dict  # see docs/model-format.md
    lines: dict  # (op, class, layout) -> ModelLine; not every key need exist
    # Judging a file system of another type (no model of its own): the job's own cached lines,
    # where it has them, come before this model's cached line (report/own_cached.py).
    own_first: bool = False


# ---- fitting ----

def fit_segmented_line(size_bytes, seconds):
    """Least-squares segmented line through (size, duration) points, minimising the relative
    error (weights 1/duration^2): durations span orders of magnitude and classification
    compares ratios, so a 16 MiB point must not decide the fit at 8 KiB.

    The small segment is fitted to the points up to JOINT_BYTES (slope 0 if they have one
    size only); the large segment's slope to the points above, through the small segment's
    value at JOINT_BYTES (the paper fixes the large model's intercept so). A duration cannot
    fall with size, nor be negative at size 0: a negative slope or small intercept is clipped
    to 0 and the other parameter refitted. Raises ValueError without points on both sides of
    the joint or with a duration that is not positive and finite."""
    size, seconds, small = _split_at_joint(size_bytes, seconds)
    intercept, slope = _fit_small_segment(size[small], seconds[small])
    joint_s = intercept + slope * JOINT_BYTES
    return joined_line(intercept, slope, _fit_slope_through(JOINT_BYTES, joint_s, size[~small], seconds[~small]))


def fit_straight_line(size_bytes, seconds, envelope=False):
    """One straight line over all sizes as a segmented line (both segments alike): the least
    relative squares line (intercept and slope >= 0), or with envelope=True the least line on
    or above every point (fit_upper_envelope's small segment). For lines whose cost has one
    fixed and one per-byte part at every size (the flushed line)."""
    size, seconds = _measurements(size_bytes, seconds)
    intercept, slope = _small_envelope(size, seconds) if envelope else _fit_small_segment(size, seconds)
    return joined_line(intercept, slope, slope)


def fit_upper_envelope(size_bytes, seconds):
    """The segmented line that lies on or above every point and, among such lines, exceeds
    the points least (sum of relative excesses); joined at JOINT_BYTES like fit_segmented_line.

    For bound lines: the paper fits lm() to the per-size cut-offs + 10 %, which leaves about
    half of the cut-offs above the line, so at those sizes a state's own ops near its cut-off
    would be classified into the next slower class. The envelope keeps every size's cut-off
    + 10 % under the line. The small segment's optimum lies on a vertex of the feasible
    region (a line through two points, through one point and the origin, or flat through the
    highest point), so all candidates are compared; the large segment's excess grows with its
    slope, so it takes the least slope that covers its points."""
    size, seconds, small = _split_at_joint(size_bytes, seconds)
    intercept, slope = _small_envelope(size[small], seconds[small])
    joint_s = intercept + slope * JOINT_BYTES
    rise = (seconds[~small] - joint_s) / (size[~small] - JOINT_BYTES)
    return joined_line(intercept, slope, max(0.0, float(np.max(rise))))


def fit_separating_line(faster, slower, faster_bounds):
    """The segmented bound line that best separates a class from the next slower one: the
    fewest ops on the wrong side, as a share of each class at each size, summed over the
    sizes with weights that are half equal per size (for the share of ops) and half the size's
    share of the class's time (for the share of time: the report's figures are times, and the
    time of a state lies in its large ops). faster, slower: {size: durations (s)} measured in
    the two states. faster_bounds: {size: the faster class's own bound point (cut-off + 10 %)},
    the threshold where the slower class does not count.

    A single line cannot follow the best threshold of every size (from the page size up the
    best threshold per byte falls with size); where the two classes lie far apart any
    threshold between them is right, and the search spends that freedom where they lie close.
    Where the states cannot be told apart by duration at all, or slower has no durations of a
    size (the caller leaves out states that are the faster one by behaviour, such as whole-page
    writes to an uncached file, which go to the page cache as cached ones do), only the faster
    class's ops count: such ops are classified as the faster class, and the line there keeps to
    the faster class's own bound point (it does not chase the class's slowest outlier); a
    segment without any size to separate is the paper's relative least-squares fit through the
    bound points (an error-free search would follow the steepest of them). The small segment's candidates are the
    lines through two sizes' best thresholds and the flat lines at each; the large segment
    then takes the best slope through the joint."""
    sizes = np.array(sorted(faster), dtype=np.float64)
    small, large = sizes[sizes <= JOINT_BYTES], sizes[sizes > JOINT_BYTES]
    if len(small) == 0 or len(large) == 0:
        raise ValueError(f"a segmented line needs sizes of at most and of more than {JOINT_BYTES} B")
    faster_weight = _size_weights(faster, sizes)
    slower_weight = _size_weights(slower, sizes)
    sides = {size: _SeparationSides(faster[size], slower.get(int(size), ()), faster_bounds[int(size)],
                                    faster_weight[i], slower_weight[i])
             for i, size in enumerate(sizes)}
    best = np.array([sides[size].best_threshold for size in sizes])
    small_best = best[sizes <= JOINT_BYTES]
    first, second = np.triu_indices(len(small), k=1)
    pair_slopes = (small_best[second] - small_best[first]) / (small[second] - small[first])
    slopes = np.concatenate([np.zeros(len(small)), pair_slopes])
    intercepts = np.concatenate([small_best, small_best[first] - pair_slopes * small[first]])
    keep = (slopes >= 0) & (intercepts > 0)
    slopes, intercepts = slopes[keep], intercepts[keep]
    intercept, slope = _least_wrong(intercepts[:, None] + slopes[:, None] * small, small, sides,
                                    np.column_stack([intercepts, slopes]))
    joint_s = intercept + slope * JOINT_BYTES
    large_best = best[sizes > JOINT_BYTES]
    if not any(sides[size].separable for size in large):
        # nothing to separate from above the joint: the paper's fit through the bound points
        return joined_line(intercept, slope, _fit_slope_through(JOINT_BYTES, joint_s, large, large_best))
    exact = np.maximum((large_best - joint_s) / (large - JOINT_BYTES), 0.0)
    grid = np.geomspace(max(exact.min(), 1e-16), max(exact.max(), 1e-15), 400)
    candidates = distinct(np.concatenate([[0.0], exact, grid]))
    (large_slope,) = _least_wrong(joint_s + candidates[:, None] * (large - JOINT_BYTES), large, sides,
                                  candidates[:, None])
    return joined_line(intercept, slope, large_slope)


def _size_weights(durations_by_size, sizes):
    """Per size: half of 1/len(sizes), plus half the size's share of the durations' total."""
    totals = np.array([np.sum(durations_by_size.get(int(size), ())) for size in sizes])
    measured = totals > 0
    weights = np.where(measured, 0.5 / max(np.count_nonzero(measured), 1), 0.0)
    return weights + 0.5 * totals / max(np.sum(totals), 1e-300)


class _SeparationSides:
    """Two classes' durations at one size: their weighted shares on the wrong side of a threshold."""

    def __init__(self, faster, slower, faster_bound, faster_weight=1.0, slower_weight=1.0):
        self.faster_weight, self.slower_weight = faster_weight, slower_weight
        self.faster = np.sort(np.asarray(faster, dtype=np.float64))
        self.slower = np.sort(np.asarray(slower, dtype=np.float64))
        self.faster_bound = faster_bound
        self.separable = False
        if len(self.slower):
            thresholds = np.concatenate([self.faster, self.slower])
            wrong_faster, wrong_slower = self.wrong(thresholds)
            self.separable = np.min(wrong_faster + wrong_slower) < 0.5
        if self.separable:
            # the middle (geometric) of the thresholds that are least wrong
            error = self.error(thresholds)
            least = thresholds[error <= error.min() + 1e-12]
            self.best_threshold = float(np.sqrt(least.min() * least.max()))
        else:
            self.best_threshold = float(faster_bound)

    def wrong(self, thresholds):
        """Shares of the faster class above and of the slower class at or below each threshold."""
        faster_above = 1.0 - np.searchsorted(self.faster, thresholds, side="right") / len(self.faster)
        slower_below = np.searchsorted(self.slower, thresholds, side="right") / max(len(self.slower), 1)
        return faster_above, slower_below

    def error(self, thresholds):
        faster_above, slower_below = self.wrong(thresholds)
        if not self.separable:
            # only what lies below the class's own bound point counts: no outlier chasing
            beyond_bound = 1.0 - np.searchsorted(self.faster, self.faster_bound, side="right") / len(self.faster)
            return self.faster_weight * np.maximum(faster_above - beyond_bound, 0.0)
        return self.faster_weight * faster_above + self.slower_weight * slower_below


def _least_wrong(candidate_lines, sizes, sides, parameters):
    """The parameters of the candidate line (rows: candidates, columns: sizes) with the least
    summed error; among equals, the one closest (in log) to the sizes' best thresholds."""
    error = sum(sides[size].error(candidate_lines[:, i]) for i, size in enumerate(sizes))
    best = np.array([sides[size].best_threshold for size in sizes])
    distance = np.sum(np.abs(np.log(np.maximum(candidate_lines, 1e-300) / best)), axis=1)
    tied = np.flatnonzero(error <= error.min() + 1e-9)
    return tuple(float(value) for value in parameters[tied[np.argmin(distance[tied])]])


def _small_envelope(size, seconds):
    """(intercept, slope) >= 0 of the least-excess line on or above every (size, seconds)."""
    first, second = np.triu_indices(len(size), k=1)
    distinct = size[first] != size[second]
    first, second = first[distinct], second[distinct]
    pair_slopes = (seconds[second] - seconds[first]) / (size[second] - size[first])
    slopes = np.concatenate([[0.0], pair_slopes, [np.max(seconds / np.maximum(size, 1e-300))]])
    intercepts = np.concatenate([[np.max(seconds)], seconds[first] - pair_slopes * size[first], [0.0]])
    valid = (slopes >= 0) & (intercepts >= 0)
    slopes, intercepts = slopes[valid], intercepts[valid]
    predicted = intercepts[:, None] + slopes[:, None] * size[None, :]
    covers = np.all(predicted >= seconds * (1 - 1e-12), axis=1)
    excess = np.sum((predicted - seconds) / seconds, axis=1)
    best = np.flatnonzero(covers)[np.argmin(excess[covers])]
    return float(intercepts[best]), float(slopes[best])


def _split_at_joint(size_bytes, seconds):
    """(sizes, durations, mask of sizes <= JOINT_BYTES); ValueError unless both sides have points."""
    size, seconds = _measurements(size_bytes, seconds)
    small = size <= JOINT_BYTES
    if not small.any() or small.all():
        raise ValueError(f"a segmented line needs points of at most and of more than {JOINT_BYTES} B")
    return size, seconds, small


def joined_line(intercept, slope, large_slope):
    """The segmented line whose large segment meets the small one at JOINT_BYTES."""
    joint_s = intercept + slope * JOINT_BYTES
    return SegmentedLine(intercept, slope, joint_s - large_slope * JOINT_BYTES, large_slope)


def _measurements(size_bytes, seconds):
    """(sizes, durations) as float64; durations must be positive (relative errors divide by them)."""
    size = np.asarray(size_bytes, dtype=np.float64)
    seconds = np.asarray(seconds, dtype=np.float64)
    if size.shape != seconds.shape:
        raise ValueError("sizes and durations differ in length")
    if not np.all(np.isfinite(seconds) & (seconds > 0)):
        raise ValueError("durations must be positive and finite")
    return size, seconds


def _fit_small_segment(size, seconds):
    """(intercept, slope) >= 0 minimising sum(((intercept + slope*size - seconds)/seconds)^2)."""
    inverse = 1.0 / seconds
    if len(distinct(size)) < 2:
        return _relative_constant(inverse), 0.0
    design = np.column_stack([inverse, size * inverse])
    (intercept, slope), *_ = np.linalg.lstsq(design, np.ones_like(size), rcond=None)
    if slope < 0:
        return _relative_constant(inverse), 0.0
    if intercept < 0:
        return 0.0, _fit_slope_through(0.0, 0.0, size, seconds)
    return float(intercept), float(slope)


def _relative_constant(inverse_seconds):
    """The constant c minimising sum((c/seconds - 1)^2)."""
    return float(np.sum(inverse_seconds) / np.sum(inverse_seconds ** 2))


def _fit_slope_through(x0, y0, size, seconds):
    """Slope >= 0 of the line through (x0, y0) minimising the relative error of the points."""
    run = (size - x0) / seconds
    rise = (seconds - y0) / seconds
    return max(0.0, float(np.sum(run * rise) / np.sum(run * run)))


def line_errors(line, size_bytes, seconds):
    """Table 3's error metrics of line against measured (size, duration) points, per segment:
    {"small"|"large": {"abs_err_s": mean |predicted - observed|, "rel_err_pct": mean of that
    over observed in %, "outlier_pct_model": % of points above the line,
    "outlier_pct_experiment": None}}. Outlier% Exp. (points purged by the density cut-off) is
    the trainer's to fill in. A segment without points has None everywhere. Raises ValueError
    for a duration that is not positive and finite."""
    size, seconds = _measurements(size_bytes, seconds)
    predicted = line.predict(size)
    small = size <= JOINT_BYTES
    return {segment: _segment_errors(predicted[inside], seconds[inside])
            for segment, inside in (("small", small), ("large", ~small))}


def _segment_errors(predicted, observed):
    if len(observed) == 0:
        return {"abs_err_s": None, "rel_err_pct": None, "outlier_pct_experiment": None, "outlier_pct_model": None}
    absolute = np.abs(predicted - observed)
    return {"abs_err_s": float(np.mean(absolute)),
            "rel_err_pct": float(100.0 * np.mean(absolute / observed)),
            "outlier_pct_experiment": None,
            "outlier_pct_model": float(100.0 * np.mean(observed > predicted))}


def bound_order_violations(lines):
    """Where a slower class's bound is below a faster class's bound for the same op and
    layout, at one of BOUND_CHECK_SIZES: one sentence per case (empty if ordered)."""
    sizes = np.array(BOUND_CHECK_SIZES, dtype=np.float64)
    problems = []
    for op in OPS:
        for layout in LAYOUTS:
            present = [cls for cls in LINE_CLASSES if (op, cls, layout) in lines]
            for faster, slower in zip(present, present[1:]):
                faster_s = lines[(op, faster, layout)].bound.predict(sizes)
                slower_s = lines[(op, slower, layout)].bound.predict(sizes)
                below = np.flatnonzero(slower_s < faster_s)
                if len(below):
                    at = below[0]
                    problems.append(f"{op} {layout}: the {slower} bound ({slower_s[at]:.3g} s) is below the "
                                    f"{faster} bound ({faster_s[at]:.3g} s) at {int(sizes[at])} B")
    return problems


# ---- classification ----

def classify(model, direction_codes, size_bytes, duration_s, layout_codes):
    """Class code (index into CLASSES) of every op: the first class, fastest first, whose bound
    line at the op's size is at or above its duration. Above every bound of its op and layout
    an op gets the class after the slowest class with a line: uncached when the model has no
    uncached line (as in the paper), slow when it has. A class without a line for the op's
    layout uses its line for the other layout; a class with neither is skipped. Ops of other
    directions (sync), and reads or writes for which the model has no line at all, get
    UNCLASSIFIED (-1)."""
    duration_s = np.asarray(duration_s)
    codes = np.full(len(duration_s), UNCLASSIFIED, dtype=np.int8)
    for op, layout, members in _groups(direction_codes, layout_codes):
        classes = [(CLASSES.index(cls), line) for cls in LINE_CLASSES
                   if (line := _line_for(model, op, cls, layout)) is not None]
        if not classes or not len(members):
            continue
        size, duration = _sizes(size_bytes, members), duration_s[members]
        group_codes = np.full(len(members), classes[-1][0] + 1, dtype=np.int8)
        for code, line in reversed(classes):  # slowest first, so that the fastest match wins
            np.copyto(group_codes, code, where=duration <= line.bound.predict(size))
        codes[members] = group_codes
    return codes


def cached_typical_seconds(model, direction_codes, size_bytes, layout_codes, cls="cached"):
    """Duration each op would typically take if cached (the cached class's typical line for the
    op's layout, or the other layout's; cls=APPENDED: the appended line's); NaN for other
    directions and where the model has no such typical line."""
    return _line_seconds(model, direction_codes, size_bytes, layout_codes, cls, typical=True)


def bound_seconds(model, direction_codes, size_bytes, layout_codes, cls):
    """The class cls's bound line at each op's size (its layout's line, or the other layout's);
    NaN where the model has none."""
    return _line_seconds(model, direction_codes, size_bytes, layout_codes, cls, typical=False)


def _line_seconds(model, direction_codes, size_bytes, layout_codes, cls, typical):
    seconds = np.full(len(np.asarray(direction_codes)), np.nan)
    for op, layout, members in _groups(direction_codes, layout_codes):
        line = _line_for(model, op, cls, layout, typical=typical)
        if line is not None and len(members):
            seconds[members] = (line.typical if typical else line.bound).predict(_sizes(size_bytes, members))
    return seconds


def time_lost_seconds(model, direction_codes, size_bytes, duration_s, layout_codes):
    """max(0, duration - cached typical duration) per op: 0 for ops of other directions (they
    are not modelled), NaN where the model has no cached typical line for the op."""
    direction_codes = np.asarray(direction_codes)
    typical = cached_typical_seconds(model, direction_codes, size_bytes, layout_codes)
    lost = np.maximum(np.asarray(duration_s, dtype=np.float64) - typical, 0.0)
    lost[(direction_codes != 0) & (direction_codes != 1)] = 0.0
    return lost


def _groups(direction_codes, layout_codes):
    """(op, layout, indices of its ops) for each op and memory layout; LAYOUT_UNKNOWN (and any
    other code not of LAYOUTS) counts as rnd."""
    direction_codes = np.asarray(direction_codes)
    codes = np.asarray(layout_codes)
    codes = np.where((codes >= 0) & (codes < len(LAYOUTS)), codes, LAYOUTS.index("rnd"))
    for op_code, op in enumerate(OPS):
        is_op = direction_codes == op_code
        for code, layout in enumerate(LAYOUTS):
            yield op, layout, np.flatnonzero(is_op & (codes == code))


def _sizes(size_bytes, indices):
    """The sizes of a group's ops as float64, converted once for all the lines evaluated."""
    return np.asarray(size_bytes)[indices].astype(np.float64, copy=False)


def _line_for(model, op, cls, layout, typical=False):
    """The model's line for (op, cls, layout), else for the next layout of LAYOUT_FALLBACK; None
    if none exists (or, with typical=True, none has a typical line)."""
    for key in ((op, cls, fallback) for fallback in LAYOUT_FALLBACK[layout]):
        line = model.lines.get(key)
        if line is not None and (line.typical is not None or not typical):
            return line
    return None


# ---- memory layout ----

def memory_layout_codes(buffer, tid, process):
    """Memory layout code of each op, given in the order of ioassess.inputs.trace's TraceSet.ops
    (sorted by process, then start): off0 if its buffer address is the one of the previous op
    of the same thread with an address, rnd otherwise (also for a thread's first op: no
    evidence of reuse), LAYOUT_UNKNOWN without an address (buffer 0: Darshan DXT, sync ops); the
    -unaligned one of the two where the address is off a 64-byte cache line."""
    buffer = np.asarray(buffer)
    codes = np.full(len(buffer), LAYOUT_UNKNOWN, dtype=np.int8)
    has_address = np.flatnonzero(buffer != 0)
    tid, process = np.asarray(tid)[has_address], np.asarray(process)[has_address]
    thread = process.astype(np.int64) << 32 | tid.astype(np.int64)
    if np.all(thread[1:] >= thread[:-1]):   # one thread per process: in order already
        order = has_address
    else:
        by_thread = np.lexsort((tid, process))  # stable: keeps each thread's ops in time order
        order, thread = has_address[by_thread], thread[by_thread]
    address = buffer[order]
    reused = np.zeros(len(order), dtype=bool)
    np.equal(address[1:], address[:-1], out=reused[1:])
    reused[1:] &= thread[1:] == thread[:-1]
    codes[order] = np.where(reused, LAYOUTS.index("off0"), LAYOUTS.index("rnd")) + \
        (address & (ALIGNMENT_BYTES - 1) != 0) * UNALIGNED
    return codes
