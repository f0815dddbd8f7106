"""A job's ops for other viewers (`ioassess export`, docs/export.md).

Perfetto: the JSON Object Format of the Trace Event Format (Chrome's trace viewer), which
Perfetto's UI (ui.perfetto.dev) and chrome://tracing open. One process track per process of the
job (its rank, pid and host in its name), one thread track per thread; each op known one by one
is a complete event ("ph": "X") on its thread (an asynchronous request an async "b"/"e" pair),
named by what it did and its class ("read: cached"), so that the viewers, which colour slices by
name, colour them by class; `cname` gives the trace viewer's own colour of the class. The I/O
known only in aggregate (Darshan counters, past the recorder's record cap) has no op to draw:
`otherData` says how many ops that is.
"""
import itertools
import json
import os

import numpy as np

from ioassess.files import write_atomically
from ioassess.inputs.job import DIRECTIONS, LAYERS, META, META_KINDS, Flag, op_column
from ioassess.models.plain import finite_or_none

from .classify import ROW_CLASSES, classify_ops

# The trace viewer's reserved colour names (catapult's color_scheme), one per class.
CLASS_CNAMES = {"memcpy": "good", "cached": "thread_state_running", "uncached": "thread_state_iowait",
                "slow": "terrible", "stall": "bad", "allocation": "thread_state_uninterruptible",
                "not modelled": "generic_work"}
META_CNAME = "thread_state_runnable"
LAYER_PREFIX = {"posix": "", "mpiio": "MPI-IO ", "stdio": "stdio "}
US_PER_S = 1e6


def op_names(job, classes):
    """Per op, its slice's name: what it did (a metadata call's kind, else its direction; the
    layer before it when not POSIX) and, for reads and writes, its class."""
    ops = job.ops
    kinds = op_column(ops, "meta_kind")
    names = []
    for layer, direction, kind, cls in zip(ops["layer"].tolist(), ops["direction"].tolist(), kinds.tolist(),
                                           classes.tolist()):
        what = LAYER_PREFIX[LAYERS[layer]]
        if direction == META:
            what += META_KINDS[kind] if kind >= 0 else "metadata"
        else:
            what += DIRECTIONS[direction]
            if direction < 2:
                what += ": " + ROW_CLASSES[cls]
        names.append(what)
    return names


def process_events(job):
    """The metadata events that name each process track and sort them by rank."""
    events = []
    for index, process in enumerate(job.processes):
        rank = f"rank {process.rank}, " if process.rank >= 0 else ""
        exe = f" ({os.path.basename(process.exe)})" if process.exe else ""
        host = f" on {process.hostname}" if process.hostname else ""
        events.append({"name": "process_name", "ph": "M", "pid": index, "tid": 0,
                       "args": {"name": f"{rank}pid {process.pid}{exe}{host}"}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": index, "tid": 0,
                       "args": {"sort_index": index}})
    return events


def thread_events(job):
    """The metadata events that name each thread track of a process."""
    ops = job.ops
    pairs = np.unique(np.stack([ops["process"].astype(np.int64), ops["tid"].astype(np.int64)], axis=1), axis=0)
    return [{"name": "thread_name", "ph": "M", "pid": int(process), "tid": int(tid),
             "args": {"name": f"thread {tid}" if tid else "ops"}} for process, tid in pairs.tolist()]


def op_events(job, per_op):
    """Per op of Job.ops, in its order, its slice: a complete event ("X"), or for an asynchronous
    request (flag ASYNC), which overlaps its thread's other ops, an async pair ("b" at its
    submission, "e" at its completion, the op's index as id) that the viewers draw on a track of
    its own beside the thread's."""
    ops = job.ops
    classes = per_op["class"]
    names = op_names(job, classes)
    flags = op_column(ops, "flags")
    files = [f.name for f in job.files]
    for i, name in enumerate(names):
        direction, cls = int(ops["direction"][i]), ROW_CLASSES[classes[i]]
        args = {"file": files[ops["file"][i]], "offset": int(ops["offset"][i]), "bytes": int(ops["size"][i]),
                "result": int(ops["result"][i])}
        if direction < 2:
            args["class"] = cls
            args["lost_s"] = finite_or_none(per_op["lost_s"][i])
        set_flags = [flag.name.lower() for flag in Flag if flags[i] & flag]
        if set_flags:
            args["flags"] = set_flags
        event = {"name": name, "cat": LAYERS[ops["layer"][i]], "pid": int(ops["process"][i]),
                 "tid": int(ops["tid"][i]), "ts": float(ops["start_s"][i]) * US_PER_S,
                 "cname": META_CNAME if direction == META else CLASS_CNAMES.get(cls, "generic_work"), "args": args}
        duration = float(ops["duration_s"][i]) * US_PER_S
        if flags[i] & Flag.ASYNC:
            yield {**event, "ph": "b", "id": i}
            yield {**event, "ph": "e", "id": i, "ts": event["ts"] + duration, "args": {}}
        else:
            yield {**event, "ph": "X", "dur": duration}


def other_data(job, model_name):
    """What the viewers show beside the tracks: the job, the model, and the ops not drawn."""
    return {"job_id": job.job_id, "exe": job.exe, "start_epoch_s": finite_or_none(job.start_epoch_s),
            "model": model_name,
            "ops": len(job.ops["start_s"]),
            "ops_in_aggregate_only": int(job.totals["ops"].sum()),
            "time_unit": "ts and dur in microseconds since the job's start"}


# The Parquet table's columns: one row per op of Job.ops, in its order (docs/export.md).
PARQUET_COLUMNS = ("process", "rank", "pid", "hostname", "tid", "file", "layer", "direction", "kind", "offset",
                   "size", "result", "start_s", "duration_s", "class", "cached_typical_s", "lost_s", "flags")


def op_table(job, per_op):
    """The ops as columns for a table (PARQUET_COLUMNS): names as text, times in seconds since
    the job's start, the class and time lost as the report has them."""
    ops = job.ops
    processes, files = job.processes, [f.name for f in job.files]
    kinds = op_column(ops, "meta_kind")
    flags = op_column(ops, "flags")
    flag_names = {value: ",".join(flag.name.lower() for flag in Flag if value & flag)
                  for value in np.unique(flags).tolist()}
    return {"process": ops["process"], "rank": np.array([processes[p].rank for p in ops["process"]], np.int64),
            "pid": np.array([processes[p].pid for p in ops["process"]], np.int64),
            "hostname": [processes[p].hostname for p in ops["process"].tolist()],
            "tid": ops["tid"], "file": [files[f] for f in ops["file"].tolist()],
            "layer": [LAYERS[v] for v in ops["layer"].tolist()],
            "direction": [DIRECTIONS[v] for v in ops["direction"].tolist()],
            "kind": [META_KINDS[k] if k >= 0 else None for k in kinds.tolist()],
            "offset": ops["offset"], "size": ops["size"], "result": ops["result"], "start_s": ops["start_s"],
            "duration_s": ops["duration_s"], "class": [ROW_CLASSES[c] for c in per_op["class"].tolist()],
            "cached_typical_s": per_op["cached_typical_s"], "lost_s": per_op["lost_s"],
            "flags": [flag_names[v] for v in flags.tolist()]}


def write_parquet(path, job, model, mode=0o600, per_file=None):
    """The job's ops as a Parquet file at path (written whole or not at all): one row per op,
    PARQUET_COLUMNS, classed under model, or per file system (per_file: classify_ops'). Needs
    pyarrow."""
    import pyarrow
    import pyarrow.parquet
    table = pyarrow.table(op_table(job, classify_ops(job, model, per_file)))
    write_atomically(path, lambda out: pyarrow.parquet.write_table(table, out.buffer), mode)
    return table.num_rows


def write_perfetto(path, job, model, model_name, mode=0o600, per_file=None):
    """The job's ops as a Trace Event Format file at path (written whole or not at all), classed
    under model, or per file system (per_file: classify_ops')."""
    per_op = classify_ops(job, model, per_file)

    def write(out):
        out.write('{"displayTimeUnit": "ns", "otherData": ')
        out.write(json.dumps(other_data(job, model_name), allow_nan=False))
        out.write(', "traceEvents": [\n')
        first = True
        for event in itertools.chain(process_events(job), thread_events(job), op_events(job, per_op)):
            out.write(("" if first else ",\n") + json.dumps(event, allow_nan=False))
            first = False
        out.write("\n]}\n")
    write_atomically(path, write, mode)
    return len(job.ops["start_s"])

