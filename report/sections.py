"""The assessment's sections on where the time went: by class, the kernel's word, syncs, layers,
collective MPI-IO, files, access sizes, over time, the heavy tail, and the scatter sample with the
model's lines. Each is a function of the Job and the per-op classes that returns plain data."""

import re

import numpy as np

from ioassess.inputs.job import (DARSHAN_SIZE_BINS, DIRECTIONS, LAYERS, META, MPIIO, POSIX, SYNC, UNASSESSED_MODULES,
                                 WRITE, Flag, op_column)
from ioassess.models.causes import FLUSHED, LAYOUTS
from ioassess.models.plain import finite_or_none, ratio_or_none
from ioassess.models.slowdown import slowdown_by_interval
from ioassess.site.probe.during_job import file_system_during_job

from .classify import CLASS_CODES, ESTIMATED, IO_LAYERS, ROW_CLASSES
from .ground_truth import agreement
from .ledger import io_rows, sums_by
from .processes import pid_or_none

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
SMALL_OP_BYTES = 4096


def kernel_word(job, per_op):
    """The page-cache samples: how many ops have one, how many were judged by their file's, how
    the classes agree with the kernel (report/ground_truth.py), and the job's own cached lines
    (report/own_cached.py) with the ops whose time if cached they gave."""
    refused = [p for p in job.processes if p.source == "trace" and p.pagecache == "unavailable"]
    turned_off = [p for p in job.processes if p.source == "trace" and p.pagecache == "off"]
    judged_only = (per_op["judged"] >= 0) & (per_op["kernel"] < 0) & per_op["is_io"]
    changed = per_op["class"] != per_op["model_class"]
    ops = job.ops
    return {**agreement(per_op["model_class"], per_op["kernel"], ops["direction"], per_op["modelled"], CLASS_CODES,
                        ops["size"], ops["duration_s"], per_op["fresh_buffer"]),
            "inferred_ops": int(np.count_nonzero(judged_only)),
            "appended_ops": int(np.count_nonzero(per_op["appended"] & per_op["is_io"])),
            "reclassified_ops": int(np.count_nonzero(changed & per_op["is_io"])),
            "processes_refused": len(refused), "processes_turned_off": len(turned_off),
            "own_cached_lines": own_cached_rows(per_op["own_lines"])}


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


def class_table(job, per_op, per_total):
    """Rows per (class, direction): ops, bytes, seconds, time lost (low, high), slowness."""
    ops, io = job.ops, per_op["is_io"]
    rows = []
    for code, cls in enumerate(ROW_CLASSES[:-1]):
        for d, direction in enumerate(DIRECTIONS):
            member = io & (per_op["class"] == code) & (ops["direction"] == d)
            if member.any():
                lost = float(per_op["lost_s"][member].sum())
                rows.append(_row(cls, direction, int(member.sum()), int(np.maximum(ops["result"][member], 0).sum()),
                                 float(ops["duration_s"][member].sum()), lost, lost,
                                 float(per_op["slowness_s"][member].sum())))
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


def flushes(job, models):
    """The POSIX syncs (fsync, fdatasync) that succeeded, against the flushed line of the model
    that judges each one's file (models: model_choice.file_models's) at the bytes each had at
    most to write back: what its process wrote to the file since its previous sync of it (the
    kernel may have written some back before). None without syncs; the model figures None
    where one of those models has no flushed line."""
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
    judged_by, of_file = models
    model_of_sync = of_file[ops["file"][order][at_sync]]
    lines = {m: flushed_line(judged_by[m]) for m in np.unique(model_of_sync).tolist()}
    if all(line is not None for line in lines.values()):
        typical, fixed, bound = np.zeros(len(at_sync)), np.zeros(len(at_sync)), np.zeros(len(at_sync))
        for m, line in lines.items():
            here = model_of_sync == m
            typical[here], bound[here] = line.typical.predict(dirty[here]), line.bound.predict(dirty[here])
            fixed[here] = line.typical.predict(0.0)
        beyond = np.maximum(seconds - bound, 0.0)
        result.update(typical_s=float(typical.sum()), fixed_s=float(fixed.sum()),
                      beyond_bound_s=float(beyond.sum()), beyond_bound_syncs=int(np.count_nonzero(beyond)))
    return result


def flushed_line(model):
    """A model's line of syncs that flush written data, None without one."""
    line = model.lines.get(("sync", FLUSHED, "rnd")) or model.lines.get(("sync", FLUSHED, "off0"))
    return line if line is not None and line.typical is not None else None


def layer_table(job):
    """Per direction, the layers side by side: ops, bytes and seconds at each layer (MPI-IO time
    contains the POSIX time under it), and per layer the part of the ops known one by one that
    carries each flag (MPI-IO: collective, nonblocking; POSIX: under MPI-IO, under collective
    MPI-IO, i.e. aggregator work). A layer without ops in a direction is null. Metadata calls
    are the metadata section's (report/metadata.py)."""
    ops, totals = job.ops, job.totals
    flags = op_column(ops, "flags")
    rows = []
    for d, direction in enumerate(DIRECTIONS[:META]):
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
    aggregators = [{"rank": job.processes[i].rank, "pid": pid_or_none(job.processes[i].pid),
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
        "aggregator_share_of_collective": ratio_or_none(float(aggregator_s.sum()), collective_s),
        "aggregators": aggregators,
        "partial": bool(np.any(job.totals["layer"] == POSIX)),
    }


# The files of a language runtime rather than of the job: a Python interpreter's standard library
# and compiled modules, installed packages. Shown apart from the job's files (runtime_files).
RUNTIME_FILE = re.compile(r"/(site-packages|dist-packages|__pycache__)/|/lib(64)?/python[0-9.]*/")


def is_runtime_file(name):
    return RUNTIME_FILE.search(name) is not None


def runtime_files(job, per_op, per_total):
    """The I/O of the runtime's own files (RUNTIME_FILE), which the top files leave out: files,
    ops, bytes, seconds, time lost (an interval); None when the job read or wrote none."""
    runtime = np.array([is_runtime_file(f.name) for f in job.files], bool)
    if not runtime.any():
        return None
    ops, totals = job.ops, job.totals
    io = per_op["is_io"] & runtime[ops["file"]]
    tio = per_total["is_io"] & runtime[totals["file"]]
    if not (io.any() or tio.any()):
        return None
    lost = float(per_op["lost_s"][io].sum())
    return {"files": len(set(ops["file"][io].tolist()) | set(totals["file"][tio].tolist())),
            "ops": int(io.sum() + totals["ops"][tio].sum()),
            "bytes": int(np.maximum(ops["result"][io], 0).sum() + totals["bytes"][tio].sum()),
            "seconds": float(ops["duration_s"][io].sum() + totals["seconds"][tio].sum()),
            "lost_low_s": lost + float(per_total["lost_low_s"][tio].sum()),
            "lost_high_s": lost + float(per_total["lost_high_s"][tio].sum())}


def per_file_io(job, ledger):
    """Per file (index into Job.files), from the job's ledger: the I/O of all processes (POSIX
    and STDIO reads, writes and syncs, known one by one or from counters): `ops`, `bytes`,
    `seconds`, `lost_low_s`, `lost_high_s`."""
    sums = sums_by(ledger, "file", len(job.files), io_rows(ledger))
    return {"ops": sums["calls"], **{name: sums[name] for name in ("bytes", "seconds", "lost_low_s", "lost_high_s")}}


def file_table(job, per_op, per_total, per_file, top=TOP_FILES):
    """The files that lost most time (per_file: per_file_io's), with their access pattern; the
    runtime's own files are left out (runtime_files)."""
    if not job.files:
        return []
    ops, io, tio = job.ops, per_op["is_io"], per_total["is_io"]
    seconds, count, nbytes = per_file["seconds"], per_file["ops"], per_file["bytes"]
    lost_low, lost_high = per_file["lost_low_s"], per_file["lost_high_s"]
    after_previous = access_pattern(ops)
    order = np.lexsort((-seconds, -lost_high))
    rows = []
    runtime = np.array([is_runtime_file(f.name) for f in job.files], bool)
    for i in order[~runtime[order]][:top]:
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
    its ops with offsets (none: stdio ops); its read share, median size and share of small ops."""
    n = int(member.sum())
    known = member & (ops["offset"] >= 0)
    shares, source = _darshan_pattern(job.darshan_records, file), "darshan counters"
    if shares is None and known.any():
        shares = {f"{name}_share": float(after_previous[name][known].mean()) for name in ("consecutive", "sequential")}
        source = "ops"
    pattern = {"ops_with_offsets": n, **({"source": source, **shares} if shares is not None else {})}
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
    """Per Darshan access-size bin: the reads and writes known one by one, with their seconds, time
    lost and classes (all null where no op is known one by one: a counters-only log), and those
    known from counters (read_ops_counted, write_ops_counted), where there are such."""
    edges = np.array([high for _, high in DARSHAN_SIZE_BINS[:-1]])
    ops, io = job.ops, per_op["is_io"] & (job.ops["direction"] < 2)
    which = np.searchsorted(edges, ops["size"][io], side="left")
    posix = ops["layer"][io] == POSIX
    rows = []
    for b, label in enumerate(SIZE_BIN_LABELS):
        member = which == b
        d = ops["direction"][io][member]
        rows.append({"bin": label, "size_low": DARSHAN_SIZE_BINS[b][0], "size_high": DARSHAN_SIZE_BINS[b][1],
                     "read_ops": int(np.count_nonzero(d == 0)), "write_ops": int(np.count_nonzero(d == 1)),
                     "posix_ops": int(np.count_nonzero(member & posix)),
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
    rows = [row for row in rows if row["read_ops"] + row["write_ops"] + row.get("read_ops_counted", 0) +
            row.get("write_ops_counted", 0)]
    if not io.any():   # no op known one by one: its columns are unknown, not 0
        for row in rows:
            row.update(read_ops=None, write_ops=None, posix_ops=None, classes=None)
    return rows


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
        from ioassess.models.tails import analyse_durations  # scipy: imported only when there is a tail to fit
        sample = _even_sample(chosen)
        slowdowns = job.ops["duration_s"][sample] / per_op["cached_typical_s"][sample]
        result[direction] = {"ops": int(len(chosen)), "sampled": int(len(sample)),
                             **analyse_durations(slowdowns).as_dict()}
    return result


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


def asynchronous_io(job, per_op):
    """The asynchronous requests (flag ASYNC: libaio, POSIX AIO) among the I/O ops: how many,
    their bytes and seconds, by interface. Their seconds run from submission to completion and
    requests in flight together overlap, so summed they may exceed the time waited. None
    without any."""
    flags = op_column(job.ops, "flags")
    asynchronous = per_op["is_io"] & (flags & Flag.ASYNC != 0)
    if not asynchronous.any():
        return None
    posix_aio = asynchronous & (flags & Flag.POSIX_AIO != 0)
    return {**_amounts(job.ops, asynchronous), "processes": len(np.unique(job.ops["process"][asynchronous])),
            "libaio": _amounts(job.ops, asynchronous & ~posix_aio), "posix_aio": _amounts(job.ops, posix_aio)}


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
                       "processes": len(np.unique(rows["process"][ok][here])), "protection": protection,
                       "shared": bool(rows["shared"][ok][here].any())})
    return {"mappings": int(ok.sum()), "bytes": int(rows["bytes"][ok].sum()), "files": len(np.unique(files)),
            "failed": int(np.count_nonzero(~ok)), "processes": len(np.unique(rows["process"][ok])),
            "top": listed}


def io_uring_instances(job):
    """The io_uring instances the recorder saw: how many, in how many processes; their I/O is
    not timed. None without any."""
    counts = [p.io_uring_instances for p in job.processes]
    if not any(counts):
        return None
    return {"instances": int(sum(counts)), "processes": sum(1 for n in counts if n)}
