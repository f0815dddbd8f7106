"""Report speed and memory, side by side in one run (issue "The reporter").

1. Every Darshan log PyDarshan ships: `ioassess report LOG` against Drishti 0.8 (`drishti LOG`)
   and PyDarshan's job summary (`python -m darshan summary LOG`), each a fresh process as users
   start them; wall time and peak RSS (the child's ru_maxrss), median of --reps runs,
   alternating the tools so that the machine's drift hits them alike.
2. A trace of 10^7 ops (the workload generator, 1-byte random preads, under the recorder):
   `ioassess report` wall time and peak RSS.
3. A parallel job (issue "Parallel jobs"): 64 local processes started by MPICH's mpiexec, each
   the workload generator doing 15 625 random 4 KiB preads of one shared file, 10^6 ops in all:
   `ioassess report` wall time and peak RSS (target 10 s).

usage: python3 bench/report.py [--reps N] [--skip-big] [--skip-parallel]
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import darshan

from ioassess import recorder_library_path
from ioassess.site.training import workload_program_path

TOOLS = ("ioassess", "drishti", "pydarshan")
BIG_OPS = 10_000_000
PARALLEL_PROCESSES = 64
PARALLEL_OPS = 1_000_000


def shipped_logs():
    """Distinct shipped logs (some ship twice, in tests/input and in examples)."""
    root = os.path.dirname(darshan.__file__)
    paths = sorted(glob.glob(f"{root}/tests/input/*.darshan") + glob.glob(f"{root}/examples/example_logs/*.darshan"))
    by_name = {}
    for path in paths:
        by_name.setdefault(os.path.basename(path), path)
    return sorted(by_name.values(), key=os.path.basename)


def command(tool, log, out_dir):
    if tool == "ioassess":
        return [sys.executable, "-m", "ioassess", "report", log, "-o", os.path.join(out_dir, "report.html")]
    if tool == "drishti":
        return [shutil.which("drishti") or "drishti", log]
    return [sys.executable, "-m", "darshan", "summary", log, "--output", os.path.join(out_dir, "summary.html")]


# Starts argv[2:] and writes its peak RSS (KiB) to the file argv[1]. A child forked from this
# bench would start as a copy of it (pandas, numpy: over 100 MiB) and count that as its own peak;
# a child of this small interpreter counts only what it grows to after exec.
PEAK_RSS_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def measure(argv, cwd, env=None):
    """(wall seconds, peak RSS MiB, exit status) of one fresh process (started by
    PEAK_RSS_LAUNCHER, whose own start-up, about 10 ms, every tool's time includes)."""
    with tempfile.NamedTemporaryFile("r") as peak:
        started = time.monotonic()
        status = subprocess.run([sys.executable, "-S", "-c", PEAK_RSS_LAUNCHER, peak.name, *argv], cwd=cwd, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        elapsed = time.monotonic() - started
        return elapsed, int(peak.read() or 0) / 1024, status


def bench_logs(reps):
    rows = []
    with tempfile.TemporaryDirectory() as out_dir:
        for log in shipped_logs():
            samples = {tool: [] for tool in TOOLS}
            for _ in range(reps):
                for tool in TOOLS:
                    samples[tool].append(measure(command(tool, log, out_dir), out_dir))
            rows.append((os.path.basename(log), {tool: (statistics.median(s[0] for s in runs),
                                                        statistics.median(s[1] for s in runs),
                                                        sorted({s[2] for s in runs}))
                                                 for tool, runs in samples.items()}))
    print(f"\nPyDarshan's shipped logs: median of {reps} runs each, tools alternating")
    print(f"{'log':<44}" + "".join(f"{tool + ' s':>12}{'MiB':>7}" for tool in TOOLS) +
          f"{'time vs drishti':>17}{'mem vs drishti':>16}  exit (ioassess)")
    for name, by_tool in rows:
        cells = "".join(f"{by_tool[t][0]:12.2f}{by_tool[t][1]:7.0f}" for t in TOOLS)
        ours, theirs = by_tool["ioassess"], by_tool["drishti"]
        print(f"{name[:43]:<44}{cells}{ours[0] / theirs[0]:17.2f}{ours[1] / theirs[1]:16.2f}  {ours[2]}")
    worst_time = max(by_tool["ioassess"][0] / by_tool["drishti"][0] for _, by_tool in rows)
    worst_memory = max(by_tool["ioassess"][1] / by_tool["drishti"][1] for _, by_tool in rows)
    print(f"worst ratio to Drishti: time {worst_time:.2f}, memory {worst_memory:.2f} (target <= 0.5 each)")


def record_workload(work, traces, launcher, workload_options, ops):
    """Runs the workload generator (after launcher, e.g. mpiexec, if any) with the recorder on
    random offsets of a 1 MiB data file in work; returns the traces' total bytes, checked to
    hold the ops."""
    data = os.path.join(work, "data")
    with open(data, "wb") as f:
        f.write(os.urandom(1 << 20))
    env = dict(os.environ, LD_PRELOAD=recorder_library_path(), IOASSESS_TRACE_DIR=traces, IOASSESS_EXCLUDE="none",
               IOASSESS_MAX_RECORDS=str(2 * ops))
    subprocess.run(launcher + [workload_program_path(), "--file", data, "--file-layout", "rnd", "--mem-buffer", "1m"] +
                   workload_options, env=env, check=True, stdout=subprocess.DEVNULL)
    trace_bytes = sum(os.path.getsize(os.path.join(traces, name)) for name in os.listdir(traces))
    if trace_bytes < ops * 64:
        sys.exit(f"the {ops}-op traces have only {trace_bytes} bytes: the recorder did not record the ops")
    return trace_bytes


def time_reports(work, traces, reps):
    """(median wall s, median peak RSS MiB, every run's wall s, report.html bytes)."""
    runs = [measure([sys.executable, "-m", "ioassess", "report", traces, "-o", os.path.join(work, "r.html"),
                     "--json", os.path.join(work, "a.json")], work) for _ in range(reps)]
    if any(r[2] != 0 for r in runs):
        sys.exit(f"ioassess report {traces} failed: exit {[r[2] for r in runs]}")
    return (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), [r[0] for r in runs],
            os.path.getsize(os.path.join(work, "r.html")))


def bench_big_trace(reps):
    with tempfile.TemporaryDirectory(dir="/var/tmp") as work:
        traces = os.path.join(work, "traces")
        trace_bytes = record_workload(work, traces, [], ["--size", "1", "--repeats", str(BIG_OPS)], BIG_OPS)
        seconds, rss, runs, report_bytes = time_reports(work, traces, reps)
    print(f"\n{BIG_OPS:.0e}-op trace ({trace_bytes / 2**20:.0f} MiB): report in {seconds:.1f} s "
          f"(runs: {', '.join(f'{r:.1f}' for r in runs)}), peak RSS {rss:.0f} MiB, report.html "
          f"{report_bytes / 2**20:.2f} MiB (targets: 30 s, 2048 MiB, 3 MiB)")


def bench_parallel_job(reps):
    per_process = PARALLEL_OPS // PARALLEL_PROCESSES
    with tempfile.TemporaryDirectory(dir="/var/tmp") as work:
        traces = os.path.join(work, "traces")
        launcher = [shutil.which("mpiexec") or "mpiexec", "-n", str(PARALLEL_PROCESSES)]
        trace_bytes = record_workload(work, traces, launcher, ["--size", "4096", "--repeats", str(per_process)],
                                      PARALLEL_OPS)
        seconds, rss, runs, report_bytes = time_reports(work, traces, reps)
        with open(os.path.join(work, "a.json")) as f:
            processes = json.load(f)["job"]["processes_with_io"]
    print(f"\n{PARALLEL_PROCESSES}-process job, {PARALLEL_OPS:.0e} ops ({trace_bytes / 2**20:.0f} MiB of traces, "
          f"{processes} processes with I/O): report in {seconds:.1f} s (runs: {', '.join(f'{r:.1f}' for r in runs)}), "
          f"peak RSS {rss:.0f} MiB, report.html {report_bytes / 2**20:.2f} MiB (target: 10 s)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--skip-big", action="store_true", help="leave out the 10^7-op trace")
    parser.add_argument("--skip-parallel", action="store_true", help="leave out the 64-process job")
    args = parser.parse_args()
    bench_logs(args.reps)
    if not args.skip_big:
        bench_big_trace(args.reps)
    if not args.skip_parallel:
        bench_parallel_job(args.reps)


if __name__ == "__main__":
    main()
