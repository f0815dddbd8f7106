"""The access-pattern findings (report/access_patterns.py, docs/assessment.md "Access patterns")
on real runs under `ioassess run`, one workload per family that the recorder's per-op data
supports: small writes (P06), offsets not aligned to the file system's blocks (P08), data read
twice (P09), random reads (P11), a straggler rank on a shared file under mpiexec (P18, P19),
independent and collective MPI-IO (M02/M03, M04/M05). Each finding fires in the assessment's
access_patterns and recommendations alike, names the files (and ranks) behind it, and its seconds
at stake agree within 5 % with the same quantity computed here from the traces, by the table's
definition; a run without the pattern (sequential, aligned, large, balanced, collective) does
not fire it. The time lost per op, which the assessment gives only in aggregate (P08, P11), is
the reporter's own per-op classification of the Job under the model the run used
(load_job + classify_ops): what is checked is which ops the finding counts and their sum.
Comparisons are with the same run's traces, so they hold at any speed."""
import json
import shutil
import subprocess

import numpy as np
import pytest

from ioassess.inputs.job import POSIX, READ, WRITE
from ioassess.inputs.load import load_job
from ioassess.inputs.traceformat import OP_DIRECTION, OP_LAYER, OpFlag
from ioassess.models.modelfile import load_model
from ioassess.report.access_patterns import RangeUnion, union_of_ranges
from ioassess.report.classify import classify_ops
from ioassess.site.training import workload_program_path
from recorder_helpers import load, op_rows, prog, random_data_file, select

MIB = 1 << 20
BLOCK = 4096                 # the offsets' alignment on a local file system (DEFAULT_FILE_ALIGNMENT)
SMALL = MIB                  # a request of at most this many bytes is small (SMALL_BYTES)
AGREE = 0.05                 # the seconds at stake against the traces'
RANKS = 4


def run_job(ioassess, trace_dir, *command):
    """`ioassess run --trace-dir trace_dir -- command`: its assessment."""
    result = ioassess("run", "--trace-dir", trace_dir, "--", *command)
    assert result.returncode == 0, result.stderr
    with open(trace_dir / "assessment.json") as f:
        return json.load(f)


def workload(*options):
    return [workload_program_path(), *map(str, options)]


def codes(assessment):
    return {p["code"] for p in assessment["access_patterns"]}


def fired(assessment, code):
    """The access pattern of that code and its recommendation, which must say the same: each once."""
    (pattern,) = [p for p in assessment["access_patterns"] if p["code"] == code]
    (found,) = [r for r in assessment["recommendations"] if r["code"] == code]
    for key in ("level", "files", "ranks", "at_stake_s", "at_stake_how"):
        assert found[key] == pattern[key], key
    assert found["level"] in ("high", "warn") and found["title"]
    return pattern


def file_names(pattern):
    return [f["name"] for f in pattern["files"]]


def posix_data(ts, direction):
    """Mask of the traces' POSIX reads (writes) that succeeded: the requests Darshan counts."""
    return np.array([OP_LAYER[int(op)] == "posix" and OP_DIRECTION[int(op)] == direction for op in ts.ops["op"]],
                    bool) & (ts.ops["result"] >= 0)


def evicted(path):
    """Drop the file's pages from the page cache (posix_fadvise, not the whole machine's cache)."""
    subprocess.run(workload("--evict", path), check=True, capture_output=True)
    out = subprocess.run(workload("--resident", path), check=True, capture_output=True, text=True).stdout
    assert float(out.split()[0].split("=")[1]) < 0.01, out


def job_and_lost(trace_dir, assessment):
    """The Job the reporter builds of the traces and the time lost of each of its ops under the
    model the run used."""
    job = load_job([str(trace_dir)])
    return job, classify_ops(job, load_model(assessment["model"]["source"]))["lost_s"]


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    return random_data_file(tmp_path_factory.mktemp("data") / "data.bin", 64 * MIB)


# ---- single processes ----

def test_random_reads_fire_p11_with_the_time_lost_in_them(ioassess, data_file, tmp_path):
    """3000 preads of 4 KiB at random slots of an uncached file, each slot once: about half start
    past where the previous one ended (Darshan's sequential), the others are random; at stake the
    time lost in those. Nothing is read twice and every offset is aligned: no P09, no P08."""
    evicted(data_file)
    a = run_job(ioassess, tmp_path / "t", *workload("--file", data_file, "--size", "4k", "--file-layout", "rnd",
                                                    "--repeats", 3000, "--mem-buffer", "1m", "--seed", 3))
    job, lost = job_and_lost(tmp_path / "t", a)
    o = job.ops
    reads = np.flatnonzero((o["layer"] == POSIX) & (o["direction"] == READ) & (o["result"] >= 0))
    random = np.zeros(len(reads), bool)
    last_byte = {}                          # Darshan's per (process, file): 0 before the first request
    for i, row in enumerate(reads.tolist()):
        key = (int(o["process"][row]), int(o["file"][row]))
        random[i] = not o["offset"][row] > last_byte.get(key, 0)
        last_byte[key] = int(o["offset"][row] + o["result"][row] - 1)
    ts = load(tmp_path / "t")
    assert len(reads) == int(select(ts, data_file, op="pread").sum()) == 3000
    assert 1000 < random.sum() < 3000 and random.sum() / len(reads) > 0.2

    p = fired(a, "P11")
    assert (p["random_requests"], p["requests"]) == (int(random.sum()), len(reads))
    assert file_names(p) == [str(data_file)]
    (workload_process,) = ts.processes
    assert [(r["rank"], r["pid"]) for r in p["ranks"]] == [(-1, workload_process.pid)]
    expected = float(lost[reads[random]].sum())
    assert expected > 0
    assert p["at_stake_s"] == pytest.approx(expected, rel=AGREE)
    assert p["lost_s"] == pytest.approx(p["at_stake_s"], rel=1e-9)
    assert p["ops_s"] == pytest.approx(float(o["duration_s"][reads[random]].sum()), rel=AGREE)
    # one process: no file is shared, so none of the shared-file patterns
    assert not codes(a) & {"P09", "P08", "P07", "P12", "P15", "P18", "P19"}


def test_misaligned_offsets_fire_p08_with_the_time_lost_in_them(ioassess, data_file, tmp_path):
    """800 sequential preads of 4 KiB starting 512 bytes into an uncached file: every offset is off
    the 4 KiB blocks (too few for P05, small reads); at stake the time lost in them."""
    evicted(data_file)
    a = run_job(ioassess, tmp_path / "t", *workload("--file", data_file, "--size", "4k", "--offset-base", 512,
                                                    "--repeats", 800, "--mem-buffer", "1m"))
    job, lost = job_and_lost(tmp_path / "t", a)
    o = job.ops
    data = (o["layer"] == POSIX) & (o["direction"] <= WRITE) & (o["result"] >= 0)
    misaligned = data & (o["offset"] >= 0) & (o["offset"] % BLOCK != 0)
    ts = load(tmp_path / "t")
    offsets = [row["offset"] for row in op_rows(ts, select(ts, data_file))]
    assert len(offsets) == 800 and all(offset % BLOCK == 512 for offset in offsets)
    assert int(misaligned.sum()) == int(data.sum()) == 800

    p = fired(a, "P08")
    assert (p["misaligned"], p["misaligned_requests"], p["requests"], p["alignment_bytes"]) == \
        ("file", 800, 800, BLOCK)
    assert file_names(p) == [str(data_file)]
    expected = float(lost[misaligned].sum())
    assert expected > 0
    assert p["at_stake_s"] == pytest.approx(expected, rel=AGREE)
    assert "P05" not in codes(a) and "P07" not in codes(a)


def test_aligning_a_large_request_saves_at_most_its_two_partial_blocks():
    from ioassess.report.access_patterns import partial_blocks_share
    assert partial_blocks_share([1 << 20, 8192, 4096, 0], 4096).tolist() == [2 * 4096 / (1 << 20), 1.0, 1.0, 1.0]


def union_bytes(ranges):
    """Bytes covered by the (start, end) ranges."""
    covered, reach = 0, None
    for start, end in sorted(ranges):
        if reach is None or start >= reach:
            covered += end - start
            reach = end
        elif end > reach:
            covered += end - reach
            reach = end
    return covered


def test_data_read_twice_fires_p09_with_its_share_of_the_read_time(ioassess, data_file, tmp_path):
    """The first 4 MiB of a file read twice in order (64 KiB preads): half the bytes read are read
    again; at stake, per file, the read time times that share. The reads are sequential (P12),
    aligned and not random."""
    a = run_job(ioassess, tmp_path / "t", *workload("--file", data_file, "--size", "64k", "--file-span", "4m",
                                                    "--repeats", 128, "--mem-buffer", "1m"))
    ts = load(tmp_path / "t")
    reads = posix_data(ts, "read") & (ts.ops["offset"] >= 0) & (ts.ops["result"] > 0)
    expected, read_bytes, again_bytes = 0.0, 0, 0
    for fid in np.unique(ts.ops["file_id"][reads]).tolist():
        rows = op_rows(ts, reads & (ts.ops["file_id"] == fid))
        total = sum(r["result"] for r in rows)
        share = 1 - union_bytes([(r["offset"], r["offset"] + r["result"]) for r in rows]) / total
        expected += sum(r["duration_ns"] for r in rows) / 1e9 * share
        read_bytes += total
        again_bytes += share * total
    assert (read_bytes, again_bytes) == (8 * MIB, 4 * MIB)

    p = fired(a, "P09")
    assert (p["direction"], p["again_bytes"], p["bytes"]) == ("read", again_bytes, read_bytes)
    # one process read its own bytes again, and the finding says so
    assert (p["again_by"], p["again_by_same_process_bytes"], p["again_by_other_processes_bytes"]) == \
        ("process", again_bytes, 0)
    (found,) = [r for r in a["recommendations"] if r["code"] == "P09"]
    assert found["title"] == "Data read more than once by the same process"
    assert file_names(p) == [str(data_file)]
    assert expected > 0 and p["at_stake_s"] == pytest.approx(expected, rel=AGREE)
    assert "P12" in codes(a) and not codes(a) & {"P11", "P08", "P05"}


def small_write_stake(trace_dir, assessment):
    """P06's seconds at stake from the job: each process's POSIX writes of at most 1 MiB to a file,
    merged into 4 MiB requests, lose all but ceil(bytes / 4 MiB) of their calls; each removed
    call saves the per-call cost of its class's line in the model (at most the call's time)."""
    job = load_job([str(trace_dir)])
    per_op = classify_ops(job, load_model(assessment["model"]["source"]))
    o = job.ops
    small = np.flatnonzero((o["layer"] == POSIX) & (o["direction"] == WRITE) & (o["result"] >= 0) &
                           (o["result"] <= SMALL))
    expected = 0.0
    for key in {(int(o["process"][i]), int(o["file"][i])) for i in small}:
        group = small[(o["process"][small] == key[0]) & (o["file"][small] == key[1])]
        kept = max(np.ceil(o["result"][group].sum() / (4 * MIB)), 1)
        share = (len(group) - kept) / len(group)
        expected += float(np.minimum(per_op["call_s"][group], o["duration_s"][group]).sum()) * share
    return expected


def test_small_writes_fire_p06_with_the_calls_merging_them_removes(ioassess, tmp_path):
    """One job: 2000 pwrites of 4 KiB to one file, then 8 of 4 MiB to another. At stake: the
    calls that merging the small writes into 4 MiB requests removes (1998 of 2000), each at its
    per-call cost in the model; only their file is named."""
    small_file, large_file = tmp_path / "small.out", tmp_path / "large.out"
    script = " && ".join(" ".join(workload(*options)) for options in (
        ("--file", small_file, "--op", "write", "--create", "--size", "4k", "--file-span", "8m", "--repeats", 2000),
        ("--file", large_file, "--op", "write", "--create", "--size", "4m", "--file-span", "32m", "--repeats", 8)))
    a = run_job(ioassess, tmp_path / "t", shutil.which("sh"), "-c", script)
    ts = load(tmp_path / "t")
    writes = op_rows(ts, posix_data(ts, "write"))
    small = [w for w in writes if w["result"] <= SMALL]
    assert (len(small), len(writes)) == (2000, 2008)
    writer = {row["process"] for row in small}
    assert len(writer) == 1

    p = fired(a, "P06")
    assert (p["direction"], p["small_requests"], p["requests"], p["threshold_bytes"]) == ("write", 2000, 2008, SMALL)
    assert "merging each process's small requests of a file into requests of 4 MiB removes" in p["at_stake_how"]
    assert file_names(p) == [str(small_file)]
    assert [r["pid"] for r in p["ranks"]] == [ts.processes[writer.pop()].pid]
    expected = small_write_stake(tmp_path / "t", a)
    # one process: its saving is the job's, and far less than the writes' time
    assert expected > 0 and p["at_stake_s"] == pytest.approx(expected, rel=AGREE)
    assert p["at_stake_s"] < sum(w["duration_ns"] for w in small) / 1e9
    # each file is one process's: none is shared (the shell and the writers have no rank, as any
    # serial program: that does not make their files shared)
    assert not codes(a) & {"P05", "P16"}


def test_large_writes_alone_do_not_fire_p06(ioassess, tmp_path):
    a = run_job(ioassess, tmp_path / "t", *workload("--file", tmp_path / "large.out", "--op", "write", "--create",
                                                    "--size", "4m", "--file-span", "32m", "--repeats", 8))
    assert not codes(a) & {"P06", "P16", "P08", "P10", "P13"}
    assert "P14" in codes(a)


# ---- MPI jobs ----

def rank_of(ts, name):
    """process index -> rank of the traces' processes of the program `name` (not mpiexec's)."""
    ranks = {i: p.rank for i, p in enumerate(ts.processes) if p.exe.endswith("/" + name)}
    assert sorted(ranks.values()) == list(range(RANKS)), [(p.exe, p.rank) for p in ts.processes]
    return ranks


def mpiexec(*program):
    return [shutil.which("mpiexec"), "-n", RANKS, *program]


@pytest.mark.mpi
def test_a_straggler_rank_on_a_shared_file_fires_p18_and_p19_naming_it(ioassess, tmp_path):
    """mpi_layouts: 4 ranks pwrite then pread their interleaved 64 KiB blocks of one shared file,
    rank 2 (the straggler) 64 times as many as the others. At stake, for the file: the slowest
    rank's time on it (its POSIX reads, writes and metadata calls) less the mean over the ranks."""
    heavy = 2
    (tmp_path / "data").mkdir()
    a = run_job(ioassess, tmp_path / "t", *mpiexec(prog("mpi_layouts"), "shared", tmp_path / "data", RANKS, -1, heavy))
    ts = load(tmp_path / "t", meta=True)
    shared = tmp_path / "data" / "shared"
    ranks = rank_of(ts, "mpi_layouts")
    directions = np.array([OP_DIRECTION[int(op)] for op in ts.ops["op"]])
    on_file = select(ts, shared) & np.array([OP_LAYER[int(op)] == "posix" for op in ts.ops["op"]], bool) & \
        ((np.isin(directions, ["read", "write"]) & (ts.ops["result"] >= 0)) | (directions == "meta"))
    per_process = np.bincount(ts.ops["process"][on_file], ts.ops["duration_ns"][on_file] / 1e9,
                              minlength=len(ts.processes))
    assert set(np.flatnonzero(per_process).tolist()) == set(ranks)
    moved = np.bincount(ts.ops["process"][on_file], np.where(directions[on_file] == "meta", 0,
                                                             ts.ops["result"][on_file]), minlength=len(ts.processes))
    assert {rank: int(moved[i]) for i, rank in ranks.items()} == \
        {rank: 2 * 16 * 65536 * (64 if rank == heavy else 1) for rank in range(RANKS)}   # written and read
    # the slowest by time is the heavy rank unless a light one stalled for longer than the heavy
    # one's thousands of ops took: the finding names the traces' slowest either way
    slowest = int(np.argmax(per_process))
    expected = per_process[slowest] - per_process.sum() / RANKS

    for code in ("P18", "P19"):
        p = fired(a, code)
        assert p["imbalanced_files"] == 1 and file_names(p) == [str(shared)]
        assert [(r["rank"], r["pid"]) for r in p["ranks"]] == [(ranks[slowest], ts.processes[slowest].pid)]
        assert p["at_stake_s"] == pytest.approx(expected, rel=AGREE)
        assert p["ranks"][0]["seconds"] == pytest.approx(expected, rel=AGREE)


@pytest.mark.mpi
def test_ranks_moving_equal_shares_of_a_shared_file_do_not_fire_p18(ioassess, tmp_path):
    """The same job without the heavy rank: every rank moves the same bytes. (P19 compares times,
    which differ between equal ranks as much as the machine's load makes them: not checked.)"""
    (tmp_path / "data").mkdir()
    a = run_job(ioassess, tmp_path / "t", *mpiexec(prog("mpi_layouts"), "shared", tmp_path / "data", RANKS))
    assert "P18" not in codes(a) and "M01" in codes(a)


def mpiio_calls(ts, direction, flags):
    """Mask of the traces' MPI-IO calls of a direction that succeeded, with exactly these of the
    COLLECTIVE and NONBLOCKING flags."""
    layer = np.array([OP_LAYER[int(op)] == "mpiio" and OP_DIRECTION[int(op)] == direction for op in ts.ops["op"]],
                     bool)
    kind = ts.ops["flags"] & (OpFlag.COLLECTIVE | OpFlag.NONBLOCKING)
    return layer & (ts.ops["result"] >= 0) & (kind == flags)


@pytest.mark.mpi
def test_many_independent_mpiio_calls_fire_m02_and_m03_with_their_time(ioassess, tmp_path):
    """mpi_calls: 4 ranks make 300 MPI_File_write_at each, then 300 MPI_File_read_at, none collective:
    1200 of each, more than 1000. At stake: the independent calls' time, in wall-clock seconds the
    busiest rank's (the ranks run side by side), summed over the ranks in rank_seconds; every rank
    named."""
    (tmp_path / "data").mkdir()
    a = run_job(ioassess, tmp_path / "t", *mpiexec(prog("mpi_calls"), "independent", tmp_path / "data", 300))
    ts = load(tmp_path / "t")
    ranks = rank_of(ts, "mpi_calls")
    for code, direction in (("M02", "read"), ("M03", "write")):
        calls = mpiio_calls(ts, direction, 0)
        assert calls.sum() == RANKS * 300 and not mpiio_calls(ts, direction, OpFlag.COLLECTIVE).any()
        per_process = np.bincount(ts.ops["process"][calls], ts.ops["duration_ns"][calls] / 1e9,
                                  minlength=len(ts.processes))
        p = fired(a, code)
        assert (p["direction"], p["independent_requests"], p["requests"]) == (direction, RANKS * 300, RANKS * 300)
        assert file_names(p) == [str(tmp_path / "data" / "data")]
        assert sorted(r["rank"] for r in p["ranks"]) == list(range(RANKS))
        for r in p["ranks"]:
            (process,) = [i for i, rank in ranks.items() if rank == r["rank"]]
            assert (r["pid"], r["seconds"]) == (ts.processes[process].pid, pytest.approx(per_process[process]))
        assert per_process.sum() > 0 and p["rank_seconds"] == pytest.approx(per_process.sum(), rel=AGREE)
        assert p["at_stake_s"] == pytest.approx(per_process.max(), rel=AGREE)
    assert not codes(a) & {"M04", "M05"}


@pytest.mark.mpi
def test_collective_mpiio_calls_are_good_m04_and_m05_not_m02_or_m03(ioassess, tmp_path):
    """mpi_calls: 4 ranks make 16 MPI_File_write_at_all each, then 16 MPI_File_read_at_all."""
    (tmp_path / "data").mkdir()
    a = run_job(ioassess, tmp_path / "t", *mpiexec(prog("mpi_calls"), "collective", tmp_path / "data", 16))
    ts = load(tmp_path / "t")
    for code, direction in (("M04", "read"), ("M05", "write")):
        assert mpiio_calls(ts, direction, OpFlag.COLLECTIVE).sum() == RANKS * 16
        (p,) = [p for p in a["access_patterns"] if p["code"] == code]
        assert (p["level"], p["direction"], p["collective_requests"], p["requests"]) == \
            ("ok", direction, RANKS * 16, RANKS * 16)
        (found,) = [r for r in a["recommendations"] if r["code"] == code]
        assert found["level"] == "ok" and found["at_stake_s"] is None
    assert not codes(a) & {"M02", "M03"}


@pytest.mark.mpi
def test_a_nonblocking_collective_call_is_not_taken_from_the_independent_ones_twice(ioassess, tmp_path):
    """mpi_collective's `every` mode makes each MPI-IO data call once per rank, among them the
    non-blocking collective ones (iwrite_all, write_all_begin, ...), which are both collective and
    non-blocking: the independent calls are those that are neither, as the traces flag them."""
    (tmp_path / "data").mkdir()
    a = run_job(ioassess, tmp_path / "t", *mpiexec(prog("mpi_collective"), "every", tmp_path / "data", 2))
    ts = load(tmp_path / "t")
    for code, direction in (("M04", "read"), ("M05", "write")):
        collective = int((mpiio_calls(ts, direction, OpFlag.COLLECTIVE) |
                          mpiio_calls(ts, direction, OpFlag.COLLECTIVE | OpFlag.NONBLOCKING)).sum())
        independent = int(mpiio_calls(ts, direction, 0).sum())
        assert independent > 0 and mpiio_calls(ts, direction, OpFlag.COLLECTIVE | OpFlag.NONBLOCKING).any()
        (p,) = [p for p in a["access_patterns"] if p["code"] == code]
        assert (p["collective_requests"], p["requests"]) == (collective, independent + collective)


@pytest.mark.mpi
def test_aggregators_against_nodes_fire_m09_with_two_on_one_node_and_m10_with_one(ioassess, tmp_path):
    """mpi_calls' collective writes and reads on this one node with collective buffering on
    (ROMIO's automatic mode does this contiguous pattern with every rank's own I/O): with
    ROMIO's default of one aggregator per node one rank does the file system I/O (M10); with
    cb_nodes 2 and cb_config_list *:* two ranks of the node do it (M09, naming both). The
    aggregators are the ranks the traces show making POSIX reads or writes inside collective
    calls."""
    buffering = "romio_cb_write enable\nromio_cb_read enable\n"
    two_per_node = buffering + "cb_nodes 2\ncb_config_list *:*\n"
    for name, hints, code in (("one", buffering, "M10"), ("two", two_per_node, "M09")):
        (tmp_path / f"{name}.hints").write_text(hints)
        (tmp_path / name / "data").mkdir(parents=True)
        a = run_job(ioassess, tmp_path / name / "t", "env", f"ROMIO_HINTS={tmp_path / f'{name}.hints'}",
                    *mpiexec(prog("mpi_calls"), "collective", tmp_path / name / "data", 16))
        ts = load(tmp_path / name / "t")
        posix_data = np.isin(ts.ops["op"], [op for op, layer in OP_LAYER.items() if layer == "posix"
                                             and OP_DIRECTION[op] in ("read", "write")])
        under = posix_data & ((ts.ops["flags"] & OpFlag.UNDER_COLLECTIVE) != 0)
        aggregators = sorted({ts.processes[i].rank for i in np.unique(ts.ops["process"][under]).tolist()})
        (p,) = [p for p in a["access_patterns"] if p["code"] in ("M08", "M09", "M10")]
        assert (p["code"], p["nodes"]) == (code, 1), p
        assert p["aggregators"] == len(aggregators) == {"M10": 1, "M09": 2}[code]
        assert sorted(r["rank"] for r in p["ranks"]) == (aggregators if code == "M09" else [])


def test_bytes_moved_again_in_shared_records_do_not_say_who_moved_them(ioassess, tmp_path):
    """shane_macsio's shared records (rank -1) count more bytes than their highest offsets: the
    ranks together moved bytes again, which Darshan's counters cannot pin on one rank or several."""
    from recorder_helpers import shipped_darshan_logs
    [log] = [path for path in shipped_darshan_logs() if "shane_macsio" in path]
    result = ioassess("report", log, "-o", tmp_path / "r.html", "--json", tmp_path / "a.json")
    assert result.returncode == 0, result.stderr
    a = json.loads((tmp_path / "a.json").read_text())
    for code, moved in (("P09", "read"), ("P10", "wrote")):
        p = fired(a, code)
        assert p["again_by"] == "shared" and p["again_in_shared_records_bytes"] == p["again_bytes"] > 0
        (found,) = [r for r in a["recommendations"] if r["code"] == code]
        assert found["title"] == f"The ranks together {moved} more bytes than their files hold"
        assert "does not tell which" in found["text"]


def _union_by_brute_force(group, start, end):
    """Per group, its ranges [start, end) joined where they overlap or touch, by a walk."""
    joined = []
    for g, a, b in sorted(zip(group.tolist(), start.tolist(), end.tolist())):
        if joined and joined[-1][0] == g and a <= joined[-1][2]:
            joined[-1][2] = max(joined[-1][2], b)
        else:
            joined.append([g, a, b])
    return [tuple(r) for r in joined]


@pytest.mark.parametrize("top", [1 << 20, 1 << 50, 1 << 61])   # offsets packed with lengths, not, far apart
def test_the_union_of_ranges_in_any_order_and_chunks_is_the_brute_force_one(top):
    rng = np.random.default_rng(top % 1000)
    n = 20_000
    group = np.sort(rng.integers(0, 7, n))                     # groups in runs, as a chunk's streams come
    start = rng.integers(0, top, n) // 4096 * 4096
    start[: n // 4] = rng.integers(0, 64, n // 4) * 4096        # many that overlap and touch
    end = start + rng.choice([0, 512, 4096, 8192, 1 << 20], n)  # empty ranges too
    expected = _union_by_brute_force(group, start, end)
    g, a, b = union_of_ranges(group, start, end)
    assert list(zip(g.tolist(), a.tolist(), b.tolist())) == expected
    union = RangeUnion()
    for piece in np.array_split(rng.permutation(n), 9):        # chunks in any order, each in group order
        piece = piece[np.argsort(group[piece], kind="stable")]
        union.add(group[piece], start[piece], end[piece])
    g, a, b = union.ranges()
    assert list(zip(g.tolist(), a.tolist(), b.tolist())) == expected
