"""The metadata section and its findings: on PyDarshan's shipped logs against PyDarshan's own
reading of their counters, on a copy of one whose metadata time is raised above Drishti's
threshold on one rank, and on Jobs built by hand with metadata calls known one by one."""
import errno
import html
import os
import re

import numpy as np
import pytest

darshan = pytest.importorskip("darshan")

from ioassess.inputs.darshan_log import read_darshan_log  # noqa: E402
from ioassess.inputs.job import (DIRECTIONS, LAYERS, META, META_KINDS, OP_COLUMNS, POSIX, SIZE_BIN_COLUMNS,  # noqa: E402
                                 TOTAL_COLUMNS, WRITE, Job, JobFile, JobInput, JobProcess, empty_columns)
from ioassess.models.modelfile import load_model  # noqa: E402
from ioassess.report.assess import assess  # noqa: E402
from ioassess.report.metadata import METADATA_RANK_S  # noqa: E402
from recorder_helpers import shipped_darshan_logs  # noqa: E402
from test_darshan_log import POSIX_NAMES, POSIX_RECORD, rewrite, darshan_util  # noqa: E402, F401

MODEL = load_model("local-linux")


def findings(assessment):
    return {r["title"]: r["numbers"] for r in assessment["recommendations"]}


@pytest.mark.parametrize("log", shipped_darshan_logs(), ids=os.path.basename)
def test_shipped_logs_give_the_counters_metadata_exactly(log):
    """Every log with POSIX or STDIO metadata time shows the section with the counters' sums:
    *_F_META_TIME, opens, stats and seeks (POSIX and STDIO), MPI-IO's time apart."""
    with darshan.DarshanReport(log, read_all=True) as report:
        frames = {m: report.records[m].to_df() for m in ("POSIX", "STDIO", "MPI-IO") if m in report.records}
    seconds = calls = 0
    kinds = {"open": 0, "stat": 0, "seek": 0}
    for module, prefix in (("POSIX", "POSIX"), ("STDIO", "STDIO")):
        if module not in frames:
            continue
        counters, fcounters = frames[module]["counters"], frames[module]["fcounters"]
        seconds += fcounters[f"{prefix}_F_META_TIME"].clip(lower=0).sum()
        for kind, name in (("open", "OPENS"), ("stat", "STATS"), ("seek", "SEEKS")):
            if f"{prefix}_{name}" in counters:
                kinds[kind] += int(counters[f"{prefix}_{name}"].sum())
    calls = sum(kinds.values())
    assessment = assess(read_darshan_log(log), MODEL)
    meta = assessment["metadata"]
    if "MPI-IO" in frames:
        mpiio_s = frames["MPI-IO"]["fcounters"]["MPIIO_F_META_TIME"].sum()
        assert meta["layers"]["mpiio"]["seconds"] == pytest.approx(mpiio_s)
    if seconds == 0 and calls == 0:
        assert meta is None or meta["calls"] == 0
        return
    assert meta["tier"] == "counters"
    assert meta["seconds"] == pytest.approx(seconds)
    assert meta["calls"] == calls
    assert {k["kind"]: k["counted_calls"] for k in meta["kinds"]} == {k: n for k, n in kinds.items() if n}
    assert meta["share_of_io"] == pytest.approx(seconds / (assessment["headline"]["io_s"] + seconds))
    assert sum(fs["seconds"] for fs in meta["file_systems"]) == pytest.approx(seconds)
    assert meta["slowest_calls"] == [] and meta["repeated"] is None and meta["missing"] is None
    assert "The same files opened or stat'ed many times" not in findings(assessment)


def test_a_rank_above_drishtis_threshold_is_named(rewrite):  # noqa: F811
    """sample-dxt-simple.darshan (16 ranks, records of their own): rank 7's POSIX_F_META_TIME raised to 45 s."""
    names, fnames = POSIX_NAMES

    def slow_metadata(raw):
        records = np.frombuffer(raw, POSIX_RECORD).copy()
        i = int(np.flatnonzero(records["rank"] == 7)[0])
        records["fcounters"][i, fnames.index("POSIX_F_META_TIME")] = 45.0
        return records.tobytes()

    job = read_darshan_log(rewrite("sample-dxt-simple.darshan", modules={"POSIX": slow_metadata}))
    assessment = assess(job, MODEL)
    per_rank = assessment["metadata"]["per_rank"]
    assert per_rank["unit"] == "rank" and per_rank["spread"]["max"]["rank"] == 7
    assert [u["rank"] for u in per_rank["above_threshold"]] == [7]
    assert per_rank["above_threshold"][0]["seconds"] == pytest.approx(45.0, abs=0.1)
    numbers = findings(assessment)["Metadata time is high"]
    assert numbers["slowest_rank"] == 7 and numbers["ranks_above"] == 1
    assert numbers["threshold_per_rank_s"] == METADATA_RANK_S
    original = assess(read_darshan_log(rewrite("sample-dxt-simple.darshan")), MODEL)
    assert "Metadata time is high" not in findings(original)
    for field in ("headline", "classes", "layers", "processes"):
        assert original[field] == assessment[field]
    assert original["job"]["files"] == assessment["job"]["files"]


# --- Jobs built by hand --------------------------------------------------------------------

def hand_job(calls, files, ranks=(0,), writes=()):
    """A Job of metadata calls (rank, file, kind, seconds, result, start) and POSIX writes
    (rank, file, bytes, seconds, start) known one by one."""
    rows = [(r, f, META, META_KINDS.index(k), 0, s, res, t) for r, f, k, s, res, t in calls] + \
        [(r, f, WRITE, -1, b, s, b, t) for r, f, b, s, t in writes]
    rows.sort(key=lambda row: (row[0], row[7]))
    n = len(rows)
    ops = empty_columns(OP_COLUMNS, n)
    ops["process"][:] = [ranks.index(r[0]) for r in rows]
    ops["file"][:] = [r[1] for r in rows]
    ops["layer"][:] = POSIX
    ops["direction"][:] = [r[2] for r in rows]
    ops["size"][:] = [r[4] for r in rows]
    ops["result"][:] = [r[6] for r in rows]
    ops["duration_s"][:] = [r[5] for r in rows]
    ops["start_s"][:] = [r[7] for r in rows]
    ops["offset"][:] = -1
    ops["meta_kind"] = np.array([r[3] for r in rows], np.int8)
    processes = [JobProcess(rank=r, hostname="node1", pid=100 + i, exe="app", start_s=0.0, end_s=10.0,
                            end_reason="exit", exit_status=0, source="trace") for i, r in enumerate(ranks)]
    return Job(job_id="1", exe="app", cmdline="app", user="u", start_epoch_s=1e9, end_epoch_s=1e9 + 100,
               nprocs=len(ranks), processes=processes,
               files=[JobFile(name, "/scratch", "lustre") for name in files], ops=ops,
               totals=empty_columns(TOTAL_COLUMNS), size_bins=empty_columns(SIZE_BIN_COLUMNS),
               mounts=[("/scratch", "lustre")], inputs=[JobInput("t", "trace", ("ops",))])


def test_repeated_stats_of_one_file_and_missing_paths(tmp_path):
    files = ["/scratch/config", "/scratch/lib/missing.so", "/scratch/data"]
    calls = [(0, 0, "stat", 0.01, 0, i * 0.1) for i in range(50)]             # one file stat'ed 50 times
    calls += [(0, 1, "stat", 0.002, -errno.ENOENT, 6 + i * 0.01) for i in range(20)]  # a missing path
    calls += [(0, 2, "open", 0.001, 3, 8.0), (0, 2, "close", 0.0005, 0, 9.0)]
    job = hand_job(calls, files, writes=[(0, 2, 4096, 0.001, 8.5)])
    assessment = assess(job, MODEL)
    meta = assessment["metadata"]
    assert meta["tier"] == "ops" and meta["calls"] == 72
    assert meta["seconds"] == pytest.approx(50 * 0.01 + 20 * 0.002 + 0.0015)
    stat = next(k for k in meta["kinds"] if k["kind"] == "stat")
    assert (stat["calls"], stat["errors"], stat["slowest_s"]) == (70, 20, 0.01)
    # repeated: 49 stats of the config beyond the first, 19 of the missing path
    assert meta["repeated"]["calls"] == 49 + 19
    assert meta["repeated"]["seconds"] == pytest.approx(49 * 0.01 + 19 * 0.002)
    assert meta["repeated"]["files"][0]["name"] == "/scratch/config"
    assert meta["missing"] == {"calls": 20, "seconds": pytest.approx(0.04), "paths": 1}
    top = meta["paths"][0]
    assert (top["name"], top["calls"], top["errors"], top["missing"]) == ("/scratch/config", 50, 0, 0)
    assert meta["paths"][1]["missing"] == 20
    found = findings(assessment)
    assert found["The same files opened or stat'ed many times"]["repeated_calls"] == 68
    assert found["Stat of missing paths"]["missing_calls"] == 20
    assert found["Stat of missing paths"]["missing_s"] == pytest.approx(0.04)
    # ranked by the seconds at stake: the repeated calls' (0.528 s), the missing paths' (0.04 s)
    ranked = [(r["title"], r["at_stake_s"]) for r in assessment["recommendations"] if r["at_stake_s"] is not None]
    assert ranked == sorted(ranked, key=lambda item: -item[1])
    at_stake = dict(ranked)
    assert at_stake["The same files opened or stat'ed many times"] == pytest.approx(49 * 0.01 + 19 * 0.002)
    assert at_stake["Stat of missing paths"] == pytest.approx(0.04)
    from ioassess.report.render import write_report
    write_report(tmp_path / "r.html", assessment)
    page = (tmp_path / "r.html").read_text()
    first = page[page.index('id="what-first"'):page.index("</ol>", page.index('id="what-first"'))]
    listed = [html.unescape(re.sub("<[^>]+>", "", item)).split(":")[0] for item in re.findall(r"<li>(.*?)</li>", first)]
    assert listed == [title for title, _ in ranked][:3]
    # metadata calls are not I/O: the headline counts the one write
    assert assessment["headline"]["io_s"] == pytest.approx(0.001)
    assert [row["direction"] for row in assessment["classes"]] == ["write"]
    assert [row["direction"] for row in assessment["layers"]] == ["write"]
    assert assessment["tier"] == "ops"


def test_missing_paths_whose_time_is_small_are_no_finding():
    """A hundred failed lookups of a few microseconds each (an interpreter's start-up) beside
    half a second of other calls is not worth a finding: 0.1 ms at stake."""
    files = ["/scratch/data", "/scratch/lib/missing.so"]
    calls = [(0, 0, "stat", 0.5, 0, 0.0)] + [(0, 1, "stat", 1e-6, -errno.ENOENT, 1 + i * 0.01) for i in range(100)]
    assessment = assess(hand_job(calls, files, writes=[(0, 0, 4096, 0.001, 3.0)]), MODEL)
    assert assessment["metadata"]["missing"]["calls"] == 100
    assert "Stat of missing paths" not in findings(assessment)


def test_slowest_calls_in_order_and_the_imbalance_over_ranks():
    files = [f"/scratch/f{i}" for i in range(4)]
    calls = [(r, r, "open", 0.1 * (r + 1), 3, 1.0) for r in range(4)]
    calls += [(3, 3, "unlink", 2.0, 0, 2.0), (1, 1, "mkdir", 0.05, -errno.EEXIST, 3.0)]
    job = hand_job(calls, files, ranks=(0, 1, 2, 3))
    meta = assess(job, MODEL)["metadata"]
    durations = [c["duration_s"] for c in meta["slowest_calls"]]
    assert durations == sorted(durations, reverse=True) and len(durations) == 6
    first = meta["slowest_calls"][0]
    assert (first["kind"], first["file"], first["rank"], first["error"]) == ("unlink", "/scratch/f3", 3, None)
    assert next(c for c in meta["slowest_calls"] if c["kind"] == "mkdir")["error"] == "EEXIST"
    spread = meta["per_rank"]["spread"]
    per_rank = [0.1, 0.2 + 0.05, 0.3, 0.4 + 2.0]
    assert spread["max"]["rank"] == 3 and spread["max"]["seconds"] == pytest.approx(2.4)
    assert spread["mean_s"] == pytest.approx(np.mean(per_rank))
    assert spread["imbalance"] == pytest.approx(2.4 / np.mean(per_rank))
    assert meta["per_rank"]["above_threshold"] == []
    assert meta["file_systems"] == [{"mount_point": "/scratch", "fs_type": "lustre", "files": 4, "calls": 6,
                                     "seconds": pytest.approx(sum(per_rank))}]


def test_many_small_files():
    n = 150
    files = [f"/scratch/small/{i}" for i in range(n)] + ["/scratch/big"]
    calls = [(0, i, kind, 0.01, 0, i + j * 0.1) for i in range(n) for j, kind in enumerate(("open", "close"))]
    calls += [(0, n, "open", 0.01, 0, 500.0)]
    writes = [(0, i, 1000, 0.0001, i + 0.05) for i in range(n)] + [(0, n, 64 << 20, 0.5, 501.0)]
    assessment = assess(hand_job(calls, files, writes=writes), MODEL)
    small = assessment["metadata"]["small_files"]
    assert (small["files"], small["opened"], small["bytes"]) == (n, n + 1, n * 1000)
    assert small["seconds"] == pytest.approx(n * 0.02)
    numbers = findings(assessment)["Many small files"]
    assert numbers["small_files"] == n and numbers["small_files_s"] == pytest.approx(n * 0.02)
    # fewer files: no finding
    few = assess(hand_job(calls[:40], files, writes=writes), MODEL)
    assert "Many small files" not in findings(few)


def test_standard_streams_are_not_small_files():
    """ior_hdf5_example.darshan's STDIO module counts an open of <STDOUT> (128 writes, 2421 bytes):
    a stream, not a small file the job opened; the HDF5 file it did open moved 8 MiB."""
    job = read_darshan_log(next(p for p in shipped_darshan_logs() if os.path.basename(p) == "ior_hdf5_example.darshan"))
    assert "<STDOUT>" in [f.name for f in job.files]
    small = assess(job, MODEL)["metadata"]["small_files"]
    assert (small["files"], small["opened"]) == (0, 1)


def test_a_job_without_metadata_has_no_section(tmp_path):
    job = hand_job([], ["/scratch/data"], writes=[(0, 0, 4096, 0.001, 1.0)])
    assessment = assess(job, MODEL)
    assert assessment["metadata"] is None
    from ioassess.report.render import write_report
    write_report(tmp_path / "r.html", assessment)
    page = (tmp_path / "r.html").read_text()
    assert 'id="metadata"' in page and "The inputs record no metadata calls" in page
    assert DIRECTIONS[META] == "meta" and LAYERS[POSIX] == "posix"


def test_the_page_shows_the_section(tmp_path):
    from ioassess.report.render import write_report
    files = ["/scratch/config", "/scratch/lib/missing.so"]
    calls = [(0, 0, "stat", 0.01, 0, i * 0.1) for i in range(50)]
    calls += [(0, 1, "access", 0.002, -errno.ENOENT, 6 + i * 0.01) for i in range(20)]
    assessment = assess(hand_job(calls, files), MODEL)
    write_report(tmp_path / "r.html", assessment)
    page = (tmp_path / "r.html").read_text()
    section = page[page.index('id="metadata"'):page.index('id="recommendations"')]
    assert "70 metadata calls on 2 paths" in section
    assert "/scratch/lib/missing.so" in section and "<th>not found</th>" in section
    assert "Over 1 process" in section or "Over 1 rank" in section
    assert "Stat of missing paths" in page and "<script" not in page
    # a trace without a Darshan log knows no mount points: the row says where its files are
    job = hand_job(calls, files)
    job.files = [JobFile(f.name, "", f.fs_type) for f in job.files]
    unmounted = assess(job, MODEL)
    (fs,) = unmounted["metadata"]["file_systems"]
    assert (fs["mount_point"], fs["fs_type"], fs["files_under"]) == ("", "lustre", "/scratch")
    write_report(tmp_path / "u.html", unmounted)
    assert "lustre (mount point not recorded: files under /scratch)" in (tmp_path / "u.html").read_text()
    counters = assess(read_darshan_log(next(p for p in shipped_darshan_logs()
                                            if os.path.basename(p) == "sample-badost.darshan")), MODEL)
    write_report(tmp_path / "c.html", counters)
    page = (tmp_path / "c.html").read_text()
    section = page[page.index('id="metadata"'):page.index('id="recommendations"')]
    assert "From Darshan's counters" in section and "Counters give no single call's time." in section
    assert "records shared by all ranks" in section


def test_seconds_summed_over_overlapping_calls_are_said_to_be(tmp_path):
    """dxt.darshan's rank 0 has 3.12 h of POSIX_F_META_TIME in a job of 24.5 min: its calls
    overlapped (threads), and the page says so rather than leave an impossible number bare."""
    from ioassess.report.render import write_report
    assessment = assess(read_darshan_log(next(p for p in shipped_darshan_logs()
                                              if os.path.basename(p) == "dxt.darshan")), MODEL)
    assert assessment["metadata"]["per_rank"]["spread"]["max"]["seconds"] > assessment["job"]["runtime_s"]
    write_report(tmp_path / "d.html", assessment)
    page = (tmp_path / "d.html").read_text()
    assert "These seconds are summed over calls: a rank with 3.12 h of them in a job of 24.5 min" in page
