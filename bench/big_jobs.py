"""Big jobs (issue "Big jobs"): `ioassess report` and `ioassess export --parquet` of a trace set
of 10^8 ops, wall time and peak memory.

The trace set: --processes processes of the workload generator under the recorder, side by side,
each doing its share of --ops 4 KiB requests at random offsets of one of four 64 MiB files, half
of the processes reading and half writing (page-cached: the point is the reporter's work per op,
not the disk's). It is recorded once into --dir and kept there (6.4 GB at 10^8 ops); a later run
with the same --ops and --processes reuses it.

Each measured command is a fresh process started through bench/report.py's launcher, so that its
peak RSS (ru_maxrss) is its own (the largest process's: the report's or a worker's); median of
--reps runs. The memory of the report with its workers is the peak of their proportional set
sizes summed, sampled every 0.1 s in one more run.

usage: python3 bench/big_jobs.py [--ops N] [--processes P] [--reps R] [--dir DIR] [--skip-export]
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading

from report import measure

from ioassess import recorder_library_path
from ioassess.site.training import workload_program_path

FILES = 4
FILE_BYTES = 64 << 20
REQUEST_BYTES = 4096


def cpu_name():
    with open("/proc/cpuinfo") as f:
        return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")),
                    platform.processor())


def record(directory, ops, processes):
    """The trace directory of the set in `directory`, recorded unless a complete one is there."""
    traces = os.path.join(directory, "traces")
    stamp = os.path.join(directory, "recorded.json")
    wanted = {"ops": ops, "processes": processes, "request_bytes": REQUEST_BYTES}
    if os.path.exists(stamp):
        with open(stamp) as f:
            if json.load(f) == wanted:
                return traces
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(traces, mode=0o700)
    for i in range(FILES):
        with open(os.path.join(directory, f"data{i}"), "wb") as f:
            f.truncate(FILE_BYTES)
    per_process = ops // processes
    env = dict(os.environ, LD_PRELOAD=recorder_library_path(), IOASSESS_TRACE_DIR=traces, IOASSESS_EXCLUDE="none",
               IOASSESS_MAX_RECORDS=str(per_process + 1000))
    children = [subprocess.Popen([workload_program_path(), "--file", os.path.join(directory, f"data{p % FILES}"),
                                  "--op", "read" if p % 2 == 0 else "write", "--size", str(REQUEST_BYTES),
                                  "--file-layout", "rnd", "--mem-buffer", "1m", "--repeats", str(per_process),
                                  "--budget", str(per_process * REQUEST_BYTES)],
                                 env=env, stdout=subprocess.DEVNULL) for p in range(processes)]
    if any(child.wait() != 0 for child in children):
        sys.exit("the workload generator failed: no trace set")
    recorded = sum(os.path.getsize(os.path.join(traces, name)) for name in os.listdir(traces))
    if recorded < ops * 64:
        sys.exit(f"the traces hold {recorded} bytes, fewer than {ops} records")
    with open(stamp, "w") as f:
        json.dump(wanted, f)
    return traces


def descendants(pid):
    """The pids of pid's descendants now."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(entry))
            except OSError:
                pass
    found, todo = [], list(children.get(pid, []))
    while todo:
        found.append(todo.pop())
        todo += children.get(found[-1], [])
    return found


def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("Pss:")), 0)
    except OSError:
        return 0


def with_tree_peak(function):
    """(function(), the peak of the summed proportional set sizes (MiB) of this process's
    descendants while it ran, sampled every 0.1 s): a report's memory with its workers'."""
    peak, done = [0], threading.Event()

    def sample():
        while not done.wait(0.1):
            peak[0] = max(peak[0], sum(pss_kib(pid) for pid in descendants(os.getpid())))
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        result = function()
    finally:
        done.set()
        sampler.join()
    return result, peak[0] / 1024


def timed(command, work, reps):
    """(median wall s, median peak RSS of the largest process MiB, the whole tree's peak MiB, the
    runs' wall s): the tree's memory from one more run, whose time is not counted (reading every
    process's smaps_rollup ten times a second slows the run it watches by about a tenth)."""
    runs = [measure(command, work) for _ in range(reps)]
    watched, tree = with_tree_peak(lambda: measure(command, work))
    if any(run[2] != 0 for run in runs + [watched]):
        sys.exit(f"{' '.join(command)} failed: exit {[run[2] for run in runs + [watched]]}")
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), tree, [r[0] for r in runs]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=10 ** 8)
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--dir", default="/var/tmp/ioassess-bench-big")
    parser.add_argument("--skip-export", action="store_true")
    args = parser.parse_args()
    traces = record(f"{args.dir}-{args.ops}-{args.processes}", args.ops, args.processes)
    print(f"CPU: {cpu_name()}, {len(os.sched_getaffinity(0))} CPUs; {args.ops:.3g} ops in {args.processes} "
          f"processes ({sum(os.path.getsize(os.path.join(traces, n)) for n in os.listdir(traces)) / 2**30:.1f} GiB "
          f"of traces)")
    with tempfile.TemporaryDirectory(dir="/var/tmp") as work:
        seconds, rss, tree, runs = timed([sys.executable, "-m", "ioassess", "report", traces, "-o",
                                          os.path.join(work, "r.html"), "--json", os.path.join(work, "a.json")],
                                         work, args.reps)
        with open(os.path.join(work, "a.json")) as f:
            assessed = json.load(f)
        print(f"ioassess report: {seconds:.1f} s (runs: {', '.join(f'{r:.1f}' for r in runs)}), peak memory "
              f"{tree:.0f} MiB with its workers (largest process {rss:.0f} MiB), "
              f"{sum(p['ops'] for p in assessed['processes']):.3g} ops assessed (targets at 10^8: 60 s, 2048 MiB)")
        if not args.skip_export:
            seconds, rss, tree, runs = timed([sys.executable, "-m", "ioassess", "export", traces, "--parquet",
                                              os.path.join(work, "ops.parquet")], work, args.reps)
            print(f"ioassess export --parquet: {seconds:.1f} s (runs: {', '.join(f'{r:.1f}' for r in runs)}), peak "
                  f"memory {tree:.0f} MiB with its workers (largest process {rss:.0f} MiB) (target at 10^8: 1024 MiB)")


if __name__ == "__main__":
    main()
