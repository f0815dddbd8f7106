"""The per-op passes (report/passes.py): a job assessed in chunks of 1,000 ops, and by two
workers in runs of processes merged, gives what one chunk gives, field by field."""
import math
import os
import shutil
import sys

import numpy as np
import pytest

from recorder_helpers import shipped_darshan_logs
from ioassess.report import assess, load_and_choose
from ioassess.report.passes import Carried, Chunk, Sample, Sums

PROGS = os.path.join(os.path.dirname(__file__), "progs", "bin")
SMALL_CHUNK = 1000
# Two processes of two threads each, writing small records to files of their own and to one
# file of both, syncing now and then, and reading their files back.
WRITES_AND_SYNCS = """
import os, sys, threading
root = sys.argv[1]
def work(name, syncs_every):
    fd = os.open(os.path.join(root, name), os.O_CREAT | os.O_RDWR, 0o600)
    shared = os.open(os.path.join(root, "shared"), os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)
    for i in range(1500):
        os.write(fd, b"x" * (100 + i % 700))
        os.write(shared, b"y" * 64)
        if i % syncs_every == 0:
            os.fsync(fd)
    os.lseek(fd, 0, 0)
    while os.read(fd, 4096):
        pass
    os.close(fd)
    os.close(shared)
pid = os.fork()
threads = [threading.Thread(target=work, args=(f"{pid}-{t}", 37 + 20 * t)) for t in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
if pid:
    os.waitpid(pid, 0)
"""

# Two processes looking the same files up again and again (stat, access, open, opendir), and
# paths that do not exist: metadata calls over many chunks, each file's first lookup in either.
LOOKUPS = """
import os, sys
root = sys.argv[1]
pid = os.fork()
names = [os.path.join(root, f"lookup-{i}") for i in range(50)]
for name in names:
    open(name, "a").close()
for _ in range(20):
    for name in names:
        os.stat(name)
        os.access(name, os.R_OK)
        os.path.exists(name + ".missing")
    os.listdir(root)
if pid:
    os.waitpid(pid, 0)
"""

# Two processes reading one file through twice, opening it again for the second time (where
# Darshan's sequential counts start over), and rewriting parts of files of their own: bytes read
# again by each process and by both, written again by each.
REREADS = """
import os, sys
root = sys.argv[1]
pid = os.fork()
for rep in range(2):
    fd = os.open(os.path.join(root, "data"), os.O_RDONLY)
    while os.read(fd, 1024 + 512 * rep):
        pass
    os.close(fd)
out = os.open(os.path.join(root, f"rewritten-{pid}"), os.O_CREAT | os.O_WRONLY, 0o600)
for i in range(1500):
    os.pwrite(out, b"z" * 1000, i * 7919 % 500000)
os.close(out)
if pid:
    os.waitpid(pid, 0)
"""


def differences(a, b, path="", rtol=1e-9):
    """The paths where a and b differ: floats beyond rtol (sums taken in another order), anything
    else at all."""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{path}: keys {sorted(set(a) ^ set(b))}"]
        return [d for k in a for d in differences(a[k], b[k], f"{path}/{k}", rtol)]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items against {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]", rtol)]
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            return [f"{path}: {a.dtype}{a.shape} against {b.dtype}{b.shape}"]
        if a.dtype.kind == "f":
            return [] if np.allclose(a, b, rtol=rtol, atol=0, equal_nan=True) else [f"{path}: arrays differ"]
        return [] if np.array_equal(a, b) else [f"{path}: arrays differ"]
    if isinstance(a, float) and isinstance(b, float):
        same = a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= rtol * max(abs(a), abs(b))
        return [] if same else [f"{path}: {a!r} against {b!r}"]
    return [] if type(a) is type(b) and a == b else [f"{path}: {a!r} against {b!r}"]


@pytest.fixture(scope="module")
def recorded_jobs(tmp_path_factory, recorder_lib):
    """Jobs of real programs under the recorder: every kind of call, several processes and
    threads, syncs between writes, random reads with the page cache sampled, lookups of files
    and missing paths, files read and written again."""
    import subprocess
    from ioassess.site.training import workload_program_path
    root = tmp_path_factory.mktemp("recorded")
    data = root / "data"
    data.write_bytes(os.urandom(1 << 20))
    programs = {
        "allops": [os.path.join(PROGS, "allops"), str(root)],
        "forkthreads": [os.path.join(PROGS, "forkthreads"), str(root), "8"],
        "workload": [workload_program_path(), "--file", str(data), "--file-layout", "rnd", "--size", "4096",
                     "--repeats", "6000", "--mem-buffer", "1m"],
        "syncs": [sys.executable, "-c", WRITES_AND_SYNCS, str(root)],
        "lookups": [sys.executable, "-c", LOOKUPS, str(root)],
        "rereads": [sys.executable, "-c", REREADS, str(root)],
    }
    jobs = {}
    for name, command in programs.items():
        traces = root / f"traces-{name}"
        traces.mkdir(mode=0o700)
        env = {k: v for k, v in os.environ.items() if not k.startswith("IOASSESS_") and k != "LD_PRELOAD"}
        env.update(LD_PRELOAD=recorder_lib, IOASSESS_TRACE_DIR=str(traces), IOASSESS_EXCLUDE="none")
        done = subprocess.run(command, env=env, cwd=root, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (name, done.stderr)
        jobs[name] = str(traces)
    yield jobs
    shutil.rmtree(root, ignore_errors=True)


def _inputs(recorded_jobs):
    return [(name, [path]) for name, path in recorded_jobs.items()] + \
        [(os.path.basename(log), [log]) for log in shipped_darshan_logs() if "dxt" in os.path.basename(log)]


def test_a_job_assessed_in_chunks_of_1000_ops_equals_it_assessed_in_one(recorded_jobs):
    compared = 0
    for name, inputs in _inputs(recorded_jobs):
        job, model, path, choice = load_and_choose(inputs)
        n = len(job.ops["size"])
        whole = assess(job, model, path, None, choice, chunk_ops=max(n, 1), workers=1)
        chunked = assess(job, model, path, None, choice, chunk_ops=SMALL_CHUNK, workers=1)
        found = differences(whole, chunked)
        assert not found, (name, found[:10])
        compared += n > 3 * SMALL_CHUNK
    assert compared >= 4    # jobs of several chunks each


def test_a_job_assessed_by_two_workers_in_runs_of_processes_equals_it_assessed_in_one_run(recorded_jobs):
    compared = 0
    for name, inputs in _inputs(recorded_jobs):
        job, model, path, choice = load_and_choose(inputs)
        one = assess(job, model, path, None, choice, workers=1)
        two = assess(job, model, path, None, choice, chunk_ops=SMALL_CHUNK, workers=2)
        found = differences(one, two)
        assert not found, (name, found[:10])
        compared += len(job.processes) > 1
    assert compared >= 2    # jobs of several processes, split into runs


def test_traces_scanned_by_two_workers_give_the_job_one_scan_gives(recorded_jobs, tmp_path, monkeypatch):
    """Big trace sets are scanned file by file in parallel (trace.PARALLEL_SCAN_BYTES): the same
    job, the same notes and the same error for a damaged file among them."""
    from ioassess.inputs import trace
    traces = tmp_path / "traces"
    shutil.copytree(recorded_jobs["forkthreads"], traces)
    names = sorted(os.listdir(traces))
    damaged = traces / names[0]
    damaged.write_bytes(b"junk" + damaged.read_bytes()[4:])
    scans = {}
    for workers in (1, 2):
        monkeypatch.setattr(trace, "PARALLEL_SCAN_BYTES", 0)
        monkeypatch.setattr(trace, "workers_here", lambda: workers)
        job, model, path, choice = load_and_choose([str(traces)])
        scans[workers] = (job.notes, [vars(process) for process in job.processes], [vars(f) for f in job.files],
                          assess(job, model, path, None, choice, workers=1))
    assert len(names) >= 3 and any(f"{damaged}: not an ioassess trace" in note for note in scans[1][0]), scans[1][0]
    found = differences(scans[1], scans[2])
    assert not found, found[:10]


def test_a_sample_is_the_same_whatever_the_chunks_and_uniform():
    index = np.arange(200_000)
    whole = Sample(5000, {"value": np.int64})
    whole.add(Chunk({"size": index}, {}, 0), index, {"value": index * 3})
    pieces = Sample(5000, {"value": np.int64})
    for first in range(0, len(index), 777):
        part = index[first:first + 777]
        pieces.add(Chunk({"size": part}, {}, first), np.ones(len(part), bool), {"value": part * 3})
    assert np.array_equal(whole.values()["value"], pieces.values()["value"])
    sampled = whole.values()["value"] // 3
    assert len(sampled) == 5000 and whole.offered == len(index)
    assert np.all(np.diff(sampled) > 0)     # in op order, each op once
    # uniform: each tenth of the ops holds about a tenth of the sample (binomial sd about 21)
    counts = np.bincount(sampled // 20_000, minlength=10)
    assert np.all(np.abs(counts - 500) < 120), counts
    small = Sample(5000, {"value": np.int64})
    small.add(Chunk({"size": index[:300]}, {}, 0), np.arange(300), {"value": index[:300]})
    assert np.array_equal(small.values()["value"], index[:300])     # at most the limit: every op


def test_sums_and_carried_values_merge_as_one_table():
    sums, other = Sums(("x",), 1 << 30), Sums(("x",), 1 << 30)
    sums.add(np.array([5, 1 << 29, 5]), {"x": np.array([1.0, 2.0, 3.0])})
    other.add(np.array([7, 5]), {"x": 10.0})
    sums.merge(other)
    assert sums.keys.tolist() == [5, 7, 1 << 29] and sums.sums["x"].tolist() == [14.0, 10.0, 2.0]
    carried = Carried(np.int64)
    carried.set([3, 9], [30, 90])
    carried.set([9, 4], [91, 40])
    assert carried.get(np.array([3, 4, 9, 10]), -1).tolist() == [30, 40, 91, -1]
