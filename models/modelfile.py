"""Cause-model files: versioned JSON with provenance and Table-3 error metrics.

The format is documented field by field in docs/model-format.md. load_model() validates a file
completely and turns every problem (unreadable, not JSON, wrong format, newer version, bad
field, lines not joined at 4096 B, bounds out of order) into a ModelFileError whose str() is
one line `PATH: problem`. save_model() writes only what load_model() accepts, atomically.
"""
import copy
import json
import math
import os
import re

from ioassess.files import replace_atomically

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
_ISO_DATE = re.compile(r"\d{4}(-\d{2}(-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?)?)?")


class ModelFileError(Exception):
    """A model file that cannot be used; str() is the one line `PATH: problem`."""

    def __init__(self, path, problem):
        self.path = os.fspath(path)
        self.problem = " ".join(str(problem).split())
        super().__init__(f"{self.path}: {self.problem}")


class _Invalid(Exception):
    """A problem found while validating; becomes a ModelFileError with the file's path."""


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
    text = json.dumps(model_to_json(model), indent=1) + "\n"
    try:
        _model_from_json(json.loads(text))
    except _Invalid as problem:
        raise ModelFileError(path, problem) from None
    try:
        replace_atomically(path, text, mode=0o644)  # readable by the site's users
    except OSError as error:
        raise ModelFileError(path, f"cannot write: {error.strerror}") from None


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
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except FileNotFoundError:
        raise ModelFileError(path, "no such model file" + _available_hint(name_or_path, path)) from None
    except OSError as error:
        raise ModelFileError(path, f"cannot read: {error.strerror}") from None
    except UnicodeDecodeError:
        raise ModelFileError(path, "not a text file (invalid UTF-8)") from None
    try:
        return _model_from_json(json.loads(text))
    except json.JSONDecodeError as error:
        raise ModelFileError(path, f"invalid JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    except RecursionError:
        raise ModelFileError(path, "invalid JSON: nested too deeply") from None
    except _Invalid as problem:
        raise ModelFileError(path, problem) from None


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
    """The CauseModel of a parsed model file; raises _Invalid with the first problem found."""
    if not isinstance(data, dict):
        raise _Invalid(f"not an ioassess cause-model file (a JSON {_json_type(data)}, not an object)")
    if data.get("format") != MODEL_FORMAT:
        raise _Invalid(f"not an ioassess cause-model file (format is {json.dumps(data.get('format'))}, "
                       f"expected \"{MODEL_FORMAT}\")")
    version = data.get("version")
    if type(version) is not int or version < 1:
        raise _Invalid(f"version: must be a whole number >= 1, got {json.dumps(version)}")
    if version > MODEL_VERSION:
        raise _Invalid(f"model file version {version} is newer than this ioassess supports ({MODEL_VERSION})")
    _check_keys(data, "", ("format", "version", "name", "description", "provenance", "joint_bytes", "lines"))
    if data["joint_bytes"] != JOINT_BYTES or type(data["joint_bytes"]) is not int:
        raise _Invalid(f"joint_bytes: must be {JOINT_BYTES}, got {json.dumps(data['joint_bytes'])}")
    lines = {}
    for index, line in enumerate(_typed(data, "", "lines", list)):
        key, model_line = _model_line(line, f"lines[{index}].")
        if key in lines:
            raise _Invalid(f"lines[{index}]: a second line for {' '.join(key)}")
        lines[key] = model_line
    violations = bound_order_violations(lines)
    if violations:
        raise _Invalid(f"bounds out of order: {violations[0]}")
    return CauseModel(name=_typed(data, "", "name", str), description=_typed(data, "", "description", str),
                      provenance=_provenance(_typed(data, "", "provenance", dict)), lines=lines)


def _provenance(provenance):
    """Checks the required fields; other fields are kept (provenance is descriptive)."""
    for field in ("source", "host", "kernel", "profile"):
        _typed(provenance, "provenance.", field, str)
    file_system = _typed(provenance, "provenance.", "file_system", dict)
    _check_keys(file_system, "provenance.file_system.", ("type", "mount"))
    for field in ("type", "mount"):
        _typed(file_system, "provenance.file_system.", field, str)
    if not _ISO_DATE.fullmatch(_typed(provenance, "provenance.", "date", str)):
        raise _Invalid(f"provenance.date: must be an ISO-8601 date, got {json.dumps(provenance['date'])}")
    _typed(provenance, "provenance.", "generator", dict)
    return provenance


def _model_line(line, where):
    if not isinstance(line, dict):
        raise _Invalid(f"{where[:-1]}: must be an object, got a JSON {_json_type(line)}")
    _check_keys(line, where, ("op", "class", "layout", "bound", "typical", "errors", "note"))
    key = tuple(_choice(line, where, field, choices)
                for field, choices in (("op", OPS), ("class", LINE_CLASSES), ("layout", LAYOUTS)))
    typical = line["typical"]
    errors = _typed(line, where, "errors", dict)
    _check_keys(errors, f"{where}errors.", SEGMENTS)
    return key, ModelLine(
        bound=_segmented_line(line, where, "bound"),
        typical=None if typical is None else _segmented_line(line, where, "typical"),
        errors={segment: _segment_errors(errors, f"{where}errors.", segment) for segment in SEGMENTS},
        note=_typed(line, where, "note", str))


def _segmented_line(line, where, field):
    segments = _typed(line, where, field, dict)
    where = f"{where}{field}."
    _check_keys(segments, where, SEGMENTS)
    parameters = {}
    for segment in SEGMENTS:
        values = _typed(segments, where, segment, dict)
        _check_keys(values, f"{where}{segment}.", ("intercept_s", "slope_s_per_byte"))
        for name in ("intercept_s", "slope_s_per_byte"):
            # The large intercept is an extrapolation to 0 B and may be negative; the joint
            # check below keeps the segment non-negative where it applies.
            may_be_negative = segment == "large" and name == "intercept_s"
            parameters[f"{segment}_{name}"] = _number(values, f"{where}{segment}.", name, may_be_negative)
    result = SegmentedLine(parameters["small_intercept_s"], parameters["small_slope_s_per_byte"],
                           parameters["large_intercept_s"], parameters["large_slope_s_per_byte"])
    small_s = result.small_intercept_s + result.small_slope_s_per_byte * JOINT_BYTES
    large_s = result.large_intercept_s + result.large_slope_s_per_byte * JOINT_BYTES
    if abs(large_s - small_s) > JOINT_TOLERANCE * small_s:
        raise _Invalid(f"{where[:-1]}: the large segment is not joined to the small one at {JOINT_BYTES} B "
                       f"({large_s:.4g} s against {small_s:.4g} s, more than {JOINT_TOLERANCE:.0%} apart)")
    return result


def _segment_errors(errors, where, segment):
    metrics = _typed(errors, where, segment, dict)
    _check_keys(metrics, f"{where}{segment}.", ERROR_METRICS)
    result = {}
    for name in ERROR_METRICS:
        result[name] = None if metrics[name] is None else _number(metrics, f"{where}{segment}.", name)
        if name.startswith("outlier_pct") and result[name] is not None and result[name] > 100:
            raise _Invalid(f"{where}{segment}.{name}: a percentage above 100 ({result[name]})")
    return result


def _check_keys(obj, where, expected):
    missing = [key for key in expected if key not in obj]
    if missing:
        raise _Invalid(f"{where}{missing[0]}: missing")
    unknown = sorted(set(obj) - set(expected))
    if unknown:
        raise _Invalid(f"{where}{unknown[0]}: unknown field")


def _typed(obj, where, field, expected_type):
    if field not in obj:
        raise _Invalid(f"{where}{field}: missing")
    value = obj[field]
    if not isinstance(value, expected_type):
        raise _Invalid(f"{where}{field}: must be {_EXPECTED[expected_type]}, got a JSON {_json_type(value)}")
    return value


def _choice(obj, where, field, choices):
    value = _typed(obj, where, field, str)
    if value not in choices:
        raise _Invalid(f"{where}{field}: unknown {field} {json.dumps(value)} (expected one of {', '.join(choices)})")
    return value


def _number(obj, where, field, may_be_negative=False):
    value = obj[field]
    if type(value) not in (int, float):
        raise _Invalid(f"{where}{field}: must be a number, got a JSON {_json_type(value)}")
    if not math.isfinite(value):
        raise _Invalid(f"{where}{field}: must be finite, got {value}")
    if value < 0 and not may_be_negative:
        raise _Invalid(f"{where}{field}: must not be negative, got {value}")
    return float(value)


_JSON_TYPES = {str: "string", list: "array", dict: "object"}
_EXPECTED = {str: "a string", list: "an array", dict: "an object"}


def _json_type(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return _JSON_TYPES.get(type(value), type(value).__name__)
