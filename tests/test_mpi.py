"""MPI jobs (MPICH from Debian, installed by `make deps`): one trace per rank with its rank, one
report per job, the job's I/O model named and placed on a site grid measured by `ioassess
iomodels`, and the I/O time of every rank. Several hosts are simulated with MPICH's per-block
environment (`mpiexec -n 4 -env IOASSESS_HOSTNAME node0 ... : -n 4 -env ...`): the recorder
writes IOASSESS_HOSTNAME as the process's host name."""
import html
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

import numpy as np
import pytest

from ioassess import OP_DIRECTION, read_trace_dir
from ioassess.site.iomodels import load_grid, place_on_grid
from ioassess.units import rate_text
from ioassess.inputs.traceformat import OP_LAYER
from recorder_helpers import PROGS, is_ioassess_setting

pytestmark = pytest.mark.mpi

MPI_LAYOUTS = PROGS / "bin" / "mpi_layouts"
RANKS, PER_NODE = 8, 4
BLOCK, BLOCKS, HEAVY = 65536, 16, 64   # as in tests/progs/mpi_layouts.c
STRAGGLERS = "Some ranks spent far longer in I/O than the others"


def on_two_nodes(layout, data_dir, *more):
    """mpiexec's MPMD form: ranks 0-3 on "node0", 4-7 on "node1"; more: mpi_layouts' arguments
    after PER_NODE."""
    blocks = []
    for node in range(RANKS // PER_NODE):
        blocks += [":"] if blocks else []
        blocks += ["-n", str(PER_NODE), "-env", "IOASSESS_HOSTNAME", f"node{node}", str(MPI_LAYOUTS), layout,
                   str(data_dir), str(PER_NODE), *map(str, more)]
    return [shutil.which("mpiexec")] + blocks


def read_json(path):
    with open(path) as f:
        return json.load(f)


def page_text(path):
    """The report's text as a reader sees it: tags dropped, entities decoded, spaces folded."""
    with open(path) as f:
        return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", f.read())).split())


def posix_ops(trace_dir):
    """The POSIX reads, writes and syncs of the traces (not their metadata calls): (process
    ranks, directions, results, start and end in s since the first op: from the epoch, seconds
    as floats would keep only about 0.2 µs)."""
    traces = read_trace_dir(trace_dir)
    ops = traces.ops
    posix = np.array([OP_LAYER[int(op)] == "posix" and OP_DIRECTION[int(op)] != "meta" for op in ops["op"]], bool)
    ranks = np.array([traces.processes[p].rank for p in ops["process"]], np.int64)[posix]
    directions = np.array([OP_DIRECTION[int(op)] for op in ops["op"][posix]])
    start = (ops["start_ns"][posix] - ops["start_ns"].min()) / 1e9
    return ranks, directions, ops["result"][posix], start, start + ops["duration_ns"][posix] / 1e9


@pytest.mark.parametrize("layout, name, per_file", [("fpp", "file per process", 1.0), ("shared", "shared file", 8.0),
                                                    ("node", "file per node", 4.0)])
def test_an_8_rank_job_in_each_layout_is_named_and_counted(ioassess, tmp_path, layout, name, per_file):
    (tmp_path / "data").mkdir()
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", *on_two_nodes(layout, tmp_path / "data"))
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == \
        sorted(f"rank {r} of {RANKS}: wrote 1048576 bytes" for r in range(RANKS))
    with open(tmp_path / "t" / "assessment.json") as f:
        assessment = json.load(f)
    cell = assessment["io_model"]
    assert (cell["name"], cell["processes_doing_io"], cell["processes_per_file"], cell["hosts"]) == \
        (name, RANKS, per_file, 2)
    ranks = sorted((p["rank"], p["hostname"]) for p in assessment["processes"] if p["ops"] >= 32)
    assert ranks == [(r, f"node{r // PER_NODE}") for r in range(RANKS)]
    assert f"<b>{name}</b>" in (tmp_path / "t" / "report.html").read_text()


def test_plain_ld_preload_of_mpiexec_gives_one_trace_per_rank(ioassess, recorder_lib, tmp_path):
    (tmp_path / "data").mkdir()
    env = {k: v for k, v in os.environ.items() if not is_ioassess_setting(k)}
    env.update(LD_PRELOAD=recorder_lib, IOASSESS_TRACE_DIR=str(tmp_path / "t"))
    run = subprocess.run([shutil.which("mpiexec"), "-n", str(RANKS), str(MPI_LAYOUTS), "fpp", str(tmp_path / "data")],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    result = ioassess("report", tmp_path / "t", "-o", tmp_path / "r.html", "--json", tmp_path / "a.json")
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "a.json") as f:
        assessment = json.load(f)
    files = {f["name"]: f for f in assessment["top_files"]}
    for rank in range(RANKS):
        assert files[str(tmp_path / "data" / f"rank.{rank}")]["processes"] == 1
    assert sorted(p["rank"] for p in assessment["processes"] if p["ops"] >= 32) == list(range(RANKS))
    assert assessment["io_model"]["name"] == "file per process"


def test_a_rank_killed_midway_still_gives_a_report_that_names_it(ioassess, tmp_path):
    """Rank 3 sends itself SIGKILL after its writes (a walltime kill); MPICH then kills the
    other ranks too: every one of them is named as ended without finishing."""
    (tmp_path / "data").mkdir()
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", shutil.which("mpiexec"), "-n", str(RANKS),
                      str(MPI_LAYOUTS), "fpp", str(tmp_path / "data"), str(PER_NODE), "3")
    assert result.returncode != 0
    with open(tmp_path / "t" / "assessment.json") as f:
        assessment = json.load(f)
    unfinished = {p["rank"] for p in assessment["job"]["unfinished_processes"]}
    assert 3 in unfinished
    html = (tmp_path / "t" / "report.html").read_text()
    assert "ended without finishing" in html and "rank 3 pid" in html


# ---- the site's I/O-model grid ----

@pytest.fixture(scope="module")
def site_grid(tmp_path_factory):
    """A grid measured by `ioassess iomodels`: 4 ranks on 2 simulated nodes, 16 MiB a model."""
    base = tmp_path_factory.mktemp("grid")
    (base / "data").mkdir()
    env = {k: v for k, v in os.environ.items() if not is_ioassess_setting(k)}
    made = subprocess.run([sys.executable, "-m", "ioassess", "iomodels", "--dir", str(base / "data"), "--total-bytes",
                           "16M", "--processes", "4", "--ranks-per-node", "2", "--repeats", "1", "-o",
                           str(base / "grid.json")], cwd="/", env=env, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    return base / "grid.json"


def placement_sentence(placed):
    def model(m):
        return f"{m['name']}, P = {m['processes']}, k = {m['processes_per_file']:g}"
    return (f"Your model ({model(placed['job'])}) reached {rate_text(placed['job']['mib_per_s'])} here; the nearest "
            f"model measured by the site's sweep ({model(placed['nearest'])}, on {placed['nearest']['nodes']} nodes) "
            f"reached {rate_text(placed['nearest']['mib_per_s'])}; the best model in the sweep "
            f"({model(placed['best'])}, on {placed['best']['nodes']} node{'s' if placed['best']['nodes'] != 1 else ''})"
            f" reached {rate_text(placed['best']['mib_per_s'])}.")


def test_an_mpi_job_is_placed_on_the_site_grid_by_run_and_by_report(ioassess, site_grid, tmp_path):
    """`ioassess run` finds the grid through IOASSESS_SITE_GRID, `ioassess report` is given it:
    both place the file-per-node job (P = 8, k = 4 on 2 hosts) where place_on_grid does, with
    the job's write throughput measured from its traces."""
    (tmp_path / "data").mkdir()
    run = ioassess("run", "--trace-dir", tmp_path / "t", "--", *on_two_nodes("node", tmp_path / "data"),
                   env={"IOASSESS_SITE_GRID": str(site_grid)})
    assert run.returncode == 0, run.stderr
    report = ioassess("report", tmp_path / "t", "--site-grid", site_grid, "-o", tmp_path / "r.html", "--json",
                      tmp_path / "a.json")
    assert report.returncode == 0, report.stderr

    ranks, directions, results, start, end = posix_ops(tmp_path / "t")
    writes = (directions == "write") & (results > 0)
    assert results[writes].sum() == RANKS * BLOCKS * BLOCK
    job_mib_per_s = RANKS * BLOCKS * BLOCK / 2**20 / (end[writes].max() - start[writes].min())
    grid = load_grid(site_grid)
    for page, assessment in ((tmp_path / "t" / "report.html", read_json(tmp_path / "t" / "assessment.json")),
                             (tmp_path / "r.html", read_json(tmp_path / "a.json"))):
        cell = assessment["io_model"]
        assert (cell["name"], cell["processes_doing_io"], cell["processes_per_file"], cell["hosts"]) == \
            ("file per node", RANKS, 4.0, 2)
        assert cell["write_bytes"] == RANKS * BLOCKS * BLOCK
        assert cell["write_mib_per_s"] == pytest.approx(job_mib_per_s, rel=1e-6)
        site = assessment["site_grid"]
        assert site["path"] == str(site_grid) and site["problem"] is None
        placed = place_on_grid(cell, grid, cell["write_mib_per_s"])
        assert site["placement"] == placed
        assert (placed["nearest"]["name"], placed["nearest"]["processes"], placed["nearest"]["processes_per_file"]) == \
            ("shared file", 4, 4)
        assert {(c["processes"], c["processes_per_file"]) for c in site["cells"]} == \
            {(c["processes"], c["processes_per_file"]) for c in grid["cells"]}
        text = page_text(page)
        assert placement_sentence(placed) in text
        provenance = grid["provenance"]
        assert f"measured on {provenance['host']}, {provenance['file_system']['type']} at " \
               f"{provenance['file_system']['mount']}, {provenance['date']}" in text
        # the grid drawn: one tooltip per measured (P, k), the job's cell (8, 4) unmeasured and filled
        grid_svg = next(svg for svg in re.findall(r"<svg.*?</svg>", page.read_text(), re.S) if "I/O model grid" in svg)
        assert len(re.findall(r"<title>[^<]*MiB/s", grid_svg)) == len(site["cells"])


def test_a_bad_grid_file_given_to_report_is_one_line_and_no_report(ioassess, site_grid, tmp_path):
    assert ioassess("run", "--trace-dir", tmp_path / "t", "--", "cat", "/etc/hostname").returncode == 0
    broken = read_json(site_grid)
    broken["cells"][0]["mib_per_s"] = -1
    (tmp_path / "bad.json").write_text(json.dumps(broken))
    for grid, problem in ((tmp_path / "bad.json", "cells[0].mib_per_s: must be a positive number, got -1"),
                          (tmp_path / "missing.json", "no such grid file")):
        result = ioassess("report", tmp_path / "t", "--site-grid", grid, "-o", tmp_path / "r.html", "--json",
                          tmp_path / "a.json")
        assert result.returncode == 2
        assert result.stderr == f"ioassess: {grid}: {problem}\n"
        assert not (tmp_path / "r.html").exists() and not (tmp_path / "a.json").exists()


def test_a_broken_site_grid_costs_run_no_report(ioassess, tmp_path):
    """A broken $IOASSESS_SITE_GRID: the report is written without a placement and says why,
    the one summary line on stderr says it too, and the exit status stays the command's."""
    (tmp_path / "grid.json").write_text("{")
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", "sh", "-c", "cat /etc/hostname; exit 3",
                      env={"IOASSESS_SITE_GRID": str(tmp_path / "grid.json")})
    assert result.returncode == 3
    problem = "invalid JSON: Expecting property name enclosed in double quotes at line 1 column 2"
    (summary,) = result.stderr.splitlines()   # not a terminal: the grid's problem is in the summary line
    assert summary.endswith(f"assessment.json; site grid not used: {tmp_path / 'grid.json'}: {problem}")
    assessment = read_json(tmp_path / "t" / "assessment.json")
    assert assessment["site_grid"] == {"path": str(tmp_path / "grid.json"), "problem": problem, "placement": None,
                                       "cells": []}
    assert f"The site's I/O-model grid was not used: {tmp_path / 'grid.json'}: {problem}" in \
        page_text(tmp_path / "t" / "report.html")


# ---- per rank ----

def test_the_rank_that_does_most_io_is_the_slowest_and_the_spread_is_the_traces(ioassess, tmp_path):
    """Rank 5 writes and reads 64 times the blocks of the others: it is the slowest, and the
    mean, median and imbalance of the per-rank I/O time are those of the traces' op times."""
    heavy = 5
    (tmp_path / "data").mkdir()
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--",
                      *on_two_nodes("fpp", tmp_path / "data", -1, heavy))
    assert result.returncode == 0, result.stderr
    assert f"rank {heavy} of {RANKS}: wrote {BLOCKS * HEAVY * BLOCK} bytes" in result.stdout.splitlines()
    ranks, directions, _, start, end = posix_ops(tmp_path / "t")
    outside = ranks < 0   # mpiexec and its proxy: started as no rank, so part of none
    assert outside.any()
    io_s = np.bincount(ranks[~outside], (end - start)[~outside], RANKS)
    assert int(np.argmax(io_s)) == heavy

    assessment = read_json(tmp_path / "t" / "assessment.json")
    view = assessment["per_process"]
    assert (view["unit"], view["count"], view["shared"]) == ("rank", RANKS, None)
    io = view["io"]
    assert (io["max"]["rank"], io["max"]["hostname"]) == (heavy, f"node{heavy // PER_NODE}")
    assert io["max"]["seconds"] == pytest.approx(io_s[heavy], rel=1e-6)
    assert io["mean_s"] == pytest.approx(io_s.mean(), rel=1e-6)
    assert io["median_s"] == pytest.approx(statistics.median(io_s), rel=1e-6)
    assert io["imbalance"] == pytest.approx(io_s[heavy] / io_s.mean(), rel=1e-6) and io["imbalance"] > 2
    lost = np.zeros(RANKS)   # a rank is all the processes with its rank
    for row in assessment["processes"]:
        if row["rank"] >= 0:
            lost[row["rank"]] += row["lost_high_s"]
    assert view["lost"]["mean_s"] == pytest.approx(lost.mean(), rel=1e-6)
    assert view["plot"]["io_s_mean"] == pytest.approx(io_s, rel=1e-6)
    named = [u["rank"] for u in view["most_lost"]]
    assert named == [int(r) for r in np.argsort(-lost, kind="stable")[:len(named)]]
    text = page_text(tmp_path / "t" / "report.html")
    assert "I/O time per rank" in text
    # the ranks append and re-read what they wrote, cached: time lost only where an op's
    # duration said storage
    assert ("that lost most: rank " in text) == bool(named) == bool(lost.any())
    # mpiexec and its proxies are launchers: apart from the job's ranks, in the count and the table
    launchers = [p.pid for p in read_trace_dir([tmp_path / "t"]).processes if p.rank < 0]
    assert launchers and (assessment["job"]["nprocs"], assessment["job"]["launchers"]) == (RANKS, len(launchers))
    assert {row["pid"] for row in assessment["processes"] if row["launcher"]} <= set(launchers)
    assert all(row["launcher"] == (row["rank"] < 0) for row in assessment["processes"])
    assert f"{RANKS} ({RANKS} with I/O, on 2 hosts); besides them {len(launchers)} launcher processes" in text


def test_a_rank_that_does_far_more_io_than_the_others_is_a_straggler_finding(ioassess, tmp_path):
    """Rank 2 writes and reads 256 times the blocks of the others, to a file of its own: the
    finding "Some ranks spent far longer in I/O than the others" names it first with its file,
    says its work is uneven (it moved more than the mean rank), and its seconds at stake are the
    traces' slowest rank's I/O time less the mean rank's."""
    heavy, factor = 2, 256
    (tmp_path / "data").mkdir()
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--",
                      *on_two_nodes("fpp", tmp_path / "data", -1, heavy, factor))
    assert result.returncode == 0, result.stderr
    ranks, directions, moved, start, end = posix_ops(tmp_path / "t")
    ranked = ranks >= 0
    io_s = np.bincount(ranks[ranked], (end - start)[ranked], RANKS)
    moved_bytes = np.bincount(ranks[ranked], np.maximum(moved[ranked], 0), RANKS)
    assert moved_bytes[heavy] == 2 * BLOCKS * factor * BLOCK    # written and read back
    slowest = int(np.argmax(io_s))

    assessment = read_json(tmp_path / "t" / "assessment.json")
    stragglers = assessment["per_process"]["stragglers"]
    assert stragglers["ranks"][0]["rank"] == slowest == heavy
    assert stragglers["ranks"][0]["bytes"] == moved_bytes[heavy]
    assert stragglers["mean_s"] == pytest.approx(io_s.mean(), rel=1e-6)
    assert stragglers["files"][0]["name"] == str(tmp_path / "data" / f"rank.{heavy}")
    (found,) = [r for r in assessment["recommendations"] if r["title"] == STRAGGLERS]
    assert found["level"] == "high" and found["code"] is None
    assert found["at_stake_s"] == pytest.approx(io_s[heavy] - io_s.mean(), rel=0.05)
    assert found["ranks"][0]["rank"] == heavy and found["files"][0]["name"] == str(tmp_path / "data" / f"rank.{heavy}")
    assert found["numbers"]["slowest_bytes"] > found["numbers"]["mean_bytes"] and "split unevenly" in found["text"]
    assert "The slowest ranks: rank 2 on node0" in page_text(tmp_path / "t" / "report.html")


def test_ranks_with_equal_little_io_are_a_straggler_finding_only_by_the_rule(ioassess, tmp_path):
    """Every rank writes and reads its 1 MiB: the finding fires exactly when the traces' slowest
    rank's excess over the mean is above 15 % of its time and at least 5 % of the runtime
    (a rank stalled for long on a loaded machine), which an idle machine never gives."""
    (tmp_path / "data").mkdir()
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", *on_two_nodes("fpp", tmp_path / "data"))
    assert result.returncode == 0, result.stderr
    ranks, _, _, start, end = posix_ops(tmp_path / "t")
    io_s = np.bincount(ranks[ranks >= 0], (end - start)[ranks >= 0], RANKS)
    assessment = read_json(tmp_path / "t" / "assessment.json")
    excess = io_s.max() - io_s.mean()
    expected = excess > 0.15 * io_s.max() and excess >= 0.05 * assessment["job"]["runtime_s"]
    fired = STRAGGLERS in {r["title"] for r in assessment["recommendations"]}
    assert fired == expected, (io_s, assessment["job"]["runtime_s"])
