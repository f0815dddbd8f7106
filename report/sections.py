"""The assessment's sections on where the time went: by class, the kernel's word, syncs, layers,
collective MPI-IO, files, access sizes, over time, the heavy tail, and the scatter sample with the
model's lines. Each is a function of the Job and the per-op classes that returns plain data."""

import re

import numpy as np

from ioassess.arrays import distinct
from ioassess.inputs.job import (DARSHAN_SIZE_BINS, DIRECTIONS, LAYERS, META, MPIIO, POSIX, SYNC, UNASSESSED_MODULES,
                                 WRITE, Flag, op_column)
from ioassess.models.causes import FLUSHED, LAYOUTS
from ioassess.models.plain import finite_or_none, ratio_or_none
from ioassess.models.slowdown import slowdown_by_interval
from ioassess.site.probe.during_job import file_system_during_job

from .classify import CLASS_CODES, ESTIMATED, IO_LAYERS, ROW_CLASSES, io_ops
from .ground_truth import agreement
from .ledger import io_rows, sums_by
from .passes import Carried, Sample, Sums, run_ends, run_starts, stable_order
from .processes import pid_or_none

TOP_FILES = 20
TIMELINE_BINS = 100
SCATTER_POINTS = 4000
# The slowdown quantiles and the tail analysis take a uniform sample of this many ops at most:
# their cost grows with n, and a million points (20 000 per interval) pin a p99 or a tail fit
# down as well as the data allow.
SAMPLE_OPS = 1_000_000
# Fewer modelled ops than this make no tail worth fitting.
TAIL_MIN_OPS = 100
SIZE_BIN_LABELS = ("0-100 B", "100 B-1 KiB", "1-10 KiB", "10-100 KiB", "100 KiB-1 MiB", "1-4 MiB", "4-10 MiB",
                   "10-100 MiB", "100 MiB-1 GiB", "1 GiB+")
SMALL_OP_BYTES = 4096
# Flags of an op counted in the layer table, and the op kinds (direction codes) of its rows.
LAYER_FLAGS = tuple(Flag)


class KernelWord:
    """The kernel_word section's pass: the sampled ops the model covers (their classes and
    verdicts for ground_truth.agreement) and the counts of ops the kernel's word changed."""
    COLUMNS = {"model_class": np.int8, "kernel": np.int8, "direction": np.uint8, "size": np.int64,
               "duration_s": np.float64, "fresh_buffer": np.bool_}

    def __init__(self, own_lines):
        self.sampled = {name: [np.zeros(0, dtype)] for name, dtype in self.COLUMNS.items()}
        self.counts = np.zeros(3, np.int64)
        self.own_line_use = Sums(("ops", "seconds"), max(own_lines, 1))

    def add(self, chunk):
        per_op, io = chunk.per_op, chunk.per_op["is_io"]
        rows = per_op["modelled"] & (per_op["kernel"] >= 0)
        for name, parts in self.sampled.items():
            parts.append((chunk.ops if name in chunk.ops else per_op)[name][rows])
        self.counts += [np.count_nonzero((per_op["judged"] >= 0) & (per_op["kernel"] < 0) & io),
                        np.count_nonzero(per_op["appended"] & io),
                        np.count_nonzero((per_op["class"] != per_op["model_class"]) & io)]
        used = per_op["own_line_index"] >= 0
        self.own_line_use.add(per_op["own_line_index"][used], {"ops": 1.0, "seconds": chunk.ops["duration_s"][used]})

    def merge(self, later):
        for name, parts in self.sampled.items():
            parts += later.sampled[name]
        self.counts += later.counts
        self.own_line_use.merge(later.own_line_use)

    def result(self):
        """(the sampled ops' columns, the counts, per own cached line the ops and seconds it
        gave a time if cached)."""
        return ({name: np.concatenate(parts) for name, parts in self.sampled.items()}, self.counts,
                self.own_line_use.dense())


def kernel_word(job, sampled_and_counts, own_lines):
    """The page-cache samples: how many ops have one, how many were judged by their file's, how
    the classes agree with the kernel (report/ground_truth.py), and the job's own cached lines
    (report/own_cached.py) with the ops whose time if cached they gave."""
    refused = [p for p in job.processes if p.source == "trace" and p.pagecache == "unavailable"]
    turned_off = [p for p in job.processes if p.source == "trace" and p.pagecache == "off"]
    sampled, (inferred, appended, reclassified), own_line_use = sampled_and_counts
    return {**agreement(sampled["model_class"], sampled["kernel"], sampled["direction"],
                        np.ones(len(sampled["kernel"]), bool), CLASS_CODES, sampled["size"], sampled["duration_s"],
                        sampled["fresh_buffer"]),
            "inferred_ops": int(inferred), "appended_ops": int(appended), "reclassified_ops": int(reclassified),
            "processes_refused": len(refused), "processes_turned_off": len(turned_off),
            "own_cached_lines": own_cached_rows({**own_lines, "ops": own_line_use["ops"][:len(own_lines["key"])],
                                                 "seconds": own_line_use["seconds"][:len(own_lines["key"])]})}


def own_cached_rows(lines):
    """The job's own cached lines (report/own_cached.py) that gave some op its time if cached:
    per line the model whose file system's ops made it, direction, size bin, layout, the cached
    ops it comes from, its typical and bound and the model's typical at the bin's smallest size,
    and the ops and seconds of the job's I/O it gave a time if cached."""
    return [{"model": str(lines["model"][i]), "direction": DIRECTIONS[int(lines["direction"][i])],
             "size_low": int(lines["size_low"][i]), "size_high": int(lines["size_high"][i]),
             "layout": LAYOUTS[int(lines["layout"][i])], "samples": int(lines["samples"][i]),
             "typical_s": float(lines["typical_s"][i]), "bound_s": float(lines["bound_s"][i]),
             "model_typical_s": finite_or_none(lines["model_typical_s"][i]), "ops": int(lines["ops"][i]),
             "seconds": float(lines["seconds"][i])}
            for i in np.flatnonzero(lines["ops"] > 0)]


class ClassSums:
    """The I/O ops' ops, bytes, seconds, time lost and slowness per (class, direction), and the
    I/O ops the job's own cached lines gave a time if cached (own_cached_ops), a pass."""

    def __init__(self):
        self.sums = Sums(("ops", "bytes", "seconds", "lost_s", "slowness_s"), len(ROW_CLASSES) * len(DIRECTIONS))
        self.own_cached_ops = 0

    def add(self, chunk):
        ops, per_op = chunk.ops, chunk.per_op
        io = per_op["is_io"]
        self.sums.add(per_op["class"][io].astype(np.int64) * len(DIRECTIONS) + ops["direction"][io],
                      {"ops": 1.0, "bytes": np.maximum(ops["result"][io], 0).astype(np.float64),
                       "seconds": ops["duration_s"][io], "lost_s": per_op["lost_s"][io],
                       "slowness_s": per_op["slowness_s"][io]})
        self.own_cached_ops += int(np.count_nonzero(io & per_op["own_line"]))

    def merge(self, later):
        self.sums.merge(later.sums)
        self.own_cached_ops += later.own_cached_ops

    def result(self):
        """name -> (class code, direction code) array of sums, and own_cached_ops."""
        return ({name: column.reshape(len(ROW_CLASSES), len(DIRECTIONS)) for name, column in self.sums.dense().items()},
                self.own_cached_ops)


def class_table(job, class_sums, per_total):
    """Rows per (class, direction): ops, bytes, seconds, time lost (low, high), slowness."""
    rows = []
    for code, cls in enumerate(ROW_CLASSES[:-1]):
        for d, direction in enumerate(DIRECTIONS):
            if class_sums["ops"][code, d]:
                lost = float(class_sums["lost_s"][code, d])
                rows.append(_row(cls, direction, int(class_sums["ops"][code, d]), int(class_sums["bytes"][code, d]),
                                 float(class_sums["seconds"][code, d]), lost, lost,
                                 float(class_sums["slowness_s"][code, d])))
    totals = job.totals
    for d, direction in enumerate(DIRECTIONS):
        member = per_total["is_io"] & (totals["direction"] == d)
        if member.any():
            rows.append(_row(ESTIMATED, direction, int(totals["ops"][member].sum()), int(totals["bytes"][member].sum()),
                             float(totals["seconds"][member].sum()), float(per_total["lost_low_s"][member].sum()),
                             float(per_total["lost_high_s"][member].sum()), 0.0))
    return rows


def _row(cls, direction, count, nbytes, seconds, lost_low, lost_high, slowness):
    return {"class": cls, "direction": direction, "ops": count, "bytes": nbytes, "seconds": seconds,
            "lost_low_s": lost_low, "lost_high_s": lost_high, "slowness_s": slowness}


class Flushes:
    """The flushes section's pass: per successful POSIX sync, the bytes its process wrote to the
    file since its previous sync of it (or its first op there), carried from chunk to chunk per
    (process, file), and the sync against the flushed line of its file's model."""

    def __init__(self, job, models):
        self.judged_by, self.of_file = models
        self.lines = [flushed_line(model) for model in self.judged_by]
        self.files = max(len(job.files), 1)
        self.carried = Carried(np.float64)   # per (process, file): bytes written since its last sync
        self.sums = dict.fromkeys(("syncs", "seconds", "dirty", "typical_s", "fixed_s", "beyond_bound_s",
                                   "beyond_bound_syncs"), 0.0)
        self.files_synced = np.zeros(self.files, bool)
        self.lines_known = True

    def add(self, chunk):
        ops = chunk.ops
        posix = ops["layer"] == POSIX
        is_sync = posix & (ops["direction"] == SYNC) & (ops["result"] >= 0)
        chosen = np.flatnonzero(is_sync | (posix & (ops["direction"] == WRITE) & (ops["result"] > 0)))
        if not len(chosen):
            return
        group = ops["process"][chosen].astype(np.int64) * self.files + ops["file"][chosen]
        order = stable_order(group)     # a chunk's rows are in start order per process
        chosen, group = chosen[order], group[order]
        # A write wrote at most what it asked for (a trace's result is the job's word), in float64
        # so that no sum of forged counts wraps round.
        syncs = is_sync[chosen]
        written = np.where(syncs, 0.0, np.clip(ops["result"][chosen], 0, ops["size"][chosen]).astype(np.float64))
        first = run_starts(group)
        carried_in = self.carried.get(group[first], 0.0)
        written[first] += carried_in      # what the group's ops before this chunk wrote since a sync
        # a segment: a group's ops up to and including a sync; a sync flushes its segment's writes
        starts = first | np.r_[False, syncs[:-1]]
        segment = np.cumsum(starts) - 1
        so_far = np.cumsum(written)
        in_segment = so_far - (so_far - written)[starts][segment]
        at_sync = np.flatnonzero(syncs)
        dirty = in_segment[at_sync]
        last = run_ends(group)
        self.carried.set(group[last], np.where(syncs[last], 0.0, in_segment[last]))
        seconds = ops["duration_s"][chosen][at_sync]
        files = ops["file"][chosen][at_sync]
        self.files_synced[files] = True
        self.sums["syncs"] += len(at_sync)
        self.sums["seconds"] += float(seconds.sum())
        self.sums["dirty"] += float(dirty.sum())
        model_of_sync = self.of_file[files]
        for m in distinct(model_of_sync).tolist():
            line = self.lines[m]
            if line is None:
                self.lines_known = False
                continue
            here = model_of_sync == m
            bound = line.bound.predict(dirty[here])
            beyond = np.maximum(seconds[here] - bound, 0.0)
            self.sums["typical_s"] += float(line.typical.predict(dirty[here]).sum())
            self.sums["fixed_s"] += float(line.typical.predict(0.0)) * int(here.sum())
            self.sums["beyond_bound_s"] += float(beyond.sum())
            self.sums["beyond_bound_syncs"] += int(np.count_nonzero(beyond))

    def merge(self, later):
        self.carried.merge(later.carried)
        for name, value in later.sums.items():
            self.sums[name] += value
        self.files_synced |= later.files_synced
        self.lines_known &= later.lines_known

    def result(self):
        """The POSIX syncs (fsync, fdatasync) that succeeded, against the flushed line of the
        model that judges each one's file (models: model_choice.file_models's) at the bytes each
        had at most to write back: what its process wrote to the file since its previous sync of
        it (the kernel may have written some back before). None without syncs; the model figures
        None where one of those models has no flushed line."""
        if not self.sums["syncs"]:
            return None
        result = {"syncs": int(self.sums["syncs"]), "seconds": self.sums["seconds"],
                  "bytes_written_before": int(self.sums["dirty"]), "files": int(self.files_synced.sum()),
                  **dict.fromkeys(("typical_s", "fixed_s", "beyond_bound_s", "beyond_bound_syncs"))}
        if self.lines_known:
            result.update({name: self.sums[name] for name in ("typical_s", "fixed_s", "beyond_bound_s")},
                          beyond_bound_syncs=int(self.sums["beyond_bound_syncs"]))
        return result


def flushed_line(model):
    """A model's line of syncs that flush written data, None without one."""
    line = model.lines.get(("sync", FLUSHED, "rnd")) or model.lines.get(("sync", FLUSHED, "off0"))
    return line if line is not None and line.typical is not None else None


class LayerAmounts:
    """Per (layer, direction) of the ops, and per flag among them: ops, bytes, seconds; a pass."""
    KEYS = len(LAYERS) * len(DIRECTIONS) * (len(LAYER_FLAGS) + 1)

    def __init__(self):
        self.sums = Sums(("ops", "bytes", "seconds"), self.KEYS)

    def add(self, chunk):
        ops = chunk.ops
        flags = op_column(ops, "flags")
        cell = (ops["layer"].astype(np.int64) * len(DIRECTIONS) + ops["direction"]) * (len(LAYER_FLAGS) + 1)
        amounts = {"ops": 1.0, "bytes": np.maximum(ops["result"], 0).astype(np.float64), "seconds": ops["duration_s"]}
        self.sums.add(cell, amounts)
        for slot, flag in enumerate(LAYER_FLAGS, 1):
            flagged = flags & flag != 0
            if flagged.any():
                self.sums.add(cell[flagged] + slot, {name: np.broadcast_to(value, flagged.shape)[flagged]
                                                     for name, value in amounts.items()})

    def merge(self, later):
        self.sums.merge(later.sums)

    def result(self):
        return {name: column.reshape(len(LAYERS), len(DIRECTIONS), len(LAYER_FLAGS) + 1)
                for name, column in self.sums.dense().items()}


def layer_table(job, amounts):
    """Per direction, the layers side by side: ops, bytes and seconds at each layer (MPI-IO time
    contains the POSIX time under it), and per layer the part of the ops known one by one that
    carries each flag (MPI-IO: collective, nonblocking; POSIX: under MPI-IO, under collective
    MPI-IO, i.e. aggregator work). A layer without ops in a direction is null. Metadata calls
    are the metadata section's (report/metadata.py). amounts: LayerAmounts' result."""
    totals = job.totals
    rows = []
    for d, direction in enumerate(DIRECTIONS[:META]):
        row = {"direction": direction}
        for layer_code, layer in enumerate(LAYERS):
            here = {name: column[layer_code, d] for name, column in amounts.items()}
            counted = (totals["layer"] == layer_code) & (totals["direction"] == d)
            if not (here["ops"][0] or counted.any()):
                row[layer] = None
                continue
            row[layer] = _amounts(here, 0, totals["ops"][counted].sum(), totals["bytes"][counted].sum(),
                                  totals["seconds"][counted].sum())
            row[layer]["flagged"] = {flag.name.lower(): _amounts(here, slot)
                                     for slot, flag in enumerate(LAYER_FLAGS, 1) if here["ops"][slot]}
            row[layer]["collective_ops_counted"] = _collective_counted(job, layer_code, direction)
        if any(row[layer] for layer in LAYERS):
            rows.append(row)
    return rows


def unassessed_module_table(job):
    """The Darshan modules that moved data ioassess does not assess (Job.unassessed), in the order
    of UNASSESSED_MODULES: `module`, `what` (for the page), `goes_through` (where its data goes on:
    "MPI-IO or POSIX", "MPI-IO" or "DAOS"), the records, bytes and seconds Darshan counted."""
    return [{"module": module, "what": what, "goes_through": goes_through, **job.unassessed[module]}
            for module, (what, goes_through) in UNASSESSED_MODULES.items() if module in job.unassessed]


def _collective_counted(job, layer_code, direction):
    """Collective calls of a layer and direction Darshan counted (MPIIO_COLL_READS/WRITES), or
    None where no Darshan log counts them."""
    if direction == "sync":
        return None
    records = job.darshan_records
    counted = records[f"collective_{direction}s"][records["layer"] == layer_code]
    counted = counted[counted >= 0]
    return int(counted.sum()) if len(counted) else None


def _amounts(sums, slot=0, counted_ops=0, counted_bytes=0, counted_seconds=0.0):
    """Ops, bytes moved and seconds (sums: name -> sums, of which slot) plus counted aggregates."""
    return {"ops": int(sums["ops"][slot] + counted_ops), "bytes": int(sums["bytes"][slot] + counted_bytes),
            "seconds": float(sums["seconds"][slot] + counted_seconds)}


class CollectiveWork:
    """Collective MPI-IO reads and writes, and per process (index into Job.processes) the
    `ops`, `bytes` and `seconds` of its POSIX reads and writes made inside collective MPI-IO
    calls, the aggregators' work; a pass."""

    def __init__(self, job):
        n = len(job.processes)
        self.aggregation = {"ops": np.zeros(n, np.int64), "bytes": np.zeros(n), "seconds": np.zeros(n)}
        self.collective = {"ops": 0, "seconds": 0.0, "processes": np.zeros(n, bool)}

    def add(self, chunk):
        ops, n = chunk.ops, len(self.collective["processes"])
        flags = op_column(ops, "flags")
        under = (ops["layer"] == POSIX) & (flags & Flag.UNDER_COLLECTIVE != 0) & (ops["direction"] < 2)
        process = ops["process"][under]
        self.aggregation["ops"] += np.bincount(process, minlength=n)
        self.aggregation["bytes"] += np.bincount(process, np.maximum(ops["result"][under], 0), n)
        self.aggregation["seconds"] += np.bincount(process, ops["duration_s"][under], n)
        collective = (ops["layer"] == MPIIO) & (flags & Flag.COLLECTIVE != 0) & (ops["direction"] < 2)
        self.collective["ops"] += int(collective.sum())
        self.collective["seconds"] += float(ops["duration_s"][collective].sum())
        self.collective["processes"][ops["process"][collective]] = True

    def merge(self, later):
        for mine, theirs in ((self.aggregation, later.aggregation), (self.collective, later.collective)):
            for name in mine:
                mine[name] = mine[name] | theirs[name] if name == "processes" else mine[name] + theirs[name]

    def result(self):
        return self.aggregation, self.collective


def collective_io(job, aggregation, collective):
    """Collective MPI-IO reads and writes and the POSIX work under them (CollectiveWork), or
    None without any. With collective buffering a few processes (the aggregators) gather the
    others' data and do the file system I/O for all: the POSIX reads and writes made inside
    collective calls, per process. The rest of the time in collective calls is data exchange
    and waiting."""
    if not collective["ops"]:
        return None
    collective_s = collective["seconds"]
    aggregator_s, aggregator_bytes, aggregator_ops = aggregation["seconds"], aggregation["bytes"], aggregation["ops"]
    aggregators = [{"rank": job.processes[i].rank, "pid": pid_or_none(job.processes[i].pid),
                    "hostname": job.processes[i].hostname, "ops": int(aggregator_ops[i]),
                    "bytes": int(aggregator_bytes[i]), "seconds": float(aggregator_s[i])}
                   for i in np.flatnonzero(aggregator_ops)]
    aggregators.sort(key=lambda a: (a["rank"], a["pid"] or 0))
    return {
        "processes": int(collective["processes"].sum()),
        "collective_ops": collective["ops"],
        "collective_s": collective_s,
        "aggregator_s": float(aggregator_s.sum()),
        "aggregator_bytes": int(aggregator_bytes.sum()),
        "aggregator_share_of_collective": ratio_or_none(float(aggregator_s.sum()), collective_s),
        "aggregators": aggregators,
        "partial": bool(np.any(job.totals["layer"] == POSIX)),
    }


# The files of a language runtime rather than of the job: a Python interpreter's standard library
# and compiled modules, installed packages. Shown apart from the job's files (runtime_files).
RUNTIME_FILE = re.compile(r"/(site-packages|dist-packages|__pycache__)/|/lib(64)?/python[0-9.]*/")


def is_runtime_file(name):
    return RUNTIME_FILE.search(name) is not None


def runtime_files(job, per_file):
    """The I/O of the runtime's own files (RUNTIME_FILE), which the top files leave out: files,
    ops, bytes, seconds, time lost (an interval), from per_file (per_file_io's); None when the
    job read or wrote none."""
    runtime = np.array([is_runtime_file(f.name) for f in job.files], bool)
    if not runtime.any():
        return None
    files = runtime & (per_file["ops"] > 0)
    if not files.any():
        return None
    return {"files": int(files.sum()), "ops": int(per_file["ops"][files].sum()),
            "bytes": int(per_file["bytes"][files].sum()), "seconds": float(per_file["seconds"][files].sum()),
            "lost_low_s": float(per_file["lost_low_s"][files].sum()),
            "lost_high_s": float(per_file["lost_high_s"][files].sum())}


def per_file_io(job, ledger):
    """Per file (index into Job.files), from the job's ledger: the I/O of all processes (POSIX
    and STDIO reads, writes and syncs, known one by one or from counters): `ops`, `bytes`,
    `seconds`, `lost_low_s`, `lost_high_s`."""
    sums = sums_by(ledger, "file", len(job.files), io_rows(ledger))
    return {"ops": sums["calls"], **{name: sums[name] for name in ("bytes", "seconds", "lost_low_s", "lost_high_s")}}


class FilePatterns:
    """Per file, of its I/O ops: how many, how many have offsets and of those how many are
    consecutive and sequential (Darshan's two counts: `consecutive`, an op starts where the same
    process's previous op of the same layer and direction on the same file ended; `sequential`,
    there or past it; like Darshan, the first op compares with an op ending at byte 1), reads,
    small ones, and per class; a sample of their sizes for the median; a pass."""
    COUNTS = ("ops", "known", "consecutive", "sequential", "reads", "small")

    def __init__(self, job):
        self.files = max(len(job.files), 1)
        self.keys = (len(LAYERS), len(DIRECTIONS), self.files, max(len(job.processes), 1))
        self.previous_end = Carried(np.int64)
        self.counts = Sums(self.COUNTS, self.files)
        self.classes = Sums(("ops",), self.files * len(ROW_CLASSES))
        self.sizes = Sample(SAMPLE_OPS, {"file": np.int32, "size": np.int64})

    def add(self, chunk):
        ops, per_op = chunk.ops, chunk.per_op
        consecutive, sequential = self.after_previous(ops)
        io = per_op["is_io"]
        file = ops["file"][io]
        known = ops["offset"][io] >= 0
        self.counts.add(file, {"ops": 1.0, "known": known, "consecutive": (consecutive[io] & known),
                               "sequential": (sequential[io] & known), "reads": ops["direction"][io] == 0,
                               "small": ops["size"][io] < SMALL_OP_BYTES})
        self.classes.add(file.astype(np.int64) * len(ROW_CLASSES) + per_op["class"][io], {"ops": 1.0})
        self.sizes.add(chunk, io, {"file": ops["file"], "size": ops["size"]})

    def after_previous(self, ops):
        """Per op of a chunk, whether it is consecutive and whether it is sequential to the
        previous op of its process, file, layer and direction (carried from the chunks before)."""
        key = np.ravel_multi_index((ops["layer"], ops["direction"], ops["file"], ops["process"]), self.keys)
        order = stable_order(key)    # a chunk's rows are in start order per process
        offset = ops["offset"][order]
        previous_end = self.previous_end.previous(key[order], offset + np.maximum(ops["result"][order], 0), 1)
        known = offset >= 0
        consecutive, sequential = np.zeros(len(order), bool), np.zeros(len(order), bool)
        consecutive[order] = known & (offset == previous_end)
        sequential[order] = known & (offset >= previous_end)
        return consecutive, sequential

    def merge(self, later):
        self.previous_end.merge(later.previous_end)
        self.counts.merge(later.counts)
        self.classes.merge(later.classes)
        self.sizes.merge(later.sizes)

    def result(self):
        return (self.counts.dense(), self.classes.dense()["ops"].reshape(self.files, len(ROW_CLASSES)),
                self.sizes.values())


def file_table(job, ledger, per_file, patterns, top=TOP_FILES):
    """The files that lost most time (per_file: per_file_io's), with their access pattern
    (patterns: FilePatterns'); the runtime's own files are left out (runtime_files)."""
    if not job.files:
        return []
    counts, classes, sizes = patterns
    seconds, count, nbytes = per_file["seconds"], per_file["ops"], per_file["bytes"]
    lost_low, lost_high = per_file["lost_low_s"], per_file["lost_high_s"]
    order = np.lexsort((-seconds, -lost_high))
    io = io_rows(ledger)
    rows = []
    runtime = np.array([is_runtime_file(f.name) for f in job.files], bool)
    for i in order[~runtime[order]][:top]:
        if count[i] == 0:
            break
        procs = set(ledger["process"][io & (ledger["file"] == i)].tolist())
        file = job.files[i]
        rows.append({
            "name": file.name, "fs_type": file.fs_type, "mount_point": file.mount_point,
            "stripe_count": file.stripe_count, "stripe_size": file.stripe_size,
            "ops": int(count[i]), "bytes": int(nbytes[i]), "seconds": float(seconds[i]),
            "lost_low_s": float(lost_low[i]), "lost_high_s": float(lost_high[i]),
            "processes": len(procs - {-1}) if -1 not in procs else job.nprocs,
            "pattern": _pattern(job, i, {name: column[i] for name, column in counts.items()},
                                sizes["size"][sizes["file"] == i]),
            "classes": {cls: int(classes[i, code]) for code, cls in enumerate(ROW_CLASSES[:-1]) if classes[i, code]},
        })
    return rows


def _pattern(job, file, counts, sampled_sizes):
    """A file's access pattern: Darshan's consecutive and sequential shares of its reads and
    writes, from Darshan's counters when a log counted them (every op, DXT or not), else from
    its ops with offsets (none: stdio ops); its read share, median size (of its ops in the
    sample: all of them in a job of at most SAMPLE_OPS I/O ops) and share of small ops."""
    n = int(counts["ops"])
    shares, source = _darshan_pattern(job.darshan_records, file), "darshan counters"
    if shares is None and counts["known"]:
        shares = {f"{name}_share": float(counts[name] / counts["known"]) for name in ("consecutive", "sequential")}
        source = "ops"
    pattern = {"ops_with_offsets": n, **({"source": source, **shares} if shares is not None else {})}
    if n:
        pattern.update({"read_share": float(counts["reads"] / n),
                        "median_size": float(np.median(sampled_sizes)) if len(sampled_sizes) else None,
                        "small_share": float(counts["small"] / n)})
    return pattern


def _darshan_pattern(records, file):
    """Consecutive and sequential shares of a file's POSIX reads and writes as Darshan counted
    them, or None without such counters."""
    here = (records["file"] == file) & (records["layer"] == POSIX) & (records["consecutive_reads"] >= 0)
    ops = int(records["reads"][here].sum() + records["writes"][here].sum())
    if not ops:
        return None
    return {f"{kind}_share": float(records[f"{kind}_reads"][here].sum() + records[f"{kind}_writes"][here].sum()) / ops
            for kind in ("consecutive", "sequential")}


SIZE_EDGES = np.array([high for _, high in DARSHAN_SIZE_BINS[:-1]])


class SizeSums:
    """The I/O reads and writes per (Darshan size bin, direction, class): ops, POSIX ops,
    seconds, time lost; a pass."""

    def __init__(self):
        self.sums = Sums(("ops", "posix_ops", "seconds", "lost_s"), len(SIZE_BIN_LABELS) * 2 * len(ROW_CLASSES))

    def add(self, chunk):
        ops, per_op = chunk.ops, chunk.per_op
        io = per_op["is_io"] & (ops["direction"] < 2)
        which = np.searchsorted(SIZE_EDGES, ops["size"][io], side="left")
        self.sums.add((which * 2 + ops["direction"][io]) * len(ROW_CLASSES) + per_op["class"][io],
                      {"ops": 1.0, "posix_ops": ops["layer"][io] == POSIX, "seconds": ops["duration_s"][io],
                       "lost_s": per_op["lost_s"][io]})

    def merge(self, later):
        self.sums.merge(later.sums)

    def result(self):
        return {name: column.reshape(len(SIZE_BIN_LABELS), 2, len(ROW_CLASSES))
                for name, column in self.sums.dense().items()}


def size_table(job, sums):
    """Per Darshan access-size bin: the reads and writes known one by one (sums: SizeSums'), with
    their seconds, time lost and classes (all null where no op is known one by one: a
    counters-only log), and those known from counters (read_ops_counted, write_ops_counted),
    where there are such."""
    ops = sums["ops"]
    rows = []
    for b, label in enumerate(SIZE_BIN_LABELS):
        rows.append({"bin": label, "size_low": DARSHAN_SIZE_BINS[b][0], "size_high": DARSHAN_SIZE_BINS[b][1],
                     "read_ops": int(ops[b, 0].sum()), "write_ops": int(ops[b, 1].sum()),
                     "posix_ops": int(sums["posix_ops"][b].sum()), "seconds": float(sums["seconds"][b].sum()),
                     "lost_s": float(sums["lost_s"][b].sum()),
                     "classes": {cls: int(ops[b, :, code].sum()) for code, cls in enumerate(ROW_CLASSES[:-1])}})
    bins = job.size_bins
    if len(bins["ops"]):
        for row in rows:
            inside = (bins["size_low"] >= row["size_low"]) & (
                (bins["size_high"] <= row["size_high"]) if row["size_high"] >= 0 else True)
            inside &= np.isin(bins["layer"], IO_LAYERS)
            row["read_ops_counted"] = int(bins["ops"][inside & (bins["direction"] == 0)].sum())
            row["write_ops_counted"] = int(bins["ops"][inside & (bins["direction"] == 1)].sum())
    for row in rows:
        if not row["read_ops"] + row["write_ops"]:   # counters have no times per access size
            row["seconds"] = row["lost_s"] = None
    rows = [row for row in rows if row["read_ops"] + row["write_ops"] + row.get("read_ops_counted", 0) +
            row.get("write_ops_counted", 0)]
    if not ops.any():   # no op known one by one: its columns are unknown, not 0
        for row in rows:
            row.update(read_ops=None, write_ops=None, posix_ops=None, classes=None)
    return rows


class IoEnd:
    """The end of the job's last I/O op (s since the job's start; 0 without any), a pass: the
    timeline's bins are of the span it ends."""

    def __init__(self):
        self.end_s = 0.0

    def add(self, chunk):
        io = io_ops(chunk.ops)
        if io.any():
            self.end_s = max(self.end_s, float(np.max(chunk.ops["start_s"][io] + chunk.ops["duration_s"][io])))

    def merge(self, later):
        self.end_s = max(self.end_s, later.end_s)

    def result(self):
        return self.end_s


class Timeline:
    """Seconds of I/O per time bin and class (each op counted in the bin it starts in) over the
    span up to io_end_s (IoEnd's), a pass."""

    def __init__(self, io_end_s, bins=TIMELINE_BINS):
        self.bins = bins
        self.width = max(io_end_s, 1e-9) / bins
        self.sums = Sums(("ops", "seconds"), bins * len(ROW_CLASSES))

    def add(self, chunk):
        io = chunk.per_op["is_io"]
        # clipped: a fitted TSC clock can put an op a few ns before the job's start
        which = np.clip((chunk.ops["start_s"][io] / self.width).astype(np.int64), 0, self.bins - 1)
        self.sums.add(chunk.per_op["class"][io].astype(np.int64) * self.bins + which,
                      {"ops": 1.0, "seconds": chunk.ops["duration_s"][io]})

    def merge(self, later):
        self.sums.merge(later.sums)

    def result(self):
        sums = {name: column.reshape(len(ROW_CLASSES), self.bins) for name, column in self.sums.dense().items()}
        if not sums["ops"].any():
            return {"bin_s": None, "start_s": [], "seconds": {}}
        return {"bin_s": self.width, "start_s": (np.arange(self.bins) * self.width).tolist(),
                "seconds": {cls: sums["seconds"][code].tolist()
                            for code, cls in enumerate(ROW_CLASSES[:-1]) if sums["ops"][code].any()}}


class OpsInWindows:
    """The I/O ops' time lost, and per window (start, end in s since the epoch: the probe's slow
    spans) the slow ops and the time lost of the I/O ops that started in it; a pass."""

    def __init__(self, job, windows):
        self.job_start_s = job.start_epoch_s
        self.windows = np.array(windows, np.float64).reshape(-1, 2)
        self.slow_ops = np.zeros(len(self.windows), np.int64)
        self.lost_s = np.zeros(len(self.windows))
        self.total_lost_s = 0.0

    def add(self, chunk):
        io = chunk.per_op["is_io"]
        lost = chunk.per_op["lost_s"][io]
        self.total_lost_s += float(lost.sum())
        if not len(self.windows):
            return
        epoch = self.job_start_s + chunk.ops["start_s"][io]
        slow = chunk.per_op["class"][io] == ROW_CLASSES.index("slow")
        for w, (start, end) in enumerate(self.windows):
            inside = (epoch >= start) & (epoch < end)
            self.slow_ops[w] += int(np.count_nonzero(inside & slow))
            self.lost_s[w] += float(lost[inside].sum())

    def merge(self, later):
        self.slow_ops += later.slow_ops
        self.lost_s += later.lost_s
        self.total_lost_s += later.total_lost_s

    def result(self):
        return self.slow_ops, self.lost_s, self.total_lost_s


def file_system_while_running(job, probe_db):
    """The probe's slowdown over the job's window (ioassess/site/probe/during_job.py), without
    the job's own ops in its slow spans: OpsInWindows counts them over the windows it names,
    with_job_ops puts them in."""
    return file_system_during_job(probe_db, job.start_epoch_s, job.end_epoch_s,
                                  [mount for mount, _ in job.mounts] + [f.mount_point for f in job.files],
                                  [f.name for f in job.files if not f.mount_point])


class OpSamples:
    """Uniform samples of the ops (report/passes.py, Sample) for what is computed from a sample:
    the slowdowns of the modelled ops, per op kind for the tail analysis and of all kinds over
    time, and the I/O reads and writes for the scatter plot; a pass."""

    def __init__(self):
        columns = {"start_s": np.float64, "duration_s": np.float64, "cached_typical_s": np.float64}
        self.slowdowns = [Sample(SAMPLE_OPS, columns) for _ in DIRECTIONS[:2]]
        self.scatter = Sample(SCATTER_POINTS, {"size": np.int64, "duration_s": np.float64, "class": np.int8,
                                               "direction": np.uint8})

    def add(self, chunk):
        ops, per_op = chunk.ops, chunk.per_op
        for d, sample in enumerate(self.slowdowns):
            sample.add(chunk, per_op["modelled"] & (ops["direction"] == d),
                       {"start_s": ops["start_s"], "duration_s": ops["duration_s"],
                        "cached_typical_s": per_op["cached_typical_s"]})
        self.scatter.add(chunk, per_op["is_io"] & (ops["direction"] < 2),
                         {"size": ops["size"], "duration_s": ops["duration_s"], "class": per_op["class"],
                          "direction": ops["direction"]})

    def merge(self, later):
        for mine, theirs in zip(self.slowdowns + [self.scatter], later.slowdowns + [later.scatter]):
            mine.merge(theirs)

    def result(self):
        """{"slowdowns": per direction (read, write) the (sampled columns, ops offered),
        "scatter": the same of the scatter's sample}."""
        return {"slowdowns": [(sample.values(), sample.offered) for sample in self.slowdowns],
                "scatter": (self.scatter.values(), self.scatter.offered)}


def slowdown_timeline(samples):
    """Per time interval (about 50 over the job, at least 1 s) and op kind: median, p90, p99 of
    each op's duration over its cached typical duration (Kunkel & Betke's slowdown), from the
    modelled reads' and writes' samples (OpSamples)."""
    values = [sampled for sampled, _ in samples["slowdowns"]]
    kinds = np.concatenate([np.full(len(v["start_s"]), d, np.uint8) for d, v in enumerate(values)])
    start, duration, cached = (np.concatenate([v[name] for v in values])
                               for name in ("start_s", "duration_s", "cached_typical_s"))
    slowdown = slowdown_by_interval(start, duration, cached, kinds).as_dict()
    # kinds went in as direction codes (small integers sort fast; 10^7 strings would not)
    slowdown["kinds"] = {DIRECTIONS[int(code)]: values for code, values in slowdown["kinds"].items()}
    slowdown.update(ops=int(sum(offered for _, offered in samples["slowdowns"])), sampled=int(len(start)))
    return slowdown


def tail_statistics(samples):
    """Per op kind: the tail analysis (models/tails.py) of the slowdowns (duration over the
    cached typical duration of the op's size) of a sample of its modelled ops (OpSamples), which
    puts ops of all sizes on one scale."""
    result = {}
    for direction, (values, offered) in zip(DIRECTIONS[:2], samples["slowdowns"]):
        if offered < TAIL_MIN_OPS:
            continue
        from ioassess.models.tails import analyse_durations  # imported only when there is a tail to fit
        slowdowns = values["duration_s"] / values["cached_typical_s"]
        result[direction] = {"ops": int(offered), "sampled": int(len(slowdowns)),
                             **analyse_durations(slowdowns).as_dict()}
    return result


def scatter_sample(samples):
    """Up to SCATTER_POINTS (size, duration, class) of the I/O reads and writes, a uniform
    sample (OpSamples)."""
    values, offered = samples["scatter"]
    return {"ops_total": int(offered),
            "size": values["size"].tolist(), "duration_s": values["duration_s"].tolist(),
            "class": [ROW_CLASSES[c] for c in values["class"].tolist()],
            "direction": [DIRECTIONS[d] for d in values["direction"].tolist()]}


def model_lines(model, sizes=tuple(2 ** np.arange(0, 25))):
    """The model's lines at powers of two, for the plots: {op: {class/layout: {bound, typical}}}."""
    size = np.array(sizes, float)
    lines = {}
    for (op, cls, layout), line in sorted(model.lines.items()):
        lines.setdefault(op, {})[f"{cls} {layout}"] = {
            "bound_s": line.bound.predict(size).tolist(),
            "typical_s": line.typical.predict(size).tolist() if line.typical is not None else None}
    return {"size": size.tolist(), "lines": lines}


class AsynchronousIO:
    """The asynchronous requests (flag ASYNC: libaio, POSIX AIO) among the I/O ops: ops, bytes
    and seconds by interface, and the processes that made them; a pass."""

    def __init__(self, job):
        self.sums = Sums(("ops", "bytes", "seconds"), 2)
        self.processes = np.zeros(len(job.processes), bool)

    def add(self, chunk):
        flags = op_column(chunk.ops, "flags")
        asynchronous = chunk.per_op["is_io"] & (flags & Flag.ASYNC != 0)
        self.sums.add((flags[asynchronous] & Flag.POSIX_AIO != 0).astype(np.int64),
                      {"ops": 1.0, "bytes": np.maximum(chunk.ops["result"][asynchronous], 0).astype(np.float64),
                       "seconds": chunk.ops["duration_s"][asynchronous]})
        self.processes[chunk.ops["process"][asynchronous]] = True

    def merge(self, later):
        self.sums.merge(later.sums)
        self.processes |= later.processes

    def result(self):
        """How many asynchronous requests, their bytes and seconds, by interface. Their seconds
        run from submission to completion and requests in flight together overlap, so summed
        they may exceed the time waited. None without any."""
        sums = self.sums.dense()
        if not sums["ops"].any():
            return None
        return {**_amounts({name: [column.sum()] for name, column in sums.items()}),
                "processes": int(self.processes.sum()), "libaio": _amounts(sums, 0), "posix_aio": _amounts(sums, 1)}


TOP_MAPPED_FILES = 20


def mapped_files(job):
    """The files the processes mapped into memory (Job.mapped_files, successful mappings): how
    many mappings of how many files and bytes, and per file (the TOP_MAPPED_FILES most mapped
    bytes) its mappings, bytes, processes, protection ("r", "w", "x" of any mapping) and whether
    any was shared. The page faults of mapped I/O are not timed. None without mappings."""
    rows = job.mapped_files
    ok = rows["result"] >= 0
    if not ok.any():
        return None
    files = rows["file"][ok]
    per_file = np.bincount(files, rows["bytes"][ok].astype(float), len(job.files))
    listed = []
    for i in np.argsort(-per_file, kind="stable")[:TOP_MAPPED_FILES].tolist():
        if not per_file[i]:
            break
        here = files == i
        protection = "".join(letter for letter, name in (("r", "read"), ("w", "write"), ("x", "exec"))
                             if rows[name][ok][here].any())
        listed.append({"name": job.files[i].name, "mappings": int(here.sum()), "bytes": int(per_file[i]),
                       "processes": len(distinct(rows["process"][ok][here])), "protection": protection,
                       "shared": bool(rows["shared"][ok][here].any())})
    return {"mappings": int(ok.sum()), "bytes": int(rows["bytes"][ok].sum()), "files": len(distinct(files)),
            "failed": int(np.count_nonzero(~ok)), "processes": len(distinct(rows["process"][ok])),
            "top": listed}


def io_uring_instances(job):
    """The io_uring instances the recorder saw: how many, in how many processes; their I/O is
    not timed. None without any."""
    counts = [p.io_uring_instances for p in job.processes]
    if not any(counts):
        return None
    return {"instances": int(sum(counts)), "processes": sum(1 for n in counts if n)}
