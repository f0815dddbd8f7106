"""`make validate`, part 3: the noise floor of the overwrite targets of bench/validate_fio.py.

A write workload's error there is (estimated loss - measured loss) / uncached run's I/O time,
and the measured loss is the uncached run's I/O time minus its cached re-run's: the error is the
model's cached time against one cached re-run's, so it can be no smaller than the spread of the
cached re-runs themselves. Here each write workload runs in rounds of (uncached, cached, cached
again) on the same file, with no model in the way, and the script gives that spread: how far
two cached runs in the same state differ, relative to the uncached run's I/O time, and how
often the median of three repeats misses +-5 % (the issue's target) even for an estimator that
knows the mean cached time exactly, or one that is itself one more measurement of it (as a
calibration is), by resampling the rounds.

usage: python3 bench/validate_noise.py [--dir DIR | --glusterfs] [--rounds N] [--scale K]
       (K: each run moves K times the bytes of bench/validate_fio.py's run; run as root)
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

import validate_fio
from ioassess.inputs.load import load_job

HERE = os.path.dirname(os.path.abspath(__file__))
WRITES = ("randwrite 64k", "randwrite 1m", "write 64k", "write 1m")
TOLERANCE = 0.05
RESAMPLES = 20000


def io_time(command, data, trace_dir):
    """The command's I/O time on the data file, recorded."""
    result = validate_fio.ioassess("run", "--trace-dir", trace_dir, "--", *command)
    if result.returncode != 0:
        raise SystemExit(f"validate_noise: {' '.join(command)} failed: {result.stderr.strip()}")
    job = load_job([trace_dir])
    shutil.rmtree(trace_dir)
    names = np.array([f.name for f in job.files])
    on_file = (names[job.ops["file"]] == data) & (job.ops["direction"] < 2)
    return float(job.ops["duration_s"][on_file].sum())


def rounds_of(name, data, work, rounds, scale):
    """{"uncached": [...], "cached": [...], "cached_again": [...]} I/O seconds of each round."""
    rw, block, io_bytes, _, _ = validate_fio.WORKLOADS[name]
    command = validate_fio.fio_command(data, rw, block, io_bytes * scale, validate_fio.FILE_BYTES,
                                       "--overwrite=1")
    times = {"uncached": [], "cached": [], "cached_again": []}
    for round_ in range(rounds):
        for state in times:
            validate_fio.set_state(data, state != "uncached")
            times[state].append(io_time(command, data, os.path.join(work, f"{round_}-{state}")))
    return times


def median_of_three_misses(uncached, cached, rng):
    """Shares of resampled triples of rounds whose median error misses the tolerance, for an
    estimate equal to the mean cached time and for one equal to another round's cached time."""
    exact = one_run = 0
    for _ in range(RESAMPLES):
        picks = rng.choice(len(cached), 4, replace=False)
        triple, other = picks[:3], picks[3]
        base = uncached[triple % len(uncached)]
        exact += abs(np.median((cached[triple] - cached.mean()) / base)) > TOLERANCE
        one_run += abs(np.median((cached[triple] - cached[other]) / base)) > TOLERANCE
    return exact / RESAMPLES, one_run / RESAMPLES


def summary(name, times, rng):
    uncached = np.array(times["uncached"])
    cached = np.concatenate([times["cached"], times["cached_again"]])
    pair = np.abs(np.subtract(times["cached"], times["cached_again"])) / uncached
    exact, one_run = median_of_three_misses(uncached, cached, rng)
    return {"workload": name, **times, "pair_difference_median": float(np.median(pair)),
            "pair_difference_max": float(pair.max()), "median_of_three_misses_exact": exact,
            "median_of_three_misses_one_run": one_run}


def measure(directory, rounds, scale, out):
    rng = np.random.default_rng(1)
    work = tempfile.mkdtemp(prefix="ioassess-noise-", dir=directory)
    try:
        data = os.path.join(work, "data")
        subprocess.run(validate_fio.fio_command(data, "write", "1m", validate_fio.FILE_BYTES,
                                                validate_fio.FILE_BYTES, "--overwrite=1"),
                       check=True, capture_output=True)
        rows = []
        for name in WRITES:
            row = summary(name, rounds_of(name, data, work, rounds, scale), rng)
            rows.append(row)
            print(f"{name:>14}: uncached {np.median(row['uncached']):.3f} s, cached {np.median(row['cached']):.3f} s; "
                  f"two cached runs differ by {row['pair_difference_median']:.1%} of the uncached I/O time "
                  f"(median; max {row['pair_difference_max']:.1%}); the median of three misses "
                  f"+-{TOLERANCE:.0%} in {row['median_of_three_misses_exact']:.0%} of triples with an exact "
                  f"estimate, {row['median_of_three_misses_one_run']:.0%} with one run's", flush=True)
    finally:
        shutil.rmtree(work)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump({"dir": directory, "rounds": rounds, "scale": scale, "workloads": rows}, f, indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default="/tmp")
    parser.add_argument("--glusterfs", action="store_true", help="on a GlusterFS volume made for the run")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--json")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("validate_noise: run as root (the uncached runs need /proc/sys/vm/drop_caches)")
    out = args.json or os.path.join(HERE, "out", f"validate_noise{'_glusterfs' if args.glusterfs else ''}.json")
    if not args.glusterfs:
        measure(args.dir, args.rounds, args.scale, out)
        return
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
    import glusterfs
    with glusterfs.volume() as vol:
        measure(str(vol.mount), args.rounds, args.scale, out)


if __name__ == "__main__":
    main()
