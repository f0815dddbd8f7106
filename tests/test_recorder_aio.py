"""Asynchronous I/O, mapped files and io_uring under the real recorder, with real programs.

- fio's libaio engine (4 KiB random O_DIRECT reads, iodepth 8): every request recorded, once,
  as an asynchronous read whose median duration is within 10 % of fio's own median latency of the
  same interval, from the start of its submission to its completion (lat_ns with
  --lat_percentiles=1; fio's clat_ns starts after io_submit returns, 5-8 µs later on AMD EPYC);
- fio's io_uring engine (its ring set up through syscall()), and rings set up by raw system
  calls as liburing does (found at exit, tests/progs/rawring.c): each instance recorded once, and
  the report (HTML and JSON) says that their I/O is not timed;
- tests/progs/posixaio.c (aio_read, aio_write, aio_fsync, lio_listio, aio_suspend, aio_error,
  aio_return): every request recorded with its kind, offset, bytes and result;
- tests/progs/libaio_edges.c: libaio's vector and sync requests, a batch reaped in parts, and
  hostile calls (NULL arrays, bad descriptors, a huge nr, iocbs never submitted), syscall();
- tests/progs/mapfiles.c (a shared read-write and a private read-only mapping of files, an
  anonymous mapping and /dev/zero, failed mappings): each mapping of a file recorded with its
  length, offset, protection and sharing, no other; the report's mapped-files sentence.
Output, exit status and files are the same without the recorder (tests/test_transparency.py has
them among its programs too)."""
import json
import re

import numpy as np

from recorder_helpers import assert_same_run, load, op_rows, prog, run, select, tool
from ioassess.inputs.traceformat import OpFlag

FIO_OPS = 3000


def fio(tmp_path, engine, trace_dir, recorder_lib, ops=FIO_OPS):
    """fio's 4 KiB random O_DIRECT reads of a 16 MiB file in tmp_path with the engine, under the
    recorder; its JSON output's read statistics."""
    result = run([tool("fio"), "--name=aio", f"--filename={tmp_path / 'fio.dat'}", "--size=16M", "--rw=randread",
                  "--bs=4k", "--direct=1", f"--ioengine={engine}", "--iodepth=8", f"--number_ios={ops}",
                  "--lat_percentiles=1", "--output-format=json"],
                 cwd=tmp_path, preload=[recorder_lib], trace_dir=trace_dir)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["jobs"][0]["read"]


def test_fio_libaio_every_request_timed_as_fio_times_it(tmp_path, recorder_lib, ioassess):
    stats = fio(tmp_path, "libaio", tmp_path / "traces", recorder_lib)
    ts = load(tmp_path / "traces")
    reads = select(ts, tmp_path / "fio.dat", "aio_read")
    assert reads.sum() == stats["total_ios"] == FIO_OPS
    assert not (select(ts, tmp_path / "fio.dat", "pread") | select(ts, tmp_path / "fio.dat", "read")).any()
    ops = ts.ops
    assert (ops["flags"][reads] == OpFlag.ASYNC | OpFlag.DIRECT).all()
    assert (ops["requested"][reads] == 4096).all() and (ops["result"][reads] == 4096).all()
    assert (ops["offset"][reads] % 4096 == 0).all() and (ops["offset"][reads] < 16 << 20).all()
    recorded_median = float(np.median(ops["duration_ns"][reads]))
    fio_median = stats["lat_ns"]["percentile"]["50.000000"]
    assert abs(recorded_median - fio_median) <= 0.1 * fio_median, (recorded_median, fio_median)

    # The report: in the layer table flagged async, counted once in the I/O time, and said to overlap.
    result = ioassess("report", tmp_path / "traces", "-o", tmp_path / "r.html", "--json", tmp_path / "a.json")
    assert result.returncode == 0, result.stderr
    assessment = json.loads((tmp_path / "a.json").read_text())
    (read_row,) = [row for row in assessment["layers"] if row["direction"] == "read"]
    assert read_row["posix"]["ops"] == read_row["posix"]["flagged"]["async"]["ops"] == FIO_OPS
    assert read_row["posix"]["flagged"]["direct"]["ops"] == FIO_OPS
    seconds = float(ops["duration_ns"][reads].sum()) / 1e9
    assert assessment["asynchronous"]["ops"] == assessment["asynchronous"]["libaio"]["ops"] == FIO_OPS
    assert abs(assessment["asynchronous"]["seconds"] - seconds) < 1e-6
    assert sum(row["ops"] for row in assessment["classes"] if row["direction"] == "read") == FIO_OPS
    html = (tmp_path / "r.html").read_text()
    assert f"{FIO_OPS} asynchronous requests ({FIO_OPS} by libaio)" in html
    assert "runs from its submission to its completion" in html and "overlap" in html


def test_requests_in_flight_together_overlap_and_the_report_says_so(tmp_path, recorder_lib, ioassess):
    """32 requests in flight: summed, their durations are many times the time fio ran, and the
    page says that the I/O time overlaps instead of presenting it as time waited."""
    result = run([tool("fio"), "--name=deep", f"--filename={tmp_path / 'fio.dat'}", "--size=16M", "--rw=randread",
                  "--bs=4k", "--direct=1", "--ioengine=libaio", "--iodepth=32", "--number_ios=4000",
                  "--output-format=json"], cwd=tmp_path, preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert result.returncode == 0, result.stderr
    report = ioassess("report", tmp_path / "traces", "-o", tmp_path / "r.html", "--json", tmp_path / "a.json")
    assert report.returncode == 0, report.stderr
    assessment = json.loads((tmp_path / "a.json").read_text())
    busiest = assessment["per_process"]["io"]["max"]["seconds"]
    assert busiest > 2 * assessment["job"]["runtime_s"], (busiest, assessment["job"]["runtime_s"])
    html = (tmp_path / "r.html").read_text()
    assert re.search(r'id="overlapping-io">I/O time is summed over calls: a process with [^<]* had calls in flight at '
                     r'the same time \(asynchronous requests, or several threads\), so they overlap', html)


def test_fio_io_uring_named_and_untimed_in_the_report(tmp_path, recorder_lib, ioassess):
    fio(tmp_path, "io_uring", tmp_path / "traces", recorder_lib, ops=500)
    ts = load(tmp_path / "traces", meta=True)
    rings = select(ts, op="io_uring")
    assert rings.sum() == 1, "fio's job sets up one ring"
    assert not select(ts, op="aio_read").any()
    result = ioassess("report", tmp_path / "traces", "-o", tmp_path / "r.html", "--json", tmp_path / "a.json")
    assert result.returncode == 0, result.stderr
    assessment = json.loads((tmp_path / "a.json").read_text())
    assert assessment["io_uring"] == {"instances": 1, "processes": 1}
    html = (tmp_path / "r.html").read_text()
    assert "1 io_uring instance: its I/O is not timed" in html


def requests_printed(stdout):
    """The REQUEST lines of posixaio: (kind, offset, bytes, result), sorted."""
    rows = [line.split()[1:] for line in stdout.decode().splitlines() if line.startswith("REQUEST ")]
    return sorted((kind, int(offset), int(nbytes), int(result)) for kind, offset, nbytes, result in rows)


def test_posix_aio_every_request_with_its_bytes_and_result(tmp_path, recorder_lib):
    for d in ("plain", "rec"):
        (tmp_path / d).mkdir()
    plain = run([prog("posixaio"), tmp_path / "plain"])
    recorded = run([prog("posixaio"), tmp_path / "rec"], preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert_same_run(plain, recorded)
    assert (tmp_path / "plain" / "aio.dat").read_bytes() == (tmp_path / "rec" / "aio.dat").read_bytes()
    ts = load(tmp_path / "traces")
    rows = op_rows(ts)
    asynchronous = [r for r in rows if r["kind"].startswith("aio_")]
    assert len(asynchronous) == len(rows), "glibc's own reads and writes for the requests are not recorded"
    assert sorted((r["kind"], r["offset"], r["requested"], r["result"]) for r in asynchronous) == \
        requests_printed(plain.stdout)
    assert all(r["flags"] == OpFlag.ASYNC | OpFlag.POSIX_AIO for r in asynchronous)
    assert {r["path"] for r in asynchronous} == {str(tmp_path / "rec" / "aio.dat"), "<invalid descriptor>"}
    assert all(r["duration_ns"] > 0 for r in asynchronous)


def mappings_printed(stdout):
    """The MAP lines of mapfiles: (name, length, offset, protection letters, shared, result)."""
    rows = [line.split()[1:7] for line in stdout.decode().splitlines() if line.startswith("MAP ")]
    return sorted((name, int(length), int(offset), prot, shared == "1", int(result))
                  for name, length, offset, prot, shared, result in rows)


def test_mapped_files_with_their_bytes_protection_and_sharing(tmp_path, recorder_lib, ioassess):
    for d in ("plain", "rec"):
        (tmp_path / d).mkdir()
    plain = run([prog("mapfiles"), tmp_path / "plain"])
    recorded = run([prog("mapfiles"), tmp_path / "rec"], preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert_same_run(plain, recorded)
    for name in ("shared.dat", "private.dat"):
        assert (tmp_path / "plain" / name).read_bytes() == (tmp_path / "rec" / name).read_bytes()
    ts = load(tmp_path / "traces", meta=True)
    maps = op_rows(ts, select(ts, op="mmap"))
    names = {str(tmp_path / "rec" / "shared.dat"): "shared.dat", str(tmp_path / "rec" / "private.dat"): "private.dat",
             "<invalid descriptor>": "closed"}

    def protection(flags):
        return "".join(letter for letter, flag in (("r", OpFlag.MAP_READ), ("w", OpFlag.MAP_WRITE),
                                                   ("x", OpFlag.MAP_EXEC)) if flags & flag)
    recorded_maps = sorted((names[m["path"]], m["requested"], m["offset"], protection(m["flags"]),
                            bool(m["flags"] & OpFlag.MAP_SHARED), m["result"]) for m in maps)
    assert recorded_maps == mappings_printed(plain.stdout), "the anonymous and /dev/zero mappings are not recorded"

    result = ioassess("report", tmp_path / "traces", "-o", tmp_path / "r.html", "--json", tmp_path / "a.json")
    assert result.returncode == 0, result.stderr
    mapped = json.loads((tmp_path / "a.json").read_text())["mapped_files"]
    assert (mapped["mappings"], mapped["bytes"], mapped["files"], mapped["failed"]) == (2, (64 + 12) << 10, 2, 2)
    assert [(f["name"], f["bytes"], f["protection"], f["shared"]) for f in mapped["top"]] == [
        (str(tmp_path / "rec" / "shared.dat"), 64 << 10, "rw", True),
        (str(tmp_path / "rec" / "private.dat"), 12 << 10, "r", False)]
    html = (tmp_path / "r.html").read_text()
    assert "0.1 MiB of files were memory-mapped: page faults are not timed" in html


def test_libaio_requests_and_hostile_calls(tmp_path, recorder_lib):
    """Vector requests' bytes are their buffers' sum, a batch reaped in parts is every request
    once; NULL arrays, bad descriptors, a huge nr, a cancel of an iocb never submitted and
    syscall() with any number of arguments return what they return without the recorder."""
    for d in ("plain", "rec"):
        (tmp_path / d).mkdir()
    plain = run([prog("libaio_edges"), tmp_path / "plain"])
    recorded = run([prog("libaio_edges"), tmp_path / "rec"], preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert_same_run(plain, recorded)
    ts = load(tmp_path / "traces")
    rows = op_rows(ts)
    assert all(r["path"] == str(tmp_path / "rec" / "edges.dat") for r in rows)
    assert sorted((r["kind"], r["offset"], r["requested"], r["result"]) for r in rows if r["kind"] != "pread") == \
        requests_printed(plain.stdout)
    assert all(r["flags"] == OpFlag.ASYNC for r in rows if r["kind"] != "pread")
    assert [r["kind"] for r in rows].count("pread") == 0, "syscall(SYS_pread64) is not a libc pread"


def test_io_uring_instances_of_raw_system_calls_found_at_exit(tmp_path, recorder_lib):
    """Rings set up by raw system calls (liburing's way) are found by the scan at exit, the one
    set up through syscall() when it is made, and none is counted twice."""
    plain = run([prog("rawring"), 3])
    recorded = run([prog("rawring"), 3], preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert_same_run(plain, recorded)
    assert plain.stdout == b"rings 4\n"
    ts = load(tmp_path / "traces", meta=True)
    rings = op_rows(ts, select(ts, op="io_uring"))
    assert len(rings) == 4
    assert sorted(r["requested"] for r in rings) == [0, 0, 0, 8], "the syscall() ring's entries, at its setup"
