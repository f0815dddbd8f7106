"""`make validate`, part 3: the wall-clock seconds at stake of a finding against the time its fix
actually saves. Three MPI jobs (tests/progs/mpi_stakes.c), each run beside its fixed twin under
`ioassess run`, alternating, REPEATS times:

  one rank     rank 0 reads all the blocks (O_DIRECT), the others none; fixed: the same blocks
               split evenly over the ranks. Finding: "Some ranks spent far longer in I/O than
               the others".
  balanced     the blocks split evenly; "fixed": the same program. The imbalance findings (the
               straggler finding, P18, P19) should not fire, or with a stake near the ~0 it saves.
  collective   the ranks compute, then read uncached data with MPI_File_read_all; fixed: the read
               started with MPI_File_iread_at before the same computation, then MPI_Wait.
               Finding: M06 "Blocking MPI-IO reads".

Storage that serves each rank at a rate of its own, as a parallel file system serves each
client: every rank runs in a cgroup of its own whose reads of the input's disk the kernel holds
to READ_REQUESTS_PER_S and READ_BYTES_PER_S (blkio throttling, cgroup v1 or v2; root). The bare
virtual disk here serves two ranks' O_DIRECT reads 1.7 times as fast as one, not twice, and its
uncached buffered reads cost the guest about as much kernel CPU as they take time, so that with
every core computing overlap hides little of them (docs/assessment.md); where the kernel cannot
throttle, the jobs run on the bare disk and the table says so.

The saving is the median over the pairs of the unfixed program's elapsed time less its fixed
twin's (MPI_Wtime inside the program, from the barrier after MPI_Init to the last barrier: the
launch, the same for both, is left out; the times from outside are in the JSON too); the stake
is the median of the finding's at_stake_s over the unfixed runs' reports (0 where it did not
fire). Target: the stake within 10 % of the saving (for the balanced job, of the run time).
Prints a table and writes JSON (default bench/out/validate_stakes.json).

usage: python3 bench/validate_stakes.py [--dir DIR] [--repeats N] [--ranks R] [--work MSTEPS] [--bare]
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PROGRAM = os.path.join(REPO, "tests", "progs", "bin", "mpi_stakes")
BLOCK = 4096                 # as in tests/progs/mpi_stakes.c
SMALL_BLOCKS = 20000         # one rank / balanced: 80 MB in O_DIRECT reads of 4 KiB (~1 s alone here)
LARGE_BLOCKS = 32768         # collective: 128 MiB read uncached, half per rank of two
WORK = 900                   # million steps of computation before the collective read (~1.5 s here)
READ_REQUESTS_PER_S = 8000   # per rank: 2.5 s for the 20000 blocks alone, 1.25 s split over two
READ_BYTES_PER_S = 50 << 20  # per rank: 1.3 s for a rank's 64 MiB of the collective read
TOLERANCE = 0.10
STRAGGLERS = "Some ranks spent far longer in I/O than the others"
# case: (unfixed mode, fixed mode, input, the findings the fix is about: titles or codes)
CASES = {
    "one rank": ("alone", "split", "small", (STRAGGLERS,)),
    "balanced": ("split", "split", "small", (STRAGGLERS, "P18", "P19")),
    "collective": ("blocking", "nonblocking", "large", ("M06",)),
}


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def write_input(path, blocks):
    """blocks blocks of BLOCK bytes (a random MiB repeated), written through to the device."""
    chunk = os.urandom(1 << 20)
    with open(path, "wb") as f:
        left = blocks * BLOCK
        while left:
            left -= f.write(chunk[:min(left, len(chunk))])
        f.flush()
        os.fsync(f.fileno())


def disk_of(path):
    """MAJOR:MINOR of the whole disk holding path (the kernel throttles disks, not partitions),
    or None when path is not on a block device."""
    st = os.stat(path)
    sysfs = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    if not os.path.exists(sysfs):
        return None
    if os.path.exists(os.path.join(sysfs, "partition")):
        sysfs = os.path.join(os.path.realpath(sysfs), "..")
    with open(os.path.join(sysfs, "dev")) as f:
        return f.read().strip()


def throttled_cgroups(path, ranks):
    """One new cgroup per rank, PREFIX0 .. PREFIX<ranks-1>, whose reads of path's disk the kernel
    holds to READ_REQUESTS_PER_S and READ_BYTES_PER_S: (PREFIX, how) by cgroup v1's
    blkio.throttle or v2's io.max; (None, why not) where this host cannot."""
    disk = disk_of(path)
    if disk is None:
        return None, f"{path} is not on a block device"
    name = f"ioassess-validate-{os.getpid()}-rank"
    limits = {"blkio.throttle.read_iops_device": f"{disk} {READ_REQUESTS_PER_S}",
              "blkio.throttle.read_bps_device": f"{disk} {READ_BYTES_PER_S}"}
    prefix = None
    try:
        if os.path.exists("/sys/fs/cgroup/blkio/blkio.throttle.read_bps_device"):
            prefix, how = os.path.join("/sys/fs/cgroup/blkio", name), "cgroup v1 blkio.throttle"
        else:
            with open("/sys/fs/cgroup/cgroup.controllers") as f:
                if "io" not in f.read().split():
                    return None, "no io controller in cgroup v2"
            with open("/sys/fs/cgroup/cgroup.subtree_control", "w") as f:
                f.write("+io")
            prefix, how = os.path.join("/sys/fs/cgroup", name), "cgroup v2 io.max"
            limits = {"io.max": f"{disk} riops={READ_REQUESTS_PER_S} rbps={READ_BYTES_PER_S}"}
        for rank in range(ranks):
            os.mkdir(f"{prefix}{rank}")
            for control, value in limits.items():
                with open(os.path.join(f"{prefix}{rank}", control), "w") as f:
                    f.write(value)
        return prefix, how
    except OSError as e:
        remove_cgroups(prefix, ranks)
        return None, f"cannot throttle reads: {e}"


def remove_cgroups(prefix, ranks):
    for rank in range(ranks if prefix else 0):
        if os.path.isdir(f"{prefix}{rank}"):
            os.rmdir(f"{prefix}{rank}")


def run(mode, data, blocks, ranks, work, trace_dir, cgroups):
    """One job under `ioassess run` (this checkout's), each rank in cgroup CGROUPS<rank> when
    cgroups is a prefix: its elapsed time (printed by the program), its time from outside, and
    its assessment."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("IOASSESS_")}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    if cgroups:
        env["MPI_STAKES_CGROUP"] = cgroups
    command = [sys.executable, "-m", "ioassess", "run", "--trace-dir", trace_dir, "--",
               shutil.which("mpiexec"), "-n", str(ranks), PROGRAM, mode, data, str(blocks), str(work)]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd="/")
    outside = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"{mode}: {result.stderr[-2000:]}")
    elapsed = float(re.search(r"^elapsed ([0-9.]+)$", result.stdout, re.M).group(1))
    with open(os.path.join(trace_dir, "assessment.json")) as f:
        assessment = json.load(f)
    shutil.rmtree(trace_dir)
    return {"elapsed_s": elapsed, "outside_s": outside, "runtime_s": assessment["job"]["runtime_s"],
            "findings": [{"title": r["title"], "code": r["code"], "level": r["level"], "at_stake_s": r["at_stake_s"],
                          "rank_seconds": r["rank_seconds"], "ranks": [u["rank"] for u in r["ranks"]]}
                         for r in assessment["recommendations"]]}


def stake_of(found, about):
    """The largest wall-clock stake of the findings `about` (titles or codes) in one report, 0
    when none fired."""
    return max((f["at_stake_s"] or 0.0 for f in found if f["title"] in about or f["code"] in about), default=0.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=None, help="where the jobs' input files go (default: a new one in /tmp)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--work", type=int, default=WORK)
    parser.add_argument("--bare", action="store_true", help="run on the bare disk, reads not throttled")
    parser.add_argument("--json", default=os.path.join(HERE, "out", "validate_stakes.json"))
    args = parser.parse_args()
    if not os.access(PROGRAM, os.X_OK):
        sys.exit(f"{PROGRAM} is missing: make -C tests/progs")
    work_dir = tempfile.mkdtemp(prefix="validate-stakes-", dir=args.dir or "/tmp")
    inputs = {"small": (os.path.join(work_dir, "small"), SMALL_BLOCKS),
              "large": (os.path.join(work_dir, "large"), LARGE_BLOCKS)}
    cgroups, throttle = None, None
    try:
        for data, blocks in inputs.values():
            os.mkdir(data)
            write_input(os.path.join(data, "input"), blocks)
        cgroups, throttle = (None, "--bare") if args.bare else throttled_cgroups(work_dir, args.ranks)
        results = {}
        for case, (unfixed, fixed, which, about) in CASES.items():
            data, blocks = inputs[which]
            runs = {"unfixed": [], "fixed": []}
            for i in range(args.repeats):
                for kind, mode in (("unfixed", unfixed), ("fixed", fixed)):
                    runs[kind].append(run(mode, data, blocks, args.ranks, args.work,
                                          os.path.join(work_dir, f"trace-{kind}-{i}"), cgroups))
            saved = [u["elapsed_s"] - f["elapsed_s"] for u, f in zip(runs["unfixed"], runs["fixed"])]
            saved_outside = [u["outside_s"] - f["outside_s"] for u, f in zip(runs["unfixed"], runs["fixed"])]
            stakes = [stake_of(r["findings"], about) for r in runs["unfixed"]]
            stake, saving = statistics.median(stakes), statistics.median(saved)
            runtime = statistics.median(r["runtime_s"] for r in runs["unfixed"])
            scale = runtime if case == "balanced" else abs(saving)
            others = sorted({f["code"] or f["title"] for r in runs["unfixed"] for f in r["findings"]
                             if f["level"] in ("high", "warn") and f["title"] not in about and f["code"] not in about})
            results[case] = {
                "unfixed": unfixed, "fixed": fixed, "findings": list(about),
                "stake_s": stake,
                "stakes_s": stakes, "saving_s": saving, "savings_s": saved,
                "saving_outside_s": statistics.median(saved_outside), "runtime_s": runtime,
                "ratio": stake / saving if saving > 0 else None,
                "within": abs(stake - saving) <= TOLERANCE * scale,
                "fired": sum(s > 0 for s in stakes),
                "other_findings": {name: statistics.median(stake_of(r["findings"], (name,)) for r in runs["unfixed"])
                                   for name in others},
                "runs": runs}
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
        if cgroups:
            remove_cgroups(cgroups, args.ranks)

    print(f"seconds at stake against the time the fix saves: {args.ranks} ranks, {args.repeats} pairs, "
          f"{cpu_name()}, {datetime.date.today()}")
    print(f"storage: each rank's reads held to {READ_REQUESTS_PER_S} requests/s and {READ_BYTES_PER_S >> 20} MiB/s "
          f"({throttle})" if cgroups else f"storage: the bare disk (reads not throttled: {throttle})")
    print(f"{'case':<11} {'finding':<14} {'fired':>5} {'stake s':>8} {'saved s':>8} {'spread s':>15} "
          f"{'outside s':>9} {'ratio':>6}  within 10 %")
    for case, r in results.items():
        name = "stragglers" if r["findings"][0] == STRAGGLERS else r["findings"][0]
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        print(f"{case:<11} {name:<14} {r['fired']:>3}/{args.repeats} {r['stake_s']:>8.3f} {r['saving_s']:>8.3f} "
              f"{min(r['savings_s']):>7.3f}-{max(r['savings_s']):<7.3f} {r['saving_outside_s']:>9.3f} {ratio:>6}  "
              f"{'yes' if r['within'] else 'NO'}" + (" (of the run time)" if case == "balanced" else ""))
        if r["other_findings"]:
            print(" " * 12 + "other findings (their fix not run): " +
                  ", ".join(f"{k} {v:.3f} s" for k, v in r["other_findings"].items()))
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"cpu": cpu_name(), "date": datetime.datetime.now().isoformat(timespec="seconds"),
                   "ranks": args.ranks, "repeats": args.repeats, "work_msteps": args.work,
                   "tolerance": TOLERANCE,
                   "storage": {"read_requests_per_s": READ_REQUESTS_PER_S, "read_bytes_per_s": READ_BYTES_PER_S,
                               "throttled": cgroups is not None, "how": throttle},
                   "cases": results}, f, indent=1)
    print(f"wrote {args.json}")
    return 0 if all(r["within"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
