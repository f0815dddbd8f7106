"""Report speed and memory, side by side in one run (issue "The reporter").

1. Every Darshan log PyDarshan ships: `ioassess report LOG` against Drishti 0.8 (`drishti LOG`)
   and PyDarshan's job summary (`python -m darshan summary LOG`), each a fresh process as users
   start them; wall time and peak RSS (the child's ru_maxrss), median of --reps runs,
   alternating the tools so that the machine's drift hits them alike.
2. A trace of 10^7 ops (the workload generator, 1-byte random preads, under the recorder):
   `ioassess report` wall time and peak RSS.

usage: python3 bench/report.py [--reps N] [--skip-big]
"""
import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import darshan

from ioassess import recorder_library_path
from ioassess.models.training import workload_program_path

TOOLS = ("ioassess", "drishti", "pydarshan")
BIG_OPS = 10_000_000


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


def measure(argv, cwd, env=None):
    """(wall seconds, peak RSS MiB, exit status) of one fresh process."""
    started = time.monotonic()
    child = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.monotonic() - started
    return elapsed, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


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
    print(f"worst ratio to Drishti: time {worst_time:.2f}, memory {worst_memory:.2f} (target <= 1 each)")


def bench_big_trace(reps):
    with tempfile.TemporaryDirectory(dir="/var/tmp") as work:
        data = os.path.join(work, "data")
        with open(data, "wb") as f:
            f.write(os.urandom(1 << 20))
        traces = os.path.join(work, "traces")
        env = dict(os.environ, LD_PRELOAD=recorder_library_path(), IOASSESS_TRACE_DIR=traces, IOASSESS_EXCLUDE="none",
                   IOASSESS_MAX_RECORDS=str(2 * BIG_OPS))
        subprocess.run([workload_program_path(), "--file", data, "--size", "1", "--file-layout", "rnd",
                        "--repeats", str(BIG_OPS), "--mem-buffer", "1m"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        trace_bytes = sum(os.path.getsize(os.path.join(traces, name)) for name in os.listdir(traces))
        if trace_bytes < BIG_OPS * 64:
            sys.exit(f"the {BIG_OPS}-op trace has only {trace_bytes} bytes: the recorder did not record the ops")
        runs = [measure([sys.executable, "-m", "ioassess", "report", traces, "-o", os.path.join(work, "r.html"),
                         "--json", os.path.join(work, "a.json")], work) for _ in range(reps)]
        report_bytes = os.path.getsize(os.path.join(work, "r.html"))
    print(f"\n{BIG_OPS:.0e}-op trace ({trace_bytes / 2**20:.0f} MiB): report in "
          f"{statistics.median(r[0] for r in runs):.1f} s (runs: {', '.join(f'{r[0]:.1f}' for r in runs)}), "
          f"peak RSS {statistics.median(r[1] for r in runs):.0f} MiB, report.html {report_bytes / 2**20:.2f} MiB "
          "(targets: 30 s, 2048 MiB, 3 MiB)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--skip-big", action="store_true", help="leave out the 10^7-op trace")
    args = parser.parse_args()
    bench_logs(args.reps)
    if not args.skip_big:
        bench_big_trace(args.reps)


if __name__ == "__main__":
    main()
