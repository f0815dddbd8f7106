"""`ioassess iomodels`: a real sweep of the MPI benchmark (4 ranks on 2 simulated nodes), the
benchmark run on its own, refusals before anything runs, Ctrl-C and SIGTERM, the grid file
(round trip, one-line errors for bad files) and the placement of jobs' I/O-model cells on the
measured grid."""
import copy
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys

import pytest

from ioassess import recorder_library_path
from ioassess.site.iomodels import SITE_GRID_PATH, GridFileError, load_grid, load_site_grid, place_on_grid, save_grid
from recorder_helpers import is_ioassess_setting, prog

pytestmark = pytest.mark.mpi

MiB = 1 << 20
TOTAL = 16 * MiB
PROCESSES, RANKS_PER_NODE, REPEATS = 4, 2, 2
PROGRAM = os.path.join(os.path.dirname(recorder_library_path()), "ioassess-iomodels")
# Every model of 4 ranks on 2 nodes of 2: (nodes, writers per node, files per node, nodes per
# file) -> (P, k, files, name).
EXPECTED_MODELS = {
    (1, 1, 1, 1): (1, 1, 1, "serial"),
    (1, 2, 1, 1): (2, 2, 1, "shared file"),
    (1, 2, 2, 1): (2, 1, 2, "file per process"),
    (2, 1, 1, 1): (2, 1, 2, "file per process"),
    (2, 1, 1, 2): (2, 2, 1, "shared file"),
    (2, 2, 1, 1): (4, 2, 2, "file per node"),
    (2, 2, 1, 2): (4, 4, 1, "shared file"),
    (2, 2, 2, 1): (4, 1, 4, "file per process"),
    (2, 2, 2, 2): (4, 2, 2, "subset"),
}


def ioassess_command(*args, env=None, **popen_options):
    """The installed command line, as the conftest's `ioassess` fixture runs it (usable from a
    module-scoped fixture)."""
    base = {k: v for k, v in os.environ.items() if not is_ioassess_setting(k)}
    return subprocess.run([sys.executable, "-m", "ioassess", *map(str, args)], cwd="/", env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=120, **popen_options)


def model_of(cell):
    return cell["nodes"], cell["writers_per_node"], cell["files_per_node"], cell["nodes_per_file"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """One real sweep: (result of the command, data directory, grid file)."""
    base = tmp_path_factory.mktemp("iomodels")
    (base / "data").mkdir()
    result = ioassess_command("iomodels", "--dir", base / "data", "--total-bytes", "16M", "--processes", PROCESSES,
                              "--ranks-per-node", RANKS_PER_NODE, "--repeats", REPEATS, "-o", base / "grid.json")
    return result, base / "data", base / "grid.json"


@pytest.fixture(scope="module")
def grid(sweep):
    result, _, path = sweep
    assert result.returncode == 0, result.stderr
    return load_grid(path)


# ---- the sweep ----

def test_a_sweep_measures_every_model_from_serial_to_shared_file(sweep, grid):
    result, data_dir, path = sweep
    assert result.stderr.splitlines()[-1] == f"ioassess: wrote {path}"
    assert {model_of(cell): (cell["processes"], cell["processes_per_file"], cell["files"], cell["name"])
            for cell in grid["cells"]} == EXPECTED_MODELS
    assert len(grid["cells"]) == len(EXPECTED_MODELS)
    for cell in grid["cells"]:
        repeats = cell["mib_per_s_repeats"]
        assert len(repeats) == REPEATS and all(math.isfinite(v) and v > 0 for v in repeats)
        assert cell["mib_per_s"] == statistics.median(repeats)
        assert cell["mib_per_node_hour"] == pytest.approx(cell["mib_per_s"] * 3600 / cell["nodes"])
    provenance = grid["provenance"]
    assert (provenance["total_bytes"], provenance["processes"], provenance["nodes"], provenance["ranks_per_node"],
            provenance["nodes_from"], provenance["repeats"], provenance["layout"]) == \
        (TOTAL, PROCESSES, 2, RANKS_PER_NODE, "ranks-per-node", REPEATS, "contiguous")
    assert provenance["directory"] == str(data_dir) and provenance["file_system"]["type"] not in ("", "unknown")
    assert os.listdir(data_dir) == []


def test_the_table_shows_every_model_and_the_fastest(sweep, grid):
    rows = sweep[0].stdout.splitlines()
    assert len(rows) == 2 + len(EXPECTED_MODELS) + 1
    best = max(grid["cells"], key=lambda cell: cell["mib_per_s"])
    assert rows[-1].startswith(f"fastest: {best['name']} P={best['processes']} k={best['processes_per_file']} ")
    assert f"{best['mib_per_s']:.1f} MiB/s" in rows[-1]
    assert "16 MiB per model, 4 processes on 2 nodes" in rows[0]


@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_the_benchmark_writes_the_total_size_into_files_it_checks_and_removes(tmp_path, layout):
    """Two files per node, each shared across both nodes: P = 4, k = 2."""
    run = subprocess.run([shutil.which("mpiexec"), "-n", "4", PROGRAM, "--dir", tmp_path, "--total-bytes", str(TOTAL),
                          "--ranks-per-node", "2", "--layout", layout, "--model", "2,2,2,2", "--repeats", "2"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    header, *lines = map(json.loads, run.stdout.splitlines())
    assert (header["ranks"], header["nodes"], header["ranks_per_node"], header["models"], header["layout"]) == \
        (4, 2, 2, 1, layout)
    assert [line["repeat"] for line in lines] == [0, 1]
    for line in lines:
        assert (line["processes"], line["processes_per_file"], line["files"]) == (4, 2, 2)
        assert line["bytes_written"] == line["file_bytes"] == TOTAL and line["seconds"] > 0
    assert os.listdir(tmp_path) == []


def test_without_ranks_per_node_the_nodes_are_the_hosts(tmp_path):
    run = subprocess.run([shutil.which("mpiexec"), "-n", "2", PROGRAM, "--dir", tmp_path, "--total-bytes", str(MiB)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    header, *lines = map(json.loads, run.stdout.splitlines())
    assert (header["nodes"], header["ranks_per_node"], header["nodes_from"], header["models"]) == (1, 2, "hosts", 3)
    assert sorted((line["processes"], line["processes_per_file"]) for line in lines) == [(1, 1), (2, 1), (2, 2)]


@pytest.mark.parametrize("options, message", [
    (["--model", "4,1,1,1"], "--model 4,1,1,1 does not fit 2 nodes of 2 ranks"),
    (["--total-bytes", "1000"], "--total-bytes and --transfer-bytes must be powers of two"),
])
def test_the_benchmark_refuses_bad_options_in_one_line(tmp_path, options, message):
    run = subprocess.run([shutil.which("mpiexec"), "-n", "4", PROGRAM, "--dir", tmp_path, "--total-bytes", str(MiB),
                          "--ranks-per-node", "2", *options], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.startswith(f"ioassess-iomodels: {message}") and run.stderr.count("ioassess-iomodels:") == 1


# ---- refusals, interruption ----

def refusal_cases(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    return {
        "missing dir": (["--dir", tmp_path / "missing"], {}, f"{tmp_path / 'missing'}: not a directory"),
        "unwritable dir": (["--dir", "/proc"], {}, "/proc: not writable"),
        "no free space": (["--dir", data, "--total-bytes", "1024T"], {}, f"{data}: needs 1048576.1 GiB free"),
        "no mpiexec": (["--dir", data], {"PATH": str(tmp_path)}, "mpiexec not found on PATH"),
        "processes": (["--dir", data, "--processes", "3"], {}, "--processes must be a power of two, got 3"),
        "ranks per node": (["--dir", data, "--processes", "2", "--ranks-per-node", "4"], {},
                           "--ranks-per-node 4 does not divide --processes 2"),
        "size": (["--dir", data, "--total-bytes", "12x"], {}, "argument --total-bytes: not a size: '12x'"),
        "output": (["--dir", data, "-o", tmp_path / "none" / "grid.json"], {},
                   f"{tmp_path / 'none' / 'grid.json'}: its directory does not exist"),
    }


@pytest.mark.parametrize("case", ["missing dir", "unwritable dir", "no free space", "no mpiexec", "processes",
                                  "ranks per node", "size", "output"])
def test_a_sweep_that_cannot_run_is_refused_in_one_line(tmp_path, case):
    options, env, message = refusal_cases(tmp_path)[case]
    result = ioassess_command("iomodels", "--total-bytes", "1M", "--processes", "2", "-o", tmp_path / "grid.json",
                              *options, env=env)
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(f"ioassess: {message}"), result.stderr
    assert not (tmp_path / "grid.json").exists() and os.listdir(tmp_path / "data") == []


def processes_naming(path):
    """pids of the processes whose command line names path."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if str(path).encode() in cmdline.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_sweep_ends_its_job_and_removes_its_files(tmp_path, signum):
    (tmp_path / "data").mkdir()
    env = {k: v for k, v in os.environ.items() if not is_ioassess_setting(k)}
    job = subprocess.Popen([sys.executable, "-m", "ioassess", "iomodels", "--dir", tmp_path / "data",
                            "--total-bytes", "64M", "--processes", "4", "--ranks-per-node", "2", "--repeats", "3",
                            "-o", tmp_path / "grid.json"], cwd="/", env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    seen = [job.stderr.readline() for _ in range(2)]   # the start line, then the first model's progress
    assert "%" in seen[1], seen
    assert os.listdir(tmp_path / "data") != []           # the job's directory, with the files being written
    job.send_signal(signum)
    stdout, stderr = job.communicate(timeout=60)
    assert job.returncode == 130 and stdout == ""
    assert stderr.splitlines()[-1] == "ioassess: iomodels interrupted; its files were removed and no grid was written"
    assert os.listdir(tmp_path / "data") == [] and not (tmp_path / "grid.json").exists()
    assert processes_naming(tmp_path / "data") == []


# ---- the grid file ----

def test_the_grid_file_round_trips(sweep, grid, tmp_path):
    save_grid(grid, tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == sweep[2].read_bytes()
    assert load_grid(tmp_path / "again.json") == grid


def set_in(path, value):
    def change(data):
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


def duplicate_first_cell(data):
    data["cells"].insert(1, copy.deepcopy(data["cells"][0]))


BAD_GRIDS = [
    (set_in(["version"], 2), "grid file version 2 is newer than this ioassess supports (1)"),
    (set_in(["format"], "ioassess-cause-model"),
     'not an ioassess I/O-model grid file (format is "ioassess-cause-model", expected "ioassess-iomodels-grid")'),
    (set_in(["cells"], []), "cells: empty, a grid has at least one measured model"),
    (set_in(["cells", 0, "mib_per_s"], -1), "cells[0].mib_per_s: must be a positive number, got -1"),
    (set_in(["cells", 0, "mib_per_s_repeats", 1], float("nan")),
     "invalid JSON: NaN is not a JSON number"),
    (set_in(["cells", 1, "processes_per_file"], 4),
     "cells[1]: processes, processes_per_file and files must be (2, 1, 2) for this model, got (2, 4, 2)"),
    (set_in(["cells", 0, "name"], "shared file"), 'cells[0].name: this model is named "serial"'),
    (set_in(["cells", 0, "files_per_node"], 3), "cells[0].files_per_node: must be a power of two, got 3"),
    (set_in(["cells", 0, "colour"], "blue"), "cells[0].colour: unknown field"),
    (duplicate_first_cell, "cells[1]: a second cell for P=1 k=1 on 1 node (1 files per node, 1 nodes per file)"),
    (set_in(["provenance", "date"], "yesterday"), 'provenance.date: must be an ISO-8601 date, got "yesterday"'),
    (set_in(["provenance", "nodes_from"], "guess"),
     'provenance.nodes_from: unknown nodes_from "guess" (expected one of hosts, ranks-per-node)'),
    (set_in(["provenance", "total_bytes"], 0), "provenance.total_bytes: must be a whole number >= 1, got 0"),
]


@pytest.mark.parametrize("change, problem", BAD_GRIDS)
def test_a_bad_grid_file_is_rejected_in_one_line_naming_it(grid, tmp_path, change, problem):
    data = copy.deepcopy(grid)
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(GridFileError) as raised:
        load_grid(path)
    assert str(raised.value) == f"{path}: {problem}"
    with pytest.raises(GridFileError):
        save_grid(data, tmp_path / "written.json")
    assert not (tmp_path / "written.json").exists()


@pytest.mark.parametrize("content, problem", [
    (None, "no such grid file"),
    ("{", "invalid JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
    ('{"format": "ioassess-iomodels-grid", "version": 9}', "grid file version 9 is newer than this ioassess supports"),
])
def test_show_rejects_a_bad_grid_file_in_one_line(tmp_path, content, problem):
    path = tmp_path / "grid.json"
    if content is not None:
        path.write_text(content)
    result = ioassess_command("iomodels", "--show", path)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(f"ioassess: {path}: {problem}")


def test_the_site_grid_is_the_given_file_else_the_environments(sweep, grid, tmp_path):
    path = sweep[2]
    assert load_site_grid(str(path), {}) == (str(path), grid)
    assert load_site_grid(None, {"IOASSESS_SITE_GRID": str(path)}) == (str(path), grid)
    with pytest.raises(GridFileError, match=f"^{tmp_path}/none.json: no such grid file$"):
        load_site_grid(None, {"IOASSESS_SITE_GRID": str(tmp_path / "none.json")})
    shown = ioassess_command("iomodels", "--show", env={"IOASSESS_SITE_GRID": str(path)})
    assert shown.returncode == 0 and shown.stdout.startswith(f"{path}: I/O models of ")
    assert len(shown.stdout.splitlines()) == 2 + len(EXPECTED_MODELS) + 1


@pytest.mark.skipif(os.path.exists(SITE_GRID_PATH), reason=f"{SITE_GRID_PATH} is installed here")
def test_without_a_site_grid_show_says_where_it_looked():
    assert load_site_grid(None, {}) is None
    result = ioassess_command("iomodels", "--show")
    assert result.returncode == 2
    assert result.stderr == f"ioassess: no site grid: give GRID.json, set IOASSESS_SITE_GRID or install " \
                            f"{SITE_GRID_PATH}\n"


# ---- placement ----

def fastest(grid, **where):
    return max((cell for cell in grid["cells"] if all(cell[key] == value for key, value in where.items())),
               key=lambda cell: cell["mib_per_s"])


def test_a_job_on_a_measured_cell_is_placed_on_its_fastest_model_there(grid):
    cell = {"processes_doing_io": 4, "processes_per_file": 2.0, "files": 2, "hosts": 2, "name": "file per node"}
    placed = place_on_grid(cell, grid, job_mib_per_s=100.0)
    nearest = fastest(grid, processes=4, processes_per_file=2)
    best = fastest(grid)
    efficient = max(grid["cells"], key=lambda c: c["mib_per_node_hour"])
    assert placed["nearest"]["mib_per_s"] == nearest["mib_per_s"] and model_of(placed["nearest"]) == model_of(nearest)
    assert (placed["distance_log2"], placed["same_bin"]) == (0.0, True)
    assert placed["best"]["mib_per_s"] == best["mib_per_s"] and model_of(placed["best"]) == model_of(best)
    assert placed["most_efficient"]["mib_per_node_hour"] == efficient["mib_per_node_hour"]
    assert placed["nearest_share_of_best"] == nearest["mib_per_s"] / best["mib_per_s"]
    assert placed["job_share_of_nearest"] == 100.0 / nearest["mib_per_s"]
    assert placed["job"] == {"processes": 4, "processes_per_file": 2.0, "hosts": 2, "name": "file per node",
                             "mib_per_s": 100.0}
    assert placed["grid"]["total_bytes"] == TOTAL and placed["grid"]["nodes"] == 2
    json.dumps(placed, allow_nan=False)


@pytest.mark.parametrize("hosts, nodes", [(1, 1), (2, 2), (8, 2)])
def test_among_equally_near_models_the_one_on_the_jobs_number_of_nodes_is_taken(grid, hosts, nodes):
    """P = 2, k = 2 was measured on one node (two writers, one file) and across two nodes."""
    placed = place_on_grid({"processes_doing_io": 2, "processes_per_file": 2, "hosts": hosts, "name": "shared file"},
                           grid)
    assert (placed["nearest"]["processes"], placed["nearest"]["processes_per_file"], placed["nearest"]["nodes"]) == \
        (2, 2, nodes)
    assert placed["job_share_of_nearest"] is None


def test_a_job_between_cells_goes_to_the_nearest_in_log2(grid):
    """P = 3, k = 1.5 is nearer (4, 2) (0.59 in log2) than (2, 1), (4, 1) or (2, 2) (0.72 and more)."""
    placed = place_on_grid({"processes_doing_io": 3, "processes_per_file": 1.5, "hosts": 2, "name": "subset"}, grid)
    assert (placed["nearest"]["processes"], placed["nearest"]["processes_per_file"]) == (4, 2)
    assert placed["nearest"]["mib_per_s"] == fastest(grid, processes=4, processes_per_file=2)["mib_per_s"]
    assert placed["distance_log2"] == pytest.approx(math.hypot(math.log2(4 / 3), math.log2(2 / 1.5)))
    assert placed["same_bin"]


def test_a_job_larger_than_the_sweep_goes_to_its_edge(grid):
    placed = place_on_grid({"processes_doing_io": 1024, "processes_per_file": 1.0, "hosts": 64,
                            "name": "file per process"}, grid)
    assert model_of(placed["nearest"]) == (2, 2, 2, 1)
    assert placed["distance_log2"] == 8.0 and not placed["same_bin"]


def test_a_job_without_io_has_no_place():
    assert place_on_grid({"processes_doing_io": 0, "name": "no I/O"}, {"cells": []}) is None


def test_the_cell_of_a_real_mpi_job_is_placed(ioassess, grid, tmp_path):
    """8 ranks in a file per node on two simulated hosts (tests/test_mpi.py's program), assessed by
    `ioassess run`: its cell (P = 8, k = 4, 2 hosts) goes to the shared file of the 4-process sweep
    on 2 nodes, one step of P away."""
    (tmp_path / "data").mkdir()
    blocks = []
    for node in range(2):
        blocks += ([":"] if blocks else []) + ["-n", "4", "-env", "IOASSESS_HOSTNAME", f"node{node}",
                                               prog("mpi_layouts"), "node", tmp_path / "data", "4"]
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", shutil.which("mpiexec"), *blocks)
    assert result.returncode == 0, result.stderr
    cell = json.loads((tmp_path / "t" / "assessment.json").read_text())["io_model"]
    placed = place_on_grid(cell, grid)
    assert (placed["job"]["processes"], placed["job"]["processes_per_file"], placed["job"]["hosts"]) == (8, 4.0, 2)
    assert model_of(placed["nearest"]) == (2, 2, 1, 2) and placed["nearest"]["name"] == "shared file"
    assert placed["distance_log2"] == 1.0 and not placed["same_bin"]
