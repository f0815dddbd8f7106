"""The assessment of a Job under a cause model: plain, JSON-serialisable data (a dict) that the
HTML report, assessment.json and the tests all read. docs/assessment.md lists every field.

Ops known one by one (recorder traces, Darshan DXT) are classified by the model and each gets
its time lost vs cached: duration minus the cached typical duration of its size. I/O known only
in aggregate (Darshan counters, the recorder's summary table past its record cap) gets an
estimate: its time if cached lies between the cached typical times at the two edges of its
access-size bins, so its time lost is an interval.

Where the recorder sampled the page cache before an op, the kernel's word overrides the model
where it settles the cause (report/ground_truth.py): an op served from memory that took as
long as storage I/O is a stall, a write that waited for new pages an allocation, neither blamed
on storage.

Only the POSIX and STDIO layers count as I/O time (MPI-IO time contains the POSIX time under
it: the layers are shown side by side, never added); the POSIX reads and writes made inside
collective MPI-IO calls are the aggregators' work. Memory layout is unknown without buffer
addresses and taken as rnd (models/causes.py).
"""
import collections
import datetime
import math

import numpy as np

from ioassess.site.iomodels import io_model_name, place_on_grid
from ioassess.inputs.job import DARSHAN_SIZE_BINS, DIRECTIONS, LAYERS, Flag, op_column
from ioassess.models.causes import (APPENDED, CLASSES, FLUSHED, LAYOUT_UNKNOWN, bound_seconds, cached_typical_seconds,
                                    classify, memory_layout_codes)
from ioassess.models.slowdown import slowdown_by_interval
from ioassess.site.probe.during_job import file_system_during_job

from .ground_truth import (NEW_PAGES, NOT_SAMPLED, PAST_END, agreement, inferred_verdicts, kernel_verdicts,
                           overridden_classes)

FORMAT = "ioassess-assessment"
FORMAT_VERSION = 1
# Class names in the tables: the model's classes, the causes only the kernel's samples tell,
# then what no model covers.
STALL = "stall"                    # the kernel saw the pages cached, yet it took as long as storage I/O
ALLOCATION = "allocation"          # a write into new pages that took as long as storage I/O
NOT_MODELLED = "not modelled"      # sync ops, failed calls, I/O of sizes/ops the model has no line for
ESTIMATED = "counters (estimate)"  # I/O known only in aggregate
ROW_CLASSES = CLASSES + (STALL, ALLOCATION, NOT_MODELLED, ESTIMATED)
CLASS_CODES = {cls: code for code, cls in enumerate(ROW_CLASSES)}
# Where time lost in each class comes from (the headline's "why").
CAUSES = {"memcpy": "memory", "cached": "memory", "uncached": "storage", "slow": "storage", STALL: "stall",
          ALLOCATION: "allocation"}
IO_LAYERS = (LAYERS.index("posix"), LAYERS.index("stdio"))
POSIX, MPIIO = LAYERS.index("posix"), LAYERS.index("mpiio")
WRITE, SYNC = DIRECTIONS.index("write"), DIRECTIONS.index("sync")
MiB = 1 << 20
TOP_FILES = 20
TIMELINE_BINS = 100
SCATTER_POINTS = 4000
# The slowdown quantiles and the tail analysis take an even sample of this many ops at most:
# their cost grows with n, and a million points (20 000 per interval) pin a p99 or a tail fit
# down as well as the data allow.
SAMPLE_OPS = 1_000_000
# Fewer modelled ops than this make no tail worth fitting.
TAIL_MIN_OPS = 100
SIZE_BIN_LABELS = ("0-100 B", "100 B-1 KiB", "1-10 KiB", "10-100 KiB", "100 KiB-1 MiB", "1-4 MiB", "4-10 MiB",
                   "10-100 MiB", "100 MiB-1 GiB", "1 GiB+")
# Recommendation thresholds (docs/assessment.md says why).
LOST_SHARE_WORTH_A_LOOK = 0.05      # of the runtime
SMALL_OP_BYTES = 4096
SMALL_OPS_SHARE = 0.5
# The per-rank plot draws at most this many bars: beyond, each bar is a bin of consecutive ranks.
RANK_PLOT_BINS = 200
# The ranks that lost most, named in the per-process view.
MOST_LOST_NAMED = 3


def assess(job, model, model_source="", site_grid=None, model_choice=None, probe_db=None):
    """The assessment (a dict) of a Job under a CauseModel. site_grid: None, or the site's
    I/O-model grid to place the job on, {"path", "grid"} (a grid of ioassess.site.iomodels.load_grid),
    or {"path", "problem"} for one that could not be used. model_choice: how the model was
    chosen and why (report.model_choice), or None. probe_db: the file-system probe's store, or
    None."""
    per_op = classify_ops(job, model)
    per_total = estimate_totals(job, model)
    per_process = process_io(job, per_op, per_total)
    shared = shared_record_ranks(job, per_total)
    aggregation = aggregator_work(job)
    processes = process_table(job, per_process, shared, aggregation)
    headline = headline_numbers(job, per_op, per_total, processes)
    cell = {**io_model_cell(job), **write_throughput(job)}
    assessment = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "job": job_facts(job, cell),
        "model": {"name": model.name, "description": model.description, "source": model_source,
                  "provenance": model.provenance, "choice": model_choice},
        "tier": tier_of(job),
        "headline": headline,
        "kernel": kernel_word(job, per_op),
        "classes": class_table(job, per_op, per_total),
        "flushes": flushes(job, model),
        "layers": layer_table(job),
        "collective_io": collective_io(job, aggregation),
        "top_files": file_table(job, per_op, per_total),
        "sizes": size_table(job, per_op, per_total),
        "timeline": timeline(job, per_op),
        "slowdown": slowdown_timeline(job, per_op),
        "tails": tail_statistics(job, per_op),
        "processes": processes,
        "per_process": per_process_view(job, per_process, per_total, shared),
        "io_model": cell,
        "site_grid": site_grid_placement(cell, site_grid),
        "scatter": scatter_sample(job, per_op),
        "model_lines": model_lines(model),
        "file_system": file_system_while_running(job, per_op, probe_db),
    }
    assessment["recommendations"] = recommendations(assessment)
    return assessment


# ---- per op ----

def classify_ops(job, model):
    """Per op of Job.ops: class code (index into ROW_CLASSES) with the kernel's word applied and
    the model's own (model_class), the kernel's verdict of its sample (kernel) and the verdict
    it is judged by (judged: its own or its file's, report/ground_truth.py), cached typical
    duration (NaN where not modelled; the appended line's for writes into new pages), time lost
    (s), whether it counts as I/O time (POSIX/STDIO layer), and the indices of the ops the model
    covers."""
    ops = job.ops
    is_io = np.isin(ops["layer"], IO_LAYERS)
    modelled = is_io & (ops["direction"] < 2) & (ops["result"] >= 0)
    if np.any(ops["buffer"] != 0):
        layouts = memory_layout_codes(ops["buffer"], ops["tid"], ops["process"])
    else:
        layouts = np.full(len(ops["size"]), LAYOUT_UNKNOWN, np.int8)
    directions = np.where(modelled, ops["direction"], np.uint8(2))
    del modelled
    codes = classify(model, directions, ops["size"], ops["duration_s"], layouts).astype(np.int8)
    cached = cached_typical_seconds(model, directions, ops["size"], layouts)
    not_modelled = (codes < 0) | np.isnan(cached)
    codes[not_modelled] = CLASS_CODES[NOT_MODELLED]
    covered = np.flatnonzero(is_io & ~not_modelled & (cached > 0))
    # O_DIRECT ops went to the device whatever the page cache held: storage however fast, and
    # the page cache's state (of the file's buffered ops) says nothing of them.
    direct = (op_column(ops, "flags") & Flag.DIRECT) != 0
    codes[direct & np.isin(codes, [CLASS_CODES["memcpy"], CLASS_CODES["cached"]])] = CLASS_CODES["uncached"]
    verdict = kernel_verdicts(ops)
    verdict[direct] = NOT_SAMPLED
    judged = inferred_verdicts(ops, verdict)
    judged[direct] = NOT_SAMPLED
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
    del layouts, directions
    lost = np.maximum(ops["duration_s"] - cached, 0.0)
    lost[not_modelled] = 0.0
    return {"class": classes, "model_class": codes, "kernel": verdict, "judged": judged, "cached_typical_s": cached,
            "lost_s": lost, "is_io": is_io, "modelled": covered, "appended": appended}


# ---- aggregates (estimates) ----

def estimate_totals(job, model):
    """Per row of Job.totals: time if cached and time lost as (low, high) intervals. The cached
    typical time of each size bin's ops lies between the line at the bin's two edges; rows
    without size bins use their mean op size (bytes / ops) for both edges."""
    totals, bins = job.totals, job.size_bins
    rows = len(totals["ops"])
    cached_low, cached_high = np.zeros(rows), np.zeros(rows)
    if rows:
        keys = ("process", "file", "layer", "direction")
        row_of = {tuple(int(totals[k][i]) for k in keys): i for i in range(rows)}
        binned = np.zeros(rows, bool)
        for j in range(len(bins["ops"])):
            i = row_of.get(tuple(int(bins[k][j]) for k in keys))
            if i is None or bins["direction"][j] >= 2:
                continue
            binned[i] = True
            low, high = _bin_edges(bins["size_low"][j], bins["size_high"][j], totals["bytes"][i], totals["ops"][i])
            edge_times = _cached_seconds(model, int(bins["direction"][j]), np.array([low, high]))
            cached_low[i] += bins["ops"][j] * edge_times[0]
            cached_high[i] += bins["ops"][j] * edge_times[1]
        for i in np.flatnonzero(~binned & (totals["direction"] < 2) & (totals["ops"] > 0)):
            mean_size = totals["bytes"][i] / totals["ops"][i]
            time = totals["ops"][i] * _cached_seconds(model, int(totals["direction"][i]), np.array([mean_size]))[0]
            cached_low[i] = cached_high[i] = time
        unmodelled = totals["direction"] >= 2
        cached_low[unmodelled] = cached_high[unmodelled] = totals["seconds"][unmodelled]
    seconds = totals["seconds"]
    if_cached_low, if_cached_high = np.minimum(cached_low, seconds), np.minimum(cached_high, seconds)
    return {"if_cached_low_s": if_cached_low, "if_cached_high_s": if_cached_high,
            "lost_low_s": seconds - if_cached_high, "lost_high_s": seconds - if_cached_low,
            "is_io": np.isin(totals["layer"], IO_LAYERS)}


def _bin_edges(size_low, size_high, row_bytes, row_ops):
    low = max(int(size_low), 1)
    high = int(size_high) if size_high >= 0 else max(low, int(row_bytes // max(row_ops, 1)))
    return low, max(high, low)


def _cached_seconds(model, direction, sizes):
    layouts = np.full(len(sizes), LAYOUT_UNKNOWN, np.int8)
    seconds = cached_typical_seconds(model, np.full(len(sizes), direction), sizes, layouts)
    return np.nan_to_num(seconds, nan=0.0)


# ---- tables ----

def tier_of(job):
    has_ops, has_totals = len(job.ops["size"]) > 0, len(job.totals["ops"]) > 0
    return "ops" if has_ops and not has_totals else "counters" if has_totals and not has_ops else \
        "mixed" if has_ops else "none"


def job_facts(job, cell):
    """The job's facts; processes with I/O are the I/O-model cell's processes doing I/O (every
    rank when a shared-file record moved data), launchers are the processes of no rank in a job
    whose other processes have ranks (mpiexec and its proxies)."""
    launchers = set(launcher_processes(job))
    hosts = collections.Counter(p.hostname for i, p in enumerate(job.processes) if p.hostname and i not in launchers)
    unfinished = [p for p in job.processes if p.source == "trace" and p.end_reason == "running/killed"]
    return {
        "job_id": job.job_id, "exe": job.exe, "cmdline": job.cmdline, "user": job.user,
        "start": _iso(job.start_epoch_s), "end": _iso(job.end_epoch_s),
        "runtime_s": _finite(job.runtime_s), "nprocs": job.nprocs,
        "processes_recorded": len(job.processes),
        "processes_with_io": cell["processes_doing_io"],
        "launchers": len(launchers),
        "hosts": [{"hostname": host, "processes": count} for host, count in sorted(hosts.items())],
        "unfinished_processes": [{"rank": p.rank, "pid": _pid(p.pid), "hostname": p.hostname} for p in unfinished],
        "files": len(job.files),
        "mounts": [{"mount_point": m, "fs_type": t} for m, t in job.mounts],
        "inputs": [{"path": i.path, "kind": i.kind, "tiers": list(i.tiers), "notes": list(i.notes)}
                   for i in job.inputs],
        "notes": list(job.notes),
    }


def headline_numbers(job, per_op, per_total, processes):
    io = per_op["is_io"]
    seconds = job.ops["duration_s"]
    io_s = float(seconds[io].sum() + job.totals["seconds"][per_total["is_io"]].sum())
    lost_exact = float(per_op["lost_s"][io].sum())
    lost_low = lost_exact + float(per_total["lost_low_s"][per_total["is_io"]].sum())
    lost_high = lost_exact + float(per_total["lost_high_s"][per_total["is_io"]].sum())
    lost_by_cause = collections.Counter()
    for code, cls in enumerate(ROW_CLASSES):
        if cls in CAUSES:
            lost_by_cause[CAUSES[cls]] += float(per_op["lost_s"][io & (per_op["class"] == code)].sum())
    runtime = job.runtime_s
    critical = max(processes, key=lambda p: p["lost_high_s"], default=None)
    slowest = max(processes, key=lambda p: p["io_s"], default=None)
    return {
        "io_s": io_s,
        "if_cached_low_s": io_s - lost_high, "if_cached_high_s": io_s - lost_low,
        "lost_low_s": lost_low, "lost_high_s": lost_high,
        "estimate": bool(per_total["is_io"].any()),
        "lost_share_of_io": _ratio((lost_low + lost_high) / 2, io_s),
        "lost_by_cause": {cause: lost_by_cause[cause] for cause in ("storage", "stall", "allocation", "memory")},
        "runtime_s": _finite(runtime),
        "io_share_of_runtime": _ratio(io_s, runtime * max(job.nprocs, 1)) if math.isfinite(runtime) else None,
        "lost_share_of_runtime": _ratio(critical["lost_high_s"], runtime) if critical and math.isfinite(runtime)
        else None,
        "critical_path": critical,
        "most_io_process": slowest,
    }


def kernel_word(job, per_op):
    """The page-cache samples: how many ops have one, how many were judged by their file's, and
    how the model's classes agree with the kernel (report/ground_truth.py)."""
    refused = [p for p in job.processes if p.source == "trace" and p.pagecache == "unavailable"]
    turned_off = [p for p in job.processes if p.source == "trace" and p.pagecache == "off"]
    judged_only = (per_op["judged"] >= 0) & (per_op["kernel"] < 0) & per_op["is_io"]
    changed = per_op["class"] != per_op["model_class"]
    return {**agreement(per_op["model_class"], per_op["kernel"], job.ops["direction"], per_op["modelled"], CLASS_CODES),
            "inferred_ops": int(np.count_nonzero(judged_only)),
            "appended_ops": int(np.count_nonzero(per_op["appended"] & per_op["is_io"])),
            "reclassified_ops": int(np.count_nonzero(changed & per_op["is_io"])),
            "processes_refused": len(refused), "processes_turned_off": len(turned_off)}


def class_table(job, per_op, per_total):
    """Rows per (class, direction): ops, bytes, seconds, time lost (low, high)."""
    ops, io = job.ops, per_op["is_io"]
    rows = []
    for code, cls in enumerate(ROW_CLASSES[:-1]):
        for d, direction in enumerate(DIRECTIONS):
            member = io & (per_op["class"] == code) & (ops["direction"] == d)
            if member.any():
                lost = float(per_op["lost_s"][member].sum())
                rows.append(_row(cls, direction, int(member.sum()), int(np.maximum(ops["result"][member], 0).sum()),
                                 float(ops["duration_s"][member].sum()), lost, lost))
    totals = job.totals
    for d, direction in enumerate(DIRECTIONS):
        member = per_total["is_io"] & (totals["direction"] == d)
        if member.any():
            rows.append(_row(ESTIMATED, direction, int(totals["ops"][member].sum()), int(totals["bytes"][member].sum()),
                             float(totals["seconds"][member].sum()), float(per_total["lost_low_s"][member].sum()),
                             float(per_total["lost_high_s"][member].sum())))
    return rows


def _row(cls, direction, count, nbytes, seconds, lost_low, lost_high):
    return {"class": cls, "direction": direction, "ops": count, "bytes": nbytes, "seconds": seconds,
            "lost_low_s": lost_low, "lost_high_s": lost_high}


def flushes(job, model):
    """The POSIX syncs (fsync, fdatasync) that succeeded, against the model's flushed line at the
    bytes each had at most to write back: what its process wrote to the file since its previous
    sync of it (the kernel may have written some back before). None without syncs; the model
    figures None without a flushed line."""
    ops = job.ops
    posix = ops["layer"] == POSIX
    is_sync = posix & (ops["direction"] == SYNC) & (ops["result"] >= 0)
    if not is_sync.any():
        return None
    chosen = np.flatnonzero(is_sync | (posix & (ops["direction"] == WRITE) & (ops["result"] > 0)))
    order = chosen[np.lexsort((ops["start_s"][chosen], ops["file"][chosen], ops["process"][chosen]))]
    # A write wrote at most what it asked for (a trace's result is the job's word), in float64 so
    # that no sum of forged counts wraps round.
    written = np.where(is_sync[order], 0.0,
                       np.clip(ops["result"][order], 0, ops["size"][order]).astype(np.float64))
    before = np.cumsum(written) - written           # bytes written before each op, over all groups
    group = ops["process"][order].astype(np.int64) * (int(ops["file"].max()) + 1) + ops["file"][order]
    first = np.r_[True, group[1:] != group[:-1]]
    group_start = np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
    at_sync = np.flatnonzero(is_sync[order])
    previous = np.r_[-1, at_sync[:-1]]
    same_group = (previous >= 0) & (group[np.maximum(previous, 0)] == group[at_sync])
    since = np.where(same_group, before[np.maximum(previous, 0)], before[group_start[at_sync]])
    dirty = np.maximum(before[at_sync] - since, 0.0)
    seconds = ops["duration_s"][order][at_sync]
    result = {"syncs": len(at_sync), "seconds": float(seconds.sum()), "bytes_written_before": int(dirty.sum()),
              "files": len(np.unique(ops["file"][order][at_sync])),
              **dict.fromkeys(("typical_s", "fixed_s", "beyond_bound_s", "beyond_bound_syncs"))}
    line = model.lines.get(("sync", FLUSHED, "rnd")) or model.lines.get(("sync", FLUSHED, "off0"))
    if line is not None and line.typical is not None:
        beyond = np.maximum(seconds - line.bound.predict(dirty), 0.0)
        result.update(typical_s=float(line.typical.predict(dirty).sum()),
                      fixed_s=float(len(at_sync) * line.typical.predict(0.0)),
                      beyond_bound_s=float(beyond.sum()), beyond_bound_syncs=int(np.count_nonzero(beyond)))
    return result


def layer_table(job):
    """Per direction, the layers side by side: ops, bytes and seconds at each layer (MPI-IO time
    contains the POSIX time under it), and per layer the part of the ops known one by one that
    carries each flag (MPI-IO: collective, nonblocking; POSIX: under MPI-IO, under collective
    MPI-IO, i.e. aggregator work). A layer without ops in a direction is null."""
    ops, totals = job.ops, job.totals
    flags = op_column(ops, "flags")
    rows = []
    for d, direction in enumerate(DIRECTIONS):
        row = {"direction": direction}
        for layer_code, layer in enumerate(LAYERS):
            member = (ops["layer"] == layer_code) & (ops["direction"] == d)
            counted = (totals["layer"] == layer_code) & (totals["direction"] == d)
            if not (member.any() or counted.any()):
                row[layer] = None
                continue
            row[layer] = _amounts(ops, member, totals["ops"][counted].sum(), totals["bytes"][counted].sum(),
                                  totals["seconds"][counted].sum())
            row[layer]["flagged"] = {flag.name.lower(): _amounts(ops, member & (flags & flag != 0))
                                     for flag in Flag if np.any(flags[member] & flag)}
            row[layer]["collective_ops_counted"] = _collective_counted(job, layer_code, direction)
        if any(row[layer] for layer in LAYERS):
            rows.append(row)
    return rows


def _collective_counted(job, layer_code, direction):
    """Collective calls of a layer and direction Darshan counted (MPIIO_COLL_READS/WRITES), or
    None where no Darshan log counts them."""
    if direction == "sync":
        return None
    records = job.darshan_records
    counted = records[f"collective_{direction}s"][records["layer"] == layer_code]
    counted = counted[counted >= 0]
    return int(counted.sum()) if len(counted) else None


def _amounts(ops, member, counted_ops=0, counted_bytes=0, counted_seconds=0.0):
    """Ops, bytes moved and seconds of the ops selected by member, plus counted aggregates."""
    return {"ops": int(member.sum() + counted_ops),
            "bytes": int(np.maximum(ops["result"][member], 0).sum() + counted_bytes),
            "seconds": float(ops["duration_s"][member].sum() + counted_seconds)}


def aggregator_work(job):
    """Per process (index into Job.processes): the `ops`, `bytes` and `seconds` of its POSIX
    reads and writes made inside collective MPI-IO calls, the aggregators' work."""
    ops, n = job.ops, len(job.processes)
    under = (ops["layer"] == POSIX) & (op_column(ops, "flags") & Flag.UNDER_COLLECTIVE != 0) & (ops["direction"] < 2)
    process = ops["process"][under]
    return {"ops": np.bincount(process, minlength=n),
            "bytes": np.bincount(process, np.maximum(ops["result"][under], 0), n),
            "seconds": np.bincount(process, ops["duration_s"][under], n)}


def collective_io(job, aggregation):
    """Collective MPI-IO reads and writes and the POSIX work under them (aggregator_work), or
    None without any. With collective buffering a few processes (the aggregators) gather the
    others' data and do the file system I/O for all: the POSIX reads and writes made inside
    collective calls, per process. The rest of the time in collective calls is data exchange
    and waiting."""
    ops = job.ops
    collective = (ops["layer"] == MPIIO) & (op_column(ops, "flags") & Flag.COLLECTIVE != 0) & (ops["direction"] < 2)
    if not collective.any():
        return None
    collective_s = float(ops["duration_s"][collective].sum())
    aggregator_s, aggregator_bytes, aggregator_ops = aggregation["seconds"], aggregation["bytes"], aggregation["ops"]
    aggregators = [{"rank": job.processes[i].rank, "pid": _pid(job.processes[i].pid),
                    "hostname": job.processes[i].hostname, "ops": int(aggregator_ops[i]),
                    "bytes": int(aggregator_bytes[i]), "seconds": float(aggregator_s[i])}
                   for i in np.flatnonzero(aggregator_ops)]
    aggregators.sort(key=lambda a: (a["rank"], a["pid"] or 0))
    return {
        "processes": len(np.unique(ops["process"][collective])),
        "collective_ops": int(collective.sum()),
        "collective_s": collective_s,
        "aggregator_s": float(aggregator_s.sum()),
        "aggregator_bytes": int(aggregator_bytes.sum()),
        "aggregator_share_of_collective": _ratio(float(aggregator_s.sum()), collective_s),
        "aggregators": aggregators,
        "partial": bool(np.any(job.totals["layer"] == POSIX)),
    }


def file_table(job, per_op, per_total, top=TOP_FILES):
    """The files that lost most time, with their access pattern."""
    nfiles = len(job.files)
    if not nfiles:
        return []
    ops, io = job.ops, per_op["is_io"]
    f, tf_ = ops["file"][io], job.totals["file"][per_total["is_io"]]
    tio = per_total["is_io"]

    def per_file(values_ops, values_totals):
        return np.bincount(f, values_ops, nfiles) + np.bincount(tf_, values_totals, nfiles)

    seconds = per_file(ops["duration_s"][io], job.totals["seconds"][tio])
    lost_low = per_file(per_op["lost_s"][io], per_total["lost_low_s"][tio])
    lost_high = per_file(per_op["lost_s"][io], per_total["lost_high_s"][tio])
    count = per_file(np.ones(io.sum()), job.totals["ops"][tio].astype(float))
    nbytes = per_file(np.maximum(ops["result"][io], 0).astype(float), job.totals["bytes"][tio].astype(float))
    after_previous = access_pattern(ops)
    order = np.lexsort((-seconds, -lost_high))
    rows = []
    for i in order[:top]:
        if count[i] == 0:
            break
        member = io & (ops["file"] == i)
        procs = set(ops["process"][member].tolist()) | \
            set(job.totals["process"][tio & (job.totals["file"] == i)].tolist())
        file = job.files[i]
        rows.append({
            "name": file.name, "fs_type": file.fs_type, "mount_point": file.mount_point,
            "stripe_count": file.stripe_count, "stripe_size": file.stripe_size,
            "ops": int(count[i]), "bytes": int(nbytes[i]), "seconds": float(seconds[i]),
            "lost_low_s": float(lost_low[i]), "lost_high_s": float(lost_high[i]),
            "processes": len(procs - {-1}) if -1 not in procs else job.nprocs,
            "pattern": _pattern(job, i, ops, member, after_previous),
            "classes": {cls: int(np.count_nonzero(per_op["class"][member] == code))
                        for code, cls in enumerate(ROW_CLASSES[:-1]) if np.any(per_op["class"][member] == code)},
        })
    return rows


def access_pattern(ops):
    """Per op, Darshan's two counts (docs/assessment.md): `consecutive`, it starts where the
    same process's previous op of the same layer and direction on the same file ended;
    `sequential`, it starts there or past it. Like Darshan, the first op compares with an op
    ending at byte 1."""
    keys = (ops["direction"], ops["layer"], ops["file"], ops["process"])
    order = np.lexsort((ops["start_s"],) + keys)
    offset, end = ops["offset"][order], ops["offset"][order] + np.maximum(ops["result"][order], 0)
    previous_end = np.ones(len(order), np.int64)
    same = np.all([key[order][1:] == key[order][:-1] for key in keys], axis=0)
    previous_end[1:][same] = end[:-1][same]
    known = offset >= 0
    consecutive, sequential = np.zeros(len(order), bool), np.zeros(len(order), bool)
    consecutive[order] = known & (offset == previous_end)
    sequential[order] = known & (offset >= previous_end)
    return {"consecutive": consecutive, "sequential": sequential}


def _pattern(job, file, ops, member, after_previous):
    """A file's access pattern: Darshan's consecutive and sequential shares of its reads and
    writes, from Darshan's counters when a log counted them (every op, DXT or not), else from
    its ops with offsets; its read share, median size and share of small ops."""
    n = int(member.sum())
    shares, source = _darshan_pattern(job.darshan_records, file), "darshan counters"
    if shares is None and n:
        shares = {f"{name}_share": float(after_previous[name][member].mean()) for name in ("consecutive", "sequential")}
        source = "ops"
    if shares is None:
        return {"ops_with_offsets": 0}
    pattern = {"ops_with_offsets": n, "source": source, **shares}
    if n:
        sizes = ops["size"][member]
        pattern.update({"read_share": float((ops["direction"][member] == 0).mean()),
                        "median_size": float(np.median(sizes)), "small_share": float(np.mean(sizes < SMALL_OP_BYTES))})
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


def size_table(job, per_op, per_total):
    """Per Darshan access-size bin: read/write ops, seconds, time lost (both tiers alike)."""
    edges = np.array([high for _, high in DARSHAN_SIZE_BINS[:-1]])
    ops, io = job.ops, per_op["is_io"] & (job.ops["direction"] < 2)
    which = np.searchsorted(edges, ops["size"][io], side="left")
    rows = []
    for b, label in enumerate(SIZE_BIN_LABELS):
        member = which == b
        d = ops["direction"][io][member]
        rows.append({"bin": label, "size_low": DARSHAN_SIZE_BINS[b][0], "size_high": DARSHAN_SIZE_BINS[b][1],
                     "read_ops": int(np.count_nonzero(d == 0)), "write_ops": int(np.count_nonzero(d == 1)),
                     "seconds": float(ops["duration_s"][io][member].sum()),
                     "lost_s": float(per_op["lost_s"][io][member].sum()),
                     "classes": {cls: int(np.count_nonzero(per_op["class"][io][member] == code))
                                 for code, cls in enumerate(ROW_CLASSES[:-1])}})
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
    return [row for row in rows if row["read_ops"] + row["write_ops"] + row.get("read_ops_counted", 0) +
            row.get("write_ops_counted", 0)]


def timeline(job, per_op, bins=TIMELINE_BINS):
    """Seconds of I/O per time bin and class (each op counted in the bin it starts in)."""
    io = per_op["is_io"]
    start = job.ops["start_s"][io]
    if not len(start):
        return {"bin_s": None, "start_s": [], "seconds": {}}
    span = max(float(np.max(start + job.ops["duration_s"][io])), 1e-9)
    width = span / bins
    # clipped: a fitted TSC clock can put an op a few ns before the job's start
    which = np.clip((start / width).astype(np.int64), 0, bins - 1)
    seconds = {cls: np.bincount(which[per_op["class"][io] == code],
                                job.ops["duration_s"][io][per_op["class"][io] == code], bins).tolist()
               for code, cls in enumerate(ROW_CLASSES[:-1]) if np.any(per_op["class"][io] == code)}
    return {"bin_s": width, "start_s": (np.arange(bins) * width).tolist(), "seconds": seconds}


def file_system_while_running(job, per_op, probe_db):
    """The probe's slowdown over the job's window, and the job's slow ops and lost time in the
    intervals where it was slow (ioassess/site/probe/during_job.py)."""
    io = per_op["is_io"]
    return file_system_during_job(probe_db, job.start_epoch_s, job.end_epoch_s,
                                  [mount for mount, _ in job.mounts] + [f.mount_point for f in job.files],
                                  [f.name for f in job.files if not f.mount_point], job.ops["start_s"][io],
                                  per_op["class"][io] == ROW_CLASSES.index("slow"), per_op["lost_s"][io])


def slowdown_timeline(job, per_op):
    """Per time interval (about 50 over the job, at least 1 s) and op kind: median, p90, p99 of
    each op's duration over its cached typical duration (Kunkel & Betke's slowdown)."""
    ops = _even_sample(per_op["modelled"])
    slowdown = slowdown_by_interval(job.ops["start_s"][ops], job.ops["duration_s"][ops],
                                    per_op["cached_typical_s"][ops], job.ops["direction"][ops]).as_dict()
    # kinds went in as direction codes (small integers sort fast; 10^7 strings would not)
    slowdown["kinds"] = {DIRECTIONS[int(code)]: values for code, values in slowdown["kinds"].items()}
    slowdown.update(ops=int(len(per_op["modelled"])), sampled=int(len(ops)))
    return slowdown


def _even_sample(indices, limit=SAMPLE_OPS):
    """At most `limit` of the indices, evenly spaced (the same job always gives the same sample)."""
    if len(indices) <= limit:
        return indices
    return indices[np.linspace(0, len(indices) - 1, limit).astype(np.int64)]


def tail_statistics(job, per_op):
    """Per op kind: the tail analysis (models/tails.py) of the slowdowns (duration over the
    cached typical duration of the op's size), which puts ops of all sizes on one scale."""
    ops = per_op["modelled"]
    result = {}
    for d, direction in enumerate(DIRECTIONS[:2]):
        chosen = ops[job.ops["direction"][ops] == d]
        if len(chosen) < TAIL_MIN_OPS:
            continue
        from ioassess.models.tails import analyse_durations   # scipy: imported only when there is a tail to fit
        sample = _even_sample(chosen)
        slowdowns = job.ops["duration_s"][sample] / per_op["cached_typical_s"][sample]
        result[direction] = {"ops": int(len(chosen)), "sampled": int(len(sample)),
                             **analyse_durations(slowdowns).as_dict()}
    return result


def process_io(job, per_op, per_total):
    """Per process (index into Job.processes): the `ops`, I/O time `io_s` and time lost
    (`lost_low_s`, `lost_high_s`) of its POSIX and STDIO I/O: its ops known one by one and its
    own counter rows (rows of rank -1, shared by all ranks, are no process's)."""
    n = len(job.processes)
    ops, totals = job.ops, job.totals
    io, tio = per_op["is_io"], per_total["is_io"] & (totals["process"] >= 0)
    p, tp = ops["process"][io], totals["process"][tio]
    lost = np.bincount(p, per_op["lost_s"][io], n)
    return {"ops": np.bincount(p, minlength=n) + np.bincount(tp, totals["ops"][tio], n),
            "io_s": np.bincount(p, ops["duration_s"][io], n) + np.bincount(tp, totals["seconds"][tio], n),
            "lost_low_s": lost + np.bincount(tp, per_total["lost_low_s"][tio], n),
            "lost_high_s": lost + np.bincount(tp, per_total["lost_high_s"][tio], n)}


def shared_record_ranks(job, per_total):
    """What Darshan's shared-file records (rank -1, reduced over all ranks) say of single ranks:
    per record with I/O known only from its counters, the fastest and slowest rank, their time
    on the file (reads, writes and metadata: Darshan's *_F_FASTEST/SLOWEST_RANK_TIME) and bytes,
    and the standard deviation of the time over the ranks; and per process of those ranks
    (index into Job.processes) that time and a time lost pro rata: the record's time lost times
    the rank's time over the record's summed time, at most all of it."""
    n = len(job.processes)
    per_process = {"io_s": np.zeros(n), "lost_low_s": np.zeros(n), "lost_high_s": np.zeros(n)}
    records = job.darshan_records
    totals = job.totals
    shared_rows = per_total["is_io"] & (totals["process"] < 0)
    process_of_rank = {p.rank: i for i, p in reversed(list(enumerate(job.processes))) if p.rank >= 0}
    described = []
    for r in np.flatnonzero((records["rank"] < 0) & (records["slowest_rank"] >= 0)).tolist():
        rows = shared_rows & (totals["file"] == records["file"][r]) & (totals["layer"] == records["layer"][r])
        seconds = float(totals["seconds"][rows].sum())
        if not rows.any() or seconds <= 0:
            continue
        lost_low, lost_high = float(per_total["lost_low_s"][rows].sum()), float(per_total["lost_high_s"][rows].sum())
        ranks = {}
        for end in ("slowest", "fastest"):
            rank, rank_s = int(records[f"{end}_rank"][r]), float(records[f"{end}_s"][r])
            ranks[end] = {"rank": rank, "seconds": rank_s, "bytes": int(records[f"{end}_bytes"][r])}
            process = process_of_rank.get(rank)
            if process is not None and (end == "slowest" or rank != ranks["slowest"]["rank"]):
                share = min(rank_s / seconds, 1.0)
                per_process["io_s"][process] += rank_s
                per_process["lost_low_s"][process] += share * lost_low
                per_process["lost_high_s"][process] += share * lost_high
        described.append({"file": job.files[records["file"][r]].name, "layer": LAYERS[records["layer"][r]],
                          "seconds": seconds, **ranks, "std_s": _rank_time_std(records, r)})
    described.sort(key=lambda d: -d["seconds"])
    return {"per_process": per_process, "records": described}


def _rank_time_std(records, r):
    """Standard deviation of a shared record's time over the ranks, None where Darshan did not
    compute its variance: NaN, or 0 although the fastest and slowest rank's times differ (the
    POSIX variance of PyDarshan's example.darshan)."""
    variance = float(records["variance_s"][r])
    uncomputed = variance == 0 and records["slowest_s"][r] > records["fastest_s"][r]
    return math.sqrt(variance) if math.isfinite(variance) and variance >= 0 and not uncomputed else None


def launcher_processes(job):
    """Indices of the processes of no rank in a job whose other processes have ranks: the MPI
    launcher (mpiexec) and its proxies, which are not the job's ranks."""
    if not any(p.rank >= 0 for p in job.processes):
        return []
    return [i for i, p in enumerate(job.processes) if p.rank < 0]


def _pid(pid):
    """A process id, None where unknown (Darshan does not record them)."""
    return int(pid) if pid > 0 else None


def process_table(job, per_process, shared, aggregation):
    """Per process with I/O or MPI-IO calls: I/O time and time lost, most lost first; the part
    of them from Darshan's shared records (shared_record_ranks), its MPI-IO time (None where
    MPI-IO records were reduced over the ranks: each rank's part is unknown), and its POSIX read
    and write time inside collective MPI-IO calls (aggregator work, aggregator_work:
    `aggregator` is true for a process that did any). Launchers (launcher_processes) say so."""
    n = len(job.processes)
    ops = job.ops
    mpiio, tmpiio = ops["layer"] == MPIIO, (job.totals["layer"] == MPIIO) & (job.totals["process"] >= 0)
    mpiio_s = np.bincount(ops["process"][mpiio], ops["duration_s"][mpiio], n) + \
        np.bincount(job.totals["process"][tmpiio], job.totals["seconds"][tmpiio], n)
    mpiio_count = np.bincount(ops["process"][mpiio], minlength=n) + \
        np.bincount(job.totals["process"][tmpiio], job.totals["ops"][tmpiio], n)
    mpiio_reduced = bool(np.any((job.totals["layer"] == MPIIO) & (job.totals["process"] < 0)))
    aggregator_s, aggregator = aggregation["seconds"], aggregation["ops"] > 0
    count, from_shared = per_process["ops"], shared["per_process"]
    launchers = set(launcher_processes(job))
    rows = [{"rank": proc.rank, "pid": _pid(proc.pid), "hostname": proc.hostname, "ops": int(count[i]),
             "io_s": float(per_process["io_s"][i] + from_shared["io_s"][i]),
             "lost_low_s": float(per_process["lost_low_s"][i] + from_shared["lost_low_s"][i]),
             "lost_high_s": float(per_process["lost_high_s"][i] + from_shared["lost_high_s"][i]),
             "shared_s": float(from_shared["io_s"][i]),
             "mpiio_ops": int(mpiio_count[i]), "mpiio_s": None if mpiio_reduced else float(mpiio_s[i]),
             "aggregator": bool(aggregator[i]), "aggregator_s": float(aggregator_s[i]),
             "launcher": i in launchers, "end_reason": proc.end_reason}
            for i, proc in enumerate(job.processes) if count[i] or mpiio_count[i] or from_shared["io_s"][i]]
    rows.sort(key=lambda r: (-r["lost_high_s"], -r["io_s"]))
    return rows


# ---- per rank ----

def per_process_view(job, per_process, per_total, shared):
    """How I/O time and time lost spread over the ranks of an MPI job (every rank, a rank
    without I/O counting as 0 s), or over the processes with I/O of another job: mean, median,
    the slowest and max / mean (the imbalance), the ranks that lost most, and the series of the
    per-rank plot. I/O in counter rows shared by all ranks (Darshan's rank -1 records) is no
    rank's: it is left out and said (`shared`). None for a job without I/O."""
    units = io_units(job, per_process)
    tio = per_total["is_io"] & (job.totals["process"] < 0)
    in_shared = {"ops": int(job.totals["ops"][tio].sum()), "seconds": float(job.totals["seconds"][tio].sum()),
                 "records": shared["records"]} if tio.any() else None
    if not units["io_s"].any() and in_shared is None:
        return None
    attributed = bool(units["io_s"].any())
    order = np.argsort(-units["lost_high_s"], kind="stable")[:MOST_LOST_NAMED]
    named = [i for i in order.tolist() if units["lost_high_s"][i] > 0]
    lost_total = float(units["lost_high_s"].sum())
    return {
        "unit": units["unit"],
        "count": len(units["io_s"]),
        "io": _spread(units, "io_s") if attributed else None,
        "lost": _spread(units, "lost_high_s") if attributed else None,
        "most_lost": [{**_identity(units, i), "lost_low_s": float(units["lost_low_s"][i]),
                       "lost_high_s": float(units["lost_high_s"][i])} for i in named],
        "most_lost_share": _ratio(float(units["lost_high_s"][named].sum()), lost_total) if named else None,
        "shared": in_shared,
        "plot": binned_units(units, RANK_PLOT_BINS) if attributed else None,
    }


def io_units(job, per_process):
    """The per-process arrays (process_io) summed per rank 0 … R-1 (R: the highest rank + 1, or
    the ranks of a Darshan log), or, in a job of one rank, of its processes with I/O by pid.
    `unit` says which; `rank`, `pid` and `hostname` identify each (those of the rank's process
    with the most I/O time). A rank's processes are all those the recorder gave its rank: the
    ones it started inherit it; processes outside MPI (mpiexec, the commands around it) have
    rank -1 and belong to no rank."""
    ranks = np.array([p.rank for p in job.processes], np.int64)
    pids = np.array([p.pid for p in job.processes], np.int64)
    hosts = np.array([p.hostname for p in job.processes], object)
    quantities = ("io_s", "lost_low_s", "lost_high_s")
    ranked = ranks >= 0
    from_darshan = all(i.kind == "darshan" for i in job.inputs)
    if len(np.unique(ranks[ranked])) < 2 and not from_darshan:
        chosen = np.flatnonzero(per_process["ops"] > 0)
        chosen = chosen[np.argsort(pids[chosen], kind="stable")]
        return {"unit": "process", "rank": ranks[chosen], "pid": pids[chosen], "hostname": hosts[chosen],
                **{q: per_process[q][chosen] for q in quantities}}
    count = max(int(ranks.max(initial=-1)) + 1, job.nprocs if from_darshan else 0)
    members = np.flatnonzero(ranked)
    members = members[np.lexsort((-per_process["io_s"][members], ranks[members]))]
    present, busiest_of_present = np.unique(ranks[members], return_index=True)
    busiest = members[busiest_of_present]
    pid, hostname = np.zeros(count, np.int64), np.full(count, "", object)
    pid[present], hostname[present] = pids[busiest], hosts[busiest]
    return {"unit": "rank", "rank": np.arange(count), "pid": pid, "hostname": hostname,
            **{q: np.bincount(ranks[ranked], per_process[q][ranked], count) for q in quantities}}


def _identity(units, i):
    return {"rank": int(units["rank"][i]), "pid": _pid(units["pid"][i]), "hostname": str(units["hostname"][i])}


def _spread(units, quantity):
    """Mean, median and maximum of one per-unit quantity, the unit with the maximum, max / mean."""
    values = units[quantity]
    top = int(np.argmax(values))
    mean = float(values.mean())
    return {"mean_s": mean, "median_s": float(np.median(values)),
            "max": {**_identity(units, top), "seconds": float(values[top])},
            "imbalance": _ratio(float(values[top]), mean)}


def binned_units(units, bins):
    """The per-unit I/O time and time lost (upper end) in at most `bins` bins of consecutive
    units: each bin's first unit (position), and the mean and maximum over its units."""
    n = len(units["io_s"])
    per_bin = -(-n // bins)
    starts = np.arange(0, n, per_bin)
    sizes = np.diff(np.append(starts, n))
    series = {"units": n, "units_per_bin": per_bin, "start": starts.tolist()}
    for quantity, name in (("io_s", "io_s"), ("lost_high_s", "lost_s")):
        values = units[quantity]
        series[f"{name}_mean"] = (np.add.reduceat(values, starts) / sizes).tolist()
        series[f"{name}_max"] = np.maximum.reduceat(values, starts).tolist()
    return series


def io_model_cell(job):
    """Sisneros' I/O-model cell: processes that moved data (P) and processes per file (k),
    weighted by bytes, and its name (serial, file per process, shared file, file per node,
    subset). Failed calls and 0-byte transfers do not make a process one doing I/O."""
    ops = job.ops
    io = np.isin(ops["layer"], IO_LAYERS) & (ops["direction"] < 2) & (ops["result"] > 0)
    pairs = collections.defaultdict(float)
    for proc, file, nbytes in _pair_bytes(ops["process"][io], ops["file"][io], ops["result"][io]):
        pairs[(proc, file)] += nbytes
    tio = np.isin(job.totals["layer"], IO_LAYERS) & (job.totals["direction"] < 2) & (job.totals["bytes"] > 0)
    for proc, file, nbytes in zip(job.totals["process"][tio].tolist(), job.totals["file"][tio].tolist(),
                                  job.totals["bytes"][tio].tolist()):
        pairs[(proc, file)] += nbytes
    if not pairs:
        return {"processes_doing_io": 0, "name": "no I/O"}
    shared_all = {file for (proc, file) in pairs if proc == -1}
    processes = {proc for proc, _ in pairs if proc >= 0}
    p_count = job.nprocs if shared_all else len(processes)
    per_file = collections.defaultdict(set)
    bytes_per_file = collections.defaultdict(float)
    for (proc, file), nbytes in pairs.items():
        per_file[file].add(proc)
        bytes_per_file[file] += nbytes
    k = {file: (job.nprocs if file in shared_all else len(procs)) for file, procs in per_file.items()}
    total = sum(bytes_per_file.values())
    k_weighted = sum(k[f] * b for f, b in bytes_per_file.items()) / total if total else float(np.mean(list(k.values())))
    hosts = len({job.processes[p].hostname for p in processes})
    per_node = not shared_all and hosts > 1 and _files_are_per_node(job, processes, per_file)
    return {"processes_doing_io": int(p_count), "processes_per_file": round(k_weighted, 3),
            "files": len(per_file), "hosts": hosts,
            "name": io_model_name(p_count, k_weighted, per_node)}


def _files_are_per_node(job, processes, per_file):
    """Whether every file is used by all the I/O processes of one host and by no other."""
    by_host = collections.defaultdict(set)
    for proc in processes:
        by_host[job.processes[proc].hostname].add(proc)
    return all(len({job.processes[p].hostname for p in procs}) == 1 and
               procs == by_host[job.processes[next(iter(procs))].hostname] for procs in per_file.values())


def write_throughput(job):
    """The job's own write throughput: bytes the POSIX and STDIO layers wrote (`write_bytes`),
    and, when every one of those writes is known one by one, the span from the first write's
    start to the last write's end over all processes (`write_span_s`) and bytes / span in MiB/s
    (`write_mib_per_s`); writes known only from counters have no times, so both are None then."""
    ops, totals = job.ops, job.totals
    writes = np.isin(ops["layer"], IO_LAYERS) & (ops["direction"] == WRITE) & (ops["result"] > 0)
    counted = np.isin(totals["layer"], IO_LAYERS) & (totals["direction"] == WRITE) & (totals["bytes"] > 0)
    written = int(ops["result"][writes].sum() + totals["bytes"][counted].sum())
    span = None
    if writes.any() and not counted.any():
        start = ops["start_s"][writes]
        span = float(np.max(start + ops["duration_s"][writes]) - np.min(start))
    return {"write_bytes": written, "write_span_s": span,
            "write_mib_per_s": written / MiB / span if span else None}


def site_grid_placement(cell, site_grid):
    """The job's I/O-model cell (with its write throughput) placed on the site's grid
    (ioassess.site.iomodels.place_on_grid), and the grid's measured cells; None without a grid."""
    if site_grid is None:
        return None
    if "problem" in site_grid:
        return {"path": site_grid["path"], "problem": site_grid["problem"], "placement": None, "cells": []}
    grid = site_grid["grid"]
    return {"path": site_grid["path"], "problem": None,
            "placement": place_on_grid(cell, grid, cell.get("write_mib_per_s")), "cells": measured_cells(grid)}


def measured_cells(grid):
    """Per (P, k) the grid measured, by P then k: its fastest model (the paper reduces a cell
    by its maximum) and how many models it holds."""
    models_in = collections.defaultdict(list)
    for measured in grid["cells"]:
        models_in[(measured["processes"], measured["processes_per_file"])].append(measured)
    cells = []
    for (processes, per_file), models in sorted(models_in.items()):
        fastest = max(models, key=lambda measured: measured["mib_per_s"])
        cells.append({"processes": processes, "processes_per_file": per_file, "name": fastest["name"],
                      "nodes": fastest["nodes"], "mib_per_s": fastest["mib_per_s"], "models": len(models)})
    return cells


DENSE_PAIRS = 1 << 24   # (process, file) pairs summed in a dense array up to this many, else sorted


def _pair_bytes(process, file, nbytes):
    """(process, file, bytes) per pair that moved data."""
    if not len(process):
        return []
    files = int(file.max()) + 1
    key = process.astype(np.int64) * files + file
    if (int(process.max()) + 1) * files <= DENSE_PAIRS:   # no sort of millions of keys
        summed = np.bincount(key, nbytes.astype(float))
        unique = np.flatnonzero(summed)
        summed = summed[unique]
    else:
        unique, inverse = np.unique(key, return_inverse=True)
        summed = np.bincount(inverse, nbytes.astype(float))
    return zip((unique // files).tolist(), (unique % files).tolist(), summed.tolist())


def scatter_sample(job, per_op, points=SCATTER_POINTS):
    """Up to `points` (size, duration, class) of the I/O reads and writes, evenly spaced."""
    reads_and_writes = np.flatnonzero(per_op["is_io"] & (job.ops["direction"] < 2))
    io = _even_sample(reads_and_writes, points)
    return {"ops_total": int(len(reads_and_writes)),
            "size": job.ops["size"][io].tolist(), "duration_s": job.ops["duration_s"][io].tolist(),
            "class": [ROW_CLASSES[c] for c in per_op["class"][io].tolist()],
            "direction": [DIRECTIONS[d] for d in job.ops["direction"][io].tolist()]}


def model_lines(model, sizes=tuple(2 ** np.arange(0, 25))):
    """The model's lines at powers of two, for the plots: {op: {class/layout: {bound, typical}}}."""
    size = np.array(sizes, float)
    lines = {}
    for (op, cls, layout), line in sorted(model.lines.items()):
        lines.setdefault(op, {})[f"{cls} {layout}"] = {
            "bound_s": line.bound.predict(size).tolist(),
            "typical_s": line.typical.predict(size).tolist() if line.typical is not None else None}
    return {"size": size.tolist(), "lines": lines}


# ---- recommendations ----

# Causes the kernel's samples tell apart from storage: (class, title, text).
NOT_STORAGE_FINDINGS = (
    (STALL, "Stalls, not storage",
     "These ops found their pages in the page cache (the kernel said so, or said so of every sampled op of "
     "their file), yet took as long as storage I/O: the process waited for a CPU (more busy threads than "
     "cores), was preempted, or took page faults. The file system is not the cause: fewer processes or threads "
     "per core, or pinning them, is."),
    (ALLOCATION, "Writes waited for new memory, not storage",
     "These writes went into new pages (past the end of the file, or whole pages of an uncached file) and took "
     "as long as storage I/O: the kernel was finding memory for them (on a virtual machine, memory the host "
     "hands over lazily). Reusing or preallocating files (fallocate), or memory already in use, avoids it; "
     "faster storage would not."),
)

def recommendations(a):
    """Findings with the numbers that triggered them; each {"title", "text", "numbers"}."""
    found = []
    head = a["headline"]
    lost_mid = (head["lost_low_s"] + head["lost_high_s"]) / 2
    share = head["lost_share_of_runtime"]
    by_class = collections.defaultdict(lambda: {"ops": 0, "seconds": 0.0, "lost": 0.0})
    for row in a["classes"]:
        entry = by_class[row["class"]]
        entry["ops"] += row["ops"]
        entry["seconds"] += row["seconds"]
        entry["lost"] += row["lost_high_s"]
    if share is not None and share < LOST_SHARE_WORTH_A_LOOK:
        found.append({"title": "I/O time lost is small",
                      "text": "Compared with cached I/O the job lost little time: tuning its I/O would gain little.",
                      "numbers": {"lost_s": lost_mid, "lost_share_of_runtime": share}})
    uncached = by_class["uncached"]
    if uncached["lost"] > 0 and lost_mid > 0 and uncached["lost"] >= 0.5 * lost_mid:
        found.append({"title": "Most lost time is uncached I/O",
                      "text": "Reads went to the storage device instead of the page cache; writes waited for "
                              "the device (partial pages of uncached files are read first) or for new page-cache "
                              "memory. Larger, aligned, sequential requests, reading data once, or a staging "
                              "copy in fast storage reduce this.",
                      "numbers": {"uncached_ops": uncached["ops"], "uncached_s": uncached["seconds"],
                                  "lost_s": uncached["lost"]}})
    slow = by_class["slow"]
    if slow["ops"]:
        found.append({"title": "Some ops were slower than uncached I/O",
                      "text": "These ops took longer than the model's slowest explained duration: contention "
                              "on the file system or the node, or a cause the model does not know.",
                      "numbers": {"slow_ops": slow["ops"], "slow_s": slow["seconds"], "lost_s": slow["lost"]}})
    for cls, title, text in NOT_STORAGE_FINDINGS:
        entry = by_class[cls]
        if entry["lost"] > 0 and entry["lost"] >= LOST_SHARE_WORTH_A_LOOK * lost_mid:
            numbers = {f"{cls}_ops": entry["ops"], f"{cls}_s": entry["seconds"], "lost_s": entry["lost"]}
            found.append({"title": title, "text": text, "numbers": numbers})
    found += sync_findings(a["flushes"], head["io_s"])
    small = sum(r["read_ops"] + r["write_ops"] for r in a["sizes"] if 0 <= r["size_high"] <= SMALL_OP_BYTES // 4)
    total = sum(r["read_ops"] + r["write_ops"] for r in a["sizes"])
    if total and small / total >= SMALL_OPS_SHARE:
        found.append({"title": "Many small requests",
                      "text": "Most requests moved at most 1 KiB: each pays a system call and, on a parallel "
                              "file system, a round trip. Buffering them into larger requests usually helps.",
                      "numbers": {"small_ops": small, "ops": total, "share": small / total}})
    if a["tier"] == "counters":
        found.append({"title": "Estimates from counters only",
                      "text": "This log has no per-op timings: lost time is an interval estimated from the "
                              "access-size histogram. Run the job under ioassess (or with Darshan's DXT "
                              "enabled, DXT_ENABLE_IO_TRACE=1) for a per-op assessment.",
                      "numbers": {"lost_low_s": head["lost_low_s"], "lost_high_s": head["lost_high_s"]}})
    return found


def sync_findings(flushed, io_s):
    """Syncs whose fixed cost, or time beyond the model's flushes, is worth a look (at least
    LOST_SHARE_WORTH_A_LOOK of the I/O time)."""
    if flushed is None or flushed["fixed_s"] is None or not io_s:
        return []
    found = []
    per_sync = flushed["fixed_s"] / flushed["syncs"]
    # The syncs' time against the model's time of one sync per file of the same bytes.
    once_per_file_s = flushed["files"] * per_sync + flushed["typical_s"] - flushed["fixed_s"]
    saving = max(flushed["seconds"] - once_per_file_s, 0.0)
    if flushed["syncs"] > flushed["files"] and saving >= LOST_SHARE_WORTH_A_LOOK * io_s:
        found.append({"title": "Frequent syncs",
                      "text": "Each fsync or fdatasync costs this file system a fixed time, however little it "
                              "has to write back. Syncing each file once, when its data must be safe (at the end "
                              "or at a checkpoint), saves that time for every other call.",
                      "numbers": {"syncs": flushed["syncs"], "files": flushed["files"], "sync_s": flushed["seconds"],
                                  "fixed_per_sync_s": per_sync, "once_per_file_s": once_per_file_s,
                                  "saving_s": saving}})
    if flushed["beyond_bound_s"] >= LOST_SHARE_WORTH_A_LOOK * io_s:
        found.append({"title": "Syncs slower than this file system's flushes",
                      "text": "These syncs took longer than the model's slowest flush of as many bytes: the "
                              "device was busy with other write-back (other files, other processes) or slower "
                              "than when the model was made.",
                      "numbers": {"slow_syncs": flushed["beyond_bound_syncs"], "beyond_s": flushed["beyond_bound_s"]}})
    return found


# ---- helpers ----

def _iso(epoch_s):
    if not math.isfinite(epoch_s) or epoch_s <= 0:
        return None
    return datetime.datetime.fromtimestamp(epoch_s, datetime.timezone.utc).isoformat(timespec="seconds")


def _finite(value):
    return float(value) if value is not None and math.isfinite(value) else None


def _ratio(numerator, denominator):
    return float(numerator / denominator) if denominator and math.isfinite(denominator) and denominator > 0 else None
