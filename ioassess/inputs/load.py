"""Loading: one Job from any mix of recorder trace directories/files and Darshan logs.

load_job() sorts the inputs by kind, reads the traces together (ioassess.inputs.trace) and each
Darshan log (ioassess.inputs.darshan_log), and merges them into one Job: Darshan gives the job's facts,
mount points and Lustre striping; the trace gives the per-op timings of the POSIX layer and,
when libioassess-mpiio.so recorded it, of the MPI-IO layer.
Inputs that belong to different jobs are refused.
"""
import collections
import dataclasses
import functools
import math
import os
import pwd
import re
import shutil

import numpy as np

from . import traceformat as tf
from .job import (ALL_OP_COLUMNS, DARSHAN_RECORD_COLUMNS, LAYERS, MAPPED_FILE_COLUMNS, META, META_KIND_COLUMNS,
                  META_KINDS, NO_IO_NOTE, PAGECACHE_COLUMNS, SIZE_BIN_COLUMNS, TOTAL_COLUMNS, Flag, Job, JobFile,
                  JobInput, JobProcess, StreamedOps, concatenate_columns, empty_columns, mount_index, mount_of,
                  with_optional_columns, with_own_file_systems)
from .trace import (DIRECTION_OF_OP, JOB_KIND, TraceFileError, saturated_bytes, scan_trace_dir, stopped_recording_note,
                    stream_ops, sum_by, summarise_errors)
from .tracepack import PACK_SUFFIX, stored_in

# statfs f_type -> file system name, for the ones an HPC job meets.
FS_TYPES = {0xEF53: "ext4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x01021994: "tmpfs", 0x6969: "nfs",
            0x0BD00BD0: "lustre", 0x47504653: "gpfs", 0x65735546: "fuse", 0x794C7630: "overlayfs",
            0x73717368: "squashfs", 0x5346414F: "afs", 0xAAD7AAEA: "panfs", 0x19830326: "beegfs",
            0x2011BAB0: "exfat", 0x1CD1: "devpts", 0x9FA0: "proc", 0x62656572: "sysfs"}
# Two inputs are the same job if neither has a job id and their runs overlap within this slack.
SAME_JOB_SLACK_S = 60.0
# The note of an input that could not be used while another could: this, then `PATH: problem`.
NOT_USED = "not used: "
# The name of the mmap log a rank of a killed MPI job leaves: ..._mmap-log-<job's hash>-<rank>.darshan.
MMAP_LOG_NAME = re.compile(r"_mmap-log-(\d+)-(\d+)\.darshan$")


class LoadError(Exception):
    """An input cannot be used; str() is one line naming the file and the problem."""


def input_kind(path):
    """"trace" for a directory, *.iot file or trace pack (*.iotpack), "darshan" for a *.darshan file."""
    if os.path.isdir(path) or path.endswith((".iot", PACK_SUFFIX)):
        return "trace"
    if path.endswith(".darshan"):
        return "darshan"
    raise LoadError(f"{path}: not a trace directory, a trace file (*.iot), a trace pack (*.iotpack) or a Darshan log "
                    "(*.darshan)")


def load_job(paths, owner_uid=None):
    """One Job from the inputs (see the module doc). Only traces owned by owner_uid are taken
    (default: this process's effective uid, which in the epilog's worker is the job's user's).
    An input that cannot be used becomes a note, as long as another one can; otherwise raises
    LoadError."""
    if not paths:
        raise LoadError("no input given")
    for path in paths:
        if not os.path.lexists(path):
            raise LoadError(f"{path}: no such file or directory")
    by_kind = collections.defaultdict(list)
    for path in paths:
        by_kind[input_kind(path)].append(path)
    jobs, refused = [], []
    readers = ([functools.partial(job_from_traces, by_kind["trace"], owner_uid)] if by_kind["trace"] else []) + \
        [functools.partial(_read_darshan, path) for path in by_kind["darshan"]]
    for read in readers:
        try:
            jobs.append(read())
        except LoadError as error:
            refused.append(str(error))
    if not jobs:
        raise LoadError("; ".join(refused))
    job = merge_jobs(joined_rank_logs(jobs))
    job.notes[:0] = [NOT_USED + problem for problem in refused]
    return job


def _read_darshan(path):
    from .darshan_log import DarshanLogError, read_darshan_log   # PyDarshan is imported only when needed
    try:
        return read_darshan_log(path)
    except DarshanLogError as error:
        raise LoadError(str(error)) from None


def job_from_traces(paths, owner_uid=None):
    """A Job from recorder traces: every op record, and the summary table's entries as totals.
    Only traces owned by owner_uid (default: the effective uid) are read. The files refused
    are summarised in Job.notes, one line per kind of problem; Job.inputs are the directories
    given and the trace files given that were read."""
    owner_uid = os.geteuid() if owner_uid is None else owner_uid
    try:
        traceset = scan_trace_dir(paths, owner_uid)
    except TraceFileError as error:
        raise LoadError(str(error)) from None
    refused = summarise_errors(traceset.errors)
    if not traceset.processes:
        raise LoadError("; ".join(refused) if refused else f"{paths[0]}: no trace")
    processes = traceset.processes
    start_ns = min(p.start_ns for p in processes)
    file_ids = sorted(traceset.files)
    mounts = mount_index(traceset.mounts)
    files = with_own_file_systems([_trace_file(traceset.files[i], mounts) for i in file_ids], traceset.mounts)
    mapped_files, rings = _process_facts(traceset, file_ids)
    ops = StreamedOps(TraceOps(traceset.streams, file_ids, start_ns))
    totals, size_bins, meta_kinds = _trace_summary_columns(_rows(traceset.summary, JOB_KIND[traceset.summary["op"]]),
                                                           file_ids)
    ends = [p.end_ns for p in processes]
    last_op_end = max(((s.start_ns - start_ns) + s.last_tick * s.ns_per_tick) / 1e9 for s in traceset.streams
                      if s.records)  if any(s.records for s in traceset.streams) else 0.0
    end_epoch_s = (max(ends) / 1e9 if None not in ends
                   else max(start_ns / 1e9 + last_op_end, max((e for e in ends if e is not None), default=0) / 1e9))
    notes = list(refused) + traceset.notes
    unfinished = [p for p in processes if p.end_ns is None]
    if unfinished:
        notes.append(f"{len(unfinished)} of {len(processes)} processes ended without finishing "
                     "(killed, or still running): their traces end at their last recorded op")
    stopped = stopped_recording_note(processes)
    if stopped:
        notes.append(stopped)
    notes += _pagecache_notes(processes)
    job_ids = collections.Counter(p.job_id for p in processes if p.job_id)
    first = min(processes, key=lambda p: (p.rank if p.rank >= 0 else math.inf, p.start_ns))
    read = {stored_in(p.path) for p in processes}   # a trace file, or the pack holding it
    return Job(
        job_id=job_ids.most_common(1)[0][0] if job_ids else "",
        exe=first.exe, cmdline=first.cmdline, user=_owner(stored_in(first.path)),
        start_epoch_s=start_ns / 1e9, end_epoch_s=end_epoch_s,
        nprocs=len({p.rank for p in processes if p.rank >= 0}) or len(processes),
        processes=[_trace_process(p, start_ns, int(n)) for p, n in zip(processes, rings)],
        files=files, ops=ops, totals=totals, size_bins=size_bins, mounts=traceset.mounts,
        inputs=[JobInput(path=os.fspath(path), kind="trace", tiers=("ops", "totals", "metadata"))
                for path in map(os.fspath, paths) if path in read or os.path.isdir(path)],
        notes=notes, meta_kinds=meta_kinds, mapped_files=mapped_files)


def _rows(table, keep):
    """The table's rows where keep is set (the table itself when it keeps all: no copy)."""
    return table if keep.all() else {name: column[keep] for name, column in table.items()}


def _process_facts(traceset, file_ids):
    """Job.mapped_files (MAPPED_FILE_COLUMNS) from the trace's MMAP records, and per process the
    io_uring instances seen (its IO_URING records). Past the record cap a summary entry stands
    for its mappings of one file and size bucket: one row of their summed length, at offset -1,
    protection and sharing not known (all false)."""
    ops, summary = traceset.ops, traceset.summary
    file_index = np.array(file_ids, np.uint64)
    mapped = ops["op"] == tf.Op.MMAP
    flags = ops["flags"][mapped]
    listed = {"process": ops["process"][mapped], "file": np.searchsorted(file_index, ops["file_id"][mapped]),
              "bytes": saturated_bytes(ops["requested"][mapped]), "offset": ops["offset"][mapped],
              "read": flags & tf.OpFlag.MAP_READ != 0, "write": flags & tf.OpFlag.MAP_WRITE != 0,
              "exec": flags & tf.OpFlag.MAP_EXEC != 0, "shared": flags & tf.OpFlag.MAP_SHARED != 0,
              "result": ops["result"][mapped]}
    counted = summary["op"] == tf.Op.MMAP
    n = int(counted.sum())
    summed = {"process": summary["process"][counted], "file": np.searchsorted(file_index, summary["file_id"][counted]),
              "bytes": summary["bytes_requested"][counted], "offset": np.full(n, -1),
              **{name: np.zeros(n, bool) for name in ("read", "write", "exec", "shared")},
              "result": np.where(summary["errors"][counted] > 0, -1, 0)}
    rings = (np.bincount(ops["process"][ops["op"] == tf.Op.IO_URING], minlength=len(traceset.processes))
             + np.bincount(summary["process"][summary["op"] == tf.Op.IO_URING],
                           summary["count"][summary["op"] == tf.Op.IO_URING], len(traceset.processes)).astype(int))
    return concatenate_columns(MAPPED_FILE_COLUMNS, [listed, summed]), rings


def _pagecache_notes(processes):
    """What the report must say about the page-cache samples: processes whose kernel refused
    them, and samples ignored as damaged."""
    notes = []
    refused = sum(p.pagecache == "unavailable" for p in processes)
    if refused:
        notes.append(f"the kernel refused cachestat(2) in {refused} of {len(processes)} processes: their ops have no "
                     "page-cache samples (the kernel's word on what was cached), from the refusal on")
    ignored = sum(p.pagecache_ignored for p in processes)
    if ignored:
        notes.append(f"{ignored} page-cache samples were ignored: they belong to no recorded op, or to one that has "
                     "several, or hold impossible counts (damaged traces)")
    return notes


def _trace_process(p, start_ns, io_uring_instances):
    return JobProcess(rank=p.rank, hostname=p.hostname, pid=p.pid, exe=p.exe,
                      start_s=(p.start_ns - start_ns) / 1e9,
                      end_s=(p.end_ns - start_ns) / 1e9 if p.end_ns is not None else math.nan,
                      end_reason=p.end_reason, exit_status=p.exit_status, source="trace",
                      pagecache=p.pagecache, pagecache_samples=p.pagecache_samples,
                      io_uring_instances=io_uring_instances)


# op code -> index into LAYERS (the reader has refused unknown codes)
_LAYER_OF_OP = np.array([LAYERS.index(tf.OP_LAYER.get(op, "posix")) for op in range(256)], np.uint8)
# The trace flags a Job keeps (Flag has the recorder's bits; APPEND is the reader's business).
assert all(int(flag) == int(tf.OpFlag[flag.name]) for flag in Flag)
_JOB_FLAG_BITS = np.uint16(sum(Flag))
# op code -> index into META_KINDS for the recorder's metadata kinds (named as the Job names
# them), -1 for every other op
_META_KIND_OF_OP = np.full(256, -1, np.int8)
for _op, _name in tf.META_KIND_NAMES.items():
    _META_KIND_OF_OP[_op] = META_KINDS.index(_name)


def _trace_file(info, mounts):
    """The JobFile of a trace's FileInfo: its mount point from the traces' MOUNT slots (mounts: their
    mount_index), its type from its FILE slot's statfs magic, else as the mount table names it.
    Every FUSE file system has FUSE's magic: the mount table's type of a FUSE mount names which one
    it is (fuse.glusterfs, fuse.sshfs, fuseblk), and is kept."""
    mount_point, mount_type = mount_of(info.name, mounts)
    fs_type = FS_TYPES.get(info.fs_magic, "") or mount_type
    if fs_type == "fuse" and _is_fuse_type(mount_type):
        fs_type = mount_type
    return JobFile(name=info.name, mount_point=mount_point, fs_type=fs_type, device=info.device)


def _is_fuse_type(mount_type):
    """Whether a mount table's type is one of a FUSE file system (fuse, fuse.NAME, fuseblk)."""
    return mount_type in ("fuse", "fuseblk") or mount_type.startswith("fuse.")


class TraceOps:
    """The source of Job.ops of recorder traces (StreamedOps): each process's op records read
    again from its trace, chunk by chunk (trace.stream_ops), as Job columns."""

    def __init__(self, streams, file_ids, start_ns):
        self.streams, self.file_ids, self.start_ns = streams, np.array(file_ids, np.uint64), start_ns
        self.counts = np.array([stream.records for stream in streams], np.int64)

    def kinds(self):
        """(the layers, the directions) the ops have (LAYERS and DIRECTIONS codes), as the scan
        found them."""
        kinds = np.logical_or.reduce([stream.op_kinds for stream in self.streams] + [np.zeros(256, bool)])
        return set(_LAYER_OF_OP[kinds].tolist()), set(DIRECTION_OF_OP[kinds].tolist())

    def chunks(self, size, processes=None):
        """(columns, index in Job.ops of the first row) of at most `size` rows each, in Job.ops
        order, of the processes (first, stop) (default: all); one empty chunk for no ops."""
        first, stop = processes or (0, len(self.streams))
        tables = (_trace_op_columns(table, self.file_ids, self.start_ns)
                  for stream in self.streams[first:stop] for table in stream_ops(stream))
        return rechunked(tables, size, int(self.counts[:first].sum()))


class MergedOps:
    """The source of Job.ops of traces merged with a Darshan log (StreamedOps): per process, the
    traces' ops (their Job's StreamedOps, read chunk by chunk, their start moved by shift_s) and
    the log's ops kept (`added`: Job columns of the merged Job, sorted by process and start), in
    start order, the traces' first where two start together."""

    def __init__(self, traced, shift_s, added, processes):
        self.traced, self.shift_s, self.added = traced, shift_s, added
        self.counts = np.bincount(added["process"], minlength=processes).astype(np.int64)
        self.counts[:len(traced.source.counts)] += traced.source.counts

    def chunks(self, size, processes=None):
        """As TraceOps.chunks."""
        first, stop = processes or (0, len(self.counts))
        tables = (table for process in range(first, stop) for table in self._tables_of(process, size))
        return rechunked(tables, size, int(self.counts[:first].sum()))

    def _tables_of(self, process, size):
        """The process's ops in start order: each chunk of the traces' with the log's that start
        before its last start joined in, then the log's after them."""
        lower, upper = np.searchsorted(self.added["process"], [process, process + 1])
        added = {name: column[lower:upper] for name, column in self.added.items()}
        taken = 0
        if process < len(self.traced.source.counts):
            for table, _ in self.traced.source.chunks(size, (process, process + 1)):
                if not len(table["size"]):
                    continue
                table = dict(with_optional_columns(table), start_s=table["start_s"] + self.shift_s)
                until = int(np.searchsorted(added["start_s"], table["start_s"][-1], "left"))
                if until > taken:
                    joined = concatenate_columns(ALL_OP_COLUMNS, [table, {name: column[taken:until]
                                                                          for name, column in added.items()}])
                    order = np.argsort(joined["start_s"], kind="stable")    # the traces' first on ties
                    table = {name: column[order] for name, column in joined.items()}
                    taken = until
                yield table
        if taken < upper - lower:
            yield {name: column[taken:] for name, column in added.items()}


def rechunked(tables, size, row):
    """The rows of the tables (columns of one kind) in chunks of at most `size` rows, each with
    the index in Job.ops of its first row (the first is `row`): a table of more is cut, tables of
    fewer are joined (a copy) while together they fit; one empty chunk for no rows."""
    pending, held = [], 0
    for table in tables:
        n = len(table["size"])
        for start in range(0, n, size):
            piece = table if n <= size else {name: column[start:start + size] for name, column in table.items()}
            rows = min(size, n - start)
            if pending and held + rows > size:
                yield _joined(pending), row
                row += held
                pending, held = [], 0
            pending.append(piece)
            held += rows
    yield (_joined(pending) if pending else empty_columns(ALL_OP_COLUMNS)), row


def _joined(tables):
    return tables[0] if len(tables) == 1 else concatenate_columns(ALL_OP_COLUMNS, tables)


def _trace_op_columns(ops, file_ids, start_ns):
    """Job columns from TraceSet columns, contiguous (the trace's may be strided views)."""
    contiguous = np.ascontiguousarray
    return {
        "process": ops["process"].astype(np.int32, copy=False),
        "file": np.searchsorted(file_ids, ops["file_id"]).astype(np.int32),
        "layer": _LAYER_OF_OP[ops["op"]],
        "direction": DIRECTION_OF_OP[ops["op"]],
        "offset": contiguous(ops["offset"]),
        "size": saturated_bytes(ops["requested"]),
        "result": contiguous(ops["result"]),
        "start_s": (ops["start_ns"] - start_ns) / 1e9,
        "duration_s": ops["duration_ns"] / 1e9,
        "buffer": contiguous(ops["buffer"]),
        "tid": contiguous(ops["tid"]),
        "flags": ops["flags"] & _JOB_FLAG_BITS,
        "meta_kind": _META_KIND_OF_OP[ops["op"]],
        **{name: ops[name] for name in PAGECACHE_COLUMNS},
    }


def _trace_summary_columns(summary, file_ids):
    """The summary table as totals (per process, file and direction), size bins (reads,
    writes and syncs: bucket b holds requests of [2**(b-1), 2**b) bytes, i.e. (2**(b-1) - 1,
    2**b - 1]; bucket 0 is 0 bytes) and the metadata calls' kinds (Job.meta_kinds)."""
    if not len(summary["op"]):
        return empty_columns(TOTAL_COLUMNS), empty_columns(SIZE_BIN_COLUMNS), empty_columns(META_KIND_COLUMNS)
    direction = DIRECTION_OF_OP[summary["op"]]
    file = np.searchsorted(np.array(file_ids, np.uint64), summary["file_id"]).astype(np.int32)
    bucket = summary["size_bucket"].astype(np.int64)
    size_high = np.where(bucket > 0, (np.int64(1) << bucket) - 1, 0)
    size_low = np.where(bucket > 0, (np.int64(1) << np.maximum(bucket - 1, 0)) - 1, 0)
    common = {"process": summary["process"], "file": file, "layer": _LAYER_OF_OP[summary["op"]],
              "direction": direction}
    data = direction != META
    size_bins = {name: column[data] for name, column in
                 dict(common, size_low=size_low, size_high=size_high, ops=summary["count"]).items()}
    totals = sum_by(common, {"ops": summary["count"], "bytes": summary["bytes_returned"],
                             "seconds": summary["duration_ns"] / 1e9})
    rows = len(totals["ops"])
    totals.update(max_op_seconds=np.full(rows, np.nan), max_op_size=np.full(rows, -1))
    meta = ~data
    meta_kinds = sum_by({"process": summary["process"][meta], "file": file[meta],
                         "layer": common["layer"][meta], "kind": _META_KIND_OF_OP[summary["op"][meta]]},
                        {"ops": summary["count"][meta]})
    return ({name: np.asarray(totals[name], dtype) for name, dtype in TOTAL_COLUMNS.items()},
            {name: np.asarray(column, SIZE_BIN_COLUMNS[name]) for name, column in size_bins.items()},
            {name: np.asarray(meta_kinds[name], dtype) for name, dtype in META_KIND_COLUMNS.items()})


def _owner(path):
    try:
        uid = os.stat(path).st_uid
    except OSError:
        return ""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def same_job(a, b):
    """Whether two Jobs describe the same job: equal job ids; or a job id that is the other's
    pid (a non-MPI Darshan log's job id is its process's pid) with overlapping runs; or, without
    job ids, the same executable (symbolic links resolved) and overlapping runs."""
    a_end = a.end_epoch_s if math.isfinite(a.end_epoch_s) else a.start_epoch_s
    b_end = b.end_epoch_s if math.isfinite(b.end_epoch_s) else b.start_epoch_s
    overlap = a.start_epoch_s <= b_end + SAME_JOB_SLACK_S and b.start_epoch_s <= a_end + SAME_JOB_SLACK_S
    if a.job_id and b.job_id and a.job_id == b.job_id:
        return True
    if _job_id_is_a_pid_of(a, b) or _job_id_is_a_pid_of(b, a):
        return overlap
    if a.job_id and b.job_id:
        return False
    return bool(_exe_names(a.exe) & _exe_names(b.exe)) and overlap


def _job_id_is_a_pid_of(a, b):
    return a.job_id.isascii() and a.job_id.isdigit() and int(a.job_id) in {p.pid for p in b.processes if p.pid > 0}


def _exe_names(exe):
    """The executable's name as given and the name of the file it is, symbolic links resolved
    on this machine (/usr/bin/python3 -> python3.11)."""
    path = exe.split()[0] if exe else ""
    return {os.path.basename(path), os.path.basename(os.path.realpath(shutil.which(path) or path))} - {""}


def merge_jobs(jobs):
    """One Job from Jobs of the same job (LoadError if they are not). The first trace Job keeps
    its ops and totals; a Darshan Job adds its facts (id, user, nprocs, times, mounts, file
    systems of the files by name) and the ops and totals of the layers the trace does not record
    (STDIO always, MPI-IO without libioassess-mpiio.so); its POSIX ops and totals are dropped, a
    trace recorded them."""
    base = jobs[0]
    for other in jobs[1:]:
        if not same_job(base, other):
            raise LoadError(f"{other.inputs[0].path}: not the same job as {base.inputs[0].path} "
                            f"(job id {other.job_id or 'none'} vs {base.job_id or 'none'}, "
                            f"executable {other.exe or 'unknown'} vs {base.exe or 'unknown'})")
        base = _merge_two(base, other)
    return base


def joined_rank_logs(jobs):
    """The Jobs with the mmap logs that the ranks of one killed MPI job left (one per rank, the
    same hash in their names, the same executable) joined into one Job, in the place of the first."""
    groups = collections.defaultdict(list)
    for i, job in enumerate(jobs):
        match = MMAP_LOG_NAME.search(job.inputs[0].path) if len(job.inputs) == 1 else None
        if match and job.inputs[0].kind == "darshan":
            groups[(match.group(1), job.exe)].append(i)
    joined = {group[0]: _join_ranks([jobs[i] for i in group]) for group in groups.values()}
    left_out = {i for group in groups.values() for i in group[1:]}
    return [joined.get(i, job) for i, job in enumerate(jobs) if i not in left_out]


def _join_ranks(logs):
    """One Darshan Job of the mmap logs of one job's ranks (LoadError if two have a rank), in one
    pass: each log's tables are reindexed and copied once. The job id is the one of the log of
    rank 0, as in the log of a job that finished."""
    seen = {}
    for log in logs:
        for rank in {p.rank for p in log.processes}:
            if rank in seen:
                raise LoadError(f"{log.inputs[0].path}: the mmap log of a rank that {seen[rank]} has too")
            seen[rank] = log.inputs[0].path
    start = min(log.start_epoch_s for log in logs)
    files, processes, ops, totals, size_bins, records, meta_kinds = [], [], [], [], [], [], []
    for log in logs:
        file_positions = _index_into(files, log.files, key=lambda f: f.name)
        process_positions = np.arange(len(processes), len(processes) + len(log.processes), dtype=np.int32)
        shift = log.start_epoch_s - start
        processes += [dataclasses.replace(p, start_s=p.start_s + shift, end_s=p.end_s + shift) for p in log.processes]

        def reindexed(table):
            return _reindexed(table, np.ones(len(table["file"]), bool), file_positions, process_positions)
        ops.append(with_optional_columns(_rebased(reindexed(log.ops), shift)))
        totals.append(reindexed(log.totals))
        size_bins.append(reindexed(log.size_bins))
        meta_kinds.append(reindexed(log.meta_kinds))
        records.append(dict(log.darshan_records, file=file_positions[log.darshan_records["file"]]))
    first = next((log for log in logs if any(p.rank == 0 for p in log.processes)), logs[0])
    ends = [log.end_epoch_s for log in logs]
    return Job(job_id=first.job_id, exe=first.exe, cmdline=first.cmdline,
               user=next((log.user for log in logs if log.user), ""), start_epoch_s=start,
               # a rank that did not finish leaves the job unfinished
               end_epoch_s=max(ends) if all(math.isfinite(end) for end in ends) else math.nan,
               nprocs=max(log.nprocs for log in logs), processes=processes, files=files,
               ops=concatenate_columns(ALL_OP_COLUMNS, ops), totals=concatenate_columns(TOTAL_COLUMNS, totals),
               size_bins=concatenate_columns(SIZE_BIN_COLUMNS, size_bins),
               mounts=next((log.mounts for log in logs if log.mounts), []),
               inputs=[i for log in logs for i in log.inputs],
               notes=list(dict.fromkeys(note for log in logs for note in log.notes)),
               darshan_records=concatenate_columns(DARSHAN_RECORD_COLUMNS, records),
               meta_kinds=concatenate_columns(META_KIND_COLUMNS, meta_kinds),
               unassessed=_summed_unassessed(log.unassessed for log in logs))


def _summed_unassessed(per_log):
    """Job.unassessed of several logs of one job: each module's amounts added up (a time no log
    counts stays None)."""
    summed = {}
    for unassessed in per_log:
        for module, amounts in unassessed.items():
            into = summed.setdefault(module, dict.fromkeys(amounts, None))
            for name, value in amounts.items():
                into[name] = value if into[name] is None else into[name] if value is None else into[name] + value
    return summed


def _merge_two(a, b):
    traced = a if any(i.kind == "trace" for i in a.inputs) else b if any(i.kind == "trace" for i in b.inputs) else None
    if traced is None:
        raise LoadError(f"{b.inputs[0].path}: give one Darshan log per job (also got {a.inputs[0].path})")
    darshan = b if traced is a else a
    if any(i.kind == "trace" for i in darshan.inputs):
        raise LoadError(f"{darshan.inputs[0].path}: give the trace directories of one job once")
    start = min(traced.start_epoch_s, darshan.start_epoch_s)
    files = list(traced.files)
    by_name = {f.name: f for f in darshan.files}
    darshan_mounts = mount_index(darshan.mounts)
    for i, f in enumerate(files):
        facts = by_name.get(f.name)
        if facts is not None:
            files[i] = JobFile(f.name, facts.mount_point, facts.fs_type or f.fs_type, facts.stripe_size,
                               facts.stripe_count, facts.osts, f.device)
        else:
            mount_point, fs_type = mount_of(f.name, darshan_mounts)
            files[i] = dataclasses.replace(f, mount_point=mount_point or f.mount_point, fs_type=f.fs_type or fs_type)
    processes = [dataclasses.replace(p, start_s=p.start_s + traced.start_epoch_s - start,
                                     end_s=p.end_s + traced.start_epoch_s - start) for p in traced.processes]
    file_positions = _index_into(files, darshan.files, key=lambda f: f.name)
    # the layers the trace records, from its ops or its totals (a layer's ops may all be past the record cap)
    layers, directions = traced.ops.source.kinds()
    traced_layers = list(layers | set(traced.totals["layer"].tolist()) | {LAYERS.index("posix")})
    untraced = [(table, ~np.isin(table["layer"], traced_layers))
                for table in (_rebased(darshan.ops, darshan.start_epoch_s - start), darshan.totals, darshan.size_bins,
                              darshan.meta_kinds)]
    # Darshan's processes join the job's only when some of its I/O is kept.
    process_positions = (_darshan_process_positions(processes, darshan, traced)
                         if any(rows.any() for _, rows in untraced) else np.zeros(0, np.int32))
    kept_ops, kept_totals, kept_size_bins, kept_meta_kinds = (_reindexed(table, rows, file_positions,
                                                                         process_positions)
                                                              for table, rows in untraced)
    totals = concatenate_columns(TOTAL_COLUMNS, [traced.totals, kept_totals])
    size_bins = concatenate_columns(SIZE_BIN_COLUMNS, [traced.size_bins, kept_size_bins])
    records = dict(darshan.darshan_records, file=file_positions[darshan.darshan_records["file"]])
    added = with_optional_columns(kept_ops)
    added = {name: np.asarray(column, ALL_OP_COLUMNS[name])[np.lexsort((added["start_s"], added["process"]))]
             for name, column in added.items()}
    ops = StreamedOps(MergedOps(traced.ops, traced.start_epoch_s - start, added, len(processes)))
    darshan_inputs = darshan.inputs
    if directions - {META} or np.any(added["direction"] != META) or np.any(totals["direction"] != META):
        darshan_inputs = [dataclasses.replace(i, notes=tuple(n for n in i.notes if n != NO_IO_NOTE))
                          for i in darshan_inputs]
    return Job(
        job_id=darshan.job_id or traced.job_id, exe=darshan.exe or traced.exe,
        cmdline=darshan.cmdline or traced.cmdline, user=darshan.user or traced.user,
        start_epoch_s=start, end_epoch_s=max(traced.end_epoch_s, darshan.end_epoch_s),
        nprocs=max(darshan.nprocs, traced.nprocs), processes=processes, files=files, ops=ops,
        totals=totals, size_bins=size_bins, mounts=darshan.mounts or traced.mounts,
        inputs=traced.inputs + darshan_inputs, notes=traced.notes + darshan.notes, darshan_records=records,
        meta_kinds=concatenate_columns(META_KIND_COLUMNS, [traced.meta_kinds, kept_meta_kinds]),
        mapped_files=traced.mapped_files, unassessed=darshan.unassessed)


def _rebased(ops, shift_s):
    return dict(ops, start_s=ops["start_s"] + shift_s)


def _darshan_process_positions(processes, darshan, traced):
    """Index in processes (the trace's, extended) of each of the Darshan Job's processes: the
    trace's process of the same rank; for a non-MPI log (one process, rank 0, its job id the
    pid of a traced process that has no rank), that process."""
    if _job_id_is_a_pid_of(darshan, traced) and [p.rank for p in darshan.processes] == [0]:
        pid = int(darshan.job_id)
        same = [i for i, p in enumerate(processes) if p.pid == pid and p.rank < 0]
        if same:
            return np.array(same[:1], np.int32)
    return _index_into(processes, darshan.processes, key=lambda p: p.rank)


def _reindexed(table, rows, file_positions, process_positions):
    """The rows of a Darshan Job's ops, totals or size bins, their file and process indices
    turned into the merged Job's (a shared record's process -1 stays -1)."""
    kept = {name: column[rows] for name, column in table.items()}
    kept["file"] = file_positions[kept["file"]]
    process = kept["process"].copy()
    own = process >= 0
    process[own] = process_positions[process[own]]
    kept["process"] = process
    return kept


def _index_into(into, items, key):
    """Index in `into` of each of `items`, matched by key; items not there are appended."""
    index = {key(x): i for i, x in enumerate(into)}
    positions = np.empty(len(items), np.int32)
    for i, item in enumerate(items):
        if key(item) not in index:
            index[key(item)] = len(into)
            into.append(item)
        positions[i] = index[key(item)]
    return positions
