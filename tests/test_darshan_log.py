"""Reading Darshan logs into a Job: on every log PyDarshan ships, checked against what PyDarshan
itself reads from them; on copies of those logs rewritten by darshan-util's own log writer with
one thing changed (module flagged partial, no end time, DXT segments dropped as a full DXT
buffer drops them, high-resolution times, bytes that are not UTF-8); and on damaged files."""
import collections
import contextlib
import gzip
import itertools
import json
import math
import os
import re
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

darshan = pytest.importorskip("darshan")
import darshan.backend.cffi_backend as pydarshan_backend  # noqa: E402
from darshan.log_utils import get_log_path  # noqa: E402

from ioassess.inputs.darshan_log import NOTE_LIST_LIMIT, DarshanLogError, read_darshan_log  # noqa: E402
from ioassess.inputs import darshan_util as binding  # noqa: E402
from ioassess.inputs.darshan_util import MAX_RECORD_BYTES  # noqa: E402
from ioassess.units import bytes_text  # noqa: E402
from recorder_helpers import clean_env, describe, run_measured  # noqa: E402
from ioassess.inputs.load import LoadError, load_job  # noqa: E402
from ioassess.inputs.job import (DARSHAN_SIZE_BINS, DIRECTIONS, LAYERS, META, NO_IO_NOTE, OP_COLUMNS,  # noqa: E402
                                 SIZE_BIN_COLUMNS, TOTAL_COLUMNS, JobFile, with_own_file_systems)

PACKAGE_DIR = os.path.dirname(darshan.__file__)
SHIPPED_LOGS = sorted(p for d in ("tests/input", "examples/example_logs")
                      for p in (os.path.join(PACKAGE_DIR, d, n) for n in os.listdir(os.path.join(PACKAGE_DIR, d)))
                      if p.endswith(".darshan"))
DXT_LOGS = ("dxt.darshan", "ior_hdf5_example.darshan", "sample-dxt-simple.darshan")
COUNTER_LOGS = ("sample-badost.darshan", "sample-goodost.darshan", "sample.darshan", "noposixopens.darshan",
                "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan")
LAYER_OF_MODULE = {"POSIX": "posix", "MPI-IO": "mpiio", "STDIO": "stdio"}
READ, WRITE = DIRECTIONS.index("read"), DIRECTIONS.index("write")


def shipped(name):
    return get_log_path(name)


def undamaged_notes(job):
    """The notes of a Job's first input other than on damaged counter values (dxt.darshan has
    negative POSIX metadata times)."""
    return tuple(note for note in job.inputs[0].notes if not note.startswith("Damaged counter values"))


def io_rows(totals):
    """The rows of a totals table that are reads, writes or syncs (not metadata calls)."""
    return totals["direction"] != META


@pytest.fixture
def reference():
    """reference(path): PyDarshan's own reading of a log, its report with every module read.
    The reports are closed at the end of the test: a report left to the garbage collector can
    deadlock the process (its __del__ calls into cffi, whose lock the collection may be holding)."""
    with contextlib.ExitStack() as reports:
        yield lambda path: reports.enter_context(darshan.DarshanReport(path, read_all=True))


def counter_sums(report, module):
    """PyDarshan's {(direction, counter kind): sum over records} of a module."""
    names, fnames = pydarshan_backend.counter_names(module), pydarshan_backend.fcounter_names(module)
    counters = np.array([r["counters"] for r in report.records[module]._records])
    fcounters = np.array([r["fcounters"] for r in report.records[module]._records])
    prefix = module.replace("-", "")

    def column(name):
        return counters[:, names.index(name)] if name in names else fcounters[:, fnames.index(name)]

    sums = {}
    for direction, verb, past in ((READ, "READ", "READ"), (WRITE, "WRITE", "WRITTEN")):
        if module == "MPI-IO":
            ops = sum(column(f"MPIIO_{kind}_{verb}S") for kind in ("INDEP", "COLL", "SPLIT", "NB"))
            histogram = [f"MPIIO_SIZE_{verb}_AGG_" in n for n in names]
        else:
            ops = column(f"{prefix}_{verb}S")
            histogram = [n.startswith(f"{prefix}_SIZE_{verb}_") for n in names]
        sums[direction, "ops"] = int(ops.sum())
        sums[direction, "bytes"] = int(column(f"{prefix}_BYTES_{past}").sum())
        sums[direction, "seconds"] = float(np.maximum(column(f"{prefix}_F_{verb}_TIME"), 0).sum())
        sums[direction, "histogram"] = int(counters[:, histogram].sum())
    return sums


def table_sum(table, column, layer, direction):
    chosen = (table["layer"] == LAYERS.index(layer)) & (table["direction"] == direction)
    return table[column][chosen].sum()


# --- every shipped log -----------------------------------------------------------------------

@pytest.mark.parametrize("path", SHIPPED_LOGS, ids=os.path.basename)
def test_every_shipped_log_gives_a_well_formed_job(path):
    job = read_darshan_log(path)
    for table, columns in ((job.ops, OP_COLUMNS), (job.totals, TOTAL_COLUMNS), (job.size_bins, SIZE_BIN_COLUMNS)):
        assert set(table) == set(columns)
        assert {name: table[name].dtype for name in columns} == {name: np.dtype(t) for name, t in columns.items()}
        assert len({len(column) for column in table.values()}) == 1
    ops = job.ops
    assert np.all((0 <= ops["process"]) & (ops["process"] < len(job.processes)))
    assert np.all((0 <= ops["file"]) & (ops["file"] < len(job.files)))
    assert np.all(np.lexsort((ops["start_s"], ops["process"])) == np.arange(len(ops["size"])))
    assert np.all(ops["result"] == ops["size"]) and np.all(ops["duration_s"] >= 0)
    assert np.all(ops["buffer"] == 0) and np.all(ops["tid"] == 0)
    for table in (job.totals, job.size_bins):
        assert np.all((-1 <= table["process"]) & (table["process"] < len(job.processes)))
        assert np.all((0 <= table["file"]) & (table["file"] < len(job.files)))
    assert np.all(job.totals["ops"] > 0) and np.all(job.totals["seconds"] >= 0)
    used = np.union1d(ops["file"], job.totals["file"])
    assert np.array_equal(used, np.arange(len(job.files))), "every file is used by a row"
    assert [f.name for f in job.files] == sorted(f.name for f in job.files)
    assert [p.rank for p in job.processes] == sorted({p.rank for p in job.processes})
    assert all(p.source == "darshan" and p.pid == 0 and math.isnan(p.start_s) for p in job.processes)
    [darshan_input] = job.inputs
    assert darshan_input.path == path and darshan_input.kind == "darshan"
    assert "metadata" in darshan_input.tiers
    assert ("ops" in darshan_input.tiers) == bool(len(ops["size"]))
    assert ("totals" in darshan_input.tiers) == bool(np.any(io_rows(job.totals)))


@pytest.mark.parametrize("path", SHIPPED_LOGS, ids=os.path.basename)
def test_job_facts_are_what_pydarshan_reads(path, reference):
    job = read_darshan_log(path)
    report = reference(path)
    facts = report.metadata
    record = facts["job"]
    assert job.job_id == str(record["jobid"])
    assert job.nprocs == record["nprocs"]
    assert job.start_epoch_s == record["start_time_sec"] + record["start_time_nsec"] * 1e-9
    assert job.runtime_s == pytest.approx(record["run_time"])
    assert job.cmdline == facts["exe"].strip()
    assert job.exe == facts["exe"].split(" ")[0]
    assert job.user == f"uid {record['uid']}"
    assert sorted(job.mounts) == sorted(report.mounts)
    # sample.darshan and example.darshan: a negative STDIO write time; dxt.darshan: negative
    # POSIX metadata times in 5 records
    negative_time = os.path.basename(path) in ("sample.darshan", "example.darshan", "dxt.darshan")
    assert len(job.inputs[0].notes) == (1 if negative_time else 0)


@pytest.mark.parametrize("name", DXT_LOGS)
def test_dxt_segments_become_the_ops(name, reference):
    path = shipped(name)
    job = read_darshan_log(path)
    report = reference(path)
    expected = []
    for module, layer in (("DXT_POSIX", "posix"), ("DXT_MPIIO", "mpiio")):
        for record in report.records[module]._records if module in report.records else []:
            for direction, key in ((READ, "read_segments"), (WRITE, "write_segments")):
                for s in record[key]:
                    expected.append((layer, report.name_records[record["id"]], record["rank"], direction, s["offset"],
                                     s["length"], s["start_time"], s["end_time"] - s["start_time"]))
    ops = job.ops
    got = [(LAYERS[layer], job.files[file].name, job.processes[process].rank, direction, offset, size, start,
            duration)
           for layer, file, process, direction, offset, size, start, duration in
           zip(ops["layer"].tolist(), ops["file"].tolist(), ops["process"].tolist(), ops["direction"].tolist(),
               ops["offset"].tolist(), ops["size"].tolist(), ops["start_s"].tolist(), ops["duration_s"].tolist())]
    assert len(got) == len(expected) > 0
    assert sorted(got) == sorted(expected)
    hostnames = {r["rank"]: r["hostname"] for m in ("DXT_POSIX", "DXT_MPIIO") if m in report.records
                 for r in report.records[m]._records}
    # the ranks of the DXT records; other processes are ranks whose counters hold only metadata calls
    assert {job.processes[i].rank: job.processes[i].hostname for i in set(ops["process"].tolist())} == hostnames


@pytest.mark.parametrize("name", DXT_LOGS)
def test_complete_dxt_accounts_for_every_counted_byte(name, reference):
    """DXT is complete in the shipped DXT logs: its ops add up to the POSIX and MPI-IO counters,
    so those layers give no totals (no double counting); STDIO, never traced, does."""
    path = shipped(name)
    job = read_darshan_log(path)
    report = reference(path)
    assert not any("truncated" in note for note in job.inputs[0].notes)
    for module, layer in (("POSIX", "posix"), ("MPI-IO", "mpiio")):
        if module not in report.records:
            continue
        sums = counter_sums(report, module)
        for direction in (READ, WRITE):
            assert table_sum(job.ops, "size", layer, direction) == sums[direction, "bytes"]
            assert np.count_nonzero((job.ops["layer"] == LAYERS.index(layer)) & (job.ops["direction"] == direction)) \
                == sums[direction, "ops"]
            assert table_sum(job.ops, "duration_s", layer, direction) == pytest.approx(sums[direction, "seconds"],
                                                                                        rel=1e-4, abs=1e-9)
        assert not np.any((job.totals["layer"] == LAYERS.index(layer)) & io_rows(job.totals))
    if "STDIO" in report.records:
        sums = counter_sums(report, "STDIO")
        for direction in (READ, WRITE):
            assert table_sum(job.totals, "bytes", "stdio", direction) == sums[direction, "bytes"]


@pytest.mark.parametrize("name", COUNTER_LOGS)
def test_counters_only_logs_give_totals_and_size_bins_that_match_the_counters(name, reference):
    path = shipped(name)
    job = read_darshan_log(path)
    report = reference(path)
    assert len(job.ops["size"]) == 0 and job.inputs[0].tiers == ("totals", "metadata")
    for module, layer in LAYER_OF_MODULE.items():
        if module not in report.records:
            assert not np.any(job.totals["layer"] == LAYERS.index(layer))
            continue
        sums = counter_sums(report, module)
        for direction in (READ, WRITE):
            assert table_sum(job.totals, "ops", layer, direction) == sums[direction, "ops"]
            assert table_sum(job.totals, "bytes", layer, direction) == sums[direction, "bytes"]
            assert table_sum(job.totals, "seconds", layer, direction) == pytest.approx(sums[direction, "seconds"])
            binned = table_sum(job.size_bins, "ops", layer, direction)
            assert binned == (0 if layer == "stdio" else sums[direction, "histogram"])


def test_size_bins_are_darshans_histogram_bins_of_their_totals_rows():
    job = read_darshan_log(shipped("sample-badost.darshan"))
    bins, totals = job.size_bins, job.totals
    assert set(zip(bins["size_low"].tolist(), bins["size_high"].tolist())) <= set(DARSHAN_SIZE_BINS)
    def keys(table):
        return list(zip(*(table[name].tolist() for name in ("process", "file", "layer", "direction"))))

    binned = {}
    for key, ops in zip(keys(bins), bins["ops"].tolist()):
        binned[key] = binned.get(key, 0) + ops
    stdio = LAYERS.index("stdio")
    assert binned == {key: ops for key, ops in zip(keys(totals), totals["ops"].tolist())
                      if key[2] != stdio and key[3] != META}
    # IOR wrote 4 MiB transfers: every POSIX write falls in (1 MiB, 4 MiB], the bin's upper edge included
    posix = (totals["layer"] == LAYERS.index("posix")) & io_rows(totals)
    assert np.all(totals["bytes"][posix] == totals["ops"][posix] * (4 << 20))
    posix = bins["layer"] == LAYERS.index("posix")
    assert set(zip(bins["size_low"][posix].tolist(), bins["size_high"][posix].tolist())) == {(1 << 20, 4 << 20)}


def test_slowest_op_comes_from_posix_counters_and_is_unknown_for_stdio():
    job = read_darshan_log(shipped("sample-goodost.darshan"))
    totals = job.totals
    posix = (totals["layer"] == LAYERS.index("posix")) & io_rows(totals)
    assert np.all(totals["max_op_seconds"][posix] > 0) and np.all(totals["max_op_size"][posix] == 8 << 20)
    stdio = (totals["layer"] == LAYERS.index("stdio")) & io_rows(totals)
    assert np.all(np.isnan(totals["max_op_seconds"][stdio])) and np.all(totals["max_op_size"][stdio] == -1)


@pytest.mark.parametrize("name", ("sample-goodost.darshan", "sample-badost.darshan", "sample.darshan"))
def test_lustre_striping_and_mounts(name, reference):
    path = shipped(name)
    job = read_darshan_log(path)
    report = reference(path)
    striping = {report.name_records[r["id"]]: r["components"][0] for r in report.records["LUSTRE"]._records}
    lustre_files = [f for f in job.files if f.name in striping]
    assert lustre_files
    for f in lustre_files:
        component = striping[f.name]
        assert (f.stripe_size, f.stripe_count) == (component["counters"][0], component["counters"][1])
        assert f.osts == tuple(component["ost_ids"].tolist())
        assert f.fs_type == "lustre" and f.name.startswith(f.mount_point + "/")
    for f in job.files:
        if f.name not in striping:
            assert (f.stripe_size, f.stripe_count, f.osts) == (-1, -1, ())


def test_goodost_and_badost_striping_facts():
    good = read_darshan_log(shipped("sample-goodost.darshan"))
    data = [f for f in good.files if f.stripe_count > 0]
    assert len(data) == 48 and all(f.stripe_size == 1 << 20 and f.stripe_count == 1 and len(f.osts) == 1
                                   for f in data)
    files_per_ost = collections.Counter(f.osts for f in data)
    assert len(files_per_ost) == 24 and set(files_per_ost.values()) == {2}, "48 files spread evenly over 24 OSTs"
    bad = read_darshan_log(shipped("sample-badost.darshan"))
    data = [f for f in bad.files if f.stripe_count > 0]
    assert len(data) == 2048 and {f.stripe_count for f in data} == {1}
    shared = read_darshan_log(shipped("sample.darshan"))
    [striped] = [f for f in shared.files if f.stripe_count > 0]
    assert striped.stripe_count == 24 and sorted(striped.osts) == list(range(24))


def test_mount_points_match_whole_path_components_longest_first():
    job = read_darshan_log(shipped("sample-goodost.darshan"))
    for f in job.files:
        candidates = [m for m, _ in job.mounts if f.name == m or f.name.startswith(m.rstrip("/") + "/")]
        assert f.mount_point == (max(candidates, key=len) if candidates else "")
        assert f.fs_type == dict(job.mounts).get(f.mount_point, "")


def test_processes_are_the_ranks_with_io_or_named_by_shared_records_which_are_process_minus_one():
    job = read_darshan_log(shipped("ior_hdf5_example.darshan"))
    assert [(p.rank, p.hostname) for p in job.processes] == [(r, "nid00097") for r in range(4)]
    badost = read_darshan_log(shipped("sample-badost.darshan"))
    assert [p.rank for p in badost.processes] == list(range(2048))
    assert all(p.hostname == "" for p in badost.processes)
    shared = read_darshan_log(shipped("noposix.darshan"))   # every record shared: only the named ranks
    records = shared.darshan_records
    named = set(records["fastest_rank"].tolist()) | set(records["slowest_rank"].tolist())
    assert np.all(records["rank"] == -1) and len(named) > 1
    assert [p.rank for p in shared.processes] == sorted(named) and np.all(shared.totals["process"] == -1)
    assert shared.nprocs == 512


def test_negative_counter_values_are_taken_as_zero_and_noted():
    """sample.darshan (Darshan 3.1.3) has STDIO_F_WRITE_TIME = -2662.7 s on <STDERR>."""
    job = read_darshan_log(shipped("sample.darshan"))
    [note] = job.inputs[0].notes
    assert note == ("Damaged counter values, negative times (a bug of some older Darshan versions, or damaged "
                    "data): STDIO_F_WRITE_TIME in 1 record (<STDERR>); they are taken as 0.")
    assert np.all(job.totals["seconds"] >= 0)


# --- copies of shipped logs, rewritten by darshan-util's log writer ---------------------------

WRITER_DECLARATIONS = """
struct darshan_job {
    int64_t uid; int64_t start_time_sec; int64_t start_time_nsec; int64_t end_time_sec; int64_t end_time_nsec;
    int64_t nprocs; int64_t jobid; char metadata[1024];
};
struct darshan_mnt_info { char mnt_type[3015]; char mnt_path[3015]; };
struct darshan_mod_info { char *name; int len; int ver; int idx; int partial_flag; };
void *darshan_log_open(const char *name);
void *darshan_log_create(const char *name, int comp_type, int partial_flag);
void darshan_log_close(void *fd);
int darshan_log_get_job(void *fd, struct darshan_job *job);
int darshan_log_get_job_runtime(void *fd, struct darshan_job job, double *runtime);
int darshan_log_put_job(void *fd, struct darshan_job *job);
int darshan_log_get_exe(void *fd, char *buf);
int darshan_log_put_exe(void *fd, char *buf);
int darshan_log_get_mounts(void *fd, struct darshan_mnt_info **mounts, int *count);
int darshan_log_put_mounts(void *fd, struct darshan_mnt_info *mounts, int count);
int darshan_log_get_namehash(void *fd, void **hash);
int darshan_log_put_namehash(void *fd, void *hash);
void darshan_log_get_modules(void *fd, struct darshan_mod_info **modules, int *count);
int darshan_log_get_mod(void *fd, int module, void *buf, int size);
int darshan_log_put_mod(void *fd, int module, void *buf, int size, int ver);
"""
DXT_HEADER = np.dtype([("id", "<u8"), ("rank", "<i8"), ("shared_record", "<i8"), ("hostname", "S64"),
                       ("write_count", "<i8"), ("read_count", "<i8")])
DXT_SEGMENT = np.dtype([("offset", "<i8"), ("length", "<i8"), ("start", "<f8"), ("end", "<f8")])


@pytest.fixture(scope="module")
def darshan_util():
    import cffi   # PyDarshan depends on it
    ffi = cffi.FFI()
    ffi.cdef(WRITER_DECLARATIONS)
    libraries = [os.path.join(PACKAGE_DIR, os.pardir, "darshan.libs", n)
                 for n in os.listdir(os.path.join(PACKAGE_DIR, os.pardir, "darshan.libs"))
                 if n.startswith("libdarshan-util")]
    return ffi, ffi.dlopen(libraries[0])


def rewritten_log(darshan_util, out, name, job=None, exe=None, mounts=None, partial=(), modules=None, added=None):
    """A copy of the shipped log `name` written to the new file `out` by darshan-util (in its
    current format, 3.41) with the job record fields, command line, mount table, partial flags
    or module data changed (modules={module: edit(bytes) -> bytes}), or modules added
    (added={module: (index, version, bytes)}); out. The copy keeps the job's runtime: the
    shipped logs' older formats count whole seconds plus one."""
    ffi, lib = darshan_util
    source = lib.darshan_log_open(shipped(name).encode())
    record = ffi.new("struct darshan_job *")
    assert lib.darshan_log_get_job(source, record) == 0
    runtime = ffi.new("double *")
    lib.darshan_log_get_job_runtime(source, record[0], runtime)
    record.end_time_sec = record.start_time_sec + int(runtime[0])
    exe_buffer = ffi.new("char[]", 4096)
    lib.darshan_log_get_exe(source, exe_buffer)
    mount_table, n_mounts = ffi.new("struct darshan_mnt_info **"), ffi.new("int *")
    assert lib.darshan_log_get_mounts(source, mount_table, n_mounts) == 0
    names = ffi.new("void **")
    assert lib.darshan_log_get_namehash(source, names) == 0
    infos, n_infos = ffi.new("struct darshan_mod_info **"), ffi.new("int *")
    lib.darshan_log_get_modules(source, infos, n_infos)
    module_data = {}
    buffer = ffi.new("char[]", 1 << 24)
    for info in infos[0][0:n_infos[0]]:
        size = lib.darshan_log_get_mod(source, info.idx, buffer, len(buffer))
        assert 0 <= size < len(buffer)
        module_data[ffi.string(info.name).decode()] = (info.idx, info.ver, ffi.buffer(buffer, size)[:])
    module_data.update(added or {})
    for field, value in (job or {}).items():
        setattr(record, field, value)
    if exe is not None:
        exe_buffer = ffi.new("char[]", exe)
    if mounts is not None:
        new_table = ffi.new("struct darshan_mnt_info[]", len(mounts))
        for entry, (path, fs_type) in zip(new_table, mounts):
            entry.mnt_path, entry.mnt_type = path, fs_type
        mount_table[0], n_mounts[0] = new_table, len(mounts)
    flags = sum(1 << module_data[m][0] for m in partial)
    target = lib.darshan_log_create(str(out).encode(), 0, flags)
    assert lib.darshan_log_put_job(target, record) == 0
    assert lib.darshan_log_put_exe(target, exe_buffer) == 0
    assert lib.darshan_log_put_mounts(target, mount_table[0], n_mounts[0]) == 0
    assert lib.darshan_log_put_namehash(target, names[0]) == 0
    for module, (index, version, data) in sorted(module_data.items(), key=lambda item: item[1][0]):
        data = (modules or {}).get(module, lambda raw: raw)(data)
        assert lib.darshan_log_put_mod(target, index, ffi.from_buffer(bytearray(data)), len(data), version) == 0
    lib.darshan_log_close(target)
    lib.darshan_log_close(source)
    return out


@pytest.fixture
def rewrite(darshan_util, tmp_path):
    """rewrite(name, job=..., exe=..., mounts=..., partial=(modules), modules={module: edit(bytes)})
    -> path of a copy of a shipped log rewritten by rewritten_log."""
    made = itertools.count()

    def rewrite(name, **changes):
        # each a new file: darshan-util makes it 0400
        return rewritten_log(darshan_util, str(tmp_path / f"rewritten-{next(made)}-{name}"), name, **changes)

    return rewrite


def dxt_records(raw):
    """A DXT module's raw data as [(header, segments)], segments the writes then the reads."""
    records, position = [], 0
    while position < len(raw):
        header = np.frombuffer(raw, DXT_HEADER, 1, position).copy()
        position += DXT_HEADER.itemsize
        n = int(header["write_count"][0] + header["read_count"][0])
        records.append((header, np.frombuffer(raw, DXT_SEGMENT, n, position).copy()))
        position += n * DXT_SEGMENT.itemsize
    return records


def drop_last_writes(rank, n_dropped, dropped):
    """A DXT module edit that drops the last n writes of the first record of `rank` with more
    than n writes, the way DXT drops segments once its buffer is full; the dropped segments go
    to `dropped`."""
    def edit(raw):
        out, done = [], False
        for header, segments in dxt_records(raw):
            if header["rank"][0] == rank and header["write_count"][0] > n_dropped and not done:
                writes = int(header["write_count"][0])
                dropped.extend(segments[writes - n_dropped:writes])
                segments = np.concatenate([segments[:writes - n_dropped], segments[writes:]])
                header["write_count"] -= n_dropped
                done = True
            out += [header.tobytes(), segments.tobytes()]
        return b"".join(out)
    return edit


def test_a_rewritten_copy_reads_as_the_original(rewrite):
    original = read_darshan_log(shipped("ior_hdf5_example.darshan"))
    copy = read_darshan_log(rewrite("ior_hdf5_example.darshan"))
    for table in ("ops", "totals", "size_bins"):
        for name, column in getattr(original, table).items():
            assert np.array_equal(getattr(copy, table)[name], column, equal_nan=column.dtype.kind == "f")
    assert copy.files == original.files and copy.processes == original.processes
    assert copy.inputs[0].notes == ()


def test_partial_module_is_read_and_noted(rewrite):
    job = read_darshan_log(rewrite("sample-goodost.darshan", partial=("POSIX",)))
    assert len(job.totals["ops"]) == len(read_darshan_log(shipped("sample-goodost.darshan")).totals["ops"])
    [note] = job.inputs[0].notes
    assert "POSIX module ran out of memory" in note and "partial" in note


def test_unfinished_job_has_no_end_and_a_note(rewrite):
    job = read_darshan_log(rewrite("sample-goodost.darshan", job={"end_time_sec": 0, "end_time_nsec": 0}))
    assert math.isnan(job.end_epoch_s) and math.isnan(job.runtime_s)
    [note] = job.inputs[0].notes
    assert note.startswith("The log has no end time")
    assert len(job.totals["ops"]) > 0


def test_high_resolution_start_and_end_times(rewrite):
    job = read_darshan_log(rewrite("ior_hdf5_example.darshan",
                                   job={"start_time_nsec": 250_000_000, "end_time_sec": 1594155461,
                                        "end_time_nsec": 750_000_000}))
    assert job.start_epoch_s == pytest.approx(1594155460.25, abs=1e-6)
    assert job.end_epoch_s == pytest.approx(1594155461.75, abs=1e-6)


def test_truncated_dxt_keeps_its_ops_and_counts_the_rest_from_the_counters(rewrite):
    """ior_hdf5_example's POSIX counters are one shared record (rank -1) over 4 ranks' DXT."""
    original = read_darshan_log(shipped("ior_hdf5_example.darshan"))
    dropped = []
    job = read_darshan_log(rewrite("ior_hdf5_example.darshan",
                                   modules={"DXT_POSIX": drop_last_writes(rank=3, n_dropped=2, dropped=dropped)}))
    dropped = np.array(dropped, DXT_SEGMENT)
    assert len(job.ops["size"]) == len(original.ops["size"]) - 2
    posix_write_rows = (job.totals["layer"] == LAYERS.index("posix")) & (job.totals["direction"] == WRITE)
    assert np.count_nonzero(posix_write_rows) == 1
    row = np.flatnonzero(posix_write_rows)[0]
    assert job.totals["process"][row] == -1
    assert job.files[job.totals["file"][row]].name == "/global/cscratch1/sd/ssnyder/test123.h5"
    assert job.totals["ops"][row] == 2 and job.totals["bytes"][row] == dropped["length"].sum()
    assert job.totals["seconds"][row] == pytest.approx((dropped["end"] - dropped["start"]).sum(), abs=1e-9)
    bins = (job.size_bins["layer"] == LAYERS.index("posix")) & (job.size_bins["direction"] == WRITE)
    assert job.size_bins["ops"][bins].sum() == 2
    [note] = job.inputs[0].notes
    assert note.startswith("The DXT_POSIX trace is truncated")
    assert "lacks 2 of the 23 operations the POSIX counters count in 1 file, " in note
    assert note.endswith("test123.h5 (all ranks: 2 missing); those operations are assessed from the counters.")
    assert not np.any((job.totals["layer"] == LAYERS.index("mpiio")) & io_rows(job.totals)), \
        "DXT_MPIIO is still complete"


def test_truncated_dxt_of_a_per_rank_record(rewrite):
    """dxt.darshan's POSIX counters are per rank (one process): the remainder is rank 0's."""
    original = read_darshan_log(shipped("dxt.darshan"))
    dropped = []
    job = read_darshan_log(rewrite("dxt.darshan", modules={"DXT_POSIX": drop_last_writes(0, 3, dropped)}))
    dropped = np.array(dropped, DXT_SEGMENT)
    assert len(job.ops["size"]) == len(original.ops["size"]) - 3
    posix = (job.totals["layer"] == LAYERS.index("posix")) & io_rows(job.totals)
    assert job.totals["ops"][posix].tolist() == [3] and job.totals["process"][posix].tolist() == [0]
    assert job.totals["bytes"][posix].tolist() == [dropped["length"].sum()]
    [note] = undamaged_notes(job)
    assert "lacks 3 of the " in note and "(rank 0: 3 missing)" in note


def test_bytes_that_are_not_utf8_are_kept_escaped(rewrite):
    job = read_darshan_log(rewrite("sample-goodost.darshan", exe=b"/opt/caf\xe9/ior -w",
                                   mounts=[(b"/scratch\xff", b"lustre"), (b"/", b"rootfs")]))
    assert job.exe == "/opt/caf\\xe9/ior" and job.cmdline == "/opt/caf\\xe9/ior -w"
    assert ("/scratch\\xff", "lustre") in job.mounts


@pytest.mark.parametrize("name", ("sample-badost.darshan", "sample-goodost.darshan", "sample.darshan"))
def test_files_of_lustre_records_are_on_lustre_under_a_containers_overlay_root(rewrite, name):
    """A container's mount table may list only its overlay "/": the files of LUSTRE records are
    on Lustre all the same, at the directory they share; the others stay on the overlay."""
    original = read_darshan_log(shipped(name))
    job = read_darshan_log(rewrite(name, mounts=[(b"/", b"overlay")]))
    assert job.mounts == [("/", "overlay")]
    lustre = [f for f in original.files if f.fs_type == "lustre"]
    shared = os.path.commonpath([os.path.dirname(f.name) for f in lustre])
    assert lustre and shared.startswith("/scratch")
    for before, after in zip(original.files, job.files):
        assert after.name == before.name and after.osts == before.osts
        if before.fs_type == "lustre":
            assert (after.fs_type, after.mount_point) == ("lustre", shared)
        elif before.name.startswith("/"):
            assert (after.fs_type, after.mount_point) == ("overlay", "/")
    # a Lustre mount the table lists is the files' mount point, however deep the overlay's
    job = read_darshan_log(rewrite(name, mounts=[(b"/", b"overlay"), (b"/scratch1", b"lustre"),
                                                 (b"/scratch2", b"lustre")]))
    assert {f.mount_point for f in job.files if f.fs_type == "lustre"} == \
        {f.mount_point for f in original.files if f.fs_type == "lustre"}


def test_a_trace_files_own_type_overrides_a_generic_parent_mount():
    """with_own_file_systems on the types a trace's statfs magic gives: a file on Lustre below an
    overlay gets the Lustre mount that holds it, or the directory the Lustre files share; overlay files,
    files whose type is their mount's, and files of no mount keep theirs."""
    mounts = [("/", "overlay"), ("/home", "nfs4"), ("/lus/a", "lustre"), ("/lus/a/x", "overlay")]
    files = [JobFile("/lus/a/x/1", "/lus/a/x", "lustre"), JobFile("/lus/b/y/2", "/", "lustre"),
             JobFile("/lus/b/z/3", "/", "lustre"), JobFile("/etc/passwd", "/", "overlayfs"),
             JobFile("/home/u/f", "/home", "nfs"), JobFile("rel/f", "", "ext4"), JobFile("/dev/shm/s", "/", "tmpfs")]
    assert [f.mount_point for f in with_own_file_systems(files, mounts)] == \
        ["/lus/a", "/lus/b", "/lus/b", "/", "/home", "", "/dev/shm"]


@pytest.mark.parametrize("cut_bytes", (500, 40_000))
def test_file_cut_inside_its_dxt_data_falls_back_to_the_counters(tmp_path, cut_bytes):
    """dxt.darshan cut inside its last region, DXT_POSIX: darshan-util reads none of a module
    whose compressed region is cut short (not even the records before the cut), so the POSIX I/O
    comes from the POSIX counters, complete, and a note says why there are no ops."""
    data = open(shipped("dxt.darshan"), "rb").read()
    cut = tmp_path / "dxt-cut.darshan"
    cut.write_bytes(data[:len(data) - cut_bytes])
    whole = read_darshan_log(shipped("dxt.darshan"))
    job = read_darshan_log(str(cut))
    assert undamaged_notes(job) == ("The DXT_POSIX module's data is damaged (darshan-util: failed to read module "
                                   "DXT_POSIX data from darshan log file): none of its records can be used.",)
    assert len(job.ops["size"]) == 0
    for direction in (READ, WRITE):
        assert table_sum(job.totals, "bytes", "posix", direction) == table_sum(whole.ops, "size", "posix", direction)
        assert table_sum(job.totals, "ops", "posix", direction) == np.count_nonzero(
            (whole.ops["layer"] == LAYERS.index("posix")) & (whole.ops["direction"] == direction))


# --- a log that inflates -----------------------------------------------------------------------

# The report of a log of one DXT record of 10^7 segments (0.78 MB inflating to 320 MB) took 1.6 GB.
INFLATED_PEAK_RSS_KIB = 1 << 20


def inflating_log(darshan_util, out, records, segments):
    """sample-dxt-simple.darshan rewritten with its DXT_POSIX module made of `records` copies of
    its first record, each with `segments` identical 4 KiB writes: a small file whose DXT data
    inflates about 400-fold, to records * segments * 32 bytes."""
    def inflate(raw):
        header, _ = dxt_records(raw)[0]
        header["write_count"], header["read_count"] = segments, 0
        writes = np.zeros(segments, DXT_SEGMENT)
        writes["length"], writes["start"], writes["end"] = 4096, 0.5, 0.6
        return (header.tobytes() + writes.tobytes()) * records
    return rewritten_log(darshan_util, out, "sample-dxt-simple.darshan", modules={"DXT_POSIX": inflate})


@pytest.mark.parametrize("records, segments", [(1, 5_000_000), (50, 100_000)], ids=["one record", "many records"])
def test_a_log_that_inflates_past_what_is_read_is_reported_in_bounded_memory(darshan_util, tmp_path, records,
                                                                              segments):
    """160 MB of DXT segments from a log of about 0.4 MB: its records are read up to
    MAX_RECORD_BYTES (none of a record larger than that), the other modules are read, the I/O of
    the DXT not read is assessed from the counters, a note says so, and the report is written."""
    log = inflating_log(darshan_util, tmp_path / "inflating.darshan", records, segments)
    assert os.path.getsize(log) * 200 < records * segments * DXT_SEGMENT.itemsize
    report, peak_kib = run_measured([sys.executable, "-m", "ioassess", "report", log, "-o", tmp_path / "r.html",
                                     "--json", tmp_path / "r.json"], clean_env())
    assert report.returncode == 0, describe(report)
    assert peak_kib < INFLATED_PEAK_RSS_KIB
    [logged] = json.loads((tmp_path / "r.json").read_text())["job"]["inputs"]
    records_read = MAX_RECORD_BYTES // ((segments * DXT_SEGMENT.itemsize) + DXT_HEADER.itemsize)
    used = f"only its first {records_read} records can be used" if records_read else "none of its records can be used"
    assert logged["notes"] == [f"The log's records inflate to more than the {bytes_text(MAX_RECORD_BYTES)} ioassess "
                               f"reads of a log at its DXT_POSIX module: {used}."]
    job = read_darshan_log(log)
    assert np.count_nonzero(job.ops["layer"] == LAYERS.index("posix")) == records_read * segments
    assert np.count_nonzero(job.ops["layer"] == LAYERS.index("mpiio")) > 0, "DXT_MPIIO after it is read"
    assert table_sum(job.totals, "ops", "posix", WRITE) > 0, "the DXT not read is assessed from the counters"
    assert (tmp_path / "r.html").read_text().rstrip().endswith("</html>")


# --- what is not a (readable) Darshan log ----------------------------------------------------

def test_missing_file(tmp_path):
    path = str(tmp_path / "nothing.darshan")
    with pytest.raises(DarshanLogError, match="no such file or directory") as error:
        read_darshan_log(path)
    assert str(error.value) == f"{path}: no such file or directory"


def test_directory(tmp_path):
    with pytest.raises(DarshanLogError, match=f"^{tmp_path}: not a regular file$"):
        read_darshan_log(str(tmp_path))


def test_unreadable_file(tmp_path):
    """The file is mode 0 and read by an unprivileged process (root reads anything): a forked
    child that has dropped to uid/gid 65534 when run as root."""
    path = tmp_path / "secret.darshan"
    path.write_bytes(open(shipped("sample.darshan"), "rb").read())
    path.chmod(0)
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:
        message = "the child failed"
        try:
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            read_darshan_log(str(path))
            message = "read"
        except BaseException as error:   # the child must never return into pytest
            message = str(error)
        finally:
            os.write(writer, message.encode())
            os._exit(0)
    os.close(writer)
    message = os.read(reader, 4096).decode()
    os.close(reader)
    os.waitpid(child, 0)
    assert message == f"{path}: cannot read: Permission denied"


@pytest.mark.parametrize("content, problem", [
    (b"", "empty file, not a Darshan log"),
    (b"# darshan log version: 3.41\nnot really\n", "not a Darshan log (no Darshan log header)"),
    (gzip.compress(b"darshan 2 log"), "a gzip file (a Darshan 2 log?): only Darshan 3 logs can be read"),
    (b"3.41\0\0\0\0", "truncated: 8 bytes, less than a Darshan log header"),
])
def test_not_a_darshan_log(tmp_path, content, problem):
    path = tmp_path / "bad.darshan"
    path.write_bytes(content)
    with pytest.raises(DarshanLogError) as error:
        read_darshan_log(str(path))
    assert str(error.value) == f"{path}: {problem}"


def test_newer_log_format_names_the_versions(tmp_path):
    data = bytearray(open(shipped("sample.darshan"), "rb").read())
    data[:4] = b"3.99"
    path = tmp_path / "future.darshan"
    path.write_bytes(bytes(data))
    with pytest.raises(DarshanLogError, match=r"format version 3\.99 is not one darshan-util 3\.5\.\d+ can read"):
        read_darshan_log(str(path))


@pytest.mark.parametrize("cut, problem", [
    (200, "truncated or corrupt: darshan-util cannot read its header"),
    (600, "truncated or corrupt: its job record cannot be read"),
    (3000, "truncated or corrupt: none of its I/O records can be read"),
])
def test_truncated_log(tmp_path, capfd, cut, problem):
    path = tmp_path / "cut.darshan"
    path.write_bytes(open(shipped("sample-goodost.darshan"), "rb").read()[:cut])
    with pytest.raises(DarshanLogError) as error:
        read_darshan_log(str(path))
    assert str(error.value).startswith(f"{path}: {problem}") and "\n" not in str(error.value)
    assert capfd.readouterr().err == "", "darshan-util's complaints are quoted, not printed"


def test_darshan_util_aborting_on_a_damaged_log_costs_only_the_reading_child(tmp_path, capfd):
    """One byte changed near the end of noposix.darshan's compressed file-name table: it still
    inflates, but to a table whose last name has no end, and darshan-util's name reader fails
    an assertion (assert(buf_len == 0)) and aborts its process."""
    data = bytearray(open(shipped("noposix.darshan"), "rb").read())
    data[9634] = 0x55
    path = tmp_path / "names-damaged.darshan"
    path.write_bytes(bytes(data))
    with pytest.raises(DarshanLogError) as error:
        read_darshan_log(str(path))
    assert str(error.value) == (f"{path}: damaged: darshan-util crashed reading it (SIGABRT) (darshan-util: "
                                f"assertion `buf_len == 0' failed in darshan_log_get_filtered_namehash)")
    assert capfd.readouterr().err == ""


def test_damaged_logs_never_crash_the_process(tmp_path):
    """darshan-util aborts the process on some damaged logs when used as PyDarshan uses it;
    every truncation and every garbled region of these logs must give a Job or a one-line
    DarshanLogError, in a process that survives to say so."""
    script = textwrap.dedent("""
        import random, sys
        from ioassess.inputs.darshan_log import DarshanLogError, read_darshan_log
        outcomes = {"job": 0, "error": 0}
        for source in sys.argv[2:]:
            data = open(source, "rb").read()
            rng = random.Random(source)
            cuts = sorted({0, 1, 15, 16, 100, 360, 500, 800} | {rng.randrange(len(data)) for _ in range(25)})
            copies = [data[:cut] for cut in cuts]
            for _ in range(25):
                garbled = bytearray(data)
                where = rng.randrange(len(data))
                garbled[where:where + rng.choice((1, 8, 64))] = bytes(rng.randrange(256) for _ in range(64))
                copies.append(bytes(garbled))
            for copy in copies:
                with open(sys.argv[1], "wb") as f:
                    f.write(copy)
                try:
                    read_darshan_log(sys.argv[1])
                    outcomes["job"] += 1
                except DarshanLogError as error:
                    assert str(error).startswith(sys.argv[1] + ": ") and "\\n" not in str(error), str(error)
                    outcomes["error"] += 1
        print(outcomes["job"], outcomes["error"])
    """)
    sources = [shipped(n) for n in ("dxt.darshan", "ior_hdf5_example.darshan", "sample-goodost.darshan",
                                    "noposix.darshan")]
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path / "damaged.darshan"), *sources],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr == ""
    jobs, errors = map(int, result.stdout.split())
    assert jobs > 0 and errors > 0


def test_a_trace_and_the_darshan_log_of_the_same_job_make_one_job(rewrite, ioassess, tmp_path):
    """Darshan gives the job's facts and mount table, the trace the POSIX and stdio ops; MPI-IO
    ops, which the recorder does not see here, come from Darshan's DXT."""
    trace_dir = tmp_path / "t"
    result = ioassess("run", "--trace-dir", trace_dir, "--", "sh", "-c", f"cat /etc/hostname > {tmp_path}/out",
                      env={"SLURM_JOB_ID": "4242"})
    assert result.returncode == 0, result.stderr
    now = int(time.time())
    log = rewrite("sample-dxt-simple.darshan", job={"jobid": 4242, "uid": 1234, "start_time_sec": now - 5,
                                                    "end_time_sec": now + 5},
                  mounts=[(b"/tmp", b"tmpfs"), (b"/", b"ext4")])
    traced = load_job([str(trace_dir)])
    job = load_job([str(trace_dir), log])
    assert (job.job_id, job.user) == ("4242", "uid 1234")
    assert job.mounts == [("/tmp", "tmpfs"), ("/", "ext4")] and [i.kind for i in job.inputs] == ["trace", "darshan"]
    (out,) = [f for f in job.files if f.name == f"{tmp_path}/out"]
    traced_out = traced.files[[f.name for f in traced.files].index(out.name)]
    assert (out.mount_point, out.fs_type) == ("/tmp", traced_out.fs_type)
    posix, mpiio, stdio = LAYERS.index("posix"), LAYERS.index("mpiio"), LAYERS.index("stdio")
    # cat's and the shell's POSIX ops, and cat's stdio ops on out (its stdout, a file)
    for layer in (posix, stdio):
        assert np.count_nonzero(job.ops["layer"] == layer) == np.count_nonzero(traced.ops["layer"] == layer)
    assert np.count_nonzero(job.ops["layer"] != mpiio) == len(traced.ops["size"])
    assert np.count_nonzero(job.ops["layer"] == mpiio) == 1
    assert job.start_epoch_s <= traced.start_epoch_s and job.end_epoch_s >= traced.end_epoch_s


# --- Darshan's own counts ----------------------------------------------------------------------

def pydarshan_counters(report, module):
    """PyDarshan's counters and fcounters of a module, one row per record, and the file names."""
    frames = report.records[module].to_df()
    return frames["counters"], frames["fcounters"], report.name_records


@pytest.mark.parametrize("name", ("ior_hdf5_example.darshan", "sample-dxt-simple.darshan", "example.darshan"))
def test_darshan_records_are_darshans_counters(name, reference):
    job = read_darshan_log(shipped(name))
    counters, fcounters, names = pydarshan_counters(reference(shipped(name)), "POSIX")
    records = job.darshan_records
    posix = records["layer"] == LAYERS.index("posix")
    by_key = {(job.files[f].name, r): i for i, (f, r) in enumerate(zip(records["file"], records["rank"])) if posix[i]}
    with_io = counters[(counters["POSIX_READS"] + counters["POSIX_WRITES"]) > 0]
    assert len(by_key) == len(with_io)
    for row, frow in zip(with_io.itertuples(), fcounters.loc[with_io.index].itertuples()):
        i = by_key[names[row.id], row.rank]
        assert (records["consecutive_reads"][i], records["sequential_writes"][i], records["syncs"][i]) == \
            (row.POSIX_CONSEC_READS, row.POSIX_SEQ_WRITES, row.POSIX_FSYNCS + row.POSIX_FDSYNCS)
        if row.rank == -1:
            assert (records["slowest_rank"][i], records["fastest_rank"][i]) == (row.POSIX_SLOWEST_RANK,
                                                                                row.POSIX_FASTEST_RANK)
            assert records["slowest_s"][i] == frow.POSIX_F_SLOWEST_RANK_TIME
            assert records["variance_s"][i] == frow.POSIX_F_VARIANCE_RANK_TIME
        else:
            assert records["slowest_rank"][i] == -1 and math.isnan(records["slowest_s"][i])
    mpiio = records["layer"] == LAYERS.index("mpiio")
    if "MPI-IO" in reference(shipped(name)).records:
        mpi_counters, _, _ = pydarshan_counters(reference(shipped(name)), "MPI-IO")
        assert records["collective_writes"][mpiio].sum() == mpi_counters["MPIIO_COLL_WRITES"].sum()
        assert np.all(records["consecutive_reads"][mpiio] == -1)


@pytest.mark.parametrize("name", ("ior_hdf5_example.darshan", "sample-dxt-simple.darshan"))
def test_consecutive_and_sequential_of_dxt_ops_are_darshans_counts(name):
    """The ops of a complete DXT trace, counted by the assessment's definitions, give the
    consecutive and sequential counts Darshan's counters hold, per file and direction (a shared
    record's are summed over its ranks)."""
    from ioassess.report.sections import FilePatterns
    job = read_darshan_log(shipped(name))
    pattern = dict(zip(("consecutive", "sequential"), FilePatterns(job).after_previous(job.ops)))
    records = job.darshan_records
    posix = LAYERS.index("posix")
    compared = 0
    for file in np.unique(records["file"][records["layer"] == posix]).tolist():
        here = (records["file"] == file) & (records["layer"] == posix)
        for direction, plural in ((READ, "reads"), (WRITE, "writes")):
            ops = (job.ops["file"] == file) & (job.ops["layer"] == posix) & (job.ops["direction"] == direction)
            assert np.count_nonzero(ops) == records[plural][here].sum()
            for kind in ("consecutive", "sequential"):
                assert np.count_nonzero(pattern[kind] & ops) == records[f"{kind}_{plural}"][here].sum()
            compared += np.count_nonzero(ops)
    assert compared > 0


POSIX_NAMES = pydarshan_backend.counter_names("POSIX"), pydarshan_backend.fcounter_names("POSIX")
POSIX_RECORD = np.dtype([("id", "<u8"), ("rank", "<i8"), ("counters", "<i8", len(POSIX_NAMES[0])),
                         ("fcounters", "<f8", len(POSIX_NAMES[1]))])


def test_sync_time_darshan_counts_as_write_time_is_a_sync_row(rewrite):
    """Darshan adds the time of fsync and fdatasync to POSIX_F_WRITE_TIME, and DXT has no
    segment for them: a record whose writes DXT traced in full keeps that time as a sync row."""
    names, fnames = POSIX_NAMES
    chosen = {}

    def add_syncs(raw):
        assert len(raw) % POSIX_RECORD.itemsize == 0
        records = np.frombuffer(raw, POSIX_RECORD).copy()
        i = int(np.flatnonzero(records["counters"][:, names.index("POSIX_WRITES")] > 0)[0])
        records["counters"][i, names.index("POSIX_FSYNCS")] = 2
        records["counters"][i, names.index("POSIX_FDSYNCS")] = 1
        records["fcounters"][i, fnames.index("POSIX_F_WRITE_TIME")] += 0.1
        chosen.update(id=int(records["id"][i]), rank=int(records["rank"][i]))
        return records.tobytes()

    original = read_darshan_log(rewrite("sample-dxt-simple.darshan"))
    job = read_darshan_log(rewrite("sample-dxt-simple.darshan", modules={"POSIX": add_syncs}))
    sync = DIRECTIONS.index("sync")
    assert not np.any(original.totals["direction"] == sync)
    rows = np.flatnonzero(job.totals["direction"] == sync)
    assert len(rows) == 1
    (row,) = rows
    assert job.totals["ops"][row] == 3 and job.totals["bytes"][row] == 0
    assert job.totals["seconds"][row] == pytest.approx(0.1, abs=1e-6)
    assert job.processes[job.totals["process"][row]].rank == chosen["rank"]
    others = job.totals["direction"] != sync
    assert np.array_equal(job.totals["seconds"][others], original.totals["seconds"])


@pytest.fixture
def python3_trace(ioassess, tmp_path):
    """A trace of `/usr/bin/python3 -c ...` (a symbolic link to python3.X) writing a file, run
    without a batch system: (trace directory, the Job read from it, the python process's pid)."""
    if not os.path.islink("/usr/bin/python3"):
        pytest.skip("/usr/bin/python3 is not a symbolic link here")
    trace_dir = tmp_path / "t"
    result = ioassess("run", "--trace-dir", trace_dir, "--", "/usr/bin/python3", "-c",
                      f"import os; open({str(tmp_path / 'out')!r}, 'w').write('x'); print(os.getpid())")
    assert result.returncode == 0, result.stderr
    traced = load_job([str(trace_dir)])
    assert traced.job_id == ""
    return trace_dir, traced, int(result.stdout.split()[0])


@pytest.mark.parametrize("match", ("pid", "symbolic link"))
def test_a_non_mpi_darshan_log_is_the_same_job_by_pid_or_resolved_executable(rewrite, python3_trace, match):
    """A non-MPI Darshan log's job id is its process's pid, and its command line names the
    executable as typed (/usr/bin/python3) where the trace has the file (/usr/bin/python3.11):
    either makes the log the trace's job; neither is refused."""
    trace_dir, traced, pid = python3_trace
    times = {"start_time_sec": int(traced.start_epoch_s) - 1, "end_time_sec": int(traced.end_epoch_s) + 1}
    assert traced.exe == os.path.realpath("/usr/bin/python3")
    exe = {"pid": b"/elsewhere/renamed -c", "symbolic link": b"/usr/bin/python3 -c"}[match]
    jobid = pid if match == "pid" else pid + 1
    log = rewrite("sample-dxt-simple.darshan", job={"jobid": jobid, **times}, exe=exe)
    job = load_job([str(trace_dir), log])
    assert job.job_id == str(jobid) and [i.kind for i in job.inputs] == ["trace", "darshan"]
    refused = rewrite("sample-dxt-simple.darshan", job={"jobid": pid + 1, **times}, exe=b"/usr/bin/perl -e 1")
    with pytest.raises(LoadError, match="not the same job"):
        load_job([str(trace_dir), refused])


def test_a_merged_job_with_ops_does_not_repeat_the_logs_no_io_note(rewrite, python3_trace):
    trace_dir, traced, pid = python3_trace
    empty = {module: (lambda raw: b"") for module in ("POSIX", "MPI-IO", "STDIO", "DXT_POSIX", "DXT_MPIIO")}
    log = rewrite("sample-dxt-simple.darshan", job={"jobid": pid, "start_time_sec": int(traced.start_epoch_s) - 1,
                                      "end_time_sec": int(traced.end_epoch_s) + 1}, modules=empty)
    assert NO_IO_NOTE in read_darshan_log(log).inputs[0].notes
    job = load_job([str(trace_dir), log])
    assert len(job.ops["size"]) == len(traced.ops["size"]) > 0
    assert not any(NO_IO_NOTE in i.notes for i in job.inputs)


def test_a_shared_records_ranks_and_times_outside_the_job_are_unknown():
    """A damaged log's shared record naming a slowest rank the job did not have (2^40, which
    the per-rank view would take for an array size) or a time that is not finite: unknown, its
    time and bytes with it."""
    from ioassess.inputs.darshan_log import _record_table, _undamaged_counters
    names = ["POSIX_READS", "POSIX_WRITES", "POSIX_FASTEST_RANK", "POSIX_SLOWEST_RANK", "POSIX_FASTEST_RANK_BYTES",
             "POSIX_SLOWEST_RANK_BYTES"]
    fnames = ["POSIX_F_FASTEST_RANK_TIME", "POSIX_F_SLOWEST_RANK_TIME"]
    records = np.zeros(2, dtype=[("id", np.uint64), ("rank", np.int64), ("counters", np.int64, len(names)),
                                 ("fcounters", np.float64, len(fnames))])
    records["id"] = [1, 2]
    records["rank"] = -1
    records["counters"] = [[5, 0, 3, 1 << 40, 10, 20], [5, 0, 1, 2, 10, 20]]
    records["fcounters"] = [[0.5, np.inf], [0.5, 1.5]]
    notes = []
    table = _record_table(_undamaged_counters({"POSIX": (records, names, fnames)}, {1: "f"}, 4, notes))
    assert table["fastest_rank"].tolist() == [3, 1] and table["slowest_rank"].tolist() == [-1, 2]
    assert table["fastest_s"].tolist() == [0.5, 0.5] and table["slowest_bytes"].tolist() == [-1, 20]
    assert np.isnan(table["slowest_s"][0]) and table["slowest_s"][1] == 1.5
    assert notes == ["Damaged counter values, infinite times (a bug of some older Darshan versions, or damaged "
                     "data): POSIX_F_SLOWEST_RANK_TIME in 1 record (f); they are unknown.",
                     "Damaged counter values, fastest or slowest ranks the job did not have (a bug of some older "
                     "Darshan versions, or damaged data): POSIX_SLOWEST_RANK in 1 record (f); they are unknown."]


@pytest.mark.parametrize("extreme", ["huge", "negative"])
def test_absurd_access_pattern_counters_are_reported_without_a_traceback(rewrite, ioassess, tmp_path, extreme):
    """The counters the access-pattern findings read (highest offsets, alignment, access-size
    bins, consecutive and sequential counts, MPI-IO's kinds of calls) set to 2^63 - 1 or to
    negative numbers in every POSIX record, times to infinities and NaN: the report is written
    and matches its schema (IOASSESS_CHECK_SCHEMA is on in the tests), with no traceback."""
    names, fnames = POSIX_NAMES

    def absurd(raw):
        records = np.frombuffer(raw, POSIX_RECORD).copy()
        for name in names:
            if name.startswith(("POSIX_MAX_BYTE", "POSIX_FILE_ALIGNMENT", "POSIX_MEM_ALIGNMENT", "POSIX_SIZE_",
                                "POSIX_CONSEC", "POSIX_SEQ", "POSIX_MEM_NOT", "POSIX_FILE_NOT")):
                records["counters"][:, names.index(name)] = (1 << 63) - 1 if extreme == "huge" else -7
        for name in ("POSIX_F_READ_TIME", "POSIX_F_WRITE_TIME", "POSIX_F_META_TIME"):
            records["fcounters"][:, fnames.index(name)] = np.inf if extreme == "huge" else np.nan
        return records.tobytes()

    log = rewrite("shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan",
                  modules={"POSIX": absurd})
    result = ioassess("report", log, "-o", tmp_path / "r.html", "--json", tmp_path / "a.json")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert (tmp_path / "r.html").read_text().rstrip().endswith("</html>")


def test_times_too_long_for_any_job_are_taken_as_0_with_a_note(rewrite, ioassess, tmp_path):
    """POSIX times of 1.7e308 s (finite, and summed over records beyond what a float holds) in
    every POSIX record: taken as 0 like a negative time, with the note, and the report is whole
    and matches its schema."""
    names, fnames = POSIX_NAMES

    def too_long(raw):
        records = np.frombuffer(raw, POSIX_RECORD).copy()
        for name in ("POSIX_F_READ_TIME", "POSIX_F_WRITE_TIME", "POSIX_F_META_TIME", "POSIX_F_MAX_READ_TIME",
                     "POSIX_F_MAX_WRITE_TIME"):
            records["fcounters"][:, fnames.index(name)] = 1.7e308
        return records.tobytes()

    log = rewrite("shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan",
                  modules={"POSIX": too_long})
    job = read_darshan_log(log)
    posix = job.totals["layer"] == LAYERS.index("posix")
    assert (job.totals["seconds"][posix] == 0).all() and np.isnan(job.totals["max_op_seconds"][posix]).all()
    assert any("taken as 0" in note for note in job.inputs[0].notes)
    result = ioassess("report", log, "-o", tmp_path / "r.html", "--json", tmp_path / "a.json")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert (tmp_path / "r.html").read_text().rstrip().endswith("</html>")


# --- damaged counter values cannot hide a finding ---------------------------------------------

MACSIO = "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan"
# shane_macsio's shared POSIX records on which P19 fires (the slowest rank's time less the
# fastest's is 34 % and 38 % of the record's time), and the one on which it does not (9 %)
P19_FILES = ("/tmp/test/macsio-timings.log", "/tmp/test/macsio-log.log")
OTHER_SHARED_FILE = "/tmp/test/macsio_hdf5_000.h5"
MPIIO_NAMES = pydarshan_backend.counter_names("MPI-IO"), pydarshan_backend.fcounter_names("MPI-IO")
RECORDS = {"POSIX": (POSIX_NAMES, POSIX_RECORD),
           "MPI-IO": (MPIIO_NAMES, np.dtype([("id", "<u8"), ("rank", "<i8"), ("counters", "<i8", len(MPIIO_NAMES[0])),
                                             ("fcounters", "<f8", len(MPIIO_NAMES[1]))]))}
# Per kind of damaged value (ioassess.inputs.darshan_log's TIME_DAMAGE, COUNT_DAMAGE and the
# ranks the job did not have): the value, the words of its note, and the counters it is
# written to, {module: {file: counters}}. Times damage the metadata time of both P19 records
# (read + write + metadata time is P19's whole), their slowest write and variance, and the
# slowest rank's time of the third shared record; counts the metadata calls, an access-size
# bin, a highest offset and fsyncs of the P19 records, and MPI-IO's non-blocking and split
# writes, added to its other writes (2^63 - 1 there would wrap the sum).
TIMES = {"POSIX": {**{f: ("POSIX_F_META_TIME", "POSIX_F_MAX_WRITE_TIME", "POSIX_F_VARIANCE_RANK_TIME")
                      for f in P19_FILES}, OTHER_SHARED_FILE: ("POSIX_F_SLOWEST_RANK_TIME",)}}
COUNTS = {"POSIX": {f: ("POSIX_STATS", "POSIX_SEEKS", "POSIX_SIZE_WRITE_0_100", "POSIX_MAX_BYTE_WRITTEN",
                        "POSIX_FSYNCS") for f in P19_FILES},
          "MPI-IO": {OTHER_SHARED_FILE: ("MPIIO_NB_WRITES", "MPIIO_SPLIT_WRITES")}}
DAMAGED_VALUES = {
    "nan": (np.nan, "times that are not a number (NaN)", TIMES),
    "infinite": (np.inf, "infinite times", TIMES),
    "minus infinite": (-np.inf, "infinite times", TIMES),
    "tiny negative time": (-1.9e-304, "negative times", TIMES),
    "negative time": (-2662.7, "negative times", TIMES),
    "time above 10^9 s": (3.2e9, "times above 10^9 s (no job's)", TIMES),
    "negative count": (-7, "negative counts", COUNTS),
    "count above 2^53": ((1 << 63) - 1, "counts above 2^53 (no job's)", COUNTS),
    "rank outside the job": (1 << 40, "fastest or slowest ranks the job did not have",
                             {"POSIX": {OTHER_SHARED_FILE: ("POSIX_SLOWEST_RANK",)}}),
}


def damaged_counters(value, counters):
    """The module edits (rewritten_log's modules=) that write value into counters, {module:
    {file: counter names}}, of the records of those files."""
    from ioassess.inputs.darshan_util import read_log_contents
    ids = {name: record_id for record_id, name in read_log_contents(shipped(MACSIO)).names.items()}

    def edit(module, by_file):
        (names, fnames), dtype = RECORDS[module]

        def damage(raw):
            records = np.frombuffer(raw, dtype).copy()
            for file, damaged in by_file.items():
                rows = records["id"] == ids[file]
                assert rows.any()
                for name in damaged:
                    field, column = ("fcounters", fnames.index(name)) if "_F_" in name else \
                        ("counters", names.index(name))
                    records[field][rows, column] = value
            return records.tobytes()
        return damage

    return {module: edit(module, by_file) for module, by_file in counters.items()}


def non_finite(value, path="assessment"):
    """The places of the numbers that are NaN or infinite in an assessment (before json_safe)."""
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from non_finite(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from non_finite(item, f"{path}[{i}]")


def assessed(log, html_path):
    """(the assessment of a log as assess() returns it, before json_safe; the HTML page of it)."""
    from ioassess.report import load_and_choose
    from ioassess.report.assess import assess
    from ioassess.report.render import write_report
    from ioassess.report.schema import json_safe
    job, model, model_file, choice = load_and_choose([log])
    assessment = assess(job, model, model_file, None, choice)
    write_report(html_path, json_safe(assessment))
    return assessment, open(html_path, encoding="utf-8").read()


def findings(assessment):
    """{code: names of the files it names} of the access patterns and the recommendations."""
    found = collections.defaultdict(set)
    for finding in assessment["access_patterns"] + assessment["recommendations"]:
        if finding.get("code"):
            found[finding["code"]] |= {f["name"] for f in finding["files"]}
    return found


@pytest.mark.parametrize("kind", DAMAGED_VALUES)
def test_damaged_counter_values_hide_no_finding(rewrite, tmp_path, kind):
    """shane_macsio with a counter value damaged, one kind at a time: the assessment holds no NaN
    or infinity, the note of that kind names the counter and its files in the assessment and on
    the page, and every finding of the undamaged log still fires, naming the same files. Above
    all P19 (Drishti's too) on both records whose metadata time is damaged: a NaN there made
    their time NaN, and P19 silently did not fire."""
    import markupsafe
    value, words, counters = DAMAGED_VALUES[kind]
    undamaged, _ = assessed(rewrite(MACSIO), tmp_path / "undamaged.html")
    assessment, page = assessed(rewrite(MACSIO, modules=damaged_counters(value, counters)), tmp_path / "r.html")
    assert list(non_finite(assessment)) == []
    [note] = [n for n in assessment["job"]["inputs"][0]["notes"] if n.startswith(f"Damaged counter values, {words} ")]
    files_of = collections.defaultdict(set)
    for by_file in counters.values():
        for file, names in by_file.items():
            for name in names:
                files_of[name].add(file)
    named = [name for name in files_of if re.search(rf"\b{name} in {len(files_of[name])} record", note)]
    more = re.search(r" and (\d+) more counters?;", note)
    assert len(named) == min(NOTE_LIST_LIMIT, len(files_of)), note
    assert len(named) + (int(more[1]) if more else 0) == len(files_of), note
    assert all(file in note for name in named for file in files_of[name]), note
    assert str(markupsafe.escape(note)) in page   # as the page's template escapes it
    before, after = findings(undamaged), findings(assessment)
    assert {"P18", "P19"} <= set(before)
    for code, files in before.items():
        assert code in after and files <= after[code] | {OTHER_SHARED_FILE}, code
    assert set(P19_FILES) <= after["P19"]


def test_the_parsed_declarations_are_current(tmp_path):
    """ioassess/inputs/_darshan_ffi.py is darshan_util's declarations as cffi parses them (after
    changing them: python3 -c 'from ioassess.inputs import darshan_util as d; d.write_parsed_declarations()')."""
    import cffi
    written = tmp_path / "_darshan_ffi.py"
    binding.write_parsed_declarations(str(written))
    with open(os.path.join(os.path.dirname(binding.__file__), "_darshan_ffi.py")) as shipped:
        assert written.read_text() == shipped.read()
    parsed_now = cffi.FFI()
    parsed_now.cdef(binding._DECLARATIONS)
    structs = re.findall(r"struct (\w+) \{", binding._DECLARATIONS)
    assert len(structs) > 5
    assert [binding._declared().sizeof(f"struct {name}") for name in structs] == \
        [parsed_now.sizeof(f"struct {name}") for name in structs]
