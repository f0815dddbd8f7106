"""Recorder overhead, measured side by side in one run (`make bench`).

Per call: 1-byte preads on a page-cached file, timed in batches of 1000 calls by the program
itself (bench/pread-loop.c); each run reports its median batch. Runs with and without the
recorder, and with the recorder with its page-cache sampling turned off (IOASSESS_PAGECACHE=0),
alternate, REPS times each, pinned to one CPU for the single-thread case; the added cost is
median(with) - median(without) over the runs, and sampling's own cost median(with) -
median(with sampling off). The mean over all batches (which
includes the recorder's occasional extent allocation) is reported too. --compare LIBRARY adds
a third configuration to the same alternation (say, the recorder before a change), so that two
recorders are measured side by side. --call read times 1-byte read()s at each thread's own
descriptor's position instead of preads (the recorder's path for calls at the position);
--main-thread runs the single-thread part in the program's main thread, a process with one
thread (otherwise it runs in a second thread, as a multi-threaded program's I/O does).
Memory: peak resident memory (VmHWM) with the recorder minus without, against the record cap
in bytes plus 1 MiB.
--meta: metadata calls instead (bench/meta-loop.c, in the main thread, pinned to one CPU, batches
of 1000 calls): stat() of an absolute path, of a relative one, of a missing one (ENOENT), and
open()+close() pairs (per call: half a pair), then the single-thread 1-byte pread loop; without
the recorder, with it and (--compare LIBRARY, say main's) with the other one, alternating. The
added cost per call is median(with) - median(without); beside it, round by round, with minus
the other library (for the pread loop: whether the data calls' cost changed).
--stdio: 8-byte fwrite calls to a stream on a file instead (bench/stdio-loop.c, in the main thread,
pinned to one CPU, batches of 1000 calls), then the single-thread 1-byte pread loop, as --meta.
MPI-IO (when mpicc and libioassess-mpiio.so are there): 1-byte MPI_File_read_at and MPI_File_read
calls of one MPI process (bench/mpiio-loop.c, ROMIO makes one pread of each), in batches of 100
calls. Runs without any recorder, with libioassess.so alone (the preads under each call
recorded) and with both recorder libraries alternate: the MPI-IO recorder's own cost per call is
the median over rounds of (both - libioassess.so alone), the whole added cost (both - none).
Inside each process the batches alternate between the MPI_ and the PMPI_ names: the MPI-IO
recorder defines both (as Darshan's MPI-IO module does, so that either preload order records
every call), so with it preloaded the two cost the same, which the bench checks (PMPI_ minus
MPI_ about 0). A batch of 100 calls writes 200 records, so at most one batch in 13 takes a new
trace extent (one in four for the pread batches above); the mean over all batches includes
them. 400 000 calls stay under the record cap (10^6 records).
Beside Darshan (its runtime built from its release, or the site's: tests/darshan_runtime.py):
the same 1-byte pread loop, 60 batches of 1000 calls after 1000 warm-up calls, so that
Darshan's DXT buffer (about 65 500 segments) never fills; without anything, with ioassess,
with ioassess without page-cache sampling, with Darshan without DXT, with Darshan and DXT, and
with Darshan and DXT and ioassess in the order `ioassess run` uses (libdarshan.so:
libioassess.so), alternating, pinned to one CPU. Beside them the clock's floor
(bench/clock-floor.c: a preloaded pread that only reads the TSC before and after the call),
alone and behind Darshan with DXT: what two clock reads cost on this host, so that ioassess's
bookkeeping (ioassess minus the floor) is seen apart from its clock; and the floor with reads kept
in order with the call (rdtscp, lfence+rdtsc for both reads; "ordered", rdtsc+lfence before and
rdtscp after, as the recorder reads since 2026-11-25; "fenced", lfence on every side).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LOOP = os.path.join(HERE, "out", "pread-loop")
CLOCK_FLOOR = os.path.join(HERE, "out", "libclock-floor.so")
MPIIO_LOOP = os.path.join(HERE, "out", "mpiio-loop")
META_LOOP = os.path.join(HERE, "out", "meta-loop")
STDIO_LOOP = os.path.join(HERE, "out", "stdio-loop")
# --meta: the loops of bench/meta-loop.c, and the 1-byte pread loop beside them
META_MODES = ("stat", "stat-rel", "missing", "openclose")


def run_probe(cmd, lines, preload=(), trace_dir=None, cap=None, cpu=None, extra_env=None):
    """One run of a probe program that prints `lines` lines of "median mean" ns per call, then
    its peak RSS in KiB: ([(median, mean), ...], peak RSS KiB)."""
    env = dict(os.environ, **(extra_env or {}))
    env.pop("LD_PRELOAD", None)
    if preload:
        env.update(LD_PRELOAD=":".join(preload), IOASSESS_TRACE_DIR=trace_dir, IOASSESS_MAX_RECORDS=str(cap))
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout.split("\n")
    return [tuple(float(v) for v in line.split()) for line in out[:lines]], int(out[lines])


def alternate(configs, run_once, reps, work_dir):
    """Runs of each configuration (name -> what run_once needs), REPS rounds, the order rotating
    every round; run_once(config, trace_dir) returns one run's figures (a dict). Returns
    {name: [figures per run]}."""
    names = list(configs)
    runs = {name: [] for name in names}
    for rep in range(reps):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            trace_dir = os.path.join(work_dir, f"traces-{name}-{rep}")
            runs[name].append(run_once(configs[name], trace_dir))
            shutil.rmtree(trace_dir, ignore_errors=True)
    return runs


def middle(runs, key):
    return statistics.median(r[key] for r in runs)


def paired(runs, name, other, key="median_ns"):
    """Median over the rounds of name's figure minus other's in the same round: steadier than
    the difference of the medians when the machine's speed drifts between rounds."""
    return statistics.median(a[key] - b[key] for a, b in zip(runs[name], runs[other]))


PAGECACHE_OFF = {"IOASSESS_PAGECACHE": "0"}


def compare(probe_file, calls, threads, reps, cap, cpu, work_dir, other_library=None, call="pread"):
    """Alternating runs without and with the recorder, with the recorder without page-cache
    sampling (and with other_library, if given); per-run medians across threads."""
    import ioassess

    def run_once(config, trace_dir):
        preload, env = config
        per_thread, peak_kib = run_probe([LOOP, probe_file, str(calls), "1000", str(threads), call], max(threads, 1),
                                         preload, trace_dir, cap, cpu, env)
        return {"median_ns": statistics.median(m for m, _ in per_thread),
                "mean_ns": statistics.median(a for _, a in per_thread), "peak_rss_kib": peak_kib}

    recorder = ioassess.recorder_library_path()
    configs = {"without": ([], {}), "with": ([recorder], {}), "pagecache_off": ([recorder], PAGECACHE_OFF)}
    if other_library:
        configs["other"] = ([other_library], {})
    runs = alternate(configs, run_once, reps, work_dir)
    if other_library:
        other = {"library": other_library,
                 "added_ns_median": middle(runs["other"], "median_ns") - middle(runs["without"], "median_ns"),
                 "added_ns_mean": middle(runs["other"], "mean_ns") - middle(runs["without"], "mean_ns"),
                 "with_minus_other_ns_paired": paired(runs, "with", "other")}
    return {
        **({"other": other} if other_library else {}),
        "call": call,
        "threads": threads,
        "calls_per_thread": calls,
        "reps": reps,
        "record_cap": cap,
        "median_ns_without": middle(runs["without"], "median_ns"),
        "median_ns_with": middle(runs["with"], "median_ns"),
        "added_ns_median": middle(runs["with"], "median_ns") - middle(runs["without"], "median_ns"),
        "added_ns_mean": middle(runs["with"], "mean_ns") - middle(runs["without"], "mean_ns"),
        "added_ns_median_pagecache_off":
            middle(runs["pagecache_off"], "median_ns") - middle(runs["without"], "median_ns"),
        "pagecache_ns_median": middle(runs["with"], "median_ns") - middle(runs["pagecache_off"], "median_ns"),
        "pagecache_ns_paired": paired(runs, "with", "pagecache_off"),
        "pagecache_ns_mean": middle(runs["with"], "mean_ns") - middle(runs["pagecache_off"], "mean_ns"),
        "peak_rss_kib_without": middle(runs["without"], "peak_rss_kib"),
        "peak_rss_kib_with": middle(runs["with"], "peak_rss_kib"),
        "runs": runs,
    }


DARSHAN_CALLS = 60_000  # + 1000 warm-up calls: under the ~65 500 segments Darshan's DXT buffer holds


def compare_darshan(probe_file, reps, cap, cpu, work_dir, darshan_lib):
    """Alternating runs of the pread loop without anything, with ioassess, with Darshan without
    and with DXT, and with Darshan+DXT and ioassess stacked; the added ns per call of each."""
    import ioassess

    logs = os.path.join(work_dir, "darshan-logs")
    os.makedirs(logs, exist_ok=True)
    darshan_env = {"DARSHAN_ENABLE_NONMPI": "1", "DARSHAN_LOGPATH": logs, "DARSHAN_MMAP_LOGPATH": logs}
    dxt_env = {**darshan_env, "DXT_ENABLE_IO_TRACE": "1"}
    recorder = ioassess.recorder_library_path()
    configs = {"without": ([], {}), "ioassess": ([recorder], {}), "ioassess_pagecache_off": ([recorder], PAGECACHE_OFF),
               "darshan": ([darshan_lib], darshan_env),
               "darshan_dxt": ([darshan_lib], dxt_env), "darshan_dxt_ioassess": ([darshan_lib, recorder], dxt_env),
               "clock_floor": ([CLOCK_FLOOR], {}), "darshan_dxt_clock_floor": ([darshan_lib, CLOCK_FLOOR], dxt_env),
               "clock_floor_rdtscp": ([CLOCK_FLOOR], {"CLOCK_FLOOR_READ": "rdtscp"}),
               "clock_floor_lfence": ([CLOCK_FLOOR], {"CLOCK_FLOOR_READ": "lfence"}),
               "clock_floor_ordered": ([CLOCK_FLOOR], {"CLOCK_FLOOR_READ": "ordered"}),
               "clock_floor_fenced": ([CLOCK_FLOOR], {"CLOCK_FLOOR_READ": "fenced"})}

    def run_once(config, trace_dir):
        preload, env = config
        ((median, mean),), _ = run_probe([LOOP, probe_file, str(DARSHAN_CALLS), "1000", "1"], 1, preload, trace_dir,
                                         cap, cpu, env)
        return {"median_ns": median, "mean_ns": mean}

    runs = alternate(configs, run_once, reps, work_dir)
    added = {name: middle(runs[name], "median_ns") - middle(runs["without"], "median_ns") for name in configs}
    return {"calls": DARSHAN_CALLS, "reps": reps, "darshan_library": darshan_lib,
            "median_ns_without": middle(runs["without"], "median_ns"), "added_ns": added,
            "ioassess_to_darshan_dxt": added["ioassess"] / added["darshan_dxt"],
            "ioassess_pagecache_off_to_darshan_dxt": added["ioassess_pagecache_off"] / added["darshan_dxt"],
            "pagecache_ns": added["ioassess"] - added["ioassess_pagecache_off"],
            "pagecache_ns_paired": paired(runs, "ioassess", "ioassess_pagecache_off"),
            "ioassess_to_darshan_dxt_paired":
                paired(runs, "ioassess", "without") / paired(runs, "darshan_dxt", "without"),
            "stacking_adds_ns": added["darshan_dxt_ioassess"] - added["darshan_dxt"],
            "stacking_adds_ns_paired": paired(runs, "darshan_dxt_ioassess", "darshan_dxt"),
            "clock_floor_stacked_adds_ns": added["darshan_dxt_clock_floor"] - added["darshan_dxt"],
            "bookkeeping_ns": paired(runs, "ioassess", "clock_floor"),
            "clock_floor_ordered_minus_rdtsc_ns": paired(runs, "clock_floor_ordered", "clock_floor"),
            "clock_floor_fenced_minus_rdtsc_ns": paired(runs, "clock_floor_fenced", "clock_floor"),
            "bookkeeping_stacked_ns": paired(runs, "darshan_dxt_ioassess", "darshan_dxt_clock_floor"),
            "runs": runs}


def darshan_library():
    """Darshan's non-MPI runtime (built on first use, about a minute), or (None, the reason)."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
    from darshan_runtime import BuildFailed, Unavailable, find_runtime
    try:
        return find_runtime().lib, None
    except (Unavailable, BuildFailed) as reason:
        return None, str(reason)


def mpiio_loop():
    """bench/out/mpiio-loop (built by `make -C bench` when mpicc is there), else None."""
    return MPIIO_LOOP if os.path.exists(MPIIO_LOOP) else None


def compare_mpiio(program, probe_file, calls, mode, reps, cap, cpu, work_dir):
    """Alternating runs of one MPI process without recorders, with libioassess.so alone and with
    both recorder libraries (mode "at": MPI_File_read_at; "pointer": MPI_File_read)."""
    import ioassess

    def run_once(preload, trace_dir):
        ((mpi_median, mpi_mean), (pmpi_median, pmpi_mean)), _ = run_probe(
            ["mpiexec", "-n", "1", program, probe_file, str(calls), "100", mode], 2, preload, trace_dir, cap, cpu)
        return {"median_ns": mpi_median, "mean_ns": mpi_mean,
                "pmpi_median_ns": pmpi_median, "pmpi_mean_ns": pmpi_mean}

    posix = [ioassess.recorder_library_path()]
    runs = alternate({"without": [], "posix": posix, "both": posix + [ioassess.mpiio_library_path()]}, run_once,
                     reps, work_dir)
    return {
        "mode": mode,
        "calls": calls,
        "reps": reps,
        "record_cap": cap,
        "median_ns_without": middle(runs["without"], "median_ns"),
        "median_ns_both": middle(runs["both"], "median_ns"),
        "added_ns_mpiio_layer": paired(runs, "both", "posix"),
        "added_ns_mean_mpiio_layer": paired(runs, "both", "posix", "mean_ns"),
        "added_ns_posix_layer": paired(runs, "posix", "without"),
        "added_ns_both_layers": paired(runs, "both", "without"),
        "pmpi_minus_mpi_ns_both": statistics.median(r["pmpi_median_ns"] - r["median_ns"] for r in runs["both"]),
        "runs": runs,
    }


def compare_loops(loops, reps, cap, cpu, work_dir, other_library=None):
    """Alternating runs of each loop (name -> the command of a probe that prints one "median
    mean" line) without the recorder, with it and with other_library: per loop the medians and
    the added ns per call."""
    import ioassess

    def run_once(config, trace_dir):
        preload, cmd = config
        ((median, mean),), peak_kib = run_probe(cmd, 1, preload, trace_dir, cap, cpu)
        return {"median_ns": median, "mean_ns": mean, "peak_rss_kib": peak_kib}

    libraries = {"without": [], "with": [ioassess.recorder_library_path()]}
    if other_library:
        libraries["other"] = [other_library]
    results = {}
    for name, cmd in loops.items():
        runs = alternate({library: (preload, cmd) for library, preload in libraries.items()}, run_once, reps,
                         work_dir)
        result = {"median_ns_without": middle(runs["without"], "median_ns"),
                  "median_ns_with": middle(runs["with"], "median_ns"),
                  "added_ns_median": middle(runs["with"], "median_ns") - middle(runs["without"], "median_ns"),
                  "added_ns_paired": paired(runs, "with", "without"),
                  "added_ns_mean": middle(runs["with"], "mean_ns") - middle(runs["without"], "mean_ns"),
                  "runs": runs}
        if other_library:
            result.update(median_ns_other=middle(runs["other"], "median_ns"),
                          other_added_ns_median=middle(runs["other"], "median_ns") - middle(runs["without"],
                                                                                              "median_ns"),
                          with_minus_other_ns_paired=paired(runs, "with", "other"))
        results[name] = result
    return {"reps": reps, "record_cap": cap, "other_library": other_library, "loops": results}


def compare_meta(probe_file, calls, reps, cap, cpu, work_dir, other_library=None):
    """The metadata loops and the 1-byte pread loop (compare_loops)."""
    # a job's file: its path as long as a typical one (about 60 bytes), each byte hashed
    meta_file = os.path.join(work_dir, "job-output", "step-0001", "rank-0000.dat")
    os.makedirs(os.path.dirname(meta_file), exist_ok=True)
    with open(meta_file, "wb") as f:
        f.write(b"x")
    loops = {mode: [META_LOOP, meta_file, str(calls), "1000", mode] for mode in META_MODES}
    loops["pread"] = [LOOP, probe_file, str(calls), "1000", "0"]
    return {"calls": calls, "meta_file_bytes": len(meta_file),
            **compare_loops(loops, reps, cap, cpu, work_dir, other_library)}


def compare_stdio(probe_file, calls, reps, cap, cpu, work_dir, other_library=None):
    """The 8-byte fwrite loop and the 1-byte pread loop (compare_loops)."""
    loops = {"fwrite": [STDIO_LOOP, os.path.join(work_dir, "stdio-loop.out"), str(calls), "1000"],
             "pread": [LOOP, probe_file, str(calls), "1000", "0"]}
    return {"calls": calls, **compare_loops(loops, reps, cap, cpu, work_dir, other_library)}


def print_loops(title, measured):
    print(f"{title} in the main thread, median of 1000-call batches, {measured['reps']} alternating runs of "
          f"{measured['calls']} calls" + (f"; other: {measured['other_library']}" if measured["other_library"] else ""))
    for mode, m in measured["loops"].items():
        line = (f"  {mode:9s} without {m['median_ns_without']:.1f} ns, with {m['median_ns_with']:.1f} ns, added "
                f"{m['added_ns_median']:.1f} ns (round by round {m['added_ns_paired']:.1f}; mean over all batches "
                f"{m['added_ns_mean']:.1f})")
        if "median_ns_other" in m:
            line += (f"; other {m['median_ns_other']:.1f} ns (added {m['other_added_ns_median']:.1f}), with minus "
                     f"other round by round {m['with_minus_other_ns_paired']:.1f} ns")
        print(line)


def main():
    import ioassess

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--json", default=os.path.join(HERE, "out", "overhead.json"))
    parser.add_argument("--mpiio-calls", type=int, default=400_000)
    parser.add_argument("--only-mpiio", action="store_true", help="measure the MPI-IO recorder only")
    parser.add_argument("--only-darshan", action="store_true", help="measure beside Darshan only")
    parser.add_argument("--compare", metavar="LIBRARY", help="another libioassess.so measured side by side")
    parser.add_argument("--call", choices=("pread", "read"), default="pread",
                        help="the POSIX parts' call: pread, or read at each thread's own descriptor's position")
    parser.add_argument("--main-thread", action="store_true",
                        help="the single-thread part in the main thread: a process with one thread")
    parser.add_argument("--meta", action="store_true",
                        help="metadata calls (stat, open/close) and the single-thread pread loop only")
    parser.add_argument("--stdio", action="store_true",
                        help="8-byte fwrite calls and the single-thread pread loop only")
    args = parser.parse_args()

    results = {}
    cap = 1 << 20
    with tempfile.TemporaryDirectory(prefix="ioassess-bench-") as work_dir:
        probe_file = os.path.join(work_dir, "probe")
        with open(probe_file, "wb") as f:
            f.write(os.urandom(max(args.calls, args.mpiio_calls) + 4096))
        with open(probe_file, "rb") as f:
            f.read()
        if args.meta:
            results["meta"] = compare_meta(probe_file, args.calls, args.reps, cap, 1, work_dir, args.compare)
            print_loops(f"metadata calls (a path of {results['meta']['meta_file_bytes']} bytes)", results["meta"])
        if args.stdio:
            results["stdio"] = compare_stdio(probe_file, args.calls, args.reps, cap, 1, work_dir, args.compare)
            print_loops("stdio calls", results["stdio"])
        if not (args.only_mpiio or args.only_darshan or args.meta or args.stdio):
            single = compare(probe_file, args.calls, 0 if args.main_thread else 1, args.reps, cap, cpu=1,
                             work_dir=work_dir, other_library=args.compare, call=args.call)
            threaded = compare(probe_file, args.calls // 16, 16, args.reps, cap, cpu=None, work_dir=work_dir,
                               other_library=args.compare, call=args.call)
            results.update(single_thread=single, threads_16=threaded,
                           ratio_16_to_1=threaded["added_ns_median"] / single["added_ns_median"])
            print_posix(args, cap, single, threaded, results["ratio_16_to_1"])
        if not (args.only_mpiio or args.meta or args.stdio):
            darshan_lib, why_not = darshan_library()
            if darshan_lib:
                results["darshan"] = compare_darshan(probe_file, args.reps, cap, 1, work_dir, darshan_lib)
                print_darshan(args, results["darshan"])
            else:
                print(f"  beside Darshan: not measured ({why_not})")
        program = mpiio_loop()
        if not (args.only_darshan or args.meta or args.stdio) and program and ioassess.mpiio_library_path():
            results["mpiio"] = [compare_mpiio(program, probe_file, args.mpiio_calls, mode, args.reps, cap, 1,
                                              work_dir) for mode in ("at", "pointer")]
            print_mpiio(args, results["mpiio"])
        elif not (args.only_darshan or args.meta or args.stdio):
            print("  MPI-IO: not measured (no mpicc, or ioassess was installed without libioassess-mpiio.so)")
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(results, f, indent=1)
    print(f"  details: {args.json}")
    return 0


def print_posix(args, cap, single, threaded, ratio_16):
    cap_kib = cap * 64 // 1024
    added_rss = single["peak_rss_kib_with"] - single["peak_rss_kib_without"]
    added_rss_16 = threaded["peak_rss_kib_with"] - threaded["peak_rss_kib_without"]
    print(f"1-byte {args.call} on a cached file, median of 1000-call batches, {args.reps} alternating runs")
    print(f"  1 thread,  {args.calls} calls: without {single['median_ns_without']:.1f} ns, "
          f"with {single['median_ns_with']:.1f} ns, added {single['added_ns_median']:.1f} ns "
          f"(target <= 50); mean over all batches added {single['added_ns_mean']:.1f} ns")
    print(f"  16 threads, {args.calls // 16} calls each: without {threaded['median_ns_without']:.1f} ns, "
          f"with {threaded['median_ns_with']:.1f} ns, added {threaded['added_ns_median']:.1f} ns, "
          f"{ratio_16:.2f}x the single-thread figure (target <= 2x); mean added "
          f"{threaded['added_ns_mean']:.1f} ns")
    print(f"  page-cache sampling's own cost (with minus with IOASSESS_PAGECACHE=0): 1 thread "
          f"{single['pagecache_ns_median']:.1f} ns (round by round {single['pagecache_ns_paired']:.1f} ns), 16 threads "
          f"{threaded['pagecache_ns_median']:.1f} ns (round by round {threaded['pagecache_ns_paired']:.1f} ns); "
          f"recorder with sampling off added {single['added_ns_median_pagecache_off']:.1f} ns (1 thread), "
          f"with sampling on {single['added_ns_median']:.1f} ns (target <= 30); mean over all batches: sampling "
          f"{single['pagecache_ns_mean']:.1f} ns")
    print(f"  peak RSS added: 1 thread {added_rss} KiB, 16 threads {added_rss_16} KiB "
          f"(target <= cap {cap_kib} KiB + 1024 KiB)")
    if "other" in single:
        print(f"  {single['other']['library']}, side by side: added {single['other']['added_ns_median']:.1f} ns "
              f"(1 thread), {threaded['other']['added_ns_median']:.1f} ns (16 threads); mean over all batches "
              f"added {single['other']['added_ns_mean']:.1f} ns, {threaded['other']['added_ns_mean']:.1f} ns; "
              f"this recorder minus it, round by round: {single['other']['with_minus_other_ns_paired']:.1f} ns "
              f"(1 thread), {threaded['other']['with_minus_other_ns_paired']:.1f} ns (16 threads)")


def print_darshan(args, measured):
    added = measured["added_ns"]
    print(f"beside Darshan: 1-byte pread, {measured['calls']} calls before Darshan's DXT buffer fills, median of "
          f"1000-call batches, {args.reps} alternating runs, without {measured['median_ns_without']:.1f} ns")
    print(f"  added per call: ioassess {added['ioassess']:.1f} ns (page-cache sampling off: "
          f"{added['ioassess_pagecache_off']:.1f} ns), Darshan {added['darshan']:.1f} ns, "
          f"Darshan+DXT {added['darshan_dxt']:.1f} ns, Darshan+DXT and ioassess {added['darshan_dxt_ioassess']:.1f} ns")
    print(f"  ioassess / Darshan+DXT {measured['ioassess_to_darshan_dxt']:.3f} (targets: <= 0.15 without, <= 0.16 "
          f"with page-cache sampling; round by round {measured['ioassess_to_darshan_dxt_paired']:.3f}; sampling off "
          f"{measured['ioassess_pagecache_off_to_darshan_dxt']:.3f}); page-cache sampling's own cost "
          f"{measured['pagecache_ns']:.1f} ns (round by round {measured['pagecache_ns_paired']:.1f} ns); stacking adds "
          f"{measured['stacking_adds_ns']:.1f} ns to Darshan+DXT (round by round "
          f"{measured['stacking_adds_ns_paired']:.1f} ns; target <= 30)")
    print(f"  the clock's floor (two TSC reads around the call, nothing else): alone {added['clock_floor']:.1f} ns, "
          f"behind Darshan+DXT {measured['clock_floor_stacked_adds_ns']:.1f} ns; ioassess's bookkeeping beyond it "
          f"(round by round): alone {measured['bookkeeping_ns']:.1f} ns, behind Darshan+DXT "
          f"{measured['bookkeeping_stacked_ns']:.1f} ns; the floor with ordered reads: rdtscp "
          f"{added['clock_floor_rdtscp']:.1f} ns, lfence+rdtsc {added['clock_floor_lfence']:.1f} ns, "
          f"ordered (rdtsc+lfence / rdtscp, the recorder's) {added['clock_floor_ordered']:.1f} ns, "
          f"fenced {added['clock_floor_fenced']:.1f} ns; round by round ordered - rdtsc "
          f"{measured['clock_floor_ordered_minus_rdtsc_ns']:.1f} ns, fenced - rdtsc "
          f"{measured['clock_floor_fenced_minus_rdtsc_ns']:.1f} ns")


def print_mpiio(args, measured):
    print(f"1-byte MPI-IO reads on a cached file (one MPI process; ROMIO makes one pread of each), median of "
          f"100-call batches, {args.reps} alternating runs without recorders, with libioassess.so alone and with both")
    for m in measured:
        call = "MPI_File_read_at" if m["mode"] == "at" else "MPI_File_read (individual file pointer)"
        print(f"  {call}: added by the MPI-IO recorder {m['added_ns_mpiio_layer']:.1f} ns round by round "
              f"(target <= 100; "
              f"mean over all batches {m['added_ns_mean_mpiio_layer']:.1f} ns); by the pread's recording "
              f"{m['added_ns_posix_layer']:.1f} ns; whole call without {m['median_ns_without']:.1f} ns, with both "
              f"{m['median_ns_both']:.1f} ns, added {m['added_ns_both_layers']:.1f} ns; PMPI_ name minus MPI_ name "
              f"with both {m['pmpi_minus_mpi_ns_both']:.1f} ns (both recorded: about 0)")


if __name__ == "__main__":
    sys.exit(main())
