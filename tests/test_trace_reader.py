"""The trace reader: on traces of real programs run under the real recorder, and on traces
built here byte by byte for the cases a real run cannot produce on demand (TSC calibration
rules, orphan name parts, every kind of corruption)."""
import json
import os
import pathlib
import sys

import numpy as np
import pytest

from ioassess.inputs import trace
from ioassess.inputs import traceformat as tf
from ioassess.inputs.load import job_from_traces
from recorder_helpers import OP_CODES, without_meta
from ioassess.inputs.trace import (OP_COLUMNS, SUMMARY_COLUMNS, TraceFileError, fit_clock, read_trace_dir,
                                   read_trace_file, totals)

START_REALTIME_NS = 1_700_000_000_000_000_000
START_MONOTONIC_NS = 5_000_000_000


# --- traces built byte by byte -------------------------------------------------------------

def slot(dtype, **fields):
    record = np.zeros(1, dtype)
    for name, value in fields.items():
        record[name] = value
    return record.tobytes()


def op_slot(op=tf.Op.READ, **fields):
    """An op record; it starts when the process starts unless start_ticks says otherwise."""
    return slot(tf.OP_RECORD_DTYPE, type=tf.SlotType.OP, op=op, **{"start_ticks": START_MONOTONIC_NS, **fields})


def clock_slot(ticks, monotonic_ns):
    return slot(tf.CLOCK_RECORD_DTYPE, type=tf.SlotType.CLOCK, ticks=ticks, monotonic_ns=monotonic_ns)


def named_slots(dtype, slot_type, name, **fields):
    """A slot with a name (FILE, MOUNT) followed by its NAME_PART slots."""
    name = name.encode() if isinstance(name, str) else name
    parts = [name[i:i + tf.NAME_PART_BYTES] for i in range(0, len(name), tf.NAME_PART_BYTES)]
    record = slot(dtype, type=slot_type, name_bytes=len(name), **fields)
    return record + b"".join(slot(tf.NAME_PART_DTYPE, type=tf.SlotType.NAME_PART, bytes=part) for part in parts)


def file_slots(file_id, name, **fields):
    return named_slots(tf.FILE_RECORD_DTYPE, tf.SlotType.FILE, name, file_id=file_id, **fields)


def mount_slots(point, fs_type):
    return named_slots(tf.MOUNT_RECORD_DTYPE, tf.SlotType.MOUNT, point, fs_type=fs_type.encode())


def summary_entry(op, file_id, count, duration_ticks=0, state=tf.SummaryState.IN_USE, **fields):
    return slot(tf.SUMMARY_ENTRY_DTYPE, state=state, op=op, file_id=file_id, count=count,
                duration_ticks=duration_ticks, **fields)


def pad_to_page(data):
    return data + bytes(-len(data) % tf.PAGE_BYTES)


def write_trace(path, slots=b"", summary=b"", **header_fields):
    """A trace file: header (defaults: monotonic clock, exited), the slots, then the summary
    entries in their own page-aligned extent."""
    header = {"magic": tf.MAGIC, "version": tf.FORMAT_VERSION, "header_bytes": tf.HEADER_BYTES,
              "slot_bytes": tf.SLOT_BYTES, "byte_order_mark": tf.BYTE_ORDER_MARK,
              "clock_source": tf.ClockSource.MONOTONIC, "flags": tf.HeaderFlag.EXIT_STATUS, "pid": 100, "ppid": 1,
              "start_ticks": START_MONOTONIC_NS, "start_monotonic_ns": START_MONOTONIC_NS,
              "start_realtime_ns": START_REALTIME_NS, "end_ticks": START_MONOTONIC_NS + 10**9,
              "end_monotonic_ns": START_MONOTONIC_NS + 10**9, "end_reason": tf.EndReason.EXIT,
              "record_cap": 1000, "hostname": b"node1", "exe": b"/bin/app", "cmdline": b"app -x"}
    body = pad_to_page(slots)
    if summary:
        header.update(summary_offset=tf.HEADER_BYTES + len(body),
                      summary_entries=len(summary) // tf.SUMMARY_ENTRY_DTYPE.itemsize)
        body += pad_to_page(summary)
    header.update(header_fields)
    pathlib.Path(path).write_bytes(pad_to_page(slot(tf.HEADER_DTYPE, **header)) + body)
    return path


@pytest.fixture
def simple_trace(tmp_path):
    slots = (file_slots(7, "/data/in") + clock_slot(START_MONOTONIC_NS + 10, START_MONOTONIC_NS + 10)
             + op_slot(tf.Op.PREAD, file_id=7, offset=4096, requested=100, result=100, tid=5,
                       start_ticks=START_MONOTONIC_NS + 2000, duration_ticks=300, buffer=0xABC)
             + op_slot(tf.Op.WRITE, file_id=9, offset=-1, requested=10, result=-28, flags=tf.OpFlag.APPEND,
                       start_ticks=START_MONOTONIC_NS + 1000, duration_ticks=40))
    return write_trace(tmp_path / "t.iot", slots, exit_status=3)


def test_op_columns_of_a_monotonic_trace(simple_trace):
    traces = read_trace_file(simple_trace)
    ops = traces.ops
    assert {name: column.dtype for name, column in ops.items()} == {n: np.dtype(d) for n, d in OP_COLUMNS.items()}
    # sorted by start time: the write (1000 ns after start) first
    assert ops["op"].tolist() == [tf.Op.WRITE, tf.Op.PREAD]
    assert ops["start_ns"].tolist() == [START_REALTIME_NS + 1000, START_REALTIME_NS + 2000]
    assert ops["duration_ns"].tolist() == [40, 300]
    assert ops["result"].tolist() == [-28, 100]
    assert ops["offset"].tolist() == [-1, 4096]
    assert ops["flags"].tolist() == [tf.OpFlag.APPEND, 0]
    assert ops["buffer"][1] == 0xABC and ops["tid"][1] == 5 and ops["process"].tolist() == [0, 0]
    assert traces.errors == []


def test_process_and_file_facts(simple_trace):
    traces = read_trace_file(simple_trace)
    (process,) = traces.processes
    assert (process.pid, process.ppid, process.hostname, process.exe, process.cmdline) == (100, 1, "node1", "/bin/app",
                                                                                         "app -x")
    assert (process.end_reason, process.exit_status, process.ops_kept, process.clock_source) == ("exit", 3, 2,
                                                                                                 "monotonic")
    assert process.start_ns == START_REALTIME_NS and process.end_ns == START_REALTIME_NS + 10**9
    assert process.path == str(simple_trace) and process.ns_per_tick == 1.0
    assert traces.files[7].name == "/data/in"
    assert traces.files[9].name == "<unknown file 0x0000000000000009>"


def test_a_killed_process_has_no_end(tmp_path):
    write_trace(tmp_path / "k.iot", op_slot(file_id=1, start_ticks=START_MONOTONIC_NS), end_ticks=0,
                end_monotonic_ns=0, end_reason=tf.EndReason.RUNNING, flags=0)
    (process,) = read_trace_file(tmp_path / "k.iot").processes
    assert (process.end_reason, process.end_ns, process.exit_status) == ("running/killed", None, None)


def test_monotonic_ticks_are_taken_as_monotonic_ns(tmp_path):
    """start_ticks is read a moment before start_monotonic_ns; an op at tick t happened at
    monotonic time t, whatever that gap."""
    write_trace(tmp_path / "m.iot", op_slot(file_id=1, start_ticks=START_MONOTONIC_NS + 500),
                start_ticks=START_MONOTONIC_NS - 30)
    assert read_trace_file(tmp_path / "m.iot").ops["start_ns"].tolist() == [START_REALTIME_NS + 500]


def test_long_names_parts_orphans_and_repeated_file_slots(tmp_path):
    names = {1: "a" * 63, 2: "b" * 64, 3: "/c/" + "é" * 100, 4: ""}
    slots = b"".join(file_slots(file_id, name) for file_id, name in names.items())
    orphan = slot(tf.NAME_PART_DTYPE, type=tf.SlotType.NAME_PART, bytes=b"orphan")
    slots += orphan + bytes(tf.SLOT_BYTES) + file_slots(2, "b" * 64) + orphan
    write_trace(tmp_path / "n.iot", slots + file_slots(5, b"bad\xff", mode=0o100644, inode=77, fs_magic=0xEF53))
    files = read_trace_file(tmp_path / "n.iot").files
    assert {file_id: info.name for file_id, info in files.items()} == {**names, 5: "bad\\xff"}
    assert (files[5].mode, files[5].inode, files[5].fs_magic) == (0o100644, 77, 0xEF53)


TICKS_PER_NS = 2.5


def tsc_trace(path, hostname=b"node1", clock_pairs=True, **header_fields):
    """A TSC trace at TICKS_PER_NS, its pairs read a little off the line (as real readings are)."""
    start_ticks = 10**12
    ticks = lambda ns: start_ticks + round(ns * TICKS_PER_NS)  # noqa: E731
    slots = op_slot(file_id=1, start_ticks=ticks(10**6), duration_ticks=round(1000 * TICKS_PER_NS))
    if clock_pairs:
        slots += b"".join(clock_slot(ticks(ns), START_MONOTONIC_NS + ns + jitter)
                          for ns, jitter in ((10**5, 3), (10**7, -2), (10**8, 1)))
    fields = dict(clock_source=tf.ClockSource.TSC, start_ticks=start_ticks, hostname=hostname,
                  end_ticks=ticks(2 * 10**8), end_monotonic_ns=START_MONOTONIC_NS + 2 * 10**8)
    return write_trace(path, slots, **{**fields, **header_fields})


def test_tsc_ticks_are_converted_with_the_fitted_rate(tmp_path):
    traces = read_trace_file(tsc_trace(tmp_path / "tsc.iot"))
    assert traces.processes[0].ns_per_tick == pytest.approx(1 / TICKS_PER_NS, rel=1e-7)
    assert traces.processes[0].clock_source == "tsc"
    assert abs(traces.ops["start_ns"][0] - (START_REALTIME_NS + 10**6)) <= 3
    assert traces.ops["duration_ns"].tolist() == [1000]


def test_a_process_without_clock_pairs_borrows_its_hosts_rate(tmp_path):
    tsc_trace(tmp_path / "a.iot")
    tsc_trace(tmp_path / "b.iot", clock_pairs=False, end_ticks=0, end_monotonic_ns=0)
    tsc_trace(tmp_path / "c.iot", hostname=b"node2", clock_pairs=False, end_ticks=0, end_monotonic_ns=0)
    traces = read_trace_dir(tmp_path)
    assert [p.path for p in traces.processes] == [str(tmp_path / "a.iot"), str(tmp_path / "b.iot")]
    assert traces.processes[1].ns_per_tick == traces.processes[0].ns_per_tick
    assert abs(traces.ops["start_ns"][1] - (START_REALTIME_NS + 10**6)) <= 3
    assert [str(e) for e in traces.errors] == [f"{tmp_path / 'c.iot'}: cannot calibrate its clock: too few clock "
                                               "readings and no other process on its host to borrow a rate from"]


def test_a_process_alone_with_readings_under_a_microsecond_uses_their_rate(tmp_path):
    """Killed a moment after its first op: the readings of its start and of its first extent,
    500 ns apart, are too close to fit but still give its op times, with a note."""
    start_ticks = 10**12
    ticks = lambda ns: start_ticks + round(ns * TICKS_PER_NS)  # noqa: E731
    slots = clock_slot(ticks(500), START_MONOTONIC_NS + 500) + op_slot(file_id=1, start_ticks=ticks(600),
                                                                        duration_ticks=round(100 * TICKS_PER_NS))
    write_trace(tmp_path / "k.iot", slots, clock_source=tf.ClockSource.TSC, start_ticks=start_ticks, end_ticks=0,
                end_monotonic_ns=0)
    traces = read_trace_dir(tmp_path)
    assert traces.processes[0].ns_per_tick == 1 / TICKS_PER_NS and not traces.errors
    assert (traces.ops["start_ns"].tolist(), traces.ops["duration_ns"].tolist()) == ([START_REALTIME_NS + 600], [100])
    assert traces.notes == [f"{tmp_path / 'k.iot'}: its clock could not be fitted (its clock readings span only "
                            "500 ns): its op times use the rate between its first and last readings, 0.4 ns per tick"]


def test_fit_clock_needs_a_microsecond():
    ticks = np.array([100, 200, 300], np.uint64)
    assert fit_clock(ticks, np.array([10, 500, 999], np.uint64)) is None
    offset, slope = fit_clock(ticks, np.array([10, 1010, 2010], np.uint64))
    assert (offset, slope) == pytest.approx((0.0, 10.0))
    assert fit_clock(ticks[:1], ticks[:1]) is None


def test_summary_entries_are_read_and_their_extent_is_not_walked_as_slots(tmp_path):
    hist = np.zeros(tf.HIST_BINS, np.uint64)
    hist[[0, 3, 55]] = [1, 2, 0xFFFF]  # bytes that are no slot type, inside the summary extent
    summary = (summary_entry(tf.Op.WRITE, 7, count=5, duration_ticks=500, size_bucket=4, bytes_requested=40,
                             bytes_returned=35, errors=1, duration_hist=hist)
               + summary_entry(tf.Op.READ, 7, count=9, state=1) + summary_entry(tf.Op.READ, 0, count=2))
    write_trace(tmp_path / "s.iot", file_slots(7, "/f") + op_slot(tf.Op.WRITE, file_id=7, requested=8, result=8,
                                                                   duration_ticks=10), summary)
    traces = read_trace_file(tmp_path / "s.iot")
    summary = traces.summary
    assert set(summary) == set(SUMMARY_COLUMNS)
    assert summary["count"].tolist() == [5, 2] and summary["file_id"].tolist() == [7, 0]
    assert summary["duration_hist"].shape == (2, tf.HIST_BINS) and summary["duration_hist"][0, 55] == 0xFFFF
    assert summary["duration_ns"].tolist() == [500, 0] and summary["hist_ns_per_tick"].tolist() == [1.0, 1.0]
    assert traces.files[0].name == "<other files>"
    by_op = totals(traces, by=("op",))
    assert by_op["op"].tolist() == [tf.Op.READ, tf.Op.WRITE]
    assert by_op["count"].tolist() == [2, 6]
    assert by_op["bytes_requested"].tolist() == [0, 48] and by_op["bytes_returned"].tolist() == [0, 43]
    assert by_op["errors"].tolist() == [0, 1] and by_op["duration_ns"].tolist() == [0, 510]


def test_totals_by_direction_process_and_all(tmp_path):
    write_trace(tmp_path / "1.iot", op_slot(tf.Op.PREADV2, file_id=1, result=5, requested=6)
                + op_slot(tf.Op.FSYNC, file_id=1) + op_slot(tf.Op.PWRITEV, file_id=2, result=-5, requested=3))
    write_trace(tmp_path / "2.iot", op_slot(tf.Op.READ, file_id=2, result=1, requested=1),
                summary_entry(tf.Op.FDATASYNC, 2, count=4))
    traces = read_trace_dir(tmp_path)
    by_direction = totals(traces, by=("direction",))
    assert by_direction["direction"].tolist() == ["read", "write", "sync"]
    assert by_direction["count"].tolist() == [2, 1, 5] and by_direction["bytes_returned"].tolist() == [6, 0, 0]
    by_process = totals(traces, by=("process", "direction"))
    assert by_process["process"].tolist() == [0, 0, 0, 1, 1]
    everything = totals(traces, by=())
    assert everything["count"].tolist() == [8] and everything["errors"].tolist() == [1]
    with pytest.raises(ValueError):
        totals(traces, by=("color",))


def test_an_empty_set_has_typed_empty_columns(tmp_path):
    (tmp_path / "bad.iot").write_bytes(b"nope")
    traces = read_trace_dir(tmp_path)
    assert traces.processes == [] and len(traces.errors) == 1
    assert traces.ops["start_ns"].dtype == np.int64 and traces.summary["duration_hist"].shape == (0, tf.HIST_BINS)
    assert totals(traces)["count"].tolist() == [] and totals(traces, by=())["count"].tolist() == []


def test_directory_listing(tmp_path):
    with pytest.raises(TraceFileError, match="no such file or directory"):
        read_trace_dir(tmp_path / "missing")
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "sub.iot").mkdir()
    with pytest.raises(TraceFileError, match=r"no trace files \(\*\.iot\) in this directory"):
        read_trace_dir(tmp_path)
    write_trace(tmp_path / "b.iot")
    write_trace(tmp_path / "a.iot")
    assert [p.path for p in read_trace_dir(str(tmp_path)).processes] == [str(tmp_path / "a.iot"),
                                                                        str(tmp_path / "b.iot")]
    assert len(read_trace_dir([tmp_path, tmp_path / "a.iot"]).processes) == 3


# --- corruption: one line naming the file, never another exception ---------------------------

def corrupt_header(path, **fields):
    data = bytearray(path.read_bytes())
    header = np.frombuffer(bytes(data[:tf.HEADER_DTYPE.itemsize]), tf.HEADER_DTYPE).copy()
    for name, value in fields.items():
        header[name] = value
    data[:tf.HEADER_DTYPE.itemsize] = header.tobytes()
    path.write_bytes(bytes(data))


def set_byte(path, offset, value):
    data = bytearray(path.read_bytes())
    data[offset] = value
    path.write_bytes(bytes(data))


def truncate(path, size):
    with open(path, "r+b") as f:
        f.truncate(size)


CORRUPTIONS = {
    "short": (lambda p: truncate(p, 100), "truncated: 100 bytes, the header alone needs 4096"),
    "empty": (lambda p: truncate(p, 0), "truncated: 0 bytes, the header alone needs 4096"),
    "ragged": (lambda p: truncate(p, tf.HEADER_BYTES + 10),
               "truncated: 4106 bytes is not the 4096-byte header plus whole 4096-byte pages"),
    "magic": (lambda p: corrupt_header(p, magic=b"XXXXXXXX"), "not an ioassess trace (bad magic)"),
    "random": (lambda p: p.write_bytes(np.random.default_rng(1).bytes(20000)), "not an ioassess trace (bad magic)"),
    "version": (lambda p: corrupt_header(p, version=2),
                "trace format version 2 is newer than this reader supports (1)"),
    "byte order": (lambda p: corrupt_header(p, byte_order_mark=0x04030201),
                   "byte order mark is 0x04030201, not 0x01020304: written with another byte order, or corrupt"),
    "slot type": (lambda p: set_byte(p, tf.HEADER_BYTES + 3 * tf.SLOT_BYTES, 9),
                  "corrupt: slot 3 has unknown type 9"),
    "op kind": (lambda p: set_byte(p, tf.HEADER_BYTES + 2 * tf.SLOT_BYTES + 1, tf.Op.COUNT),
                f"corrupt: slot 2 has unknown op kind {int(tf.Op.COUNT)}"),
    "name part": (lambda p: set_byte(p, tf.HEADER_BYTES + tf.SLOT_BYTES, tf.SlotType.EMPTY),
                  "corrupt: FILE slot 0 is not followed by its 1 NAME_PART slots"),
    "summary extent": (lambda p: corrupt_header(p, summary_offset=tf.HEADER_BYTES, summary_entries=9),
                       "truncated: the summary table [4096, 8704) extends past the end of the file (8192 bytes)"),
    "clock source": (lambda p: corrupt_header(p, clock_source=7), "corrupt: unknown clock source 7"),
}


@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_corrupt_built_trace(tmp_path, corruption):
    damage, problem = CORRUPTIONS[corruption]
    path = write_trace(tmp_path / "x.iot", file_slots(1, "/f") + op_slot(file_id=1) + op_slot(file_id=1))
    damage(path)
    with pytest.raises(TraceFileError) as raised:
        read_trace_file(path)
    assert str(raised.value) == f"{path}: {problem}"


def test_files_are_under_the_longest_mount_point_of_their_names(tmp_path):
    """MOUNT slots of two traces (one mount point in both), files under each and under none."""
    write_trace(tmp_path / "a.iot", mount_slots("/", "ext4") + mount_slots("/scratch", "lustre")
                + file_slots(1, "/scratch/run/out") + file_slots(2, "/scratchy") + op_slot(file_id=1)
                + op_slot(file_id=2), pid=1)
    write_trace(tmp_path / "b.iot", mount_slots("/scratch/x y", "nfs4") + mount_slots("/scratch", "lustre")
                + file_slots(3, "/scratch/x y/in") + file_slots(4, "<descriptor 5>") + op_slot(file_id=3)
                + op_slot(file_id=4), pid=2)
    assert read_trace_dir(str(tmp_path)).mounts == [("/scratch/x y", "nfs4"), ("/scratch", "lustre"), ("/", "ext4")]
    job = job_from_traces([str(tmp_path)])
    assert [(f.name, f.mount_point, f.fs_type) for f in job.files] == [
        ("/scratch/run/out", "/scratch", "lustre"), ("/scratchy", "/", "ext4"),
        ("/scratch/x y/in", "/scratch/x y", "nfs4"), ("<descriptor 5>", "", "")]


def test_a_mount_point_without_its_name(tmp_path):
    path = write_trace(tmp_path / "x.iot", mount_slots("/scratch", "lustre")[:tf.SLOT_BYTES] + op_slot())
    with pytest.raises(TraceFileError, match="corrupt: MOUNT slot 0 is not followed by its 1 NAME_PART slots"):
        read_trace_file(path)


def test_a_name_that_runs_past_the_end(tmp_path):
    path = write_trace(tmp_path / "x.iot", bytes(tf.PAGE_BYTES - tf.SLOT_BYTES)
                       + slot(tf.FILE_RECORD_DTYPE, type=tf.SlotType.FILE, name_bytes=5))
    with pytest.raises(TraceFileError, match="corrupt: the name of the FILE slot 63 runs past the end of the file"):
        read_trace_file(path)


def test_unreadable_and_irregular_files(tmp_path):
    with pytest.raises(TraceFileError, match="not a regular file"):
        read_trace_file(tmp_path)
    with pytest.raises(TraceFileError, match="cannot read: No such file or directory"):
        read_trace_file(tmp_path / "none.iot")


def test_every_truncation_of_a_trace_gives_a_trace_file_error_or_reads(tmp_path):
    path = write_trace(tmp_path / "x.iot", file_slots(1, "/f" * 100) + op_slot(file_id=1),
                       summary_entry(tf.Op.READ, 1, 3))
    data = path.read_bytes()
    for size in range(0, len(data), 509):
        path.write_bytes(data[:size])
        try:
            read_trace_file(path)
        except TraceFileError as error:
            assert str(error).startswith(f"{path}: ") and "\n" not in str(error)


# --- traces of real programs under the real recorder ---------------------------------------

# Does every kind of op on two files and prints, per op, what it did and when (its own ground
# truth): [path, op name, bytes requested, result (bytes, a descriptor, 0, or -errno), ns
# before, ns after]. Metadata ops return no bytes.
GROUND_TRUTH_PROGRAM = r'''
import json, os, sys, time
work = sys.argv[1]
log = []
def do(path, op, requested, call):
    before = time.time_ns()
    try:
        result = call()
    except OSError as error:
        result = -error.errno
    after = time.time_ns()
    if not isinstance(result, int):
        result = 0 if result is None else len(result)
    log.append([path, op, requested, result, before, after])
a, b = os.path.join(work, "a.dat"), os.path.join(work, "b.dat")
do(a, "stat", 0, lambda: os.stat(a) and 0)
do(a, "open", 0, lambda: os.open(a, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600))
fd = log[-1][3]
for i in range(20):
    do(a, "write", 1000 + i, lambda: os.write(fd, bytes(1000 + i)))
do(a, "pwrite", 10, lambda: os.pwrite(fd, b"x" * 10, 5))
do(a, "writev", 30, lambda: os.writev(fd, [b"a" * 10, b"b" * 20]))
do(a, "pwritev2", 7, lambda: os.pwritev(fd, [b"c" * 7], 0))  # CPython calls pwritev2 whatever the flags
do(a, "pwritev2", 5, lambda: os.pwritev(fd, [b"d" * 5], 0, os.RWF_DSYNC))
do(a, "fsync", 0, lambda: os.fsync(fd))
do(a, "fdatasync", 0, lambda: os.fdatasync(fd))
os.lseek(fd, 0, os.SEEK_SET)
buf = bytearray(64)
do(a, "read", 4096, lambda: os.read(fd, 4096))
do(a, "pread", 100, lambda: os.pread(fd, 100, 50))
do(a, "readv", 64, lambda: os.readv(fd, [buf]))
do(a, "preadv2", 64, lambda: os.preadv(fd, [buf], 10))
do(a, "preadv2", 64, lambda: os.preadv(fd, [buf], 10, os.RWF_HIPRI))
do(a, "stat", 0, lambda: os.stat(fd) and 0)
do(a, "truncate", 0, lambda: os.truncate(fd, 100))
do(a, "close", 0, lambda: os.close(fd))
do(b, "stat", 0, lambda: os.stat(b) and 0)
do(b, "open", 0, lambda: os.open(b, os.O_WRONLY | os.O_CREAT, 0o600))
fd = log[-1][3]
do(b, "read", 10, lambda: os.read(fd, 10))
do(b, "write", 0, lambda: os.write(fd, b""))
do(b, "close", 0, lambda: os.close(fd))
do(b, "unlink", 0, lambda: os.unlink(b))
do(b, "unlink", 0, lambda: os.unlink(b))
json.dump(log, sys.stdout)
'''
# How far a recorded start time may be from the program's own clock readings around the call.
CLOCK_TOLERANCE_NS = 20_000


def run_ground_truth(run_recorded, tmp_path, env=None):
    program = tmp_path / "ground_truth.py"
    program.write_text(GROUND_TRUTH_PROGRAM)
    work = tmp_path / "work"
    work.mkdir()
    result = run_recorded([sys.executable, program, work], tmp_path / "traces", env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), read_trace_dir(tmp_path / "traces")


def expected_totals(log):
    table = {}
    for path, op, requested, result, _, _ in log:
        row = table.setdefault((path, op), {"count": 0, "bytes_requested": 0, "bytes_returned": 0, "errors": 0})
        row["count"] += 1
        row["bytes_requested"] += requested
        row["bytes_returned"] += max(result, 0) if tf.OP_DIRECTION[OP_CODES[op]] != "meta" else 0
        row["errors"] += result < 0
    return table


def recorded_totals(traces, paths):
    grouped = totals(traces, by=("file_id", "op"))
    table = {}
    for i, file_id in enumerate(grouped["file_id"].tolist()):
        name = traces.files[file_id].name
        if name in paths:
            table[(name, tf.OP_NAMES[int(grouped["op"][i])])] = {
                key: int(grouped[key][i]) for key in ("count", "bytes_requested", "bytes_returned", "errors")}
    return table


@pytest.mark.parametrize("clock", ["tsc", "monotonic"])
def test_real_trace_matches_the_programs_own_account(run_recorded, tmp_path, clock):
    log, traces = run_ground_truth(run_recorded, tmp_path, {"IOASSESS_CLOCK": clock})
    assert traces.errors == []
    paths = {entry[0] for entry in log}
    assert recorded_totals(traces, paths) == expected_totals(log)
    name_of = {file_id: info.name for file_id, info in traces.files.items()}
    on_our_files = np.isin(traces.ops["file_id"], [fid for fid, name in name_of.items() if name in paths])
    ops = {column: values[on_our_files] for column, values in traces.ops.items()}
    assert [tf.OP_NAMES[op] for op in ops["op"].tolist()] == [entry[1] for entry in log]
    assert ops["result"].tolist() == [entry[3] for entry in log]
    before, after = np.array([entry[4] for entry in log]), np.array([entry[5] for entry in log])
    assert np.all(ops["start_ns"] >= before - CLOCK_TOLERANCE_NS), ops["start_ns"] - before
    assert np.all(ops["start_ns"] + ops["duration_ns"] <= after + CLOCK_TOLERANCE_NS), after - ops["start_ns"]
    process = traces.processes[int(ops["process"][0])]
    assert process.clock_source == clock and process.end_reason == "exit"
    assert process.start_ns <= ops["start_ns"].min() and ops["start_ns"].max() <= process.end_ns
    if clock == "tsc":
        assert 0.01 < process.ns_per_tick < 10


def test_totals_stay_exact_past_a_tiny_record_cap(run_recorded, tmp_path):
    log, traces = run_ground_truth(run_recorded, tmp_path, {"IOASSESS_MAX_RECORDS": "3"})
    assert traces.errors == []
    assert recorded_totals(traces, {entry[0] for entry in log}) == expected_totals(log)
    for index, process in enumerate(traces.processes):
        assert process.record_cap == 3 and process.ops_kept <= 3 and process.ops_lost == 0
        assert process.ops_not_kept == traces.summary["count"][traces.summary["process"] == index].sum()
    assert traces.summary["count"].sum() >= len(log) - 3
    assert np.array_equal(traces.summary["duration_hist"].sum(axis=1), traces.summary["count"])


def test_a_killed_process_keeps_its_ops(run_recorded, tmp_path):
    program = "import os, signal, sys\nfd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o600)\n" \
              "for _ in range(10): os.write(fd, b'x' * 100)\nos.kill(os.getpid(), signal.SIGKILL)\n"
    result = run_recorded([sys.executable, "-c", program, tmp_path / "out"], tmp_path / "traces")
    assert result.returncode == -9
    traces = read_trace_dir(tmp_path / "traces")
    (process,) = [p for p in traces.processes if p.exe == os.path.realpath(sys.executable)]
    assert (process.end_reason, process.end_ns, process.exit_status) == ("running/killed", None, None)
    writes = totals(without_meta(traces), by=("file_id", "op"))
    (row,) = [i for i, fid in enumerate(writes["file_id"].tolist()) if traces.files[fid].name == str(tmp_path / "out")]
    assert (writes["count"][row], writes["bytes_returned"][row]) == (10, 1000)


def test_real_shell_pipeline_has_one_process_per_image(run_recorded, tmp_path):
    data = tmp_path / "data"
    result = run_recorded(["sh", "-c", f"dd if=/dev/zero of={data} bs=4k count=50 2>/dev/null; cat {data} >/dev/null"],
                          tmp_path / "traces", env={"IOASSESS_HOSTNAME": "node-7", "IOASSESS_JOB_ID": "42"})
    assert result.returncode == 0
    traces = read_trace_dir(tmp_path / "traces")
    assert traces.errors == []
    assert len(traces.processes) == len(list((tmp_path / "traces").glob("*.iot")))
    assert {p.hostname for p in traces.processes} == {"node-7"} and {p.job_id for p in traces.processes} == {"42"}
    exes = sorted(os.path.basename(p.exe) for p in traces.processes if p.end_reason == "exit")
    assert "dd" in exes and "cat" in exes
    on_data = totals(traces, by=("file_id", "direction"))
    rows = {str(d): int(b) for fid, d, b in zip(on_data["file_id"].tolist(), on_data["direction"],
                                                on_data["bytes_returned"]) if traces.files[fid].name == str(data)}
    assert rows == {"write": 50 * 4096, "read": 50 * 4096, "meta": 0}   # meta: opens and closes, no bytes


def test_the_ops_a_sample_may_belong_to_are_found_in_order_or_not():
    rng = np.random.default_rng(5)
    for _ in range(200):
        ops = np.sort(rng.integers(0, 50, rng.integers(1, 300))).astype(np.uint64)   # equal ticks too
        ticks = np.sort(rng.integers(0, 60, rng.integers(1, 20))).astype(np.uint64)
        for op_ticks in (ops, rng.permutation(ops)):    # one thread in start order; threads interleaved
            expected = [i for i, t in enumerate(op_ticks.tolist()) if t in set(ticks.tolist())]
            assert trace._ops_at_ticks(op_ticks, ticks).tolist() == expected
