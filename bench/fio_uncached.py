"""The recorder's cost on uncached I/O: fio randread 4 KiB (psync, one job) on a file whose
pages are dropped from the page cache before every run (posix_fadvise DONTNEED, checked with
mincore), without the recorder, with it, and with it but its page-cache sampling turned off
(IOASSESS_PAGECACHE=0). Every run reads the same offsets (one random seed), after one run
that is not counted: the virtual disk's host caches what the first run read, so all counted
runs find the device in the same state. The three run in turn, REPS rounds, the order rotating
every round; figures are the medians of the wall times (fio started to fio exited), of the
CPU time fio's processes used (user + system), of fio's own mean completion latency, and of
the ratios within each round. Target: with the recorder at most 1 % above the plain run.
The disk's latency moves by tens of per cent from run to run on a shared VM, more than the
target; the CPU time the recorder adds is its own work, all of it in the I/O path, so added
CPU time / plain wall time bounds what it can add to the wall time.

    python3 bench/fio_uncached.py [--reps 9] [--ios 8000] [--dir DIR]

DIR must be on a disk-backed file system (not tmpfs: its pages cannot be dropped).
"""
import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FILE_BYTES = 1 << 30
CONFIGS = {"plain": None, "recorder": {}, "recorder_pagecache_off": {"IOASSESS_PAGECACHE": "0"}}

def drop(path):
    """Drop the file's pages (the workload generator's --evict: POSIX_FADV_DONTNEED) and check
    with mincore that none is left."""
    from ioassess.site.training import workload_program_path

    out = subprocess.run([workload_program_path(), "--evict", path], capture_output=True, text=True,
                         check=True).stdout
    left = int(re.search(r"resident_pages=(\d+)", out).group(1))
    if left:
        raise RuntimeError(f"{path}: {left} pages still cached after POSIX_FADV_DONTNEED")


def make_file(path):
    with open(path, "wb") as f:
        block = os.urandom(1 << 20)
        for _ in range(FILE_BYTES >> 20):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())


def run_fio(fio, data, ios, env_extra, trace_dir):
    """(wall seconds, CPU seconds, fio's mean completion latency in ns) of one fio run."""
    import ioassess

    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("IOASSESS_")}
    if env_extra is not None:
        env.update(env_extra, LD_PRELOAD=ioassess.recorder_library_path(), IOASSESS_TRACE_DIR=trace_dir)
    command = [fio, "--name=randread", f"--filename={data}", "--rw=randread", "--bs=4k", "--ioengine=psync",
               f"--size={FILE_BYTES}", f"--number_ios={ios}", "--randseed=1", "--invalidate=0",
               "--output-format=json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    job = json.loads(result.stdout[result.stdout.index("{"):])["jobs"][0]
    return wall, cpu, job["read"]["clat_ns"]["mean"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--ios", type=int, default=20000)
    parser.add_argument("--dir", default=os.path.join(HERE, "out"))
    parser.add_argument("--json", default=os.path.join(HERE, "out", "fio_uncached.json"))
    args = parser.parse_args()
    fio = shutil.which("fio")
    if fio is None:
        print("fio is not installed (Debian package fio)")
        return 2
    os.makedirs(args.dir, exist_ok=True)
    runs = {name: [] for name in CONFIGS}
    with tempfile.TemporaryDirectory(prefix="ioassess-fio-", dir=args.dir) as work:
        data = os.path.join(work, "data")
        make_file(data)
        names = list(CONFIGS)
        drop(data)
        run_fio(fio, data, args.ios, None, None)
        for rep in range(args.reps):
            shift = rep % len(names)
            for name in names[shift:] + names[:shift]:
                drop(data)
                trace_dir = os.path.join(work, f"traces-{name}-{rep}")
                runs[name].append(run_fio(fio, data, args.ios, CONFIGS[name], trace_dir))
                shutil.rmtree(trace_dir, ignore_errors=True)
    wall, cpu, latency = ({name: statistics.median(run[i] for run in runs[name]) for name in names} for i in range(3))
    paired = [runs["recorder"][i][0] / runs["plain"][i][0] for i in range(args.reps)]
    added_cpu = {name: statistics.median(runs[name][i][1] - runs["plain"][i][1] for i in range(args.reps))
                 for name in names[1:]}
    results = {"ios": args.ios, "reps": args.reps, "wall_s": wall, "cpu_s": cpu, "clat_mean_ns": latency,
               "recorder_to_plain_wall": wall["recorder"] / wall["plain"],
               "recorder_to_plain_wall_paired": sorted(paired), "added_cpu_s": added_cpu,
               "added_cpu_to_plain_wall": {name: added / wall["plain"] for name, added in added_cpu.items()},
               "runs": runs}
    print(f"fio randread 4 KiB psync, {args.ios} ios on a 1 GiB file dropped from the page cache before each run "
          f"(the same offsets in every run), {args.reps} rounds")
    for name in names:
        spread = [run[0] for run in runs[name]]
        print(f"  {name}: wall {wall[name]:.3f} s (runs {min(spread):.3f}-{max(spread):.3f}), CPU {cpu[name]:.3f} s, "
              f"fio mean latency {latency[name] / 1000:.1f} us")
    print(f"  recorder / plain wall time: {results['recorder_to_plain_wall']:.4f} (target <= 1.01); "
          f"round by round {statistics.median(paired):.4f} median, {min(paired):.4f}-{max(paired):.4f}")
    for name, added in added_cpu.items():
        print(f"  {name}: CPU time added {added * 1000:.1f} ms per run (round by round median), "
              f"{100 * results['added_cpu_to_plain_wall'][name]:.2f} % of the plain run's wall time")
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(results, f, indent=1)
    print(f"  details: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
