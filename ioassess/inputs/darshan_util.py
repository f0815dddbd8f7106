"""What a Darshan log holds, read with darshan-util (ioassess.inputs.darshan_log makes the Job of it).

The log is read by darshan-util, the C library that PyDarshan (`darshan` on PyPI, 3.5.x) ships,
bound here with cffi directly instead of through PyDarshan's Python layer: that layer imports
pandas (about 40 MiB and 0.3 s before the first byte is read), builds a Python dict per DXT
segment, ignores darshan-util's error returns, and on a damaged file-name table closes the log
twice, which aborts the process. darshan-util itself asserts on some damaged data (an assertion
failure aborts the process), so it runs in a forked child process that sends back what it read
(or in the process itself where that process exists only to read, read_logs_in_this_process);
its complaints on stderr go to a file and are quoted in the notes and errors. Its declarations
below are parsed in advance, into cffi's out-of-line module _darshan_ffi.py
(write_parsed_declarations): parsing them at run time, pycparser's import included, took 20-40 ms
of every report.
"""
import contextlib
import dataclasses
import faulthandler
import glob
import importlib.util
import os
import pickle
import re
import resource
import signal
import stat
import tempfile
import traceback
import warnings

import numpy as np

from ..units import bytes_text, count_text
from .job import MAX_RANKS


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
extern char *h5d_counter_names[];
extern char *h5d_f_counter_names[];
extern char *pnetcdf_var_counter_names[];
extern char *pnetcdf_var_f_counter_names[];
extern char *pnetcdf_file_counter_names[];
extern char *pnetcdf_file_f_counter_names[];
extern char *dfs_counter_names[];
extern char *dfs_f_counter_names[];
extern char *daos_counter_names[];
extern char *daos_f_counter_names[];
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
# Modules that move data which ioassess does not assess (their I/O is neither POSIX, MPI-IO nor
# STDIO, or it is a library's above them): read for their bytes and times only. Their records
# are a base record, counters and fcounters as a POSIX record is, the datasets' and variables'
# with the record id of their file between base record and counters.
UNASSESSED_DATA_MODULES = {"H5D": "h5d", "PNETCDF_VAR": "pnetcdf_var", "PNETCDF_FILE": "pnetcdf_file",
                           "DFS": "dfs", "DAOS": "daos"}
_COUNTER_NAME_TABLES = {"POSIX": "posix", "MPI-IO": "mpiio", "STDIO": "stdio", **UNASSESSED_DATA_MODULES}
_WITH_FILE_RECORD_ID = ("H5D", "PNETCDF_VAR")
MAX_INFLATION = 2048  # more than zlib's maximum compression ratio (1032)
# The most bytes of records read from one log, inflated: a log can inflate a thousandfold (0.78 MB
# to 320 MB of DXT segments, which took 1.6 GB to assess). DXT keeps at most 2 MiB a process
# (Darshan's default): this is 64 processes' full DXT. Records past it are not read, and the
# I/O of DXT records not read is assessed from the counters.
MAX_RECORD_BYTES = 128 << 20
# What the child reading a log may allocate beyond what it has at the fork: the records kept,
# their joined copy, the record darshan-util inflates and its buffers. An allocation past it
# fails (darshan-util then reports the module damaged) instead of inflating a record of gigabytes.
CHILD_DATA_BYTES = 3 * MAX_RECORD_BYTES + (64 << 20)
# Why a module's records stopped before its end (_each_record).
DAMAGED, TOO_LARGE = "damaged", "too large"


class DarshanLogError(Exception):
    """A Darshan log that cannot be read; str() is the one line `PATH: problem`."""

    def __init__(self, path, problem):
        self.path = os.fspath(path)
        self.problem = problem
        super().__init__(" ".join(f"{self.path}: {problem}".splitlines()))


def read_log_contents(path):
    """What the Darshan log at path holds (LogContents). Raises DarshanLogError if the file is
    not a readable Darshan 3 log, or its job record or all of its I/O data cannot be read."""
    path = os.fspath(path)
    _check_header(path)
    binding = _darshan_util(path)
    return _read_here(path, binding) if _read_in_this_process else _read_in_child(path, binding)


_read_in_this_process = False


def read_logs_in_this_process(here=True):
    """Read logs in this process from now on (here), not in a forked child: for a process whose
    parent takes its death as the death of the log's reader (fleet ingest's workers), where the
    fork and the child's answer cost more than reading a small log."""
    global _read_in_this_process
    _read_in_this_process = here


# --- what the log holds, read with darshan-util ------------------------------------------------

@dataclasses.dataclass
class LogContents:
    job: dict  # the job record's fields and runtime_s
    cmdline: str
    mounts: list  # (mount point, fs type)
    modules: dict  # module name -> darshan_mod_info fields
    names: dict  # record id -> file name
    counters: dict  # module name -> (records (id, rank, counters, fcounters), counter names, fcounter names)
    lustre: dict  # record id -> (stripe size, stripe count, OST ids) of each LUSTRE record
    dxt: dict  # module name -> (records (id, rank, hostname, write_count, read_count), segments)
    problems: list  # one sentence each
    # module name (UNASSESSED_DATA_MODULES) -> records as `counters` has them
    unassessed: dict = dataclasses.field(default_factory=dict)


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
            ffi = _declared()
            library = _darshan_util_library()
        except ImportError:
            raise DarshanLogError(path, problem) from None
        if library is None:
            raise DarshanLogError(path, problem)
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


def _declared():
    """An FFI of _DECLARATIONS: the one parsed in advance, or, with a cffi that cannot load
    that module, parsed now."""
    try:
        from ._darshan_ffi import ffi
    except ImportError:
        import cffi
        ffi = cffi.FFI()
        ffi.cdef(_DECLARATIONS)
    return ffi


def write_parsed_declarations(path=os.path.join(os.path.dirname(os.path.abspath(__file__)), "_darshan_ffi.py")):
    """Write _DECLARATIONS, parsed, as cffi's out-of-line ABI module (run after changing them;
    tests/test_darshan_log.py checks that the file is current)."""
    import cffi
    builder = cffi.FFI()
    builder.set_source("ioassess.inputs._darshan_ffi", None)
    builder.cdef(_DECLARATIONS)
    builder.emit_python_code(path)
    with open(path) as f:
        code = f.read()
    with open(path, "w") as f:
        f.write("# ruff: noqa: E501\n" + code)


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
    return _answered(path, *answer)


def _read_here(path, binding):
    """_read_contents(path) in this process, with the child's limits: darshan-util's complaints
    on stderr go to a file, and its allocations are bounded while it reads."""
    with tempfile.TemporaryFile() as stderr_file, _stderr_into(stderr_file.fileno()):
        limits = resource.getrlimit(resource.RLIMIT_DATA)
        _limit_data(CHILD_DATA_BYTES)
        try:
            answer = _outcome(path, binding, stderr_file.fileno())
        finally:
            resource.setrlimit(resource.RLIMIT_DATA, limits)
    return _answered(path, *answer)


@contextlib.contextmanager
def _stderr_into(fd):
    saved = os.dup(2)
    os.dup2(fd, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _answered(path, outcome, value):
    if outcome == "error":
        raise DarshanLogError(path, value)
    if outcome == "bug":
        raise RuntimeError(f"reading {path} failed:\n{value}")
    return value


def _outcome(path, binding, stderr_fd):
    """("contents", LogContents), ("error", problem) or ("bug", traceback) of reading the log."""
    try:
        return "contents", _read_contents(*binding, path, lambda: _lines(stderr_fd))
    except DarshanLogError as error:
        return "error", error.problem
    except MemoryError:
        return "error", f"too large: reading it needs more than {bytes_text(CHILD_DATA_BYTES)} of memory"
    except Exception:
        return "bug", traceback.format_exc()


def _child(path, binding, read_end, write_end, stderr_fd):
    """Read the log, send _outcome to the parent, and exit without running the parent's exit
    handlers."""
    try:
        os.close(read_end)
        os.dup2(stderr_fd, 2)
        faulthandler.disable()   # an abort inside darshan-util is reported by the parent, once
        warnings.simplefilter("ignore")
        _limit_data(CHILD_DATA_BYTES)
        outcome = _outcome(path, binding, stderr_fd)
        with open(write_end, "wb") as pipe:
            pickle.dump(outcome, pipe, protocol=pickle.HIGHEST_PROTOCOL)
    finally:
        os._exit(0)


def _limit_data(n_bytes):
    """Let this process allocate at most n_bytes more than it has (RLIMIT_DATA: its heap and
    private mappings, darshan-util's allocations among them)."""
    with open("/proc/self/status") as status:
        data_bytes = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmData:"))
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = min(limit for limit in (soft, hard, data_bytes + n_bytes) if limit != resource.RLIM_INFINITY)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


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
        counters, lustre, dxt, unassessed = {}, {}, {}, {}
        failed = {}   # module -> why its records stopped
        budget = _Budget(MAX_RECORD_BYTES)
        for module, info in modules.items():
            mark = len(said())
            if module in UNASSESSED_DATA_MODULES:
                unassessed[module], records_read, stop = _read_counter_records(ffi, lib, handle, info["idx"],
                                                                               module, job["nprocs"], budget)
                if stop:   # noted; the I/O assessed does not depend on it
                    problems.append(f"{_stop_text(stop, module, said()[mark:])}: only "
                                    f"{count_text(records_read, 'record')} of it counted.")
                continue
            if module in COUNTER_MODULES:
                counters[module], records_read, stop = _read_counter_records(ffi, lib, handle, info["idx"], module,
                                                                             job["nprocs"], budget)
            elif module in DXT_MODULES:
                dxt[module], records_read, stop = _read_dxt_records(ffi, lib, handle, info["idx"], info["bytes"],
                                                                    job["nprocs"], budget)
            elif module == "LUSTRE":
                lustre, records_read, stop = _read_lustre_records(ffi, lib, handle, info["idx"], info["bytes"],
                                                                  budget)
            else:
                continue
            if stop:
                failed[module] = stop
                used = f"only its first {count_text(records_read, 'record')} can be used" if records_read else \
                    "none of its records can be used"
                problems.append(f"{_stop_text(stop, module, said()[mark:])}: {used}.")
            if stop == TOO_LARGE:
                # darshan-util cannot go on to another module from the middle of one (its
                # decompression stream is not reset): the other modules are read anew.
                lib.darshan_log_close(handle)
                handle = lib.darshan_log_open(path.encode())
                if handle == ffi.NULL:
                    raise DarshanLogError(path, _open_problem(said(), ffi.string(lib.darshan_log_get_lib_version())
                                                              .decode()))
        if failed and not any(len(c[0]) for c in counters.values()) and not any(len(d[0]) for d in dxt.values()):
            if TOO_LARGE in failed.values():
                raise DarshanLogError(path, f"too large: its records inflate to more than the "
                                            f"{bytes_text(MAX_RECORD_BYTES)} ioassess reads of a log before any of "
                                            f"its I/O records")
            raise DarshanLogError(path, f"truncated or corrupt: none of its I/O records can be read "
                                        f"({', '.join(failed)}){_quoted(said())}")
        return LogContents(job, cmdline, mounts, modules, names, counters, lustre, dxt, problems, unassessed)
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


class _OverBudget(Exception):
    """A record that would take the log's records past MAX_RECORD_BYTES: not read, nor any after it."""


class _Budget:
    """What is left of the bytes of records read from one log."""

    def __init__(self, n_bytes):
        self.left = n_bytes

    def spend(self, n_bytes):
        """Raise _OverBudget if n_bytes more is more than is left; else count them."""
        if n_bytes > self.left:
            raise _OverBudget
        self.left -= n_bytes


def _stop_text(stop, module, said):
    """Why a module's records stopped (DAMAGED, with darshan-util's complaint in said, or
    TOO_LARGE), as the start of a sentence."""
    if stop == TOO_LARGE:
        return f"The log's records inflate to more than the {bytes_text(MAX_RECORD_BYTES)} ioassess reads of a log " \
               f"at its {module} module"
    return f"The {module} module's data is damaged{_quoted(said)}"


def _each_record(ffi, lib, handle, module_index, take):
    """Call take(record) with each record of a module, a `void *` valid during the call. Returns
    (records read, why the rest is not read: None at the end of the module's data, DAMAGED when
    darshan-util failed to read it or take raised _ImpossibleRecord, TOO_LARGE when take raised
    _OverBudget)."""
    count = 0
    while True:
        record = ffi.new("void **")  # NULL: darshan-util allocates the record
        status = lib.darshan_log_get_record(handle, module_index, record)
        if status < 1:
            return count, DAMAGED if status < 0 else None
        try:
            take(record[0])
        except _ImpossibleRecord:
            return count, DAMAGED
        except _OverBudget:
            return count, TOO_LARGE
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


def _read_counter_records(ffi, lib, handle, module_index, module, nprocs, budget):
    """((records, counter names, fcounter names), records read, why reading stopped) of a POSIX, MPI-IO or
    STDIO module, or one of UNASSESSED_DATA_MODULES; records is a structured array with fields
    id, rank, counters and fcounters (and file_id, the records of _WITH_FILE_RECORD_ID)."""
    prefix = _COUNTER_NAME_TABLES[module]
    names = _counter_names(ffi, lib, f"{prefix}_counter_names")
    fnames = _counter_names(ffi, lib, f"{prefix}_f_counter_names")
    dtype = np.dtype([("id", "<u8"), ("rank", "<i8")] + [("file_id", "<u8")] * (module in _WITH_FILE_RECORD_ID) +
                     [("counters", "<i8", len(names)), ("fcounters", "<f8", len(fnames))])
    chunks = []

    def take(record):
        _check_rank(ffi.cast("struct darshan_base_record *", record), nprocs)
        budget.spend(dtype.itemsize)
        chunks.append(ffi.buffer(record, dtype.itemsize)[:])

    records_read, stop = _each_record(ffi, lib, handle, module_index, take)
    return (np.frombuffer(b"".join(chunks), dtype), names, fnames), records_read, stop


def _read_dxt_records(ffi, lib, handle, module_index, module_bytes, nprocs, budget):
    """((records, segments), records read, why reading stopped): records a structured array (id, rank,
    hostname, write_count, read_count), segments each record's write segments then its read
    segments, in record order."""
    header_bytes = ffi.sizeof("struct dxt_file_record")
    headers, chunks = [], []

    def take(record):
        header = ffi.cast("struct dxt_file_record *", record)
        _check_rank(header.base_rec, nprocs)
        n_bytes = (header.write_count + header.read_count) * SEGMENT_DTYPE.itemsize
        _check_sizes((header.write_count, header.read_count), n_bytes, module_bytes)
        budget.spend(header_bytes + n_bytes)
        headers.append((header.base_rec.id, header.base_rec.rank, ffi.string(header.hostname), header.write_count,
                        header.read_count))
        chunks.append(ffi.buffer(ffi.cast("char *", record) + header_bytes, n_bytes)[:])

    records_read, stop = _each_record(ffi, lib, handle, module_index, take)
    records = np.array(headers, dtype=[("id", "<u8"), ("rank", "<i8"), ("hostname", "S64"), ("write_count", "<i8"),
                                       ("read_count", "<i8")])
    return (records, np.frombuffer(b"".join(chunks), SEGMENT_DTYPE)), records_read, stop


def _read_lustre_records(ffi, lib, handle, module_index, module_bytes, budget):
    """(record id -> (stripe size, stripe count, OST ids), records read, why reading stopped): every file of
    a LUSTRE record, which is on Lustre. A file striped in several components (progressive file
    layout) gets the widest component's size and count and every component's OSTs (in order,
    without repeats); one of no component, -1, -1 and none."""
    names = _counter_names(ffi, lib, "lustre_comp_counter_names")
    size_column, count_column = names.index("LUSTRE_COMP_STRIPE_SIZE"), names.index("LUSTRE_COMP_STRIPE_COUNT")
    striping = {}

    def take(record):
        lustre = ffi.cast("struct darshan_lustre_record *", record)
        n_bytes = lustre.num_comps * ffi.sizeof("struct darshan_lustre_component") + lustre.num_stripes * 8
        _check_sizes((lustre.num_comps, lustre.num_stripes), n_bytes, module_bytes)
        budget.spend(n_bytes)
        components = [(lustre.comps[i].counters[size_column], lustre.comps[i].counters[count_column])
                      for i in range(lustre.num_comps)]
        if components:
            osts = ffi.unpack(lustre.ost_ids, lustre.num_stripes) if lustre.num_stripes > 0 else []
            stripe_size, stripe_count = max(components, key=lambda component: component[1])
            striping[int(lustre.base_rec.id)] = (int(stripe_size), int(stripe_count), tuple(dict.fromkeys(osts)))
        else:   # on Lustre all the same, its striping unknown
            striping[int(lustre.base_rec.id)] = (-1, -1, ())

    records_read, stop = _each_record(ffi, lib, handle, module_index, take)
    return striping, records_read, stop
