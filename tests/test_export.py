"""`ioassess export --perfetto`: a real job's ops (several processes and threads, data and
metadata calls) in the Trace Event Format, checked against the format's documented keys (the
viewers themselves cannot run here: Perfetto's trace processor downloads a binary at first use)
and against the traces: one slice per op record, the same total duration."""
import json
import os
import re
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from ioassess.inputs.trace import read_trace_dir
from ioassess.report import load_and_choose
from ioassess.report.export import PARQUET_COLUMNS, write_parquet, write_perfetto
from ioassess.report.model_choice import file_models
from ioassess.report.sections import TOP_FILES
from recorder_helpers import REPO, describe, prog, run, tool

MODEL = "local-linux"   # the model of the export and the assessment compared with it

# The Trace Event Format's keys (its document, "JSON Object Format" and "Event Descriptions").
TOP_KEYS = {"traceEvents", "displayTimeUnit", "systemTraceEvents", "otherData", "stackFrames", "samples",
            "controllerTraceDataKey", "powerTraceAsString"}
EVENT_KEYS = {"name", "cat", "ph", "ts", "tts", "pid", "tid", "args", "cname", "dur", "tdur", "id", "id2", "scope",
              "bp", "s", "sf", "stack", "esf", "estack", "bind_id", "flow_in", "flow_out"}
METADATA_NAMES = {"process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index"}
# The trace viewer's reserved colour names (catapult's tracing/base/color_scheme.html).
RESERVED_CNAMES = {"thread_state_uninterruptible", "thread_state_iowait", "thread_state_running",
                   "thread_state_runnable", "thread_state_sleeping", "thread_state_unknown", "background_memory_dump",
                   "light_memory_dump", "detailed_memory_dump", "vsync_highlight_color", "generic_work", "good", "bad",
                   "terrible", "black", "grey", "white", "yellow", "olive", "rail_response", "rail_animation",
                   "rail_idle", "rail_load", "startup", "heap_dump_stack_frame", "heap_dump_object_type",
                   "heap_dump_child_node_arrow", "cq_build_running", "cq_build_passed", "cq_build_failed",
                   "cq_build_abandoned", "cq_build_attempt_runnig", "cq_build_attempt_passed",
                   "cq_build_attempt_failed"}


@pytest.fixture
def exported(tmp_path, ioassess, recorder_lib):
    """forkthreads (4 threads of pwrites, 20 forked children) under the recorder, exported."""
    result = run([prog("forkthreads"), tmp_path, "4"], preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert result.returncode == 0, describe(result)
    out = tmp_path / "ops.json"
    done = ioassess("export", str(tmp_path / "traces"), "--perfetto", str(out))
    assert done.returncode == 0, done.stderr
    return read_trace_dir(str(tmp_path / "traces")), json.loads(out.read_text()), out, done


def test_only_documented_keys_and_phases(exported):
    _, trace, out, done = exported
    assert set(trace) <= TOP_KEYS and trace["displayTimeUnit"] == "ns"
    for event in trace["traceEvents"]:
        assert set(event) <= EVENT_KEYS, event
        assert event["ph"] in ("X", "M", "b", "e"), event
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
        if event["ph"] == "M":
            assert event["name"] in METADATA_NAMES and set(event["args"]) in ({"name"}, {"sort_index"})
        else:
            assert event["cname"] in RESERVED_CNAMES
            assert event["ts"] >= 0 and event["dur"] >= 0
    assert os.stat(out).st_mode & 0o777 == 0o600
    assert done.stderr == f"ioassess: wrote {out}: {trace['otherData']['ops']} ops\n"


def test_a_slice_per_op_with_the_traces_durations(exported):
    traces, trace, _, _ = exported
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == len(traces.ops["op"]) == trace["otherData"]["ops"] > 20 * 10 + 4 * 2000
    assert sum(e["dur"] for e in slices) * 1e3 == pytest.approx(float(traces.ops["duration_ns"].sum()), rel=1e-9)
    # every slice is on a named process and thread track; one process track per trace
    named_processes = {e["pid"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    named_threads = {(e["pid"], e["tid"]) for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert len(named_processes) == len(traces.processes)
    assert {(e["pid"], e["tid"]) for e in slices} == named_threads
    assert len({e["tid"] for e in slices if e["pid"] == 0}) >= 5   # the main thread and its 4 workers


def test_slices_are_named_and_coloured_by_class(exported):
    _, trace, _, _ = exported
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    writes = [e for e in slices if e["name"].startswith("write: ")]
    assert len(writes) == 20 * 10 + 4 * 2000
    assert {e["name"] for e in writes} == {f"write: {e['args']['class']}" for e in writes}
    assert all(e["args"]["bytes"] in (100, 512) and e["args"]["lost_s"] >= 0 for e in writes)
    assert {e["name"] for e in slices} - {e["name"] for e in writes} <= {"open", "close", "stat"}


def test_calls_of_a_thread_nest_or_follow_each_other(exported):
    """The viewers draw a thread's slices as a stack: each one after the last ended, or inside it."""
    _, trace, _, _ = exported
    slices = sorted((e for e in trace["traceEvents"] if e["ph"] == "X"), key=lambda e: (e["pid"], e["tid"], e["ts"]))
    ends = {}
    for e in slices:
        key = (e["pid"], e["tid"])
        assert key not in ends or e["ts"] >= ends[key] - 1e-3, e
        ends[key] = e["ts"] + e["dur"]


def test_bad_input_is_one_line_and_writes_nothing(tmp_path, ioassess):
    out = tmp_path / "ops.json"
    done = ioassess("export", str(tmp_path / "missing"), "--perfetto", str(out))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert str(tmp_path / "missing") in done.stderr
    assert not out.exists() and not list(tmp_path.glob(".ops.json.*"))


def test_a_darshan_log_with_dxt(tmp_path, ioassess):
    """DXT segments know no threads: each rank's ops are on one track, named "ops"."""
    from ioassess.inputs.load import load_job
    from recorder_helpers import shipped_darshan_logs
    log = next(p for p in shipped_darshan_logs() if os.path.basename(p) == "dxt.darshan")
    out = tmp_path / "dxt.json"
    done = ioassess("export", log, "--perfetto", str(out))
    assert done.returncode == 0, done.stderr
    trace = json.loads(out.read_text())
    job = load_job([log])
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == len(job.ops["start_s"]) > 0
    assert sum(e["dur"] for e in slices) / 1e6 == pytest.approx(float(job.ops["duration_s"].sum()), rel=1e-9)
    assert {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"} == {"ops"}
    assert trace["otherData"]["ops_in_aggregate_only"] == int(job.totals["ops"].sum())


def test_fios_asynchronous_requests_are_async_slices(tmp_path, ioassess, recorder_lib):
    """fio's libaio requests overlap on its thread: each is an async pair ("b" at submission, "e"
    at completion, one id), so that the thread's own slices still nest."""
    result = run([tool("fio"), "--name=aio", f"--filename={tmp_path / 'fio.dat'}", "--size=4M", "--rw=randread",
                  "--bs=4k", "--direct=1", "--ioengine=libaio", "--iodepth=8", "--number_ios=500"],
                 cwd=tmp_path, preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert result.returncode == 0, describe(result)
    out = tmp_path / "ops.json"
    assert ioassess("export", str(tmp_path / "traces"), "--perfetto", str(out)).returncode == 0
    events = json.loads(out.read_text())["traceEvents"]
    begins = {e["id"]: e for e in events if e["ph"] == "b"}
    ends = {e["id"]: e for e in events if e["ph"] == "e"}
    assert len(begins) == len(ends) == 500 and begins.keys() == ends.keys()
    assert all(begins[i]["name"].startswith("read: ") and "async" in begins[i]["args"]["flags"] and
               ends[i]["ts"] >= begins[i]["ts"] and (ends[i]["pid"], ends[i]["tid"], ends[i]["cat"]) ==
               (begins[i]["pid"], begins[i]["tid"], begins[i]["cat"]) for i in begins)
    traces = read_trace_dir(str(tmp_path / "traces"))
    slices = [e for e in events if e["ph"] == "X"]
    assert len(slices) + len(begins) == len(traces.ops["op"])


@pytest.fixture(scope="module")
def forkthreads(tmp_path_factory, recorder_lib):
    """forkthreads (2 threads of pwrites, 20 forked children) under the recorder, exported to
    Parquet and assessed (`ioassess report --json`) under one model: (its directory, the
    export's run, the assessment)."""
    directory = tmp_path_factory.mktemp("forkthreads")
    result = run([prog("forkthreads"), directory, "2"], preload=[recorder_lib], trace_dir=directory / "traces")
    assert result.returncode == 0, describe(result)
    exported = _ioassess("export", directory / "traces", "--parquet", directory / "ops.parquet", "--model", MODEL)
    assessed = _ioassess("report", directory / "traces", "-o", directory / "r.html", "--json", directory / "a.json",
                         "--model", MODEL)
    assert assessed.returncode == 0, describe(assessed)
    return directory, exported, json.loads((directory / "a.json").read_text())


def _ioassess(*args):
    """The installed CLI run as a user runs it (from /, the tests' environment)."""
    return run([sys.executable, "-m", "ioassess", *args], cwd="/")


def test_the_parquet_table_has_a_row_per_op_with_its_class_and_time_lost(forkthreads):
    """--parquet: forkthreads' ops as a table pandas or DuckDB reads (read back with pyarrow): a
    row per op record, its file, kind, class and time lost as the report has them."""
    directory, done, _ = forkthreads
    out = directory / "ops.parquet"
    assert done.returncode == 0, describe(done)
    assert done.stderr.decode() == f"ioassess: wrote {out}: {pq.ParquetFile(out).metadata.num_rows} ops\n"
    table = pq.read_table(out).to_pydict()
    traces = read_trace_dir(str(directory / "traces"))
    assert len(table["file"]) == len(traces.ops["op"]) and os.stat(out).st_mode & 0o777 == 0o600
    writes = [i for i, kind in enumerate(table["direction"]) if kind == "write"]
    assert len(writes) == 20 * 10 + 2 * 2000
    assert {table["file"][i] for i in writes} == {str(directory / "threads.dat")} | {
        str(directory / f"child{i}") for i in range(20)}
    assert {table["kind"][i] for i, d in enumerate(table["direction"]) if d == "meta"} <= {"open", "close", "stat"}
    assert all(table["lost_s"][i] >= 0 and table["class"][i] for i in writes)
    assert sum(table["duration_s"]) == pytest.approx(float(traces.ops["duration_ns"].sum()) / 1e9, rel=1e-9)


def _loaded(directory):
    """(job, model, per_file) of forkthreads' traces as export_job loads them: Job.ops streamed."""
    job, model, path, choice = load_and_choose([str(directory / "traces")], MODEL)
    return job, model, file_models(job, model, path, choice)


def test_the_parquet_file_is_the_same_written_in_chunks_of_1000_ops(forkthreads, tmp_path):
    """The file written a chunk of 1,000 ops at a time equals, row by row, the one written from
    one chunk, each chunk its own row group, and Job.ops is never read whole."""
    directory, _, _ = forkthreads
    job, model, per_file = _loaded(directory)
    ops = write_parquet(tmp_path / "one.parquet", job, model, per_file=per_file)
    assert write_parquet(tmp_path / "chunks.parquet", job, model, per_file=per_file, chunk_ops=1000) == ops > 4000
    assert job.ops.columns is None     # StreamedOps: read chunk by chunk only
    one, chunks = pq.ParquetFile(tmp_path / "one.parquet"), pq.ParquetFile(tmp_path / "chunks.parquet")
    assert one.metadata.num_row_groups == 1
    sizes = [chunks.metadata.row_group(i).num_rows for i in range(chunks.metadata.num_row_groups)]
    assert len(sizes) > ops // 1000 and max(sizes) <= 1000 and sum(sizes) == ops
    expected, got = one.read(), chunks.read()
    assert got.schema == expected.schema and got.column_names == list(PARQUET_COLUMNS)
    for name in PARQUET_COLUMNS:   # NaN (cached_typical_s not modelled) equals NaN here
        np.testing.assert_array_equal(got[name].to_numpy(zero_copy_only=False),
                                      expected[name].to_numpy(zero_copy_only=False), err_msg=name)


def test_the_perfetto_file_is_the_same_written_in_chunks_of_1000_ops(forkthreads, tmp_path):
    """Written a chunk of 1,000 ops at a time: the same slices in the same order, the same track
    names (each thread's before its first slice), and Job.ops never read whole."""
    directory, _, _ = forkthreads
    job, model, per_file = _loaded(directory)
    write_perfetto(tmp_path / "one.json", job, model, model.name, per_file=per_file)
    write_perfetto(tmp_path / "chunks.json", job, model, model.name, per_file=per_file, chunk_ops=1000)
    assert job.ops.columns is None
    one, chunks = (json.loads((tmp_path / name).read_text()) for name in ("one.json", "chunks.json"))
    assert one["otherData"] == chunks["otherData"]

    def slices(trace):
        return [e for e in trace["traceEvents"] if e["ph"] != "M"]

    def names(trace):
        return sorted(json.dumps(e, sort_keys=True) for e in trace["traceEvents"] if e["ph"] == "M")
    assert slices(chunks) == slices(one) and names(chunks) == names(one)
    named = set()
    for event in chunks["traceEvents"]:
        if event["name"] == "thread_name":
            named.add((event["pid"], event["tid"]))
        elif event["ph"] != "M":
            assert (event["pid"], event["tid"]) in named, event


def _doc_block(language):
    """The code block of a language in docs/export.md (one each: the per-file sums)."""
    blocks = re.findall(rf"^```{language}\n(.*?)^```$", (REPO / "docs" / "export.md").read_text(), re.S | re.M)
    assert len(blocks) == 1, language
    return blocks[0]


def _duckdb_per_file(parquet):
    """file -> (ops, processes, bytes, seconds, lost_s): the doc's DuckDB query of the file."""
    import duckdb
    with duckdb.connect() as connection:
        rows = connection.execute(_doc_block("sql").replace("'ops.parquet'", f"'{parquet}'")).fetchall()
    return {row[0]: row[1:] for row in rows}


def _assert_the_assessments_files(per_file, assessment):
    """Each file of the assessment's top_files has the query's sums: its ops, processes and bytes
    exactly, its seconds and time lost (low and high: one number for ops) to rounding."""
    assert len(assessment["top_files"]) == TOP_FILES < 21     # 21 files were written
    for row in assessment["top_files"]:
        ops, processes, nbytes, seconds, lost = per_file[row["name"]]
        assert (ops, processes, nbytes) == (row["ops"], row["processes"], row["bytes"]), row["name"]
        assert seconds == pytest.approx(row["seconds"], rel=1e-9, abs=1e-12)
        assert lost == pytest.approx(row["lost_low_s"], rel=1e-9, abs=1e-12) == row["lost_high_s"]


def test_the_docs_duckdb_sums_per_file_are_the_assessments(forkthreads):
    directory, _, assessment = forkthreads
    _assert_the_assessments_files(_duckdb_per_file(directory / "ops.parquet"), assessment)


@pytest.mark.spark
def test_the_docs_pyspark_sums_per_file_are_duckdbs_and_the_assessments(forkthreads):
    """The doc's PySpark code, run as written with `spark` a local session of one core (no UI,
    one shuffle partition: the lightest there is), gives DuckDB's rows."""
    from pyspark.sql import SparkSession
    directory, _, assessment = forkthreads
    spark = (SparkSession.builder.master("local[1]").appName("ioassess export docs")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        namespace = {"spark": spark}
        exec(_doc_block("python").replace('"ops.parquet"', f'"{directory / "ops.parquet"}"'), namespace)
        rows = namespace["per_file"].collect()
    finally:
        spark.stop()
    per_file = {row[0]: tuple(row[1:]) for row in rows}
    expected = _duckdb_per_file(directory / "ops.parquet")
    assert per_file.keys() == expected.keys()
    for name, (ops, processes, nbytes, seconds, lost) in expected.items():
        assert per_file[name][:3] == (ops, processes, nbytes), name
        assert per_file[name][3:] == pytest.approx((seconds, lost), rel=1e-9, abs=1e-12), name
    _assert_the_assessments_files(per_file, assessment)


def test_export_without_an_output_is_a_usage_error(tmp_path, ioassess):
    done = ioassess("export", str(tmp_path))
    assert done.returncode == 2 and done.stderr.startswith("ioassess: export: say what to write: --perfetto")
