"""ioassess beside Darshan's own runtime (built from Darshan's release: tests/darshan_runtime.py).

Each real program runs in a fresh copy of one work directory (the same paths every time, so
Darshan's records have the same names): plainly, under Darshan alone, and under Darshan and
ioassess in each preload order. Stacked, the program's output, exit status and files are the
plain run's; every counter of every Darshan record, timing aside, is the Darshan-only run's;
ioassess's trace has the ops the program made where they are known, and none of Darshan's own
log writes; and `ioassess report` of the trace and the log is one job whose reads and writes
agree with both. A process killed with SIGKILL leaves a trace of every op it completed and
Darshan's mmap log, and the report of both uses the log and says the job did not finish.
"""
import glob
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys

import darshan
import numpy as np
import pytest

import ioassess
from darshan_runtime import Unavailable, find_runtime
from ioassess.cli import preload_with
from ioassess.inputs.job import ALL_OP_COLUMNS, DIRECTIONS, LAYERS, concatenate_columns, op_chunks, op_counts
from ioassess.inputs.load import load_job
from ioassess.inputs.traceformat import OP_DIRECTION, OP_LAYER, OP_NAMES
from recorder_helpers import (assert_same_run, clean_env, describe, killme_killed, load, prog, run, select, tool,
                              total_table, tree_digest, wait_until)
from test_fleet import assert_ingested_as_reported

pytestmark = [pytest.mark.darshan_runtime, pytest.mark.mpi]

RANKS = 2
BLOCK = 262144   # mpi_collective.c's bytes per rank and call
DD_BLOCKS = 100


@pytest.fixture(scope="session")
def darshan_runtime():
    """Darshan's runtime, built once per machine (about a minute) or the site's; a skip with
    the reason when there is none, a failure if IOASSESS_REQUIRE_DARSHAN=1 (.ci/run sets it)."""
    try:
        return find_runtime()
    except Unavailable as reason:
        if os.environ.get("IOASSESS_REQUIRE_DARSHAN") == "1":
            pytest.fail(f"IOASSESS_REQUIRE_DARSHAN=1 but {reason}")
        pytest.skip(str(reason))


def orders(darshan_lib):
    """The preload orders: ioassess run's (MPI-IO recorder, Darshan, recorder), ioassess's
    libraries in front of Darshan, and Darshan in front of both (where Darshan's MPI-IO wrappers
    call ioassess's PMPI ones)."""
    recorder, mpiio_recorder = ioassess.recorder_library_path(), ioassess.mpiio_library_path()
    assert mpiio_recorder, "libioassess-mpiio.so was not built: `make deps` installs MPICH's mpicc"
    return {"as_ioassess_run_orders": preload_with(darshan_lib, recorder, mpiio_recorder),
            "ioassess_first": ":".join([recorder, mpiio_recorder, darshan_lib]),
            "darshan_first": ":".join([darshan_lib, recorder, mpiio_recorder])}


def measures_time(counter):
    """Darshan's counters that vary with timing: times, timestamps, and the fastest and
    slowest rank (and their bytes), chosen by time."""
    return "TIME" in counter or "FASTEST_RANK" in counter or "SLOWEST_RANK" in counter


def darshan_records(log_dir):
    """{(module, file name, rank): what Darshan counted} of the one log in log_dir: each
    counter not measuring time, or, of a DXT module, the (offset, length) of every segment."""
    return log_records(the_log(log_dir))


def log_records(log):
    """darshan_records of one log."""
    found = {}
    # Closed here, not by the garbage collector: a report's __del__ run while cffi parses a type
    # for another one takes cffi's lock again and hangs the process.
    with darshan.DarshanReport(log, read_all=True) as report:
        for module, records in report.records.items():
            for record in records:
                key = (module, report.name_records[record["id"]], record["rank"])
                if module.startswith("DXT_"):
                    found[key] = {kind: [(s["offset"], s["length"]) for s in record[f"{kind}_segments"]]
                                  for kind in ("read", "write")}
                else:
                    names = report.counters[module]
                    found[key] = {name: value.item() for kind in ("counters", "fcounters")
                                  for name, value in zip(names[kind], record[kind]) if not measures_time(name)}
    assert found, f"{log}: Darshan recorded nothing"
    return found


def assert_same_counters(alone, stacked, order):
    assert alone.keys() == stacked.keys(), (f"{order}: Darshan's records differ: only alone "
                                            f"{sorted(alone.keys() - stacked.keys())}, only stacked "
                                            f"{sorted(stacked.keys() - alone.keys())}")
    differ = {key: {name: (alone[key][name], stacked[key][name]) for name in alone[key]
                    if alone[key][name] != stacked[key][name]} for key in alone if alone[key] != stacked[key]}
    assert not differ, f"{order}: Darshan's counters differ (alone, stacked): {differ}"


def without_speed(output):
    """dd's last line of statistics, without the time and speed it took."""
    return re.sub(rb"copied, .*", b"", output)


def the_log(log_dir):
    logs = glob.glob(os.path.join(log_dir, "*.darshan"))
    assert len(logs) == 1, f"{log_dir}: expected one Darshan log, found {os.listdir(log_dir)}"
    return logs[0]


def darshan_log_names(ts):
    return [info.name for info in ts.files.values() if re.search(r"\.darshan(_partial)?$", info.name)]


# ---- the programs: each prepares its files in work and returns (command, check of the trace's totals) ----

def random_file(path, size, seed):
    path.write_bytes(random.Random(seed).randbytes(size))


def dd_case(work):
    random_file(work / "in", DD_BLOCKS * 4096, 1)
    cmd = [tool("dd"), f"if={work / 'in'}", f"of={work / 'out'}", "bs=4k", f"count={DD_BLOCKS}"]

    def check(ops):
        assert ops[(str(work / "in"), "read")]["count"] == DD_BLOCKS
        assert ops[(str(work / "out"), "write")]["count"] == DD_BLOCKS
    return cmd, check


def tar_case(work):
    for i in range(5):
        (work / "tree" / f"d{i}").mkdir(parents=True)
        random_file(work / "tree" / f"d{i}" / "f", 30000 * (i + 1), i)
    for path in sorted((work / "tree").rglob("*"), reverse=True) + [work / "tree"]:
        os.utime(path, (1_600_000_000, 1_600_000_000))
    cmd = [tool("tar"), "-cf", work / "out.tar", "-C", work, "--owner=0", "--group=0", "tree"]

    def check(ops):
        assert sum(v["bytes_returned"] for (name, op), v in ops.items() if name == str(work / "out.tar")) \
            == (work / "out.tar").stat().st_size
    return cmd, check


PYTHON_SCRIPT = """
import os, sys
path = os.path.join(sys.argv[1], "py.dat")
fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
for i in range(50):
    os.pwrite(fd, bytes([i]) * 1000, i * 1000)
read = sum(len(os.pread(fd, 1000, i * 1000)) for i in range(50))
os.close(fd)
with open(path, "rb") as f:
    print(read, len(f.read()))
"""


def python_case(work):
    (work / "script.py").write_text(PYTHON_SCRIPT)
    cmd = [sys.executable, "-S", "-B", work / "script.py", work]

    def check(ops):
        assert ops[(str(work / "py.dat"), "pwrite")]["count"] == 50
        assert ops[(str(work / "py.dat"), "pread")]["count"] == 50
    return cmd, check


def stdio_case(work):
    random_file(work / "in", 40 * 4096 + 100, 2)
    cmd = [prog("stdio_copy"), work / "in", work / "copy"]

    def check(ops):
        assert ops[(str(work / "in"), "read")]["count"] == 42     # stdio's reads are inside libc: not seen
        assert (str(work / "copy"), "write") not in ops
        assert ops[(str(work / "in"), "fread")]["count"] == 42    # the last at the end of the file
        assert ops[(str(work / "copy"), "fwrite")]["count"] == 41
    return cmd, check


def stdio_ops_case(work):
    cmd = [prog("stdio_ops"), work]

    def check(ops):
        assert ops[(str(work / "a"), "fwrite")]["bytes_returned"] == 1040
        assert ops[(str(work / "a"), "fscanf")]["count"] == 1
    return cmd, check


def mpiio_case(work):
    (work / "data").mkdir()
    cmd = [tool("mpiexec"), "-n", RANKS, prog("mpi_collective"), "collective", work / "data", "1"]

    def check(ops):
        for op in ("mpi_file_write_all", "mpi_file_read_all"):
            assert ops[(str(work / "data" / "data"), op)]["count"] == RANKS, f"ioassess did not record {op}"
    return cmd, check


CASES = {"dd": dd_case, "tar": tar_case, "python": python_case, "stdio": stdio_case, "stdio_ops": stdio_ops_case,
         "mpiio": mpiio_case}


def run_beside_darshan(cmd, work, logs, preload, mpi, trace_dir=None, extra_env=None):
    """cmd with Darshan's logs going to logs (mmap logs to logs/mmap); preload in LD_PRELOAD, of
    the MPI ranks only under mpiexec (mpiexec itself is not an MPI program)."""
    logs.mkdir()
    (logs / "mmap").mkdir()
    env = {"DARSHAN_LOGPATH": str(logs), "DARSHAN_MMAP_LOGPATH": str(logs / "mmap"), "DXT_ENABLE_IO_TRACE": "1",
           **(extra_env or {})}
    if mpi:
        return run([cmd[0], "-genv", "LD_PRELOAD", preload, *cmd[1:]], cwd=work, env=env, trace_dir=trace_dir)
    return run(cmd, cwd=work, env={**env, "DARSHAN_ENABLE_NONMPI": "1"}, preload=[preload], trace_dir=trace_dir)


@pytest.mark.parametrize("name", CASES)
def test_darshan_counts_the_same_beside_ioassess_in_both_orders(name, tmp_path, darshan_runtime):
    mpi = name == "mpiio"
    darshan_lib = darshan_runtime.mpi_lib if mpi else darshan_runtime.lib
    work = tmp_path / "work"

    def fresh():
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        return CASES[name](work)

    cmd, _ = fresh()
    plain = run(cmd, cwd=work)
    assert plain.returncode == 0, plain.stderr
    plain_files = tree_digest(work)
    cmd, _ = fresh()
    alone = run_beside_darshan(cmd, work, tmp_path / "logs-alone", darshan_lib, mpi)
    assert_same_run(plain, alone, normalise=without_speed)
    counted_alone = darshan_records(tmp_path / "logs-alone")
    if mpi:
        assert sum(v.get("MPIIO_COLL_WRITES", 0) for v in counted_alone.values()) == RANKS

    for order, preload in orders(darshan_lib).items():
        cmd, check = fresh()
        logs, traces = tmp_path / f"logs-{order}", tmp_path / f"traces-{order}"
        stacked = run_beside_darshan(cmd, work, logs, preload, mpi, trace_dir=traces)
        assert_same_run(plain, stacked, normalise=without_speed)
        assert tree_digest(work) == plain_files, f"{order}: the program's files differ from the plain run's"
        assert_same_counters(counted_alone, darshan_records(logs), order)
        ts = load(traces)
        check(total_table(ts))
        assert not darshan_log_names(ts), f"{order}: ioassess recorded Darshan's own logs"


def test_darshan_logs_are_recorded_only_with_nothing_excluded(tmp_path, darshan_runtime):
    """The rule that keeps Darshan's logs out is what does it: with IOASSESS_EXCLUDE=none the
    trace has Darshan's log being written (*.darshan_partial) and its mmap log."""
    work = tmp_path / "work"
    work.mkdir()
    cmd, _ = dd_case(work)
    logs = tmp_path / "logs"
    result = run_beside_darshan(cmd, work, logs, orders(darshan_runtime.lib)["ioassess_first"], mpi=False,
                                trace_dir=tmp_path / "traces", extra_env={"IOASSESS_EXCLUDE": "none"})
    assert result.returncode == 0, result.stderr
    # Darshan's own writes of its logs bypass the recorder (they go straight to libc): the logs
    # are the files of their open calls, metadata ops.
    names = darshan_log_names(load(tmp_path / "traces", meta=True))
    assert any(name.startswith(f"{logs}/") and name.endswith(".darshan_partial") for name in names), names
    assert any(name.startswith(f"{logs / 'mmap'}/") and "_mmap-log-" in name for name in names), names


# ---- the report of the trace and the log: one job, agreeing with both ----

# Darshan's counters of reads and writes (and bytes) of each module, as ioassess's layers.
DARSHAN_COUNTERS = {
    "POSIX": ("posix", {"read": ["POSIX_READS"], "write": ["POSIX_WRITES"]}, "POSIX_BYTES_"),
    "STDIO": ("stdio", {"read": ["STDIO_READS"], "write": ["STDIO_WRITES"]}, "STDIO_BYTES_"),
    "MPI-IO": ("mpiio", {direction: [f"MPIIO_{kind}_{direction.upper()}S" for kind in ("INDEP", "COLL", "SPLIT", "NB")]
                         for direction in ("read", "write")}, "MPIIO_BYTES_"),
}
BYTES_COUNTER = {"read": "READ", "write": "WRITTEN"}
# Darshan's names of a process's standard streams: here pipes, which the recorder does not
# record (it records regular files and devices only).
STANDARD_STREAMS = {"<STDIN>", "<STDOUT>", "<STDERR>"}


def job_amounts(job, as_darshan_counts=False):
    """{(file name, layer, direction): [ops, bytes]} of a Job's reads and writes, all processes,
    ops known one by one and totals together (as the report adds them). as_darshan_counts: the
    stdio ops Darshan counts in STDIO_READS and STDIO_WRITES, those that moved bytes (not an
    fflush, nor a read at the end of the file)."""
    found = {}

    def add(files, layers, directions, ops, nbytes):
        for file, layer, direction, n, b in zip(files.tolist(), layers.tolist(), directions.tolist(),
                                                ops.tolist(), nbytes.tolist()):
            if DIRECTIONS[direction] in ("read", "write"):
                amounts = found.setdefault((job.files[file].name, LAYERS[layer], DIRECTIONS[direction]), [0, 0])
                amounts[0] += n
                amounts[1] += b
    ops, totals = job.ops, job.totals
    counted = (not as_darshan_counts) | (ops["layer"] != LAYERS.index("stdio")) | (ops["result"] > 0)
    add(ops["file"][counted], ops["layer"][counted], ops["direction"][counted],
        np.ones(np.count_nonzero(counted), np.int64), np.maximum(ops["result"][counted], 0))
    add(totals["file"], totals["layer"], totals["direction"], totals["ops"], totals["bytes"])
    return found


def darshan_unseen(stdout, work):
    """{(file name, "stdio", direction): [ops, bytes]} of the getc and putc calls stdio_ops made
    (its "unwrapped-by-darshan" lines): Darshan 3.5.0 wraps _IO_getc and _IO_putc only."""
    unseen = {}
    for line in stdout.decode().splitlines():
        if line.startswith("unwrapped-by-darshan "):
            _, file, _, reads, _, writes = line.split()
            for direction, calls in (("read", int(reads)), ("write", int(writes))):
                if calls:
                    unseen[(str(work / file), "stdio", direction)] = [calls, calls]
    return unseen


# Files the programs read with getc, which Darshan 3.5.0 does not wrap (docs/trace-format.md,
# "stdio ops"): Python reads its script so (CPython's tokenizer), after an fread of its first bytes.
READ_WITH_GETC = {"python": "script.py"}


def getc_reads(name, ts, work):
    """darshan_unseen's amounts of the fgetc ops (getc calls) of a trace on the file the case's
    program reads with getc, if any."""
    if name not in READ_WITH_GETC:
        return {}
    path = work / READ_WITH_GETC[name]
    calls = int(select(ts, path, "fgetc").sum())
    return {(str(path), "stdio", "read"): [calls, calls]} if calls else {}


def minus(amounts, unseen):
    return {key: [n - u for n, u in zip(value, unseen.get(key, [0, 0]))] for key, value in amounts.items()}


def darshan_amounts(records):
    """{(file name, layer, direction): [ops, bytes]} of the reads and writes Darshan counted,
    all ranks (darshan_records' records)."""
    found = {}
    for (module, name, _), counters in records.items():
        if module not in DARSHAN_COUNTERS:
            continue
        layer, ops_counters, bytes_prefix = DARSHAN_COUNTERS[module]
        for direction, names in ops_counters.items():
            ops = sum(counters[counter] for counter in names)
            if ops:
                amounts = found.setdefault((name, layer, direction), [0, 0])
                amounts[0] += ops
                amounts[1] += counters[bytes_prefix + BYTES_COUNTER[direction]]
    return found


def report_layers(assessment):
    """{(layer, direction): [ops, bytes]} of the report's layer table."""
    return {(layer, row["direction"]): [row[layer]["ops"], row[layer]["bytes"]]
            for row in assessment["layers"] for layer in LAYERS if row[layer] and row["direction"] != "sync"}


def summed_by_layer(amounts):
    found = {}
    for (_, layer, direction), (ops, nbytes) in amounts.items():
        total = found.setdefault((layer, direction), [0, 0])
        total[0] += ops
        total[1] += nbytes
    return found


def assert_streamed_in_order(job):
    """The merged job's ops, read in chunks of 3 (the traces' chunk by chunk, the log's joined in),
    are its ops read whole, in order of process and start."""
    whole = dict(job.ops.items())
    pieces = concatenate_columns(ALL_OP_COLUMNS, (chunk for chunk, _ in op_chunks(job, 3)))
    assert {name: pieces[name].tolist() for name in whole} == {name: column.tolist() for name, column in whole.items()}
    assert np.array_equal(np.lexsort((whole["start_s"], whole["process"])), np.arange(len(whole["size"])))
    assert np.array_equal(op_counts(job), np.bincount(whole["process"], minlength=len(job.processes)))


@pytest.mark.parametrize("name", CASES)
def test_report_of_trace_and_log_is_one_job_agreeing_with_both(name, tmp_path, darshan_runtime, ioassess):
    """`ioassess report TRACE_DIR LOG` of a stacked run is one job: per file, layer and
    direction, its ops and bytes are the trace's, and Darshan's STDIO counters where the trace
    has no stdio op (the streams of pipes, which the recorder does not record), and the trace and
    Darshan count the same wherever both see the file (stdio: the calls Darshan counts, below)."""
    mpi = name == "mpiio"
    for order, preload in orders(darshan_runtime.mpi_lib if mpi else darshan_runtime.lib).items():
        work, logs, traces = tmp_path / order / "work", tmp_path / order / "logs", tmp_path / order / "traces"
        work.mkdir(parents=True)
        cmd, _ = CASES[name](work)
        stacked = run_beside_darshan(cmd, work, logs, preload, mpi, trace_dir=traces)
        assert stacked.returncode == 0
        log = the_log(logs)
        result = ioassess("report", traces, log, "-o", tmp_path / order / "r.html",
                          "--json", tmp_path / order / "r.json")
        assert result.returncode == 0, f"{order}: {result.stderr}"
        assessment = json.loads((tmp_path / order / "r.json").read_text())
        assert [i["kind"] for i in assessment["job"]["inputs"]] == ["trace", "darshan"], assessment["job"]["inputs"]

        job, traced_job = load_job([str(traces), log]), load_job([str(traces)])
        assert_streamed_in_order(job)
        merged, traced, counted = job_amounts(job), job_amounts(traced_job), darshan_amounts(darshan_records(logs))
        assert len(job.processes) == len(traced_job.processes), f"{order}: Darshan's ranks became other processes"
        assert report_layers(assessment) == summed_by_layer(merged), f"{order}: the report is not the merged job"
        # Darshan's STDIO counters are used only when the trace has no stdio op (Python's fopen of
        # its script, MPICH's of its configuration files are stdio ops too)
        traced_layers = {*traced_job.ops["layer"].tolist(), *traced_job.totals["layer"].tolist()}
        traced_stdio = LAYERS.index("stdio") in traced_layers
        assert traced_stdio or not name.startswith("stdio"), order
        darshan_only = {key: v for key, v in counted.items() if key[1] == "stdio" and not traced_stdio}
        assert merged == {**traced, **darshan_only}, order

        unseen = {**darshan_unseen(stacked.stdout, work), **getc_reads(name, load(traces, meta=True), work)}
        as_darshan = minus(job_amounts(traced_job, as_darshan_counts=True), unseen)
        both = as_darshan.keys() & counted.keys()
        assert {key: (as_darshan[key], counted[key]) for key in both if as_darshan[key] != counted[key]} == {}, order
        only_counted = {key for key in counted.keys() - traced.keys() if key[1] != "stdio"}
        assert {file for file, _, _ in only_counted} <= STANDARD_STREAMS, \
            f"{order}: only Darshan counted {only_counted}"
        only_traced = traced.keys() - counted.keys()
        if name == "tar":
            # tar opens the files it archives with __openat_2 (glibc's fortified openat), which
            # Darshan 3.5.0 does not wrap: Darshan has no record of their reads.
            assert {file for file, _, _ in only_traced} == {str(path) for path in (work / "tree").rglob("f")}, order
        else:
            assert not only_traced, f"{order}: only the trace has {only_traced}"


# ---- stdio: the recorder's counts are Darshan's STDIO counters ----

# Darshan's STDIO counters as the recorder's stdio ops (darshan-runtime/lib/darshan-stdio.c):
# opens are fopen, fdopen and freopen that succeeded; reads and writes the calls that moved bytes
# (fflush apart, as STDIO_FLUSHES); seeks fseek, fsetpos and rewind that succeeded (not ftell).
STDIO_COUNTERS = {"STDIO_OPENS": ("fopen",), "STDIO_FLUSHES": ("fflush",), "STDIO_SEEKS": ("fseek",),
                  "STDIO_READS": ("fread", "fgets", "fgetc", "fscanf"),
                  "STDIO_WRITES": ("fwrite", "fputs", "fputc", "fprintf")}
STDIO_BYTES = {"STDIO_BYTES_READ": STDIO_COUNTERS["STDIO_READS"], "STDIO_BYTES_WRITTEN": STDIO_COUNTERS["STDIO_WRITES"]}


def stdio_as_darshan(ts, unseen):
    """{file name: {STDIO counter: value}} of a trace's stdio ops as Darshan counts them, less
    the getc and putc calls Darshan does not see (darshan_unseen)."""
    found = {}
    for op, file_id, result in zip(ts.ops["op"].tolist(), ts.ops["file_id"].tolist(), ts.ops["result"].tolist()):
        kind = OP_NAMES[op]
        moved = OP_DIRECTION[op] != "meta" and kind != "fflush"
        if OP_LAYER[op] != "stdio" or result < 0 or (moved and result == 0):
            continue
        counters = found.setdefault(ts.files[file_id].name, dict.fromkeys([*STDIO_COUNTERS, *STDIO_BYTES], 0))
        for counter, kinds in STDIO_COUNTERS.items():
            counters[counter] += kind in kinds
        for counter, kinds in STDIO_BYTES.items():
            counters[counter] += result if kind in kinds else 0
    for (name, _, direction), (calls, nbytes) in unseen.items():
        found[name]["STDIO_READS" if direction == "read" else "STDIO_WRITES"] -= calls
        found[name]["STDIO_BYTES_READ" if direction == "read" else "STDIO_BYTES_WRITTEN"] -= nbytes
    return found


def test_stdio_counts_equal_darshans_stdio_counters(tmp_path, darshan_runtime):
    """stdio_ops beside Darshan, in each order: per file, the trace's opens, reads, writes,
    flushes, seeks and bytes read and written are Darshan's STDIO counters."""
    for order, preload in orders(darshan_runtime.lib).items():
        work, logs, traces = tmp_path / order / "work", tmp_path / order / "logs", tmp_path / order / "traces"
        work.mkdir(parents=True)
        cmd, _ = stdio_ops_case(work)
        result = run_beside_darshan(cmd, work, logs, preload, mpi=False, trace_dir=traces)
        assert result.returncode == 0, result.stderr
        darshan_stdio = {name: {counter: counters[counter] for counter in [*STDIO_COUNTERS, *STDIO_BYTES]}
                         for (module, name, _), counters in darshan_records(logs).items()
                         if module == "STDIO" and name.startswith(f"{work}/")}
        ts = load(traces, meta=True)
        traced = stdio_as_darshan(ts, darshan_unseen(result.stdout, work))
        traced = {name: counters for name, counters in traced.items() if name.startswith(f"{work}/")}
        assert set(darshan_stdio) == {str(work / name) for name in ("a", "c", "d")}, order
        assert traced == darshan_stdio, order


# ---- ioassess run where a site preloads Darshan's MPI runtime ----

def test_ioassess_run_of_an_mpi_job_with_darshans_mpi_runtime_preloaded(tmp_path, darshan_runtime, ioassess):
    """What a site that preloads Darshan's MPI build gets from `ioassess run -- mpiexec ...`
    (Darshan's runtime, and so MPICH and UCX, loaded into ioassess run itself): the job's output
    and exit status, one summary line, a report of the ranks with mpiexec and its proxies apart,
    Darshan's counters as without ioassess, and `ioassess report TRACE_DIR LOG` one job with both."""
    darshan_lib = darshan_runtime.mpi_lib
    work = tmp_path / "work"
    work.mkdir()
    cmd, check = mpiio_case(work)
    plain = run(cmd, cwd=work)
    alone = run_beside_darshan(cmd, work, tmp_path / "logs-alone", darshan_lib, mpi=True)
    assert_same_run(plain, alone)

    shutil.rmtree(work / "data")
    cmd, check = mpiio_case(work)
    logs, traces = tmp_path / "logs", tmp_path / "traces"
    (logs / "mmap").mkdir(parents=True)
    env = {"LD_PRELOAD": darshan_lib, "DARSHAN_LOGPATH": str(logs), "DARSHAN_MMAP_LOGPATH": str(logs / "mmap"),
           "DXT_ENABLE_IO_TRACE": "1"}
    result = ioassess("run", "--trace-dir", traces, "--", *cmd, cwd=work, env=env)
    assert (result.returncode, result.stdout) == (0, plain.stdout.decode()), result.stderr
    assert result.stderr.splitlines()[-1].startswith("ioassess: traces of ") and result.stderr.count("ioassess:") == 1
    assert_same_counters(darshan_records(tmp_path / "logs-alone"), darshan_records(logs), "ioassess run")
    ts = load(traces)
    check(total_table(ts))
    launchers = [p.pid for p in ts.processes if p.rank < 0]
    assert launchers, "mpiexec left no trace"
    job = json.loads((traces / "assessment.json").read_text())["job"]
    assert (job["nprocs"], job["launchers"]) == (RANKS, len(launchers)), job

    result = ioassess("report", traces, the_log(logs), "-o", tmp_path / "r.html", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    merged = json.loads((tmp_path / "r.json").read_text())
    assert [i["kind"] for i in merged["job"]["inputs"]] == ["trace", "darshan"]
    assert (merged["job"]["nprocs"], merged["job"]["launchers"]) == (RANKS, len(launchers))
    assert not any("no I/O" in note for i in merged["job"]["inputs"] for note in i["notes"]), merged["job"]["inputs"]
    assert {row["direction"]: row["mpiio"]["ops"] for row in merged["layers"]} == {"read": RANKS, "write": RANKS,
                                                                                 "sync": RANKS}


# ---- SIGKILL midway: the trace and Darshan's mmap log ----

KILL_AFTER_OPS = 2000


def test_sigkill_midway_leaves_every_completed_op_and_darshans_mmap_log(tmp_path, darshan_runtime, ioassess):
    """killme, stacked, stopped after KILL_AFTER_OPS completed pwrites and killed by SIGKILL:
    the trace has each completed pwrite (and at most the one the kernel finished as the
    process stopped), Darshan wrote no log but its mmap log, whose counters say the same, and
    `ioassess report TRACE_DIR MMAP_LOG` uses the log and says that the job did not finish."""
    for order, preload in orders(darshan_runtime.lib).items():
        base = tmp_path / order
        logs, mmap_logs, traces, data, counter = (base / "logs", base / "logs" / "mmap", base / "traces",
                                                  base / "data", base / "counter")
        mmap_logs.mkdir(parents=True)
        traces.mkdir(mode=0o700)
        env = clean_env({"LD_PRELOAD": preload, "IOASSESS_TRACE_DIR": str(traces), "DARSHAN_ENABLE_NONMPI": "1",
                         "DARSHAN_LOGPATH": str(logs), "DARSHAN_MMAP_LOGPATH": str(mmap_logs),
                         "DXT_ENABLE_IO_TRACE": "1"})
        completed, pid = killme_killed(data, counter, env, KILL_AFTER_OPS)

        ts = load(traces)
        assert [p.end_ns for p in ts.processes] == [None], f"{order}: the killed process's trace looks finished"
        traced = int(select(ts, data, "pwrite").sum())
        assert completed <= traced <= completed + 1, f"{order}: {completed} pwrites completed, {traced} traced"
        assert not glob.glob(str(logs / "*.darshan*")), f"{order}: Darshan wrote a log although killed"
        mmap_log = the_log(mmap_logs)
        assert "_mmap-log-" in os.path.basename(mmap_log)
        counted = darshan_records(mmap_logs)
        assert not any(module.startswith("DXT_") for module, _, _ in counted), "Darshan's mmap log has DXT now"
        assert completed <= counted[("POSIX", str(data), 0)]["POSIX_WRITES"] <= completed + 1, order

        result = ioassess("report", traces, mmap_log, "-o", base / "r.html", "--json", base / "r.json")
        assert result.returncode == 0, f"{order}: {result.stderr}"
        assessment = json.loads((base / "r.json").read_text())
        job = assessment["job"]
        assert [(i["kind"], i["path"]) for i in job["inputs"]] == [("trace", str(traces)), ("darshan", mmap_log)]
        assert job["job_id"] == str(pid), "the mmap log's job id (the pid) is not the job's"
        assert [f["pattern"]["source"] for f in assessment["top_files"]] == ["darshan counters"]
        assert assessment["layers"][0]["posix"]["ops"] == traced
        assert any(note.startswith("The log has no end time") and "does not give the job's runtime" in note
                   for note in job["inputs"][1]["notes"]), job["inputs"]
        assert [p["pid"] for p in job["unfinished_processes"]] == [pid]
        assert any("ended without finishing" in note for note in job["notes"]), job["notes"]
        html = (base / "r.html").read_text()
        assert "ended without finishing" in html and "has no end time" in html and "runtime is unknown" not in html


def test_mmap_logs_of_a_killed_mpi_jobs_ranks_are_one_job(tmp_path, darshan_runtime, ioassess):
    """An MPI job killed midway leaves one mmap log per rank (one hash in their names): `ioassess
    report` of them is one job of both ranks with the job id of rank 0's log, also with the trace."""
    data, logs, traces = tmp_path / "data", tmp_path / "logs", tmp_path / "traces"
    data.mkdir()
    (logs / "mmap").mkdir(parents=True)
    traces.mkdir(mode=0o700)
    preload = orders(darshan_runtime.mpi_lib)["as_ioassess_run_orders"]
    env = clean_env({"IOASSESS_TRACE_DIR": str(traces), "DARSHAN_LOGPATH": str(logs),
                     "DARSHAN_MMAP_LOGPATH": str(logs / "mmap")})
    proc = subprocess.Popen([tool("mpiexec"), "-genv", "LD_PRELOAD", preload, "-n", str(RANKS),
                             prog("mpi_collective"), "reopen", data], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:   # every rank has opened each of its 50 files once
        wait_until(lambda: len(os.listdir(data)) >= RANKS * 50 + 1, "all reopen files", proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    rank_logs = sorted(glob.glob(str(logs / "mmap" / "*.darshan")), key=lambda name: name[-9:])
    assert [re.search(r"-(\d+)\.darshan$", name).group(1) for name in rank_logs] == [str(r) for r in range(RANKS)]
    assert len({re.search(r"_mmap-log-(\d+)-", name).group(1) for name in rank_logs}) == 1
    with darshan.DarshanReport(rank_logs[0], read_all=False) as report:
        rank0_job_id = str(report.metadata["job"]["jobid"])

    result = ioassess("report", *rank_logs, "-o", tmp_path / "d.html", "--json", tmp_path / "d.json")
    assert result.returncode == 0, result.stderr
    job = json.loads((tmp_path / "d.json").read_text())["job"]
    assert (job["nprocs"], job["job_id"], [i["path"] for i in job["inputs"]]) == (RANKS, rank0_job_id, rank_logs)
    counted = darshan_amounts({key: counters for log in rank_logs for key, counters in log_records(log).items()})

    result = ioassess("report", traces, *rank_logs, "-o", tmp_path / "r.html", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    merged = json.loads((tmp_path / "r.json").read_text())
    assert (merged["job"]["nprocs"], merged["job"]["job_id"]) == (RANKS, rank0_job_id)
    traced = job_amounts(load_job([str(traces)]))
    written = [(key, traced.get(key, (0, 0))[0], ops) for key, (ops, _) in counted.items()
               if key[1:] == ("mpiio", "write")]
    assert written and all(0 <= darshan_ops - trace_ops <= RANKS for _, trace_ops, darshan_ops in written), written


# ---- the access patterns' evidence: counted from a trace as Darshan counts ----

# Darshan's POSIX counters that report/access_patterns.py computes from the ops, and its names.
PATTERN_COUNTERS = {"POSIX_READS": "reads", "POSIX_WRITES": "writes", "POSIX_CONSEC_READS": "consecutive_reads",
                    "POSIX_CONSEC_WRITES": "consecutive_writes", "POSIX_SEQ_READS": "sequential_reads",
                    "POSIX_SEQ_WRITES": "sequential_writes", "POSIX_BYTES_READ": "bytes_read",
                    "POSIX_BYTES_WRITTEN": "bytes_written", "POSIX_MAX_BYTE_READ": "max_byte_read",
                    "POSIX_MAX_BYTE_WRITTEN": "max_byte_written", "POSIX_MEM_NOT_ALIGNED": "mem_not_aligned",
                    "POSIX_FILE_NOT_ALIGNED": "file_not_aligned"}
SMALL_BINS = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M")


def test_fleet_ingest_of_darshans_logs_has_the_numbers_of_their_reports(tmp_path, darshan_runtime, ioassess):
    """Logs Darshan's runtime wrote (alone, no recorder) for every program here, in a
    DARSHAN_LOGPATH-like tree: `ioassess fleet ingest` takes each, with the numbers of
    `ioassess report` on it."""
    tree = tmp_path / "logpath" / "2026" / "11" / "28"
    tree.mkdir(parents=True)
    for name, case in CASES.items():
        mpi = name == "mpiio"
        work = tmp_path / name / "work"
        work.mkdir(parents=True)
        cmd, _ = case(work)
        result = run_beside_darshan(cmd, work, tmp_path / name / "logs", darshan_runtime.mpi_lib if mpi
                                    else darshan_runtime.lib, mpi)
        assert result.returncode == 0, describe(result)
        shutil.move(the_log(tmp_path / name / "logs"), tree / f"{name}.darshan")
    result = ioassess("fleet", "ingest", "--store", tmp_path / "store", tmp_path / "logpath")
    assert result.returncode == 0 and f"added {len(CASES)}, rejected 0" in result.stderr, result.stderr
    assert_ingested_as_reported(tmp_path / "store", sorted(tree.iterdir()))


def workload_case(work, *options):
    random_file(work / "data", 4 << 20, 3)
    return [ioassess.site.training.workload_program_path(), "--file", work / "data", "--mem-buffer", "1m",
            "--seed", "5", *map(str, options)]


PATTERN_CASES = {
    "random_unaligned_reads": lambda work: workload_case(work, "--op", "read", "--size", 3000, "--file-layout", "rnd",
                                                         "--mem-layout", "rnd", "--repeats", 400),
    "sequential_writes": lambda work: workload_case(work, "--op", "write", "--size", 1500, "--repeats", 400),
    "python_rewrite_reread": lambda work: python_case(work)[0],
}


@pytest.mark.parametrize("name", PATTERN_CASES)
def test_access_pattern_counts_of_a_trace_are_darshans(name, tmp_path, darshan_runtime):
    """The counters the access-pattern findings use, computed from the recorder's trace
    (access_patterns.counted_from_ops), equal Darshan's own POSIX counters of the same run:
    reads, writes, consecutive and sequential ones (restarting at each open), bytes, highest
    offsets, requests of at most 1 MiB, buffers and offsets not aligned."""
    from ioassess.report.access_patterns import RequestStreams, counted_from_ops
    from ioassess.report.passes import Chunk, chunks_of, run_passes
    work = tmp_path / "work"
    work.mkdir()
    cmd = PATTERN_CASES[name](work)
    logs, traces = tmp_path / "logs", tmp_path / "traces"
    stacked = run_beside_darshan(cmd, work, logs, orders(darshan_runtime.lib)["as_ioassess_run_orders"], False,
                                 trace_dir=traces)
    assert stacked.returncode == 0, stacked.stderr
    counted = {key: value for key, value in darshan_records(logs).items()
               if key[0] == "POSIX" and key[1].startswith(str(work))}
    assert counted
    job = load_job([str(traces)])
    # the counts take no time: the ops' per-op classes are left at 0
    chunks = (Chunk(chunk.ops, {name: np.zeros(len(chunk)) for name in ("lost_s", "call_s")}, chunk.first)
              for chunk in chunks_of(job))
    ours = counted_from_ops(job, run_passes({"streams": RequestStreams(job)}, chunks)["streams"].result())
    for (_, file_name, _), darshan_counts in counted.items():
        (row,) = [r for r in range(len(ours["file"])) if job.files[ours["file"][r]].name == file_name
                  and ours["layer"][r] == LAYERS.index("posix")]
        assert darshan_counts["POSIX_FILE_ALIGNMENT"] == ours["file_alignment"][row]
        expected = {name: darshan_counts[counter] for counter, name in PATTERN_COUNTERS.items()}
        expected["small_reads"] = sum(darshan_counts[f"POSIX_SIZE_READ_{b}"] for b in SMALL_BINS)
        expected["small_writes"] = sum(darshan_counts[f"POSIX_SIZE_WRITE_{b}"] for b in SMALL_BINS)
        got = {name: int(ours[name][row]) for name in expected}
        # no request: Darshan's highest offset is 0, ours -1 (none)
        for direction, ops in (("read", "reads"), ("written", "writes")):
            if not got[ops]:
                got[f"max_byte_{direction}"] = expected[f"max_byte_{direction}"]
        assert got == expected, (file_name, {k: (got[k], expected[k]) for k in got if got[k] != expected[k]})
