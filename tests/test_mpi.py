"""MPI jobs (MPICH from Debian, installed by `make deps`): one trace per rank with its rank, one
report per job, and the job's I/O model named. Several hosts are simulated with MPICH's
per-block environment (`mpiexec -n 4 -env IOASSESS_HOSTNAME node0 ... : -n 4 -env ...`): the
recorder writes IOASSESS_HOSTNAME as the process's host name."""
import json
import os
import shutil
import subprocess

import pytest

from recorder_helpers import PROGS

MPI_LAYOUTS = PROGS / "bin" / "mpi_layouts"
RANKS, PER_NODE = 8, 4


def on_two_nodes(layout, data_dir):
    """mpiexec's MPMD form: ranks 0-3 on "node0", 4-7 on "node1"."""
    blocks = []
    for node in range(RANKS // PER_NODE):
        blocks += [":"] if blocks else []
        blocks += ["-n", str(PER_NODE), "-env", "IOASSESS_HOSTNAME", f"node{node}", str(MPI_LAYOUTS), layout,
                   str(data_dir), str(PER_NODE)]
    return [shutil.which("mpiexec")] + blocks


@pytest.mark.parametrize("layout, name, per_file", [("fpp", "file per process", 1.0), ("shared", "shared file", 8.0),
                                                    ("node", "file per node", 4.0)])
def test_an_8_rank_job_in_each_layout_is_named_and_counted(ioassess, tmp_path, layout, name, per_file):
    (tmp_path / "data").mkdir()
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", *on_two_nodes(layout, tmp_path / "data"))
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == sorted(f"rank {r} of {RANKS}: wrote 1048576 bytes" for r in range(RANKS))
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
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOASSESS_")}
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
