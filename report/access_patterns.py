"""How the job accessed its files, on the evidence Drishti 0.8 uses (docs/assessment.md, "Access
patterns"): each trigger family of Drishti (its codes P01-P22 and M01-M10; S01 is in
findings.py) that holds for the job, with the files and ranks behind it and the seconds at stake.

The evidence is Darshan's counters, per record: a Darshan log's own (Job.darshan_records), and
for the files a log does not count, the same counters computed from the ops the way Darshan's
runtime computes them (`counted_from_ops`). Whether a family fires is decided on those counters
with Drishti's thresholds. The seconds at stake come from the ops where they are known one by
one (each family says how: `at_stake_how`); for files known only from counters they are an
estimate, the records' time pro rata of the ops the family is about.

What the ops give, two passes take chunk by chunk (report/passes.py): RequestStreams sums the
reads and writes per Darshan stream and kind of request and keeps the union of the byte ranges
moved (RepeatedBytes), IoInsideCalls sums the POSIX I/O inside the MPI-IO calls. Their state
grows with the (process, file) pairs and the extents moved, not with the ops.
"""
import enum

import numpy as np

from ioassess.arrays import distinct
from ioassess.inputs.job import (DARSHAN_RECORD_COLUMNS, LAYERS, META, META_KINDS, MPIIO, POSIX, READ,
                                 UNASSESSED_MODULES, WRITE, Flag, concatenate_columns, empty_columns, op_column)

from .passes import Carried, Sample, Sums, groups_of, run_starts, stable_order
from .sections import SAMPLE_OPS
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


def access_patterns(job, streams, inside, per_total, clock):
    """The patterns that hold for the job, each a dict: code (Drishti's), level, evidence
    ("counters", "ops" or both), the counts behind it, the files and ranks named, ops_s (the time
    of the ops it is about), lost_s (the time lost in them), at_stake_s and at_stake_how. streams,
    inside: the results of the passes RequestStreams and IoInsideCalls."""
    ops = PatternOps(job, streams, inside, per_total, clock)
    records = evidence_records(job, streams)
    found = []
    for check in (operation_intensive, small_requests, misaligned, redundant_traffic, random_access,
                  shared_small_requests, shared_imbalance, individual_imbalance, mpiio_usage, aggregators_per_node):
        found += check(job, records, ops)
    return [dict(p, level=level_by_stake(p, clock.runtime_s)) for p in found]


# --- the passes: the ops, chunk by chunk ------------------------------------------------------

class Trait(enum.IntFlag):
    """Bits of a read's or write's kind (RequestStreams): what Darshan's counters and the
    patterns tell apart."""
    SMALL = 1 << 0              # at most SMALL_BYTES moved
    UNALIGNED_BUFFER = 1 << 1   # a buffer off MEMORY_ALIGNMENT (Darshan's MEM_NOT_ALIGNED)
    UNALIGNED_OFFSET = 1 << 2   # an offset off its file's alignment (FILE_NOT_ALIGNED)
    AT_OFFSET = 1 << 3          # an offset and some bytes moved: a byte range (RepeatedBytes)
    SEQUENTIAL = 1 << 4         # Darshan's sequential: past where its stream's previous request ended
    CONSECUTIVE = 1 << 5        # ... right where it ended
    COLLECTIVE = 1 << 6         # Flag.COLLECTIVE
    NONBLOCKING = 1 << 7        # Flag.NONBLOCKING
    UNDER_COLLECTIVE = 1 << 8   # Flag.UNDER_COLLECTIVE: an aggregator's POSIX request


# A kind's bits above the traits, for a request at an unaligned offset: how many of the job's
# alignments its size exceeds two blocks of (RequestStreams.block_edges), which P08's partial
# blocks need before the alignment it judges by is known.
BLOCKS_SHIFT = 9
# What RequestStreams sums per stream and kind: call_s is the per-call cost (its class's line at
# one byte) at most the op's time, lost_per_byte the time lost over the bytes moved.
REQUEST_SUMS = ("ops", "bytes", "seconds", "lost_s", "call_s", "lost_per_byte")


class RequestStreams:
    """The reads and writes that succeeded, summed (REQUEST_SUMS) per stream (process, file,
    layer and direction: a Darshan record's reads or writes) and kind (Trait bits and block bin);
    the highest byte of each stream; the metadata calls' ops, seconds and time lost per (process,
    file, layer); the successful POSIX opens per (process, file); the seconds of the POSIX and
    STDIO reads, writes and syncs; a sample of the small POSIX requests' sizes; the byte ranges
    of the POSIX requests (RepeatedBytes). Darshan's sequential and consecutive counts follow
    each stream's requests in order, the last byte of the previous one carried from chunk to
    chunk; a pass."""

    def __init__(self, job):
        self.files = max(len(job.files), 1)
        self.alignments = file_alignments(job)
        # one number when every file has the same: no look-up per request
        self.alignment = self.alignments[0] if np.all(self.alignments == self.alignments[0]) else None
        self.block_edges = 2.0 * alignment_choices(job)
        self.kinds = 1 << (BLOCKS_SHIFT + len(self.block_edges).bit_length())
        pairs = max(len(job.processes), 1) * self.files
        self.requests = SumsInOrder(REQUEST_SUMS)
        self.last_byte = Carried(np.int64)    # per stream: its previous request's last byte, 0 after an open
        self.highest = Carried(np.int64)
        self.metadata_keys = pairs * len(LAYERS)
        self.metadata = SumsInOrder(("ops", "seconds", "lost_s"))
        self.opened = Sums(("opens",), pairs)
        self.repeated = RepeatedBytes(self.files, max(len(job.processes), 1))
        self.io_s = 0.0
        self.small_sizes = Sample(SAMPLE_OPS, {"file": np.int32, "direction": np.uint8, "result": np.int64})

    def add(self, chunk):
        ops, per_op = chunk.ops, chunk.per_op
        direction, layer, result = ops["direction"], ops["layer"], ops["result"]
        self.io_s += float(ops["duration_s"][(direction < META) & (layer != MPIIO)].sum())
        pair = ops["process"].astype(np.int64) * self.files + ops["file"]
        meta = direction == META
        self.metadata.add(*groups_of(pair[meta] * len(LAYERS) + layer[meta], self.metadata_keys),
                          {"ops": 1.0, "seconds": ops["duration_s"][meta], "lost_s": per_op["lost_s"][meta]})
        opened = meta & (op_column(ops, "meta_kind") == META_KINDS.index("open")) & (result >= 0)
        self.opened.add(pair[opened & (layer == POSIX)], {"opens": 1.0})
        data = ((direction == READ) | (direction == WRITE)) & (result >= 0)
        rows, stream, previous = self._in_order(ops, pair, data, opened)
        if len(rows):
            self._add_requests(chunk, rows, stream, previous)
        if len(chunk):
            self.repeated.settle_before(int(ops["process"][-1]))

    def _add_requests(self, chunk, rows, stream, previous):
        """Takes in the chunk's reads and writes (rows, in stream order: _in_order)."""
        ops, per_op = chunk.ops, chunk.per_op
        offset, result, duration = ops["offset"][rows], ops["result"][rows], ops["duration_s"][rows]
        alignment = self.alignments[ops["file"][rows]] if self.alignment is None else self.alignment
        kind = kinds_of(offset, result, ops["buffer"][rows], op_column(ops, "flags")[rows], alignment, previous,
                        self.block_edges)
        runs = run_starts(stream)
        lost = per_op["lost_s"][rows]
        keys, group = groups_of_runs(stream, runs, kind, self.kinds)
        self.requests.add(keys, group, {"ops": 1.0, "bytes": result, "seconds": duration, "lost_s": lost,
                                        "call_s": np.minimum(per_op["call_s"][rows], duration),
                                        "lost_per_byte": lost / np.maximum(result, 1)})
        first = np.flatnonzero(runs)
        highest = np.maximum.reduceat(np.where(offset >= 0, offset + result - 1, -1), first)
        self.highest.set(stream[first], np.maximum(self.highest.get(stream[first], -1), highest))
        posix = ops["layer"][rows] == POSIX
        ranged = np.flatnonzero(posix & (kind & Trait.AT_OFFSET != 0))
        # offsets and sizes past 2^61 (2 EiB) are damage: clipped, so that their sums cannot wrap
        start = np.clip(offset[ranged], 0, 1 << 61)
        self.repeated.add(stream[ranged] // (2 * len(LAYERS)) * 2 + stream[ranged] % 2, start,
                          start + np.clip(result[ranged], 0, 1 << 61))
        small = posix & (kind & Trait.SMALL != 0)
        self.small_sizes.add(chunk, rows[small], {"file": ops["file"], "direction": ops["direction"],
                                                  "result": ops["result"]})

    def _in_order(self, ops, pair, data, opened):
        """The chunk's reads and writes in Darshan's order (by stream, each stream in the order
        of time): their rows, streams, and the last byte of the request before each in its
        stream: 0 for a stream's first request and for the first after its process opened the
        file again, where darshan-posix.c starts over."""
        rows = np.flatnonzero(data)
        if opened.any():    # an open stands in both POSIX streams of its file, as a request ending at byte 0
            opens = np.flatnonzero(opened).repeat(2)
            rows = np.insert(rows, np.searchsorted(rows, opens), opens)
        is_open = opened[rows]
        layer = np.where(is_open, POSIX, ops["layer"][rows])
        writes = np.where(is_open, np.r_[False, rows[1:] == rows[:-1]], ops["direction"][rows] == WRITE)
        stream = (pair[rows] * len(LAYERS) + layer) * 2 + writes
        order = stable_order(stream)    # a chunk's rows are in start order per process
        rows, stream, is_open = rows[order], stream[order], is_open[order]
        last_byte = np.where(is_open, 0, ops["offset"][rows] + ops["result"][rows] - 1)
        previous = self.last_byte.previous(stream, last_byte, 0)
        requests = ~is_open
        return rows[requests], stream[requests], previous[requests]

    def merge(self, later):
        for mine, theirs in ((self.requests, later.requests), (self.metadata, later.metadata),
                             (self.opened, later.opened), (self.last_byte, later.last_byte),
                             (self.small_sizes, later.small_sizes), (self.repeated, later.repeated)):
            mine.merge(theirs)
        self.highest.set(later.highest.keys, np.maximum(self.highest.get(later.highest.keys, -1),
                                                        later.highest.values))
        self.io_s += later.io_s

    def result(self):
        """{"requests": per (stream, kind) met, its process, file, layer, direction, kind and
        REQUEST_SUMS; "highest": per stream met (its process, file, layer, direction) the highest
        byte its requests reached (-1 where none had an offset); "metadata": per (process, file,
        layer) of metadata calls, ops, seconds, lost_s; "opened": the (process, file) pairs of
        POSIX opens; "io_s"; "small_sizes": the sample's file, direction and result;
        "block_edges": the block bins' edges; "repeated": RepeatedBytes'}."""
        keys = self.requests.keys
        requests = {**stream_columns(keys // self.kinds, self.files), "kind": keys % self.kinds,
                    **self.requests.sums}
        metadata = {"process": self.metadata.keys // (self.files * len(LAYERS)),
                    "file": self.metadata.keys // len(LAYERS) % self.files,
                    "layer": self.metadata.keys % len(LAYERS), **self.metadata.sums}
        return {"requests": requests, "highest": {**stream_columns(self.highest.keys, self.files),
                                                  "byte": self.highest.values},
                "metadata": metadata, "opened": {"process": self.opened.keys // self.files,
                                                 "file": self.opened.keys % self.files},
                "io_s": self.io_s, "small_sizes": self.small_sizes.values(), "block_edges": self.block_edges,
                "repeated": self.repeated.result()}


def stream_columns(stream, files):
    """process, file, layer and direction of stream keys ((process x files + file) x layers +
    layer) x 2 + (1 for writes)."""
    return {"process": stream // (2 * len(LAYERS) * files), "file": stream // (2 * len(LAYERS)) % files,
            "layer": stream // 2 % len(LAYERS), "direction": np.where(stream % 2 == 1, WRITE, READ)}


def kinds_of(offset, result, buffer, flags, alignment, previous, block_edges):
    """Each request's kind: its Trait bits, and at an unaligned offset how many of block_edges
    (ascending) its size exceeds, above BLOCKS_SHIFT. previous: the last byte of the request
    before it in its stream (RequestStreams._in_order)."""
    known = offset >= 0
    unaligned = known & (offset % alignment != 0)
    kind = np.zeros(len(offset), np.uint32)
    kind[unaligned] = np.searchsorted(block_edges, result[unaligned], side="left") << BLOCKS_SHIFT
    for trait, holds in ((Trait.SMALL, result <= SMALL_BYTES),
                         (Trait.UNALIGNED_BUFFER, (buffer != 0) & (buffer % MEMORY_ALIGNMENT != 0)),
                         (Trait.UNALIGNED_OFFSET, unaligned), (Trait.AT_OFFSET, known & (result > 0)),
                         (Trait.SEQUENTIAL, known & (offset > previous)),
                         (Trait.CONSECUTIVE, known & (offset == previous + 1)),
                         (Trait.COLLECTIVE, flags & Flag.COLLECTIVE != 0),
                         (Trait.NONBLOCKING, flags & Flag.NONBLOCKING != 0),
                         (Trait.UNDER_COLLECTIVE, flags & Flag.UNDER_COLLECTIVE != 0)):
        kind |= holds * np.uint32(trait)
    return kind


def groups_of_runs(stream, runs, kind, kinds):
    """The (stream, kind) groups of rows sorted by stream (runs: where each stream starts): the
    groups' keys (stream x kinds + kind, in order) and each row's group."""
    run = np.cumsum(runs) - 1
    present_kinds, kind_index = groups_of(kind, kinds)
    present, group = groups_of(run * len(present_kinds) + kind_index, int(runs.sum()) * len(present_kinds))
    keys = stream[runs][present // len(present_kinds)] * kinds + present_kinds[present % len(present_kinds)]
    return keys, group


class SumsInOrder:
    """Sums of values per integer key, each value added to its key's sum in the order the values
    come, chunk after chunk, as one bincount over all of them adds them: where the chunks cut
    changes no sum in its last bits, so keys of equal sums stay equal (and are named in the same
    order). keys: those met, ascending; sums: name -> one sum per key."""

    def __init__(self, names):
        self.keys = np.zeros(0, np.int64)
        self.sums = {name: np.zeros(0) for name in names}

    def add(self, keys, group, values):
        """Adds the values (name -> one per row, in order, or one for all) of rows each under
        keys[group] (keys: distinct, ascending)."""
        at = np.searchsorted(self.keys, keys)
        met = at < len(self.keys)
        met[met] = self.keys[at[met]] == keys[met]
        rows = np.concatenate([np.arange(len(keys)), group])    # each key's sum so far first
        added = {}
        for name, so_far in self.sums.items():
            first = np.zeros(len(keys))
            first[met] = so_far[at[met]]
            added[name] = np.bincount(rows, np.concatenate([first, np.broadcast_to(values[name], group.shape)]),
                                      len(keys))
        kept = np.ones(len(self.keys), bool)
        kept[at[met]] = False
        keys = np.concatenate([self.keys[kept], keys])
        order = np.argsort(keys, kind="stable")
        self.keys = keys[order]
        self.sums = {name: np.concatenate([so_far[kept], added[name]])[order] for name, so_far in self.sums.items()}

    def merge(self, later):
        self.add(later.keys, np.arange(len(later.keys)), later.sums)


def alignment_choices(job):
    """The alignments P08 may judge a job's offsets by (misaligned): its files' (file_alignments),
    its Darshan records' and DEFAULT_FILE_ALIGNMENT, in order."""
    counted = job.darshan_records["file_alignment"]
    return distinct(np.r_[file_alignments(job), counted[counted > 0], DEFAULT_FILE_ALIGNMENT]).astype(np.float64)


class RepeatedBytes:
    """Per direction and file, and per direction, process and file, the bytes of the POSIX reads
    (writes) at offsets that moved data, and the bytes of the union of their ranges: what they
    moved more than once is the difference. RequestStreams feeds it its requests' ranges. The
    unions are kept as disjoint ranges (RangeUnion), as many as the extents moved: a process's
    own until the chunks are past it (they come in process order), then summed, and its ranges
    joined to its files' unions."""

    def __init__(self, files, processes):
        self.files = files
        cells = processes * files * 2
        self.requested = Sums(("bytes",), cells)    # per (process, file, direction)
        self.by_process = RangeUnion()              # per (process, file, direction), of the processes not settled
        self.settled = Sums(("bytes",), cells)      # the union's bytes per (process, file, direction) of the others
        self.by_file = RangeUnion()                 # per (file, direction), of the processes settled
        self.process = -1                           # the last process met

    def add(self, group, start, end):
        """Takes in ranges [start, end) of (process x files + file) x 2 + direction groups
        (ascending)."""
        if not len(group):
            return
        firsts = run_starts(group)
        self.requested.add(group[firsts], {"bytes": np.add.reduceat(end - start, np.flatnonzero(firsts))})
        self.by_process.add(group, start, end)

    def settle_before(self, process):
        """Settles the processes before `process`, whose ops have all come."""
        self.process = process
        self._settle(*self.by_process.take_below(process * self.files * 2))

    def _settle(self, group, start, end):
        """Sums the union of processes' own ranges (group, start, end: disjoint, in order) and
        joins them to their files' unions."""
        if len(group):
            groups, nbytes = lengths_of(group, end - start)
            self.settled.add(groups, {"bytes": nbytes})
            self.by_file.add(group % (self.files * 2), start, end)

    def merge(self, later):
        for mine, theirs in ((self.requested, later.requested), (self.by_process, later.by_process),
                             (self.settled, later.settled), (self.by_file, later.by_file)):
            mine.merge(theirs)
        if later.process >= 0:
            self.settle_before(later.process)

    def result(self):
        """{"own": per (process, file, direction) of such requests, `requested` and `union`
        bytes; "by_file": per file and direction (arrays files x 2), the same}."""
        self._settle(*self.by_process.ranges())     # no op is to come
        self.by_process = RangeUnion()
        keys, requested = self.requested.keys, self.requested.sums["bytes"]
        own_union = np.zeros(len(keys))
        own_union[np.searchsorted(keys, self.settled.keys)] = self.settled.sums["bytes"]
        by_file = keys % (self.files * 2)
        group, start, end = self.by_file.ranges()
        file_groups, file_union = lengths_of(group, end - start)
        return {"own": {"process": keys // (self.files * 2), "file": by_file // 2, "direction": by_file % 2,
                        "requested": requested, "union": own_union},
                "by_file": {"requested": np.bincount(by_file, requested, self.files * 2).reshape(self.files, 2),
                            "union": np.bincount(file_groups, file_union, self.files * 2).reshape(self.files, 2)}}


def lengths_of(group, length):
    """(the groups of ranges in order of group, the ranges' bytes summed per group)."""
    firsts = run_starts(group)
    return group[firsts], np.add.reduceat(length, np.flatnonzero(firsts)).astype(np.float64)


class RangeUnion:
    """The union of byte ranges [start, end) per group (a non-negative integer): a few levels,
    each disjoint ranges in order of group and start (union_of_ranges), each level at least
    twice the next, merged as a binary counter carries: adding a chunk's ranges costs a few
    passes over them, not over the union, which holds as many ranges as the extents covered
    (times the levels, at most log2 of them)."""

    def __init__(self):
        self.levels = []

    def add(self, group, start, end):
        self._push(union_of_ranges(group, start, end))

    def _push(self, level):
        if not len(level[0]):
            return
        self.levels.append(level)
        while len(self.levels) > 1 and len(self.levels[-2][0]) <= 2 * len(self.levels[-1][0]):
            self._join_last()

    def _join_last(self):
        later = self.levels.pop()
        self.levels[-1] = union_of_ranges(*(np.concatenate(pair) for pair in zip(self.levels[-1], later)))

    def merge(self, later):
        for level in later.levels:
            self._push(level)

    def ranges(self):
        """The union: (group, start, end) of its disjoint ranges, in order."""
        while len(self.levels) > 1:
            self._join_last()
        return self.levels[0] if self.levels else (np.zeros(0, np.int64),) * 3

    def take_below(self, group):
        """ranges() of the groups below `group`, which it lets go."""
        below = RangeUnion()
        levels, self.levels = self.levels, []
        for level in levels:
            cut = int(np.searchsorted(level[0], group))
            below._push(tuple(column[:cut] for column in level))
            self._push(tuple(column[cut:] for column in level))
        return below.ranges()


def union_of_ranges(group, start, end):
    """The union of the ranges [start, end) per group (non-negative integers): disjoint ranges in
    order of group and start, those that overlap or touch joined. Ranges come mostly in runs of
    a group (its distinct groups are taken from its runs), and often in order (no sort)."""
    if not len(group):
        return group, start, end
    groups_met = distinct(group[run_starts(group)])
    span = int(end.max()) + 1
    if len(groups_met) * span < 1 << 62:
        # one key holds group and offset: the group's rank lifts its ranges above the ones before
        lift = np.searchsorted(groups_met, group) * span
        first, last = lift + start, lift + end
        if np.any(first[1:] < first[:-1]):
            first, last = sorted_by_first(first, last)
        begins, reach = union_starts(first, np.maximum.accumulate(last))
        lift = first[begins] - first[begins] % span
        return groups_met[lift // span], first[begins] - lift, reach - lift
    order = np.lexsort((start, group))     # offsets too far apart for one key (damage): two sorts
    group, start, end = group[order], start[order], end[order]
    firsts = run_starts(group)
    begins, reach = union_starts(start, running_max_by_group(end, np.flatnonzero(firsts)), firsts)
    return group[begins], start[begins], reach


def sorted_by_first(first, last):
    """The ranges [first, last) (non-negative) in order of first (of equal firsts, in any order:
    their union is the same): first and length packed into one int64 where they fit, whose sort
    costs half an argsort."""
    length = last - first
    length_bits = int(length.max()).bit_length()
    if int(first.max()).bit_length() + length_bits <= 63:
        key = np.sort(first << length_bits | length)
        first = key >> length_bits
        return first, first + (key & ((1 << length_bits) - 1))
    order = np.argsort(first)
    return first[order], last[order]


def union_starts(start, reach, firsts=None):
    """Of ranges in order (start; reach: the furthest end of its group's ranges up to each),
    the rows that start a range of the union (past the reach before it, or a group's first:
    firsts, where the keys do not part the groups), and each union range's end."""
    begins = np.empty(len(start), bool)
    begins[0] = True
    np.greater(start[1:], reach[:-1], out=begins[1:])
    if firsts is not None:
        begins |= firsts
    begins = np.flatnonzero(begins)
    ends = np.empty_like(begins)
    ends[:-1] = begins[1:] - 1
    ends[-1] = len(start) - 1
    return begins, reach[ends]


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


class IoInsideCalls:
    """Per (process, file, direction) of the blocking MPI-IO reads and writes that succeeded,
    the time of the POSIX reads, writes and syncs of their process that started inside each
    call, at most the call's (io_inside); per direction whether any started inside any call; a
    pass. A call whose process may still start ops inside it (it ends at or after the last start
    met) waits for the next chunk, with its process's POSIX ops since its start; merge takes the
    pass of the next processes, whose ops are inside none of these calls."""
    CALLS = {"process": np.int64, "start_s": np.float64, "duration_s": np.float64, "group": np.int64}
    POSIX_OPS = {"process": np.int64, "start_s": np.float64, "duration_s": np.float64}

    def __init__(self, job):
        self.files = max(len(job.files), 1)
        self.groups = max(len(job.processes), 1) * self.files * 2
        self.inside = SumsInOrder(("seconds",))
        self.any_inside = np.zeros(2, bool)
        self.pending = empty_columns(self.CALLS)
        self.recent = empty_columns(self.POSIX_OPS)

    def add(self, chunk):
        ops = chunk.ops
        if not len(ops["size"]):
            return
        direction, process = ops["direction"], ops["process"].astype(np.int64)
        blocking = (ops["layer"] == MPIIO) & ((direction == READ) | (direction == WRITE)) & (ops["result"] >= 0) & \
            (op_column(ops, "flags") & Flag.NONBLOCKING == 0)
        calls = concatenate_columns(self.CALLS, [self.pending, {
            "process": process[blocking], "start_s": ops["start_s"][blocking],
            "duration_s": ops["duration_s"][blocking],
            "group": (process[blocking] * self.files + ops["file"][blocking]) * 2 + direction[blocking]}])
        last_process, last_start = process[-1], ops["start_s"][-1]
        posix = (ops["layer"] == POSIX) & (direction < META) & (ops["result"] >= 0) & \
            np.isin(process, np.r_[distinct(calls["process"]), last_process])
        posix = concatenate_columns(self.POSIX_OPS, [self.recent, {
            "process": process[posix], "start_s": ops["start_s"][posix], "duration_s": ops["duration_s"][posix]}])
        # a call is done once its process's starts are past its end
        done = (calls["process"] < last_process) | (calls["start_s"] + calls["duration_s"] < last_start)
        self._count({name: column[done] for name, column in calls.items()}, posix)
        self.pending = {name: column[~done] for name, column in calls.items()}
        since = min(float(self.pending["start_s"].min(initial=last_start)), last_start)
        kept = (posix["process"] == last_process) & (posix["start_s"] >= since)
        self.recent = {name: column[kept] for name, column in posix.items()}

    def _count(self, calls, posix):
        if not len(calls["group"]):
            return
        seconds, some = io_inside(calls, posix)
        self.inside.add(*groups_of(calls["group"], self.groups), {"seconds": seconds})
        self.any_inside |= np.bincount(calls["group"][some] % 2, minlength=2) > 0

    def _finish(self):
        """Counts the waiting calls: no op to come is inside them."""
        self._count(self.pending, self.recent)
        self.pending, self.recent = empty_columns(self.CALLS), empty_columns(self.POSIX_OPS)

    def merge(self, later):
        self._finish()
        self.inside.merge(later.inside)
        self.any_inside |= later.any_inside
        self.pending, self.recent = later.pending, later.recent

    def result(self):
        """{"process", "file", "direction", "seconds": per (process, file, direction) of
        blocking calls, the I/O inside them; "any_inside": per direction (read, write)}."""
        self._finish()
        keys = self.inside.keys
        return {"process": keys // (self.files * 2), "file": keys // 2 % self.files, "direction": keys % 2,
                "seconds": self.inside.sums["seconds"], "any_inside": self.any_inside.copy()}


def io_inside(calls, posix):
    """Per call (columns process, start_s, duration_s), the time of the ops of posix (the same
    columns, in order of process, then start) of its process that started inside it, at most
    the call's; and whether any did. Starts compare exactly: as ranks among the ops' starts."""
    starts = np.sort(posix["start_s"], kind="stable")
    ranks = len(starts) + 1
    key = posix["process"] * ranks + np.searchsorted(starts, posix["start_s"], side="left")
    first = np.searchsorted(key, calls["process"] * ranks + np.searchsorted(starts, calls["start_s"], side="left"))
    end = calls["start_s"] + calls["duration_s"]
    stop = np.searchsorted(key, calls["process"] * ranks + np.searchsorted(starts, end, side="right"))
    cumulative = np.concatenate([[0.0], np.cumsum(posix["duration_s"])])
    return np.minimum(cumulative[stop] - cumulative[first], calls["duration_s"]), stop > first


# --- the evidence: Darshan's counters, per record ---------------------------------------------

def evidence_records(job, streams):
    """Job.darshan_records, and for each (file, layer) no Darshan record counts, the records
    Darshan's runtime would have written for the ops (counted_from_ops); column "process": the
    process of an op-counted record (-1 for Darshan's and for shared ones). streams:
    RequestStreams' result."""
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
    streams: RequestStreams' result. STDIO and MPI-IO have no consecutive, sequential or
    alignment counts (-1), nor highest offsets where the ops have no offsets (stdio's)."""
    requests, highest = streams["requests"], streams["highest"]
    n_files = max(len(job.files), 1)
    record = record_keys(requests, n_files)
    rows = np.ones(len(record), bool)
    if covered:
        covered_pairs = np.array([f * len(LAYERS) + layer for f, layer in covered], np.int64)
        rows = ~np.isin(record % (n_files * len(LAYERS)), covered_pairs)
    columns = {**DARSHAN_RECORD_COLUMNS, "process": np.int64}
    if not rows.any():
        return empty_columns(columns)
    keys, of_row = np.unique(record[rows], return_inverse=True)
    n = len(keys)
    kind, ops, is_write = requests["kind"][rows], requests["ops"][rows], requests["direction"][rows] == WRITE

    def by_direction(per_row, read_name, write_name, dtype=np.int64):
        for name, rows_of in ((read_name, ~is_write), (write_name, is_write)):
            table[name] = np.bincount(of_row[rows_of], per_row[rows_of], minlength=n).astype(dtype)

    def ops_with(trait):
        return np.where(kind & trait != 0, ops, 0.0)

    table = {"process": keys // (n_files * len(LAYERS)), "file": (keys // len(LAYERS)) % n_files,
             "layer": (keys % len(LAYERS)).astype(np.uint8)}
    by_direction(ops, "reads", "writes")
    by_direction(ops_with(Trait.CONSECUTIVE), "consecutive_reads", "consecutive_writes")
    by_direction(ops_with(Trait.SEQUENTIAL), "sequential_reads", "sequential_writes")
    by_direction(requests["bytes"][rows], "bytes_read", "bytes_written")
    by_direction(ops_with(Trait.SMALL), "small_reads", "small_writes")
    by_direction(requests["seconds"][rows], "read_s", "write_s", np.float64)
    for name, trait in (("file_not_aligned", Trait.UNALIGNED_OFFSET), ("mem_not_aligned", Trait.UNALIGNED_BUFFER)):
        table[name] = np.bincount(of_row, ops_with(trait), minlength=n).astype(np.int64)
    by_direction(ops_with(Trait.COLLECTIVE), "collective_reads", "collective_writes")
    by_direction(ops_with(Trait.NONBLOCKING), "nonblocking_reads", "nonblocking_writes")
    # A non-blocking collective call (iwrite_all, write_all_begin) is both: the independent calls
    # are those of neither kind, not the calls less each count (which takes such a call away twice).
    by_direction(np.where(kind & (Trait.COLLECTIVE | Trait.NONBLOCKING) == 0, ops, 0.0), "independent_reads",
                 "independent_writes")
    of_stream = record_keys(highest, n_files)
    at = np.minimum(np.searchsorted(keys, of_stream), n - 1)
    for name, direction in (("max_byte_read", READ), ("max_byte_written", WRITE)):
        here = (keys[at] == of_stream) & (highest["direction"] == direction)    # a stream per record and direction
        table[name] = np.full(n, -1, np.int64)
        table[name][at[here]] = highest["byte"][here]
    table["file_alignment"] = file_alignments(job)[table["file"]]
    table["meta_s"] = metadata_seconds(streams["metadata"], keys, n_files)
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


def record_keys(table, n_files):
    """The record (process, file, layer) of each row of a table with those columns, as one key:
    (process x n_files + file) x layers + layer."""
    return (table["process"].astype(np.int64) * n_files + table["file"]) * len(LAYERS) + table["layer"]


def file_alignments(job):
    """Per file, the alignment Darshan checks offsets against: Lustre's stripe size where known,
    else DEFAULT_FILE_ALIGNMENT (the page and block size of the local file systems)."""
    return np.array([f.stripe_size if f.stripe_size > 0 else DEFAULT_FILE_ALIGNMENT for f in job.files] or [1],
                    np.int64)


def metadata_seconds(metadata, keys, n_files):
    """The time of the metadata calls (metadata: RequestStreams' per (process, file, layer)) of
    each record of keys (record_keys, ascending)."""
    out = np.zeros(len(keys))
    if not len(keys):
        return out
    meta_keys = record_keys(metadata, n_files)
    at = np.minimum(np.searchsorted(keys, meta_keys), len(keys) - 1)
    found = keys[at] == meta_keys
    out[at[found]] = metadata["seconds"][found]
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
    """The job's reads and writes as the patterns use them: the passes' results (RequestStreams',
    RepeatedBytes', IoInsideCalls'), the per-call cost of a counted request and the time lost per
    (file, layer) of the I/O known only from counters, and which (file, layer) pairs have ops at
    all (the rest are known only from counters)."""

    def __init__(self, job, streams, inside, per_total, clock):
        self.job = job
        self.clock = clock
        self.requests, self.metadata, self.opened = streams["requests"], streams["metadata"], streams["opened"]
        self.small_sizes, self.io_s, self.block_edges = streams["small_sizes"], streams["io_s"], streams["block_edges"]
        self.repeated, self.inside = streams["repeated"], inside
        # the per-call cost of a counted request (its class's line at one byte)
        self.counted_call_s = {d: float(per_total["call_s"][per_total["is_io"] & (job.totals["direction"] == d)]
                                        .max(initial=0.0)) for d in (READ, WRITE)}
        self.lost_share = lost_share_of_counted(job, per_total)
        self.pairs_with_ops = distinct(self.requests["file"].astype(np.int64) * len(LAYERS) + self.requests["layer"])

    def lost_share_of(self, records):
        """Per evidence record, the share of its (file, layer)'s counted time that was lost."""
        return self.lost_share[records["file"].astype(np.int64) * len(LAYERS) + records["layer"]]

    def of(self, layer, direction=None, has=0, lacks=0):
        """The rows of `requests` of the layer (and direction) whose kinds have every Trait of
        `has` and none of `lacks`."""
        kind = self.requests["kind"]
        rows = (self.requests["layer"] == layer) & (kind & has == has) & (kind & lacks == 0)
        return rows if direction is None else rows & (self.requests["direction"] == direction)

    def counters_only(self, records):
        """Records of (file, layer) pairs with no op known one by one."""
        pairs = records["file"].astype(np.int64) * len(LAYERS) + records["layer"]
        return ~np.isin(pairs, self.pairs_with_ops)

    def io_inside(self, calls, direction):
        """Per (process, file) of calls (per_process_and_file's, of blocking MPI-IO calls of the
        direction), the POSIX I/O inside them (IoInsideCalls'), or None when no such op is inside
        any of them (MPI-IO known without the POSIX ops beneath it)."""
        inside = self.inside
        if not inside["any_inside"][direction]:
            return None
        files = max(len(self.job.files), 1)
        mine = inside["direction"] == direction
        key = inside["process"][mine] * files + inside["file"][mine]
        wanted = calls["process"] * files + calls["file"]
        at = np.minimum(np.searchsorted(key, wanted), len(key) - 1)
        return np.where(key[at] == wanted, inside["seconds"][mine][at], 0.0)


def per_process_and_file(job, table, rows, at_stake, extra=()):
    """The ops of the rows (a mask) of a table with columns process, file, ops, seconds and
    lost_s (RequestStreams' requests or metadata), summed per (process, file) met: process, file,
    ops, seconds, lost_s, at_stake_s (the sum of at_stake, one value per row of the table) and
    the columns extra."""
    files = max(len(job.files), 1)
    present, inverse = np.unique(table["process"][rows].astype(np.int64) * files + table["file"][rows],
                                 return_inverse=True)
    inverse = inverse.reshape(-1)
    sums = {name: np.bincount(inverse, values[rows], len(present)) for name, values in
            [(name, table[name]) for name in ("ops", "seconds", "lost_s", *extra)] + [("at_stake_s", at_stake)]}
    return {"process": present // files, "file": present % files, **sums}


def only(sums, rows):
    """The (process, file) rows (a mask) of per_process_and_file's sums."""
    return {name: values[rows] for name, values in sums.items()}


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


def pattern(code, level, job, ops, records, op_sums, record_rows, record_at_stake, how,
            slowest_rank_holds=False, **counts):
    """A pattern that holds: its evidence and the files and ranks behind it. op_sums: the ops
    it is about per (process, file) (per_process_and_file's, at_stake_s their seconds at stake),
    record_rows (a mask of the evidence records known only from counters) with record_at_stake
    (estimated seconds, per evidence record); at_stake_s is their sum, None when neither has any
    op or record. how: (how the ops' part is computed, how the counters' part is estimated).
    slowest_rank_holds: a shared record's part is its slowest rank's alone (not the record's
    time over the ranks)."""
    with_ops = bool(len(op_sums["ops"]))
    rec_idx = np.flatnonzero(record_rows)
    record_at_stake = np.nan_to_num(np.broadcast_to(np.asarray(record_at_stake, np.float64), len(record_rows))[rec_idx])
    n_files = len(job.files)
    op_file, op_process, op_at_stake = op_sums["file"], op_sums["process"], op_sums["at_stake_s"]
    file_s = np.bincount(op_file, op_at_stake, minlength=n_files).astype(np.float64)
    file_ops = np.bincount(op_file, op_sums["ops"], minlength=n_files).astype(np.int64)
    file_s += np.bincount(records["file"][rec_idx], record_at_stake, minlength=n_files)
    evidence = " and ".join(name for name, present in (("ops", with_ops), ("counters", len(rec_idx))) if present) \
        or None
    files = np.flatnonzero((file_ops > 0) | (np.bincount(records["file"][rec_idx], minlength=n_files) > 0))
    files = files[np.argsort(-file_s[files], kind="stable")][:FILES_NAMED]
    process_s = np.bincount(op_process, op_at_stake, minlength=len(job.processes)).astype(np.float64)
    processes = np.flatnonzero(np.bincount(op_process, op_sums["ops"], minlength=len(job.processes)))
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
             "ops_s": float(op_sums["seconds"].sum()) if with_ops else None,
             "lost_s": float(op_sums["lost_s"].sum()) if with_ops else None,
             "at_stake_s": None, "rank_seconds": None, "at_stake_how": "; ".join(
                 ([how[0]] if with_ops else []) + ([f"estimated from counters: {how[1]}"] if len(rec_idx) else []))
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
    of its class's line in the cause model (RequestStreams' call_s); from counters, the calls the
    records' small requests would lose at the model's cached per-call cost. The median size is
    of the small requests in the sample (all of them in a job of at most SAMPLE_OPS)."""
    found = []
    posix = records["layer"] == POSIX
    in_scope = posix & shared(records) if shared_only else posix
    shared_files = distinct(records["file"][posix & shared(records)])
    codes = {READ: "P15", WRITE: "P16"} if shared_only else {READ: "P05", WRITE: "P06"}
    requests, sampled = ops.requests, ops.small_sizes
    for direction, c in ((READ, columns_of(READ)), (WRITE, columns_of(WRITE))):
        total, small = posix_total(records, c["ops"], in_scope), posix_total(records, c["small"], in_scope)
        if not (total and small / total > SMALL_REQUESTS and small > SMALL_REQUESTS_ABSOLUTE):
            continue
        rows = ops.of(POSIX, direction, has=Trait.SMALL)
        sizes = sampled["result"][sampled["direction"] == direction]
        if shared_only:
            rows &= np.isin(requests["file"], shared_files)
            sizes = sampled["result"][(sampled["direction"] == direction) & np.isin(sampled["file"], shared_files)]
        counted = in_scope & ops.counters_only(records) & (records[c["ops"]] > 0)
        small_count = np.clip(records[c["small"]], 0, None).astype(np.float64)
        small_bytes = np.minimum(np.clip(records[c["bytes"]], 0, None).astype(np.float64), small_count * SMALL_BYTES)
        removed = np.maximum(small_count - np.ceil(small_bytes / MERGED_REQUEST_BYTES), 0.0)
        estimate = np.minimum(removed * ops.counted_call_s[direction], np.nan_to_num(records[c["seconds"]]))
        merged = per_process_and_file(job, requests, rows, requests["call_s"], ("bytes",))
        merged["at_stake_s"] = merged_calls_saving(merged["ops"], merged["bytes"], merged["at_stake_s"])
        found.append(pattern(codes[direction], "high", job, ops, records, merged, counted, estimate,
                             (f"the calls that merging each process's small requests of a file into requests of "
                              f"{MERGED_REQUEST_BYTES >> 20} MiB removes, each at its class's per-call cost in the "
                              f"cause model", "the calls the records' small requests would lose, at the model's "
                              "cached per-call cost"),
                             direction=DIRECTION_NAMES[direction], small_requests=small, requests=total,
                             share=small / total, threshold_bytes=SMALL_BYTES,
                             median_bytes=float(np.median(sizes)) if len(sizes) else None))
    return found


def merged_calls_saving(calls, nbytes, call_s):
    """Per (process, file) of small requests (how many, their bytes, their per-call costs
    summed), what merging them into requests of MERGED_REQUEST_BYTES saves: their per-call
    cost times the share of the calls that merging removes (1 - the merged calls over the calls)."""
    kept = np.maximum(np.ceil(nbytes / MERGED_REQUEST_BYTES), 1.0)
    return call_s * np.maximum(calls - kept, 0.0) / np.maximum(calls, 1)


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
    total = posix_total(records, "reads") + posix_total(records, "writes")
    if not total:
        return found
    requests = ops.requests
    for code, trait, column, what in (("P07", Trait.UNALIGNED_BUFFER, "mem_not_aligned", "memory"),
                                      ("P08", Trait.UNALIGNED_OFFSET, "file_not_aligned", "file")):
        count = posix_total(records, column)
        if count / total <= MISALIGNED_REQUESTS:
            continue
        counted = (records["layer"] == POSIX) & ops.counters_only(records) & (records[column] > 0)
        requests_counted = np.maximum(records["reads"] + records["writes"], 1)
        estimate = (records["read_s"] + records["write_s"]) * \
            np.clip(records[column] / requests_counted, 0.0, 1.0) * ops.lost_share_of(records)
        known = records["file_alignment"][(records["layer"] == POSIX) & (records["file_alignment"] > 0)]
        alignment = MEMORY_ALIGNMENT if code == "P07" else int(known.min()) if len(known) else DEFAULT_FILE_ALIGNMENT
        op_stake, how = requests["lost_s"], ("the time lost in the misaligned requests",
                                             "the records' time lost pro rata of their misaligned requests")
        if code == "P08":
            op_stake = lost_in_partial_blocks(requests, alignment, ops.block_edges)
            moved = np.maximum(records["bytes_read"] + records["bytes_written"], 0)
            estimate = estimate * partial_blocks_share(moved / requests_counted, alignment)
            how = tuple(f"{h}, the part of it their two partial blocks of {alignment} bytes take" for h in how)
        found.append(pattern(code, "high", job, ops, records,
                             per_process_and_file(job, requests, ops.of(POSIX, has=trait), op_stake), counted,
                             estimate, how, misaligned=what, misaligned_requests=count, requests=total,
                             share=count / total, alignment_bytes=alignment))
    return found


def partial_blocks_share(sizes, alignment):
    """The share of a request of each size that its two partial blocks of `alignment` bytes make
    up, all of it for a request of at most two blocks: what aligning its offset saves at most."""
    return np.clip(2.0 * alignment / np.maximum(np.asarray(sizes, np.float64), 1.0), 0.0, 1.0)


def lost_in_partial_blocks(requests, alignment, block_edges):
    """Per row of RequestStreams' requests (those at unaligned offsets), the part of their time
    lost that their two partial blocks of `alignment` bytes take (partial_blocks_share): all of
    it for requests of at most two blocks (by their block bin: block_edges holds 2 x alignment),
    else two blocks' share of each request's size."""
    two_blocks = (requests["kind"] >> BLOCKS_SHIFT) <= np.searchsorted(block_edges, 2.0 * alignment)
    return np.where(two_blocks, requests["lost_s"], 2.0 * alignment * requests["lost_per_byte"])


def redundant_traffic(job, records, ops):
    """P09/P10: bytes read (written) more than once. From the ops: per file, the bytes of the
    POSIX requests less the bytes of their union (RepeatedBytes); from counters: a record's bytes
    beyond its highest offset + 1. At stake: each file's read (write) time times its share of
    bytes moved again (what reading or writing each byte once could save). Drishti 0.8 tests the
    job's highest offset against its bytes the other way round (docs/assessment.md says why not
    here)."""
    found = []
    own, by_file = ops.repeated["own"], ops.repeated["by_file"]
    files = max(len(job.files), 1)
    for direction, c in ((READ, columns_of(READ)), (WRITE, columns_of(WRITE))):
        again_share = repeated_share(by_file["requested"][:, direction], by_file["union"][:, direction])
        moved = per_process_and_file(job, ops.requests, ops.of(POSIX, direction, has=Trait.AT_OFFSET),
                                     ops.requests["seconds"], ("bytes",))
        file_share = again_share[moved["file"]]
        # the same of each process's own requests of a file: what it moved again itself (the same
        # share where each file is one process's)
        mine = own["direction"] == direction
        one_each = np.count_nonzero(mine) == len(distinct(own["file"][mine]))
        own_share = file_share if one_each else repeated_share(own["requested"][mine], own["union"][mine])[
            np.searchsorted(own["process"][mine] * files + own["file"][mine], moved["process"] * files + moved["file"])]
        counted = (records["layer"] == POSIX) & ops.counters_only(records) & (records[c["bytes"]] > 0)
        # float: a damaged log's highest offset may be near 2^63, where + 1 would wrap
        beyond = np.maximum(records[c["bytes"]].astype(np.float64) - (records[c["max_byte"]] + 1.0), 0.0)
        beyond[records[c["max_byte"]] < 0] = 0.0    # no highest offset known (damaged): nothing said
        record_share = np.where(counted, beyond / np.maximum(records[c["bytes"]], 1), 0.0)
        counted &= beyond > 0
        again_bytes = float((file_share * moved["bytes"]).sum() + beyond[counted].sum())
        # who moved the bytes again: one process its own bytes (ops; a rank's own record), a process
        # bytes that others moved too (ops), or not known (a shared record counts the ranks together)
        by = {"again_by_same_process_bytes": float((own_share * moved["bytes"]).sum() +
                                                   beyond[counted & ~shared(records)].sum()),
              "again_in_shared_records_bytes": float(beyond[counted & shared(records)].sum())}
        by["again_by_other_processes_bytes"] = max(again_bytes - by["again_by_same_process_bytes"] -
                                                   by["again_in_shared_records_bytes"], 0.0)
        total_bytes = posix_total(records, c["bytes"])
        if not total_bytes or again_bytes / total_bytes <= REDUNDANT_SHARE:
            continue
        moved["at_stake_s"] = moved["at_stake_s"] * file_share
        found.append(pattern("P09" if direction == READ else "P10", "warn", job, ops, records,
                             only(moved, file_share > 0), counted, records[c["seconds"]] * record_share,
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


def repeated_share(requested, union):
    """The share of the bytes requested (of a file, or of a process's requests of it) that
    other requests (or the same one) moved too: 1 - the bytes of the union of their ranges over
    the bytes requested; 0 where none were (RepeatedBytes' sums)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.clip(np.where(requested > 0, 1.0 - union / np.maximum(requested, 1), 0.0), 0.0, 1.0)


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
        rows = ops.of(POSIX, direction, lacks=Trait.SEQUENTIAL)
        counted = (records["layer"] == POSIX) & ops.counters_only(records) & (records[c["ops"]] > 0)
        share = np.where(counted, np.clip(1 - records[c["sequential"]] / np.maximum(records[c["ops"]], 1), 0.0, 1.0),
                         0.0)
        found.append(pattern(codes[0], "high", job, ops, records,
                             per_process_and_file(job, ops.requests, rows, ops.requests["lost_s"]), counted,
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
    idle_files, idle_ranks = opened_without_data(job, records, own, ops.opened)
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


def opened_without_data(job, records, own, opened):
    """Files of the ranks' own records `own` that some other rank opened (POSIX: Job.meta_kinds'
    opens of Darshan's records, the traced opens: opened, RequestStreams') without a record of
    its own there, that is without moving data; and per file of the job how many such ranks
    there are."""
    counted_opens = job.meta_kinds
    kind_open = (counted_opens["kind"] == META_KINDS.index("open")) & (counted_opens["layer"] == POSIX) & \
        (counted_opens["process"] >= 0)
    pairs = set(zip(counted_opens["process"][kind_open].tolist(), counted_opens["file"][kind_open].tolist()))
    pairs |= set(zip(opened["process"].tolist(), opened["file"].tolist()))
    files = set(records["file"][own].tolist())
    counted = set(zip(records["rank"][own].tolist(), records["file"][own].tolist()))
    idle_ranks = {(job.processes[p].rank, f) for p, f in pairs if f in files and job.processes[p].rank >= 0} - counted
    idle = np.array([f for _, f in idle_ranks], np.int64)
    return distinct(idle), np.bincount(idle, minlength=len(job.files))


def imbalance_pattern(code, job, ops, records, rows, ranks_on_file, **counts):
    """A rank-imbalance pattern over the evidence records rows (shared records, or the ranks' own
    records of the imbalanced files): at stake per file, the slowest process's time on it less
    the mean over the ranks on the file (those with ops, or ranks_on_file[file] if more: ranks
    that opened it and moved nothing count with 0 s), from the ops where known (POSIX reads,
    writes and metadata calls), else from the shared record's slowest rank and the record's
    time over nprocs."""
    files = distinct(records["file"][rows])
    with_ops = np.isin(files * len(LAYERS) + POSIX, ops.pairs_with_ops)
    op_files = files[with_ops]
    on_files = {name: np.concatenate([table[name][(table["layer"] == POSIX) & np.isin(table["file"], op_files)]
                                      for table in (ops.requests, ops.metadata)])
                for name in ("process", "file", "ops", "seconds", "lost_s")}
    per_process = per_process_and_file(job, on_files, np.ones(len(on_files["ops"]), bool), on_files["seconds"])
    if len(per_process["ops"]):
        file_of, seconds = per_process["file"], per_process["seconds"]
        slowest = np.zeros(len(job.files))
        np.maximum.at(slowest, file_of, seconds)
        ranks = np.maximum(np.bincount(file_of, minlength=len(job.files)), ranks_on_file)
        mean = np.bincount(file_of, seconds, minlength=len(job.files)) / np.maximum(ranks, 1)
        # the excess of the slowest process of each file, spread over that process's ops on it
        excess = np.where(seconds >= slowest[file_of], seconds - mean[file_of], 0.0)
        share = np.where(seconds > 0, excess / np.maximum(seconds, 1e-300), 0.0)
        per_process["at_stake_s"] = seconds * share
        per_process = only(per_process, share > 0)
    counted = np.zeros(len(records["file"]), bool)
    counted[rows] = np.isin(records["file"][rows], files[~with_ops])
    nprocs = max(job.nprocs, 1)
    time = records["read_s"] + records["write_s"] + records["meta_s"]
    estimate = np.where(shared(records), np.nan_to_num(records["slowest_s"]) - time / nprocs, 0.0)
    return pattern(code, "high", job, ops, records, per_process, counted, np.maximum(estimate, 0.0),
                   ("per file, the slowest rank's time on it less the mean rank's",
                    "per shared file, its slowest rank's time less the file's time over the job's ranks"),
                   slowest_rank_holds=True, **counts)


def mpiio_usage(job, records, ops):
    """M01: an MPI job whose ranks moved data without MPI-IO (information only when some of its
    data went past POSIX, through modules ioassess does not assess: bytes_past_posix). M02/M03: more than 1000
    MPI-IO reads (writes), none collective (M04/M05 when some are). M06/M07: MPI-IO used, no
    non-blocking reads (writes). At stake: M02/M03 the time of the independent MPI-IO calls, all
    that collective I/O could save; M06/M07 the POSIX I/O inside the blocking calls (IoInsideCalls:
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
    requests = ops.requests
    for direction, c in ((READ, columns_of(READ)), (WRITE, columns_of(WRITE))):
        collective = int(records[c["collective"]][mpiio].clip(0).sum())
        independent = int(records[c["independent"]][mpiio].clip(0).sum())
        if collective == 0 and independent + collective > COLLECTIVE_OPERATIONS_ABSOLUTE:
            rows = ops.of(MPIIO, direction, lacks=Trait.COLLECTIVE | Trait.NONBLOCKING)
            counted = mpiio & ops.counters_only(records) & (records[c["independent"]] > 0)
            share = np.where(counted, records[c["independent"]] / np.maximum(records[c["ops"]], 1), 0.0)
            found.append(pattern("M02" if direction == READ else "M03", "high", job, ops, records,
                                 per_process_and_file(job, requests, rows, requests["seconds"]), counted,
                                 records[c["seconds"]] * share,
                                 ("the independent MPI-IO calls' time",
                                  "the records' MPI-IO time pro rata of their independent calls"),
                                 direction=DIRECTION_NAMES[direction], independent_requests=independent,
                                 requests=independent + collective))
        elif collective:
            found.append(fact("M04" if direction == READ else "M05", "ok", direction=DIRECTION_NAMES[direction],
                              collective_requests=collective, requests=independent + collective))
        if int(records[c["nonblocking"]][mpiio].clip(0).sum()) == 0 and records[c["ops"]][mpiio].sum() > 0:
            calls = per_process_and_file(job, requests, ops.of(MPIIO, direction, lacks=Trait.NONBLOCKING),
                                         requests["seconds"])
            counted = mpiio & ops.counters_only(records) & (records[c["ops"]] > 0)
            inside = ops.io_inside(calls, direction)
            if inside is not None:
                calls["at_stake_s"] = inside
            blocking = pattern("M06" if direction == READ else "M07", "warn", job, ops, records, calls, counted,
                               records[c["seconds"]],
                               ("the blocking MPI-IO calls' time" if inside is None else
                                "the POSIX I/O inside the blocking MPI-IO calls (what overlap hides; a call's "
                                "wait for the other ranks to arrive is not I/O, and stays); an upper bound, reached "
                                "where the I/O waits for storage rather than takes CPU that the computation needs",
                                "the records' MPI-IO time"),
                               direction=DIRECTION_NAMES[direction])
            found.append(capped(blocking, outside_io_s(job, ops.io_s) / max(job.nprocs, 1),
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
    under = ops.of(POSIX, has=Trait.UNDER_COLLECTIVE)
    nodes = {p.hostname for p in job.processes if p.rank >= 0 and p.hostname}
    if not under.any() or not nodes:
        return []
    aggregators = [job.processes[p] for p in distinct(ops.requests["process"][under]).tolist()]
    per_node = {}
    for process in aggregators:
        per_node.setdefault(process.hostname, []).append(process)
    crowded = [process for node in sorted(per_node) if len(per_node[node]) > 1 for process in per_node[node]]
    code, level = ("M09", "warn") if len(aggregators) > len(nodes) else \
        ("M08", "info") if len(aggregators) < len(nodes) else ("M10", "ok")
    return [fact(code, level, "ops", crowded[:FILES_NAMED], aggregators=len(aggregators), nodes=len(nodes),
                 most_on_one_node=max(len(on_node) for on_node in per_node.values()))]


def outside_io_s(job, io_s):
    """The time the job's ranks spent outside POSIX and stdio reads and writes: nprocs x runtime
    less their summed time (io_s: that of the ops known one by one, RequestStreams'; infinite
    where the runtime is not known)."""
    if not np.isfinite(job.runtime_s):
        return float("inf")
    t = job.totals
    in_io = io_s + float(t["seconds"][(t["direction"] < META) & (t["layer"] != MPIIO)].sum())
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
