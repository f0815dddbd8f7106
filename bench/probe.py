"""The probe's costs (docs/performance.md, "The file-system probe"); targets from docs/probe.md:

    python3 bench/probe.py [--dir DIR] [--seconds 60] [--days 30] [--report-days 60]

1. `ioassess probe run` at one round per second on DIR (default: a directory under /var/tmp)
   for --seconds: the CPU it uses (user + system, from /proc) over the rounds after its data file
   and pool are made, as a share of one core (target: at most 1 %), and its peak resident size
   (VmHWM; target: at most 60 MiB).
2. A store with --report-days of made-up history at one round per second ending now
   (ioassess/site/probe/synthetic.py), aggregated and pruned as the probe does (raw rows kept
   --days): its size (target: under 2 GiB with 30 days of raw rows), the slowdown of a 1-hour
   job window (probe_slowdown, normal over 30 days; target: at most 100 ms), and
   `ioassess probe report --since 60d` as a user runs it (target: at most 5 s).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from ioassess.site.probe.config import Target
from ioassess.site.probe.slowdown import probe_slowdown
from ioassess.site.probe.store import Store
from ioassess.site.probe.synthetic import add_history

DAY = 86400
TARGET_CPU_SHARE, TARGET_RSS_MIB, TARGET_STORE_GIB, TARGET_WINDOW_S, TARGET_REPORT_S = 0.01, 60, 2, 0.1, 5.0


def probe_costs(directory, seconds):
    with tempfile.TemporaryDirectory(dir=directory) as work:
        target = os.path.join(work, "target")
        os.mkdir(target)
        db = os.path.join(work, "probe.sqlite")
        probe = subprocess.Popen([sys.executable, "-m", "ioassess", "probe", "run", "--dir", target, "--db", db,
                                  "--interval", "1s"], cwd=work, stderr=subprocess.DEVNULL)
        try:
            while not _has_rows(db):   # the data file and the pool are made
                time.sleep(0.2)
            cpu_before, wall_before = _cpu_seconds(probe.pid), time.monotonic()
            time.sleep(seconds)
            cpu, wall = _cpu_seconds(probe.pid) - cpu_before, time.monotonic() - wall_before
            peak_kib = _status_kib(probe.pid, "VmHWM")
        finally:
            probe.terminate()
            probe.wait()
            subprocess.run([sys.executable, "-m", "ioassess", "probe", "run", "--dir", target, "--cleanup"],
                           cwd=work, stderr=subprocess.DEVNULL, check=True)
    print(f"probe run, 1 round/s for {wall:.0f} s: CPU {cpu / wall:.2%} of one core (target {TARGET_CPU_SHARE:.0%}), "
          f"peak RSS {peak_kib / 1024:.1f} MiB (target {TARGET_RSS_MIB} MiB)")


def _has_rows(db):
    if not os.path.exists(db):
        return False
    import sqlite3
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
            return connection.execute("SELECT count(*) FROM samples").fetchone()[0] > 0
    except sqlite3.Error:
        return False


def _cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _status_kib(pid, key):
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(key + ":"))


def store_costs(directory, raw_days, report_days):
    with tempfile.TemporaryDirectory(dir=directory) as work:
        db = os.path.join(work, "probe.sqlite")
        store = Store(db, writable=True)
        target = store.target_id(Target("scratch", "/scratch", 1 << 30, 10_000), "O_DIRECT")
        now = time.time()
        start = now - report_days * DAY
        began = time.perf_counter()
        for day in range(report_days):   # as the probe goes: rows, then aggregates, then retention
            add_history(store, target, start + day * DAY, DAY, seed=day,
                        slow_spans=[(start + day * DAY + 3600, start + day * DAY + 7200, 4.0, ["read_1MiB"])])
            store.aggregate(start + (day + 1) * DAY)
            store.prune(start + (day + 1) * DAY, raw_days, 365)
        store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = sum(os.path.getsize(db + suffix) for suffix in ("", "-wal", "-shm") if os.path.exists(db + suffix))
        raw = store.db.execute("SELECT count(*) FROM samples").fetchone()[0]
        print(f"store, {report_days} days at 1 round/s ({raw_days} days raw, {raw} raw rows; made in "
              f"{time.perf_counter() - began:.0f} s): {size / 2**30:.2f} GiB (target under {TARGET_STORE_GIB} GiB)")

        times = []
        for _ in range(7):
            began = time.perf_counter()
            probe_slowdown(store, "scratch", now - 3 * 3600, now - 2 * 3600)
            times.append(time.perf_counter() - began)
        print(f"slowdown of a 1-hour job window (normal over 30 days): median {statistics.median(times) * 1e3:.0f} ms "
              f"(target {TARGET_WINDOW_S * 1e3:.0f} ms; runs {', '.join(f'{t * 1e3:.0f}' for t in times)} ms)")
        store.close()

        began = time.perf_counter()
        subprocess.run([sys.executable, "-m", "ioassess", "probe", "report", "--db", db, "--since",
                        f"{report_days}d", "-o", os.path.join(work, "probe.html")], cwd=work, check=True,
                       stderr=subprocess.DEVNULL)
        print(f"ioassess probe report --since {report_days}d: {time.perf_counter() - began:.2f} s, the command "
              f"with Python's start (target {TARGET_REPORT_S:g} s)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/var/tmp", help="where the probe and the store go (default: /var/tmp)")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--days", type=int, default=30, help="raw rows kept (default: 30)")
    parser.add_argument("--report-days", type=int, default=60)
    args = parser.parse_args()
    probe_costs(args.dir, args.seconds)
    store_costs(args.dir, args.days, args.report_days)


if __name__ == "__main__":
    main()
