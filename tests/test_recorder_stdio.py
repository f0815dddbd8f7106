"""stdio calls (fopen, fdopen, freopen, fclose, fread, fwrite, fgets, fputs, fgetc, getc, fputc,
putc, fprintf, fscanf, fflush, fseek, rewind, fsetpos, ftell, and the fortified forms) are
recorded as the STDIO layer, each with its bytes, kind and file, by a real program that behaves
exactly as without the recorder.

tests/progs/stdio_ops.c makes every call on files of a directory and counts them itself, and
makes stdio calls on streams that are no files (stdout to a pipe, memory, cookie and popen
streams, fflush(NULL)), which must not be recorded. stdio_ops_chk is the same program built
with _FORTIFY_SOURCE (__fprintf_chk, __fgets_chk, __fread_chk).
"""
import collections
import json
import errno
import resource
import signal

import numpy as np
import pytest

from ioassess.inputs.trace import totals
from ioassess.inputs.traceformat import OP_DIRECTION, OP_LAYER, OP_NAMES
from recorder_helpers import assert_same_run, assert_same_tree, describe, load, op_rows, prog, run

STDIO_KINDS = {name for code, name in OP_NAMES.items() if OP_LAYER[code] == "stdio"}
FILES = ("a", "b", "c", "d")


def program_counts(stdout):
    """{(file, kind): (calls, bytes)} from the program's "count" lines."""
    counts = {}
    for line in stdout.decode().splitlines():
        if line.startswith("count "):
            _, file, kind, calls, nbytes = line.split()
            counts[(file, kind)] = (int(calls), int(nbytes))
    return counts


def stdio_counts(ts, work):
    """{(file relative to work, kind): (ops, bytes moved)} of the trace's stdio ops."""
    counts = collections.defaultdict(lambda: [0, 0])
    for op, file_id, result in zip(ts.ops["op"].tolist(), ts.ops["file_id"].tolist(), ts.ops["result"].tolist()):
        kind = OP_NAMES[op]
        if kind in STDIO_KINDS:
            name = ts.files[file_id].name
            key = (name[len(str(work)) + 1:] if name.startswith(f"{work}/") else name, kind)
            counts[key][0] += 1
            counts[key][1] += max(result, 0) if OP_DIRECTION[op] != "meta" else 0
    return {key: tuple(value) for key, value in counts.items()}


@pytest.mark.parametrize("program", ["stdio_ops", "stdio_ops_chk"])
def test_every_stdio_call_recorded_with_its_bytes_kind_and_file(program, tmp_path, recorder_lib):
    plain_dir, rec_dir, traces = tmp_path / "plain", tmp_path / "rec", tmp_path / "traces"
    plain_dir.mkdir()
    rec_dir.mkdir()
    plain = run([prog(program), plain_dir, "popen"])
    recorded = run([prog(program), rec_dir, "popen"], preload=[recorder_lib], trace_dir=traces)
    assert plain.returncode == 0, describe(plain)
    assert_same_run(plain, recorded)
    assert_same_tree(plain_dir, rec_dir)
    assert b"missing: not opened, errno ENOENT" in recorded.stdout
    assert b"errno after successful calls: fwrite 4321 fflush 4321 ftell 4321 fread 4321 fgets 4321 fclose 4321" \
        in recorded.stdout
    assert b"same descriptor number as a: yes" in recorded.stdout

    ts = load(traces, meta=True)
    expected = program_counts(recorded.stdout)
    counts = stdio_counts(ts, rec_dir)
    # the failed fopen, on its path; every other stdio op on a file of the program's count
    assert counts.pop(("missing/x", "fopen")) == (1, 0)
    assert counts == expected
    assert {kind for _, kind in expected} == STDIO_KINDS
    failed = ts.ops["result"] < 0
    assert [OP_NAMES[op] for op in ts.ops["op"][failed].tolist()] == ["fwrite", "fopen"]
    assert ts.ops["result"][failed].tolist() == [-errno.EBADF, -errno.ENOENT]
    assert b"fwrite to a read stream: 0, errno EBADF" in recorded.stdout
    stdio = np.isin(ts.ops["op"], [code for code, name in OP_NAMES.items() if name in STDIO_KINDS])
    assert np.all(ts.ops["offset"][stdio] == -1)
    assert np.all(ts.ops["duration_ns"][stdio] > 0)
    by_kind = {name: ts.ops["requested"][ts.ops["op"] == code].tolist() for code, name in OP_NAMES.items()}
    assert by_kind["fwrite"] == [1000, 40, 2] and by_kind["fread"] == [1000, 40] and by_kind["fgets"] == [64]


def test_a_descriptor_number_reused_after_fclose_names_the_new_file(tmp_path, recorder_lib):
    """stdio_ops closes a's stream, then open() gets its descriptor number for b: b's write is
    on b, and no op on a comes after a's fclose."""
    work = tmp_path / "work"
    work.mkdir()
    result = run([prog("stdio_ops"), work], preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert result.returncode == 0, describe(result)
    assert b"same descriptor number as a: yes" in result.stdout
    ts = load(tmp_path / "traces", meta=True)
    ids = {info.name: file_id for file_id, info in ts.files.items()}
    ops, start = ts.ops["op"], ts.ops["start_ns"]
    on_a = ts.ops["file_id"] == ids[str(work / "a")]
    writes = np.flatnonzero(ops == next(code for code, name in OP_NAMES.items() if name == "write"))
    assert [ts.files[file_id].name for file_id in ts.ops["file_id"][writes].tolist()] == [str(work / "b")]
    fclose_of_a = start[on_a & (ops == next(code for code, name in OP_NAMES.items() if name == "fclose"))]
    assert start[on_a].max() == fclose_of_a.max() < start[writes[0]]


def test_stdout_is_recorded_only_when_it_is_a_file(tmp_path, recorder_lib):
    """stdio_ops writes to stdout: to a pipe (the other tests) nothing of it is recorded; to a
    regular file its fwrite and fflush are, on that file."""
    work = tmp_path / "work"
    work.mkdir()
    out = tmp_path / "out.txt"
    result = run(["sh", "-c", 'exec "$0" "$1" > "$2"', prog("stdio_ops"), work, out], preload=[recorder_lib],
                 trace_dir=tmp_path / "traces")
    assert result.returncode == 0, describe(result)
    counts = stdio_counts(load(tmp_path / "traces", meta=True), tmp_path)
    assert counts[("out.txt", "fwrite")] == (1, 14) and counts[("out.txt", "fflush")] == (1, 0)


def test_stdio_ops_past_the_record_cap_are_counted_exactly(tmp_path, recorder_lib):
    """With a record cap of 10, the summary table counts every stdio op of stdio_ops by kind and
    file, its bytes (none for fopen's descriptor or ftell's position) and its failures."""
    kept, capped = tmp_path / "kept", tmp_path / "capped"
    kept.mkdir()
    capped.mkdir()
    full = run([prog("stdio_ops"), kept], preload=[recorder_lib], trace_dir=tmp_path / "traces-kept")
    cut = run([prog("stdio_ops"), capped], preload=[recorder_lib], trace_dir=tmp_path / "traces-capped",
              env={"IOASSESS_MAX_RECORDS": "10"})
    assert full.returncode == cut.returncode == 0, describe(cut)
    ts_full, ts_cut = load(tmp_path / "traces-kept", meta=True), load(tmp_path / "traces-capped", meta=True)
    assert len(ts_cut.ops["op"]) == 10 and ts_cut.processes[0].ops_lost == 0

    def table(ts, work):
        t = totals(ts, by=("file_id", "op"))
        return {(ts.files[f].name.replace(str(work), "DIR"), OP_NAMES[op]): (n, nbytes, errors)
                for f, op, n, nbytes, errors in zip(t["file_id"].tolist(), t["op"].tolist(), t["count"].tolist(),
                                                    t["bytes_returned"].tolist(), t["errors"].tolist())
                if OP_NAMES[op] in STDIO_KINDS and ts.files[f].name.startswith(str(work))}
    assert table(ts_cut, capped) == table(ts_full, kept)
    assert table(ts_cut, capped)[("DIR/a", "ftell")] == (3, 0, 0)


def test_a_null_stream_crashes_as_without_the_recorder(tmp_path, recorder_lib):
    """fputs to a NULL stream: the C library's crash (SIGSEGV), the recorder passing it on
    untouched."""
    def no_core():
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    plain = run([prog("stdio_ops"), tmp_path, "null"], preexec_fn=no_core)
    recorded = run([prog("stdio_ops"), tmp_path, "null"], preload=[recorder_lib], trace_dir=tmp_path / "traces",
                   preexec_fn=no_core)
    assert plain.returncode == recorded.returncode == -signal.SIGSEGV, describe(recorded)


def negative_byte_counts(value, where="assessment"):
    """The places in a JSON document (as loaded) where a count of bytes is negative."""
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in negative_byte_counts(item, f"{where}.{key}")]
    if isinstance(value, list):
        return [found for i, item in enumerate(value) for found in negative_byte_counts(item, f"{where}[{i}]")]
    return [where] if "bytes" in where.rsplit(".", 1)[-1] and isinstance(value, (int, float)) and value < 0 else []


@pytest.mark.parametrize("cap", [None, "0"], ids=["records", "summary"])
def test_byte_counts_saturate_from_recorder_to_report(cap, tmp_path, ioassess):
    """tests/progs/hugesizes.c: fwrite and fread of 2 items of SIZE_MAX / 2 + 2 bytes (glibc moves
    the wrapped product, 2 bytes) and two reads of SIZE_MAX bytes. Each op's request saturates at
    2^64 - 1, the bytes it moved are glibc's; sums of requests saturate at 2^63 - 1 in the reader
    (kept and summarised ops alike), and `ioassess run` (no numpy warning), `show` and the
    assessment give 2 bytes written and 2 read, and no negative byte count."""
    plain = run([prog("hugesizes"), tmp_path / "plain.bin"])
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", prog("hugesizes"), tmp_path / "rec.bin",
                      env={"IOASSESS_MAX_RECORDS": cap} if cap else {})
    assert plain.returncode == result.returncode == 0, result.stderr
    assert result.stdout == plain.stdout.decode() == "fwrite 2\nfread 2\nread -1\nread -1\n"
    assert result.stderr.startswith("ioassess: traces of 1 process") and result.stderr.count("\n") == 1, result.stderr
    assert (tmp_path / "rec.bin").read_bytes() == b"ab"
    ts = load(tmp_path / "t", meta=True)
    if cap is None:
        moved = {OP_NAMES[row["op"]]: (row["requested"], row["result"]) for row in op_rows(ts)}
        assert moved["fwrite"] == moved["fread"] == (2**64 - 1, 2)
        assert moved["read"] == (2**64 - 1, -errno.EFAULT)
    table = totals(ts, by=("op",))
    by_op = {OP_NAMES[op]: (requested, returned) for op, requested, returned in
             zip(table["op"].tolist(), table["bytes_requested"].tolist(), table["bytes_returned"].tolist())}
    assert by_op["fwrite"] == by_op["fread"] == (2**63 - 1, 2) and by_op["read"] == (2**63 - 1, 0)

    shown = json.loads(ioassess("show", "--json", tmp_path / "t").stdout)
    assert [(f["name"], f["bytes"]) for f in shown["top_files"]] == [(str(tmp_path / "rec.bin"), 4)]
    assert not negative_byte_counts(shown)
    assessment = json.loads((tmp_path / "t" / "assessment.json").read_text())
    assert assessment["io_model"]["write_bytes"] == 2 and assessment["top_files"][0]["bytes"] == 4
    assert not negative_byte_counts(assessment)
