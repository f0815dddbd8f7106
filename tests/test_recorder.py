"""The recorder records what the spec says, exactly, and never changes what the program does.

Every test runs a real program (tests/progs/*.c, coreutils, Python) under the real recorder
and checks the trace against ground truth the program itself knows: the calls it made, their
arguments and results, its pids, the number of completed ops before a SIGKILL.
"""
import errno
import os
import re
import signal
import stat
import subprocess
import sys
import time

import numpy as np
import pytest

from ioassess.inputs.load import job_from_traces
from recorder_helpers import (SYS_MADVISE, assert_same_run, clean_env, describe, file_id, has_file, killme_killed,
                              load, op_rows, processes_by_pid, prog, run, select, tool, total_table,
                              trace_files, wait_until)

# ---------------------------------------------------------------------------------------------
# helpers


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


OP_LINE = re.compile(r"^OP kind=(\w+) path=(\S+) off=(-?\d+) req=(\d+) res=(-?\d+) buf=(\S+)( append)?$")
DEV_LINE = re.compile(r"^DEV kind=(\w+) path=(\S+) req=(\d+) res=(-?\d+)$")


def allops_expected(stdout):
    """The op records allops says it caused, in order, and its device calls."""
    ops, devs = [], []
    for line in stdout.decode().splitlines():
        m = OP_LINE.match(line)
        if m:
            kind, path, off, req, res, buf, append = m.groups()
            ops.append(dict(kind=kind, path=path, offset=int(off), requested=int(req), result=int(res),
                            buffer=0 if buf == "(nil)" else int(buf, 16), append=bool(append)))
        m = DEV_LINE.match(line)
        if m:
            devs.append(dict(kind=m[1], path=m[2], requested=int(m[3]), result=int(m[4])))
    assert ops and devs, stdout
    return ops, devs


def expected_totals(ops):
    table = {}
    for o in ops:
        t = table.setdefault((o["path"], o["kind"]), dict(count=0, bytes_requested=0, bytes_returned=0, errors=0))
        t["count"] += 1
        t["bytes_requested"] += o["requested"]
        t["bytes_returned"] += max(o["result"], 0)
        t["errors"] += o["result"] < 0
    return table


def only_process(ts):
    assert len(ts.processes) == 1, [(p.pid, p.exe, p.end_reason) for p in ts.processes]
    return ts.processes[0]


def assert_counts_consistent(ts):
    """Per process: records kept + ops_not_kept == all ops it counted (records + summary)."""
    for i, p in enumerate(ts.processes):
        kept = int((ts.ops["process"] == i).sum())
        in_summary = int(ts.summary["count"][ts.summary["process"] == i].sum())
        assert p.ops_kept == kept
        assert p.ops_not_kept == in_summary, f"{p.path}: ops_not_kept {p.ops_not_kept}, summary holds {in_summary}"
        assert kept <= p.record_cap


# ---------------------------------------------------------------------------------------------
# every call, every field


def test_every_op_kind_recorded_exactly(tmp_path, recorder_lib):
    """allops makes each interposed call once or more with known arguments: the trace holds
    exactly those records, in order, with every field right, and nothing for pipes, sockets,
    FIFOs, directories or excluded devices."""
    plain_dir, rec_dir, traces = tmp_path / "plain", tmp_path / "rec", tmp_path / "traces"
    plain_dir.mkdir()
    rec_dir.mkdir()
    plain = run([prog("allops"), plain_dir])
    rec = run([prog("allops"), rec_dir], preload=[recorder_lib], trace_dir=traces)

    def normalise(b):  # paths and buffer addresses (ASLR) differ between the two runs
        return re.sub(rb"buf=\S+", b"buf=?", b.replace(str(plain_dir).encode(), b"DIR")
                      .replace(str(rec_dir).encode(), b"DIR"))
    assert_same_run(plain, rec, normalise=normalise)  # includes the descriptor numbers the app got
    assert rec.returncode == 0, describe(rec)

    expected, _ = allops_expected(rec.stdout)
    ts = load(traces)
    p = only_process(ts)
    assert p.end_reason == "exit" and p.ops_lost == 0 and p.ops_not_kept == 0
    got = op_rows(ts)
    assert len(got) == len(expected), (
        f"{len(got)} records, expected {len(expected)}:\n" +
        "\n".join(f"{r['kind']} {r['path']} off={r['offset']} req={r['requested']} res={r['result']}" for r in got))
    for i, (r, e) in enumerate(zip(got, expected)):
        where = f"record {i}: expected {e}, got {r}"
        assert r["kind"] == e["kind"] and r["path"] == e["path"], where
        assert r["requested"] == e["requested"] and r["result"] == e["result"], where
        if e["offset"] != -2:  # -2: allops does not know (fsync)
            assert r["offset"] == e["offset"], where
        if e["kind"] not in ("fsync", "fdatasync"):
            assert r["buffer"] == e["buffer"], where
        assert bool(r["flags"] & 1) == e["append"], where
        assert r["tid"] == p.pid, where
        assert r["duration_ns"] >= 0 and p.start_ns <= r["start_ns"] <= p.end_ns, where
        assert r["file_id"] == fnv1a64(e["path"].encode()), f"{where}: file id is not FNV-1a of the path"
    # only the regular files in the work directory were recorded
    assert {info.name for info in ts.files.values()} == {e["path"] for e in expected}
    for info in ts.files.values():
        assert stat.S_ISREG(info.mode), info
        st = os.stat(info.name)
        assert (info.device, info.inode) == (st.st_dev, st.st_ino), info


def test_devices_recorded_when_dev_not_excluded(tmp_path, recorder_lib):
    (tmp_path / "w").mkdir()
    rec = run([prog("allops"), tmp_path / "w"], env={"IOASSESS_EXCLUDE": "none"}, preload=[recorder_lib],
              trace_dir=tmp_path / "traces")
    assert rec.returncode == 0, describe(rec)
    expected, devs = allops_expected(rec.stdout)
    ts = load(tmp_path / "traces")
    for dev in devs:
        rows = op_rows(ts, select(ts, dev["path"], dev["kind"]))
        assert [(r["requested"], r["result"]) for r in rows] == [(dev["requested"], dev["result"])], rows
        assert stat.S_ISCHR(ts.files[file_id(ts, dev["path"])].mode)
    assert len(ts.ops["op"]) == len(expected) + len(devs)


def test_failed_calls_recorded_with_errno(tmp_path, recorder_lib):
    """The app sees the same errno with and without the recorder, and the trace has -errno."""
    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    plain = run([prog("errnos"), tmp_path / "p"])
    rec = run([prog("errnos"), tmp_path / "r"], preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert_same_run(plain, rec)
    assert plain.returncode == 0 and b"read_efault ret=-1 errno=EFAULT" in plain.stdout, describe(plain)
    assert b"errno_kept=1" in rec.stdout
    ts = load(tmp_path / "traces")
    rows = op_rows(ts, select(ts, tmp_path / "r" / "errnos.dat"))
    got = [(r["kind"], r["requested"], r["result"]) for r in rows]
    assert got == [
        ("write", 12, 12),                  # write_ok
        ("read", 64, -errno.EBADF),         # read on a write-only descriptor
        ("write", 1, -errno.EBADF),         # write on a read-only descriptor
        ("pread", 10, -errno.EINVAL),       # pread at offset -1
        ("read", 10, -errno.EFAULT),        # read into address 1
        ("read", 64, 12),                   # read_ok
        ("read", 64, 0),                    # at the end of the file
    ], got
    assert rows[4]["buffer"] == 1
    # the calls on a closed descriptor fail with EBADF and are recorded on a pseudo file
    # ("<invalid descriptor>"); the pread on a pipe is not recorded
    others = op_rows(ts, ~select(ts, tmp_path / "r" / "errnos.dat"))
    assert [(r["kind"], r["requested"], r["result"]) for r in others] == [
        ("read", 10, -errno.EBADF), ("fsync", 0, -errno.EBADF)], others
    assert all(r["path"].startswith("<") for r in others), others
    t = total_table(ts)
    assert t[(str(tmp_path / "r" / "errnos.dat"), "read")]["errors"] == 2


def test_successful_calls_keep_errno_across_the_recorders_rare_paths(tmp_path, recorder_lib):
    """errno set before a successful call is what the application finds after it, also when the
    recorder takes a new extent, fills the summary table past a small record cap, writes a clock
    pair or a page-cache sample after the call. On a kernel without MADV_POPULATE_WRITE (before
    5.14: madvise fails with EINVAL) the recorder's own failed madvise happens in those paths."""
    for cap in ("1000", "100000"):
        trace_dir = tmp_path / f"traces-{cap}"
        rec = run([prog("refuse"), SYS_MADVISE, errno.EINVAL, prog("errnos"), tmp_path, "kept", "20000"],
                  preload=[recorder_lib], trace_dir=trace_dir, env={"IOASSESS_MAX_RECORDS": cap})
        assert rec.returncode == 0 and b"calls=40000 errno_changed=0" in rec.stdout, describe(rec)
        ts = load(trace_dir)
        t = total_table(ts)
        assert t[(str(tmp_path / "kept.dat"), "write")]["count"] == 20000
        assert t[(str(tmp_path / "kept.dat"), "pread")]["count"] == 20000
        (process,) = [p for p in ts.processes if p.exe == prog("errnos")]
        assert (process.ops_not_kept > 0) == (cap == "1000")


def test_vector_calls_with_bad_iovec_fail_as_without_recorder(tmp_path, recorder_lib):
    """readv/writev with an invalid iovec array on a descriptor opened the wrong way: the
    kernel returns EBADF without reading the array; the recorder must not fault on it."""
    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    plain = run([prog("errnos"), tmp_path / "p", "badiov"])
    rec = run([prog("errnos"), tmp_path / "r", "badiov"], preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert plain.returncode == 0 and plain.stdout.count(b"errno=EBADF") == 4, describe(plain)
    assert_same_run(plain, rec)
    ts = load(tmp_path / "traces")
    rows = op_rows(ts, select(ts, tmp_path / "r" / "errnos.dat"))
    assert [(r["kind"], r["result"]) for r in rows] == [
        ("readv", -errno.EBADF), ("preadv", -errno.EBADF), ("writev", -errno.EBADF), ("pwritev2", -errno.EBADF)]


def test_offsets_are_true_or_unknown(tmp_path, recorder_lib):
    """Calls that move a descriptor's offset behind the recorder's back (copy_file_range,
    sendfile, splice, a fork child reading a shared descriptor): the next op's recorded offset
    must be the true one or -1, never a stale number."""
    work = tmp_path / "w"
    work.mkdir()
    rec = run([prog("offsets"), work], preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert rec.returncode == 0, describe(rec)
    lines = [m.groups() for m in re.finditer(
        rb"OP case=(\w+) kind=(\w+) path=(\S+) off=(-?\d+) req=(\d+) res=(-?\d+)", rec.stdout)]
    expected = [dict(case=c.decode(), kind=k.decode(), path=p.decode(), offset=int(o), requested=int(q),
                     result=int(r)) for c, k, p, o, q, r in lines]
    assert len(expected) == 11, rec.stdout
    child_line = [e for e in expected if e["requested"] == 20]
    parent_lines = [e for e in expected if e["requested"] != 20]
    ts = load(tmp_path / "traces")
    by_pid = processes_by_pid(ts)
    parent = next(i for i, p in enumerate(ts.processes) if p.ppid == os.getpid())
    child = next(i for i, p in enumerate(ts.processes) if p.ppid == ts.processes[parent].pid)
    got_parent = op_rows(ts, select(ts, process=parent))[1:]  # [0]: the write that made the input
    got_child = op_rows(ts, select(ts, process=child))
    assert len(by_pid) == 2
    wrong = []
    for got, want in ((got_parent, parent_lines), (got_child, child_line)):
        assert [(r["kind"], r["path"], r["requested"], r["result"]) for r in got] == [
            (e["kind"], e["path"], e["requested"], e["result"]) for e in want]
        for i, (r, e) in enumerate(zip(got, want)):
            if r["offset"] not in (e["offset"], -1):
                wrong.append(f"after {e['case']}: {e['kind']} on {os.path.basename(e['path'])}: recorded offset "
                             f"{r['offset']}, true offset {e['offset']}")
    assert not wrong, "wrong offsets recorded:\n" + "\n".join(wrong)


# ---------------------------------------------------------------------------------------------
# crash safety


def test_sigkill_loses_no_completed_op(tmp_path, recorder_lib):
    data, counter, traces = tmp_path / "data", tmp_path / "counter", tmp_path / "traces"
    traces.mkdir(mode=0o700)
    env = clean_env({"LD_PRELOAD": recorder_lib, "IOASSESS_TRACE_DIR": str(traces),
                     "IOASSESS_MAX_RECORDS": "100000000"})
    completed, _ = killme_killed(data, counter, env, 100_000)
    ts = load(traces)
    p = only_process(ts)
    assert p.end_reason == "running/killed" and p.end_ns is None
    mask = select(ts, data, "pwrite")
    n = int(mask.sum())
    assert completed <= n <= completed + 1, f"{completed} pwrites completed before SIGKILL, the trace holds {n}"
    assert n == len(ts.ops["op"]) == p.ops_kept
    # the records are the first n calls, intact and in order
    assert np.array_equal(ts.ops["offset"][mask], (np.arange(n) % 1024) * 4096)
    assert (ts.ops["requested"][mask] == 4096).all() and (ts.ops["result"][mask] == 4096).all()


def test_sigkill_during_multithreaded_io_leaves_a_consistent_trace(tmp_path, recorder_lib):
    """16 threads doing I/O when SIGKILL arrives: every record in the trace is complete and
    right (no torn slot is visible), and the reader reads the trace without complaint."""
    traces = tmp_path / "traces"
    traces.mkdir(mode=0o700)
    env = clean_env({"LD_PRELOAD": recorder_lib, "IOASSESS_TRACE_DIR": str(traces)})
    ops, size = 1_000_000, 64
    proc = subprocess.Popen([prog("threads16"), str(tmp_path / "t.dat"), str(ops), str(size)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    data = tmp_path / "t.dat"
    # 16 threads under way: at least a MiB of their 64-byte pwrites in the file
    wait_until(lambda: data.exists() and data.stat().st_blocks * 512 >= 1 << 20, "a MiB written", proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "threads16 finished before the kill: give it more work"
    ts = load(traces)
    p = only_process(ts)
    assert p.end_reason == "running/killed"
    m = select(ts, tmp_path / "t.dat")
    assert m.all() and m.sum() > 1000
    assert set(ts.ops["op"].tolist()) <= {3, 4}
    assert (ts.ops["requested"] == size).all() and (ts.ops["result"] == size).all()
    offsets, tids = ts.ops["offset"], ts.ops["tid"]
    assert (offsets % size == 0).all()
    region = offsets // (ops * size)
    assert len(set(zip(region.tolist(), tids.tolist()))) == len(set(tids.tolist())) <= 16
    assert (ts.ops["duration_ns"] >= 0).all() and (ts.ops["start_ns"] >= p.start_ns).all()


# ---------------------------------------------------------------------------------------------
# the record cap: totals stay exact


@pytest.mark.parametrize("cap,ops_per_thread", [(0, 200), (10, 200), (1000, 200), (0, 3000)])
def test_record_cap_threads16_totals_exact(tmp_path, recorder_lib, cap, ops_per_thread):
    """16 threads racing past the cap and into the same two summary entries: exact totals."""
    size = 3000
    rec = run([prog("threads16"), tmp_path / "t.dat", ops_per_thread, size], env={"IOASSESS_MAX_RECORDS": str(cap)},
              preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert rec.returncode == 0, describe(rec)
    ts = load(tmp_path / "traces")
    p = only_process(ts)
    n = 16 * ops_per_thread
    path = str(tmp_path / "t.dat")
    assert total_table(ts) == {
        (path, kind): dict(count=n, bytes_requested=n * size, bytes_returned=n * size, errors=0)
        for kind in ("pread", "pwrite")}
    total = 2 * n
    assert p.record_cap == cap
    assert p.ops_kept <= cap, f"{p.ops_kept} records kept with a cap of {cap}"
    assert p.ops_kept + p.ops_not_kept == total, (p.ops_kept, p.ops_not_kept, total)
    assert p.ops_lost == 0
    assert_counts_consistent(ts)
    # the summary has the right size bucket: 3000 bytes is in [2^11, 2^12)
    if cap < total:
        assert set(ts.summary["size_bucket"].tolist()) == {12}
        assert int(ts.summary["duration_hist"].sum()) == p.ops_not_kept


@pytest.mark.parametrize("cap", [0, 10])
def test_record_cap_allops_totals_exact(tmp_path, recorder_lib, cap):
    """Mixed op kinds, sizes, zero-byte results and files: exact per file and op kind."""
    (tmp_path / "w").mkdir()
    rec = run([prog("allops"), tmp_path / "w"], env={"IOASSESS_MAX_RECORDS": str(cap)}, preload=[recorder_lib],
              trace_dir=tmp_path / "traces")
    assert rec.returncode == 0, describe(rec)
    expected, _ = allops_expected(rec.stdout)
    ts = load(tmp_path / "traces")
    p = only_process(ts)
    assert total_table(ts) == expected_totals(expected)
    every = only_process(load(tmp_path / "traces", meta=True))   # its opens and closes too
    assert every.ops_kept == min(cap, every.ops_kept + every.ops_not_kept), \
        "a single thread keeps exactly min(cap, ops) records"
    assert p.ops_not_kept == len(expected) - p.ops_kept
    assert_counts_consistent(ts)
    # the records kept are the first ones
    assert [r["kind"] for r in op_rows(ts)] == [e["kind"] for e in expected[:p.ops_kept]]


def test_record_cap_errors_counted_in_summary(tmp_path, recorder_lib):
    (tmp_path / "w").mkdir()
    rec = run([prog("errnos"), tmp_path / "w"], env={"IOASSESS_MAX_RECORDS": "0"}, preload=[recorder_lib],
              trace_dir=tmp_path / "traces")
    assert rec.returncode == 0, describe(rec)
    ts = load(tmp_path / "traces")
    path = str(tmp_path / "w" / "errnos.dat")
    t = total_table(ts)
    assert t[(path, "read")] == dict(count=4, bytes_requested=64 + 10 + 64 + 64, bytes_returned=12, errors=2)
    assert t[(path, "write")] == dict(count=2, bytes_requested=13, bytes_returned=12, errors=1)
    assert t[(path, "pread")] == dict(count=1, bytes_requested=10, bytes_returned=0, errors=1)


@pytest.mark.parametrize("cap", [None, 1000])
def test_thread_churn(tmp_path, recorder_lib, cap):
    """400 short-lived threads (4 at a time), 10 pwrites each: totals exact, one tid per
    thread, and the cap means what it says: ops go to the summary only once the process has
    kept (close to) cap records, whatever slots exited threads had been granted."""
    n_threads, ops = 400, 10
    env = {"IOASSESS_MAX_RECORDS": str(cap)} if cap else {}
    rec = run([prog("churn"), tmp_path / "c.dat", n_threads, ops], env=env, preload=[recorder_lib],
              trace_dir=tmp_path / "traces", timeout=60)
    assert rec.returncode == 0, describe(rec)
    ts = load(tmp_path / "traces")
    p = only_process(ts)
    total = n_threads * ops
    assert total_table(ts) == {(str(tmp_path / "c.dat"), "pwrite"): dict(
        count=total, bytes_requested=64 * total, bytes_returned=64 * total, errors=0)}
    assert p.ops_kept + p.ops_not_kept == total and p.ops_lost == 0
    assert_counts_consistent(ts)
    if cap is None:
        assert p.ops_kept == total
        assert len(set(ts.ops["tid"].tolist())) == n_threads
    else:
        assert p.ops_kept >= 0.9 * cap, (
            f"only {p.ops_kept} of {total} ops kept as records with IOASSESS_MAX_RECORDS={cap}: slots granted "
            f"to threads that exited are not returned to the budget")


def test_summary_table_spill_keeps_totals_exact(tmp_path, recorder_lib):
    """With no records kept and more (file, op, size) keys than the summary table holds, the
    extra keys go to file id 0 and the counts stay exact per op kind and size bucket."""
    n = 4000
    work = tmp_path / "w"
    work.mkdir()
    rec = run([prog("manyfiles"), work, n], env={"IOASSESS_MAX_RECORDS": "0"}, preload=[recorder_lib],
              trace_dir=tmp_path / "traces", timeout=60)
    assert rec.returncode == 0, describe(rec)
    sizes = [1 + (i * 37 % 5000) for i in range(n)]
    ts = load(tmp_path / "traces")
    p = only_process(ts)
    assert p.ops_kept == 0 and p.ops_not_kept == n and p.ops_lost == 0
    by_op = total_table(ts, by=("op",))
    assert by_op == {("pwrite",): dict(count=n, bytes_requested=sum(sizes), bytes_returned=sum(sizes), errors=0)}
    # per size bucket, exactly
    want = {}
    for size in sizes:
        b = size.bit_length()  # bucket b holds [2^(b-1), 2^b)
        want[b] = want.get(b, 0) + 1
    got = {}
    for b, c in zip(ts.summary["size_bucket"].tolist(), ts.summary["count"].tolist()):
        got[b] = got.get(b, 0) + c
    assert got == want
    # some keys spilled to "other files"; the named ones are exact for their file
    fids = ts.summary["file_id"]
    assert (fids == 0).any() and (fids != 0).sum() >= 1000
    names = {info.file_id: info.name for info in ts.files.values()}
    for fid, count, req in zip(fids.tolist(), ts.summary["count"].tolist(), ts.summary["bytes_requested"].tolist()):
        if fid:
            i = int(os.path.basename(names[fid])[1:])
            assert (count, req) == (1, sizes[i])


def test_other_files_bucket_is_not_confused_with_a_real_file(tmp_path, recorder_lib):
    """The summary table's overflow bucket (file id 0, "<other files>") must stay apart from
    every file the process named, including the pseudo file of calls on descriptors that are
    not open: the spilled pwrites are not that file's ops."""
    n = 4000
    work = tmp_path / "w"
    work.mkdir()
    rec = run([prog("manyfiles"), work, n, "badfd"], env={"IOASSESS_MAX_RECORDS": "0"}, preload=[recorder_lib],
              trace_dir=tmp_path / "traces", timeout=60)
    assert rec.returncode == 0, describe(rec)
    ts = load(tmp_path / "traces")
    t = total_table(ts, by=("file_id", "op"))
    bad_reads = {k: v for k, v in t.items() if k[1] == "read"}
    assert len(bad_reads) == 1, bad_reads
    ((name, _), v), = bad_reads.items()
    assert v == dict(count=1, bytes_requested=7, bytes_returned=0, errors=1)
    spilled = [k for k in t if k[1] == "pwrite" and not k[0].startswith(str(work))]
    assert spilled == [("<other files>", "pwrite")], (
        f"the overflow bucket's pwrites are attributed to {spilled}; the failed read's file is {name!r}")


# ---------------------------------------------------------------------------------------------
# stacking with another LD_PRELOAD library


def read_probe(path):
    return {k: int(v) for k, v in (line.split() for line in path.read_text().splitlines())}


@pytest.mark.parametrize("order", ["probe_first", "recorder_first"])
def test_stacking_with_another_preload_library(tmp_path, recorder_lib, order):
    probe = prog("libstack_probe.so")
    preload = [probe, recorder_lib] if order == "probe_first" else [recorder_lib, probe]
    (tmp_path / "in").write_bytes(os.urandom(1 << 20))
    for name, cmd, expect in [
        ("threads16", [prog("threads16"), tmp_path / "t.dat", 100, 512],
         dict(read=0, write=0, pread=1600, pwrite=1600)),
        ("dd", [tool("dd"), f"if={tmp_path / 'in'}", f"of={tmp_path / 'out'}", "bs=4k", "count=100"],
         dict(read=100, write=100, pread=0, pwrite=0)),
    ]:
        plain = run(cmd)
        out = tmp_path / f"probe.{name}"
        traces = tmp_path / f"traces.{name}"
        rec = run(cmd, env={"STACK_PROBE_OUT": str(out)}, preload=preload, trace_dir=traces)
        assert_same_run(plain, rec, normalise=lambda b: b"\n".join(
            line for line in b.splitlines() if b" copied, " not in line))
        probe_counts = read_probe(out)
        assert probe_counts == expect, f"{name}: the probe library saw {probe_counts}"
        ts = load(traces)
        by_op = {k[0]: v["count"] for k, v in total_table(ts, by=("op",)).items()}
        assert {k: by_op.get(k, 0) for k in expect} == probe_counts, f"{name}: recorder {by_op}, probe {probe_counts}"


# ---------------------------------------------------------------------------------------------
# configuration


def test_disable_writes_nothing_and_changes_nothing(tmp_path, recorder_lib):
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    plain = run([prog("errnos"), tmp_path / "p"], env={"TMPDIR": str(tmpdir)})
    rec = run([prog("errnos"), tmp_path / "r"], env={"TMPDIR": str(tmpdir), "IOASSESS_DISABLE": "1"},
              preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert_same_run(plain, rec)
    assert list((tmp_path / "traces").iterdir()) == []
    assert list(tmpdir.iterdir()) == []
    # and without IOASSESS_TRACE_DIR, the default directory is not created either
    rec = run([prog("errnos"), tmp_path / "r"], env={"TMPDIR": str(tmpdir), "IOASSESS_DISABLE": "1"},
              preload=[recorder_lib])
    assert_same_run(plain, rec)
    assert list(tmpdir.iterdir()) == []


def test_exclusions(tmp_path, recorder_lib):
    excl, also, keep = tmp_path / "excl", tmp_path / "also", tmp_path / "keep"
    for d in (excl, also, keep):
        d.mkdir()
    (excl / "in").write_bytes(b"x" * 40960)
    dd = tool("dd")

    def traced(name, cmd, exclude):
        env = {} if exclude is None else {"IOASSESS_EXCLUDE": exclude}
        r = run(cmd, env=env, preload=[recorder_lib], trace_dir=tmp_path / name)
        assert r.returncode == 0, describe(r)
        return load(tmp_path / name)

    ts = traced("t1", [dd, f"if={excl / 'in'}", f"of={keep / 'out'}", "bs=4k"], f"{excl}:{also}")
    assert not has_file(ts, excl / "in")
    assert select(ts, keep / "out", "write").sum() == 10
    ts = traced("t2", [dd, f"if={excl / 'in'}", f"of={also / 'out'}", "bs=4k"], f"{also}:{excl}")
    assert len(ts.ops["op"]) == 0 and not ts.files
    # the default list excludes /etc; a given list replaces it; "none" excludes nothing
    etc = "/etc/passwd"
    ts = traced("t3", [dd, f"if={etc}", f"of={keep / 'out2'}"], None)
    assert not has_file(ts, etc) and select(ts, keep / "out2", "write").sum() >= 1
    for name, exclude in (("t4", str(excl)), ("t5", "none")):
        ts = traced(name, [dd, f"if={etc}", f"of={keep / 'out3'}"], exclude)
        assert select(ts, etc, "read").sum() >= 2, f"IOASSESS_EXCLUDE={exclude}: /etc/passwd not recorded"


def test_long_and_unusual_file_names(tmp_path, recorder_lib):
    """Names longer than one NAME_PART slot (and than 255 bytes), with spaces, UTF-8 and a
    newline, come back exactly; the exclusion prefix matches whole path components only."""
    deep = tmp_path / "/".join(f"level-{i:02d}-{'x' * 40}" for i in range(40))
    deep.mkdir(parents=True)
    odd = tmp_path / "données ✓ with spaces\nand newline"
    odd.mkdir()
    targets = [deep / "f.dat", odd / "f.dat", tmp_path / "ex" / "f.dat", tmp_path / "exclusive" / "f.dat"]
    for t in targets:
        t.parent.mkdir(exist_ok=True)
        t.write_bytes(b"n" * 5000)
    assert len(str(targets[0]).encode()) > 2000
    script = "for f in \"$@\"; do dd if=\"$f\" of=/dev/null bs=1000 status=none || exit 1; done"
    rec = run(["/bin/sh", "-c", script, "sh"] + targets, env={"IOASSESS_EXCLUDE": str(tmp_path / "ex")},
              preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert rec.returncode == 0, describe(rec)
    ts = load(tmp_path / "traces")
    for t in (targets[0], targets[1], targets[3]):
        assert select(ts, t, "read").sum() == 6, t
        assert file_id(ts, t) == fnv1a64(os.fsencode(t))
    assert not has_file(ts, targets[2]), "a file under the excluded prefix was recorded"


def test_obfuscation_hides_paths(tmp_path, recorder_lib):
    secret = tmp_path / "secret-project-q7x9"
    secret.mkdir()
    (secret / "input-z3.dat").write_bytes(b"y" * 8192)
    cmd = [tool("dd"), f"if={secret / 'input-z3.dat'}", f"of={secret / 'output-z4.dat'}", "bs=1k"]
    rec = run(cmd, env={"IOASSESS_OBFUSCATE": "1"}, preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert rec.returncode == 0, describe(rec)
    files = trace_files(tmp_path / "traces")
    assert files
    for f in files:
        raw = f.read_bytes()
        for needle in (b"secret-project-q7x9", b"input-z3", b"output-z4", str(tmp_path).encode()):
            assert needle not in raw, f"{needle!r} is in the obfuscated trace {f}"
        assert b"secret-project" not in f.name.encode()
    ts = load(tmp_path / "traces")
    p = only_process(ts)
    assert p.obfuscated and "/dd" not in p.exe
    # the ops are all still there, on two distinct (hashed) files
    t = total_table(ts, by=("file_id", "op"))
    assert sorted((v["count"], k[1]) for k, v in t.items()) == [(8, "write"), (9, "read")]
    assert all(str(secret) not in info.name for info in ts.files.values())


JOB_VARS = ["IOASSESS_JOB_ID", "SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID"]
RANK_VARS = ["IOASSESS_RANK", "PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"]


@pytest.mark.parametrize("job_var,rank_var", list(zip(JOB_VARS, RANK_VARS)))
def test_job_rank_host_from_environment(tmp_path, recorder_lib, job_var, rank_var):
    job = f"42.{job_var.lower().replace('_', '-')}"
    rank = 3 + JOB_VARS.index(job_var)
    env = {job_var: job, rank_var: str(rank), "IOASSESS_HOSTNAME": "node-a17"}
    rec = run([tool("dd"), "if=/dev/zero", f"of={tmp_path / 'o'}", "count=3"], env=env, preload=[recorder_lib],
              trace_dir=tmp_path / "traces")
    assert rec.returncode == 0, describe(rec)
    ts = load(tmp_path / "traces")
    p = only_process(ts)
    assert (p.job_id, p.rank, p.hostname) == (job, rank, "node-a17")
    name = os.path.basename(p.path)
    for part in (f"_{job}_", "_node-a17_", f"_r{rank}_", f"_p{p.pid}_"):
        assert part in name, f"{part} not in the trace file name {name}"


def test_job_and_rank_precedence(tmp_path, recorder_lib):
    """IOASSESS_JOB_ID / IOASSESS_RANK win over the batch system's variables."""
    env = {"IOASSESS_JOB_ID": "mine", "SLURM_JOB_ID": "777", "IOASSESS_RANK": "11", "SLURM_PROCID": "4"}
    rec = run([tool("dd"), "if=/dev/zero", f"of={tmp_path / 'o'}", "count=1"], env=env, preload=[recorder_lib],
              trace_dir=tmp_path / "traces")
    assert rec.returncode == 0
    p = only_process(load(tmp_path / "traces"))
    assert (p.job_id, p.rank) == ("mine", 11)
    assert p.hostname == os.uname().nodename


@pytest.mark.parametrize("value", ["8388608", "-2", "99999999999999999999", "3x", "", " ", "rank"])
def test_a_rank_a_reader_would_refuse_is_recorded_as_no_rank(value, tmp_path, recorder_lib):
    """IOASSESS_RANK outside -1..8388607 (the ranks a job can have: docs/trace-format.md) or not
    an integer is no rank, -1, as for the other bad IOASSESS_* values the default is taken: the
    trace is read (before, 8388608 made a trace the reader calls corrupt). The limits themselves
    are ranks; an empty value falls through to the next rank variable."""
    env = {"IOASSESS_RANK": value, "SLURM_PROCID": "5"}
    rec = run([tool("dd"), "if=/dev/zero", f"of={tmp_path / 'o'}", "count=1"], env=env, preload=[recorder_lib],
              trace_dir=tmp_path / "traces")
    assert rec.returncode == 0, describe(rec)
    assert only_process(load(tmp_path / "traces")).rank == (5 if value == "" else -1)
    for rank in ("8388607", "-1"):
        rec = run([tool("dd"), "if=/dev/zero", f"of={tmp_path / 'o'}", "count=1"], env={"IOASSESS_RANK": rank},
                  preload=[recorder_lib], trace_dir=tmp_path / rank)
        assert only_process(load(tmp_path / rank)).rank == int(rank)


def test_a_process_started_as_no_rank_has_rank_minus_1(tmp_path, recorder_lib):
    """Without a rank variable (mpiexec itself, a serial program) the rank is -1, not rank 0's."""
    rec = run([tool("dd"), "if=/dev/zero", f"of={tmp_path / 'o'}", "count=1"], preload=[recorder_lib],
              trace_dir=tmp_path / "traces")
    assert rec.returncode == 0
    p = only_process(load(tmp_path / "traces"))
    assert (p.job_id, p.rank) == ("", -1) and "_r-1_" in os.path.basename(p.path)


def test_trace_file_and_directory_permissions(tmp_path, recorder_lib):
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    # umask 000 so that only the recorder's own modes count
    script = f"umask 000; exec {tool('dd')} if=/dev/zero of={tmp_path / 'o'} count=4"
    rec = run(["/bin/sh", "-c", script], env={"TMPDIR": str(tmpdir)}, preload=[recorder_lib])
    assert rec.returncode == 0, describe(rec)
    default_dir = tmpdir / f"ioassess-{os.getuid()}"
    assert default_dir.is_dir(), f"no default trace directory {default_dir}: {list(tmpdir.iterdir())}"
    assert stat.S_IMODE(default_dir.stat().st_mode) == 0o700
    files = trace_files(default_dir)
    assert len(files) == 2  # sh, then dd (exec)
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    # an IOASSESS_TRACE_DIR that does not exist yet is created private too
    nested = tmp_path / "new" / "traces"
    rec = run(["/bin/sh", "-c", script], env={"IOASSESS_TRACE_DIR": str(nested)}, preload=[recorder_lib])
    assert rec.returncode == 0
    assert stat.S_IMODE(nested.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in trace_files(nested)) and trace_files(nested)


@pytest.mark.parametrize("clock", ["tsc", "monotonic"])
def test_clock_sources_give_consistent_times(tmp_path, recorder_lib, clock):
    t0 = time.time_ns()
    rec = run([tool("dd"), "if=/dev/zero", f"of={tmp_path / 'o'}", "bs=64k", "count=200"],
              env={"IOASSESS_CLOCK": clock}, preload=[recorder_lib], trace_dir=tmp_path / "traces")
    t1 = time.time_ns()
    assert rec.returncode == 0
    ts = load(tmp_path / "traces")
    p = only_process(ts)
    assert p.clock_source == clock
    m = select(ts, tmp_path / "o", "write")
    assert m.sum() == 200
    start, dur = ts.ops["start_ns"][m], ts.ops["duration_ns"][m]
    slack = 20_000_000  # realtime vs monotonic steps, rounding
    assert start.min() >= t0 - slack and (start + dur).max() <= t1 + slack
    assert p.start_ns <= start.min() and (start + dur).max() <= p.end_ns
    assert (dur > 0).all() and dur.sum() <= t1 - t0
    assert (np.diff(start) >= dur[:-1] - 100).all(), "a write started before the previous one ended"


# ---------------------------------------------------------------------------------------------
# process life cycle


def test_exit_status_is_recorded_when_main_returns(tmp_path, recorder_lib):
    # tally returns 2 from main (usage error) without calling exit() itself
    rec = run([prog("tally")], preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert rec.returncode == 2, describe(rec)
    p = only_process(load(tmp_path / "traces"))
    assert (p.end_reason, p.exit_status) == ("exit", 2)


def forkexec_processes(cmd, pids_pattern, tmp_path, recorder_lib):
    """Run a forkexec mode under the recorder; (traces, processes by pid, parent pid, child pid),
    the pids read from its output by pids_pattern, each with a trace of its own."""
    rec = run(cmd, preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert rec.returncode == 0, describe(rec)
    m = re.search(pids_pattern, rec.stdout)
    assert m, rec.stdout
    parent_pid, child_pid = int(m[1]), int(m[2])
    ts = load(tmp_path / "traces")
    by_pid = processes_by_pid(ts)
    assert set(by_pid) == {parent_pid, child_pid}
    return ts, by_pid, parent_pid, child_pid


def test_fork_child_has_its_own_trace(tmp_path, recorder_lib):
    ts, by_pid, parent_pid, child_pid = forkexec_processes(
        [prog("forkexec"), "fork", tmp_path], rb"parent pid (\d+) child (\d+) exit 7", tmp_path, recorder_lib)
    (parent,), (child,) = by_pid[parent_pid], by_pid[child_pid]
    assert child.ppid == parent_pid and parent.ppid == os.getpid()
    assert child.end_reason == "exit" and child.exit_status == 7
    assert parent.end_reason == "exit"
    pi, ci = ts.processes.index(parent), ts.processes.index(child)
    # the parent's records (3 before the fork, 2 after) are in its own trace only
    prow = op_rows(ts, select(ts, process=pi))
    crow = op_rows(ts, select(ts, process=ci))
    assert [(r["path"], r["offset"]) for r in prow] == [(str(tmp_path / "parent.dat"), 100 * i) for i in range(5)]
    assert [(r["path"], r["offset"]) for r in crow] == [(str(tmp_path / "child.dat"), 100 * i) for i in range(5)]
    assert all(r["tid"] == child_pid for r in crow)
    assert child.start_ns >= min(r["start_ns"] for r in prow)


@pytest.mark.parametrize("threads", [4, 64])
def test_fork_while_other_threads_do_io(tmp_path, recorder_lib, threads):
    rec = run([prog("forkthreads"), tmp_path, threads], preload=[recorder_lib], trace_dir=tmp_path / "traces",
              timeout=60)
    assert rec.returncode == 0 and rec.stdout.endswith(b"ok\n"), describe(rec)
    children = {int(m[1]): int(m[2]) for m in re.finditer(rb"child (\d+) pid (\d+)", rec.stdout)}
    assert len(children) == 20
    ts = load(tmp_path / "traces")
    by_pid = processes_by_pid(ts)
    parent = [p for p in ts.processes if p.ppid == os.getpid()]
    assert len(parent) == 1
    assert set(by_pid) == set(children.values()) | {parent[0].pid}
    t = total_table(ts, by=("process", "file_id", "op"))
    pi = ts.processes.index(parent[0])
    assert t == {**{(pi, str(tmp_path / "threads.dat"), "pwrite"): dict(
        count=threads * 2000, bytes_requested=threads * 2000 * 512, bytes_returned=threads * 2000 * 512,
        errors=0)},
        **{(ts.processes.index(by_pid[pid][0]), str(tmp_path / f"child{i}"), "pwrite"): dict(
            count=10, bytes_requested=1000, bytes_returned=1000, errors=0) for i, pid in children.items()}}
    for pid in children.values():
        (child,) = by_pid[pid]
        assert child.ppid == parent[0].pid and child.end_reason == "exit" and child.exit_status == 0
    assert_counts_consistent(ts)


def test_exec_starts_a_new_trace(tmp_path, recorder_lib):
    rec = run([prog("forkexec"), "exec", tmp_path], preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert rec.returncode == 0, describe(rec)
    pid = int(re.search(rb"after pid (\d+)", rec.stdout)[1])
    ts = load(tmp_path / "traces")
    by_pid = processes_by_pid(ts)
    assert list(by_pid) == [pid] and len(by_pid[pid]) == 2, [(p.pid, p.exe, p.end_reason) for p in ts.processes]
    before, after = by_pid[pid]
    assert before.end_reason == "exec" and after.end_reason == "exit"
    assert before.ppid == after.ppid == os.getpid()
    assert after.start_ns >= before.end_ns
    assert "after" in after.cmdline and "after" not in before.cmdline
    rows = [op_rows(ts, select(ts, process=ts.processes.index(p))) for p in (before, after)]
    assert [(r["path"], r["offset"]) for r in rows[0]] == [(str(tmp_path / "before.dat"), 100 * i) for i in range(2)]
    assert [(r["path"], r["offset"]) for r in rows[1]] == [(str(tmp_path / "after.dat"), 100 * i) for i in range(4)]


def test_failed_exec_keeps_recording(tmp_path, recorder_lib):
    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    plain = run([prog("forkexec"), "execfail", tmp_path / "p"])
    rec = run([prog("forkexec"), "execfail", tmp_path / "r"], preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert_same_run(plain, rec, normalise=lambda b: re.sub(rb"pid \d+", b"pid N", b))
    assert b"exec failed errno ENOENT" in rec.stdout
    ts = load(tmp_path / "traces")
    p = only_process(ts)
    assert p.end_reason == "exit"
    rows = op_rows(ts)
    assert [(r["path"], r["offset"]) for r in rows] == [(str(tmp_path / "r" / "fail.dat"), 100 * i) for i in range(2)]


def test_vfork_exec(tmp_path, recorder_lib):
    ts, by_pid, parent_pid, child_pid = forkexec_processes(
        [prog("forkexec"), "vfork", tmp_path, prog("threads16"), tmp_path / "t.dat", "10", "100"],
        rb"vfork parent (\d+) child (\d+) exit 0", tmp_path, recorder_lib)
    assert [p.end_reason for p in by_pid[parent_pid]] == ["exit"]
    assert all(p.ppid == parent_pid for p in by_pid[child_pid])
    assert by_pid[child_pid][-1].exe.endswith("/threads16") and by_pid[child_pid][-1].end_reason == "exit"
    t = total_table(ts, by=("process", "file_id", "op"))
    child = ts.processes.index(by_pid[child_pid][-1])
    parent = ts.processes.index(by_pid[parent_pid][0])
    assert t[(child, str(tmp_path / "t.dat"), "pread")]["count"] == 160
    assert t[(parent, str(tmp_path / "vparent.dat"), "pwrite")]["count"] == 2
    assert_counts_consistent(ts)


PY_SPAWN = """
import os, subprocess, sys
prog, path = sys.argv[1], sys.argv[2]
r = subprocess.run([prog, path, "5", "64"], capture_output=True)  # vfork + exec in CPython >= 3.10
print("subprocess", r.returncode, r.stdout.decode().split()[:6])
pid = os.posix_spawn(prog, [prog, path + ".2", "3", "64"], os.environ)
_, status = os.waitpid(pid, 0)
print("posix_spawn", os.waitstatus_to_exitcode(status))
print("python pid", os.getpid())
"""


def test_python_subprocess_and_posix_spawn(tmp_path, recorder_lib):
    cmd = [sys.executable, "-c", PY_SPAWN, prog("threads16"), tmp_path / "t.dat"]
    plain = run(cmd)
    rec = run(cmd, preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert_same_run(plain, rec, normalise=lambda b: re.sub(rb"python pid \d+", b"", b))
    assert b"subprocess 0 ['threads', '16', 'pread', '80', 'pwrite', '80']" in rec.stdout, rec.stdout
    assert b"posix_spawn 0" in rec.stdout
    py_pid = int(re.search(rb"python pid (\d+)", rec.stdout)[1])
    ts = load(tmp_path / "traces")
    t = total_table(ts, by=("file_id", "op"))
    assert t[(str(tmp_path / "t.dat"), "pread")]["count"] == 80
    assert t[(str(tmp_path / "t.dat.2"), "pwrite")]["count"] == 48
    children = [p for p in ts.processes if p.exe.endswith("/threads16")]
    assert len(children) == 2 and all(p.ppid == py_pid and p.end_reason == "exit" for p in children)


def test_inherited_descriptors_are_recorded(tmp_path, recorder_lib):
    """dd gets its input and output from the shell, already open and positioned (cat would
    use copy_file_range, which is not recorded)."""
    data = os.urandom(300_000)
    (tmp_path / "in").write_bytes(data)
    script = f"{{ {tool('head')} -c 1000 >/dev/null; exec {tool('dd')} bs=64k status=none; }} < in > out"
    rec = run(["/bin/sh", "-c", script], cwd=tmp_path, preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert rec.returncode == 0, describe(rec)
    assert (tmp_path / "out").read_bytes() == data[1000:]
    ts = load(tmp_path / "traces")
    dd = [i for i, p in enumerate(ts.processes) if p.exe.endswith("/dd")]
    assert len(dd) == 1
    reads = op_rows(ts, select(ts, tmp_path / "in", "read", process=dd[0]))
    writes = op_rows(ts, select(ts, tmp_path / "out", "write", process=dd[0]))
    assert reads and writes
    assert reads[0]["offset"] == 1000, "the inherited position of stdin"
    for rows in (reads, writes):
        for a, b in zip(rows, rows[1:]):
            assert b["offset"] == a["offset"] + a["result"]
    assert sum(r["result"] for r in reads) == len(data) - 1000 and reads[-1]["result"] == 0
    assert writes[0]["offset"] == 0 and sum(r["result"] for r in writes) == len(data) - 1000


# ---------------------------------------------------------------------------------------------
# signals


@pytest.mark.parametrize("cap", [None, "1000"])
def test_signal_handler_io_during_busy_read_loop(tmp_path, recorder_lib, cap):
    (tmp_path / "data").write_bytes(os.urandom(65536))
    env = {"IOASSESS_MAX_RECORDS": cap} if cap else {}
    rec = run([prog("sigloop"), tmp_path / "data", tmp_path / "log", "2000"], env=env, preload=[recorder_lib],
              trace_dir=tmp_path / "traces")
    assert rec.returncode == 0, describe(rec)
    m = re.search(rb"preads (\d+) handler_writes (\d+) bad 0 handler_bad 0 log_size_ok 1", rec.stdout)
    assert m, rec.stdout
    preads, writes = int(m[1]), int(m[2])
    ts = load(tmp_path / "traces")
    p = only_process(ts)
    t = total_table(ts)
    counted_preads = t[(str(tmp_path / "data"), "pread")]["count"]
    counted_writes = t.get((str(tmp_path / "log"), "write"), {"count": 0})["count"]
    assert counted_preads <= preads and 0 < counted_writes <= writes
    assert counted_preads + counted_writes + p.ops_lost == preads + writes, (
        f"app: {preads} preads + {writes} handler writes; trace: {counted_preads} + {counted_writes} + "
        f"{p.ops_lost} lost")
    assert set(t) == {(str(tmp_path / "data"), "pread"), (str(tmp_path / "log"), "write")}
    assert_counts_consistent(ts)


# ---------------------------------------------------------------------------------------------
# a recorder that cannot write changes nothing


def need_mount_namespace():
    if subprocess.run([tool("unshare"), "-m", "true"], capture_output=True).returncode != 0:
        pytest.fail("this test needs `unshare -m` and tmpfs mounts (root with CAP_SYS_ADMIN), as on the "
                    "project's machines")


@pytest.mark.parametrize("where", ["regular_file", "under_a_file", "proc",
                                   pytest.param("read_only_mount", marks=pytest.mark.root)])
def test_unwritable_trace_dir_changes_nothing(tmp_path, recorder_lib, where):
    """IOASSESS_TRACE_DIR names a file, a path below a file, a place in /proc, or a read-only
    file system (root may write anywhere else): the recorder gives up silently."""
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory\n")
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    trace_dir = {"regular_file": blocker, "under_a_file": blocker / "sub", "proc": "/proc/self/ioassess-traces",
                 "read_only_mount": read_only}[where]
    wrapper, preload = [], [recorder_lib]
    if where == "read_only_mount":  # only the program itself runs under the recorder
        need_mount_namespace()
        wrapper = ["unshare", "-m", "/bin/sh", "-c",
                   f'mount -t tmpfs -o ro,mode=0700 tmpfs "{read_only}" && '
                   f'exec env LD_PRELOAD="{recorder_lib}" "$@"', "sh"]
        preload = []
    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    for cmd in ([prog("errnos"), "{dir}"], [tool("dd"), "if=/nonexistent/input", "of={dir}/x"],
                ["/bin/sh", "-c", f"{prog('threads16')} {{dir}}/t 10 100 && exit 3"]):
        plain = run([str(c).replace("{dir}", str(tmp_path / "p")) for c in cmd])
        env = {"IOASSESS_TRACE_DIR": str(trace_dir)}
        rec = run(wrapper + [str(c).replace("{dir}", str(tmp_path / "r")) for c in cmd], env=env,
                  preload=preload)
        assert_same_run(plain, rec, normalise=lambda b: b.replace(str(tmp_path / "p").encode(), b"D").replace(
            str(tmp_path / "r").encode(), b"D"))
    assert blocker.read_text() == "not a directory\n"
    assert list(read_only.iterdir()) == []


@pytest.mark.root
def test_full_file_system_changes_nothing(tmp_path, recorder_lib):
    """The trace directory is a 128 KiB tmpfs (in a private mount namespace): the trace cannot
    grow past a few extents. The app must run as without the recorder (no SIGBUS from a
    mapping without blocks), and the trace must say so and still count what it could."""
    need_mount_namespace()
    small, saved = tmp_path / "small", tmp_path / "saved"
    small.mkdir()
    saved.mkdir()
    ops = 500
    cmd = [prog("threads16"), tmp_path / "t.dat", ops, 256]
    plain = run(cmd)
    script = (f'mount -t tmpfs -o size=128k,mode=0700 tmpfs "{small}" || exit 99; '
              f'env LD_PRELOAD="{recorder_lib}" IOASSESS_TRACE_DIR="{small}" "$@"; rc=$?; '
              f'cp -a "{small}/." "{saved}/"; exit $rc')
    rec = run(["unshare", "-m", "/bin/sh", "-c", script, "sh"] + cmd)
    assert rec.returncode != 99, f"cannot mount a tmpfs: {describe(rec)}"
    assert_same_run(plain, rec)
    ts = load(saved)
    p = only_process(ts)
    assert p.space_failed, "the trace did not fill the file system: make the tmpfs smaller"
    counted = int(total_table(ts, by=("op",)).get(("pread",), {"count": 0})["count"] +
                  total_table(ts, by=("op",)).get(("pwrite",), {"count": 0})["count"])
    assert counted + p.ops_lost == 2 * 16 * ops, (counted, p.ops_lost)
    assert_counts_consistent(ts)



@pytest.mark.root
def test_each_file_has_the_mount_point_it_is_under(tmp_path, recorder_lib):
    """A file on a tmpfs mounted (in a mount namespace of the test's own) at a path with a space
    (mountinfo writes it \\040) is under that mount point, typed as the mount table says; a file
    beside it on the test's directory is under that directory's mount point."""
    mounted = tmp_path / "mount point"
    mounted.mkdir()
    script = 'mount -t tmpfs none "$1" && echo data > "$1/f" && cat "$1/f" && echo more > "$2"'
    result = run(["unshare", "-m", "sh", "-c", script, "sh", str(mounted), str(tmp_path / "beside")],
                 preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert result.returncode == 0 and result.stdout == b"data\n", describe(result)
    job = job_from_traces([str(tmp_path / "traces")])
    files = {f.name: f for f in job.files}
    on_tmpfs, beside = files[str(mounted / "f")], files[str(tmp_path / "beside")]
    assert (on_tmpfs.mount_point, on_tmpfs.fs_type) == (str(mounted), "tmpfs")
    expected = subprocess.run(["stat", "-c", "%m", str(tmp_path)], capture_output=True, text=True, check=True)
    assert beside.mount_point == expected.stdout.strip()
    assert (str(mounted), "tmpfs") in job.mounts
