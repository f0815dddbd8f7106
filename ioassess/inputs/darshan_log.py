"""Reading a Darshan log into a Job (docs/darshan-input.md has the mapping and the decisions).

read_darshan_log() takes the job's facts from the job record, the mount table, Lustre striping,
the DXT_POSIX and DXT_MPIIO segments as ops, and the POSIX, MPI-IO and STDIO counters of I/O
that DXT did not trace as totals with their access-size histograms. A partial log (module
flagged partial, DXT truncated, no end time, damaged module data) is read as far as it goes and
each problem becomes a sentence in the JobInput's notes. What the log holds is read by
darshan-util in a child process (ioassess.inputs.darshan_util).
"""
import math
import os

import numpy as np

from ..arrays import distinct
from ..units import count_text
from .darshan_util import COUNTER_MODULES, DXT_MODULES, SEGMENT_DTYPE, DarshanLogError, read_log_contents
from .job import (DARSHAN_RECORD_COLUMNS, DARSHAN_SIZE_BINS, DIRECTIONS, LAYERS, META, META_KIND_COLUMNS, META_KINDS,
                  NO_IO_NOTE, OP_COLUMNS, SIZE_BIN_COLUMNS, TOTAL_COLUMNS, Job, JobFile, JobInput, JobProcess,
                  empty_columns, mount_index, mount_of, with_own_file_systems)

__all__ = ["DarshanLogError", "read_darshan_log"]


# I/O that goes to neither POSIX nor MPI-IO nor STDIO, so nothing of it reaches the Job.
UNASSESSED_IO_MODULES = ("DFS", "DAOS")
_SIZE_BIN_SUFFIXES = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M", "100M_1G",
                      "1G_PLUS")
# The counters behind a totals row, per module and direction: the op counts to add up, bytes,
# summed op time, slowest op's time and size, and the access-size histogram's prefix (None where
# the module has no such counter).
_DIRECTION_COUNTERS = {
    "POSIX": {
        "read": (("POSIX_READS",), "POSIX_BYTES_READ", "POSIX_F_READ_TIME", "POSIX_F_MAX_READ_TIME",
                 "POSIX_MAX_READ_TIME_SIZE", "POSIX_SIZE_READ_"),
        "write": (("POSIX_WRITES",), "POSIX_BYTES_WRITTEN", "POSIX_F_WRITE_TIME", "POSIX_F_MAX_WRITE_TIME",
                  "POSIX_MAX_WRITE_TIME_SIZE", "POSIX_SIZE_WRITE_"),
    },
    "MPI-IO": {
        "read": (("MPIIO_INDEP_READS", "MPIIO_COLL_READS", "MPIIO_SPLIT_READS", "MPIIO_NB_READS"), "MPIIO_BYTES_READ",
                 "MPIIO_F_READ_TIME", "MPIIO_F_MAX_READ_TIME", "MPIIO_MAX_READ_TIME_SIZE", "MPIIO_SIZE_READ_AGG_"),
        "write": (("MPIIO_INDEP_WRITES", "MPIIO_COLL_WRITES", "MPIIO_SPLIT_WRITES", "MPIIO_NB_WRITES"),
                  "MPIIO_BYTES_WRITTEN", "MPIIO_F_WRITE_TIME", "MPIIO_F_MAX_WRITE_TIME", "MPIIO_MAX_WRITE_TIME_SIZE",
                  "MPIIO_SIZE_WRITE_AGG_"),
    },
    "STDIO": {
        "read": (("STDIO_READS",), "STDIO_BYTES_READ", "STDIO_F_READ_TIME", None, None, None),
        "write": (("STDIO_WRITES",), "STDIO_BYTES_WRITTEN", "STDIO_F_WRITE_TIME", None, None, None),
    },
}
# Where the columns of Job.darshan_records come from, per module (absent: -1, or NaN for a time).
_SMALL_SIZE_BINS = _SIZE_BIN_SUFFIXES[:5]   # at most 1 MiB: Drishti's small requests
_RECORD_COUNTERS = {
    "POSIX": {"reads": ("POSIX_READS",), "writes": ("POSIX_WRITES",), "consecutive_reads": ("POSIX_CONSEC_READS",),
              "consecutive_writes": ("POSIX_CONSEC_WRITES",), "sequential_reads": ("POSIX_SEQ_READS",),
              "sequential_writes": ("POSIX_SEQ_WRITES",), "syncs": ("POSIX_FSYNCS", "POSIX_FDSYNCS"),
              "bytes_read": ("POSIX_BYTES_READ",), "bytes_written": ("POSIX_BYTES_WRITTEN",),
              "small_reads": tuple("POSIX_SIZE_READ_" + s for s in _SMALL_SIZE_BINS),
              "small_writes": tuple("POSIX_SIZE_WRITE_" + s for s in _SMALL_SIZE_BINS),
              "max_byte_read": ("POSIX_MAX_BYTE_READ",), "max_byte_written": ("POSIX_MAX_BYTE_WRITTEN",),
              "mem_not_aligned": ("POSIX_MEM_NOT_ALIGNED",), "file_not_aligned": ("POSIX_FILE_NOT_ALIGNED",),
              "file_alignment": ("POSIX_FILE_ALIGNMENT",)},
    "MPI-IO": {"reads": _DIRECTION_COUNTERS["MPI-IO"]["read"][0], "writes": _DIRECTION_COUNTERS["MPI-IO"]["write"][0],
               "collective_reads": ("MPIIO_COLL_READS",), "collective_writes": ("MPIIO_COLL_WRITES",),
               "syncs": ("MPIIO_SYNCS",), "bytes_read": ("MPIIO_BYTES_READ",),
               "bytes_written": ("MPIIO_BYTES_WRITTEN",), "independent_reads": ("MPIIO_INDEP_READS",),
               "independent_writes": ("MPIIO_INDEP_WRITES",), "nonblocking_reads": ("MPIIO_NB_READS",),
               "nonblocking_writes": ("MPIIO_NB_WRITES",)},
    "STDIO": {"reads": ("STDIO_READS",), "writes": ("STDIO_WRITES",), "bytes_read": ("STDIO_BYTES_READ",),
              "bytes_written": ("STDIO_BYTES_WRITTEN",), "max_byte_read": ("STDIO_MAX_BYTE_READ",),
              "max_byte_written": ("STDIO_MAX_BYTE_WRITTEN",)},
}
# The time columns of Job.darshan_records, every record's (the module prefix before each name).
_RECORD_FCOUNTERS = {"read_s": "F_READ_TIME", "write_s": "F_WRITE_TIME", "meta_s": "F_META_TIME"}
# The metadata counters per module: the time of its metadata calls (open, close, stat, seek; for
# MPI-IO also set_view, set_size, sync...: MPI-IO's own calls, containing the POSIX ones under
# them) and the calls it counts by kind. fsync and fdatasync are not among them (Darshan counts
# their time as write time: the sync rows of _untraced_totals), nor STDIO's fflush.
_META_COUNTERS = {
    "POSIX": ("POSIX_F_META_TIME", {"open": ("POSIX_OPENS",), "stat": ("POSIX_STATS",), "seek": ("POSIX_SEEKS",)}),
    "MPI-IO": ("MPIIO_F_META_TIME", {"open": ("MPIIO_INDEP_OPENS", "MPIIO_COLL_OPENS")}),
    "STDIO": ("STDIO_F_META_TIME", {"open": ("STDIO_OPENS",), "seek": ("STDIO_SEEKS",)}),
}
_RANK_COUNTERS = {"fastest_rank": "FASTEST_RANK", "fastest_bytes": "FASTEST_RANK_BYTES",
                  "slowest_rank": "SLOWEST_RANK", "slowest_bytes": "SLOWEST_RANK_BYTES"}
_RANK_FCOUNTERS = {"fastest_s": "F_FASTEST_RANK_TIME", "slowest_s": "F_SLOWEST_RANK_TIME",
                   "variance_s": "F_VARIANCE_RANK_TIME", "variance_bytes": "F_VARIANCE_RANK_BYTES"}
# Access-size bin of a size: the number of bin upper edges below it (the first bin includes 0).
_SIZE_BIN_UPPER_EDGES = np.array([high for _, high in DARSHAN_SIZE_BINS[:-1]], np.int64)
NOTE_LIST_LIMIT = 3  # files (and counters) named in a note before "and N more"
# A DXT segment larger, or starting or lasting longer (in seconds), is damaged data; so is a
# counter's time longer than MAX_SECONDS (31 years: no job's, and 65,536 ranks' sum stays finite)
# and a count or byte count above MAX_COUNT (no job's: 8 PiB in one record; the largest integer a
# float holds exactly, and a sum over 1024 such records still fits in int64).
MAX_SEGMENT_BYTES = 1 << 50
MAX_SECONDS = 1e9
MAX_COUNT = 1 << 53


def valid_seconds(values):
    """Which of a Darshan log's times can be true: finite, at least 0 and at most MAX_SECONDS."""
    return np.isfinite(values) & (values >= 0) & (values <= MAX_SECONDS)


# The kinds of damaged counter values, one rule each: (what the note calls them, which values).
# A value that is damaged takes the first kind that matches; a time is damaged where
# valid_seconds says so, a count or byte count where it is negative or above MAX_COUNT.
TIME_DAMAGE = (
    ("times that are not a number (NaN)", np.isnan),
    ("infinite times", np.isinf),
    ("negative times", lambda values: values < 0),
    ("times above 10^9 s (no job's)", lambda values: values > MAX_SECONDS),
)
COUNT_DAMAGE = (
    ("negative counts", lambda values: values < 0),
    ("counts above 2^53 (no job's)", lambda values: values > MAX_COUNT),
)
# Darshan's variance of the bytes over the ranks (bytes squared, a float): damaged where it is
# not finite or negative (a time's bound does not apply).
VARIANCE_BYTES_DAMAGE = TIME_DAMAGE[:3]
RANK_DAMAGE = "fastest or slowest ranks the job did not have"
# The counters, by name without the module prefix, that describe one op, rank or offset rather
# than add up: damaged, they are unknown (NaN, -1), not 0.
_UNKNOWN_WHEN_DAMAGED = ("F_MAX_READ_TIME", "F_MAX_WRITE_TIME", "MAX_READ_TIME_SIZE", "MAX_WRITE_TIME_SIZE",
                         "FASTEST_RANK", "SLOWEST_RANK", "FASTEST_RANK_BYTES", "SLOWEST_RANK_BYTES",
                         "F_FASTEST_RANK_TIME", "F_SLOWEST_RANK_TIME", "F_VARIANCE_RANK_TIME",
                         "F_VARIANCE_RANK_BYTES", "MAX_BYTE_READ", "MAX_BYTE_WRITTEN", "FILE_ALIGNMENT")


def read_darshan_log(path):
    """The Job a Darshan log describes (see the module doc). Raises DarshanLogError if the file
    is not a readable Darshan 3 log, or its job record or all of its I/O data cannot be read."""
    path = os.fspath(path)
    return _assemble_job(path, read_log_contents(path))


# --- the Job ---------------------------------------------------------------------------------

def _assemble_job(path, contents):
    job = contents.job
    problems = list(contents.problems)
    start_epoch_s = job["start_time_sec"] + job["start_time_nsec"] * 1e-9
    finished = job["end_time_sec"] > 0 and job["runtime_s"] > 0
    if job["end_time_sec"] <= 0:
        problems.append("The log has no end time (the job did not finish: the mmap log of a killed process, or "
                        "a log rebuilt from a killed job's data): the log does not give the job's runtime.")
    elif not finished:
        problems.append("The log's end time is not after its start time: the job's runtime is unknown.")
    elif job["runtime_s"] > MAX_SECONDS:
        finished = False
        problems.append("The log's end time is more than 10^9 s after its start time (no job's: damaged data): "
                        "the job's runtime is unknown.")
    problems += _partial_module_problems(contents.modules)

    segments, segment_group, dxt_groups = _dxt_tables(contents.dxt, problems)
    counters = _undamaged_counters(contents.counters, contents.names, job["nprocs"], problems)
    counter_rows, bins = _counter_tables(counters)
    totals, size_bins, missing = _untraced_totals(counter_rows, bins, dxt_groups)
    problems += _truncated_dxt_problems(missing, contents.names)
    io_rows = len(totals["ops"])
    meta_totals, meta_kinds = _metadata_tables(counters)
    totals = {name: np.concatenate([column, meta_totals[name]]) for name, column in totals.items()}

    records = _record_table(counters)
    traced = dxt_groups["ops"] > 0
    named_ranks = np.concatenate([records["fastest_rank"], records["slowest_rank"]])
    processes, rank_of_process = _processes(contents, dxt_groups["rank"][traced],
                                            np.concatenate([totals["rank"], named_ranks]), _exe(contents.cmdline))
    files, file_index = _files(contents, dxt_groups["record_id"][traced], totals["record_id"], records["record_id"])
    records["file"] = _position(records.pop("record_id"), file_index)
    ops = _op_columns(segments, segment_group, dxt_groups, file_index, rank_of_process)
    totals_columns = _indexed(totals, TOTAL_COLUMNS, file_index, rank_of_process)
    size_bin_columns = _indexed(size_bins, SIZE_BIN_COLUMNS, file_index, rank_of_process)
    meta_kind_columns = _indexed(meta_kinds, META_KIND_COLUMNS, file_index, rank_of_process)
    tiers = tuple(tier for tier, present in (("ops", len(ops["size"])), ("totals", io_rows),
                                             ("metadata", True)) if present)
    if tiers == ("metadata",):
        problems.append(NO_IO_NOTE)
    return Job(
        job_id=str(job["jobid"]),
        exe=_exe(contents.cmdline),
        cmdline=contents.cmdline,
        user=_user_name(job["uid"]),
        start_epoch_s=start_epoch_s,
        end_epoch_s=start_epoch_s + job["runtime_s"] if finished else math.nan,
        nprocs=int(job["nprocs"]) if job["nprocs"] > 0 else len(processes),
        processes=processes,
        files=files,
        ops=ops,
        totals=totals_columns,
        size_bins=size_bin_columns,
        mounts=list(contents.mounts),
        inputs=[JobInput(path=path, kind="darshan", tiers=tiers, notes=tuple(problems))],
        darshan_records={name: np.asarray(records[name], dtype) for name, dtype in DARSHAN_RECORD_COLUMNS.items()},
        meta_kinds=meta_kind_columns,
        unassessed=unassessed_amounts(contents.unassessed),
    )


def unassessed_amounts(unassessed):
    """Job.unassessed of the records of UNASSESSED_MODULES (LogContents.unassessed): per module,
    its records, bytes read and written and seconds reading and writing, summed over its records
    (a negative count or an impossible time is taken as 0, as in the modules assessed). PnetCDF's
    file records count the bytes of its variable records again: taken only without those."""
    amounts = {}
    for module, (records, names, fnames) in unassessed.items():
        if module == "PNETCDF_FILE" and "PNETCDF_VAR" in unassessed:
            continue
        counters, fcounters = records["counters"], records["fcounters"]

        def counted(name):
            return int(np.maximum(counters[:, names.index(name)], 0).sum()) if name in names else 0

        def seconds(name):
            if name not in fnames:
                return None
            values = fcounters[:, fnames.index(name)]
            return float(values[valid_seconds(values)].sum())
        amounts[module] = {"records": len(records), "bytes_read": counted(f"{module}_BYTES_READ"),
                           "bytes_written": counted(f"{module}_BYTES_WRITTEN"),
                           "read_s": seconds(f"{module}_F_READ_TIME"), "write_s": seconds(f"{module}_F_WRITE_TIME")}
    return amounts


def _exe(cmdline):
    return cmdline.split(" ", 1)[0]


def _user_name(uid):
    """"uid N": a log usually comes from another machine, whose user names this one cannot know."""
    return f"uid {uid}"


_PARTIAL_CONSEQUENCES = {
    "POSIX": "the POSIX I/O of some files is missing from its counters",
    "MPI-IO": "the MPI-IO I/O of some files is missing from its counters",
    "STDIO": "the STDIO I/O of some files is missing from its counters",
    "LUSTRE": "the striping of some files is unknown",
    "DXT_POSIX": "some POSIX operations are missing from the DXT trace",
    "DXT_MPIIO": "some MPI-IO operations are missing from the DXT trace",
}


def _partial_module_problems(modules):
    problems = []
    for module, info in modules.items():
        if info["partial"] and module in _PARTIAL_CONSEQUENCES:
            problems.append(f"Darshan's {module} module ran out of memory during the job (the log flags it "
                            f"partial): {_PARTIAL_CONSEQUENCES[module]}.")
    for module in UNASSESSED_IO_MODULES:
        if module in modules:
            problems.append(f"The log has {module} records: that I/O is not assessed (only POSIX, MPI-IO and "
                            f"STDIO are).")
    return problems


def _dxt_tables(dxt, problems):
    """(segments, segment_group, groups) of every DXT module: the segments, each one's group,
    and per group (one per record and direction) record_id, rank, layer, direction and the
    segments' count (ops), bytes, summed and longest duration and access-size histogram.
    Segments with impossible values (damaged data that still decompressed) are left out and
    noted."""
    segment_tables, group_tables, n_groups_before = [], [], 0
    for module, (records, segments) in dxt.items():
        # Each record holds its write segments, then its read segments.
        group_sizes = np.stack([records["write_count"], records["read_count"]], axis=1).reshape(-1)
        group_record = np.repeat(np.arange(len(records)), 2)
        segment_group = np.repeat(np.arange(len(group_sizes)), group_sizes)
        valid = _valid_segments(segments)
        if not np.all(valid):
            problems.append(f"{module} segments with impossible values (negative or huge sizes, times that are not "
                            f"finite or end before they start) are left out: {np.count_nonzero(~valid)} of them.")
            segments, segment_group = segments[valid], segment_group[valid]
            group_sizes = np.bincount(segment_group, minlength=len(group_sizes))
        durations = segments["end"] - segments["start"]
        n_groups, n_bins = len(group_sizes), len(DARSHAN_SIZE_BINS)
        size_bin = np.searchsorted(_SIZE_BIN_UPPER_EDGES, segments["length"], side="left")
        group_tables.append({
            "record_id": records["id"][group_record],
            "rank": records["rank"][group_record],
            "layer": np.full(n_groups, LAYERS.index(DXT_MODULES[module]), np.uint8),
            "direction": np.tile(np.array([DIRECTIONS.index("write"), DIRECTIONS.index("read")], np.uint8),
                                 len(records)),
            "ops": group_sizes,
            "bytes": _consecutive_group_reduce(np.add, segments["length"], group_sizes, 0),
            "seconds": _consecutive_group_reduce(np.add, durations, group_sizes, 0.0),
            "max_seconds": _consecutive_group_reduce(np.maximum, durations, group_sizes, -np.inf),
            "bins": np.bincount(segment_group * n_bins + size_bin,
                                minlength=n_groups * n_bins).reshape(n_groups, n_bins),
        })
        segment_tables.append((segments, segment_group + n_groups_before))
        n_groups_before += n_groups
    groups = _concatenated(group_tables, _EMPTY_DXT_GROUPS)
    if len(segment_tables) == 1:  # no copy of what may be millions of segments
        return (*segment_tables[0], groups)
    segments = np.concatenate([t[0] for t in segment_tables]) if segment_tables else np.zeros(0, SEGMENT_DTYPE)
    segment_group = np.concatenate([t[1] for t in segment_tables]) if segment_tables else np.zeros(0, np.int64)
    return segments, segment_group, groups


def _valid_segments(segments):
    with np.errstate(over="ignore", invalid="ignore"):
        durations = segments["end"] - segments["start"]
        times_valid = (np.abs(segments["start"]) <= MAX_SECONDS) & (0 <= durations) & \
            (durations <= MAX_SECONDS)
    return times_valid & (segments["length"] >= 0) & (segments["length"] <= MAX_SEGMENT_BYTES)


_EMPTY_DXT_GROUPS = {"record_id": np.uint64, "rank": np.int64, "layer": np.uint8, "direction": np.uint8,
                     "ops": np.int64, "bytes": np.int64, "seconds": np.float64, "max_seconds": np.float64,
                     "bins": (np.int64, len(DARSHAN_SIZE_BINS))}


def _concatenated(tables, dtypes):
    if not tables:
        return {name: np.zeros((0,) + dtype[1:] if isinstance(dtype, tuple) else 0,
                               dtype[0] if isinstance(dtype, tuple) else dtype) for name, dtype in dtypes.items()}
    return {name: np.concatenate([table[name] for table in tables]) for name in dtypes}


def _consecutive_group_reduce(ufunc, values, sizes, empty):
    """ufunc reduced over each run of `sizes` consecutive values (`empty` for an empty run)."""
    reduced = np.full(len(sizes), empty, values.dtype)
    nonempty = sizes > 0
    if np.any(nonempty):
        starts = np.cumsum(sizes) - sizes
        reduced[nonempty] = ufunc.reduceat(values, starts[nonempty])
    return reduced


def _used_counters(module):
    """The names of a module's counters and fcounters the Job is made of (the tables above)."""
    prefix = module.replace("-", "") + "_"
    used = set()
    for op_names, *names, bins_prefix in _DIRECTION_COUNTERS[module].values():
        used |= {*op_names, *names} | {bins_prefix + suffix for suffix in _SIZE_BIN_SUFFIXES if bins_prefix}
    for names in _RECORD_COUNTERS[module].values():
        used |= set(names)
    seconds_name, kinds = _META_COUNTERS[module]
    used |= {seconds_name, *(name for names in kinds.values() for name in names)}
    used |= {prefix + name for name in (*_RANK_COUNTERS.values(), *_RANK_FCOUNTERS.values(),
                                        *_RECORD_FCOUNTERS.values())}
    return used


def _damage_rules(name, nprocs):
    """The kinds of damage (kind, which values) a counter of this name can have."""
    if name.endswith(("_FASTEST_RANK", "_SLOWEST_RANK")):
        return ((RANK_DAMAGE, lambda values: (values < 0) | (values >= nprocs)),)
    if name.endswith("_F_VARIANCE_RANK_BYTES"):
        return VARIANCE_BYTES_DAMAGE
    return TIME_DAMAGE if "_F_" in name else COUNT_DAMAGE


def _undamaged_counters(counters, names, nprocs, problems):
    """The counter records (LogContents.counters) with every damaged value of a counter the Job
    is made of (_used_counters) replaced: by unknown (NaN, -1) in the counters that describe one
    op, rank or offset (_UNKNOWN_WHEN_DAMAGED), else by 0. Damaged: a time that is not a number,
    infinite, negative (-1.9e-304 too) or above MAX_SECONDS (TIME_DAMAGE); a count or byte count
    that is negative or above MAX_COUNT (COUNT_DAMAGE); a fastest or slowest rank the job did
    not have. One note per kind of damage names the counters and their files. The records are
    copied only where something is damaged."""
    damaged_by_kind = {}   # kind -> {counter name: record ids}
    cleaned = {}
    for module, (records, counter_names, fcounter_names) in counters.items():
        used = _used_counters(module)
        replacements = []   # (field, column, rows, value)
        for field, field_names in (("fcounters", fcounter_names), ("counters", counter_names)):
            for column, name in enumerate(field_names):
                if name not in used:
                    continue
                values = records[field][:, column]
                left = np.ones(len(values), bool)
                with np.errstate(invalid="ignore"):
                    for kind, rule in _damage_rules(name, nprocs):
                        rows = left & rule(values)
                        if rows.any():
                            left &= ~rows
                            damaged_by_kind.setdefault(kind, {}).setdefault(name, []).append(records["id"][rows])
                if not left.all():
                    unknown = name.split("_", 1)[1] in _UNKNOWN_WHEN_DAMAGED
                    value = (np.nan if field == "fcounters" else -1) if unknown else 0
                    replacements.append((field, column, ~left, value))
        if replacements:
            records = records.copy()
            for field, column, rows, value in replacements:
                records[field][rows, column] = value
        cleaned[module] = (records, counter_names, fcounter_names)
    kinds = [kind for kind, _ in TIME_DAMAGE + COUNT_DAMAGE] + [RANK_DAMAGE]
    for kind in sorted(damaged_by_kind, key=kinds.index):
        problems.append(_damage_note(kind, {name: np.concatenate(ids) for name, ids in
                                            damaged_by_kind[kind].items()}, names))
    return cleaned


def _damage_note(kind, damaged, names):
    """The note on one kind of damaged counter values: damaged {counter name: record ids}."""
    listed = []
    by_records = sorted(damaged.items(), key=lambda item: -len(item[1]))
    for name, record_ids in by_records[:NOTE_LIST_LIMIT]:
        files = list(dict.fromkeys(_file_name(names, record_id) for record_id in record_ids.tolist()))
        more = f" and {count_text(len(files) - NOTE_LIST_LIMIT, 'more file')}" if len(files) > NOTE_LIST_LIMIT else ""
        listed.append(f"{name} in {count_text(len(record_ids), 'record')} ({', '.join(files[:NOTE_LIST_LIMIT])}"
                      f"{more})")
    more = f" and {count_text(len(damaged) - NOTE_LIST_LIMIT, 'more counter')}" if len(damaged) > NOTE_LIST_LIMIT \
        else ""
    unknown = [name.split("_", 1)[1] in _UNKNOWN_WHEN_DAMAGED for name in damaged]
    taken = "they are unknown" if all(unknown) else "they are taken as 0" if not any(unknown) else \
        "they are taken as 0, or as unknown where they are a slowest op's time or size, a fastest or slowest " \
        "rank, a variance over the ranks, a highest offset or an alignment"
    return (f"Damaged counter values, {kind} (a bug of some older Darshan versions, or damaged data): "
            f"{'; '.join(listed)}{more}; {taken}.")


def _counter_tables(counters):
    """(rows, bins): per counter record and direction, the record id, rank, layer, direction,
    ops, bytes, seconds, max_op_seconds, max_op_size and has_bins; bins the (n, 10) histogram.
    The counters are _undamaged_counters'."""
    row_tables, bin_tables = [], []
    for module, (records, names, fnames) in counters.items():
        layer = LAYERS.index(COUNTER_MODULES[module])
        counter, fcounter = records["counters"], records["fcounters"]
        for direction, (op_names, bytes_name, seconds_name, max_seconds_name, max_size_name, bins_prefix) in \
                _DIRECTION_COUNTERS[module].items():
            ops = sum(counter[:, names.index(name)] for name in op_names)
            byte_count = counter[:, names.index(bytes_name)]
            seconds = fcounter[:, fnames.index(seconds_name)]
            if bins_prefix:
                bins = counter[:, [names.index(bins_prefix + suffix) for suffix in _SIZE_BIN_SUFFIXES]]
            else:
                bins = np.zeros((len(records), len(DARSHAN_SIZE_BINS)), np.int64)
            unknown = np.full(len(records), -1)
            max_seconds = fcounter[:, fnames.index(max_seconds_name)] if max_seconds_name else unknown
            max_size = counter[:, names.index(max_size_name)] if max_size_name else unknown
            row_tables.append({
                "record_id": records["id"], "rank": records["rank"], "layer": np.full(len(records), layer, np.uint8),
                "direction": np.full(len(records), DIRECTIONS.index(direction), np.uint8),
                "ops": ops, "bytes": byte_count, "seconds": seconds,
                "max_op_seconds": max_seconds if max_seconds_name else np.full(len(records), np.nan),
                "max_op_size": max_size,
                "has_bins": np.full(len(records), bins_prefix is not None),
                "syncs": _synccount_text(module, direction, counter, names),
            })
            bin_tables.append(bins)
    rows = _concatenated(row_tables, {"record_id": np.uint64, "rank": np.int64, "layer": np.uint8,
                                      "direction": np.uint8, "ops": np.int64, "bytes": np.int64,
                                      "seconds": np.float64, "max_op_seconds": np.float64,
                                      "max_op_size": np.int64, "has_bins": bool, "syncs": np.int64})
    bins = np.concatenate(bin_tables) if bin_tables else np.zeros((0, len(DARSHAN_SIZE_BINS)), np.int64)
    return rows, bins


def _metadata_tables(counters):
    """(totals, kinds): per counter record with metadata calls or time, a totals row of direction
    META (its calls counted by kind summed, bytes 0, seconds its *_F_META_TIME) and per kind
    counted its calls (record_id and rank in place of file and process). The counters are
    _undamaged_counters'."""
    rows, kind_rows = [], []
    for module, (records, names, fnames) in counters.items():
        seconds_name, kinds = _META_COUNTERS[module]
        n = len(records)
        seconds = records["fcounters"][:, fnames.index(seconds_name)] if seconds_name in fnames else np.zeros(n)
        layer = np.full(n, LAYERS.index(COUNTER_MODULES[module]), np.uint8)
        per_kind = {kind: sum(records["counters"][:, names.index(name)] if name in names else 0
                              for name in kind_names) + np.zeros(n, np.int64) for kind, kind_names in kinds.items()}
        calls = sum(per_kind.values())
        chosen = (calls > 0) | (seconds > 0)
        rows.append({"record_id": records["id"][chosen], "rank": records["rank"][chosen], "layer": layer[chosen],
                     "direction": np.full(np.count_nonzero(chosen), META, np.uint8), "ops": calls[chosen],
                     "bytes": np.zeros(np.count_nonzero(chosen), np.int64), "seconds": seconds[chosen],
                     "max_op_seconds": np.full(np.count_nonzero(chosen), np.nan),
                     "max_op_size": np.full(np.count_nonzero(chosen), -1)})
        for kind, counted in per_kind.items():
            here = counted > 0
            kind_rows.append({"record_id": records["id"][here], "rank": records["rank"][here], "layer": layer[here],
                              "kind": np.full(np.count_nonzero(here), META_KINDS.index(kind), np.uint8),
                              "ops": counted[here]})
    totals = _concatenated(rows, {"record_id": np.uint64, "rank": np.int64, "layer": np.uint8, "direction": np.uint8,
                                  "ops": np.int64, "bytes": np.int64, "seconds": np.float64,
                                  "max_op_seconds": np.float64, "max_op_size": np.int64})
    kinds = _concatenated(kind_rows, {"record_id": np.uint64, "rank": np.int64, "layer": np.uint8,
                                      "kind": np.uint8, "ops": np.int64})
    return totals, kinds


def _record_table(counters):
    """The columns of Job.darshan_records (record_id in place of file) of the counter records
    with reads or writes (_undamaged_counters'). The fastest (slowest) rank of a shared record
    is known with its time and bytes or not at all: where its rank, time or bytes were damaged,
    all three are unknown (-1, NaN, -1)."""
    tables = []
    for module, (records, names, fnames) in counters.items():
        n = len(records)
        prefix = module.replace("-", "") + "_"

        def counter(name):
            return records["counters"][:, names.index(name)] if name in names else np.full(n, -1)

        def seconds(name):
            return records["fcounters"][:, fnames.index(name)] if name in fnames else np.full(n, np.nan)

        table = {"record_id": records["id"], "rank": records["rank"],
                 "layer": np.full(n, LAYERS.index(COUNTER_MODULES[module]), np.uint8)}
        for column in DARSHAN_RECORD_COLUMNS:
            if column in _RECORD_COUNTERS[module]:
                table[column] = sum(np.maximum(counter(name), 0) for name in _RECORD_COUNTERS[module][column])
            elif column in _RANK_COUNTERS:
                table[column] = np.where(records["rank"] < 0, counter(prefix + _RANK_COUNTERS[column]), -1)
            elif column in _RANK_FCOUNTERS:
                values = seconds(prefix + _RANK_FCOUNTERS[column])
                table[column] = np.where(records["rank"] < 0, values, np.nan)
            elif column in _RECORD_FCOUNTERS:
                table[column] = seconds(prefix + _RECORD_FCOUNTERS[column])
            elif column not in table and column != "file":
                table[column] = np.full(n, -1)
        for end in ("fastest", "slowest"):
            known = (table[f"{end}_rank"] >= 0) & np.isfinite(table[f"{end}_s"]) & (table[f"{end}_bytes"] >= 0)
            table[f"{end}_rank"] = np.where(known, table[f"{end}_rank"], -1)
            table[f"{end}_s"] = np.where(known, table[f"{end}_s"], np.nan)
            table[f"{end}_bytes"] = np.where(known, table[f"{end}_bytes"], -1)
        with_io = (table["reads"] > 0) | (table["writes"] > 0)
        tables.append({name: column[with_io] for name, column in table.items()})
    dtypes = {"record_id": np.uint64,
              **{name: dtype for name, dtype in DARSHAN_RECORD_COLUMNS.items() if name != "file"}}
    return _concatenated(tables, dtypes)


def _synccount_text(module, direction, counter, names):
    """fsync and fdatasync calls of a POSIX write row (Darshan counts their time as write time);
    0 for other rows."""
    if module != "POSIX" or direction != "write":
        return np.zeros(len(counter), np.int64)
    return sum(counter[:, names.index(name)] for name in _RECORD_COUNTERS["POSIX"]["syncs"])


def _untraced_totals(rows, bins, dxt_groups):
    """The counters' I/O that DXT did not trace: (totals, size_bins, missing). A counter record
    is compared with the DXT segments of its file at its rank, or at every rank for a shared
    record (rank -1); rows fully traced are dropped, rows traced in part (DXT truncated) keep
    what DXT lacks. missing: per row traced in part, record_id, rank, layer and ops missing."""
    coverage = _dxt_coverage(rows, dxt_groups)
    traced_ops = coverage["ops"]
    untraced = (rows["ops"] > 0) & (traced_ops < rows["ops"])
    in_part = untraced & (traced_ops > 0)
    slowest_untraced = rows["max_op_seconds"] > coverage["max_seconds"]
    seconds_untraced = np.maximum(rows["seconds"] - coverage["seconds"], 0.0)
    totals = {
        "record_id": rows["record_id"], "rank": rows["rank"], "layer": rows["layer"], "direction": rows["direction"],
        "ops": rows["ops"] - traced_ops,
        "bytes": np.maximum(rows["bytes"] - coverage["bytes"], 0),
        "seconds": seconds_untraced,
        "max_op_seconds": np.where(slowest_untraced | (traced_ops == 0), rows["max_op_seconds"], np.nan),
        "max_op_size": np.where(slowest_untraced | (traced_ops == 0), rows["max_op_size"], -1),
    }
    totals = {name: column[untraced] for name, column in totals.items()}
    remaining_bins = np.maximum(bins - coverage["bins"], 0)[untraced & rows["has_bins"]]
    binned = {name: column[rows["has_bins"][untraced]] for name, column in totals.items()}
    # A write row DXT traced in full whose counted time exceeds its segments' time: the rest is
    # the time of its fsync and fdatasync calls, which Darshan counts as write time.
    synced = (rows["syncs"] > 0) & (rows["ops"] > 0) & ~untraced & (seconds_untraced > 0)
    n_synced = np.count_nonzero(synced)
    syncs = {"record_id": rows["record_id"][synced], "rank": rows["rank"][synced], "layer": rows["layer"][synced],
             "direction": np.full(n_synced, DIRECTIONS.index("sync")), "ops": rows["syncs"][synced],
             "bytes": np.zeros(n_synced, np.int64), "seconds": seconds_untraced[synced],
             "max_op_seconds": np.full(n_synced, np.nan), "max_op_size": np.full(n_synced, -1)}
    totals = {name: np.concatenate([column, syncs[name]]) for name, column in totals.items()}
    row, bin_index = np.nonzero(remaining_bins)
    size_bins = {
        "record_id": binned["record_id"][row], "rank": binned["rank"][row], "layer": binned["layer"][row],
        "direction": binned["direction"][row],
        "size_low": np.array([low for low, _ in DARSHAN_SIZE_BINS], np.int64)[bin_index],
        "size_high": np.array([high for _, high in DARSHAN_SIZE_BINS], np.int64)[bin_index],
        "ops": remaining_bins[row, bin_index],
    }
    missing = {name: rows[name][in_part] for name in ("record_id", "rank", "layer")}
    missing["ops"] = (rows["ops"] - traced_ops)[in_part]
    missing["counted"] = rows["ops"][in_part]
    return totals, size_bins, missing


def _dxt_coverage(rows, groups):
    """Per counter row, the DXT groups of the same layer, file and direction summed: at the
    row's rank, or at every rank when the row is a shared record (rank -1)."""
    file_key = np.stack([groups["layer"].astype(np.int64), groups["record_id"].view(np.int64),
                         groups["direction"].astype(np.int64)], axis=1)
    row_file_key = np.stack([rows["layer"].astype(np.int64), rows["record_id"].view(np.int64),
                             rows["direction"].astype(np.int64)], axis=1)
    at_rank = _summed_by_key(np.column_stack([row_file_key, rows["rank"]]),
                             np.column_stack([file_key, groups["rank"]]), groups)
    every_rank = _summed_by_key(row_file_key, file_key, groups)
    shared = rows["rank"] < 0
    return {name: np.where(shared.reshape((-1,) + (1,) * (at_rank[name].ndim - 1)), every_rank[name], at_rank[name])
            for name in at_rank}


def _summed_by_key(row_keys, group_keys, groups):
    """For each row key, the groups' ops, bytes, seconds, bins summed and max_seconds maximised
    over the groups with that key (0, and -inf for max_seconds, where there are none)."""
    keys, inverse = np.unique(np.concatenate([row_keys, group_keys]), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    row_key, group_key = inverse[:len(row_keys)], inverse[len(row_keys):]
    summed = {}
    for name in ("ops", "bytes", "seconds", "bins"):
        by_key = np.zeros((len(keys),) + groups[name].shape[1:], groups[name].dtype)
        np.add.at(by_key, group_key, groups[name])
        summed[name] = by_key[row_key]
    longest = np.full(len(keys), -np.inf)
    np.maximum.at(longest, group_key, groups["max_seconds"])
    summed["max_seconds"] = longest[row_key]
    return summed


def _truncated_dxt_problems(missing, names):
    """One sentence per DXT module whose trace lacks operations its layer's counters count."""
    problems = []
    for layer in distinct(missing["layer"]):
        here = missing["layer"] == layer
        layer_name = LAYERS[layer]
        module = {v: k for k, v in DXT_MODULES.items()}[layer_name]
        counters_module = {v: k for k, v in COUNTER_MODULES.items()}[layer_name]
        by_file = {}
        for record_id, rank, ops in zip(missing["record_id"][here].tolist(), missing["rank"][here].tolist(),
                                        missing["ops"][here].tolist()):
            ranks, total = by_file.get(record_id, (set(), 0))
            by_file[record_id] = (ranks | {rank}, total + ops)
        worst = sorted(by_file.items(), key=lambda item: -item[1][1])
        listed = [f"{_file_name(names, record_id)} ({_ranks_text(ranks)}: {ops} missing)"
                  for record_id, (ranks, ops) in worst[:NOTE_LIST_LIMIT]]
        more = f" and {count_text(len(worst) - NOTE_LIST_LIMIT, 'more file')}" if len(worst) > NOTE_LIST_LIMIT else ""
        total_missing, total_counted = int(missing["ops"][here].sum()), int(missing["counted"][here].sum())
        problems.append(f"The {module} trace is truncated (DXT stops recording when its buffer is full): it lacks "
                        f"{total_missing} of the {total_counted} operations the {counters_module} counters count "
                        f"in {count_text(len(worst), 'file')}, {', '.join(listed)}{more}; those operations are "
                        f"assessed from the counters.")
    return problems


def _ranks_text(ranks):
    if ranks == {-1}:
        return "all ranks"
    ranks = sorted(ranks)
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"{len(ranks)} ranks"


def _file_name(names, record_id):
    return names.get(record_id, f"<unknown record 0x{record_id:016x}>")


def _processes(contents, traced_ranks, other_ranks, exe):
    """One JobProcess per rank with DXT segments, totals rows of its own, or named the fastest
    or slowest of a shared record (other_ranks; -1 ignored), by rank; and the ranks in that
    order, for indexing."""
    ranks = distinct(np.concatenate([traced_ranks, other_ranks[other_ranks >= 0]]))
    hostnames = {}
    for records, _ in contents.dxt.values():
        for rank, hostname in zip(records["rank"].tolist(), records["hostname"].tolist()):
            if hostname:
                hostnames.setdefault(rank, hostname.decode("utf-8", "backslashreplace"))
    processes = [JobProcess(rank=rank, hostname=hostnames.get(rank, ""), pid=0, exe=exe, start_s=math.nan,
                            end_s=math.nan, end_reason="unknown", exit_status=None, source="darshan")
                 for rank in ranks.tolist()]
    return processes, ranks


def _files(contents, *record_id_columns):
    """The JobFiles of the records that rows refer to, by name, with their mount point, file
    system and Lustre striping; and their record ids in that order, for indexing. A file of a
    LUSTRE record is on Lustre whatever the mount table says (a container's may list only its
    overlay "/"): with_own_file_systems gives its mount point."""
    record_ids = distinct(np.concatenate(record_id_columns))
    names = [_file_name(contents.names, record_id) for record_id in record_ids.tolist()]
    order = sorted(range(len(names)), key=names.__getitem__)
    files = []
    mounts = mount_index(contents.mounts)
    for i in order:
        mount_point, fs_type = mount_of(names[i], mounts)
        striping = contents.lustre.get(int(record_ids[i]))
        files.append(JobFile(names[i], mount_point, fs_type if striping is None else "lustre",
                             *(striping or (-1, -1, ()))))
    return with_own_file_systems(files, contents.mounts), record_ids[np.array(order, np.int64)]


def _position(values, ordered):
    """Index of each value in `ordered`, an array holding every value once (any order)."""
    sorter = np.argsort(ordered, kind="stable")
    return sorter[np.searchsorted(ordered, values, sorter=sorter)]


def _op_columns(segments, segment_group, groups, file_record_ids, process_ranks):
    """The ops: one per DXT segment, with file and process indices looked up per group (there
    are few groups and many segments), sorted by process and start time."""
    traced = groups["ops"] > 0
    group_process = np.zeros(len(traced), OP_COLUMNS["process"])
    group_file = np.zeros(len(traced), OP_COLUMNS["file"])
    group_process[traced] = _position(groups["rank"][traced], process_ranks)
    group_file[traced] = _position(groups["record_id"][traced], file_record_ids)
    order = np.lexsort((segments["start"], group_process[segment_group]))
    segment_group = segment_group[order]
    start = segments["start"][order]
    n = len(segments)
    columns = {
        "process": group_process[segment_group], "file": group_file[segment_group],
        "layer": groups["layer"][segment_group], "direction": groups["direction"][segment_group],
        "offset": segments["offset"][order], "size": segments["length"][order], "result": segments["length"][order],
        "start_s": start, "duration_s": segments["end"][order] - start,
        "buffer": np.zeros(n, np.uint64), "tid": np.zeros(n, np.uint32),
    }
    return {name: np.asarray(columns[name], dtype) for name, dtype in OP_COLUMNS.items()}


def _indexed(table, columns, file_record_ids, process_ranks):
    """Columns of a totals, size-bins or metadata-kinds table, record ids and ranks turned into file and process
    indices (rank -1 stays -1)."""
    if not len(table["rank"]):
        return empty_columns(columns)
    process = np.full(len(table["rank"]), -1, np.int64)
    own = table["rank"] >= 0
    process[own] = _position(table["rank"][own], process_ranks)
    values = dict(table, process=process, file=_position(table["record_id"], file_record_ids))
    order = np.lexsort((values["direction" if "direction" in values else "kind"], values["layer"], values["file"],
                        values["process"]))
    return {name: np.asarray(values[name], dtype)[order] for name, dtype in columns.items()}
