"""Recorder overhead, measured side by side in one run (`make bench`).

Per call: 1-byte preads on a page-cached file, timed in batches of 1000 calls by the program
itself (bench/pread-loop.c); each run reports its median batch. Runs with and without the
recorder alternate, REPS times each, pinned to one CPU for the single-thread case; the added
cost is median(with) - median(without) over the runs. The mean over all batches (which
includes the recorder's occasional extent allocation) is reported too.
Memory: peak resident memory (VmHWM) with the recorder minus without, against the record cap
in bytes plus 1 MiB.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LOOP = os.path.join(HERE, "out", "pread-loop")


def recorder_library():
    import ioassess

    return ioassess.recorder_library_path()


def run_loop(probe_file, calls, threads, library=None, trace_dir=None, cap=None, cpu=None):
    """One run of pread-loop: (per-thread (median, mean) ns per call, peak RSS KiB)."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if library:
        env["LD_PRELOAD"] = library
        env["IOASSESS_TRACE_DIR"] = trace_dir
        env["IOASSESS_MAX_RECORDS"] = str(cap)
    cmd = [LOOP, probe_file, str(calls), "1000", str(threads)]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    lines = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout.split("\n")
    per_thread = [tuple(float(v) for v in line.split()) for line in lines[:threads]]
    return per_thread, int(lines[threads])


def compare(probe_file, calls, threads, reps, cap, cpu, work_dir):
    """Alternating runs without and with the recorder; per-run medians across threads."""
    library = recorder_library()
    runs = {"without": [], "with": []}
    for rep in range(reps):
        order = ("without", "with") if rep % 2 == 0 else ("with", "without")
        for mode in order:
            trace_dir = os.path.join(work_dir, f"traces-{threads}-{rep}")
            per_thread, peak_kib = run_loop(
                probe_file, calls, threads,
                library=library if mode == "with" else None,
                trace_dir=trace_dir, cap=cap, cpu=cpu)
            runs[mode].append({
                "median_ns": statistics.median(m for m, _ in per_thread),
                "mean_ns": statistics.median(a for _, a in per_thread),
                "peak_rss_kib": peak_kib,
            })
            subprocess.run(["rm", "-rf", trace_dir], check=True)

    def middle(mode, key):
        return statistics.median(r[key] for r in runs[mode])

    return {
        "threads": threads,
        "calls_per_thread": calls,
        "reps": reps,
        "record_cap": cap,
        "median_ns_without": middle("without", "median_ns"),
        "median_ns_with": middle("with", "median_ns"),
        "added_ns_median": middle("with", "median_ns") - middle("without", "median_ns"),
        "added_ns_mean": middle("with", "mean_ns") - middle("without", "mean_ns"),
        "peak_rss_kib_without": middle("without", "peak_rss_kib"),
        "peak_rss_kib_with": middle("with", "peak_rss_kib"),
        "runs": runs,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--json", default=os.path.join(HERE, "out", "overhead.json"))
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="ioassess-bench-") as work_dir:
        probe_file = os.path.join(work_dir, "probe")
        with open(probe_file, "wb") as f:
            f.write(os.urandom(4096))
        with open(probe_file, "rb") as f:
            f.read()
        cap = 1 << 20
        single = compare(probe_file, args.calls, 1, args.reps, cap, cpu=1, work_dir=work_dir)
        threaded = compare(probe_file, args.calls // 16, 16, args.reps, cap, cpu=None,
                           work_dir=work_dir)

    cap_kib = cap * 64 // 1024
    added_rss = single["peak_rss_kib_with"] - single["peak_rss_kib_without"]
    added_rss_16 = threaded["peak_rss_kib_with"] - threaded["peak_rss_kib_without"]
    ratio_16 = threaded["added_ns_median"] / single["added_ns_median"]
    print(f"1-byte pread on a cached file, median of 1000-call batches, {args.reps} alternating runs")
    print(f"  1 thread,  {args.calls} calls: without {single['median_ns_without']:.1f} ns, "
          f"with {single['median_ns_with']:.1f} ns, added {single['added_ns_median']:.1f} ns "
          f"(target <= 50); mean over all batches added {single['added_ns_mean']:.1f} ns")
    print(f"  16 threads, {args.calls // 16} calls each: without {threaded['median_ns_without']:.1f} ns, "
          f"with {threaded['median_ns_with']:.1f} ns, added {threaded['added_ns_median']:.1f} ns, "
          f"{ratio_16:.2f}x the single-thread figure (target <= 2x); mean added "
          f"{threaded['added_ns_mean']:.1f} ns")
    print(f"  peak RSS added: 1 thread {added_rss} KiB, 16 threads {added_rss_16} KiB "
          f"(target <= cap {cap_kib} KiB + 1024 KiB)")
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"single_thread": single, "threads_16": threaded,
                   "ratio_16_to_1": ratio_16}, f, indent=1)
    print(f"  details: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
