"""Per process and per rank: I/O time and time lost of each process, what Darshan's shared-file
records say of single ranks, the processes table, and the per-rank view with its imbalance."""
import math

import numpy as np

from ioassess.arrays import distinct
from ioassess.inputs.job import LAYERS, META, MPIIO
from ioassess.models.plain import ratio_or_none

from .ledger import io_rows, sums_by
from .passes import Sums

# The per-rank plot draws at most this many bars: beyond, each bar is a bin of consecutive ranks.
RANK_PLOT_BINS = 200
# The ranks that lost most, named in the per-process view.
MOST_LOST_NAMED = 3
# The slowest ranks named, and the files they spent their I/O time on.
STRAGGLERS_NAMED = 5


def process_io(job, ledger):
    """Per process (index into Job.processes), from the job's ledger: the `ops`, I/O time `io_s`,
    time lost (`lost_low_s`, `lost_high_s`) and `bytes` moved of its POSIX and STDIO I/O, its ops
    known one by one and its own counter rows (rows of rank -1, shared by all ranks, are no
    process's)."""
    sums = sums_by(ledger, "process", len(job.processes), io_rows(ledger))
    return {"ops": sums["calls"], "io_s": sums["seconds"], "lost_low_s": sums["lost_low_s"],
            "lost_high_s": sums["lost_high_s"], "bytes": sums["bytes"]}


def shared_record_ranks(job, per_total):
    """What Darshan's shared-file records (rank -1, reduced over all ranks) say of single ranks:
    per record with I/O known only from its counters, the fastest and slowest rank, their time
    on the file (reads, writes and metadata: Darshan's *_F_FASTEST/SLOWEST_RANK_TIME) and bytes,
    and the standard deviation of the time over the ranks; and per process of those ranks
    (index into Job.processes) its I/O part of that time (the rank's time times the record's
    read and write time over its read, write and metadata time; the two ranks' parts at most
    the record's time) and a time lost pro rata: the record's time lost times the rank's I/O
    time over the record's, at most all of it."""
    n = len(job.processes)
    per_process = {"io_s": np.zeros(n), "lost_low_s": np.zeros(n), "lost_high_s": np.zeros(n)}
    records = job.darshan_records
    totals = job.totals
    shared_rows = per_total["is_io"] & (totals["process"] < 0)
    process_of_rank = {p.rank: i for i, p in reversed(list(enumerate(job.processes))) if p.rank >= 0}
    described = []
    # a record's fastest and slowest rank are both known, or it says nothing of single ranks
    known = (records["slowest_rank"] >= 0) & (records["fastest_rank"] >= 0)
    for r in np.flatnonzero((records["rank"] < 0) & known).tolist():
        rows = shared_rows & (totals["file"] == records["file"][r]) & (totals["layer"] == records["layer"][r])
        seconds = float(totals["seconds"][rows].sum())
        if not rows.any() or seconds <= 0:
            continue
        lost_low, lost_high = float(per_total["lost_low_s"][rows].sum()), float(per_total["lost_high_s"][rows].sum())
        # a rank's time on the file includes its metadata calls: its I/O part is the record's share
        meta_s = float(records["meta_s"][r]) if np.isfinite(records["meta_s"][r]) else 0.0
        io_part = seconds / (seconds + max(meta_s, 0.0))
        ranks = {}
        assigned_s = 0.0
        for end in ("slowest", "fastest"):
            rank, rank_s = int(records[f"{end}_rank"][r]), float(records[f"{end}_s"][r])
            ranks[end] = {"rank": rank, "seconds": rank_s, "bytes": int(records[f"{end}_bytes"][r])}
            process = process_of_rank.get(rank)
            if process is not None and (end == "slowest" or rank != ranks["slowest"]["rank"]):
                # the record's metadata share is its ranks' together, not each rank's: the two
                # ranks' parts are kept within the record's time
                rank_io_s = min(rank_s * io_part, seconds - assigned_s)
                assigned_s += rank_io_s
                share = rank_io_s / seconds
                per_process["io_s"][process] += rank_io_s
                per_process["lost_low_s"][process] += share * lost_low
                per_process["lost_high_s"][process] += share * lost_high
        described.append({"file": job.files[records["file"][r]].name, "layer": LAYERS[records["layer"][r]],
                          "seconds": seconds, **ranks, "std_s": _rank_time_std(records, r)})
    described.sort(key=lambda d: -d["seconds"])
    return {"per_process": per_process, "records": described}


def _rank_time_std(records, r):
    """Standard deviation of a shared record's time over the ranks, None where Darshan did not
    compute its variance: NaN, or 0 although the fastest and slowest rank's times differ (the
    POSIX variance of PyDarshan's example.darshan)."""
    variance = float(records["variance_s"][r])
    uncomputed = variance == 0 and records["slowest_s"][r] > records["fastest_s"][r]
    return math.sqrt(variance) if math.isfinite(variance) and variance >= 0 and not uncomputed else None


def launcher_processes(job):
    """Indices of the processes of no rank in a job whose other processes have ranks: the MPI
    launcher (mpiexec) and its proxies, which are not the job's ranks."""
    if not any(p.rank >= 0 for p in job.processes):
        return []
    return [i for i, p in enumerate(job.processes) if p.rank < 0]


def pid_or_none(pid):
    """A process id, None where unknown (Darshan does not record them)."""
    return int(pid) if pid > 0 else None


class MpiioCalls:
    """The MPI-IO reads, writes and syncs known one by one per (process, file): calls and seconds,
    a pass (the ledger's ops are those of the POSIX and STDIO layers and the metadata calls)."""

    def __init__(self, job):
        self.files = max(len(job.files), 1)
        self.sums = Sums(("calls", "seconds"), max(len(job.processes), 1) * self.files)

    def add(self, chunk):
        ops = chunk.ops
        mpiio = (ops["layer"] == MPIIO) & (ops["direction"] != META)
        self.sums.add(ops["process"][mpiio].astype(np.int64) * self.files + ops["file"][mpiio],
                      {"calls": 1.0, "seconds": ops["duration_s"][mpiio]})

    def merge(self, later):
        self.sums.merge(later.sums)

    def result(self):
        """The `process` and `file` of each pair with calls, and its `calls` and `seconds`."""
        process, file = np.divmod(self.sums.keys, self.files)
        return {"process": process, "file": file, **self.sums.sums}


def process_table(job, per_process, shared, aggregation, mpiio):
    """Per process with I/O or MPI-IO calls: I/O time and time lost, most lost first; the part
    of them from Darshan's shared records (shared_record_ranks), its MPI-IO time (mpiio:
    MpiioCalls', and its counter rows; None where MPI-IO records were reduced over the ranks:
    each rank's part is unknown), and its POSIX read and write time inside collective MPI-IO
    calls (aggregation: sections.CollectiveWork's; `aggregator` is true for a process that did
    any). Launchers (launcher_processes) say so."""
    n, totals = len(job.processes), job.totals
    # MPI-IO reads, writes and syncs (its metadata calls are the metadata section's)
    mpiio_rows = (totals["layer"] == MPIIO) & (totals["direction"] != META)
    tmpiio = mpiio_rows & (totals["process"] >= 0)
    mpiio_s = np.bincount(mpiio["process"], mpiio["seconds"], n) + \
        np.bincount(totals["process"][tmpiio], totals["seconds"][tmpiio], n)
    mpiio_count = np.bincount(mpiio["process"], mpiio["calls"], n) + \
        np.bincount(totals["process"][tmpiio], totals["ops"][tmpiio], n)
    mpiio_reduced = bool(np.any(mpiio_rows & (totals["process"] < 0)))
    aggregator_s, aggregator = aggregation["seconds"], aggregation["ops"] > 0
    count, from_shared = per_process["ops"], shared["per_process"]
    launchers = set(launcher_processes(job))
    rows = [{"rank": proc.rank, "pid": pid_or_none(proc.pid), "hostname": proc.hostname, "ops": int(count[i]),
             "io_s": float(per_process["io_s"][i] + from_shared["io_s"][i]),
             "lost_low_s": float(per_process["lost_low_s"][i] + from_shared["lost_low_s"][i]),
             "lost_high_s": float(per_process["lost_high_s"][i] + from_shared["lost_high_s"][i]),
             "shared_s": float(from_shared["io_s"][i]),
             "mpiio_ops": int(mpiio_count[i]), "mpiio_s": None if mpiio_reduced else float(mpiio_s[i]),
             "aggregator": bool(aggregator[i]), "aggregator_s": float(aggregator_s[i]),
             "launcher": i in launchers, "end_reason": proc.end_reason}
            for i, proc in enumerate(job.processes) if count[i] or mpiio_count[i] or from_shared["io_s"][i]]
    rows.sort(key=lambda r: (-r["lost_high_s"], -r["io_s"]))
    return rows


def per_process_view(job, ledger, per_process, per_total, shared):
    """How I/O time and time lost spread over the ranks of an MPI job (every rank, a rank
    without I/O counting as 0 s), or over the processes with I/O of another job: mean, median,
    the slowest and max / mean (the imbalance), the ranks that lost most, the slowest ranks
    (stragglers, from the job's ledger) and the series of the per-rank plot. I/O in counter rows
    shared by all ranks (Darshan's rank -1 records) is no rank's: it is left out and said
    (`shared`). None for a job without I/O."""
    # one I/O time per process: the processes table's, with the fastest and slowest rank's parts
    # of shared records (shared_record_ranks)
    from_shared = shared["per_process"]
    units = io_units(job, {**per_process, **{q: per_process[q] + from_shared[q] for q in from_shared}})
    tio = per_total["is_io"] & (job.totals["process"] < 0)
    shared_s = float(job.totals["seconds"][tio].sum())
    in_shared = {"ops": int(job.totals["ops"][tio].sum()), "seconds": shared_s,
                 "left_out_s": max(shared_s - float(from_shared["io_s"].sum()), 0.0),
                 "records": shared["records"]} if tio.any() else None
    if not units["io_s"].any() and in_shared is None:
        return None
    attributed = bool(units["io_s"].any())
    order = np.argsort(-units["lost_high_s"], kind="stable")[:MOST_LOST_NAMED]
    named = [i for i in order.tolist() if units["lost_high_s"][i] > 0]
    lost_total = float(units["lost_high_s"].sum())
    return {
        "unit": units["unit"],
        "count": len(units["io_s"]),
        "io": spread(units, "io_s") if attributed else None,
        "lost": spread(units, "lost_high_s") if attributed else None,
        "most_lost": [{**_identity(units, i), "lost_low_s": float(units["lost_low_s"][i]),
                       "lost_high_s": float(units["lost_high_s"][i])} for i in named],
        "most_lost_share": ratio_or_none(float(units["lost_high_s"][named].sum()), lost_total) if named else None,
        "shared": in_shared,
        "stragglers": stragglers(job, units, ledger) if attributed else None,
        "plot": binned_units(units, RANK_PLOT_BINS) if attributed else None,
    }


def stragglers(job, units, ledger):
    """The ranks that spent longest in I/O, against the mean rank: a parallel job waits for its
    slowest rank. `ranks` (the up to STRAGGLERS_NAMED slowest with I/O: `rank`, `pid`,
    `hostname`, `seconds`, `bytes`), `mean_s` and `mean_bytes` over all ranks, and `files`, those
    the named ranks spent their I/O time on, most first (`name`, `ops`, `seconds`: the named
    ranks' part, their rows of the job's ledger). None unless the units are two or more ranks."""
    if units["unit"] != "rank" or len(units["io_s"]) < 2:
        return None
    order = np.argsort(-units["io_s"], kind="stable")[:STRAGGLERS_NAMED]
    named = order[units["io_s"][order] > 0]
    of_named = np.isin(np.array([p.rank for p in job.processes], np.int64), units["rank"][named])
    process = ledger["process"]
    rows = io_rows(ledger) & (process >= 0) & of_named[np.maximum(process, 0)]
    seconds = np.bincount(ledger["file"][rows], ledger["seconds"][rows], len(job.files))
    count = np.bincount(ledger["file"][rows], ledger["calls"][rows], len(job.files))
    top = [i for i in np.argsort(-seconds, kind="stable")[:STRAGGLERS_NAMED].tolist() if seconds[i] > 0]
    return {"ranks": [{**_identity(units, i), "seconds": float(units["io_s"][i]), "bytes": int(units["bytes"][i])}
                      for i in named.tolist()],
            "mean_s": float(units["io_s"].mean()), "mean_bytes": float(units["bytes"].mean()),
            "files": [{"name": job.files[i].name, "ops": int(count[i]), "seconds": float(seconds[i])} for i in top]}


def io_units(job, per_process):
    """The per-process arrays (process_io) summed per rank 0 … R-1 (R: the highest rank + 1, or
    the ranks of a Darshan log), or, in a job of one rank, of its processes with I/O by pid.
    `unit` says which; `rank`, `pid` and `hostname` identify each (those of the rank's process
    with the most I/O time). A rank's processes are all those the recorder gave its rank: the
    ones it started inherit it; processes outside MPI (mpiexec, the commands around it) have
    rank -1 and belong to no rank."""
    ranks = np.array([p.rank for p in job.processes], np.int64)
    pids = np.array([p.pid for p in job.processes], np.int64)
    hosts = np.array([p.hostname for p in job.processes], object)
    quantities = [q for q in ("io_s", "lost_low_s", "lost_high_s", "bytes") if q in per_process]
    ranked = ranks >= 0
    from_darshan = all(i.kind == "darshan" for i in job.inputs)
    if len(distinct(ranks[ranked])) < 2 and not from_darshan:
        chosen = np.flatnonzero(per_process["ops"] > 0)
        chosen = chosen[np.argsort(pids[chosen], kind="stable")]
        return {"unit": "process", "rank": ranks[chosen], "pid": pids[chosen], "hostname": hosts[chosen],
                **{q: per_process[q][chosen] for q in quantities}}
    count = max(int(ranks.max(initial=-1)) + 1, job.nprocs if from_darshan else 0)
    members = np.flatnonzero(ranked)
    members = members[np.lexsort((-per_process["io_s"][members], ranks[members]))]
    present, busiest_of_present = np.unique(ranks[members], return_index=True)
    busiest = members[busiest_of_present]
    pid, hostname = np.zeros(count, np.int64), np.full(count, "", object)
    pid[present], hostname[present] = pids[busiest], hosts[busiest]
    return {"unit": "rank", "rank": np.arange(count), "pid": pid, "hostname": hostname,
            **{q: np.bincount(ranks[ranked], per_process[q][ranked], count) for q in quantities}}


def _identity(units, i):
    return {"rank": int(units["rank"][i]), "pid": pid_or_none(units["pid"][i]), "hostname": str(units["hostname"][i])}


def spread(units, quantity):
    """Mean, median and maximum of one per-unit quantity, the unit with the maximum, max / mean."""
    values = units[quantity]
    top = int(np.argmax(values))
    mean = float(values.mean())
    return {"mean_s": mean, "median_s": float(np.median(values)),
            "max": {**_identity(units, top), "seconds": float(values[top])},
            "imbalance": ratio_or_none(float(values[top]), mean)}


def binned_units(units, bins):
    """The per-unit I/O time and time lost (upper end) in at most `bins` bins of consecutive
    units: each bin's first unit (position), and the mean and maximum over its units."""
    n = len(units["io_s"])
    per_bin = -(-n // bins)
    starts = np.arange(0, n, per_bin)
    sizes = np.diff(np.append(starts, n))
    series = {"units": n, "units_per_bin": per_bin, "start": starts.tolist()}
    for quantity, name in (("io_s", "io_s"), ("lost_high_s", "lost_s")):
        values = units[quantity]
        series[f"{name}_mean"] = (np.add.reduceat(values, starts) / sizes).tolist()
        series[f"{name}_max"] = np.maximum.reduceat(values, starts).tolist()
    return series

