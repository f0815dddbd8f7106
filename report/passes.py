"""Per-op passes: the assessment's work on the ops known one by one, fed chunk by chunk.

A big job's ops are more than memory holds (10^8 ops of a 4,096-rank job's traces), so nothing
that reads them one by one needs them all at once. Each per-op computation is a pass, an object
with three methods, in the manner of a reducer:

    add(chunk)     takes in the next chunk (a Chunk: rows of Job.ops with their per-op classes,
                   in Job.ops order: by process, then start time);
    merge(later)   takes in a pass of its kind that was fed the ops after this one's (the next
                   processes' ops): passes of one job can run side by side this way;
    result()       the finished value.

A pass holds what it reports (sums per file, process or class, histograms, a bounded sample) and
what an order-dependent pass carries from one chunk to the next (the previous op per process
and file), never a row per op. A small job is one chunk: small and big jobs take the same code
and give the same numbers (tests/test_passes.py assesses jobs in chunks of 1,000 ops and in one).
"""
import dataclasses
import functools

import numpy as np

from ioassess.inputs.job import op_chunks
from ioassess.parallel import results_in_parallel

# Ops per chunk: a chunk's columns and per-op classes take about 200 bytes an op.
CHUNK_OPS = 1 << 19


@dataclasses.dataclass
class Chunk:
    ops: dict       # column name -> rows of Job.ops (every column a loader gave)
    per_op: dict    # name -> the same rows of the per-op classes (report/classify.py)
    first: int      # the index in Job.ops of the chunk's first row

    def __len__(self):
        return len(self.ops["size"])

    @property
    def index(self):
        """The index in Job.ops of each row."""
        return np.arange(self.first, self.first + len(self), dtype=np.int64)

    @functools.cached_property
    def sample_keys(self):
        """sample_keys of each row's index, made once for every Sample the chunk is offered to."""
        return sample_keys(self.index)


def chunks_of(job, size=CHUNK_OPS, processes=None):
    """The job's ops in chunks (inputs.job.op_chunks), without per-op classes yet."""
    for ops, first in op_chunks(job, size, processes):
        yield Chunk(ops, {}, first)


def run_passes(passes, chunks):
    """Feeds every chunk to every pass (a dict of passes), in order; returns the passes."""
    for chunk in chunks:
        for one in passes.values():
            one.add(chunk)
    return passes


def merge_passes(groups):
    """One dict of passes from the dicts of passes fed consecutive runs of the ops, in order
    (taken one by one: an iterator of them holds one at a time)."""
    groups = iter(groups)
    first = next(groups)
    for group in groups:
        for name, one in first.items():
            one.merge(group[name])
    return first


def run_in_parallel(work, runs, workers, done=None):
    """work(run) -> a dict of passes, for each run, merged in order; the runs side by side
    (ioassess/parallel.py) with more than one worker."""
    return merge_passes(results_in_parallel(work, runs, workers, done))


# Keys up to this many cells are grouped by counting (no sort); more, by sorting the keys.
DENSE_KEYS = 1 << 20


class Sums:
    """Sums of values per integer key below `cells`: the distinct keys met, in order, and one sum
    of each value per key. A job has few distinct keys, though they may come from a large space
    (process x file x layer x direction)."""

    def __init__(self, names, cells):
        self.cells = cells
        self.keys = np.zeros(0, np.int64)
        self.sums = {name: np.zeros(0) for name in names}

    def add(self, keys, values):
        """Adds values (name -> one value per key, or one for all) under keys."""
        present, inverse = groups_of(np.asarray(keys, np.int64), self.cells)
        self._merge(present, {name: _summed(inverse, values[name], len(present)) for name in self.sums})

    def merge(self, later):
        self._merge(later.keys, later.sums)

    def _merge(self, keys, sums):
        if not len(self.keys):
            self.keys, self.sums = keys, sums
            return
        present, inverse = np.unique(np.concatenate([self.keys, keys]), return_inverse=True)
        inverse = inverse.reshape(-1)
        self.keys = present
        self.sums = {name: np.bincount(inverse, np.concatenate([self.sums[name], sums[name]]), len(present))
                     for name in self.sums}

    def dense(self):
        """name -> per key 0 … cells-1, its sum (0 where no value came)."""
        out = {}
        for name, column in self.sums.items():
            out[name] = np.zeros(self.cells)
            out[name][self.keys] = column
        return out


def _summed(group, values, groups):
    """Per group, the sum of its entries' values (one per entry, or one for all)."""
    if np.ndim(values) == 0:
        return np.bincount(group, minlength=groups) * float(values)
    if groups == 1:   # one group: a plain sum is faster than counting
        return np.array([np.sum(values, dtype=np.float64)])
    return np.bincount(group, values, groups)


def groups_of(key, cells):
    """(the distinct keys in order, each entry's position among them) of non-negative integer
    keys below cells: by counting where cells are few (DENSE_KEYS), else by sorting."""
    if cells <= DENSE_KEYS:
        seen = np.bincount(key, minlength=cells) > 0
        return np.flatnonzero(seen), (np.cumsum(seen) - 1)[key]
    present, inverse = np.unique(key, return_inverse=True)
    return present, inverse.reshape(-1)


def stable_order(keys):
    """The stable order of sorting int64 keys: none where they are in order; a chunk has few
    distinct ones close together (its processes' streams), which sort as ranks among them
    (counted, no sort) by a radix sort of 16 bits; else a sort of the keys."""
    if len(keys):
        if np.all(keys[1:] >= keys[:-1]):
            return np.arange(len(keys))
        low = keys.min()
        span = int(keys.max()) - int(low) + 1
        if span <= DENSE_KEYS:
            distinct, rank = groups_of(keys - low, span)
            if len(distinct) <= 1 << 16:
                return np.argsort(rank.astype(np.uint16), kind="stable")
    return np.argsort(keys, kind="stable")


class Carried:
    """The last value per integer key, carried from chunk to chunk by an order-dependent pass
    (the end of the previous op per process and file, ...): keys in order, one value each."""

    def __init__(self, dtype):
        self.keys = np.zeros(0, np.int64)
        self.values = np.zeros(0, dtype)

    def get(self, keys, default):
        """Each key's value, `default` for keys never set."""
        if not len(self.keys):
            return np.full(len(keys), default, self.values.dtype)
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return np.where(self.keys[at] == keys, self.values[at], default).astype(self.values.dtype)

    def set(self, keys, values):
        """Sets each (distinct) key's value."""
        self._set(np.asarray(keys, np.int64), np.asarray(values, self.values.dtype))

    def previous(self, keys, values, default):
        """Per row of a chunk (keys sorted, each key's rows in order) the value of the row before
        it of the same key: for a key's first row, the value carried from earlier chunks
        (`default` for a key never met); carries each key's last value on."""
        first = run_starts(keys)
        before = np.empty(len(keys), self.values.dtype)
        before[1:] = values[:-1]
        before[first] = self.get(keys[first], default)
        last = run_ends(keys)
        self.set(keys[last], values[last])
        return before

    def merge(self, later):
        self._set(later.keys, later.values)

    def _set(self, keys, values):
        keys = np.concatenate([self.keys, keys])
        values = np.concatenate([self.values, values])
        order = np.argsort(keys, kind="stable")
        keys, values = keys[order], values[order]
        last = run_ends(keys)     # a key set again: its newest value
        self.keys, self.values = keys[last], values[last]


def run_starts(keys):
    """Where each run of equal keys starts (a mask)."""
    return np.r_[True, keys[1:] != keys[:-1]] if len(keys) else np.zeros(0, bool)


def run_ends(keys):
    """Where each run of equal keys ends (a mask)."""
    return np.r_[keys[1:] != keys[:-1], True] if len(keys) else np.zeros(0, bool)


def sample_keys(index):
    """A key per op index (splitmix64 of it): the ops of the smallest keys are a uniform sample
    of the ops, whatever chunks they came in."""
    z = np.asarray(index, np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


class Sample:
    """A uniform sample of at most `limit` ops: those of the smallest sample_keys among the ops
    offered; every op offered when there are at most `limit`. values() gives the sampled ops'
    columns in Job.ops order, so a job of at most `limit` ops gives all its ops as they are."""

    def __init__(self, limit, dtypes):
        self.limit = limit
        self.offered = 0
        self.bound = None    # once the sample is full: keys from this one up cannot get in
        # what got in, (keys, Job.ops indices, columns) per offer, joined when cut: an offer
        # costs what it adds, not the whole sample
        self.parts = [(np.zeros(0, np.uint64), np.zeros(0, np.int64),
                       {name: np.zeros(0, dtype) for name, dtype in dtypes.items()})]
        self.held = 0

    def add(self, chunk, rows, columns):
        """Offers the chunk's ops at rows (a mask or row numbers) with their columns (name -> the
        chunk's whole column, taken only at the rows that get in)."""
        if rows.dtype == bool:
            self.offered += int(np.count_nonzero(rows))
            rows = np.flatnonzero(rows if self.bound is None else rows & (chunk.sample_keys < self.bound))
        else:
            self.offered += len(rows)
            if self.bound is not None:
                rows = rows[chunk.sample_keys[rows] < self.bound]
        self._keep([(chunk.sample_keys[rows], chunk.first + rows,
                     {name: column[rows] for name, column in columns.items()})])

    def merge(self, later):
        self.offered += later.offered
        self._keep(later.parts)
        self._cut()

    def _keep(self, parts):
        self.parts += parts
        self.held += sum(len(keys) for keys, _, _ in parts)
        if self.held >= self.limit + self.limit // 4:   # cut now and then, not at every chunk
            self._cut()

    def _cut(self):
        """Keeps the ops of the `limit` smallest keys, in one part."""
        keys = np.concatenate([keys for keys, _, _ in self.parts])
        index = np.concatenate([index for _, index, _ in self.parts])
        columns = {name: np.concatenate([part[name] for _, _, part in self.parts]) for name in self.parts[0][2]}
        if len(keys) > self.limit:
            self.bound = np.partition(keys, self.limit - 1)[self.limit - 1]
            kept = keys <= self.bound    # the keys are distinct: `limit` of them, in the order they came
            keys, index = keys[kept], index[kept]
            columns = {name: column[kept] for name, column in columns.items()}
        self.parts, self.held = [(keys, index, columns)], len(keys)

    def __getstate__(self):
        """What is sent to another process (a worker's sample): cut to `limit` first."""
        self._cut()
        return self.__dict__

    def values(self):
        """name -> the sampled ops' column, in Job.ops order."""
        self._cut()
        _, index, columns = self.parts[0]
        if np.all(index[1:] > index[:-1]):   # as offered, in Job.ops order
            return dict(columns)
        order = np.argsort(index, kind="stable")
        return {name: column[order] for name, column in columns.items()}


