"""The site's store (docs/fleet.md) against issue 29's numbers, on this machine:

- every named query on a made-up fleet (ioassess.site.fleet.synthetic) of 10^6 and 10^7 jobs
  with DuckDB: the median of 3 runs, each in a fresh connection (targets: <= 1 s at 10^6,
  <= 2 s at 10^7; `job` <= 0.5 s at 10^7), and the store's size (<= 300 MiB at 10^6);
- the fleet page on the same fleets: `ioassess fleet report` as an admin runs it (Python's start
  included), the median of 5 runs (target: <= 5 s at 10^6);
- compaction: spooled records of real recorded jobs (copies with their own job keys) per
  second on one core (>= 3,000);
- the write path of a job's end: spool_record's time per record (<= 5 ms) and size;
- ingest: `ioassess fleet ingest` of PyDarshan's logs (100 copies in a DARSHAN_LOGPATH tree) per
  second on every core, the median of 3 runs (>= 40), and PyDarshan's `job_stats` on them.

usage: python3 bench/fleet.py [--jobs 1000000 10000000] [--dir DIR] [--json OUT]
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

from ioassess.site.fleet.engine import Filters, connect, run_query
from ioassess.site.fleet.queries import QUERIES
from ioassess.site.fleet.record import job_record, record_hash
from ioassess.site.fleet.spool import spool_record
from ioassess.site.fleet.store import compact
from ioassess.site.fleet.synthetic import SYNTHETIC_JOB_ID, add_synthetic_fleet

HERE = os.path.dirname(os.path.abspath(__file__))
REPEATS = 3
PAGE_REPEATS = 5
INGEST_REPEATS = 3


def cpu_name():
    with open("/proc/cpuinfo") as f:
        return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "unknown")


def store_bytes(store):
    return sum(os.path.getsize(path) for path in glob.glob(f"{store}/**/*.parquet", recursive=True))


def query_seconds(store, name):
    """Median wall time of the query, each run in a fresh connection (views made anew)."""
    times = []
    argument = str(SYNTHETIC_JOB_ID + 12345) if QUERIES[name].takes_argument else None
    for _ in range(REPEATS):
        started = time.perf_counter()
        connection = connect(store)
        run_query(connection, name, Filters(), argument)
        times.append(time.perf_counter() - started)
        connection.close()
    return statistics.median(times)


def page_seconds(store, page):
    """Median wall time of `ioassess fleet report` on the store, the command in a process of its own."""
    times = []
    for _ in range(PAGE_REPEATS):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "ioassess", "fleet", "report", "--store", store, "-o", page],
                       check=True, capture_output=True, cwd="/")
        times.append(time.perf_counter() - started)
    return {"median_s": statistics.median(times), "runs_s": times, "page_bytes": os.path.getsize(page)}


def fleet_queries(work, jobs):
    store = os.path.join(work, f"fleet-{jobs}")
    os.makedirs(store)
    started = time.perf_counter()
    add_synthetic_fleet(store, jobs)
    made_s = time.perf_counter() - started
    compact(store)   # merges the months' parts as a site's compaction would
    size = store_bytes(store)
    result = {"jobs": jobs, "generate_s": made_s, "store_bytes": size, "bytes_per_job": size / jobs,
              "queries_s": {name: query_seconds(store, name) for name in QUERIES},
              "page": page_seconds(store, os.path.join(work, "fleet.html"))}
    shutil.rmtree(store)
    return result


def recorded_records(work):
    """Records of a few real recorded jobs (ioassess run)."""
    records = []
    for number, command in enumerate((["dd", "if=/dev/zero", f"of={work}/a", "bs=64k", "count=300"],
                                      ["cp", f"{work}/a", f"{work}/b"], ["cat", f"{work}/a", f"{work}/b"])):
        trace_dir = os.path.join(work, f"t{number}")
        subprocess.run([sys.executable, "-m", "ioassess", "run", "--trace-dir", trace_dir, "--", *command], check=True,
                       capture_output=True, cwd="/")
        with open(os.path.join(trace_dir, "assessment.json")) as f:
            records.append(job_record(json.load(f), source=trace_dir))
    return records


def compaction(work, records, count):
    store = os.path.join(work, "compaction")
    spool_times, sizes = [], []
    for number in range(count):
        record = json.loads(json.dumps(records[number % len(records)]))
        record["job"]["job_key"] = record["job"]["job_id"] = str(1000000 + number)
        record["job"]["record_hash"] = record_hash(record)
        started = time.perf_counter()
        path = spool_record(store, record)
        spool_times.append(time.perf_counter() - started)
        sizes.append(os.path.getsize(path))
    started_cpu, started = time.process_time(), time.perf_counter()
    counts = compact(store)
    cpu_s, wall_s = time.process_time() - started_cpu, time.perf_counter() - started
    assert counts["added"] == count, counts
    shutil.rmtree(store)
    return {"records": count, "spool_ms_median": statistics.median(spool_times) * 1e3,
            "spool_ms_max": max(spool_times) * 1e3, "spool_bytes_median": statistics.median(sizes),
            "compact_wall_s": wall_s, "compact_cpu_s": cpu_s, "records_per_cpu_s": count / cpu_s}


def ingest_rate(work, copies):
    """`ioassess fleet ingest` of copies of PyDarshan's logs in a DARSHAN_LOGPATH tree, as a site
    runs it (a process of its own, a store made anew each time), and PyDarshan's `job_stats` on
    the same logs side by side: medians of INGEST_REPEATS runs."""
    root = os.path.dirname(darshan.__file__)
    logs = sorted({os.path.basename(p): p for p in glob.glob(f"{root}/tests/input/*.darshan")
                   + glob.glob(f"{root}/examples/example_logs/*.darshan")}.values())
    tree = os.path.join(work, "logs", "2026", "11", "28")
    os.makedirs(tree)
    for copy in range(copies):
        for path in logs:
            shutil.copy(path, os.path.join(tree, f"{copy}-{os.path.basename(path)}"))
    listing = os.path.join(work, "logs.txt")
    with open(listing, "w") as f:
        f.write("".join(os.path.join(tree, name) + "\n" for name in sorted(os.listdir(tree))))
    count = len(logs) * copies
    ingest_s, job_stats_s = [], []
    for _ in range(INGEST_REPEATS):
        store = os.path.join(work, "ingested")
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "ioassess", "fleet", "ingest", "--store", store,
                        os.path.join(work, "logs")], check=True, capture_output=True, cwd="/")
        ingest_s.append(time.perf_counter() - started)
        shutil.rmtree(store)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "darshan", "job_stats", "--log_paths_file", listing, "--csv"],
                       check=True, capture_output=True, cwd="/")
        job_stats_s.append(time.perf_counter() - started)
    return {"logs": count, "distinct_logs": len(logs), "processes": os.cpu_count(), "runs_s": ingest_s,
            "logs_per_s": count / statistics.median(ingest_s), "job_stats_runs_s": job_stats_s,
            "job_stats_logs_per_s": count / statistics.median(job_stats_s)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, nargs="*", default=[10 ** 6, 10 ** 7])
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--log-copies", type=int, default=100)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--json", default=os.path.join(HERE, "out", "fleet.json"))
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="ioassess-bench-fleet-", dir=args.dir)
    try:
        result = {"cpu": cpu_name(), "cores": os.cpu_count()}
        result["compaction"] = compaction(work, recorded_records(work), args.records)
        c = result["compaction"]
        print(f"spool: {c['spool_ms_median']:.2f} ms a record (max {c['spool_ms_max']:.2f}), "
              f"{c['spool_bytes_median']:.0f} bytes; compaction: {c['records']} records in "
              f"{c['compact_wall_s']:.1f} s, "
              f"{c['records_per_cpu_s']:.0f} records per CPU-second", flush=True)
        result["ingest"] = ingest_rate(work, args.log_copies)
        i = result["ingest"]
        print(f"ingest: {i['logs']} Darshan logs, {i['logs_per_s']:.1f} logs/s on {i['processes']} processes "
              f"(median of {INGEST_REPEATS}); PyDarshan's job_stats on the same logs {i['job_stats_logs_per_s']:.1f} "
              f"logs/s", flush=True)
        result["fleets"] = []
        for jobs in args.jobs:
            fleet = fleet_queries(work, jobs)
            result["fleets"].append(fleet)
            print(f"{jobs} jobs: made in {fleet['generate_s']:.0f} s, {fleet['store_bytes'] / 2 ** 20:.0f} MiB "
                  f"({fleet['bytes_per_job']:.0f} bytes a job); queries (median of {REPEATS}): " +
                  ", ".join(f"{name} {seconds:.2f} s" for name, seconds in fleet["queries_s"].items()) +
                  f"; fleet report (median of {PAGE_REPEATS}) {fleet['page']['median_s']:.2f} s", flush=True)
    finally:
        shutil.rmtree(work)
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
