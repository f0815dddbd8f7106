"""Cause-model files: versioned JSON with provenance and Table-3 error metrics.

The format is documented field by field in docs/model-format.md. load_model() validates a file
completely and turns every problem (unreadable, not JSON, wrong format, newer version, bad
field, lines not joined at 4096 B, bounds out of order) into a ModelFileError whose str() is
one line `PATH: problem`. save_model() writes only what load_model() accepts, atomically.
"""
import copy
import json
import os

from ioassess.jsonfile import (Invalid, JsonFileError, check_format, check_keys, choice, iso_date, json_type, number,
                               read_json_file, typed, write_json_file)

from .causes import (JOINT_BYTES, LAYOUTS, LINE_CLASSES, OPS, CauseModel, ModelLine, SegmentedLine,
                     bound_order_violations)

MODEL_FORMAT = "ioassess-cause-model"
MODEL_VERSION = 1
DEFAULT_MODEL = "local-linux"
PRETRAINED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pretrained")
# Relative gap allowed between the two segments at JOINT_BYTES. A fitted line is joined
# exactly; a transcribed one (Table 3, three significant digits: each printed number may be
# 0.5 % off) only up to rounding.
JOINT_TOLERANCE = 0.02
ERROR_METRICS = ("abs_err_s", "rel_err_pct", "outlier_pct_experiment", "outlier_pct_model")
SEGMENTS = ("small", "large")


class ModelFileError(JsonFileError):
    """A model file that cannot be used; str() is the one line `PATH: problem`."""


# ---- writing ----

def model_to_json(model):
    """The model as the JSON object of docs/model-format.md (lines in OPS, CLASSES, LAYOUTS order),
    sharing no mutable part with the model."""
    order = {key: i for i, key in enumerate((op, cls, layout) for op in OPS for cls in LINE_CLASSES
                                            for layout in LAYOUTS)}
    return {
        "format": MODEL_FORMAT,
        "version": MODEL_VERSION,
        "name": model.name,
        "description": model.description,
        "provenance": copy.deepcopy(model.provenance),
        "joint_bytes": JOINT_BYTES,
        "lines": [_line_to_json(key, model.lines[key]) for key in sorted(model.lines, key=lambda k: order.get(k, -1))],
    }


def _line_to_json(key, line):
    op, cls, layout = key
    return {"op": op, "class": cls, "layout": layout, "bound": _segmented_to_json(line.bound),
            "typical": None if line.typical is None else _segmented_to_json(line.typical),
            "errors": copy.deepcopy(line.errors), "note": line.note}


def _segmented_to_json(line):
    return {"small": {"intercept_s": line.small_intercept_s, "slope_s_per_byte": line.small_slope_s_per_byte},
            "large": {"intercept_s": line.large_intercept_s, "slope_s_per_byte": line.large_slope_s_per_byte}}


def save_model(model, path):
    """Write the model to path. It is validated first (ModelFileError naming path if the loader
    would reject it) and written to a temporary file in the same directory that is then renamed,
    so no partial file is ever left at path."""
    write_json_file(path, model_to_json(model), _model_from_json, ModelFileError)


# ---- reading ----

def model_path(name_or_path):
    """A name (no path separator, no .json suffix) is a model in PRETRAINED_DIR; anything
    else is a path."""
    text = os.fspath(name_or_path)
    if os.sep in text or text.endswith(".json"):
        return text
    return os.path.join(PRETRAINED_DIR, text + ".json")


def load_model(name_or_path):
    """The validated CauseModel of a model name or file; raises ModelFileError."""
    path = model_path(name_or_path)
    return read_json_file(path, _model_from_json, ModelFileError,
                          lambda: "no such model file" + _available_hint(name_or_path, path))


def _available_hint(name_or_path, path):
    if path == os.fspath(name_or_path):
        return ""
    names = [name for name, _, _ in list_models()]
    return f" (available models: {', '.join(names) if names else 'none'})"


def list_models():
    """(name, path, summary) of every model file in PRETRAINED_DIR, sorted by name. summary is
    model_summary() of the model, or `invalid: problem` for a file load_model() rejects."""
    try:
        names = sorted(entry[:-len(".json")] for entry in os.listdir(PRETRAINED_DIR) if entry.endswith(".json"))
    except FileNotFoundError:
        return []
    listing = []
    for name in names:
        path = os.path.join(PRETRAINED_DIR, name + ".json")
        try:
            summary = model_summary(load_model(path))
        except ModelFileError as error:
            summary = f"invalid: {error.problem}"
        listing.append((name, path, summary))
    return listing


def model_summary(model):
    """One line: source; host; file system; date; profile."""
    provenance = model.provenance
    file_system = provenance["file_system"]
    return "; ".join([provenance["source"], f"host {provenance['host']}",
                      f"{file_system['type']} at {file_system['mount']}", provenance["date"],
                      f"profile {provenance['profile']}"])


# ---- validation ----

def _model_from_json(data):
    """The CauseModel of a parsed model file; raises Invalid with the first problem found."""
    check_format(data, MODEL_FORMAT, MODEL_VERSION, "cause-model file", "model file")
    check_keys(data, "", ("format", "version", "name", "description", "provenance", "joint_bytes", "lines"))
    if data["joint_bytes"] != JOINT_BYTES or type(data["joint_bytes"]) is not int:
        raise Invalid(f"joint_bytes: must be {JOINT_BYTES}, got {json.dumps(data['joint_bytes'])}")
    lines = {}
    for index, line in enumerate(typed(data, "", "lines", list)):
        key, model_line = _model_line(line, f"lines[{index}].")
        if key in lines:
            raise Invalid(f"lines[{index}]: a second line for {' '.join(key)}")
        lines[key] = model_line
    violations = bound_order_violations(lines)
    if violations:
        raise Invalid(f"bounds out of order: {violations[0]}")
    return CauseModel(name=typed(data, "", "name", str), description=typed(data, "", "description", str),
                      provenance=_provenance(typed(data, "", "provenance", dict)), lines=lines)


def _provenance(provenance):
    """Checks the required fields; other fields are kept (provenance is descriptive)."""
    for field in ("source", "host", "kernel", "profile"):
        typed(provenance, "provenance.", field, str)
    file_system = typed(provenance, "provenance.", "file_system", dict)
    check_keys(file_system, "provenance.file_system.", ("type", "mount"))
    for field in ("type", "mount"):
        typed(file_system, "provenance.file_system.", field, str)
    iso_date(provenance, "provenance.", "date")
    typed(provenance, "provenance.", "generator", dict)
    return provenance


def _model_line(line, where):
    if not isinstance(line, dict):
        raise Invalid(f"{where[:-1]}: must be an object, got a JSON {json_type(line)}")
    check_keys(line, where, ("op", "class", "layout", "bound", "typical", "errors", "note"))
    key = tuple(choice(line, where, field, choices)
                for field, choices in (("op", OPS), ("class", LINE_CLASSES), ("layout", LAYOUTS)))
    typical = line["typical"]
    errors = typed(line, where, "errors", dict)
    check_keys(errors, f"{where}errors.", SEGMENTS)
    return key, ModelLine(
        bound=_segmented_line(line, where, "bound"),
        typical=None if typical is None else _segmented_line(line, where, "typical"),
        errors={segment: _segment_errors(errors, f"{where}errors.", segment) for segment in SEGMENTS},
        note=typed(line, where, "note", str))


def _segmented_line(line, where, field):
    segments = typed(line, where, field, dict)
    where = f"{where}{field}."
    check_keys(segments, where, SEGMENTS)
    parameters = {}
    for segment in SEGMENTS:
        values = typed(segments, where, segment, dict)
        check_keys(values, f"{where}{segment}.", ("intercept_s", "slope_s_per_byte"))
        for name in ("intercept_s", "slope_s_per_byte"):
            # The large intercept is an extrapolation to 0 B and may be negative; the joint
            # check below keeps the segment non-negative where it applies.
            may_be_negative = segment == "large" and name == "intercept_s"
            parameters[f"{segment}_{name}"] = number(values, f"{where}{segment}.", name, may_be_negative)
    result = SegmentedLine(parameters["small_intercept_s"], parameters["small_slope_s_per_byte"],
                           parameters["large_intercept_s"], parameters["large_slope_s_per_byte"])
    small_s = result.small_intercept_s + result.small_slope_s_per_byte * JOINT_BYTES
    large_s = result.large_intercept_s + result.large_slope_s_per_byte * JOINT_BYTES
    if abs(large_s - small_s) > JOINT_TOLERANCE * small_s:
        raise Invalid(f"{where[:-1]}: the large segment is not joined to the small one at {JOINT_BYTES} B "
                      f"({large_s:.4g} s against {small_s:.4g} s, more than {JOINT_TOLERANCE:.0%} apart)")
    return result


def _segment_errors(errors, where, segment):
    metrics = typed(errors, where, segment, dict)
    check_keys(metrics, f"{where}{segment}.", ERROR_METRICS)
    result = {}
    for name in ERROR_METRICS:
        result[name] = None if metrics[name] is None else number(metrics, f"{where}{segment}.", name)
        if name.startswith("outlier_pct") and result[name] is not None and result[name] > 100:
            raise Invalid(f"{where}{segment}.{name}: a percentage above 100 ({result[name]})")
    return result
