"""A job's ops for other viewers (`ioassess export`, docs/export.md).

Perfetto: the JSON Object Format of the Trace Event Format (Chrome's trace viewer), which
Perfetto's UI (ui.perfetto.dev) and chrome://tracing open. One process track per process of the
job (its rank, pid and host in its name), one thread track per thread; each op known one by one
is a complete event ("ph": "X") on its thread (an asynchronous request an async "b"/"e" pair),
named by what it did and its class ("read: cached"), so that the viewers, which colour slices by
name, colour them by class; `cname` gives the trace viewer's own colour of the class. The I/O
known only in aggregate (Darshan counters, past the recorder's record cap) has no op to draw:
`otherData` says how many ops that is.

Both files are written chunk by chunk (report/passes.py): the ops are read twice, first for the
evidence their classification takes from all of them, then a chunk at a time to be classified
and written, so that a job of 10^8 ops is never in memory, only a chunk of it (docs/export.md).
"""
import itertools
import json
import os

import numpy as np

from ioassess.files import write_atomically
from ioassess.inputs.job import DIRECTIONS, LAYERS, META, META_KINDS, Flag, op_column, op_count
from ioassess.models.plain import finite_or_none

from .classify import ROW_CLASSES, classified_chunks

# The trace viewer's reserved colour names (catapult's color_scheme), one per class.
CLASS_CNAMES = {"memcpy": "good", "cached": "thread_state_running", "uncached": "thread_state_iowait",
                "slow": "terrible", "stall": "bad", "allocation": "thread_state_uninterruptible",
                "not modelled": "generic_work"}
META_CNAME = "thread_state_runnable"
LAYER_PREFIX = {"posix": "", "mpiio": "MPI-IO ", "stdio": "stdio "}
US_PER_S = 1e6
# Ops per chunk of an export, each a row group of the Parquet file: reading a trace's chunk holds
# about 400 bytes an op (its slots and their columns), its classes and table as much again, so a
# quarter of the assessment's chunk (passes.CHUNK_OPS) keeps a chunk within about 200 MiB, less
# than loading a big job's facts takes (docs/export.md, "Big jobs").
EXPORT_CHUNK_OPS = 1 << 18


def op_names(ops, classes):
    """Per op of a chunk, its slice's name: what it did (a metadata call's kind, else its
    direction; the layer before it when not POSIX) and, for reads and writes, its class."""
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


def threads_of(ops):
    """The (process, tid) pairs of a chunk's ops, as a set."""
    pairs = np.unique(np.stack([ops["process"].astype(np.int64), ops["tid"].astype(np.int64)], axis=1), axis=0)
    return set(map(tuple, pairs.tolist()))


def thread_events(threads):
    """The metadata events that name the thread tracks of (process, tid) pairs, in order."""
    return [{"name": "thread_name", "ph": "M", "pid": process, "tid": tid,
             "args": {"name": f"thread {tid}" if tid else "ops"}} for process, tid in sorted(threads)]


def chunk_events(chunks, files):
    """The events of the ops of classified chunks (passes.Chunk), in order: per chunk, the
    thread_name events of the threads first met in it, then its ops' slices (op_events). Only
    the threads named are held. files: the names of Job.files."""
    named = set()
    for chunk in chunks:
        threads = threads_of(chunk.ops) - named
        named |= threads
        yield from thread_events(threads)
        yield from op_events(chunk, files)


def op_events(chunk, files):
    """Per op of a classified chunk, in its order, its slice: a complete event ("X"), or for an
    asynchronous request (flag ASYNC), which overlaps its thread's other ops, an async pair ("b"
    at its submission, "e" at its completion, the op's index in Job.ops as id) that the viewers
    draw on a track of its own beside the thread's. files: the names of Job.files."""
    ops, per_op = chunk.ops, chunk.per_op
    classes = per_op["class"]
    names = op_names(ops, classes)
    flags = op_column(ops, "flags")
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
            yield {**event, "ph": "b", "id": chunk.first + i}
            yield {**event, "ph": "e", "id": chunk.first + i, "ts": event["ts"] + duration, "args": {}}
        else:
            yield {**event, "ph": "X", "dur": duration}


def other_data(job, model_name):
    """What the viewers show beside the tracks: the job, the model, and the ops not drawn."""
    return {"job_id": job.job_id, "exe": job.exe, "start_epoch_s": finite_or_none(job.start_epoch_s),
            "model": model_name,
            "ops": op_count(job),
            "ops_in_aggregate_only": int(job.totals["ops"].sum()),
            "time_unit": "ts and dur in microseconds since the job's start"}


# The Parquet table's columns: one row per op of Job.ops, in its order (docs/export.md).
PARQUET_COLUMNS = ("process", "rank", "pid", "hostname", "tid", "file", "layer", "direction", "kind", "offset",
                   "size", "result", "start_s", "duration_s", "class", "cached_typical_s", "lost_s", "flags")
# The text of the coded columns by code; a meta_kind of -1 (not a metadata call) is the last, null.
LAYER_TEXT, DIRECTION_TEXT = np.array(LAYERS, object), np.array(DIRECTIONS, object)
KIND_TEXT, CLASS_TEXT = np.array([*META_KINDS, None], object), np.array(ROW_CLASSES, object)


def job_lookups(job):
    """What op_table looks up by index: per process its rank, pid and host, per file its name."""
    processes = job.processes
    return {"rank": np.array([p.rank for p in processes], np.int64),
            "pid": np.array([p.pid for p in processes], np.int64),
            "hostname": np.array([p.hostname for p in processes], object),
            "file": np.array([f.name for f in job.files], object)}


def flag_text(flags):
    """Per op its flags' names, comma-separated ("" for none), as an array of text."""
    values, inverse = np.unique(flags, return_inverse=True)
    names = [",".join(flag.name.lower() for flag in Flag if value & flag) for value in values.tolist()]
    return np.array(names, object)[inverse.reshape(-1)]


def op_table(lookups, ops, per_op):
    """A chunk's ops as columns for a table (PARQUET_COLUMNS; numpy arrays, the text ones of
    Python objects: str, or None for null): names as text, times in seconds since the job's
    start, the class and time lost as the report has them. lookups: job_lookups'."""
    process = ops["process"]
    return {"process": process, "rank": lookups["rank"][process], "pid": lookups["pid"][process],
            "hostname": lookups["hostname"][process], "tid": ops["tid"], "file": lookups["file"][ops["file"]],
            "layer": LAYER_TEXT[ops["layer"]], "direction": DIRECTION_TEXT[ops["direction"]],
            "kind": KIND_TEXT[op_column(ops, "meta_kind")], "offset": ops["offset"], "size": ops["size"],
            "result": ops["result"], "start_s": ops["start_s"], "duration_s": ops["duration_s"],
            "class": CLASS_TEXT[per_op["class"]], "cached_typical_s": per_op["cached_typical_s"],
            "lost_s": per_op["lost_s"], "flags": flag_text(op_column(ops, "flags"))}


def arrow_table(columns):
    """A pyarrow table of op_table's columns: numbers as numpy has them, text (object arrays) as
    strings, whatever a chunk holds (a column of nulls stays a string column)."""
    import pyarrow
    return pyarrow.table({name: pyarrow.array(column, pyarrow.string() if column.dtype == object else None)
                          for name, column in columns.items()})


def write_tables(out, tables):
    """The tables (of one schema; at least one) as one Parquet file to the binary file out, each
    its own row group (pyarrow splits those of more than 2^20 rows)."""
    import pyarrow.parquet
    tables = iter(tables)
    first = next(tables)
    with pyarrow.parquet.ParquetWriter(out, first.schema) as writer:
        for table in itertools.chain([first], tables):
            writer.write_table(table)


def write_parquet(path, job, model, mode=0o600, per_file=None, chunk_ops=EXPORT_CHUNK_OPS):
    """The job's ops as a Parquet file at path (written whole or not at all): one row per op,
    PARQUET_COLUMNS, classed under model, or per file system (per_file: classify_ops'), a row
    group per chunk of chunk_ops ops (only one chunk is held at a time); returns how many ops.
    Needs pyarrow."""
    lookups = job_lookups(job)
    tables = (arrow_table(op_table(lookups, chunk.ops, chunk.per_op))
              for chunk in classified_chunks(job, model, per_file, chunk_ops)[1])
    write_atomically(path, lambda out: write_tables(out.buffer, tables), mode)
    return op_count(job)


def write_perfetto(path, job, model, model_name, mode=0o600, per_file=None, chunk_ops=EXPORT_CHUNK_OPS):
    """The job's ops as a Trace Event Format file at path (written whole or not at all), classed
    under model, or per file system (per_file: classify_ops'), written chunk by chunk of
    chunk_ops ops; returns how many ops."""
    _, chunks = classified_chunks(job, model, per_file, chunk_ops)
    files = [f.name for f in job.files]

    def write(out):
        out.write('{"displayTimeUnit": "ns", "otherData": ')
        out.write(json.dumps(other_data(job, model_name), allow_nan=False))
        out.write(', "traceEvents": [\n')
        first = True
        for event in itertools.chain(process_events(job), chunk_events(chunks, files)):
            out.write(("" if first else ",\n") + json.dumps(event, allow_nan=False))
            first = False
        out.write("\n]}\n")
    write_atomically(path, write, mode)
    return op_count(job)
