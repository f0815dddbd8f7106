"""The training workload generator (plugin/programs/ioassess-workload.c, docs/workload.md).

Every workload runs under the real recorder, the way the trainer runs it, and the trace is the
ground truth: the offsets, buffer addresses, op kinds and op counts it recorded on the target
file must follow the options exactly. The residency probes are checked against a file whose
cache state the test sets up itself.
"""
import math
import os
import subprocess

import numpy as np
import pytest

from recorder_helpers import describe, load, run, select
from ioassess import recorder_library_path
from ioassess.site.training import workload_program_path
from ioassess.inputs.traceformat import OP_NAMES

WORKLOAD = workload_program_path()
RECORDER = recorder_library_path()
KIB = 1024
MIB = 1024 * KIB
SIZE = 4 * KIB
SPAN = 64 * KIB                    # 16 slots of SIZE: 40 ops wrap around it
MEM_BUFFER = 64 * KIB              # small, so that each run starts fast
FACT_KEYS = {"ops", "bytes", "short_ops", "elapsed_s", "fsync_s", "op", "size", "mem_layout", "mem_buffer",
             "mem_offset", "file_layout", "file_span", "stride", "offset_base", "repeats", "budget", "seed", "create",
             "fsync_end", "buffer_address", "file"}


@pytest.fixture
def data_file(tmp_path):
    """A SPAN-byte file of random data on the test's own directory."""
    path = (tmp_path / "data").resolve()
    path.write_bytes(os.urandom(SPAN))
    return path


def facts_of(stdout):
    """The key=value facts of the workload's last line; `file` is last and may hold spaces."""
    line = stdout.decode().strip().splitlines()[-1]
    head, _, name = line.partition(" file=")
    facts = dict(item.split("=", 1) for item in head.split())
    facts["file"] = name
    return facts


def workload(tmp_path, *args, expect_status=0):
    """Run the workload under the recorder: (facts, ops on the target in call order, result)."""
    options = {"--size": SIZE, "--mem-buffer": MEM_BUFFER, "--mem-layout": "off0", "--file-layout": "off0"}
    argv = list(args)
    for name, value in options.items():
        if name not in argv:
            argv += [name, value]
    trace_dir = tmp_path / f"trace-{len(list(tmp_path.glob('trace-*')))}"
    result = run([WORKLOAD, *argv], preload=[RECORDER], trace_dir=trace_dir, env={"IOASSESS_EXCLUDE": "none"})
    assert result.returncode == expect_status, describe(result)
    if expect_status != 0:
        return None, None, result
    facts = facts_of(result.stdout)
    assert set(facts) == FACT_KEYS
    ts = load(trace_dir)
    index = np.flatnonzero(select(ts, path=facts["file"]))
    index = index[np.argsort(ts.ops["start_ns"][index], kind="stable")]
    ops = {name: column[index] for name, column in ts.ops.items()}
    return facts, ops, result


def kinds(ops):
    return [OP_NAMES[k] for k in ops["op"]]


def buffer_positions(facts, ops):
    return ops["buffer"].astype(np.int64) - int(facts["buffer_address"], 16)


def expected_slots(layout, n, slots, step=1):
    i = np.arange(n)
    return {"off0": np.zeros(n, np.int64), "seq": i % slots, "reverse": slots - 1 - i % slots,
            "stride": i * step % slots}[layout]


# ---------------------------------------------------------------------------------------------
# file layouts


@pytest.mark.parametrize("layout, stride, step", [
    ("off0", 0, 1),
    ("seq", 0, 1),
    ("reverse", 0, 1),
    ("stride", 2 * SIZE, 3),             # skip two slots after each access
    ("stride", 5000, 3),                 # not a multiple of the size: rounded up to 8 KiB
])
def test_file_layout_offsets(tmp_path, data_file, layout, stride, step):
    n = 40
    facts, ops, _ = workload(tmp_path, "--file", data_file, "--file-layout", layout, "--stride", stride,
                             "--repeats", n)
    expected = expected_slots(layout, n, SPAN // SIZE, step) * SIZE
    assert ops["offset"].tolist() == expected.tolist()
    assert kinds(ops) == ["pread"] * n
    assert ops["requested"].tolist() == [SIZE] * n and ops["result"].tolist() == [SIZE] * n
    assert facts["ops"] == str(n) and facts["bytes"] == str(n * SIZE) and facts["short_ops"] == "0"
    assert facts["file_span"] == str(SPAN) and facts["file_layout"] == layout


def test_offset_base_and_span_bound_the_offsets(tmp_path, data_file):
    _, ops, _ = workload(tmp_path, "--file", data_file, "--file-layout", "seq", "--offset-base", 2 * SIZE,
                         "--file-span", 4 * SIZE + 100, "--repeats", 10)
    assert ops["offset"].tolist() == [2 * SIZE + (i % 4) * SIZE for i in range(10)]


def test_default_span_is_the_rest_of_the_file_after_the_base(tmp_path, data_file):
    facts, ops, _ = workload(tmp_path, "--file", data_file, "--file-layout", "reverse",
                             "--offset-base", SPAN - 3 * SIZE, "--repeats", 3)
    assert facts["file_span"] == str(3 * SIZE)
    assert ops["offset"].tolist() == [SPAN - SIZE, SPAN - 2 * SIZE, SPAN - 3 * SIZE]


def random_offsets(tmp_path, path, seed, mem_layout="off0"):
    _, ops, _ = workload(tmp_path, "--file", path, "--file-layout", "rnd", "--seed", seed, "--repeats", 200,
                         "--mem-layout", mem_layout)
    return ops["offset"]


def test_random_file_offsets_are_reproducible_aligned_and_within_the_span(tmp_path):
    path = (tmp_path / "big").resolve()
    with open(path, "wb") as f:
        f.truncate(MIB)                    # 256 slots
    first = random_offsets(tmp_path, path, 7)
    assert len(first) == 200
    assert np.array_equal(first, random_offsets(tmp_path, path, 7))
    assert not np.array_equal(first, random_offsets(tmp_path, path, 8))
    assert np.all(first % SIZE == 0) and first.min() >= 0 and first.max() <= MIB - SIZE
    assert len(set(first.tolist())) > 100 and not np.all(np.diff(first) > 0)
    # the memory layout draws from its own stream: it does not move the file offsets
    assert np.array_equal(first, random_offsets(tmp_path, path, 7, mem_layout="rnd"))


def test_random_file_offsets_visit_every_slot_once_per_pass(tmp_path):
    # an uncached run must not re-read a slot it has just cached: no repeat within a pass
    path = (tmp_path / "small").resolve()
    with open(path, "wb") as f:
        f.truncate(100 * SIZE)               # 100 slots, not a power of two
    _, ops, _ = workload(tmp_path, "--file", path, "--file-layout", "rnd", "--seed", 3, "--repeats", 250)
    slots = ops["offset"] // SIZE
    first_pass, second_pass, third_pass = slots[:100], slots[100:200], slots[200:]
    assert sorted(first_pass.tolist()) == sorted(second_pass.tolist()) == list(range(100))
    assert not np.array_equal(first_pass, second_pass)
    assert len(set(third_pass.tolist())) == 50


# ---------------------------------------------------------------------------------------------
# memory layouts


@pytest.mark.parametrize("layout, stride, step", [
    ("off0", 0, 1),
    ("seq", 0, 1),
    ("reverse", 0, 1),
    ("stride", 8 * KIB, 3),
])
def test_memory_layout_buffer_addresses(tmp_path, data_file, layout, stride, step):
    n = 40
    facts, ops, _ = workload(tmp_path, "--file", data_file, "--mem-layout", layout, "--stride", stride,
                             "--repeats", n)
    positions = buffer_positions(facts, ops)
    assert positions.tolist() == (expected_slots(layout, n, MEM_BUFFER // SIZE, step) * SIZE).tolist()
    steps = set(np.diff(positions).tolist())
    wrap = MEM_BUFFER - SIZE
    assert steps <= {"off0": {0}, "seq": {SIZE, -wrap}, "reverse": {-SIZE, wrap},
                     "stride": {step * SIZE, step * SIZE - MEM_BUFFER}}[layout]
    assert ops["offset"].tolist() == [0] * n          # file layout off0


def test_random_memory_positions_are_aligned_within_the_buffer_and_reproducible(tmp_path, data_file):
    def positions(seed):
        facts, ops, _ = workload(tmp_path, "--file", data_file, "--mem-layout", "rnd", "--mem-buffer", MIB,
                                 "--seed", seed, "--repeats", 200)
        return buffer_positions(facts, ops)
    first = positions(3)
    assert np.all(first % SIZE == 0) and first.min() >= 0 and first.max() <= MIB - SIZE
    assert len(set(first.tolist())) > 100
    assert np.array_equal(first, positions(3))
    assert not np.array_equal(first, positions(4))


def test_buffer_is_page_aligned_and_sized_as_asked(tmp_path, data_file):
    facts, _, _ = workload(tmp_path, "--file", data_file, "--repeats", 1, "--mem-buffer", 3 * MIB)
    assert int(facts["buffer_address"], 16) % 4096 == 0 and facts["mem_buffer"] == str(3 * MIB)
    facts, _, _ = workload(tmp_path, "--file", data_file, "--repeats", 1, "--size", MIB, "--mem-buffer", MIB)
    assert facts["mem_buffer"] == str(MIB)


def test_mem_offset_moves_every_op_off_the_cache_line(tmp_path, data_file):
    facts, ops, _ = workload(tmp_path, "--file", data_file, "--mem-layout", "rnd", "--mem-offset", 16,
                             "--repeats", 40)
    assert int(facts["buffer_address"], 16) % 4096 == 16 and facts["mem_offset"] == "16"
    assert np.all(ops["buffer"] % 64 == 16)
    workload(tmp_path, "--file", data_file, "--mem-offset", 4096, expect_status=2)


# ---------------------------------------------------------------------------------------------
# op count, op kinds, devices


@pytest.mark.parametrize("repeats, budget, ops", [
    (5, "1g", 5),                         # repeats bind
    (100, 3 * SIZE + 1, 3),               # the budget binds, rounded down
    (100, 0, 1),                          # at least one op
    (7, 7 * SIZE, 7),
])
def test_op_count_obeys_repeats_and_budget(tmp_path, data_file, repeats, budget, ops):
    facts, recorded, _ = workload(tmp_path, "--file", data_file, "--file-layout", "seq", "--repeats", repeats,
                                  "--budget", budget)
    assert facts["ops"] == str(ops) and len(recorded["op"]) == ops


def test_write_ops_are_pwrites_of_non_zero_data_and_nothing_else(tmp_path):
    path = (tmp_path / "zeros").resolve()
    path.write_bytes(bytes(SPAN))
    facts, ops, _ = workload(tmp_path, "--file", path, "--op", "write", "--file-layout", "seq", "--repeats", 16)
    assert kinds(ops) == ["pwrite"] * 16
    assert ops["offset"].tolist() == [i * SIZE for i in range(16)]
    assert ops["result"].tolist() == [SIZE] * 16 and facts["op"] == "write"
    data = path.read_bytes()
    assert len(data) == SPAN
    assert all(any(data[i:i + SIZE]) for i in range(0, SPAN, SIZE))


def test_read_ops_are_preads_and_nothing_else(tmp_path, data_file):
    _, ops, _ = workload(tmp_path, "--file", data_file, "--file-layout", "rnd", "--repeats", 30)
    assert kinds(ops) == ["pread"] * 30


def test_fsync_end_adds_one_fsync_after_the_writes(tmp_path, data_file):
    facts, ops, _ = workload(tmp_path, "--file", data_file, "--op", "write", "--file-layout", "seq", "--repeats", 4,
                             "--fsync-end")
    assert kinds(ops) == ["pwrite"] * 4 + ["fsync"]
    assert facts["fsync_end"] == "1" and float(facts["fsync_s"]) > 0


def test_create_starts_an_empty_file_of_the_span(tmp_path, data_file):
    facts, ops, _ = workload(tmp_path, "--file", data_file, "--op", "write", "--create", "--file-layout", "seq",
                             "--file-span", 8 * SIZE, "--repeats", 8)
    assert kinds(ops) == ["pwrite"] * 8 and facts["create"] == "1"
    assert data_file.stat().st_size == 8 * SIZE


@pytest.mark.parametrize("device, op, kind", [("/dev/zero", "read", "pread"), ("/dev/null", "write", "pwrite")])
def test_discard_devices(tmp_path, device, op, kind):
    facts, ops, _ = workload(tmp_path, "--file", device, "--op", op, "--size", MIB, "--mem-buffer", 4 * MIB,
                             "--mem-layout", "seq", "--file-layout", "rnd", "--repeats", 6)
    assert kinds(ops) == [kind] * 6
    assert ops["result"].tolist() == [MIB] * 6 and facts["bytes"] == str(6 * MIB)
    assert facts["file_span"] == "0"
    # The workload passes offset 0; the recorder stores -1 (unknown) for character devices.
    assert set(ops["offset"].tolist()) <= {0, -1}
    assert buffer_positions(facts, ops).tolist() == [(i % 4) * MIB for i in range(6)]


# ---------------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize("args", [
    ["--size", "4k"],                                        # no --file
    ["--file", "/dev/zero", "--op", "append"],
    ["--file", "/dev/zero", "--size", "0"],
    ["--file", "/dev/zero", "--size", "12q"],
    ["--file", "/dev/zero", "--mem-layout", "diagonal"],
    ["--file", "/dev/zero", "--repeats", "0"],
    ["--file", "/dev/zero", "--size", "8k", "--mem-buffer", "4k"],
    ["--file", "/dev/zero", "--create"],                     # --create is for writes
    ["--file", "/dev/null", "--op", "write", "--create", "--file-layout", "seq"],   # no span
    ["--file", "/dev/zero", "--no-such-option"],
    ["--file", "/dev/zero", "--size"],
    ["--file", "/dev/zero", "extra"],
    ["--resident", "/dev/zero", "--size", "4k"],
    ["--resident", "/dev/zero"],                              # not a regular file
])
def test_bad_options_exit_2_with_one_line(tmp_path, args):
    result = run([WORKLOAD, *args])
    assert result.returncode == 2, describe(result)
    assert result.stdout == b"" and len(result.stderr.decode().strip().splitlines()) == 1


def test_span_smaller_than_size_is_a_bad_option(tmp_path, data_file):
    result = run([WORKLOAD, "--file", data_file, "--file-layout", "seq", "--size", 2 * SPAN, "--mem-buffer", 2 * SPAN])
    assert result.returncode == 2 and b"--file-span" in result.stderr, describe(result)


@pytest.mark.parametrize("target, errno_number", [("missing", 2), ("dir", 21)])
def test_io_errors_exit_1_naming_the_file_and_errno(tmp_path, target, errno_number):
    path = tmp_path / target
    if target == "dir":
        path.mkdir()                       # opens, but pread fails with EISDIR
    result = run([WORKLOAD, "--file", path, "--mem-buffer", MEM_BUFFER])
    assert result.returncode == 1, describe(result)
    message = result.stderr.decode().strip()
    assert len(message.splitlines()) == 1 and str(path) in message and f"(errno {errno_number})" in message


# ---------------------------------------------------------------------------------------------
# residency probes


def probe(mode, path):
    result = run([WORKLOAD, f"--{mode}", path])
    assert result.returncode == 0, describe(result)
    facts = facts_of(result.stdout)
    assert facts["file"] == str(path)
    return float(facts["resident_fraction"]), int(facts["pages"])


def file_system_type(path):
    return subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True).stdout.strip()


def test_residency_after_reading_and_after_evict(tmp_path):
    path = (tmp_path / "cache-state").resolve()
    path.write_bytes(os.urandom(4 * MIB))          # dirty in the page cache: --evict writes back first
    fs = file_system_type(path)
    evicted, pages = probe("evict", path)
    assert pages == 4 * MIB // os.sysconf("SC_PAGE_SIZE")
    assert evicted <= 0.01, f"{fs}: {evicted:.3f} of the file still resident after --evict"
    assert probe("resident", path)[0] <= 0.01
    run_read = run([WORKLOAD, "--file", path, "--size", MIB, "--mem-buffer", MIB, "--file-layout", "seq",
                    "--repeats", 4])
    assert run_read.returncode == 0, describe(run_read)
    assert probe("resident", path)[0] >= 0.99, f"{fs}: file not resident after reading it fully"
    assert probe("evict", path)[0] <= 0.01, f"{fs}: file still resident after a second --evict"


def test_residency_of_an_empty_file_is_undefined(tmp_path):
    path = (tmp_path / "empty").resolve()
    path.touch()
    fraction, pages = probe("resident", path)
    assert pages == 0 and math.isnan(fraction)
