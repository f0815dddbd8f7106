"""Per op, its class and its time lost compared with cached I/O, under the model of its file's
file system (report/model_choice.py).

Ops known one by one (recorder traces, Darshan DXT) are classified by the model and each gets
its time lost vs cached: duration minus the cached typical duration of its size. I/O known only
in aggregate (Darshan counters, the recorder's summary table past its record cap) gets an
estimate: its time if cached lies between the cached typical times at the two edges of its
access-size bins, so its time lost is an interval.

Where the recorder sampled the page cache before an op, the kernel's word overrides the model
where it settles the cause (report/ground_truth.py): an op served from memory that took as
long as storage I/O is a stall, a write that waited for new pages an allocation, neither blamed
on storage. Memory layout is unknown without buffer addresses and taken as rnd
(models/causes.py).
"""

import numpy as np

from ioassess.inputs.job import LAYERS, META, WRITE, Flag, op_column
from ioassess.models.causes import (APPENDED, CLASSES, LAYOUT_UNKNOWN, LAYOUTS, UNCLASSIFIED, bound_seconds,
                                    cached_typical_seconds, classify)

from .ground_truth import (CACHED, NEW_PAGES, PAST_END, InferredVerdicts, OpsInOrder, overridden_classes)
from .own_cached import line_of_op, own_cached_lines, own_line_seconds
from .passes import CHUNK_OPS, Chunk, chunks_of, run_passes

# Class names in the tables: the model's classes, the causes only the kernel's samples tell,
# then what no model covers.
STALL = "stall"                    # the kernel saw the pages cached, yet it took as long as storage I/O
ALLOCATION = "allocation"          # a write into new pages that took as long as storage I/O
NOT_MODELLED = "not modelled"      # sync ops, failed calls, I/O of sizes/ops the model has no line for
ESTIMATED = "counters (estimate)"  # I/O known only in aggregate
ROW_CLASSES = CLASSES + (STALL, ALLOCATION, NOT_MODELLED, ESTIMATED)
CLASS_CODES = {cls: code for code, cls in enumerate(ROW_CLASSES)}
# Where the time beyond a cached op's in each class comes from: storage's is time lost compared
# with cached I/O (caching would save it); the others' is slowness caching would not save.
CAUSES = {"memcpy": "memory", "cached": "memory", "uncached": "storage", "slow": "storage", STALL: "stall",
          ALLOCATION: "allocation"}
STORAGE_CLASSES = ("uncached", "slow")
IO_LAYERS = (LAYERS.index("posix"), LAYERS.index("stdio"))
# The per-op columns of the classification, as each chunk's per_op holds them.
PER_OP_COLUMNS = {"class": np.int8, "model_class": np.int8, "kernel": np.int8, "judged": np.int8,
                  "cached_typical_s": np.float64, "lost_s": np.float64, "slowness_s": np.float64, "is_io": np.bool_,
                  "modelled": np.bool_, "appended": np.bool_, "own_line": np.bool_, "own_line_index": np.int32,
                  "fresh_buffer": np.bool_, "call_s": np.float64}


def io_ops(ops):
    """Which ops count as I/O time: POSIX and STDIO reads, writes and syncs (metadata calls are
    report/metadata.py's)."""
    return np.isin(ops["layer"], IO_LAYERS) & (ops["direction"] != META)


def modelled_directions(ops):
    """Per op its direction where a model can judge it (an I/O read or write that succeeded), 2
    (no line) for every other op."""
    modelled = io_ops(ops) & (ops["direction"] < 2) & (ops["result"] >= 0)
    return np.where(modelled, ops["direction"], np.uint8(2))


class Evidence:
    """What classifying an op takes from every op of the job, a pass (report/passes.py) run
    before the classification: per (process, file, direction) the verdicts of its sampled ops
    (ground_truth.InferredVerdicts), and the reads and writes the kernel's samples found cached,
    out of which each model makes the job's own cached lines (report/own_cached.py) for the
    files it judges. models, of_file: as model_choice.file_models gives them."""
    CONFIRMED = {"model": np.int64, "direction": np.uint8, "size": np.int64, "duration_s": np.float64,
                 "layout": np.int8}

    def __init__(self, job, models, of_file):
        self.models, self.of_file = models, of_file
        self.in_order = OpsInOrder()
        self.inferred = InferredVerdicts(len(job.processes), len(job.files))
        self.confirmed = {name: [np.zeros(0, dtype)] for name, dtype in self.CONFIRMED.items()}

    def add(self, chunk):
        ops = chunk.ops
        verdict, layouts, fresh = self.in_order.facts(ops)
        self.inferred.add(ops, verdict)
        directions = modelled_directions(ops)
        # Ops into a fresh buffer took its page faults' time too: not the cached time.
        confirmed = (verdict == CACHED) & (directions < 2) & ~fresh
        for name, values in (("model", self.of_file[ops["file"]]), ("direction", directions), ("size", ops["size"]),
                             ("duration_s", ops["duration_s"]), ("layout", layouts)):
            self.confirmed[name].append(values[confirmed])

    def merge(self, later):
        self.inferred.merge(later.inferred)
        for name, parts in self.confirmed.items():
            parts += later.confirmed[name]

    def result(self):
        """(InferredVerdicts' agreed verdicts, per model its own cached lines)."""
        confirmed = {name: np.concatenate(parts) for name, parts in self.confirmed.items()}
        own = []
        for index, model in enumerate(self.models):
            mine = confirmed["model"] == index
            lines = own_cached_lines(confirmed["direction"][mine], confirmed["size"][mine],
                                     confirmed["duration_s"][mine], confirmed["layout"][mine],
                                     np.ones(int(mine.sum()), bool))
            own.append({**lines, **own_line_facts(lines, model)})
        return self.inferred.result(), own


class Classifier:
    """The classification of each chunk of ops, in Job.ops order (see classify_chunk), under
    the model of each op's file with the evidence (Evidence's result) of every op."""

    def __init__(self, models, of_file, evidence):
        self.models, self.of_file = models, of_file
        self.agreed, self.own_lines = evidence
        self.line_offsets = np.cumsum([0] + [len(lines["key"]) for lines in self.own_lines])
        self.in_order = OpsInOrder()

    def classify(self, ops):
        verdict, layouts, fresh = self.in_order.facts(ops)
        judged = self.agreed.judged(ops, verdict)
        if len(self.models) == 1:
            return classify_chunk(ops, self.models[0], self.own_lines[0], verdict, judged, layouts, fresh)
        of_op = self.of_file[ops["file"]]
        per_op = {name: np.zeros(len(verdict), dtype) for name, dtype in PER_OP_COLUMNS.items()}
        for index, model in enumerate(self.models):
            mine = np.flatnonzero(of_op == index)
            if not len(mine):
                continue
            part = classify_chunk({name: column[mine] for name, column in ops.items()}, model, self.own_lines[index],
                                  verdict[mine], judged[mine], layouts[mine], fresh[mine])
            part["own_line_index"] = np.where(part["own_line_index"] >= 0,
                                              part["own_line_index"] + self.line_offsets[index], -1)
            for name, column in part.items():
                per_op[name][mine] = column
        return per_op


def classify_chunk(ops, model, own, verdict, judged, layouts, fresh):
    """Per op: class code (index into ROW_CLASSES) with the kernel's word applied and the one
    before it (model_class: the model's, or the job's own cached line's), the kernel's verdict
    of its sample (kernel) and the verdict it is judged by (judged: its own or its file's,
    report/ground_truth.py), cached typical duration (NaN where not modelled; the appended
    line's for writes into new pages; the job's own where its kernel-confirmed cached ops of the
    size and shape are slower than the model's line: own_line, and own_line_index, the line's
    index in own (report/own_cached.py)), time lost compared with cached I/O (lost_s: the time
    beyond the cached typical of ops that waited for storage or wrote whole pages of an uncached
    file, what caching would save) and slowness_s (the same of the other ops: stalls,
    allocation, memory; caching would not save it), whether it counts as I/O time (is_io) and
    the model covers it (modelled). verdict, judged, layouts, fresh: OpsInOrder's and
    InferredVerdicts' facts of the ops."""
    is_io = io_ops(ops)
    directions = modelled_directions(ops)
    # O_DIRECT ops went to the device whatever the page cache held: storage however fast, and
    # the page cache's state (of the file's buffered ops) says nothing of them.
    direct = (op_column(ops, "flags") & Flag.DIRECT) != 0
    codes = classify(model, directions, ops["size"], ops["duration_s"], layouts).astype(np.int8)
    cached = cached_typical_seconds(model, directions, ops["size"], layouts)
    own_line = with_own_lines(own, model, codes, cached, directions, ops["size"], ops["duration_s"], layouts)
    not_modelled = (codes < 0) | np.isnan(cached)
    codes[not_modelled] = CLASS_CODES[NOT_MODELLED]
    covered = is_io & ~not_modelled & (cached > 0)
    codes[direct & np.isin(codes, [CLASS_CODES["memcpy"], CLASS_CODES["cached"]])] = CLASS_CODES["uncached"]
    classes = overridden_classes(codes, judged, ops["direction"], CLASS_CODES)
    # Writes into new pages, judged by the appended line where the model has one: beyond its
    # bound they waited for new memory; an append's time is the time if cached of those past the
    # end of the file (a re-run appends too), not of whole-page overwrites of an uncached file (a
    # re-run would overwrite cached pages).
    new_pages = np.isin(judged, [NEW_PAGES, PAST_END]) & ~not_modelled
    appended = np.zeros(len(classes), bool)
    if new_pages.any():       # none without page-cache samples (Darshan logs, sampling off)
        append_bound = bound_seconds(model, np.where(new_pages, directions, np.uint8(2)), ops["size"], layouts,
                                     APPENDED)
        new_pages &= ~np.isnan(append_bound)
        classes[new_pages] = np.where(ops["duration_s"][new_pages] <= append_bound[new_pages], CLASS_CODES["cached"],
                                      CLASS_CODES[ALLOCATION])
        appended = new_pages & (judged == PAST_END)
        append_typical = cached_typical_seconds(model, np.where(appended, directions, np.uint8(2)), ops["size"],
                                                layouts, cls=APPENDED)
        appended &= ~np.isnan(append_typical)
        cached[appended] = append_typical[appended]
        own_line &= ~appended
    call_s = per_call_seconds(model, directions, layouts, classes)
    beyond = np.maximum(ops["duration_s"] - cached, 0.0)
    beyond[not_modelled] = 0.0
    # What caching would save: the wait for storage, and the new pages an overwrite of an
    # uncached file's whole pages went into (a re-run would overwrite cached pages)
    saved = np.isin(classes, [CLASS_CODES[cls] for cls in STORAGE_CLASSES]) | \
        ((judged == NEW_PAGES) & (ops["direction"] == WRITE) & ~appended)
    own_line &= ~not_modelled & is_io
    line = line_of_op(own, np.where(own_line, directions, np.uint8(2)), ops["size"], layouts)
    return {"class": classes, "model_class": codes, "kernel": verdict, "judged": judged, "cached_typical_s": cached,
            "lost_s": np.where(saved, beyond, 0.0), "slowness_s": np.where(saved, 0.0, beyond), "is_io": is_io,
            "modelled": covered, "appended": appended, "own_line": own_line,
            "own_line_index": line.astype(np.int32), "fresh_buffer": fresh, "call_s": call_s}


def classified(chunks, classifier):
    """The chunks, each with its per-op classes."""
    for chunk in chunks:
        yield Chunk(chunk.ops, classifier.classify(chunk.ops), chunk.first)


def classified_chunks(job, model, per_file=None, size=CHUNK_OPS):
    """(the Evidence's result, the job's ops in chunks of at most `size` in Job.ops order, each
    with its per-op classes), each op under its file's model: per_file is (models, index into
    models per file of Job.files), as model_choice.file_models gives them; None: `model` judges
    every op. The ops are read twice: for the evidence of all of them (here), then as the chunks
    are taken."""
    models, of_file = per_file or ([model], np.zeros(len(job.files), np.int64))
    evidence = run_passes({"evidence": Evidence(job, models, of_file)}, chunks_of(job, size))["evidence"].result()
    return evidence, classified(chunks_of(job, size), Classifier(models, of_file, evidence))


def classify_ops(job, model, per_file=None):
    """The per-op classes of all of Job.ops at once (PER_OP_COLUMNS, for the tests and tools
    that want them side by side with the ops), and the job's own cached lines ("own_lines", all
    models' one after the other), as classified_chunks gives them."""
    evidence, chunks = classified_chunks(job, model, per_file)
    parts = [chunk.per_op for chunk in chunks]
    per_op = {name: np.concatenate([part[name] for part in parts]) for name in PER_OP_COLUMNS}
    return {**per_op, "own_lines": joined_own_lines(evidence[1])}


def joined_own_lines(own_lines):
    """The models' own cached lines (Evidence's) one after the other, as own_line_index counts them."""
    return {name: np.concatenate([lines[name] for lines in own_lines]) for name in own_lines[0]}


def with_own_lines(own, model, codes, cached, directions, size_bytes, duration_s, layouts):
    """The job's own cached lines applied (report/own_cached.py), in place: where one is above
    the model's cached typical time (or the model judges a file system of another type:
    own_first) and below its uncached typical time, its typical is the op's time if cached
    (`cached`), an op the model calls storage within its bound is cached, and, without a model
    line of the file system's own type, one beyond it is storage (`codes`). Returns the mask of
    those ops."""
    if not len(own["key"]):     # no kernel samples (Darshan logs, sampling off), or too few
        return np.zeros(len(directions), bool)
    own_typical, own_bound = own_line_seconds(own, directions, size_bytes, layouts)
    own_line = (own_typical > np.nan_to_num(cached, nan=-1.0)) | (model.own_first & ~np.isnan(own_typical))
    # Cached ops as slow as the model's storage ops say no more of cached I/O than a stall does:
    # the kernel counts pages that read-ahead is still reading as cached, and a sequential
    # read that waits for them waits for storage.
    uncached_typical = cached_typical_seconds(model, directions, size_bytes, layouts, cls="uncached")
    own_line &= ~(own_typical >= uncached_typical)
    own_bound = np.fmin(own_bound, uncached_typical)   # as slow as storage: a stall, or a wait
    cached[own_line] = own_typical[own_line]
    within_own = duration_s <= own_bound
    beyond_model = np.isin(codes, [CLASS_CODES["uncached"], CLASS_CODES["slow"], UNCLASSIFIED])
    codes[own_line & beyond_model & within_own] = CLASS_CODES["cached"]
    beyond_own = own_line & ~within_own & ((codes == UNCLASSIFIED) | model.own_first)
    codes[beyond_own & (codes < CLASS_CODES["uncached"])] = CLASS_CODES["uncached"]
    return own_line


def own_line_facts(lines, model):
    """Per own line: the model's name, its typical and bound and the model's cached typical at
    the bin's smallest size (the ops and seconds it gave a time if cached are the OwnLineUse
    pass's)."""
    at = lines["size_low"]
    direction, layout = lines["direction"].astype(np.uint8), lines["layout"].astype(np.int8)
    typical, bound = own_line_seconds(lines, direction, at, layout)
    return {"model": np.full(len(at), model.name, object), "typical_s": typical, "bound_s": bound,
            "model_typical_s": cached_typical_seconds(model, direction, at, layout)}


def per_call_seconds(model, directions, layouts, classes=None):
    """Per op, the cost of a call whatever its size: its class's typical line at one byte (the
    uncached line's for ops of storage classes, the cached line's for the others); 0 where the
    model has no such line (syncs, metadata, ops it does not model)."""
    ones = np.ones(len(directions), np.int64)
    call_s = cached_typical_seconds(model, directions, ones, layouts)
    if classes is not None:
        storage = np.isin(classes, [CLASS_CODES["uncached"], CLASS_CODES["slow"]])
        uncached = cached_typical_seconds(model, np.where(storage, directions, np.uint8(2)), ones, layouts,
                                          cls="uncached")
        call_s = np.where(storage & ~np.isnan(uncached), uncached, call_s)
    return np.nan_to_num(call_s, nan=0.0).clip(0.0)


def estimate_totals(job, model, per_file=None):
    """estimate_totals_of below, each row under its file's model (per_file: as classify_ops')."""
    if per_file is None or len(per_file[0]) < 2:
        return estimate_totals_of(job, model)
    models, of_file = per_file
    of_row = of_file[job.totals["file"]]
    merged = None
    for index, own in enumerate(models):
        part = estimate_totals_of(job, own)
        mine = of_row == index
        if merged is None:
            merged = part
        else:
            for name, column in part.items():
                merged[name][mine] = column[mine]
    return merged


def estimate_totals_of(job, model):
    """Per row of Job.totals: time if cached and time lost as (low, high) intervals. The cached
    typical time of each size bin's ops lies between the line at the bin's two edges; rows
    without size bins use their mean op size (bytes / ops) for both edges."""
    totals, bins = job.totals, job.size_bins
    rows = len(totals["ops"])
    cached_low, cached_high = np.zeros(rows), np.zeros(rows)
    if rows:
        row_of_bin = _rows_of_bins(totals, bins)
        modelled_bins = np.flatnonzero((row_of_bin >= 0) & (bins["direction"] < 2))
        i = row_of_bin[modelled_bins]
        low = np.maximum(bins["size_low"][modelled_bins], 1)
        mean_size = totals["bytes"][i] // np.maximum(totals["ops"][i], 1)
        high = np.where(bins["size_high"][modelled_bins] >= 0, bins["size_high"][modelled_bins],
                        np.maximum(low, mean_size))
        high = np.maximum(high, low)
        direction = bins["direction"][modelled_bins]
        edge_times = _cached_seconds(model, np.concatenate((direction, direction)), np.concatenate((low, high)))
        counts = bins["ops"][modelled_bins]
        cached_low += np.bincount(i, counts * edge_times[:len(i)], rows)
        cached_high += np.bincount(i, counts * edge_times[len(i):], rows)
        binned = np.zeros(rows, bool)
        binned[i] = True
        plain = np.flatnonzero(~binned & (totals["direction"] < 2) & (totals["ops"] > 0))
        mean_sizes = totals["bytes"][plain] / totals["ops"][plain]
        cached_low[plain] = cached_high[plain] = \
            totals["ops"][plain] * _cached_seconds(model, totals["direction"][plain], mean_sizes)
        unmodelled = totals["direction"] >= 2
        cached_low[unmodelled] = cached_high[unmodelled] = totals["seconds"][unmodelled]
    seconds = totals["seconds"]
    if_cached_low, if_cached_high = np.minimum(cached_low, seconds), np.minimum(cached_high, seconds)
    directions = np.where(totals["direction"] < 2, totals["direction"], np.uint8(2))
    return {"if_cached_low_s": if_cached_low, "if_cached_high_s": if_cached_high,
            "lost_low_s": seconds - if_cached_high, "lost_high_s": seconds - if_cached_low,
            "is_io": np.isin(totals["layer"], IO_LAYERS) & (totals["direction"] != META),
            "call_s": per_call_seconds(model, directions, np.full(rows, LAYOUTS.index("rnd"), np.int8))}


def _rows_of_bins(totals, bins):
    """Per size-bin row, the Job.totals row of its (process, file, layer, direction); -1 for none.
    Where totals name a key twice, the last row of it (as a dict of the rows would)."""
    keys = ("process", "file", "layer", "direction")
    rows, nbins = len(totals["ops"]), len(bins["ops"])
    if not nbins:
        return np.zeros(0, np.int64)
    table = np.concatenate([np.stack([totals[k].astype(np.int64) for k in keys], 1),
                            np.stack([bins[k].astype(np.int64) for k in keys], 1)])
    _, key = np.unique(table, axis=0, return_inverse=True)
    key = key.reshape(-1)
    row_of_key = np.full(key.max() + 1, -1, np.int64)
    row_of_key[key[:rows]] = np.arange(rows)    # the last row of a key wins
    return row_of_key[key[rows:]]


def _cached_seconds(model, directions, sizes):
    """The cached typical time at each size for its direction (0 where the model has none)."""
    layouts = np.full(len(sizes), LAYOUT_UNKNOWN, np.int8)
    seconds = cached_typical_seconds(model, directions, np.asarray(sizes), layouts)
    return np.nan_to_num(seconds, nan=0.0)
