"""Damaged, absurd, forged, planted and very many inputs. The traces are recorded here by real
programs under the real recorder, then damaged (by a seeded fuzzer and by hand), made sparse
and huge, multiplied, or handed to another user; the Darshan logs are PyDarshan's shipped ones,
damaged. Each bad input must be refused with one line naming the file and the problem, never a
traceback, in bounded time and memory, and the rest of the job must still be reported."""
import json
import os
import pathlib
import random
import subprocess
import sys

import numpy as np
import pytest

from ioassess.inputs import traceformat as tf
from ioassess.inputs.load import load_job
from ioassess.inputs.trace import read_trace_file
from ioassess.jsonfile import MAX_JSON_DEPTH
from ioassess.models import modelfile
from recorder_helpers import clean_env, run_measured, shipped_darshan_logs
from test_modelfile import set_in

SEED = 20261123
TRACE_MUTATIONS = 500
DARSHAN_MUTATIONS = 100
# The fuzz loop's child: address space beyond what it has after its imports, time per input.
MEMORY_HEADROOM_BYTES = 1 << 30
SECONDS_PER_INPUT = 20
# Darshan logs small enough to assess quickly, to mutate.
DARSHAN_SEED_BYTES = 20_000
BOGUS_FILES = 100_000
PEAK_RSS_LIMIT_KB = 500 * 1024
TB = 1 << 40

# The program whose traces are mutated: a shell, dd and two cats (several processes, file
# names, clock pairs); run once as rank 1 on the TSC with a record cap small enough for a summary table,
# once on the monotonic clock.
PROGRAM = "dd if=/dev/zero of=data bs=4k count=40 2>/dev/null && cat data >/dev/null && cat data | cat >/dev/null"
RECORDINGS = {"tsc-capped": {"IOASSESS_CLOCK": "tsc", "IOASSESS_MAX_RECORDS": "12", "IOASSESS_RANK": "1"},
              "monotonic": {"IOASSESS_CLOCK": "monotonic"}}


def record(recorder_lib, trace_dir, work, env):
    os.makedirs(work, exist_ok=True)
    full_env = clean_env({"LD_PRELOAD": recorder_lib, "IOASSESS_TRACE_DIR": str(trace_dir), **env})
    result = subprocess.run(["sh", "-c", PROGRAM], cwd=work, env=full_env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return sorted(str(p) for p in pathlib.Path(trace_dir).glob("*.iot"))


@pytest.fixture(scope="module")
def recorded(recorder_lib, tmp_path_factory):
    """{recording: its trace files}, recorded once for the module."""
    root = tmp_path_factory.mktemp("recorded")
    return {name: record(recorder_lib, root / name, root / f"{name}-work", env) for name, env in RECORDINGS.items()}


def header_of(path):
    with open(path, "rb") as f:
        return np.frombuffer(f.read(tf.HEADER_DTYPE.itemsize), tf.HEADER_DTYPE)[0]


# ---- A: the fuzzer, in a child process with limited address space and time per input ----

FUZZ_CHILD = r'''
import json, os, random, resource, signal, sys, traceback
from ioassess.inputs import traceformat as tf
from ioassess.inputs.load import LoadError
from ioassess.models.modelfile import DEFAULT_MODEL
from ioassess.report import make_report
from ioassess.show import format_text, summarise
from ioassess.inputs.trace import TraceFileError, read_trace_dir

job = json.loads(sys.argv[1])
vm_bytes = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (vm_bytes + job["headroom"],) * 2)
rng = random.Random(job["seed"])
EXTREMES = (0, 1, 0x7F, 0xFF, 2**31 - 1, 2**31, 2**32 - 1, 2**53, 2**62, 2**63 - 1, 2**63, 2**64 - 1)
SLOT_DTYPES = {tf.SlotType.OP: tf.OP_RECORD_DTYPE, tf.SlotType.FILE: tf.FILE_RECORD_DTYPE,
               tf.SlotType.NAME_PART: tf.NAME_PART_DTYPE, tf.SlotType.CLOCK: tf.CLOCK_RECORD_DTYPE,
               tf.SlotType.PAGECACHE: tf.PAGECACHE_RECORD_DTYPE}


class OutOfTime(Exception):
    pass


def out_of_time(signum, frame):
    raise OutOfTime


def set_field(data, at, dtype):
    name = rng.choice(dtype.names)
    field, offset = dtype.fields[name][:2]
    size = field.itemsize
    value = rng.choice(EXTREMES + (rng.getrandbits(64),))
    if field.kind == "S" or field.subdtype:
        raw = os.urandom(size)
    else:
        raw = (value % (1 << 8 * size)).to_bytes(size, "little")
    data[at + offset:at + offset + size] = raw
    return f"{name} at {at} = {raw.hex()}"


def mutate_trace(data, number):
    """The damaged bytes, how they were damaged, and the size to give the file (sparse)."""
    data = bytearray(data)
    if number % 50 == 0:
        return data, "sparse 1 TB", (1 << 40) + tf.HEADER_BYTES
    kind = rng.choice(["header", "header", "slot", "slot", "summary", "bytes", "truncate", "copy"])
    slots = [at for at in range(tf.HEADER_BYTES, len(data), tf.SLOT_BYTES) if data[at] in SLOT_DTYPES]
    summary_offset = int.from_bytes(data[128:136], "little")
    if kind == "slot" and slots:
        at = rng.choice(slots)
        return data, set_field(data, at, SLOT_DTYPES[data[at]]), None
    if kind == "summary" and summary_offset:
        at = summary_offset + tf.SUMMARY_ENTRY_DTYPE.itemsize * rng.randrange(8)
        return data, set_field(data, at, tf.SUMMARY_ENTRY_DTYPE), None
    if kind == "bytes":
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return data, "random bytes", None
    if kind == "truncate":
        size = rng.choice([rng.randrange(len(data)), rng.randrange(len(data) // tf.PAGE_BYTES + 1) * tf.PAGE_BYTES])
        return data[:size], "truncated", None
    if kind == "copy" and len(slots) > 1:
        source, target = rng.sample(slots, 2)
        data[target:target + tf.SLOT_BYTES] = data[source:source + tf.SLOT_BYTES]
        return data, "slot copied", None
    return data, set_field(data, 0, tf.HEADER_DTYPE), None


def mutate_darshan(data):
    data = bytearray(data)
    kind = rng.choice(["bytes", "word", "truncate"])
    if kind == "truncate":
        return data[:rng.randrange(len(data))], "truncated"
    if kind == "word":
        at = rng.randrange(len(data) - 8)
        data[at:at + 8] = (rng.choice(EXTREMES) % (1 << 64)).to_bytes(8, "little")
        return data, f"word at {at}"
    for _ in range(rng.randint(1, 16)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return data, "random bytes"


def write(path, data, size=None):
    if os.path.exists(path):
        os.unlink(path)
    with open(path, "wb") as f:
        f.write(data)
        if size:
            f.truncate(size)


results = {"reports": 0, "refused": 0, "failures": [], "timeouts": []}


def fail(what, problem):
    results["failures"].append(f"{what}: {problem}")


def check(what, inputs, expect_report, mutated):
    """make_report and `show`'s summary on the inputs; a refused input must be named in one line."""
    signal.alarm(job["seconds"])
    try:
        try:
            assessment = make_report(inputs, DEFAULT_MODEL, job["html"], job["json"])
        except LoadError as error:
            if expect_report or "\n" in str(error) or not str(error).startswith(f"{mutated}: "):
                fail(what, f"LoadError {error}")
            results["refused"] += 1
        else:
            results["reports"] += 1
            paths = [i["path"] for i in assessment["job"]["inputs"]]
            named = [note for note in assessment["job"]["notes"] if note.startswith(f"{mutated}: ")]
            if mutated not in paths:
                results["refused"] += 1
                if len(named) != 1 or "\n" in named[0]:
                    fail(what, f"neither read nor named in one note: {assessment['job']['notes']}")
            if expect_report and inputs[0] not in paths:
                fail(what, f"the good trace was not reported: {paths}")
        if mutated.endswith(".iot"):
            try:
                format_text(summarise(read_trace_dir(inputs)))
            except TraceFileError:
                pass
    except OutOfTime:
        results["timeouts"].append(what)
    except BaseException:
        fail(what, traceback.format_exc())
    finally:
        signal.alarm(0)


signal.signal(signal.SIGALRM, out_of_time)
mutated_trace = os.path.join(job["dir"], "mutated.iot")
for number in range(job["trace_mutations"]):
    good, victim = rng.choice(job["pairs"])
    with open(victim, "rb") as f:
        data, how, size = mutate_trace(f.read(), number)
    write(mutated_trace, data, size)
    check(f"trace {number} ({os.path.basename(victim)}: {how})", [good, mutated_trace], True, mutated_trace)
mutated_log = os.path.join(job["dir"], "mutated.darshan")
for number in range(job["darshan_mutations"]):
    log = rng.choice(job["logs"])
    with open(log, "rb") as f:
        data, how = mutate_darshan(f.read())
    write(mutated_log, data)
    check(f"darshan {number} ({os.path.basename(log)}: {how})", [mutated_log], False, mutated_log)
# VmHWM: this program's own peak; getrusage's ru_maxrss would count the test's process (its
# size when it forked this one, 788 MB late in a full run)
with open("/proc/self/status") as status:
    results["max_rss_kb"] = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(json.dumps(results))
'''


@pytest.mark.slow
def test_fuzzed_traces_and_darshan_logs_are_read_or_refused_in_one_line(recorded, tmp_path):
    pairs = []
    for traces in recorded.values():
        good = min(traces, key=os.path.getsize)   # a small companion keeps the assessment fast
        pairs += [(good, victim) for victim in traces if os.path.getsize(victim) > tf.HEADER_BYTES]
    logs = [log for log in shipped_darshan_logs() if os.path.getsize(log) < DARSHAN_SEED_BYTES]
    job = {"seed": SEED, "pairs": pairs, "logs": logs, "dir": str(tmp_path), "html": str(tmp_path / "r.html"),
           "json": str(tmp_path / "r.json"), "trace_mutations": TRACE_MUTATIONS,
           "darshan_mutations": DARSHAN_MUTATIONS, "headroom": MEMORY_HEADROOM_BYTES, "seconds": SECONDS_PER_INPUT}
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    child = subprocess.run([sys.executable, "-c", FUZZ_CHILD, json.dumps(job)], cwd="/", env=env,
                           capture_output=True, text=True,
                           timeout=SECONDS_PER_INPUT * (TRACE_MUTATIONS + DARSHAN_MUTATIONS))
    assert child.returncode == 0, child.stderr[-5000:]
    results = json.loads(child.stdout.splitlines()[-1])
    assert results["failures"] == [] and results["timeouts"] == []
    assert results["reports"] >= TRACE_MUTATIONS   # every trace mutation still reported the good trace
    assert results["refused"] >= (TRACE_MUTATIONS + DARSHAN_MUTATIONS) // 5   # the damage is seen
    assert results["max_rss_kb"] < PEAK_RSS_LIMIT_KB


# ---- A: hostile model files, made by a seeded fuzzer, through load, listing and the report ----

HOSTILE_MODELS = 50
MODEL_SECONDS = 60
MODEL_PEAK_RSS_KIB = 1 << 20
HUGE_MODEL_BYTES = 200_000_000
# Values put in place of a model's fields: every JSON type, NaN, infinities, huge, tiny and
# negative numbers, strings with control characters, right-to-left overrides and NULs.
ODD_VALUES = (None, True, "", "x", [], {}, [1, "a"], {"a": None}, 0, -1, -1e-11, 1e308, -1e308, 5e-324, 10 ** 400,
              float("nan"), float("inf"), float("-inf"), 4096.0, 2 ** 63, "\x1b[2J\x1b]0;owned\x07", "\u202egol.dab",
              "a\x00b", "line\r\nforged", "\ud83d\ude00")
# Texts that are not a model file, or not JSON, or not Unicode: (name, bytes).
ODD_TEXTS = (("empty", b""), ("a byte order mark", b"\xef\xbb\xbf{}"), ("invalid UTF-8", b'{"name": "\xff\xfe"}'),
             ("a raw control character", b'{"format": "ioassess-cause-model\x01"}'),
             ("an unpaired surrogate", b'{"format": "\\udc00"}'), ("100,000 brackets", b"[" * 100_000),
             ("an integer of 5000 digits", b'{"version": ' + b"9" * 5000 + b"}"), ("NaN alone", b"NaN"),
             ("1e999", b'{"version": 1e999}'), ("just over 1 MiB", b"[" + b"0," * (1 << 19) + b"0]"))


def fields_of(value, path=()):
    """The paths to every value inside a parsed JSON value, containers included."""
    paths = [path]
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        paths += fields_of(item, path + (key,))
    return paths


def value_at(data, path):
    for key in path:
        data = data[key]
    return data


def with_value(data, path, value):
    data = json.loads(json.dumps(data))
    set_in(path, value)(data)
    return data


def nested_object(depth):
    value = {}
    for _ in range(depth - 1):
        value = {"x": value}
    return value


def hostile_model_files(directory, rng):
    """HOSTILE_MODELS model files in directory, from the shipped default model: odd values in
    odd places, nesting at and past the limit, odd texts, one of HUGE_MODEL_BYTES; [(path, how)]."""
    model = json.loads(pathlib.Path(modelfile.PRETRAINED_DIR, f"{modelfile.DEFAULT_MODEL}.json").read_text())
    paths = [path for path in fields_of(model) if path]
    made = []

    def write(how, data):
        path = directory / f"hostile-{len(made):02d}.json"
        path.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode("utf-8", "surrogatepass"))
        made.append((str(path), how))

    for name, text in ODD_TEXTS:
        write(name, text)
    for depth in (MAX_JSON_DEPTH - 3, MAX_JSON_DEPTH - 2, 400):   # the generator is 3 deep: 32 levels, 33, 400
        write(f"provenance.generator nested {depth} deep", with_value(model, ("provenance", "generator"),
                                                                      nested_object(depth)))
    write(f"{HUGE_MODEL_BYTES:,} bytes", b"")
    with open(made[-1][0], "w") as f:
        f.write(json.dumps(model)[:-1] + ', "padding": [0')
        while f.tell() < HUGE_MODEL_BYTES:
            f.write(", 0" * (1 << 16))
        f.write("]}")
    while len(made) < HOSTILE_MODELS:
        value = rng.choice(ODD_VALUES)
        # Every other one in a field of the value's own type: more of them are models.
        same_type = [path for path in paths if type(value_at(model, path)) is type(value)]
        path = rng.choice(same_type if len(made) % 2 and same_type else paths)
        write(f"{'.'.join(map(str, path))} = {value!r}", with_value(model, path, value))
    return made


HOSTILE_MODELS_CHILD = r'''
import json, signal, sys, traceback
from ioassess.models.modelfile import ModelFileError, PRETRAINED_DIR, find_models, load_model
from ioassess.report import make_report

job = json.loads(sys.argv[1])
results = {"loaded": 0, "errors": [], "failures": [], "timeouts": []}


class OutOfTime(Exception):
    pass


def out_of_time(signum, frame):
    raise OutOfTime


def one_line_error(path, error):
    return str(error).startswith(f"{path}: ") and "\n" not in str(error)


def check(what, path):
    """The model loads, and a report is made with it; or it is refused with one line naming it,
    by load_model and by make_report."""
    signal.alarm(job["seconds"])
    try:
        try:
            load_model(path)
        except ModelFileError as error:
            results["errors"].append(str(error))
            if not one_line_error(path, error):
                results["failures"].append(f"{what}: {error}")
            try:
                make_report([job["log"]], path, job["html"], job["json"])
                results["failures"].append(f"{what}: refused by load_model, taken by make_report")
            except ModelFileError as again:
                if str(again) != str(error):
                    results["failures"].append(f"{what}: {again} from make_report, {error} from load_model")
        else:
            results["loaded"] += 1
            make_report([job["log"]], path, job["html"], job["json"])
    except OutOfTime:
        results["timeouts"].append(what)
    except BaseException:
        results["failures"].append(f"{what}: {traceback.format_exc()}")
    finally:
        signal.alarm(0)


signal.signal(signal.SIGALRM, out_of_time)
for path, how in job["models"]:
    check(f"{path} ({how})", path)
# All of them in the user's model directory: listed each with a model or a problem, and the
# report chooses among the good ones.
dirs = [("user", job["dir"]), ("shipped", PRETRAINED_DIR)]
found = {f.path: f for f in find_models(dirs)}
results["listed"] = sum(1 for path, _ in job["models"] if path in found and (found[path].model is None) ==
                        bool(found[path].problem))
signal.alarm(job["seconds"])
try:
    make_report([job["log"]], None, job["html"], job["json"], model_dirs=dirs)
    results["chosen"] = json.load(open(job["json"]))["model"]["source"]
except BaseException:
    results["failures"].append(f"the report choosing from {job['dir']}: {traceback.format_exc()}")
finally:
    signal.alarm(0)
print(json.dumps(results))
'''


def test_hostile_model_files_are_used_or_refused_in_one_line_in_bounded_time_and_memory(tmp_path):
    """50 model files (sizes, nesting, JSON types, NaN, huge numbers, control characters): each
    is a model the report uses or one line naming the file and its problem, from load_model,
    the report and `ioassess models` (exit status 2); no traceback, none takes 60 s, and the
    process holding them all peaks under 1 GiB. Among them in the user's directory, a report
    still chooses a model and is written."""
    directory = tmp_path / "models"
    directory.mkdir()
    made = hostile_model_files(directory, random.Random(SEED))
    log = next(path for path in shipped_darshan_logs() if path.endswith("/sample.darshan"))
    job = {"models": made, "dir": str(directory), "log": log, "html": str(tmp_path / "r.html"),
           "json": str(tmp_path / "r.json"), "seconds": MODEL_SECONDS}
    env = clean_env({"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
    child, peak_kib = run_measured([sys.executable, "-c", HOSTILE_MODELS_CHILD, json.dumps(job)], env,
                                   timeout=MODEL_SECONDS * (HOSTILE_MODELS + 1))
    assert child.returncode == 0, child.stderr[-5000:]
    results = json.loads(child.stdout.splitlines()[-1])
    assert results["failures"] == [] and results["timeouts"] == []
    assert results["listed"] == HOSTILE_MODELS
    assert len(results["errors"]) >= HOSTILE_MODELS // 2 and results["loaded"] >= 1
    assert "chosen" in results
    assert peak_kib < MODEL_PEAK_RSS_KIB, f"peak {peak_kib // 1024} MiB"
    listed, _ = run_measured([sys.executable, "-m", "ioassess", "models", *(path for path, _ in made)], env)
    assert listed.returncode == 2 and "Traceback" not in listed.stderr
    assert sorted(listed.stderr.splitlines()) == sorted(f"ioassess: {error}" for error in results["errors"])


# ---- A: each kind of absurd trace, through the command line ----

def forge_header(path, target, **fields):
    data = bytearray(pathlib.Path(path).read_bytes())
    header = np.frombuffer(bytes(data[:tf.HEADER_DTYPE.itemsize]), tf.HEADER_DTYPE).copy()
    for name, value in fields.items():
        header[name] = value
    data[:tf.HEADER_DTYPE.itemsize] = header.tobytes()
    pathlib.Path(target).write_bytes(bytes(data))
    return target


def op_slots(path):
    data = pathlib.Path(path).read_bytes()
    return sum(data[at] == tf.SlotType.OP for at in range(tf.HEADER_BYTES, len(data), tf.SLOT_BYTES))


def with_most_ops(traces):
    """The trace of the program that did the I/O (every trace is at least one chunk long: its
    size does not tell)."""
    return max(traces, key=op_slots)


def first_op_slot(data):
    return next(at for at in range(tf.HEADER_BYTES, len(data), tf.SLOT_BYTES) if data[at] == tf.SlotType.OP)


def op_before_start(path, target):
    data = bytearray(pathlib.Path(path).read_bytes())
    at = first_op_slot(data) + tf.OP_RECORD_DTYPE.fields["start_ticks"][1]
    data[at:at + 8] = (int(header_of(path)["start_ticks"]) - 10**9).to_bytes(8, "little")
    pathlib.Path(target).write_bytes(bytes(data))
    return target


def sparse_terabyte(path, target):
    pathlib.Path(target).write_bytes(pathlib.Path(path).read_bytes())
    os.truncate(target, TB + tf.HEADER_BYTES)
    return target


def over_the_record_cap(path, target):
    return forge_header(path, target, record_cap=1)


ABSURD = {
    "op before start": (op_before_start, "corrupt: 1 op records start before the process started"),
    "start after 2262": (lambda p, t: forge_header(p, t, start_realtime_ns=2**63 + 5),
                         f"corrupt: starts at {2**63 + 5} ns since the epoch, after the year 2116"),
    "summary table of 2^40 entries": (
        lambda p, t: forge_header(p, t, summary_offset=tf.HEADER_BYTES, summary_entries=1 << 40),
        f"corrupt: {1 << 40} summary entries, more than the 65536 this reader takes (the recorder writes 4096)"),
    "more ops than the cap": (over_the_record_cap, "corrupt: more op records than its record cap of 1"),
}


def test_absurd_traces_are_refused_in_one_line_each_and_the_rest_is_reported(ioassess, recorded, tmp_path):
    traces = recorded["monotonic"]
    victim = with_most_ops(traces)
    forged = {name: make(victim, str(tmp_path / f"{i}.iot")) for i, (name, (make, _)) in enumerate(ABSURD.items())}
    sparse = sparse_terabyte(victim, str(tmp_path / "sparse.iot"))

    shown = ioassess("show", *traces, *forged.values(), sparse, "--json")
    assert shown.returncode == 2 and "Traceback" not in shown.stderr
    assert shown.stderr.splitlines() == [f"ioassess: {forged[name]}: {problem}" for name, (_, problem) in
                                         ABSURD.items()]
    summary = json.loads(shown.stdout)
    assert summary["process_count"] == len(traces) + 1   # the sparse one holds the victim's data: it is read
    assert sorted(p["path"] for p in summary["processes"]) == sorted(traces + [sparse])

    report = ioassess("report", *traces, *forged.values(), "-o", tmp_path / "r.html", "--json", tmp_path / "r.json")
    assert report.returncode == 0, report.stderr
    notes = json.loads((tmp_path / "r.json").read_text())["job"]["notes"]
    first, *next_two = [f"{forged[name]}: {problem}" for name, (_, problem) in list(ABSURD.items())[:3]]
    assert notes[0] == f"{first}; and {len(ABSURD) - 1} more trace files that are damaged, among them " + \
        "; ".join(next_two)

    alone = ioassess("report", forged["start after 2262"], "-o", tmp_path / "alone.html")
    assert alone.returncode == 2
    assert alone.stderr.splitlines() == [f"ioassess: {forged['start after 2262']}: {ABSURD['start after 2262'][1]}"]
    assert not (tmp_path / "alone.html").exists()


def test_a_sparse_terabyte_trace_costs_the_time_and_memory_of_what_it_stores(recorded, tmp_path):
    victim = with_most_ops(recorded["monotonic"])
    sparse = sparse_terabyte(victim, str(tmp_path / "sparse.iot"))
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
    child = subprocess.run(
        [sys.executable, "-c", limit + "import sys; from ioassess.inputs.load import load_job; "
                                       "print(load_job(sys.argv[1:]).processes[0].pid)", sparse],
        cwd="/", env=dict(os.environ, OPENBLAS_NUM_THREADS="1"), capture_output=True, text=True, timeout=30)
    assert child.returncode == 0, child.stderr
    assert int(child.stdout) == int(header_of(victim)["pid"])


def test_a_damaged_darshan_log_beside_good_traces_is_a_note(ioassess, recorded, tmp_path):
    log = tmp_path / "damaged.darshan"
    shipped = next(p for p in shipped_darshan_logs() if os.path.basename(p) == "sample-dxt-simple.darshan")
    log.write_bytes(pathlib.Path(shipped).read_bytes()[:100])
    traces = recorded["monotonic"]
    result = ioassess("report", *traces, log, "-o", tmp_path / "r.html", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    job = json.loads((tmp_path / "r.json").read_text())["job"]
    assert job["processes_recorded"] == len(traces)
    (note,) = [note for note in job["notes"] if str(log) in note]
    assert note.startswith(f"not used: {log}: ") and "\n" not in note
    alone = ioassess("report", log, "-o", tmp_path / "alone.html")
    assert alone.returncode == 2 and len(alone.stderr.splitlines()) == 1
    assert alone.stderr.startswith(f"ioassess: {log}: ")


def set_sample_field(data, at, name, value):
    offset = tf.PAGECACHE_RECORD_DTYPE.fields[name][1]
    size = tf.PAGECACHE_RECORD_DTYPE[name].itemsize
    data[at + offset:at + offset + size] = int(value).to_bytes(size, "little")


def test_nonsense_page_cache_samples_are_ignored_and_counted(ioassess, recorded, tmp_path):
    victim = with_most_ops(recorded["monotonic"])
    data = bytearray(pathlib.Path(victim).read_bytes())
    slots = range(tf.HEADER_BYTES, len(data), tf.SLOT_BYTES)
    samples = [at for at in slots if data[at] == tf.SlotType.PAGECACHE]
    assert len(samples) >= 5, "the recorded program's first reads and writes are sampled"
    before = read_trace_file(victim).processes[0]
    assert before.pagecache_samples == len(samples) and before.pagecache_ignored == 0

    record = np.frombuffer(bytes(data[samples[0]:samples[0] + tf.SLOT_BYTES]), tf.PAGECACHE_RECORD_DTYPE)[0]
    set_sample_field(data, samples[0], "cached", int(record["head_pages"]) + int(record["tail_pages"]) + 1)
    set_sample_field(data, samples[1], "op_start_ticks", 12345)            # no op starts then
    empty = next(at for at in reversed(slots) if data[at] == tf.SlotType.EMPTY)
    data[empty:empty + tf.SLOT_BYTES] = data[samples[2]:samples[2] + tf.SLOT_BYTES]   # two samples, one op
    set_sample_field(data, samples[3], "head_pages", 0xFFFF)
    set_sample_field(data, samples[4], "head_page", 1 << 60)              # not the op's offset
    forged = tmp_path / "forged.iot"
    forged.write_bytes(bytes(data))

    after = read_trace_file(forged)
    (process,) = after.processes
    assert process.pagecache_ignored == 6 and process.pagecache_samples == len(samples) - 5
    assert np.count_nonzero(after.ops["pc_pages"] >= 0) == len(samples) - 5
    result = ioassess("report", forged, "-o", tmp_path / "r.html", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    notes = json.loads((tmp_path / "r.json").read_text())["job"]["notes"]
    assert any(note.startswith("6 page-cache samples were ignored") for note in notes), notes


# ---- B: very many bogus traces ----

PEAK_RSS_WRAPPER = r'''
import resource, subprocess, sys
resource.setrlimit(resource.RLIMIT_STACK, (256 << 20, 256 << 20))   # room for 100,000 arguments
status = subprocess.run(sys.argv[2:], cwd=sys.argv[1], capture_output=True, text=True)
print(status.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.stderr.write(status.stderr)
'''


def report_peak_rss(cwd, *args):
    """(exit status, peak RSS in KiB, stderr) of `ioassess report ARGS`, measured alone."""
    wrapper = subprocess.run([sys.executable, "-c", PEAK_RSS_WRAPPER, cwd, sys.executable, "-m", "ioassess",
                              "report", *map(str, args)], capture_output=True, text=True, timeout=300)
    status, peak_kb = map(int, wrapper.stdout.split())
    return status, peak_kb, wrapper.stderr


@pytest.mark.slow
def test_a_hundred_thousand_bogus_traces_cost_bounded_memory_and_notes(recorded, tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    good = recorded["monotonic"]
    for path in good:
        (traces / os.path.basename(path)).write_bytes(pathlib.Path(path).read_bytes())
    for i in range(BOGUS_FILES):
        (traces / f"{i:05x}.iot").write_bytes(b"not a trace at all" if i % 100 else tf.MAGIC + b"cut short")
    names = sorted(os.listdir(traces))

    for arguments in (names, [traces]):
        status, peak_kb, stderr = report_peak_rss(traces, *arguments, "-o", tmp_path / "r.html", "--json",
                                                  tmp_path / "r.json")
        assert status == 0, stderr
        assert peak_kb < PEAK_RSS_LIMIT_KB
        job = json.loads((tmp_path / "r.json").read_text())["job"]
        assert job["processes_recorded"] == len(good)
        too_short, bad_magic = job["notes"]   # in the order of their first files
        directory = "" if arguments is names else f"{traces}/"
        assert too_short == f"{directory}00000.iot: truncated: 17 bytes, the header alone needs 4096; and " \
            f"{BOGUS_FILES // 100 - 1:,} more trace files that are damaged, among them " \
            f"{directory}00064.iot: truncated: 17 bytes, the header alone needs 4096; " \
            f"{directory}000c8.iot: truncated: 17 bytes, the header alone needs 4096"
        assert bad_magic.startswith(f"{directory}00001.iot: not an ioassess trace (bad magic); and "
                                    f"{BOGUS_FILES - BOGUS_FILES // 100 - 1:,} more trace files that are not "
                                    f"ioassess traces, among them {directory}00002.iot: ")
        assert len(job["inputs"]) == (len(good) if arguments is names else 1)
        assert (tmp_path / "r.json").stat().st_size < 200_000


# ---- C: traces of another user ----

def planted(recorded, directory, owner, intruder):
    """The monotonic recording in directory, owned by owner, and the TSC one's largest trace
    (another run, another executable name in its header) owned by intruder."""
    directory.mkdir()
    for path in recorded["monotonic"]:
        copy = directory / os.path.basename(path)
        copy.write_bytes(pathlib.Path(path).read_bytes())
        os.chown(copy, owner, -1)
    intruder_trace = forge_header(with_most_ops(recorded["tsc-capped"]), directory / "z-planted.iot",
                                  exe=b"/home/attacker/evil", rank=0)
    os.chown(intruder_trace, intruder, -1)
    os.chmod(intruder_trace, 0o644)
    return str(intruder_trace)


def test_traces_of_another_user_are_refused(ioassess, recorded, searchable_tmp, job_user, installation_reachable):
    tmp_path = searchable_tmp
    victim_dir = tmp_path / "victim"
    plant = planted(recorded, victim_dir, job_user.pw_uid, 0)
    os.chown(victim_dir, job_user.pw_uid, -1)
    refused = f"{plant}: belongs to uid 0, not to uid {job_user.pw_uid} whose traces these are: refused"

    # as root, the owner of the directory given
    result = ioassess("report", victim_dir, "-o", tmp_path / "r.html", "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    job = json.loads((tmp_path / "r.json").read_text())["job"]
    assert job["notes"][0] == refused and job["exe"] != "/home/attacker/evil"
    assert job["processes_recorded"] == len(recorded["monotonic"])

    # as the victim, its own uid
    out = tmp_path / "out"
    out.mkdir()
    os.chown(out, job_user.pw_uid, -1)
    as_victim = subprocess.run([sys.executable, "-m", "ioassess", "report", victim_dir, "-o", out / "r.html",
                                "--json", out / "r.json"], cwd="/", user=job_user.pw_uid, group=job_user.pw_gid,
                               extra_groups=[], capture_output=True, text=True, timeout=120,
                               env=clean_env({"PATH": "/usr/bin:/bin"}))
    assert as_victim.returncode == 0, as_victim.stderr
    assert json.loads((out / "r.json").read_text())["job"]["notes"][0] == refused

    # load_job with the owner given, as the epilog gives the job's uid
    assert [p.pid for p in load_job([str(victim_dir)], owner_uid=0).processes] == [int(header_of(plant)["pid"])]

    # --owner, and directories of two users
    mine = tmp_path / "mine"
    planted(recorded, mine, 0, job_user.pw_uid)
    both = ioassess("report", victim_dir, mine, "-o", tmp_path / "both.html")
    assert both.returncode == 2 and len(both.stderr.splitlines()) == 1
    assert "the trace directories belong to different users" in both.stderr and "--owner" in both.stderr
    chosen = ioassess("report", victim_dir, mine, "--owner", job_user.pw_name, "-o", tmp_path / "c.html",
                      "--json", tmp_path / "c.json")
    assert chosen.returncode == 0, chosen.stderr
    job = json.loads((tmp_path / "c.json").read_text())["job"]
    assert job["processes_recorded"] == len(recorded["monotonic"]) + 1   # the victim's, and the one planted in mine
    assert f"; and {len(recorded['monotonic'])} more trace files that belong to another user, among them " \
        in job["notes"][0]


@pytest.mark.parametrize("planted", ["a link", "writable by others", "another user's"])
def test_a_template_cache_directory_someone_else_set_up_is_not_used(ioassess, tmp_path, job_user, planted):
    """The report's compiled template is kept in the user's own cache of the temporary directory
    (_jinja2-cache-UID); one that is not a directory this user owns and no one else can write
    (a link to another directory, a directory others can write, another user's directory, as
    another user could set up) is not used, and the report is still written, whole."""
    cache, elsewhere = tmp_path / f"_jinja2-cache-{os.getuid()}", tmp_path / "elsewhere"
    elsewhere.mkdir()
    if planted == "a link":
        cache.symlink_to(elsewhere)
        cache = elsewhere
    else:
        cache.mkdir()
        os.chmod(cache, 0o777 if planted == "writable by others" else 0o700)
        os.chown(cache, job_user.pw_uid if planted == "another user's" else -1, -1)
    log = next(path for path in shipped_darshan_logs() if path.endswith("/sample.darshan"))
    result = ioassess("report", log, "-o", tmp_path / "r.html", env={"TMPDIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "r.html").read_text().rstrip().endswith("</html>")
    assert list(cache.iterdir()) == []


def test_the_template_cache_of_the_users_own_is_used(ioassess, tmp_path):
    cache = tmp_path / f"_jinja2-cache-{os.getuid()}"
    log = next(path for path in shipped_darshan_logs() if path.endswith("/sample.darshan"))
    result = ioassess("report", log, "-o", tmp_path / "r.html", env={"TMPDIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert (cache.stat().st_mode & 0o777, cache.stat().st_uid) == (0o700, os.getuid())
    names = [path.name for path in cache.iterdir()]   # the report's template and the style sheet it includes
    assert len(names) == 2 and all(name.startswith("__jinja2_") for name in names), names


# ---- D: hostile probe stores ----

HOSTILE_STORE_SECONDS = 60
HOSTILE_STORE_PEAK_KIB = 1 << 20    # 1 GiB


def store_problem(assessment):
    """The probe store's problem in a job's assessment, or "no assessment"."""
    return json.loads(assessment.read_text())["file_system"]["problem"] if assessment.exists() else "no assessment"


@pytest.mark.slow
def test_hostile_probe_stores_are_refused_in_one_line_within_bounds(recorded, tmp_path):
    """24 stores as someone who can write the store could make them (tests/probe_stores.py),
    each through `probe report`, `report --probe-db` and `ioassess run` (its application exiting
    3), each measured alone (run_measured: getrusage): no traceback, none still running after
    60 s, no peak memory of 1 GiB; a store refused in one line naming it (exit status 2), the
    job's report made and naming the store with its problem, the application's status kept."""
    from probe_stores import HOSTILE
    env = clean_env({"OPENBLAS_NUM_THREADS": "1"})
    traces = os.path.dirname(recorded["monotonic"][0])
    failures, refused = [], 0
    for number, (name, make) in enumerate(HOSTILE.items()):
        db = make(tmp_path / f"{number}.sqlite")
        work = tmp_path / f"work{number}"
        work.mkdir()
        ran = {}
        for command, args, extra in (
                ("probe report", ["probe", "report", "--db", db, "-o", "p.html", "--json", "p.json"], {}),
                ("report", ["report", traces, "--probe-db", db, "-o", "r.html", "--json", "r.json"], {}),
                ("run", ["run", "--trace-dir", "t", "--", "sh", "-c", "exit 3"], {"IOASSESS_PROBE_DB": str(db)})):
            try:
                ran[command], peak_kib = run_measured([sys.executable, "-m", "ioassess", *args], {**env, **extra},
                                                      work, HOSTILE_STORE_SECONDS)
            except subprocess.TimeoutExpired:
                failures.append(f"{name}: {command}: still running after {HOSTILE_STORE_SECONDS} s")
                continue
            if "Traceback" in ran[command].stderr or peak_kib >= HOSTILE_STORE_PEAK_KIB:
                failures.append(f"{name}: {command}: {peak_kib} KiB, {ran[command].stderr}")
        probe = ran.get("probe report")
        refused += probe is not None and probe.returncode == 2
        if probe and (probe.returncode not in (0, 2) or probe.returncode == 2 and not (
                probe.stderr.startswith(f"ioassess: {db}: ") and probe.stderr.count("\n") == 1)):
            failures.append(f"{name}: probe report: {probe.returncode}, {probe.stderr}")
        for command, status, problem in (("report", 0, store_problem(work / "r.json")),
                                         ("run", 3, store_problem(work / "t" / "assessment.json"))):
            if command in ran and (ran[command].returncode != status or
                                   not (problem is None or problem.startswith(f"{db}: "))):
                failures.append(f"{name}: {command}: {ran[command].returncode}, {ran[command].stderr}, {problem}")
    assert failures == [], "\n".join(failures)
    assert refused >= 20   # the damage is seen
