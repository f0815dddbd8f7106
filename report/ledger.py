"""One account of the job's time: its I/O (POSIX and stdio reads, writes and syncs) per process,
file, layer and direction, with calls, bytes, seconds and time lost (low, high), and whether
they are known one by one (ops) or from counters (estimated). Every total of the assessment
(per process, per file, the headline) is a sum over this one table, so no two sections can
disagree about one process, file or the job (docs/assessment.md, "The rules an assessment
keeps").

Rows of counters shared by all ranks (Darshan's rank -1 records) have process -1: they are the
job's and their files', no process's own (report/processes.py says what they say of ranks).
"""
import numpy as np

from ioassess.inputs.job import DIRECTIONS, LAYERS

QUANTITIES = ("calls", "bytes", "seconds", "lost_low_s", "lost_high_s")
# Keys up to this many cells are grouped by counting (no sort); more, by sorting the keys.
DENSE_KEYS = 1 << 20


def job_ledger(job, per_op, per_total):
    """The ledger of a job (columns: process, file, layer, direction, estimated, and QUANTITIES):
    the I/O ops of per_op["is_io"] grouped by (process, file, layer, direction), then the
    counter rows of per_total["is_io"], estimated."""
    ops, io = job.ops, per_op["is_io"]
    shape = (max(len(job.processes), 1), max(len(job.files), 1), len(LAYERS), len(DIRECTIONS))
    key = np.ravel_multi_index((ops["process"][io], ops["file"][io], ops["layer"][io], ops["direction"][io]), shape)
    values = {"calls": np.ones(len(key)), "bytes": np.maximum(ops["result"][io], 0).astype(np.float64),
              "seconds": ops["duration_s"][io], "lost_low_s": per_op["lost_s"][io], "lost_high_s": per_op["lost_s"][io]}
    cells, summed = _grouped(key, values, int(np.prod(shape)))
    process, file, layer, direction = np.unravel_index(cells, shape)
    totals, tio = job.totals, per_total["is_io"]
    return {"process": np.concatenate([process, totals["process"][tio]]).astype(np.int64),
            "file": np.concatenate([file, totals["file"][tio]]).astype(np.int64),
            "layer": np.concatenate([layer, totals["layer"][tio]]).astype(np.int64),
            "direction": np.concatenate([direction, totals["direction"][tio]]).astype(np.int64),
            "estimated": np.concatenate([np.zeros(len(cells), bool), np.ones(int(tio.sum()), bool)]),
            "calls": np.concatenate([summed["calls"], totals["ops"][tio].astype(np.float64)]),
            "bytes": np.concatenate([summed["bytes"], totals["bytes"][tio].astype(np.float64)]),
            "seconds": np.concatenate([summed["seconds"], totals["seconds"][tio]]),
            "lost_low_s": np.concatenate([summed["lost_low_s"], per_total["lost_low_s"][tio]]),
            "lost_high_s": np.concatenate([summed["lost_high_s"], per_total["lost_high_s"][tio]])}


def _grouped(key, values, cells):
    """The distinct keys, in order, and the sum of each value over each key's entries."""
    present, inverse = groups_of(key, cells)
    return present, {name: np.bincount(inverse, column, len(present)) for name, column in values.items()}


def groups_of(key, cells):
    """(the distinct keys in order, each entry's position among them) of non-negative integer
    keys below cells: by counting where cells are few (DENSE_KEYS), else by sorting."""
    if cells <= DENSE_KEYS:
        seen = np.bincount(key, minlength=cells) > 0
        return np.flatnonzero(seen), (np.cumsum(seen) - 1)[key]
    present, inverse = np.unique(key, return_inverse=True)
    return present, inverse.reshape(-1)


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
