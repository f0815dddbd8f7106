"""`ioassess show`: what a trace directory holds, as plain data (summarise) and as text.

summarise() returns the JSON object documented in docs/cli.md; format_text() renders it.
"""
import collections
import dataclasses

import numpy as np

from .inputs import traceformat as tf
from .escape import printable
from .inputs.trace import OTHER_FILES_ID, TOTAL_COLUMNS, stopped_recording_note, sum_by, totals
from .units import count_text

TOP_FILES = 10
# The layers whose bytes no other layer records: POSIX, and stdio (glibc moves a stream's buffer
# with internal calls the recorder does not see).
IO_LAYERS = ("posix", "stdio")
# The text lists this many processes; the JSON lists all.
TEXT_PROCESSES = 20


def summarise(traceset, top_files=TOP_FILES):
    """The summary of a TraceSet: processes, hosts, files, per-op-kind, per-direction and
    per-layer totals. Files and directions count the POSIX and stdio layers (IO_LAYERS) only: an
    MPI-IO call's bytes are moved again by the POSIX calls under it."""
    per_file = _io_rows(totals(traceset, by=("layer", "file_id")), ("file_id",))
    per_file_direction = _io_rows(totals(traceset, by=("layer", "direction", "file_id")), ("direction", "file_id"))
    named = per_file_direction["file_id"] != OTHER_FILES_ID
    moved_data = np.isin(per_file_direction["direction"], ("read", "write", "sync"))
    data_files = set(per_file_direction["file_id"][named & moved_data].tolist())
    all_files = set(per_file_direction["file_id"][named].tolist())
    by_bytes = np.lexsort((per_file["file_id"], -per_file["bytes_returned"]))
    hosts = collections.Counter(process.hostname for process in traceset.processes)
    per_op = totals(traceset, by=("op",))
    per_direction = _io_rows(totals(traceset, by=("layer", "direction")), ("direction",))
    per_layer = totals(traceset, by=("layer",))
    return {
        "process_count": len(traceset.processes),
        "processes": [dataclasses.asdict(process) for process in traceset.processes],
        "hosts": [{"hostname": host, "process_count": count} for host, count in sorted(hosts.items())],
        "file_count": len(data_files),
        "metadata_only_file_count": len(all_files - data_files),
        "top_files": [{"file_id": f"0x{int(per_file['file_id'][i]):016x}",
                       "name": traceset.files[int(per_file["file_id"][i])].name,
                       **_amounts(per_file, i)} for i in by_bytes[:top_files]],
        "op_kinds": [{"op": tf.OP_NAMES[int(op)], "direction": tf.OP_DIRECTION[int(op)], **_amounts(per_op, i)}
                     for i, op in enumerate(per_op["op"])],
        "directions": [{"direction": str(direction), **_amounts(per_direction, i)}
                       for i, direction in enumerate(per_direction["direction"])],
        "layers": [{"layer": str(layer), **_amounts(per_layer, i)} for i, layer in enumerate(per_layer["layer"])],
        "ops_kept": int(len(traceset.ops["op"])),
        "ops_not_kept": int(traceset.summary["count"].sum()),
        "ops_lost": sum(process.ops_lost for process in traceset.processes),
        "stopped_recording": stopped_recording_note(traceset.processes),
        "errors": [str(error) for error in traceset.errors],
    }


def _io_rows(grouped, keys):
    """The rows of the I/O layers, summed over the layer per keys."""
    io = np.isin(grouped["layer"], IO_LAYERS)
    return sum_by({key: grouped[key][io] for key in keys}, {name: grouped[name][io] for name in TOTAL_COLUMNS})


def _amounts(grouped, i):
    return {"count": int(grouped["count"][i]), "bytes": int(grouped["bytes_returned"][i]),
            "duration_s": int(grouped["duration_ns"][i]) / 1e9, "errors": int(grouped["errors"][i])}


def format_text(summary):
    """The summary as a plain-text report (errors are not included: they go to stderr)."""
    hosts = summary["hosts"]
    metadata_only = summary["metadata_only_file_count"]
    lines = [f"{count_text(summary['process_count'], 'process')} on {count_text(len(hosts), 'host')}, "
             f"{count_text(summary['file_count'], 'file')} with I/O"
             + (f", {metadata_only} more named by metadata calls only" if metadata_only else ""),
             f"ops: {summary['ops_kept']} kept individually, {summary['ops_not_kept']} only in the summary table "
             f"(past the record cap), {summary['ops_lost']} lost", ""]
    if summary["stopped_recording"]:
        lines[-1:-1] = [summary["stopped_recording"]]
    processes = summary["processes"]
    lines += ["processes"] + _table(
        ["pid", "rank", "host", "end", "ops", "in summary", "exe"],
        [[p["pid"], p["rank"], p["hostname"], _end(p), p["ops_kept"], p["ops_not_kept"], p["exe"]]
         for p in processes[:TEXT_PROCESSES]])
    if len(processes) > TEXT_PROCESSES:
        lines.append(f"  ... and {len(processes) - TEXT_PROCESSES} more (--json lists all)")
    lines += ["", "hosts"] + _table(["host", "processes"], [[h["hostname"], h["process_count"]] for h in hosts])
    lines += ["", "top files by bytes"] + _table(
        ["bytes", "ops", "seconds", "errors", "name"],
        [[f["bytes"], f["count"], _seconds(f["duration_s"]), f["errors"], f["name"]] for f in summary["top_files"]])
    layers = summary["layers"]
    totals_rows = [{"op": "total" if len(layers) == 1 else f"total {layer['layer']}", "direction": "", **layer}
                   for layer in layers]
    lines += ["", "op kinds"] + _table(
        ["op", "direction", "count", "bytes", "seconds", "errors"],
        [[kind["op"], kind["direction"], kind["count"], kind["bytes"], _seconds(kind["duration_s"]), kind["errors"]]
         for kind in summary["op_kinds"] + totals_rows])
    return "\n".join(lines) + "\n"


def _end(process):
    if process["exit_status"] is not None:
        return f"{process['end_reason']} {process['exit_status']}"
    return process["end_reason"]


class _Number(str):
    """A formatted number: right-aligned in tables."""


def _seconds(value):
    return _Number(f"{value:.6f}")


def _table(headings, rows):
    """Indented columns; numbers right-aligned, text left-aligned. Text comes from the job (file
    names, hosts, executables): it is printed with its control characters escaped."""
    cells = [headings] + [[_Number(value) if isinstance(value, int) else value for value in row] for row in rows]
    cells = [[value if isinstance(value, _Number) else printable(str(value)) for value in row] for row in cells]
    widths = [max(len(str(row[col])) for row in cells) for col in range(len(headings))]
    numeric = [any(isinstance(row[col], _Number) for row in cells[1:]) for col in range(len(headings))]
    lines = []
    for row in cells:
        padded = [str(value).rjust(width) if right else str(value).ljust(width)
                  for value, width, right in zip(row, widths, numeric)]
        lines.append("  " + "  ".join(padded).rstrip())
    return lines
