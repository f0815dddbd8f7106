"""Reading recorder traces (one file per process, see docs/trace-format.md) into columns.

read_trace_dir() reads a job's trace files into one TraceSet: the op records as numpy columns
with times in ns since the epoch (and, for the ops the recorder sampled, the state of their
pages in the page cache: PAGECACHE_COLUMNS), the processes, the files and the summary table
entries of ops past the record cap. totals() adds both kinds of ops up per group. A file that is not a
valid trace becomes a TraceFileError in TraceSet.errors and the rest is still read.
"""
import contextlib
import dataclasses
import errno
import math
import os
import stat

import numpy as np

from ..arrays import distinct
from ..parallel import in_parallel, workers_here
from . import traceformat as tf
from .job import MAX_RANKS, PAGECACHE_COLUMNS

OP_COLUMNS = {
    "process": np.int32,  # index into TraceSet.processes
    "op": np.uint8,  # enum ioassess_op, see traceformat.OP_NAMES
    "file_id": np.uint64,
    "offset": np.int64,  # -1 if unknown (O_APPEND)
    "requested": np.uint64,
    "result": np.int64,  # bytes returned, or -errno
    "start_ns": np.int64,  # ns since the epoch
    "duration_ns": np.int64,
    "buffer": np.uint64,
    "tid": np.uint32,
    "flags": np.uint16,  # traceformat.OpFlag: collective, under collective MPI-IO, ...
    **PAGECACHE_COLUMNS,  # the kernel's page-cache state of the ops sampled, -1 for the others
}
OP_COLUMNS.update(PAGECACHE_COLUMNS)
SUMMARY_COLUMNS = {
    "process": np.int32,
    "file_id": np.uint64,  # 0: other files (the table was full)
    "op": np.uint8,
    "size_bucket": np.uint8,  # requests of [2**(b-1), 2**b) bytes; 0: 0-byte requests
    "count": np.int64,
    "bytes_requested": np.int64,
    "bytes_returned": np.int64,
    "errors": np.int64,
    "duration_ns": np.int64,  # sum over the entry's ops
    "duration_hist": np.int64,  # (n, HIST_BINS): ops per log2 duration bin in ticks
    "hist_ns_per_tick": np.float64,  # bin b spans [2**b, 2**(b+1)) * hist_ns_per_tick ns
}
TOTAL_COLUMNS = ("count", "bytes_requested", "bytes_returned", "errors", "duration_ns")
GROUP_KEYS = ("process", "file_id", "op", "direction", "layer")
LAYER_NAMES = tuple(layer.name.lower() for layer in tf.Layer)  # by layer code
END_REASON_NAMES = {tf.EndReason.RUNNING: "running/killed", tf.EndReason.EXIT: "exit", tf.EndReason.EXEC: "exec"}
OTHER_FILES_ID = 0
# A process's own clock fit needs its calibration pairs to span at least this much time.
MIN_CALIBRATION_SPAN_NS = 1000
# Beyond what the recorder writes: a header or slot that claims more is refused, not believed
# (and nothing is allocated for it); a page-cache sample that claims more is ignored.
MAX_NAME_BYTES = 4096  # the recorder's IOASSESS_PATH_BYTES
MAX_SUMMARY_ENTRIES = 1 << 16  # the recorder's table has 4096 entries
MAX_TIME_NS = 1 << 62  # ns since the epoch (the year 2116); op starts and ends, process ends
MAX_SUMMARY_AMOUNT = 1 << 48  # a summary entry's count, bytes returned or errors (256 TiB)
# Byte counts are uint64 in a trace; as int64 columns and in sums they saturate here, never wrap
# (a request of SIZE_MAX bytes, or many of them, is something any program can make).
MAX_BYTES = np.iinfo(np.int64).max
MAX_SAMPLE_PAGES = 64  # pages one sample asks about (the recorder asks about at most 4)
SAMPLE_PAGE_SHIFTS = (12, 30)  # page sizes from 4 KiB to 1 GiB
PAGECACHE_STATES = {tf.HeaderFlag.PAGECACHE_UNAVAILABLE: "unavailable", tf.HeaderFlag.PAGECACHE_OFF: "off"}
# What a refused file is, for TraceFileError.kind: the phrase completes "trace files that ...".
NOT_A_TRACE = "are not ioassess traces"
DAMAGED = "are damaged"
UNREADABLE = "cannot be read"
NOT_OWNED = "belong to another user"
NO_CLOCK = "have no usable clock"


class TraceFileError(Exception):
    """A trace file that cannot be read; str() is the one line `PATH: problem`. kind says what
    sort of problem it is (NOT_A_TRACE, DAMAGED, ...), for summaries of many files."""

    def __init__(self, path, problem, kind=DAMAGED):
        self.path = os.fspath(path)
        self.problem = problem
        self.kind = kind
        super().__init__(" ".join(f"{self.path}: {problem}".splitlines()))


def summarise_errors(errors, named=3):
    """One line per kind of problem, however many files have it: the first file's error (so the
    line starts with that file's path, as a single error does), then how many more files have
    that kind of problem and the errors of the next ones up to `named` in all."""
    by_kind = {}
    for error in errors:
        by_kind.setdefault(error.kind, []).append(error)
    lines = []
    for kind, group in by_kind.items():
        line = str(group[0])
        if len(group) > 1:
            line += (f"; and {len(group) - 1:,} more trace files that {kind}, among them "
                     + "; ".join(str(error) for error in group[1:named]))
        lines.append(line)
    return lines


@dataclasses.dataclass(frozen=True)
class ProcessInfo:
    path: str  # the trace file
    pid: int
    ppid: int
    rank: int
    job_id: str
    hostname: str
    exe: str
    cmdline: str
    start_ns: int  # ns since the epoch
    end_ns: "int | None"  # None while running or when killed
    end_reason: str  # "running/killed" | "exit" | "exec"
    exit_status: "int | None"
    clock_source: str  # "monotonic" | "tsc"
    ns_per_tick: float
    record_cap: int
    ops_kept: int  # op records in the file
    ops_not_kept: int  # as the recorder counted them: ops only in the summary table
    ops_lost: int  # ops counted nowhere
    obfuscated: bool  # names and exe are hashes
    space_failed: bool  # the file could not grow: later ops are in the summary table only
    stopped: bool  # a store into the trace or a write of it failed: later ops are counted in ops_lost only
    pagecache: str  # page-cache sampling: "on"; "unavailable": the kernel refused cachestat (no samples
                    # after that); "off": turned off (IOASSESS_PAGECACHE=0)
    pagecache_samples: int  # ops with a page-cache sample (PAGECACHE_COLUMNS)
    pagecache_ignored: int  # samples of no op, of several, several of one op, or with impossible values


@dataclasses.dataclass(frozen=True)
class FileInfo:
    file_id: int
    name: str  # path (undecodable bytes backslash-escaped), its hash when obfuscated, or "<...>"
    mode: int  # st_mode, 0 if unknown
    device: int
    inode: int
    fs_magic: int  # statfs f_type, 0 if unknown


@dataclasses.dataclass
class TraceSet:
    ops: dict  # column name -> numpy array, see OP_COLUMNS; sorted by (process, start_ns). From
               # scan_trace_dir only the records of other kinds than JOB_KIND (mappings, io_uring)
    processes: list  # ProcessInfo
    files: dict  # file_id -> FileInfo
    mounts: list  # (mount point, file-system type) the processes' files are under, longest first
    summary: dict  # column name -> numpy array, see SUMMARY_COLUMNS
    errors: list  # TraceFileError
    notes: list  # "PATH: caveat" per trace read whose clock could not be fitted
    streams: list = dataclasses.field(default_factory=list)  # ProcessStream per process (scan_trace_dir)


@dataclasses.dataclass
class ProcessStream:
    """How to read one process's op records of JOB_KIND again, chunk by chunk (stream_ops)."""
    path: str
    process: int  # index into TraceSet.processes
    owner_uid: "int | None"
    identity: tuple  # the file as scanned: (device, inode, size, mtime ns), or its size alone
    records: int  # its op records of JOB_KIND
    last_tick: float  # the end of the last of them, in ticks since start_ticks
    in_start_order: bool  # they are in start order in the file (else they are sorted)
    start_ticks: int  # the header's
    start_ns: int  # wall-clock ns at start_ticks
    ns_per_tick: float
    samples: np.ndarray  # PAGECACHE_RECORD_DTYPE kept: each names one op, one to one
    sample_op: np.ndarray  # per sample, its op record's position among the file's op records
    op_kinds: np.ndarray  # 256 bools: the op codes its records of JOB_KIND have


@dataclasses.dataclass
class _Scan:
    """What reading a trace's op records found, without keeping those of JOB_KIND."""
    records: int = 0  # op records of every kind
    job_records: int = 0  # of JOB_KIND
    early: int = 0  # records that start before the process
    last_tick: float = 0.0  # the end of the last record, in ticks since the process's start
    job_last_tick: float = 0.0  # of the records of JOB_KIND
    in_start_order: bool = True  # the records of JOB_KIND start in order
    last_start: int = -1  # ticks since the start of the last record of JOB_KIND so far
    file_ids: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.uint64))  # of JOB_KIND records
    op_kinds: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(256, bool))  # op codes of JOB_KIND


@dataclasses.dataclass
class _ParsedTrace:
    """One trace file's records, still in ticks."""
    path: str
    header: np.void
    ops: dict  # field of OP_RECORD_DTYPE -> contiguous column, in slot order: records not of JOB_KIND
    scan: _Scan
    identity: tuple
    files: dict  # file_id -> FileInfo
    mounts: list  # (mount point, file-system type) of its MOUNT slots
    clock_pairs: np.ndarray  # (n, 2) uint64: ticks, monotonic ns; the start pair first
    summary: np.ndarray  # SUMMARY_ENTRY_DTYPE, entries in use only
    samples: np.ndarray  # PAGECACHE_RECORD_DTYPE, in slot order
    sample_op: np.ndarray  # per sample, its op record's position among the file's, -1: ignored


def read_trace_dir(path_or_paths, owner_uid=None):
    """Read every *.iot file of a directory (or of several; plain file paths are read as traces).

    Bad files, and with owner_uid files that uid does not own, are reported in TraceSet.errors.
    Raises TraceFileError if a path does not exist or a directory holds no trace file."""
    return with_all_ops(scan_trace_dir(path_or_paths, owner_uid))


def read_trace_file(path):
    """Read one trace file; raises TraceFileError if it is not a valid, calibratable trace."""
    traceset = with_all_ops(_read_traces([os.fspath(path)], None))
    if traceset.errors:
        raise traceset.errors[0]
    return traceset


def scan_trace_dir(path_or_paths, owner_uid=None):
    """read_trace_dir's TraceSet without the op records of JOB_KIND, which are read again, chunk
    by chunk, from TraceSet.streams (stream_ops): a job's traces of any size in memory of the
    size of its processes, files and the records of other kinds."""
    return _read_traces(trace_file_paths(path_or_paths), owner_uid)


def with_all_ops(traceset):
    """The TraceSet with every op record in TraceSet.ops, sorted by (process, start_ns)."""
    tables = [traceset.ops] + [table for stream in traceset.streams for table in stream_ops(stream)]
    ops = _concatenate(tables)
    if not _sorted_by_process_and_start(ops):
        order = np.lexsort((ops["start_ns"], ops["process"]))
        ops = {name: column[order] for name, column in ops.items()}
    return dataclasses.replace(traceset, ops=ops, streams=[])


def stream_ops(stream):
    """The process's op records of JOB_KIND as OP_COLUMNS, in start order, up to READ_CHUNK_SLOTS
    at a time: the file opened again, checked to be the one scanned.
    Raises TraceFileError if it is not (it changed since), or no longer holds what it held."""
    f, size = _open_trace(stream.path, stream.owner_uid)
    with f:
        if _identity(f, size) != stream.identity:
            raise TraceFileError(stream.path, "changed while being read (it is not the file read at first)")
        header = _parse_header(stream.path, _read_exactly(stream.path, f, min(size, tf.HEADER_BYTES)), size)
        summary_slots, _ = _read_summary(stream.path, f, header)
        tables, done, position = [], 0, 0
        for records, _, _ in _slot_chunks(stream.path, f, size, summary_slots, int(header["record_cap"])):
            job = JOB_KIND[records["op"]]
            every = job.all()
            mine = records if every else records[job]
            columns = {name: mine[name] for name in mine.dtype.names}
            positions = position + (np.arange(len(records)) if every else np.flatnonzero(job))
            pagecache = sampled_columns(columns, positions, stream.samples, stream.sample_op)
            position += len(records)
            done += len(mine)
            table = _op_columns(stream.process, columns, pagecache, stream.start_ticks, stream.start_ns,
                                stream.ns_per_tick)
            if stream.in_start_order:
                yield table
            else:
                tables.append(table)
    if done != stream.records:
        raise TraceFileError(stream.path, "changed while being read (its op records are not the ones read at first)")
    if not stream.in_start_order:   # several threads' extents interleave: sorted by start
        ops = _concatenate(tables) if tables else None
        if ops is not None:
            order = np.argsort(ops["start_ns"], kind="stable")
            yield {name: column[order] for name, column in ops.items()}


def trace_file_paths(path_or_paths):
    """The trace files named by a path or paths: a directory's regular *.iot files, sorted. A
    trace pack (*.iotpack, given or in a directory) stands for its members (tracepack.py)."""
    from .tracepack import PACK_SUFFIX, expand_packs
    if isinstance(path_or_paths, (str, os.PathLike)):
        path_or_paths = [path_or_paths]
    paths = []
    for path in map(os.fspath, path_or_paths):
        if os.path.isdir(path):
            found = [os.path.join(path, name) for name in sorted(os.listdir(path))
                     if name.endswith((".iot", PACK_SUFFIX))]
            found = [p for p in found if os.path.isfile(p)]
            if not found:
                raise TraceFileError(path, "no trace files (*.iot) in this directory")
            paths += found
        elif os.path.lexists(path):
            paths.append(path)
        else:
            raise TraceFileError(path, "no such file or directory")
    return expand_packs(paths)


def totals(traceset, by=("file_id", "op")):
    """Count, bytes requested and returned, errors and summed duration (ns) per group, over op
    records and summary entries alike (metadata ops, mappings and io_uring instances return no
    bytes). Group keys: any of GROUP_KEYS ("direction" is one of traceformat.DIRECTIONS: "read",
    "write", "sync", "meta", "mmap" or "io_uring"; "layer" is "posix", "mpiio" or "stdio": the
    MPI-IO layer's bytes and time include the POSIX ops under it, the stdio layer's are in no
    other layer). Returns columns: the keys,
    then TOTAL_COLUMNS, sorted by the keys."""
    unknown = set(by) - set(GROUP_KEYS)
    if unknown:
        raise ValueError(f"cannot group by {sorted(unknown)}; choose from {GROUP_KEYS}")
    ops, summary = traceset.ops, traceset.summary
    values = {
        "count": np.concatenate([np.ones(len(ops["op"]), np.int64), summary["count"]]),
        "bytes_requested": np.concatenate([saturated_bytes(ops["requested"]), summary["bytes_requested"]]),
        "bytes_returned": np.concatenate([np.where(DATA_KIND[ops["op"]], np.maximum(ops["result"], 0), 0),
                                          summary["bytes_returned"]]),
        "errors": np.concatenate([(ops["result"] < 0).astype(np.int64), summary["errors"]]),
        "duration_ns": np.concatenate([ops["duration_ns"], summary["duration_ns"]]),
    }
    keys = {key: np.concatenate([_group_key(ops, key), _group_key(summary, key)]) for key in by}
    grouped = sum_by(keys, values)
    for key, names in (("direction", tf.DIRECTIONS), ("layer", LAYER_NAMES)):
        if key in grouped:
            grouped[key] = np.array(names)[grouped[key]]
    return grouped


# Tables indexed by op code (a uint8).
_KNOWN_OP = np.zeros(256, bool)
_KNOWN_OP[list(tf.OP_NAMES)] = True
DIRECTION_OF_OP = np.zeros(256, np.uint8)  # op code -> index into traceformat.DIRECTIONS
for _op, _direction in tf.OP_DIRECTION.items():
    DIRECTION_OF_OP[_op] = tf.DIRECTIONS.index(_direction)
# The metadata kinds (direction "meta"): their result is a descriptor, 0 or -errno, not bytes.
META_KIND = DIRECTION_OF_OP == tf.DIRECTIONS.index("meta")
# The kinds that move data (reads, writes, syncs); the others' result is a descriptor, 0 or -errno.
DATA_KIND = DIRECTION_OF_OP < tf.DIRECTIONS.index("meta")
# The kinds that are ops of a Job (reads, writes, syncs, metadata calls): streamed, as there are
# many; the others, mappings and io_uring instances, are facts of their process.
JOB_KIND = np.zeros(256, bool)
JOB_KIND[[op for op, direction in tf.OP_DIRECTION.items() if direction in ("read", "write", "sync", "meta")]] = True


def _group_key(table, key):
    if key == "direction":
        return DIRECTION_OF_OP[table["op"]]
    if key == "layer":
        return table["op"] >> tf.OP_LAYER_SHIFT
    return table[key]


def stopped_recording_note(processes):
    """One line on the processes that stopped recording early (their trace could not grow, or a
    store into it or a write of it failed) and on the ops counted nowhere; None if none did."""
    stopped = sum(p.stopped for p in processes)
    full = sum(p.space_failed and not p.stopped for p in processes)
    lost = sum(p.ops_lost for p in processes)
    parts = []
    if stopped:
        parts.append(f"recording stopped in {stopped} of {len(processes)} processes when a store into their trace "
                     "or a write of it failed (the file was truncated while they ran, or its file system could "
                     "not keep it)")
    if full:
        parts.append(f"the trace of {full} of {len(processes)} processes could not grow (its file system was full, "
                     "or the trace was replaced): their later ops are only in the summary table, if they have one")
    if lost:
        parts.append(f"{lost} ops were counted nowhere: their time and bytes are not in this report")
    return "; ".join(parts) or None


def saturated_bytes(column):
    """A uint64 byte column as int64, values past MAX_BYTES saturated to it."""
    return np.minimum(column, np.uint64(MAX_BYTES)).astype(np.int64)


def saturating_reduceat(column, starts):
    """np.add.reduceat of an int64 column, sums past MAX_BYTES saturated to it (never wrapped)."""
    sums = np.add.reduceat(column, starts)
    return np.where(np.add.reduceat(column.astype(np.float64), starts) >= MAX_BYTES, MAX_BYTES, sums)


def sum_by(keys, values):
    """The value columns summed over rows with equal key columns (all rows when there are no
    keys): {key or value name: column}, sorted by the keys. Integer sums saturate at MAX_BYTES."""
    n = len(next(iter(values.values())))
    order = np.lexsort([keys[k] for k in reversed(keys)]) if keys else np.arange(n)
    sorted_keys = {k: column[order] for k, column in keys.items()}
    new_group = np.zeros(n, bool)
    new_group[:1] = True
    for column in sorted_keys.values():
        new_group[1:] |= column[1:] != column[:-1]
    starts = np.flatnonzero(new_group)
    grouped = {k: column[starts] for k, column in sorted_keys.items()}
    for name, column in values.items():
        reduce = saturating_reduceat if column.dtype == np.int64 else np.add.reduceat
        grouped[name] = reduce(column[order], starts) if n else column[:0]
    return grouped


def _read_traces(paths, owner_uid):
    parsed, errors = [], []
    workers = workers_here() if len(paths) > 1 and _stored_bytes(paths) >= PARALLEL_SCAN_BYTES else 1
    for path, (trace, problem) in zip(paths, in_parallel(lambda path: _parsed_or_problem(path, owner_uid), paths,
                                                         workers)):
        if problem is None:
            parsed.append(trace)
        else:
            errors.append(TraceFileError(path, *problem))
    calibrations = _calibrate(parsed)
    good, notes = [], []
    for trace, calibration in zip(parsed, calibrations):
        note = None
        if calibration is None:
            calibration, note = _unfitted_clock(trace)
        try:
            if calibration is None:
                raise TraceFileError(trace.path, "cannot calibrate its clock: too few clock readings and no other "
                                                 "process on its host to borrow a rate from", NO_CLOCK)
            _check_times(trace, *calibration)
        except TraceFileError as error:
            errors.append(error)
            continue
        good.append((trace, calibration))
        if note:
            notes.append(f"{trace.path}: {note}")
    position = {path: index for index, path in enumerate(paths)}
    errors.sort(key=lambda error: position[error.path])
    return _assemble(good, errors, notes, owner_uid)


# Traces of this many bytes in all or more are scanned by parallel workers (ioassess/parallel.py):
# about 4 x 10^6 op records, a second or more of reading.
PARALLEL_SCAN_BYTES = 256 << 20


def _parsed_or_problem(path, owner_uid):
    """(_parse_trace_file's trace, None), or (None, (problem, kind)) of a file that cannot be
    read: what a worker can send back (TraceFileError itself does not pickle)."""
    try:
        return _parse_trace_file(path, owner_uid), None
    except TraceFileError as error:
        return None, (error.problem, error.kind)


def _stored_bytes(paths):
    """The bytes of the trace files (of a pack's member, the size packed)."""
    total = 0
    for path in paths:
        if hasattr(path, "open_trace"):
            total += getattr(path, "packed_bytes", 0)
        else:
            with contextlib.suppress(OSError):
                total += os.stat(path).st_size
    return total


# Slots read at a time: memory holds one chunk, never the whole file. 4 MiB: each field taken
# from a chunk's 64-byte records is read from the processor's cache, not from memory again
# (measured: a reading of 6.25 x 10^6 records 0.6 s at 2^16 slots, 0.9 s at 2^20).
READ_CHUNK_SLOTS = 1 << 16
# Slot types other than ops: few, kept as raw rows with their slot numbers.
_RARE_TYPES = (tf.SlotType.FILE, tf.SlotType.NAME_PART, tf.SlotType.CLOCK, tf.SlotType.PAGECACHE,
               tf.SlotType.MOUNT)
_IS_RARE_TYPE = np.zeros(256, bool)
_IS_RARE_TYPE[list(_RARE_TYPES)] = True


def _parse_trace_file(path, owner_uid):
    f, size = _open_trace(path, owner_uid)
    with f:
        identity = _identity(f, size)
        header = _parse_header(path, _read_exactly(path, f, min(size, tf.HEADER_BYTES)), size)
        summary_slots, summary = _read_summary(path, f, header)
        scan, others, keys, rare_slots, rare_rows = _scan_slots(path, f, size, summary_slots, header)
    _check_op_kinds(path, summary["op"], np.arange(len(summary)), "summary entry")
    _check_summary_amounts(path, summary)
    clocks = rare_rows[rare_rows[:, 0] == tf.SlotType.CLOCK].view(tf.CLOCK_RECORD_DTYPE).ravel()
    samples = rare_rows[rare_rows[:, 0] == tf.SlotType.PAGECACHE].view(tf.PAGECACHE_RECORD_DTYPE).ravel()
    if len(samples) > header["record_cap"]:
        raise TraceFileError(path, f"corrupt: more page-cache samples than its record cap of {header['record_cap']} "
                                   "(the recorder writes at most one per op record)")
    starts = [(header["start_ticks"], header["start_monotonic_ns"])]
    ends = [(header["end_ticks"], header["end_monotonic_ns"])] if _has_ended(header) else []
    clock_pairs = np.concatenate([np.array(starts, np.uint64).reshape(-1, 2),
                                  np.stack([clocks["ticks"], clocks["monotonic_ns"]], axis=1),
                                  np.array(ends, np.uint64).reshape(-1, 2)])
    n_slots = (size - tf.HEADER_BYTES) // tf.SLOT_BYTES
    files = _parse_files(path, n_slots, rare_slots, rare_rows)
    mounts = _parse_mounts(path, n_slots, rare_slots, rare_rows)
    return _ParsedTrace(path, header, others, scan, identity, files, mounts, clock_pairs, summary, samples,
                        sample_ops(keys, samples))


def _distinct(values):
    """The distinct values, sorted; runs of one value (ops on one file) are taken once first."""
    return distinct(values[np.r_[True, values[1:] != values[:-1]]] if len(values) else values)


def _identity(f, size):
    """What tells the file read now from another put in its place: device, inode, size and
    modification time of a file, the size of a pack's member (its pack checks the rest)."""
    if not hasattr(f, "fileno"):
        return (size,)
    status = os.fstat(f.fileno())
    return (status.st_dev, status.st_ino, size, status.st_mtime_ns)


def _scan_slots(path, f, size, summary_slots, header):
    """Reads the op records without keeping those of JOB_KIND: (_Scan, the columns of the
    records of other kinds, the SAMPLE_KEY_FIELDS of every record, to match the page-cache
    samples to (a few bytes a record, let go once matched), the rare slots' numbers, their raw
    rows)."""
    scan, others, keys, rare_slots, rare_rows = _Scan(), [], [], [], []
    start_ticks = np.uint64(header["start_ticks"])
    for records, slots, rows in _slot_chunks(path, f, size, summary_slots, int(header["record_cap"])):
        since_start = (records["start_ticks"] - start_ticks).view(np.int64)
        scan.records += len(records)
        scan.early += int(np.count_nonzero(since_start < 0))
        scan.last_tick = max(scan.last_tick, float(np.max(since_start + 0.0 + records["duration_ticks"], initial=0.0)))
        job = JOB_KIND[records["op"]]
        starts = since_start[job]
        scan.job_last_tick = max(scan.job_last_tick,
                                 float(np.max(starts + 0.0 + records["duration_ticks"][job], initial=0.0)))
        scan.job_records += len(starts)
        if len(starts):
            scan.in_start_order &= bool(starts[0] >= scan.last_start) and bool(np.all(starts[1:] >= starts[:-1]))
            scan.last_start = int(starts[-1])
        scan.file_ids = distinct(np.concatenate([scan.file_ids, _distinct(records["file_id"][job])]))
        scan.op_kinds |= np.bincount(records["op"][job], minlength=256) > 0
        others.append(records[~job])
        keys.append({name: records[name].copy() for name in SAMPLE_KEY_FIELDS})   # not views of the chunk
        rare_slots.append(slots)
        rare_rows.append(rows)
    others = np.concatenate(others) if others else np.zeros(0, tf.OP_RECORD_DTYPE)
    return (scan, {name: np.ascontiguousarray(others[name]) for name in tf.OP_RECORD_DTYPE.names},
            {name: np.concatenate([part[name] for part in keys] or [np.zeros(0, tf.OP_RECORD_DTYPE[name])])
             for name in SAMPLE_KEY_FIELDS},
            np.concatenate(rare_slots or [np.zeros(0, np.int64)]),
            np.concatenate(rare_rows or [np.zeros((0, tf.SLOT_BYTES), np.uint8)]))


def _slot_chunks(path, f, size, summary_slots, record_cap):
    """The op records (OP_RECORD_DTYPE), the rare slots' numbers and raw 64-byte rows, chunk by
    chunk in slot order. Only what the file stores is read: time goes with the bytes stored, not
    with the size a sparse file claims. Slots of the summary table count as EMPTY. More op
    records than the record cap are refused: the recorder never writes more."""
    n_ops = 0
    for first, count in _stored_slot_chunks(f, size):
        f.seek(tf.HEADER_BYTES + first * tf.SLOT_BYTES)
        chunk = _read_exactly(path, f, count * tf.SLOT_BYTES).reshape(count, tf.SLOT_BYTES)
        chunk_types = chunk[:, 0].copy()
        in_summary = slice(max(summary_slots.start - first, 0), max(min(summary_slots.stop - first, count), 0))
        chunk_types[in_summary] = tf.SlotType.EMPTY
        unknown = np.flatnonzero(chunk_types > max(tf.SlotType))
        if len(unknown):
            raise TraceFileError(path, f"corrupt: slot {first + unknown[0]} has unknown type "
                                       f"{chunk_types[unknown[0]]}")
        is_op = chunk_types == tf.SlotType.OP
        if is_op.all():   # the common chunk: the records are the chunk itself, not a copy
            op_rows, records = np.arange(count), chunk.view(tf.OP_RECORD_DTYPE).ravel()
        else:
            op_rows = np.flatnonzero(is_op)
            records = chunk[op_rows].view(tf.OP_RECORD_DTYPE).ravel()
        n_ops += len(op_rows)
        if n_ops > record_cap:
            raise TraceFileError(path, f"corrupt: more op records than its record cap of {record_cap}")
        _check_op_kinds(path, records["op"], first + op_rows, "slot")
        rare = np.flatnonzero(_IS_RARE_TYPE[chunk_types])
        yield records, first + rare, chunk[rare]


def _stored_slot_chunks(f, size, chunk_slots=READ_CHUNK_SLOTS):
    """(first slot, count) of the slots the file stores, in order and at most chunk_slots at a
    time. Holes (SEEK_HOLE) are left out: they read as zeros, i.e. as EMPTY slots. The
    seeks go through f, never os.lseek on its descriptor: f's buffer (st_blksize: 128 KiB on
    FUSE, MiBs on Lustre or GPFS) would otherwise serve a later f.seek from data of the
    position it believes in, while the descriptor is elsewhere."""
    n_slots = (size - tf.HEADER_BYTES) // tf.SLOT_BYTES
    position = tf.HEADER_BYTES
    while position < size:
        try:
            data = f.seek(position, os.SEEK_DATA)
            hole = f.seek(data, os.SEEK_HOLE)
        except OSError as error:
            if error.errno == errno.ENXIO:   # a hole up to the end
                return
            data, hole = position, size  # the file system cannot say where its holes are
        first = (data - tf.HEADER_BYTES) // tf.SLOT_BYTES
        stop = min(-(-(hole - tf.HEADER_BYTES) // tf.SLOT_BYTES), n_slots)
        for chunk_first in range(first, stop, chunk_slots):
            yield chunk_first, min(chunk_slots, stop - chunk_first)
        position = tf.HEADER_BYTES + max(stop, first + 1) * tf.SLOT_BYTES


def _read_summary(path, f, header):
    """The slots the summary table occupies (a range) and its entries in use."""
    offset, entries = int(header["summary_offset"]), int(header["summary_entries"])
    if not offset:
        return range(0), np.empty(0, tf.SUMMARY_ENTRY_DTYPE)
    nbytes = entries * tf.SUMMARY_ENTRY_DTYPE.itemsize
    f.seek(offset)
    table = _read_exactly(path, f, nbytes).view(tf.SUMMARY_ENTRY_DTYPE)
    first = (offset - tf.HEADER_BYTES) // tf.SLOT_BYTES
    return range(first, first + nbytes // tf.SLOT_BYTES), table[table["state"] == tf.SummaryState.IN_USE]


def _open_trace(path, owner_uid):
    """The open file and its size. Opened without blocking (a FIFO in a trace's place must not
    hang the reader), then checked on the open file: a regular file, owned by owner_uid. A
    member of a trace pack (tracepack.PackEntry) opens itself, read from its pack."""
    if hasattr(path, "open_trace"):
        return path.open_trace(owner_uid)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise TraceFileError(path, f"cannot read: {error.strerror}", UNREADABLE) from None
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        os.close(fd)
        raise TraceFileError(path, "not a regular file", UNREADABLE)
    if owner_uid is not None and status.st_uid != owner_uid:
        os.close(fd)
        raise TraceFileError(path, f"belongs to uid {status.st_uid}, not to uid {owner_uid} whose traces these are: "
                                   "refused", NOT_OWNED)
    return os.fdopen(fd, "rb"), status.st_size


def _read_exactly(path, f, nbytes):
    try:
        data = f.read(nbytes)
    except OSError as error:
        raise TraceFileError(path, f"cannot read: {error.strerror}", UNREADABLE) from None
    if len(data) != nbytes:
        raise TraceFileError(path, "truncated while being read (the file shrank)")
    return np.frombuffer(data, np.uint8)


def _parse_header(path, data, size):
    if size >= len(tf.MAGIC) and data[:len(tf.MAGIC)].tobytes() != tf.MAGIC:
        raise TraceFileError(path, "not an ioassess trace (bad magic)", NOT_A_TRACE)
    if size < tf.HEADER_BYTES:
        raise TraceFileError(path, f"truncated: {size} bytes, the header alone needs {tf.HEADER_BYTES}",
                             NOT_A_TRACE if size < len(tf.MAGIC) else DAMAGED)
    header = data[:tf.HEADER_DTYPE.itemsize].copy().view(tf.HEADER_DTYPE)[0]
    # The byte order mark first: with the wrong byte order every other number is wrong too.
    if header["byte_order_mark"] != tf.BYTE_ORDER_MARK:
        raise TraceFileError(path, f"byte order mark is 0x{header['byte_order_mark']:08x}, not "
                                   f"0x{tf.BYTE_ORDER_MARK:08x}: written with another byte order, or corrupt")
    if header["version"] > tf.FORMAT_VERSION:
        raise TraceFileError(path, f"trace format version {header['version']} is newer than this reader "
                                   f"supports ({tf.FORMAT_VERSION})", NOT_A_TRACE)
    expected = {"version": tf.FORMAT_VERSION, "header_bytes": tf.HEADER_BYTES, "slot_bytes": tf.SLOT_BYTES}
    for field, value in expected.items():
        if header[field] != value:
            raise TraceFileError(path, f"corrupt: header {field} is {header[field]}, expected {value}")
    for field, kind in (("clock_source", tf.ClockSource), ("end_reason", tf.EndReason)):
        if int(header[field]) not in set(kind):
            raise TraceFileError(path, f"corrupt: unknown {field.replace('_', ' ')} {header[field]}")
    if (size - tf.HEADER_BYTES) % tf.PAGE_BYTES:
        raise TraceFileError(path, f"truncated: {size} bytes is not the {tf.HEADER_BYTES}-byte header plus "
                                   f"whole {tf.PAGE_BYTES}-byte pages")
    _check_summary_extent(path, header, size)
    _check_rank(path, header)
    _check_process_times(path, header)
    return header


def _check_summary_extent(path, header, size):
    offset, entries = int(header["summary_offset"]), int(header["summary_entries"])
    if offset == 0:
        if entries:
            raise TraceFileError(path, f"corrupt: {entries} summary entries but no summary table offset")
        return
    if offset < tf.HEADER_BYTES or (offset - tf.HEADER_BYTES) % tf.SLOT_BYTES:
        raise TraceFileError(path, f"corrupt: summary table offset {offset} is not on a slot boundary "
                                   f"after the header")
    if entries > MAX_SUMMARY_ENTRIES:
        raise TraceFileError(path, f"corrupt: {entries} summary entries, more than the {MAX_SUMMARY_ENTRIES} "
                                   "this reader takes (the recorder writes 4096)")
    end = offset + entries * tf.SUMMARY_ENTRY_DTYPE.itemsize
    if end > size:
        raise TraceFileError(path, f"truncated: the summary table [{offset}, {end}) extends past the end of "
                                   f"the file ({size} bytes)")


def _check_rank(path, header):
    rank = int(header["rank"])
    if not -1 <= rank < MAX_RANKS:
        raise TraceFileError(path, f"corrupt: rank {rank}, not -1 (none) nor one of the {MAX_RANKS} ranks a job "
                                   "can have")


def _check_process_times(path, header):
    start = int(header["start_realtime_ns"])
    if start >= MAX_TIME_NS:
        raise TraceFileError(path, f"corrupt: starts at {start} ns since the epoch, after the year 2116")
    if _has_ended(header):
        ran_ns = int(header["end_monotonic_ns"]) - int(header["start_monotonic_ns"])
        if ran_ns < 0:
            raise TraceFileError(path, "corrupt: its process ends before it starts (end_monotonic_ns is "
                                       "before start_monotonic_ns)")
        if start + ran_ns >= MAX_TIME_NS:
            raise TraceFileError(path, f"corrupt: ends at {start + ran_ns} ns since the epoch, after the year 2116")


def _check_op_kinds(path, op_codes, positions, what):
    bad = np.flatnonzero(~_KNOWN_OP[op_codes])
    if len(bad):
        raise TraceFileError(path, f"corrupt: {what} {positions[bad[0]]} has unknown op kind {op_codes[bad[0]]}")


def _check_summary_amounts(path, summary):
    for field in ("count", "bytes_returned", "errors"):
        bad = np.flatnonzero(summary[field] > MAX_SUMMARY_AMOUNT)
        if len(bad):
            raise TraceFileError(path, f"corrupt: summary entry {bad[0]} has {field.replace('_', ' ')} "
                                       f"{summary[field][bad[0]]}, more than any process can have "
                                       f"({MAX_SUMMARY_AMOUNT})")


def _check_times(trace, offset_ns, ns_per_tick):
    """Refuse a trace whose ops start before its process (the recorder takes the start before
    any op) or whose times in ns since the epoch reach MAX_TIME_NS (nothing real does, and the
    int64 columns would overflow)."""
    header, path = trace.header, trace.path
    if trace.scan.early:
        raise TraceFileError(path, f"corrupt: {trace.scan.early} op records start before the process started")
    last_tick = trace.scan.last_tick
    longest_sum = float(np.max(trace.summary["duration_ticks"], initial=0))
    start_ns = int(header["start_realtime_ns"]) + offset_ns
    last_ns = start_ns + max(last_tick, longest_sum) * ns_per_tick
    if start_ns < 0:
        raise TraceFileError(path, f"corrupt: its clock readings put its start at {start_ns:.4g} ns, before 1970")
    if not (math.isfinite(ns_per_tick) and last_ns < MAX_TIME_NS):
        raise TraceFileError(path, f"corrupt: its op times reach {last_ns:.4g} ns since the epoch ({ns_per_tick:.4g} "
                                   f"ns per tick), beyond the year 2116")


def _named_slots(path, n_slots, rare_slots, rare_rows, slot_type, dtype):
    """(record, name bytes) of each slot of slot_type (FILE, MOUNT), its name from the NAME_PART
    slots that follow it (rare rows are in slot order, so its name parts are the rows after it)."""
    types = rare_rows[:, 0]
    records = rare_rows.view(dtype).ravel()
    parts = rare_rows.view(tf.NAME_PART_DTYPE).ravel()["bytes"]
    kind = tf.SlotType(slot_type).name
    for row in np.flatnonzero(types == slot_type):
        slot, record = int(rare_slots[row]), records[row]
        name_bytes = int(record["name_bytes"])
        if name_bytes > MAX_NAME_BYTES:
            raise TraceFileError(path, f"corrupt: {kind} slot {slot} has a name of {name_bytes} bytes, more than "
                                       f"the recorder writes ({MAX_NAME_BYTES})")
        n_parts = -(-name_bytes // tf.NAME_PART_BYTES)
        if slot + n_parts >= n_slots:
            raise TraceFileError(path, f"corrupt: the name of the {kind} slot {slot} runs past the end of the file")
        following = slice(row + 1, row + 1 + n_parts)
        if not (np.array_equal(rare_slots[following], np.arange(slot + 1, slot + 1 + n_parts))
                and np.all(types[following] == tf.SlotType.NAME_PART)):
            raise TraceFileError(path, f"corrupt: {kind} slot {slot} is not followed by its {n_parts} NAME_PART slots")
        yield record, parts[following].tobytes()[:name_bytes]


def _parse_files(path, n_slots, rare_slots, rare_rows):
    """file_id -> FileInfo of the FILE slots (the first slot of an id when there are two)."""
    files = {}
    for record, name in _named_slots(path, n_slots, rare_slots, rare_rows, tf.SlotType.FILE, tf.FILE_RECORD_DTYPE):
        file_id = int(record["file_id"])
        if file_id not in files:
            files[file_id] = FileInfo(file_id, name.decode("utf-8", "backslashreplace"), int(record["mode"]),
                                      int(record["device"]), int(record["inode"]), int(record["fs_magic"]))
    return files


def _parse_mounts(path, n_slots, rare_slots, rare_rows):
    """(mount point, file-system type) of the MOUNT slots."""
    return [(name.decode("utf-8", "backslashreplace"),
             record["fs_type"].split(b"\0", 1)[0].decode("utf-8", "backslashreplace"))
            for record, name in _named_slots(path, n_slots, rare_slots, rare_rows, tf.SlotType.MOUNT,
                                             tf.MOUNT_RECORD_DTYPE)]


def fit_clock(ticks, monotonic_ns):
    """Least-squares fit monotonic_ns = m0 + offset + slope * (ticks - t0), (t0, m0) the first
    pair; returns (offset_ns, slope_ns_per_tick), or None when the pairs cannot give a rate.
    Differences to the first pair keep float64 precise over hours of nanoseconds."""
    if len(ticks) < 2:
        return None
    x = _since_first(ticks).astype(np.float64)
    y = _since_first(monotonic_ns).astype(np.float64)
    if y.max() - y.min() < MIN_CALIBRATION_SPAN_NS:
        return None
    x_mean, y_mean = x.mean(), y.mean()
    spread = np.sum((x - x_mean) ** 2)
    slope = np.sum((x - x_mean) * (y - y_mean)) / spread if spread else 0.0
    if not slope > 0:
        return None
    return y_mean - slope * x_mean, slope


def _since_first(values):
    """uint64 values minus the first, as int64 (wrapping, so earlier values come out negative)."""
    return (values - values[0]).view(np.int64)


def _calibrate(parsed):
    """(offset_ns, ns_per_tick) per trace, or None where it cannot be had. A process that cannot
    fit its own clock borrows the median rate of the other processes on its host."""
    own = []
    for trace in parsed:
        if trace.header["clock_source"] == tf.ClockSource.MONOTONIC:
            # ticks are monotonic ns, read a moment before start_monotonic_ns
            own.append((float(int(trace.header["start_ticks"]) - int(trace.header["start_monotonic_ns"])), 1.0))
        else:
            own.append(fit_clock(trace.clock_pairs[:, 0], trace.clock_pairs[:, 1]))
    tsc_rates_by_host = {}
    for trace, calibration in zip(parsed, own):
        if calibration and trace.header["clock_source"] == tf.ClockSource.TSC:
            tsc_rates_by_host.setdefault(bytes(trace.header["hostname"]), []).append(calibration[1])
    calibrations = []
    for trace, calibration in zip(parsed, own):
        rates = tsc_rates_by_host.get(bytes(trace.header["hostname"]))
        calibrations.append(calibration or ((0.0, float(np.median(rates))) if rates else None))
    return calibrations


def _unfitted_clock(trace):
    """((offset_ns, ns_per_tick), note) for a TSC process that could neither fit its clock nor
    borrow its host's rate, when its times can still be had: a process that ran for microseconds
    (killed right after its start). Its start is the header's. Every extent of op slots starts
    with a clock reading, so a process with ops has at least two readings: their rate, however
    close they are, times its ops. Without a second reading and without ops there is nothing to
    time. (None, None) otherwise."""
    pairs = trace.clock_pairs
    ticks, monotonic_ns = int(_since_first(pairs[:, 0])[-1]), int(_since_first(pairs[:, 1])[-1])
    if ticks > 0 and monotonic_ns > 0:
        rate = monotonic_ns / ticks
        return (0.0, rate), (f"its clock could not be fitted (its clock readings span only {monotonic_ns} ns): its "
                             f"op times use the rate between its first and last readings, {rate:.4g} ns per tick")
    if trace.scan.records == 0 and len(trace.summary) == 0:
        return (0.0, 1.0), "its clock could not be fitted (a single clock reading, at its start): it has no op to time"
    return None, None


def _assemble(good, errors, notes, owner_uid):
    # Empty tables first so that the columns have their dtypes and shapes without any trace.
    no_ops = {name: np.empty(0, tf.OP_RECORD_DTYPE[name]) for name in tf.OP_RECORD_DTYPE.names}
    op_tables = [_op_columns(0, no_ops, sampled_columns(no_ops, np.zeros(0, np.int64), _NO_SAMPLES,
                                                        np.zeros(0, np.int64)), 0, 0, 1.0)]
    summary_tables = [_summary_columns(0, np.empty(0, tf.SUMMARY_ENTRY_DTYPE), 1.0)]
    processes, files, mounts, streams, file_ids = [], {}, {}, [], []
    for index, (trace, (offset_ns, ns_per_tick)) in enumerate(good):
        header = trace.header
        kept = trace.sample_op >= 0
        processes.append(_process_info(trace, ns_per_tick, int(kept.sum()), len(kept) - int(kept.sum())))
        start_ns = int(header["start_realtime_ns"]) + round(offset_ns)
        op_tables.append(_op_columns(index, trace.ops, sampled_columns(trace.ops, np.full(len(trace.ops["op"]), -1),
                                                                       _NO_SAMPLES, np.zeros(0, np.int64)),
                                     int(header["start_ticks"]), start_ns, ns_per_tick))
        streams.append(ProcessStream(trace.path, index, owner_uid, trace.identity, trace.scan.job_records,
                                     trace.scan.job_last_tick, trace.scan.in_start_order, int(header["start_ticks"]),
                                     start_ns, ns_per_tick, trace.samples[kept], trace.sample_op[kept],
                                     trace.scan.op_kinds))
        summary_tables.append(_summary_columns(index, trace.summary, ns_per_tick))
        file_ids.append(trace.scan.file_ids)
        for file_id, info in trace.files.items():
            files.setdefault(file_id, info)
        for point, fs_type in trace.mounts:
            mounts.setdefault(point, fs_type)
    ops = _concatenate(op_tables)
    if not _sorted_by_process_and_start(ops):   # several threads' extents interleave
        order = np.lexsort((ops["start_ns"], ops["process"]))
        ops = {name: column[order] for name, column in ops.items()}
    summary = _concatenate(summary_tables)
    for file_id in distinct(np.concatenate([ops["file_id"], summary["file_id"]] + file_ids)).tolist():
        if file_id not in files:
            name = "<other files>" if file_id == OTHER_FILES_ID else f"<unknown file 0x{file_id:016x}>"
            files[file_id] = FileInfo(file_id, name, 0, 0, 0, 0)
    mounts = sorted(mounts.items(), key=lambda mount: -len(mount[0]))
    return TraceSet(ops, processes, files, mounts, summary, errors, notes, streams)


def _concatenate(tables):
    """One table of the tables' rows; a single non-empty table is returned as it is (a trace's
    columns can be views into its op records: no copy of millions of rows)."""
    non_empty = [table for table in tables if len(next(iter(table.values())))]
    if len(non_empty) == 1:
        return non_empty[0]
    return {name: np.concatenate([table[name] for table in tables]) for name in tables[0]}


def _sorted_by_process_and_start(ops):
    process, start = ops["process"], ops["start_ns"]
    return bool(np.all((process[1:] > process[:-1]) | ((process[1:] == process[:-1]) & (start[1:] >= start[:-1]))))


def _op_columns(process, records, pagecache, start_ticks, start_ns, ns_per_tick):
    """Columns of one process's op records and their page-cache columns; start_ns is the
    wall-clock time at start_ticks."""
    since_start = (records["start_ticks"] - np.uint64(start_ticks)).view(np.int64)
    start_ns = np.int64(start_ns) + _ticks_to_ns(since_start, ns_per_tick)
    columns = {name: records[name] for name in ("op", "file_id", "offset", "requested", "result", "buffer", "tid",
                                                "flags")}
    columns.update(pagecache, process=np.full(len(records["op"]), process), start_ns=start_ns,
                   duration_ns=_ticks_to_ns(records["duration_ticks"], ns_per_tick))
    return {name: np.asarray(columns[name], dtype) for name, dtype in OP_COLUMNS.items()}


def _summary_columns(process, entries, ns_per_tick):
    columns = {name: entries[name] for name in ("file_id", "op", "size_bucket", "count", "bytes_requested",
                                                "bytes_returned", "errors", "duration_hist")}
    columns.update(process=np.full(len(entries), process), bytes_requested=saturated_bytes(entries["bytes_requested"]),
                   duration_ns=_ticks_to_ns(entries["duration_ticks"], ns_per_tick),
                   hist_ns_per_tick=np.full(len(entries), ns_per_tick))
    return {name: np.asarray(columns[name], dtype) for name, dtype in SUMMARY_COLUMNS.items()}


def _ticks_to_ns(ticks, ns_per_tick):
    # float64 is exact for tick counts below 2**53 (104 days of nanoseconds)
    return np.rint(ticks * ns_per_tick).astype(np.int64)


def _process_info(trace, ns_per_tick, pagecache_samples, pagecache_ignored):
    header = trace.header
    flags = tf.HeaderFlag(int(header["flags"]))
    return ProcessInfo(
        path=trace.path,
        pid=int(header["pid"]),
        ppid=int(header["ppid"]),
        rank=int(header["rank"]),
        job_id=_c_string(header["job_id"]),
        hostname=_c_string(header["hostname"]),
        exe=_c_string(header["exe"]),
        cmdline=_c_string(header["cmdline"]),
        start_ns=int(header["start_realtime_ns"]),
        end_ns=int(header["start_realtime_ns"]) + int(header["end_monotonic_ns"]) - int(header["start_monotonic_ns"])
        if _has_ended(header) else None,
        end_reason=END_REASON_NAMES[tf.EndReason(int(header["end_reason"]))],
        exit_status=int(header["exit_status"]) if tf.HeaderFlag.EXIT_STATUS in flags else None,
        clock_source=tf.ClockSource(int(header["clock_source"])).name.lower(),
        ns_per_tick=float(ns_per_tick),
        record_cap=int(header["record_cap"]),
        ops_kept=trace.scan.records,
        ops_not_kept=int(header["ops_not_kept"]),
        ops_lost=int(header["ops_lost"]),
        obfuscated=tf.HeaderFlag.OBFUSCATED in flags,
        space_failed=tf.HeaderFlag.SPACE_FAILED in flags,
        stopped=tf.HeaderFlag.STOPPED in flags,
        pagecache=next((state for flag, state in PAGECACHE_STATES.items() if flag in flags), "on"),
        pagecache_samples=pagecache_samples,
        pagecache_ignored=pagecache_ignored,
    )


def _has_ended(header):
    # The writer stores end_ticks before end_monotonic_ns: a kill between the two leaves a half pair.
    return header["end_ticks"] != 0 and header["end_monotonic_ns"] != 0


def _c_string(raw):
    return bytes(raw).split(b"\0", 1)[0].decode("utf-8", "backslashreplace")


# Op kinds a page-cache sample can belong to: the POSIX reads and writes.
SAMPLED_KIND = np.zeros(256, bool)
SAMPLED_KIND[[op for op in tf.OP_NAMES if tf.OP_LAYER[op] == "posix" and tf.OP_DIRECTION[op] != "sync"]] = True
_WRITE_KIND = DIRECTION_OF_OP == tf.DIRECTIONS.index("write")


# The fields of an op record a page-cache sample is matched and checked by.
SAMPLE_KEY_FIELDS = ("tid", "start_ticks", "op", "offset", "requested")
_NO_SAMPLES = np.empty(0, tf.PAGECACHE_RECORD_DTYPE)


def sample_ops(keys, samples):
    """Per sample, the position of its op among the process's op records (keys: their
    SAMPLE_KEY_FIELDS, in file order); -1 for the samples ignored: those whose key (tid,
    op_start_ticks) names no op or several, several samples of one op, and samples whose values
    cannot be (more pages cached than asked, a head page that is not the op's offset, ...)."""
    op_index = _op_of_each_sample(keys["tid"], keys["start_ticks"], samples["tid"], samples["op_start_ticks"])
    kept = op_index >= 0
    kept[kept] = _plausible(samples[kept], {name: keys[name][op_index[kept]] for name in SAMPLE_KEY_FIELDS})
    return np.where(kept, op_index, -1)


def sampled_columns(ops, positions, samples, sample_op):
    """PAGECACHE_COLUMNS of op records (fields of OP_RECORD_DTYPE, in ticks) at `positions` among
    their process's op records, from the samples kept (sample_op: each one's op's position)."""
    n = len(ops["op"])
    columns = {name: np.full(n, -1, dtype) for name, dtype in PAGECACHE_COLUMNS.items()}
    at = np.minimum(np.searchsorted(positions, sample_op), max(n - 1, 0))    # positions increase
    here = positions[at] == sample_op if n else np.zeros(len(sample_op), bool)
    samples, op_index = samples[here], at[here]
    shift = samples["page_shift"].astype(np.uint64)
    head_page, head_pages = samples["head_page"], samples["head_pages"].astype(np.uint64)
    tail_page, tail_pages = samples["tail_page"], samples["tail_pages"].astype(np.uint64)
    offset = ops["offset"][op_index].view(np.uint64)
    last_byte = offset + np.maximum(ops["requested"][op_index], 1) - np.uint64(1)
    span = (last_byte >> shift) - (offset >> shift) + np.uint64(1)
    pages = head_pages + tail_pages
    columns["pc_pages"][op_index] = pages
    columns["pc_whole"][op_index] = pages == span
    for field in ("cached", "dirty", "writeback", "evicted", "recently_evicted"):
        columns[f"pc_{field}"][op_index] = samples[field]
    columns["pc_buffer_faulted"][op_index] = np.select(
        [samples["buffer"] == tf.BufferState.FAULTED, samples["buffer"] == tf.BufferState.RESIDENT], [1, 0], -1)
    size = samples["file_size"]
    sized = _WRITE_KIND[ops["op"][op_index]] & (size >= 0)
    first_new = (size[sized].view(np.uint64) + (np.uint64(1) << shift[sized]) - np.uint64(1)) >> shift[sized]
    columns["pc_new_pages"][op_index[sized]] = (_pages_from(head_page[sized], head_pages[sized], first_new)
                                               + _pages_from(tail_page[sized], tail_pages[sized], first_new))
    return columns


def _op_of_each_sample(op_tid, op_ticks, sample_tid, sample_ticks):
    """Index of the op with each sample's (tid, start ticks); -1 where no op or several have it,
    and for every sample of an op that has several. Only ops that start at some sample's ticks
    are looked at closely, so the cost is one search per op in the few samples' ticks."""
    if len(sample_ticks) == 0 or len(op_ticks) == 0:
        return np.full(len(sample_ticks), -1, np.int64)
    candidates = _ops_at_ticks(op_ticks, np.sort(sample_ticks))
    keys = np.empty(len(candidates) + len(sample_ticks), [("ticks", "<u8"), ("tid", "<u4")])
    keys["ticks"] = np.concatenate([op_ticks[candidates], sample_ticks])
    keys["tid"] = np.concatenate([op_tid[candidates], sample_tid])
    _, key_of, key_count = np.unique(keys, return_inverse=True, return_counts=True)
    key_of = key_of.ravel()
    op_key, sample_key = key_of[:len(candidates)], key_of[len(candidates):]
    ops_with_key = np.bincount(op_key, minlength=len(key_count))
    samples_with_key = key_count - ops_with_key
    op_of_key = np.full(len(key_count), -1, np.int64)
    op_of_key[op_key] = candidates
    one_to_one = (ops_with_key == 1) & (samples_with_key == 1)
    return np.where(one_to_one[sample_key], op_of_key[sample_key], -1)


def _ops_at_ticks(op_ticks, sorted_ticks):
    """The ops (ascending) whose start ticks are among sorted_ticks: where the ops are in start
    order (a process of one thread), by a search of each of the few ticks among the ops, else
    of each op among the ticks."""
    if np.all(op_ticks[1:] >= op_ticks[:-1]):
        distinct = sorted_ticks[np.r_[True, sorted_ticks[1:] != sorted_ticks[:-1]]]
        low = np.searchsorted(op_ticks, distinct, "left")
        counts = np.searchsorted(op_ticks, distinct, "right") - low
        return np.repeat(low - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
    position = np.minimum(np.searchsorted(sorted_ticks, op_ticks), len(sorted_ticks) - 1)
    return np.flatnonzero(sorted_ticks[position] == op_ticks)


def _plausible(samples, ops):
    """Which samples the recorder can have written for these ops (one op per sample)."""
    shift = samples["page_shift"].astype(np.uint64)
    pages = samples["head_pages"].astype(np.int64) + samples["tail_pages"]
    head_end = samples["head_page"] + samples["head_pages"].astype(np.uint64)
    return (SAMPLED_KIND[ops["op"]] & (ops["offset"] >= 0)
            & (samples["page_shift"] >= SAMPLE_PAGE_SHIFTS[0]) & (samples["page_shift"] <= SAMPLE_PAGE_SHIFTS[1])
            & (ops["offset"].view(np.uint64) >> shift == samples["head_page"])
            & (samples["head_pages"] >= 1) & (pages <= MAX_SAMPLE_PAGES)
            & ((samples["tail_pages"] == 0) | (samples["tail_page"] >= head_end))
            & (samples["cached"] <= pages) & (samples["dirty"] <= samples["cached"])
            & (samples["writeback"] <= samples["cached"])
            & (samples["evicted"].astype(np.int64) + samples["cached"] <= pages)
            & (samples["recently_evicted"] <= samples["evicted"]) & (samples["file_size"] >= -1)
            & (samples["buffer"] <= max(tf.BufferState)))


def _pages_from(first_page, pages, first_new_page):
    """How many of the pages [first_page, first_page + pages) are at or past first_new_page."""
    start = np.maximum(first_page, first_new_page)
    return np.where(first_page + pages > start, first_page + pages - start, 0)
