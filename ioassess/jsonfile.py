"""The JSON ioassess reads, and its versioned JSON files (cause models, I/O-model grids): reading
and writing them with every problem as one line `PATH: problem`, and the checks their
validators share.

Every JSON text the tool reads goes through parse_json, which refuses one nested deeper than
MAX_JSON_DEPTH before parsing it; read_json_file also refuses a file larger than
MAX_JSON_FILE_BYTES before reading it. A file's validator takes the parsed JSON and raises
Invalid with the first problem found, naming the field by its path
(`lines[0].bound.small.intercept_s: must be finite, got inf`); read_json_file and
write_json_file turn it into the file type's error, naming the file.
"""
import itertools
import json
import math
import os
import re
import stat

from .files import replace_atomically

# The most a model or grid file may hold (the shipped models have 10-17 KiB): what is read of
# a file, so that a huge one costs neither memory nor time.
MAX_JSON_FILE_BYTES = 1 << 20
# How deep arrays and objects may nest in any JSON the tool reads (a model file nests 5 deep):
# deeper, and code that walks it recursively (copies, the report's text) would exhaust
# Python's stack.
MAX_JSON_DEPTH = 32
# A JSON string, to the end of the text if it is not closed; written so that matching it never
# backtracks (linear in the text's length).
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")
_BRACKET_STEPS = {"[": 1, "{": 1, "]": -1, "}": -1}
# The only way a UTF-8 text gives a JSON string that is not Unicode text: a surrogate's escape.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")

ISO_DATE = re.compile(r"\d{4}(-\d{2}(-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?)?)?")


class JsonFileError(Exception):
    """A file that cannot be used; str() is the one line `PATH: problem`."""

    def __init__(self, path, problem):
        self.path = os.fspath(path)
        self.problem = " ".join(str(problem).split())
        super().__init__(f"{self.path}: {self.problem}")


class Invalid(Exception):
    """A problem of a JSON text or of what it holds, found while parsing or validating; becomes
    the file type's error with the file's path."""


def parse_json(text):
    """The value of a JSON text, which is JSON as its standard says: no NaN or Infinity (Python's
    json takes them), no number beyond a float's range. Raises Invalid (one line): `invalid
    JSON: nested deeper than N levels` (checked before it is parsed), `invalid JSON: WHAT at line
    L column C`, `invalid JSON: NaN is not a JSON number`, or a string that is not Unicode text
    (an unpaired surrogate, which no file or terminal can take)."""
    if nesting_depth(text) > MAX_JSON_DEPTH:
        raise Invalid(f"invalid JSON: nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(text, parse_constant=_not_a_json_number, parse_float=_finite_float)
    except json.JSONDecodeError as error:
        raise Invalid(f"invalid JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    except ValueError:   # an integer of more digits than Python converts (sys.set_int_max_str_digits)
        raise Invalid("invalid JSON: an integer with too many digits") from None
    if _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise Invalid("invalid JSON: a string with an unpaired surrogate (not Unicode text)") from None
    return value


def _not_a_json_number(constant):
    raise Invalid(f"invalid JSON: {constant} is not a JSON number")


def _finite_float(text):
    value = float(text)
    if not math.isfinite(value):
        raise Invalid(f"invalid JSON: {text} is beyond the range of a number")
    return value


def nesting_depth(text):
    """How deep the arrays and objects of a JSON text nest; brackets in strings are not counted."""
    depths = itertools.accumulate(map(_BRACKET_STEPS.__getitem__, _BRACKETS.findall(_JSON_STRING.sub("", text))))
    return max(depths, default=0)


def read_json_file(path, from_json, error_type, missing_problem):
    """from_json(the file's parsed JSON). Every problem raises error_type(path, problem);
    missing_problem() says what a missing file is (called only then)."""
    try:
        text = read_bounded_text(path, MAX_JSON_FILE_BYTES)
    except FileNotFoundError:
        raise error_type(path, missing_problem()) from None
    except OSError as error:
        raise error_type(path, f"cannot read: {error.strerror}") from None
    except UnicodeDecodeError:
        raise error_type(path, "not a text file (invalid UTF-8)") from None
    except Invalid as problem:
        raise error_type(path, problem) from None
    try:
        return from_json(parse_json(text))
    except Invalid as problem:
        raise error_type(path, problem) from None


def read_bounded_text(path, max_bytes):
    """The UTF-8 text of a file of at most max_bytes; Invalid for a larger one: a regular file is
    refused by its size before it is read, anything else once it gives more than max_bytes."""
    with open(path, "rb") as file:
        status = os.fstat(file.fileno())
        regular = stat.S_ISREG(status.st_mode)
        data = file.read(max_bytes + 1) if status.st_size <= max_bytes or not regular else b""
    if regular and status.st_size > max_bytes:
        raise Invalid(f"too large: {status.st_size:,} bytes, more than the {max_bytes:,} read at most")
    if len(data) > max_bytes:
        raise Invalid(f"too large: more than the {max_bytes:,} bytes read at most")
    return data.decode("utf-8")


def write_json_file(path, data, from_json, error_type):
    """Write data to path if from_json accepts it (else error_type naming path), through a
    temporary file renamed over path, so no partial file is ever left there."""
    text = json.dumps(data, indent=1) + "\n"
    try:
        from_json(json.loads(text))   # a field's own problem first: `lines[1]...: must be finite, got nan`
        parse_json(text)              # then anything else a reader refuses
    except Invalid as problem:
        raise error_type(path, problem) from None
    try:
        replace_atomically(path, text, mode=0o644)  # readable by the site's users
    except OSError as error:
        raise error_type(path, f"cannot write: {error.strerror}") from None


# ---- checks for validators; `where` is the path of the enclosing object, e.g. "lines[0]." ----

def check_format(data, format_name, newest_version, kind, version_kind):
    """The object's format and version: kind names the file type ("cause-model file") in
    `not an ioassess ...`, version_kind ("model file") in `... version N is newer ...`."""
    if not isinstance(data, dict):
        raise Invalid(f"not an ioassess {kind} (a JSON {json_type(data)}, not an object)")
    if data.get("format") != format_name:
        raise Invalid(f"not an ioassess {kind} (format is {json.dumps(data.get('format'))}, "
                      f"expected \"{format_name}\")")
    version = data.get("version")
    if type(version) is not int or version < 1:
        raise Invalid(f"version: must be a whole number >= 1, got {json.dumps(version)}")
    if version > newest_version:
        raise Invalid(f"{version_kind} version {version} is newer than this ioassess supports ({newest_version})")
    return version


def check_keys(obj, where, expected):
    missing = [key for key in expected if key not in obj]
    if missing:
        raise Invalid(f"{where}{missing[0]}: missing")
    unknown = sorted(set(obj) - set(expected))
    if unknown:
        raise Invalid(f"{where}{unknown[0]}: unknown field")


def typed(obj, where, field, expected_type):
    if field not in obj:
        raise Invalid(f"{where}{field}: missing")
    value = obj[field]
    if not isinstance(value, expected_type):
        raise Invalid(f"{where}{field}: must be {_EXPECTED[expected_type]}, got a JSON {json_type(value)}")
    return value


def choice(obj, where, field, choices):
    value = typed(obj, where, field, str)
    if value not in choices:
        raise Invalid(f"{where}{field}: unknown {field} {json.dumps(value)} (expected one of {', '.join(choices)})")
    return value


def number(obj, where, field, may_be_negative=False):
    value = obj[field]
    if type(value) not in (int, float):
        raise Invalid(f"{where}{field}: must be a number, got a JSON {json_type(value)}")
    try:
        finite = math.isfinite(value)
    except OverflowError:   # an integer too large for a float
        raise Invalid(f"{where}{field}: must be finite, got an integer of {len(str(abs(value)))} digits") from None
    if not finite:
        raise Invalid(f"{where}{field}: must be finite, got {value}")
    if value < 0 and not may_be_negative:
        raise Invalid(f"{where}{field}: must not be negative, got {value}")
    return float(value)


def whole_number(obj, where, field, minimum):
    if field not in obj:
        raise Invalid(f"{where}{field}: missing")
    value = obj[field]
    if type(value) is not int or value < minimum:
        raise Invalid(f"{where}{field}: must be a whole number >= {minimum}, got {json.dumps(value)}")
    return value


def iso_date(obj, where, field):
    value = typed(obj, where, field, str)
    if not ISO_DATE.fullmatch(value):
        raise Invalid(f"{where}{field}: must be an ISO-8601 date, got {json.dumps(value)}")
    return value


_JSON_TYPES = {str: "string", list: "array", dict: "object"}
_EXPECTED = {str: "a string", list: "an array", dict: "an object"}


def json_type(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return _JSON_TYPES.get(type(value), type(value).__name__)
