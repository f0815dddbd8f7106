"""`ioassess train`: measure a file system's cause models (Kunkel 2015, sections 4.2 and 6).

The workload generator (plugin/programs/ioassess-workload.c) runs under the recorder itself, so
training data are measured exactly as job data are. For every state (discard, cached,
rewritten, uncached, appended), op, memory layout and access size it is run `repeats` times (in an outer loop, as
in the paper, so that a disturbance hits one repeat, not all); the op durations of one
(state, op, memory layout, size) cell are pooled, their density gives the outlier cut-off and
the mean within the cut-off, and two lines are made over the sizes: the typical line through the
means (time estimates: the means themselves between the smallest and largest size measured, a
least relative squares segmented line beyond) and the bound line (classification): the line that
best separates the class from the next slower one on the measurements, or, for the slowest
class, the least line over its cut-offs + 10 % (docs/cause-models.md says why).

The pure parts (the grid, fitting the lines from measurements) are separate from the parts
that run programs and change the page cache (class Trainer).
"""
import contextlib
import dataclasses
import itertools
import json
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import tempfile
import time
import zipfile

import numpy as np

from .. import recorder_library_path
from ..files import file_system_facts, work_dir_problem
from ..jsonfile import Invalid, parse_json
from ..inputs.trace import read_trace_dir
from ..inputs.traceformat import Op
from ..models.causes import (ALIGNMENT_BYTES, APPENDED, FLUSHED, JOINT_BYTES, LAYOUTS, CauseModel, MeasuredLine,
                             ModelLine, fit_segmented_line, fit_separating_line, fit_straight_line, fit_upper_envelope,
                             joined_line, line_errors)
from ..models.density import density_log10, find_clusters
from ..models.modelfile import save_model
from ..progress import Progress
from ..report.model_choice import host_class
from .training_report import write_training_report

# States of the page cache the generator runs in, and the class each one's ops are. cached:
# the file's pages brought in by reads (read-ahead makes large folios); rewritten, for writes:
# the pages made by writes of the run's size (at least a page) and written back. Overwriting
# the first costs several times what overwriting the second does (Linux 6.18, ext4: 4 KiB
# 17 us against 1.7 us, 64 KiB 51 us against 10 us, measured with fio): the cached write
# line's bound is fitted to the first (so that both are cached), its typical time to the
# second, what a re-run of a job that wrote its file costs (docs/cause-models.md, "Cached
# writes"). appended, for writes: a file made empty, written from its start (every write goes
# into new pages); its cell is the appended line, and its fsync at the end, of every byte the
# run wrote, a point of the flushed line (FLUSH_OP, FLUSHED, layout).
STATES = ("discard", "cached", "rewritten", "uncached", "appended")
STATE_CLASS = {"discard": "memcpy", "cached": "cached", "rewritten": "cached", "uncached": "uncached",
               "appended": APPENDED}
STATE_OPS = {"discard": ("read", "write"), "cached": ("read", "write"), "rewritten": ("write",),
             "uncached": ("read", "write"), "appended": ("write",)}
# The measurements' cell of the rewritten state: (op, REWRITTEN_CELL, layout).
REWRITTEN_CELL = "cached-rewritten"
FLUSH_OP = "sync"
SLOWER_CLASS = {"memcpy": "cached", "cached": "uncached"}
# The paper fits the bound line to the outlier cut-off plus 10 %, since cut-offs vary between
# the sizes (section 6).
BOUND_MARGIN = 1.1
FLUSH_BOUND_MARGIN = 2.0
# Shares of the training file's pages that must be resident for the cached state, and at most
# for the uncached one. Proactive reclaim (DAMON's pageout scheme on this VM class) evicts
# page-cache pages that look idle within seconds, so the cached state is checked before every
# run and the file read again when pages have gone.
CACHED_RESIDENT = 0.99
UNCACHED_RESIDENT = 0.01
# Half a page: the start of uncached writes of a page or more (offset_base).
PARTIAL_PAGE_OFFSET = 2048
# The rewritten state is made afresh (the span written) for each write size; its runs go over a
# span of twice their bytes, at least this, so that the state costs little to make.
REWRITTEN_MIN_SPAN = 64 << 20
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
# Appended runs write at most this much (and sizes up to APPENDED_MAX_SIZE; the line extrapolates
# beyond): appending needs that much new memory, and on a VM whose free memory the host took back
# (free page reporting) a run of 256 MiB of 16 MiB appends took 40 ms a write against 0.9 ms for
# 4 MiB ones in a run of 64 MiB. Such appends waited for memory: the line is of appends into
# memory at hand, so that the report can call the others allocation.
APPENDED_RUN_BYTES = 32 << 20
APPENDED_MIN_OPS = 8
APPENDED_MAX_SIZE = 4 << 20
# Memory layouts the generator knows; all but off0 reuse no buffer address, so the classifier
# sees them as "rnd" and they are pooled into the rnd lines. A layout with UNALIGNED_SUFFIX
# runs with its buffer MEM_OFFSET bytes off the cache line (a malloc'ed buffer's place); each
# op's model layout is then that of its address, as a job's (models.causes.memory_layout_codes).
MODEL_LAYOUT = {"off0": "off0", "seq": "rnd", "rnd": "rnd", "stride": "rnd", "reverse": "rnd"}
UNALIGNED_SUFFIX = "-unaligned"
MEM_OFFSET = 16
# States whose time is the copy into or out of the buffer, where its alignment shows; uncached
# ops take the aligned lines (the device's time dwarfs it). Below UNALIGNED_MIN_BYTES a copy is
# a few cache lines: no unaligned runs there (their lines extrapolate).
UNALIGNED_STATES = ("discard", "cached", "rewritten", "appended")
UNALIGNED_MIN_BYTES = 1024


@dataclasses.dataclass(frozen=True)
class Profile:
    name: str
    sizes: tuple            # access sizes in bytes
    mem_layouts: tuple      # generator memory layouts
    file_layouts: dict      # state -> generator file layouts
    repeats: int            # runs of each configuration
    min_ops: int            # ops per run at least (large sizes) ...
    max_ops: int            # ... and at most (small sizes)
    budget_bytes: int       # bytes per run, between those two limits
    file_bytes: int         # size of the training file
    mem_buffer_bytes: int   # the generator's buffer
    # Seconds a run may take at most (min_ops at least), by the time per op of the state and op's
    # previous run: on a networked file system every small write is a round trip to the server.
    run_seconds: "float | None" = None


def _powers(first, last, factor):
    sizes, size = [], first
    while size <= last:
        sizes.append(size)
        size *= factor
    return tuple(sizes)


# Uncached runs use random file offsets: sequential reads of an uncached file are served by
# read-ahead, i.e. they are cached by behaviour (DESIGN.md, facts measured here).
PROFILES = {
    "quick": Profile(
        name="quick", sizes=_powers(1, 16 << 20, 4), mem_layouts=("off0", "rnd", "rnd-unaligned"),
        file_layouts={"discard": ("off0",), "cached": ("rnd",), "rewritten": ("rnd",), "uncached": ("rnd",),
                      "appended": ("seq",)},
        repeats=3, min_ops=32, max_ops=2000, budget_bytes=64 << 20, file_bytes=1 << 30,
        mem_buffer_bytes=64 << 20),
    "full": Profile(
        name="full", sizes=_powers(1, 16 << 20, 2),
        mem_layouts=("off0", "seq", "rnd", "off0-unaligned", "rnd-unaligned"),
        file_layouts={"discard": ("off0",), "cached": ("seq", "rnd"), "rewritten": ("seq", "rnd"),
                      "uncached": ("rnd",), "appended": ("seq",)},
        repeats=3, min_ops=64, max_ops=5000, budget_bytes=256 << 20, file_bytes=2 << 30,
        mem_buffer_bytes=256 << 20),
    # `ioassess calibrate`: every line of the full profile in well under a minute (about 22 s
    # on a 2-vCPU VM, docs/performance.md): the quick profile's sizes (64 KiB among them: with
    # sizes a factor 8 apart the lines at 64 KiB were interpolations that put cached reads under
    # the memcpy bound), one repeat, a file just large enough that no run reads a slot twice
    # (16 slots of 16 MiB).
    "calibrate": Profile(
        name="calibrate", sizes=_powers(1, 16 << 20, 4), mem_layouts=("off0", "rnd", "off0-unaligned", "rnd-unaligned"),
        file_layouts={"discard": ("off0",), "cached": ("rnd",), "rewritten": ("rnd",), "uncached": ("rnd",),
                      "appended": ("seq",)},
        repeats=1, min_ops=16, max_ops=2000, budget_bytes=64 << 20, file_bytes=256 << 20,
        mem_buffer_bytes=64 << 20, run_seconds=0.1),
}


@dataclasses.dataclass(frozen=True)
class RunConfig:
    repeat: int
    state: str          # discard | cached | rewritten | uncached
    op: str             # read | write
    size: int
    mem_layout: str
    file_layout: str

    @property
    def seed(self):
        return 1000 * self.repeat + self.size % 997


def offset_base(config):
    """Where the run's file offsets start. Uncached writes of a page or more start half a page
    in, so that each one writes part of a page at both ends and the kernel reads those pages
    first (read-modify-write): the storage cause of a write. Whole pages of an uncached file are
    written without a read, into new page-cache memory, like an append (allocation, not storage)."""
    return PARTIAL_PAGE_OFFSET if config.state == "uncached" and config.op == "write" and config.size >= JOINT_BYTES \
        else 0


def ops_per_run(profile, size, state=None):
    """Ops of a run; an appended run's write at most APPENDED_RUN_BYTES in all (APPENDED_MIN_OPS
    at least)."""
    ops = min(profile.max_ops, max(profile.min_ops, profile.budget_bytes // size))
    if state == "appended":
        ops = min(ops, max(APPENDED_MIN_OPS, APPENDED_RUN_BYTES // size))
    return int(ops)


def rewritten_span(profile, size):
    """Bytes of the file a rewritten run goes over (from offset 0), made by writes first."""
    return min(profile.file_bytes, max(REWRITTEN_MIN_SPAN, 2 * ops_per_run(profile, size) * size))


def rewriting_unit(size):
    """The size of the writes that make a rewritten run's pages: the run's own, at least a page
    (smaller writes make whole pages too)."""
    return max(size, PAGE_BYTES)


def training_grid(profile):
    """Every run, in the order they are made: repeats outermost (a disturbance then hits one
    repeat, not all), then states (a cached file stays cached from run to run), ops, sizes,
    layouts (the rewritten state is made once per size)."""
    return [RunConfig(repeat, state, op, size, mem, file_layout)
            for repeat in range(profile.repeats)
            for state in STATES
            for op in STATE_OPS[state]
            for size in profile.sizes if state != "appended" or size <= APPENDED_MAX_SIZE
            for mem in profile.mem_layouts
            if not mem.endswith(UNALIGNED_SUFFIX) or (state in UNALIGNED_STATES and size >= UNALIGNED_MIN_BYTES)
            for file_layout in profile.file_layouts[state]]


def expected_seconds(profile, config):
    """A rough duration of one run, for the progress bar's time left: process start plus
    bytes at a pessimistic rate for the state."""
    rate = {"discard": 4e9, "cached": 2e9, "rewritten": 2e9, "uncached": 4e8, "appended": 2e9}[config.state]
    per_op = {"discard": 1e-6, "cached": 2e-6, "rewritten": 2e-6, "uncached": 1e-4, "appended": 2e-6}[config.state]
    ops = ops_per_run(profile, config.size, config.state)
    return 0.01 + ops * (per_op + config.size / rate)


# ---- fitting (pure) ----

@dataclasses.dataclass(frozen=True)
class SizePoint:
    """One size of one (op, class, layout) cell: the pooled durations' density summary."""
    size: int
    observations: int
    bound_s: float          # cut-off + 10 %
    typical_s: float        # mean of the durations within the cut-off
    purged: int             # observations beyond the cut-off (the paper's "outlier % Exp.")


def size_point(size, durations_s):
    """The size's bound point (density cut-off + 10 %) and typical duration: the mean within
    the cut-off, not the density's mode, because "time if cached" is a sum of durations, whose
    estimator is the expected duration; cached durations have a tail, so the mode understates
    it (validation at 1 MiB: time lost 11 % too high with the mode)."""
    durations_s = durations_s[durations_s > 0]
    clusters = find_clusters(density_log10(durations_s))
    cutoff_s = 10.0 ** clusters.cutoff_x
    kept = durations_s[durations_s <= cutoff_s]
    return SizePoint(size=int(size), observations=len(durations_s), bound_s=cutoff_s * BOUND_MARGIN,
                     typical_s=float(np.mean(kept)), purged=len(durations_s) - len(kept))


def flush_point(dirty_bytes, durations_s):
    """A point of the flushed line: the fsyncs of the runs that dirtied this many bytes (one a
    run, too few for a density): their mean, and twice the slowest for the bound (a sync's
    time varies with the journal's and the device queue's state more than an op's)."""
    return SizePoint(size=int(dirty_bytes), observations=len(durations_s),
                     bound_s=float(np.max(durations_s)) * FLUSH_BOUND_MARGIN, typical_s=float(np.mean(durations_s)),
                     purged=0)


def fit_flush_cell(points, durations_by_size):
    """The flushed line of one layout: fsync time = a fixed cost + a cost per dirty byte, one
    straight line through the points' means, its bound the least line above their bounds."""
    sizes = np.array([p.size for p in points], float)
    bound = fit_straight_line(sizes, np.array([p.bound_s for p in points]), envelope=True)
    typical = fit_straight_line(sizes, np.array([p.typical_s for p in points]))
    all_sizes = np.concatenate([np.full(len(d), s, float) for s, d in durations_by_size.items()])
    return bound, typical, line_errors(bound, all_sizes, np.concatenate(list(durations_by_size.values())))


def fit_cell(points, durations_by_size, slower_by_size, typical_points=None, envelope=True):
    """Bound and typical lines of one (op, class, layout) cell and its Table-3 error metrics.
    slower_by_size: the next slower class's durations in the same op and layout (at the sizes
    where it differs by more than behaviour), or None. Every op counts in the separation, the
    slow tail too: the classification of a job's ops does not purge outliers either.
    typical_points: the size points of the typical line when they are not the bound's (cached
    writes: the rewritten state's), else points. Without a slower class the bound lies on or
    above every size's bound point (envelope), or with envelope=False is the paper's least
    relative squares line through them (one size whose cut-off a burst of slow ops raised does
    not lift the line at every size)."""
    sizes = np.array([p.size for p in points], float)
    bound_points = np.array([p.bound_s for p in points])
    if slower_by_size:
        bound = fit_separating_line(durations_by_size, slower_by_size, {p.size: p.bound_s for p in points})
    elif envelope:
        bound = fit_upper_envelope(sizes, bound_points)
    else:
        bound = fit_segmented_line(sizes, bound_points)
    typical_points = sorted(typical_points or points, key=lambda p: p.size)
    typical_sizes = tuple(p.size for p in typical_points)
    typical_seconds = tuple(p.typical_s for p in typical_points)
    typical = MeasuredLine(fitted=fit_segmented_line(np.array(typical_sizes, float), np.array(typical_seconds)),
                           sizes_bytes=typical_sizes, seconds=typical_seconds)
    all_sizes = np.concatenate([np.full(len(d), s, float) for s, d in durations_by_size.items()])
    all_durations = np.concatenate(list(durations_by_size.values()))
    errors = line_errors(bound, all_sizes, all_durations)
    for segment, in_segment in (("small", sizes <= 4096), ("large", sizes > 4096)):
        observed = sum(p.observations for p, inside in zip(points, in_segment) if inside)
        purged = sum(p.purged for p, inside in zip(points, in_segment) if inside)
        if segment in errors:
            errors[segment]["outlier_pct_experiment"] = 100.0 * purged / observed if observed else None
    return bound, typical, errors


def slower_durations(measurements, op, cls, layout):
    """{size: durations} of the class after cls (same op and layout), which cls's bound is
    separated from; {} for the slowest. The cached class of writes is both cached states: the
    rewritten state's small writes (into pages that writes made, 0.6-0.9 us here) are far
    faster than those into read-in pages (15-25 us), and a memcpy bound placed anywhere below
    the second took 18 % of held-out rewritten writes for memcpy. An -unaligned layout without
    measurements of the slower class (uncached runs are aligned only: the device's time dwarfs
    a copy's alignment) is separated from its aligned twin's: bounded by its own cut-offs
    alone, the envelope of one noisy size lifted a cached read bound above uncached reads."""
    slower = SLOWER_CLASS.get(cls)
    by_size = measurements.get((op, slower, layout)) or \
        measurements.get((op, slower, layout.removesuffix(UNALIGNED_SUFFIX)), {})
    rewritten = measurements.get((op, REWRITTEN_CELL, layout), {}) if slower == "cached" else {}
    return {size: np.concatenate([by_size.get(size, np.empty(0)), rewritten.get(size, np.empty(0))])
            for size in by_size.keys() | rewritten.keys()}


def order_bounds(lines):
    """A slower class's bound is never below a faster one's: where the fits say otherwise the two
    states cannot be told apart there. The slower line then takes, part by part, the larger of
    the two intercepts and of the two slopes (so it lies on or above both lines at every size,
    and changes only the part that crossed), and its note says so."""
    ordered = dict(lines)
    for op, layout in itertools.product(("read", "write"), LAYOUTS):
        floor = None
        for cls in ("memcpy", "cached", "uncached"):
            line = ordered.get((op, cls, layout))
            if line is None:
                continue
            if floor is not None:
                raised = _at_least(line.bound, floor)
                if raised != line.bound:
                    line = dataclasses.replace(
                        line, bound=raised,
                        note=(line.note + " " if line.note else "") +
                        "bound raised to stay above the faster class's bound")
                    ordered[(op, cls, layout)] = line
            floor = line.bound
    return ordered


def _at_least(line, floor):
    return joined_line(max(line.small_intercept_s, floor.small_intercept_s),
                       max(line.small_slope_s_per_byte, floor.small_slope_s_per_byte),
                       max(line.large_slope_s_per_byte, floor.large_slope_s_per_byte))


def fit_model(measurements, name, description, provenance):
    """measurements: {(op, class, layout): {size: durations_s array}} -> (CauseModel, points).
    A cached write cell's bound is fitted to the cached (read-in) state's ops, the slower of its
    two states; its typical line to the rewritten state's where there is one; the memcpy write
    bound is separated from both cached states (slower_durations). The appended
    cell's bound is the least-squares line through its bound points; the flushed cell (sizes:
    bytes dirty) is a straight line (fit_flush_cell)."""
    points_by_cell = {cell: [(flush_point if cell[1] == FLUSHED else size_point)(size, durations)
                             for size, durations in sorted(by_size.items())]
                      for cell, by_size in measurements.items()}
    lines = {}
    for (op, cls, layout), by_size in sorted(measurements.items()):
        if cls == REWRITTEN_CELL:
            continue
        if cls == FLUSHED:
            bound, typical, errors = fit_flush_cell(points_by_cell[(op, cls, layout)], by_size)
            lines[(op, cls, layout)] = ModelLine(bound=bound, typical=typical, errors=errors, note="")
            continue
        bound, typical, errors = fit_cell(points_by_cell[(op, cls, layout)], by_size,
                                          slower_durations(measurements, op, cls, layout),
                                          points_by_cell.get((op, REWRITTEN_CELL, layout)) if cls == "cached" else None,
                                          envelope=cls != APPENDED)
        lines[(op, cls, layout)] = ModelLine(bound=bound, typical=typical, errors=errors, note="")
    model = CauseModel(name=name, description=description, provenance=provenance, lines=order_bounds(lines))
    return model, points_by_cell


# ---- measuring (runs programs, changes the page cache) ----

class TrainingError(Exception):
    """Training cannot go on; str() is one line."""


def workload_program_path():
    """The workload generator, installed next to the recorder library."""
    return os.path.join(os.path.dirname(recorder_library_path()), "ioassess-workload")


def check_training_dir(directory, profile):
    """Refuse a directory that is missing, not writable or too small, before anything runs."""
    problem = work_dir_problem(directory, profile.file_bytes + (256 << 20),
                               f"the {profile.name} profile's training file")
    if problem:
        raise TrainingError(problem)


@contextlib.contextmanager
def interrupts_held():
    """A SIGINT or SIGTERM that comes during the block takes effect after it, so that a Ctrl-C
    cannot come between making a work directory and being ready to remove it, nor cut its
    removal short. Held by Python handlers, not by blocking the signals: a signal blocked in
    this thread would go to another (numpy's), and Python would act on it at once."""
    caught = []
    previous = {signum: signal.signal(signum, lambda signum, _frame: caught.append(signum))
                for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if caught:
            signal.raise_signal(caught[0])


class Trainer:
    """Runs the generator under the recorder in prepared page-cache states. may_drop_caches:
    whether root evicts by drop_caches (every file of the machine); otherwise, and always
    without root, only the training file is evicted (POSIX_FADV_DONTNEED)."""

    def __init__(self, directory, profile, may_drop_caches=True, work_prefix="ioassess-train-"):
        self.profile = profile
        self.workload = workload_program_path()
        self.library = recorder_library_path()
        for program in (self.workload, self.library):
            if not os.path.isfile(program):
                raise TrainingError(f"{program} is missing: reinstall ioassess (pip install .)")
        # absolute: the recorder names the files it saw by their absolute paths
        self.work_dir = tempfile.mkdtemp(prefix=work_prefix, dir=os.path.abspath(directory))
        # The runs' traces on local storage (the default temporary directory, private): on a
        # networked file system every run's trace costs its round trips (80 ms a run on GlusterFS).
        try:
            self.trace_base = tempfile.mkdtemp(prefix=work_prefix + "traces-")
        except OSError:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            raise
        self.data_file = os.path.join(self.work_dir, "training.dat")
        # The appended state's file, made empty by each of its runs.
        self.appended_file = os.path.join(self.work_dir, "appended.dat")
        self.runs = 0
        # (state, op) -> mean seconds per op of its latest run (Profile.run_seconds)
        self.seconds_per_op = {}
        self.evict_by_drop_caches = may_drop_caches and os.geteuid() == 0
        # How the file's cached pages were made: "read", ("write", unit, span) or None (unknown,
        # or evicted).
        self.pages_made_by = None

    def cleanup(self):
        """Remove the work directory; a second Ctrl-C or SIGTERM waits until it is gone."""
        with interrupts_held():
            shutil.rmtree(self.work_dir, ignore_errors=True)
            shutil.rmtree(self.trace_base, ignore_errors=True)

    def create_data_file(self):
        with open(self.data_file, "wb") as f:
            self.write_span(f, self.profile.file_bytes, 1 << 20)

    @staticmethod
    def write_span(f, span, unit):
        """Write [0, span) of the open file f with writes of `unit` bytes of pseudo-random data
        (the same block each time), and write it back."""
        block = random.Random(1).randbytes(unit)
        f.seek(0)
        for offset in range(0, span, unit):
            f.write(block[:span - offset])
        f.flush()
        os.fsync(f.fileno())

    def resident_fraction(self):
        out = subprocess.run([self.workload, "--resident", self.data_file], capture_output=True,
                             text=True, check=True).stdout
        return float(re.search(r"resident_fraction=(\S+)", out).group(1))

    def make_cached(self):
        """Read the whole file unless mincore says it is resident already from reads, and check
        again. Pages that writes made are evicted first: reads would keep them as they are."""
        if self.pages_made_by != "read":
            self.make_uncached()
        resident = self.resident_fraction()
        for _ in range(3):
            if resident >= CACHED_RESIDENT:
                self.pages_made_by = "read"
                return resident
            with open(self.data_file, "rb", buffering=0) as f:
                while f.read(16 << 20):
                    pass
            resident = self.resident_fraction()
        raise TrainingError(f"{self.data_file}: only {resident:.0%} stays in the page cache after reading it; "
                            "too little free memory for the cached state")

    def make_rewritten(self, config):
        """The run's span of the file made by writes of the run's unit (rewriting_unit) into
        evicted pages and written back, unless the last rewritten run left it so (prepare has
        written back what that run dirtied). Returns the file's resident share."""
        unit, span = rewriting_unit(config.size), rewritten_span(self.profile, config.size)
        if self.pages_made_by != ("write", unit, span):
            self.make_uncached()
            with open(self.data_file, "r+b", buffering=0) as f:
                self.write_span(f, span, unit)
            self.pages_made_by = ("write", unit, span)
        return self.resident_fraction()

    def make_uncached(self):
        """Drop the file from the page cache (drop_caches as root, else POSIX_FADV_DONTNEED) and
        check with mincore that it is gone."""
        self.pages_made_by = None
        for _ in range(3):
            if self.evict_by_drop_caches:
                os.sync()
                with open("/proc/sys/vm/drop_caches", "w") as f:
                    f.write("3\n")
            else:
                subprocess.run([self.workload, "--evict", self.data_file], capture_output=True, check=True)
            resident = self.resident_fraction()
            if resident <= UNCACHED_RESIDENT:
                return resident
        raise TrainingError(f"{self.data_file}: {resident:.0%} of it stays in the page cache after eviction; "
                            "cannot measure the uncached state here")

    def prepare(self, config):
        """Set the page cache to the run's state. Before writes, earlier runs' dirty pages
        are written back first: writes that queue behind write-back measure the previous
        run, not the state."""
        if config.op == "write" and config.state != "discard":
            os.sync()
        if config.state == "cached":
            return self.make_cached()
        if config.state == "rewritten":
            return self.make_rewritten(config)
        if config.state == "uncached":
            return self.make_uncached()
        return None

    def target(self, config):
        if config.state == "discard":
            return "/dev/zero" if config.op == "read" else "/dev/null"
        return self.appended_file if config.state == "appended" else self.data_file

    def measure(self, config):
        """The run's timed ops as the recorder saw them (see timed_ops)."""
        ops = ops_per_run(self.profile, config.size, config.state)
        per_op_s = self.seconds_per_op.get((config.state, config.op))
        if self.profile.run_seconds and per_op_s:
            ops = max(self.profile.min_ops, min(ops, int(self.profile.run_seconds / per_op_s)))
        target = self.target(config)
        trace_dir = os.path.join(self.trace_base, f"trace-{self.runs}")
        self.runs += 1
        mem_layout = config.mem_layout.removesuffix(UNALIGNED_SUFFIX)
        mem_offset = MEM_OFFSET if mem_layout != config.mem_layout else 0
        # An off0 run reuses one buffer of its size: the generator fills the whole buffer first
        # (the profile's 64 MiB took 47 ms, most of a short run).
        mem_buffer = config.size if mem_layout == "off0" else self.profile.mem_buffer_bytes
        command = [self.workload, "--file", target, "--op", config.op, "--size", str(config.size),
                   "--mem-layout", mem_layout, "--mem-offset", str(mem_offset),
                   "--mem-buffer", str(mem_buffer),
                   "--file-layout", config.file_layout, "--repeats", str(ops),
                   "--budget", str(ops * config.size), "--seed", str(config.seed),
                   "--offset-base", str(offset_base(config))]
        if config.state == "rewritten":
            command += ["--file-span", str(rewritten_span(self.profile, config.size))]
        if config.state == "appended":
            command += ["--create", "--file-span", str(ops * config.size), "--fsync-end"]
        env = dict(os.environ, LD_PRELOAD=self.library, IOASSESS_TRACE_DIR=trace_dir,
                   IOASSESS_EXCLUDE="none", IOASSESS_MAX_RECORDS=str(ops + 1000))
        for name in ("IOASSESS_DISABLE", "IOASSESS_OBFUSCATE", "IOASSESS_CLOCK"):
            env.pop(name, None)
        result = subprocess.run(command, env=env, capture_output=True, text=True)
        try:
            if result.returncode != 0:
                raise TrainingError(f"{self.workload} failed ({result.returncode}): "
                                    f"{(result.stderr.strip().splitlines() or ['no message'])[-1]}")
            timed = timed_ops(read_trace_dir(trace_dir), target, config.op)
            data_ops = timed["op"] != Op.FSYNC
            if data_ops.any():
                self.seconds_per_op[(config.state, config.op)] = float(timed["duration_s"][data_ops].mean())
            return timed
        finally:
            shutil.rmtree(trace_dir, ignore_errors=True)


def timed_ops(traceset, target, op):
    """The generator's timed ops: its successful pread/pwrite calls on the target file and its
    fsync at the end (--fsync-end), as columns (those of TraceSet.ops, plus duration_s)."""
    ids = [file_id for file_id, info in traceset.files.items() if info.name == target]
    kinds = [Op.PREAD] if op == "read" else [Op.PWRITE, Op.FSYNC]
    ops = traceset.ops
    chosen = np.isin(ops["file_id"], np.array(ids, np.uint64)) & np.isin(ops["op"], kinds) & (ops["result"] >= 0)
    columns = {name: column[chosen] for name, column in ops.items()}
    columns["duration_s"] = columns["duration_ns"] * 1e-9
    return columns


# What eviction from a client cannot reach on a networked file system, by the mount table's type:
# the caches that can still serve a read the client's page cache no longer holds, so that the
# uncached state measured there is reads from them, not from storage (docs/cause-models.md,
# "GlusterFS over FUSE"). Neither POSIX_FADV_DONTNEED nor drop_caches on the client reaches the
# servers' memory; FUSE passes no fadvise on to its daemon.
SERVER_MEMORY = {
    "fuse.glusterfs": "the GlusterFS servers' memory (the bricks' page cache)",
    "nfs": "the NFS server's memory", "nfs4": "the NFS server's memory",
    "lustre": "the OSS read cache", "ceph": "the Ceph OSDs' memory", "beegfs": "the BeeGFS storage servers' memory",
}
CLIENT_CACHES = {
    "fuse.glusterfs": "the GlusterFS client's io-cache, if the volume has it on (off by default)",
    "gpfs": "the GPFS pagepool (outside the page cache: mincore cannot see it)",
}


def not_evicted(fs_type, by_drop_caches):
    """What the eviction (POSIX_FADV_DONTNEED on the training file, or drop_caches) leaves that
    can serve the file's reads, for a file system of the mount table's type; [] for local ones."""
    left = []
    if fs_type in CLIENT_CACHES:
        left.append(CLIENT_CACHES[fs_type])
    if fs_type in SERVER_MEMORY:
        who = "from this client" if by_drop_caches else "by this user"
        left.append(f"{SERVER_MEMORY[fs_type]}: not evictable {who}")
    elif fs_type.startswith("fuse.") or fs_type == "fuse":
        left.append("the FUSE file system daemon's own caches and whatever serves it: not evictable from here")
    return left


def provenance(directory, profile, trainer, source):
    host = platform.node()
    file_system = file_system_facts(directory)
    return {
        "source": source,
        "host": host,
        "host_class": host_class(host),
        "kernel": platform.release(),
        "file_system": file_system,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "profile": profile.name,
        "generator": {
            "program": "ioassess-workload",
            "sizes": list(profile.sizes),
            "mem_layouts": list(profile.mem_layouts),
            "file_layouts": {state: list(layouts) for state, layouts in profile.file_layouts.items()},
            "repeats": profile.repeats,
            "ops_per_run": [profile.min_ops, profile.max_ops],
            "budget_bytes": profile.budget_bytes,
            "file_bytes": profile.file_bytes,
            "mem_buffer_bytes": profile.mem_buffer_bytes,
            "uncached_write_offset_base": PARTIAL_PAGE_OFFSET,
            "eviction": "drop_caches" if trainer.evict_by_drop_caches else "posix_fadvise DONTNEED",
            "not_evicted": not_evicted(file_system["type"], trainer.evict_by_drop_caches),
        },
    }


def measure_all(trainer, profile, progress):
    """Run the whole grid: {(op, class, layout): {size: durations}} plus per-run facts."""
    grid = training_grid(profile)
    measurements = {}
    runs = []
    for config in grid:
        # Checked before every run: each uncached run caches what it touched, and a cached
        # state is only re-read when mincore finds it no longer resident.
        resident = trainer.prepare(config)
        ops = trainer.measure(config)
        is_flush = ops["op"] == Op.FSYNC
        if not np.count_nonzero(~is_flush):
            raise TrainingError(f"{trainer.workload}: the run {config.state} {config.op} {config.mem_layout} "
                                f"{config.size} B recorded no {config.op} of {trainer.target(config)}")
        layout = MODEL_LAYOUT[config.mem_layout.removesuffix(UNALIGNED_SUFFIX)]
        cell = REWRITTEN_CELL if config.state == "rewritten" else STATE_CLASS[config.state]
        unaligned = (ops["buffer"] % ALIGNMENT_BYTES != 0) & (config.state in UNALIGNED_STATES)
        for off_line, suffix in ((False, ""), (True, UNALIGNED_SUFFIX)):
            chosen = ~is_flush & (unaligned == off_line)
            if chosen.any():
                _add(measurements, (config.op, cell, layout + suffix), config.size, ops["duration_s"][chosen])
        durations = ops["duration_s"][~is_flush]
        if is_flush.any():
            _add(measurements, (FLUSH_OP, FLUSHED, layout), int(ops["requested"][~is_flush].sum()),
                 ops["duration_s"][is_flush])
        runs.append((config, len(durations), resident))
        progress.advance(expected_seconds(profile, config),
                         f"{config.state} {config.op} {config.mem_layout} {config.size} B")
    return measurements, runs


def _add(measurements, key, size, durations):
    by_size = measurements.setdefault(key, {})
    by_size[size] = np.concatenate([by_size.get(size, np.empty(0)), durations])


def save_measurements(path, measurements, description, provenance):
    """The raw durations (s) of every (op, class, layout, size), with the model's description
    and provenance, so that the fit can be redone without measuring again (`--refit`)."""
    arrays = {f"{op}|{cls}|{layout}|{size}": durations.astype(np.float32)
              for (op, cls, layout), by_size in measurements.items() for size, durations in by_size.items()}
    arrays["meta"] = np.array(json.dumps({"description": description, "provenance": provenance}))
    temporary = path + ".part.npz"
    np.savez_compressed(temporary, **arrays)
    os.replace(temporary, path)


def load_measurements(path):
    """(measurements, description, provenance) from save_measurements; TrainingError if the
    file is not one."""
    try:
        with np.load(path, allow_pickle=False) as saved:
            meta = parse_json(str(saved["meta"]))
            measurements = {}
            for key in saved.files:
                if key == "meta":
                    continue
                op, cls, layout, size = key.split("|")
                measurements.setdefault((op, cls, layout), {})[int(size)] = saved[key].astype(np.float64)
        return measurements, meta["description"], meta["provenance"]
    except (OSError, ValueError, KeyError, Invalid, zipfile.BadZipFile) as error:
        raise TrainingError(f"{path}: not a measurements file of ioassess train ({error})") from None


def measurements_path(model_path):
    return os.path.splitext(model_path)[0] + ".measurements.npz"


def train(directory, profile_name, model_path, stream):
    """Measure, fit and write the model file, its training report (MODEL.html) and the raw
    measurements (MODEL.measurements.npz) beside it. The training file and traces are removed
    at the end, also on Ctrl-C or an error."""
    measurements, description, facts = measure_file_system(directory, PROFILES[profile_name], stream, "train")
    save_measurements(measurements_path(model_path), measurements, description, facts)
    return fit_and_write(measurements, description, facts, model_path)


def calibrate(directory, model_path, stream):
    """`ioassess calibrate`: measure the calibrate profile in directory as any user can (the
    uncached state by POSIX_FADV_DONTNEED on its own file, also as root: dropping every cache of
    a shared machine is not a user's business), fit and write the model alone; returns it. The
    work files are removed at the end, also on Ctrl-C, SIGTERM or an error."""
    measurements, description, facts = measure_file_system(directory, PROFILES["calibrate"], stream, "calibrate")
    name = os.path.splitext(os.path.basename(model_path))[0]
    model, _ = fit_model(measurements, name, description, facts)
    save_model(model, model_path)
    return model


MEASURING_COMMANDS = {"train": "trained by ioassess train", "calibrate": "calibrated by ioassess calibrate"}


def measure_file_system(directory, profile, stream, command):
    """Run the profile's grid in a work directory (DIR/ioassess-COMMAND-*) made in directory
    and removed at the end; returns (measurements, description, provenance). command: train
    (may drop caches as root) or calibrate (never does)."""
    check_training_dir(directory, profile)
    source = MEASURING_COMMANDS[command]
    trainer = None
    try:
        with interrupts_held():
            trainer = Trainer(directory, profile, command == "train", f"ioassess-{command}-")
        stream.write(f"ioassess: {profile.name} profile, {len(training_grid(profile))} runs in {trainer.work_dir}\n")
        trainer.create_data_file()
        progress = Progress(sum(expected_seconds(profile, c) for c in training_grid(profile)), stream)
        measurements, _ = measure_all(trainer, profile, progress)
        facts = provenance(directory, profile, trainer, source)
    finally:
        if trainer is not None:
            trainer.cleanup()
    file_system = facts["file_system"]
    description = (f"Cause models of {file_system['type']} at {file_system['mount']} on {facts['host']}, "
                   f"{source} ({profile.name} profile).")
    if facts["generator"]["not_evicted"]:
        description += (f" Its uncached state is what {facts['generator']['eviction']} evicted; not evicted: "
                        f"{'; '.join(facts['generator']['not_evicted'])}.")
    return measurements, description, facts


def fit_and_write(measurements, description, facts, model_path):
    """Fit the model, write it and its training report; returns (model, report path)."""
    name = os.path.splitext(os.path.basename(model_path))[0]
    model, _ = fit_model(measurements, name, description, facts)
    save_model(model, model_path)
    report_path = os.path.splitext(model_path)[0] + ".html"
    write_training_report(report_path, model, measurements)
    return model, report_path


def refit(measurements_file, model_path):
    """Fit again from saved measurements (after a change of the fitting, or to inspect)."""
    measurements, description, facts = load_measurements(measurements_file)
    return fit_and_write(measurements, description, facts, model_path)
