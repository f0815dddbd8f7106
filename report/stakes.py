"""Seconds at stake in wall-clock time, the unit a reader acts on, and the levels and verdict
that follow from them.

A finding's detector knows what its fix could save per process (process-seconds: summed over
the processes they are the allocation's cost, not the job's time) and, for Darshan's records
shared by all ranks (rank -1), per record. The job's wall clock shortens by at most the savings
along one chain of processes that ran one after the other: processes that overlap in time run
side by side, so a saving on each shortens the job by the largest of them, while processes in
sequence (a script's commands) add theirs. The wall-clock stake is the heaviest such chain
(weighted interval scheduling over the processes' spans, each saving at most its process's
span), plus for each shared record the part of its stake its slowest rank holds, and at most
the run time. The process-seconds stay beside it in `rank_seconds`.
"""
import math

import numpy as np

from .classify import ROW_CLASSES
from .passes import Sums

LEVELS = ("high", "warn", "info", "ok")   # Drishti's: act on it, worth a look, a fact, good
# A high finding has at least this share of the run time at stake; below it, at most warn.
HIGH_MIN_SHARE_OF_RUNTIME = 0.01


class WallClock:
    """The job's processes' spans and run time, to turn per-process savings into wall-clock
    seconds (module docstring)."""

    def __init__(self, job):
        runtime = job.runtime_s
        self.runtime_s = runtime if math.isfinite(runtime) and runtime > 0 else None
        whole = (0.0, self.runtime_s if self.runtime_s is not None else math.inf)
        starts = np.array([p.start_s for p in job.processes], np.float64)
        ends = np.array([p.end_s for p in job.processes], np.float64)
        # A span not known (Darshan ranks, a process still running) is the whole job's.
        known = np.isfinite(starts) & np.isfinite(ends) & (ends >= starts)
        self.starts = np.where(known, starts, whole[0])
        self.ends = np.where(known, ends, whole[1])
        self.nprocs = max(job.nprocs, 1)

    def stake(self, process_s=None, shared_s=None, shared_top_share=None):
        """(wall-clock seconds, process-seconds) of a saving of process_s per process (an array
        over Job.processes) and shared_s per shared record, of which the record's slowest rank
        holds shared_top_share (at least 1/nprocs)."""
        process_s = np.zeros(len(self.starts)) if process_s is None else np.nan_to_num(
            np.asarray(process_s, np.float64), nan=0.0, posinf=0.0, neginf=0.0).clip(0.0)
        process_s = np.minimum(process_s, self.ends - self.starts)
        shared = np.zeros(0) if shared_s is None else np.nan_to_num(
            np.asarray(shared_s, np.float64), nan=0.0, posinf=0.0, neginf=0.0).clip(0.0)
        top = np.full(len(shared), 1.0 / self.nprocs) if shared_top_share is None else np.clip(
            np.nan_to_num(np.asarray(shared_top_share, np.float64), nan=1.0), 1.0 / self.nprocs, 1.0)
        wall = heaviest_chain(self.starts, self.ends, process_s) + float((shared * top).sum())
        if self.runtime_s is not None:
            wall = min(wall, self.runtime_s)
        return wall, float(process_s.sum() + shared.sum())


def slowest_rank_share(records):
    """Per record (Darshan's record columns), the share of a shared record's time (reads, writes
    and metadata) its slowest rank spent (*_F_SLOWEST_RANK_TIME); 1 for a rank's own record and
    where it is not known."""
    time = np.nan_to_num(records["read_s"]) + np.nan_to_num(records["write_s"]) + np.nan_to_num(records["meta_s"])
    slowest = np.nan_to_num(records["slowest_s"], nan=-1.0)
    known = (records["rank"] < 0) & (slowest >= 0) & (time > 0)
    return np.where(known, slowest / np.where(time > 0, time, 1.0), 1.0)


def heaviest_chain(starts, ends, weights):
    """The largest sum of weights over intervals that do not overlap (weighted interval
    scheduling), taking only intervals of positive weight."""
    chosen = np.flatnonzero(weights > 0)
    if not len(chosen):
        return 0.0
    starts, ends, weights = starts[chosen], ends[chosen], weights[chosen]
    if np.all(starts == starts[0]) and np.all(ends == ends[0]):
        return float(weights.max())
    order = np.argsort(ends, kind="stable")
    starts, ends, weights = starts[order], ends[order], weights[order]
    # the last interval ending at or before each one starts
    before = np.searchsorted(ends, starts, side="right") - 1
    best = np.zeros(len(weights) + 1)
    for i in range(len(weights)):
        best[i + 1] = max(best[i], weights[i] + best[before[i] + 1])
    return float(best[-1])


def in_wall_clock(found, clock, process_s=None, shared_s=None, shared_top_share=None, how=None):
    """The finding with its stake in wall-clock seconds (WallClock.stake), its process-seconds
    in `rank_seconds`, and the seconds of each file and rank it names cut to their part of the
    wall-clock stake."""
    wall, summed = clock.stake(process_s, shared_s, shared_top_share)
    return with_stake(found, wall, summed, how)


def with_stake(found, wall_s, rank_seconds, how=None):
    """The finding with at_stake_s = wall_s, rank_seconds, and the named files' and ranks'
    seconds at most the whole stake (what fixing that file or rank alone could save)."""
    found = dict(found, at_stake_s=wall_s, rank_seconds=rank_seconds)
    found["files"] = [dict(f, seconds=min(f["seconds"], wall_s)) if f.get("seconds") is not None else f
                      for f in found["files"]]
    found["ranks"] = [dict(r, seconds=min(r["seconds"], wall_s)) if r.get("seconds") is not None else r
                      for r in found["ranks"]]
    if how:
        found["at_stake_how"] = "; ".join(filter(None, (found.get("at_stake_how"), how)))
    return found


def capped(found, cap_s, how):
    """The finding with its stake at most cap_s, its named parts cut alike."""
    stake = found["at_stake_s"]
    if stake is None or stake <= cap_s:
        return found
    scale = cap_s / stake if stake > 0 else 0.0
    return dict(found, at_stake_s=cap_s, at_stake_how="; ".join(filter(None, (found["at_stake_how"], how))),
                files=[dict(f, seconds=f["seconds"] * scale) if f.get("seconds") is not None else f
                       for f in found["files"]],
                ranks=[dict(r, seconds=min(r["seconds"], cap_s)) if r.get("seconds") is not None else r
                       for r in found["ranks"]])


WALL_CLOCK_HOW = ("wall-clock: what the processes on the job's longest chain would save (processes running side "
                  "by side save at once), at most the run time")


def level_by_stake(found, runtime_s):
    """The level its stake allows: a finding to act on (high, warn) has a positive stake; high
    needs at least HIGH_MIN_SHARE_OF_RUNTIME of the run time."""
    level, stake = found["level"], found["at_stake_s"]
    if level not in ("high", "warn"):
        return level
    if stake is None or not stake > 0:
        return "info"
    if level == "high" and runtime_s and stake < HIGH_MIN_SHARE_OF_RUNTIME * runtime_s:
        return "warn"
    return level


def acting(found):
    """The findings to act on (high, warn)."""
    return [f for f in found if LEVELS.index(f["level"]) < LEVELS.index("info")]


class ClassLoss:
    """Per (process, class) of the I/O ops: their time lost compared with cached I/O (`lost_s`) and
    their slowness (`slowness_s`), a pass: what a finding on one class's time beyond cached I/O
    could save in each process."""

    def __init__(self, job):
        self.sums = Sums(("lost_s", "slowness_s"), max(len(job.processes), 1) * len(ROW_CLASSES))

    def add(self, chunk):
        per_op, io = chunk.per_op, chunk.per_op["is_io"]
        self.sums.add(chunk.ops["process"][io].astype(np.int64) * len(ROW_CLASSES) + per_op["class"][io],
                      {"lost_s": per_op["lost_s"][io], "slowness_s": per_op["slowness_s"][io]})

    def merge(self, later):
        self.sums.merge(later.sums)

    def result(self):
        """The `process` and `class` (code) of each pair with I/O ops, and its `lost_s` and
        `slowness_s`."""
        process, cls = np.divmod(self.sums.keys, len(ROW_CLASSES))
        return {"process": process, "class": cls, **self.sums.sums}


class JobSeconds:
    """The job's seconds per process that findings' stakes are parts of, from the job's ledger
    (report/ledger.py): each process's ops and its own counter rows; Darshan's rows shared by all
    ranks (process -1) apart, with the share of each that its slowest rank spent. class_loss:
    ClassLoss' result; mpiio: processes.MpiioCalls' (MPI-IO's reads, writes and syncs, which no
    ledger row holds); per_file: sections.per_file_io's; clock: the job's WallClock."""

    def __init__(self, job, ledger, class_loss, mpiio, per_file, clock):
        self.job, self.ledger, self.class_loss, self.mpiio = job, ledger, class_loss, mpiio
        self.per_file, self.clock = per_file, clock
        records = job.darshan_records
        self._top_of = dict(zip(zip(records["file"].tolist(), records["layer"].tolist()),
                                slowest_rank_share(records).tolist()))

    def of(self, rows):
        """(process-seconds per process, seconds per shared row, their slowest ranks' shares) of
        the ledger's rows `rows` (a mask)."""
        ledger, n = self.ledger, len(self.job.processes)
        process, seconds = ledger["process"][rows], ledger["seconds"][rows]
        own = process >= 0
        process_s = np.bincount(process[own], seconds[own], n)
        files, layers = ledger["file"][rows][~own], ledger["layer"][rows][~own]
        top = np.array([self._top_of.get((f, la), 1.0) for f, la in zip(files.tolist(), layers.tolist())])
        return process_s, seconds[~own], top

    def stake_of(self, found, rows, part=1.0):
        """The finding in wall-clock seconds, its saving a share `part` of the time of the ledger's
        rows `rows` (a mask)."""
        process_s, shared_s, top = self.of(rows)
        return in_wall_clock(found, self.clock, process_s * part, shared_s * part, top, WALL_CLOCK_HOW)

    def of_class(self, code, beyond):
        """Process-seconds per process of the I/O ops of class `code` beyond cached I/O: their time
        lost compared with it (beyond "lost_s") or their slowness ("slowness_s")."""
        loss = self.class_loss
        mine = loss["class"] == code
        return np.bincount(loss["process"][mine], loss[beyond][mine], len(self.job.processes))

    def of_files(self, file_s):
        """Process-seconds of a saving given per file (an array over Job.files), each file's part
        spread over the processes pro rata of their I/O and metadata time on it (their ops: the
        ledger's and MPI-IO's; their counter rows)."""
        ledger, mpiio, totals = self.ledger, self.mpiio, self.job.totals
        n, n_files = len(self.job.processes), len(self.job.files)
        ops = ~ledger["estimated"]
        process = np.concatenate([ledger["process"][ops], mpiio["process"],
                                  np.where(totals["process"] >= 0, totals["process"], n)]).astype(np.int64)
        keys = process * n_files + np.concatenate([ledger["file"][ops], mpiio["file"], totals["file"]])
        seconds = np.concatenate([ledger["seconds"][ops], mpiio["seconds"], totals["seconds"]])
        seconds = np.nan_to_num(seconds).clip(0.0)
        pairs, inverse = np.unique(keys, return_inverse=True)
        pair_s = np.bincount(inverse, seconds, len(pairs))
        pair_process, pair_file = pairs // n_files, pairs % n_files
        file_total = np.bincount(pair_file, pair_s, n_files)
        share = np.where(file_total[pair_file] > 0, pair_s / np.where(file_total[pair_file] > 0,
                                                                        file_total[pair_file], 1.0), 0.0)
        part = np.asarray(file_s, np.float64)[pair_file] * share
        own = pair_process < n
        process_s = np.bincount(pair_process[own], part[own], n)
        top = np.array([max((self._top_of.get((int(f), la), 1.0) for la in range(3)), default=1.0)
                        for f in pair_file[~own].tolist()])
        return process_s, part[~own], top
