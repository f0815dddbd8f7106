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

from ioassess.inputs.job import LAYERS, META, META_KINDS, STANDARD_STREAMS, op_column
from ioassess.models.plain import ratio_or_none

from .classify import IO_LAYERS
from .ledger import io_rows, metadata_rows, sums_by, total
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


def metadata_calls(job):
    """(ops, totals): the masks of Job.ops and Job.totals rows that are metadata calls of the
    POSIX and STDIO layers."""
    return ((job.ops["direction"] == META) & np.isin(job.ops["layer"], IO_LAYERS),
            (job.totals["direction"] == META) & np.isin(job.totals["layer"], IO_LAYERS))


def known_only_from_metadata(job):
    """(files, processes): how many of Job.files are named only by metadata rows (or mappings), and how many
    of a Darshan log's processes are (ranks whose records hold only metadata calls). The job's
    facts count neither, so that `files` and `processes_recorded` keep their meaning: files and
    processes with I/O, or named without any call."""
    ops, totals = job.ops, job.totals
    other_op, other_total = ops["direction"] != META, totals["direction"] != META
    records = job.darshan_records
    io_files = set(ops["file"][other_op].tolist()) | set(totals["file"][other_total].tolist()) | \
        set(job.size_bins["file"].tolist()) | set(records["file"].tolist())
    meta_files = set(ops["file"][~other_op].tolist()) | set(totals["file"][~other_total].tolist()) | \
        set(job.mapped_files["file"].tolist())   # named by a mapping only: no I/O call either
    named_ranks = set(records["fastest_rank"].tolist()) | set(records["slowest_rank"].tolist())
    io_processes = set(ops["process"][other_op].tolist()) | set(totals["process"][other_total].tolist()) | \
        set(job.size_bins["process"].tolist())
    meta_processes = set(ops["process"][~other_op].tolist()) | set(totals["process"][~other_total].tolist())
    processes = [i for i in meta_processes - io_processes - {-1}
                 if job.processes[i].source == "darshan" and job.processes[i].rank not in named_ranks]
    return len(meta_files - io_files), len(processes)


def metadata_section(job, ledger, io_s):
    """The metadata section (docs/assessment.md, `metadata`), or None when no input gives
    metadata calls. ledger: the job's (report/ledger.py), whose metadata rows its calls and
    seconds (in all, per layer, file system, file and rank) are sums of; io_s: the job's I/O time
    (headline), for the share."""
    op_meta, total_meta = metadata_calls(job)
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
        "kinds": _kinds(job, op_meta),
        "counted_s": total(ledger, counted)["seconds"] if counted.any() else None,
        "file_systems": _file_systems(job, per_file),
        "slowest_calls": _slowest_calls(job, op_meta),
        "paths": _paths(job, op_meta, total_meta, per_file),
        "files": int(np.count_nonzero((per_file["calls"] > 0) | (per_file["seconds"] > 0))),
        "per_rank": _per_rank(job, ledger, rows),
        "repeated": _repeated(job, op_meta),
        "missing": _missing(job, op_meta),
        "small_files": _small_files(job, op_meta, ledger, per_file),
    }


def _layer_amounts(ledger, name):
    """Calls and seconds of one layer's metadata calls, None without any."""
    rows = metadata_rows(ledger, (name,))
    if not rows.any():
        return None
    amounts = total(ledger, rows)
    return {"calls": int(amounts["calls"]), "seconds": amounts["seconds"]}


def _kind_names(job, op_meta):
    kinds = op_column(job.ops, "meta_kind")[op_meta].astype(np.int64)
    return np.where((kinds >= 0) & (kinds < len(META_KINDS)), kinds, len(META_KINDS))


def _kind_name(code):
    return META_KINDS[code] if code < len(META_KINDS) else UNKNOWN_KIND


def _kinds(job, op_meta):
    """Per kind: calls known one by one with their seconds, failures and slowest call, and the
    calls counters counted (whose time is known only in total: `counted_s`)."""
    kinds = _kind_names(job, op_meta)
    duration, result = job.ops["duration_s"][op_meta], job.ops["result"][op_meta]
    counted = job.meta_kinds
    counted_rows = np.isin(counted["layer"], IO_LAYERS)
    counted_by_kind = np.bincount(counted["kind"][counted_rows], counted["ops"][counted_rows],
                                  len(META_KINDS) + 1).astype(np.int64)
    rows = []
    for code in range(len(META_KINDS) + 1):
        here = kinds == code
        if not here.any() and not counted_by_kind[code]:
            continue
        rows.append({"kind": _kind_name(code), "calls": int(np.count_nonzero(here)),
                     "seconds": float(duration[here].sum()) if here.any() else None,
                     "errors": int(np.count_nonzero(result[here] < 0)) if here.any() else None,
                     "slowest_s": float(duration[here].max()) if here.any() else None,
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


def _slowest_calls(job, op_meta, top=TOP_CALLS):
    """The slowest calls known one by one: file, kind, duration, result, process."""
    chosen = np.flatnonzero(op_meta)
    kinds = _kind_names(job, op_meta)
    order = np.argsort(-job.ops["duration_s"][chosen], kind="stable")[:top]
    rows = []
    for j in order.tolist():
        i = chosen[j]
        process = job.processes[job.ops["process"][i]]
        result = int(job.ops["result"][i])
        rows.append({"file": job.files[job.ops["file"][i]].name, "kind": _kind_name(kinds[j]),
                     "duration_s": float(job.ops["duration_s"][i]), "start_s": float(job.ops["start_s"][i]),
                     "error": _error_name(result), "rank": process.rank, "pid": pid_or_none(process.pid),
                     "hostname": process.hostname})
    return rows


def _error_name(result):
    """None for a call that succeeded, else its errno's name (ENOENT, ...)."""
    if result >= 0:
        return None
    return errno.errorcode.get(-result, f"errno {-result}")


def _paths(job, op_meta, total_meta, per_file, top=TOP_PATHS):
    """The files or directories whose metadata calls cost most: calls and seconds (per_file: the
    ledger's metadata sums per file), and of the calls known one by one the failures and those
    that found no such path (ENOENT); the calls per kind (known one by one or counted); and the
    processes that made them (every rank for a Darshan record shared by all)."""
    calls, seconds = per_file["calls"], per_file["seconds"]
    ops, totals = job.ops, job.totals
    n = len(job.files)
    errors = np.bincount(ops["file"][op_meta & (ops["result"] < 0)], minlength=n)
    missing = np.bincount(ops["file"][op_meta & (ops["result"] == -errno.ENOENT)], minlength=n)
    kinds = _kind_names(job, op_meta)
    op_files = ops["file"][op_meta]
    counted = job.meta_kinds
    counted_rows = np.isin(counted["layer"], IO_LAYERS)
    rows = []
    for i in np.lexsort((-calls, -seconds))[:top].tolist():
        if calls[i] == 0:
            break
        here = op_files == i
        by_kind = {}
        for code, count in zip(*np.unique(kinds[here], return_counts=True)):
            by_kind[_kind_name(int(code))] = int(count)
        for code, count in zip(counted["kind"][counted_rows & (counted["file"] == i)].tolist(),
                               counted["ops"][counted_rows & (counted["file"] == i)].tolist()):
            by_kind[_kind_name(code)] = by_kind.get(_kind_name(code), 0) + int(count)
        procs = set(ops["process"][op_meta & (ops["file"] == i)].tolist()) | \
            set(totals["process"][total_meta & (totals["file"] == i)].tolist())
        per_op = bool(here.any())
        rows.append({"name": job.files[i].name, "fs_type": job.files[i].fs_type, "calls": int(calls[i]),
                     "seconds": float(seconds[i]), "errors": int(errors[i]) if per_op else None,
                     "missing": int(missing[i]) if per_op else None, "kinds": by_kind,
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


def _repeated(job, op_meta):
    """Lookups (LOOKUP_KINDS) known one by one beyond the first of each (file, kind), over all
    processes: calls and seconds (those of every call but the first), and the files with most.
    None without calls known one by one."""
    if not op_meta.any():
        return None
    chosen = np.flatnonzero(op_meta)
    kinds = _kind_names(job, op_meta)
    lookup = np.isin(kinds, [META_KINDS.index(k) for k in LOOKUP_KINDS])
    chosen, kinds = chosen[lookup], kinds[lookup]
    files = job.ops["file"][chosen].astype(np.int64)
    order = np.lexsort((job.ops["start_s"][chosen], kinds, files))
    files, kinds, chosen = files[order], kinds[order], chosen[order]
    first = np.r_[True, (files[1:] != files[:-1]) | (kinds[1:] != kinds[:-1])] if len(chosen) else np.zeros(0, bool)
    again = chosen[~first]
    per_file = np.bincount(files[~first], minlength=len(job.files))
    per_file_s = np.bincount(files[~first], job.ops["duration_s"][again], len(job.files))
    top = [{"name": job.files[i].name, "calls": int(per_file[i]), "seconds": float(per_file_s[i])}
           for i in np.lexsort((-per_file, -per_file_s))[:TOP_PATHS].tolist() if per_file[i]]
    return {"calls": int(len(again)), "seconds": float(job.ops["duration_s"][again].sum()), "files": top}


def _missing(job, op_meta):
    """Lookups known one by one that found no such path (result -ENOENT): calls, seconds,
    distinct paths. None without calls known one by one."""
    if not op_meta.any():
        return None
    kinds = _kind_names(job, op_meta)
    lookup = np.isin(kinds, [META_KINDS.index(k) for k in LOOKUP_KINDS])
    chosen = np.flatnonzero(op_meta)[lookup & (job.ops["result"][op_meta] == -errno.ENOENT)]
    return {"calls": int(len(chosen)), "seconds": float(job.ops["duration_s"][chosen].sum()),
            "paths": len(np.unique(job.ops["file"][chosen]))}


def _small_files(job, op_meta, ledger, per_file):
    """Files opened (a successful open known one by one, or an open counted; not the standard
    streams Darshan counts as opened) that moved at most SMALL_FILE_BYTES (the ledger's reads and
    writes, all processes): how many, of how many opened, and their metadata calls and seconds
    (per_file: the ledger's metadata sums per file)."""
    n = len(job.files)
    ops, counted = job.ops, job.meta_kinds
    opened = np.zeros(n, bool)
    open_code = META_KINDS.index("open")
    opened[ops["file"][op_meta & (op_column(ops, "meta_kind") == open_code) & (ops["result"] >= 0)]] = True
    opened[counted["file"][np.isin(counted["layer"], IO_LAYERS) & (counted["kind"] == open_code)]] = True
    opened &= np.array([f.name not in STANDARD_STREAMS for f in job.files], bool)
    moved = sums_by(ledger, "file", n, io_rows(ledger))["bytes"]
    small = opened & (moved <= SMALL_FILE_BYTES)
    calls, seconds = per_file["calls"], per_file["seconds"]
    return {"files": int(np.count_nonzero(small)), "opened": int(np.count_nonzero(opened)),
            "bytes": int(moved[small].sum()), "calls": int(calls[small].sum()),
            "seconds": float(seconds[small].sum())}
