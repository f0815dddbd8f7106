"""Darshan modules that move data ioassess does not assess (HDF5, PnetCDF, DFS, DAOS): their bytes
and times are read (Job.unassessed) and shown, shares of the job's bytes count them, and findings
that would speak of the job's whole I/O only inform where those modules' data went past POSIX
(docs/assessment.md, "Modules not assessed"). PyDarshan ships HDF5 logs; no log it ships has DFS or
DAOS records, so those are added to a copy of a shipped log by darshan-util's own log writer."""
import itertools
import json
import re

import darshan
import numpy as np
import pytest

from ioassess.inputs.darshan_log import read_darshan_log
from ioassess.report.findings import STDIO_BYTES_SHARE
from test_darshan_log import darshan_util, rewritten_log, shipped  # noqa: F401 (darshan_util: a fixture)

MIB = 1 << 20
# darshan-util 3.5's DFS and DAOS modules: index, version, record layout (as in Darshan 3.5.0's
# include/darshan-log-format.h, darshan-dfs-log-format.h, darshan-daos-log-format.h), counters
# named as in the log.
DFS = (16, 1, np.dtype([("id", "<u8"), ("rank", "<i8"), ("counters", "<i8", 52), ("fcounters", "<f8", 15),
                        ("uuids", "u1", 32)]))
DAOS = (17, 1, np.dtype([("id", "<u8"), ("rank", "<i8"), ("counters", "<i8", 64), ("fcounters", "<f8", 15),
                         ("uuids", "u1", 32), ("oid", "<u8", 2)]))


def counter_index(module, name, kind="counter"):
    """The index of a counter (kind "f_counter": an fcounter) in the module's record, as
    darshan-util names them."""
    import cffi
    ffi = cffi.FFI()
    table = f"{module.lower()}_{kind}_names"
    ffi.cdef(f"extern char *{table}[];")
    from ioassess.inputs.darshan_util import _darshan_util_library
    lib = ffi.dlopen(_darshan_util_library())
    names = []
    for i in itertools.count():
        names.append(ffi.string(getattr(lib, table)[i]).decode())
        if names[-1].endswith("_NUM_INDICES"):
            return names.index(name)


def records(module, layout, rows):
    """The raw module data of records (rank, bytes read, bytes written, read s, write s)."""
    index, version, dtype = layout
    data = np.zeros(len(rows), dtype)
    for i, (rank, read, written, read_s, write_s) in enumerate(rows):
        data[i]["id"], data[i]["rank"] = 0x5EED0000 + i, rank
        data[i]["counters"][counter_index(module, f"{module}_BYTES_READ")] = read
        data[i]["counters"][counter_index(module, f"{module}_BYTES_WRITTEN")] = written
        data[i]["fcounters"][counter_index(module, f"{module}_F_READ_TIME", "f_counter")] = read_s
        data[i]["fcounters"][counter_index(module, f"{module}_F_WRITE_TIME", "f_counter")] = write_s
    return {module: (index, version, data.tobytes())}


@pytest.fixture
def with_modules(darshan_util, tmp_path):  # noqa: F811
    """with_modules(name, added) -> a copy of the shipped log `name` with the modules added."""
    made = itertools.count()

    def make(name, added):
        return rewritten_log(darshan_util, str(tmp_path / f"added-{next(made)}-{name}"), name, added=added)
    return make


def report(ioassess, log, tmp_path):
    result = ioassess("report", log, "-o", tmp_path / "report.html", "--json", tmp_path / "a.json")
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "a.json") as f:
        return json.load(f), " ".join(open(tmp_path / "report.html").read().split())


@pytest.mark.parametrize("name", ["ior_hdf5_example.darshan",
                                  "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan"])
def test_hdf5_datasets_bytes_and_times_are_pydarshans(name):
    job = read_darshan_log(shipped(name))
    with darshan.DarshanReport(shipped(name), read_all=True) as r:
        frames = r.records["H5D"].to_df()
    counters, fcounters = frames["counters"], frames["fcounters"]
    assert job.unassessed == {"H5D": {
        "records": len(counters), "bytes_read": counters["H5D_BYTES_READ"].sum(),
        "bytes_written": counters["H5D_BYTES_WRITTEN"].sum(),
        "read_s": pytest.approx(fcounters["H5D_F_READ_TIME"].sum()),
        "write_s": pytest.approx(fcounters["H5D_F_WRITE_TIME"].sum())}}
    assert job.unassessed["H5D"]["bytes_read"] + job.unassessed["H5D"]["bytes_written"] > 0


def test_dfs_and_daos_records_are_read(with_modules):
    log = with_modules("noposix.darshan", {**records("DFS", DFS, [(-1, 0, 32 * MIB, 0.0, 1.5), (3, 5, 7, 0.25, 0.0)]),
                                           **records("DAOS", DAOS, [(0, MIB, 0, 0.5, 0.0)])})
    job = read_darshan_log(log)
    assert job.unassessed == {
        "DFS": {"records": 2, "bytes_read": 5, "bytes_written": 32 * MIB + 7, "read_s": 0.25, "write_s": 1.5},
        "DAOS": {"records": 1, "bytes_read": MIB, "bytes_written": 0, "read_s": 0.5, "write_s": 0.0}}
    assert job.inputs[0].notes == ("The log has DFS records: that I/O is not assessed (only POSIX, MPI-IO and "
                                   "STDIO are).", "The log has DAOS records: that I/O is not assessed (only POSIX, "
                                   "MPI-IO and STDIO are).")


def test_a_dfs_job_s_stdio_share_counts_dfs_and_m01_only_informs(with_modules, ioassess, tmp_path):
    """noposix.darshan: 512 ranks, 1.72 GiB through stdio, no MPI-IO (S01 and M01 on their own);
    with 32 MiB through DFS the stdio share is over both, and M01 is information only, saying
    that the DAOS I/O is not judged."""
    plain, _ = report(ioassess, shipped("noposix.darshan"), tmp_path)
    codes = {r["code"]: r for r in plain["recommendations"]}
    assert {"S01", "M01"} <= set(codes)
    assert "bytes_to_daos" not in codes["M01"]["numbers"] and "DAOS" not in codes["M01"]["text"]
    stdio_bytes = codes["S01"]["numbers"]["stdio_bytes"]

    a, html = report(ioassess, with_modules("noposix.darshan", records("DFS", DFS, [(-1, 0, 32 * MIB, 0, 2.0)])),
                     tmp_path)
    codes = {r["code"]: r for r in a["recommendations"]}
    m01 = codes["M01"]
    assert m01["level"] == "info" and m01["at_stake_s"] is None and m01["numbers"]["bytes_to_daos"] == 32 * MIB
    assert "whether that I/O would gain from MPI-IO is not judged" in m01["text"]
    assert "whether that I/O would gain from MPI-IO is not judged" in html
    s01 = codes["S01"]["numbers"]
    assert s01["bytes_all_modules"] == stdio_bytes + 32 * MIB and s01["unassessed_modules"] == "DFS"
    assert s01["stdio_share"] == pytest.approx(stdio_bytes / (stdio_bytes + 32 * MIB))
    assert "DFS included" in codes["S01"]["text"]
    [row] = a["unassessed_modules"]
    assert (row["module"], row["goes_through"], row["bytes_written"], row["write_s"]) == ("DFS", "DAOS", 32 * MIB, 2.0)
    assert re.search(r"<td class=\"text\">DFS</td><td class=\"text\">the DAOS file system \(DFS\)</td>"
                     r"<td class=\"text\">DAOS</td><td>1</td><td>0 B</td><td>32.0 MiB</td>", html)


def test_stdio_is_not_much_of_the_data_when_dfs_moved_the_rest(with_modules, ioassess, tmp_path):
    """The job of the bug: a few bytes through stdio, far more through DFS: no S01, M01 only
    informs."""
    plain, _ = report(ioassess, shipped("noposix.darshan"), tmp_path)
    stdio_bytes = next(r for r in plain["recommendations"] if r["code"] == "S01")["numbers"]["stdio_bytes"]
    dfs_bytes = int(stdio_bytes / STDIO_BYTES_SHARE) * 2
    a, _ = report(ioassess, with_modules("noposix.darshan", records("DFS", DFS, [(-1, dfs_bytes, 0, 1.0, 0)])),
                  tmp_path)
    levels = {r["code"]: r["level"] for r in a["recommendations"]}
    assert "S01" not in levels and levels["M01"] == "info"


def test_hdf5_bytes_count_in_the_shares_and_keep_m01(ioassess, tmp_path):
    """HDF5's data goes on through MPI-IO or POSIX, where it is assessed."""
    a, html = report(ioassess, shipped("ior_hdf5_example.darshan"), tmp_path)
    assert [row["module"] for row in a["unassessed_modules"]] == ["H5D"]
    assert "Modules not assessed" in html and "HDF5 datasets" in html
