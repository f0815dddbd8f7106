"""A made-up fleet for the bench (bench/fleet.py) and for trying the queries: jobs of a few
applications doing most of the work (Zipf), heavy-tailed run and I/O times and time lost,
findings of a fixed catalogue, latency histograms around each op kind's typical duration.
Every row says it is made up: model "synthetic", source "synthetic fleet, seed N", job ids
from SYNTHETIC_JOB_ID up."""
import datetime

import numpy as np
import pyarrow as pa

from ...report.latency import LATENCY_SCALE
from .schema import COLUMNS, SCHEMA_VERSION, STRING
from .store import FILE_SCHEMAS, commit_parts

SYNTHETIC_JOB_ID = 900_000_000
APPS, USERS = 300, 3000
FILE_SYSTEMS = [("/scratch", "lustre", 0.6), ("/home", "nfs", 0.2), ("/project", "gpfs", 0.15), ("/tmp", "ext4", 0.05)]
# (code, title, share of jobs it fires on)
FINDINGS = [("P05", "Small reads", 0.3), ("P06", "Small writes", 0.25), ("P08", "Random reads", 0.1),
            ("P09", "Random writes", 0.05), ("P17", "Metadata time is high", 0.08),
            ("M07", "Small MPI-IO writes", 0.04),
            (None, "Most lost time is uncached I/O", 0.35), (None, "Some ops were slower than uncached I/O", 0.15),
            (None, "Writes waited for new memory, not storage", 0.1),
            (None, "Some ranks spent far longer in I/O than the others", 0.12)]
# Typical duration (s) of each op kind and the share of jobs with such ops.
KINDS = [("read", 2e-4, 0.9), ("write", 3e-4, 0.8), ("meta", 2e-5, 0.95), ("sync", 5e-3, 0.2)]
JOBS_PER_PART = 200_000
# Share of jobs with time of each cause: storage, new pages, stall, allocation, memory.
CAUSE_SHARES = (1.0, 0.3, 0.1, 0.1, 0.2)


def zipf_choice(generator, count, size, exponent=1.2):
    weights = 1.0 / np.arange(1, count + 1) ** exponent
    return generator.choice(count, size=size, p=weights / weights.sum())


def _strings(indices, names):
    """A string column of names[indices], built as a dictionary (fast for millions of rows)."""
    return pa.DictionaryArray.from_arrays(pa.array(np.asarray(indices, dtype=np.int32)),
                                          pa.array(names, pa.string())).cast(pa.string())


def jobs_part(generator, first, count, month_start_s, month_seconds, seed):
    """{table: pa.Table} of count made-up jobs numbered from first, ending in the month of
    month_seconds that starts at month_start_s (epoch seconds)."""
    user = zipf_choice(generator, USERS, count)
    favourite = (user * 7919) % APPS
    app = (favourite + np.minimum(generator.geometric(0.6, count) - 1, 5) * 13) % APPS
    nodes = 2 ** np.minimum(generator.geometric(0.45, count) - 1, 10)
    runtime = np.minimum(generator.lognormal(np.log(3600), 1.2, count), 48 * 3600)
    end = month_start_s + generator.uniform(0, month_seconds, count)
    processes = nodes * 32
    io_s = runtime * processes * generator.beta(0.5, 8, count)
    lost_high = io_s * generator.beta(0.7, 2.5, count)
    lost_low = lost_high * generator.uniform(0.8, 1.0, count)
    # storage in every job; the other causes in a share of them, as in real assessments (mostly 0)
    present = generator.random((count, len(CAUSE_SHARES))) < np.array(CAUSE_SHARES)
    causes = generator.dirichlet([4.0, 0.5, 0.3, 0.3, 0.2], count) * present
    causes = causes / causes.sum(axis=1, keepdims=True) * lost_high[:, None]
    fs = generator.choice(len(FILE_SYSTEMS), size=count, p=[f[2] for f in FILE_SYSTEMS])
    keys = [str(SYNTHETIC_JOB_ID + i) for i in range(first, first + count)]
    fired = generator.random((count, len(FINDINGS))) < np.array([f[2] for f in FINDINGS])
    stakes = np.where(fired, np.minimum(runtime[:, None], lost_high[:, None] / processes[:, None])
                      * generator.uniform(0.1, 1.0, (count, len(FINDINGS))), 0.0)
    order = np.argsort(-stakes, axis=1)
    findings_count = fired.sum(axis=1)
    first_finding = np.where(findings_count > 0, order[:, 0], -1)
    finding_names = [code or title for code, title, _ in FINDINGS]
    columns = {name: None for name, _ in COLUMNS["jobs"]}
    columns.update({
        "job_key": keys, "job_id": keys, "step": _strings(np.zeros(count), [""]),
        "user": _strings(user, [f"user{u:04d}" for u in range(USERS)]),
        "account": _strings(user % 40, [f"project{a:02d}" for a in range(40)]),
        "app": _strings(app, [f"app{a:03d}" for a in range(APPS)]),
        "nodes": nodes, "processes": processes,
        "start": ((end - runtime) * 1e6).astype(np.int64), "end": (end * 1e6).astype(np.int64), "runtime_s": runtime,
        "main_fs": _strings(fs, [f[0] for f in FILE_SYSTEMS]),
        "main_fs_type": _strings(fs, [f[1] for f in FILE_SYSTEMS]),
        "file_systems": _strings(fs, [f[0] for f in FILE_SYSTEMS]), "tier": _strings(np.zeros(count), ["ops"]),
        "io_cell": _strings(np.minimum(nodes, 2) - 1, ["serial", "shared file"]),
        "io_s": io_s, "lost_low_s": lost_low, "lost_high_s": lost_high,
        "storage_s": causes[:, 0], "new_pages_s": causes[:, 1], "stall_s": causes[:, 2], "allocation_s": causes[:, 3],
        "memory_s": causes[:, 4],
        "main_cause": _strings(np.argmax(causes, axis=1), ["storage", "new_pages", "stall", "allocation", "memory"]),
        "findings": findings_count, "first_finding": _strings(first_finding + 1, ["", *finding_names]),
        "at_stake_s": pa.array(stakes[np.arange(count), order[:, 0]], mask=findings_count == 0),
        "meta_calls": generator.poisson(2000, count), "meta_s": io_s * generator.beta(0.5, 10, count),
        "posix_read_bytes": (io_s * generator.lognormal(np.log(2e8), 1.0, count)).astype(np.int64),
        "posix_read_s": io_s * 0.5, "posix_write_bytes": (io_s * generator.lognormal(np.log(2e8), 1.0, count)).astype(
            np.int64), "posix_write_s": io_s * 0.5,
        "model": _strings(np.zeros(count), ["synthetic"]), "model_match": _strings(np.zeros(count), [""]),
        "probe_slowdown": np.where(generator.random(count) < 0.1, generator.uniform(2, 10, count), 1.0),
        "source": _strings(np.zeros(count), [f"synthetic fleet, seed {seed}"]),
        "schema_version": np.full(count, SCHEMA_VERSION),
        "record_hash": [f"{SYNTHETIC_JOB_ID + i:064x}" for i in range(first, first + count)],
    })
    for name, kind in COLUMNS["jobs"]:
        if columns[name] is None:
            columns[name] = _strings(np.zeros(count), [""]) if kind == STRING else np.zeros(count)
    tables = {"jobs": _table("jobs", columns)}
    rows, position = np.nonzero(fired[np.arange(count)[:, None], order] & (np.arange(len(FINDINGS)) <
                                                                             findings_count[:, None]))
    finding = order[rows, position]
    tables["findings"] = _table("findings", {
        "job_key": pa.array(keys).take(pa.array(rows)), "position": position,
        "code": pa.array([code for code, _, _ in FINDINGS], pa.string()).take(pa.array(finding)),
        "title": _strings(finding, [title for _, title, _ in FINDINGS]),
        "level": _strings(np.zeros(len(rows)), ["warn"]), "at_stake_s": stakes[rows, finding],
        "rank_seconds": stakes[rows, finding] * processes[rows]})
    file_count = np.minimum(generator.poisson(1.5, count) + 1, 5)
    owner = np.repeat(np.arange(count), file_count)
    tables["files"] = _table("files", {
        "job_key": pa.array(keys).take(pa.array(owner)),
        "position": np.arange(len(owner)) - np.repeat(np.cumsum(file_count) - file_count, file_count),
        "name": _strings((fs[owner] * USERS + user[owner]) * 5 + np.arange(len(owner))
                         - np.repeat(np.cumsum(file_count) - file_count, file_count),
                         [f"{mount}/user{u:04d}/out{n}.dat" for mount, _, _ in FILE_SYSTEMS for u in range(USERS)
                          for n in range(5)]),
        "fs_type": _strings(fs[owner], [f[1] for f in FILE_SYSTEMS]),
        "mount_point": _strings(fs[owner], [f[0] for f in FILE_SYSTEMS]),
        "ops": generator.poisson(5000, len(owner)), "bytes": generator.poisson(5000, len(owner)) * 65536,
        "seconds": io_s[owner] / file_count[owner], "lost_high_s": lost_high[owner] / file_count[owner]})
    tables["latency"] = _latency(generator, keys, fs, count)
    return tables


def _latency(generator, keys, fs, count):
    parts = {"job": [], "kind": [], "bin": [], "count": []}
    ratio = np.log(LATENCY_SCALE.ratio)
    for kind_code, (kind, typical, share) in enumerate(KINDS):
        having = np.flatnonzero(generator.random(count) < share)
        centre = np.log(typical / LATENCY_SCALE.min_s) / ratio + generator.normal(0, 3, having.size)
        width = 12
        offsets = np.arange(-width // 2, width // 2)
        bins = np.clip(np.round(centre[:, None] + offsets[None, :]), 0, LATENCY_SCALE.bins - 1).astype(np.int64)
        counts = np.round(generator.lognormal(np.log(2000), 1.5, having.size)[:, None]
                          * np.exp(-0.5 * (offsets[None, :] / 2.0) ** 2)).astype(np.int64)
        kept = counts > 0
        parts["job"].append(np.repeat(having, kept.sum(axis=1)))
        parts["kind"].append(np.full(kept.sum(), kind_code))
        parts["bin"].append(bins[kept])
        parts["count"].append(counts[kept])
    job = np.concatenate(parts["job"])
    return _table("latency", {
        "job_key": pa.array(keys).take(pa.array(job)), "kind": _strings(np.concatenate(parts["kind"]),
                                                                         [k[0] for k in KINDS]),
        "mount_point": _strings(fs[job], [f[0] for f in FILE_SYSTEMS]),
        "fs_type": _strings(fs[job], [f[1] for f in FILE_SYSTEMS]),
        "bin": np.concatenate(parts["bin"]), "count": np.concatenate(parts["count"])})


def _table(table, columns):
    schema = FILE_SCHEMAS[table]
    return pa.Table.from_arrays([pa.array(columns[f.name], f.type) if not isinstance(columns[f.name], pa.Array)
                                 else columns[f.name].cast(f.type) for f in schema], schema=schema)


def add_synthetic_fleet(store, jobs, seed=0, first_month=(2025, 1), months=12):
    """jobs made-up jobs into the store, spread evenly over months from first_month."""
    generator = np.random.default_rng(seed)
    per_month = -(-jobs // months)
    made = 0
    for number in range(months):
        year, month = first_month[0] + (first_month[1] - 1 + number) // 12, (first_month[1] - 1 + number) % 12 + 1
        start_s = datetime.datetime(year, month, 1, tzinfo=datetime.timezone.utc).timestamp()
        following = datetime.datetime(year + month // 12, month % 12 + 1, 1, tzinfo=datetime.timezone.utc)
        in_month = min(per_month, jobs - made)
        for first in range(made, made + in_month, JOBS_PER_PART):
            count = min(JOBS_PER_PART, made + in_month - first)
            commit_parts(store, f"{year:04d}-{month:02d}",
                         jobs_part(generator, first, count, start_s, following.timestamp() - start_s, seed))
        made += in_month
    return made

