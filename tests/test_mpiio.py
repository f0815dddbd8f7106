"""The MPI-IO recorder (libioassess-mpiio.so) on real MPICH jobs (tests/progs/mpi_collective.c):
MPI-IO calls are recorded with their kind, flags, bytes and byte offsets into the same trace as
the POSIX calls; POSIX calls made inside collective MPI-IO calls are marked, so the assessment
names the aggregators (ROMIO hints force collective buffering through 2 of 4 ranks); the
report shows both layers. A non-MPI program behaves exactly as without the library, also with
LD_BIND_NOW=1, and its trace is the same as with libioassess.so alone."""
import json
import re
import shutil

import numpy as np
import pytest

import ioassess
from ioassess.inputs.traceformat import OpFlag
from recorder_helpers import OP_CODES, assert_same_run, file_id, load, op_rows, prog, run, tool, total_table

pytestmark = pytest.mark.mpi

RANKS, AGGREGATORS = 4, 2
BLOCK, SMALL, VIEW_DISP = 262144, 4096, 4096   # as in mpi_collective.c
COLLECTIVE, NONBLOCKING = OpFlag.COLLECTIVE, OpFlag.NONBLOCKING
UNDER_MPIIO, UNDER_COLLECTIVE = OpFlag.UNDER_MPIIO, OpFlag.UNDER_COLLECTIVE
# mpi_collective's "every" mode: the kind recorded for each call of data_call() in order (the
# MPI_Count "_c" forms record as their plain form), then MPI_File_sync, then shared_call().
EVERY_DATA_CALLS = ["write", "write_at", "write_all", "write_at_all", "iwrite", "iwrite_at", "iwrite_all",
                    "iwrite_at_all", "write_all_begin", "write_at_all_begin", "write_at", "write_all"]
EVERY_DATA_CALLS += [name.replace("write", "read") for name in EVERY_DATA_CALLS]
EVERY_SHARED_CALLS = ["write_shared", "write_ordered", "iwrite_shared", "write_ordered_begin",
                      "read_shared", "read_ordered", "iread_shared", "read_ordered_begin"]


@pytest.fixture(scope="module")
def mpiio_lib():
    path = ioassess.mpiio_library_path()
    if path is None:
        pytest.fail("libioassess-mpiio.so is not installed: `pip install .` builds it when mpicc is there "
                    "(`make deps` installs MPICH)")
    return path


def expected_flags(kind):
    collective = "_all" in kind or "ordered" in kind or kind == "sync"
    nonblocking = kind.startswith("i") or kind.endswith("_begin")
    return (COLLECTIVE if collective else 0) | (NONBLOCKING if nonblocking else 0)


def run_job(ioassess_cli, tmp_path, mode, ranks=RANKS):
    """`ioassess run -- mpiexec -n RANKS mpi_collective MODE DIR 2`: (traces, assessment, report text,
    data directory)."""
    data = tmp_path / "data"
    data.mkdir()
    result = ioassess_cli("run", "--trace-dir", tmp_path / "t", "--", shutil.which("mpiexec"), "-n", str(ranks),
                          prog("mpi_collective"), mode, data, str(AGGREGATORS))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert f"cb_nodes {AGGREGATORS}" in lines
    assert len([line for line in lines if re.fullmatch(rf"rank \d+: {mode} ok, wrote \d+ bytes", line)]) == ranks, \
        result.stdout
    with open(tmp_path / "t" / "assessment.json") as f:
        assessment = json.load(f)
    return load(tmp_path / "t"), assessment, (tmp_path / "t" / "report.html").read_text(), data


def rank_of(ts):
    """process index -> MPI rank, for the traces of mpi_collective (not mpiexec's own processes)."""
    ranks = {i: p.rank for i, p in enumerate(ts.processes) if p.exe.endswith("/mpi_collective")}
    assert sorted(ranks.values()) == list(range(RANKS)), [(p.exe, p.rank) for p in ts.processes]
    return ranks


def rows(ts, path, layer):
    """Op rows on path of one layer ("posix" or "mpiio"), each with its rank, in trace order."""
    ranks = rank_of(ts)
    mpiio = ts.ops["op"] >= 64
    mask = (ts.ops["file_id"] == np.uint64(file_id(ts, path))) & (mpiio if layer == "mpiio" else ~mpiio)
    found = op_rows(ts, mask)
    for row in found:
        row["rank"] = ranks[row["process"]]
    return found


def test_collective_write_all_is_recorded_and_the_aggregators_named(ioassess, tmp_path):
    ts, assessment, html, data = run_job(ioassess, tmp_path, "collective")
    path = data / "data"
    mpiio = rows(ts, path, "mpiio")
    by_rank = {r: [(row["kind"], row["flags"], row["offset"], row["requested"], row["result"])
                   for row in mpiio if row["rank"] == r] for r in range(RANKS)}
    for r in range(RANKS):
        assert by_rank[r] == [("mpi_file_write_all", COLLECTIVE, r * BLOCK, BLOCK, BLOCK),
                              ("mpi_file_sync", COLLECTIVE, -1, 0, 0),
                              ("mpi_file_read_all", COLLECTIVE, r * BLOCK, BLOCK, BLOCK)], r

    posix = rows(ts, path, "posix")
    transfers = [row for row in posix if row["kind"] in ("pwrite", "write", "pread", "read")]
    assert transfers and all(row["flags"] == UNDER_MPIIO | UNDER_COLLECTIVE for row in transfers)
    aggregators = {row["rank"] for row in transfers}
    assert len(aggregators) == AGGREGATORS
    for kind, direction in (("mpi_file_write_all", ("pwrite", "write")), ("mpi_file_read_all", ("pread", "read"))):
        moved = [row for row in transfers if row["kind"] in direction]
        assert sum(row["result"] for row in moved) == RANKS * BLOCK   # the aggregators moved everyone's data
        assert {row["rank"] for row in moved} == aggregators
        for row in moved:   # each inside its process's collective call
            call = next(c for c in mpiio if c["process"] == row["process"] and c["kind"] == kind)
            assert call["start_ns"] <= row["start_ns"]
            assert row["start_ns"] + row["duration_ns"] <= call["start_ns"] + call["duration_ns"]

    per_layer = total_table(ts, by=("file_id", "layer", "direction"))
    assert per_layer[(str(path), "mpiio", "write")]["bytes_returned"] == RANKS * BLOCK
    assert per_layer[(str(path), "posix", "write")]["bytes_returned"] == RANKS * BLOCK

    named = assessment["collective_io"]
    assert sorted(a["rank"] for a in named["aggregators"]) == sorted(aggregators)
    assert named["aggregator_bytes"] == 2 * RANKS * BLOCK and named["collective_ops"] == 2 * RANKS
    assert named["processes"] == RANKS and not named["partial"]
    ranked = {p["rank"]: p for p in assessment["processes"] if p["mpiio_ops"]}
    assert sorted(ranked) == list(range(RANKS))
    assert {r for r, p in ranked.items() if p["aggregator"]} == aggregators
    assert all(ranked[r]["aggregator_s"] > 0 for r in aggregators)
    assert all(ranked[r]["ops"] == 0 and ranked[r]["mpiio_ops"] == 3 for r in set(range(RANKS)) - aggregators)

    write = next(row for row in assessment["layers"] if row["direction"] == "write")
    assert write["mpiio"]["ops"] == RANKS and write["mpiio"]["bytes"] == RANKS * BLOCK
    assert write["mpiio"]["flagged"]["collective"]["ops"] == RANKS
    assert write["posix"]["flagged"]["under_collective"]["bytes"] == RANKS * BLOCK
    posix_and_stdio_s = sum(row[layer]["seconds"] for row in assessment["layers"] for layer in ("posix", "stdio")
                            if row[layer])
    assert assessment["headline"]["io_s"] == pytest.approx(posix_and_stdio_s)   # MPI-IO time is not I/O time
    assert "Time at each layer" in html and "under collective MPI-IO (aggregator work)" in html
    assert '<th colspan="4" class="text">MPI-IO</th><th colspan="5" class="text">POSIX</th>' in html
    assert html.count("<td class=\"text\">aggregator: ") == AGGREGATORS   # marked in the process table
    for a in named["aggregators"]:
        assert f"rank {a['rank']} pid {a['pid']}" in html

    shown = json.loads(ioassess("show", "--json", tmp_path / "t").stdout)   # each byte counted once
    (top,) = [f for f in shown["top_files"] if f["name"] == str(path)]
    assert top["bytes"] == 2 * RANKS * BLOCK
    layers = {layer["layer"]: layer for layer in shown["layers"]}
    assert layers["mpiio"]["count"] == 3 * RANKS and layers["mpiio"]["bytes"] == 2 * RANKS * BLOCK
    assert sum(d["bytes"] for d in shown["directions"]) == layers["posix"]["bytes"]


def test_independent_write_at_through_a_view_records_byte_offsets(ioassess, tmp_path):
    ts, assessment, _, data = run_job(ioassess, tmp_path, "independent")
    path = data / "data"
    mpiio = rows(ts, path, "mpiio")
    posix = rows(ts, path, "posix")
    for r in range(RANKS):
        offset = VIEW_DISP + r * BLOCK
        assert [(row["kind"], row["flags"], row["offset"], row["requested"], row["result"])
                for row in mpiio if row["rank"] == r] == [("mpi_file_write_at", 0, offset, BLOCK, BLOCK),
                                                          ("mpi_file_read_at", 0, offset, BLOCK, BLOCK)], r
        own = [row for row in posix if row["rank"] == r and row["kind"] in ("pwrite", "pread")]
        assert [(row["kind"], row["offset"], row["result"], row["flags"]) for row in own] == [
            ("pwrite", offset, BLOCK, UNDER_MPIIO), ("pread", offset, BLOCK, UNDER_MPIIO)], r
    assert assessment["collective_io"] is None
    assert not any(p["aggregator"] for p in assessment["processes"])


def test_nonblocking_calls_record_their_start(ioassess, tmp_path):
    ts, assessment, _, data = run_job(ioassess, tmp_path, "nonblocking")
    mpiio = rows(ts, data / "data", "mpiio")
    for r in range(RANKS):
        assert [(row["kind"], row["flags"], row["offset"], row["requested"], row["result"])
                for row in mpiio if row["rank"] == r] == [
            ("mpi_file_iwrite_at", NONBLOCKING, r * BLOCK, BLOCK, BLOCK),
            ("mpi_file_iread_at", NONBLOCKING, r * BLOCK, BLOCK, BLOCK)], r
    read = next(row for row in assessment["layers"] if row["direction"] == "read")
    assert read["mpiio"]["flagged"]["nonblocking"]["ops"] == RANKS


def test_every_recorded_call_once_with_its_kind_flags_bytes_and_offset(ioassess, tmp_path):
    ts, _, _, data = run_job(ioassess, tmp_path, "every")
    data_calls = rows(ts, data / "data", "mpiio")
    shared_calls = rows(ts, data / "shared", "mpiio")
    for r in range(RANKS):
        mine = [row for row in data_calls if row["rank"] == r]
        assert [row["kind"] for row in mine] == [f"mpi_file_{name}" for name in EVERY_DATA_CALLS + ["sync"]]
        for i, (row, name) in enumerate(zip(mine, EVERY_DATA_CALLS)):
            assert row["flags"] == expected_flags(name), (r, i, name)
            assert (row["requested"], row["result"]) == (SMALL, SMALL), (r, i, name)
            assert row["offset"] == ((i % 12) * RANKS + r) * SMALL, (r, i, name)
        assert mine[-1]["flags"] == COLLECTIVE
        shared = [row for row in shared_calls if row["rank"] == r]
        assert [row["kind"] for row in shared] == [f"mpi_file_{name}" for name in EVERY_SHARED_CALLS]
        assert [row["flags"] for row in shared] == [expected_flags(name) for name in EVERY_SHARED_CALLS]
        assert all((row["offset"], row["requested"], row["result"]) == (-1, SMALL, SMALL) for row in shared)
    # only the application's files have MPI-IO ops (ROMIO's hidden file of the shared pointer has POSIX ops)
    mpiio_files = {int(f) for f in ts.ops["file_id"][ts.ops["op"] >= 64]}
    assert {ts.files[f].name for f in mpiio_files} == {str(data / "data"), str(data / "shared")}


def test_a_failed_call_returns_the_same_error_and_is_recorded_as_failed(ioassess, tmp_path):
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    plain = run([shutil.which("mpiexec"), "-n", str(RANKS), prog("mpi_collective"), "errors", plain_dir])
    ts, _, _, data = run_job(ioassess, tmp_path, "errors")
    assert plain.returncode == 0, plain.stderr
    classes = sorted(set(re.findall(rb"error class (\d+)", plain.stdout)))
    assert len(classes) == 1
    mpiio = rows(ts, data / "data", "mpiio")
    assert [(row["kind"], row["requested"], row["result"]) for row in mpiio] == \
        [("mpi_file_read_at", 0, -int(classes[0]))] * RANKS


def test_every_call_on_many_reopened_handles_is_recorded_on_its_file(recorder_lib, mpiio_lib, tmp_path):
    """80 000 opens and closes of 50 files (MPICH reuses handle values): the handle table keeps
    every open file and forgets every closed one."""
    (tmp_path / "data").mkdir()
    result = run([shutil.which("mpiexec"), "-n", "1", prog("mpi_collective"), "reopen", tmp_path / "data"],
                 preload=(recorder_lib, mpiio_lib), trace_dir=tmp_path / "t")
    assert result.returncode == 0, result.stderr
    ts = load(tmp_path / "t")
    names = {fid: info.name for fid, info in ts.files.items()}
    writes = ts.ops["op"] == OP_CODES["mpi_file_write_at"]
    per_file = {}
    for fid, offset in zip(ts.ops["file_id"][writes].tolist(), ts.ops["offset"][writes].tolist()):
        per_file.setdefault(names[fid], []).append(offset)
    assert len(per_file) == 50
    for k in range(50):   # file k gets round r's write when (r * 8 + j) % 50 == k for some j < 8
        rounds = [r for r in range(10000) if any((r * 8 + j) % 50 == k for j in range(8))]
        assert sorted(per_file[str(tmp_path / "data" / f"reopen.0.{k}")]) == rounds, k


def test_mpi_output_and_data_are_the_same_under_the_recorders(recorder_lib, mpiio_lib, tmp_path):
    outputs = {}
    for name, preload in (("plain", ()), ("recorded", (recorder_lib, mpiio_lib))):
        data = tmp_path / name
        data.mkdir()
        result = run([shutil.which("mpiexec"), "-n", str(RANKS), prog("mpi_collective"), "every", data],
                     preload=preload, trace_dir=tmp_path / f"t-{name}" if preload else None)
        assert result.returncode == 0, result.stderr
        outputs[name] = (sorted(result.stdout.splitlines()), result.stderr, (data / "data").read_bytes())
    assert outputs["recorded"] == outputs["plain"]


@pytest.mark.parametrize("bind_now", ["", "1"])
def test_a_non_mpi_program_is_unchanged_by_the_mpiio_library(recorder_lib, mpiio_lib, tmp_path, bind_now):
    """allops calls every interposed POSIX entry point: with the MPI-IO library preloaded too it
    prints the same, exits the same and its trace holds the same ops as with libioassess.so alone."""
    def normalised(output):   # heap addresses move from run to run; each run has its own directory
        return re.sub(rb"buf=0x[0-9a-f]+", b"buf=ADDR", output.replace(bytes(tmp_path), b"")).replace(
            b"/posix/", b"/plain/").replace(b"/both/", b"/plain/")

    env = {"LD_BIND_NOW": bind_now} if bind_now else None
    results, traces = {}, {}
    for name, preload in (("plain", ()), ("posix", (recorder_lib,)), ("both", (recorder_lib, mpiio_lib))):
        work = tmp_path / name
        work.mkdir()
        trace_dir = tmp_path / f"t-{name}" if preload else None
        results[name] = run([prog("allops"), work], env=env, preload=preload, trace_dir=trace_dir)
        if preload:
            traces[name] = [(row["kind"], row["path"].replace(str(work), "WORK"), row["offset"], row["requested"],
                             row["result"], row["flags"]) for row in op_rows(load(trace_dir))
                            if row["path"].startswith(str(work))]
    assert results["plain"].returncode == 0, results["plain"].stderr
    for name in ("posix", "both"):
        assert_same_run(results["plain"], results[name], normalise=normalised)
    assert traces["both"] == traces["posix"] and len(traces["both"]) > 20


def test_ld_preload_of_the_mpiio_library_alone_loads_nothing_of_mpi(mpiio_lib, tmp_path):
    """A non-MPI program never resolves an MPI symbol, so the library needs no MPI library; with
    LD_BIND_NOW=1 every symbol it refers to is bound at start-up, and the program still runs."""
    result = run([tool("ldd"), mpiio_lib])
    assert result.returncode == 0 and b"libmpi" not in result.stdout, result.stdout
    result = run([tool("true")], env={"LD_BIND_NOW": "1"}, preload=(mpiio_lib,), trace_dir=tmp_path / "t")
    assert result.returncode == 0 and result.stderr == b""
