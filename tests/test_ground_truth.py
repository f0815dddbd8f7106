"""The kernel's word in the assessment (report/ground_truth.py), on real runs under the recorder:
the recorder's cachestat samples decide the cause where they can, whatever model is used, so
these tests hold on any machine: a read of pages the kernel found cached is never blamed on
storage, one of pages it found uncached always is, appends slower than storage are allocation,
and a model that contradicts the kernel gets a banner."""
import json
import os

import numpy as np
import pytest

from ioassess.job import Flag
from ioassess.load import load_job
from ioassess.models.modelfile import load_model, model_path
from ioassess.models.training import workload_program_path
from ioassess.report.assess import CLASS_CODES, classify_ops
from ioassess.report.ground_truth import CACHED, NEW_PAGES, NOT_CACHED
from recorder_helpers import evict, random_data_file, tool

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


def ops_of(trace_dir, name):
    """The job of trace_dir, its per-op assessment under the shipped default model, and which
    of its ops are on the file `name`."""
    job = load_job([str(trace_dir)])
    per_op = classify_ops(job, load_model("local-linux"))
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


def test_appends_slower_than_the_page_cache_are_allocation_not_storage(ioassess, tmp_path):
    out = tmp_path / "appended"
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", tool("dd"), "if=/dev/zero", f"of={out}", "bs=1M",
                      "count=64")
    assert result.returncode == 0, result.stderr
    job, per_op, on_file = ops_of(tmp_path / "t", out)
    writes = on_file & (job.ops["direction"] == 1)
    assert np.count_nonzero(writes) == 64
    assert (per_op["kernel"][writes & (per_op["kernel"] >= 0)] == NEW_PAGES).all(), "dd wrote past the end only"
    assert (per_op["judged"][writes] == NEW_PAGES).all(), "the first four writes were sampled, all new pages"
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
        assert json.load(f)["headline"]["lost_by_cause"]["stall"] == 0
