"""`ioassess iomodels`: the site's grid of I/O models (Sisneros et al.), and where a job falls
on it.

The MPI program ioassess-iomodels (plugin/programs/ioassess-iomodels.c) writes the same total size in
every I/O model from serial to one shared file, including files per node shared across m
nodes, and times each. measure_grid runs it with mpiexec over the whole sweep, keeps the median
of the repeats of every model and saves the grid as versioned JSON; load_grid and
load_site_grid read such a file back, validated, with one-line errors; place_on_grid puts a
job's I/O-model cell (io_model_cell in report/io_model.py) on a grid. docs/iomodels.md describes
the method, the file format and the placement. Only run_benchmark and measure_grid run
programs; the rest are pure functions on plain data.
"""
import argparse
import dataclasses
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import time

from .. import recorder_library_path
from ..jsonfile import (Invalid, JsonFileError, check_format, check_keys, choice, iso_date, json_type, parse_json,
                        read_json_file, typed, whole_number, write_json_file)
from ..files import file_system_of, work_dir_problem
from ..progress import Progress
from ..units import bytes_label, count_text

GRID_FORMAT = "ioassess-iomodels-grid"
GRID_VERSION = 1
SITE_GRID_ENV = "IOASSESS_SITE_GRID"
SITE_GRID_PATH = "/etc/ioassess/iomodels.json"
PROGRAM = "ioassess-iomodels"
MiB = 1 << 20
PAGE = 4096
DEFAULT_TOTAL_BYTES = 1 << 30
DEFAULT_REPEATS = 3
LAYOUTS = ("contiguous", "strided")
NODES_FROM = ("hosts", "ranks-per-node")
NAMES = ("serial", "file per process", "shared file", "file per node", "subset")
# Free space beyond the files of one model (they are removed before the next one starts).
FREE_SPACE_MARGIN = 64 * MiB
# How long mpiexec gets to end its ranks after SIGTERM before it is killed.
END_GRACE_S = 10
SIZE_SUFFIXES = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
MODEL_FIELDS = ("nodes", "writers_per_node", "files_per_node", "nodes_per_file")
CELL_FIELDS = ("processes", "processes_per_file", *MODEL_FIELDS, "files", "name", "mib_per_s",
               "mib_per_s_repeats", "mib_per_node_hour")
SUMMARY_FIELDS = ("processes", "processes_per_file", *MODEL_FIELDS, "name", "mib_per_s", "mib_per_node_hour")


class IoModelsError(Exception):
    """The sweep cannot run or failed; str() is one line."""


class GridFileError(JsonFileError):
    """A grid file that cannot be used; str() is the one line `PATH: problem`."""


@dataclasses.dataclass(frozen=True)
class Sweep:
    """What `ioassess iomodels` measures: ranks_per_node None means the nodes are the hosts."""
    directory: str
    total_bytes: int
    processes: int
    ranks_per_node: int | None
    repeats: int
    layout: str


# ---- the I/O models ----

def is_power_of_two(value):
    return value >= 1 and not value & (value - 1)


def model_numbers(nodes, writers_per_node, files_per_node, nodes_per_file):
    """(P, k, files) of the model: n w writers, each file shared by the w / f writers of each of
    its m nodes."""
    processes = nodes * writers_per_node
    per_file = nodes_per_file * writers_per_node // files_per_node
    return processes, per_file, nodes * files_per_node // nodes_per_file


def io_model_name(processes, per_file, per_node=False):
    """The name of Sisneros' I/O model of P processes, k of them per file (a job's k is weighted
    by bytes, so it is within 5 % of a whole number of processes), and whether each file is used
    by the processes of one node only: serial, file per process, shared file, file per node,
    subset. The grid's cells and the job's cell are named by it."""
    if processes <= 1:
        return "serial"
    if per_file <= 1.05:
        return "file per process"
    if per_file >= 0.95 * processes:
        return "shared file"
    if per_node:
        return "file per node"
    return "subset"


# ---- the grid from the benchmark's output ----

def grid_from_results(header, measurements, provenance):
    """The grid (docs/iomodels.md) of the benchmark's header and measurement lines: per model
    the median MiB/s of its repeats and MiB per node-hour. IoModelsError when a model wrote
    other than the total size or lacks repeats."""
    total = header["total_bytes"]
    speeds = {}
    for line in measurements:
        model = tuple(line[field] for field in MODEL_FIELDS)
        if not line["bytes_written"] == line["file_bytes"] == total or line["seconds"] <= 0:
            raise IoModelsError(f"{_describe_model(model)}: wrote {line['bytes_written']} bytes into files of "
                                f"{line['file_bytes']} bytes in {line['seconds']} s, expected {total} bytes")
        speeds.setdefault(model, []).append(total / MiB / line["seconds"])
    incomplete = [model for model, repeats in speeds.items() if len(repeats) != header["repeats"]]
    if len(speeds) != header["models"] or incomplete:
        raise IoModelsError(f"the benchmark measured {len(speeds)} of {header['models']} models, "
                            f"{len(incomplete)} of them not {header['repeats']} times")
    cells = [_cell(model, repeats) for model, repeats in speeds.items()]
    cells.sort(key=lambda cell: (cell["processes"], cell["processes_per_file"], *(cell[f] for f in MODEL_FIELDS)))
    return {"format": GRID_FORMAT, "version": GRID_VERSION, "provenance": provenance, "cells": cells}


def _cell(model, mib_per_s_repeats):
    nodes, _, files_per_node, nodes_per_file = model
    processes, per_file, files = model_numbers(*model)
    median = statistics.median(mib_per_s_repeats)
    return {"processes": processes, "processes_per_file": per_file, **dict(zip(MODEL_FIELDS, model)),
            "files": files, "name": io_model_name(processes, per_file, files_per_node == nodes_per_file == 1),
            "mib_per_s": median, "mib_per_s_repeats": mib_per_s_repeats,
            "mib_per_node_hour": median * 3600 / nodes}


def _describe_model(model):
    processes, per_file, _ = model_numbers(*model)
    return (f"P={processes} k={per_file} on {count_text(model[0], 'node')} ({model[2]} files per node, "
            f"{model[3]} nodes per file)")


# ---- the grid file ----

def save_grid(grid, path):
    """Write the grid, validated first (GridFileError naming path otherwise), atomically."""
    write_json_file(path, grid, _grid_from_json, GridFileError)


def load_grid(path):
    """The validated grid (plain JSON data) of a grid file; raises GridFileError."""
    return read_json_file(path, _grid_from_json, GridFileError, lambda: "no such grid file")


def load_site_grid(explicit=None, environ=os.environ):
    """(path, grid) of the site's grid: the explicit path, else $IOASSESS_SITE_GRID, else
    SITE_GRID_PATH if it exists; None when none is given and SITE_GRID_PATH does not exist.
    GridFileError when the file chosen is missing or invalid."""
    path = explicit or environ.get(SITE_GRID_ENV) or (SITE_GRID_PATH if os.path.exists(SITE_GRID_PATH) else None)
    return None if path is None else (path, load_grid(path))


def _grid_from_json(data):
    """The grid itself, checked; raises Invalid with the first problem found."""
    check_format(data, GRID_FORMAT, GRID_VERSION, "I/O-model grid file", "grid file")
    check_keys(data, "", ("format", "version", "provenance", "cells"))
    _check_provenance(typed(data, "", "provenance", dict))
    cells = typed(data, "", "cells", list)
    if not cells:
        raise Invalid("cells: empty, a grid has at least one measured model")
    seen = set()
    for index, cell in enumerate(cells):
        model = _check_cell(cell, f"cells[{index}].")
        if model in seen:
            raise Invalid(f"cells[{index}]: a second cell for {_describe_model(model)}")
        seen.add(model)
    return data


def _check_provenance(provenance):
    """Checks the required fields; other fields are kept (provenance is descriptive)."""
    where = "provenance."
    for field in ("source", "host", "directory"):
        typed(provenance, where, field, str)
    file_system = typed(provenance, where, "file_system", dict)
    check_keys(file_system, f"{where}file_system.", ("type", "mount"))
    for field in ("type", "mount"):
        typed(file_system, f"{where}file_system.", field, str)
    iso_date(provenance, where, "date")
    for field in ("total_bytes", "transfer_bytes", "processes", "nodes", "ranks_per_node", "repeats"):
        whole_number(provenance, where, field, 1)
    choice(provenance, where, "layout", LAYOUTS)
    choice(provenance, where, "nodes_from", NODES_FROM)


def _check_cell(cell, where):
    """The cell's model (nodes, writers per node, files per node, nodes per file), checked."""
    if not isinstance(cell, dict):
        raise Invalid(f"{where[:-1]}: must be an object, got a JSON {json_type(cell)}")
    check_keys(cell, where, CELL_FIELDS)
    model = tuple(whole_number(cell, where, field, 1) for field in MODEL_FIELDS)
    for field, value in zip(MODEL_FIELDS, model):
        if not is_power_of_two(value):
            raise Invalid(f"{where}{field}: must be a power of two, got {value}")
    nodes, writers_per_node, files_per_node, nodes_per_file = model
    if files_per_node > writers_per_node or nodes_per_file > nodes:
        raise Invalid(f"{where[:-1]}: more files per node than writers per node, or more nodes per file than nodes")
    numbers = tuple(whole_number(cell, where, field, 1) for field in ("processes", "processes_per_file", "files"))
    if numbers != model_numbers(*model):
        raise Invalid(f"{where[:-1]}: processes, processes_per_file and files must be {model_numbers(*model)} "
                      f"for this model, got {numbers}")
    name = choice(cell, where, "name", NAMES)
    if name != io_model_name(numbers[0], numbers[1], files_per_node == nodes_per_file == 1):
        raise Invalid(f"{where}name: this model is named "
                      f"{json.dumps(io_model_name(numbers[0], numbers[1], files_per_node == nodes_per_file == 1))}")
    _positive(cell["mib_per_s"], f"{where}mib_per_s")
    _positive(cell["mib_per_node_hour"], f"{where}mib_per_node_hour")
    repeats = typed(cell, where, "mib_per_s_repeats", list)
    if not repeats:
        raise Invalid(f"{where}mib_per_s_repeats: empty")
    for index, value in enumerate(repeats):
        _positive(value, f"{where}mib_per_s_repeats[{index}]")
    return model


def _positive(value, name):
    if type(value) not in (int, float) or not math.isfinite(value) or value <= 0:
        raise Invalid(f"{name}: must be a positive number, got {json.dumps(value)}")


# ---- placing a job ----

def place_on_grid(cell, grid, job_mib_per_s=None):
    """Where a job's I/O-model cell (the dict of io_model_cell) falls on a grid (load_grid's):
    the measured model nearest to it in (log2 P, log2 k), ties going to the model on the
    nearest number of nodes, then to the fastest; the fastest model of the sweep and the most
    efficient per node-hour; and, given the job's own MiB/s, how it compares. Plain data
    (docs/iomodels.md, "Placement"); None for a job without I/O."""
    processes = cell.get("processes_doing_io", 0)
    if processes < 1:
        return None
    per_file = max(cell.get("processes_per_file", 1), 1)
    hosts = max(cell.get("hosts", 1), 1)

    def remoteness(measured):
        distance = math.hypot(math.log2(measured["processes"] / processes),
                              math.log2(measured["processes_per_file"] / per_file))
        return distance, abs(math.log2(measured["nodes"] / hosts)), -measured["mib_per_s"]

    nearest = min(grid["cells"], key=remoteness)
    best = max(grid["cells"], key=lambda measured: measured["mib_per_s"])
    most_efficient = max(grid["cells"], key=lambda measured: measured["mib_per_node_hour"])
    provenance = grid["provenance"]
    return {
        "grid": {field: provenance[field] for field in ("host", "file_system", "date", "total_bytes", "processes",
                                                        "nodes", "ranks_per_node", "nodes_from")},
        "job": {"processes": processes, "processes_per_file": per_file, "hosts": hosts, "name": cell.get("name"),
                "mib_per_s": job_mib_per_s},
        "nearest": _summary(nearest),
        "distance_log2": remoteness(nearest)[0],
        "same_bin": (round(math.log2(processes)), round(math.log2(per_file))) ==
                    (round(math.log2(nearest["processes"])), round(math.log2(nearest["processes_per_file"]))),
        "best": _summary(best),
        "most_efficient": _summary(most_efficient),
        "nearest_share_of_best": nearest["mib_per_s"] / best["mib_per_s"],
        "job_share_of_nearest": None if job_mib_per_s is None else job_mib_per_s / nearest["mib_per_s"],
    }


def _summary(measured):
    return {field: measured[field] for field in SUMMARY_FIELDS}


# ---- text ----

def format_grid(grid):
    """The grid as a text table, one model a line, with its provenance first and the fastest
    and most efficient models last."""
    provenance = grid["provenance"]
    nodes_from = "simulated: --ranks-per-node" if provenance["nodes_from"] == "ranks-per-node" else "hosts"
    lines = [f"I/O models of {provenance['file_system']['type']} at {provenance['file_system']['mount']} "
             f"({provenance['directory']}) from {provenance['host']}, {provenance['date']}: "
             f"{bytes_label(provenance['total_bytes'])} per model, {provenance['processes']} processes on "
             f"{provenance['nodes']} nodes ({nodes_from}), {provenance['layout']}, "
             f"median of {provenance['repeats']}",
             f"{'P':>6} {'k':>6} {'nodes':>6} {'files/node':>10} {'nodes/file':>10}  {'model':<16} "
             f"{'MiB/s':>10} {'MiB/node-hour':>14}"]
    for cell in grid["cells"]:
        lines.append(f"{cell['processes']:>6} {cell['processes_per_file']:>6} {cell['nodes']:>6} "
                     f"{cell['files_per_node']:>10} {cell['nodes_per_file']:>10}  {cell['name']:<16} "
                     f"{cell['mib_per_s']:>10.1f} {cell['mib_per_node_hour']:>14.0f}")
    best = max(grid["cells"], key=lambda cell: cell["mib_per_s"])
    efficient = max(grid["cells"], key=lambda cell: cell["mib_per_node_hour"])
    lines.append(f"fastest: {_cell_text(best)}, {best['mib_per_s']:.1f} MiB/s; most per node-hour: "
                 f"{_cell_text(efficient)}, {efficient['mib_per_node_hour']:.0f} MiB/node-hour")
    return "\n".join(lines) + "\n"


def _cell_text(cell):
    return f"{cell['name']} P={cell['processes']} k={cell['processes_per_file']} on {count_text(cell['nodes'], 'node')}"


def parse_size(text):
    """An argparse type: bytes from `1048576`, `64M`, `64MiB`, `1g` (powers of 1024)."""
    match = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)(i?b)?\s*", text, re.IGNORECASE)
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 1073741824, 1G, 256MiB)")
    return int(match[1]) * SIZE_SUFFIXES[match[2].lower()]


# ---- running the sweep ----

def default_processes():
    """The largest power of two of this machine's CPUs: a sweep of one node."""
    return 1 << ((os.cpu_count() or 1).bit_length() - 1)


def default_grid_path(directory):
    return f"iomodels-{file_system_of(directory)[0]}-{platform.node()}.json"


def benchmark_program_path():
    """The benchmark, installed next to the recorder library when mpicc was found."""
    return os.path.join(os.path.dirname(recorder_library_path()), PROGRAM)


def check_sweep(sweep):
    """Refuse a sweep that cannot run, before anything runs; returns (mpiexec, program)."""
    for name, value in (("--processes", sweep.processes), ("--ranks-per-node", sweep.ranks_per_node or 1),
                        ("--total-bytes", sweep.total_bytes)):
        if not is_power_of_two(value):
            raise IoModelsError(f"{name} must be a power of two, got {value}")
    if sweep.ranks_per_node and sweep.processes % sweep.ranks_per_node:
        raise IoModelsError(f"--ranks-per-node {sweep.ranks_per_node} does not divide --processes {sweep.processes}")
    if sweep.total_bytes < PAGE * sweep.processes:
        raise IoModelsError(f"--total-bytes must give each of the {sweep.processes} processes at least {PAGE} "
                            f"bytes, got {sweep.total_bytes}")
    if sweep.repeats < 1:
        raise IoModelsError(f"--repeats must be at least 1, got {sweep.repeats}")
    problem = work_dir_problem(sweep.directory, sweep.total_bytes + FREE_SPACE_MARGIN, "the files of one model")
    if problem:
        raise IoModelsError(problem)
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        raise IoModelsError("mpiexec not found on PATH: install MPI (Debian: apt-get install mpich libmpich-dev) "
                            "and reinstall ioassess")
    program = benchmark_program_path()
    if not os.path.isfile(program):
        raise IoModelsError(f"{program} is missing: it is built only where mpicc is found; install MPI and "
                            "reinstall ioassess (pip install .)")
    return mpiexec, program


def benchmark_command(mpiexec, program, work_dir, sweep):
    command = [mpiexec, "-n", str(sweep.processes), program, "--dir", work_dir, "--total-bytes",
               str(sweep.total_bytes), "--repeats", str(sweep.repeats), "--layout", sweep.layout]
    return command + (["--ranks-per-node", str(sweep.ranks_per_node)] if sweep.ranks_per_node else [])


def run_benchmark(command, stream):
    """Run the benchmark job; (header, measurement lines) as it printed them, with progress
    on stream. The job is ended when this is left early (Ctrl-C, SIGTERM as KeyboardInterrupt)."""
    with tempfile.TemporaryFile("w+") as errors:
        # Its own session: Ctrl-C reaches only ioassess, which ends the whole job itself.
        job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True, start_new_session=True)
        try:
            header, measurements = _read_results(job.stdout, stream)
            status = job.wait()
        finally:
            _end(job)
        if status != 0:
            errors.seek(0)
            raise IoModelsError(f"the benchmark failed (exit status {status}): {_first_problem(errors.read())}")
    return header, measurements


def _read_results(output, stream):
    header, measurements, progress = None, [], None
    for text in output:
        try:
            line = parse_json(text)
            if header is None:
                header = line
                progress = Progress(header["models"] * header["repeats"], stream)
                continue
            measurements.append(line)
            progress.advance(1, f"P={line['processes']} k={line['processes_per_file']} on "
                                f"{count_text(line['nodes'], 'node')}, repeat {line['repeat'] + 1}")
        except (Invalid, KeyError, TypeError):
            raise IoModelsError(f"unexpected output of {PROGRAM}: {text.strip()[:200]}") from None
    return header, measurements


def _end(job):
    if job.poll() is None:
        os.killpg(job.pid, signal.SIGTERM)
        try:
            job.wait(END_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    job.stdout.close()


def _first_problem(stderr_text):
    """The benchmark's own message if it gave one, else the last line MPI printed."""
    lines = [line.strip() for line in stderr_text.splitlines() if line.strip()]
    own = [line for line in lines if line.startswith(f"{PROGRAM}:")]
    return (own or lines or ["no message"])[0 if own else -1]


def sweep_provenance(sweep, header, mpiexec):
    fs_type, mount = file_system_of(sweep.directory)
    return {"source": "measured by ioassess iomodels", "host": platform.node(),
            "file_system": {"type": fs_type, "mount": mount}, "directory": os.path.abspath(sweep.directory),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **{field: header[field] for field in ("total_bytes", "transfer_bytes", "layout", "nodes",
                                                   "ranks_per_node", "nodes_from", "repeats")},
            "processes": header["ranks"], "program": PROGRAM, "mpiexec": mpiexec}


def measure_grid(sweep, output, stream):
    """Run the sweep in a new directory inside sweep.directory, removed at the end also on
    Ctrl-C or an error, and save the grid to output; returns the grid."""
    mpiexec, program = check_sweep(sweep)
    if not os.path.isdir(os.path.dirname(os.path.abspath(output))):
        raise IoModelsError(f"{output}: its directory does not exist")
    work_dir = tempfile.mkdtemp(prefix="ioassess-iomodels-", dir=sweep.directory)
    try:
        stream.write(f"ioassess iomodels: {sweep.processes} processes, {bytes_label(sweep.total_bytes)} per model, "
                     f"{sweep.repeats} repeats, in {work_dir}\n")
        header, measurements = run_benchmark(benchmark_command(mpiexec, program, work_dir, sweep), stream)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    if header is None:
        raise IoModelsError(f"{PROGRAM} printed nothing")
    grid = grid_from_results(header, measurements, sweep_provenance(sweep, header, mpiexec))
    save_grid(grid, output)
    return grid
