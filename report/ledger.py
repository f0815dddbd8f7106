"""One account of the job's time: its I/O (POSIX and stdio reads, writes and syncs) and its
metadata calls (of every layer) per process, file, layer and direction, with calls, bytes,
seconds, time lost compared with cached I/O (low, high) and slowness caching would not save
(stalls, allocation, memory: report/classify.py; none for metadata calls or counters), and whether they are known one by
one (ops) or from counters (estimated). Every total of the assessment (per process, per file,
the headline, the metadata section's totals) is a sum over this one table, so no two sections
can disagree about one process, file or the job (docs/assessment.md, "The rules an assessment
keeps").

Rows of counters shared by all ranks (Darshan's rank -1 records) have process -1: they are the
job's and their files', no process's own (report/processes.py says what they say of ranks).
"""
import numpy as np

from ioassess.inputs.job import DIRECTIONS, LAYERS, META

from .passes import Sums

QUANTITIES = ("calls", "bytes", "seconds", "lost_low_s", "lost_high_s", "slowness_s")


class OpLedger:
    """The ops' rows of the ledger, a pass (report/passes.py): the I/O ops of per_op["is_io"] and
    the metadata calls summed by (process, file, layer, direction)."""

    def __init__(self, job):
        self.shape = (max(len(job.processes), 1), max(len(job.files), 1), len(LAYERS), len(DIRECTIONS))
        self.sums = Sums(QUANTITIES, int(np.prod(self.shape)))

    def add(self, chunk):
        ops, per_op = chunk.ops, chunk.per_op
        chosen = per_op["is_io"] | (ops["direction"] == META)
        io = per_op["is_io"][chosen]
        key = np.ravel_multi_index((ops["process"][chosen], ops["file"][chosen], ops["layer"][chosen],
                                    ops["direction"][chosen]), self.shape)
        lost = np.where(io, per_op["lost_s"][chosen], 0.0)
        self.sums.add(key, {"calls": 1.0,
                            "bytes": np.where(io, np.maximum(ops["result"][chosen], 0), 0).astype(np.float64),
                            "seconds": ops["duration_s"][chosen], "lost_low_s": lost, "lost_high_s": lost,
                            "slowness_s": np.where(io, per_op["slowness_s"][chosen], 0.0)})

    def merge(self, later):
        self.sums.merge(later.sums)

    def result(self):
        """(process, file, layer, direction) of each cell with ops, and name -> its sums."""
        return np.unravel_index(self.sums.keys, self.shape), self.sums.sums


def job_ledger(job, op_ledger, per_total):
    """The ledger of a job (columns: process, file, layer, direction, estimated, and QUANTITIES):
    the ops' rows (op_ledger: OpLedger's result), then the counter rows of per_total["is_io"]
    and of metadata, estimated."""
    (process, file, layer, direction), summed = op_ledger
    totals = job.totals
    tio = per_total["is_io"] | (totals["direction"] == META)
    counted_io = per_total["is_io"][tio]

    def counted(column):   # a counter row's amount where it is I/O, 0 for metadata
        return np.where(counted_io, column[tio], 0).astype(np.float64)
    return {"process": np.concatenate([process, totals["process"][tio]]).astype(np.int64),
            "file": np.concatenate([file, totals["file"][tio]]).astype(np.int64),
            "layer": np.concatenate([layer, totals["layer"][tio]]).astype(np.int64),
            "direction": np.concatenate([direction, totals["direction"][tio]]).astype(np.int64),
            "estimated": np.concatenate([np.zeros(len(process), bool), np.ones(int(tio.sum()), bool)]),
            "calls": np.concatenate([summed["calls"], totals["ops"][tio].astype(np.float64)]),
            "bytes": np.concatenate([summed["bytes"], counted(totals["bytes"])]),
            "seconds": np.concatenate([summed["seconds"], totals["seconds"][tio]]),
            "lost_low_s": np.concatenate([summed["lost_low_s"], counted(per_total["lost_low_s"])]),
            "lost_high_s": np.concatenate([summed["lost_high_s"], counted(per_total["lost_high_s"])]),
            "slowness_s": np.concatenate([summed["slowness_s"], np.zeros(int(tio.sum()))])}


def io_rows(ledger):
    """The rows of the job's I/O: POSIX and stdio reads, writes and syncs."""
    return ledger["direction"] != META


def metadata_rows(ledger, layers=("posix", "stdio")):
    """The rows of the metadata calls of the layers named."""
    return (ledger["direction"] == META) & np.isin(ledger["layer"], [LAYERS.index(name) for name in layers])


def sums_by(ledger, column, size, rows=None):
    """Per value 0 … size-1 of a ledger column (process, file, ...), the sum of each quantity over
    the rows (a mask, or all) with that value; rows of a negative value (shared) are left out."""
    chosen = ledger[column] >= 0 if rows is None else rows & (ledger[column] >= 0)
    index = ledger[column][chosen]
    return {name: np.bincount(index, ledger[name][chosen], size) for name in QUANTITIES}


def total(ledger, rows=None):
    """The sum of each quantity over the rows (a mask, or all)."""
    chosen = slice(None) if rows is None else rows
    return {name: float(ledger[name][chosen].sum()) for name in QUANTITIES}
