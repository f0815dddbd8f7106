"""The metadata section: the time of the calls that move no data (open, close, stat, access,
unlink, mkdir, rename, readdir, truncate, seek ...), Job rows of direction META, per kind, file
system, file and rank, and what the findings on metadata storms need (report/findings.py).

Like I/O time, metadata time is that of the POSIX and STDIO layers; MPI-IO's (its opens,
set_view, ... contain the POSIX calls under them) is shown apart, never added. Calls known one
by one (recorder traces) give each call's kind, time and result; Darshan's counters give per
file and rank the summed time (*_F_META_TIME) and how many opens, stats and seeks it counts
(docs/darshan-input.md), not the time of each kind nor failed calls.
"""
import errno
import os

import numpy as np

from ioassess.arrays import distinct
from ioassess.inputs.job import LAYERS, META, META_KINDS, STANDARD_STREAMS, op_column
from ioassess.models.plain import ratio_or_none

from .classify import IO_LAYERS
from .ledger import io_rows, metadata_rows, sums_by, total
from .passes import Sums, run_starts, stable_order
from .processes import io_units, pid_or_none, spread

TOP_CALLS = 10           # the slowest calls listed
TOP_PATHS = 10           # the files or directories that cost most
METADATA_RANK_S = 30.0   # Drishti's threshold: metadata time on one rank worth a finding
# Lookups a program can make once and keep: calls of these kinds beyond the first per file are
# repeated ("The same files opened or stat'ed many times").
LOOKUP_KINDS = ("open", "stat", "access", "opendir")
# A small file: opened, with at most this many bytes read and written (all processes): Lustre's
# usual Data-on-MDT limit, below which a file's open and close cost as much as its data.
SMALL_FILE_BYTES = 1 << 20
UNKNOWN_KIND = "unknown"
UNKNOWN_CODE = len(META_KINDS)   # the kind code of calls of UNKNOWN_KIND
KINDS = len(META_KINDS) + 1     # kind codes: META_KINDS', then UNKNOWN_CODE
IS_LOOKUP = np.isin(np.arange(KINDS), [META_KINDS.index(kind) for kind in LOOKUP_KINDS])   # per kind code


def metadata_calls(ops):
    """The rows of ops (columns of Job.ops) that are metadata calls of the POSIX and STDIO layers
    (a mask)."""
    return (ops["direction"] == META) & np.isin(ops["layer"], IO_LAYERS)


def kind_codes(ops, rows):
    """The kind of the ops' rows `rows`: an index into META_KINDS, UNKNOWN_CODE where not known."""
    kinds = op_column(ops, "meta_kind")[rows].astype(np.int64)
    return np.where((kinds >= 0) & (kinds < len(META_KINDS)), kinds, UNKNOWN_CODE)


class MetadataCalls:
    """The metadata calls known one by one (POSIX and STDIO), a pass: per (file, kind) their calls,
    seconds, failures and those that found no such path (ENOENT: `missing`, `missing_s`); per kind
    the slowest call; the TOP_CALLS slowest calls; and the lookups (LOOKUP_KINDS) beyond the first
    of each (file, kind) in time, over all processes (FirstCalls). Its state: a row per (file,
    kind) met, and TOP_CALLS calls."""
    SUMS = ("calls", "seconds", "errors", "missing", "missing_s")
    SLOWEST_COLUMNS = {"process": np.int32, "file": np.int32, "kind": np.int64, "start_s": np.float64,
                       "result": np.int64}

    def __init__(self, job):
        cells = max(len(job.files), 1) * KINDS
        self.sums = Sums(self.SUMS, cells)
        self.slowest_s = np.full(KINDS, -np.inf)
        self.slowest = SlowestCalls(TOP_CALLS, self.SLOWEST_COLUMNS)
        self.lookups = FirstCalls(cells)

    def add(self, chunk):
        ops = chunk.ops
        rows = np.flatnonzero(metadata_calls(ops))
        kind, file = kind_codes(ops, rows), ops["file"][rows]
        duration, result = ops["duration_s"][rows], ops["result"][rows]
        key = file.astype(np.int64) * KINDS + kind
        missing = result == -errno.ENOENT
        self.sums.add(key, {"calls": 1.0, "seconds": duration, "errors": result < 0, "missing": missing,
                            "missing_s": np.where(missing, duration, 0.0)})
        np.maximum.at(self.slowest_s, kind, duration)
        self.slowest.add(chunk.index[rows], duration, {"process": ops["process"][rows], "file": file, "kind": kind,
                                                       "start_s": ops["start_s"][rows], "result": result})
        lookup = IS_LOOKUP[kind]
        self.lookups.add(key[lookup], ops["start_s"][rows][lookup], duration[lookup])

    def merge(self, later):
        self.sums.merge(later.sums)
        np.maximum(self.slowest_s, later.slowest_s, out=self.slowest_s)
        self.slowest.merge(later.slowest)
        self.lookups.merge(later.lookups)

    def result(self):
        """{"by_file_kind": per (file, kind) met, its `file`, `kind` and SUMS; "slowest_s": per kind
        the slowest call's seconds; "slowest": the slowest calls' `duration_s` and SLOWEST_COLUMNS,
        slowest first; "repeated": per (file, kind) of lookups beyond the first, their `file`,
        `kind`, `calls` and `seconds`}."""
        file, kind = np.divmod(self.sums.keys, KINDS)
        again = self.lookups.later
        again_file, again_kind = np.divmod(again.keys, KINDS)
        return {"by_file_kind": {"file": file, "kind": kind, **self.sums.sums}, "slowest_s": self.slowest_s,
                "slowest": self.slowest.values(),
                "repeated": {"file": again_file, "kind": again_kind, **again.sums}}


class SlowestCalls:
    """The `limit` slowest of the calls offered, of equal durations the first in Job.ops order (as
    a stable sort by duration ranks them): their durations and columns."""

    def __init__(self, limit, dtypes):
        self.limit = limit
        self.index = np.zeros(0, np.int64)
        self.duration = np.zeros(0)
        self.columns = {name: np.zeros(0, dtype) for name, dtype in dtypes.items()}

    def add(self, index, duration, columns):
        """Offers the calls of Job.ops indices `index`, their durations and columns (name -> array)."""
        if len(duration) > self.limit:   # only calls at least as slow as the limit-th slowest can be kept
            kth = len(duration) - self.limit
            kept = ~(duration < np.partition(duration, kth)[kth])
            index, duration = index[kept], duration[kept]
            columns = {name: column[kept] for name, column in columns.items()}
        self._keep(index, duration, columns)

    def merge(self, later):
        self._keep(later.index, later.duration, later.columns)

    def _keep(self, index, duration, columns):
        index = np.concatenate([self.index, index])
        duration = np.concatenate([self.duration, duration])
        kept = np.lexsort((index, -duration))[:self.limit]
        self.index, self.duration = index[kept], duration[kept]
        self.columns = {name: np.concatenate([self.columns[name], columns[name]])[kept] for name in self.columns}

    def values(self):
        """name -> the kept calls' column (and `duration_s`), slowest first."""
        return {"duration_s": self.duration, **self.columns}


class FirstCalls:
    """Per key, the call of the earliest start among those offered (of equal starts, the first
    offered), and the calls and seconds of all the others (`later`, Sums: the calls beyond the
    first of each key in time, wherever in the offered order the first came)."""

    def __init__(self, cells):
        self.keys = np.zeros(0, np.int64)
        self.start = np.zeros(0)
        self.duration = np.zeros(0)
        self.later = Sums(("calls", "seconds"), cells)

    def add(self, keys, start, duration):
        """Offers calls: their keys, starts and durations, in Job.ops order."""
        keys = np.concatenate([self.keys, keys])
        start = np.concatenate([self.start, start])
        duration = np.concatenate([self.duration, duration])
        order = stable_order(keys)   # the kept keys, already in order, cost one run
        keys, start, duration = keys[order], start[order], duration[order]
        first = earliest_in_runs(keys, start)
        self.later.add(keys[~first], {"calls": 1.0, "seconds": duration[~first]})
        self.keys, self.start, self.duration = keys[first], start[first], duration[first]

    def merge(self, later):
        self.later.merge(later.later)
        self.add(later.keys, later.start, later.duration)


def earliest_in_runs(keys, values):
    """Per run of equal keys, the row of its smallest value, of equal values the first (a mask)."""
    starts = run_starts(keys)
    if not starts.any():
        return starts
    run = np.cumsum(starts) - 1
    least = np.flatnonzero(values == np.minimum.reduceat(values, np.flatnonzero(starts))[run])
    chosen = np.zeros(len(keys), bool)
    chosen[least[run_starts(run[least])]] = True
    return chosen


def known_only_from_metadata(job, ledger, mpiio):
    """(files, processes): how many of Job.files are named only by metadata rows (or mappings), and how many
    of a Darshan log's processes are (ranks whose records hold only metadata calls). The job's
    facts count neither, so that `files` and `processes_recorded` keep their meaning: files and
    processes with I/O, or named without any call. The ops are the ledger's (report/ledger.py)
    and MPI-IO's reads, writes and syncs (mpiio: processes.MpiioCalls')."""
    totals = job.totals
    known = ~ledger["estimated"]
    other_op, meta_op = known & (ledger["direction"] != META), known & (ledger["direction"] == META)
    other_total = totals["direction"] != META
    records = job.darshan_records
    io_files = set(ledger["file"][other_op].tolist()) | set(mpiio["file"].tolist()) | \
        set(totals["file"][other_total].tolist()) | set(job.size_bins["file"].tolist()) | \
        set(records["file"].tolist())
    meta_files = set(ledger["file"][meta_op].tolist()) | set(totals["file"][~other_total].tolist()) | \
        set(job.mapped_files["file"].tolist())   # named by a mapping only: no I/O call either
    named_ranks = set(records["fastest_rank"].tolist()) | set(records["slowest_rank"].tolist())
    io_processes = set(ledger["process"][other_op].tolist()) | set(mpiio["process"].tolist()) | \
        set(totals["process"][other_total].tolist()) | set(job.size_bins["process"].tolist())
    meta_processes = set(ledger["process"][meta_op].tolist()) | set(totals["process"][~other_total].tolist())
    processes = [i for i in meta_processes - io_processes - {-1}
                 if job.processes[i].source == "darshan" and job.processes[i].rank not in named_ranks]
    return len(meta_files - io_files), len(processes)


def metadata_section(job, ledger, calls, io_s):
    """The metadata section (docs/assessment.md, `metadata`), or None when no input gives
    metadata calls. ledger: the job's (report/ledger.py), whose metadata rows its calls and
    seconds (in all, per layer, file system, file and rank) are sums of; calls: the calls known
    one by one (MetadataCalls'); io_s: the job's I/O time (headline), for the share."""
    rows = metadata_rows(ledger)
    layers = {name: _layer_amounts(ledger, name) for name in LAYERS}
    if not (rows.any() or layers["mpiio"]):
        return None
    amounts = total(ledger, rows)
    counted = rows & ledger["estimated"]
    tier = "mixed" if (rows & ~counted).any() and counted.any() else "counters" if counted.any() else \
        "ops" if rows.any() else "none"
    per_file = sums_by(ledger, "file", len(job.files), rows)
    return {
        "tier": tier,
        "calls": int(amounts["calls"]),
        "seconds": amounts["seconds"],
        "share_of_io": ratio_or_none(amounts["seconds"], io_s + amounts["seconds"]),
        "layers": layers,
        "kinds": _kinds(job, calls),
        "counted_s": total(ledger, counted)["seconds"] if counted.any() else None,
        "file_systems": _file_systems(job, per_file),
        "slowest_calls": _slowest_calls(job, calls["slowest"]),
        "paths": _paths(job, calls["by_file_kind"], ledger, per_file),
        "files": int(np.count_nonzero((per_file["calls"] > 0) | (per_file["seconds"] > 0))),
        "per_rank": _per_rank(job, ledger, rows),
        "repeated": _repeated(job, calls),
        "missing": _missing(calls["by_file_kind"]),
        "small_files": _small_files(job, calls["by_file_kind"], ledger, per_file),
    }


def _layer_amounts(ledger, name):
    """Calls and seconds of one layer's metadata calls, None without any."""
    rows = metadata_rows(ledger, (name,))
    if not rows.any():
        return None
    amounts = total(ledger, rows)
    return {"calls": int(amounts["calls"]), "seconds": amounts["seconds"]}


def _kind_name(code):
    return META_KINDS[code] if code < len(META_KINDS) else UNKNOWN_KIND


def _counted_kinds(job):
    """The rows of Job.meta_kinds of the POSIX and STDIO layers (a mask)."""
    return np.isin(job.meta_kinds["layer"], IO_LAYERS)


def _kinds(job, calls):
    """Per kind: calls known one by one with their seconds, failures and slowest call, and the
    calls counters counted (whose time is known only in total: `counted_s`)."""
    by = calls["by_file_kind"]
    known = {name: np.bincount(by["kind"], by[name], KINDS) for name in ("calls", "seconds", "errors")}
    counted = job.meta_kinds
    counted_rows = _counted_kinds(job)
    counted_by_kind = np.bincount(counted["kind"][counted_rows], counted["ops"][counted_rows],
                                  KINDS).astype(np.int64)
    rows = []
    for code in range(KINDS):
        here = known["calls"][code] > 0
        if not here and not counted_by_kind[code]:
            continue
        rows.append({"kind": _kind_name(code), "calls": int(known["calls"][code]),
                     "seconds": float(known["seconds"][code]) if here else None,
                     "errors": int(known["errors"][code]) if here else None,
                     "slowest_s": float(calls["slowest_s"][code]) if here else None,
                     "counted_calls": int(counted_by_kind[code])})
    rows.sort(key=lambda r: (-(r["seconds"] or 0.0), -r["calls"] - r["counted_calls"]))
    return rows


def _file_systems(job, per_file):
    """Per file system (mount point and type of the files; "" where unknown): files, calls,
    seconds, most seconds first (per_file: the ledger's metadata sums per file). Where the mount
    point is not known (traces without a Darshan log), `files_under` is the deepest directory
    that holds all its files ("" if none)."""
    calls, seconds = per_file["calls"], per_file["seconds"]
    by_fs, names = {}, {}
    for i in np.flatnonzero(calls > 0).tolist():
        key = (job.files[i].mount_point, job.files[i].fs_type)
        entry = by_fs.setdefault(key, {"mount_point": key[0], "fs_type": key[1], "files": 0, "calls": 0,
                                       "seconds": 0.0})
        entry["files"] += 1
        entry["calls"] += int(calls[i])
        entry["seconds"] += float(seconds[i])
        names.setdefault(key, []).append(job.files[i].name)
    for key, entry in by_fs.items():
        if not entry["mount_point"]:
            entry["files_under"] = _common_directory(names[key])
    return sorted(by_fs.values(), key=lambda e: (-e["seconds"], e["mount_point"]))


def _common_directory(names):
    """The deepest directory that holds every absolute name of names; "" if a name is not
    absolute (obfuscated, a descriptor's placeholder)."""
    if not all(name.startswith("/") for name in names):
        return ""
    return os.path.commonpath([os.path.dirname(name) for name in names])


def _slowest_calls(job, slowest):
    """The slowest calls known one by one (slowest: MetadataCalls'): file, kind, duration, result,
    process."""
    rows = []
    for j in range(len(slowest["duration_s"])):
        process = job.processes[slowest["process"][j]]
        rows.append({"file": job.files[slowest["file"][j]].name, "kind": _kind_name(int(slowest["kind"][j])),
                     "duration_s": float(slowest["duration_s"][j]), "start_s": float(slowest["start_s"][j]),
                     "error": _error_name(int(slowest["result"][j])), "rank": process.rank,
                     "pid": pid_or_none(process.pid), "hostname": process.hostname})
    return rows


def _error_name(result):
    """None for a call that succeeded, else its errno's name (ENOENT, ...)."""
    if result >= 0:
        return None
    return errno.errorcode.get(-result, f"errno {-result}")


def _paths(job, by_file_kind, ledger, per_file, top=TOP_PATHS):
    """The files or directories whose metadata calls cost most: calls and seconds (per_file: the
    ledger's metadata sums per file), and of the calls known one by one (by_file_kind:
    MetadataCalls') the failures and those that found no such path (ENOENT); the calls per kind
    (known one by one or counted); and the processes that made them (every rank for a Darshan
    record shared by all: the ledger's metadata rows of the file)."""
    calls, seconds = per_file["calls"], per_file["seconds"]
    n = len(job.files)
    by = by_file_kind
    known = np.bincount(by["file"], by["calls"], n) > 0
    errors, missing = np.bincount(by["file"], by["errors"], n), np.bincount(by["file"], by["missing"], n)
    counted = job.meta_kinds
    counted_rows = _counted_kinds(job)
    meta = metadata_rows(ledger)
    rows = []
    for i in np.lexsort((-calls, -seconds))[:top].tolist():
        if calls[i] == 0:
            break
        here = by["file"] == i
        by_kind = {_kind_name(code): int(count) for code, count in zip(by["kind"][here].tolist(),
                                                                        by["calls"][here].tolist())}
        for code, count in zip(counted["kind"][counted_rows & (counted["file"] == i)].tolist(),
                               counted["ops"][counted_rows & (counted["file"] == i)].tolist()):
            by_kind[_kind_name(code)] = by_kind.get(_kind_name(code), 0) + int(count)
        procs = set(ledger["process"][meta & (ledger["file"] == i)].tolist())
        rows.append({"name": job.files[i].name, "fs_type": job.files[i].fs_type, "calls": int(calls[i]),
                     "seconds": float(seconds[i]), "errors": int(errors[i]) if known[i] else None,
                     "missing": int(missing[i]) if known[i] else None, "kinds": by_kind,
                     "processes": job.nprocs if -1 in procs else len(procs)})
    return rows


def _per_rank(job, ledger, rows):
    """Metadata time per rank (or per process, in a job of one rank: io_units' units), its
    spread (spread: mean, median, max, imbalance) and the units above METADATA_RANK_S; calls
    and seconds in Darshan records shared by all ranks, which no unit's numbers contain.
    None without metadata time of any unit. rows: the ledger's metadata rows."""
    n = len(job.processes)
    sums = sums_by(ledger, "process", n, rows)
    calls, seconds = sums["calls"].astype(np.int64), sums["seconds"]
    units = io_units(job, {"ops": calls, "io_s": seconds, "lost_low_s": np.zeros(n), "lost_high_s": np.zeros(n)})
    shared = rows & (ledger["process"] < 0)
    in_shared = {"calls": int(ledger["calls"][shared].sum()), "seconds": float(ledger["seconds"][shared].sum())} \
        if shared.any() else None
    if not len(units["io_s"]) or not units["io_s"].any():
        return None if in_shared is None else {"unit": units["unit"], "count": len(units["io_s"]), "spread": None,
                                               "above_threshold": [], "shared": in_shared}
    values = units["io_s"]
    above = np.flatnonzero(values > METADATA_RANK_S)
    above = above[np.argsort(-values[above], kind="stable")]
    return {"unit": units["unit"], "count": len(values), "spread": spread(units, "io_s"),
            "above_threshold": [{"rank": int(units["rank"][i]), "pid": pid_or_none(units["pid"][i]),
                                 "hostname": str(units["hostname"][i]), "seconds": float(values[i])}
                                for i in above.tolist()],
            "shared": in_shared}


def _repeated(job, calls):
    """Lookups (LOOKUP_KINDS) known one by one beyond the first of each (file, kind), over all
    processes: calls and seconds (those of every call but the first), and the files with most.
    None without calls known one by one (calls: MetadataCalls')."""
    if not len(calls["by_file_kind"]["calls"]):
        return None
    again, n = calls["repeated"], len(job.files)
    per_file = np.bincount(again["file"], again["calls"], n)
    per_file_s = np.bincount(again["file"], again["seconds"], n)
    top = [{"name": job.files[i].name, "calls": int(per_file[i]), "seconds": float(per_file_s[i])}
           for i in np.lexsort((-per_file, -per_file_s))[:TOP_PATHS].tolist() if per_file[i]]
    return {"calls": int(again["calls"].sum()), "seconds": float(again["seconds"].sum()), "files": top}


def _missing(by_file_kind):
    """Lookups known one by one that found no such path (result -ENOENT): calls, seconds,
    distinct paths. None without calls known one by one (by_file_kind: MetadataCalls')."""
    by = by_file_kind
    if not len(by["calls"]):
        return None
    chosen = IS_LOOKUP[by["kind"]] & (by["missing"] > 0)
    return {"calls": int(by["missing"][chosen].sum()), "seconds": float(by["missing_s"][chosen].sum()),
            "paths": len(distinct(by["file"][chosen]))}


def _small_files(job, by_file_kind, ledger, per_file):
    """Files opened (a successful open known one by one, or an open counted; not the standard
    streams Darshan counts as opened) that moved at most SMALL_FILE_BYTES (the ledger's reads and
    writes, all processes): how many, of how many opened, and their metadata calls and seconds
    (per_file: the ledger's metadata sums per file; by_file_kind: MetadataCalls')."""
    n = len(job.files)
    by, counted = by_file_kind, job.meta_kinds
    opened = np.zeros(n, bool)
    open_code = META_KINDS.index("open")
    opened[by["file"][(by["kind"] == open_code) & (by["calls"] > by["errors"])]] = True
    opened[counted["file"][_counted_kinds(job) & (counted["kind"] == open_code)]] = True
    opened &= np.array([f.name not in STANDARD_STREAMS for f in job.files], bool)
    moved = sums_by(ledger, "file", n, io_rows(ledger))["bytes"]
    small = opened & (moved <= SMALL_FILE_BYTES)
    calls, seconds = per_file["calls"], per_file["seconds"]
    return {"files": int(np.count_nonzero(small)), "opened": int(np.count_nonzero(opened)),
            "bytes": int(moved[small].sum()), "calls": int(calls[small].sum()),
            "seconds": float(seconds[small].sum())}
