"""The recorder is transparent: real programs behave byte for byte the same with and without it.

Each test prepares two fresh directories with identical inputs, runs the program in one plainly
and in the other under the recorder (LD_PRELOAD), and compares exit status, stdout, stderr
(where the program's own stderr is deterministic) and every file the program produced. Where
the ground truth is known (dd, the 16-thread program, the shell pipeline, sqlite3) the trace
is checked against it too.
"""
import os
import random
import sys
import tarfile
import textwrap

import numpy as np
import pytest

from recorder_helpers import (assert_same_run, assert_same_tree, file_id, load, op_rows, processes_by_pid,
                              prog, run, select, tool, trace_files)

MTIME = 1_600_000_000  # fixed mtime of every input file (tar stores it)


def random_bytes(n, seed):
    return random.Random(seed).randbytes(n)


def text_lines(n_lines, seed):
    """Deterministic text: lines of random words, many duplicates (so gzip and sort have work)."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu"]
    return "".join(" ".join(rng.choice(words) + str(rng.randrange(1000)) for _ in range(rng.randrange(1, 9))) + "\n"
                   for _ in range(n_lines)).encode()


def write(path, data, mtime=MTIME):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (mtime, mtime))


class Pair:
    """Two identical work directories, plain/ and rec/, and the recorder's trace directory."""

    def __init__(self, tmp_path, recorder_lib, setup):
        self.plain_dir = tmp_path / "plain"
        self.rec_dir = tmp_path / "rec"
        self.trace_dir = tmp_path / "traces"
        self.lib = recorder_lib
        for d in (self.plain_dir, self.rec_dir):
            d.mkdir()
            setup(d)

    def run(self, cmd, env=None, input=None):
        """Run cmd (argument list; "{dir}" in an argument becomes the work directory) in both
        directories; returns (plain result, recorded result)."""
        def args(d):
            return [str(c).replace("{dir}", str(d)) for c in cmd]
        plain = run(args(self.plain_dir), cwd=self.plain_dir, env=env, input=input)
        recorded = run(args(self.rec_dir), cwd=self.rec_dir, env=env, input=input, preload=[self.lib],
                       trace_dir=self.trace_dir)
        return plain, recorded

    def check(self, plain, recorded, compare_stderr=True, exclude=(), mtimes=False, normalise=None):
        assert_same_run(plain, recorded, compare_stderr, normalise)
        assert_same_tree(self.plain_dir, self.rec_dir, exclude, mtimes)
        assert trace_files(self.trace_dir), "the recorded run left no trace file"

    def traces(self):
        return load(self.trace_dir)


@pytest.fixture
def pair(tmp_path, recorder_lib):
    return lambda setup: Pair(tmp_path, recorder_lib, setup)


def test_cp_10mib(pair):
    # coreutils 9 copies with copy_file_range (not an interposed call), so the trace may hold
    # no data ops for cp: this test is about transparency only.
    p = pair(lambda d: write(d / "in.bin", random_bytes(10 << 20, 1)))
    plain, rec = p.run([tool("cp"), "in.bin", "out.bin"])
    p.check(plain, rec)
    assert (p.rec_dir / "out.bin").stat().st_size == 10 << 20


def make_source_tree(d):
    for i in range(25):
        size = [0, 1, 511, 4096, 65537, 1 << 20][i % 6]
        write(d / "src" / f"sub{i % 3}" / f"f{i:02d}.dat", random_bytes(size, 100 + i))
    for sub in sorted((d / "src").rglob("*"), reverse=True):
        os.utime(sub, (MTIME, MTIME))
    os.utime(d / "src", (MTIME, MTIME))


def test_tar_create(pair):
    p = pair(make_source_tree)
    plain, rec = p.run([tool("tar"), "--sort=name", "-cf", "archive.tar", "src"])
    p.check(plain, rec)
    ts = p.traces()
    written = ts.ops["result"][select(ts, p.rec_dir / "archive.tar", "write")].sum()
    assert written == (p.rec_dir / "archive.tar").stat().st_size


def test_tar_extract(pair):
    def setup(d):
        make_source_tree(d / "staging")
        with tarfile.open(d / "archive.tar", "w", format=tarfile.GNU_FORMAT) as tar:
            tar.add(d / "staging" / "src", arcname="src")
        os.utime(d / "archive.tar", (MTIME, MTIME))
        import shutil
        shutil.rmtree(d / "staging")
    p = pair(setup)
    plain, rec = p.run([tool("tar"), "-xf", "archive.tar"])
    p.check(plain, rec, mtimes=True)
    assert len(list((p.rec_dir / "src").rglob("*.dat"))) == 25


def test_gzip(pair):
    p = pair(lambda d: write(d / "big.txt", text_lines(120_000, 2)))
    plain, rec = p.run([tool("gzip"), "-n", "-k", "-6", "big.txt"])
    p.check(plain, rec, mtimes=True)


def test_gunzip(pair):
    import gzip
    data = gzip.compress(text_lines(120_000, 3), mtime=0)
    p = pair(lambda d: write(d / "big.txt.gz", data))
    plain, rec = p.run([tool("gunzip"), "-k", "big.txt.gz"])
    p.check(plain, rec)
    assert (p.rec_dir / "big.txt").stat().st_size > 1 << 20


def test_sort_large_file_with_temporary_files(pair):
    # -S 1M forces an external merge through temporary files in the work directory.
    p = pair(lambda d: write(d / "big.txt", text_lines(200_000, 4)))
    plain, rec = p.run([tool("sort"), "-S", "1M", "-T", ".", "-o", "sorted.txt", "big.txt"])
    p.check(plain, rec)
    assert (p.rec_dir / "sorted.txt").stat().st_size == (p.rec_dir / "big.txt").stat().st_size


def test_sha256sum(pair):
    def setup(d):
        write(d / "a.bin", random_bytes(3 << 20, 5))
        write(d / "b.txt", text_lines(10_000, 6))
    p = pair(setup)
    plain, rec = p.run([tool("sha256sum"), "a.bin", "b.txt"])
    p.check(plain, rec)
    assert len(plain.stdout.splitlines()) == 2


def dd_stderr(b):
    """dd's statistics without the line that has the elapsed time and rate."""
    return b"\n".join(line for line in b.splitlines() if b" copied, " not in line)


@pytest.mark.parametrize("bs", ["512", "4k", "1M"])
def test_dd_block_sizes(pair, bs):
    p = pair(lambda d: write(d / "in.bin", random_bytes(4 << 20, 7)))
    plain, rec = p.run([tool("dd"), "if=in.bin", "of=out.bin", f"bs={bs}"])
    p.check(plain, rec, normalise=dd_stderr)
    assert (p.rec_dir / "out.bin").read_bytes() == (p.rec_dir / "in.bin").read_bytes()
    ts = p.traces()
    block = {"512": 512, "4k": 4096, "1M": 1 << 20}[bs]
    n = (4 << 20) // block
    reads = select(ts, p.rec_dir / "in.bin", "read")
    writes = select(ts, p.rec_dir / "out.bin", "write")
    # n full blocks, then the read that finds the end of the file
    assert reads.sum() == n + 1
    assert writes.sum() == n


def test_dd_count_1000_ground_truth(pair):
    p = pair(lambda d: write(d / "in", random_bytes(8 << 20, 8)))
    plain, rec = p.run([tool("dd"), "if=in", "of=out", "bs=4k", "count=1000"])
    p.check(plain, rec, normalise=dd_stderr)
    ts = p.traces()
    expected_offsets = np.arange(1000, dtype=np.int64) * 4096
    for name, kind in (("in", "read"), ("out", "write")):
        fid = file_id(ts, p.rec_dir / name)
        on_file = ts.ops["file_id"] == np.uint64(fid)
        kinds = sorted(set(ts.ops["op"][on_file].tolist()))
        mask = select(ts, p.rec_dir / name, kind)
        assert mask.sum() == 1000 and on_file.sum() == 1000, (
            f"{name}: {on_file.sum()} ops of kinds {kinds}, expected exactly 1000 {kind} ops")
        assert (ts.ops["requested"][mask] == 4096).all()
        assert (ts.ops["result"][mask] == 4096).all()
        assert np.array_equal(ts.ops["offset"][mask], expected_offsets), f"{name}: offsets not 0, 4096, ..."
        assert (ts.ops["duration_ns"][mask] >= 0).all()
    # dd is one process with one trace that ended normally
    assert len(ts.processes) == 1
    assert ts.processes[0].end_reason == "exit"
    assert ts.processes[0].exit_status == 0


PY_SCRIPT = textwrap.dedent("""
    import hashlib, os
    fd = os.open("data.bin", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    for i in range(64):
        assert os.write(fd, bytes([i]) * 1000) == 1000
    assert os.lseek(fd, 5000, os.SEEK_SET) == 5000
    h = hashlib.sha256()
    for i in range(32):
        h.update(os.pread(fd, 777, i * 1500))
    os.pwrite(fd, b"xyz" * 100, 12345)
    os.lseek(fd, 100, os.SEEK_SET)
    chunk = os.read(fd, 4096)
    os.close(fd)
    print(len(chunk), h.hexdigest())
""")


def test_python_os_calls(pair):
    p = pair(lambda d: write(d / "script.py", PY_SCRIPT.encode()))
    plain, rec = p.run([sys.executable, "script.py"])
    p.check(plain, rec, exclude=("__pycache__",))
    ts = p.traces()
    data = p.rec_dir / "data.bin"
    writes = op_rows(ts, select(ts, data, "write"))
    assert [(r["offset"], r["requested"], r["result"]) for r in writes] == [(i * 1000, 1000, 1000) for i in range(64)]
    preads = op_rows(ts, select(ts, data, "pread"))
    assert [(r["offset"], r["requested"]) for r in preads] == [(i * 1500, 777) for i in range(32)]
    assert [(r["offset"], r["result"]) for r in op_rows(ts, select(ts, data, "pwrite"))] == [(12345, 300)]
    assert [(r["offset"], r["requested"], r["result"]) for r in op_rows(ts, select(ts, data, "read"))] == [
        (100, 4096, 4096)]


def sqlite_script():
    lines = ["CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL);", "BEGIN;"]
    lines += [f"INSERT INTO t(name, v) VALUES ('row{i}', {i * 0.5});" for i in range(10_000)]
    lines += ["COMMIT;"]
    lines += [f"INSERT INTO t(name, v) VALUES ('auto{i}', {i});" for i in range(100)]  # one transaction each
    lines += ["SELECT count(*), sum(v), max(name) FROM t;", "CREATE INDEX tv ON t(v);",
              "SELECT count(*) FROM t WHERE v > 100;"]
    return ("\n".join(lines) + "\n").encode()


def test_sqlite3(pair):
    p = pair(lambda d: write(d / "script.sql", sqlite_script()))
    plain, rec = p.run([tool("sqlite3"), "test.db", ".read script.sql"])
    p.check(plain, rec)
    assert plain.stdout.startswith(b"10100|"), plain.stdout
    ts = p.traces()
    db = p.rec_dir / "test.db"
    assert select(ts, db, "pwrite").sum() >= 10, "sqlite3 should pwrite its database pages"
    assert select(ts, db, "pread").sum() >= 1, "sqlite3 should pread its database pages"
    # the database file is written in whole pages (4096 bytes by default) at page boundaries
    pw = select(ts, db, "pwrite")
    assert (ts.ops["requested"][pw] == 4096).all() and (ts.ops["result"][pw] == 4096).all()
    assert (ts.ops["offset"][pw] % 4096 == 0).all()
    # each autocommit insert makes a journal and syncs
    syncs = select(ts, op="fsync") | select(ts, op="fdatasync")
    assert syncs.sum() >= 100


GIT_ENV = {
    "GIT_AUTHOR_NAME": "Ada Tester", "GIT_AUTHOR_EMAIL": "ada@example.org", "GIT_AUTHOR_DATE": "2020-01-02T03:04:05Z",
    "GIT_COMMITTER_NAME": "Ada Tester", "GIT_COMMITTER_EMAIL": "ada@example.org",
    "GIT_COMMITTER_DATE": "2020-01-02T03:04:05Z", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
}


def test_git_init_add_commit(pair):
    def setup(d):
        for i in range(30):
            write(d / f"dir{i % 4}" / f"file{i}.txt", text_lines(50 + i * 10, 200 + i))
        write(d / "blob.bin", random_bytes(1 << 20, 9))
    p = pair(setup)
    git = tool("git")
    script = (f"{git} init -q -b main . && {git} add . && {git} commit -q -m 'first commit' && "
              f"echo second >> dir0/file0.txt && {git} commit -q -am second && {git} log --format=%H && "
              f"{git} -c pack.threads=1 gc -q && {git} fsck --strict")
    plain, rec = p.run(["/bin/sh", "-c", script], env=GIT_ENV)
    # .git/index holds inode numbers and ctimes; gc's pack name and contents are deterministic
    p.check(plain, rec, exclude=(".git/index",))
    assert len(plain.stdout.split()) == 2
    ts = p.traces()
    assert any(info.name.startswith(str(p.rec_dir / ".git" / "objects")) for info in ts.files.values())


def test_threads16(pair):
    p = pair(lambda d: None)
    ops, size = 500, 4096
    plain, rec = p.run([prog("threads16"), "t.dat", ops, size])
    p.check(plain, rec)
    assert b"pread 8000 pwrite 8000 bad 0" in plain.stdout
    ts = p.traces()
    path = p.rec_dir / "t.dat"
    on_file = select(ts, path)
    assert on_file.sum() == 2 * 16 * ops, f"{on_file.sum()} ops on the file, expected {2 * 16 * ops}"
    for kind in ("pread", "pwrite"):
        m = select(ts, path, kind)
        assert m.sum() == 16 * ops
        assert (ts.ops["requested"][m] == size).all() and (ts.ops["result"][m] == size).all()
        assert sorted(ts.ops["offset"][m].tolist()) == [i * size for i in range(16 * ops)]
    tids = set(ts.ops["tid"][on_file].tolist())
    assert len(tids) == 16, f"{len(tids)} distinct thread ids, expected 16"
    pid = ts.processes[0].pid
    assert pid not in tids  # the main thread does no I/O on the file
    # each thread's region is [t*ops*size, (t+1)*ops*size): one tid per region
    region = ts.ops["offset"][on_file] // (ops * size)
    tid = ts.ops["tid"][on_file]
    assert len(set(zip(region.tolist(), tid.tolist()))) == 16


@pytest.mark.parametrize("program", ["stdio_ops", "stdio_ops_chk"])
def test_stdio_calls(pair, program):
    """Every wrapped stdio call: the program's own count of its calls on its files is the trace's."""
    p = pair(lambda d: None)
    plain, rec = p.run([prog(program), "{dir}", "popen"])
    p.check(plain, rec)
    counts = {tuple(line.split()[1:3]): int(line.split()[3]) for line in rec.stdout.decode().splitlines()
              if line.startswith("count ")}
    ts = load(p.trace_dir, meta=True)
    for (name, kind), calls in counts.items():
        assert select(ts, p.rec_dir / name, kind).sum() == calls, (name, kind)


def test_stdio_threads(pair):
    """Threads writing through their own streams and one shared stream."""
    p = pair(lambda d: None)
    threads, calls = 8, 2000
    plain, rec = p.run([prog("stdio_threads"), "{dir}", threads, calls])
    p.check(plain, rec, exclude=("shared",))   # its records in the order the threads ran
    assert (p.rec_dir / "shared").stat().st_size == (p.plain_dir / "shared").stat().st_size
    ts = p.traces()
    for t in range(threads):
        own = p.rec_dir / f"t{t}"
        assert select(ts, own, "fwrite").sum() == select(ts, own, "fprintf").sum() == calls
        assert ts.ops["result"][select(ts, own)].sum() == own.stat().st_size
    shared = select(ts, p.rec_dir / "shared", "fwrite")
    assert shared.sum() == threads * calls
    assert len(set(ts.ops["tid"][shared].tolist())) == threads


def test_shell_pipeline_fork_exec(pair, tmp_path):
    """Hundreds of processes from fork+exec: every one has a trace, with the right parent."""
    tally = prog("tally")
    loops = 200

    def setup(d):
        write(d / "f", text_lines(1000, 10))
        for i in range(20):
            write(d / f"x{i:02d}", f"file {i}\n".encode() * (i + 1))
    p = pair(setup)
    script = textwrap.dedent(f"""
        i=0
        while [ $i -lt {loops} ]; do
          "$TALLY" "$COUNTER" cat f | "$TALLY" "$COUNTER" head -c 100 | "$TALLY" "$COUNTER" wc -c
          i=$((i+1))
        done
        "$TALLY" "$COUNTER" printf '%s\\n' x* | "$TALLY" "$COUNTER" xargs -n 3 "$TALLY" "$COUNTER" cat > joined.out
    """)
    counters = {"plain": tmp_path / "counter.plain", "rec": tmp_path / "counter.rec"}
    plain = run(["/bin/sh", "-c", script], cwd=p.plain_dir, env={"TALLY": tally, "COUNTER": str(counters["plain"])})
    rec = run(["/bin/sh", "-c", script], cwd=p.rec_dir, env={"TALLY": tally, "COUNTER": str(counters["rec"])},
              preload=[p.lib], trace_dir=p.trace_dir, timeout=150)
    p.check(plain, rec)
    assert plain.stdout == b"100\n" * loops
    started = [tuple(map(int, line.split())) for line in counters["rec"].read_text().splitlines()]
    n_xargs_children = 7  # 20 names, 3 per cat
    assert len(started) == 3 * loops + 2 + n_xargs_children
    ts = p.traces()
    by_pid = processes_by_pid(ts)
    shells = [procs[0] for procs in by_pid.values() if procs[0].ppid == os.getpid()]
    assert len(shells) == 1, f"expected one top-level shell, found {[(s.pid, s.exe) for s in shells]}"
    sh = shells[0]
    started_pids = {pid for pid, _ in started}
    assert set(by_pid) == started_pids | {sh.pid}, (
        f"processes without a trace: {sorted(started_pids - set(by_pid))[:10]}; "
        f"traces of unknown processes: {sorted(set(by_pid) - started_pids - {sh.pid})[:10]}")
    xargs_pid = next(pid for pid, _ in started if any(q.exe.endswith("/xargs") for q in by_pid[pid]))
    for pid, ppid in started:
        images = by_pid[pid]
        # every trace of the pid (the forked child, then each exec image) has the parent's pid
        assert all(q.ppid == ppid for q in images), [(q.exe, q.ppid, ppid) for q in images]
        assert ppid in (sh.pid, xargs_pid)
        exes = [os.path.basename(q.exe) for q in images]
        assert "tally" in exes, exes
        tally_at = exes.index("tally")
        # the forked child (of the shell or of xargs) has its own trace, ended by its exec of tally
        parent_exe = sh.exe if ppid == sh.pid else by_pid[xargs_pid][-1].exe
        assert tally_at == 1 and images[0].exe == parent_exe, [(q.exe, q.end_reason) for q in images]
        assert images[tally_at].end_reason == "exec"
        assert exes[tally_at + 1] in ("cat", "head", "wc", "xargs", "printf"), exes
        assert images[-1].end_reason == "exit" and images[-1] is images[tally_at + 1], [
            (q.exe, q.end_reason) for q in images]
        assert all(q.end_reason == "exec" for q in images[:-1])
    n_children = {ppid: sum(1 for _, pp in started if pp == ppid) for _, ppid in started}
    assert n_children == {sh.pid: 3 * loops + 2, xargs_pid: n_xargs_children}
    # the cat in each loop read f; tally wrote one line per process to the counter file
    reads_f = select(ts, p.rec_dir / "f", "read")
    assert len(set(ts.ops["process"][reads_f].tolist())) == loops
    assert select(ts, counters["rec"], "write").sum() == len(started)


@pytest.mark.parametrize("program, args", [("posixaio", ["{dir}"]), ("libaio_edges", ["{dir}"]),
                                           ("mapfiles", ["{dir}"]), ("rawring", ["3"])])
def test_asynchronous_io_and_mappings(pair, program, args):
    """POSIX AIO, libaio (and its misuse), syscall(), mapped files and io_uring rings: the same
    output, errno values and files (tests/test_recorder_aio.py checks what is recorded)."""
    p = pair(lambda d: None)
    plain, rec = p.run([prog(program), *args])
    p.check(plain, rec, normalise=lambda out: out.replace(bytes(p.plain_dir), b"{dir}").replace(bytes(p.rec_dir),
                                                                                                   b"{dir}"))
    assert plain.returncode == 0, plain.stderr


def test_fio_libaio_writes(pair):
    """fio's libaio engine writing a file (a fixed pattern at fio's repeatable random offsets):
    the same exit status and file; every request recorded (fio's own output holds timings, so
    it is not compared)."""
    p = pair(lambda d: None)
    plain, rec = p.run([tool("fio"), "--name=w", "--filename={dir}/w.dat", "--size=4M", "--rw=randwrite", "--bs=4k",
                        "--ioengine=libaio", "--iodepth=4", "--buffer_pattern=0x5a5aa5a5", "--fsync_on_close=1",
                        "--output-format=json"])
    assert plain.returncode == rec.returncode == 0, rec.stderr
    assert_same_tree(p.plain_dir, p.rec_dir)
    ts = p.traces()
    assert select(ts, p.rec_dir / "w.dat", "aio_write").sum() == 1024
