"""Offsets of calls at a descriptor's shared position (read, readv, write, writev), made by
several threads through ONE descriptor at the same time: every recorded offset is the one the
call really got (the program learns it from the data) or -1, never another; alone, every
offset is exact, also when each thread of a multi-threaded process reads its own descriptor
(each description owned by its thread) and before a second thread first calls at a position
one thread used alone (docs/trace-format.md, "Offsets").
"""
import re
import sys

import pytest

from recorder_helpers import describe, load, op_rows, prog, run, select

BLOCK = 4096


def calls_by_tid(stdout, alone=None):
    """{tid: [(true offset, result), ...] in the thread's call order} from sharedpos's output;
    alone, if given, gets {tid: [whether the call was made before the other threads began]}."""
    calls = {}
    for tid, offset, result, by_itself in re.findall(
            rb"CALL tid=(\d+) off=(-?\d+) res=(-?\d+) alone=([01])", stdout):
        calls.setdefault(int(tid), []).append((int(offset), int(result)))
        if alone is not None:
            alone.setdefault(int(tid), []).append(by_itself == b"1")
    return calls


def recorded_by_tid(ts, path, kind):
    """{tid: [(recorded offset, result), ...] in start order} of the kind's records on path."""
    rows = sorted(op_rows(ts, select(ts, path, kind)), key=lambda r: r["start_ns"])
    recorded = {}
    for r in rows:
        recorded.setdefault(r["tid"], []).append((r["offset"], r["result"]))
    return recorded


def shared_position_run(tmp_path, recorder_lib, mode, threads, blocks, alone_calls=None):
    """Runs sharedpos; every recorded offset true or -1. Returns (calls, unknown offsets);
    alone_calls, if given, gets [(recorded, true offset)] of the calls made alone (handoff)."""
    data = tmp_path / "shared.dat"
    traces = tmp_path / f"traces-{mode}"
    rec = run([prog("sharedpos"), mode, threads, blocks, data], preload=[recorder_lib], trace_dir=traces)
    assert rec.returncode == 0 and rec.stderr == b"", describe(rec)
    alone = {}
    truth = calls_by_tid(rec.stdout, alone)
    assert len(truth) == threads
    recorded = recorded_by_tid(load(traces), data, "read" if mode in ("own", "handoff") else mode)
    assert sorted(recorded) == sorted(truth), "one thread's calls recorded under another thread id"
    wrong, unknown, calls = [], 0, 0
    for tid, want in truth.items():
        got = recorded[tid]
        assert [res for _, res in got] == [res for _, res in want], f"thread {tid}: other calls recorded"
        if alone_calls is not None:
            alone_calls += [(offset, true_offset) for (offset, _), (true_offset, _), by_itself
                            in zip(got, want, alone[tid]) if by_itself]
        for i, ((offset, _), (true_offset, _)) in enumerate(zip(got, want)):
            calls += 1
            unknown += offset == -1
            if offset not in (true_offset, -1):
                wrong.append(f"thread {tid} call {i}: recorded offset {offset}, true offset {true_offset}")
    assert not wrong, f"{len(wrong)} of {calls} offsets wrong:\n" + "\n".join(wrong[:20])
    return calls, unknown


@pytest.mark.parametrize("round_", range(3))
@pytest.mark.parametrize("mode", ["read", "readv", "write", "writev"])
def test_threads_sharing_a_position_record_true_or_unknown_offsets(tmp_path, recorder_lib, mode, round_):
    calls, _ = shared_position_run(tmp_path, recorder_lib, mode, threads=4, blocks=2048)
    assert calls == 2048 + (4 if mode.startswith("read") else 0)   # + each reader's call at the end


@pytest.mark.parametrize("threads", [2, 4])
def test_threads_each_reading_their_own_descriptor_record_every_offset_exactly(tmp_path, recorder_lib, threads):
    """The common case: a multi-threaded process whose descriptions are each used by one thread
    (its owner, counted without locked instructions) records every offset exactly."""
    calls, unknown = shared_position_run(tmp_path, recorder_lib, "own", threads=threads, blocks=1024)
    assert calls == threads * (1024 + 1)
    assert unknown == 0, f"{unknown} of {calls} offsets recorded as unknown by threads with their own descriptors"


@pytest.mark.parametrize("round_", range(3))
def test_a_second_thread_joining_a_position_keeps_offsets_true_or_unknown(tmp_path, recorder_lib, round_):
    """64 rounds, each on a new description (the last one's reused): thread 0 reads a quarter of
    the file alone (exact offsets), then the other joins it on the same descriptor while it
    reads on; from then on every offset is exact or -1, whichever call made the description
    shared and whatever call of thread 0 was then in flight."""
    alone = []
    calls, _ = shared_position_run(tmp_path, recorder_lib, "handoff", threads=2, blocks=256, alone_calls=alone)
    assert calls == 64 * (256 + 2)
    assert [true for _, true in alone] == [i * BLOCK for i in range(256 // 4)] * 64
    wrong = [(offset, true) for offset, true in alone if offset != true]
    assert not wrong, f"{len(wrong)} offsets of the thread reading alone not exact: {wrong[:10]}"


@pytest.mark.parametrize("round_", range(3))
def test_a_signal_handler_reading_at_the_position_keeps_offsets_true_or_unknown(tmp_path, recorder_lib, round_):
    """A thread reads at a position it owns while SIGALRM's handler reads 512 bytes there,
    at least 200 times, some inside the thread's reads (after their system call, before their
    record): every offset, the thread's and the handler's, is true or -1. (A handler's call
    that interrupts the recorder's own bookkeeping passes through unrecorded: the handler's
    records are matched to its calls by their buffers.)"""
    data = tmp_path / "shared.dat"
    rec = run([prog("sharedpos"), "signal", 1, 256, data], preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert rec.returncode == 0 and rec.stderr == b"", describe(rec)
    (tid, thread_calls), = calls_by_tid(rec.stdout).items()
    handler_calls = {int(buf): (int(offset), int(result)) for offset, result, buf in
                     re.findall(rb"HANDLER off=(-?\d+) res=(-?\d+) buf=(\d+)", rec.stdout)}
    assert len(handler_calls) >= 200
    ts = load(tmp_path / "traces")
    rows = sorted(op_rows(ts, select(ts, data, "read")), key=lambda r: r["start_ns"])
    assert {r["tid"] for r in rows} == {tid}
    got = [(r["offset"], r["result"]) for r in rows if r["requested"] == BLOCK]
    assert [res for _, res in got] == [res for _, res in thread_calls], "the thread's calls: other calls recorded"
    wrong = [f"thread call {i}: recorded {offset}, true {true}"
             for i, ((offset, _), (true, _)) in enumerate(zip(got, thread_calls)) if offset not in (true, -1)]
    handler_rows = [r for r in rows if r["requested"] == 512]
    assert handler_rows and all(r["buffer"] in handler_calls for r in handler_rows)
    assert all(r["result"] == handler_calls[r["buffer"]][1] for r in handler_rows)
    wrong += [f"handler call: recorded {r['offset']}, true {handler_calls[r['buffer']][0]}"
              for r in handler_rows if r["offset"] not in (handler_calls[r["buffer"]][0], -1)]
    assert not wrong, f"{len(wrong)} offsets wrong:\n" + "\n".join(wrong[:20])


@pytest.mark.parametrize("mode", ["read", "readv", "write", "writev"])
def test_one_thread_records_every_offset_exactly(tmp_path, recorder_lib, mode):
    calls, unknown = shared_position_run(tmp_path, recorder_lib, mode, threads=1, blocks=512)
    assert calls == 512 + (1 if mode.startswith("read") else 0)
    assert unknown == 0, f"{unknown} of {calls} offsets recorded as unknown by a single thread"


APPENDING_WRITES = r"""
import os, sys
path = sys.argv[1]
with open(path, "wb") as f:
    f.write(b"a" * 100)
def show(kind, fd, call):
    before = os.path.getsize(path)
    n = call()
    print(f"WRITE kind={kind} off={before} res={n}", flush=True)
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
show("pwrite", fd, lambda: os.pwrite(fd, b"b" * 10, 0))            # Linux appends whatever the offset
os.close(fd)
fd = os.open(path, os.O_WRONLY)
show("pwritev2", fd, lambda: os.pwritev(fd, [b"c" * 10], 0, os.RWF_APPEND))
show("pwritev2", fd, lambda: os.pwritev(fd, [b"d" * 10], -1, os.RWF_APPEND))  # at the end, position moved there
show("write", fd, lambda: os.write(fd, b"e" * 10))                  # at the position: the end
os.close(fd)
"""


def test_writes_that_go_to_the_end_of_the_file_record_true_or_unknown_offsets(tmp_path, recorder_lib):
    """pwrite on an O_APPEND descriptor (Linux appends whatever its offset) and pwritev2 with
    RWF_APPEND (at an offset or at the position) write at the end of the file: the offset they
    were given is not where they wrote, so they record -1; the write at the position after them
    records its true offset or -1."""
    data = tmp_path / "appended.dat"
    rec = run([sys.executable, "-c", APPENDING_WRITES, data], preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert rec.returncode == 0 and rec.stderr == b"", describe(rec)
    want = [(kind.decode(), int(offset), int(result)) for kind, offset, result in
            re.findall(rb"WRITE kind=(\w+) off=(\d+) res=(\d+)", rec.stdout)]
    assert [offset for _, offset, _ in want] == [100, 110, 120, 130]
    ts = load(tmp_path / "traces")
    rows = sorted(op_rows(ts, select(ts, data)), key=lambda r: r["start_ns"])[1:]   # [0]: the file made
    assert [(r["kind"], r["result"]) for r in rows] == [(kind, result) for kind, _, result in want]
    assert [r["offset"] for r in rows[:3]] == [-1, -1, -1]
    assert rows[3]["offset"] in (130, -1)
