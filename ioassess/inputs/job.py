"""One job's I/O, whatever it was read from (recorder traces, Darshan DXT, Darshan counters).

A Job is what the assessment reads: the ops it knows one by one (columns), the I/O it knows
only in aggregate (per-file counters), the processes, the files with their file systems, the
job's facts, and notes on what is missing or partial. Loaders (ioassess.inputs.load) build Jobs;
nothing downstream knows which input a number came from, except through Job.inputs and the
tier of each table.

Times are seconds since Job.start_epoch_s (the earliest start any input knows).
"""
import collections.abc
import dataclasses
import enum
import functools
import math
import os

import numpy as np

from ioassess.parallel import in_parallel, process_runs

LAYERS = ("posix", "mpiio", "stdio")
POSIX, MPIIO, STDIO = range(len(LAYERS))   # the codes of the layer column
# More ranks than any job has: an input that claims more is damaged (and the per-rank view
# would need arrays of that length).
MAX_RANKS = 1 << 23
DIRECTIONS = ("read", "write", "sync", "meta")
READ, WRITE, SYNC, META = range(len(DIRECTIONS))   # the codes of the direction column
# Metadata calls (direction META) by kind: Job.ops' meta_kind and Job.meta_kinds' kind are
# indices into it. They move no data; their time is not I/O time (report/metadata.py).
META_KINDS = ("open", "close", "stat", "access", "unlink", "mkdir", "rmdir", "rename", "opendir", "readdir",
              "closedir", "truncate", "fallocate", "mkstemp", "seek")
# Darshan's STDIO module names the standard streams so: streams, not files a job opened.
STANDARD_STREAMS = ("<STDIN>", "<STDOUT>", "<STDERR>")
# A Darshan log's note when it has no I/O; dropped when a trace of the same job has ops.
NO_IO_NOTE = "The log records no POSIX, MPI-IO or STDIO reads or writes: there is no I/O to assess."

# The ops known one by one (recorder traces, Darshan DXT segments). Row order: by process,
# then start time.
OP_COLUMNS = {
    "process": np.int32,      # index into Job.processes
    "file": np.int32,         # index into Job.files
    "layer": np.uint8,        # index into LAYERS
    "direction": np.uint8,    # index into DIRECTIONS
    "offset": np.int64,       # file offset, -1 if unknown
    "size": np.int64,         # bytes requested
    "result": np.int64,       # bytes transferred, or -errno for a failed call
    "start_s": np.float64,    # seconds since Job.start_epoch_s
    "duration_s": np.float64,
    "buffer": np.uint64,      # the buffer's address; 0 if unknown (Darshan has none)
    "tid": np.uint32,         # thread id, 0 if unknown
}


class Flag(enum.IntFlag):
    """Bits of Job.ops["flags"]: facts about an op that only some inputs know. The same bits as
    the recorder's (traceformat.OpFlag), so a trace's flags are kept as they are."""
    COLLECTIVE = 1 << 1        # an MPI-IO call the processes of a communicator made together
    NONBLOCKING = 1 << 2       # an MPI-IO call that only started its transfer: its time is that start
    UNDER_MPIIO = 1 << 3       # a POSIX call made inside an MPI-IO call
    UNDER_COLLECTIVE = 1 << 4  # a POSIX call made inside a collective MPI-IO call: aggregator work
    DIRECT = 1 << 5            # a POSIX call on a descriptor with O_DIRECT: it went past the page cache
    ASYNC = 1 << 6             # an asynchronous request (libaio, POSIX AIO): its time runs from its
                               # submission to its completion, and overlaps its process's other ops
    POSIX_AIO = 1 << 7         # ... made with POSIX AIO (aio_read, lio_listio, ...), else with libaio


# The page-cache state of an op's pages just before the call, as the kernel gave it
# (cachestat) for the ops the recorder sampled; -1 for every other op. Pages are of the
# sample's page size (4 KiB on x86-64), counted over the pages asked (pc_pages).
PAGECACHE_COLUMNS = {
    "pc_pages": np.int8,  # pages asked: all of the op's, or its first and last few (pc_whole)
    "pc_whole": np.int8,  # 1: the pages asked are every page of the op's requested range; 0: only
                          # its first and last ones (its first one for readv/writev/preadv/... )
    "pc_cached": np.int8,  # pages asked that were in the page cache (dirty ones included)
    "pc_dirty": np.int8,  # of those, dirty (written, not yet written back)
    "pc_writeback": np.int8,  # of those, being written back
    "pc_evicted": np.int8,  # pages asked that memory reclaim had evicted (not fadvise/drop_caches)
    "pc_recently_evicted": np.int8,  # of those, evicted recently
    "pc_new_pages": np.int8,  # writes: pages asked at or past the end of the file (no data there
                              # yet); -1 for reads and when the size was not known
    "pc_buffer_faulted": np.int8,  # 1: the op's user buffer was not all in memory before the call
                                   # (the call faulted it in: fresh memory), 0: it was; -1 not known
}

# Per-op columns only some inputs have: Job.ops lacks them when its input has none (read them
# with op_column, which gives OPTIONAL_OP_DEFAULTS for every op then).
OPTIONAL_OP_COLUMNS = {
    "flags": np.uint16,       # Flag bits (the recorder's traces; Darshan has none)
    "meta_kind": np.int8,     # a metadata call's kind (index into META_KINDS); -1 for other ops or unknown
    **PAGECACHE_COLUMNS,      # the recorder's traces; -1 for the ops it did not sample
}
OPTIONAL_OP_DEFAULTS = {"flags": 0, "meta_kind": -1, **{name: -1 for name in PAGECACHE_COLUMNS}}
ALL_OP_COLUMNS = {**OP_COLUMNS, **OPTIONAL_OP_COLUMNS}

# I/O known only in aggregate, one row per (process, file, layer, direction) and source: Darshan
# counters of files without DXT segments, and the recorder's summary table (ops past its record
# cap). Never the same ops as a row of Job.ops. Rows of direction META are metadata calls
# (Darshan: *_F_META_TIME with the opens, stats and seeks counted; bytes 0, no size bins).
TOTAL_COLUMNS = {
    "process": np.int32,       # index into Job.processes; -1: every rank of a shared-file record
    "file": np.int32,          # index into Job.files
    "layer": np.uint8,
    "direction": np.uint8,
    "ops": np.int64,
    "bytes": np.int64,
    "seconds": np.float64,     # summed op time (Darshan *_F_READ_TIME / *_F_WRITE_TIME)
    "max_op_seconds": np.float64,  # the slowest single op, NaN if unknown
    "max_op_size": np.int64,   # its size, -1 if unknown
}

# How many of those aggregated ops fell into each access-size bin (sizes in (size_low, size_high],
# the first bin includes 0). Rows refer to the same (process, file, layer, direction) as
# Job.totals.
SIZE_BIN_COLUMNS = {
    "process": np.int32,
    "file": np.int32,
    "layer": np.uint8,
    "direction": np.uint8,
    "size_low": np.int64,
    "size_high": np.int64,     # -1: no upper bound
    "ops": np.int64,
}

# How many of the aggregated metadata calls (Job.totals rows of direction META) were of each
# kind, where the input counts kinds (Darshan: *_OPENS, POSIX_STATS, *_SEEKS). Rows refer to the
# same (process, file, layer) as those totals rows; a kind no row names was not counted.
META_KIND_COLUMNS = {
    "process": np.int32,
    "file": np.int32,
    "layer": np.uint8,
    "kind": np.uint8,          # index into META_KINDS
    "ops": np.int64,
}

# The files a process mapped into memory (the recorder's traces: mmap of a recorded file), one
# row per mapping. The I/O a mapping makes is page faults, which nothing times: these rows are
# not ops and hold no time.
MAPPED_FILE_COLUMNS = {
    "process": np.int32,       # index into Job.processes
    "file": np.int32,          # index into Job.files
    "bytes": np.int64,         # the mapping's length
    "offset": np.int64,        # the file offset it starts at
    "read": np.bool_,          # PROT_READ
    "write": np.bool_,         # PROT_WRITE
    "exec": np.bool_,          # PROT_EXEC
    "shared": np.bool_,        # MAP_SHARED (stores reach the file), else MAP_PRIVATE
    "result": np.int64,        # 0, or -errno for a mapping that failed
}


# Darshan's access-size histogram bins (POSIX_SIZE_READ_0_100 ... _1G_PLUS): (low, high].
DARSHAN_SIZE_BINS = ((0, 100), (100, 1 << 10), (1 << 10, 10 << 10), (10 << 10, 100 << 10),
                     (100 << 10, 1 << 20), (1 << 20, 4 << 20), (4 << 20, 10 << 20),
                     (10 << 20, 100 << 20), (100 << 20, 1 << 30), (1 << 30, -1))


# Darshan modules that move data which ioassess does not assess (no op or totals row holds their
# I/O), what each is for the page, and where its data goes on: HDF5's and PnetCDF's through MPI-IO
# or POSIX (assessed there), DFS's and DAOS's to DAOS, past POSIX. Job.unassessed holds, per
# module of a Darshan log that has records of it, UNASSESSED_AMOUNTS as Darshan counted them.
UNASSESSED_MODULES = {
    "H5D": ("HDF5 datasets", "MPI-IO or POSIX"),
    "PNETCDF_VAR": ("PnetCDF variables", "MPI-IO"),
    "PNETCDF_FILE": ("PnetCDF files", "MPI-IO"),
    "DFS": ("the DAOS file system (DFS)", "DAOS"),
    "DAOS": ("DAOS objects", "DAOS"),
}
UNASSESSED_AMOUNTS = ("records", "bytes_read", "bytes_written", "read_s", "write_s")   # read_s, write_s: None if
                                                                                       # the module counts none


# Darshan's own per-record counters that no op or totals row carries, one row per POSIX, MPI-IO
# or STDIO counter record of a Darshan log (docs/darshan-input.md). A count Darshan does not
# keep for the module is -1; a time it does not keep is NaN.
DARSHAN_RECORD_COLUMNS = {
    "rank": np.int64,              # -1: a shared record, one for all ranks (reduced by Darshan)
    "file": np.int32,              # index into Job.files
    "layer": np.uint8,
    "reads": np.int64,
    "writes": np.int64,
    "consecutive_reads": np.int64,   # *_CONSEC_READS: at the offset where the previous read ended
    "consecutive_writes": np.int64,
    "sequential_reads": np.int64,    # *_SEQ_READS: at or past the offset where the previous read ended
    "sequential_writes": np.int64,
    "collective_reads": np.int64,    # MPIIO_COLL_READS
    "collective_writes": np.int64,
    "syncs": np.int64,             # POSIX_FSYNCS + POSIX_FDSYNCS, MPIIO_SYNCS
    "bytes_read": np.int64,        # *_BYTES_READ
    "bytes_written": np.int64,
    "read_s": np.float64,          # *_F_READ_TIME: summed time of the reads
    "write_s": np.float64,
    "meta_s": np.float64,          # *_F_META_TIME: summed time of the metadata calls
    "small_reads": np.int64,       # reads of at most 1 MiB (POSIX_SIZE_READ_0_100 ... _100K_1M)
    "small_writes": np.int64,
    "max_byte_read": np.int64,     # *_MAX_BYTE_READ: the highest offset read
    "max_byte_written": np.int64,
    "mem_not_aligned": np.int64,   # POSIX_MEM_NOT_ALIGNED: buffers not aligned to Darshan's memory alignment
    "file_not_aligned": np.int64,  # POSIX_FILE_NOT_ALIGNED: offsets not a multiple of file_alignment
    "file_alignment": np.int64,    # POSIX_FILE_ALIGNMENT: the file system's block size
    "independent_reads": np.int64,   # MPIIO_INDEP_READS
    "independent_writes": np.int64,
    "nonblocking_reads": np.int64,   # MPIIO_NB_READS
    "nonblocking_writes": np.int64,
    "fastest_rank": np.int64,      # shared records: the rank that spent least time on the file
    "fastest_s": np.float64,       # its time (reads, writes and metadata)
    "fastest_bytes": np.int64,
    "slowest_rank": np.int64,      # the rank that spent most time on it
    "slowest_s": np.float64,
    "slowest_bytes": np.int64,
    "variance_s": np.float64,      # variance of the time over the ranks
    "variance_bytes": np.float64,
}


@dataclasses.dataclass
class JobProcess:
    rank: int                 # MPI rank, -1 if not known
    hostname: str             # "" if not known
    pid: int                  # 0 if not known
    exe: str
    start_s: float            # since Job.start_epoch_s; NaN if not known
    end_s: float              # NaN while running, when killed, or not known
    end_reason: str           # "exit" | "exec" | "running/killed" | "unknown"
    exit_status: "int | None"
    source: str               # "trace" | "darshan"
    pagecache: str = "unknown"  # page-cache samples of its ops (traces): "on" (the kernel answered
                              # cachestat; pagecache_samples of its ops have them), "unavailable" (the
                              # kernel refused it: none after that), "off" (IOASSESS_PAGECACHE=0);
                              # "unknown" for Darshan's processes
    pagecache_samples: int = 0
    io_uring_instances: int = 0  # io_uring instances the recorder saw (their I/O is not timed)


@dataclasses.dataclass
class JobFile:
    name: str                 # as recorded (may be a hash when the input was obfuscated)
    mount_point: str = ""     # "" if not known
    fs_type: str = ""         # "ext4", "lustre", ...; "" if not known
    stripe_size: int = -1     # Lustre, -1 if not known
    stripe_count: int = -1
    osts: tuple = ()          # Lustre OST ids
    device: int = 0           # st_dev of the file (traces), 0 if not known


@dataclasses.dataclass
class JobInput:
    path: str
    kind: str                 # "trace" | "darshan"
    tiers: tuple              # what it gave: "ops", "totals", "metadata"
    notes: tuple = ()         # partial module, DXT truncated, unfinished log, unreadable files...


@dataclasses.dataclass
class Job:
    job_id: str               # "" if not known
    exe: str
    cmdline: str
    user: str                 # name or uid as text, "" if not known
    start_epoch_s: float
    end_epoch_s: float        # NaN if not known
    nprocs: int               # processes the job had: Darshan's nprocs, else its ranks, else len(processes)
    processes: list           # JobProcess
    files: list               # JobFile
    ops: dict                 # OP_COLUMNS, and those of OPTIONAL_OP_COLUMNS the input has
    totals: dict              # TOTAL_COLUMNS
    size_bins: dict           # SIZE_BIN_COLUMNS
    mounts: list              # (mount point, fs type)
    inputs: list              # JobInput
    notes: list = dataclasses.field(default_factory=list)   # job-wide: what the report must say
    # DARSHAN_RECORD_COLUMNS; empty without a Darshan log
    darshan_records: dict = dataclasses.field(default_factory=lambda: empty_columns(DARSHAN_RECORD_COLUMNS))
    # META_KIND_COLUMNS; empty when no input counts metadata calls by kind
    meta_kinds: dict = dataclasses.field(default_factory=lambda: empty_columns(META_KIND_COLUMNS))
    # MAPPED_FILE_COLUMNS; empty without recorder traces, or when no process mapped a file
    mapped_files: dict = dataclasses.field(default_factory=lambda: empty_columns(MAPPED_FILE_COLUMNS))
    # module (UNASSESSED_MODULES) -> {UNASSESSED_AMOUNTS}; empty without a Darshan log of such modules
    unassessed: dict = dataclasses.field(default_factory=dict)

    @property
    def runtime_s(self):
        return self.end_epoch_s - self.start_epoch_s if math.isfinite(self.end_epoch_s) else math.nan

    @functools.cached_property
    def io_seconds_per_file(self):
        """Read and write time per file of Job.files, of the layers whose time is the job's I/O
        time (MPI-IO calls contain POSIX ones): the ops are read for it once."""
        workers, runs = process_runs(op_counts(self))
        per_run = in_parallel(lambda run: _io_seconds(((ops, "duration_s") for ops, _ in op_chunks(self, 1 << 20, run)),
                                                      len(self.files)), runs, workers)
        return sum(per_run) + _io_seconds([(self.totals, "seconds")], len(self.files))


def _io_seconds(tables, files):
    """Per file, the read and write time of the tables' rows, (table, its seconds column) each,
    of the layers whose time is the job's I/O time (MPI-IO calls contain POSIX ones)."""
    seconds = np.zeros(files)
    for table, column in tables:
        chosen = (table["layer"] != LAYERS.index("mpiio")) & (table["direction"] < 2) & np.isfinite(table[column])
        seconds += np.bincount(table["file"][chosen], table[column][chosen], minlength=files)
    return seconds


def mount_index(mounts):
    """mounts [(mount point, fs type)], longest mount point first, as mount_of looks them up (of
    one mount point listed twice, the first)."""
    index = {}
    for mount_point, fs_type in mounts:
        index.setdefault(mount_point.rstrip("/") or "/", (mount_point, fs_type))
    return index


def mount_of(name, index):
    """(mount point, fs type) of a file: the longest mount point of index (mount_index) that is
    its name or a whole-component prefix of it; ("", "") if none is. One lookup per component of
    the name, however many mount points an input lists."""
    path = (name.rstrip("/") or "/") if name else ""
    while path:
        if path in index:
            return index[path]
        cut = path.rfind("/")
        path = "" if cut < 0 or path == "/" else path[:cut] or "/"
    return "", ""


# Mounts that hold no storage of their own for the files below them: a container's root
# (overlay), an initramfs root, memory, an automounter. A file whose own evidence (a Darshan
# LUSTRE record, a trace's statfs magic) names another type is on a file system mounted below
# such a mount, or below "/" of any type, that the job's mount table does not list.
GENERIC_MOUNT_TYPES = frozenset({"overlay", "overlayfs", "rootfs", "tmpfs", "autofs", "aufs", "none"})
# The names one type goes by: the kernel's mount table says overlay, its statfs magic overlayfs.
_TYPE_ALIASES = {"overlayfs": "overlay"}


def with_own_file_systems(files, mounts):
    """The JobFiles with the mount point of the file system their type names, where that type
    (from the file's own evidence: a Darshan LUSTRE record, a trace's statfs magic) is not the
    type of the mount the job's mount table gives it (mount_of) and that mount is generic
    (GENERIC_MOUNT_TYPES, or "/"): the longest mount of the table of the file's type that holds
    it, else the directory that the job's files of that type under generic mounts share. Files
    the table gives no mount, and names that are not absolute paths, are kept as they are."""
    index = mount_index(mounts)
    of_type = {}
    moved = {}
    for position, file in enumerate(files):
        mount_point, mount_type = mount_of(file.name, index)
        if not (mount_point and file.fs_type and file.name.startswith("/")) or \
                _TYPE_ALIASES.get(file.fs_type, file.fs_type) == _TYPE_ALIASES.get(mount_type, mount_type) or \
                not (mount_type in GENERIC_MOUNT_TYPES or (mount_point.rstrip("/") or "/") == "/"):
            continue
        if file.fs_type not in of_type:
            of_type[file.fs_type] = mount_index([entry for entry in mounts if entry[1] == file.fs_type])
        moved[position] = mount_of(file.name, of_type[file.fs_type])[0]
    shared = {}
    for position, mount_point in moved.items():
        if not mount_point:
            file = files[position]
            shared.setdefault(file.fs_type, []).append(file.name.rsplit("/", 1)[0] or "/")
    shared = {fs_type: os.path.commonpath(directories) for fs_type, directories in shared.items()}
    return [dataclasses.replace(file, mount_point=moved[position] or shared[file.fs_type]) if position in moved
            else file for position, file in enumerate(files)]


class StreamedOps(collections.abc.Mapping):
    """Job.ops of an input whose ops are read chunk by chunk from a source (source.chunks(size,
    processes) -> (columns, first row); source.counts: ops per process), as recorder traces are:
    op_chunks reads them without holding them all; the columns are read whole only when asked
    for (by tools and tests that want them side by side)."""

    def __init__(self, source):
        self.source = source
        self.columns = None

    def _all(self):
        if self.columns is None:
            self.columns = concatenate_columns(ALL_OP_COLUMNS, (chunk for chunk, _ in self.source.chunks(1 << 62)))
        return self.columns

    def __getitem__(self, name):
        return self._all()[name]

    def __iter__(self):
        return iter(self._all())

    def __len__(self):
        return len(self._all())


def _streamed(job):
    """Job.ops's source where its ops are read chunk by chunk (not read whole yet), else None."""
    return job.ops.source if isinstance(job.ops, StreamedOps) and job.ops.columns is None else None


def op_counts(job):
    """Per process (index into Job.processes), how many of Job.ops are its."""
    source = _streamed(job)
    if source is not None:
        return source.counts
    return np.bincount(job.ops["process"], minlength=len(job.processes))


def op_count(job):
    """How many ops Job.ops holds."""
    return int(op_counts(job).sum())


def op_chunks(job, size, processes=None):
    """Job.ops in chunks of at most `size` rows, in order: (columns, the index in Job.ops of the
    chunk's first row). processes: (first, stop) of the processes whose ops to give (default:
    all). A run of processes without ops gives one empty chunk."""
    source = _streamed(job)
    if source is not None:
        yield from source.chunks(size, processes)
        return
    ops, (first, stop) = job.ops, processes or (0, len(job.processes))
    start, end = np.searchsorted(ops["process"], [first, stop])
    for row in range(start, max(end, start + 1), size):
        rows = slice(row, min(row + size, end))
        yield {name: column[rows] for name, column in ops.items()}, row


def op_column(ops, name):
    """A column of OPTIONAL_OP_COLUMNS: the ops' own, or its default (not known) for every op."""
    if name in ops:
        return ops[name]
    return np.full(len(ops["size"]), OPTIONAL_OP_DEFAULTS[name], OPTIONAL_OP_COLUMNS[name])


def with_optional_columns(ops):
    """The ops with every optional column (0 where the input has none)."""
    return dict(ops, **{name: op_column(ops, name) for name in OPTIONAL_OP_COLUMNS})


def empty_columns(columns, n=0):
    return {name: np.zeros(n, dtype) for name, dtype in columns.items()}


def concatenate_columns(columns, tables):
    """One table from several with the same columns (an empty table if there are none)."""
    tables = list(tables)
    if not tables:
        return empty_columns(columns)
    return {name: np.concatenate([np.asarray(t[name], dtype) for t in tables]) for name, dtype in columns.items()}
