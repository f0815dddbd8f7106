"""Cause-model files: JSON round trip, validation with one-line errors, the shipped Mistral model
(Kunkel 2015, Table 3), the model directories and `ioassess models`."""
import copy
import dataclasses
import json
import os
import stat
import sys

import numpy as np
import pytest

from ioassess.cli import main
from ioassess.jsonfile import MAX_JSON_DEPTH, MAX_JSON_FILE_BYTES
from ioassess.models import modelfile
from ioassess.models.causes import CLASSES, CauseModel, ModelLine, SegmentedLine, classify, time_lost_seconds
from ioassess.models.modelfile import (DEFAULT_MODEL, ModelFileError, find_models, load_model, model_to_json,
                                       save_model)
from recorder_helpers import clean_env, describe, run_measured, shipped_darshan_logs

MiB = 1 << 20
PROVENANCE = {"source": "trained by ioassess train", "host": "node1", "kernel": "6.1.0-13-amd64",
              "file_system": {"type": "ext4", "mount": "/scratch"}, "date": "2026-11-21T12:00:00+00:00",
              "profile": "quick", "generator": {"mem_layouts": ["off0", "rnd"], "repeats": 3}}
ERRORS = {"small": {"abs_err_s": 1e-7, "rel_err_pct": 10.5, "outlier_pct_experiment": 1.2, "outlier_pct_model": 0.4},
          "large": {"abs_err_s": 2e-5, "rel_err_pct": 14.0, "outlier_pct_experiment": None, "outlier_pct_model": None}}


def segmented(intercept_s, slope_s_per_byte, large_slope_s_per_byte):
    joint_s = intercept_s + slope_s_per_byte * 4096
    return SegmentedLine(intercept_s, slope_s_per_byte, joint_s - large_slope_s_per_byte * 4096, large_slope_s_per_byte)


def small_model():
    # The memcpy line's large intercept is negative (fast large copies): allowed, it is joined.
    lines = {
        ("read", "memcpy", "off0"): ModelLine(segmented(3e-7, 4e-11, 1e-9), segmented(2e-7, 3e-11, 5e-10), ERRORS, ""),
        ("read", "cached", "off0"): ModelLine(segmented(8e-6, 4e-10, 2e-9), None, ERRORS, "typical not measured"),
        ("write", "uncached", "rnd"): ModelLine(segmented(5e-5, 1e-9, 1e-8), segmented(2e-5, 1e-9, 5e-9), ERRORS, ""),
    }
    return CauseModel("node1-scratch", "a test model", copy.deepcopy(PROVENANCE), lines)


@pytest.fixture
def model_dirs(tmp_path, monkeypatch):
    """Empty user, site and shipped model directories under tmp_path: (user, site, shipped)."""
    dirs = [tmp_path / "data" / "ioassess" / "models", tmp_path / "site", tmp_path / "shipped"]
    for directory in dirs:
        directory.mkdir(parents=True)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("IOASSESS_SITE_MODELS", str(dirs[1]))
    monkeypatch.setattr(modelfile, "PRETRAINED_DIR", str(dirs[2]))
    return dirs


def write_json(path, data):
    path.write_text(json.dumps(data))
    return path


# ---- round trip ----

def test_save_then_load_gives_the_same_model(tmp_path):
    model = small_model()
    assert model.lines[("read", "memcpy", "off0")].bound.large_intercept_s < 0
    save_model(model, tmp_path / "m.json")
    assert load_model(tmp_path / "m.json") == model
    assert load_model(str(tmp_path / "m.json")) == model
    assert os.listdir(tmp_path) == ["m.json"]
    assert stat.S_IMODE(os.stat(tmp_path / "m.json").st_mode) == 0o644


def test_saving_into_a_missing_directory_is_one_line(tmp_path):
    with pytest.raises(ModelFileError) as raised:
        save_model(small_model(), tmp_path / "none" / "m.json")
    assert str(raised.value) == f"{tmp_path}/none/m.json: cannot write: No such file or directory"


def test_lines_are_written_in_op_class_layout_order(tmp_path):
    save_model(small_model(), tmp_path / "m.json")
    data = json.loads((tmp_path / "m.json").read_text())
    assert [(line["op"], line["class"], line["layout"]) for line in data["lines"]] == [
        ("read", "memcpy", "off0"), ("read", "cached", "off0"), ("write", "uncached", "rnd")]
    assert (data["format"], data["version"], data["joint_bytes"]) == ("ioassess-cause-model", 1, 4096)


def test_saving_a_model_the_loader_would_reject_leaves_the_old_file(tmp_path):
    path = tmp_path / "m.json"
    save_model(small_model(), path)
    before = path.read_bytes()
    bad = small_model()
    bad.lines[("read", "cached", "off0")] = ModelLine(SegmentedLine(np.nan, 0.0, 1.0, 0.0), None, ERRORS, "")
    with pytest.raises(ModelFileError) as raised:
        save_model(bad, path)
    assert str(raised.value) == f"{path}: lines[1].bound.small.intercept_s: must be finite, got nan"
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["m.json"]


# ---- rejection: every case one line `PATH: problem` ----

def mutated(change):
    data = model_to_json(small_model())
    change(data)
    return data


def set_in(path, value):
    def change(data):
        *parents, last = path
        target = data
        for key in parents:
            target = target[key]
        target[last] = value
    return change


def delete(path):
    def change(data):
        *parents, last = path
        target = data
        for key in parents:
            target = target[key]
        del target[last]
    return change


def nested(depth):
    """An object nested depth deep: {"x": {"x": ... {}}}."""
    value = {}
    for _ in range(depth - 1):
        value = {"x": value}
    return value


NOT_JOINED = {"small": {"intercept_s": 1e-5, "slope_s_per_byte": 0.0},
              "large": {"intercept_s": 1.05e-5, "slope_s_per_byte": 0.0}}

REJECTIONS = [
    (set_in(["format"], "darshan"),
     'not an ioassess cause-model file (format is "darshan", expected "ioassess-cause-model")'),
    (delete(["format"]), 'not an ioassess cause-model file (format is null, expected "ioassess-cause-model")'),
    (set_in(["version"], 2), "model file version 2 is newer than this ioassess supports (1)"),
    (set_in(["version"], "1"), 'version: must be a whole number >= 1, got "1"'),
    (set_in(["version"], 0), "version: must be a whole number >= 1, got 0"),
    (delete(["provenance"]), "provenance: missing"),
    (set_in(["colour"], "blue"), "colour: unknown field"),
    (set_in(["name"], 5), "name: must be a string, got a JSON number"),
    (set_in(["lines"], {}), "lines: must be an array, got a JSON object"),
    (set_in(["joint_bytes"], 8192), "joint_bytes: must be 4096, got 8192"),
    (delete(["provenance", "kernel"]), "provenance.kernel: missing"),
    (set_in(["provenance", "file_system"], "ext4"), "provenance.file_system: must be an object, got a JSON string"),
    (delete(["provenance", "file_system", "mount"]), "provenance.file_system.mount: missing"),
    (set_in(["provenance", "date"], "21.11.2026"), 'provenance.date: must be an ISO-8601 date, got "21.11.2026"'),
    (set_in(["provenance", "generator"], None), "provenance.generator: must be an object, got a JSON null"),
    (set_in(["lines", 1], []), "lines[1]: must be an object, got a JSON array"),
    (set_in(["lines", 0, "op"], "append"), 'lines[0].op: unknown op "append" (expected one of read, write, sync)'),
    (set_in(["lines", 0, "class"], "slow"),
     'lines[0].class: unknown class "slow" (expected one of memcpy, cached, uncached, appended, flushed)'),
    (set_in(["lines", 0, "class"], "appended"), 'lines[0].op: the appended class has lines of write only, got "read"'),
    (set_in(["lines", 0, "class"], "flushed"), 'lines[0].op: the flushed class has lines of sync only, got "read"'),
    (set_in(["lines", 0, "op"], "sync"), 'lines[0].op: the memcpy class has lines of read and write only, got "sync"'),
    (set_in(["lines", 0, "layout"], "seq"),
     'lines[0].layout: unknown layout "seq" (expected one of off0, rnd, off0-unaligned, rnd-unaligned)'),
    (delete(["lines", 0, "note"]), "lines[0].note: missing"),
    (set_in(["lines", 0, "bound", "small", "slope"], 1e-9), "lines[0].bound.small.slope: unknown field"),
    (set_in(["lines", 0, "bound", "small", "slope_s_per_byte"], -1e-11),
     "lines[0].bound.small.slope_s_per_byte: must not be negative, got -1e-11"),
    (set_in(["lines", 0, "bound", "large", "slope_s_per_byte"], True),
     "lines[0].bound.large.slope_s_per_byte: must be a number, got a JSON boolean"),
    (set_in(["lines", 2, "typical", "small", "intercept_s"], -2e-5),
     "lines[2].typical.small.intercept_s: must not be negative, got -2e-05"),
    (set_in(["lines", 2, "typical", "measured"], {"size_bytes": [4096, 4096], "seconds": [1e-6, 2e-6]}),
     "lines[2].typical.measured.size_bytes[1]: must be a whole number >= 1 above the one before, got 4096"),
    (set_in(["lines", 2, "typical", "measured"], {"size_bytes": [4096], "seconds": [1e-6]}),
     "lines[2].typical.measured: size_bytes and seconds must be lists of the same length, 2 to 64"),
    (set_in(["lines", 2, "typical", "measured"], {"size_bytes": [1, 2], "seconds": [1e-6, "2"]}),
     'lines[2].typical.measured.seconds[1]: must be a number, got a JSON string'),
    (set_in(["lines", 2, "typical", "measured"], {"size_bytes": [1, 2], "seconds": [1e-6, 0]}),
     "lines[2].typical.measured.seconds: must be above 0, got 0.0"),
    (set_in(["lines", 2, "typical", "measured"], {"sizes": [1, 2], "seconds": [1e-6, 2e-6]}),
     "lines[2].typical.measured.size_bytes: missing"),
    (set_in(["lines", 0, "bound", "small", "intercept_s"], float("inf")),
     "invalid JSON: Infinity is not a JSON number"),
    (set_in(["provenance", "generator", "repeats"], float("nan")), "invalid JSON: NaN is not a JSON number"),
    (set_in(["lines", 1, "bound"], NOT_JOINED),
     "lines[1].bound: the large segment is not joined to the small one at 4096 B "
     "(1.05e-05 s against 1e-05 s, more than 2% apart)"),
    (set_in(["lines", 1, "bound"], {"small": {"intercept_s": 1e-7, "slope_s_per_byte": 0.0},
                                    "large": {"intercept_s": 1e-7, "slope_s_per_byte": 0.0}}),
     "bounds out of order: read off0: the cached bound (1e-07 s) is below the memcpy bound (3e-07 s) at 1 B"),
    (delete(["lines", 0, "errors", "large"]), "lines[0].errors.large: missing"),
    (set_in(["lines", 0, "errors", "small", "outlier_pct_model"], 101.0),
     "lines[0].errors.small.outlier_pct_model: a percentage above 100 (101.0)"),
    (set_in(["lines", 0, "errors", "small", "rel_err_pct"], "10 %"),
     "lines[0].errors.small.rel_err_pct: must be a number, got a JSON string"),
    (set_in(["lines", 0, "bound", "small", "intercept_s"], 10 ** 400),
     "lines[0].bound.small.intercept_s: must be finite, got an integer of 401 digits"),
    (set_in(["provenance", "generator"], nested(400)), f"invalid JSON: nested deeper than {MAX_JSON_DEPTH} levels"),
    (set_in(["provenance", "host"], "\ud800"), "invalid JSON: a string with an unpaired surrogate (not Unicode text)"),
]


@pytest.mark.parametrize("change, problem", REJECTIONS, ids=[problem.split(":")[0] for _, problem in REJECTIONS])
def test_a_bad_model_file_is_rejected_with_one_line(tmp_path, change, problem):
    path = write_json(tmp_path / "bad.json", mutated(change))
    with pytest.raises(ModelFileError) as raised:
        load_model(path)
    assert str(raised.value) == f"{path}: {problem}"


def test_a_second_line_for_the_same_key_is_rejected(tmp_path):
    data = model_to_json(small_model())
    data["lines"].append(copy.deepcopy(data["lines"][2]))
    path = write_json(tmp_path / "bad.json", data)
    with pytest.raises(ModelFileError, match=r"bad.json: lines\[3\]: a second line for write uncached rnd$"):
        load_model(path)


def test_a_typical_line_keeps_its_measured_sizes(tmp_path):
    """Between the sizes it was measured at, a typical line gives the measurements and the power
    law between neighbours; beyond them, its fitted segments."""
    data = model_to_json(small_model())
    fitted = data["lines"][2]["typical"]
    data["lines"][2]["typical"] = {**fitted, "measured": {"size_bytes": [4096, 65536, 1 << 20],
                                                          "seconds": [2e-6, 8e-6, 100e-6]}}
    path = write_json(tmp_path / "m.json", data)
    line = load_model(path).lines[("write", "uncached", "rnd")].typical
    predicted = line.predict(np.array([4096, 65536, 1 << 20, 16384, 1 << 24]))
    assert predicted[:3] == pytest.approx([2e-6, 8e-6, 100e-6])
    assert predicted[3] == pytest.approx(4e-6)           # halfway between 4 KiB and 64 KiB in log size
    assert predicted[4] == pytest.approx(line.fitted.predict(1 << 24))
    assert model_to_json(load_model(path))["lines"][2]["typical"] == data["lines"][2]["typical"]


def test_null_error_metrics_are_accepted(tmp_path):
    path = write_json(tmp_path / "m.json", mutated(set_in(["lines", 0, "errors", "small", "abs_err_s"], None)))
    assert load_model(path).lines[("read", "memcpy", "off0")].errors["small"]["abs_err_s"] is None


@pytest.mark.parametrize("content, problem", [
    (b'{"format": "ioassess-cause-model",', "invalid JSON: Expecting property name enclosed in double quotes "
                                            "at line 1 column 35"),
    (b"", "invalid JSON: Expecting value at line 1 column 1"),
    (b"[" * 100000, f"invalid JSON: nested deeper than {MAX_JSON_DEPTH} levels"),
    (b'{"version": -1e999}', "invalid JSON: -1e999 is beyond the range of a number"),
    (b"{}" + b" " * MAX_JSON_FILE_BYTES, f"too large: {MAX_JSON_FILE_BYTES + 2:,} bytes, more than the "
                                         f"{MAX_JSON_FILE_BYTES:,} read at most"),
    (b'{"version": 1' + b"0" * 5000 + b"}", "invalid JSON: an integer with too many digits"),
    (b"\xff\xfe{}", "not a text file (invalid UTF-8)"),
    (b"[1, 2]", "not an ioassess cause-model file (a JSON array, not an object)"),
    (b'"ioassess-cause-model"', "not an ioassess cause-model file (a JSON string, not an object)"),
])
def test_a_file_that_is_not_a_model_is_rejected_with_one_line(tmp_path, content, problem):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ModelFileError) as raised:
        load_model(path)
    assert str(raised.value) == f"{path}: {problem}"


def test_missing_and_unreadable_files_are_one_line(tmp_path, model_dirs):
    with pytest.raises(ModelFileError, match=f"^{tmp_path}/none.json: no such model file$"):
        load_model(tmp_path / "none.json")
    with pytest.raises(ModelFileError, match=f"^{tmp_path}: cannot read: Is a directory$"):
        load_model(tmp_path)
    user, site, shipped = model_dirs
    save_model(small_model(), shipped / "node1-scratch.json")
    save_model(small_model(), user / "mine.json")
    with pytest.raises(ModelFileError) as raised:
        load_model("lustre")
    assert str(raised.value) == f"{shipped}/lustre.json: no such model file (available models: mine, node1-scratch)"


def test_a_name_is_a_model_of_the_first_directory_that_has_it(model_dirs):
    """User, then site, then shipped."""
    user, site, shipped = model_dirs
    model = small_model()
    for directory, host in ((shipped, "shipped"), (site, "site"), (user, "user")):
        save_model(dataclasses.replace(model, provenance={**model.provenance, "host": host}),
                   directory / "node1-scratch.json")
        assert load_model("node1-scratch").provenance["host"] == host


def test_models_of_other_users_fifos_and_invalid_ones_are_found_with_their_problem(model_dirs, job_user):
    user, site, shipped = model_dirs
    save_model(small_model(), site / "theirs.json")
    os.chown(site / "theirs.json", job_user.pw_uid, -1)
    write_json(user / "broken.json", mutated(set_in(["version"], 7)))
    os.mkfifo(user / "fifo.json")
    save_model(small_model(), shipped / "node1-scratch.json")
    found = [(f.origin, f.name, f.path, f.model, f.problem) for f in find_models()]
    assert found == [
        ("user", "broken", str(user / "broken.json"), None,
         "invalid: model file version 7 is newer than this ioassess supports (1)"),
        ("user", "fifo", str(user / "fifo.json"), None, "not a regular file: not used"),
        ("site", "theirs", str(site / "theirs.json"), None,
         f"belongs to uid {job_user.pw_uid}, not to you or root: not used"),
        ("shipped", "node1-scratch", str(shipped / "node1-scratch.json"), small_model(), "")]


# ---- the shipped Mistral model: Kunkel 2015, Table 3 ----

# (op, class, layout): ((I, c) of R<=4K, (I, c) of R>4K, where Table 3's I is the value at 4096 B),
# errors of both rows (abs err s, rel err %, outlier % Exp., outlier % Model).
TABLE_3 = {
    ("read", "memcpy", "off0"): ((2.94e-07, 4.41e-11), (4.75e-07, 7.67e-11),
                                 (2.99e-08, 10.4, 0.7, 0.1), (2.21e-05, 27.4, 2.1, 0.2)),
    ("write", "memcpy", "rnd"): ((3.28e-07, 2.25e-12), (3.37e-07, 2.94e-14),
                                 (3e-08, 10.1, 0.8, 0.1), (1.47e-07, 53.5, 2.8, 0.0)),
    ("read", "cached", "off0"): ((8e-06, 4.18e-10), (9.71e-06, 1.44e-10),
                                 (7.57e-07, 10.0, 3.1, 1.0), (2.46e-05, 14.0, 1.8, 10.2)),
    ("read", "cached", "rnd"): ((8.39e-06, 4.91e-10), (1.04e-05, 2.99e-10),
                                (7.97e-07, 10.1, 2.8, 0.9), (9.7e-05, 15.5, 2.2, 0.1)),
    ("write", "cached", "off0"): ((1e-05, 3.26e-10), (1.14e-05, 3.93e-10),
                                  (9.36e-07, 10.1, 1.6, 0.7), (2.28e-05, 18.3, 1.2, 30.0)),
    ("write", "cached", "rnd"): ((1.11e-05, 7.16e-10), (1.4e-05, 5.87e-10),
                                 (1.97e-06, 18.4, 1.5, 5.0), (3.28e-05, 23.6, 0.6, 26.0)),
}


@pytest.fixture(scope="module")
def mistral():
    return load_model("mistral-lustre-2015")


def test_the_mistral_model_has_exactly_table_3s_lines(mistral):
    assert set(mistral.lines) == set(TABLE_3)
    for key, ((small_i, small_c), (large_i, large_c), small_errors, large_errors) in TABLE_3.items():
        bound = mistral.lines[key].bound
        assert (bound.small_intercept_s, bound.small_slope_s_per_byte, bound.large_slope_s_per_byte) == \
            (small_i, small_c, large_c), key
        assert bound.large_intercept_s + large_c * 4096 == pytest.approx(large_i, rel=1e-9), key
        metrics = ("abs_err_s", "rel_err_pct", "outlier_pct_experiment", "outlier_pct_model")
        assert mistral.lines[key].errors == {"small": dict(zip(metrics, small_errors)),
                                             "large": dict(zip(metrics, large_errors))}, key


def test_the_mistral_typical_lines_are_the_bounds_over_1_1(mistral):
    for key, line in mistral.lines.items():
        np.testing.assert_allclose(line.typical.predict([1, 4096, 4097, MiB, 16 * MiB]),
                                   line.bound.predict([1, 4096, 4097, MiB, 16 * MiB]) / 1.1, rtol=1e-5)
        assert "bound / 1.1" in line.note, key


def test_the_mistral_model_says_what_the_paper_did_not_publish(mistral):
    for missing in ("memcpy read rnd", "memcpy write off0", "uncached class"):
        assert missing in mistral.description
    assert mistral.provenance["source"] == "transcribed from Kunkel 2015, Table 3"
    assert mistral.provenance["file_system"]["type"] == "lustre"
    assert mistral.provenance["generator"]["file_layout"] == "off0"


def test_the_mistral_model_classifies_1_mib_reads_and_nothing_is_slow(mistral):
    # 1 MiB reads, off0 buffer: memcpy bound 80.6 us, cached bound 160 us; nothing is slow.
    durations = [50e-6, 100e-6, 1e-3, 10.0]
    codes = classify(mistral, [0] * 4, [MiB] * 4, durations, [0] * 4)
    assert [CLASSES[code] for code in codes] == ["memcpy", "cached", "uncached", "uncached"]
    lost = time_lost_seconds(mistral, [0] * 4, [MiB] * 4, durations, [0] * 4)
    cached_typical = (9.71e-06 + 1.44e-10 * (MiB - 4096)) / 1.1
    np.testing.assert_allclose(lost, [0.0, 0.0, 1e-3 - cached_typical, 10.0 - cached_typical], rtol=1e-5)


# ---- listing and `ioassess models` ----

def test_the_shipped_models_are_found():
    found = {f.name: f for f in find_models([("shipped", modelfile.PRETRAINED_DIR)])}
    mistral = found["mistral-lustre-2015"]
    assert mistral.origin == "shipped" and os.path.isfile(mistral.path) and not mistral.problem
    assert modelfile.model_summary(mistral.model) == (
        "transcribed from Kunkel 2015, Table 3; host mistral (DKRZ); "
        "lustre at /mnt/lustre (Lustre 2.5, ClusterStor 9000); 2015; profile paper")


def test_models_command_lists_every_directory_and_marks_the_default(model_dirs, capsys):
    user, site, shipped = model_dirs
    save_model(small_model(), user / "node1-scratch.json")
    write_json(site / "broken.json", mutated(set_in(["version"], 7)))
    assert main(["models"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "  user     node1-scratch  trained by ioassess train; host node1; ext4 at /scratch; "
        f"2026-11-21T12:00:00+00:00; profile quick; {user}/node1-scratch.json",
        "  site     broken         invalid: model file version 7 is newer than this ioassess supports (1); "
        f"{site}/broken.json",
        f"* shipped  {DEFAULT_MODEL}    (not installed: train one with `ioassess train`)",
    ]
    save_model(small_model(), shipped / f"{DEFAULT_MODEL}.json")
    assert main(["models"]) == 0
    assert capsys.readouterr().out.splitlines()[2].startswith(
        f"* shipped  {DEFAULT_MODEL}    trained by ioassess train; ")


def test_models_command_checks_the_given_files(tmp_path, capsys):
    save_model(small_model(), tmp_path / "good.json")
    bad = write_json(tmp_path / "bad.json", mutated(set_in(["lines", 0, "layout"], "seq")))
    assert main(["models", str(tmp_path / "good.json"), str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f'ioassess: {bad}: lines[0].layout: unknown layout "seq" '
        '(expected one of off0, rnd, off0-unaligned, rnd-unaligned)']
    assert captured.out.splitlines() == [
        "  given    node1-scratch  trained by ioassess train; host node1; ext4 at /scratch; "
        f"2026-11-21T12:00:00+00:00; profile quick; {tmp_path}/good.json"]


def test_the_shipped_default_model_is_a_full_training_with_every_line():
    model = load_model(DEFAULT_MODEL)
    assert model.provenance["profile"] == "full" and model.provenance["source"] == "trained by ioassess train"
    assert len(model.lines) == 16     # 3 classes x 2 ops x 2 layouts, appended and flushed x 2 layouts
    assert {("write", "appended", layout) for layout in ("off0", "rnd")} < model.lines.keys()
    assert {("sync", "flushed", layout) for layout in ("off0", "rnd")} < model.lines.keys()
    assert all(line.typical is not None for line in model.lines.values())


# ---- hostile model files in the user's model directory ----

HUGE_MODEL_BYTES = 200_000_000
# `ioassess report` refusing a model: Python, numpy and the report's modules (about 100 MiB),
# nothing of the model file.
REFUSING_PEAK_RSS_KIB = 300 * 1024


def write_huge_model(path):
    """A model file of HUGE_MODEL_BYTES, valid but for its size: its provenance.generator holds
    an array of numbers (parsed whole, 200 MB of them took 4.9 GB)."""
    head, tail = json.dumps(mutated(set_in(["provenance", "generator"], {"pad": [0]}))).split("[0]")
    with open(path, "w") as f:
        f.write(head + "[1.5")
        padding = ", 1.5" * (1 << 16)
        while f.tell() < HUGE_MODEL_BYTES:
            f.write(padding)
        f.write("]" + tail)


@pytest.mark.parametrize("hostile", ["nested 400 deep", "200 MB"])
def test_a_hostile_model_of_the_user_is_listed_invalid_refused_in_one_line_and_other_reports_written(tmp_path,
                                                                                                     hostile):
    """A user's model file nested 400 deep was listed as valid and ended every report in a
    RecursionError; one of 200 MB took gigabytes. Both are listed with their problem, refused
    in one line (exit status 2) without being read when given, and not chosen for a report."""
    models = tmp_path / "data" / "ioassess" / "models"
    models.mkdir(parents=True)
    path = models / "hostile.json"
    if hostile == "200 MB":
        write_huge_model(path)
        problem = f"too large: {path.stat().st_size:,} bytes, more than the {MAX_JSON_FILE_BYTES:,} read at most"
    else:
        write_json(path, mutated(set_in(["provenance", "generator"], nested(400))))
        problem = f"invalid JSON: nested deeper than {MAX_JSON_DEPTH} levels"
    env = clean_env({"XDG_DATA_HOME": str(tmp_path / "data")})
    command = [sys.executable, "-m", "ioassess"]
    listed, _ = run_measured([*command, "models"], env)
    assert listed.returncode == 0, describe(listed)
    [line] = [line for line in listed.stdout.splitlines() if " hostile " in line]
    assert line.split()[0] == "user" and line.endswith(f" invalid: {problem}; {path}"), line
    log = next(p for p in shipped_darshan_logs() if p.endswith("/sample.darshan"))
    given, peak_kib = run_measured([*command, "report", log, "--model", path, "-o", tmp_path / "given.html"], env)
    assert (given.returncode, given.stderr) == (2, f"ioassess: {path}: {problem}\n"), describe(given)
    assert peak_kib < REFUSING_PEAK_RSS_KIB and not (tmp_path / "given.html").exists()
    chosen, _ = run_measured([*command, "report", log, "-o", tmp_path / "chosen.html"], env)
    assert chosen.returncode == 0, describe(chosen)
    assert (tmp_path / "chosen.html").read_text().rstrip().endswith("</html>")
