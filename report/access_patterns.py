"""How the job accessed its files, on the evidence Drishti 0.8 uses (docs/assessment.md, "Access
patterns"): each trigger family of Drishti (its codes P01-P22 and M01-M10; S01 is in
findings.py) that holds for the job, with the files and ranks behind it and the seconds at stake.

The evidence is Darshan's counters, per record: a Darshan log's own (Job.darshan_records), and
for the files a log does not count, the same counters computed from the ops the way Darshan's
runtime computes them (`counted_from_ops`). Whether a family fires is decided on those counters
with Drishti's thresholds. The seconds at stake come from the ops where they are known one by
one (each family says how: `at_stake_how`); for files known only from counters they are an
estimate, the records' time pro rata of the ops the family is about.
"""
import numpy as np

from ioassess.inputs.job import (DARSHAN_RECORD_COLUMNS, LAYERS, META, META_KINDS, MPIIO, POSIX, READ,
                                 UNASSESSED_MODULES, WRITE, Flag, concatenate_columns, op_column)

from .ledger import groups_of
from .stakes import WALL_CLOCK_HOW, capped, in_wall_clock, level_by_stake, slowest_rank_share

# Drishti 0.8's thresholds (drishti/includes/config.py), by its names.
IMBALANCE_OPERATIONS = 0.1       # P01-P04: |writes - reads| over all, for one direction to dominate
SMALL_BYTES = 1 << 20            # P05/P06/P15/P16: a request of at most this many bytes is small
# Ours: the size small requests are merged into for their stake (a common Lustre stripe size).
MERGED_REQUEST_BYTES = 4 << 20
SMALL_REQUESTS = 0.1             # ... and a share of the requests above this,
SMALL_REQUESTS_ABSOLUTE = 1000   # ... and more of them than this
MISALIGNED_REQUESTS = 0.1        # P07/P08
RANDOM_OPERATIONS = 0.2          # P11/P13: share of the requests neither consecutive nor sequential,
RANDOM_OPERATIONS_ABSOLUTE = 1000  # ... and more of them than this
# P12/P14 (ours: Drishti 0.8 states them whenever P11/P13 do not fire, at 0 % sequential too):
# sequential requests above this share of the reads (writes) for them to be mostly sequential.
MOSTLY_SEQUENTIAL = 0.5
IMBALANCE_STRAGGLERS = 0.15      # P18/P19: slowest minus fastest rank over the shared file's total
IMBALANCE_SIZE = 0.3             # P21/P22: most minus fewest bytes over the most, per file
COLLECTIVE_OPERATIONS_ABSOLUTE = 1000  # M02/M03: MPI-IO requests, none collective
# Ours (Drishti 0.8 has none that works, docs/assessment.md): bytes moved again, over all moved.
REDUNDANT_SHARE = 0.1
# Darshan's runtime: buffers checked against this alignment (DARSHAN_MEM_ALIGNMENT's default, 8
# bytes on x86-64), offsets against the file system's block size (4 KiB where not known).
MEMORY_ALIGNMENT = 8
DEFAULT_FILE_ALIGNMENT = 4096
FILES_NAMED = 5                  # files and ranks named per pattern


def access_patterns(job, per_op, per_total, clock):
    """The patterns that hold for the job, each a dict: code (Drishti's), level, evidence
    ("counters", "ops" or both), the counts behind it, the files and ranks named, ops_s (the time
    of the ops it is about), lost_s (the time lost in them), at_stake_s and at_stake_how."""
    ops = PatternOps(job, per_op, per_total, clock)
    records = evidence_records(job, ops.streams)
    ops.streams = None    # the sorted requests: only the evidence records need them
    found = []
    for check in (operation_intensive, small_requests, misaligned, redundant_traffic, random_access,
                  shared_small_requests, shared_imbalance, individual_imbalance, mpiio_usage, aggregators_per_node):
        found += check(job, records, ops)
    return [dict(p, level=level_by_stake(p, clock.runtime_s)) for p in found]


# --- the evidence: Darshan's counters, per record ---------------------------------------------

def evidence_records(job, streams):
    """Job.darshan_records, and for each (file, layer) no Darshan record counts, the records
    Darshan's runtime would have written for the ops (counted_from_ops); column "process": the
    process of an op-counted record (-1 for Darshan's and for shared ones). streams:
    PatternOps.streams."""
    darshan = dict(job.darshan_records, process=np.full(len(job.darshan_records["rank"]), -1, np.int64))
    covered = set(zip(darshan["file"].tolist(), darshan["layer"].tolist()))
    counted = counted_from_ops(job, streams, covered)
    columns = {**DARSHAN_RECORD_COLUMNS, "process": np.int64}
    return concatenate_columns(columns, [darshan, counted])


def counted_from_ops(job, streams, covered=frozenset()):
    """Darshan's per-record counters computed from Job.ops of reads and writes that succeeded
    (a failed call counts nowhere, as in Darshan), one record per (process, file, layer) not in
    covered; a file two or more MPI ranks accessed in a layer becomes one shared record (rank -1)
    with its fastest and slowest rank, as Darshan reduces a file every rank opened (reduced_shared).
    streams: request_streams of those ops (PatternOps.streams). STDIO and MPI-IO have no
    consecutive, sequential or alignment counts (-1), nor highest offsets where the ops have no
    offsets (stdio's)."""
    ops = job.ops
    n_files = max(len(job.files), 1)
    rows, stream, sequential, consecutive = streams
    if covered:
        covered_pairs = np.array([f * len(LAYERS) + layer for f, layer in covered], np.int64)
        keep = ~np.isin((stream >> 1) % (n_files * len(LAYERS)), covered_pairs)
        rows, stream, sequential, consecutive = rows[keep], stream[keep], sequential[keep], consecutive[keep]
    columns = {**DARSHAN_RECORD_COLUMNS, "process": np.int64}
    if not len(rows):
        return {name: np.zeros(0, dtype) for name, dtype in columns.items()}
    starts = np.flatnonzero(np.r_[True, stream[1:] != stream[:-1]])   # one stream: a record's reads, or writes
    record, is_write = stream[starts] >> 1, (stream[starts] & 1).astype(bool)
    keys, of_record = np.unique(record, return_inverse=True)
    n = len(keys)

    def by_direction(per_stream, read_name, write_name, dtype=np.int64):
        for name, streams_of in ((read_name, ~is_write), (write_name, is_write)):
            table[name] = np.bincount(of_record[streams_of], per_stream[streams_of], minlength=n).astype(dtype)

    def highest(values):
        per_stream = np.maximum.reduceat(values, starts)
        for name, streams_of in (("max_byte_read", ~is_write), ("max_byte_written", is_write)):
            table[name] = np.full(n, -1, np.int64)
            np.maximum.at(table[name], of_record[streams_of], per_stream[streams_of])

    table = {"process": keys // (n_files * len(LAYERS)), "file": (keys // len(LAYERS)) % n_files,
             "layer": (keys % len(LAYERS)).astype(np.uint8)}
    by_direction(np.diff(np.r_[starts, len(rows)]), "reads", "writes")
    by_direction(np.add.reduceat(consecutive, starts, dtype=np.int64), "consecutive_reads", "consecutive_writes")
    by_direction(np.add.reduceat(sequential, starts, dtype=np.int64), "sequential_reads", "sequential_writes")
    del sequential, consecutive
    result = ops["result"][rows]
    by_direction(np.add.reduceat(result, starts), "bytes_read", "bytes_written")
    by_direction(np.add.reduceat(result <= SMALL_BYTES, starts, dtype=np.int64), "small_reads", "small_writes")
    offset = ops["offset"][rows]
    result += offset - 1        # the last byte of each request, in place
    result[offset < 0] = -1     # no offset (stdio): no highest byte known
    highest(result)
    del result
    by_direction(np.add.reduceat(ops["duration_s"][rows], starts), "read_s", "write_s", np.float64)
    misaligned = np.add.reduceat((offset >= 0) & (offset % offset_alignment(job, rows) != 0), starts, dtype=np.int64)
    del offset
    table["file_not_aligned"] = np.bincount(of_record, misaligned, minlength=n).astype(np.int64)
    buffer = ops["buffer"][rows]
    unaligned = np.add.reduceat((buffer != 0) & (buffer % MEMORY_ALIGNMENT != 0), starts, dtype=np.int64)
    del buffer
    table["mem_not_aligned"] = np.bincount(of_record, unaligned, minlength=n).astype(np.int64)
    flags = op_column(ops, "flags")[rows]
    for flag, kind in ((Flag.COLLECTIVE, "collective"), (Flag.NONBLOCKING, "nonblocking")):
        by_direction(np.add.reduceat((flags & flag) != 0, starts, dtype=np.int64), f"{kind}_reads", f"{kind}_writes")
    # A non-blocking collective call (iwrite_all, write_all_begin) is both: the independent calls
    # are those of neither kind, not the calls less each count (which takes such a call away twice).
    neither = (flags & (Flag.COLLECTIVE | Flag.NONBLOCKING)) == 0
    by_direction(np.add.reduceat(neither, starts, dtype=np.int64), "independent_reads", "independent_writes")
    del flags, neither
    table["file_alignment"] = file_alignments(job)[table["file"]]
    table["meta_s"] = metadata_seconds(job, table["process"], table["file"], table["layer"])
    not_posix = table["layer"] != POSIX
    for name in ("consecutive_reads", "consecutive_writes", "sequential_reads", "sequential_writes",
                 "mem_not_aligned", "file_not_aligned", "file_alignment", "small_reads", "small_writes"):
        table[name][not_posix] = -1
    for name in ("collective_reads", "collective_writes", "independent_reads", "independent_writes",
                 "nonblocking_reads", "nonblocking_writes"):
        table[name][table["layer"] != MPIIO] = -1
    table["rank"] = np.array([job.processes[p].rank for p in table["process"].tolist()], np.int64)
    table["syncs"] = np.full(n, -1, np.int64)
    return reduced_shared(job, table)


def offset_alignment(job, rows):
    """The alignment each row's offset is checked against (file_alignments): one number when
    every file has the same."""
    alignments = file_alignments(job)
    if np.all(alignments == alignments[0]):
        return alignments[0]
    return alignments[job.ops["file"][rows]]


def request_streams(job, rows):
    """rows (of Job.ops: reads and writes) in Darshan's order: by process, file, layer and
    direction (a stream), each stream in the order of time; with each row's stream key, and
    whether Darshan counts it sequential (starting past where the previous request of the
    stream ended since its process last opened the file; the first past offset 0) and
    consecutive (starting right where it ended), as darshan-posix.c does."""
    ops = job.ops
    if not len(rows):
        return rows, np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, bool)
    n_files = max(len(job.files), 1)
    stream = ((ops["process"][rows].astype(np.int64) * n_files + ops["file"][rows]) * len(LAYERS) +
              ops["layer"][rows]) * 2 + (ops["direction"][rows] == WRITE)
    if len(stream) > 1 and not np.all(stream[1:] >= stream[:-1]):
        order = np.argsort(stream, kind="stable")   # rows are by process, then start: stable keeps time
        rows, stream = rows[order], stream[order]
        del order
    opened = opens_before(job)[rows]
    first = np.r_[True, (stream[1:] != stream[:-1]) | (opened[1:] != opened[:-1])]
    del opened
    offset = ops["offset"][rows]
    previous = np.roll(offset + ops["result"][rows] - 1, 1)   # the previous request's last byte
    previous[first] = 0
    return rows, stream, (offset > previous) & (offset >= 0), (offset == previous + 1) & (offset >= 0)


def opens_before(job):
    """Per op of Job.ops, how many opens of its file its process made up to it (a number that
    grows over each process's ops of the file: a request after another open is a first one)."""
    ops = job.ops
    n_files = max(len(job.files), 1)
    opened = (ops["direction"] == META) & (op_column(ops, "meta_kind") == META_KINDS.index("open")) & \
        (ops["result"] >= 0)
    if not opened.any():
        return np.zeros(len(ops["file"]), np.int64)
    key = ops["process"].astype(np.int64) * n_files + ops["file"]
    order = np.argsort(key, kind="stable")    # each process's ops of a file in the order of time
    out = np.empty(len(key), np.int64)
    out[order] = np.cumsum(opened[order])
    return out


def file_alignments(job):
    """Per file, the alignment Darshan checks offsets against: Lustre's stripe size where known,
    else DEFAULT_FILE_ALIGNMENT (the page and block size of the local file systems)."""
    return np.array([f.stripe_size if f.stripe_size > 0 else DEFAULT_FILE_ALIGNMENT for f in job.files] or [1],
                    np.int64)


def metadata_seconds(job, process, file, layer):
    """The time of the metadata calls (Job.ops of direction META) of each (process, file, layer)."""
    ops = job.ops
    meta = np.flatnonzero(ops["direction"] == META)
    if not len(meta) or not len(process):
        return np.zeros(len(process))
    n_files = max(len(job.files), 1)
    key = (process * n_files + file) * len(LAYERS) + layer
    meta_key = (ops["process"][meta].astype(np.int64) * n_files + ops["file"][meta]) * len(LAYERS) + ops["layer"][meta]
    order = np.argsort(key)
    where = np.searchsorted(key[order], meta_key)
    found = where < len(key)
    found[found] = key[order][where[found]] == meta_key[found]
    out = np.zeros(len(process))
    np.add.at(out, order[where[found]], ops["duration_s"][meta][found])
    return out


def reduced_shared(job, table):
    """The records of each (file, layer) that two or more MPI ranks accessed, reduced to one
    shared record (rank -1, process -1) as Darshan reduces them: counts and times added, the
    highest offsets the highest, the fastest and slowest rank by time on the file (reads, writes
    and metadata) with its bytes, and the variances over the ranks. Processes of no rank (a
    script's commands, one after the other) keep their own records: they do not share a file as
    ranks running together do."""
    columns = {**DARSHAN_RECORD_COLUMNS, "process": np.int64}
    pair = np.where(table["rank"] >= 0, table["file"] * len(LAYERS) + table["layer"],
                    -1 - np.arange(len(table["rank"])))    # a process of no rank: a group of its own
    order = np.lexsort((table["read_s"] + table["write_s"] + table["meta_s"], pair))
    table = {name: values[order] for name, values in table.items()}
    pair = pair[order]
    starts = np.flatnonzero(np.r_[True, pair[1:] != pair[:-1]])
    processes = np.diff(np.r_[starts, len(pair)])
    single = np.repeat(processes == 1, processes)
    out = {name: table[name][single] if name in table else
           np.full(int(single.sum()), np.nan if dtype == np.float64 else -1, dtype) for name, dtype in columns.items()}
    starts, processes = starts[processes > 1], processes[processes > 1]
    if not len(starts):
        return out
    ends = starts + processes - 1      # rows by time within each file: fastest first, slowest last
    time = table["read_s"] + table["write_s"] + table["meta_s"]
    moved = (table["bytes_read"] + table["bytes_written"]).astype(np.float64)
    who = table["rank"]
    shared = {"process": np.full(len(starts), -1), "rank": np.full(len(starts), -1),
              "file": table["file"][starts], "layer": table["layer"][starts]}
    for name in ("reads", "writes", "consecutive_reads", "consecutive_writes", "sequential_reads",
                 "sequential_writes", "bytes_read", "bytes_written", "read_s", "write_s", "meta_s", "small_reads",
                 "small_writes", "mem_not_aligned", "file_not_aligned", "collective_reads", "collective_writes",
                 "independent_reads", "independent_writes", "nonblocking_reads", "nonblocking_writes", "syncs"):
        summed = np.add.reduceat(table[name], starts)
        shared[name] = np.where(table[name][starts] < 0, -1, summed) if table[name].dtype != np.float64 else summed
    for name in ("max_byte_read", "max_byte_written", "file_alignment"):
        shared[name] = np.maximum.reduceat(table[name], starts)
    for end, rows in (("fastest", starts), ("slowest", ends)):
        shared[f"{end}_rank"], shared[f"{end}_s"], shared[f"{end}_bytes"] = who[rows], time[rows], moved[rows]
    mean_s = np.add.reduceat(time, starts) / processes
    mean_bytes = np.add.reduceat(moved, starts) / processes
    shared["variance_s"] = np.add.reduceat(time ** 2, starts) / processes - mean_s ** 2
    shared["variance_bytes"] = np.add.reduceat(moved ** 2, starts) / processes - mean_bytes ** 2
    return concatenate_columns(columns, [out, shared])


# --- the ops behind a pattern, and its seconds at stake ---------------------------------------

class PatternOps:
    """The job's ops as the patterns use them: reads and writes that succeeded (`data`), in
    Darshan's order (`streams`) and which of them Darshan counts sequential, their time lost,
    and which (file, layer) pairs have ops at all (the rest are known only from counters)."""

    def __init__(self, job, per_op, per_total, clock):
        ops = job.ops
        self.job = job
        self.clock = clock
        # the per-call cost of each op (its class's line at one byte) and of a counted request
        self.call_s = per_op["call_s"]
        self.counted_call_s = {d: float(per_total["call_s"][per_total["is_io"] & (job.totals["direction"] == d)]
                                        .max(initial=0.0)) for d in (READ, WRITE)}
        self.lost_share = lost_share_of_counted(job, per_total)
        self.data = ((ops["direction"] == READ) | (ops["direction"] == WRITE)) & (ops["result"] >= 0)
        self.lost_s = per_op["lost_s"]
        # (rows, stream keys, sequential, consecutive) in Darshan's order: request_streams
        self.streams = request_streams(job, np.flatnonzero(self.data))
        self.sequential = np.zeros(len(ops["file"]), bool)
        self.sequential[self.streams[0]] = self.streams[2]
        self.pairs_with_ops = np.unique((self.streams[1] >> 1) % (max(len(job.files), 1) * len(LAYERS)))

    def lost_share_of(self, records):
        """Per evidence record, the share of its (file, layer)'s counted time that was lost."""
        return self.lost_share[records["file"].astype(np.int64) * len(LAYERS) + records["layer"]]

    def of(self, layer, direction):
        ops = self.job.ops
        return self.data & (ops["layer"] == layer) & (ops["direction"] == direction)

    def counters_only(self, records):
        """Records of (file, layer) pairs with no op known one by one."""
        pairs = records["file"].astype(np.int64) * len(LAYERS) + records["layer"]
        return ~np.isin(pairs, self.pairs_with_ops)


def lost_share_of_counted(job, per_total):
    """Per (file, layer) (index file * len(LAYERS) + layer), the time lost (the middle of the
    estimate's interval, as the headline's) over the time of the I/O known only from counters;
    0 where none is."""
    totals = job.totals
    rows = per_total["is_io"]
    key = totals["file"][rows].astype(np.int64) * len(LAYERS) + totals["layer"][rows]
    size = max(len(job.files), 1) * len(LAYERS)
    seconds = np.bincount(key, totals["seconds"][rows], minlength=size)
    lost = np.bincount(key, (per_total["lost_low_s"][rows] + per_total["lost_high_s"][rows]) / 2, minlength=size)
    return np.where(seconds > 0, np.clip(lost / np.where(seconds > 0, seconds, 1.0), 0.0, 1.0), 0.0)


def pattern(code, level, job, ops, records, op_rows, op_at_stake, record_rows, record_at_stake, how,
            slowest_rank_holds=False, **counts):
    """A pattern that holds: its evidence and the files and ranks behind it. op_rows (a mask of
    Job.ops) with op_at_stake (seconds per op of those rows, in order), record_rows (a mask of
    the evidence records known only from counters) with record_at_stake (estimated seconds, per
    evidence record); at_stake_s is their sum, None when neither has any op or record. how:
    (how the ops' part is computed, how the counters' part is estimated). slowest_rank_holds: a
    shared record's part is its slowest rank's alone (not the record's time over the ranks)."""
    o = job.ops
    op_idx = np.flatnonzero(op_rows)
    rec_idx = np.flatnonzero(record_rows)
    op_at_stake = np.asarray(op_at_stake, np.float64)
    record_at_stake = np.nan_to_num(np.broadcast_to(np.asarray(record_at_stake, np.float64), len(record_rows))[rec_idx])
    n_files = len(job.files)
    op_file, op_process = o["file"][op_idx], o["process"][op_idx]
    file_s = np.bincount(op_file, op_at_stake, minlength=n_files).astype(np.float64)
    file_ops = np.bincount(op_file, minlength=n_files).astype(np.int64)
    file_s += np.bincount(records["file"][rec_idx], record_at_stake, minlength=n_files)
    evidence = " and ".join(name for name, rows in (("ops", op_idx), ("counters", rec_idx)) if len(rows)) or None
    files = np.flatnonzero((file_ops > 0) | (np.bincount(records["file"][rec_idx], minlength=n_files) > 0))
    files = files[np.argsort(-file_s[files], kind="stable")][:FILES_NAMED]
    process_s = np.bincount(op_process, op_at_stake, minlength=len(job.processes)).astype(np.float64)
    processes = np.flatnonzero(np.bincount(op_process, minlength=len(job.processes)))
    processes = processes[np.argsort(-process_s[processes], kind="stable")][:FILES_NAMED]
    ranks = [{"rank": job.processes[p].rank, "pid": job.processes[p].pid or None, "seconds": float(process_s[p])}
             for p in processes.tolist()]
    # a rank's own record names it; a shared one, its slowest rank (the one behind its time)
    named = np.where(records["rank"][rec_idx] >= 0, records["rank"][rec_idx], records["slowest_rank"][rec_idx])
    shared_ranks = sorted({int(r) for r in named.tolist() if r >= 0})
    ranks += [{"rank": r, "pid": None, "seconds": None} for r in shared_ranks[:FILES_NAMED - len(ranks)]]
    found = {"code": code, "level": level, "evidence": evidence, **counts,
             "files": [{"name": job.files[f].name, "ops": int(file_ops[f]), "seconds": float(file_s[f])}
                       for f in files.tolist()],
             "ranks": ranks,
             "ops_s": float(job.ops["duration_s"][op_idx].sum()) if len(op_idx) else None,
             "lost_s": float(ops.lost_s[op_idx].sum()) if len(op_idx) else None,
             "at_stake_s": None, "rank_seconds": None, "at_stake_how": "; ".join(
                 ([how[0]] if len(op_idx) else []) + ([f"estimated from counters: {how[1]}"] if len(rec_idx) else []))
             or None}
    if not evidence:
        return found
    on_records = records_by_process(job, records, rec_idx, record_at_stake)
    if slowest_rank_holds:
        on_records["top_share"] = np.ones(len(on_records["shared_s"]))
    return in_wall_clock(found, ops.clock, process_s + on_records["process_s"], on_records["shared_s"],
                         on_records["top_share"], WALL_CLOCK_HOW)


def records_by_process(job, records, rec_idx, seconds):
    """Seconds per evidence record (of records rec_idx) as process-seconds per process (a
    record of a process or of a rank with a process) and per shared record with the share of its
    time its slowest rank spent (Darshan's *_F_SLOWEST_RANK_TIME over the record's time); a
    rank's record whose rank has no process counts as a shared record held by one rank."""
    process_of_rank = {p.rank: i for i, p in reversed(list(enumerate(job.processes))) if p.rank >= 0}
    process_s = np.zeros(len(job.processes))
    owner = records["process"][rec_idx].astype(np.int64)
    rank = records["rank"][rec_idx]
    of_rank = np.array([process_of_rank.get(int(r), -1) for r in rank.tolist()], np.int64)
    owner = np.where((owner < 0) & (rank >= 0), of_rank, owner)
    own = owner >= 0
    np.add.at(process_s, owner[own], seconds[own])
    top_share = slowest_rank_share({name: records[name][rec_idx] for name in
                                    ("read_s", "write_s", "meta_s", "slowest_s", "rank")})
    return {"process_s": process_s, "shared_s": seconds[~own], "top_share": top_share[~own]}


def fact(code, level, evidence="counters", ranks=(), **counts):
    """A pattern about how the job is set up, not about time: no files or seconds; ranks, the
    JobProcesses it names."""
    return {"code": code, "level": level, "evidence": evidence, **counts, "files": [],
            "ranks": [{"rank": job_process.rank, "pid": job_process.pid or None, "seconds": None}
                      for job_process in ranks],
            "ops_s": None, "lost_s": None, "at_stake_s": None, "rank_seconds": None, "at_stake_how": None}


def shared(records):
    """The evidence records of a file shared by the ranks (Darshan's rank -1, or reduced from the
    ops of several MPI ranks: reduced_shared), not a rank's or a process's own."""
    return (records["rank"] < 0) & (records["process"] < 0)


def posix_total(records, name, rows=None):
    mask = (records["layer"] == POSIX) & (records[name] >= 0)
    if rows is not None:
        mask &= rows
    return int(records[name][mask].sum())


DIRECTION_COLUMNS = {READ: ("reads", "bytes_read", "read_s", "small_reads", "sequential_reads",
                            "max_byte_read", "collective_reads", "independent_reads", "nonblocking_reads"),
                     WRITE: ("writes", "bytes_written", "write_s", "small_writes", "sequential_writes",
                             "max_byte_written", "collective_writes", "independent_writes", "nonblocking_writes")}


def columns_of(direction):
    return dict(zip(("ops", "bytes", "seconds", "small", "sequential", "max_byte", "collective", "independent",
                     "nonblocking"), DIRECTION_COLUMNS[direction]))


def operation_intensive(job, records, ops):
    """P01-P04: more writes than reads (or the reverse) by more than 10 % of all, in requests
    (P01, P02) or in bytes (P03, P04): a fact about the job that says which direction to tune."""
    found = []
    for what, (read_col, write_col), names, codes in (
            ("ops", ("reads", "writes"), ("reads", "writes"), ("P01", "P02")),
            ("bytes", ("bytes_read", "bytes_written"), ("read_bytes", "written_bytes"), ("P03", "P04"))):
        reads, writes = posix_total(records, read_col), posix_total(records, write_col)
        total = reads + writes
        if total and abs(writes - reads) / total > IMBALANCE_OPERATIONS:
            found.append(fact(codes[0] if writes > reads else codes[1], "info", measure=what,
                              **{names[0]: reads, names[1]: writes}, share=max(reads, writes) / total))
    return found


def small_requests(job, records, ops, shared_only=False):
    """P05/P06 (P15/P16 on shared files): requests of at most 1 MiB are more than 10 % of the
    POSIX reads (writes) and more than 1000. At stake: the calls that merging each process's small
    requests of a file into requests of MERGED_REQUEST_BYTES removes, each at the per-call cost
    of its class's line in the cause model (PatternOps.call_s); from counters, the calls the
    records' small requests would lose at the model's cached per-call cost."""
    found = []
    posix = records["layer"] == POSIX
    in_scope = posix & shared(records) if shared_only else posix
    shared_files = np.unique(records["file"][posix & shared(records)])
    codes = {READ: "P15", WRITE: "P16"} if shared_only else {READ: "P05", WRITE: "P06"}
    o = job.ops
    for direction, c in ((READ, columns_of(READ)), (WRITE, columns_of(WRITE))):
        total, small = posix_total(records, c["ops"], in_scope), posix_total(records, c["small"], in_scope)
        if not (total and small / total > SMALL_REQUESTS and small > SMALL_REQUESTS_ABSOLUTE):
            continue
        moved = ops.of(POSIX, direction)
        if shared_only:
            moved &= np.isin(o["file"], shared_files)
        small_ops = moved & (o["result"] <= SMALL_BYTES)
        counted = in_scope & ops.counters_only(records) & (records[c["ops"]] > 0)
        small_count = np.clip(records[c["small"]], 0, None).astype(np.float64)
        small_bytes = np.minimum(np.clip(records[c["bytes"]], 0, None).astype(np.float64), small_count * SMALL_BYTES)
        removed = np.maximum(small_count - np.ceil(small_bytes / MERGED_REQUEST_BYTES), 0.0)
        estimate = np.minimum(removed * ops.counted_call_s[direction], np.nan_to_num(records[c["seconds"]]))
        sizes = o["result"][small_ops]
        found.append(pattern(codes[direction], "high", job, ops, records, small_ops,
                             merged_calls_saving(o, np.flatnonzero(small_ops), ops.call_s), counted, estimate,
                             (f"the calls that merging each process's small requests of a file into requests of "
                              f"{MERGED_REQUEST_BYTES >> 20} MiB removes, each at its class's per-call cost in the "
                              f"cause model", "the calls the records' small requests would lose, at the model's "
                              "cached per-call cost"),
                             direction=DIRECTION_NAMES[direction], small_requests=small, requests=total,
                             share=small / total, threshold_bytes=SMALL_BYTES,
                             median_bytes=float(np.median(sizes)) if len(sizes) else None))
    return found


def merged_calls_saving(o, rows, call_s):
    """Per op of rows (indices into Job.ops), its part of what merging the requests of its
    (process, file) into requests of MERGED_REQUEST_BYTES saves: its per-call cost times the
    share of the group's calls that merging removes (1 - the merged calls over the calls)."""
    if not len(rows):
        return np.zeros(0)
    files = int(o["file"][rows].max()) + 1
    key = o["process"][rows].astype(np.int64) * files + o["file"][rows]
    groups, inverse = groups_of(key, (int(o["process"][rows].max()) + 1) * files)
    calls = np.bincount(inverse, minlength=len(groups))
    nbytes = np.bincount(inverse, np.maximum(o["result"][rows], 0).astype(np.float64), len(groups))
    kept = np.maximum(np.ceil(nbytes / MERGED_REQUEST_BYTES), 1.0)
    removed_share = np.maximum(calls - kept, 0.0) / np.maximum(calls, 1)
    return np.minimum(call_s[rows], o["duration_s"][rows]) * removed_share[inverse]


DIRECTION_NAMES = {READ: "read", WRITE: "write"}


def shared_small_requests(job, records, ops):
    return small_requests(job, records, ops, shared_only=True)


def misaligned(job, records, ops):
    """P07: more than 10 % of the POSIX requests from buffers not aligned in memory; P08: at
    offsets not aligned to the file system's block (Lustre: stripe) size. At stake: the time lost
    in those requests (compared with cached I/O: an aligned request reads or writes no partial
    block of uncached data, while a cached one costs the same aligned or not); for P08, of a
    request larger than two blocks only the part of its time lost its two partial blocks take
    (partial_blocks_share)."""
    found = []
    o = job.ops
    total = posix_total(records, "reads") + posix_total(records, "writes")
    if not total:
        return found
    data = ops.data & (o["layer"] == POSIX)
    op_masks = {"P07": lambda: (o["buffer"] != 0) & (o["buffer"] % MEMORY_ALIGNMENT != 0),
                "P08": lambda: (o["offset"] >= 0) & (o["offset"] % offset_alignment(job, slice(None)) != 0)}
    for code, column, what in (("P07", "mem_not_aligned", "memory"), ("P08", "file_not_aligned", "file")):
        count = posix_total(records, column)
        if count / total <= MISALIGNED_REQUESTS:
            continue
        counted = (records["layer"] == POSIX) & ops.counters_only(records) & (records[column] > 0)
        requests = np.maximum(records["reads"] + records["writes"], 1)
        estimate = (records["read_s"] + records["write_s"]) * np.clip(records[column] / requests, 0.0, 1.0) * \
            ops.lost_share_of(records)
        mask = data & op_masks[code]()
        known = records["file_alignment"][(records["layer"] == POSIX) & (records["file_alignment"] > 0)]
        alignment = MEMORY_ALIGNMENT if code == "P07" else int(known.min()) if len(known) else DEFAULT_FILE_ALIGNMENT
        op_stake, how = ops.lost_s[mask], ("the time lost in the misaligned requests",
                                           "the records' time lost pro rata of their misaligned requests")
        if code == "P08":
            op_stake = op_stake * partial_blocks_share(o["result"][mask], alignment)
            moved = np.maximum(records["bytes_read"] + records["bytes_written"], 0)
            estimate = estimate * partial_blocks_share(moved / requests, alignment)
            how = tuple(f"{h}, the part of it their two partial blocks of {alignment} bytes take" for h in how)
        found.append(pattern(code, "high", job, ops, records, mask, op_stake, counted, estimate, how,
                             misaligned=what, misaligned_requests=count, requests=total,
                             share=count / total, alignment_bytes=alignment))
    return found


def partial_blocks_share(sizes, alignment):
    """The share of a request of each size that its two partial blocks of `alignment` bytes make
    up, all of it for a request of at most two blocks: what aligning its offset saves at most."""
    return np.clip(2.0 * alignment / np.maximum(np.asarray(sizes, np.float64), 1.0), 0.0, 1.0)


def redundant_traffic(job, records, ops):
    """P09/P10: bytes read (written) more than once. From the ops: per file, the bytes of the
    POSIX requests less the bytes of their union; from counters: a record's bytes beyond its
    highest offset + 1. At stake: each file's read (write) time times its share of bytes moved
    again (what reading or writing each byte once could save). Drishti 0.8 tests the job's
    highest offset against its bytes the other way round (docs/assessment.md says why not here)."""
    found = []
    o = job.ops
    for direction, c in ((READ, columns_of(READ)), (WRITE, columns_of(WRITE))):
        moved = np.flatnonzero(ops.of(POSIX, direction) & (o["offset"] >= 0) & (o["result"] > 0))
        again_share = repeated_share(o, moved, len(job.files))[o["file"][moved]]
        again = again_share > 0
        # the same of each process's own requests of a file: what it moved again itself (the same
        # share where each file is one process's)
        pairs, own = groups_of(o["file"][moved].astype(np.int64) * max(len(job.processes), 1) + o["process"][moved],
                               max(len(job.files), 1) * max(len(job.processes), 1))
        one_each = len(pairs) == len(np.unique(pairs // max(len(job.processes), 1)))
        own_share = again_share if one_each else repeated_share(o, moved, len(pairs), own)[own]
        counted = (records["layer"] == POSIX) & ops.counters_only(records) & (records[c["bytes"]] > 0)
        # float: a damaged log's highest offset may be near 2^63, where + 1 would wrap
        beyond = np.maximum(records[c["bytes"]].astype(np.float64) - (records[c["max_byte"]] + 1.0), 0.0)
        beyond[records[c["max_byte"]] < 0] = 0.0    # no highest offset known (damaged): nothing said
        record_share = np.where(counted, beyond / np.maximum(records[c["bytes"]], 1), 0.0)
        counted &= beyond > 0
        again_bytes = float((again_share * o["result"][moved]).sum() + beyond[counted].sum())
        # who moved the bytes again: one process its own bytes (ops; a rank's own record), a process
        # bytes that others moved too (ops), or not known (a shared record counts the ranks together)
        by = {"again_by_same_process_bytes": float((own_share * o["result"][moved]).sum() +
                                                   beyond[counted & ~shared(records)].sum()),
              "again_in_shared_records_bytes": float(beyond[counted & shared(records)].sum())}
        by["again_by_other_processes_bytes"] = max(again_bytes - by["again_by_same_process_bytes"] -
                                                   by["again_in_shared_records_bytes"], 0.0)
        total_bytes = posix_total(records, c["bytes"])
        if not total_bytes or again_bytes / total_bytes <= REDUNDANT_SHARE:
            continue
        again_ops = np.zeros(len(o["file"]), bool)
        again_ops[moved[again]] = True
        found.append(pattern("P09" if direction == READ else "P10", "warn", job, ops, records, again_ops,
                             o["duration_s"][moved[again]] * again_share[again], counted,
                             records[c["seconds"]] * record_share,
                             ("each file's time in these requests times its share of bytes moved again",
                              "the records' time times their share of bytes beyond the highest offset"),
                             direction=DIRECTION_NAMES[direction], again_by=again_by(by),
                             again_bytes=again_bytes, bytes=total_bytes, share=again_bytes / total_bytes, **by))
    return found


def again_by(by):
    """Who moved bytes again (redundant_traffic's amounts): "process" (each process its own
    bytes), "processes" (bytes other processes moved too), "both", or "shared" (only shared
    records say so, where Darshan counts the ranks together: which of the two is not known)."""
    own = by["again_by_same_process_bytes"] > 0
    others = by["again_by_other_processes_bytes"] > 0
    if not (own or others):
        return "shared"
    return "both" if own and others else "process" if own else "processes"


def repeated_share(o, rows, n_files, group=None):
    """Per file, the share of the bytes of the ops rows (indices into Job.ops) that cover bytes
    other ops (or the same op) covered too: 1 - union / sum of the requested ranges. group: per
    row, a group in place of its file (0 ... n_files - 1)."""
    share = np.zeros(max(n_files, 1))
    if not len(rows):
        return share
    # offsets and sizes past 2^61 (2 EiB) are damage: clipped, so that their sums cannot wrap
    start = np.clip(o["offset"][rows], 0, 1 << 61)
    end = start + np.clip(o["result"][rows], 0, 1 << 61)
    file = o["file"][rows] if group is None else group
    total = np.bincount(file, end - start, minlength=n_files)
    highest = int(start.max()) + 1
    if n_files * highest < 1 << 62:
        order = np.argsort(file.astype(np.int64) * highest + start)
    else:
        order = np.lexsort((start, file))
    file, start, end = file[order], start[order], end[order]
    del order
    first = np.r_[True, file[1:] != file[:-1]]
    # the furthest end of the earlier ranges of the same file (a running maximum restarting at each file)
    reach = running_max_by_group(end, np.flatnonzero(first))
    reach = np.r_[start[:1], reach[:-1]]
    reach[first] = start[first]
    union = np.bincount(file, np.maximum(end - np.maximum(start, reach), 0), minlength=n_files)
    with np.errstate(invalid="ignore", divide="ignore"):
        share[:n_files] = np.where(total > 0, 1.0 - union / np.maximum(total, 1), 0.0)
    return np.clip(share, 0.0, 1.0)


def running_max_by_group(values, firsts):
    """The running maximum of int64 values, restarting at each group (firsts: the first row of
    each group, ascending): each group lifted above the previous one's values, in one pass while
    the lifts fit in int64 (exact), else group by group."""
    span = int(values.max()) - int(values.min()) + 1 if len(values) else 1
    if span * len(firsts) < 1 << 62:
        lift = np.zeros(len(values), np.int64)
        lift[firsts] = span
        np.cumsum(lift, out=lift)
        out = values + lift
        np.maximum.accumulate(out, out=out)
        out -= lift
        return out
    out = np.empty_like(values)
    for begin, stop in zip(firsts.tolist(), np.r_[firsts[1:], len(values)].tolist()):
        out[begin:stop] = np.maximum.accumulate(values[begin:stop])
    return out


def random_access(job, records, ops):
    """P11/P13: POSIX requests neither consecutive nor sequential (Darshan's counts) are more than
    20 % of the reads (writes) and more than 1000; else P12/P14, mostly sequential, where the
    sequential requests are more than MOSTLY_SEQUENTIAL of them (too few random requests for
    P11/P13 and too few sequential ones for P12/P14: neither is said). Random here is
    requests less sequential ones (Darshan's sequential count includes the consecutive ones;
    Drishti 0.8 subtracts both). At stake: the time lost in the random requests (compared with
    cached I/O: random requests cost when they reach storage)."""
    found = []
    for direction, c in ((READ, columns_of(READ)), (WRITE, columns_of(WRITE))):
        total, sequential = posix_total(records, c["ops"]), posix_total(records, c["sequential"])
        if not total:
            continue
        random = total - sequential
        codes = ("P11", "P12") if direction == READ else ("P13", "P14")
        if not (random / total > RANDOM_OPERATIONS and random > RANDOM_OPERATIONS_ABSOLUTE):
            if sequential / total <= MOSTLY_SEQUENTIAL:
                continue
            found.append(fact(codes[1], "ok", direction=DIRECTION_NAMES[direction], sequential_requests=sequential,
                              requests=total, share=sequential / total))
            continue
        mask = ops.of(POSIX, direction) & ~ops.sequential
        counted = (records["layer"] == POSIX) & ops.counters_only(records) & (records[c["ops"]] > 0)
        share = np.where(counted, np.clip(1 - records[c["sequential"]] / np.maximum(records[c["ops"]], 1), 0.0, 1.0),
                         0.0)
        found.append(pattern(codes[0], "high", job, ops, records, mask, ops.lost_s[mask], counted,
                             records[c["seconds"]] * share * ops.lost_share_of(records),
                             ("the time lost in the random requests",
                              "the records' time lost pro rata of their random requests"),
                             direction=DIRECTION_NAMES[direction], random_requests=random, requests=total,
                             share=random / total))
    return found


def shared_imbalance(job, records, ops):
    """P18/P19: on a shared file (a record of every rank, rank -1), the slowest and the fastest
    rank differ by more than 15 % of the file's bytes (P18) or of its time (P19). At stake, per
    file: the slowest rank's time less the mean rank's (what balancing the ranks could save).
    Records whose fastest or slowest rank is unknown (damaged counters) are not judged."""
    found = []
    both_known = (records["fastest_rank"] >= 0) & (records["slowest_rank"] >= 0)
    shared_rows = np.flatnonzero((records["layer"] == POSIX) & shared(records) & both_known)
    time = records["read_s"] + records["write_s"] + records["meta_s"]
    moved = records["bytes_read"] + records["bytes_written"]
    for code, fastest, slowest, whole in (("P18", "fastest_bytes", "slowest_bytes", moved),
                                          ("P19", "fastest_s", "slowest_s", time)):
        diff = np.abs(records[slowest][shared_rows] - records[fastest][shared_rows])
        judged = whole[shared_rows] > 0
        share = diff[judged] / whole[shared_rows][judged]
        imbalanced = shared_rows[judged][share > IMBALANCE_STRAGGLERS]
        if not len(imbalanced):
            continue
        ranks_on_file = np.zeros(len(job.files), np.int64)
        ranks_on_file[records["file"][imbalanced[records["process"][imbalanced] < 0]]] = job.nprocs
        found.append(imbalance_pattern(code, job, ops, records, imbalanced, ranks_on_file,
                                       imbalanced_files=len(imbalanced)))
    return found


def individual_imbalance(job, records, ops):
    """P21/P22: a file several MPI ranks accessed in records of their own, where the rank with fewest
    bytes written (read) moved more than 30 % fewer than the one with most; a rank that opened
    the file and moved nothing counts with 0 bytes, as its Darshan record does. At stake, per
    file: the slowest rank's time on it less the mean rank's."""
    found = []
    own = np.flatnonzero((records["layer"] == POSIX) & ~shared(records) & (records["rank"] >= 0))
    if not len(own):
        return found
    idle_files, idle_ranks = opened_without_data(job, records, own)
    ranks_on_file = np.bincount(records["file"][own], minlength=len(job.files)) + idle_ranks
    n = max(len(job.files), 1)
    files = records["file"][own]
    for code, column in (("P21", "bytes_written"), ("P22", "bytes_read")):
        most = np.full(n, -1, np.int64)
        fewest = np.full(n, np.iinfo(np.int64).max, np.int64)
        np.maximum.at(most, files, records[column][own])
        np.minimum.at(fewest, files, records[column][own])
        fewest[idle_files] = 0
        with np.errstate(invalid="ignore", divide="ignore"):
            uneven = np.flatnonzero((most > 0) & ((most - fewest) / np.maximum(most, 1) > IMBALANCE_SIZE))
        if not len(uneven):
            continue
        rows = own[np.isin(files, uneven)]
        found.append(imbalance_pattern(code, job, ops, records, rows, ranks_on_file, imbalanced_files=len(uneven)))
    return found


def opened_without_data(job, records, own):
    """Files of the ranks' own records `own` that some other rank opened (POSIX: Job.meta_kinds'
    opens of Darshan's records, the traced opens) without a record of its own there, that is
    without moving data; and per file of the job how many such ranks there are."""
    opened = job.meta_kinds
    kind_open = (opened["kind"] == META_KINDS.index("open")) & (opened["layer"] == POSIX) & (opened["process"] >= 0)
    pairs = set(zip(opened["process"][kind_open].tolist(), opened["file"][kind_open].tolist()))
    o = job.ops
    traced_open = (o["direction"] == META) & (op_column(o, "meta_kind") == META_KINDS.index("open")) & \
        (o["layer"] == POSIX) & (o["result"] >= 0)
    pairs |= set(zip(o["process"][traced_open].tolist(), o["file"][traced_open].tolist()))
    files = set(records["file"][own].tolist())
    counted = set(zip(records["rank"][own].tolist(), records["file"][own].tolist()))
    idle_ranks = {(job.processes[p].rank, f) for p, f in pairs if f in files and job.processes[p].rank >= 0} - counted
    idle = np.array([f for _, f in idle_ranks], np.int64)
    return np.unique(idle), np.bincount(idle, minlength=len(job.files))


def imbalance_pattern(code, job, ops, records, rows, ranks_on_file, **counts):
    """A rank-imbalance pattern over the evidence records rows (shared records, or the ranks' own
    records of the imbalanced files): at stake per file, the slowest process's time on it less
    the mean over the ranks on the file (those with ops, or ranks_on_file[file] if more: ranks
    that opened it and moved nothing count with 0 s), from the ops where known, else from the
    shared record's slowest rank and the record's time over nprocs."""
    o = job.ops
    files = np.unique(records["file"][rows])
    with_ops = np.isin(files * len(LAYERS) + POSIX, ops.pairs_with_ops)
    op_files = files[with_ops]
    mask = (ops.data | (o["direction"] == META)) & (o["layer"] == POSIX) & np.isin(o["file"], op_files)
    at_stake = np.zeros(len(o["file"]))
    idx = np.flatnonzero(mask)
    if len(idx):
        key = o["file"][idx].astype(np.int64) * len(job.processes) + o["process"][idx]
        keys, inverse = np.unique(key, return_inverse=True)
        per_process = np.bincount(inverse, o["duration_s"][idx])
        file_of_key = keys // len(job.processes)
        slowest = np.zeros(len(job.files))
        np.maximum.at(slowest, file_of_key, per_process)
        ranks = np.maximum(np.bincount(file_of_key, minlength=len(job.files)), ranks_on_file)
        mean = np.bincount(file_of_key, per_process, minlength=len(job.files)) / np.maximum(ranks, 1)
        # the excess of the slowest process of each file, spread over that process's ops on it
        slowest_key = per_process >= slowest[file_of_key]
        excess = np.where(slowest_key, per_process - mean[file_of_key], 0.0)
        share = np.where(per_process > 0, excess / np.maximum(per_process, 1e-300), 0.0)
        at_stake[idx] = o["duration_s"][idx] * share[inverse]
        mask[idx] = share[inverse] > 0
    counted = np.zeros(len(records["file"]), bool)
    counted[rows] = np.isin(records["file"][rows], files[~with_ops])
    nprocs = max(job.nprocs, 1)
    time = records["read_s"] + records["write_s"] + records["meta_s"]
    estimate = np.where(shared(records), np.nan_to_num(records["slowest_s"]) - time / nprocs, 0.0)
    return pattern(code, "high", job, ops, records, mask, at_stake[mask], counted, np.maximum(estimate, 0.0),
                   ("per file, the slowest rank's time on it less the mean rank's",
                    "per shared file, its slowest rank's time less the file's time over the job's ranks"),
                   slowest_rank_holds=True, **counts)


def mpiio_usage(job, records, ops):
    """M01: an MPI job whose ranks moved data without MPI-IO (information only when some of its
    data went past POSIX, through modules ioassess does not assess: bytes_past_posix). M02/M03: more than 1000
    MPI-IO reads (writes), none collective (M04/M05 when some are). M06/M07: MPI-IO used, no
    non-blocking reads (writes). At stake: M02/M03 the time of the independent MPI-IO calls, all
    that collective I/O could save; M06/M07 the POSIX I/O inside the blocking calls (io_inside:
    overlap hides the I/O, not a collective call's wait for the ranks that arrive later), at most
    the mean rank's time outside I/O (the computation it could hide behind)."""
    mpiio = records["layer"] == MPIIO
    if not mpiio.any():
        ranks = ranks_with_io(job, records)
        parallel = job.nprocs > 1 and any(p.rank >= 0 for p in job.processes)   # an MPI job's ranks
        if not (ranks > 1 and parallel):
            return []
        past = bytes_past_posix(job.unassessed)   # went to DAOS, where ioassess does not judge it
        return [fact("M01", "info", ranks_with_io=ranks, bytes_to_daos=past) if past else
                fact("M01", "warn", ranks_with_io=ranks)]
    found = []
    o = job.ops
    for direction, c in ((READ, columns_of(READ)), (WRITE, columns_of(WRITE))):
        collective = int(records[c["collective"]][mpiio].clip(0).sum())
        independent = int(records[c["independent"]][mpiio].clip(0).sum())
        calls = ops.of(MPIIO, direction)
        flags = op_column(o, "flags")
        if collective == 0 and independent + collective > COLLECTIVE_OPERATIONS_ABSOLUTE:
            mask = calls & ((flags & (Flag.COLLECTIVE | Flag.NONBLOCKING)) == 0)
            counted = mpiio & ops.counters_only(records) & (records[c["independent"]] > 0)
            share = np.where(counted, records[c["independent"]] / np.maximum(records[c["ops"]], 1), 0.0)
            found.append(pattern("M02" if direction == READ else "M03", "high", job, ops, records, mask,
                                 o["duration_s"][mask], counted, records[c["seconds"]] * share,
                                 ("the independent MPI-IO calls' time",
                                  "the records' MPI-IO time pro rata of their independent calls"),
                                 direction=DIRECTION_NAMES[direction], independent_requests=independent,
                                 requests=independent + collective))
        elif collective:
            found.append(fact("M04" if direction == READ else "M05", "ok", direction=DIRECTION_NAMES[direction],
                              collective_requests=collective, requests=independent + collective))
        if int(records[c["nonblocking"]][mpiio].clip(0).sum()) == 0 and records[c["ops"]][mpiio].sum() > 0:
            mask = calls & ((flags & Flag.NONBLOCKING) == 0)
            counted = mpiio & ops.counters_only(records) & (records[c["ops"]] > 0)
            inside = io_inside(job, mask)
            blocking = pattern("M06" if direction == READ else "M07", "warn", job, ops, records, mask,
                               o["duration_s"][mask] if inside is None else inside, counted, records[c["seconds"]],
                               ("the blocking MPI-IO calls' time" if inside is None else
                                "the POSIX I/O inside the blocking MPI-IO calls (what overlap hides; a call's "
                                "wait for the other ranks to arrive is not I/O, and stays); an upper bound, reached "
                                "where the I/O waits for storage rather than takes CPU that the computation needs",
                                "the records' MPI-IO time"),
                               direction=DIRECTION_NAMES[direction])
            found.append(capped(blocking, outside_io_s(job) / max(job.nprocs, 1),
                                "at most the mean rank's time outside I/O (overlap hides I/O behind computation, "
                                "no more)"))
    return found


def bytes_past_posix(unassessed):
    """The bytes that Darshan modules ioassess does not assess moved past POSIX and MPI-IO (DFS
    and DAOS: to DAOS). unassessed: Job.unassessed, module -> its amounts."""
    return sum(amounts["bytes_read"] + amounts["bytes_written"] for module, amounts in unassessed.items()
               if UNASSESSED_MODULES[module][1] == "DAOS")


def aggregators_per_node(job, records, ops):
    """M08-M10: the collective MPI-IO aggregators (the processes that made POSIX reads or writes
    inside collective calls) against the job's nodes (the host names of its ranks): more
    aggregators than nodes (M09: several per node share its network link; one per node, ROMIO's
    cb_nodes and cb_config_list hints, is Drishti's advice), fewer (M08), as many (M10). Drishti
    takes the aggregators from the cb_nodes hint and the nodes from Slurm's sacct; here both
    come from the trace, so only traced jobs have it. Its cost is in MPI's data exchange, which
    no op times: no seconds at stake."""
    o = job.ops
    under = (o["layer"] == POSIX) & ((op_column(o, "flags") & Flag.UNDER_COLLECTIVE) != 0) & ops.data
    nodes = {p.hostname for p in job.processes if p.rank >= 0 and p.hostname}
    if not under.any() or not nodes:
        return []
    aggregators = [job.processes[p] for p in np.unique(o["process"][under]).tolist()]
    per_node = {}
    for process in aggregators:
        per_node.setdefault(process.hostname, []).append(process)
    crowded = [process for node in sorted(per_node) if len(per_node[node]) > 1 for process in per_node[node]]
    code, level = ("M09", "warn") if len(aggregators) > len(nodes) else \
        ("M08", "info") if len(aggregators) < len(nodes) else ("M10", "ok")
    return [fact(code, level, "ops", crowded[:FILES_NAMED], aggregators=len(aggregators), nodes=len(nodes),
                 most_on_one_node=max(len(on_node) for on_node in per_node.values()))]


def io_inside(job, calls):
    """Per MPI-IO call of the mask calls (in order), the time of its process's POSIX reads,
    writes and syncs that started inside it (at most the call's time): the I/O a non-blocking
    call could overlap with computation, without the call's wait for other ranks. None when no
    such op is inside any of them (MPI-IO known without the POSIX ops beneath it)."""
    o = job.ops
    call_idx = np.flatnonzero(calls)
    posix = np.flatnonzero((o["layer"] == POSIX) & (o["direction"] < META) & (o["result"] >= 0))
    if not len(call_idx) or not len(posix):
        return None
    # one sorted axis for every process: its start times shifted by process x (span of the job)
    origin = float(min(o["start_s"][call_idx].min(), o["start_s"][posix].min()))
    span = float(max((o["start_s"] + o["duration_s"])[call_idx].max(), o["start_s"][posix].max())) - origin + 1.0
    key = o["process"][posix] * span + (o["start_s"][posix] - origin)
    order = np.argsort(key, kind="stable")
    key, cumulative = key[order], np.concatenate([[0.0], np.cumsum(o["duration_s"][posix][order])])
    begin = o["process"][call_idx] * span + (o["start_s"][call_idx] - origin)
    first = np.searchsorted(key, begin, side="left")
    last = np.searchsorted(key, begin + o["duration_s"][call_idx], side="right")
    if not (last > first).any():
        return None
    return np.minimum(cumulative[last] - cumulative[first], o["duration_s"][call_idx])


def outside_io_s(job):
    """The time the job's ranks spent outside POSIX and stdio reads and writes: nprocs x runtime
    less their summed time (infinite where the runtime is not known)."""
    if not np.isfinite(job.runtime_s):
        return float("inf")
    o, t = job.ops, job.totals
    in_io = float(o["duration_s"][(o["direction"] < META) & (o["layer"] != MPIIO)].sum() +
                  t["seconds"][(t["direction"] < META) & (t["layer"] != MPIIO)].sum())
    return max(max(job.nprocs, 1) * job.runtime_s - in_io, 0.0)


def ranks_with_io(job, records):
    """How many processes moved data: every rank where a shared record did, else those with a
    record of their own."""
    moved = (records["bytes_read"] > 0) | (records["bytes_written"] > 0)
    if (moved & shared(records)).any():
        return max(job.nprocs, 2)
    own = records["process"][moved & (records["process"] >= 0)].tolist() + \
        [("rank", r) for r in records["rank"][moved & (records["process"] < 0) & (records["rank"] >= 0)].tolist()]
    return len(set(own))
