"""Metadata ops (open, close, stat, access, unlink, mkdir, rmdir, rename, mkstemp, opendir,
readdir, closedir, truncate, fallocate) are recorded, each with its duration, result or -errno
and the file id of its path, by real programs, and the programs behave exactly as without the
recorder.

tests/progs/metaops.c calls every wrapped entry point and prints what the recorder is to record;
tar, find | xargs stat and a Python import of generated modules are counted against strace
(every system call of the process tree on the test's directory, with `strace -f -y`) or the
program's own count.
"""
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

import numpy as np
import pytest

from ioassess.inputs.traceformat import META_KIND_NAMES, OP_DIRECTION, OP_LAYER, OP_NAMES, OpFlag
from recorder_helpers import describe, is_ioassess_setting, load, op_rows, prog, run

# the POSIX layer's metadata kinds (tests/test_recorder_stdio.py has the stdio layer's)
META_KINDS = {name for code, name in OP_NAMES.items() if OP_DIRECTION[code] == "meta" and OP_LAYER[code] == "posix"}
TMP_NAME = re.compile(r"tmp[A-Za-z0-9]{6}")


def meta_rows(ts, process=None):
    """The metadata op records (of one process), in order: (kind, result, file name or "-")."""
    rows = []
    for i in range(len(ts.ops["op"])):
        kind = OP_NAMES[int(ts.ops["op"][i])]
        if kind not in META_KINDS or (process is not None and int(ts.ops["process"][i]) != process):
            continue
        file_id = int(ts.ops["file_id"][i])
        name = "-" if file_id == 0 else ts.files[file_id].name
        rows.append((kind, int(ts.ops["result"][i]), name))
    return rows


def test_every_entry_point_recorded_with_result_errno_and_file(tmp_path, recorder_lib):
    plain_dir, rec_dir = tmp_path / "plain", tmp_path / "rec"
    plain_dir.mkdir()
    rec_dir.mkdir()
    plain = run([prog("metaops"), plain_dir])
    recorded = run([prog("metaops"), rec_dir], preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert plain.returncode == 0, describe(plain)

    def same(text, d):
        return TMP_NAME.sub("tmpNAME", text.decode().replace(str(d), "DIR"))

    assert (recorded.returncode, same(recorded.stdout, rec_dir), same(recorded.stderr, rec_dir)) == (
        plain.returncode, same(plain.stdout, plain_dir), same(plain.stderr, plain_dir))
    lines = [line.split(" ", 4) for line in recorded.stdout.decode().splitlines()]
    # errno is what the call left: 4321 (set just before) after every success
    assert all(int(errno) == 4321 for _, _, result, errno, _ in lines if int(result) >= 0 and _ != "none")
    expected = [(kind, int(result), path) for _, kind, result, _, path in lines if kind != "none"]
    ts = load(tmp_path / "traces", meta=True)
    (process,) = ts.processes
    assert meta_rows(ts) == expected
    # every wrapped family is exercised, failures included
    assert {kind for kind, _, _ in expected} == META_KINDS
    assert {kind for kind, result, _ in expected if result < 0} >= META_KINDS - {"close", "closedir", "readdir"}
    # a path's FILE slot has the mode of the stat or open that first named it, 0 for a missing one
    by_name = {info.name: info for info in ts.files.values()}
    assert by_name[str(rec_dir / "missing")].mode == 0
    # ... and every path the file system its directory is on: the one asked, even when missing
    fs_type = int(subprocess.run(["stat", "-f", "-c", "%t", rec_dir], capture_output=True, check=True).stdout, 16)
    assert by_name[str(rec_dir / "missing")].fs_magic == by_name[str(rec_dir / "f1")].fs_magic == fs_type != 0
    assert by_name[str(rec_dir / "f1")].mode & 0o170000 == 0o100000
    durations = ts.ops["duration_ns"]
    assert np.all(durations >= 0) and np.all(durations < 10**9)
    assert process.ops_lost == 0


def test_excluded_paths_and_unknown_descriptors_are_not_recorded(tmp_path, recorder_lib):
    script = ("import os\n"
              "os.stat('/usr'); os.listdir('/etc'); os.access('/proc/self', os.R_OK)\n"
              "r, w = os.pipe(); os.fstat(r); os.close(r); os.close(w)\n"
              f"os.stat({str(tmp_path / 'here')!r})\n")
    (tmp_path / "here").write_text("x")
    result = run([sys.executable, "-S", "-c", script], preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert result.returncode == 0, describe(result)
    ts = load(tmp_path / "traces", meta=True)
    names = {name for _, _, name in meta_rows(ts)}
    assert str(tmp_path / "here") in names
    assert not [name for name in names if name.startswith(("/usr", "/etc", "/proc", "/lib"))], names


def test_reopened_paths_name_the_file_they_name_now(tmp_path, recorder_lib):
    """A path opened before is entered without asking the kernel (ioassess-meta.c, "re-opens"):
    its ops still go to the file the path names in the directory it is relative to now, with
    offsets from 0 and the flags of this open, and each open's record names its reads' file."""
    for name, text in (("one", "1"), ("two", "22")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "data").write_text(text * 100)
    script = ("import os\n"
              "def read_twice():\n"
              "    for _ in range(2):\n"
              "        fd = os.open('data', os.O_RDONLY); os.read(fd, 10); os.read(fd, 10); os.close(fd)\n"
              f"os.chdir({str(tmp_path / 'one')!r}); read_twice()\n"
              f"os.chdir({str(tmp_path / 'two')!r}); read_twice()\n"
              "fd = os.open('data', os.O_WRONLY | os.O_APPEND); os.write(fd, b'x'); os.close(fd)\n")
    result = run([sys.executable, "-S", "-c", script], preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert result.returncode == 0, describe(result)
    ts = load(tmp_path / "traces", meta=True)
    rows = [(row["kind"], row["path"], row["offset"], row["result"], row["flags"])
            for row in op_rows(ts) if row["path"] in (str(tmp_path / "one" / "data"), str(tmp_path / "two" / "data"))]
    one, two = str(tmp_path / "one" / "data"), str(tmp_path / "two" / "data")
    kinds = [(kind, path) for kind, path, *_ in rows]
    assert kinds == ([("open", one), ("read", one), ("read", one), ("close", one)] * 2 +
                     [("open", two), ("read", two), ("read", two), ("close", two)] * 2 +
                     [("open", two), ("write", two), ("close", two)]), kinds
    data = [(kind, offset, result, flags) for kind, _, offset, result, flags in rows if kind in ("read", "write")]
    assert data == [("read", 0, 10, 0), ("read", 10, 10, 0)] * 4 + [("write", -1, 1, int(OpFlag.APPEND))], data


# --- real programs against strace ----------------------------------------------------------

STRACE_LINE = re.compile(r"^(\w+)\((.*)\)\s+=\s+(-?\d+)")
# System calls made for each recorded family, by the application's calls or by glibc's own
# inside a wrapped call (opendir opens and fstats its directory, closedir closes it). glibc 2.36
# makes every stat call with newfstatat or statx: the fstat system call is the recorder's own
# (it looks up each new descriptor with it), as are its other raw calls (on its trace, outside
# the test's directory).
SYSCALL_FAMILY = {
    "open": "open", "openat": "open", "creat": "open",
    "close": "close",
    "stat": "stat", "lstat": "stat", "newfstatat": "stat", "statx": "stat",
    "access": "access", "faccessat": "access", "faccessat2": "access",
    "unlink": "unlink", "rmdir": "rmdir", "mkdir": "mkdir", "mkdirat": "mkdir",
    "rename": "rename", "renameat": "rename", "renameat2": "rename",
    "truncate": "truncate", "ftruncate": "truncate", "fallocate": "fallocate",
}
STRACED = sorted(set(SYSCALL_FAMILY) | {"unlinkat", "fstat"})


def strace():
    path = shutil.which("strace")
    if path is None:
        installed = subprocess.run(["apt-get", "install", "-y", "strace"], capture_output=True)
        path = shutil.which("strace")
        if path is None:
            pytest.skip("strace is not installed and could not be installed "
                        f"({installed.stderr.decode(errors='replace')[-300:]})")
    return path


AT_PATH = re.compile(r'^(?:AT_FDCWD|-?\d+)(?:<([^>]*)>)?, "([^"]*)"')
FD_ONLY = re.compile(r"^-?\d+<([^>]*)>")
PATH_ONLY = re.compile(r'^"([^"]*)"')


def strace_target(args, cwd):
    """The absolute name of the file a system call names (its arguments as `strace -y` shows
    them), made normal as the recorder makes names; None if it cannot be told."""
    at = AT_PATH.match(args)
    if at:
        directory, path = at.group(1), at.group(2)
        if path == "" and directory:
            return directory                    # AT_EMPTY_PATH: the descriptor itself
        if directory is None and not path.startswith("/"):
            return None                         # relative to a descriptor strace cannot name
        return os.path.normpath(os.path.join(directory or "/", path))
    fd = FD_ONLY.match(args)
    if fd:
        return fd.group(1)
    path = PATH_ONLY.match(args)
    if path:                                    # open, stat, unlink, ...: relative to the
        return os.path.normpath(os.path.join(str(cwd), path.group(1)))  # directory it started in
    return None


def run_straced(cmd, cwd, tmp_path, recorder_lib, env=None):
    """Run cmd (a shell command) under strace and the recorder at once: the strace log's
    system calls that name a file under cwd, counted per recorded family, and the trace."""
    log = tmp_path / "strace.log"
    for old_log in tmp_path.glob("strace.log.*"):
        old_log.unlink()
    traces = tmp_path / "traces"
    traces.mkdir(mode=0o700)
    full_env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not is_ioassess_setting(k)}
    full_env.update(env or {})
    full_env = {k: v for k, v in full_env.items() if v is not None}   # None: not set
    result = subprocess.run(
        [strace(), "-ff", "-y", "-qq", "-s", "4096", "-e", "trace=" + ",".join(STRACED), "-o", str(log),
         "-E", f"LD_PRELOAD={recorder_lib}", "-E", f"IOASSESS_TRACE_DIR={traces}", "sh", "-c", cmd],
        cwd=cwd, env=full_env, capture_output=True, timeout=600)
    assert result.returncode == 0, describe(result)
    counts = collections.Counter()
    o_path = set()   # (pid, fd) opened with O_PATH inside glibc's fchmodat (not wrapped)
    lines = [(path.suffix, line) for path in tmp_path.glob("strace.log.*")   # one log per process
             for line in path.read_text(errors="replace").splitlines()]
    for pid, line in lines:
        m = STRACE_LINE.match(line)
        if not m or m.group(1) == "fstat":
            continue
        call, args, result = m.group(1), m.group(2), int(m.group(3))
        name = strace_target(args, cwd)
        if name is None or not (name == str(cwd) or name.startswith(str(cwd) + "/")):
            continue
        # glibc's fchmodat(AT_SYMLINK_NOFOLLOW) (tar restoring modes) opens the file with
        # O_PATH, fstats and closes it inside itself: no call of the application's
        if call == "openat" and "O_PATH" in args:
            o_path.add((pid, result))
            continue
        fd = re.match(r"^(\d+)<", args)
        if fd and (pid, int(fd.group(1))) in o_path:
            if call == "close":
                o_path.discard((pid, int(fd.group(1))))
            continue
        if call == "unlinkat":
            family = "rmdir" if "AT_REMOVEDIR" in args else "unlink"
        else:
            family = SYSCALL_FAMILY[call]
        counts[family] += 1
    return counts, load(traces, meta=True)


def recorded_counts(ts, inside):
    """Metadata records on files under the directory inside, per family (opendir counted with
    the opens it makes, closedir with the closes), and how many have file id 0."""
    counts = collections.Counter()
    unknown = 0
    for kind, _, name in meta_rows(ts):
        if name == "-":
            unknown += 1
        elif name == str(inside) or name.startswith(str(inside) + "/"):
            counts[kind] += 1
    return counts, unknown


def syscalls_of(recorded):
    """The system calls the recorded calls made, per family: opendir opens its directory and
    fstats it (glibc's opendir_tail), fdopendir fstats it; closedir closes it; mkstemp opens
    its file; readdir and getdents64 (getdents64 calls) are not compared."""
    out = collections.Counter()
    for kind, n in recorded.items():
        if kind == "opendir":
            continue                     # counted below, with what it makes
        if kind == "closedir":
            out["close"] += n
        elif kind == "mkstemp":
            out["open"] += n
        elif kind != "readdir":
            out[kind] += n
    return out


def test_tar_extracting_10000_small_files(tmp_path, recorder_lib):
    source = tmp_path / "source"
    names = []
    for d in range(100):
        (source / f"d{d:02d}").mkdir(parents=True)
        for f in range(100):
            path = source / f"d{d:02d}" / f"f{f:03d}"
            path.write_bytes(b"x" * (1 + (d * 100 + f) % 700))
            names.append(path)
    tarball = tmp_path / "files.tar"
    with tarfile.open(tarball, "w") as tar:
        tar.add(source, arcname="source")
    out = tmp_path / "out"
    out.mkdir()
    straced, ts = run_straced(f"tar xf {tarball}", out, tmp_path, recorder_lib)
    recorded, unknown = recorded_counts(ts, out)
    assert unknown == 0
    assert straced["open"] >= 10_000 and recorded["open"] == straced["open"], (recorded, straced)
    assert syscalls_of(recorded) == straced, (recorded, straced)
    assert recorded["mkdir"] == straced["mkdir"] >= 100
    # tar opens with the fortified __openat_2: every one of its files has its open and close
    files = {name for kind, _, name in meta_rows(ts) if kind == "open" and "/source/d" in name}
    assert len(files) == 10_000


def test_find_piped_to_xargs_stat(tmp_path, recorder_lib):
    tree = tmp_path / "tree"
    for d in range(50):
        (tree / f"a{d}" / "b").mkdir(parents=True)
        for f in range(20):
            (tree / f"a{d}" / "b" / f"f{f}").write_text(str(f))
    straced, ts = run_straced("find . -type f | xargs stat > /dev/null", tree, tmp_path, recorder_lib)
    recorded, unknown = recorded_counts(ts, tree)
    stats_by_stat = 0
    for i, p in enumerate(ts.processes):
        if os.path.basename(p.exe) == "stat":
            stats_by_stat += sum(1 for kind, _, name in meta_rows(ts, i)
                                 if kind == "stat" and name.startswith(str(tree) + "/"))
    assert stats_by_stat == 1000, "stat is called once per file"
    assert unknown == 0
    # find (fts) opens each directory itself and reads it through fdopendir, which fstats it
    expected = syscalls_of(recorded)
    expected["stat"] += recorded["opendir"]
    assert expected == straced, (recorded, straced)


MODULES = 300


def test_python_importing_many_modules(tmp_path, recorder_lib):
    modules = tmp_path / "modules"
    modules.mkdir()
    for i in range(MODULES):
        (modules / f"mod{i:03d}.py").write_text(f"VALUE = {i}\n")
    script = tmp_path / "imports.py"
    script.write_text("import importlib\n"
                      f"total = sum(importlib.import_module(f'mod{{i:03d}}').VALUE for i in range({MODULES}))\n"
                      "print(total)\n")
    for attempt in ("compiles", "reads the cache"):
        shutil.rmtree(tmp_path / "traces", ignore_errors=True)
        straced, ts = run_straced(f"{sys.executable} -S {script}", modules, tmp_path, recorder_lib,
                                  env={"PYTHONPATH": str(modules), "PYTHONDONTWRITEBYTECODE": None,
                                       "PYTHONPYCACHEPREFIX": None})
        recorded, unknown = recorded_counts(ts, modules)
        assert unknown == 0
        expected = syscalls_of(recorded)
        expected["open"] += recorded["opendir"]
        expected["stat"] += recorded["opendir"]
        assert expected == straced, (attempt, recorded, straced)
        # the program's own count: it imported MODULES modules; the first run opens each source
        # and writes its cache (a new file renamed into place), the second opens each cache
        opened = collections.Counter(os.path.splitext(name)[1] for kind, result, name in meta_rows(ts)
                                     if kind == "open" and result >= 0 and name.startswith(str(modules)))
        if attempt == "compiles":
            assert opened[".py"] == MODULES and recorded["rename"] == MODULES, (opened, recorded)
        else:
            assert opened[".pyc"] == MODULES and opened[".py"] == 0 and recorded["rename"] == 0, (opened, recorded)


def test_the_assessment_of_reads_writes_and_syncs_is_unchanged_by_metadata_ops(tmp_path, recorder_lib):
    """A job's metadata ops (direction meta) are neither I/O time nor syncs: the assessment of
    the job with them is that of the same job without them, but for the files they name."""
    from ioassess.inputs.job import DIRECTIONS, META
    from ioassess.inputs.load import load_job
    from ioassess.models.modelfile import load_model
    from ioassess.report.assess import assess

    work = tmp_path / "work"
    work.mkdir()
    script = ("import os, sys\n"
              "for i in range(50):\n"
              "    p = os.path.join(sys.argv[1], f'f{i}')\n"
              "    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o600)\n"
              "    os.write(fd, b'x' * (1000 + i)); os.pread(fd, 100, 0); os.fsync(fd); os.fstat(fd)\n"
              "    os.close(fd); os.stat(p + '.missing') if os.path.exists(p + '.missing') else None\n"
              "    os.rename(p, p + '.done')\n")
    result = run([sys.executable, "-S", "-c", script, work], preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert result.returncode == 0, describe(result)
    job = load_job([str(tmp_path / "traces")])
    assert DIRECTIONS[META] == "meta" and np.count_nonzero(job.ops["direction"] == META) >= 50 * 5
    plain = dict(job.__dict__)
    kept = job.ops["direction"] != META
    plain["ops"] = {name: column[kept] for name, column in job.ops.items()}
    without = type(job)(**plain)
    model = load_model("local-linux")
    with_meta, without_meta = assess(job, model), assess(without, model)

    def comparable(part):
        return json.loads(json.dumps(part, sort_keys=True, default=str))

    # the metadata section, its findings, its latency histograms and the count of files with
    # reads or writes (the job without its metadata ops still lists the files only they named)
    # are the metadata ops'
    meta_histograms = [h for h in with_meta["latency"]["histograms"] if h["kind"] == "meta"]
    assert sum(h["ops"] for h in meta_histograms) == np.count_nonzero(job.ops["direction"] == META)
    metadata_findings = {"Metadata time is high", "The same files opened or stat'ed many times", "Many small files",
                         "Stat of missing paths"}
    for assessment in (with_meta, without_meta):
        assessment["recommendations"] = [r for r in assessment["recommendations"]
                                          if r["title"] not in metadata_findings]
        del assessment["job"]["files"]
        assessment["latency"]["histograms"] = [h for h in assessment["latency"]["histograms"] if h["kind"] != "meta"]
    differ = [key for key in with_meta if key != "metadata" and
              comparable(with_meta[key]) != comparable(without_meta[key])]
    assert differ == [], {key: (with_meta[key], without_meta[key]) for key in differ}
    # the metadata section has them, by kind as the trace has them (Python's own fopen calls,
    # of its pyvenv.cfg and the like, are opens of the stdio layer)
    ts = load(tmp_path / "traces", meta=True)
    in_trace = collections.Counter(META_KIND_NAMES[op] for op in ts.ops["op"].tolist() if op in META_KIND_NAMES)
    kinds = {row["kind"]: row["calls"] for row in with_meta["metadata"]["kinds"]}
    assert kinds == in_trace and without_meta["metadata"] is None


def test_metadata_ops_past_the_record_cap_are_counted_by_kind(tmp_path, recorder_lib):
    """Past the record cap, the summary table keeps metadata ops per kind exactly: the Job's
    meta_kinds, and the metadata section's counted calls."""
    from ioassess.inputs.load import load_job
    from ioassess.models.modelfile import load_model
    from ioassess.report.assess import assess

    (tmp_path / "work").mkdir()
    plain = run([prog("metaops"), tmp_path / "work"])
    assert plain.returncode == 0, describe(plain)
    expected = collections.Counter(line.split(" ")[1] for line in plain.stdout.decode().splitlines())
    del expected["none"]
    (tmp_path / "work2").mkdir()
    result = run([prog("metaops"), tmp_path / "work2"], env={"IOASSESS_MAX_RECORDS": "10"}, preload=[recorder_lib],
                 trace_dir=tmp_path / "traces")
    assert result.returncode == 0, describe(result)
    section = assess(load_job([str(tmp_path / "traces")]), load_model("local-linux"))["metadata"]
    counted = {row["kind"]: row["calls"] + row["counted_calls"] for row in section["kinds"]}
    assert counted == dict(expected)
