"""`ioassess train` (ioassess/site/training.py): real workloads under the real recorder in real page-cache
states, on a small grid, then the fit, the model file and the training report; and the
command's refusals and clean-up, as an admin would meet them."""
import dataclasses
import io
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from ioassess.models.causes import bound_order_violations
from ioassess.models.modelfile import load_model, save_model
from ioassess.site.training import (CACHED_RESIDENT, PROFILES, REWRITTEN_CELL, UNCACHED_RESIDENT, RunConfig, Trainer,
                                    TrainingError, check_training_dir, fit_model, measure_all, ops_per_run,
                                    rewritten_span, save_measurements, size_point, training_grid)
from ioassess.inputs.traceformat import Op
from ioassess.site.training_report import write_training_report
from ioassess.progress import Progress

PROVENANCE = {"source": "tests", "host": "test-host", "kernel": "test", "date": "2026-11-21",
              "file_system": {"type": "ext4", "mount": "/"}, "profile": "small", "generator": {}}
SMALL = dataclasses.replace(PROFILES["quick"], name="small", sizes=(1, 4096, 65536), repeats=1, min_ops=32,
                            max_ops=300, budget_bytes=4 << 20, file_bytes=64 << 20, mem_buffer_bytes=4 << 20)


def test_quick_grid_runs_repeats_outermost_and_uncached_at_random_offsets():
    grid = training_grid(PROFILES["quick"])
    # repeats x ((3 states x 2 ops + rewritten writes) x 2 memory layouts x sizes + appended writes x 2
    # memory layouts x the sizes up to 4 MiB + the unaligned layout of the copying states (discard
    # and cached reads and writes, rewritten writes) from 1 KiB and of the appends from 1 KiB to 4 MiB)
    assert len(grid) == 3 * (7 * 2 * 13 + 2 * 12 + 5 * 8 + 7)
    unaligned = [config for config in grid if config.mem_layout.endswith("-unaligned")]
    assert {config.state for config in unaligned} == {"discard", "cached", "rewritten", "appended"}
    assert min(config.size for config in unaligned) == 1024
    assert {(config.op, config.file_layout) for config in grid if config.state == "appended"} == {("write", "seq")}
    assert max(config.size for config in grid if config.state == "appended") == 4 << 20
    assert [config.repeat for config in grid] == sorted(config.repeat for config in grid)
    assert {config.file_layout for config in grid if config.state == "uncached"} == {"rnd"}
    assert {config.op for config in grid if config.state == "rewritten"} == {"write"}
    assert {config.size for config in grid} == {4 ** k for k in range(13)}


@pytest.fixture(scope="module")
def small_training(tmp_path_factory):
    """The small grid measured for real in a scratch directory (about 10 s)."""
    directory = tmp_path_factory.mktemp("train")
    trainer = Trainer(str(directory), SMALL)
    try:
        trainer.create_data_file()
        measurements, runs = measure_all(trainer, SMALL, Progress(1.0, io.StringIO()))
    finally:
        trainer.cleanup()
    assert os.listdir(directory) == []
    return measurements, runs


def test_each_run_was_measured_in_its_state(small_training):
    measurements, runs = small_training
    assert len(runs) == len(training_grid(SMALL))
    for config, ops, resident in runs:
        assert ops > 0
        if config.state == "cached":
            assert resident >= CACHED_RESIDENT
        if config.state == "uncached":
            assert resident <= UNCACHED_RESIDENT
        if config.state == "rewritten":     # its span, made by writes, is resident
            assert resident >= CACHED_RESIDENT * rewritten_span(SMALL, config.size) / SMALL.file_bytes
    # the ops of the copying states on a buffer off the cache line (all of the unaligned runs, the
    # 1-byte ops of the rnd runs) make cells of their own; uncached ops are all of the aligned cells
    copying = (("read", "memcpy"), ("write", "memcpy"), ("read", "cached"), ("write", "cached"),
               ("write", REWRITTEN_CELL), ("write", "appended"))
    assert set(measurements) == {(op, cls, layout) for op in ("read", "write")
                                 for cls in ("memcpy", "cached", "uncached") for layout in ("off0", "rnd")} | {
        (op, cls, layout) for op, cls in (("write", REWRITTEN_CELL), ("write", "appended"), ("sync", "flushed"))
        for layout in ("off0", "rnd")} | {(op, cls, "rnd-unaligned") for op, cls in copying}
    # the flushed cell's sizes are the bytes each appended run wrote, then synced
    assert sorted(measurements[("sync", "flushed", "rnd")]) == sorted(
        ops_per_run(SMALL, size, "appended") * size for size in SMALL.sizes)


def test_appended_runs_write_an_emptied_file_from_its_start_then_sync_it(tmp_path):
    trainer = Trainer(str(tmp_path), SMALL)
    try:
        with open(trainer.appended_file, "wb") as f:     # left by an earlier run
            f.write(b"x" * (8 << 20))
        config = RunConfig(0, "appended", "write", 65536, "rnd", "seq")
        trainer.prepare(config)
        ops = trainer.measure(config)
        count = ops_per_run(SMALL, 65536, "appended")
        writes = ops["op"] == Op.PWRITE
        assert np.count_nonzero(writes) == count
        assert (ops["offset"][writes] == np.arange(count) * 65536).all()
        assert np.count_nonzero(ops["op"] == Op.FSYNC) == 1
        assert os.path.getsize(trainer.appended_file) == count * 65536
    finally:
        trainer.cleanup()


def test_appended_and_flushed_lines_follow_their_measurements(small_training):
    """The appended line's typical time goes through the appends' typical durations; the flushed
    line (a sync against the bytes it wrote back) grows with the bytes, as writing back does."""
    measurements, _ = small_training
    model, _ = fit_model(measurements, "small", "test model", PROVENANCE)
    for layout in ("off0", "rnd"):
        appended = model.lines[("write", "appended", layout)]
        for size in (4096, 65536):
            durations = measurements[("write", "appended", layout)][size]
            assert appended.typical.predict(size) == pytest.approx(size_point(size, durations).typical_s, rel=0.3)
            assert np.mean(durations <= appended.bound.predict(size)) > 0.8, (layout, size)
        flushed = model.lines[("sync", "flushed", layout)]
        by_dirty = measurements[("sync", "flushed", layout)]
        dirty = sorted(by_dirty)
        assert flushed.typical.predict(dirty[-1]) >= flushed.typical.predict(dirty[0]) > 0
        # it grows where its measurements do (a loaded machine can hide the cost per byte in a
        # handful of syncs: the line is then flat, never falling)
        smallest, largest = (size_point(b, by_dirty[b]).typical_s for b in (dirty[0], dirty[-1]))
        if largest > 2 * smallest:
            assert flushed.typical.predict(dirty[-1]) > flushed.typical.predict(dirty[0]), (layout, smallest, largest)
        assert all(flushed.bound.predict(b) >= flushed.typical.predict(b) for b in dirty)


def test_cached_writes_are_bounded_by_both_cached_states_and_typical_of_rewritten_pages(small_training):
    """The cached write line's bound lies above the ops of both cached states (pages read in,
    pages written: it is fitted to the first, the slower), its typical line goes through the
    rewritten state's typical durations."""
    measurements, _ = small_training
    model, _ = fit_model(measurements, "small", "test model", PROVENANCE)
    for layout in ("off0", "rnd"):
        line = model.lines[("write", "cached", layout)]
        for size in (4096, 65536):
            for cell in ("cached", REWRITTEN_CELL):
                durations = measurements[("write", cell, layout)][size]
                # 0.8: a loaded machine's preemptions put a few of a size's 32 ops above any line; a
                # bound fitted to the rewritten state alone leaves half the read-in pages' ops above
                assert np.mean(durations <= line.bound.predict(size)) > 0.8, (layout, size, cell)
            typical = size_point(size, measurements[("write", REWRITTEN_CELL, layout)][size]).typical_s
            assert line.typical.predict(size) == pytest.approx(typical, rel=0.3), (layout, size)


def test_the_fitted_model_orders_the_classes_and_tells_them_apart(small_training, tmp_path):
    measurements, _ = small_training
    model, _ = fit_model(measurements, "small", "test model", PROVENANCE)
    assert bound_order_violations(model.lines) == []
    # physics of a page cache: a cached 4 KiB read is far faster than an uncached random one
    cached = model.lines[("read", "cached", "rnd")].typical.predict(4096)
    uncached = model.lines[("read", "uncached", "rnd")].typical.predict(4096)
    assert uncached > 5 * cached
    # each state's own ops mostly fall under its class's bound and over the faster class's
    for op in ("read",):
        for layout in ("off0", "rnd"):
            durations = measurements[(op, "uncached", layout)][4096]
            assert np.mean(durations > model.lines[(op, "cached", layout)].bound.predict(4096)) > 0.9
    path = tmp_path / "small.json"
    save_model(model, str(path))
    assert load_model(str(path)).lines.keys() == model.lines.keys()


def test_training_report_has_the_plots_and_the_table(small_training, tmp_path):
    measurements, _ = small_training
    model, _ = fit_model(measurements, "small", "test <model>", PROVENANCE)
    path = tmp_path / "small.html"
    write_training_report(str(path), model, measurements)
    html = path.read_text()
    # memcpy, cached, uncached x read, write; appended writes; flushed syncs: each an SVG plot
    # with its points and lines, the flushed one against the bytes written before the fsync
    assert html.count("<svg ") == 8 and html.count('fill-opacity="0.6"') >= 8
    assert html.count("off0 bound") == 8 and ">bytes written before the fsync<" in html
    # ((3 classes x 2 ops + appended + flushed) x 2 layouts + (memcpy, cached) x 2 ops + appended of the
    # unaligned layout) x 2 segments
    assert html.count("<tr><td>") == 42
    assert "test &lt;model&gt;" in html and "test <model>" not in html
    assert path.stat().st_size < 1 << 20 and not (tmp_path / "small.html.part").exists()


def ioassess(*args, **options):
    return subprocess.run([sys.executable, "-m", "ioassess", *map(str, args)], capture_output=True, text=True,
                          cwd="/", timeout=120, **options)


def test_train_refuses_a_missing_directory_in_one_line():
    result = ioassess("train", "--dir", "/nonexistent/x")
    assert result.returncode == 2
    assert result.stderr == "ioassess: /nonexistent/x: not a directory\n"


def in_mount_namespace(script):
    """Run a shell script as root in a private mount namespace (for tmpfs mounts)."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.fail("this test needs root and unshare(1) (util-linux) for a private tmpfs mount")
    return subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=120)


@pytest.mark.root
def test_train_refuses_a_directory_without_room_or_not_writable(tmp_path):
    mount = tmp_path / "mnt"
    mount.mkdir()
    python = sys.executable
    small = in_mount_namespace(f"mount -t tmpfs -o size=64m tmpfs {mount} && "
                               f"cd / && {python} -m ioassess train --dir {mount}")
    assert small.returncode == 2, small.stderr
    assert small.stderr.startswith(f"ioassess: {mount}: needs 1.2 GiB free") and small.stderr.count("\n") == 1
    read_only = in_mount_namespace(f"mount -t tmpfs -o size=4g,ro tmpfs {mount} && "
                                   f"cd / && {python} -m ioassess train --dir {mount}")
    assert read_only.returncode == 2, read_only.stderr
    assert read_only.stderr.startswith(f"ioassess: {mount}: not writable") and read_only.stderr.count("\n") == 1


@pytest.mark.slow
def test_interrupted_training_removes_its_files_and_writes_no_model(tmp_path):
    model = tmp_path / "model.json"
    process = subprocess.Popen([sys.executable, "-m", "ioassess", "train", "--dir", str(tmp_path), "-o", str(model)],
                               cwd="/", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(tmp_path.glob("ioassess-train-*/training.dat")):
        time.sleep(0.05)
    time.sleep(1.0)                                            # into the data file or the first runs
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == \
        "ioassess: training interrupted; its files were removed and no model was written"
    assert list(tmp_path.iterdir()) == []


def test_check_training_dir_accepts_a_roomy_writable_directory(tmp_path):
    check_training_dir(str(tmp_path), SMALL)
    with pytest.raises(TrainingError, match="not a directory"):
        check_training_dir(str(tmp_path / "missing"), SMALL)


def test_measurements_are_saved_and_refit_gives_the_same_model(small_training, tmp_path):
    measurements, _ = small_training
    saved = tmp_path / "small.measurements.npz"
    save_measurements(str(saved), measurements, "test model", PROVENANCE)
    result = ioassess("train", "--refit", saved, "-o", tmp_path / "refit.json")
    assert result.returncode == 0, result.stderr
    refitted = load_model(str(tmp_path / "refit.json"))
    direct, _ = fit_model(measurements, "refit", "test model", PROVENANCE)
    for key, line in direct.lines.items():
        # the saved durations are float32: the fit is the same up to that rounding
        assert refitted.lines[key].typical.predict(4096) == pytest.approx(line.typical.predict(4096), rel=1e-5)
    assert (tmp_path / "refit.html").is_file()


def test_refit_of_a_file_that_is_not_measurements_is_one_line(tmp_path):
    bogus = tmp_path / "bogus.npz"
    bogus.write_bytes(b"not a zip")
    result = ioassess("train", "--refit", bogus, "-o", tmp_path / "m.json")
    assert result.returncode == 2
    assert result.stderr.startswith(f"ioassess: {bogus}: not a measurements file") and result.stderr.count("\n") == 1
    assert not (tmp_path / "m.json").exists()
