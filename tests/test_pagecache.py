"""Page-cache samples: the recorder asks the kernel (cachestat) for the state of a sampled op's
pages just before the call. Each test puts a file's pages into a known state and checks that
state independently (mincore on a mapping of the file) before a real program does its I/O
under the recorder; the samples in the trace must say the same. A kernel that refuses
cachestat is made with a seccomp filter (tests/progs/refuse.c)."""
import errno
import mmap
import os
import re
import subprocess

import numpy as np
import pytest

from ioassess.inputs.load import load_job
from ioassess.site.training import workload_program_path
from recorder_helpers import SYS_CACHESTAT, assert_same_run, describe, load, prog, run, select

PAGE = mmap.PAGESIZE
FIRST_OPS_SAMPLED = 4       # the recorder samples the first 4 ops of each open file
MEAN_GAP = 512              # then one op in 512 per thread on average

def resident_pages(path, evict=False):
    """How many of the file's pages are in the page cache, by mincore(2) on a fresh mapping
    (the workload generator's --resident); evict: after dropping them first (--evict: its
    dirty pages written back, then POSIX_FADV_DONTNEED, as the file's owner may)."""
    out = subprocess.run([workload_program_path(), "--evict" if evict else "--resident", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return int(re.search(r"resident_pages=(\d+)", out).group(1))


def make_file(path, size):
    with open(path, "wb") as f:
        f.write(os.urandom(size))
        f.flush()
        os.fsync(f.fileno())


def cache_fully(path):
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass
    assert resident_pages(path) == -(-os.path.getsize(path) // PAGE)


def sampled(ts, path, op):
    """The sampled ops of one kind on path: {column: values}."""
    mask = select(ts, path=path, op=op) & (ts.ops["pc_pages"] >= 0)
    return {name: column[mask] for name, column in ts.ops.items()}


def recorded_ops(tmp_path, recorder_lib, *args, env=None):
    result = run([prog("pagecache"), *args], preload=[recorder_lib], trace_dir=tmp_path / "traces", env=env)
    assert result.returncode == 0, describe(result)
    return load(tmp_path / "traces")


def reads_of_a_cached_file(tmp_path, recorder_lib, mode, count):
    """A 1 MiB file read whole into the page cache, then `count` 64 KiB reads of it (pagecache
    MODE) under the recorder: (the file, the trace set)."""
    data = tmp_path / "data"
    make_file(data, 1 << 20)
    cache_fully(data)
    return data, recorded_ops(tmp_path, recorder_lib, mode, data, 64 << 10, count, 64 << 10)


def test_reads_of_cached_pages_are_all_cached_and_large_ones_ask_first_and_last_pages(tmp_path, recorder_lib):
    data, ts = reads_of_a_cached_file(tmp_path, recorder_lib, "read", 16)
    ops = sampled(ts, data, "pread")
    assert len(ops["op"]) >= FIRST_OPS_SAMPLED
    # 16 pages per op: the first two and the last two are asked about
    assert set(ops["pc_pages"].tolist()) == {4} and set(ops["pc_whole"].tolist()) == {0}
    assert np.array_equal(ops["pc_cached"], ops["pc_pages"])
    assert set(ops["pc_dirty"].tolist()) == {0} and set(ops["pc_new_pages"].tolist()) == {-1}
    assert ts.processes[0].pagecache == "on" and ts.processes[0].pagecache_ignored == 0


def test_reads_after_dontneed_find_nothing_cached(tmp_path, recorder_lib):
    data = tmp_path / "data"
    make_file(data, 8 << 20)
    assert resident_pages(data, evict=True) == 0
    # one page every MiB: read-ahead (at most 128 KiB here) never reaches the next op's page
    ts = recorded_ops(tmp_path, recorder_lib, "read", data, PAGE, 8, 1 << 20)
    ops = sampled(ts, data, "pread")
    assert len(ops["op"]) >= FIRST_OPS_SAMPLED
    assert set(ops["pc_pages"].tolist()) == {1} and set(ops["pc_whole"].tolist()) == {1}
    assert set(ops["pc_cached"].tolist()) == {0}


def test_a_buffer_not_yet_in_memory_is_told_from_one_that_is(tmp_path, recorder_lib):
    """Reads into fresh anonymous memory (the call faults it in, page by page) and into the same
    memory again: the samples say which buffer was in memory before the call."""
    data, ts = reads_of_a_cached_file(tmp_path, recorder_lib, "read-fresh", 8)
    ops = sampled(ts, data, "pread")
    assert len(ops["op"]) >= FIRST_OPS_SAMPLED
    first = ops["offset"] // (64 << 10)
    assert np.array_equal(ops["pc_buffer_faulted"], np.where(first % 2 == 0, 1, 0)), ops["pc_buffer_faulted"]
    # pages that map the zero page (read, never written) are in memory to mincore
    (tmp_path / "traces").rename(tmp_path / "fresh-traces")
    ts = recorded_ops(tmp_path, recorder_lib, "read-zero", data, 64 << 10, 8, 64 << 10)
    assert set(sampled(ts, data, "pread")["pc_buffer_faulted"].tolist()) == {0}


def test_vector_reads_ask_their_first_page(tmp_path, recorder_lib):
    data = tmp_path / "data"
    make_file(data, 1 << 20)
    cache_fully(data)
    ts = recorded_ops(tmp_path, recorder_lib, "readv", data, 3 * PAGE, 8, 3 * PAGE)
    ops = sampled(ts, data, "preadv")
    assert len(ops["op"]) >= FIRST_OPS_SAMPLED
    assert set(ops["pc_pages"].tolist()) == {1} and set(ops["pc_whole"].tolist()) == {0}
    assert set(ops["pc_cached"].tolist()) == {1}
    # a vector's buffers cannot be read before the call: not asked
    assert set(ops["pc_buffer_faulted"].tolist()) == {-1}


def test_appends_find_no_pages_and_overwrites_of_dirty_pages_find_them_dirty(tmp_path, recorder_lib):
    data = tmp_path / "data"
    ts = recorded_ops(tmp_path, recorder_lib, "append", data, PAGE, 64, 0)
    appends = sampled(ts, data, "write")
    assert len(appends["op"]) >= FIRST_OPS_SAMPLED
    assert set(appends["pc_cached"].tolist()) == {0}
    assert np.array_equal(appends["pc_new_pages"], appends["pc_pages"])   # every page past the end

    (tmp_path / "traces").rename(tmp_path / "append-traces")
    # the file was written a moment ago and not synced: its pages are cached and dirty
    assert resident_pages(data) == 64
    ts = recorded_ops(tmp_path, recorder_lib, "overwrite", data, PAGE, 64, PAGE)
    overwrites = sampled(ts, data, "pwrite")
    assert len(overwrites["op"]) >= FIRST_OPS_SAMPLED
    assert np.array_equal(overwrites["pc_cached"], overwrites["pc_pages"])
    assert np.all(overwrites["pc_dirty"] > 0)
    assert set(overwrites["pc_new_pages"].tolist()) == {0}


def test_a_partial_page_past_the_end_is_new_and_one_inside_is_not(tmp_path, recorder_lib):
    data = tmp_path / "data"
    # 1000-byte appends: the first write's page is new, the next ones start inside the
    # file's last (cached) page and may reach into a new one
    ts = recorded_ops(tmp_path, recorder_lib, "append", data, 1000, 4, 0)
    ops = sampled(ts, data, "write")
    assert ops["offset"].tolist() == [0, 1000, 2000, 3000]
    assert ops["pc_pages"].tolist() == [1, 1, 1, 1]
    assert ops["pc_new_pages"].tolist() == [1, 0, 0, 0]
    assert ops["pc_cached"].tolist() == [0, 1, 1, 1]


def test_sampling_takes_the_first_ops_then_about_one_in_512(tmp_path, recorder_lib):
    data = tmp_path / "data"
    make_file(data, PAGE)
    calls = 40_000
    ts = recorded_ops(tmp_path, recorder_lib, "read", data, 1, calls, 0)
    process = ts.processes[0]
    ops = sampled(ts, data, "pread")
    assert process.pagecache_samples == len(ops["op"])
    expected = FIRST_OPS_SAMPLED + calls / MEAN_GAP
    assert 0.6 * expected < len(ops["op"]) < 1.4 * expected, len(ops["op"])
    order = np.flatnonzero(select(ts, path=data, op="pread"))
    positions = np.flatnonzero(ts.ops["pc_pages"][order] >= 0)
    assert positions[:FIRST_OPS_SAMPLED].tolist() == list(range(FIRST_OPS_SAMPLED))
    assert positions[-1] > calls * 0.9       # spread over the whole run, not bunched at its start


def test_turned_off_by_the_environment(tmp_path, recorder_lib):
    data = tmp_path / "data"
    make_file(data, 1 << 20)
    ts = recorded_ops(tmp_path, recorder_lib, "read", data, PAGE, 16, PAGE, env={"IOASSESS_PAGECACHE": "0"})
    assert ts.processes[0].pagecache == "off" and ts.processes[0].pagecache_samples == 0
    assert np.all(ts.ops["pc_pages"] == -1) and len(ts.ops["op"]) == 16


def test_errno_is_what_the_application_would_see(tmp_path, recorder_lib):
    data = tmp_path / "data"
    make_file(data, PAGE)
    plain = run([prog("pagecache"), "errno", data, 0, 0, 0])
    recorded = run([prog("pagecache"), "errno", data, 0, 0, 0], preload=[recorder_lib],
                   trace_dir=tmp_path / "traces")
    assert_same_run(plain, recorded)
    assert plain.stdout.decode().splitlines() == [f"read_wronly -1 errno {errno.EBADF}", "pread_ok 16 errno 4242",
                                                  "write_ok 16 errno 4242"]
    ts = load(tmp_path / "traces")
    for op, result in (("read", -errno.EBADF), ("pread", 16), ("write", 16)):
        ops = sampled(ts, data, op)
        assert ops["result"].tolist() == [result] and ops["pc_pages"].tolist() == [1], op


@pytest.mark.parametrize("refusal", [errno.ENOSYS, errno.EPERM])
def test_a_kernel_that_refuses_cachestat_gives_no_samples_and_a_flag(tmp_path, recorder_lib, refusal):
    data = tmp_path / "data"
    make_file(data, 1 << 20)
    for mode in ("errno", "read"):
        command = [prog("refuse"), SYS_CACHESTAT, refusal, prog("pagecache"), mode, data, PAGE, 16, PAGE]
        plain = run(command)
        recorded = run(command, preload=[recorder_lib], trace_dir=tmp_path / mode)
        assert_same_run(plain, recorded)
        ts = load(tmp_path / mode)
        (process,) = [p for p in ts.processes if p.exe == prog("pagecache")]
        assert process.pagecache == "unavailable" and process.pagecache_samples == 0
        assert len(ts.ops["op"]) > 0 and np.all(ts.ops["pc_pages"] == -1)
    job = load_job([str(tmp_path / "read")])
    assert [p.pagecache for p in job.processes if p.exe == prog("pagecache")] == ["unavailable"]
    assert any(note.startswith("the kernel refused cachestat(2) in 1 of") for note in job.notes)
