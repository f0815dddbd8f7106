"""Cause-model files: versioned JSON with provenance and Table-3 error metrics.

The format is documented field by field in docs/model-format.md. load_model() validates a file
completely and turns every problem (unreadable, not JSON, wrong format, newer version, bad
field, lines not joined at 4096 B, bounds out of order) into a ModelFileError whose str() is
one line `PATH: problem`. save_model() writes only what load_model() accepts, atomically.

Models are looked for in three places, in this order (docs/model-format.md, "Where models
are"): the user's model directory, the site's, and the ones shipped with ioassess.
"""
import copy
import dataclasses
import json
import os
import re
import stat

from ioassess.jsonfile import (Invalid, JsonFileError, check_format, check_keys, choice, iso_date, json_type, number,
                               read_json_file, typed, write_json_file)

from .causes import (JOINT_BYTES, LAYOUTS, LINE_OPS, OPS, CauseModel, MeasuredLine, ModelLine, SegmentedLine,
                     bound_order_violations)

MODEL_FORMAT = "ioassess-cause-model"
MODEL_VERSION = 1
DEFAULT_MODEL = "local-linux"
PRETRAINED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pretrained")
# Where `ioassess calibrate --site` writes and every report looks: $IOASSESS_SITE_MODELS, else
# the epilog config's site_models, else this directory.
SITE_MODELS_ENV = "IOASSESS_SITE_MODELS"
SITE_MODELS_DIR = "/etc/ioassess/models"
ORIGINS = ("user", "site", "shipped")
DEVICE_NUMBER = re.compile(r"[0-9]+:[0-9]+")
# Relative gap allowed between the two segments at JOINT_BYTES. A fitted line is joined
# exactly; a transcribed one (Table 3, three significant digits: each printed number may be
# 0.5 % off) only up to rounding.
JOINT_TOLERANCE = 0.02
ERROR_METRICS = ("abs_err_s", "rel_err_pct", "outlier_pct_experiment", "outlier_pct_model")
SEGMENTS = ("small", "large")
# Sizes a typical line may keep its measurements at (the full profile measures 25).
MAX_MEASURED_SIZES = 64


class ModelFileError(JsonFileError):
    """A model file that cannot be used; str() is the one line `PATH: problem`."""


# ---- writing ----

def model_to_json(model):
    """The model as the JSON object of docs/model-format.md (lines in OPS, CLASSES, LAYOUTS order),
    sharing no mutable part with the model."""
    order = {key: i for i, key in enumerate((op, cls, layout) for op in OPS + ("sync",) for cls in LINE_OPS
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
            "typical": None if line.typical is None else _typical_to_json(line.typical),
            "errors": copy.deepcopy(line.errors), "note": line.note}


def _typical_to_json(line):
    if not isinstance(line, MeasuredLine):
        return _segmented_to_json(line)
    return {**_segmented_to_json(line.fitted),
            "measured": {"size_bytes": list(line.sizes_bytes), "seconds": list(line.seconds)}}


def _segmented_to_json(line):
    return {"small": {"intercept_s": line.small_intercept_s, "slope_s_per_byte": line.small_slope_s_per_byte},
            "large": {"intercept_s": line.large_intercept_s, "slope_s_per_byte": line.large_slope_s_per_byte}}


def save_model(model, path):
    """Write the model to path. It is validated first (ModelFileError naming path if the loader
    would reject it) and written to a temporary file in the same directory that is then renamed,
    so no partial file is ever left at path."""
    write_json_file(path, model_to_json(model), _model_from_json, ModelFileError)


# ---- reading ----

def user_model_dir(environ=os.environ, home=None):
    """${XDG_DATA_HOME:-HOME/.local/share}/ioassess/models (a relative XDG_DATA_HOME is ignored,
    as the XDG specification says); home: the user's home, default ~."""
    data_home = environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(data_home):
        data_home = os.path.join(home or os.path.expanduser("~"), ".local", "share")
    return os.path.join(data_home, "ioassess", "models")


def site_model_dir(environ=os.environ):
    """$IOASSESS_SITE_MODELS, else the site_models setting of the epilog's config file, else
    SITE_MODELS_DIR."""
    from ioassess.site.epilog import configured_site_models   # the epilog imports this module
    return environ.get(SITE_MODELS_ENV) or configured_site_models() or SITE_MODELS_DIR


def model_dirs(environ=os.environ, home=None, site_dir=None):
    """[(origin, directory)] in search order: the user's, the site's, the shipped ones."""
    return [("user", user_model_dir(environ, home)), ("site", site_dir or site_model_dir(environ)),
            ("shipped", PRETRAINED_DIR)]


def model_path(name_or_path, dirs=None):
    """A name (no path separator, no .json suffix) is NAME.json in the first of the model
    directories that has one (default: model_dirs()), else in PRETRAINED_DIR; anything else is
    a path."""
    text = os.fspath(name_or_path)
    if os.sep in text or text.endswith(".json"):
        return text
    candidates = [os.path.join(directory, text + ".json") for _, directory in (dirs or model_dirs())]
    return next((path for path in candidates if os.path.isfile(path)), os.path.join(PRETRAINED_DIR, text + ".json"))


def load_model(name_or_path, dirs=None):
    """The validated CauseModel of a model name or file; raises ModelFileError."""
    path = model_path(name_or_path, dirs)
    return read_json_file(path, _model_from_json, ModelFileError,
                          lambda: "no such model file" + _available_hint(name_or_path, path, dirs))


def _available_hint(name_or_path, path, dirs):
    if path == os.fspath(name_or_path):
        return ""
    names = sorted({found.name for found in find_models(dirs)})
    return f" (available models: {', '.join(names) if names else 'none'})"


@dataclasses.dataclass(frozen=True)
class FoundModel:
    origin: str         # user | site | shipped
    name: str           # the file name without .json
    path: str
    model: object       # the CauseModel, or None when the file cannot be used
    problem: str        # why it cannot be used; "" when it can


def find_models(dirs=None):
    """Every model file (*.json) of the model directories (default: model_dirs()), in search
    order, by name within a directory. A user's or site's file that belongs to someone other
    than this user or root is not used (another user could otherwise choose how your jobs are
    judged), nor is anything but a regular file, nor a file load_model() rejects: each comes
    with its problem."""
    found = []
    for origin, directory in dirs or model_dirs():
        try:
            names = sorted(entry[:-len(".json")] for entry in os.listdir(directory) if entry.endswith(".json"))
        except OSError:
            continue
        for name in names:
            found.append(_found_model(origin, name, os.path.join(directory, name + ".json")))
    return found


def _found_model(origin, name, path):
    try:
        status = os.stat(path)
    except OSError as error:
        return FoundModel(origin, name, path, None, f"cannot read: {error.strerror}")
    if not stat.S_ISREG(status.st_mode):   # a FIFO would block the report
        return FoundModel(origin, name, path, None, "not a regular file: not used")
    if origin != "shipped" and status.st_uid not in (0, os.geteuid()):
        return FoundModel(origin, name, path, None, f"belongs to uid {status.st_uid}, not to you or root: not used")
    try:
        return FoundModel(origin, name, path, load_model(path), "")
    except ModelFileError as error:
        return FoundModel(origin, name, path, None, f"invalid: {error.problem}")


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
    check_keys(file_system, "provenance.file_system.", ("type", "mount") + tuple(
        field for field in ("source", "device_number") if field in file_system))
    for field in file_system:
        typed(file_system, "provenance.file_system.", field, str)
    device_number = file_system.get("device_number")
    if device_number is not None and not DEVICE_NUMBER.fullmatch(device_number):
        raise Invalid(f"provenance.file_system.device_number: must be MAJOR:MINOR, got {json.dumps(device_number)}")
    iso_date(provenance, "provenance.", "date")
    typed(provenance, "provenance.", "generator", dict)
    return provenance


def _model_line(line, where):
    if not isinstance(line, dict):
        raise Invalid(f"{where[:-1]}: must be an object, got a JSON {json_type(line)}")
    check_keys(line, where, ("op", "class", "layout", "bound", "typical", "errors", "note"))
    key = tuple(choice(line, where, field, choices)
                for field, choices in (("op", OPS + ("sync",)), ("class", tuple(LINE_OPS)), ("layout", LAYOUTS)))
    if key[0] not in LINE_OPS[key[1]]:
        raise Invalid(f"{where}op: the {key[1]} class has lines of {' and '.join(LINE_OPS[key[1]])} only, "
                      f"got {json.dumps(key[0])}")
    typical = line["typical"]
    errors = typed(line, where, "errors", dict)
    check_keys(errors, f"{where}errors.", SEGMENTS)
    return key, ModelLine(
        bound=_segmented_line(line, where, "bound"),
        typical=None if typical is None else _typical_line(line, where),
        errors={segment: _segment_errors(errors, f"{where}errors.", segment) for segment in SEGMENTS},
        note=typed(line, where, "note", str))


def _typical_line(line, where):
    """The typical line: a segmented line, with the sizes it was measured at if it has them
    (MeasuredLine)."""
    typical = typed(line, where, "typical", dict)
    if "measured" not in typical:
        return _segmented_line(line, where, "typical")
    fitted = _segmented_line({"typical": {k: v for k, v in typical.items() if k != "measured"}}, where, "typical")
    where = f"{where}typical.measured."
    measured = typical["measured"]
    if not isinstance(measured, dict):
        raise Invalid(f"{where[:-1]}: must be an object, got a JSON {json_type(measured)}")
    check_keys(measured, where, ("size_bytes", "seconds"))
    sizes, seconds = measured["size_bytes"], measured["seconds"]
    if not isinstance(sizes, list) or not isinstance(seconds, list) or len(sizes) != len(seconds) or \
            not 2 <= len(sizes) <= MAX_MEASURED_SIZES:
        raise Invalid(f"{where[:-1]}: size_bytes and seconds must be lists of the same length, 2 to "
                      f"{MAX_MEASURED_SIZES}")
    for i, size in enumerate(sizes):
        if type(size) is not int or size < 1 or (i and size <= sizes[i - 1]):
            raise Invalid(f"{where}size_bytes[{i}]: must be a whole number >= 1 above the one before, "
                          f"got {json.dumps(size)}")
    durations = tuple(number({f"[{i}]": value}, f"{where}seconds", f"[{i}]") for i, value in enumerate(seconds))
    if min(durations) <= 0:
        raise Invalid(f"{where}seconds: must be above 0, got {min(durations)}")
    return MeasuredLine(fitted=fitted, sizes_bytes=tuple(sizes), seconds=durations)


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
