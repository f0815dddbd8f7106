"""GlusterFS over FUSE: what reads and writes of a job cost in each state of the caches between
it and the brick's disk (docs/cause-models.md, "GlusterFS over FUSE" has the numbers).

A one-brick volume on this machine (tests/glusterfs.py), a 256 MiB file on its FUSE mount, and
the workload generator (ioassess-workload) under the recorder, as training measures: random
reads (a permutation of size-aligned slots: no slot twice in a run) of 64 KiB and 1 MiB in

  a  page cache      the mount's file read whole: this kernel's page cache holds it
  b  server memory   POSIX_FADV_DONTNEED on the mount's file (what any user with an fd can do);
                     the brick's file stays in the server's page cache: every read goes through
                     FUSE to the client, over loopback to the brick, and out of its memory
  c  storage         the brick's file evicted too (POSIX_FADV_DONTNEED on it, as root on the server)
  d  b, client xlators off   b after `gluster volume set` of every client-side performance
                     xlator off (write-behind, open-behind, quick-read, md-cache, io-threads;
                     io-cache, read-ahead and readdir-ahead are off by default in 10.x)
  e  b, io-cache on  b with io-cache on (io-cache-size 512MB, more than the file), the file read whole
                     through the mount first: does the client's io-cache keep what b evicted?

and random overwrites (file in a, and in b) and appends (a new file, written from its start) of
64 KiB and 1 MiB, with the default xlators and with write-behind off. Each state is prepared and
checked (mincore on the mount's and on the brick's file) before each of REPEATS runs; medians
and percentiles of the pooled ops. Then whether a user other than root evicts b (fadvise on
the mount) and whether that reaches the server's copy.

usage: python3 bench/glusterfs_states.py [--repeats N] [--json OUT]   (root)
"""
import argparse
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))
import glusterfs  # noqa: E402  (tests/glusterfs.py)
from ioassess import recorder_library_path  # noqa: E402
from ioassess.inputs.trace import read_trace_dir  # noqa: E402
from ioassess.inputs.traceformat import Op  # noqa: E402
from ioassess.site.training import workload_program_path  # noqa: E402

FILE_BYTES = 256 << 20
SIZES = {"64k": 64 << 10, "1m": 1 << 20}
OPS = {"64k": 1024, "1m": 256}
USER = "ioassess-test"
CLIENT_XLATORS = ("write-behind", "open-behind", "quick-read", "stat-prefetch", "client-io-threads", "io-cache",
                  "read-ahead", "readdir-ahead")
WORKLOAD = workload_program_path()


def resident_fraction(path):
    out = subprocess.run([WORKLOAD, "--resident", str(path)], capture_output=True, text=True, check=True).stdout
    return float(re.search(r"resident_fraction=(\S+)", out).group(1))


def evict(path):
    subprocess.run([WORKLOAD, "--evict", str(path)], capture_output=True, check=True)


def fadvise_as(user, path):
    """POSIX_FADV_DONTNEED on path by user, on a descriptor opened read-only (the file is root's;
    the system's Python, which every user can run)."""
    script = ("import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); "
              "os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)")
    subprocess.run(["/usr/bin/python3", "-c", script, str(path)], check=True, user=user.pw_uid, group=user.pw_gid,
                   extra_groups=[])


def read_whole(path):
    with open(path, "rb", buffering=0) as f:
        while f.read(16 << 20):
            pass


def timed(command, target, op, work):
    """Durations (s) of the generator's preads or pwrites of target, under the recorder."""
    trace_dir = tempfile.mkdtemp(dir=work)
    os.rmdir(trace_dir)
    env = dict(os.environ, LD_PRELOAD=recorder_library_path(), IOASSESS_TRACE_DIR=trace_dir,
               IOASSESS_EXCLUDE="none", IOASSESS_MAX_RECORDS="100000")
    subprocess.run([WORKLOAD, *command], env=env, capture_output=True, text=True, check=True)
    ts = read_trace_dir(trace_dir)
    ids = np.array([i for i, info in ts.files.items() if info.name == str(target)], np.uint64)
    kind = Op.PREAD if op == "read" else Op.PWRITE
    chosen = np.isin(ts.ops["file_id"], ids) & (ts.ops["op"] == kind) & (ts.ops["result"] >= 0)
    shutil.rmtree(trace_dir)
    return ts.ops["duration_ns"][chosen] * 1e-9


def summary(durations):
    us = np.asarray(durations) * 1e6
    p5, p25, p50, p75, p95 = np.percentile(us, [5, 25, 50, 75, 95])
    return {"n": int(us.size), "p5": p5, "p25": p25, "median": p50, "p75": p75, "p95": p95}


def separation(faster, slower):
    """How well one duration threshold tells two states' ops apart: the threshold (us) that
    misclassifies the fewest, and the share of each state's ops on the wrong side of it."""
    faster, slower = np.sort(np.asarray(faster) * 1e6), np.sort(np.asarray(slower) * 1e6)
    candidates = np.unique(np.concatenate([faster, slower]))
    wrong_fast = 1 - np.searchsorted(faster, candidates, side="right") / faster.size   # faster ops above
    wrong_slow = np.searchsorted(slower, candidates, side="right") / slower.size       # slower ops at or below
    best = int(np.argmin(wrong_fast + wrong_slow))
    return {"threshold_us": float(candidates[best]), "faster_above": float(wrong_fast[best]),
            "slower_below": float(wrong_slow[best])}


def set_xlators(vol, value, names=CLIENT_XLATORS, extra=()):
    for name in names:
        vol.gluster("volume", "set", vol.name, f"performance.{name}", value)
    for key, setting in extra:
        vol.gluster("volume", "set", vol.name, key, setting)
    vol.remount()       # a new FUSE client with the new graph, its caches empty


def reset_xlators(vol):
    vol.gluster("volume", "reset", vol.name, "all")
    vol.remount()


def prepare(state, vol, data):
    brick = vol.brick / data.name
    if state in ("a",):
        read_whole(data)
        assert resident_fraction(data) > 0.99
    elif state in ("b", "d", "e"):
        if state == "e":
            read_whole(data)            # through the client: fills its io-cache
        if resident_fraction(brick) < 0.99:
            read_whole(brick)
        evict(data)
        assert resident_fraction(data) < 0.01 and resident_fraction(brick) > 0.99, "state b not reached"
    elif state == "c":
        evict(data)
        evict(brick)
        assert resident_fraction(data) < 0.01 and resident_fraction(brick) < 0.01, "state c not reached"


def measure_reads(vol, data, work, repeats, states=("a", "b", "c")):
    results = {}
    for state in states:
        for size_name, size in SIZES.items():
            pooled = []
            for repeat in range(repeats):
                prepare(state, vol, data)
                pooled.append(timed(["--file", str(data), "--op", "read", "--size", str(size), "--file-layout", "rnd",
                                     "--repeats", str(OPS[size_name]), "--budget", str(OPS[size_name] * size),
                                     "--seed", str(repeat + 1)], data, "read", work))
            results[f"read {size_name} {state}"] = np.concatenate(pooled)
            print(f"read {size_name} {state}: {summary(results[f'read {size_name} {state}'])}", flush=True)
    return results


def measure_writes(vol, data, work, repeats, tag):
    results = {}
    for size_name, size in SIZES.items():
        for state in ("a", "b"):
            pooled = []
            for repeat in range(repeats):
                os.sync()
                prepare(state, vol, data)
                pooled.append(timed(["--file", str(data), "--op", "write", "--size", str(size), "--file-layout",
                                     "rnd", "--repeats", str(OPS[size_name]), "--budget", str(OPS[size_name] * size),
                                     "--seed", str(repeat + 1)], data, "write", work))
            key = f"overwrite {size_name} {state}{tag}"
            results[key] = np.concatenate(pooled)
            print(f"{key}: {summary(results[key])}", flush=True)
        pooled = []
        appended = vol.mount / "appended.dat"
        for repeat in range(repeats):
            os.sync()
            pooled.append(timed(["--file", str(appended), "--op", "write", "--size", str(size), "--create",
                                 "--file-span", str(OPS[size_name] * size), "--repeats", str(OPS[size_name]),
                                 "--budget", str(OPS[size_name] * size), "--fsync-end"], appended, "write", work))
        key = f"append {size_name}{tag}"
        results[key] = np.concatenate(pooled)
        print(f"{key}: {summary(results[key])}", flush=True)
    return results


def user_eviction(vol, data):
    """What a user other than root evicts with POSIX_FADV_DONTNEED on the mount's file (root's,
    mode 0644: the user may only read it)."""
    try:
        user = pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER], check=True)
        user = pwd.getpwnam(USER)
    brick = vol.brick / data.name
    read_whole(data)
    read_whole(brick)
    before = (resident_fraction(data), resident_fraction(brick))
    fadvise_as(user, data)
    after = (resident_fraction(data), resident_fraction(brick))
    return {"user": USER, "mount_before": before[0], "brick_before": before[1], "mount_after": after[0],
            "brick_after": after[1]}


def default_xlators(vol):
    out = vol.gluster("volume", "get", vol.name, "all").stdout
    found = {}
    for name in ("write-behind", "read-ahead", "readdir-ahead", "io-cache", "open-behind", "quick-read",
                 "nl-cache", "stat-prefetch", "client-io-threads"):
        match = re.search(rf"^performance\.{re.escape(name)}\s+(\S+)", out, re.M)
        found[name] = match.group(1) if match else "?"
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=os.path.join(HERE, "out", "glusterfs_states.json"))
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: the bench serves a GlusterFS volume and evicts the brick's file")
    results, facts = {}, {}
    with glusterfs.volume() as vol, tempfile.TemporaryDirectory() as work:
        facts["xlators"] = default_xlators(vol)
        print(f"volume {vol.name}, client xlators by default: {facts['xlators']}", flush=True)
        data = vol.mount / "states.dat"
        block = os.urandom(16 << 20)
        with open(data, "wb") as f:
            for _ in range(FILE_BYTES // len(block)):
                f.write(block)
            os.fsync(f.fileno())
        results.update(measure_reads(vol, data, work, args.repeats))
        results.update(measure_writes(vol, data, work, args.repeats, ""))
        facts["user_eviction"] = user_eviction(vol, data)
        print(f"eviction by {USER}: {facts['user_eviction']}", flush=True)
        set_xlators(vol, "off")
        results.update(measure_reads(vol, data, work, args.repeats, states=("d",)))
        results.update(measure_writes(vol, data, work, args.repeats, " (client xlators off)"))
        reset_xlators(vol)
        set_xlators(vol, "on", names=("io-cache",), extra=(("performance.io-cache-size", "512MB"),))
        results.update(measure_reads(vol, data, work, args.repeats, states=("e",)))
        reset_xlators(vol)
    table = {key: summary(values) for key, values in results.items()}
    apart = {f"read {size} {one}|{two}": separation(results[f"read {size} {one}"], results[f"read {size} {two}"])
             for size in SIZES for one, two in (("a", "b"), ("b", "c"), ("a", "c"), ("a", "e"), ("e", "b"))}
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"facts": facts, "states_us": table, "separation": apart}, f, indent=1)
    print(f"{'what':<42} {'n':>5} {'p5':>9} {'p25':>9} {'median':>9} {'p75':>9} {'p95':>9}  (us)")
    for key, row in table.items():
        print(f"{key:<42} {row['n']:>5} " + " ".join(f"{row[p]:>9.1f}" for p in ("p5", "p25", "median", "p75", "p95")))
    for key, row in apart.items():
        print(f"{key}: best threshold {row['threshold_us']:.1f} us, {row['faster_above']:.1%} of the first above it, "
              f"{row['slower_below']:.1%} of the second at or below it")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
