"""Seconds at stake in wall-clock time (report/stakes.py, docs/assessment.md "Seconds at stake in
wall-clock time") on the MPI jobs of tests/progs/mpi_stakes.c, each run once under `ioassess
run` with two ranks: one rank doing all the I/O, balanced ranks, and ranks waiting in a blocking
collective read after their computation. What is checked does not depend on the machine's speed:
which finding fires, the ranks it names, its stake against the run time and its process-seconds,
and the stake recomputed from the traces by the model's definition. What the fixed twins
actually save is measured by bench/validate_stakes.py (make validate), not here."""
import json
import shutil

import numpy as np
import pytest

from ioassess import OP_DIRECTION, read_trace_dir
from ioassess.inputs.traceformat import OP_LAYER
from recorder_helpers import prog

pytestmark = pytest.mark.mpi

RANKS = 2
BLOCK = 4096                  # as in tests/progs/mpi_stakes.c
BLOCKS = 8000                 # the input's blocks: 32 MB
STRAGGLERS = "Some ranks spent far longer in I/O than the others"


def run_job(ioassess, tmp_path, mode, work=0):
    """mpi_stakes MODE under `ioassess run` with RANKS ranks on an input written and synced
    here: its assessment and its traces."""
    data = tmp_path / "data"
    data.mkdir()
    with open(data / "input", "wb") as f:
        f.write(np.random.default_rng(1).integers(0, 256, BLOCKS * BLOCK, np.uint8).tobytes())
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", shutil.which("mpiexec"), "-n", str(RANKS),
                      prog("mpi_stakes"), mode, data, BLOCKS, work)
    assert result.returncode == 0, result.stderr
    assert f"rank 0: {mode} ok" in result.stdout
    with open(tmp_path / "t" / "assessment.json") as f:
        return json.load(f), read_trace_dir(tmp_path / "t")


def ops_of(traces):
    """The traces' ops as arrays: rank, layer and direction names, start and duration in s (from
    the first op), and which are I/O as the ledger counts it (POSIX and stdio, not metadata)."""
    ops = traces.ops
    layer = np.array([OP_LAYER[int(op)] for op in ops["op"]])
    direction = np.array([OP_DIRECTION[int(op)] for op in ops["op"]])
    rank = np.array([traces.processes[p].rank for p in ops["process"]], np.int64)
    start = (ops["start_ns"] - ops["start_ns"].min()) / 1e9
    io = np.isin(layer, ("posix", "stdio")) & (direction != "meta")
    return rank, layer, direction, start, ops["duration_ns"] / 1e9, io


def io_per_rank(traces):
    rank, _, _, _, duration, io = ops_of(traces)
    ranked = io & (rank >= 0)
    return np.bincount(rank[ranked], duration[ranked], RANKS)


def in_wall_clock(found, runtime_s):
    """What every finding's stake holds: at most the run time and its process-seconds; each
    named rank at most the stake."""
    stake = found["at_stake_s"]
    if stake is None:
        return
    assert 0 <= stake <= runtime_s and stake <= found["rank_seconds"] + 1e-9, found
    assert all(r["seconds"] is None or r["seconds"] <= stake + 1e-9 for r in found["ranks"]), found


def test_one_rank_doing_all_the_io_is_a_straggler_finding_worth_its_excess_over_the_mean(ioassess, tmp_path):
    """Rank 0 reads every block, rank 1 none: the straggler finding names rank 0 alone, and its
    stake is rank 0's I/O time less the mean rank's, from the traces."""
    assessment, traces = run_job(ioassess, tmp_path, "alone")
    runtime = assessment["job"]["runtime_s"]
    io_s = io_per_rank(traces)
    (found,) = [r for r in assessment["recommendations"] if r["title"] == STRAGGLERS]
    assert [r["rank"] for r in found["ranks"]] == [0]
    assert found["at_stake_s"] == pytest.approx(io_s[0] - io_s.mean(), abs=1e-6)
    assert found["numbers"]["slowest_bytes"] == BLOCKS * BLOCK and "split unevenly" in found["text"]
    for f in assessment["recommendations"]:
        in_wall_clock(f, runtime)


def test_balanced_ranks_have_no_imbalance_finding_of_bytes_and_small_stakes(ioassess, tmp_path):
    """Each rank reads half the blocks: no finding about unequal bytes (P18, P21, P22); a
    straggler finding (a rank stalled on a loaded machine) only says the work is even; every
    stake within the run time and its process-seconds."""
    assessment, traces = run_job(ioassess, tmp_path, "split")
    runtime = assessment["job"]["runtime_s"]
    codes = {r["code"] for r in assessment["recommendations"]}
    assert not codes & {"P18", "P21", "P22"}
    for found in assessment["recommendations"]:
        in_wall_clock(found, runtime)
        if found["title"] == STRAGGLERS:
            io_s = io_per_rank(traces)
            assert found["at_stake_s"] == pytest.approx(io_s.max() - io_s.mean(), abs=1e-6)
            assert "moved no more data" in found["text"]


def test_ranks_waiting_in_a_blocking_collective_read_are_m06_worth_the_io_inside_it(ioassess, tmp_path):
    """The ranks compute, then read with MPI_File_read_all: M06 names both ranks; its stake is
    the largest rank's POSIX read time inside its MPI_File_read_all (not the call's wait for
    the other rank), at most the mean rank's time outside I/O."""
    assessment, traces = run_job(ioassess, tmp_path, "blocking", work=20)
    runtime, nprocs = assessment["job"]["runtime_s"], assessment["job"]["nprocs"]
    found = {r["code"]: r for r in assessment["recommendations"] if r["code"]}
    assert "M06" in found and "M07" not in found
    m06 = found["M06"]
    assert sorted(r["rank"] for r in m06["ranks"]) == list(range(RANKS))
    in_wall_clock(m06, runtime)
    rank, layer, direction, start, duration, io = ops_of(traces)
    inside = np.zeros(RANKS)
    for call in np.flatnonzero((layer == "mpiio") & (direction == "read")):
        under = (rank == rank[call]) & (layer == "posix") & (direction != "meta") & \
            (start >= start[call]) & (start <= start[call] + duration[call])
        inside[rank[call]] += min(duration[under].sum(), duration[call])
    assert (inside > 0).all()
    outside = max(nprocs * runtime - duration[io].sum(), 0.0)
    assert m06["at_stake_s"] <= outside / nprocs + 1e-9
    assert m06["at_stake_s"] == pytest.approx(min(inside.max(), outside / nprocs), abs=1e-6)
