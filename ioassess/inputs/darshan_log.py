"""Reading a Darshan log into a Job (docs/darshan-input.md has the mapping and the decisions).

read_darshan_log() takes the job's facts from the job record, the mount table, Lustre striping,
the DXT_POSIX and DXT_MPIIO segments as ops, and the POSIX, MPI-IO and STDIO counters of I/O
that DXT did not trace as totals with their access-size histograms. A partial log (module
flagged partial, DXT truncated, no end time, damaged module data) is read as far as it goes and
each problem becomes a sentence in the JobInput's notes.

The log is read by darshan-util, the C library that PyDarshan (`darshan` on PyPI, 3.5.x) ships,
bound here with cffi directly instead of through PyDarshan's Python layer: that layer imports
pandas (about 40 MiB and 0.3 s before the first byte is read), builds a Python dict per DXT
segment, ignores darshan-util's error returns, and on a damaged file-name table closes the log
twice, which aborts the process. darshan-util itself asserts on some damaged data (an assertion
failure aborts the process), so it runs in a forked child process that sends back what it read;
its complaints on stderr go to a file and are quoted in the notes and errors.
"""
import dataclasses
import faulthandler
import glob
import importlib.util
import math
import os
import pickle
import re
import signal
import stat
import tempfile
import traceback
import warnings

import numpy as np

from ..units import count_text
from .job import (DARSHAN_RECORD_COLUMNS, DARSHAN_SIZE_BINS, DIRECTIONS, LAYERS, MAX_RANKS, NO_IO_NOTE, OP_COLUMNS,
                  SIZE_BIN_COLUMNS, TOTAL_COLUMNS, Job, JobFile, JobInput, JobProcess, empty_columns, mount_of)

DARSHAN_UTIL_VERSION_PREFIX = "3.5."  # the struct layouts declared below are darshan-util 3.5's
DARSHAN_MAGIC = 6567223  # DARSHAN_MAGIC_NR, the second 8 bytes of every Darshan 3 log
GZIP_MAGIC = b"\x1f\x8b"  # Darshan 2 logs are gzip files

_DECLARATIONS = """
typedef uint64_t darshan_record_id;
struct darshan_job {
    int64_t uid; int64_t start_time_sec; int64_t start_time_nsec; int64_t end_time_sec; int64_t end_time_nsec;
    int64_t nprocs; int64_t jobid; char metadata[1024];
};
struct darshan_mnt_info { char mnt_type[3015]; char mnt_path[3015]; };
struct darshan_mod_info { char *name; int len; int ver; int idx; int partial_flag; };
struct darshan_base_record { darshan_record_id id; int64_t rank; };
struct darshan_name_record { darshan_record_id id; char name[1]; };
typedef struct {
    void *tbl; void *prev; void *next; void *hh_prev; void *hh_next; void *key; unsigned keylen; unsigned hashv;
} UT_hash_handle;
struct darshan_name_record_ref { struct darshan_name_record *name_record; UT_hash_handle hlink; };
struct UT_hash_table { void *buckets; };
struct dxt_file_record {
    struct darshan_base_record base_rec; int64_t shared_record; char hostname[64]; int64_t write_count;
    int64_t read_count;
};
struct darshan_lustre_component { int64_t counters[7]; char pool_name[16]; };
struct darshan_lustre_record {
    struct darshan_base_record base_rec; int64_t num_comps; int64_t num_stripes;
    struct darshan_lustre_component *comps; int64_t *ost_ids;
};
extern char *posix_counter_names[];
extern char *posix_f_counter_names[];
extern char *mpiio_counter_names[];
extern char *mpiio_f_counter_names[];
extern char *stdio_counter_names[];
extern char *stdio_f_counter_names[];
extern char *lustre_comp_counter_names[];
char *darshan_log_get_lib_version(void);
void *darshan_log_open(const char *name);
void darshan_log_close(void *fd);
int darshan_log_get_job(void *fd, struct darshan_job *job);
int darshan_log_get_job_runtime(void *fd, struct darshan_job job, double *runtime);
int darshan_log_get_exe(void *fd, char *buf);
int darshan_log_get_mounts(void *fd, struct darshan_mnt_info **mounts, int *count);
void darshan_log_get_modules(void *fd, struct darshan_mod_info **modules, int *count);
int darshan_log_get_namehash(void *fd, struct darshan_name_record_ref **hash);
int darshan_log_get_record(void *fd, int module_index, void **record);
void darshan_free(void *pointer);
"""
EXE_BUFFER_BYTES = 4096  # darshan-util copies at most DARSHAN_EXE_LEN (3015) bytes

SEGMENT_DTYPE = np.dtype([("offset", "<i8"), ("length", "<i8"), ("start", "<f8"), ("end", "<f8")])
DXT_MODULES = {"DXT_POSIX": "posix", "DXT_MPIIO": "mpiio"}
COUNTER_MODULES = {"POSIX": "posix", "MPI-IO": "mpiio", "STDIO": "stdio"}
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
_RECORD_COUNTERS = {
    "POSIX": {"reads": ("POSIX_READS",), "writes": ("POSIX_WRITES",), "consecutive_reads": ("POSIX_CONSEC_READS",),
              "consecutive_writes": ("POSIX_CONSEC_WRITES",), "sequential_reads": ("POSIX_SEQ_READS",),
              "sequential_writes": ("POSIX_SEQ_WRITES",), "syncs": ("POSIX_FSYNCS", "POSIX_FDSYNCS")},
    "MPI-IO": {"reads": _DIRECTION_COUNTERS["MPI-IO"]["read"][0], "writes": _DIRECTION_COUNTERS["MPI-IO"]["write"][0],
               "collective_reads": ("MPIIO_COLL_READS",), "collective_writes": ("MPIIO_COLL_WRITES",),
               "syncs": ("MPIIO_SYNCS",)},
    "STDIO": {"reads": ("STDIO_READS",), "writes": ("STDIO_WRITES",)},
}
_RANK_COUNTERS = {"fastest_rank": "FASTEST_RANK", "fastest_bytes": "FASTEST_RANK_BYTES",
                  "slowest_rank": "SLOWEST_RANK", "slowest_bytes": "SLOWEST_RANK_BYTES"}
_RANK_FCOUNTERS = {"fastest_s": "F_FASTEST_RANK_TIME", "slowest_s": "F_SLOWEST_RANK_TIME",
                   "variance_s": "F_VARIANCE_RANK_TIME", "variance_bytes": "F_VARIANCE_RANK_BYTES"}
_COUNTER_NAME_TABLES = {"POSIX": "posix", "MPI-IO": "mpiio", "STDIO": "stdio"}
# Access-size bin of a size: the number of bin upper edges below it (the first bin includes 0).
_SIZE_BIN_UPPER_EDGES = np.array([high for _, high in DARSHAN_SIZE_BINS[:-1]], np.int64)
NOTE_LIST_LIMIT = 3  # files named in a note before "and N more"
# A DXT segment larger, or starting or lasting longer (in seconds), is damaged data.
MAX_SEGMENT_BYTES = 1 << 50
MAX_SEGMENT_SECONDS = 1e9
MAX_INFLATION = 2048  # more than zlib's maximum compression ratio (1032)


class DarshanLogError(Exception):
    """A Darshan log that cannot be read; str() is the one line `PATH: problem`."""

    def __init__(self, path, problem):
        self.path = os.fspath(path)
        self.problem = problem
        super().__init__(" ".join(f"{self.path}: {problem}".splitlines()))


def read_darshan_log(path):
    """The Job a Darshan log describes (see the module doc). Raises DarshanLogError if the file
    is not a readable Darshan 3 log, or its job record or all of its I/O data cannot be read."""
    path = os.fspath(path)
    _check_header(path)
    return _assemble_job(path, _read_in_child(path, _darshan_util(path)))


# --- what the log holds, read with darshan-util ------------------------------------------------

@dataclasses.dataclass
class _Contents:
    job: dict  # the job record's fields and runtime_s
    cmdline: str
    mounts: list  # (mount point, fs type)
    modules: dict  # module name -> darshan_mod_info fields
    names: dict  # record id -> file name
    counters: dict  # module name -> (records (id, rank, counters, fcounters), counter names, fcounter names)
    lustre: dict  # record id -> (stripe size, stripe count, OST ids)
    dxt: dict  # module name -> (records (id, rank, hostname, write_count, read_count), segments)
    problems: list  # one sentence each


def _check_header(path):
    """Refuse what is not a Darshan 3 log, with the reason, before darshan-util sees it."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise DarshanLogError(path, "not a regular file")
        with open(path, "rb") as f:
            head = f.read(16)
    except FileNotFoundError:
        raise DarshanLogError(path, "no such file or directory") from None
    except OSError as error:
        raise DarshanLogError(path, f"cannot read: {error.strerror}") from None
    if not head:
        raise DarshanLogError(path, "empty file, not a Darshan log")
    if head.startswith(GZIP_MAGIC):
        raise DarshanLogError(path, "a gzip file (a Darshan 2 log?): only Darshan 3 logs can be read")
    if len(head) < 16 and head.startswith(b"3."):
        raise DarshanLogError(path, f"truncated: {len(head)} bytes, less than a Darshan log header")
    magic = head[8:16]
    if len(head) < 16 or DARSHAN_MAGIC not in (int.from_bytes(magic, "little"), int.from_bytes(magic, "big")):
        raise DarshanLogError(path, "not a Darshan log (no Darshan log header)")
    version = head[:8].split(b"\0", 1)[0].decode("ascii", "backslashreplace")
    if not re.fullmatch(r"\d\.\d\d", version):
        raise DarshanLogError(path, "corrupt: the header's format version is garbled")
    if not version.startswith("3."):
        raise DarshanLogError(path, f"Darshan log format version {version}: only Darshan 3 logs can be read")


_BINDING = None


def _darshan_util(path):
    """(ffi, lib) of the darshan-util library PyDarshan ships, loaded once (path: for errors)."""
    global _BINDING
    if _BINDING is None:
        problem = "cannot read Darshan logs: PyDarshan 3.5 (`pip install 'darshan>=3.5,<3.6'`) is not installed"
        try:
            import cffi
            library = _darshan_util_library()
        except ImportError:
            raise DarshanLogError(path, problem) from None
        if library is None:
            raise DarshanLogError(path, problem)
        ffi = cffi.FFI()
        ffi.cdef(_DECLARATIONS)
        try:
            lib = ffi.dlopen(library)
        except OSError as error:
            raise DarshanLogError(path, f"cannot load darshan-util ({library}): {error}") from None
        version = ffi.string(lib.darshan_log_get_lib_version()).decode()
        if not version.startswith(DARSHAN_UTIL_VERSION_PREFIX):
            raise DarshanLogError(path, f"cannot read Darshan logs with darshan-util {version} ({library}): "
                                        f"version {DARSHAN_UTIL_VERSION_PREFIX}x is needed")
        _BINDING = ffi, lib
    return _BINDING


def _darshan_util_library():
    """Path of the libdarshan-util in PyDarshan's wheel (found without importing PyDarshan,
    which would import pandas), else the system's libdarshan-util.so, else None."""
    spec = importlib.util.find_spec("darshan")
    if spec is None or not spec.submodule_search_locations:
        return None
    for package_dir in spec.submodule_search_locations:
        found = sorted(glob.glob(os.path.join(package_dir, os.pardir, "darshan.libs", "libdarshan-util*.so*")))
        if found:
            return os.path.realpath(found[0])
    return "libdarshan-util.so"


def _read_in_child(path, binding):
    """_read_contents(path), run in a forked child process so that darshan-util crashing on a
    damaged log costs the child only. The child's stderr goes to a file the errors quote."""
    with tempfile.TemporaryFile() as stderr_file:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            _child(path, binding, read_end, write_end, stderr_file.fileno())
        os.close(write_end)
        try:
            with open(read_end, "rb") as pipe:
                answer = _unpickled(pipe)
        except BaseException:  # interrupted: the child's work is of no use
            os.kill(pid, signal.SIGKILL)
            raise
        finally:
            status = os.waitpid(pid, 0)[1]
        said = _lines(stderr_file.fileno())
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        raise DarshanLogError(path, f"damaged: darshan-util crashed reading it ({name}){_quoted(said)}")
    if answer is None:
        raise DarshanLogError(path, f"the process reading it ended without an answer (exit status "
                                    f"{os.waitstatus_to_exitcode(status)}){_quoted(said)}")
    outcome, value = answer
    if outcome == "error":
        raise DarshanLogError(path, value)
    if outcome == "bug":
        raise RuntimeError(f"reading {path} failed:\n{value}")
    return value


def _child(path, binding, read_end, write_end, stderr_fd):
    """Read the log, send ("contents", _Contents), ("error", problem) or ("bug", traceback) to
    the parent, and exit without running the parent's exit handlers."""
    try:
        os.close(read_end)
        os.dup2(stderr_fd, 2)
        faulthandler.disable()   # an abort inside darshan-util is reported by the parent, once
        warnings.simplefilter("ignore")
        try:
            outcome = ("contents", _read_contents(*binding, path, lambda: _lines(stderr_fd)))
        except DarshanLogError as error:
            outcome = ("error", error.problem)
        except Exception:
            outcome = ("bug", traceback.format_exc())
        with open(write_end, "wb") as pipe:
            pickle.dump(outcome, pipe, protocol=pickle.HIGHEST_PROTOCOL)
    finally:
        os._exit(0)


def _unpickled(pipe):
    """The object pickled into the pipe (read as it arrives, so that large arrays are not held
    twice), or None if there is none or only part of one."""
    try:
        return pickle.load(pipe)
    except (EOFError, pickle.UnpicklingError):
        return None


def _lines(fd):
    return os.pread(fd, os.fstat(fd).st_size, 0).decode("utf-8", "replace").splitlines()


def _quoted(lines):
    """' (darshan-util: its last specific complaint)', or '' if it said nothing."""
    messages = []
    for line in lines:
        assertion = re.search(r"(\w+): Assertion `(.*)' failed", line)
        message = f"assertion `{assertion[2]}' failed in {assertion[1]}" if assertion else \
            line.strip().removeprefix("Error:").strip().rstrip(".")
        if message and not message.startswith("darshan_log_open failed"):
            messages.append(message)
    return f" (darshan-util: {messages[-1]})" if messages else ""


def _open_problem(lines, lib_version):
    for line in lines:
        wrong_version = re.search(r"expected version (\S+), but got (.*)$", line)
        if wrong_version and re.fullmatch(r"\d\.\d\d", wrong_version[2]):
            return (f"Darshan log format version {wrong_version[2]} is not one darshan-util {lib_version} can "
                    f"read (its own format is {wrong_version[1]})")
        if wrong_version:
            return "corrupt: the header's format version is garbled"
    return f"truncated or corrupt: darshan-util cannot read its header{_quoted(lines)}"


def _read_contents(ffi, lib, path, said):
    """Everything read_darshan_log uses from the log; said() is what darshan-util printed so far."""
    handle = lib.darshan_log_open(path.encode())
    if handle == ffi.NULL:
        raise DarshanLogError(path, _open_problem(said(), ffi.string(lib.darshan_log_get_lib_version()).decode()))
    try:
        job = _read_job(ffi, lib, handle)
        if job is None:
            raise DarshanLogError(path, f"truncated or corrupt: its job record cannot be read{_quoted(said())}")
        if not 0 < job["nprocs"] <= MAX_RANKS:
            raise DarshanLogError(path, f"corrupt: its job record says {job['nprocs']} processes")
        problems = []
        cmdline = _read_cmdline(ffi, lib, handle)
        mounts = _read_table(lambda: _read_mounts(ffi, lib, handle), said, problems,
                             "mount table", "the file systems of some files are unknown")
        modules = _read_modules(ffi, lib, handle)
        names = _read_table(lambda: _read_names(ffi, lib, handle), said, problems,
                            "table of file names", "files without a name are shown by record id")
        counters, lustre, dxt = {}, {}, {}
        failed = []
        for module, info in modules.items():
            mark = len(said())
            if module in COUNTER_MODULES:
                counters[module], records_read, damaged = _read_counter_records(ffi, lib, handle, info["idx"], module,
                                                                                job["nprocs"])
            elif module in DXT_MODULES:
                dxt[module], records_read, damaged = _read_dxt_records(ffi, lib, handle, info["idx"], info["bytes"],
                                                                       job["nprocs"])
            elif module == "LUSTRE":
                lustre, records_read, damaged = _read_lustre_records(ffi, lib, handle, info["idx"], info["bytes"])
            else:
                continue
            if damaged:
                failed.append(module)
                used = f"only its first {count_text(records_read, 'record')} can be used" if records_read else \
                    "none of its records can be used"
                problems.append(f"The {module} module's data is damaged{_quoted(said()[mark:])}: {used}.")
        if failed and not any(len(c[0]) for c in counters.values()) and not any(len(d[0]) for d in dxt.values()):
            raise DarshanLogError(path, f"truncated or corrupt: none of its I/O records can be read "
                                        f"({', '.join(failed)}){_quoted(said())}")
        return _Contents(job, cmdline, mounts, modules, names, counters, lustre, dxt, problems)
    finally:
        lib.darshan_log_close(handle)


def _read_job(ffi, lib, handle):
    record = ffi.new("struct darshan_job *")
    if lib.darshan_log_get_job(handle, record) < 0:
        return None
    runtime = ffi.new("double *")
    lib.darshan_log_get_job_runtime(handle, record[0], runtime)
    return {"uid": record.uid, "start_time_sec": record.start_time_sec, "start_time_nsec": record.start_time_nsec,
            "end_time_sec": record.end_time_sec, "end_time_nsec": record.end_time_nsec, "nprocs": record.nprocs,
            "jobid": record.jobid, "runtime_s": runtime[0]}


def _read_cmdline(ffi, lib, handle):
    buffer = ffi.new("char[]", EXE_BUFFER_BYTES)
    lib.darshan_log_get_exe(handle, buffer)
    return ffi.string(buffer).decode("utf-8", "backslashreplace").strip()


def _read_table(read, said, problems, what, consequence):
    """What read() returns of a table; when it says the table is damaged, a sentence about it
    (with what darshan-util printed meanwhile) goes into problems."""
    mark = len(said())
    table, damaged = read()
    if damaged:
        problems.append(f"The log's {what} is damaged{_quoted(said()[mark:])}: {consequence}.")
    return table


def _read_mounts(ffi, lib, handle):
    """((mount point, fs type) pairs, longest mount point first; whether the table is damaged)."""
    table, count = ffi.new("struct darshan_mnt_info **"), ffi.new("int *")
    failed = lib.darshan_log_get_mounts(handle, table, count) < 0
    mounts = []
    if table[0] != ffi.NULL:
        for entry in table[0][0:count[0]]:
            mounts.append((ffi.string(entry.mnt_path).decode("utf-8", "backslashreplace"),
                           ffi.string(entry.mnt_type).decode("utf-8", "backslashreplace")))
        lib.darshan_free(table[0])
    return sorted(mounts, key=lambda mount: (-len(mount[0]), mount[0])), failed


def _read_modules(ffi, lib, handle):
    table, count = ffi.new("struct darshan_mod_info **"), ffi.new("int *")
    lib.darshan_log_get_modules(handle, table, count)
    modules = {}
    if table[0] != ffi.NULL:
        for info in table[0][0:count[0]]:
            modules[ffi.string(info.name).decode()] = {"idx": info.idx, "ver": info.ver, "bytes": info.len,
                                                       "partial": bool(info.partial_flag)}
        lib.darshan_free(table[0])
    return modules


def _read_names(ffi, lib, handle):
    """(record id -> file name, whether the table is damaged: then it has the names read before
    the damage). darshan-util hands the names over as a uthash table; it is walked through
    its `next` links and freed here (darshan_log_get_name_records, PyDarshan's way to get them,
    closes the log when the table is damaged, and the later close then aborts the process)."""
    head = ffi.new("struct darshan_name_record_ref **")
    failed = lib.darshan_log_get_namehash(handle, head) < 0
    names = {}
    ref = head[0]
    table = ref.hlink.tbl if ref != ffi.NULL else ffi.NULL
    while ref != ffi.NULL:
        record = ref.name_record
        names[int(record.id)] = ffi.string(ffi.cast("char *", record.name)).decode("utf-8", "backslashreplace")
        following = ffi.cast("struct darshan_name_record_ref *", ref.hlink.next)
        lib.darshan_free(record)
        lib.darshan_free(ref)
        ref = following
    if table != ffi.NULL:
        lib.darshan_free(ffi.cast("struct UT_hash_table *", table).buckets)
        lib.darshan_free(table)
    return names, failed


class _ImpossibleRecord(Exception):
    """A record whose sizes cannot be right: the module's data is damaged from there on."""


def _each_record(ffi, lib, handle, module_index, take):
    """Call take(record) with each record of a module, a `void *` valid during the call. Returns
    (records read, whether the rest is damaged: darshan-util failed to read it, or take raised
    _ImpossibleRecord)."""
    count = 0
    while True:
        record = ffi.new("void **")  # NULL: darshan-util allocates the record
        status = lib.darshan_log_get_record(handle, module_index, record)
        if status < 1:
            return count, status < 0
        try:
            take(record[0])
        except _ImpossibleRecord:
            return count, True
        finally:
            lib.darshan_free(record[0])
        count += 1


def _check_rank(record, nprocs):
    """Raise _ImpossibleRecord for a record of a rank the job did not have (-1: every rank)."""
    if not -1 <= record.rank < nprocs:
        raise _ImpossibleRecord


def _check_sizes(counts, n_bytes, module_bytes):
    """Raise _ImpossibleRecord for negative counts, or more data than the module's compressed
    bytes can inflate to: damaged data that darshan-util passed on, whose counts would have us
    read past the record's buffer."""
    if min(counts) < 0 or n_bytes > MAX_INFLATION * module_bytes:
        raise _ImpossibleRecord


def _counter_names(ffi, lib, table):
    names, index = [], 0
    array = getattr(lib, table)
    while True:
        name = ffi.string(array[index]).decode()
        if name.endswith("_NUM_INDICES"):
            return names
        names.append(name)
        index += 1


def _read_counter_records(ffi, lib, handle, module_index, module, nprocs):
    """((records, counter names, fcounter names), records read, damaged) of a POSIX, MPI-IO or
    STDIO module; records is a structured array with fields id, rank, counters and fcounters."""
    prefix = _COUNTER_NAME_TABLES[module]
    names = _counter_names(ffi, lib, f"{prefix}_counter_names")
    fnames = _counter_names(ffi, lib, f"{prefix}_f_counter_names")
    dtype = np.dtype([("id", "<u8"), ("rank", "<i8"), ("counters", "<i8", len(names)),
                      ("fcounters", "<f8", len(fnames))])
    chunks = []

    def take(record):
        _check_rank(ffi.cast("struct darshan_base_record *", record), nprocs)
        chunks.append(ffi.buffer(record, dtype.itemsize)[:])

    records_read, damaged = _each_record(ffi, lib, handle, module_index, take)
    return (np.frombuffer(b"".join(chunks), dtype), names, fnames), records_read, damaged


def _read_dxt_records(ffi, lib, handle, module_index, module_bytes, nprocs):
    """((records, segments), records read, damaged): records a structured array (id, rank,
    hostname, write_count, read_count), segments each record's write segments then its read
    segments, in record order."""
    header_bytes = ffi.sizeof("struct dxt_file_record")
    headers, chunks = [], []

    def take(record):
        header = ffi.cast("struct dxt_file_record *", record)
        _check_rank(header.base_rec, nprocs)
        n_bytes = (header.write_count + header.read_count) * SEGMENT_DTYPE.itemsize
        _check_sizes((header.write_count, header.read_count), n_bytes, module_bytes)
        headers.append((header.base_rec.id, header.base_rec.rank, ffi.string(header.hostname), header.write_count,
                        header.read_count))
        chunks.append(ffi.buffer(ffi.cast("char *", record) + header_bytes, n_bytes)[:])

    records_read, damaged = _each_record(ffi, lib, handle, module_index, take)
    records = np.array(headers, dtype=[("id", "<u8"), ("rank", "<i8"), ("hostname", "S64"), ("write_count", "<i8"),
                                       ("read_count", "<i8")])
    return (records, np.frombuffer(b"".join(chunks), SEGMENT_DTYPE)), records_read, damaged


def _read_lustre_records(ffi, lib, handle, module_index, module_bytes):
    """(record id -> (stripe size, stripe count, OST ids), records read, damaged). A file striped
    in several components (progressive file layout) gets the widest component's size and count
    and every component's OSTs (in order, without repeats)."""
    names = _counter_names(ffi, lib, "lustre_comp_counter_names")
    size_column, count_column = names.index("LUSTRE_COMP_STRIPE_SIZE"), names.index("LUSTRE_COMP_STRIPE_COUNT")
    striping = {}

    def take(record):
        lustre = ffi.cast("struct darshan_lustre_record *", record)
        n_bytes = lustre.num_comps * ffi.sizeof("struct darshan_lustre_component") + lustre.num_stripes * 8
        _check_sizes((lustre.num_comps, lustre.num_stripes), n_bytes, module_bytes)
        components = [(lustre.comps[i].counters[size_column], lustre.comps[i].counters[count_column])
                      for i in range(lustre.num_comps)]
        if components:
            osts = ffi.unpack(lustre.ost_ids, lustre.num_stripes) if lustre.num_stripes > 0 else []
            stripe_size, stripe_count = max(components, key=lambda component: component[1])
            striping[int(lustre.base_rec.id)] = (int(stripe_size), int(stripe_count), tuple(dict.fromkeys(osts)))

    records_read, damaged = _each_record(ffi, lib, handle, module_index, take)
    return striping, records_read, damaged


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
    problems += _partial_module_problems(contents.modules)

    segments, segment_group, dxt_groups = _dxt_tables(contents.dxt, problems)
    counter_rows, bins = _counter_tables(contents.counters, problems)
    totals, size_bins, missing = _untraced_totals(counter_rows, bins, dxt_groups)
    problems += _truncated_dxt_problems(missing, contents.names)

    records = _record_table(contents.counters, contents.job["nprocs"])
    traced = dxt_groups["ops"] > 0
    named_ranks = np.concatenate([records["fastest_rank"], records["slowest_rank"]])
    processes, rank_of_process = _processes(contents, dxt_groups["rank"][traced],
                                            np.concatenate([totals["rank"], named_ranks]), _exe(contents.cmdline))
    files, file_index = _files(contents, dxt_groups["record_id"][traced], totals["record_id"], records["record_id"])
    records["file"] = _position(records.pop("record_id"), file_index)
    ops = _op_columns(segments, segment_group, dxt_groups, file_index, rank_of_process)
    totals_columns = _indexed(totals, TOTAL_COLUMNS, file_index, rank_of_process)
    size_bin_columns = _indexed(size_bins, SIZE_BIN_COLUMNS, file_index, rank_of_process)
    tiers = tuple(tier for tier, present in (("ops", len(ops["size"])), ("totals", len(totals_columns["ops"])),
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
    )


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
        times_valid = (np.abs(segments["start"]) <= MAX_SEGMENT_SECONDS) & (0 <= durations) & \
            (durations <= MAX_SEGMENT_SECONDS)
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


def _counter_tables(counters, problems):
    """(rows, bins): per counter record and direction, the record id, rank, layer, direction,
    ops, bytes, seconds, max_op_seconds, max_op_size and has_bins; bins the (n, 10) histogram.
    Negative values (a bug of some old Darshan versions) are taken as 0 and noted."""
    row_tables, bin_tables = [], []
    for module, (records, names, fnames) in counters.items():
        layer = LAYERS.index(COUNTER_MODULES[module])
        counter, fcounter = records["counters"], records["fcounters"]
        negative = np.zeros(len(records), bool)
        for direction, (op_names, bytes_name, seconds_name, max_seconds_name, max_size_name, bins_prefix) in \
                _DIRECTION_COUNTERS[module].items():
            ops = sum(counter[:, names.index(name)] for name in op_names)
            byte_count = counter[:, names.index(bytes_name)]
            seconds = fcounter[:, fnames.index(seconds_name)]
            if bins_prefix:
                bins = counter[:, [names.index(bins_prefix + suffix) for suffix in _SIZE_BIN_SUFFIXES]]
            else:
                bins = np.zeros((len(records), len(DARSHAN_SIZE_BINS)), np.int64)
            seconds_invalid = ~(np.isfinite(seconds) & (seconds >= 0))
            negative |= (ops < 0) | (byte_count < 0) | seconds_invalid | np.any(bins < 0, axis=1)
            unknown = np.full(len(records), -1)
            max_seconds = fcounter[:, fnames.index(max_seconds_name)] if max_seconds_name else unknown
            max_size = counter[:, names.index(max_size_name)] if max_size_name else unknown
            row_tables.append({
                "record_id": records["id"], "rank": records["rank"], "layer": np.full(len(records), layer, np.uint8),
                "direction": np.full(len(records), DIRECTIONS.index(direction), np.uint8),
                "ops": np.maximum(ops, 0), "bytes": np.maximum(byte_count, 0),
                "seconds": np.where(seconds_invalid, 0.0, seconds),
                "max_op_seconds": np.where(np.isfinite(max_seconds) & (max_seconds >= 0), max_seconds, np.nan),
                "max_op_size": np.where(max_size >= 0, max_size, -1),
                "has_bins": np.full(len(records), bins_prefix is not None),
                "syncs": _synccount_text(module, direction, counter, names),
            })
            bin_tables.append(np.maximum(bins, 0))
        if negative.any():
            problems.append(f"Negative operation counts, byte counts or times (a bug of some older Darshan versions, "
                            f"or damaged data) in {count_text(np.count_nonzero(negative), module + ' record')} are "
                            f"taken as 0.")
    rows = _concatenated(row_tables, {"record_id": np.uint64, "rank": np.int64, "layer": np.uint8,
                                      "direction": np.uint8, "ops": np.int64, "bytes": np.int64,
                                      "seconds": np.float64, "max_op_seconds": np.float64,
                                      "max_op_size": np.int64, "has_bins": bool, "syncs": np.int64})
    bins = np.concatenate(bin_tables) if bin_tables else np.zeros((0, len(DARSHAN_SIZE_BINS)), np.int64)
    return rows, bins


def _record_table(counters, nprocs):
    """The columns of Job.darshan_records (record_id in place of file) of the counter records
    with reads or writes. A fastest or slowest rank the job did not have, or a time that is not
    a finite number of seconds, is unknown (-1, NaN): damage, never a process or an array size."""
    tables = []
    for module, (records, names, fnames) in counters.items():
        n = len(records)
        prefix = module.replace("-", "") + "_"

        def counter(name):
            return records["counters"][:, names.index(name)] if name in names else np.full(n, -1)

        table = {"record_id": records["id"], "rank": records["rank"],
                 "layer": np.full(n, LAYERS.index(COUNTER_MODULES[module]), np.uint8)}
        for column in DARSHAN_RECORD_COLUMNS:
            if column in _RECORD_COUNTERS[module]:
                table[column] = sum(np.maximum(counter(name), 0) for name in _RECORD_COUNTERS[module][column])
            elif column in _RANK_COUNTERS:
                values = counter(prefix + _RANK_COUNTERS[column])
                valid = (values >= 0) & (values < nprocs if column.endswith("_rank") else True)
                table[column] = np.where((records["rank"] < 0) & valid, values, -1)
            elif column in _RANK_FCOUNTERS:
                name = prefix + _RANK_FCOUNTERS[column]
                values = records["fcounters"][:, fnames.index(name)] if name in fnames else np.full(n, np.nan)
                table[column] = np.where((records["rank"] < 0) & np.isfinite(values) & (values >= 0), values, np.nan)
            elif column not in table and column != "file":
                table[column] = np.full(n, -1)
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
    return sum(np.maximum(counter[:, names.index(name)], 0) for name in _RECORD_COUNTERS["POSIX"]["syncs"])


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
    for layer in np.unique(missing["layer"]):
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
    ranks = np.unique(np.concatenate([traced_ranks, other_ranks[other_ranks >= 0]]))
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
    system and Lustre striping; and their record ids in that order, for indexing."""
    record_ids = np.unique(np.concatenate(record_id_columns))
    names = [_file_name(contents.names, record_id) for record_id in record_ids.tolist()]
    order = sorted(range(len(names)), key=names.__getitem__)
    files = []
    for i in order:
        mount_point, fs_type = mount_of(names[i], contents.mounts)
        stripe_size, stripe_count, osts = contents.lustre.get(int(record_ids[i]), (-1, -1, ()))
        files.append(JobFile(names[i], mount_point, fs_type, stripe_size, stripe_count, osts))
    return files, record_ids[np.array(order, np.int64)]


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
    """Columns of a totals or size-bins table, record ids and ranks turned into file and process
    indices (rank -1 stays -1)."""
    if not len(table["rank"]):
        return empty_columns(columns)
    process = np.full(len(table["rank"]), -1, np.int64)
    own = table["rank"] >= 0
    process[own] = _position(table["rank"][own], process_ranks)
    values = dict(table, process=process, file=_position(table["record_id"], file_record_ids))
    order = np.lexsort((values["direction"], values["layer"], values["file"], values["process"]))
    return {name: np.asarray(values[name], dtype)[order] for name, dtype in columns.items()}
