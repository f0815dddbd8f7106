"""The job on Sisneros' I/O-model grid: its cell (processes doing I/O, processes per file, the
model's name), its write throughput, and its place among the site's measured cells."""
import collections
import math

import numpy as np

from ioassess.inputs.job import WRITE
from ioassess.site.iomodels import io_model_name, place_on_grid

MiB = 1 << 20


def io_model_cell(job, ledger):
    """Sisneros' I/O-model cell: processes that moved data (P) and processes per file (k),
    weighted by bytes, and its name (serial, file per process, shared file, file per node,
    subset), from the bytes of the job's ledger (report/ledger.py). Failed calls and 0-byte
    transfers do not make a process one doing I/O."""
    moved = (ledger["direction"] < 2) & (ledger["bytes"] > 0)
    pairs = collections.defaultdict(float)
    for proc, file, nbytes in zip(ledger["process"][moved].tolist(), ledger["file"][moved].tolist(),
                                  ledger["bytes"][moved].tolist()):
        pairs[(proc, file)] += nbytes
    if not pairs:
        return {"processes_doing_io": 0, "name": "no I/O"}
    shared_all = {file for (proc, file) in pairs if proc == -1}
    processes = {proc for proc, _ in pairs if proc >= 0}
    p_count = job.nprocs if shared_all else len(processes)
    per_file = collections.defaultdict(set)
    bytes_per_file = collections.defaultdict(float)
    for (proc, file), nbytes in pairs.items():
        per_file[file].add(proc)
        bytes_per_file[file] += nbytes
    k = {file: (job.nprocs if file in shared_all else len(procs)) for file, procs in per_file.items()}
    total = sum(bytes_per_file.values())
    k_weighted = sum(k[f] * b for f, b in bytes_per_file.items()) / total if total else float(np.mean(list(k.values())))
    hosts = len({job.processes[p].hostname for p in processes})
    per_node = not shared_all and hosts > 1 and _files_are_per_node(job, processes, per_file)
    return {"processes_doing_io": int(p_count), "processes_per_file": round(k_weighted, 3),
            "files": len(per_file), "hosts": hosts,
            "name": io_model_name(p_count, k_weighted, per_node)}


def _files_are_per_node(job, processes, per_file):
    """Whether every file is used by all the I/O processes of one host and by no other."""
    by_host = collections.defaultdict(set)
    for proc in processes:
        by_host[job.processes[proc].hostname].add(proc)
    return all(len({job.processes[p].hostname for p in procs}) == 1 and
               procs == by_host[job.processes[next(iter(procs))].hostname] for procs in per_file.values())


class WriteSpan:
    """The first start and the last end of the writes of the POSIX and STDIO layers that wrote
    something, a pass; (inf, -inf) without any."""

    def __init__(self):
        self.first_s, self.last_s = math.inf, -math.inf

    def add(self, chunk):
        ops = chunk.ops
        writes = chunk.per_op["is_io"] & (ops["direction"] == WRITE) & (ops["result"] > 0)
        if writes.any():
            start = ops["start_s"][writes]
            self.first_s = min(self.first_s, float(start.min()))
            self.last_s = max(self.last_s, float(np.max(start + ops["duration_s"][writes])))

    def merge(self, later):
        self.first_s, self.last_s = min(self.first_s, later.first_s), max(self.last_s, later.last_s)

    def result(self):
        return self.first_s, self.last_s


def write_throughput(ledger, write_span):
    """The job's own write throughput: bytes the POSIX and STDIO layers wrote (`write_bytes`:
    the ledger's), and, when every one of those writes is known one by one, the span from the
    first write's start to the last write's end over all processes (`write_span_s`: write_span,
    WriteSpan's) and bytes / span in MiB/s (`write_mib_per_s`); writes known only from counters
    have no times, so both are None then."""
    writes = (ledger["direction"] == WRITE) & (ledger["bytes"] > 0)
    counted = writes & ledger["estimated"]
    written = int(ledger["bytes"][writes].sum())
    span = None
    if writes.any() and not counted.any():
        first_s, last_s = write_span
        span = float(last_s - first_s)
    return {"write_bytes": written, "write_span_s": span,
            "write_mib_per_s": written / MiB / span if span else None}


def site_grid_placement(cell, site_grid):
    """The job's I/O-model cell (with its write throughput) placed on the site's grid
    (ioassess.site.iomodels.place_on_grid), and the grid's measured cells; None without a grid."""
    if site_grid is None:
        return None
    if "problem" in site_grid:
        return {"path": site_grid["path"], "problem": site_grid["problem"], "placement": None, "cells": []}
    grid = site_grid["grid"]
    return {"path": site_grid["path"], "problem": None,
            "placement": place_on_grid(cell, grid, cell.get("write_mib_per_s")), "cells": measured_cells(grid)}


def measured_cells(grid):
    """Per (P, k) the grid measured, by P then k: its fastest model (the paper reduces a cell
    by its maximum) and how many models it holds."""
    models_in = collections.defaultdict(list)
    for measured in grid["cells"]:
        models_in[(measured["processes"], measured["processes_per_file"])].append(measured)
    cells = []
    for (processes, per_file), models in sorted(models_in.items()):
        fastest = max(models, key=lambda measured: measured["mib_per_s"])
        cells.append({"processes": processes, "processes_per_file": per_file, "name": fastest["name"],
                      "nodes": fastest["nodes"], "mib_per_s": fastest["mib_per_s"], "models": len(models)})
    return cells
