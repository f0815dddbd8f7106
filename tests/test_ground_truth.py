"""The kernel's word in the assessment (report/ground_truth.py), on real runs under the recorder:
the recorder's cachestat samples decide the cause where they can, whatever model is used, so
these tests hold on any machine: a read of pages the kernel found cached is never blamed on
storage, one of pages it found uncached always is, appends slower than storage are allocation,
and a model that contradicts the kernel gets a banner."""
import json
import os
import pathlib
import sys

import numpy as np
import pytest

from ioassess.inputs.job import Flag
from ioassess.inputs.load import load_job
from ioassess.models.causes import LAYOUTS, memory_layout_codes
from ioassess.models.modelfile import load_model, model_path
from ioassess.site.training import workload_program_path
from ioassess.report.classify import CLASS_CODES, classify_ops
from ioassess.report.ground_truth import CACHED, NEW_PAGES, NOT_CACHED, PAST_END, READ_AHEAD
from recorder_helpers import evict, prog, random_data_file, tool

FILE_BYTES = 256 << 20
READ_BYTES = 64 << 10
READS = 2000
STORAGE = [CLASS_CODES["uncached"], CLASS_CODES["slow"]]


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    return random_data_file(tmp_path_factory.mktemp("ground_truth") / "data.bin", FILE_BYTES)


def random_reads(ioassess, data_file, trace_dir, env=None):
    result = ioassess("run", "--trace-dir", trace_dir, "--", workload_program_path(), "--file", data_file,
                      "--op", "read", "--size", READ_BYTES, "--file-layout", "rnd", "--repeats", READS,
                      "--mem-buffer", "1m", "--seed", 11, env=env)
    assert result.returncode == 0, result.stderr
    with open(trace_dir / "assessment.json") as f:
        return json.load(f)


def ops_of(trace_dir, name, model=None):
    """The job of trace_dir, its per-op assessment under model (the shipped default if None),
    and which of its ops are on the file `name`."""
    job = load_job([str(trace_dir)])
    per_op = classify_ops(job, model or load_model("local-linux"))
    names = np.array([f.name for f in job.files])
    return job, per_op, names[job.ops["file"]] == str(name)


def read_whole(path):
    with open(path, "rb") as f:
        while f.read(16 << 20):
            pass


def test_reads_of_pages_the_kernel_found_cached_are_never_storage(ioassess, data_file, tmp_path):
    read_whole(data_file)
    assessment = random_reads(ioassess, data_file, tmp_path / "t")
    job, per_op, on_file = ops_of(tmp_path / "t", data_file)
    sampled = on_file & (per_op["kernel"] >= 0)
    assert np.count_nonzero(sampled) >= 4, "the first ops of a file are always sampled"
    cached = on_file & (per_op["kernel"] == CACHED)
    assert np.count_nonzero(cached) >= 0.75 * np.count_nonzero(sampled), "the file was read whole just before"
    assert not np.isin(per_op["class"][cached], STORAGE).any()
    # the slow ones among them are stalls, whatever the model said
    slow = cached & np.isin(per_op["model_class"], STORAGE)
    assert (per_op["class"][slow] == CLASS_CODES["stall"]).all()
    if np.all(per_op["kernel"][sampled] == CACHED):   # every sample cached: no op of the file is storage's
        assert not np.isin(per_op["class"][on_file], STORAGE).any()
        assert assessment["headline"]["lost_by_cause"]["storage"] <= 0.05 * assessment["headline"]["io_s"]
    kernel = assessment["kernel"]
    assert kernel["sampled_ops"] >= np.count_nonzero(sampled)
    assert sum(kernel["tables"]["read"]["cached"].values()) >= np.count_nonzero(cached)


def test_reads_of_pages_the_kernel_found_uncached_are_storage(ioassess, data_file, tmp_path):
    evict(data_file)
    assessment = random_reads(ioassess, data_file, tmp_path / "t")
    job, per_op, on_file = ops_of(tmp_path / "t", data_file)
    uncached = on_file & (per_op["kernel"] == NOT_CACHED)
    # most samples find nothing cached (a random read may find a neighbour's read-ahead)
    assert np.count_nonzero(uncached) >= 0.75 * np.count_nonzero(on_file & (per_op["kernel"] >= 0)) >= 3
    assert np.isin(per_op["class"][uncached], STORAGE).all()
    assert assessment["headline"]["lost_by_cause"]["storage"] > 0
    assert assessment["kernel"]["decided_reads"] >= np.count_nonzero(uncached)


def test_pages_read_ahead_of_a_cold_sequential_run_do_not_settle_the_cause(ioassess, data_file, tmp_path):
    """Sequential 4 KiB reads of an evicted file: the first finds nothing cached, the next ones
    pages the kernel's read-ahead put there (and may still be reading): cachestat calls them
    cached, but the read may wait for storage, so they are "read ahead" and keep the model's class."""
    evict(data_file)
    trace_dir = tmp_path / "t"
    result = ioassess("run", "--trace-dir", trace_dir, "--", prog("pagecache"), "read", data_file, 4096, 64, 4096)
    assert result.returncode == 0, result.stderr
    job, per_op, on_file = ops_of(trace_dir, data_file)
    sampled = np.flatnonzero(on_file & (job.ops["direction"] == 0) & (per_op["kernel"] >= 0))
    verdicts = per_op["kernel"][sampled]
    assert len(sampled) >= 4 and verdicts[0] == NOT_CACHED, verdicts
    assert READ_AHEAD in verdicts and CACHED not in verdicts, verdicts
    ahead = sampled[verdicts == READ_AHEAD]
    assert np.array_equal(per_op["class"][ahead], per_op["model_class"][ahead])
    assessment = json.loads((trace_dir / "assessment.json").read_text())
    assert sum(assessment["kernel"]["tables"]["read"]["read ahead"].values()) >= len(ahead)


def test_reads_into_fresh_buffers_tell_nothing_of_the_page_cache(ioassess, tmp_path):
    """1 MiB reads of a cached file, every other one into new memory that was read but never
    written (its pages map the zero page, which mincore counts as in memory; the call still
    faults each page in): those reads are the first into their buffer, so their duration holds
    the faults. They are left out of the agreement and of the job's own cached lines."""
    data = random_data_file(tmp_path / "data.bin", 16 << 20)
    read_whole(data)
    trace_dir = tmp_path / "t"
    result = ioassess("run", "--trace-dir", trace_dir, "--", prog("pagecache"), "read-zero", data, 1 << 20, 16,
                      1 << 20)
    assert result.returncode == 0, result.stderr
    job, per_op, on_file = ops_of(trace_dir, data)
    sampled = on_file & (job.ops["direction"] == 0) & (per_op["kernel"] == CACHED)
    into_new_memory = (job.ops["offset"] // (1 << 20)) % 2 == 0
    assert np.count_nonzero(sampled) >= 4
    assert np.array_equal(per_op["fresh_buffer"][sampled], into_new_memory[sampled])
    assessment = json.loads((trace_dir / "assessment.json").read_text())
    kernel = assessment["kernel"]
    assert kernel["reads_fresh_buffer"] >= np.count_nonzero(sampled & into_new_memory)
    assert kernel["decided_reads"] >= kernel["reads_in_band"] + kernel["reads_fresh_buffer"]


def test_appends_slower_than_the_page_cache_are_allocation_not_storage(ioassess, tmp_path):
    """With a model without the appended line (made before it): the table's rule."""
    out = tmp_path / "appended"
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", tool("dd"), "if=/dev/zero", f"of={out}", "bs=1M",
                      "count=64")
    assert result.returncode == 0, result.stderr
    model = load_model("local-linux")
    model.lines = {key: line for key, line in model.lines.items() if key[1] != "appended"}
    job, per_op, on_file = ops_of(tmp_path / "t", out, model)
    writes = on_file & (job.ops["direction"] == 1)
    assert np.count_nonzero(writes) == 64
    assert (per_op["kernel"][writes & (per_op["kernel"] >= 0)] == PAST_END).all(), "dd wrote past the end only"
    assert (per_op["judged"][writes] == PAST_END).all(), "the first four writes were sampled, all past the end"
    assert not np.isin(per_op["class"][writes], STORAGE).any()
    slow = writes & np.isin(per_op["model_class"], STORAGE)
    assert (per_op["class"][slow] == CLASS_CODES["allocation"]).all()


def scaled_model(path, factor):
    """The shipped model with every line's times multiplied by factor: a model of a machine
    1/factor times as fast."""
    with open(model_path("local-linux")) as f:
        model = json.load(f)
    for line in model["lines"]:
        for kind in ("bound", "typical"):
            for segment in (line[kind] or {}).values():
                segment["intercept_s"] *= factor
                segment["slope_s_per_byte"] *= factor
    model["name"] = "local-linux-100x"
    path.write_text(json.dumps(model))
    return path


def test_a_model_the_kernel_contradicts_gets_a_banner(ioassess, data_file, tmp_path):
    """A model of a machine 100 times faster calls this machine's cached reads storage: the
    kernel says otherwise, and the report says the classes are not to be trusted."""
    read_whole(data_file)
    random_reads(ioassess, data_file, tmp_path / "t")
    fast = scaled_model(tmp_path / "fast.json", 0.01)
    result = ioassess("report", tmp_path / "t", "--model", fast, "-o", tmp_path / "r.html", "--json",
                      tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    kernel = json.loads((tmp_path / "r.json").read_text())["kernel"]
    assert kernel["read_agreement"] < 0.9 and not kernel["trusted"], kernel
    assert "The model and the kernel disagree" in (tmp_path / "r.html").read_text()


def test_without_samples_the_report_says_the_classes_are_the_models_alone(ioassess, data_file, tmp_path):
    assessment = random_reads(ioassess, data_file, tmp_path / "t", env={"IOASSESS_PAGECACHE": "0"})
    assert (assessment["kernel"]["sampled_ops"], assessment["kernel"]["processes_turned_off"]) == (0, 1)
    assert "sampling was turned off (IOASSESS_PAGECACHE=0)" in (tmp_path / "t" / "report.html").read_text()


def test_direct_io_is_storage_whatever_the_page_cache_holds(ioassess, tmp_path):
    """dd with O_DIRECT reads a file read whole just before and writes a copy: every op of the
    descriptors with O_DIRECT is flagged so, none is sampled, none is memory speed, page cache
    or a stall; dd's last, partial write, which it makes after clearing O_DIRECT with fcntl, is
    not flagged."""
    source, copy = tmp_path / "source", tmp_path / "copy"
    source.write_bytes(os.urandom((64 << 10) * 64 + 100))
    read_whole(source)
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", tool("dd"), f"if={source}", f"of={copy}",
                      "bs=64k", "iflag=direct", "oflag=direct", "status=none")
    assert result.returncode == 0, result.stderr
    assert copy.read_bytes() == source.read_bytes()
    job, per_op, on_source = ops_of(tmp_path / "t", source)
    _, _, on_copy = ops_of(tmp_path / "t", copy)
    direct = (job.ops["flags"] & Flag.DIRECT) != 0
    data = (on_source | on_copy) & (job.ops["direction"] < 2) & (job.ops["result"] > 0)
    assert np.count_nonzero(data & on_source) == 65 and np.all(direct[data & on_source])
    sizes_written = job.ops["size"][data & on_copy].tolist()
    assert sizes_written == [64 << 10] * 64 + [100], sizes_written
    assert np.all(direct[data & on_copy][:-1]) and not direct[data & on_copy][-1]
    assert np.all(job.ops["pc_pages"][data & direct] < 0), "O_DIRECT ops are never sampled"
    assert np.all(np.isin(per_op["class"][data & direct], STORAGE)), per_op["class"][data & direct]
    with open(tmp_path / "t" / "assessment.json") as f:
        assert json.load(f)["headline"]["slowness_by_cause"]["stall"] == 0


def test_writes_into_new_pages_are_judged_by_the_appended_line(ioassess, tmp_path, calibrated_model):
    """dd's appends: the kernel saw new pages, so each is compared with an append's typical
    time (the appended line of the model calibrated here), never with overwriting cached pages,
    and is an allocation only beyond the appended bound."""
    out = tmp_path / "appended"
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--model", calibrated_model.path, "--", tool("dd"),
                      "if=/dev/zero", f"of={out}", "bs=64k", "count=256")
    assert result.returncode == 0, result.stderr
    model = load_model(str(calibrated_model.path))
    job = load_job([str(tmp_path / "t")])
    per_op = classify_ops(job, model)
    names = np.array([f.name for f in job.files])
    writes = (names[job.ops["file"]] == str(out)) & (job.ops["direction"] == 1)
    assert np.count_nonzero(writes) == 256
    assert (per_op["judged"][writes] == PAST_END).all() and per_op["appended"][writes].all()
    layouts = memory_layout_codes(job.ops["buffer"], job.ops["tid"], job.ops["process"])[writes]
    lines = [model.lines[("write", "appended", LAYOUTS[code])] for code in layouts]
    typical = np.array([line.typical.predict(65536) for line in lines])
    bound = np.array([line.bound.predict(65536) for line in lines])
    assert per_op["cached_typical_s"][writes] == pytest.approx(typical)
    duration = job.ops["duration_s"][writes]
    # beyond an append's typical time, a write into new pages is slower than cached I/O but
    # waited for memory, not storage: slowness, never time lost compared with cached I/O
    assert per_op["slowness_s"][writes] == pytest.approx(np.maximum(duration - typical, 0.0))
    assert not per_op["lost_s"][writes].any()
    expected = np.where(duration <= bound, CLASS_CODES["cached"], CLASS_CODES["allocation"])
    assert (per_op["class"][writes] == expected).all()
    with open(tmp_path / "t" / "assessment.json") as f:
        assert json.load(f)["kernel"]["appended_ops"] == 256

    # whole pages of the same file overwritten once evicted: new pages too, but a re-run would
    # overwrite cached pages, so their time if cached is the cached write's
    evict(out)
    result = ioassess("run", "--trace-dir", tmp_path / "o", "--model", calibrated_model.path, "--", tool("dd"),
                      "if=/dev/zero", f"of={out}", "bs=64k", "count=256", "conv=notrunc")
    assert result.returncode == 0, result.stderr
    job = load_job([str(tmp_path / "o")])
    per_op = classify_ops(job, model)
    names = np.array([f.name for f in job.files])
    writes = (names[job.ops["file"]] == str(out)) & (job.ops["direction"] == 1)
    assert (per_op["judged"][writes] == NEW_PAGES).all() and not per_op["appended"][writes].any()
    layouts = memory_layout_codes(job.ops["buffer"], job.ops["tid"], job.ops["process"])[writes]
    cached = [model.lines[("write", "cached", LAYOUTS[code])].typical.predict(65536) for code in layouts]
    assert per_op["cached_typical_s"][writes] == pytest.approx(np.array(cached))
    assert not np.isin(per_op["class"][writes], STORAGE).any()


SYNCING_WRITER = """
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for _ in range(int(sys.argv[2])):
    os.write(fd, b"x" * 65536)
    os.fsync(fd)
os.close(fd)
"""


def test_syncs_are_set_against_the_flushed_line_and_frequent_ones_found(ioassess, tmp_path, calibrated_model):
    out = tmp_path / "synced"
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--model", calibrated_model.path, "--", sys.executable,
                      "-c", SYNCING_WRITER, out, 40)
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "t" / "assessment.json") as f:
        assessment = json.load(f)
    flushes = assessment["flushes"]
    assert (flushes["syncs"], flushes["files"], flushes["bytes_written_before"]) == (40, 1, 40 * 65536)
    line = load_model(str(calibrated_model.path)).lines[("sync", "flushed", "rnd")]
    assert flushes["typical_s"] == pytest.approx(40 * float(line.typical.predict(65536)))
    assert flushes["fixed_s"] == pytest.approx(40 * float(line.typical.predict(0)))
    (finding,) = [r for r in assessment["recommendations"] if r["title"] == "Frequent syncs"]
    assert 0 < finding["numbers"]["saving_s"] <= flushes["seconds"]
    html = (tmp_path / "t" / "report.html").read_text()
    assert "40 fsync or fdatasync calls on 1 file took" in html

    # a model made before syncs were measured: the syncs are counted, their expected time unknown
    data = json.loads(pathlib.Path(calibrated_model.path).read_text())
    data["lines"] = [line for line in data["lines"] if line["class"] != "flushed"]
    older = tmp_path / "older.json"
    older.write_text(json.dumps(data))
    result = ioassess("report", "--model", older, "--json", tmp_path / "older-assessment.json", "-o",
                      tmp_path / "older.html", tmp_path / "t")
    assert result.returncode == 0, result.stderr
    flushes = json.loads((tmp_path / "older-assessment.json").read_text())["flushes"]
    assert flushes["syncs"] == 40 and flushes["typical_s"] is None
    assert "The model has no flushed line" in (tmp_path / "older.html").read_text()


UNALIGNED_READER = """
import os, random, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
size, n, bs = os.fstat(fd).st_size, int(sys.argv[2]), int(sys.argv[3])
buffer = bytearray(bs)
rng = random.Random(5)
for _ in range(n):
    os.preadv(fd, [buffer], rng.randrange(1, size - bs))
"""


def faster_host_model(tmp_path, factor=20.0):
    """The shipped model as if made on a host `factor` times faster at cached I/O: its memory
    speed and page cache lines (bound and typical) divided by factor."""
    data = json.loads(pathlib.Path(model_path("local-linux")).read_text())
    for line in data["lines"]:
        if line["class"] in ("memcpy", "cached"):
            for kind in ("bound", "typical"):
                for segment in (line[kind] or {}).values():
                    segment["intercept_s"] /= factor
                    segment["slope_s_per_byte"] /= factor
    data["name"] = "faster-host"
    path = tmp_path / "faster-host.json"
    path.write_text(json.dumps(data))
    return path


def test_cached_means_cached_under_a_model_of_a_faster_host(ioassess, tmp_path):
    """A fully cached run of random 1 MiB reads at unaligned offsets, judged by a model whose
    cached line is 20 times too fast for this host: the kernel found the sampled reads' pages
    cached, so the job's own cached reads give the time if cached of that size and shape. Nothing
    is lost compared with cached I/O, the page says where the time if cached came from, and
    stalls are the rare outliers (the interpreter's own reads, too few of a size for a line of
    their own, still disagree with so fast a model: its banner is the page's business)."""
    data = random_data_file(tmp_path / "data.bin", 64 << 20)
    read_whole(data)
    reads = 4000
    trace_dir = tmp_path / "t"
    result = ioassess("run", "--trace-dir", trace_dir, "--model", faster_host_model(tmp_path), "--",
                      sys.executable, "-c", UNALIGNED_READER, data, reads, 1 << 20)
    assert result.returncode == 0, result.stderr
    assessment = json.loads((trace_dir / "assessment.json").read_text())
    job, per_op, on_file = ops_of(trace_dir, data, load_model(str(tmp_path / "faster-host.json")))
    big = on_file & (job.ops["direction"] == 0) & (job.ops["size"] == 1 << 20)
    assert np.count_nonzero(big) == reads
    sampled = big & (per_op["kernel"] >= 0)
    assert np.all(per_op["kernel"][sampled] == CACHED)
    assert np.count_nonzero(per_op["own_line"] & big) >= 0.95 * reads
    assert not per_op["lost_s"][big].any(), "cached reads lose nothing compared with cached I/O"
    # stalls are the outliers: under stress-ng --cpu 2, 6.4 % of them were preempted that long
    assert np.count_nonzero(per_op["class"][big] == CLASS_CODES["stall"]) <= 0.25 * reads
    by_duration = np.isin(per_op["model_class"][big], [CLASS_CODES["memcpy"], CLASS_CODES["cached"]])
    assert np.count_nonzero(by_duration) >= 0.75 * reads
    head = assessment["headline"]
    assert head["lost_high_s"] <= 0.05 * head["io_s"], head
    assert head["own_cached_ops"] >= 0.95 * reads
    (line,) = [row for row in assessment["kernel"]["own_cached_lines"]
               if row["direction"] == "read" and row["size_low"] == 1 << 20 and row["ops"] >= 0.9 * reads]
    assert line["typical_s"] > line["model_typical_s"] and line["samples"] >= 5
    html = (trace_dir / "report.html").read_text()
    assert 'id="own-cached"' in html and 'id="own-cached-lines"' in html
