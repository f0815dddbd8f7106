"""The report, end to end: real workloads under `ioassess run`, then `ioassess report` as users
run it; the assessment is read back from its JSON."""
import json
import os
import re
import signal
import stat
import sys

import darshan
import numpy as np
import pytest

from ioassess import read_trace_dir
from ioassess.site.training import workload_program_path
from ioassess.report.render import CLASS_LABELS, finding_number
from ioassess.units import bytes_label, bytes_text, count_text, seconds_text, share_text
from recorder_helpers import evict, prog, random_data_file, shipped_darshan_logs, without_meta

FILE_BYTES = 512 << 20   # 8192 slots of READ_BYTES: few reads find a page an earlier read brought in
READ_BYTES = 64 << 10
READS = 1000


def read_json(path):
    def refuse(constant):
        raise AssertionError(f"{path}: {constant} is not JSON")
    with open(path) as f:
        return json.load(f, parse_constant=refuse)


def random_reads(ioassess, data_file, trace_dir, model):
    """READS random 64 KiB preads of data_file under `ioassess run`, judged by model; its assessment."""
    result = ioassess("run", "--trace-dir", trace_dir, "--model", model, "--", workload_program_path(),
                      "--file", data_file,
                      "--op", "read", "--size", READ_BYTES, "--file-layout", "rnd", "--repeats", READS,
                      "--mem-buffer", "1m", "--seed", 7)
    assert result.returncode == 0, result.stderr
    return read_json(trace_dir / "assessment.json")


def class_shares(assessment, direction):
    rows = [r for r in assessment["classes"] if r["direction"] == direction]
    ops = sum(r["ops"] for r in rows)
    return {r["class"]: r["ops"] / ops for r in rows}


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    return random_data_file(tmp_path_factory.mktemp("data") / "data.bin", FILE_BYTES)


def test_cached_reads_lose_nothing_and_uncached_reads_lose_time(ioassess, data_file, tmp_path, calibrated_model):
    """Judged by the model calibrated on this machine, as the report chooses it for a job here."""
    with open(data_file, "rb") as f:
        while f.read(16 << 20):
            pass
    cached = random_reads(ioassess, data_file, tmp_path / "cached", calibrated_model.path)
    evict(str(data_file))
    uncached = random_reads(ioassess, data_file, tmp_path / "uncached", calibrated_model.path)

    # served from the page cache: cached (or memory speed), and where a read stalled (the kernel
    # saw its pages cached) a stall; never storage
    shares = class_shares(cached, "read")
    assert shares.get("cached", 0) + shares.get("memcpy", 0) + shares.get("stall", 0) >= 0.95, cached["classes"]
    assert cached["headline"]["lost_by_cause"]["storage"] <= 0.05 * cached["headline"]["io_s"], cached["headline"]
    assert class_shares(uncached, "read").get("uncached", 0) >= 0.8, uncached["classes"]
    head_cached, head_uncached = cached["headline"], uncached["headline"]
    # near zero: a single op delayed by a few ms (the VM's scheduling) may weigh as much as all
    # the other cached reads together, so the bound is relative to the uncached run
    assert head_uncached["lost_low_s"] >= 0.5 * head_uncached["io_s"], head_uncached
    assert head_cached["lost_high_s"] <= 0.1 * head_uncached["lost_low_s"], (head_cached, head_uncached)
    assert not head_cached["estimate"] and cached["tier"] == "ops"
    (top,) = [f for f in uncached["top_files"] if f["name"] == str(data_file)]
    assert top["ops"] == READS and top["bytes"] == READS * READ_BYTES
    assert top["pattern"]["read_share"] == 1.0 and top["pattern"]["consecutive_share"] < 0.1
    assert 0.2 < top["pattern"]["sequential_share"] < 0.8   # Darshan's sequential: past the previous end
    # waiting for storage: uncached, or slower than that on a loaded machine
    assert head_uncached["lost_by_cause"]["storage"] >= 0.8 * head_uncached["lost_low_s"], head_uncached
    assert {"Most lost time is uncached I/O", "Some ops were slower than uncached I/O"} & \
        {finding["title"] for finding in uncached["recommendations"]}
    html = (tmp_path / "uncached" / "report.html").read_text()
    assert str(data_file) in html and "uncached" in html


def test_report_command_writes_html_and_json(ioassess, tmp_path):
    trace_dir = tmp_path / "traces"
    assert ioassess("run", "--trace-dir", trace_dir, "--", "sh", "-c", "cat /etc/passwd >/dev/null").returncode == 0
    result = ioassess("report", trace_dir, "-o", tmp_path / "r.html", "--json", tmp_path / "a.json",
                      "--model", "mistral-lustre-2015")
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[-1] == f"ioassess: wrote {tmp_path / 'r.html'} and {tmp_path / 'a.json'}"
    assessment = read_json(tmp_path / "a.json")
    assert assessment["format"] == "ioassess-assessment" and assessment["model"]["name"] == "mistral-lustre-2015"
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]


def test_the_runtimes_own_files_are_shown_apart_from_the_jobs(ioassess, tmp_path):
    """A Python job importing a module of its site-packages (compiling it into __pycache__) and
    reading its data: the top files are the job's; the module and its compiled copy are counted
    apart, and in the totals."""
    packages = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    packages.mkdir(parents=True)
    (packages / "helper.py").write_text("VALUE = 42\n" * 200)
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(1 << 16))
    script = f"import helper; open({str(data)!r}, 'rb').read(); print(helper.VALUE)"
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", sys.executable, "-c", script,
                      env={"PYTHONPATH": str(packages)})
    assert result.returncode == 0 and result.stdout == "42\n", result.stderr
    assessment = read_json(tmp_path / "t" / "assessment.json")
    names = [f["name"] for f in assessment["top_files"]]
    assert str(data) in names and not [name for name in names if "site-packages" in name or "__pycache__" in name]
    runtime = assessment["runtime_files"]
    assert runtime["files"] >= 2 and runtime["bytes"] >= len("VALUE = 42\n" * 200)   # helper.py, its .pyc
    assert "Not in the table: the files of a language runtime" in (tmp_path / "t" / "report.html").read_text()


def test_the_text_summary_is_the_assessments_in_a_few_lines(ioassess, tmp_path):
    """--format text: the summary on standard output (the job's command with its control
    characters escaped, its I/O time and time lost as the assessment has them), no HTML report
    unless -o asks for one."""
    data = tmp_path / "data"
    data.write_bytes(os.urandom(1 << 20))
    traces = tmp_path / "t"
    assert ioassess("run", "--trace-dir", traces, "--", "sh", "-c", 'cat "$0" >/dev/null', data,
                    "\x1b[31mred").returncode == 0
    result = ioassess("report", traces, "--format", "text", "--json", tmp_path / "a.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "report.html").exists() and result.stderr == f"ioassess: wrote {tmp_path / 'a.json'}\n"
    a = read_json(tmp_path / "a.json")
    lines = result.stdout.splitlines()
    assert lines[0].startswith("ioassess: sh -c ") and "\\x1b[31mred" in lines[0] and "\x1b" not in result.stdout
    assert lines[1] == (f"  I/O time {seconds_text(a['headline']['io_s'])}; lost compared with cached I/O "
                        f"{seconds_text(a['headline']['lost_high_s'])} "
                        f"({share_text(a['headline']['lost_share_of_io'])} of the I/O time)")
    first = [f"{r['title']}: {seconds_text(r['at_stake_s'])} at stake" for r in a["recommendations"] if r["at_stake_s"]]
    assert [line.split(". ", 1)[1] for line in lines if line.startswith("    ")] == first[:3]
    html = ioassess("report", traces, "--format", "text", "-o", tmp_path / "r.html", cwd=tmp_path)
    assert html.stdout.splitlines()[-1] == f"  the report: {tmp_path / 'r.html'}" and (tmp_path / "r.html").exists()


def test_data_moved_through_stdio_is_a_finding_as_drishti_makes_it(ioassess, tmp_path):
    """stdio_copy copies 4 MiB with fread/fwrite, then reads the file again with read(): 2/3 of the
    bytes went through stdio, above Drishti's 10 % (S01); at stake, the stdio calls' time. A job
    with POSIX calls only (cat) has no such finding."""
    src = tmp_path / "in"
    src.write_bytes(os.urandom(4 << 20))
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", prog("stdio_copy"), src, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    a = read_json(tmp_path / "t" / "assessment.json")
    (found,) = [r for r in a["recommendations"] if r["title"] == "Much of the data went through stdio"]
    stdio = [row["stdio"] for row in a["layers"] if row["stdio"]]
    assert found["numbers"]["stdio_bytes"] == sum(cell["bytes"] for cell in stdio) == 2 * (4 << 20)
    assert found["numbers"]["stdio_share"] == pytest.approx(2 / 3, rel=0.01)
    assert found["at_stake_s"] == pytest.approx(sum(cell["seconds"] for cell in stdio))
    posix_only = ioassess("run", "--trace-dir", tmp_path / "p", "--", "sh", "-c", 'cat "$0" >/dev/null', src)
    assert posix_only.returncode == 0, posix_only.stderr
    titles = [r["title"] for r in read_json(tmp_path / "p" / "assessment.json")["recommendations"]]
    assert "Much of the data went through stdio" not in titles


def test_run_writes_the_report_also_when_the_command_fails(ioassess, tmp_path):
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", "sh", "-c", "cat /etc/hostname; exit 5")
    assert result.returncode == 5
    assessment = read_json(tmp_path / "t" / "assessment.json")
    assert assessment["job"]["processes_recorded"] >= 2
    assert (tmp_path / "t" / "report.html").stat().st_size > 0


def bad_input(directory, kind):
    """A path that is not a usable input, of the given kind."""
    path = directory / {"missing": "missing", "empty directory": "empty", "not a trace": "x.iot",
                        "unknown kind": "notes.txt"}[kind]
    if kind == "empty directory":
        path.mkdir()
    elif kind != "missing":
        path.write_text("not a trace at all, just some text")
    return path


@pytest.mark.parametrize("kind, problem", [
    ("missing", "no such file or directory"),
    ("empty directory", "no trace files (*.iot) in this directory"),
    ("not a trace", "bad magic"),
    ("unknown kind", "not a trace directory"),
])
def test_bad_input_gets_one_line_naming_it_and_exit_2(ioassess, tmp_path, kind, problem):
    path = bad_input(tmp_path, kind)
    (tmp_path / "report.html").write_text("an earlier report")
    result = ioassess("report", path, "-o", tmp_path / "report.html")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"ioassess: {path}") and problem in line
    assert (tmp_path / "report.html").read_text() == "an earlier report"


def test_unknown_model_gets_one_line_and_exit_2(ioassess, tmp_path):
    trace_dir = tmp_path / "traces"
    ioassess("run", "--trace-dir", trace_dir, "--", "true")
    result = ioassess("report", trace_dir, "--model", "no-such-model", "-o", tmp_path / "r.html")
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert "no-such-model.json: no such model file (available models:" in result.stderr
    assert not (tmp_path / "r.html").exists()


def test_ops_past_the_record_cap_are_estimated_as_an_interval(ioassess, tmp_path):
    data = tmp_path / "data"
    data.write_bytes(os.urandom(4 << 20))
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", "dd", f"if={data}", "of=/dev/null", "bs=4k",
                      env={"IOASSESS_MAX_RECORDS": "100"})
    assert result.returncode == 0
    assessment = read_json(tmp_path / "t" / "assessment.json")
    assert assessment["tier"] == "mixed" and assessment["headline"]["estimate"]
    estimated = [r for r in assessment["classes"] if r["class"] == "counters (estimate)"]
    per_op = [r for r in assessment["classes"] if r["class"] != "counters (estimate)"]
    # dd's reads: 1024 blocks of 4 KiB and one at the end of the file (writes to /dev/null are
    # not recorded); the first 100 ops are kept one by one, its opens (metadata calls) among them
    kept_metadata = sum(k["calls"] for k in assessment["metadata"]["kinds"])
    assert sum(r["ops"] for r in per_op) + kept_metadata == 100 and kept_metadata > 0
    assert sum(r["ops"] for r in estimated) == 1025 - sum(r["ops"] for r in per_op if r["direction"] == "read")
    for row in estimated:
        assert 0 <= row["lost_low_s"] <= row["lost_high_s"] <= row["seconds"] + 1e-12
    head = assessment["headline"]
    assert head["lost_low_s"] <= head["lost_high_s"] and head["if_cached_low_s"] <= head["if_cached_high_s"]


def test_a_process_killed_midway_is_named_in_the_report(ioassess, tmp_path):
    script = "dd if=/dev/zero of=/dev/null bs=1 count=100 2>/dev/null; kill -KILL $$"
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", "sh", "-c", script)
    assert result.returncode == -signal.SIGKILL   # ioassess run ends by the command's signal
    assessment = read_json(tmp_path / "t" / "assessment.json")
    (killed,) = assessment["job"]["unfinished_processes"]
    assert killed["pid"] > 0
    html = (tmp_path / "t" / "report.html").read_text()
    assert "1 process ended without finishing" in html and f"pid {killed['pid']}" in html



@pytest.mark.parametrize("seconds, text", [
    (86400, "24.0 h"), (3600, "1.00 h"), (59.99, "1.00 min"), (100.4, "1.67 min"), (12.3456, "12.3 s"),
    (0.9996, "1.00 s"), (0.0999, "99.9 ms"), (0.0009996, "1.00 ms"), (0.00161, "1.61 ms"), (1.5e-7, "150 ns"),
    (0, "0 ns"), (None, "–")])
def test_durations_read_as_three_digits_in_the_unit_that_fits(seconds, text):
    assert seconds_text(seconds) == text


@pytest.mark.parametrize("count, noun, text", [
    (1, "file", "1 file"), (0, "file", "0 files"), (2, "process", "2 processes"), (1, "process", "1 process"),
    (3, "launcher process", "3 launcher processes"), (7, "fsync or fdatasync call", "7 fsync or fdatasync calls"),
    (2, "rank", "2 ranks")])
def test_counts_take_the_plural_of_their_last_word(count, noun, text):
    assert count_text(count, noun) == text


@pytest.mark.parametrize("key, value, text", [
    ("uncached_ops", 4076, "uncached ops: 4076"), ("lost_s", 1.234, "lost: 1.23 s"),
    ("lost_share_of_runtime", 0.12, "lost share of runtime: 12.0 %"),
    ("small_files_bytes", 1536, "small files bytes: 1.5 KiB"),
    ("worst_file", "/scratch/x", "worst file: /scratch/x"), ("slowest_rank", 3, "slowest rank: 3")])
def test_the_numbers_behind_a_finding_read_with_their_units(key, value, text):
    assert finding_number(key, value) == text


@pytest.mark.parametrize("size, value, label", [
    (512, "512 B", "512 B"), (1536, "1.5 KiB", "1536 B"), (1 << 20, "1.0 MiB", "1 MiB"),
    (64 << 30, "64.0 GiB", "64 GiB"), (5 << 40, "5.0 TiB", "5120 GiB")])
def test_sizes_read_in_powers_of_1024(size, value, label):
    assert (bytes_text(size), bytes_label(size)) == (value, label)


@pytest.mark.slow
def test_a_trace_of_ten_million_ops_gives_a_report_under_3_mb(ioassess, tmp_path):
    data = tmp_path / "data"
    data.write_bytes(os.urandom(1 << 20))
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", workload_program_path(), "--file", data,
                      "--size", 1, "--file-layout", "rnd", "--repeats", 10_000_000, "--mem-buffer", "1m",
                      env={"IOASSESS_MAX_RECORDS": str(20_000_000)})
    assert result.returncode == 0, result.stderr
    # the report of this trace takes seconds, but stderr is not a terminal (as a batch job's output
    # file): no progress bar, only the summary line
    trace_dir = tmp_path / "t"
    assert result.stderr == (f"ioassess: traces of 1 process in {trace_dir}; wrote {trace_dir / 'report.html'} "
                             f"and {trace_dir / 'assessment.json'}\n")
    assessment = read_json(tmp_path / "t" / "assessment.json")
    assert assessment["scatter"]["ops_total"] >= 10_000_000 and assessment["tier"] == "ops"
    size = (tmp_path / "t" / "report.html").stat().st_size
    assert 10_000 < size < 3 << 20
    html = (tmp_path / "t" / "report.html").read_text()
    assert f"{len(assessment['scatter']['size'])} of {assessment['scatter']['ops_total']} ops drawn" in html


DXT_LOGS = {"dxt.darshan", "ior_hdf5_example.darshan", "sample-dxt-simple.darshan"}


@pytest.mark.parametrize("log", shipped_darshan_logs(), ids=os.path.basename)
def test_every_shipped_darshan_log_gets_a_report(ioassess, tmp_path, log):
    result = ioassess("report", log, "-o", tmp_path / "r.html", "--json", tmp_path / "a.json")
    assert "Traceback" not in result.stderr
    if result.returncode == 2:
        (line,) = result.stderr.splitlines()
        assert line.startswith(f"ioassess: {log}: ")
        return
    assert result.returncode == 0, result.stderr
    assessment = read_json(tmp_path / "a.json")
    html = (tmp_path / "r.html").read_text()
    assert assessment["job"]["inputs"][0]["kind"] == "darshan"
    processes = len(assessment["processes"])
    assert ("The one process with I/O" in html) == (processes == 1)
    assert (f"The {processes} processes with I/O" in html) == (1 < processes <= 20)
    counted = "processes|ranks|files|ops|calls|paths|threads|hosts|records|intervals|bytes"
    assert not re.search(rf"\b(1 ({counted})|The 0 [a-z]+)\b", re.sub(r"<[^>]+>", " ", html)), "a wrong plural"
    check_per_rank_view_of_darshan(assessment, html)
    check_darshan_unknowns_and_counts(log, assessment, html)
    if os.path.basename(log) in DXT_LOGS:
        assert assessment["tier"] in ("ops", "mixed") and assessment["scatter"]["ops_total"] > 0
        assert "ops drawn" in html
        # each scatter plot's legend counts a class's ops as the classes table does, and says how many are drawn
        plots = re.findall(r"<title>durations of (read|write)s against access size, by class</title>(.*?)</svg>",
                           html, re.S)
        assert plots
        for direction, svg in plots:
            for label, total, drawn in re.findall(r">([a-z ]+[a-z]) \((\d+)(?:, (\d+) drawn)?\)<", svg):
                cls = {v: k for k, v in CLASS_LABELS.items()}[label]
                assert int(total) == sum(r["ops"] for r in assessment["classes"]
                                         if r["class"] == cls and r["direction"] == direction)
                assert not drawn or int(drawn) < int(total)
    else:
        assert assessment["tier"] in ("counters", "none")
        assert not assessment["scatter"]["ops_total"] and "No per-op timings in the inputs." in html
        if assessment["tier"] == "counters":
            assert assessment["headline"]["estimate"]
            assert any(r["title"] == "Estimates from counters only" for r in assessment["recommendations"])


def check_darshan_unknowns_and_counts(log, assessment, html):
    """What Darshan does not record is unknown, never 0; the processes with I/O are the same in
    the Job table and the I/O-model section; collective MPI-IO calls and the consecutive and
    sequential shares of the files are Darshan's counts."""
    job = assessment["job"]
    assert job["processes_with_io"] == assessment["io_model"]["processes_doing_io"]
    assert all(p["pid"] is None for p in assessment["processes"]) and not re.search(r"\bpid 0\b", html)
    if not job["hosts"]:
        assert "hosts unknown" in html
    if assessment["tier"] == "counters":
        assert all(row["seconds"] is None for row in assessment["sizes"])
        # the per-op columns are unknown, not 0: the page shows the counted ones only
        assert all(row["read_ops"] is None and row["classes"] is None for row in assessment["sizes"])
        if assessment["sizes"]:
            sizes = html[html.index('<h2 id="sizes">'):html.index('<h2 id="timeline">')]
            assert "Known from Darshan's counters only" in sizes and "<th>time lost</th>" not in sizes
            assert sum(row["read_ops_counted"] + row["write_ops_counted"] for row in assessment["sizes"]) > 0
    view = assessment["per_process"]
    named = {record[end]["rank"] for record in (view["shared"]["records"] if view and view["shared"] else ())
             for end in ("slowest", "fastest") if record[end]["seconds"] > 0}
    assert named <= {row["rank"] for row in assessment["processes"] if row["shared_s"] > 0}
    with darshan.DarshanReport(log, read_all=True) as report:
        frames = {m: report.records[m].to_df()["counters"] for m in ("POSIX", "MPI-IO") if m in report.records}
        names = report.name_records
    layers = {row["direction"]: row["mpiio"] for row in assessment["layers"] if row["mpiio"]}
    for direction, counted in layers.items():
        if direction != "sync":
            assert counted["collective_ops_counted"] == frames["MPI-IO"][f"MPIIO_COLL_{direction.upper()}S"].sum()
    posix = frames.get("POSIX")
    for row in assessment["top_files"] if posix is not None else ():
        here = posix[[names[i] == row["name"] for i in posix["id"]]]
        ops = (here["POSIX_READS"] + here["POSIX_WRITES"]).sum()
        if ops:
            assert row["pattern"]["consecutive_share"] == \
                pytest.approx((here["POSIX_CONSEC_READS"] + here["POSIX_CONSEC_WRITES"]).sum() / ops)
            assert row["pattern"]["sequential_share"] == \
                pytest.approx((here["POSIX_SEQ_READS"] + here["POSIX_SEQ_WRITES"]).sum() / ops)


def test_a_shared_file_record_is_every_ranks_io_and_names_its_slowest_rank(ioassess, tmp_path):
    """PyDarshan's example.darshan: 2048 ranks wrote one file through collective MPI-IO, reduced
    by Darshan into one shared record per layer. Every rank did I/O; the slowest process is
    Darshan's slowest rank with its time; its MPI-IO time and pid are unknown."""
    log = next(p for p in shipped_darshan_logs() if os.path.basename(p) == "example.darshan")
    result = ioassess("report", log, "-o", tmp_path / "r.html", "--json", tmp_path / "a.json")
    assert result.returncode == 0, result.stderr
    assessment, html = read_json(tmp_path / "a.json"), (tmp_path / "r.html").read_text()
    with darshan.DarshanReport(log, read_all=True) as report:
        frames = report.records["POSIX"].to_df()
        coll_writes = int(report.records["MPI-IO"].to_df()["counters"]["MPIIO_COLL_WRITES"].sum())
    counters, fcounters = frames["counters"], frames["fcounters"]
    shared = int(np.flatnonzero(counters["rank"] == -1)[0])
    slowest, fastest = int(counters["POSIX_SLOWEST_RANK"][shared]), int(counters["POSIX_FASTEST_RANK"][shared])
    assert (assessment["job"]["nprocs"], assessment["job"]["processes_with_io"]) == (2048, 2048)
    assert "2048 (2048 with I/O, hosts unknown)" in html
    critical = assessment["headline"]["critical_path"]
    assert critical["rank"] == slowest and critical["pid"] is None and critical["mpiio_s"] is None
    # the slowest rank's time on the file, less its metadata part (the record's share of it)
    io_s = fcounters["POSIX_F_READ_TIME"][shared] + fcounters["POSIX_F_WRITE_TIME"][shared]
    io_part = io_s / (io_s + fcounters["POSIX_F_META_TIME"][shared])
    assert critical["io_s"] == critical["shared_s"] == \
        pytest.approx(fcounters["POSIX_F_SLOWEST_RANK_TIME"][shared] * io_part, rel=1e-12)
    head = assessment["headline"]
    assert 0 < critical["lost_low_s"] <= critical["lost_high_s"] <= critical["io_s"] < head["lost_low_s"]
    assert f"rank {slowest}, pid unknown" in html
    (record,) = assessment["per_process"]["shared"]["records"]
    assert (record["slowest"]["rank"], record["fastest"]["rank"]) == (slowest, fastest)
    assert record["fastest"]["seconds"] == fcounters["POSIX_F_FASTEST_RANK_TIME"][shared]
    assert f"slowest rank {slowest}" in html and f"fastest rank {fastest}" in html
    assert fcounters["POSIX_F_VARIANCE_RANK_TIME"][shared] == 0 and record["std_s"] is None   # not computed
    assert "standard deviation over the ranks" not in html
    (write,) = [row["mpiio"] for row in assessment["layers"] if row["direction"] == "write"]
    assert write["collective_ops_counted"] == coll_writes == 16384
    assert f"{coll_writes} of {write['ops']} calls" in html
    pattern = assessment["top_files"][0]["pattern"]
    assert pattern["consecutive_share"] == 0
    assert pattern["sequential_share"] == counters["POSIX_SEQ_WRITES"][shared] / counters["POSIX_WRITES"][shared]


def test_reading_a_file_in_order_is_consecutive_as_darshan_counts_it(ioassess, tmp_path):
    """dd reads 128 blocks one after the other, then once more at the end of the file (0 bytes):
    every read but the first (at offset 0, which follows nothing) starts where the previous
    ended, 128 of 129, as Darshan counts them; none starts past it."""
    data = tmp_path / "data"
    data.write_bytes(os.urandom(128 * 4096))
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", "dd", f"if={data}", "of=/dev/null", "bs=4096")
    assert result.returncode == 0, result.stderr
    assessment = read_json(tmp_path / "t" / "assessment.json")
    (row,) = [f for f in assessment["top_files"] if f["name"] == str(data)]
    assert row["pattern"]["source"] == "ops"
    assert row["pattern"]["consecutive_share"] == row["pattern"]["sequential_share"] == pytest.approx(128 / 129)


def check_per_rank_view_of_darshan(assessment, html):
    """Every rank of the log's job counts; I/O in records shared by all ranks (rank -1) is no
    rank's but for the fastest and the slowest rank's own time on each: said, and the ranks' I/O
    plus the part left out is all the I/O."""
    view = assessment["per_process"]
    if view is None:
        assert assessment["headline"]["io_s"] == 0
        return
    assert (view["unit"], view["count"]) == ("rank", assessment["job"]["nprocs"])
    own = view["io"]["mean_s"] * view["count"] if view["io"] else 0.0
    shared = view["shared"]["left_out_s"] if view["shared"] else 0.0
    assert own + shared == pytest.approx(assessment["headline"]["io_s"], rel=1e-9)
    if view["shared"]:
        assert "are in records shared by all ranks" in html
    if view["io"] is None:
        assert "no rank has I/O of its own in the inputs, so the time of each rank is not known" in html
        assert view["shared"] and view["plot"] is None
    else:
        assert len(view["plot"]["start"]) <= 200
        assert view["io"]["imbalance"] >= 1


def test_thousands_of_processes_are_drawn_in_bins_with_their_maximum(ioassess, tmp_path):
    """450 processes read a file: the per-process plot draws bins of 3 (by pid), each the mean
    and the maximum of its processes' I/O time, as the traces give it."""
    data = tmp_path / "data"
    data.write_bytes(os.urandom(100_000))
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", "sh", "-c",
                      'for i in $(seq 450); do cat "$0" >/dev/null; done', data)
    assert result.returncode == 0, result.stderr
    traces = without_meta(read_trace_dir(tmp_path / "t"))   # I/O time: the reads (the shell has metadata ops only)
    pids = np.array([traces.processes[p].pid for p in traces.ops["process"]])
    readers, io_ns = np.unique(pids, return_inverse=True)
    io_s = np.bincount(io_ns, traces.ops["duration_ns"]) / 1e9   # ascending pids, as the plot's
    assert len(readers) == 450

    view = read_json(tmp_path / "t" / "assessment.json")["per_process"]
    assert (view["unit"], view["count"]) == ("process", 450)
    plot = view["plot"]
    assert plot["units_per_bin"] == 3 and plot["start"] == list(range(0, 450, 3))
    assert plot["io_s_mean"] == pytest.approx(io_s.reshape(-1, 3).mean(axis=1), rel=1e-9)
    assert plot["io_s_max"] == pytest.approx(io_s.reshape(-1, 3).max(axis=1), rel=1e-9)
    assert view["io"]["max"]["pid"] == int(readers[np.argmax(io_s)])
    assert view["io"]["imbalance"] == pytest.approx(io_s.max() / io_s.mean(), rel=1e-9)
    page = (tmp_path / "t" / "report.html").read_text()
    (plot_svg,) = [svg for svg in re.findall(r"<svg.*?</svg>", page, re.S) if "per process" in svg]
    assert "mean of 3 processes a bar" in plot_svg and "slowest process of a bin" in plot_svg
    assert len(plot_svg) < 40_000
    assert "The 20 processes that lost most time, of 450 with I/O." in page   # not the shell: metadata only
    # a file system is one, whether its paths were opened or only named (no device then)
    choice = read_json(tmp_path / "t" / "assessment.json")["model"]["choice"]
    places = [(fs["type"], fs["mount"]) for fs in [choice["file_system"], *choice["other_file_systems"]]]
    assert len(places) == len(set(places)), places


def test_a_trace_and_a_darshan_log_of_other_jobs_are_refused(ioassess, tmp_path):
    ioassess("run", "--trace-dir", tmp_path / "t", "--", "cat", "/etc/hostname", env={"SLURM_JOB_ID": "42"})
    log = next(p for p in shipped_darshan_logs() if os.path.basename(p) == "dxt.darshan")
    result = ioassess("report", tmp_path / "t", log, "-o", tmp_path / "r.html")
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"ioassess: {log}: not the same job as {tmp_path / 't'}") and "job id 1537455 vs 42" in line


def test_reports_are_readable_by_their_owner_only(ioassess, tmp_path):
    """The reports name the job's files and command line: `run` into an existing 0755 trace
    directory and `report` over earlier 0644 files, under umask 022, write them 0600, as the
    traces are."""
    trace_dir = tmp_path / "traces"
    trace_dir.mkdir()
    os.chmod(trace_dir, 0o755)
    ran = ioassess("run", "--trace-dir", trace_dir, "--", "sh", "-c", "cat /etc/passwd >/dev/null", umask=0o022)
    assert ran.returncode == 0, ran.stderr
    earlier = [tmp_path / "r.html", tmp_path / "a.json"]
    for path in earlier:
        path.write_text("an earlier report")
        os.chmod(path, 0o644)
    reported = ioassess("report", trace_dir, "-o", earlier[0], "--json", earlier[1], umask=0o022)
    assert reported.returncode == 0, reported.stderr
    written = [trace_dir / "report.html", trace_dir / "assessment.json"] + earlier
    assert {str(path): oct(stat.S_IMODE(path.stat().st_mode)) for path in written} == \
        {str(path): oct(0o600) for path in written}
    assert earlier[0].read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("processes", [1, 64, 4096, 65536])
def test_the_io_model_grids_labels_never_overlap(processes):
    """Axis labels of Sisneros' grid at any rank count: each x label (at most 7 px a digit, centred)
    clears its neighbours, each y label its neighbours' line height; the largest is always there."""
    from ioassess.report.svg import LABEL_CHAR_PX, LABEL_LINE_PX, io_model_grid
    page = io_model_grid(processes, processes, "shared file", [(processes, processes, 100.0, "site cell")])
    labels = [(float(x), float(y), text)
              for x, y, text in re.findall(r'<text x="([\d.]+)" y="([\d.]+)"[^>]*>(\d+)</text>', page)]
    axis_y = max(y for _, y, _ in labels)
    x_labels = sorted((x, text) for x, y, text in labels if y == axis_y)
    axis_x = min(x for x, _, _ in labels)
    y_labels = sorted(y for x, y, _ in labels if x == axis_x)
    assert x_labels[-1][1] == str(max(processes, 4))   # the grid spans at least 1 .. 4
    for (left, a), (right, b) in zip(x_labels, x_labels[1:]):
        assert right - left >= (len(a) + len(b)) / 2 * LABEL_CHAR_PX, (a, b)
    assert all(lower - upper >= LABEL_LINE_PX for upper, lower in zip(y_labels, y_labels[1:]))


def test_a_kind_without_an_order_statistics_curve_is_said_why(tmp_path):
    """dxt.darshan's reads have a tail so heavy that their expected maximum is not finite (no
    curve to draw), and its writes, made too few for order statistics here, neither: the page
    says why of each."""
    from ioassess.report import make_report
    from ioassess.report.render import write_report
    log = next(p for p in shipped_darshan_logs() if os.path.basename(p) == "dxt.darshan")
    assessment = make_report([log])
    assert {"read", "write"} <= set(assessment["tails"])
    assessment["tails"]["write"].update(status="too few points", order_statistics=None)
    write_report(tmp_path / "r.html", assessment)
    page = (tmp_path / "r.html").read_text()
    assert "No order-statistics curve for writes: too few points." in page
    assert ("No order-statistics curve for reads: its fitted tail is so heavy that the expected maximum is not "
            "finite.") in page
