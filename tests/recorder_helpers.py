"""Plain helpers for the tests that run real programs under the recorder
(tests/test_transparency.py, tests/test_recorder.py), and the Darshan logs PyDarshan ships.

The programs in tests/progs/ are built by `make -C tests/progs` (part of `make test`); prog()
builds them if they are missing, so a single test file can also be run on its own. The
library itself comes from conftest.py's `recorder_lib` fixture.
"""
import dataclasses
import glob
import hashlib
import os
import pathlib
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import darshan
import numpy as np
import pytest

from ioassess import read_trace_dir, totals
from ioassess.site.training import workload_program_path
from ioassess.inputs.trace import DATA_KIND
from ioassess.inputs.traceformat import OP_NAMES
from ioassess.report.schema import CHECK_SCHEMA_ENV

REPO = pathlib.Path(__file__).resolve().parents[1]
PROGS = REPO / "tests" / "progs"
BIN = PROGS / "bin"
RUN_TIMEOUT_S = 120
WAIT_S = 60   # for a program under test to reach a state (a loaded machine is slow)

# Environment variables the recorder reads, and the batch/launcher variables it takes job id
# and rank from: none of them may leak from the developer's or CI's environment into a test.
RECORDER_ENV = ("LD_PRELOAD", "SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID", "PMI_RANK",
                "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "STACK_PROBE_OUT")

# The unprivileged user of the tests that need a second user (conftest.py's job_user).
TEST_USER = "ioassess-test"           # the job's user in tests that need one besides root
ATTACKER_USER = "ioassess-attacker"   # a second unprivileged user, who attacks the first
OP_CODES = {name: code for code, name in OP_NAMES.items()}  # "pread" -> 3
SYS_MADVISE = 28        # x86-64 system call numbers that prog("refuse") fails
SYS_CACHESTAT = 451


def prog(name):
    """Absolute path of a test program (or library) in tests/progs/bin, built if missing."""
    path = BIN / name
    if not path.exists():
        build = subprocess.run(["make", "-C", str(PROGS), "--no-print-directory"], capture_output=True,
                               text=True)
        if build.returncode != 0 or not path.exists():
            pytest.fail(f"cannot build tests/progs ({name}):\n{build.stdout[-2000:]}{build.stderr[-3000:]}")
    return str(path)


def tool(name):
    """Absolute path of a system program the tests need; fails (never skips) when it is missing."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"`{name}` is not installed; `make test` installs it (`make deps`), or install it by hand")
    return path


def system_user(name, home="/nonexistent"):
    """The passwd entry of the unprivileged user `name`, created (a system user without a login
    shell, with its home unless /nonexistent) when missing. Only root can do this, as the suite
    runs."""
    if os.geteuid() != 0:
        pytest.fail("this test runs programs as other users: run it as root (make test)")
    try:
        return pwd.getpwnam(name)
    except KeyError:
        made = ["--create-home"] if home != "/nonexistent" else ["--no-create-home"]
        subprocess.run([tool("useradd"), "--system", *made, "--home-dir", home, "--shell", "/usr/sbin/nologin", name],
                       check=True, capture_output=True)
        return pwd.getpwnam(name)


def is_ioassess_setting(name):
    """Whether an environment variable is one of the recorder's or the tool's IOASSESS_* settings,
    which must not leak from outside into a process a test starts. IOASSESS_CHECK_SCHEMA is not:
    conftest.py sets it for the session, and every process the tests start inherits it, so that
    each assessment made anywhere is checked against the schema (report/schema.py)."""
    return name.startswith("IOASSESS_") and name != CHECK_SCHEMA_ENV


def clean_env(extra=None):
    """The environment of a test run: the current one without any recorder, batch-system or
    launcher variable, with a fixed locale and time zone, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not is_ioassess_setting(k) and k not in RECORDER_ENV}
    env.update(LC_ALL="C", LANG="C", TZ="UTC")
    env.update(extra or {})
    return env


def run(cmd, cwd=None, env=None, preload=(), trace_dir=None, input=None, timeout=RUN_TIMEOUT_S, preexec_fn=None):
    """Run the argument list cmd; returns the CompletedProcess with bytes stdout and stderr.

    preload: libraries for LD_PRELOAD, in order (none: the plain, unrecorded run).
    trace_dir: IOASSESS_TRACE_DIR (created with mode 0700 first). env: extra variables.
    preexec_fn: called in the child before the program starts (e.g. to set a resource limit)."""
    full_env = clean_env(env)
    if preload:
        full_env["LD_PRELOAD"] = ":".join(str(p) for p in preload)
    if trace_dir is not None:
        os.makedirs(trace_dir, mode=0o700, exist_ok=True)
        full_env["IOASSESS_TRACE_DIR"] = str(trace_dir)
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=full_env, input=input, capture_output=True,
                          timeout=timeout, preexec_fn=preexec_fn)


def describe(result):
    """A short text of a run's outcome for assertion messages."""
    return (f"exit {result.returncode}\nstdout: {result.stdout[-1500:]!r}\n"
            f"stderr: {result.stderr[-1500:]!r}")


def tree_digest(root, exclude=(), mtimes=False):
    """{relative path: (kind, mode bits, size, sha256[, mtime_ns])} of everything under root;
    paths in exclude (relative, exact) are left out."""
    root = pathlib.Path(root)
    digest = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel in exclude:
            continue
        st = path.lstat()
        if path.is_symlink():
            entry = ("link", 0, 0, os.readlink(path))
        elif path.is_dir():
            entry = ("dir", st.st_mode & 0o7777, 0, "")
        elif path.is_file():
            h = hashlib.sha256()
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            entry = ("file", st.st_mode & 0o7777, st.st_size, h.hexdigest())
        else:
            entry = ("other", st.st_mode, 0, "")
        if mtimes and not path.is_symlink():
            entry += (st.st_mtime_ns,)
        digest[rel] = entry
    return digest


def assert_same_run(plain, recorded, compare_stderr=True, normalise=None):
    """The recorded run behaved exactly as the plain one: exit status, stdout, stderr."""
    norm = normalise or (lambda b: b)
    assert recorded.returncode == plain.returncode, (
        f"exit status differs under the recorder\nplain: {describe(plain)}\nrecorded: {describe(recorded)}")
    assert norm(recorded.stdout) == norm(plain.stdout), (
        f"stdout differs under the recorder\nplain: {describe(plain)}\nrecorded: {describe(recorded)}")
    if compare_stderr:
        assert norm(recorded.stderr) == norm(plain.stderr), (
            f"stderr differs under the recorder\nplain: {describe(plain)}\nrecorded: {describe(recorded)}")


def assert_same_tree(plain_dir, recorded_dir, exclude=(), mtimes=False):
    a = tree_digest(plain_dir, exclude, mtimes)
    b = tree_digest(recorded_dir, exclude, mtimes)
    assert a.keys() == b.keys(), (f"different files: only plain {sorted(a.keys() - b.keys())}, "
                                  f"only recorded {sorted(b.keys() - a.keys())}")
    differ = sorted(k for k in a if a[k] != b[k])
    assert not differ, "files differ under the recorder: " + ", ".join(f"{k}: {a[k]} vs {b[k]}" for k in differ[:10])


def trace_files(trace_dir):
    return sorted(pathlib.Path(trace_dir).glob("*.iot"))


def load(trace_dir, meta=False):
    """The TraceSet of a trace directory; the test fails if any trace file could not be read.
    Metadata ops (open, stat, close, ...: direction meta), mappings and io_uring instances are left
    out unless meta: the tests of reads, writes and syncs count those alone
    (tests/test_recorder_meta.py and tests/test_recorder_aio.py have the others)."""
    ts = read_trace_dir(str(trace_dir))
    assert not ts.errors, "unreadable traces: " + "; ".join(str(e) for e in ts.errors)
    if meta:
        return ts
    return without_meta(ts)


def without_meta(ts):
    """The TraceSet as it was before metadata ops, mappings and io_uring instances were recorded:
    without their op records and summary entries, the files only they name, and with the
    processes' counts of kept and summarised ops of the others (the record cap counts both)."""
    kept = DATA_KIND[ts.ops["op"]]
    kept_summary = DATA_KIND[ts.summary["op"]]
    ops = {name: column[kept] for name, column in ts.ops.items()}
    summary = {name: column[kept_summary] for name, column in ts.summary.items()}
    named = set(ops["file_id"].tolist()) | set(summary["file_id"].tolist())
    processes = [dataclasses.replace(p, ops_kept=int((ops["process"] == i).sum()),
                                     ops_not_kept=int(summary["count"][summary["process"] == i].sum()))
                 for i, p in enumerate(ts.processes)]
    return dataclasses.replace(ts, ops=ops, summary=summary, processes=processes,
                               files={fid: info for fid, info in ts.files.items() if fid in named})


def file_id(ts, path):
    """The file id the traces use for path (an absolute path): exactly one FileInfo has it."""
    ids = [fid for fid, info in ts.files.items() if info.name == str(path)]
    assert len(ids) == 1, (f"expected one file named {path} in the traces, found {len(ids)}; files: "
                           f"{sorted(info.name for info in ts.files.values())}")
    return ids[0]


def has_file(ts, path):
    return any(info.name == str(path) for info in ts.files.values())


def select(ts, path=None, op=None, process=None):
    """Boolean mask over ts.ops: records on path, of op kind (a name), of process (an index)."""
    mask = np.ones(len(ts.ops["op"]), bool)
    if path is not None:
        mask &= ts.ops["file_id"] == np.uint64(file_id(ts, path))
    if op is not None:
        mask &= ts.ops["op"] == OP_CODES[op]
    if process is not None:
        mask &= ts.ops["process"] == process
    return mask


def op_rows(ts, mask=None):
    """The selected op records as a list of dicts, in trace order (per process, by start time)."""
    idx = np.flatnonzero(mask) if mask is not None else np.arange(len(ts.ops["op"]))
    names = {fid: info.name for fid, info in ts.files.items()}
    rows = []
    for i in idx:
        row = {k: ts.ops[k][i].item() for k in ts.ops}
        row["kind"] = OP_NAMES[row["op"]]
        row["path"] = names.get(row["file_id"])
        rows.append(row)
    return rows


def total_table(ts, by=("file_id", "op")):
    """totals() as {key tuple: {count, bytes_requested, bytes_returned, errors}}; op keys are
    names and file_id keys are file names."""
    t = totals(ts, by=by)
    table = {}
    for i in range(len(t["count"])):
        key = []
        for k in by:
            v = t[k][i].item()
            if k == "op":
                v = OP_NAMES[v]
            elif k == "file_id":
                v = ts.files[v].name if v in ts.files else v
            key.append(v)
        table[tuple(key)] = {c: int(t[c][i]) for c in ("count", "bytes_requested", "bytes_returned", "errors")}
    return table


def processes_by_pid(ts):
    """{pid: [ProcessInfo, ...] in start order} (exec makes several traces for one pid)."""
    out = {}
    for p in sorted(ts.processes, key=lambda p: (p.start_ns, p.path)):
        out.setdefault(p.pid, []).append(p)
    return out


def shipped_darshan_logs():
    """Every distinct log PyDarshan ships (tests/input and examples/example_logs)."""
    root = os.path.dirname(darshan.__file__)
    by_name = {}
    logs = glob.glob(f"{root}/tests/input/*.darshan") + glob.glob(f"{root}/examples/example_logs/*.darshan")
    for path in sorted(logs):
        by_name.setdefault(os.path.basename(path), path)
    return sorted(by_name.values())


# Runs argv[2:] and writes its exit status and peak resident size (KiB) to the file argv[1]. A
# small process of its own: a child's ru_maxrss counts the memory of the process it was forked
# from, which the test's own would be.
PEAK_RSS_LAUNCHER = """
import resource, subprocess, sys
status = subprocess.call(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    f.write(f"{status} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}")
"""


def missing_debian_packages(packages, what):
    """Installs with apt-get (root) the Debian packages of the commands (or files) of packages,
    {command: package}, that are missing; the problem in one line when it cannot, else None."""
    missing = sorted({package for command, package in packages.items() if shutil.which(command) is None})
    if not missing:
        return None
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return f"{what} is not installed ({', '.join(missing)}) and apt-get cannot install it here"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *missing]):
        result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
        if result.returncode != 0:
            return f"`{' '.join(argv)}` failed: {(result.stdout + result.stderr).strip()[-2000:]}"
    still = [command for command in packages if shutil.which(command) is None]
    return f"installed {', '.join(missing)}, still no {', '.join(still)}" if still else None


def run_measured(cmd, env=None, cwd="/", timeout=RUN_TIMEOUT_S):
    """(the CompletedProcess of the argument list cmd, with text output; its peak resident size
    in KiB, the largest of it and the children it waited for)."""
    with tempfile.NamedTemporaryFile("r") as measured:
        result = subprocess.run([sys.executable, "-c", PEAK_RSS_LAUNCHER, measured.name, *map(str, cmd)], cwd=cwd,
                                env=env, capture_output=True, text=True, timeout=timeout)
        status, peak_kib = map(int, measured.read().split())
    return subprocess.CompletedProcess(cmd, status, result.stdout, result.stderr), peak_kib


__all__ = ["ATTACKER_USER", "BIN", "OP_CODES", "REPO", "TEST_USER", "assert_same_run", "assert_same_tree",
           "clean_env", "completed_pwrites", "describe", "evict", "file_id", "has_file", "is_ioassess_setting", "load",
           "op_rows", "processes_by_pid", "prog", "random_data_file", "run", "run_measured", "select",
           "shipped_darshan_logs", "stop_after", "system_user", "tool", "total_table", "trace_files", "tree_digest",
           "wait_until"]


def wait_until(reached, what, proc):
    """Poll reached() (yielding the CPU between tries) until it is true; fails if proc ends
    first or after WAIT_S. `what` describes the state for the message."""
    deadline = time.monotonic() + WAIT_S
    while not reached():
        assert proc.poll() is None, f"{proc.args[0]} ended before {what}: {proc.returncode}"
        assert time.monotonic() < deadline, f"{proc.args[0]}: no {what} in {WAIT_S} s"
        os.sched_yield()


def completed_pwrites(counter):
    """killme's count of the pwrites it completed (0 before it has made its counter file)."""
    try:
        with open(counter, "rb") as f:
            return int.from_bytes(os.pread(f.fileno(), 8, 0).ljust(8, b"\0"), "little")
    except FileNotFoundError:
        return 0


def killme_killed(data, counter, env, ops, preexec_fn=None):
    """Run killme on data (writing its count to counter) with env, SIGKILL it once it has
    completed at least `ops` pwrites (stopped first, so the count is exact); returns the count.
    preexec_fn: called in the child before killme starts."""
    proc = subprocess.Popen([prog("killme"), str(data), str(counter)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=preexec_fn)
    try:
        completed = stop_after(proc, counter, ops)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return completed, proc.pid


def stop_after(proc, counter, ops):
    """Stop killme (SIGSTOP, waited for) once it has completed `ops` pwrites; its count then."""
    wait_until(lambda: completed_pwrites(counter) >= ops, f"{ops} completed pwrites", proc)
    proc.send_signal(signal.SIGSTOP)
    _, status = os.waitpid(proc.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status)
    return completed_pwrites(counter)


def random_data_file(path, size):
    """A file of `size` random bytes (16 MiB of them repeated), written back to storage."""
    block = os.urandom(16 << 20)
    with open(path, "wb") as f:
        for _ in range(size // len(block)):
            f.write(block)
        os.fsync(f.fileno())
    return path


def evict(path):
    """Drop the file from the page cache and check that it is gone."""
    if os.geteuid() == 0:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    else:
        subprocess.run([workload_program_path(), "--evict", str(path)], check=True, capture_output=True)
    out = subprocess.run([workload_program_path(), "--resident", str(path)], check=True, capture_output=True,
                         text=True).stdout
    assert float(out.split()[0].split("=")[1]) < 0.01, out
